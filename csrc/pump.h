/* processkit native pump: drain a child pipe, echo it, write the capped part it keeps (its head,
 * or with a ring its tail too), hash what was written in order.
 *
 * The contract mirrors processkit/engine/pump_python.py:PythonPump exactly; the property tests
 * compare the two byte for byte. */
#ifndef PROCESSKIT_PUMP_H
#define PROCESSKIT_PUMP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sha256.h"

typedef struct pk_stream {
    int in_fd;          /* the child's pipe (non-blocking) */
    int capture_fd;     /* -1 when not capturing */
    uint64_t cap;       /* retained-bytes ceiling for the capture file */
    uint64_t head;      /* the leading bytes kept in order; the other cap - head are a ring */
    uint64_t seen;      /* every byte read, past the cap too */
    uint64_t written;   /* the stream's bytes [0, written) went to the file (a ring keeps their last) */
    uint64_t ring_from; /* a ring holds every byte from here on that it has room for (written skips) */
    int write_error;    /* errno of the first failed capture write; latched */
    int no_splice;      /* the echo refused spliced bytes: read and write from now on */
    /* A head write a signal interrupted (EINTR): its unwritten bytes, still in buf, stored by
     * pk_stream_store_rest before anything more is read. */
    const unsigned char *rest;
    size_t rest_len;
    pk_sha256 sha;      /* digest of exactly the retained bytes (without a ring: a ring's file is
                         * hashed once in order, by processkit/engine/capture_keep.py) */
    unsigned char *buf; /* the read ring: ring_size bytes, read buf_size at a time */
    size_t buf_size;
    size_t ring_size; /* buf_size, or RING_CHUNKS of them with a hashing thread */
    int threaded;     /* a hashing thread hashes behind the reader (hasher.c) */
    int wants_thread; /* ... started with the stream's first bytes (none come for most short runs) */
    /* With the thread, under lock: */
    uint64_t target; /* the reader lets the hasher hash stream bytes [0, target) */
    uint64_t hashed; /* ... and it has hashed [0, hashed) */
    int stopping;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the hasher waits here for a new target */
    pthread_cond_t room; /* the reader waits here for the hasher to free ring bytes */
    pthread_t hasher;
    /* With a ring, the stream's counters in a mapping shared with a file (NULL: none), kept as
     * each chunk is stored so a reader of a killed runner's file knows what the ring holds
     * (processkit/capture_layout.py): PK_MARK_PENDING is the chunk's end, stored before any of
     * its bytes; then ring_from, written and write_error, in that order, once it is stored. */
    uint64_t *marks;
    /* Watched (pk_stream_watch): the pipe is never polled; when the caller would wait for it,
     * the hashing thread waits in a blocking read of watch_fd (a descriptor of its own for the
     * same pipe) into the ring where the next read goes, and writes event_fd once it returned.
     * Under lock: */
    int watch_fd;    /* -1: not watched */
    int event_fd;    /* the caller's eventfd, read back when the read is taken */
    int watch_state; /* PK_WATCH_UNARMED, _ARMED, _READING or _RETURNED, below */
    ssize_t early_count;
    int early_errno;
    int64_t pause_ns;       /* a stay's pause to gather small pieces, adapted to the writer (stay.c) */
    int64_t window_from_ns; /* with no pause: when the window measuring the writer's rate began */
    uint64_t window_bytes;  /* ... and what the stay read in it */
} pk_stream;

/* A watch's read, one state at a time: none asked for; asked for (the thread is to make it); being
 * made (or about to be); returned, early_count bytes (0: the pipe's end; -1: early_errno), not yet
 * taken by a drain. */
#define PK_WATCH_UNARMED  0
#define PK_WATCH_ARMED    1
#define PK_WATCH_READING  2
#define PK_WATCH_RETURNED 3

#define PK_MARK_STORED      0
#define PK_MARK_PENDING     1
#define PK_MARK_RING_FROM   2
#define PK_MARK_WRITE_ERROR 3

typedef struct pk_drain_result {
    uint64_t total; /* bytes read by this call */
    size_t last_at; /* where in buf the last chunk read starts */
    size_t last;    /* bytes of the last chunk read, still in buf */
    size_t echoed;  /* leading bytes of that last chunk written to the echo fd */
    int eof;        /* the last read returned 0 */
    int read_errno; /* EAGAIN when the pipe ran dry; another errno when a read failed */
    int echo_errno; /* set when an echo write failed for a reason other than EAGAIN */
    int echo_last;  /* 1 + the last byte this call wrote to the echo fd; 0 when it wrote none */
} pk_drain_result;

/* head: the leading bytes kept in order (cap keeps the head only; less makes the rest of the cap
 * a ring holding the stream's last bytes, stream position p >= head at file offset
 * head + (p - head) % (cap - head), written with pwrite and not hashed). hash_thread: hash on a
 * thread of its own, overlapping the digest with reading and copying. */
pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, uint64_t head, size_t buf_size,
                         int hash_thread);
void pk_stream_free(pk_stream *stream);

#define PK_ECHO_SEND   1 /* the echo is a socket: send(MSG_DONTWAIT), its flags being shared */
#define PK_ECHO_SPLICE 2 /* the echo may be fed by splice(2): a pipe, FIFO or character device */

/* One wakeup's work: read chunks of up to buf_size bytes from in_fd until a read comes back short
 * (the pipe is empty for now; with until_empty, until a read finds nothing), at EOF, on a read
 * error, or once `budget` bytes were read. Each chunk is counted; the part kept is written to
 * capture_fd (retrying partial writes; the first failure other than EINTR latches write_error)
 * and, without a ring, hashed exactly as written; then, when echo_fd >= 0, the chunk is written to
 * echo_fd without blocking (send(MSG_DONTWAIT) with PK_ECHO_SEND in echo_mode). An echo that
 * takes less than a whole chunk, or fails, ends the call: the bytes of the last chunk past
 * result->echoed remain in buf for the caller to queue. Once nothing more is to be captured, an echo with
 * PK_ECHO_SPLICE is fed by splice(2) instead, with the same counts (pump.c); such a chunk leaves
 * result->last 0 and is not seen by echo_last. A short splice does not end the call (one into a
 * pipe is short when the echo fills): where the next splice moves nothing, the ordinary read
 * says why (an empty pipe ends the call, its end is EOF, and a chunk read meets the full echo as
 * above). A capture write at the file's offset
 * that fails EINTR ends the call too, its unwritten bytes left as the stream's rest; a call that
 * finds a rest stores it first, and ends with read_errno EINTR, reading nothing, while it is still
 * not stored. */
void pk_stream_drain(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int until_empty,
                     pk_drain_result *result);

/* Stores the rest an interrupted capture write left (as the drain that made it would have), once
 * the caller ran its signal handlers; returns 0 when a signal interrupted it again (rest kept). */
int pk_stream_store_rest(pk_stream *stream);

typedef struct pk_stay_counts {
    uint64_t drains;  /* pk_stream_drain calls the stay made */
    uint64_t waits;   /* epoll_waits it made on the loop's set */
    uint64_t gathers; /* pauses it made to let small pieces gather */
} pk_stay_counts;

/* Drains as pk_stream_drain does, then waits with poll(2) on in_fd, which the caller took out of
 * the loop's level-triggered epoll set (epoll_fd), and on that set, draining in_fd each time it
 * becomes ready while nothing else in the set is (stay.c: without a pause it waits with in_fd back
 * in the set, out again at its end; a watched stream waits on its thread's read instead). Ends
 * at the pipe's end, a read error, an echo that did not take a whole chunk, seen reaching stop_at,
 * anything else ready, an interrupted wait, or the CLOCK_MONOTONIC nanosecond `until`. After a
 * drain short of full_at it first sleeps the stream's pause (pause_ns, adapted as stay.c says
 * between shortest_pause_ns and longest_pause_ns). result is the last drain's, except total (every
 * byte the stay read) and echo_last (the last byte any of its drains echoed). counts are added to. */
void pk_stream_stay(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int epoll_fd,
                    int64_t until, uint64_t stop_at, uint64_t full_at, int64_t shortest_pause_ns,
                    int64_t longest_pause_ns, pk_drain_result *result, pk_stay_counts *counts);

/* Watches the stream's pipe through watch_fd (a blocking descriptor of the pipe in_fd reads,
 * which the stream owns from here on and closes) without polling it: a pipe polled once wakes its
 * wait queue on every write for good, which costs its writer (hasher.c). Only for a stream made
 * with a hashing thread and keeping the head; the thread starts now. Returns whether it does
 * (else watch_fd is left to the caller, and the stream is read as before). */
int pk_stream_watch(pk_stream *stream, int watch_fd, int event_fd);

/* Where the caller would wait for the pipe to become readable: the thread reads it (blocking)
 * and writes event_fd when it returned; the next drain takes what it read first. A drain while
 * that read is pending reads nothing (EAGAIN). Idempotent. */
void pk_stream_arm(pk_stream *stream);

/* Ends the watch: the thread's pending read is cancelled and the thread joined (what it read and
 * nobody took is dropped, as a closed pipe's bytes are), after it hashed what was retained; the
 * stream hashes inline from here, and watch_fd is closed. */
void pk_stream_unwatch(pk_stream *stream);

/* Digest of the retained bytes so far (waits for the hashing thread to catch up; the digest
 * state is not disturbed, so hashing may go on after). */
void pk_stream_digest(pk_stream *stream, unsigned char out[32]);

#endif
