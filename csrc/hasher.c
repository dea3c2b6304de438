/* The native pump's hashing thread and its read rings; see hasher.h.
 *
 * Copy and digest overlap: with a hashing thread, chunks are read into a ring of RING_CHUNKS (pump.c)
 * read buffers and the thread hashes the retained prefix of the stream behind the reader, so
 * hashing one chunk runs while the next is read, captured and echoed. The retained bytes are
 * always a prefix of the stream (capture stops for good at the cap or the first write error),
 * so the hasher needs only one number from the reader: how many bytes it may hash. The reader
 * never overwrites ring bytes the hasher has yet to read, and waits (briefly: one chunk's
 * hashing) when the ring is full. Without the thread everything runs on the caller's thread,
 * reading always into the ring's first chunk. Either way the event loop calling this stays
 * single-threaded, and the digest is exactly that of the retained bytes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "hasher.h"

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

/* A watched stream's wait (pump.h, pk_stream_watch), on the hashing thread once it has hashed
 * all that was retained: one blocking read of watch_fd into the ring where the caller's next read
 * would go (every ring byte is free: hashed == written, and the caller reads nothing meanwhile),
 * then event_fd written. Facts: a pipe once polled (poll, select, or an epoll registration) wakes
 * its wait queue on every write for good (`poll_usage` in the kernel's fs/pipe.c), a cost its
 * writer pays per write whoever waits (2 M writes of 100 B: about a fifth more of the writer's
 * CPU; bench/README.md, "A capture's pipe never polled"); a blocking read waits without it, and
 * is woken only by a write into an empty pipe. The read is the thread's only cancellation point
 * (pk_hasher_stop cancels it). Called with the lock held; returns with it held. */
