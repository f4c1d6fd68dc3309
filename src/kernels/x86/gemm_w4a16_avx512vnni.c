/* kernels/x86/gemm_w4a16_avx512vnni.c — w4a16 on the X16 layout with int16 activations and
 * AVX-512 VNNI vpdpwssd: decode (1 to 4 tokens; also the AVX512-BF16 kernel's decode) and,
 * in nb_gemm_w4a16_x16_avx512vnni (CPUs with VNNI but no AVX512-BF16), prefill in tiles of
 * 4 tokens x 2 row blocks (n_in <= 8192; else nb_gemm_w4a16_x16_avx512, FMA). Prefill on
 * the model-167 Xeon (bench/batch_kernels.sh, 2048 x 2048, 1 thread): 512 tokens 16.3-16.5
 * ms a call against 32.8-33.5 for the FMA kernel and 40.4-40.8 for the AVX512-BF16 one; in
 * situ with the AVX512-BF16 kernel's prefill switched to it (-DW16_BF16_INT16_PREFILL,
 * NIBBLE_AMX=0, balanced w4a16, pp512, 2 threads) 157.9-159.0 against 68.9-69.8 tok/s.
 *
 * Each token's activations are quantized per weight group g to int16:
 *   sc[t][g] = max_k |x[t][k]| / 32767,  xi[t][k] = round(x[t][k] / sc[t][g])
 * and the codes 0..15 are words, so one vpdpwssd adds 16 rows x 2 k (32 multiply-adds, like
 * vdpbf16ps, but at vpdpbusd's rate where vdpbf16ps runs at half rate or less):
 *   y[t] += d[16] * sc[t][g] * sum_k q[k] xi[t][k] + m[16] * xs[t][g]
 * with xs the f32 sum of the group's x. The int32 sums are exact (15 * 32767 * group < 2^31
 * for group <= 4096).
 * Error: |x - sc xi| <= sc / 2 per activation, so |y - y_ref| <= d sum_k q_k max|x| 2^-16 per
 * group, plus f32 rounding. That is at most the bf16 rounding bound of the AVX512-BF16 kernel
 * (2^-9 sum_k |d q_k x_k|) wherever the group's largest activation meets a code of 1 or more
 * and the group has at most 128 weights, and far under it on real activations: 4e-5 against
 * 4e-3 relative to the reference in bench_kernels' check (2048 x 2048, group 64).
 *
 * Per chunk c (k = 8c..8c+7) of a 16-row block, each row's dword holds bytes b0..b3 (low
 * nibble of bj = q[8c+j], high nibble = q[8c+4+j]); shifts by 0 / 8 / 4 / 12 and a mask give
 * the word pairs (k0,k2) (k1,k3) (k4,k6) (k5,k7), and the activations are stored per token in
 * that pair order, so each vpdpwssd takes a broadcast dword of xi.
 * Measured on the model-167 Xeon (2026-12-06, bench_kernels 3, 1 thread, from DRAM): q/o
 * 2048 x 2048 188 us against 200 for the AVX512-BF16 decode, gate/up 565 against 585.
 */
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx512_loads.h"

#define XI_MAX 32768 /* int16 activations on the stack: 64 KiB */
/* software prefetch distance in bytes ahead of each row block's stream (the AVX512-BF16
 * decode's: in situ, qwen3-1.7b w4a16 tg128, 2 threads, none 33.9-34.8 tok/s, 6144 bytes
 * 39.9-40.4) */
#define PF_DIST 6144
#define INLINE  static inline __attribute__((always_inline))
#ifndef W16_PREFILL16 /* more than 4 tokens on int16 too (else nb_gemm_w4a16_x16_avx512) */
#define W16_PREFILL16 1
#endif

