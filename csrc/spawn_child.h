/* The native spawn's parts, internal to spawn.c (the runner's clone), spawn_report.c (the
 * runner's reading of the exec's report) and spawn_child.c (the child's, from its first step to
 * execve). */
#ifndef PROCESSKIT_SPAWN_CHILD_H
#define PROCESSKIT_SPAWN_CHILD_H

#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "spawn.h"

/* What the child reads of the runner's. It lives in the runner's heap (the pending spawn) and,
 * like the request and every string it points to, is neither changed nor freed until the child
 * has exec'd or exited. */
struct pk_child {
    const pk_spawn_request *request;
    pid_t runner;
    int joined;           /* born in request->cgroup_fd's group: no write to its cgroup.procs */
    int handlers_cleared; /* born with the runner's caught signals at SIG_DFL (CLONE_CLEAR_SIGHAND) */
    int report_fd;        /* the write end of the report pipe (O_CLOEXEC: execve closes it) */
    int report_read_fd;   /* its read end, the runner's: the child's copy tells nothing */
    int shared;           /* the child shares the runner's memory (else the copy-on-write one) */
    void *stack;          /* the top of the shared child's own stack */
    long long *start_ns;  /* the runner's result->start_ns and join_ns, which a shared-memory */
    long long *join_ns;   /* child's writes reach; a copy-on-write child's point into readings */
    long long *readings;  /* the copy-on-write child's MAP_SHARED pair (spawn_cow.c), else NULL */
};

/* A spawn between pk_spawn_begin and pk_spawn_finish: what the child reads, and what the
 * runner frees once it has exec'd or exited. aboard is the shared-memory child's (child.shared)
 * CLONE_CHILD_CLEARTID word: 1 from before the clone until the kernel clears it as the child
 * leaves the runner's memory, at its exec or exit (spawn_report.c says why). The copy-on-write
 * child has no such word (0, unused). */
struct pk_spawn_pending {
    struct pk_child child;
    int aboard;
    int report_fd; /* the read end of the report pipe (O_NONBLOCK), -1 once closed */
    int pid;
    int pidfd;
    int looked;   /* 1: a look has found nothing before (spawn_report.c) */
    int reaped;   /* given up on: killed and reaped, so its pid is no longer to be waited for */
    int finished; /* its outcome is in the caller's result: pk_spawn_finish returns 0 at once */
};

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#define PK_CLONE_CLEAR_SIGHAND 0x100000000ULL
#define PK_CLONE_INTO_CGROUP   0x200000000ULL

/* struct clone_args up to its cgroup field (CLONE_ARGS_SIZE_VER2), spelled out so the build
 * does not depend on the vintage of the kernel headers. */
struct pk_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size, cgroup;
};

/* clone3's arguments for both children: flags with CLONE_PIDFD into *pidfd, SIGCHLD at the
 * exit, and PK_CLONE_INTO_CGROUP's cgroup_fd; the caller adds what is its own. */
static inline void pk_fill_clone_args(struct pk_clone_args *args, uint64_t flags, int cgroup_fd, int *pidfd)
{
    memset(args, 0, sizeof *args);
    args->flags = flags | CLONE_PIDFD;
    args->pidfd = (uint64_t)(uintptr_t)pidfd;
    args->exit_signal = SIGCHLD;
    if (flags & PK_CLONE_INTO_CGROUP)
        args->cgroup = (uint64_t)cgroup_fd;
}

/* The copy-on-write child (spawn_cow.c): clone3 with flags (and PK_CLONE_INTO_CGROUP's
 * cgroup_fd), -1/ENOSYS where the build or the kernel has none; or the raw clone system call,
 * with a pidfd where the kernel takes CLONE_PIDFD from it (5.2 on), else -1 in *pidfd. */
pid_t pk_cow_clone3(uint64_t flags, int cgroup_fd, int *pidfd, struct pk_child *child);
pid_t pk_cow_clone(struct pk_child *child, int *pidfd);

/* The copy-on-write child's start_ns and join_ns pointed at a page both processes share, before
 * the clone (left at the runner's result where none can be mapped); and, once the child has
 * exec'd or exited, what it wrote there into result, the page unmapped. */
void pk_cow_share_readings(struct pk_child *child);
void pk_cow_take_readings(struct pk_child *child, pk_spawn_result *result);

/* The child's stack back to the kept ones (spawn.c), once the child is off it. */
void pk_give_back_stack(struct pk_child *child);

/* The child's steps (spawn.h's order), then execve; never returns. */
__attribute__((noreturn)) void pk_run_child(const struct pk_child *child);

long long pk_monotonic_ns(void);

#endif
