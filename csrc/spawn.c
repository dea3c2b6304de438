/* The native spawn's runner side; see spawn.h for the contract shared with
 * processkit/engine/spawn.py, and spawn_child.c for the child's side.
 *
 * Why clone3 with CLONE_INTO_CGROUP: a process that writes itself into cgroup.procs waits for
 * an RCU grace period (about 10 ms measured), the largest single cost of a short run, while a
 * child born in the group never migrates.
 *
 * Why the child shares the runner's memory (CLONE_VM on a stack of its own): a copy-on-write
 * child costs the runner a copy of its page tables and, after, a write fault on every page it
 * touches again; measured, that was most of a spawn (bench/spawn_cost.py, bench/README.md).
 *
 * Why no CLONE_VFORK: it held the spawning thread from the clone until the child's execve,
 * about half of the runner service's time per run under eight callers (bench/README.md, issue
 * 49), while the child's steps need nothing of that thread. pk_spawn_begin returns once the
 * clone has; the runner's loop waits for the exec's report (pk_spawn_report_fd: the report
 * pipe, whose write end the child's execve closes), and pk_spawn_finish reads it
 * (spawn_report.c). So the child and the runner run at once, and every line of the
 * shared-memory child, in the runner's memory, must respect (spawn_child.c):
 * - It writes only its own stack, and the runner's result->start_ns and join_ns, which the
 *   runner reads only once the child has exec'd or exited. It reads the pending spawn (heap),
 *   the request and its strings: the caller changes and frees none of them until
 *   pk_spawn_finish, and the stack is kept until then too (spawn_report.c: until the child is
 *   known to be off it).
 * - It makes raw system calls only: a libc wrapper's failure writes errno, which with no
 *   CLONE_SETTLS is the spawning thread's own, read by the runner at any moment now.
 * - No handler of the runner's may run in it: the caller blocks every signal across the clone,
 *   the child (which has its own copy of the handler table and mask: no CLONE_SIGHAND) is born
 *   with the caught ones back at SIG_DFL (CLONE_CLEAR_SIGHAND: one flag where a loop over the
 *   64 signals cost the child about 12 us; before Linux 5.5 it resets them itself) and only
 *   then unblocks. The runner's mask is restored as soon as the clone returns.
 * - PR_SET_PDEATHSIG follows the spawning thread, as with fork: a child spawned from a thread
 *   that ends gets SIGKILL then.
 * Without clone3 (an older kernel, a seccomp filter) the same child comes from glibc's clone(),
 * the copy-on-write one from the raw clone system call (spawn_cow.c).
 *
 * Why a child whose groups hold a memory limit is the copy-on-write one (request->own_memory,
 * which engine/spawn.py sets for a run with a memory cap, v2 memory.max or v1
 * memory.limit_in_bytes): the kernel's OOM kill ends, with its victim, every process sharing
 * the victim's memory (mm/oom_kill.c, __oom_kill_process; neither oom_score_adj, which the
 * kernel keeps equal across a memory's users, nor anything else spares them). A page faulted in
 * is charged to the memory cgroup of its memory's owner (get_mem_cgroup_from_mm: mm->owner, the
 * runner, which made that memory), so the shared child's own writes before its exec (its stack,
 * the runner's pages) count in the runner's group, never the capped one; but the kernel memory
 * it allocates is charged to its own group (the capped one), and so are the pages of the new
 * memory its execve builds (owned by the child from its creation): its page tables, the
 * argument pages. A cap below what an exec needs (--max-memory 4k) OOMs the group there, while
 * the child still shares the runner's memory: the victim is the child, and the runner dies
 * with it (and with a service or a batch, every run it carried). The copy-on-write
 * child has memory of its own from the clone (owned by it), so the kill ends it alone, as a
 * Popen child's. The choice is per spawn: one process carries capped and uncapped runs side by
 * side, and the uncapped ones keep the cheap child. A limit on a group that holds the runner
 * too (its own, where runs are made by default, or any above it) does not ask for it: the OOM
 * killer scores the shared child exactly as the runner, so it picks that memory only where it
 * would pick the runner anyway; nor does an uncapped run's v1 memory group (accounting only, no
 * limit). A limited v2 parent placed apart from the runner does (engine/spawn_memory.py).
 *
 * Why only on Linux 5.16 and later (the release uname gives, read once): before it, a child that
 * died of a core-dumping signal killed every process sharing its memory (the coredump's
 * zap_threads walked all of the memory's users), so a shared-memory child killed before its
 * exec (a seccomp filter's SIGSYS, a SIGSEGV on a bad request) took the runner with it. There,
 * and where it is not built (another architecture than x86-64, whose clone3 call here is
 * assembly, or PK_SPAWN_COW defined, as .ci/sanitize's ASan build does: ASan cannot follow a
 * child on a stack it did not allocate), the child is the copy-on-write clone3 or clone
 * (spawn_cow.c), and pk_spawn_shared_memory() says so: engine/spawn.py then spawns through
 * Popen unless PROCESSKIT_SPAWN=native asks for this child. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "spawn_child.h"

#if defined(__x86_64__) && defined(SYS_clone3) && !defined(PK_SPAWN_COW)
#define PK_SHARED_BUILT     1
#define PK_CHILD_STACK_SIZE (64 * 1024)
#define PK_GUARD_SIZE       4096 /* the x86-64 page */

