/* The copy-on-write child (spawn.c says when it is taken): a fork-like clone3 or fork(), its
 * memory a copy of the runner's, so nothing it writes reaches the runner (start_ns and join_ns
 * stay the runner's own readings) and no word of the runner's is cleared as it leaves. The exec
 * is then told, when a fork elsewhere holds the report's end of file, by the child's
 * PF_FORKNOEXEC flag (spawn_report.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn_child.h"

pid_t pk_cow_clone3(uint64_t flags, int cgroup_fd, int *pidfd, struct pk_child *child)
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
        pk_run_child(child);
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

pid_t pk_cow_fork(struct pk_child *child, int *pidfd)
{
    pid_t pid = fork();
    *pidfd = -1;
    if (pid == 0)
        pk_run_child(child);
    return pid;
}
