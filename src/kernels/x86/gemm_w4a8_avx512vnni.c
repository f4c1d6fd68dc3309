/* kernels/x86/gemm_w4a8_avx512vnni.c — w4a8 GEMM on the X16 layout with AVX-512 VNNI.
 *
 * One 64-byte chunk of a row block is 16 rows x 8 k (kernels/layout.h):
 *
 *   w  = load 64 B             lo = w & 0x0F         -> 16 rows x k 0..3 (u8)
 *                              hi = (w >> 4) & 0x0F  -> 16 rows x k 4..7 (u8)
 *   acc[t] += vpdpbusd(lo, set1_epi32(a[t][k0..k3]))   16 int32 lanes = 16 rows
 *   acc[t] += vpdpbusd(hi, set1_epi32(a[t][k4..k7]))
 *
 * After each group: y[t] += (d_w[16 rows] * xd[t][g]) * (float)(acc[t] - 8 xsum[t][g]),
 * the same float operations in the same order as nb_gemm_w4a8_ref, so the result is
 * bit-identical to the reference.
 *
 * Tiles: NT tokens x RB row blocks of 16 rows, every unpacked chunk is reused NT
 * times. Decode (1 token) walks one row block at a time (one sequential stream: in
 * interleaved runs 1 block streamed ~30% faster from DRAM than 2 or 4 blocks 8 n_in
 * bytes apart, and software prefetch did not help) with two accumulators (lo, hi);
 * prefill takes 4 tokens x 2 blocks.
 * Tokens are walked in cache blocks of TOK_BLOCK so that a row block's weights
 * (8 * n_in bytes) stay in L1/L2 while the activations of the block sit in L2.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

#define TOK_BLOCK 64
#ifndef DEC_RB /* decode tile: row blocks, accumulators per block */
#define DEC_RB 1
#endif
#ifndef DEC_S
#define DEC_S 2
#endif
#ifndef PF_DIST /* decode prefetch distance in bytes (0: none) */
#define PF_DIST 0
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE __m512 scales16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE int32_t ld32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE void tile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                 int64_t ldxq, int64_t ldxg, const uint8_t *qs, const uint16_t *ds, int64_t n_in,
                 int group, int64_t blk, const int NT, const int RB)
{
    const int S = NT == 1 ? DEC_S : 1; /* split lo / hi accumulators for short tiles */
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 yv[NT][RB];
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            yv[t][b] = _mm512_setzero_ps();
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512i acc[NT][RB][4]; /* S partial sums: independent dpbusd chains */
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < RB; b++)
                for (int s = 0; s < S; s++)
                    acc[t][b][s] = _mm512_setzero_si512();
        for (int64_t c0 = g * cpg; c0 < (g + 1) * cpg; c0 += 2) /* cpg is even */
            for (int u = 0; u < 2; u++) {
                const int64_t c = c0 + u;
                const int slo = S == 4 ? 2 * u : 0, shi = S == 4 ? 2 * u + 1 : S - 1;
                __m512i lo[RB], hi[RB];
                for (int b = 0; b < RB; b++) {
                    __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                    if (PF_DIST && NT == 1)
                        _mm_prefetch((const char *)(wp + b * bstride + c * 64 + PF_DIST),
                                     _MM_HINT_T0);
                    lo[b] = _mm512_and_si512(w, m4);
                    hi[b] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
                }
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = xq + t * ldxq + c * 8;
                    __m512i a0 = _mm512_set1_epi32(ld32(a)), a1 = _mm512_set1_epi32(ld32(a + 4));
                    for (int b = 0; b < RB; b++) {
                        acc[t][b][slo] = _mm512_dpbusd_epi32(acc[t][b][slo], lo[b], a0);
                        acc[t][b][shi] = _mm512_dpbusd_epi32(acc[t][b][shi], hi[b], a1);
                    }
                }
            }
        __m512 dw[RB];
        for (int b = 0; b < RB; b++)
            dw[b] = scales16(ds + ((blk + b) * ng + g) * 16);
        for (int t = 0; t < NT; t++) {
            __m512 xdv = _mm512_set1_ps(xd[t * ldxg + g]);
            __m512i corr = _mm512_set1_epi32(8 * xsum[t * ldxg + g]);
            for (int b = 0; b < RB; b++) {
                __m512i s = acc[t][b][0];
                for (int i = 1; i < S; i++)
                    s = _mm512_add_epi32(s, acc[t][b][i]);
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(s, corr));
                yv[t][b] = _mm512_add_ps(yv[t][b], _mm512_mul_ps(_mm512_mul_ps(dw[b], xdv), f));
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            _mm512_storeu_ps(y + t * ldy + (blk + b) * 16, yv[t][b]);
}

/* Tokens [0, nt) of row blocks [blk, blk + RB), in tiles of 4 tokens. */
INLINE void tokens(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *qs, const uint16_t *ds, int64_t n_in,
                   int group, int64_t blk, int nt, const int RB)
{
    int t = 0;
#define TILE(NT)                                                                                   \
    tile(y + t * ldy, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg, ldxq, ldxg, qs, ds,      \
         n_in, group, blk, NT, RB)
    for (; t + 4 <= nt; t += 4)
        TILE(4);
    switch (nt - t) {
    case 3: TILE(3); break;
    case 2: TILE(2); break;
    case 1: TILE(1); break;
    default: break;
    }
#undef TILE
}

void nb_gemm_w4a8_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    const uint8_t *qs = (const uint8_t *)w_blob + pl.offset[0];
    const uint16_t *ds = (const uint16_t *)((const uint8_t *)w_blob + pl.offset[1]);
    int64_t b0 = r0 / 16, b1 = r1 / 16;
    for (int t0 = 0; t0 < n_tok; t0 += TOK_BLOCK) {
        int nt = n_tok - t0 < TOK_BLOCK ? n_tok - t0 : TOK_BLOCK;
        float *yt = y + t0 * ldy;
        const int8_t *xqt = xq + t0 * ldxq;
        const float *xdt = xd + t0 * ldxg;
        const int32_t *xst = xsum + t0 * ldxg;
        int64_t blk = b0;
        if (nt == 1) {
            for (; blk + DEC_RB <= b1; blk += DEC_RB)
                tile(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, 1, DEC_RB);
            for (; blk < b1; blk++)
                tile(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, 1, 1);
            continue;
        }
        for (; blk + 2 <= b1; blk += 2)
            tokens(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, nt, 2);
        for (; blk < b1; blk++)
            tokens(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, nt, 1);
    }
}