static void watch_read(pk_stream *stream)
{
    size_t at = (size_t)(stream->seen % stream->ring_size), len = stream->ring_size - at;
    uint64_t one = 1;
    ssize_t count;
    int error;
    if (len > stream->buf_size)
        len = stream->buf_size;
    stream->watch_state = PK_WATCH_READING;
    pthread_mutex_unlock(&stream->lock);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    do
        count = read(stream->watch_fd, stream->buf + at, len);
    while (count < 0 && errno == EINTR);
    error = errno;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_mutex_lock(&stream->lock);
    stream->early_count = count;
    stream->early_errno = count < 0 ? error : 0;
    stream->watch_state = PK_WATCH_RETURNED;
    while (write(stream->event_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

/* The hashing thread: hashes ring bytes [hashed, target) of the stream as the reader allows, and
 * makes a watched stream's read when armed. */
static void *hash_behind(void *arg)
{
    pk_stream *stream = arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        uint64_t from = stream->hashed, to = stream->target;
        if (from == to) {
            if (stream->stopping)
                break;
            if (stream->watch_state == PK_WATCH_ARMED)
                watch_read(stream);
            else
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

/* Starts the hashing thread with every signal blocked: signals belong to the event loop.
 * Returns whether it runs; without it the stream hashes inline. */
int pk_hasher_start(pk_stream *stream)
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

/* Stops and joins the hashing thread of a stream that has one, once it has hashed all that was
 * retained; a watched stream's pending read is cancelled (an armed one not begun is not made). */
void pk_hasher_stop(pk_stream *stream)
{
    int watching;
    pthread_mutex_lock(&stream->lock);
    stream->stopping = 1;
    if (stream->watch_state == PK_WATCH_ARMED)
        stream->watch_state = PK_WATCH_UNARMED;
    stream->target = stream->written;
    watching = stream->watch_state == PK_WATCH_READING;
    pthread_cond_signal(&stream->wake);
    pthread_mutex_unlock(&stream->lock);
    if (watching)
        pthread_cancel(stream->hasher);
    pthread_join(stream->hasher, NULL);
    pthread_cond_destroy(&stream->wake);
    pthread_cond_destroy(&stream->room);
    pthread_mutex_destroy(&stream->lock);
}

/* Released read rings, kept for the next streams of the size (a lodged host's next run): a ring
 * is larger than glibc's mmap threshold, so each fresh one would cost an mmap, its first-touch
 * page faults and an munmap. At most POOL_SLOTS are kept, the memory bound. Streams are made and
 * freed on any thread (the API's threads; never the hashing thread), so each slot is only ever
 * emptied or filled by one atomic operation; a pooled ring's first bytes hold its size. */
#define POOL_SLOTS 8
static void *pool[POOL_SLOTS];

void *pk_ring_take(size_t size)
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

void pk_ring_give_back(void *buf, size_t size)
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

/* Lets the hasher take the retained bytes so far (at once with `now`, else once a chunk's worth
 * is waiting, so small reads do not wake it each), then waits until `len` bytes from ring
 * position `seen` are free of bytes it has yet to hash. The unlocked look at `hashed` may be
 * stale, which only errs towards taking the lock. */
void pk_hasher_hand_over(pk_stream *stream, uint64_t len, int now)
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
int pk_hasher_hash_small(pk_stream *stream)
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

/* Hands the hasher all that was retained and waits until it has hashed it. */
void pk_hasher_wait(pk_stream *stream)
{
    pk_hasher_hand_over(stream, 0, 1);
    pthread_mutex_lock(&stream->lock);
    while (stream->hashed != stream->target)
        pthread_cond_wait(&stream->room, &stream->lock);
    pthread_mutex_unlock(&stream->lock);
}

/* Whether pthread_cancel can end a pending read: glibc (2.34 on) loads the unwinder, libgcc_s, at
 * the first cancel and aborts the process when it cannot (a minimal image without it, or no fd
 * left at teardown). Loaded here once, kept for good, before any watch starts; where it cannot
 * be, no watch is taken and the pipe is polled as before. */
static int unwinder_loaded(void)
{
    static int loaded = -1;
    if (loaded < 0)
        loaded = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE) != NULL;
    return loaded;
}

int pk_stream_watch(pk_stream *stream, int watch_fd, int event_fd)
{
    if (!stream->wants_thread || stream->seen || !unwinder_loaded())
        return 0; /* a head capture with a thread to be had, before its first bytes */
    stream->watch_fd = watch_fd;
    stream->event_fd = event_fd;
    stream->wants_thread = 0;
    if ((stream->threaded = pk_hasher_start(stream)))
        return 1;
    stream->watch_fd = stream->event_fd = -1;
    stream->wants_thread = 1;
    return 0;
}

void pk_stream_arm(pk_stream *stream)
{
    if (stream->watch_fd < 0)
        return;
    pthread_mutex_lock(&stream->lock);
    if (stream->watch_state == PK_WATCH_UNARMED) {
        stream->target = stream->written; /* the thread hashes it all before it reads */
        stream->watch_state = PK_WATCH_ARMED;
        pthread_cond_signal(&stream->wake);
    }
    pthread_mutex_unlock(&stream->lock);
}

int pk_watch_take(pk_stream *stream, ssize_t *count, int *error)
{
    int state = PK_TAKE_IDLE;
    uint64_t value;
    pthread_mutex_lock(&stream->lock);
    if (stream->watch_state == PK_WATCH_RETURNED) {
        *count = stream->early_count;
        *error = stream->early_errno;
        stream->watch_state = PK_WATCH_UNARMED;
        state = PK_TAKE_TOOK;
    } else if (stream->watch_state != PK_WATCH_UNARMED)
        state = PK_TAKE_BUSY;
    pthread_mutex_unlock(&stream->lock);
    if (state == PK_TAKE_TOOK)
        while (read(stream->event_fd, &value, sizeof value) < 0 && errno == EINTR)
            ;
    return state;
}

void pk_stream_unwatch(pk_stream *stream)
{
    if (stream->watch_fd < 0)
        return;
    if (stream->threaded)
        pk_hasher_stop(stream);
    stream->threaded = 0;
    close(stream->watch_fd);
    stream->watch_fd = stream->event_fd = -1;
}
