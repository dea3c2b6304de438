/* The native spawn's two sides, internal to spawn.c (the runner's) and spawn_child.c (the
 * child's, from its first step to execve). */
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
    int joined; /* born in request->cgroup_fd's group: no write to its cgroup.procs */
    int report_fd;
    void *stack;         /* the top of the child's own stack (shared memory only) */
    long long *start_ns; /* the runner's result->start_ns and join_ns: a shared-memory child's */
    long long *join_ns;  /* writes reach them */
};

/* The child's steps (spawn.h's order), then execve; never returns. */
__attribute__((noreturn)) void pk_run_child(const struct pk_child *child);

long long pk_monotonic_ns(void);

#endif
