/* The native spawn; see spawn.h for the contract shared with processkit/engine/spawn.py.
 *
 * Why clone3 with CLONE_INTO_CGROUP: a process that writes itself into cgroup.procs waits for
 * an RCU grace period (about 10 ms measured), the largest single cost of a short run, while a
 * child born in the group never migrates.
 *
 * Why vfork-style (CLONE_VM | CLONE_VFORK on a stack of its own): a copy-on-write child costs
 * the runner a copy of its page tables and, after, a write fault on every page it touches
 * again; measured, that was most of a spawn (bench/spawn_cost.py, bench/README.md). A child
 * sharing the memory copies nothing, and the runner's thread sleeps until its execve or exit.
 *
 * Facts about the shared-memory child, which every line it runs must respect:
 * - It writes only its own stack (locals here, on the mapping given to clone3), errno, and the
 *   runner's result->start_ns and join_ns (the runner's thread is suspended until the execve, so
 *   nothing races).
 *   errno is per-thread TLS and, with no CLONE_SETTLS, the child's TLS is the calling thread's:
 *   the child's failing calls write the runner's errno. Harmless: that thread is suspended
 *   until the child has exec'd or exited and reads errno only after calls of its own.
 * - It calls only thin system-call wrappers (no allocator, no stdio, no lock): the runner's
 *   other threads (the pump's hash thread) go on running in that memory meanwhile.
 * - No handler of the runner's may run in it: the caller blocks every signal across the clone,
 *   the child (which has its own copy of the handler table: no CLONE_SIGHAND) puts caught
 *   ones back to SIG_DFL and only then unblocks. A signal sent to the runner meanwhile stays
 *   pending there and is handled once the mask is restored; glibc's posix_spawn does the same.
 * - CLONE_VFORK suspends only the calling thread, until the child's execve (or exit) releases
 *   the memory, so the stack can be reused by the next spawn at once.
 * - PR_SET_PDEATHSIG follows the spawning thread, as with fork: a child spawned from a thread
 *   that ends gets SIGKILL then.
 * Without clone3 (a seccomp filter) the same child comes from glibc's clone(), with no pidfd.
 * Not built (another architecture than x86-64, whose clone3 call here is assembly, or
 * PK_SPAWN_COW defined, as .ci/sanitize's ASan build does: ASan cannot follow a child on a
 * stack it did not allocate), the child is a copy-on-write clone3 or fork, as before, and
 * pk_spawn_shared_memory() says so: engine/spawn.py then spawns through Popen unless
 * PROCESSKIT_SPAWN=native asks for this child. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#define PK_CLONE_INTO_CGROUP 0x200000000ULL
#define PK_FALLBACK_FD_LIMIT 65536 /* close() loop bound when close_range and the rlimit fail */

/* struct clone_args up to its cgroup field (CLONE_ARGS_SIZE_VER2), spelled out so the build
 * does not depend on the vintage of the kernel headers. */
struct pk_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size, cgroup;
};

/* What the child reads of the runner's, set before each clone attempt. */
struct pk_child {
    const pk_spawn_request *request;
    pid_t runner;
    int joined; /* born in request->cgroup_fd's group: no write to its cgroup.procs */
    int report_fd;
    void *stack;         /* the top of the child's own stack (shared memory only) */
    long long *start_ns; /* the runner's result->start_ns and join_ns: a shared-memory child's */
    long long *join_ns;  /* writes reach them */
};

static long long monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the vDSO: no lock, no allocation */
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

__attribute__((noreturn)) static void run_child(const struct pk_child *child);

#if defined(__x86_64__) && defined(SYS_clone3) && !defined(PK_SPAWN_COW)
#define PK_CHILD_STACK_SIZE (64 * 1024)
#define PK_GUARD_SIZE       4096 /* the x86-64 page */

static int child_entry(void *child)
{
    run_child(child);
}

/* One stack kept from spawn to spawn; an atomic exchange lets concurrent spawns (the API's
 * threads) each take their own. The lowest page is the guard an overflow faults on. */
static char *cached_stack;