/* RB row blocks (1 or 2) x NT tokens; S partial sums per entry keep the chains independent */
INLINE void tile(float *y, int64_t ldy, const int16_t *xi, int64_t n_in, const float *xs,
                 const float *sc, const uint8_t *qs, const uint16_t *ds, const uint16_t *ms,
                 int group, int64_t blk, const int NT, const int RB)
{
    const int S = NT == 1 ? 4 : NT == 2 ? 2 : 1;
    const __m512i lo4 = _mm512_set1_epi16(0x000F);
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    __m512 yv[4][2]; /* fixed sizes (not VLAs): kept in registers */
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            yv[t][b] = _mm512_setzero_ps();
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512i acc[4][2][4];
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < RB; b++)
                for (int s = 0; s < S; s++)
                    acc[t][b][s] = _mm512_setzero_si512();
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            __m512i wq[2][4];
            for (int b = 0; b < RB; b++) {
                const uint8_t *p = wp + b * bstride + c * 64;
                __m512i w = _mm512_loadu_si512((const void *)p);
                _mm_prefetch((const char *)p + PF_DIST, _MM_HINT_T0);
                wq[b][0] = _mm512_and_si512(w, lo4);
                wq[b][1] = _mm512_and_si512(_mm512_srli_epi16(w, 8), lo4);
                wq[b][2] = _mm512_and_si512(_mm512_srli_epi16(w, 4), lo4);
                wq[b][3] = _mm512_srli_epi16(w, 12);
            }
            for (int p = 0; p < 4; p++)
                for (int t = 0; t < NT; t++) {
                    __m512i xv = nb_bcast32(xi + t * n_in + 8 * c + 2 * p);
                    for (int b = 0; b < RB; b++)
                        acc[t][b][p % S] = _mm512_dpwssd_epi32(acc[t][b][p % S], wq[b][p], xv);
                }
        }
        for (int b = 0; b < RB; b++) {
            __m512 dv = nb_bf16x16(ds + ((blk + b) * ng + g) * 16);
            __m512 mv = nb_bf16x16(ms + ((blk + b) * ng + g) * 16);
            for (int t = 0; t < NT; t++) {
                __m512i a = acc[t][b][0];
                for (int s = 1; s < S; s++)
                    a = _mm512_add_epi32(a, acc[t][b][s]);
                __m512 af = _mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(sc[t * ng + g]));
                yv[t][b] = _mm512_fmadd_ps(dv, af, yv[t][b]);
                yv[t][b] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[t * ng + g]), yv[t][b]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            _mm512_storeu_ps(y + t * ldy + (blk + b) * 16, yv[t][b]);
}

INLINE void blocks(float *y, int64_t ldy, const int16_t *xi, int64_t n_in, const float *xs,
                   const float *sc, const uint8_t *qs, const uint16_t *ds, const uint16_t *ms,
                   int group, int64_t b0, int64_t b1, const int NT)
{
    int64_t blk = b0;
    /* one token: one row block at a time, a single sequential stream (kernel lab, the
     * 151936 x 2048 head from DRAM, 1 thread: 26 GB/s with pairs of blocks, 42 with one) */
    for (; NT > 1 && blk + 2 <= b1; blk += 2)
        tile(y, ldy, xi, n_in, xs, sc, qs, ds, ms, group, blk, NT, 2);
    for (; blk < b1; blk++)
        tile(y, ldy, xi, n_in, xs, sc, qs, ds, ms, group, blk, NT, 1);
}

/* Group g of x (group floats) -> xo (int16 in pair order: per 8, x0 x2 x1 x3 x4 x6 x5 x7);
 * *sum = the f32 sum, *scale = max|x| / 32767. A division, not a multiply by 32767 / max|x|,
 * which overflows for max|x| under 1e-34; a scale of 0 (max|x| under 5e-41, or an all-zero
 * group) gives codes 0. A NaN or infinity reaches y through the sum's term. */
static void quant16(int16_t *xo, float *sum, float *scale, const float *x, int group)
{
    const __m512i perm =
        _mm512_set_epi16(31, 29, 30, 28, 27, 25, 26, 24, 23, 21, 22, 20, 19, 17, 18, 16, 15, 13, 14,
                         12, 11, 9, 10, 8, 7, 5, 6, 4, 3, 1, 2, 0);
    const __m512i order = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
    __m512 s = _mm512_setzero_ps(), mx = _mm512_setzero_ps();
    for (int i = 0; i < group; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        s = _mm512_add_ps(s, v);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
    }
    float sc = _mm512_reduce_max_ps(mx) / 32767.0f;
    *sum = _mm512_reduce_add_ps(s);
    *scale = sc;
    if (!(sc > 0)) {
        __builtin_memset(xo, 0, sizeof(int16_t) * (size_t)group);
        return;
    }
    const __m512 scv = _mm512_set1_ps(sc);
    for (int i = 0; i < group; i += 32) {
        __m512i a = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x + i), scv));
        __m512i b = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x + i + 16), scv));
        /* packs (saturating) interleaves a and b per 128-bit lane; the qword order restores
         * 0..31 */
        __m512i w = _mm512_permutexvar_epi64(order, _mm512_packs_epi32(a, b));
        _mm512_storeu_si512((void *)(xo + i), _mm512_permutexvar_epi16(perm, w));
    }
}

