/* SHA-256 (FIPS 180-4) with run-time dispatch between a portable compression function and the
 * CPU's SHA extensions (x86 SHA-NI, ARMv8 crypto). PROCESSKIT_SHA=portable, as the process has
 * it when the module is loaded, forces the portable path so tests can check that both paths
 * agree. */
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define PK_SHA_X86 1
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__GNUC__) && defined(__aarch64__) && defined(__linux__)
#define PK_SHA_ARM 1
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

/* Processes `blocks` consecutive 64-byte blocks read straight from `data`. */
typedef void (*compress_fn)(uint32_t state[8], const unsigned char *data, size_t blocks);

static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const uint32_t H0[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* ---- portable ------------------------------------------------------------------------------ */

static inline uint32_t rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

#define BSIG0(x)     (rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22))
#define BSIG1(x)     (rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25))
#define SSIG0(x)     (rotr(x, 7) ^ rotr(x, 18) ^ ((x) >> 3))
#define SSIG1(x)     (rotr(x, 17) ^ rotr(x, 19) ^ ((x) >> 10))
#define CH(x, y, z)  (((x) & (y)) ^ (~(x) & (z)))
#define MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))

/* The schedule lives in a 16-word ring: W[t] overwrites W[t-16] in place. */
#define SCHEDULE(t) (w[(t)&15] += SSIG1(w[((t)-2) & 15]) + w[((t)-7) & 15] + SSIG0(w[((t)-15) & 15]))

/* One round with the working variables renamed instead of shifted. */
#define ROUND(a, b, c, d, e, f, g, h, t, wt)                      \
    do {                                                          \
        uint32_t t1 = (h) + BSIG1(e) + CH(e, f, g) + K[t] + (wt); \
        (d) += t1;                                                \
        (h) = t1 + BSIG0(a) + MAJ(a, b, c);                       \
    } while (0)

#define EIGHT_ROUNDS(t, W)                                  \
    do {                                                    \
        ROUND(a, b, c, d, e, f, g, h, (t) + 0, W((t) + 0)); \
        ROUND(h, a, b, c, d, e, f, g, (t) + 1, W((t) + 1)); \
        ROUND(g, h, a, b, c, d, e, f, (t) + 2, W((t) + 2)); \
        ROUND(f, g, h, a, b, c, d, e, (t) + 3, W((t) + 3)); \
        ROUND(e, f, g, h, a, b, c, d, (t) + 4, W((t) + 4)); \
        ROUND(d, e, f, g, h, a, b, c, (t) + 5, W((t) + 5)); \
        ROUND(c, d, e, f, g, h, a, b, (t) + 6, W((t) + 6)); \
        ROUND(b, c, d, e, f, g, h, a, (t) + 7, W((t) + 7)); \
    } while (0)

#define W_LOADED(t) w[t]

static void compress_portable(uint32_t state[8], const unsigned char *data, size_t blocks)
{
    uint32_t w[16];
    for (; blocks; blocks--, data += 64) {
        uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
        uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
        for (int i = 0; i < 16; i++)
            w[i] = load_be32(data + 4 * i);
        EIGHT_ROUNDS(0, W_LOADED);
        EIGHT_ROUNDS(8, W_LOADED);
        for (int t = 16; t < 64; t += 16) {
            EIGHT_ROUNDS(t, SCHEDULE);
            EIGHT_ROUNDS(t + 8, SCHEDULE);
        }
        state[0] += a;
        state[1] += b;
        state[2] += c;
        state[3] += d;
        state[4] += e;
        state[5] += f;
        state[6] += g;
        state[7] += h;
    }
}

/* ---- x86 SHA-NI ---------------------------------------------------------------------------- */

#ifdef PK_SHA_X86
#define PK_SHANI __attribute__((target("sha,sse4.1,ssse3")))

/* Four rounds. The instructions keep the state as ABEF/CDGH pairs; after each sha256rnds2 the
 * old ABEF is the new CDGH, so two calls bring both registers back to their roles. */
static inline PK_SHANI __attribute__((always_inline)) void shani_quad(__m128i *abef, __m128i *cdgh, __m128i w,
                                                                      int t)
{
    __m128i wk = _mm_add_epi32(w, _mm_load_si128((const __m128i *)&K[t]));
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, wk);
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(wk, 0x0e));
}