static int take_stack(struct pk_child *child)
{
    char *base = __atomic_exchange_n(&cached_stack, NULL, __ATOMIC_ACQ_REL);
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

/* Called once the child has exec'd or exited: CLONE_VFORK held the runner until then. */
static void give_back_stack(struct pk_child *child)
{
    char *base = (char *)child->stack - PK_CHILD_STACK_SIZE - PK_GUARD_SIZE;
    void *other = __atomic_exchange_n(&cached_stack, base, __ATOMIC_ACQ_REL);
    if (other)
        munmap(other, PK_GUARD_SIZE + PK_CHILD_STACK_SIZE);
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

/* A clone3 child sharing the runner's memory on its own stack, which also returns a pidfd;
 * -1/ENOSYS where the kernel (or a seccomp filter, as container runtimes install) has none. */
static pid_t clone3_child(uint64_t flags, int cgroup_fd, int *pidfd, struct pk_child *child)
{
    struct pk_clone_args args;
    long pid;
    memset(&args, 0, sizeof args);
    args.flags = flags | CLONE_PIDFD | CLONE_VM | CLONE_VFORK;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    args.stack = (uint64_t)(uintptr_t)child->stack - PK_CHILD_STACK_SIZE;
    args.stack_size = PK_CHILD_STACK_SIZE;
    if (flags & PK_CLONE_INTO_CGROUP)
        args.cgroup = (uint64_t)cgroup_fd;
    pid = clone3_call(&args, child_entry, child);
    if (pid < 0) {
        errno = (int)-pid;
        return -1;
    }
    return (pid_t)pid;
}

/* No clone3: glibc's clone() shares the memory the same way, with no pidfd. */
static pid_t fork_child(struct pk_child *child)
{
    return clone(child_entry, child->stack, CLONE_VM | CLONE_VFORK | SIGCHLD, child);
}

int pk_spawn_shared_memory(void)
{
    return 1;
}

#else
/* The copy-on-write child: what a build for another architecture gets, and what engine/spawn.py
 * takes there only when PROCESSKIT_SPAWN=native asks for it (CI runs it on x86-64 only, in
 * .ci/sanitize's ASan build); by default such a build spawns through Popen. */
int pk_spawn_shared_memory(void)
{
    return 0;
}

static int take_stack(struct pk_child *child)
{
    child->stack = NULL; /* the copy-on-write child keeps the stack it was forked on */
    return 0;
}

static void give_back_stack(struct pk_child *child)
{
    (void)child;
}

/* A fork-like clone3 (same stack, copied memory) that also returns a pidfd; -1/ENOSYS where the
 * build or the kernel (or a seccomp filter, as container runtimes install) has no clone3. */
static pid_t clone3_child(uint64_t flags, int cgroup_fd, int *pidfd, struct pk_child *child)
{
#ifdef SYS_clone3
    struct pk_clone_args args;
    pid_t pid;
    memset(&args, 0, sizeof args);
    args.flags = flags | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    if (flags & PK_CLONE_INTO_CGROUP)
        args.cgroup = (uint64_t)cgroup_fd;
    pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0)
        run_child(child);
    return pid;
#else
    (void)flags;
    (void)cgroup_fd;
    (void)pidfd;
    (void)child;
    errno = ENOSYS;
    return -1;
#endif
}

static pid_t fork_child(struct pk_child *child)
{
    pid_t pid = fork();
    if (pid == 0)
        run_child(child);
    return pid;
}
#endif

/* Into the cgroup when the kernel allows it (joined), else a plain clone3, else the fallback.
 * Any refusal of CLONE_INTO_CGROUP (older kernel, EBUSY, a pids cap that counts the newborn)
 * falls back to joining by write in the child, which then reports the real error like the
 * Popen path. */
static pid_t start_child(struct pk_child *child, int *pidfd)
{
    const pk_spawn_request *request = child->request;
    pid_t pid;
    *pidfd = -1;
    if (request->cgroup_fd >= 0) {
        child->joined = 1;
        pid = clone3_child(PK_CLONE_INTO_CGROUP, request->cgroup_fd, pidfd, child);
        if (pid >= 0)
            return pid;
    }
    child->joined = 0;
    if (request->cgroup_fd < 0 || errno != ENOSYS) {
        pid = clone3_child(0, -1, pidfd, child);
        if (pid >= 0 || errno != ENOSYS)
            return pid;
    }
    *pidfd = -1;
    return fork_child(child);
}

__attribute__((noreturn)) static void child_fail(int report_fd, int stage)
{
    int report[2] = {stage, errno};
    ssize_t ignored = write(report_fd, report, sizeof report);
    (void)ignored;
    _exit(127);
}

static void join(int procs_fd, int report_fd)
{
    ssize_t count = write(procs_fd, "0", 1); /* the kernel reads pid 0 as "myself" */
    if (count != 1) {
        if (count >= 0)
            errno = EIO;
        child_fail(report_fd, PK_SPAWN_JOIN);
    }
}

/* Python ignores SIGPIPE and SIGXFSZ for itself and Popen restores them for its children. */
static int restored_by_popen(int signum)
{
#ifdef SIGXFSZ
    return signum == SIGPIPE || signum == SIGXFSZ;
#else
    return signum == SIGPIPE;
#endif
}

/* A handler of the runner's (Python's C trampoline, which writes to the runner's wakeup fd)
 * must not run in this copy: execve would reset it anyway, so reset it before unblocking.
 * Other ignored signals stay ignored, as they do under Popen. One call per signal both sets
 * SIG_DFL and returns the old disposition; only a signal that was ignored (and is not one Popen
 * restores) takes a second call, to be ignored again. Every signal is blocked here, so the
 * moment at SIG_DFL delivers nothing, and going back to SIG_IGN drops what arrived meanwhile,
 * as the ignored signal would have been dropped on arrival. */
static void reset_signals(void)
{
    struct sigaction standard, previous;
    sigset_t none;
    int signum;
    memset(&standard, 0, sizeof standard);
    standard.sa_handler = SIG_DFL;
    for (signum = 1; signum < NSIG; signum++) {
        if (sigaction(signum, &standard, &previous) != 0)
            continue; /* SIGKILL, SIGSTOP and libc's internal signals */
        if (previous.sa_handler == SIG_IGN && !(previous.sa_flags & SA_SIGINFO) && !restored_by_popen(signum))
            sigaction(signum, &previous, NULL);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* dup2 onto the same number would keep O_CLOEXEC, and one dup may overwrite the next one's
 * source: anything sitting in 0-2 (a runner started with a std fd closed) moves above first.
 * The report pipe too; when it cannot move (no free fd under the limit) the failure is still
 * written through it where it is: a silent exit would read as "started", its 127 as the
 * program's own. */
static void set_stdio(const pk_spawn_request *request, int *report_fd)
{
    int source[3], i, moved;
    if (*report_fd < 3) {
        if ((moved = fcntl(*report_fd, F_DUPFD_CLOEXEC, 3)) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO);
        *report_fd = moved;
    }
    for (i = 0; i < 3; i++) {
        source[i] = request->stdio[i];
        if (source[i] >= 0 && source[i] < 3 && (source[i] = fcntl(source[i], F_DUPFD_CLOEXEC, 3)) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO);
    }
    for (i = 0; i < 3; i++)
        if (source[i] >= 0 && dup2(source[i], i) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO);
}

/* A getdents64 record (struct linux_dirent64, which glibc does not declare). */
struct pk_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Each fd /proc/self/fd lists from 3 up but keep, closed: 0, or -1 when the list cannot be
 * read. The names come through getdents64 into this stack's buffer, with no allocator (what
 * CPython's child does after fork); the directory lists by fd number, so closing as it goes
 * skips nothing. */
static int close_listed(int keep)
{
    char buffer[2048] __attribute__((aligned(8)));
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
    long got, at;
    const char *digit;
    if (dir < 0)
        return -1;
    while ((got = syscall(SYS_getdents64, dir, buffer, sizeof buffer)) > 0)
        for (at = 0; at < got; at += ((struct pk_dirent *)(buffer + at))->reclen) {
            fd = 0;
            for (digit = ((struct pk_dirent *)(buffer + at))->name; *digit >= '0' && *digit <= '9'; digit++)
                fd = fd * 10 + (*digit - '0');
            if (!*digit && fd >= 3 && fd != keep && fd != dir)
                close(fd);
        }
    close(dir);
    return got < 0 ? -1 : 0;
}

/* Every fd from 3 up except the report pipe, which execve closes (O_CLOEXEC). Without
 * close_range (a seccomp filter, a kernel before 5.9) the open ones are listed: a loop up to
 * the soft limit would make a million calls under a batch's raised limit, while CLONE_VFORK
 * holds the runner's thread. The loop is left for a process with no /proc. */
static void close_others(int keep)
{
    struct rlimit limit;
    int fd, end = PK_FALLBACK_FD_LIMIT;
#ifdef SYS_close_range
    if ((keep == 3 || syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) == 0) &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
        return;
#endif
    if (close_listed(keep) == 0)
        return;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (rlim_t)INT_MAX)
        end = (int)limit.rlim_cur;
    for (fd = 3; fd < end; fd++)
        if (fd != keep)
            close(fd);
}

__attribute__((noreturn)) static void run_child(const struct pk_child *child)
{
    const pk_spawn_request *request = child->request;
    int report_fd = child->report_fd;
    int error = ENOENT, first = 0;
    size_t i;
    /* The command's time starts here, not before the clone: a clone into a cgroup waits for the
     * kernel's cgroup_mutex, which other runs' group changes hold for RCU grace periods. */
    *child->start_ns = monotonic_ns();
    /* A session leader leads its process group too; setsid is what lets it take a terminal. */
    if (request->controlling_tty ? setsid() < 0 : setpgid(0, 0) != 0)
        child_fail(report_fd, PK_SPAWN_PGID);
    long long joining = monotonic_ns();
    if (!child->joined && request->cgroup_procs_fd >= 0)
        join(request->cgroup_procs_fd, report_fd);
    for (i = 0; i < request->join_count; i++)
        join(request->join_fds[i], report_fd);
    /* The wait for the cgroup lock (an RCU grace period per write) is the containment's, not the
     * command's: bench takes it out of the timed interval (processkit/benchmark/driver.py). */
    *child->join_ns = monotonic_ns() - joining;
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != child->runner)
        _exit(127); /* the runner died before the death signal was armed: nobody would stop us */
    reset_signals();
    set_stdio(request, &report_fd);
    if (request->controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(report_fd, PK_SPAWN_STDIO);
    close_others(report_fd);
    if (request->nofile_soft) {
        /* Lowering a soft limit is always permitted: this cannot fail for a limit once held. */
        struct rlimit limit;
        if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
            limit.rlim_cur = (rlim_t)request->nofile_soft;
            setrlimit(RLIMIT_NOFILE, &limit);
        }
    }
    if (request->cwd && chdir(request->cwd) != 0)
        child_fail(report_fd, PK_SPAWN_CHDIR);
    for (i = 0; i < request->path_count; i++) {
        execve(request->paths[i], request->argv, request->envp);
        error = errno;
        /* As Popen: the first failure other than "not in this directory" wins, else the last. */
        if (!first && error != ENOENT && error != ENOTDIR)
            first = error;
    }
    errno = first ? first : error;
    child_fail(report_fd, PK_SPAWN_EXEC);
}

void pk_spawn(const pk_spawn_request *request, pk_spawn_result *result)
{
    int report_pipe[2], report[2], pidfd, status, error;
    struct pk_child child;
    sigset_t all, previous;
    pid_t pid;
    ssize_t got;

    result->pid = -1;
    result->pidfd = -1;
    result->stage = PK_SPAWN_OK;
    result->error = 0;
    result->start_ns = 0;
    result->join_ns = 0;
    memset(&child, 0, sizeof child);
    if (take_stack(&child) != 0 || pipe2(report_pipe, O_CLOEXEC) != 0) {
        result->stage = PK_SPAWN_CLONE;
        result->error = errno;
        if (child.stack)
            give_back_stack(&child);
        return;
    }
    child.request = request;
    child.runner = getpid();
    child.report_fd = report_pipe[1];
    child.start_ns = &result->start_ns;
    child.join_ns = &result->join_ns;
    /* No handler may run in the child before reset_signals(): block everything across clone
     * (with a shared-memory child, until its execve or exit). */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &previous);
    result->start_ns = monotonic_ns();
    pid = start_child(&child, &pidfd);
    error = errno;
    sigprocmask(SIG_SETMASK, &previous, NULL);
    give_back_stack(&child);
    close(report_pipe[1]);
    if (pid < 0) {
        close(report_pipe[0]);
        result->stage = PK_SPAWN_CLONE;
        result->error = error;
        return;
    }
    /* The pipe closes at execve: EOF with no report means the program is running. */
    do
        got = read(report_pipe[0], report, sizeof report);
    while (got < 0 && errno == EINTR);
    close(report_pipe[0]);
    if (got != (ssize_t)sizeof report) {
        result->pid = pid;
        result->pidfd = pidfd;
        if (request->linger_ms > 0 && pidfd >= 0) {
            /* Readable once the child has exited; the runner's reaper collects it as always. */
            struct pollfd exited = {.fd = pidfd, .events = POLLIN};
            while (poll(&exited, 1, request->linger_ms) < 0 && errno == EINTR)
                ;
        }
        return;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pidfd >= 0)
        close(pidfd);
    result->stage = report[0];
    result->error = report[1];
}
