/* The exec's report, read by the runner: spawn.c clones the child, spawn_child.c is the child.
 *
 * The report is a pipe the runner makes (O_CLOEXEC), whose write end the child keeps to its
 * execve: its end of file is the exec (or the child's exit), a report of two ints a step that
 * failed. A whole report is taken as soon as it is read, not at the end of file after it: the
 * child exits right after writing it, and is waited for by its pid.
 *
 * Why a fork elsewhere cannot hold a run up: the write end sits in the runner's descriptor
 * table from its pipe2 to the close after the clone, and a fork() meanwhile in another thread
 * of the process (a Dask worker's, an API caller's: anything the spawn runs in) copies it; a
 * copy in a child that never execs holds the end of file off for as long as that child lives.
 * The shared-memory child (spawn.c) is cloned with CLONE_CHILD_CLEARTID on pending->aboard, so
 * the kernel clears that word in the runner's memory when the child leaves it: at its exec
 * (exec_mmap, before the O_CLOEXEC fds close) or its exit (before its fds close; a core dump's
 * exit too, on the kernels that child is taken on, whose mm_release asks only whether the
 * memory has other users). A word cleared with no report in the pipe is the exec, whoever holds
 * a copy of its end. The copy-on-write child has no such word: there the exec is told by the
 * child's PF_FORKNOEXEC flag (field 9 of /proc/<pid>/stat), which the kernel sets at the fork
 * and clears at the exec (begin_new_exec, before the O_CLOEXEC fds close), never for a child
 * that fails and exits; the child is claimed and unreaped, so its pid is still its own. So a
 * loop waits on the pipe and also looks every PK_SPAWN_HELD_POLL_MS, as a wait here polls with
 * that bound: the end of file is the wake-up of every exec not held up, the word or the flag
 * the answer for the held ones, and a child that dies before its exec is decided by its exit
 * (its pidfd, or waitid). Without /proc the flag cannot be read, and a held end of file holds
 * the copy-on-write child's run as it would Popen's, whose report pipe is the runner's too.
 *
 * This replaced a pipe the child made in its own table and sent over a socket pair: the socket,
 * its epoll set, the message and the child's three calls cost the runner about 10-20 us a spawn
 * and the child 8 us (bench/README.md).
 *
 * The stack is given back only once the child is off it: its word is cleared, its end of file
 * comes after the child has left the runner's memory, a pidfd is readable only once it has
 * exited, and a reported child is reaped first. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_child.h"

#define PK_NOT_YET 1 /* a look found nothing new */
#define PK_RAN     2 /* no report will come: the child exec'd, or exited without one */
#define PK_FAILED  3 /* a whole report: the child failed a step and exits */

int pk_spawn_report_fd(pk_spawn_pending *pending)
{
    return pending->report_fd;
}

/* A child the runner can no longer follow (its pipe cannot be read): killed and reaped, its
 * failure the runner's error. */
static int given_up(pk_spawn_pending *pending, int report[2], int error)
{
    int status;
    kill(pending->pid, SIGKILL); /* claimed and unreaped (processkit/engine/claims.py): still ours */
    while (waitpid(pending->pid, &status, 0) < 0 && errno == EINTR)
        ;
    pending->reaped = 1; /* its pid may be another process's from here: never waited for again */
    report[0] = PK_SPAWN_CLONE;
    report[1] = error;
    return PK_FAILED;
}

/* The pipe: its report (PK_FAILED) or its end of file (PK_RAN), or PK_NOT_YET. */
static int read_pipe(pk_spawn_pending *pending, int report[2], size_t *have)
{
    const size_t whole = 2 * sizeof(int);
    ssize_t got;
    for (;;) {
        got = read(pending->report_fd, (char *)report + *have, whole - *have);
        if (got == 0)
            return PK_RAN;
        if (got > 0 && (*have += (size_t)got) == whole)
            return PK_FAILED;
        if (got < 0 && errno == EAGAIN)
            return PK_NOT_YET;
        if (got < 0 && errno != EINTR)
            return given_up(pending, report, errno);
    }
}

#define PK_PF_FORKNOEXEC 0x40 /* include/linux/sched.h: forked and has not exec'd */

/* Whether the copy-on-write child has exec'd: its PF_FORKNOEXEC flag cleared. 0 when /proc
 * cannot say (then its end of file or its exit decides), as when it is another pid
 * namespace's (the process there is not the runner's child). */
