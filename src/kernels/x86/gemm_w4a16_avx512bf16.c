/* kernels/x86/gemm_w4a16_avx512bf16.c — w4a16 GEMM on the X16 layout, AVX512-BF16 vdpbf16ps:
 * tiled prefill (n_tok > 4). Decode (1 to 4 tokens) runs nb_gemv_w4a16_x16_avx512vnni on
 * int16 activations (kernels/x86/gemm_w4a16_avx512vnni.c; every AVX512-BF16 CPU has AVX-512
 * VNNI, and the dispatcher installs this kernel only where both are): there vdpbf16ps runs at
 * half rate (the model-167 Xeon) and the int16 sums are closer to the reference.
 *
 * Activations are rounded to bf16 (round to nearest even: relative error <= 2^-9 per
 * activation; DESIGN.md allows bf16 activations on the w4a16 path). Codes 0..15 are exact
 * in bf16 and every bf16 product is exact in f32; sums are f32.
 *
 * Per chunk c (k = 8c..8c+7) of a 16-row block, each row's dword holds bytes b0..b3
 * (low nibble of bj = q[8c+j], high nibble = q[8c+4+j]). Its two 16-bit words give,
 * after a shift by 0 / 8 / 4 / 12, the code pairs (k0,k2) (k1,k3) (k4,k6) (k5,k7) in
 * bits 0..3 of each word; vpermw with the 32-entry table bf16(i & 15) turns them into
 * bf16 (it reads bits 0..4, so no mask is needed). x is pre-arranged per token as bf16
 * in the same pair order, so each vdpbf16ps takes a broadcast dword of x:
 *   s[t]  = sum_k q[k] * bf16(x[t][k])       4 vdpbf16ps per chunk and token
 *   y[t] += d[16] * s[t] + m[16] * xs[t][g]  xs = f32 sum of the group's x
 * Error vs nb_gemm_w4a16_x16_ref: <= 2^-9 sum_k |d q_k x_k| + f32 rounding; the test
 * checks TOL_W4A16_BF16 of tests/test_kernels_x86.c.
 *
 * Prefill: tokens in super-blocks of XP_MAX / n_in (bf16 x and xs on the stack, 136 KiB);
 * per 16-row block pair, each chunk is decoded once and used for a tile of up to 8 tokens.
 * n_in > XP_MAX or group < 32 goes to nb_gemm_w4a16_x16_avx512.
 */
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx512_loads.h"

#define XP_MAX 65536 /* prefill: bf16 activations of a token super-block, 128 KiB */
#define INLINE static inline __attribute__((always_inline))

/* x (n floats) -> bf16 in pair order: per 8, x0 x2 x1 x3 x4 x6 x5 x7 */
static void arrange(uint16_t *xb, const float *x, int64_t n)
{
    const __m512i perm =
        _mm512_set_epi16(31, 29, 30, 28, 27, 25, 26, 24, 23, 21, 22, 20, 19, 17, 18, 16, 15, 13, 14,
                         12, 11, 9, 10, 8, 7, 5, 6, 4, 3, 1, 2, 0);
    for (int64_t i = 0; i < n; i += 32) {
        int64_t r = n - i;
        __mmask16 m0 = r >= 16 ? 0xFFFF : (__mmask16)((1u << r) - 1);
        __mmask16 m1 = r >= 32 ? 0xFFFF : r <= 16 ? 0 : (__mmask16)((1u << (r - 16)) - 1);
        __m512 lo = _mm512_maskz_loadu_ps(m0, x + i), hi = _mm512_maskz_loadu_ps(m1, x + i + 16);
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        __mmask32 m = r >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << r) - 1);
        _mm512_mask_storeu_epi16(xb + i, m, _mm512_permutexvar_epi16(perm, v));
    }
}

/* Prefill: one 16-row block pair x NT (<= 8) tokens. Each chunk's weights are decoded to bf16
 * once and used for all NT tokens; y is accumulated in place (L1) per group. */
INLINE void ptile(float *y, int64_t ldy, const uint16_t *xb, int64_t n_in, const float *xs,
                  const uint8_t *qs, const uint16_t *ds, const uint16_t *ms, int group, int64_t blk,
                  __m512i tab, const int NT, const int RB)
{
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512 acc[8][2];
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < RB; b++)
                acc[t][b] = _mm512_setzero_ps();
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            __m512bh wq[2][4];
            for (int b = 0; b < RB; b++) {
                __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                wq[b][0] = (__m512bh)_mm512_permutexvar_epi16(w, tab);
                wq[b][1] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 8), tab);
                wq[b][2] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), tab);
                wq[b][3] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 12), tab);
            }
            for (int p = 0; p < 4; p++)
                for (int t = 0; t < NT; t++) {
                    __m512bh xv = (__m512bh)nb_bcast32(xb + t * n_in + 8 * c + 2 * p);
                    for (int b = 0; b < RB; b++)
                        acc[t][b] = _mm512_dpbf16_ps(acc[t][b], wq[b][p], xv);
                }
        }
        for (int b = 0; b < RB; b++) {
            __m512 dv = nb_bf16x16(ds + ((blk + b) * ng + g) * 16);
            __m512 mv = nb_bf16x16(ms + ((blk + b) * ng + g) * 16);
            for (int t = 0; t < NT; t++) {
                float *yp = y + t * ldy + (blk + b) * 16;
                __m512 yv = g ? _mm512_loadu_ps(yp) : _mm512_setzero_ps();
                yv = _mm512_fmadd_ps(dv, acc[t][b], yv);
                yv = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[t * ng + g]), yv);
                _mm512_storeu_ps(yp, yv);
            }
        }
    }
}

