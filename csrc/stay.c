/* The native pump's stay: a stream that reads on every wakeup (a fast writer, pacing's "fast"
 * in processkit/engine/streams.py) keeps pumping in C between wakeups instead of going back
 * through the event loop for each one. See pump.h for the contract.
 *
 * Why: once a writer keeps the pipe busy, the runner pays per wakeup a turn of the Python loop
 * (the readiness wait's result as objects, the callback, the drain's bookkeeping: about a third
 * of a wakeup's cost in the runner) and, more, the wakeup itself: each write the writer makes
 * while the runner waits for it wakes it, a context switch on both sides. Here a wakeup is one
 * wait and one drain, and the pause below makes the writer's writes stop waking the runner at
 * all (bench/README.md, "The native pump's stay").
 *
 * Facts about the wait: a pipe in an epoll set carries epoll's entry on its wait queue, and each
 * write runs epoll's callback under the queue's lock, whoever waits, whenever: 2 M writes of 100 B
 * cost the writer about a seventh more CPU while its pipe sat in the loop's set (bench/README.md,
 * "Capture against tee"). So the caller takes in_fd out of the loop's set for the stay, and the
 * stay waits with poll(2) on in_fd and on the epoll set's own fd, which is readable while anything
 * in the set is ready: poll's entry sits on the pipe's queue only while the stay waits in it,
 * never across a pause. While the stay has no pause (an echo-only stream keeping up with its
 * writer, which waits every few writes) it puts in_fd back in the set for its own waits (join_set)
 * and waits with epoll_wait, whose registration costs nothing a wait where poll sets its entries
 * up and down each time: out again before any pause and at the stay's end, as the caller left it.
 * A watched stream's pipe (pk_stream_watch: never polled at all, hasher.c) is not waited on here
 * either: after a pause the stay drains at once unless anything in the set is ready, and an empty
 * pipe arms the hashing thread's read and the stay polls its eventfd and the set.
 * Every registration in the set is level-triggered (processkit/readiness.py), and neither polling
 * an epoll fd nor an epoll_wait that reports another fd consumes anything: the loop's next wait
 * reports what was ready. Anything else in the set being ready (a timer's deadline, the signal wakeup
 * socket, the control socket, a pidfd, another stream or run), an interrupted wait, the end of the
 * pipe, a read error, an echo that cannot take all (its backlog is Python's) or crossing stop_at
 * ends the stay: the loop then does what it would have done, at most one wakeup later. The stay
 * never outlasts `until` (the caller sets it at or before the loop's next timer) by more than a
 * drain, or poll's rounding up to a millisecond.
 *
 * Gathering: after a drain that left the pipe empty and was short of `full_at` (the pipe's
 * "nearly full") the stay sleeps before its next wait (bounded: never past `until`), so a slow
 * writer's pieces gather in the pipe and are taken a pile at a time, as the loop's own pacing
 * does between turns. A reader asleep in poll is woken by every write (a context switch
 * each, on both sides); one asleep in nanosleep is not: the pipe only marks itself ready. The
 * pause adapts to the writer (kept in the stream, adapt_pause and watch_rate): from
 * `shortest_pause_ns`, doubled up to `longest_pause_ns` while it gathers under a quarter of
 * full_at, halved while it fills the pipe; an echo-only stream's goes to none at all for a
 * writer that fast, until a window's rate shows the writer slowed. Measured (bench/README.md, "The
 * native pump's stay"): 2 M writes of 100 B cost the whole tree about a third less CPU with the
 * pause; a writer of 4 KiB pieces at full speed on a quiet machine ran 2-3x longer in wall time
 * with any pause (its pages go cold in a pile; with none the reader keeps up and they stay in
 * the cache), and with none the whole tree took less CPU than `| cat`. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>

#include "pump.h"

/* pause_ns for a writer so fast that any pause lets it fill the pipe: none, until a window of
 * RATE_WINDOW_NS shows a rate at which the shortest pause would gather under a quarter of it. */
#define STAY_EVENTS    8
#define NO_PAUSE       (-1)
#define RATE_WINDOW_NS 1000000

static int64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Milliseconds to wait for `until` (rounded up: poll's unit), 0 when it has passed. */
static int wait_ms(int64_t until)
{
    int64_t left = until - now_ns();
    if (left <= 0)
        return 0;
    return (int)((left + 999999) / 1000000);
}

/* The stay's own registration of in_fd in the loop's set (the caller took the loop's out), for
 * waits that come every few writes (see the facts about the wait); 0 when it cannot be made. */
static int join_set(int epoll_fd, int in_fd)
{
    struct epoll_event event;
    event.events = EPOLLIN;
    event.data.u64 = 0;
    event.data.fd = in_fd;
    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, in_fd, &event) == 0;
}

/* Whether the ready set holds anything but in_fd. */
static int others_ready(const struct epoll_event *events, int count, int in_fd)
{
    int index;
    for (index = 0; index < count; index++)
        if (events[index].data.fd != in_fd)
            return 1;
    return 0;
}

/* After a pause that gathered `gathered`. An echo-only stream's pause that let the writer half
 * fill the pipe is halved, and below an eighth of the shortest there is none: the runner keeps
 * up with the writer, whose pages then stay in the cache where a pile of them goes cold (on the
 * 4 KiB echo any pause cost 2-3x the wall time of none). A captured stream's runner is the
 * slower side (the capture's writes and digest), so its pipe fills whatever the pause, and big
 * drains cost it less: its pause is halved only once the pipe came nearly full, down to the
 * shortest. Either is doubled while it gathers under a quarter of full_at. */
