/* The native pump; see pump.h for the contract shared with processkit/engine/pump.py.
 *
 * Everything runs on the caller's thread: a helper thread hashing the previous chunk measured
 * slower on small machines, where the producer already occupies the other core. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pump.h"

pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, size_t buf_size)
{
    pk_stream *stream = calloc(1, sizeof *stream);
    void *buf;
    if (!stream)
        return NULL;
    /* Page alignment lets the kernel copy in and out of the buffer at full speed. */
    if (posix_memalign(&buf, 4096, buf_size ? buf_size : 1) != 0) {
        free(stream);
        return NULL;
    }
    stream->in_fd = in_fd;
    stream->capture_fd = capture_fd;
    stream->cap = cap;
    stream->buf = buf;
    stream->buf_size = buf_size;
    pk_sha256_init(&stream->sha);
    return stream;
}

void pk_stream_free(pk_stream *stream)
{
    if (!stream)
        return;
    free(stream->buf);
    free(stream);
}

/* Writes the part of a chunk that fits under the cap; returns how many bytes the kernel took. */
static size_t capture(pk_stream *stream, const unsigned char *data, size_t len)
{
    size_t done = 0;
    if (stream->capture_fd < 0 || stream->write_error || stream->written >= stream->cap)
        return 0;
    if (len > stream->cap - stream->written)
        len = (size_t)(stream->cap - stream->written);
    while (done < len) {
        ssize_t count = write(stream->capture_fd, data + done, len - done);
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

/* Reads one chunk into buf, retrying EINTR; returns read()'s result. */
static ssize_t read_chunk(pk_stream *stream)
{
    ssize_t count;
    do
        count = read(stream->in_fd, stream->buf, stream->buf_size);
    while (count < 0 && errno == EINTR);
    return count;
}

void pk_stream_drain(pk_stream *stream, int echo_fd, int echo_is_socket, uint64_t budget, pk_drain_result *result)
{
    memset(result, 0, sizeof *result);
    while (result->total < budget) {
        ssize_t count = read_chunk(stream);
        size_t retained;
        if (count <= 0) {
            result->eof = count == 0;
            result->read_errno = count < 0 ? errno : 0;
            return;
        }
        result->total += (uint64_t)count;
        result->last = (size_t)count;
        result->echoed = 0;
        stream->seen += (uint64_t)count;
        retained = capture(stream, stream->buf, (size_t)count);
        if (echo_fd >= 0)
            result->echoed = echo(echo_fd, echo_is_socket, stream->buf, (size_t)count, &result->echo_errno);
        /* Hashed last so the echo consumer does not wait for it; one update over the whole
         * retained prefix lets full blocks be hashed straight from buf. */
        pk_sha256_update(&stream->sha, stream->buf, retained);
        if (echo_fd >= 0 && result->echoed < (size_t)count)
            return;
    }
}

void pk_stream_digest(const pk_stream *stream, unsigned char out[32])
{
    pk_sha256_final(&stream->sha, out);
}