INLINE void ptiles(float *y, int64_t ldy, const uint16_t *xb, int64_t n_in, const float *xs,
                   const uint8_t *qs, const uint16_t *ds, const uint16_t *ms, int group,
                   int64_t blk, __m512i tab, int nt, const int RB)
{
    int64_t ng = n_in / group;
    int t = 0;
    for (; t + 8 <= nt; t += 8)
        ptile(y + t * ldy, ldy, xb + t * n_in, n_in, xs + t * ng, qs, ds, ms, group, blk, tab, 8,
              RB);
    float *yt = y + t * ldy;
    const uint16_t *xt = xb + t * n_in;
    const float *st = xs + t * ng;
    switch (nt - t) {
    case 1: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 1, RB); break;
    case 2: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 2, RB); break;
    case 3: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 3, RB); break;
    case 4: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 4, RB); break;
    case 5: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 5, RB); break;
    case 6: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 6, RB); break;
    case 7: ptile(yt, ldy, xt, n_in, st, qs, ds, ms, group, blk, tab, 7, RB); break;
    default: break;
    }
}

/* x of token t -> xb (bf16 pair order) and xs[g] = f32 sums of its groups */
static void prep(uint16_t *xb, float *xs, const float *x, int64_t n_in, int group)
{
    arrange(xb, x, n_in);
    for (int64_t g = 0; g < n_in / group; g++) {
        __m512 s = _mm512_setzero_ps();
        for (int i = 0; i < group; i += 16)
            s = _mm512_add_ps(s, _mm512_loadu_ps(x + g * group + i));
        xs[g] = _mm512_reduce_add_ps(s);
    }
}

/* n_tok > 4: token super-blocks of up to XP_MAX / n_in tokens (bf16 x and group sums on the
 * stack, L2-resident); per 16-row block pair, all the super-block's tokens in tiles of 8. */
__attribute__((noinline)) static void prefill(float *y, int64_t ldy, const float *x, int64_t ldx,
                                              const uint8_t *qs, const uint16_t *ds,
                                              const uint16_t *ms, int64_t n_in, int group,
                                              int n_tok, int64_t b0, int64_t b1, __m512i tab)
{
    uint16_t xb[XP_MAX] __attribute__((aligned(64)));
    float xs[XP_MAX / 32];
    int64_t ng = n_in / group, tb = XP_MAX / n_in;
    if (tb > 8) tb &= ~(int64_t)7;
    for (int64_t t0 = 0; t0 < n_tok; t0 += tb) {
        int nt = (int)(n_tok - t0 < tb ? n_tok - t0 : tb);
        for (int t = 0; t < nt; t++)
            prep(xb + t * n_in, xs + t * ng, x + (t0 + t) * ldx, n_in, group);
        float *yt = y + t0 * ldy;
        int64_t blk = b0;
        for (; blk + 2 <= b1; blk += 2)
            ptiles(yt, ldy, xb, n_in, xs, qs, ds, ms, group, blk, tab, nt, 2);
        for (; blk < b1; blk++)
            ptiles(yt, ldy, xb, n_in, xs, qs, ds, ms, group, blk, tab, nt, 1);
    }
}

void nb_gemm_w4a16_x16_avx512bf16(float *y, int64_t ldy, const float *x, int64_t ldx,
                                  const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                  int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    if (nb_gemv_w4a16_x16_avx512vnni(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                                     scratch))
        return;
#ifdef W16_BF16_INT16_PREFILL /* an experiment's switch: prefill on int16 as well */
    nb_gemm_w4a16_x16_avx512vnni(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                                 scratch);
    return;
#endif
    if (n_in > XP_MAX || group < 32) {
        nb_gemm_w4a16_x16_avx512(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                                 scratch);
        return;
    }
    const __m512 iota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i tab = (__m512i)_mm512_cvtne2ps_pbh(iota, iota); /* bf16(i & 15), i < 32 */
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return;
    prefill(y, ldy, x, ldx, wpl.qs, wpl.ds, wpl.ms, n_in, group, n_tok, r0 / 16, r1 / 16, tab);
}