static int cow_execd(const pk_spawn_pending *pending)
{
    char path[32], line[512], *name_end;
    unsigned long flags;
    ssize_t got;
    int fd, parent;
    snprintf(path, sizeof path, "/proc/%d/stat", pending->pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    while ((got = read(fd, line, sizeof line - 1)) < 0 && errno == EINTR)
        ;
    close(fd);
    if (got <= 0)
        return 0;
    line[got] = '\0';
    /* After the command's name, which may hold spaces and parentheses: state, ppid, pgrp,
     * session, tty_nr, tpgid, then the flags. */
    if (!(name_end = strrchr(line, ')')) ||
        sscanf(name_end, ") %*c %d %*d %*d %*d %*d %lu", &parent, &flags) != 2 || parent != getpid())
        return 0;
    return !(flags & PK_PF_FORKNOEXEC);
}

/* What the pipe says, and if nothing, whether the child is gone anyway: its exit seen (exited),
 * or its exec, by the shared-memory child's word (read before the pipe: a report written before
 * the child left is in the pipe by then) or the copy-on-write child's flag (read only when the
 * pipe has nothing, and the pipe read again after it, so a report still wins; never on the first
 * look, right after the clone, when the flag is still set). */
static int look(pk_spawn_pending *pending, int report[2], size_t *have, int exited)
{
    int gone = exited || (pending->child.shared && __atomic_load_n(&pending->aboard, __ATOMIC_ACQUIRE) == 0),
        outcome;
    if ((outcome = read_pipe(pending, report, have)) != PK_NOT_YET)
        return outcome;
    if (!gone && !pending->child.shared && pending->looked && cow_execd(pending)) {
        gone = 1;
        if ((outcome = read_pipe(pending, report, have)) != PK_NOT_YET)
            return outcome;
    }
    return gone ? PK_RAN : PK_NOT_YET;
}

/* Whether the child has exited (not reaped: it stays claimed and unreaped for its run): its
 * pidfd is readable, or without one, what waitid says without reaping. ECHILD: a subreaper's
 * sweep of orphans reaped it first. */
static int child_exited(const pk_spawn_pending *pending)
{
    struct pollfd exited = {.fd = pending->pidfd, .events = POLLIN};
    siginfo_t info;
    if (pending->pidfd >= 0)
        return poll(&exited, 1, 0) == 1;
    info.si_pid = 0;
    if (waitid(P_PID, (id_t)pending->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD;
    return info.si_pid == pending->pid;
}

/* The outcome once known (PK_RAN or PK_FAILED), or PK_NOT_YET where wait is 0 (or
 * PK_SPAWN_UNTIL_SIGNAL, and a signal came: the wait was interrupted, or signal_fd, the
 * caller's signal wake-up pipe, is readable). That pipe is only looked at, never read: a
 * signal caught just before the wait (or during the clone, which blocks every signal and
 * delivers them right after) interrupts nothing, and only its byte there tells this wait to give
 * its caller's handler its turn; the caller reads the pipe before it waits again. A wait polls
 * the report pipe and the pidfd, and looks again every PK_SPAWN_HELD_POLL_MS (a held end of
 * file: the word or the PF_FORKNOEXEC flag decides). */
static int read_outcome(pk_spawn_pending *pending, int report[2], int wait, int signal_fd)
{
    struct pollfd ready[3] = {{.events = POLLIN}, {.events = POLLIN}, {.events = POLLIN}};
    size_t have = 0;
    int outcome, exited = 0, polled, first;
    ready[0].fd = pending->report_fd;
    ready[1].fd = pending->pidfd; /* -1: ignored by poll */
    ready[2].fd = wait == PK_SPAWN_UNTIL_SIGNAL ? signal_fd : -1;
    for (;;) {
        if ((outcome = look(pending, report, &have, exited)) != PK_NOT_YET)
            return outcome;
        first = !pending->looked;
        pending->looked = 1;
        if (!wait && have == 0) {
            /* A look: nothing in the pipe, but the loop may have woken for a held one's poll. A
             * loop's first look, right after the clone, leaves the exit to the next. */
            if (exited || first || !child_exited(pending))
                return PK_NOT_YET;
            exited = 1;
            continue;
        }
        ready[0].revents = ready[1].revents = ready[2].revents = 0;
        polled = poll(ready, 3, PK_SPAWN_HELD_POLL_MS);
        if (have == 0 && wait == PK_SPAWN_UNTIL_SIGNAL &&
            ((polled < 0 && errno == EINTR) || (polled > 0 && ready[2].revents)))
            return PK_NOT_YET; /* the caller's handler runs once this returns */
        exited = ready[1].fd >= 0 ? (ready[1].revents & POLLIN) != 0 : polled == 0 && child_exited(pending);
    }
}

int pk_spawn_finish(pk_spawn_pending *pending, pk_spawn_result *result, int wait, int signal_fd)
{
    const pk_spawn_request *request = pending->child.request;
    int report[2], status, outcome;
    if (pending->finished)
        return 0; /* its outcome is in result already */
    if ((outcome = read_outcome(pending, report, wait, signal_fd)) == PK_NOT_YET)
        return 1;
    if (outcome == PK_FAILED && !pending->reaped) /* the child exits right after its report */
        while (waitpid(pending->pid, &status, 0) < 0 && errno == EINTR)
            ; /* ECHILD: a subreaper's sweep of orphans took it first; the report says all */
    close(pending->report_fd);
    pending->report_fd = -1;
    pk_give_back_stack(&pending->child); /* exec'd, exited or reaped: off the stack */
    pk_cow_take_readings(&pending->child, result);
    pending->finished = 1;
    if (outcome == PK_RAN) {
        /* result->pid and pidfd are pk_spawn_begin's */
        if (request->linger_ms > 0 && pending->pidfd >= 0) {
            /* Readable once the child has exited; the runner's reaper collects it as always. */
            struct pollfd exited = {.fd = pending->pidfd, .events = POLLIN};
            while (poll(&exited, 1, request->linger_ms) < 0 && errno == EINTR)
                ;
        }
    } else {
        if (pending->pidfd >= 0)
            close(pending->pidfd);
        result->pid = -1;
        result->pidfd = -1;
        result->stage = report[0];
        result->error = report[1];
    }
    return 0;
}

void pk_spawn_free(pk_spawn_pending *pending)
{
    free(pending);
}
