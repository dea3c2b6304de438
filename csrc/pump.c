/* The native pump; see pump.h for the contract shared with processkit/engine/pump.py. Its
 * hashing thread (copy and digest overlapped) and its pool of read rings are hasher.c's.
 *
 * A ring (--capture-keep tail or head-tail: head < cap) keeps the stream's last bytes in the file
 * itself, byte p >= head at offset head + (p - head) % (cap - head), written with pwrite; of a
 * chunk longer than the ring only its last ring-full is written (the rest would be overwritten
 * within the chunk), and ring_from remembers where such a skip left the ring's valid bytes, for
 * a write error that stops it part-way. Overwritten bytes cannot be hashed as they stream, so a
 * ring is hashed by processkit/engine/capture_keep.py once it is put in order, and never on the thread.
 *
 * Facts about splice(2) that shape the echo-only path: once nothing more is to be captured (no
 * capture, or its cap reached, or its write error latched) the bytes need not reach user space,
 * and splice moves them from the child's pipe to the echo inside the kernel: no copy at all into
 * /dev/null, a terminal or another pipe, and a few syscalls a drain instead of two a chunk. But
 * with SPLICE_F_NONBLOCK it fails with EAGAIN for an empty pipe, a full echo, and a pipe at its
 * end while the echo is full (the kernel looks at the echo's room once the pipe has no writer
 * left to wait for), alike; the ordinary read tells them apart (EAGAIN, a chunk, 0). A short
 * splice tells none of it either (one into a pipe is short whenever that pipe fills), so it does
 * not end the drain as a short read does: the next splice asks, and a drain that ends on an empty
 * pipe costs that splice and a read more. A full echo, or any failure, is left to the ordinary
 * read-and-write step, which queues what the echo cannot take (backpressure, broken echo), and
 * meets the pipe's end, exactly as without splice; a failure that says the
 * echo cannot take spliced bytes at all (EINVAL: a device without splice support, such as
 * /dev/full) stops splicing for the stream. Not into a regular file: splice holds the pipe's lock
 * while the file system takes the bytes, and the child spins on it (measured on tmpfs: 1.2-1.5x
 * the CPU of read and write). Nor into the file the runner's own stderr writes to (the caller
 * passes no PK_ECHO_SPLICE there): the runner must know the last byte echoed there, to start its
 * own line after an unterminated one, and spliced bytes are never seen. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hasher.h"

#define RING_CHUNKS 4

pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, uint64_t head, size_t buf_size,
                         int hash_thread)
{
    pk_stream *stream = calloc(1, sizeof *stream);
    size_t ring_size;
    void *buf;
    if (!stream || !buf_size)
        goto fail;
    ring_size = hash_thread ? buf_size * RING_CHUNKS : buf_size;
    if (!(buf = pk_ring_take(ring_size)))
        goto fail;
    stream->in_fd = in_fd;
    stream->watch_fd = stream->event_fd = -1;
    stream->capture_fd = capture_fd;
    stream->cap = cap;
    stream->head = head < cap ? head : cap;
    stream->ring_from = stream->head;
    stream->buf = buf;
    stream->buf_size = buf_size;
    stream->ring_size = ring_size;
    pk_sha256_init(&stream->sha);
    /* No thread to be had (a process or memory limit): the same results, hashed inline. A ring is
     * not hashed here at all. The thread starts with the first bytes read (pk_stream_drain): a
     * stream that brings none, as most of a batch's short jobs, never pays for one. */
    stream->wants_thread = hash_thread && stream->head == cap;
    return stream;
fail:
    free(stream);
    return NULL;
}

void pk_stream_free(pk_stream *stream)
{
    if (!stream)
        return;
    pk_stream_unwatch(stream);
    if (stream->threaded)
        pk_hasher_stop(stream);
    pk_ring_give_back(stream->buf, stream->ring_size);
    free(stream);
}

#define AT_FILE_OFFSET UINT64_MAX /* put()'s offset: where the file's own offset is */

