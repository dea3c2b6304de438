/* The native pump; see pump.h for the contract shared with processkit/engine/pump.py.
 *
 * Copy and digest overlap: with a hashing thread, chunks are read into a ring of RING_CHUNKS
 * read buffers and the thread hashes the retained prefix of the stream behind the reader, so
 * hashing one chunk runs while the next is read, captured and echoed. The retained bytes are
 * always a prefix of the stream (capture stops for good at the cap or the first write error),
 * so the hasher needs only one number from the reader: how many bytes it may hash. The reader
 * never overwrites ring bytes the hasher has yet to read, and waits (briefly: one chunk's
 * hashing) when the ring is full. Without the thread everything runs on the caller's thread,
 * reading always into the ring's first chunk. Either way the event loop calling this stays
 * single-threaded, and the digest is exactly that of the retained bytes.
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
 * /dev/null, a terminal or another pipe, and one syscall a drain instead of two a chunk. But
 * with SPLICE_F_NONBLOCK it fails with EAGAIN for an empty pipe and a full echo alike; only the
 * pipe's fill level (FIONREAD) tells them apart. A full echo, or any failure, is left to the
 * ordinary read-and-write step, which queues what the echo cannot take (backpressure, broken
 * echo) exactly as without splice; a failure that says the echo cannot take spliced bytes at all
 * (EINVAL: a device without splice support, such as /dev/full) stops splicing for the stream.
 * Not into a regular file: splice holds the pipe's lock while the file system takes the bytes,
 * and the child spins on it (measured on tmpfs: 1.2-1.5x the CPU of read and write). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pump.h"

#define RING_CHUNKS 4

static void *hash_behind(void *arg);

/* Starts the hashing thread with every signal blocked: signals belong to the event loop.
 * Returns whether it runs; without it the stream hashes inline. */
static int start_hasher(pk_stream *stream)
{
    sigset_t all, old;
    int failed;
    /* Default mutex and condition attributes: these initialisations cannot fail on Linux. */
    pthread_mutex_init(&stream->lock, NULL);
    pthread_cond_init(&stream->wake, NULL);
    pthread_cond_init(&stream->room, NULL);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    failed = pthread_create(&stream->hasher, NULL, hash_behind, stream);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) {
        pthread_cond_destroy(&stream->room);
        pthread_cond_destroy(&stream->wake);
        pthread_mutex_destroy(&stream->lock);
    }
    return !failed;
}

/* Released read rings, kept for the next streams of the size (a lodged host's next run): a ring
 * is larger than glibc's mmap threshold, so each fresh one would cost an mmap, its first-touch
 * page faults and an munmap. At most POOL_SLOTS are kept, the memory bound. Streams are made and
 * freed on any thread (the API's threads; never the hashing thread), so each slot is only ever
 * emptied or filled by one atomic operation; a pooled ring's first bytes hold its size. */
#define POOL_SLOTS 8
static void *pool[POOL_SLOTS];

