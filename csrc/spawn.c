/* The native spawn; see spawn.h for the contract shared with processkit/engine/spawn.py.
 *
 * Why clone3 with CLONE_INTO_CGROUP: a process that writes itself into cgroup.procs waits for
 * an RCU grace period (about 10 ms measured), the largest single cost of a short run, while a
 * child born in the group never migrates. The child is a copy-on-write fork (no CLONE_VM) that
 * makes only async-signal-safe system calls until execve, so no libc lock, allocator or Python
 * state is used in it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* A fork-like clone3 (same stack, copied memory) that also returns a pidfd; -1/ENOSYS where the
 * build or the kernel (or a seccomp filter, as container runtimes install) has no clone3. */
static pid_t clone3_fork(uint64_t flags, int cgroup_fd, int *pidfd)
{
#ifdef SYS_clone3
    struct pk_clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = flags | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    if (flags & PK_CLONE_INTO_CGROUP)
        args.cgroup = (uint64_t)cgroup_fd;
    return (pid_t)syscall(SYS_clone3, &args, sizeof args);
#else
    (void)flags;
    (void)cgroup_fd;
    (void)pidfd;
    errno = ENOSYS;
    return -1;
#endif
}

/* Into the cgroup when the kernel allows it (*joined = 1), else a plain clone3, else fork(). Any
 * refusal of CLONE_INTO_CGROUP (older kernel, EBUSY, a pids cap that counts the newborn) falls
 * back to joining by write in the child, which then reports the real error like the Popen path. */
static pid_t start_child(const pk_spawn_request *request, int *pidfd, int *joined)
{
    pid_t pid;
    *joined = 0;
    *pidfd = -1;
    if (request->cgroup_fd >= 0) {
        pid = clone3_fork(PK_CLONE_INTO_CGROUP, request->cgroup_fd, pidfd);
        if (pid >= 0) {
            *joined = 1;
            return pid;
        }
    }
    if (request->cgroup_fd < 0 || errno != ENOSYS) {
        pid = clone3_fork(0, -1, pidfd);
        if (pid >= 0 || errno != ENOSYS)
            return pid;
    }
    *pidfd = -1;
    return fork();
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
 * Other ignored signals stay ignored, as they do under Popen. */
static void reset_signals(void)
{
    struct sigaction action;
    sigset_t none;
    int signum;
    for (signum = 1; signum < NSIG; signum++) {
        if (sigaction(signum, NULL, &action) != 0)
            continue; /* SIGKILL, SIGSTOP and libc's internal signals */
        if (restored_by_popen(signum) || (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN)) {
            memset(&action, 0, sizeof action);
            action.sa_handler = SIG_DFL;
            sigaction(signum, &action, NULL);
        }
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* dup2 onto the same number would keep O_CLOEXEC, and one dup may overwrite the next one's
 * source: anything sitting in 0-2 (a runner started with a std fd closed) moves above first. */
static void set_stdio(const pk_spawn_request *request, int *report_fd)
{
    int source[3], i;
    if (*report_fd < 3 && (*report_fd = fcntl(*report_fd, F_DUPFD_CLOEXEC, 3)) < 0)
        _exit(127);
    for (i = 0; i < 3; i++) {
        source[i] = request->stdio[i];
        if (source[i] >= 0 && source[i] < 3 && (source[i] = fcntl(source[i], F_DUPFD_CLOEXEC, 3)) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO);
    }
    for (i = 0; i < 3; i++)
        if (source[i] >= 0 && dup2(source[i], i) < 0)
            child_fail(*report_fd, PK_SPAWN_STDIO);
}

/* Every fd from 3 up except the report pipe, which execve closes (O_CLOEXEC). */
static void close_others(int keep)
{
    struct rlimit limit;
    int fd, end = PK_FALLBACK_FD_LIMIT;
#ifdef SYS_close_range
    if ((keep == 3 || syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) == 0) &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
        return;
#endif
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (rlim_t)INT_MAX)
        end = (int)limit.rlim_cur;
    for (fd = 3; fd < end; fd++)
        if (fd != keep)
            close(fd);
}

__attribute__((noreturn)) static void run_child(const pk_spawn_request *request, pid_t runner, int joined,
                                                int report_fd)
{
    int error = ENOENT, first = 0;
    size_t i;
    /* A session leader leads its process group too; setsid is what lets it take a terminal. */
    if (request->controlling_tty ? setsid() < 0 : setpgid(0, 0) != 0)
        child_fail(report_fd, PK_SPAWN_PGID);
    if (!joined && request->cgroup_procs_fd >= 0)
        join(request->cgroup_procs_fd, report_fd);
    for (i = 0; i < request->join_count; i++)
        join(request->join_fds[i], report_fd);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != runner)
        _exit(127); /* the runner died before the death signal was armed: nobody would stop us */
    reset_signals();
    set_stdio(request, &report_fd);
    if (request->controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(report_fd, PK_SPAWN_STDIO);
    close_others(report_fd);
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
    int report_pipe[2], report[2], pidfd, joined, status, error;
    sigset_t all, previous;
    pid_t runner = getpid(), pid;
    ssize_t got;

    result->pid = -1;
    result->pidfd = -1;
    result->stage = PK_SPAWN_OK;
    result->error = 0;
    if (pipe2(report_pipe, O_CLOEXEC) != 0) {
        result->stage = PK_SPAWN_CLONE;
        result->error = errno;
        return;
    }
    /* No handler may run in the child before reset_signals(): block everything across clone. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &previous);
    pid = start_child(request, &pidfd, &joined);
    if (pid == 0)
        run_child(request, runner, joined, report_pipe[1]);
    error = errno;
    sigprocmask(SIG_SETMASK, &previous, NULL);
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
        return;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pidfd >= 0)
        close(pidfd);
    result->stage = report[0];
    result->error = report[1];
}