/* Stores len bytes at file offset `offset` (AT_FILE_OFFSET: at the file's own offset, as the head
 * mode writes a FIFO or device too), retrying partial writes; the first failure other than EINTR
 * latches write_error. Returns the bytes stored. The offset stays unsigned, as every stream
 * position here: one past off_t's range is refused by pwrite (EINVAL), never taken for the
 * sentinel.
 *
 * EINTR at the file's offset leaves the unwritten bytes (still in buf) to the caller as the rest
 * (pk_stream_store_rest): a terminal target raises SIGTTOU at a background job's write with
 * tostop, the interpreter's handler runs only once this returns, and a write retried here would
 * raise it again, for good (echo() says the same). A ring's pwrite targets a regular file, whose
 * write raises no signal: one that came meanwhile was already caught, and the write is retried. */
static size_t put(pk_stream *stream, const unsigned char *data, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t count = offset == AT_FILE_OFFSET
                            ? write(stream->capture_fd, data + done, len - done)
                            : pwrite(stream->capture_fd, data + done, len - done, (off_t)(offset + done));
        if (count < 0 && errno == EINTR && offset == AT_FILE_OFFSET) {
            stream->rest = data + done;
            stream->rest_len = len - done;
            break;
        }
        if (count < 0 && errno == EINTR)
            continue;
        if (count <= 0) {
            /* A write that takes nothing yet reports no error would never finish: call it EIO. */
            stream->write_error = count < 0 ? errno : EIO;
            break;
        }
        done += (size_t)count;
    }
    stream->written += done;
    return done;
}

/* Writes the part of the chunk just read that the file keeps: what falls in the head, in order,
 * and with a ring the chunk's last bytes at their ring offsets (split where they wrap). Returns
 * how many leading bytes of the chunk the head took, for the digest. */
static size_t store(pk_stream *stream, const unsigned char *data, size_t len)
{
    uint64_t start = stream->seen - len, head = stream->head, ring = stream->cap - stream->head;
    uint64_t skip, offset;
    size_t kept = 0, first;
    if (stream->capture_fd < 0 || stream->write_error)
        return 0;
    if (start < head) {
        size_t part = head - start < len ? (size_t)(head - start) : len;
        kept = put(stream, data, part, ring ? start : AT_FILE_OFFSET);
        if (kept < part)
            return kept;
    }
    if (!ring || stream->seen <= head)
        return kept;
    skip = start < head ? head - start : 0;
    if (len > ring && len - ring > skip) {
        skip = len - ring; /* bytes the ring would overwrite within this very chunk */
        stream->ring_from = start + skip;
    }
    stream->written = start + skip;
    offset = (stream->written - head) % ring;
    first = len - skip < ring - offset ? len - (size_t)skip : (size_t)(ring - offset);
    if (put(stream, data + skip, first, head + offset) == first)
        put(stream, data + skip + first, len - (size_t)skip - first, head);
    return kept;
}

/* store(), with the ring's marks kept around it (pump.h): a store per counter, no system call. */
static size_t capture(pk_stream *stream, const unsigned char *data, size_t len)
{
    uint64_t *marks = stream->marks;
    size_t kept;
    if (!marks || stream->capture_fd < 0 || stream->write_error)
        return store(stream, data, len);
    __atomic_store_n(&marks[PK_MARK_PENDING], stream->seen, __ATOMIC_SEQ_CST);
    kept = store(stream, data, len);
    __atomic_store_n(&marks[PK_MARK_RING_FROM], stream->ring_from, __ATOMIC_SEQ_CST);
    __atomic_store_n(&marks[PK_MARK_STORED], stream->written, __ATOMIC_SEQ_CST);
    __atomic_store_n(&marks[PK_MARK_WRITE_ERROR], (uint64_t)(stream->write_error != 0), __ATOMIC_SEQ_CST);
    return kept;
}

/* Hashes retained bytes on the caller's thread, or lets the hashing thread take them. */
static void hash_retained(pk_stream *stream, const unsigned char *data, size_t len)
{
    if (!stream->threaded && stream->head == stream->cap)
        pk_sha256_update(&stream->sha, data, len);
}