static void adapt_pause(pk_stream *stream, uint64_t gathered, uint64_t full_at, int64_t shortest_ns,
                        int64_t longest_ns)
{
    if (stream->capture_fd < 0 && gathered >= full_at / 2) {
        stream->pause_ns /= 2;
        if (stream->pause_ns < shortest_ns / 8) {
            stream->pause_ns = NO_PAUSE;
            stream->window_from_ns = now_ns();
            stream->window_bytes = 0;
        }
    } else if (gathered >= full_at)
        stream->pause_ns = stream->pause_ns / 2 > shortest_ns ? stream->pause_ns / 2 : shortest_ns;
    else if (gathered < full_at / 4)
        stream->pause_ns = stream->pause_ns * 2 < longest_ns ? stream->pause_ns * 2 : longest_ns;
}

/* With no pause: each window's rate says whether the shortest pause would now gather under a
 * quarter of the pipe (the writer slowed), and pausing starts again. */
static void watch_rate(pk_stream *stream, uint64_t read, uint64_t full_at, int64_t shortest_ns)
{
    int64_t now = now_ns(), elapsed = now - stream->window_from_ns;
    stream->window_bytes += read;
    if (elapsed < RATE_WINDOW_NS)
        return;
    if ((double)stream->window_bytes * (double)shortest_ns / (double)elapsed < (double)(full_at / 4))
        stream->pause_ns = shortest_ns;
    stream->window_from_ns = now;
    stream->window_bytes = 0;
}

void pk_stream_stay(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int epoll_fd,
                    int64_t until, uint64_t stop_at, uint64_t full_at, int64_t shortest_pause_ns,
                    int64_t longest_pause_ns, pk_drain_result *result, pk_stay_counts *counts)
{
    struct pollfd fds[2];
    struct epoll_event events[STAY_EVENTS];
    uint64_t total = 0;
    int echo_last = 0; /* the stay's last echoed byte, whichever drain wrote it (pk_drain_result) */
    int paused = 0;    /* the drain just made followed a pause: what it got measures the pause */
    int in_set = 0;    /* in_fd is in the loop's set by join_set */
    int watched = stream->watch_fd >= 0;
    fds[0].fd = watched ? stream->event_fd : stream->in_fd; /* watched: the thread's eventfd */
    fds[1].fd = epoll_fd;
    fds[0].events = fds[1].events = POLLIN;
    if (!stream->pause_ns)
        stream->pause_ns = shortest_pause_ns;
    for (;;) {
        int ready, timeout = 0;
        pk_stream_drain(stream, echo_fd, echo_mode, budget, 0, result);
        total += result->total;
        if (result->echo_last)
            echo_last = result->echo_last;
        counts->drains++;
        if (result->eof || (result->read_errno && result->read_errno != EAGAIN) || result->echo_errno ||
            result->echoed < result->last || stream->rest_len || stream->seen >= stop_at)
            break; /* a rest (EINTR): the signal's handler is Python's, which runs once this returns */
        if (stream->pause_ns == NO_PAUSE)
            watch_rate(stream, result->total, full_at, shortest_pause_ns);
        else if (paused)
            adapt_pause(stream, result->total, full_at, shortest_pause_ns, longest_pause_ns);
        paused = 0;
        /* A drain that ended on its budget left bytes in the pipe: only look at the others. */
        if (result->total < budget) {
            if (result->total < full_at && stream->pause_ns > 0 && (result->total || !watched)) {
                int64_t left = until - now_ns();
                struct timespec pause = {0, 0};
                if (left <= 0)
                    break;
                pause.tv_nsec = (long)(left < stream->pause_ns ? left : stream->pause_ns);
                counts->gathers++;
                if (in_set && epoll_ctl(epoll_fd, EPOLL_CTL_DEL, stream->in_fd, NULL) == 0)
                    in_set = 0;
                if (nanosleep(&pause, NULL) < 0)
                    break; /* a signal: the loop is to handle it */
                paused = 1;
            }
            if (!(timeout = wait_ms(until)))
                break; /* until has passed: what the pipe holds is the loop's next wakeup */
        } else if (now_ns() >= until)
            break; /* drains that each end on their budget are bounded by until too */
        /* Watched (the pipe never polled): bytes left or gathered are drained at once unless
         * anything in the set is ready; an empty pipe is waited for by the thread's read, on its
         * eventfd. */
        if (watched && result->total) {
            if (poll(fds + 1, 1, 0) != 0)
                break;
            continue;
        }
        counts->waits++;
        if (watched)
            pk_stream_arm(stream);
        else if (!in_set && stream->pause_ns == NO_PAUSE && timeout)
            in_set = join_set(epoll_fd, stream->in_fd);
        if (in_set) {
            ready = epoll_wait(epoll_fd, events, STAY_EVENTS, timeout);
            if (ready < 0 || others_ready(events, ready, stream->in_fd))
                break; /* interrupted (a signal) or something else is ready: the loop's turn */
        } else {
            ready = poll(fds, 2, timeout);
            if (ready < 0 || fds[1].revents)
                break; /* interrupted (a signal) or something in the loop's set is ready: its turn */
        }
        if (ready == 0 && timeout)
            break; /* until */
    }
    if (in_set)
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, stream->in_fd, NULL); /* out, as the caller left it */
    result->total = total;
    result->echo_last = echo_last;
}