static int child_entry(void *child)
{
    pk_run_child(child);
}

/* A few stacks kept from spawn to spawn, one per spawn in flight (a host's runs, the API's
 * threads); an atomic exchange per slot lets concurrent spawns each take their own. The
 * lowest page is the guard an overflow faults on. */
#define PK_KEPT_STACKS 8
static char *kept_stacks[PK_KEPT_STACKS];

static int take_shared_stack(struct pk_child *child)
{
    char *base = NULL;
    int slot;
    for (slot = 0; slot < PK_KEPT_STACKS && !base; slot++)
        base = __atomic_exchange_n(&kept_stacks[slot], NULL, __ATOMIC_ACQ_REL);
    if (!base) {
        base = mmap(NULL, PK_GUARD_SIZE + PK_CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED)
            return -1;
        if (mprotect(base, PK_GUARD_SIZE, PROT_NONE) != 0) {
            munmap(base, PK_GUARD_SIZE + PK_CHILD_STACK_SIZE);
            return -1;
        }
    }
    child->stack = base + PK_GUARD_SIZE + PK_CHILD_STACK_SIZE;
    return 0;
}

static void give_back_shared_stack(struct pk_child *child)
{
    char *base = (char *)child->stack - PK_CHILD_STACK_SIZE - PK_GUARD_SIZE;
    int slot;
    for (slot = 0; slot < PK_KEPT_STACKS && base; slot++)
        base = __atomic_exchange_n(&kept_stacks[slot], base, __ATOMIC_ACQ_REL);
    if (base)
        munmap(base, PK_GUARD_SIZE + PK_CHILD_STACK_SIZE);
}

/* clone3 whose child calls entry(arg) on args->stack; the runner gets the pid or -errno. glibc
 * exports no clone3, and a child on another stack cannot return through a C frame. The
 * system call keeps every register but rax, rcx and r11, so entry (rdx) and arg (rbx) survive
 * in it; they are pinned so that clearing rbp cannot hit either. */
static long clone3_call(struct pk_clone_args *args, int (*entry)(void *), void *arg)
{
    long result = SYS_clone3;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xorl %%ebp, %%ebp\n\t" /* the outermost frame */
                     "andq $-16, %%rsp\n\t"
                     "movq %%rbx, %%rdi\n\t"
                     "callq *%%rdx\n\t"
                     "ud2\n" /* entry never returns */
                     "1:"
                     : "+a"(result)
                     : "D"(args), "S"(sizeof *args), "d"(entry), "b"(arg)
                     : "rcx", "r11", "memory", "cc");
    return result;
}

/* A clone3 child sharing the runner's memory on its own stack, which also returns a pidfd and
 * has the kernel clear *aboard as it leaves that memory (spawn_report.c); -1/ENOSYS where the
 * kernel (or a seccomp filter, as container runtimes install) has none. */
static pid_t shared_clone3(uint64_t flags, int cgroup_fd, int *pidfd, int *aboard, struct pk_child *child)
{
    struct pk_clone_args args;
    long pid;
    pk_fill_clone_args(&args, flags | CLONE_VM | CLONE_CHILD_CLEARTID, cgroup_fd, pidfd);
    args.child_tid = (uint64_t)(uintptr_t)aboard;
    args.stack = (uint64_t)(uintptr_t)child->stack - PK_CHILD_STACK_SIZE;
    args.stack_size = PK_CHILD_STACK_SIZE;
    pid = clone3_call(&args, child_entry, child);
    if (pid < 0) {
        errno = (int)-pid;
        return -1;
    }
    return (pid_t)pid;
}

/* No clone3: glibc's clone() shares the memory the same way, with a pidfd where the kernel
 * takes CLONE_PIDFD from clone() (5.2 on). */
static pid_t shared_clone(struct pk_child *child, int *pidfd, int *aboard)
{
    const int flags = CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD;
    pid_t pid = clone(child_entry, child->stack, flags | CLONE_PIDFD, child, pidfd, NULL, aboard);
    if (pid >= 0 || errno != EINVAL)
        return pid;
    *pidfd = -1;
    return clone(child_entry, child->stack, flags, child, NULL, NULL, aboard);
}

