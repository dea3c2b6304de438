/* The copy-on-write child (spawn.c says when it is taken): a fork-like clone3, or the clone
 * system call, its memory a copy of the runner's, so nothing it writes reaches the runner but
 * through the one MAP_SHARED page its two clock readings are written to (start_ns and join_ns:
 * bench times a command from them), and it has no word of the runner's to clear as it leaves. The exec is
 * then told, when a fork elsewhere holds the report's end of file, by the child's PF_FORKNOEXEC flag
 * (spawn_report.c).
 *
 * Why never libc's fork(): it runs every pthread_atfork handler registered in the runner (a
 * numerical library's, say) in the runner and in the child, before the child's first step,
 * which must make raw system calls only (spawn_child.c), and it gives no pidfd. Where clone3
 * is refused (Docker's default seccomp filter answers ENOSYS), the clone system call gives the
 * same child with a pidfd, as far back as Linux 5.2. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn_child.h"

pid_t pk_cow_clone3(uint64_t flags, int cgroup_fd, int *pidfd, struct pk_child *child)
{
#ifdef SYS_clone3
    struct pk_clone_args args;
    pid_t pid;
    pk_fill_clone_args(&args, flags, cgroup_fd, pidfd);
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

/* clone(flags) with no new stack: a fork without libc's handlers. The kernel writes the pidfd
 * through the parent_tid argument; the child_tid and tls arguments, whose order differs between
 * architectures, are both 0, but s390 takes the stack before the flags. */
static pid_t raw_clone(unsigned long flags, int *pidfd)
{
#if defined(__s390__) || defined(__s390x__)
    return (pid_t)syscall(SYS_clone, 0UL, flags, pidfd, 0UL, 0UL);
#else
    return (pid_t)syscall(SYS_clone, flags, 0UL, pidfd, 0UL, 0UL);
#endif
}

pid_t pk_cow_clone(struct pk_child *child, int *pidfd)
{
    pid_t pid;
    *pidfd = -1; /* a kernel before 5.2 ignores CLONE_PIDFD and writes none */
    pid = raw_clone(CLONE_PIDFD | SIGCHLD, pidfd);
    if (pid < 0 && errno == EINVAL) /* a kernel (or a sandbox) that refuses the flag */
        pid = raw_clone(SIGCHLD, NULL);
    if (pid == 0)
        pk_run_child(child);
    return pid;
}

#define PK_READINGS_SIZE (2 * sizeof(long long))

void pk_cow_share_readings(struct pk_child *child)
{
    long long *page = mmap(NULL, PK_READINGS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return; /* the runner's reading before the clone stands in */
    child->readings = page;
    child->start_ns = &page[0];
    child->join_ns = &page[1];
}

void pk_cow_take_readings(struct pk_child *child, pk_spawn_result *result)
{
    if (!child->readings)
        return;
    if (child->readings[0]) { /* the child took its first step */
        result->start_ns = child->readings[0];
        result->join_ns = child->readings[1];
    }
    munmap(child->readings, PK_READINGS_SIZE);
    child->readings = NULL;
}
