/* The native pump's hashing thread and its read rings (hasher.c): internal to the pump, which
 * calls these only for a stream with a thread (stream->threaded) or for its ring. */
#ifndef PROCESSKIT_HASHER_H
#define PROCESSKIT_HASHER_H

#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "pump.h"

/* Starts the stream's hashing thread; returns whether it runs (else the stream hashes inline). */
int pk_hasher_start(pk_stream *stream);

/* Stops and joins it. */
void pk_hasher_stop(pk_stream *stream);

/* Lets the hasher take what was retained so far (at once with `now`, else once a chunk's worth
 * waits), then waits until `len` ring bytes from stream position `seen` are free. */
void pk_hasher_hand_over(pk_stream *stream, uint64_t len, int now);

/* Hashes a wakeup's few retained bytes on the caller's thread while the hasher is idle; returns
 * whether it did. */
int pk_hasher_hash_small(pk_stream *stream);

/* Hands the hasher all that was retained and waits until it has hashed it. */
void pk_hasher_wait(pk_stream *stream);

#define PK_TAKE_IDLE 0 /* the caller may read the pipe */
#define PK_TAKE_BUSY 1 /* the thread's read is pending: the caller reads nothing */
#define PK_TAKE_TOOK 2 /* the thread's read returned: *count (-1: *error), at the ring's next place */

/* A watched stream's read made by the thread, taken by the caller (its event_fd read back):
 * PK_TAKE_IDLE, _BUSY or _TOOK. */
int pk_watch_take(pk_stream *stream, ssize_t *count, int *error);

/* A page-aligned read ring of `size` bytes, from the pool of released ones when it has one. */
void *pk_ring_take(size_t size);

/* The ring back to the pool (or freed when the pool is full). */
void pk_ring_give_back(void *buf, size_t size);

#endif
