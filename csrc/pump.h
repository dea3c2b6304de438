/* processkit native pump: read a chunk, echo it, write its capped prefix, hash what was written.
 *
 * The contract mirrors processkit/engine/pump.py:PythonPump exactly; the property tests
 * compare the two byte for byte. */
#ifndef PROCESSKIT_PUMP_H
#define PROCESSKIT_PUMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pk_sha256 {
    uint32_t state[8];
    uint64_t length;          /* bytes hashed so far */
    unsigned char block[64];  /* pending partial block */
    size_t used;              /* bytes pending in block */
} pk_sha256;

typedef struct pk_stream {
    int in_fd;                /* the child's pipe (non-blocking) */
    int capture_fd;           /* -1 when not capturing */
    uint64_t cap;             /* retained-bytes ceiling for the capture file */
    uint64_t seen;            /* every byte read, past the cap too */
    uint64_t written;         /* bytes retained in the capture file */
    int write_error;          /* errno of the first failed capture write; latched */
    pk_sha256 sha;            /* digest of exactly the retained bytes */
    unsigned char *buf;       /* reusable read buffer of buf_size bytes */
    size_t buf_size;
    unsigned gather;          /* reads per event into the rest of buf while data is there
                               * (a pty hands out 4 KiB a read); 0 or 1: one read */
} pk_stream;

typedef struct pk_pump_result {
    ssize_t nread;            /* bytes read; 0 at EOF; -1 on error (see read_errno) */
    size_t echoed;            /* leading bytes of buf written to the echo fd */
    int read_errno;
    int echo_errno;           /* set when the echo write failed for a reason other than EAGAIN */
} pk_pump_result;

pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, size_t buf_size);
void pk_stream_free(pk_stream *stream);

/* One readiness event: read up to buf_size bytes from in_fd into buf (up to gather reads; an
 * end, error or EAGAIN after some data is left for the next event); count them; write the part
 * that fits under cap to capture_fd (retrying partial writes and EINTR; the first other failure
 * latches write_error) and hash exactly what was written; then, when echo_fd >= 0, write the
 * chunk to echo_fd without blocking (send(MSG_DONTWAIT) when echo_is_socket). Bytes past
 * result->echoed remain in buf for the caller to queue. */
void pk_stream_pump(pk_stream *stream, int echo_fd, int echo_is_socket, pk_pump_result *result);

/* Digest of the retained bytes so far (the stream's state is not disturbed). */
void pk_stream_digest(const pk_stream *stream, unsigned char out[32]);

/* Incremental SHA-256; dispatches to the CPU's SHA extensions when present at run time. */
void pk_sha256_init(pk_sha256 *ctx);
void pk_sha256_update(pk_sha256 *ctx, const unsigned char *data, size_t len);
void pk_sha256_final(const pk_sha256 *ctx, unsigned char out[32]);
int pk_sha256_accelerated(void);

#endif
