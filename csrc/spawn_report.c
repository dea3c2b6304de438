/* The exec's report, read by the runner: spawn.c clones the child, spawn_child.c is the child.
 *
 * Why the report pipe is the child's own, sent over a socket: the exec is seen as the end of
 * file of a pipe whose write end execve closes (O_CLOEXEC), which needs every copy of that end
 * closed. A pipe the runner made sits in the runner's descriptor table from its pipe2 to the
 * close after the clone, and a fork() meanwhile in another thread of the process (a Dask
 * worker's, an API caller's: anything the spawn runs in) copies its write end; a copy in a
 * child that never execs holds the end of file off for as long as that child lives, and the
 * run with it. So the runner makes only a socket pair, a copy of whose ends holds off nothing
 * the runner waits for: the child's first step makes its pipe in its own descriptor table, which
 * no other process copies, and sends the read end over the socket (SCM_RIGHTS). Until that
 * message the runner waits on the socket and on the child's pidfd: a child that exits before
 * sending (killed at birth) is decided by its exit, not by the socket's end of file, which a
 * copy holds off too. A whole report (a failed step and its errno) is taken as soon as it is
 * read, not at the end of file after it: the child exits right after writing it, and is waited
 * for by its pid.
 *
 * The stack is given back only once the child is off it: its pipe's end of file comes after
 * the child has left the runner's memory (execve switches memory before it closes O_CLOEXEC
 * fds, and exit releases the memory before the fds), a pidfd is readable only once it has
 * exited, and a reported child is reaped first. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_child.h"

#define PK_NOT_YET 1 /* a look found nothing new */
#define PK_RAN     2 /* no report will come: the child exec'd, or exited without one */
#define PK_FAILED  3 /* a whole report: the child failed a step and exits */

/* A loop's wait before the child's pipe is in hand: an epoll set of the channel's hang-up alone
 * (all copies of the child's end closed: its exec or exit) and the pidfd. The channel's
 * message (the pipe, sent at the child's first step) wakes nothing, or every spawn would cost
 * the loop a turn for it and another for the exec; the look after the hang-up takes the pipe
 * and its end of file at once. A copy held elsewhere holds the hang-up off: the loop's own
 * poll then looks (PK_SPAWN_HELD_POLL_MS), takes the pipe, and waits on it. Without an epoll
 * set (no fd left), the channel itself: a turn for the message, then the pipe. */