#else
#define PK_SHARED_BUILT                                       0
/* Never reached: pk_spawn_shared_memory() is 0, so no spawn is shared and no stack is taken. */
#define take_shared_stack(child)                              (-1)
#define give_back_shared_stack(child)                         ((void)0)
#define shared_clone3(flags, cgroup_fd, pidfd, aboard, child) ((void)(aboard), errno = ENOSYS, -1)
#define shared_clone(child, pidfd, aboard)                    ((void)(aboard), errno = ENOSYS, -1)
#endif

/* Whether spawns take the shared-memory child: -1 until pk_spawn_shared_memory decides. */
static int shared_mode = -1;

/* Whether the running kernel's release is major.minor or later (0 when uname cannot say). */
static int kernel_at_least(long major, long minor)
{
    struct utsname name;
    long got_major, got_minor;
    char *end;
    if (uname(&name) != 0)
        return 0;
    got_major = strtol(name.release, &end, 10);
    if (*end != '.')
        return 0;
    got_minor = strtol(end + 1, NULL, 10);
    return got_major > major || (got_major == major && got_minor >= minor);
}

int pk_spawn_shared_memory(void)
{
    int mode = __atomic_load_n(&shared_mode, __ATOMIC_RELAXED);
    if (mode < 0) { /* threads deciding at once all find the same */
        mode = PK_SHARED_BUILT && kernel_at_least(5, 16);
        __atomic_store_n(&shared_mode, mode, __ATOMIC_RELAXED);
    }
    return mode;
}

/* Whether this spawn's child shares the runner's memory: where that child is built and taken,
 * unless the request's groups hold a memory limit (own_memory: the facts above say why). */
static int shares_memory(const pk_spawn_request *request)
{
    return pk_spawn_shared_memory() && !request->own_memory;
}

/* The shared-memory child's stack; the copy-on-write child keeps the one it was forked on. */
static int take_stack(struct pk_child *child)
{
    return child->shared ? take_shared_stack(child) : 0;
}

/* Called once the child has exec'd or exited (or was never cloned): it left the stack. */
void pk_give_back_stack(struct pk_child *child)
{
    if (child->shared)
        give_back_shared_stack(child);
}

/* The shared-memory child, aboard its word, or the copy-on-write one (child->shared says). */
static pid_t clone3_child(uint64_t flags, int cgroup_fd, int *pidfd, int *aboard, struct pk_child *child)
{
    if (child->shared)
        return shared_clone3(flags, cgroup_fd, pidfd, aboard, child);
    return pk_cow_clone3(flags, cgroup_fd, pidfd, child);
}

/* No clone3: the same child from the clone system call (glibc's wrapper for the shared one, a
 * raw call for the copy-on-write one). */
static pid_t clone_child(struct pk_child *child, int *pidfd, int *aboard)
{
    if (child->shared)
        return shared_clone(child, pidfd, aboard);
    return pk_cow_clone(child, pidfd);
}

/* CLONE_CLEAR_SIGHAND (Linux 5.5), until a kernel refuses it: then the child resets the
 * handlers itself (spawn_child.c). */
static int clear_sighand = 1;

/* clone3_child, its child born with the caught signals at SIG_DFL where the kernel can. */
static pid_t clone3_clearing(uint64_t flags, int cgroup_fd, int *pidfd, int *aboard, struct pk_child *child)
{
    pid_t pid;
    if (__atomic_load_n(&clear_sighand, __ATOMIC_RELAXED)) {
        child->handlers_cleared = 1;
        pid = clone3_child(flags | PK_CLONE_CLEAR_SIGHAND, cgroup_fd, pidfd, aboard, child);
        if (pid >= 0 || errno != EINVAL)
            return pid;
        child->handlers_cleared = 0;
        pid = clone3_child(flags, cgroup_fd, pidfd, aboard, child);
        if (pid >= 0) /* the flag was what the kernel refused */
            __atomic_store_n(&clear_sighand, 0, __ATOMIC_RELAXED);
        return pid;
    }
    child->handlers_cleared = 0;
    return clone3_child(flags, cgroup_fd, pidfd, aboard, child);
}

/* CLONE_INTO_CGROUP (Linux 5.7), until a kernel refuses it where a plain clone3 then succeeds:
 * 5.3 to 5.6 with E2BIG (a struct longer than they know, its cgroup field not zero), EINVAL
 * only from a sandbox; from then on the child joins by write at once, not after two clone3
 * calls refused on every spawn. */
static int into_cgroup = 1;