int pk_stream_store_rest(pk_stream *stream)
{
    const unsigned char *rest = stream->rest;
    size_t len = stream->rest_len;
    stream->rest_len = 0;
    if (len && stream->capture_fd >= 0 && !stream->write_error)
        hash_retained(stream, rest, put(stream, rest, len, AT_FILE_OFFSET));
    if (stream->threaded && !pk_hasher_hash_small(stream))
        pk_hasher_hand_over(stream, 0, 1);
    return stream->rest_len == 0;
}

/* Writes as much of the chunk as the echo fd takes without blocking; returns the bytes taken.
 * A non-blocking write fails EINTR only for a signal its own call raised: a background job's
 * write on a terminal with tostop (SIGTTOU), whose handler, the interpreter's, runs only once
 * this returns: retried here, the write raised it again, for good. The rest waits as after EAGAIN. */
static size_t echo(int fd, int is_socket, const unsigned char *data, size_t len, int *error)
{
    size_t done = 0;
    while (done < len) {
        ssize_t count = is_socket ? send(fd, data + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                  : write(fd, data + done, len - done);
        if (count < 0 && errno == EINTR)
            break;
        if (count < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                *error = errno;
            break;
        }
        if (count == 0)
            break;
        done += (size_t)count;
    }
    return done;
}

/* Reads one chunk into the ring at `at`, retrying EINTR; returns read()'s result. */
static ssize_t read_chunk(pk_stream *stream, size_t at, size_t len)
{
    ssize_t count;
    do
        count = read(stream->in_fd, stream->buf + at, len);
    while (count < 0 && errno == EINTR);
    return count;
}

#define SPLICE_MOST     ((size_t)1 << 30)
#define SPLICE_ORDINARY (-1) /* empty, ended, or the echo full or failed: the ordinary read says */

/* Whether the echo may be fed by splice from now on (see the facts above). */
static int may_splice(const pk_stream *stream, int echo_fd, int echo_mode, int until_empty)
{
    int capturing = stream->capture_fd >= 0 && !stream->write_error &&
                    (stream->written < stream->cap || stream->head < stream->cap);
    return echo_fd >= 0 && (echo_mode & PK_ECHO_SPLICE) && !until_empty && !capturing && !stream->no_splice;
}

/* Moves up to len bytes from the child's pipe to the echo in the kernel: the bytes moved, 0 at
 * EOF, or SPLICE_ORDINARY (EAGAIN: an empty pipe, a full echo, or a pipe at its end beside a full
 * echo, which the kernel does not tell apart; EINTR: a terminal's SIGTTOU, as echo() says, where
 * the ordinary way stops; a failure). */
static ssize_t splice_chunk(pk_stream *stream, int echo_fd, size_t len)
{
    ssize_t moved = splice(stream->in_fd, NULL, echo_fd, NULL, len, SPLICE_F_NONBLOCK);
    if (moved >= 0)
        return moved;
    if (errno == EINVAL)
        stream->no_splice = 1;
    return SPLICE_ORDINARY;
}

void pk_stream_drain(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int until_empty,
                     pk_drain_result *result)
{
    /* Only a drain's first pass can meet the thread's read: nothing arms it during a drain. */
    int watched = stream->watch_fd >= 0;
    memset(result, 0, sizeof *result);
    /* A safety, not a path: the one caller (NativePump._settle, pump.py) stores a rest before it
     * returns from any drain or stay, retrying from Python so that the signal's handler runs in
     * between, so no drain starts with one. Kept because bytes read past a rest would reach the
     * capture before it, out of order; the check costs one load. */
    if (stream->rest_len && !pk_stream_store_rest(stream)) {
        result->read_errno = EINTR; /* nothing read before the rest is stored */
        return;
    }
    while (result->total < budget) {
        size_t at = 0, len = stream->buf_size, retained;
        unsigned char *chunk;
        ssize_t count = 0;
        int took = 0, early_errno = 0;
        if (watched) {
            /* A watched stream's thread read first (hasher.c); none while it is pending. */
            int state = pk_watch_take(stream, &count, &early_errno);
            watched = 0;
            if (state == PK_TAKE_BUSY) {
                result->read_errno = EAGAIN;
                break;
            }
            took = state == PK_TAKE_TOOK;
        }
        if (!took && may_splice(stream, echo_fd, echo_mode, until_empty)) {
            /* What the budget allows, and at least a chunk as a read would take: one call takes
             * everything the pipe holds. */
            uint64_t left = budget - result->total;
            if (left < len)
                left = len;
            count = splice_chunk(stream, echo_fd, left < SPLICE_MOST ? (size_t)left : SPLICE_MOST);
            if (count == 0) {
                result->eof = 1;
                break;
            }
            if (count > 0) {
                result->total += (uint64_t)count;
                result->last = result->echoed = 0;
                stream->seen += (uint64_t)count;
                /* On even when short: the pipe may be empty for now (the next splice fails, and
                 * the ordinary read below finds it so: the drain ends as after a short read), or
                 * the echo may have filled while the pipe holds more (the ordinary way meets the
                 * full echo: its chunk queued, the stream waiting for the echo's room). Ended
                 * here, a full echo looked like a slow writer: the stream waited to gather
                 * (streams.py's pacing) with the echo's reader idle and the writer blocked on its
                 * full pipe (bench/README.md, "The echo into a pipe its reader drains"). */
                continue;
            }
        }
        if (stream->threaded) {
            at = (size_t)(stream->seen % stream->ring_size);
            if (len > stream->ring_size - at)
                len = stream->ring_size - at;
            if (!took)
                pk_hasher_hand_over(stream, len, 0);
        }
        if (took)
            errno = early_errno; /* the thread's read, made where this one would be */
        else
            count = read_chunk(stream, at, len);
        /* A terminal hands out at most 4 KiB a read: gather what is waiting into one chunk, so
         * it costs one capture write, one echo write and one hash update, not one per read. An
         * end or error met here is met again by the next read, once this chunk is handled. */
        if (until_empty && count > 0) {
            ssize_t more;
            while ((size_t)count < len &&
                   (more = read_chunk(stream, at + (size_t)count, len - (size_t)count)) > 0)
                count += more;
        }
        if (count <= 0) {
            result->eof = count == 0;
            result->read_errno = count < 0 ? errno : 0;
            break;
        }
        if (stream->wants_thread) {
            /* The stream's first bytes, read at the ring's start either way: from here the
             * thread hashes them and all that follow, as if it had run from the start. */
            stream->wants_thread = 0;
            if (stream->seen == 0)
                stream->threaded = pk_hasher_start(stream);
        }
        chunk = stream->buf + at;
        result->total += (uint64_t)count;
        result->last_at = at;
        result->last = (size_t)count;
        result->echoed = 0;
        stream->seen += (uint64_t)count;
        retained = capture(stream, chunk, (size_t)count);
        if (echo_fd >= 0) {
            result->echoed =
                echo(echo_fd, echo_mode & PK_ECHO_SEND, chunk, (size_t)count, &result->echo_errno);
            if (result->echoed)
                result->echo_last = 1 + chunk[result->echoed - 1];
        }
        /* Hashed last so the echo consumer does not wait for it; one update over the whole
         * retained prefix lets full blocks be hashed straight from buf. */
        hash_retained(stream, chunk, retained);
        if (stream->rest_len || (echo_fd >= 0 && result->echoed < (size_t)count))
            break; /* the rest is stored before anything more is read */
        /* A short read emptied the pipe: reading on would take the writer's next few bytes one
         * syscall at a time, the very cost that waiting for the pipe to fill avoids. A terminal
         * is the exception (until_empty): it hands out 4 KiB a read however much is waiting. */
        if ((size_t)count < len && !until_empty)
            break;
    }
    if (stream->threaded && !pk_hasher_hash_small(stream))
        pk_hasher_hand_over(stream, 0, 1); /* the hasher works on while the loop waits */
}

void pk_stream_digest(pk_stream *stream, unsigned char out[32])
{
    if (stream->threaded)
        pk_hasher_wait(stream);
    pk_sha256_final(&stream->sha, out);
}