int nb_gemv_w4a16_x16_avx512vnni(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    if (n_tok < 1 || n_tok > 4 || n_tok * n_in > XI_MAX || group % 32) return 0;
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return 1;
    int16_t xi[XI_MAX] __attribute__((aligned(64)));
    int64_t ng = n_in / group, b0 = r0 / 16, b1 = r1 / 16;
    float *xs = scratch, *sc = scratch + n_tok * ng;
    for (int t = 0; t < n_tok; t++)
        for (int64_t g = 0; g < ng; g++)
            quant16(xi + t * n_in + g * group, xs + t * ng + g, sc + t * ng + g,
                    x + t * ldx + g * group, group);
    switch (n_tok) {
    case 1: blocks(y, ldy, xi, n_in, xs, sc, wpl.qs, wpl.ds, wpl.ms, group, b0, b1, 1); break;
    case 2: blocks(y, ldy, xi, n_in, xs, sc, wpl.qs, wpl.ds, wpl.ms, group, b0, b1, 2); break;
    case 3: blocks(y, ldy, xi, n_in, xs, sc, wpl.qs, wpl.ds, wpl.ms, group, b0, b1, 3); break;
    default: blocks(y, ldy, xi, n_in, xs, sc, wpl.qs, wpl.ds, wpl.ms, group, b0, b1, 4); break;
    }
    return 1;
}

/* More than 4 tokens: super-blocks of XI_MAX / n_in tokens (a multiple of 4) quantized on
 * the stack; per 16-row block pair, tiles of 4 tokens (then 3, 2, 1) share each unpacked
 * chunk, the pair's weights staying in L1 across the super-block's tiles. */
__attribute__((noinline)) static void prefill(float *y, int64_t ldy, const float *x, int64_t ldx,
                                              const struct nb_w4a16_x16_planes *w, int64_t n_in,
                                              int group, int n_tok, int64_t b0, int64_t b1)
{
    int16_t xi[XI_MAX] __attribute__((aligned(64)));
    float xs[XI_MAX / 32], sc[XI_MAX / 32];
    const int64_t ng = n_in / group, tb = XI_MAX / n_in / 4 * 4;
    for (int64_t t0 = 0; t0 < n_tok; t0 += tb) {
        const int nt = (int)(n_tok - t0 < tb ? n_tok - t0 : tb);
        for (int t = 0; t < nt; t++)
            for (int64_t g = 0; g < ng; g++)
                quant16(xi + t * n_in + g * group, xs + t * ng + g, sc + t * ng + g,
                        x + (t0 + t) * ldx + g * group, group);
        for (int64_t blk = b0; blk < b1; blk += 2) {
            const int rb = b1 - blk >= 2 ? 2 : 1;
            for (int t = 0; t < nt; t += 4) {
                float *yt = y + (t0 + t) * ldy;
                const int16_t *xt = xi + t * n_in;
                const float *st = xs + t * ng, *ct = sc + t * ng;
#define T16(NT, RB) tile(yt, ldy, xt, n_in, st, ct, w->qs, w->ds, w->ms, group, blk, NT, RB)
                switch ((nt - t < 4 ? nt - t : 4) * 2 + rb - 1) {
                case 2: T16(1, 1); break;
                case 3: T16(1, 2); break;
                case 4: T16(2, 1); break;
                case 5: T16(2, 2); break;
                case 6: T16(3, 1); break;
                case 7: T16(3, 2); break;
                case 8: T16(4, 1); break;
                default: T16(4, 2); break;
                }
#undef T16
            }
        }
    }
}

void nb_gemm_w4a16_x16_avx512vnni(float *y, int64_t ldy, const float *x, int64_t ldx,
                                  const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                  int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    if (nb_gemv_w4a16_x16_avx512vnni(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                                     scratch))
        return;
    struct nb_w4a16_x16_planes wpl;
    if (W16_PREFILL16 && n_tok > 4 && n_in <= XI_MAX / 4 && group % 32 == 0) {
        if (nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl))
            prefill(y, ldy, x, ldx, &wpl, n_in, group, n_tok, r0 / 16, r1 / 16);
        return;
    }
    nb_gemm_w4a16_x16_avx512(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1, scratch);
}