static void *take_ring(size_t size)
{
    void *buf;
    int slot;
    for (slot = 0; slot < POOL_SLOTS; slot++) {
        void *none = NULL;
        buf = __atomic_exchange_n(&pool[slot], NULL, __ATOMIC_ACQ_REL);
        if (!buf)
            continue;
        if (*(size_t *)buf == size)
            return buf;
        /* Another size: back where it was, unless the slot was filled meanwhile. */
        if (!__atomic_compare_exchange_n(&pool[slot], &none, buf, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(buf);
    }
    /* Page alignment lets the kernel copy in and out of the buffer at full speed. */
    return posix_memalign(&buf, 4096, size) == 0 ? buf : NULL;
}

static void give_back_ring(void *buf, size_t size)
{
    int slot;
    if (size >= sizeof size) {
        *(size_t *)buf = size;
        for (slot = 0; slot < POOL_SLOTS; slot++) {
            void *none = NULL;
            if (__atomic_compare_exchange_n(&pool[slot], &none, buf, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return;
        }
    }
    free(buf);
}

pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, uint64_t head, size_t buf_size,
                         int hash_thread)
{
    pk_stream *stream = calloc(1, sizeof *stream);
    size_t ring_size;
    void *buf;
    if (!stream || !buf_size)
        goto fail;
    ring_size = hash_thread ? buf_size * RING_CHUNKS : buf_size;
    if (!(buf = take_ring(ring_size)))
        goto fail;
    stream->in_fd = in_fd;
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
    if (stream->threaded) {
        pthread_mutex_lock(&stream->lock);
        stream->stopping = 1;
        pthread_cond_signal(&stream->wake);
        pthread_mutex_unlock(&stream->lock);
        pthread_join(stream->hasher, NULL);
        pthread_cond_destroy(&stream->wake);
        pthread_cond_destroy(&stream->room);
        pthread_mutex_destroy(&stream->lock);
    }
    give_back_ring(stream->buf, stream->ring_size);
    free(stream);
}

/* Hashes stream bytes [from, to), which the ring still holds, wrapping at its end. */
static void hash_ring(pk_stream *stream, uint64_t from, uint64_t to)
{
    while (from < to) {
        size_t at = (size_t)(from % stream->ring_size);
        size_t len = stream->ring_size - at;
        if (len > to - from)
            len = (size_t)(to - from);
        pk_sha256_update(&stream->sha, stream->buf + at, len);
        from += len;
    }
}

/* The hashing thread: hashes ring bytes [hashed, target) of the stream as the reader allows. */
static void *hash_behind(void *arg)
{
    pk_stream *stream = arg;
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        uint64_t from = stream->hashed, to = stream->target;
        if (from == to) {
            if (stream->stopping)
                break;
            pthread_cond_wait(&stream->wake, &stream->lock);
            continue;
        }
        pthread_mutex_unlock(&stream->lock);
        hash_ring(stream, from, to);
        pthread_mutex_lock(&stream->lock);
        __atomic_store_n(&stream->hashed, to, __ATOMIC_RELEASE);
        pthread_cond_signal(&stream->room);
    }
    pthread_mutex_unlock(&stream->lock);
    return NULL;
}

/* Lets the hasher take the retained bytes so far (at once with `now`, else once a chunk's worth
 * is waiting, so small reads do not wake it each), then waits until `len` bytes from ring
 * position `seen` are free of bytes it has yet to hash. The unlocked look at `hashed` may be
 * stale, which only errs towards taking the lock. */
static void hand_over(pk_stream *stream, uint64_t len, int now)
{
    uint64_t hashed = __atomic_load_n(&stream->hashed, __ATOMIC_ACQUIRE);
    int has_room = hashed == stream->written || stream->seen + len <= hashed + stream->ring_size;
    if (has_room && !now && stream->written - stream->target < stream->buf_size)
        return;
    pthread_mutex_lock(&stream->lock);
    if (stream->target != stream->written) {
        stream->target = stream->written;
        pthread_cond_signal(&stream->wake);
    }
    while (stream->hashed != stream->written && stream->seen + len > stream->hashed + stream->ring_size)
        pthread_cond_wait(&stream->room, &stream->lock);
    pthread_mutex_unlock(&stream->lock);
}

/* A wakeup that brought less than a chunk (a writer coalesced by waits) is hashed on the
 * caller's thread when the hasher is idle: waking a thread costs more than hashing a few KiB.
 * While it is idle (hashed == target) only the reader changes target, so the hasher keeps off
 * the digest state until both move on together. Returns whether it did. */
static int hash_small_inline(pk_stream *stream)
{
    uint64_t from;
    pthread_mutex_lock(&stream->lock);
    from = stream->target;
    if (stream->hashed != from || stream->written - from >= stream->buf_size) {
        pthread_mutex_unlock(&stream->lock);
        return 0;
    }
    pthread_mutex_unlock(&stream->lock);
    hash_ring(stream, from, stream->written);
    pthread_mutex_lock(&stream->lock);
    stream->target = stream->written;
    __atomic_store_n(&stream->hashed, stream->written, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&stream->lock);
    return 1;
}

#define AT_FILE_OFFSET UINT64_MAX /* put()'s offset: where the file's own offset is */

/* Stores len bytes at file offset `offset` (AT_FILE_OFFSET: at the file's own offset, as the head
 * mode writes a FIFO or device too), retrying partial writes and EINTR; the first other failure
 * latches write_error. Returns the bytes stored. The offset stays unsigned, as every stream
 * position here: one past off_t's range is refused by pwrite (EINVAL), never taken for the
 * sentinel. */
static size_t put(pk_stream *stream, const unsigned char *data, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t count = offset == AT_FILE_OFFSET
                            ? write(stream->capture_fd, data + done, len - done)
                            : pwrite(stream->capture_fd, data + done, len - done, (off_t)(offset + done));
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

/* Writes as much of the chunk as the echo fd takes without blocking; returns the bytes taken. */
static size_t echo(int fd, int is_socket, const unsigned char *data, size_t len, int *error)
{
    size_t done = 0;
    while (done < len) {
        ssize_t count = is_socket ? send(fd, data + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                  : write(fd, data + done, len - done);
        if (count < 0 && errno == EINTR)
            continue;
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
#define SPLICE_EMPTY    (-1) /* the pipe is empty for now */
#define SPLICE_ORDINARY (-2) /* the echo is full or failed: take this chunk the ordinary way */

/* Whether the echo may be fed by splice from now on (see the facts above). */
static int may_splice(const pk_stream *stream, int echo_fd, int echo_mode, int until_empty)
{
    int capturing = stream->capture_fd >= 0 && !stream->write_error &&
                    (stream->written < stream->cap || stream->head < stream->cap);
    return echo_fd >= 0 && (echo_mode & PK_ECHO_SPLICE) && !until_empty && !capturing && !stream->no_splice;
}

/* Moves up to len bytes from the child's pipe to the echo in the kernel: the bytes moved, 0 at
 * EOF, SPLICE_EMPTY or SPLICE_ORDINARY. */
static ssize_t splice_chunk(pk_stream *stream, int echo_fd, size_t len)
{
    ssize_t moved;
    int queued;
    do
        moved = splice(stream->in_fd, NULL, echo_fd, NULL, len, SPLICE_F_NONBLOCK);
    while (moved < 0 && errno == EINTR);
    if (moved >= 0)
        return moved;
    if (errno == EAGAIN)
        return ioctl(stream->in_fd, FIONREAD, &queued) == 0 && queued == 0 ? SPLICE_EMPTY : SPLICE_ORDINARY;
    if (errno == EINVAL)
        stream->no_splice = 1;
    return SPLICE_ORDINARY;
}

void pk_stream_drain(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int until_empty,
                     pk_drain_result *result)
{
    memset(result, 0, sizeof *result);
    while (result->total < budget) {
        size_t at = 0, len = stream->buf_size, retained;
        unsigned char *chunk;
        ssize_t count;
        if (may_splice(stream, echo_fd, echo_mode, until_empty)) {
            /* What the budget allows, and at least a chunk as a read would take: one call takes
             * everything the pipe holds. */
            uint64_t left = budget - result->total;
            if (left < len)
                left = len;
            count = splice_chunk(stream, echo_fd, left < SPLICE_MOST ? (size_t)left : SPLICE_MOST);
            if (count == 0 || count == SPLICE_EMPTY) {
                result->eof = count == 0;
                result->read_errno = count ? EAGAIN : 0;
                break;
            }
            if (count > 0) {
                result->total += (uint64_t)count;
                result->last = result->echoed = 0;
                stream->seen += (uint64_t)count;
                if ((uint64_t)count < left)
                    break; /* the pipe is empty for now, or the echo filled: as after a short read */
                continue;
            }
        }
        if (stream->threaded) {
            at = (size_t)(stream->seen % stream->ring_size);
            if (len > stream->ring_size - at)
                len = stream->ring_size - at;
            hand_over(stream, len, 0);
        }
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
                stream->threaded = start_hasher(stream);
        }
        chunk = stream->buf + at;
        result->total += (uint64_t)count;
        result->last_at = at;
        result->last = (size_t)count;
        result->echoed = 0;
        stream->seen += (uint64_t)count;
        retained = capture(stream, chunk, (size_t)count);
        if (echo_fd >= 0)
            result->echoed =
                echo(echo_fd, echo_mode & PK_ECHO_SEND, chunk, (size_t)count, &result->echo_errno);
        /* Hashed last so the echo consumer does not wait for it; one update over the whole
         * retained prefix lets full blocks be hashed straight from buf. */
        if (!stream->threaded && stream->head == stream->cap)
            pk_sha256_update(&stream->sha, chunk, retained);
        if (echo_fd >= 0 && result->echoed < (size_t)count)
            break;
        /* A short read emptied the pipe: reading on would take the writer's next few bytes one
         * syscall at a time, the very cost that waiting for the pipe to fill avoids. A terminal
         * is the exception (until_empty): it hands out 4 KiB a read however much is waiting. */
        if ((size_t)count < len && !until_empty)
            break;
    }
    if (stream->threaded && !hash_small_inline(stream))
        hand_over(stream, 0, 1); /* the hasher works on while the loop waits */
}

void pk_stream_digest(pk_stream *stream, unsigned char out[32])
{
    if (stream->threaded) {
        hand_over(stream, 0, 1);
        pthread_mutex_lock(&stream->lock);
        while (stream->hashed != stream->target)
            pthread_cond_wait(&stream->room, &stream->lock);
        pthread_mutex_unlock(&stream->lock);
    }
    pk_sha256_final(&stream->sha, out);
}
