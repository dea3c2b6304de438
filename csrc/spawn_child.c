/* The native spawn's child, from its first step to execve (spawn.h says the order).
 *
 * Why every call here is a raw system call (pk_sys), never a libc wrapper: the shared-memory
 * child (spawn.c) runs at the same time as the runner, in its memory, with the spawning
 * thread's TLS (no CLONE_SETTLS). A wrapper that fails writes errno, which is that thread's:
 * the runner, between a failed call of its own and its read of errno, would read the child's.
 * pk_sys returns -errno and writes nothing but the child's own stack. Nor may anything here
 * take a lock or allocate: the runner's threads go on in that memory meanwhile.
 * clock_gettime (the vDSO) reads the kernel's page and writes errno only on failure, which
 * CLOCK_MONOTONIC has none of. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "spawn_child.h"

#define PK_FALLBACK_FD_LIMIT 65536 /* close() loop bound when close_range and the rlimit fail */
#define PK_KERNEL_NSIG       64    /* the kernel's signals; its sigset is 64 bits wide */

#if defined(__x86_64__)
/* The syscall instruction: the result (or -errno) in rax; rcx and r11 are the kernel's. */
static long pk_sys(long number, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}
#else
/* Elsewhere the child is a copy-on-write one (spawn.c), whose errno is its own copy. */
static long pk_sys(long number, long a, long b, long c, long d, long e, long f)
{
    long result = syscall(number, a, b, c, d, e, f);
    return result == -1 ? -errno : result;
}
#endif

#define SYS0(n)             pk_sys(SYS_##n, 0, 0, 0, 0, 0, 0)
#define SYS1(n, a)          pk_sys(SYS_##n, (long)(a), 0, 0, 0, 0, 0)
#define SYS2(n, a, b)       pk_sys(SYS_##n, (long)(a), (long)(b), 0, 0, 0, 0)
#define SYS3(n, a, b, c)    pk_sys(SYS_##n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define SYS4(n, a, b, c, d) pk_sys(SYS_##n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

long long pk_monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the vDSO: no lock, no allocation */
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

__attribute__((noreturn)) static void child_fail(int report_fd, int stage, long error)
{
    int report[2] = {stage, (int)-error};
    SYS3(write, report_fd, report, sizeof report);
    SYS1(exit_group, 127);
    __builtin_unreachable();
}

static void join(int procs_fd, int report_fd)
{
    long count = SYS3(write, procs_fd, "0", 1); /* the kernel reads pid 0 as "myself" */
    if (count != 1)
        child_fail(report_fd, PK_SPAWN_JOIN, count < 0 ? count : -EIO);
}

/* Python ignores SIGPIPE and SIGXFSZ for itself and Popen restores them for its children. */
static int restored_by_popen(int signum)
{
    return signum == SIGPIPE || signum == SIGXFSZ;
}

/* The kernel's struct sigaction (rt_sigaction's), not libc's. */
struct pk_kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

/* A handler of the runner's (Python's C trampoline, which writes to the runner's wakeup fd)
 * must not run in this child: execve would reset it anyway, so reset it before unblocking.
 * Other ignored signals stay ignored, as they do under Popen. A child born with
 * CLONE_CLEAR_SIGHAND (spawn.c) has had the caught ones reset by the kernel, exactly so (a
 * handler to SIG_DFL, SIG_IGN kept); only SIGPIPE and SIGXFSZ are left to it. Otherwise one
 * call per signal both sets SIG_DFL and returns the old disposition; only a signal that was
 * ignored (and is not one Popen restores) takes a second call, to be ignored again. Every
 * signal is blocked here, so the moment at SIG_DFL delivers nothing, and going back to SIG_IGN
 * drops what arrived meanwhile, as the ignored signal would have been dropped on arrival.
 * libc's own signals (32, 33) are reset too: their handlers are the runner's like any other. */
static void reset_signals(int handlers_cleared)
{
    struct pk_kernel_sigaction standard = {.handler = SIG_DFL}, previous;
    uint64_t none = 0;
    int signum;
    if (handlers_cleared) {
        SYS4(rt_sigaction, SIGPIPE, &standard, 0, sizeof(uint64_t));
        SYS4(rt_sigaction, SIGXFSZ, &standard, 0, sizeof(uint64_t));
    } else
        for (signum = 1; signum <= PK_KERNEL_NSIG; signum++) {
            if (SYS4(rt_sigaction, signum, &standard, &previous, sizeof(uint64_t)) != 0)
                continue; /* SIGKILL and SIGSTOP */
            if (previous.handler == SIG_IGN && !(previous.flags & SA_SIGINFO) && !restored_by_popen(signum))
                SYS4(rt_sigaction, signum, &previous, 0, sizeof(uint64_t));
        }
    SYS4(rt_sigprocmask, SIG_SETMASK, &none, 0, sizeof none);
}

/* dup onto the same number would keep O_CLOEXEC, and one dup may overwrite the next one's
 * source: anything sitting in 0-2 (a runner started with a std fd closed) moves above first.
 * The report pipe too (it can sit there only if another thread of the runner closed a std fd
 * between the pipe2 and the clone); when it cannot move (no free fd under the limit) the
 * failure is still written through it where it is: a silent exit would read as "started", its
 * 127 as the program's own. */
