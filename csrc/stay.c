/* The native pump's stay: a stream that reads on every wakeup (a fast writer, pacing's "fast"
 * in processkit/engine/streams.py) keeps pumping in C between wakeups instead of going back
 * through the event loop for each one. See pump.h for the contract.
 *
 * Why: once a writer keeps the pipe busy, the runner pays per wakeup a turn of the Python loop
 * (the readiness wait's result as objects, the callback, the drain's bookkeeping: about a third
 * of a wakeup's cost in the runner) and, more, the wakeup itself: each write the writer makes
 * while the runner waits in epoll_wait wakes it, a context switch on both sides. Here a wakeup
 * is one epoll_wait on the loop's own epoll set and one drain, and the pause below makes the
 * writer's writes stop waking the runner at all (bench/README.md, "The native pump's stay").
 *
 * Facts that make waiting on the loop's own epoll set safe: every registration there is
 * level-triggered (processkit/readiness.py), so an epoll_wait that reports another fd consumes
 * nothing: the loop's next wait reports it again. Anything but this stream's pipe being ready (a
 * timer's deadline, the signal wakeup socket, the control socket, a pidfd, another stream or
 * run), an interrupted wait, the end of the pipe, a read error, an echo that cannot take all
 * (its backlog is Python's) or crossing stop_at ends the stay: the loop then does what it would
 * have done, at most one wakeup later. The stay never outlasts `until`, which the caller sets at
 * or before the loop's next timer.
 *
 * Gathering: after a drain that left the pipe empty and was short of `full_at` (the pipe's
 * "nearly full") the stay sleeps before its next wait (bounded: never past `until`), so the
 * writer's pieces gather in the pipe and are taken a pile at a time, as the loop's own pacing
 * does between turns. A reader asleep in epoll_wait is woken by every write (a context switch
 * each, on both sides); one asleep in nanosleep is not: the pipe only marks itself ready. The
 * pause adapts to the writer (kept in the stream), from `shortest_pause_ns` at first: doubled
 * up to `longest_pause_ns` when what it gathered was under a quarter of full_at, halved down to
 * the shortest when it came near full_at (the writer may have waited on a full pipe; the next
 * wait is on readiness). Measured on the 4 KiB echo: ~22,000 wakeups per GiB without the pause,
 * ~1,700 with 0.3 ms of it and the whole tree's CPU ~0.7x; shorter pauses (down to 20 us, the
 * pause then shrinking as a GB/s writer nears full_at in each) cost ~10 % more CPU, and 1 ms
 * as much CPU but 1.35x the wall time (bench/README.md, "The native pump's stay"). A writer of
 * 100 B pieces needs the longer pause: at 0.3 ms it woke the runner up to ~4x as often. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

#include "pump.h"

#define STAY_EVENTS 8

static int64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Milliseconds to wait for `until` (rounded up: epoll_wait's unit), 0 when it has passed. */
static int wait_ms(int64_t until)
{
    int64_t left = until - now_ns();
    if (left <= 0)
        return 0;
    return (int)((left + 999999) / 1000000);
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

void pk_stream_stay(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int epoll_fd,
                    int64_t until, uint64_t stop_at, uint64_t full_at, int64_t shortest_pause_ns,
                    int64_t longest_pause_ns, pk_drain_result *result, pk_stay_counts *counts)
{
    struct epoll_event events[STAY_EVENTS];
    uint64_t total = 0;
    int paused = 0; /* the drain just made followed a pause: what it got measures the pause */
    if (!stream->pause_ns)
        stream->pause_ns = shortest_pause_ns;
    for (;;) {
        int ready, timeout = 0;
        pk_stream_drain(stream, echo_fd, echo_mode, budget, 0, result);
        total += result->total;
        counts->drains++;
        if (result->eof || (result->read_errno && result->read_errno != EAGAIN) || result->echo_errno ||
            result->echoed < result->last || stream->seen >= stop_at)
            break;
        /* A drain that ended on its budget left bytes in the pipe: only look at the others. */
        if (result->total < budget) {
            if (paused && result->total >= full_at)
                stream->pause_ns =
                    stream->pause_ns / 2 > shortest_pause_ns ? stream->pause_ns / 2 : shortest_pause_ns;
            else if (paused && result->total < full_at / 4)
                stream->pause_ns =
                    stream->pause_ns * 2 < longest_pause_ns ? stream->pause_ns * 2 : longest_pause_ns;
            paused = 0;
            if (result->total < full_at && stream->pause_ns > 0) {
                int64_t left = until - now_ns();
                struct timespec pause = {0, 0};
                if (left <= 0)
                    break;
                pause.tv_nsec = (long)(left < stream->pause_ns ? left : stream->pause_ns);
                counts->gathers++;
                if (nanosleep(&pause, NULL) < 0)
                    break; /* a signal: the loop is to handle it */
                paused = 1;
            }
            if (!(timeout = wait_ms(until)))
                break; /* until has passed: what the pipe holds is the loop's next wakeup */
        }
        counts->waits++;
        ready = epoll_wait(epoll_fd, events, STAY_EVENTS, timeout);
        if (ready < 0 || others_ready(events, ready, stream->in_fd))
            break; /* interrupted (a signal) or something else is ready: the loop's turn */
        if (ready == 0 && timeout)
            break; /* until */
    }
    result->total = total;
}
