/* kernels/arm/gemm_w4a16_bf16.c — w4a16 GEMM on the X16 layout with the Armv8.6 bf16
 * matrix multiply (FEAT_BF16, HWCAP2 bf16): `bfmmla`, decode and prefill.
 *
 * Activations are rounded to bf16 (round to nearest even, `bfcvtn`: relative error <= 2^-9
 * per activation, as the x86 twin kernels/x86/gemm_w4a16_avx512bf16.c; DESIGN.md allows
 * bf16 activations on the w4a16 path). Codes 0..15 are exact in bf16; sums are f32.
 *
 * `bfmmla` multiplies a 2x4 bf16 matrix by the transpose of another 2x4 and adds the 2x2
 * f32 result (16 multiply-adds). Its operands:
 *
 *   weights  2 rows x 4 k: a quarter (rows 4i..4i+3) of chunk c holds row r's dword,
 *            byte j = q[8c+j] (low nibble) | q[8c+4+j] (high nibble); the low nibbles in
 *            byte order are [r0 k0..3 | r1 k0..3 | r2 k0..3 | r3 k0..3]. Two table lookups
 *            (the low and high byte of bf16(q)) and zip1 / zip2 of the two give rows
 *            4i, 4i+1 and 4i+2, 4i+3 as bf16 (k 0..3); the high nibbles the same for k 4..7.
 *   tokens   2 tokens x 4 k, pre-arranged per token pair: xb[pair][c4] = bf16 of
 *            [x[t][4c4..4c4+3] | x[t+1][4c4..4c4+3]] (a zero token pads an odd count).
 *   acc      [t r | t r+1 | t+1 r | t+1 r+1]
 *
 * After each group zip1 / zip2 (64-bit lanes) of a quarter's two accumulators give rows
 * 4i..4i+3 of token t / t+1, and y[t] += d[16] * s[t] + m[16] * xs[t][g] (xs: the f32 sum
 * of the group's x, as kernels/arm/gemm_w4a16_neon.c). Error vs nb_gemm_w4a16_x16_ref:
 * <= 2^-9 sum_k |d q_k x_k| + f32 rounding; tests/test_kernels_arm.c checks TOL_W4A16_BF16.
 *
 * Tile: 2 token pairs x 16 rows (16 accumulators, 4 unpacked weight vectors, 4 activation
 * vectors). Tokens go in blocks of up to XB_MAX / n_in (even, <= group so that xs fits
 * `scratch`'s n_in floats, <= TOK_BLOCK); bf16 x on the stack. n_in > XB_MAX / 2 (no pair
 * fits) runs nb_gemm_w4a16_x16_neon. Not measured on hardware (unverified).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"

#pragma GCC target("arch=armv8.6-a+bf16")

#define XB_MAX    32768 /* bf16 activations of a token block on the stack: 64 KiB */
#define TOK_BLOCK 32
#define NP_MAX    2 /* token pairs per tile */

static inline float32x4_t bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* bf16 of x[0..n) for a token pair: out[c4 * 8 + 0..3] = x0[4c4..], out[c4 * 8 + 4..7] = x1[4c4..]
 * (x1 NULL: zeros). n is a multiple of 8 (X16 layouts need n_in % group == 0, group >= 8). */
static void arrange_pair(uint16_t *out, const float *x0, const float *x1, int64_t n)
{
    for (int64_t k = 0; k < n; k += 4) {
        const float32x4_t a = vld1q_f32(x0 + k), b = x1 ? vld1q_f32(x1 + k) : vdupq_n_f32(0);
        const bfloat16x8_t v = vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(a), b);
        vst1q_u16(out + 2 * k, vreinterpretq_u16_bf16(v));
    }
}

/* NP token pairs x one row block (16 rows); ypt[2p], ypt[2p + 1]: y rows of the pair's
 * tokens (NULL for the padding token). */
