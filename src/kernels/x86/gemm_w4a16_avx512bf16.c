/* kernels/x86/gemm_w4a16_avx512bf16.c — w4a16 GEMM on the X16 layout, AVX512-BF16 vdpbf16ps:
 * decode (n_tok <= 4) and tiled prefill (n_tok > 4).
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
 * Decode (n_tok <= 4) decodes without vpermw: 0x4300 | q is bf16(128 + q), one vpternlogd
 * (mask and or) per B row, which either vector port takes where vpermw needs port 5:
 *   s'[t] = sum_k (128 + q[k]) bf16(x[t][k]),  s[t] = s'[t] - 128 xsb[t][g]
 * with xsb the f32 sum of the group's bf16 activations (exact products either way; the
 * larger sums add f32 rounding of about 2^-24 x 143 sum |x|, far under the bf16 term).
 * Measured on the model-167 Xeon (2026-12-06; bench_kernels --insn "w4a16 avx512bf16" 1,
 * 2048 x 2048 from L2, group 128): 105.6 vs 121.0 us a call; tg128 of a --head 4 w4a16
 * build 14.7-15.4 vs 13.9-14.2 tok/s at 1 thread, 27.7-28.0 vs 26.5-26.9 at 2 (three
 * interleaved passes). A vpmultishiftqb for the shifts instead (port 5 too) was slower:
 * 130.8 us.
 *
 * Prefill (n_tok > 4, or n_tok * n_in > XB_MAX): tokens in super-blocks of XP_MAX / n_in
 * (bf16 x and xs on the stack, 136 KiB); per 16-row block pair, each chunk is decoded once
 * and used for a tile of up to 8 tokens. Only n_in > XP_MAX goes to nb_gemm_w4a16_x16_avx512.
 * `scratch` (decode): n_in floats (xs, then xsb: n_tok * n_in / group of each); bf16 x on
 * the stack.
 */
#include <immintrin.h>

#include "kernels/kernels.h"

#define XB_MAX 32768 /* bf16 activations on the stack: 64 KiB */
#define XP_MAX 65536 /* prefill: bf16 activations of a token super-block, 128 KiB */
/* Decode prefetches DEC_PF_DIST bytes ahead of each row block's stream: in situ
 * (qwen3-1.7b w4a16, tg128, 2 threads, 3 interleaved passes) none gave 33.9-34.8
 * tok/s, 6144 bytes 39.9-40.4. */
#ifndef DEC_PF_DIST /* decode: software prefetch distance in bytes (0: none) */
#define DEC_PF_DIST 6144
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE __m512 bf16x16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE __m512i pair(const uint16_t *xb, int64_t i)
{
    int32_t v;
    __builtin_memcpy(&v, xb + 2 * i, 4);
    return _mm512_set1_epi32(v);
}

INLINE void tile(float *y, int64_t ldy, const uint16_t *xb, int64_t n_in, const float *xs,
                 const float *xsb, const uint8_t *qs, const uint16_t *ds, const uint16_t *ms,
                 int group, int64_t blk, const int NT, const int RB)
{
    const int S = NT == 1 ? 4 : NT == 2 ? 2 : 1;
    const __m512i lo4 = _mm512_set1_epi16(0x000F), b128 = _mm512_set1_epi16(0x4300);
    const int64_t ng = n_in / group, cpg = group / 8, bstride = 8 * n_in;
    __m512 yv[4][2]; /* fixed sizes (not VLAs): kept in registers */
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            yv[t][b] = _mm512_setzero_ps();
    const uint8_t *wp = qs + blk * bstride;
    for (int64_t g = 0; g < ng; g++) {
        __m512 acc[4][2][4]; /* S partial sums per tile entry: independent chains */
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < RB; b++)
                for (int s = 0; s < S; s++)
                    acc[t][b][s] = _mm512_setzero_ps();
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            __m512bh wq[2][4];
            for (int b = 0; b < RB; b++) {
                __m512i w = _mm512_loadu_si512((const void *)(wp + b * bstride + c * 64));
                if (DEC_PF_DIST)
                    _mm_prefetch((const char *)(wp + b * bstride + c * 64 + DEC_PF_DIST),
                                 _MM_HINT_T0);
                /* bf16(128 + q) = 0x4300 | q: one vpternlogd (either port) per B row */
                wq[b][0] = (__m512bh)_mm512_ternarylogic_epi32(w, lo4, b128, 0xEA);
                wq[b][1] =
                    (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi16(w, 8), lo4, b128, 0xEA);
                wq[b][2] =
                    (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi16(w, 4), lo4, b128, 0xEA);
                wq[b][3] =
                    (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi16(w, 12), lo4, b128, 0xEA);
            }
            for (int p = 0; p < 4; p++)
                for (int t = 0; t < NT; t++) {
                    __m512bh xv = (__m512bh)pair(xb + t * n_in, c * 4 + p);
                    for (int b = 0; b < RB; b++)
                        acc[t][b][p % S] = _mm512_dpbf16_ps(acc[t][b][p % S], wq[b][p], xv);
                }
        }
        for (int b = 0; b < RB; b++) {
            __m512 dv = bf16x16(ds + ((blk + b) * ng + g) * 16);
            __m512 mv = bf16x16(ms + ((blk + b) * ng + g) * 16);
            for (int t = 0; t < NT; t++) {
                __m512 a = acc[t][b][0];
                for (int s = 1; s < S; s++)
                    a = _mm512_add_ps(a, acc[t][b][s]);
                a = _mm512_sub_ps(a, _mm512_set1_ps(128.0f * xsb[t * ng + g]));
                yv[t][b] = _mm512_fmadd_ps(dv, a, yv[t][b]);
                yv[t][b] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[t * ng + g]), yv[t][b]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < RB; b++)
            _mm512_storeu_ps(y + t * ldy + (blk + b) * 16, yv[t][b]);
}

