/* kernels/x86/gemm_w4a8_avx512vnni.c — w4a8 GEMM on the X16 layout with AVX-512 VNNI.
 *
 * One 64-byte chunk of a row block is 16 rows x 8 k (core/wformat.h):
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
 * Tiles: decode (1 token) walks one row block at a time (one sequential stream: in
 * interleaved runs 1 block streamed ~30% faster from DRAM than 2 or 4 blocks 8 n_in
 * bytes apart) with two accumulators (lo, hi), and prefetches PF_DIST bytes ahead:
 * in the kernel lab (1 thread, the 151936 x 2048 head) 0 / 1024 / 4096 / 6144 / 8192 /
 * 16384 bytes streamed 35 / 36 / 41 / 44 / 44 / 35 GB/s; in situ (qwen3-1.7b w4a8,
 * tg128, 2 threads, 3 interleaved passes) 0 gave 46.1-48.0 tok/s, 4096-12288 gave
 * 49.2-51.0. (Session 1 found no gain from prefetching, but then the accumulators
 * were on the stack.)
 * Prefill takes PF_NT tokens x PF_RB row blocks: 12 int32 accumulators in registers
 * for one group, every unpacked chunk reused PF_NT times. Measured in the kernel
 * lab (1 thread, 512 tokens, 2048x6144 and 6144x2048): 4x3, 5x2, 4x2 and 3x4 are
 * within 5% of each other (~740 GOP/s, 70% of the vpdpbusd peak); 8x2 and 8x1 are
 * 10-20% slower; activations as an embedded {1to16} broadcast operand were ~20%
 * slower than a broadcast shared by the row blocks.
 * Tokens are walked in cache blocks of TOK_BLOCK (32..256 measured the same) so that
 * a row block's weights (8 * n_in bytes) stay in L1/L2 while the activations of the
 * block sit in L2.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

#ifndef TOK_BLOCK
#define TOK_BLOCK 64
#endif
#ifndef DEC_RB /* decode tile: row blocks, accumulators per block */
#define DEC_RB 1
#endif
#ifndef DEC_S
#define DEC_S 2
#endif
#ifndef PF_DIST /* decode prefetch distance in bytes (0: none) */
#define PF_DIST 6144
#endif
#ifndef PF_NT /* prefill tile: tokens x row blocks */
#define PF_NT 4
#endif
#ifndef PF_RB
#define PF_RB 3
#endif
#ifndef PF_NEXT /* prefill: prefetch the next row blocks into L2 during the first tile */
#define PF_NEXT 1
#endif
#ifndef NB_DPBUSD_ASM
#define NB_DPBUSD_ASM 1
#endif
#define PF_MAXT 8
#define PF_MAXB 4
#define INLINE static inline __attribute__((always_inline))

/* acc + u8 x s8 dot products (vpdpbusd) with the accumulator kept in its register: GCC 12
 * compiles the intrinsic in the tiles below with a register copy of the accumulator in
 * and out of most of them (~20 vmovdqa a 24-vpdpbusd chunk), which the front end pays
 * for. The asm names the accumulator as the instruction's own destination. */
INLINE __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8)
{
#if NB_DPBUSD_ASM
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, u8, s8);
#endif
}

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

/* Decode tile: 1 token x RB row blocks, S independent accumulator chains per block.
 * Array sizes are compile-time constants (a variable-length array here puts the
 * accumulators in memory: every vpdpbusd then waits on a store and a reload). */
INLINE void tile1(float *y, const int8_t *xq, const float *xd, const int32_t *xsum,
                  const uint8_t *qs, const uint16_t *ds, int64_t n_in, int group, int64_t blk,
                  const int RB)
{
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 yv[4];
#pragma GCC unroll 4
    for (int b = 0; b < RB; b++)
        yv[b] = _mm512_setzero_ps();
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512i acc[4][4];
#pragma GCC unroll 4
        for (int b = 0; b < RB; b++)
#pragma GCC unroll 4
            for (int s = 0; s < DEC_S; s++)
                acc[b][s] = _mm512_setzero_si512();
        for (int64_t c0 = g * cpg; c0 < (g + 1) * cpg; c0 += 2) /* cpg is even */
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const int64_t c = c0 + u;
                const int slo = DEC_S == 4 ? 2 * u : 0, shi = DEC_S == 4 ? 2 * u + 1 : DEC_S - 1;
                const __m512i a0 = _mm512_set1_epi32(ld32(xq + c * 8));
                const __m512i a1 = _mm512_set1_epi32(ld32(xq + c * 8 + 4));
#pragma GCC unroll 4
                for (int b = 0; b < RB; b++) {
                    __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                    if (PF_DIST)
                        _mm_prefetch((const char *)(wp + b * bstride + c * 64 + PF_DIST),
                                     _MM_HINT_T0);
                    __m512i lo = _mm512_and_si512(w, m4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
                    acc[b][slo] = _mm512_dpbusd_epi32(acc[b][slo], lo, a0);
                    acc[b][shi] = _mm512_dpbusd_epi32(acc[b][shi], hi, a1);
                }
            }
        const __m512 xdv = _mm512_set1_ps(xd[g]);
        const __m512i corr = _mm512_set1_epi32(8 * xsum[g]);
#pragma GCC unroll 4
        for (int b = 0; b < RB; b++) {
            __m512i s = acc[b][0];
#pragma GCC unroll 4
            for (int i = 1; i < DEC_S; i++)
                s = _mm512_add_epi32(s, acc[b][i]);
            __m512 dw = scales16(ds + ((blk + b) * ng + g) * 16);
            __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(s, corr));
            yv[b] = _mm512_add_ps(yv[b], _mm512_mul_ps(_mm512_mul_ps(dw, xdv), f));
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < RB; b++)
        _mm512_storeu_ps(y + (blk + b) * 16, yv[b]);
}