/* W[t..t+3] from the previous sixteen words, held as w0 (oldest) .. w3. */
static inline PK_SHANI __attribute__((always_inline)) __m128i shani_schedule(__m128i w0, __m128i w1,
                                                                             __m128i w2, __m128i w3)
{
    __m128i x = _mm_sha256msg1_epu32(w0, w1);         /* W[t-16] + s0(W[t-15]) */
    x = _mm_add_epi32(x, _mm_alignr_epi8(w3, w2, 4)); /* + W[t-7] */
    return _mm_sha256msg2_epu32(x, w3);               /* + s1(W[t-2]) */
}

static PK_SHANI void compress_shani(uint32_t state[8], const unsigned char *data, size_t blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xb1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1b);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xf0);

    for (; blocks; blocks--, data += 64) {
        __m128i abef_in = abef, cdgh_in = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 0)), bswap);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16)), bswap);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 32)), bswap);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 48)), bswap);
        shani_quad(&abef, &cdgh, w0, 0);
        shani_quad(&abef, &cdgh, w1, 4);
        shani_quad(&abef, &cdgh, w2, 8);
        shani_quad(&abef, &cdgh, w3, 12);
        for (int t = 16; t < 64; t += 16) {
            w0 = shani_schedule(w0, w1, w2, w3);
            shani_quad(&abef, &cdgh, w0, t);
            w1 = shani_schedule(w1, w2, w3, w0);
            shani_quad(&abef, &cdgh, w1, t + 4);
            w2 = shani_schedule(w2, w3, w0, w1);
            shani_quad(&abef, &cdgh, w2, t + 8);
            w3 = shani_schedule(w3, w0, w1, w2);
            shani_quad(&abef, &cdgh, w3, t + 12);
        }
        abef = _mm_add_epi32(abef, abef_in);
        cdgh = _mm_add_epi32(cdgh, cdgh_in);
    }

    /* Back from ABEF/CDGH to A..H in memory order. */
    __m128i feba = _mm_shuffle_epi32(abef, 0x1b);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xb1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xf0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

static compress_fn extension_compress(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return NULL;
    if (!(ecx & bit_SSE4_1) || !(ecx & bit_SSSE3))
        return NULL;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return NULL;
    return (ebx & (1u << 29)) ? compress_shani : NULL;
}
#endif

/* ---- ARMv8 crypto extensions ------------------------------------------------------------- */

#ifdef PK_SHA_ARM
#if defined(__clang__)
#define PK_ARMSHA __attribute__((target("sha2")))
#else
#define PK_ARMSHA __attribute__((target("+crypto")))
#endif

/* Four rounds; sha256h2 needs ABCD from before sha256h updated it. */
static inline PK_ARMSHA __attribute__((always_inline)) void armsha_quad(uint32x4_t *abcd, uint32x4_t *efgh,
                                                                        uint32x4_t w, int t)
{
    uint32x4_t wk = vaddq_u32(w, vld1q_u32(&K[t]));
    uint32x4_t abcd_before = *abcd;
    *abcd = vsha256hq_u32(*abcd, *efgh, wk);
    *efgh = vsha256h2q_u32(*efgh, abcd_before, wk);
}

static inline PK_ARMSHA __attribute__((always_inline)) uint32x4_t armsha_load(const unsigned char *p)
{
    return vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p)));
}