INLINE void blocks(float *y, int64_t ldy, const uint16_t *xb, int64_t n_in, const float *xs,
                   const float *xsb, const uint8_t *qs, const uint16_t *ds, const uint16_t *ms,
                   int group, int64_t b0, int64_t b1, const int NT)
{
    int64_t blk = b0;
    /* one token: one row block at a time, a single sequential stream (kernel lab, the
     * 151936 x 2048 head from DRAM, 1 thread: 26 GB/s with pairs of blocks, 42 with
     * one; in situ, qwen3-1.7b w4a16 tg128, 2 threads, 3 interleaved passes: 40.2-40.4
     * -> 45.2-47.5 tok/s) */
    for (; NT > 1 && blk + 2 <= b1; blk += 2)
        tile(y, ldy, xb, n_in, xs, xsb, qs, ds, ms, group, blk, NT, 2);
    for (; blk < b1; blk++)
        tile(y, ldy, xb, n_in, xs, xsb, qs, ds, ms, group, blk, NT, 1);
}

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
                    __m512bh xv = (__m512bh)pair(xb + t * n_in, c * 4 + p);
                    for (int b = 0; b < RB; b++)
                        acc[t][b] = _mm512_dpbf16_ps(acc[t][b], wq[b][p], xv);
                }
        }
        for (int b = 0; b < RB; b++) {
            __m512 dv = bf16x16(ds + ((blk + b) * ng + g) * 16);
            __m512 mv = bf16x16(ms + ((blk + b) * ng + g) * 16);
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
    const __m512 iota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i tab = (__m512i)_mm512_cvtne2ps_pbh(iota, iota); /* bf16(i & 15), i < 32 */
    if ((n_tok > 4 || n_tok * n_in > XB_MAX) && (n_in > XP_MAX || group < 32)) {
        nb_gemm_w4a16_x16_avx512(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                                 scratch);
        return;
    }
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return;
    const uint8_t *qs = wpl.qs;
    const uint16_t *ds = wpl.ds, *ms = wpl.ms;
    int64_t ng = n_in / group;
    int64_t b0 = r0 / 16, b1 = r1 / 16;
    if (n_tok > 4 || n_tok * n_in > XB_MAX) {
        prefill(y, ldy, x, ldx, qs, ds, ms, n_in, group, n_tok, b0, b1, tab);
        return;
    }
    uint16_t xb[XB_MAX] __attribute__((aligned(64)));
    float *xsb = scratch + n_tok * ng;
    for (int t = 0; t < n_tok; t++) {
        arrange(xb + t * n_in, x + t * ldx, n_in);
        for (int64_t g = 0; g < ng; g++) { /* xs[t][g] = sum of group g of token t */
            __m512 s = _mm512_setzero_ps();
            for (int i = 0; i < group; i += 16)
                s = _mm512_add_ps(s, _mm512_loadu_ps(x + t * ldx + g * group + i));
            scratch[t * ng + g] = _mm512_reduce_add_ps(s);
            /* the sum of the group's bf16 activations: the 128 q offset's share */
            __m512 sb = _mm512_setzero_ps();
            for (int i = 0; i < group; i += 16)
                sb = _mm512_add_ps(sb, bf16x16(xb + t * n_in + g * group + i));
            xsb[t * ng + g] = _mm512_reduce_add_ps(sb);
        }
    }
    switch (n_tok) {
    case 1: blocks(y, ldy, xb, n_in, scratch, xsb, qs, ds, ms, group, b0, b1, 1); break;
    case 2: blocks(y, ldy, xb, n_in, scratch, xsb, qs, ds, ms, group, b0, b1, 2); break;
    case 3: blocks(y, ldy, xb, n_in, scratch, xsb, qs, ds, ms, group, b0, b1, 3); break;
    case 4: blocks(y, ldy, xb, n_in, scratch, xsb, qs, ds, ms, group, b0, b1, 4); break;
    default: break;
    }
}
