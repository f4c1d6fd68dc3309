/* kernels/x86/gemm_w4a16_avx512.c — w4a16 GEMM on the X16 layout, f32 activations,
 * AVX-512F FMA.
 *
 * Per group g of row block b (16 rows, one f32 lane each):
 *   s[t]  = sum_k q[k] * x[t][k]          q from the chunk: byte j of each row's dword
 *                                         of lo / hi (vpshufb to a zero-extended dword,
 *                                         cvtdq2ps), one FMA per k and token
 *   y[t] += d[16] * s[t] + m[16] * xs[t][g]   xs = sum of the group's x, once per token
 * This sums in another order than the reference (which decodes w = d q + m first):
 * the results agree within TOL_W4A16_X16 of tests/test_kernels_x86.c.
 *
 * Tiles: NT tokens x RB row blocks; each decoded k-vector is reused NT times.
 * Tokens go in cache blocks of TOK_BLOCK (<= 32: xs of a block is TOK_BLOCK * n_in / G
 * floats and must fit the n_in floats of scratch).
 */
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx512_loads.h"

#define TOK_BLOCK 32
#define INLINE    static inline __attribute__((always_inline))

/* shuffle control: byte j of each dword -> the dword's low byte, zeros above */
/* Decode streams one row block at a time and prefetches DEC_PF_DIST bytes ahead. Kernel
 * lab on the Zen 5 dev VM (the 151936 x 2048 head from DRAM, 1 thread): pairs of blocks
 * 13.5 GB/s, one block 26.7, one block + prefetch 34.0 (the kernel's compute ceiling,
 * cache-resident, is ~36). Not measured in situ: this CPU has AVX512-BF16, whose
 * kernel is used instead. */
#define DEC_PF_DIST 6144

INLINE __m512i byte_ctrl(int j)
{
    return _mm512_set4_epi32((int)0x80808000u | (12 + j), (int)0x80808000u | (8 + j),
                             (int)0x80808000u | (4 + j), (int)0x80808000u | j);
}

INLINE void tile(float *y, int64_t ldy, const float *x, int64_t ldx, const float *xs,
                 const uint8_t *qs, const uint16_t *ds, const uint16_t *ms, int64_t n_in, int group,
                 int64_t blk, const int NT, const int RB)
{
    const int S = NT == 1 ? 4 : NT == 2 ? 2 : 1;
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i ctrl[4] = {byte_ctrl(0), byte_ctrl(1), byte_ctrl(2), byte_ctrl(3)};
    __m512 yv[4][2]; /* fixed sizes (NT <= 4, RB <= 2), not VLAs: kept in registers */
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            yv[t][b] = _mm512_setzero_ps();
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512 acc[4][2][4]; /* S partial sums per tile entry: independent FMA chains */
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < RB; b++)
                for (int s = 0; s < S; s++)
                    acc[t][b][s] = _mm512_setzero_ps();
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            __m512i lo[2], hi[2];
            for (int b = 0; b < RB; b++) {
                __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                if (NT == 1)
                    _mm_prefetch((const char *)(wp + b * bstride + c * 64 + DEC_PF_DIST),
                                 _MM_HINT_T0);
                lo[b] = _mm512_and_si512(w, m4);
                hi[b] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            }
            for (int kk = 0; kk < 8; kk++) {
                __m512 qf[2];
                for (int b = 0; b < RB; b++)
                    qf[b] = _mm512_cvtepi32_ps(
                        _mm512_shuffle_epi8(kk < 4 ? lo[b] : hi[b], ctrl[kk & 3]));
                for (int t = 0; t < NT; t++) {
                    __m512 xv = _mm512_set1_ps(x[t * ldx + c * 8 + kk]);
                    for (int b = 0; b < RB; b++)
                        acc[t][b][kk % S] = _mm512_fmadd_ps(qf[b], xv, acc[t][b][kk % S]);
                }
            }
        }
        for (int b = 0; b < RB; b++) {
            __m512 dv = nb_bf16x16(ds + ((blk + b) * ng + g) * 16);
            __m512 mv = nb_bf16x16(ms + ((blk + b) * ng + g) * 16);
            for (int t = 0; t < NT; t++) {
                __m512 a = acc[t][b][0];
                for (int s = 1; s < S; s++)
                    a = _mm512_add_ps(a, acc[t][b][s]);
                yv[t][b] = _mm512_fmadd_ps(dv, a, yv[t][b]);
                yv[t][b] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[t * ng + g]), yv[t][b]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            _mm512_storeu_ps(y + t * ldy + (blk + b) * 16, yv[t][b]);
}

INLINE void tokens(float *y, int64_t ldy, const float *x, int64_t ldx, const float *xs,
                   const uint8_t *qs, const uint16_t *ds, const uint16_t *ms, int64_t n_in,
                   int group, int64_t blk, int nt, const int RB)
{
    int64_t ng = n_in / group;
    int t = 0;
#define TILE(NT)                                                                                   \
    tile(y + t * ldy, ldy, x + t * ldx, ldx, xs + t * ng, qs, ds, ms, n_in, group, blk, NT, RB)
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

void nb_gemm_w4a16_x16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx,
                              const void *w_blob, int64_t n_out, int64_t n_in, int group, int n_tok,
                              int64_t r0, int64_t r1, float *scratch)
{
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return;
    const uint8_t *qs = wpl.qs;
    const uint16_t *ds = wpl.ds, *ms = wpl.ms;
    int64_t ng = n_in / group, b0 = r0 / 16, b1 = r1 / 16;
    for (int t0 = 0; t0 < n_tok; t0 += TOK_BLOCK) {
        int nt = n_tok - t0 < TOK_BLOCK ? n_tok - t0 : TOK_BLOCK;
        const float *xt = x + t0 * ldx;
        float *yt = y + t0 * ldy;
        for (int t = 0; t < nt; t++) /* xs[t][g] = sum of group g of token t */
            for (int64_t g = 0; g < ng; g++) {
                __m512 s = _mm512_setzero_ps();
                for (int i = 0; i < group; i += 16)
                    s = _mm512_add_ps(s, _mm512_loadu_ps(xt + t * ldx + g * group + i));
                scratch[t * ng + g] = _mm512_reduce_add_ps(s);
            }
        int64_t blk = b0;
        if (nt == 1) { /* one row block at a time: one sequential stream */
            for (; blk < b1; blk++)
                tile(yt, ldy, xt, ldx, scratch, qs, ds, ms, n_in, group, blk, 1, 1);
            continue;
        }
        for (; blk + 2 <= b1; blk += 2)
            tokens(yt, ldy, xt, ldx, scratch, qs, ds, ms, n_in, group, blk, nt, 2);
        for (; blk < b1; blk++)
            tokens(yt, ldy, xt, ldx, scratch, qs, ds, ms, n_in, group, blk, nt, 1);
    }
}