static void set_stdio(const pk_spawn_request *request, int *report_fd)
{
    int source[3], i;
    long moved;
    if (*report_fd < 3) {
        if ((moved = SYS3(fcntl, *report_fd, F_DUPFD_CLOEXEC, 3)) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO, moved);
        *report_fd = (int)moved;
    }
    for (i = 0; i < 3; i++) {
        source[i] = request->stdio[i];
        if (source[i] >= 0 && source[i] < 3) {
            if ((moved = SYS3(fcntl, source[i], F_DUPFD_CLOEXEC, 3)) < 0)
                child_fail(*report_fd, PK_SPAWN_STDIO, moved);
            source[i] = (int)moved;
        }
    }
    for (i = 0; i < 3; i++)
        if (source[i] >= 0 && (moved = SYS3(dup3, source[i], i, 0)) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO, moved);
}

/* A getdents64 record (struct linux_dirent64, which glibc does not declare). */
struct pk_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* The smallest fd above `after` the child keeps: the report pipe (keep), which execve closes
 * (O_CLOEXEC), or one of the caller's descriptors (pass_fds, ascending); -1 when none is. */
static int next_kept(const pk_spawn_request *request, int keep, int after)
{
    int next = keep > after ? keep : -1;
    size_t i;
    for (i = 0; i < request->pass_count; i++)
        if (request->pass_fds[i] > after) {
            if (next < 0 || request->pass_fds[i] < next)
                next = request->pass_fds[i];
            break;
        }
    return next;
}

static int kept(const pk_spawn_request *request, int keep, int fd)
{
    return fd >= 3 && next_kept(request, keep, fd - 1) == fd;
}

/* Each fd /proc/self/fd lists from 3 up but the kept ones, closed: 0, or -1 when the list
 * cannot be read. The names come through getdents64 into this stack's buffer, with no
 * allocator (what CPython's child does after fork); the directory lists by fd number, so
 * closing as it goes skips nothing. */
static int close_listed(const pk_spawn_request *request, int keep)
{
    char buffer[2048] __attribute__((aligned(8)));
    long dir = SYS4(openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0), got, at;
    const char *digit;
    int fd;
    if (dir < 0)
        return -1;
    while ((got = SYS3(getdents64, dir, buffer, sizeof buffer)) > 0)
        for (at = 0; at < got; at += ((struct pk_dirent *)(buffer + at))->reclen) {
            fd = 0;
            for (digit = ((struct pk_dirent *)(buffer + at))->name; *digit >= '0' && *digit <= '9'; digit++)
                fd = fd * 10 + (*digit - '0');
            if (!*digit && fd >= 3 && fd != dir && !kept(request, keep, fd))
                SYS1(close, fd);
        }
    SYS1(close, dir);
    return got < 0 ? -1 : 0;
}

/* close_range over each gap between the kept fds: 0, or -1 when one failed (a seccomp filter,
 * a kernel before 5.9). */
static int close_gaps(const pk_spawn_request *request, int keep)
{
#ifdef SYS_close_range
    int from = 3, next;
    for (next = next_kept(request, keep, 2); next >= 0; next = next_kept(request, keep, next)) {
        if (next > from && SYS3(close_range, (unsigned)from, (unsigned)next - 1, 0U) != 0)
            return -1;
        from = next + 1;
    }
    return SYS3(close_range, (unsigned)from, ~0U, 0U) == 0 ? 0 : -1;
#else
    (void)request;
    (void)keep;
    return -1;
#endif
}

/* Every fd from 3 up except the kept ones (next_kept). Without close_range the open ones are
 * listed: a loop up to the soft limit would make a million calls under a batch's raised limit.
 * The loop is left for a process with no /proc. */
static void close_others(const pk_spawn_request *request, int keep)
{
    struct rlimit limit;
    int fd, end = PK_FALLBACK_FD_LIMIT;
    if (close_gaps(request, keep) == 0 || close_listed(request, keep) == 0)
        return;
    if (SYS4(prlimit64, 0, RLIMIT_NOFILE, 0, &limit) == 0 && limit.rlim_cur < (rlim_t)INT_MAX)
        end = (int)limit.rlim_cur;
    for (fd = 3; fd < end; fd++)
        if (!kept(request, keep, fd))
            SYS1(close, fd);
}

/* Leaves the runner's controlling terminal, if it has one: the session stays the runner's (the
 * sweep of a process-group run knows its members by it), and as a group leader that is no session
 * leader the child sends no SIGHUP doing it. No terminal (ENXIO) is the usual case and is fine. */
static void drop_terminal(void)
{
    long fd = SYS4(openat, AT_FDCWD, "/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd >= 0) {
        SYS3(ioctl, fd, TIOCNOTTY, 0);
        SYS1(close, fd);
    }
}

