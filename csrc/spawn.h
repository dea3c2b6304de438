/* processkit native spawn: clone3() straight into the run's cgroup, the shared-memory child on
 * the runner's memory with a stack of its own, else the copy-on-write one (see spawn.c), then
 * only raw system calls until execve (spawn_child.c). The runner does not wait for the
 * execve: pk_spawn_begin returns once the clone has, and the exec's outcome is read from the
 * report pipe once it is readable (spawn_report.c).
 *
 * The contract mirrors the Popen path of processkit/engine/spawn_popen.py; tests/test_spawn.py runs
 * both and expects the same behaviour. */
#ifndef PROCESSKIT_SPAWN_H
#define PROCESSKIT_SPAWN_H

#include <stddef.h>

/* The step that failed (pk_spawn_result.stage). */
#define PK_SPAWN_OK    0
#define PK_SPAWN_CLONE 1 /* no child: the report pipe, clone3 or clone failed */
#define PK_SPAWN_PGID  2 /* setpgid(0, 0) */
#define PK_SPAWN_JOIN  3 /* writing "0" to a cgroup.procs fd */
#define PK_SPAWN_STDIO 4 /* dup into 0, 1, 2 */
#define PK_SPAWN_CHDIR 5
#define PK_SPAWN_EXEC  6 /* every candidate path failed */

typedef struct pk_spawn_request {
    char *const *paths; /* executables to try in order: the PATH search is the caller's */
    size_t path_count;
    char *const *argv;   /* NULL-terminated */
    char *const *envp;   /* NULL-terminated */
    const char *cwd;     /* NULL keeps the runner's */
    int stdio[3];        /* fds to become the child's 0, 1, 2; -1 keeps the runner's */
    int cgroup_fd;       /* cgroup v2 directory to clone the child into; -1 for none */
    int cgroup_procs_fd; /* that group's cgroup.procs, written when cloning into it fails */
    const int *join_fds; /* further cgroup.procs fds the child writes "0" to, in order */
    size_t join_count;
    const int *pass_fds; /* the caller's descriptors from 3 up the child keeps, ascending: what the
                          * runner was started with (processkit/caller_fds.py), as the reference */
    size_t pass_count;
    int controlling_tty;              /* 1: a new session, whose controlling terminal is stdio[0]; -1: the
                                       * runner's session without its controlling terminal (TIOCNOTTY): a
                                       * child kept from the terminal opens /dev/tty with ENXIO, where a
                                       * background group reading it would be stopped for good (SIGTTIN) */
    unsigned long long nofile_soft;   /* not 0: the RLIMIT_NOFILE soft limit the child gets back (the
                                       * runner raised its own: processkit/fdlimit.py) */
    const unsigned long long *limits; /* the caller's resource limits, (kind, soft, hard) a triple, set
                                       * after nofile_soft, each best effort (processkit/rlimits.py) */
    size_t limit_count;               /* how many triples */
    int linger_ms; /* not 0: once the child has exec'd, wait this long at most for its exit (on its
                    * pidfd, without reaping it) before returning: bench's, so that a tiny command
                    * has the CPU to itself, as under hyperfine's blocking wait */
    /* 1: the copy-on-write child even where the shared-memory one is built: the child's groups
     * hold a memory limit, whose OOM kill must end it alone (spawn.c) */
    int own_memory;
    /* not -1: the child's working directory, the runner's descriptor on the directory it judged
     * (fchdir, before its stdio is put in place), in place of cwd's name, which another user could
     * have changed since (processkit/engine/launch.py); cwd then only names it */
    int cwd_fd;
} pk_spawn_request;

typedef struct pk_spawn_result {
    int pid;            /* the child (once finished: which has exec'd); -1 on failure (already reaped) */
    int pidfd;          /* the child's pidfd (O_CLOEXEC); -1 when the kernel gave none */
    int stage;          /* PK_SPAWN_OK, or the step that failed */
    int error;          /* errno of that step */
    long long start_ns; /* CLOCK_MONOTONIC at the child's first step (the runner's reading just
                         * before the clone where the child took none); 0 on failure */
    long long join_ns;  /* how long the child spent joining its cgroups by write (0: unknown) */
} pk_spawn_result;

/* A spawn begun and not yet finished: the child may still be between clone and execve. */
typedef struct pk_spawn_pending pk_spawn_pending;

/* Start the child and return at once: NULL when no child was made (result->stage
 * PK_SPAWN_CLONE), else the pending spawn, with result->pid and pidfd set. request, every
 * string and array it points to, and result must stay as they are until pk_spawn_finish has
 * returned 0: the child reads the first and writes result's start_ns and join_ns meanwhile. */
pk_spawn_pending *pk_spawn_begin(const pk_spawn_request *request, pk_spawn_result *result);

/* The fd to wait on (on a loop) before the next pk_spawn_finish look: the report pipe,
 * readable once the child has exec'd, failed or exited (spawn_report.c). A copy of its write end
 * held elsewhere (a fork during the clone) holds that off, so a loop also looks every
 * PK_SPAWN_HELD_POLL_MS. */
int pk_spawn_report_fd(pk_spawn_pending *pending);
#define PK_SPAWN_HELD_POLL_MS 50

/* The exec's outcome into result (the one given to pk_spawn_begin): 0, and 0 again at once on
 * any later call (so a caller interrupted after one never loses the outcome, nor finishes it
 * twice). With wait 0 and no outcome yet, 1, and nothing changed; likewise with wait
 * PK_SPAWN_UNTIL_SIGNAL when a signal interrupts the wait or signal_fd (the caller's signal
 * wake-up pipe, -1 for none; looked at, never read) is readable: the runner's own stop signal
 * must reach its Python handler while a child hangs in its execve, even one caught just before
 * the wait. A failed child is reaped here (pid -1). The pending spawn is freed by
 * pk_spawn_free alone, once finished. */
#define PK_SPAWN_UNTIL_SIGNAL 2
int pk_spawn_finish(pk_spawn_pending *pending, pk_spawn_result *result, int wait, int signal_fd);
void pk_spawn_free(pk_spawn_pending *pending);

/* The child's steps (csrc/spawn_child.c), in this order: own process group (with controlling_tty,
 * own session; with -1, no controlling terminal); join the cgroups; parent-death signal SIGKILL (exit at once
 * when the runner is already gone); caught signals, SIGPIPE and SIGXFSZ back to SIG_DFL and an empty signal
 * mask (other ignored signals stay ignored, as with Popen); stdio (with controlling_tty, then TIOCSCTTY on fd
 * 0); close every other fd but pass_fds; the caller's soft open-file limit back (nofile_soft), then its
 * limits (limits); chdir; execve each path in turn. */

/* 1 where the child shares the runner's memory (x86-64's clone3 by assembly, on Linux 5.16 or
 * later), 0 where it is the copy-on-write one (another architecture, PK_SPAWN_COW, or an older
 * kernel: spawn.c says why). */
int pk_spawn_shared_memory(void);

#endif
