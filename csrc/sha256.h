/* Incremental SHA-256 (FIPS 180-4) for the capture digest; sha256.c holds the portable and the
 * CPU-accelerated compression functions. */
#ifndef PROCESSKIT_SHA256_H
#define PROCESSKIT_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct pk_sha256 {
    uint32_t state[8];
    uint64_t length;         /* bytes hashed so far */
    unsigned char block[64]; /* pending partial block */
    size_t used;             /* bytes pending in block */
} pk_sha256;

/* Dispatches to the CPU's SHA extensions when present at run time. */
void pk_sha256_init(pk_sha256 *ctx);
void pk_sha256_update(pk_sha256 *ctx, const unsigned char *data, size_t len);
void pk_sha256_final(const pk_sha256 *ctx, unsigned char out[32]);
int pk_sha256_accelerated(void);

#endif
