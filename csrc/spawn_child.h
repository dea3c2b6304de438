/* The native spawn's parts, internal to spawn.c (the runner's clone), spawn_report.c (the
 * runner's reading of the exec's report) and spawn_child.c (the child's, from its first step to
 * execve). */
#ifndef PROCESSKIT_SPAWN_CHILD_H
#define PROCESSKIT_SPAWN_CHILD_H

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
    void *stack;          /* the top of the child's own stack (shared memory only) */
    long long *start_ns;  /* the runner's result->start_ns and join_ns: a shared-memory child's */
    long long *join_ns;   /* writes reach them */
};

/* A spawn between pk_spawn_begin and pk_spawn_finish: what the child reads, and what the
 * runner frees once it has exec'd or exited. aboard is the shared-memory child's
 * CLONE_CHILD_CLEARTID word: 1 from before the clone until the kernel clears it as the child
 * leaves the runner's memory, at its exec or exit (spawn_report.c says why). */
struct pk_spawn_pending {
    struct pk_child child;
    int aboard;
    int report_fd; /* the read end of the report pipe (O_NONBLOCK), -1 once closed */
    int pid;
    int pidfd;
    int looked;   /* a look has found nothing before (spawn_report.c) */
    int reaped;   /* given up on: killed and reaped, so its pid is no longer to be waited for */
    int finished; /* its outcome is in the caller's result: pk_spawn_finish returns 0 at once */
};

/* The child's stack back to the kept ones (spawn.c), once the child is off it. */
void pk_give_back_stack(struct pk_child *child);

/* The child's steps (spawn.h's order), then execve; never returns. */
__attribute__((noreturn)) void pk_run_child(const struct pk_child *child);

long long pk_monotonic_ns(void);

#endif