/* Prefill tile: NT tokens x RB row blocks, NT * RB int32 accumulators held in
 * registers for one group; each unpacked chunk feeds NT * 2 vpdpbusd. The float
 * sums live in y (loaded, updated and stored once per group), which leaves the
 * register file to the accumulators: NT * RB + 2 RB + 3 <= 32. */
INLINE void tilen(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                  int64_t ldxq, int64_t ldxg, const uint8_t *qs, const uint16_t *ds, int64_t n_in,
                  int group, int64_t blk, const int NT, const int RB, int64_t pf)
{
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512i acc[PF_MAXT][PF_MAXB];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
            for (int b = 0; b < RB; b++)
                acc[t][b] = _mm512_setzero_si512();
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            __m512i lo[PF_MAXB], hi[PF_MAXB];
#pragma GCC unroll 4
            for (int b = 0; b < RB; b++) {
                __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                if (pf) _mm_prefetch((const char *)(wp + b * bstride + c * 64 + pf), _MM_HINT_T1);
                lo[b] = _mm512_and_si512(w, m4);
                hi[b] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const int8_t *a = xq + t * ldxq + c * 8;
                const __m512i a0 = _mm512_set1_epi32(ld32(a)), a1 = _mm512_set1_epi32(ld32(a + 4));
#pragma GCC unroll 4
                for (int b = 0; b < RB; b++) {
                    acc[t][b] = dpbusd(acc[t][b], lo[b], a0);
                    acc[t][b] = dpbusd(acc[t][b], hi[b], a1);
                }
            }
        }
        __m512 dw[PF_MAXB];
#pragma GCC unroll 4
        for (int b = 0; b < RB; b++)
            dw[b] = scales16(ds + ((blk + b) * ng + g) * 16);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            const __m512 xdv = _mm512_set1_ps(xd[t * ldxg + g]);
            const __m512i corr = _mm512_set1_epi32(8 * xsum[t * ldxg + g]);
#pragma GCC unroll 4
            for (int b = 0; b < RB; b++) {
                float *yp = y + t * ldy + (blk + b) * 16;
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t][b], corr));
                __m512 prev = g ? _mm512_loadu_ps(yp) : _mm512_setzero_ps();
                _mm512_storeu_ps(yp, _mm512_add_ps(prev, _mm512_mul_ps(_mm512_mul_ps(dw[b], xdv), f)));
            }
        }
    }
}

/* Tokens [0, nt) of row blocks [blk, blk + RB), in tiles of PF_NT tokens. */
INLINE void tokens(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *qs, const uint16_t *ds, int64_t n_in,
                   int group, int64_t blk, int nt, const int RB)
{
    int t = 0;
    /* the first tile asks for the next row blocks' chunks (RB row blocks on: where this
     * thread goes next) while the tiles of these blocks compute from L1/L2 */
#define TILE(NT)                                                                                   \
    tilen(y + t * ldy, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg, ldxq, ldxg, qs, ds,     \
          n_in, group, blk, NT, RB, t == 0 && PF_NEXT ? RB * 8 * n_in : 0)
    for (; t + PF_NT <= nt; t += PF_NT)
        TILE(PF_NT);
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
                tile1(yt, xqt, xdt, xst, qs, ds, n_in, group, blk, DEC_RB);
            for (; blk < b1; blk++)
                tile1(yt, xqt, xdt, xst, qs, ds, n_in, group, blk, 1);
            continue;
        }
        for (; blk + PF_RB <= b1; blk += PF_RB)
            tokens(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, nt, PF_RB);
        for (; blk < b1; blk++)
            tokens(yt, ldy, xqt, xdt, xst, ldxq, ldxg, qs, ds, n_in, group, blk, nt, 1);
    }
}