/* Whether the runner is gone, asked once the death signal is armed. A parent in our pid
 * namespace is named by getppid(); one outside it (unshare --pid without --fork, where every
 * child of the runner is in a namespace the runner is not) reads as 0, alive or dead, and an
 * orphan there is handed to a reaper outside too, so 0 again. Then the report pipe says: with
 * the child's own copy of its read end closed, its write end polls POLLERR once no reader is
 * left, and the runner holds its read end until this child has exec'd or exited. The limit,
 * kept: a child the runner starts before this one has exec'd (batch -j>1, the API's service)
 * holds a copy of that read end until its own exec, so a runner that dies before this child's
 * prctl while such a sibling has not exec'd yet is not seen here, and this child runs on,
 * orphaned (inside such a namespace only; the Popen path asks a pidfd of the runner). */
static int runner_gone(const struct pk_child *child)
{
    long parent = SYS0(getppid);
    struct pollfd end = {.fd = child->report_fd, .events = POLLOUT};
    struct timespec now = {0, 0};
    if (parent == child->runner)
        return 0;
    if (parent != 0)
        return 1; /* handed to a reaper in our namespace */
    SYS1(close, child->report_read_fd);
    return SYS4(ppoll, &end, 1, &now, 0) < 0 || (end.revents & POLLERR);
}

void pk_run_child(const struct pk_child *child)
{
    const pk_spawn_request *request = child->request;
    int report_fd = child->report_fd;
    long error = -ENOENT, first = 0, failed;
    size_t i;
    /* A newborn task preempts its parent on a busy CPU, and the runner would sit runnable until
     * this child had exec'd: the very wait the runner no longer makes. Giving the CPU back first
     * lets the runner go on with its other runs; the child runs as soon as the runner waits, or
     * on another CPU. */
    SYS0(sched_yield);
    /* The command's time starts here, not before the clone: a clone into a cgroup waits for the
     * kernel's cgroup_mutex, which other runs' group changes hold for RCU grace periods. */
    *child->start_ns = pk_monotonic_ns();
    /* A session leader leads its process group too; setsid is what lets it take a terminal. */
    failed = request->controlling_tty > 0 ? SYS0(setsid) : SYS2(setpgid, 0, 0);
    if (failed < 0)
        child_fail(report_fd, PK_SPAWN_PGID, failed);
    if (request->controlling_tty < 0)
        drop_terminal();
    long long joining = pk_monotonic_ns();
    if (!child->joined && request->cgroup_procs_fd >= 0)
        join(request->cgroup_procs_fd, report_fd);
    for (i = 0; i < request->join_count; i++)
        join(request->join_fds[i], report_fd);
    /* The wait for the cgroup lock (an RCU grace period per write) is the containment's, not the
     * command's: bench takes it out of the timed interval (processkit/benchmark/driver.py). */
    *child->join_ns = pk_monotonic_ns() - joining;
    SYS2(prctl, PR_SET_PDEATHSIG, SIGKILL);
    if (runner_gone(child))
        SYS1(exit_group, 127); /* the runner died before the death signal was armed: nobody would stop us */
    reset_signals(child->handlers_cleared);
    /* The judged directory's descriptor, before set_stdio and close_others can take its number. */
    if (request->cwd_fd >= 0 && (failed = SYS1(fchdir, request->cwd_fd)) != 0)
        child_fail(report_fd, PK_SPAWN_CHDIR, failed);
    set_stdio(request, &report_fd);
    if (request->controlling_tty > 0 && (failed = SYS3(ioctl, 0, TIOCSCTTY, 0)) != 0)
        child_fail(report_fd, PK_SPAWN_STDIO, failed);
    close_others(request, report_fd);
    if (request->nofile_soft) {
        /* Never above the hard limit: the runner gave no more than its own hard one at the call,
         * and said so when that was below its caller's (processkit/fdlimit.py). A hard limit
         * lowered since by another process (prlimit) fails this, leaving the child the lower. */
        struct rlimit limit;
        if (SYS4(prlimit64, 0, RLIMIT_NOFILE, 0, &limit) == 0) {
            limit.rlim_cur = (rlim_t)request->nofile_soft;
            SYS4(prlimit64, 0, RLIMIT_NOFILE, &limit, 0);
        }
    }
    for (i = 0; i < request->limit_count; i++) {
        /* The caller's limits at the call; one above a hard limit the runner lowered stays the lower. */
        struct rlimit limit = {(rlim_t)request->limits[3 * i + 1], (rlim_t)request->limits[3 * i + 2]};
        SYS4(prlimit64, 0, (int)request->limits[3 * i], &limit, 0);
    }
    if (request->cwd_fd < 0 && request->cwd && (failed = SYS1(chdir, request->cwd)) != 0)
        child_fail(report_fd, PK_SPAWN_CHDIR, failed);
    for (i = 0; i < request->path_count; i++) {
        error = SYS3(execve, request->paths[i], request->argv, request->envp);
        /* As Popen: the first failure other than "not in this directory" wins, else the last. */
        if (!first && error != -ENOENT && error != -ENOTDIR)
            first = error;
    }
    child_fail(report_fd, PK_SPAWN_EXEC, first ? first : error);
}