static PK_ARMSHA void compress_armsha(uint32_t state[8], const unsigned char *data, size_t blocks)
{
    uint32x4_t abcd = vld1q_u32(&state[0]);
    uint32x4_t efgh = vld1q_u32(&state[4]);

    for (; blocks; blocks--, data += 64) {
        uint32x4_t abcd_in = abcd, efgh_in = efgh;
        uint32x4_t w0 = armsha_load(data + 0);
        uint32x4_t w1 = armsha_load(data + 16);
        uint32x4_t w2 = armsha_load(data + 32);
        uint32x4_t w3 = armsha_load(data + 48);
        armsha_quad(&abcd, &efgh, w0, 0);
        armsha_quad(&abcd, &efgh, w1, 4);
        armsha_quad(&abcd, &efgh, w2, 8);
        armsha_quad(&abcd, &efgh, w3, 12);
        for (int t = 16; t < 64; t += 16) {
            w0 = vsha256su1q_u32(vsha256su0q_u32(w0, w1), w2, w3);
            armsha_quad(&abcd, &efgh, w0, t);
            w1 = vsha256su1q_u32(vsha256su0q_u32(w1, w2), w3, w0);
            armsha_quad(&abcd, &efgh, w1, t + 4);
            w2 = vsha256su1q_u32(vsha256su0q_u32(w2, w3), w0, w1);
            armsha_quad(&abcd, &efgh, w2, t + 8);
            w3 = vsha256su1q_u32(vsha256su0q_u32(w3, w0), w1, w2);
            armsha_quad(&abcd, &efgh, w3, t + 12);
        }
        abcd = vaddq_u32(abcd, abcd_in);
        efgh = vaddq_u32(efgh, efgh_in);
    }
    vst1q_u32(&state[0], abcd);
    vst1q_u32(&state[4], efgh);
}

static compress_fn extension_compress(void)
{
    return (getauxval(AT_HWCAP) & HWCAP_SHA2) ? compress_armsha : NULL;
}
#endif

#if !defined(PK_SHA_X86) && !defined(PK_SHA_ARM)
static compress_fn extension_compress(void)
{
    return NULL;
}
#endif

/* ---- dispatch ------------------------------------------------------------------------------ */

static compress_fn chosen; /* resolved once; concurrent first calls all store the same value */

static compress_fn resolve(void)
{
    compress_fn fn = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (fn)
        return fn;
    const char *forced = getenv("PROCESSKIT_SHA");
    fn = (forced && strcmp(forced, "portable") == 0) ? NULL : extension_compress();
    if (!fn)
        fn = compress_portable;
    __atomic_store_n(&chosen, fn, __ATOMIC_RELAXED);
    return fn;
}

/* Resolved when the module is loaded, on the importing thread: getenv is not safe beside a
 * setenv on another thread (os.environ's writes, in a caller's thread), and the first hash may
 * run on the pump's hashing thread, where no caller could tell when it reads. */
__attribute__((constructor)) static void resolve_at_load(void)
{
    resolve();
}

int pk_sha256_accelerated(void)
{
    return resolve() != compress_portable;
}

void pk_sha256_init(pk_sha256 *ctx)
{
    memcpy(ctx->state, H0, sizeof H0);
    ctx->length = 0;
    ctx->used = 0;
}

void pk_sha256_update(pk_sha256 *ctx, const unsigned char *data, size_t len)
{
    if (len == 0)
        return;
    compress_fn compress = resolve();
    ctx->length += len;
    if (ctx->used) {
        size_t take = 64 - ctx->used;
        if (take > len)
            take = len;
        memcpy(ctx->block + ctx->used, data, take);
        ctx->used += take;
        data += take;
        len -= take;
        if (ctx->used < 64)
            return;
        compress(ctx->state, ctx->block, 1);
        ctx->used = 0;
    }
    if (len >= 64) {
        compress(ctx->state, data, len / 64);
        data += len & ~(size_t)63;
        len &= 63;
    }
    memcpy(ctx->block, data, len);
    ctx->used = len;
}

void pk_sha256_final(const pk_sha256 *ctx, unsigned char out[32])
{
    compress_fn compress = resolve();
    uint32_t state[8];
    unsigned char tail[128] = {0};
    uint64_t bits = ctx->length * 8;
    /* The pending bytes, 0x80, zeros, then the 64-bit length: one block or two. */
    size_t total = ctx->used + 1 + 8 <= 64 ? 64 : 128;

    memcpy(state, ctx->state, sizeof state);
    memcpy(tail, ctx->block, ctx->used);
    tail[ctx->used] = 0x80;
    store_be32(tail + total - 8, (uint32_t)(bits >> 32));
    store_be32(tail + total - 4, (uint32_t)bits);
    compress(state, tail, total / 64);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, state[i]);
}