/* clone3 (Linux 5.3), until it is refused with ENOSYS (an older kernel, or a seccomp filter as
 * container runtimes install): from then on every spawn takes the clone system call at once. */
static int have_clone3 = 1;

/* Into the cgroup when the kernel allows it (joined), else a plain clone3, else the fallback.
 * Any refusal of CLONE_INTO_CGROUP (older kernel, EBUSY, a pids cap that counts the newborn)
 * falls back to joining by write in the child, which then reports the real error like the
 * Popen path. aboard: the shared-memory child's word (unused for the copy-on-write child).
 * *pidfd: -1 unless the clone that made the child wrote one (clone3's always; the clone
 * system call's from Linux 5.2, and each fallback clears it before a call that cannot). */
static pid_t start_child(struct pk_child *child, int *pidfd, int *aboard)
{
    const pk_spawn_request *request = child->request;
    int refused = 0; /* the errno of CLONE_INTO_CGROUP's refusal */
    pid_t pid;
    *pidfd = -1;
    child->joined = 0;
    if (__atomic_load_n(&have_clone3, __ATOMIC_RELAXED)) {
        if (request->cgroup_fd >= 0 && __atomic_load_n(&into_cgroup, __ATOMIC_RELAXED)) {
            child->joined = 1;
            pid = clone3_clearing(PK_CLONE_INTO_CGROUP, request->cgroup_fd, pidfd, aboard, child);
            if (pid >= 0)
                return pid;
            refused = errno;
            child->joined = 0;
        }
        if (refused != ENOSYS) {
            pid = clone3_clearing(0, -1, pidfd, aboard, child);
            /* the flag was what the kernel refused: 5.3-5.6 know a shorter struct and refuse its
             * non-zero cgroup field, past their size, with E2BIG; EINVAL comes only from a
             * kernel before 5.7 given a zero cgroup field, or from a sandbox */
            if (pid >= 0 && (refused == EINVAL || refused == E2BIG))
                __atomic_store_n(&into_cgroup, 0, __ATOMIC_RELAXED);
            if (pid >= 0 || errno != ENOSYS)
                return pid;
        }
        __atomic_store_n(&have_clone3, 0, __ATOMIC_RELAXED);
    }
    child->handlers_cleared = 0;
    return clone_child(child, pidfd, aboard);
}

static void clear(pk_spawn_result *result)
{
    result->pid = -1;
    result->pidfd = -1;
    result->stage = PK_SPAWN_OK;
    result->error = 0;
    result->start_ns = 0;
    result->join_ns = 0;
}

pk_spawn_pending *pk_spawn_begin(const pk_spawn_request *request, pk_spawn_result *result)
{
    int report[2], pidfd, error;
    pk_spawn_pending *pending = calloc(1, sizeof *pending);
    sigset_t all, previous;
    pid_t pid;

    clear(result);
    if (pending)
        pending->child.shared = shares_memory(request);
    if (!pending || take_stack(&pending->child) != 0) {
        result->stage = PK_SPAWN_CLONE;
        result->error = ENOMEM;
        free(pending);
        return NULL;
    }
    /* The report pipe (spawn_report.c): non-blocking for the runner's look; the child's one
     * report into the empty pipe never waits. */
    if (pipe2(report, O_CLOEXEC | O_NONBLOCK) != 0) {
        result->stage = PK_SPAWN_CLONE;
        result->error = errno;
        pk_give_back_stack(&pending->child);
        free(pending);
        return NULL;
    }
    pending->child.request = request;
    pending->child.runner = getpid();
    pending->child.report_fd = report[1];
    pending->child.report_read_fd = report[0];
    pending->child.start_ns = &result->start_ns;
    pending->child.join_ns = &result->join_ns;
    pending->aboard = pending->child.shared; /* the shared child's word, 1 until the kernel clears it */
    if (!pending->child.shared)
        pk_cow_share_readings(&pending->child);
    /* No handler may run in the child before it has reset them: block everything across the
     * clone; the child unblocks its own mask, the runner its own at once. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &previous);
    result->start_ns = pk_monotonic_ns();
    pid = start_child(&pending->child, &pidfd, &pending->aboard);
    error = errno;
    sigprocmask(SIG_SETMASK, &previous, NULL);
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        pk_give_back_stack(&pending->child);
        pk_cow_take_readings(&pending->child, result);
        free(pending);
        result->stage = PK_SPAWN_CLONE;
        result->error = error;
        result->start_ns = 0; /* no child: not the runner's reading before the clone (spawn.h) */
        return NULL;
    }
    pending->report_fd = report[0];
    pending->pid = pid;
    pending->pidfd = pidfd;
    result->pid = pid;
    result->pidfd = pidfd;
    return pending;
}