static inline __attribute__((always_inline)) void
tile(float *const *ypt, const uint16_t *xb, int64_t pstride, const float *const *xst,
     const uint8_t *wp, const uint16_t *ds, const uint16_t *ms, int64_t ng, int group,
     const int NP)
{
    /* bf16(q) for q = 0..15 (1.0 = 0x3F80, 4.0 = 0x4080, 15.0 = 0x4170): low, high bytes */
    static const uint8_t lo_bytes[16] = {0x00, 0x80, 0x00, 0x40, 0x80, 0xA0, 0xC0, 0xE0,
                                         0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70};
    static const uint8_t hi_bytes[16] = {0x00, 0x3F, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
                                         0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41};
    const uint8x16_t tlo = vld1q_u8(lo_bytes), thi = vld1q_u8(hi_bytes);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int64_t cpg = group / 8;
    for (int64_t g = 0; g < ng; g++) {
        float32x4_t acc[NP_MAX][8];
        for (int p = 0; p < NP; p++)
            for (int j = 0; j < 8; j++)
                acc[p][j] = vdupq_n_f32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            bfloat16x8_t xa[NP_MAX][2];
            for (int p = 0; p < NP; p++) {
                xa[p][0] = vreinterpretq_bf16_u16(vld1q_u16(xb + p * pstride + c * 16));
                xa[p][1] = vreinterpretq_bf16_u16(vld1q_u16(xb + p * pstride + c * 16 + 8));
            }
            for (int i = 0; i < 4; i++) {
                const uint8x16_t w = vld1q_u8(wp + c * 64 + 16 * i);
                const uint8x16_t nib[2] = {vandq_u8(w, m4), vshrq_n_u8(w, 4)};
                for (int h = 0; h < 2; h++) { /* h 0: k 0..3, 1: k 4..7 */
                    const uint8x16_t l = vqtbl1q_u8(tlo, nib[h]), u = vqtbl1q_u8(thi, nib[h]);
                    const bfloat16x8_t w01 = vreinterpretq_bf16_u8(vzip1q_u8(l, u));
                    const bfloat16x8_t w23 = vreinterpretq_bf16_u8(vzip2q_u8(l, u));
                    for (int p = 0; p < NP; p++) {
                        acc[p][2 * i] = vbfmmlaq_f32(acc[p][2 * i], xa[p][h], w01);
                        acc[p][2 * i + 1] = vbfmmlaq_f32(acc[p][2 * i + 1], xa[p][h], w23);
                    }
                }
            }
        }
        for (int i = 0; i < 4; i++) {
            const float32x4_t dv = bf16x4(ds + g * 16 + 4 * i), mv = bf16x4(ms + g * 16 + 4 * i);
            for (int p = 0; p < NP; p++) {
                const float64x2_t a01 = vreinterpretq_f64_f32(acc[p][2 * i]);
                const float64x2_t a23 = vreinterpretq_f64_f32(acc[p][2 * i + 1]);
                const float32x4_t s[2] = {vreinterpretq_f32_f64(vzip1q_f64(a01, a23)),
                                          vreinterpretq_f32_f64(vzip2q_f64(a01, a23))};
                for (int e = 0; e < 2; e++) {
                    float *yp = ypt[2 * p + e];
                    if (!yp) continue;
                    yp += 4 * i;
                    float32x4_t v = g ? vld1q_f32(yp) : vdupq_n_f32(0);
                    v = vfmaq_f32(v, dv, s[e]);
                    v = vfmaq_f32(v, mv, vdupq_n_f32(xst[2 * p + e][g]));
                    vst1q_f32(yp, v);
                }
            }
        }
    }
}

void nb_gemm_w4a16_x16_neon_bf16(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    int64_t per = XB_MAX / n_in; /* tokens per block: even, <= group, <= TOK_BLOCK */
    if (per > group) per = group;
    if (per > TOK_BLOCK) per = TOK_BLOCK;
    per &= ~(int64_t)1;
    if (per < 2 || group % 8) {
        nb_gemm_w4a16_x16_neon(y, ldy, x, ldx, w_blob, n_out, n_in, group, n_tok, r0, r1,
                               scratch);
        return;
    }
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return;
    const uint8_t *qs = wpl.qs;
    const uint16_t *ds = wpl.ds, *ms = wpl.ms;
    const int64_t ng = n_in / group, bstride = 8 * n_in, pstride = 2 * n_in;
    uint16_t xb[XB_MAX] __attribute__((aligned(16)));
    for (int t0 = 0; t0 < n_tok; t0 += (int)per) {
        const int nt = n_tok - t0 < per ? n_tok - t0 : (int)per, npair = (nt + 1) / 2;
        const float *xt = x + t0 * ldx;
        float *yt = y + t0 * ldy;
        for (int t = 0; t < nt; t++) /* scratch[t][g] = sum of group g of token t (f32) */
            for (int64_t g = 0; g < ng; g++) {
                float32x4_t s = vdupq_n_f32(0);
                for (int i = 0; i < group; i += 4)
                    s = vaddq_f32(s, vld1q_f32(xt + t * ldx + g * group + i));
                scratch[t * ng + g] = vaddvq_f32(s);
            }
        for (int p = 0; p < npair; p++)
            arrange_pair(xb + p * pstride, xt + 2 * p * ldx,
                         2 * p + 1 < nt ? xt + (2 * p + 1) * ldx : NULL, n_in);
        for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {
            const uint8_t *wp = qs + blk * bstride;
            const uint16_t *db = ds + blk * ng * 16, *mb = ms + blk * ng * 16;
            for (int p = 0; p < npair; p += NP_MAX) {
                const int np = npair - p < NP_MAX ? npair - p : NP_MAX;
                float *ypt[2 * NP_MAX];
                const float *xst[2 * NP_MAX];
                for (int e = 0; e < 2 * np; e++) {
                    const int t = 2 * p + e;
                    ypt[e] = t < nt ? yt + t * ldy + blk * 16 : NULL;
                    xst[e] = scratch + (t < nt ? t : 0) * ng;
                }
                if (np == 2)
                    tile(ypt, xb + p * pstride, pstride, xst, wp, db, mb, ng, group, 2);
                else
                    tile(ypt, xb + p * pstride, pstride, xst, wp, db, mb, ng, group, 1);
            }
        }
    }
}