static int watch_fd(pk_spawn_pending *pending)
{
    struct epoll_event hangup = {.events = EPOLLRDHUP}, exit = {.events = EPOLLIN};
    int fd;
    if (pending->watch_fd >= 0)
        return pending->watch_fd;
    if ((fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return pending->channel_fd;
    if (epoll_ctl(fd, EPOLL_CTL_ADD, pending->channel_fd, &hangup) != 0 ||
        (pending->pidfd >= 0 && epoll_ctl(fd, EPOLL_CTL_ADD, pending->pidfd, &exit) != 0)) {
        close(fd);
        return pending->channel_fd;
    }
    return pending->watch_fd = fd;
}

int pk_spawn_report_fd(pk_spawn_pending *pending)
{
    return pending->report_fd >= 0 ? pending->report_fd : watch_fd(pending);
}

int pk_spawn_piped(const pk_spawn_pending *pending)
{
    return pending->report_fd >= 0;
}

static void close_channel(pk_spawn_pending *pending)
{
    if (pending->watch_fd >= 0)
        close(pending->watch_fd);
    if (pending->channel_fd >= 0)
        close(pending->channel_fd);
    pending->watch_fd = pending->channel_fd = -1;
}

/* A child the runner can no longer follow (its pipe lost to the runner's fd limit, a channel
 * that cannot be read): killed and reaped, its failure the runner's error. */
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

/* The child's first message: its report pipe's read end (kept in pending), or a report of its
 * own failure to make or send one; PK_RAN when the child exited without a message (exited: its
 * pidfd was readable before this look). */
static int receive_pipe(pk_spawn_pending *pending, int report[2], int exited)
{
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr header;
    } control;
    struct iovec data = {.iov_base = report, .iov_len = 2 * sizeof(int)};
    struct msghdr message = {.msg_iov = &data,
                             .msg_iovlen = 1,
                             .msg_control = control.bytes,
                             .msg_controllen = sizeof control.bytes};
    struct cmsghdr *header;
    ssize_t got;
    while ((got = recvmsg(pending->channel_fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 &&
           errno == EINTR)
        ;
    if (got < 0 && errno == EAGAIN)
        return exited ? PK_RAN : PK_NOT_YET;
    if (got < 0)
        return given_up(pending, report, errno);
    if (got == 0)
        return PK_RAN; /* every copy of the child's end closed: it exited without a word */
    header = CMSG_FIRSTHDR(&message);
    if (header && header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
        memcpy(&pending->report_fd, CMSG_DATA(header), sizeof(int));
        close_channel(pending);
        return PK_NOT_YET;
    }
    if (message.msg_flags & MSG_CTRUNC) /* its pipe sent, but no room for it in the runner's table */
        return given_up(pending, report, EMFILE);
    return got == 2 * sizeof(int) ? PK_FAILED : given_up(pending, report, EPROTO);
}

/* The child's pipe: its report (PK_FAILED) or its end of file (PK_RAN), or PK_NOT_YET. */
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

/* Whether the child has exited (not reaped: it stays claimed and unreaped for its run): its
 * pidfd is readable, or without one, what waitid says without reaping. ECHILD: a subreaper's
 * sweep of orphans reaped it first. Without a pidfd the channel is all else there is to ask, and
 * a copy of it held elsewhere (a fork during the clone) would hold off for good the end of file
 * of a child dead before its message. */
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
 * the channel's hang-up and the pidfd as a loop does (watch_fd, and a look every
 * PK_SPAWN_HELD_POLL_MS) until the pipe is in hand, then the pipe alone, which only the child
 * holds. */
static int read_outcome(pk_spawn_pending *pending, int report[2], int wait, int signal_fd)
{
    struct pollfd ready[3] = {{.events = POLLIN}, {.events = POLLIN}, {.events = POLLIN}};
    size_t have = 0;
    int outcome, exited = 0, piped, polled;
    ready[2].fd = wait == PK_SPAWN_UNTIL_SIGNAL ? signal_fd : -1; /* -1: ignored by poll */
    for (;;) {
        if (pending->report_fd < 0 && (outcome = receive_pipe(pending, report, exited)) != PK_NOT_YET)
            return outcome;
        if (pending->report_fd >= 0 && (outcome = read_pipe(pending, report, &have)) != PK_NOT_YET)
            return outcome;
        piped = pending->report_fd >= 0;
        ready[0].fd = piped ? pending->report_fd : pending->channel_fd;
        ready[0].events = piped ? POLLIN : POLLRDHUP; /* the channel's hang-up, as watch_fd's */
        ready[1].fd = piped ? -1 : pending->pidfd;
        ready[0].revents = ready[1].revents = ready[2].revents = 0;
        if (!wait && have == 0) {
            /* A look: nothing on the channel, but the loop may have woken for the child's exit. */
            if (exited || piped || !child_exited(pending))
                return PK_NOT_YET;
            exited = 1;
            continue;
        }
        polled = poll(ready, 3, piped ? -1 : PK_SPAWN_HELD_POLL_MS);
        if (have == 0 && wait == PK_SPAWN_UNTIL_SIGNAL &&
            ((polled < 0 && errno == EINTR) || (polled > 0 && ready[2].revents)))
            return PK_NOT_YET; /* the caller's handler runs once this returns */
        if (!piped)
            exited = ready[1].fd >= 0 ? (ready[1].revents & POLLIN) != 0 : child_exited(pending);
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
    close_channel(pending);
    if (pending->report_fd >= 0)
        close(pending->report_fd);
    pending->report_fd = -1;
    pk_give_back_stack(&pending->child); /* exec'd, exited or reaped: off the stack */
    pending->finished = 1;
    if (outcome == PK_RAN) {
        result->pid = pending->pid;
        result->pidfd = pending->pidfd;
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
