/* kernels/arm/gemm_w4a16_neon.c — w4a16 GEMM on the X16 layout, f32 activations, NEON
 * fused multiply-add (armv8.0: every aarch64 CPU).
 *
 * Per group g of a row block (16 rows, 4 per vector, one f32 lane per row):
 *   s[t]  = sum_k q[k] * x[t][k]        q: byte j of each row's dword of lo (k 0..3) /
 *                                       hi (k 4..7), moved to a zero-extended dword by
 *                                       one table lookup (tbl), then ucvtf; one FMA per
 *                                       k, token and 4 rows (x[t][k] by lane: fmla .s[j])
 *   y[t] += d[16] * s[t] + m[16] * xs[t][g]   xs = sum of the group's x, once per token
 * This is the summation of the x86 twin (gemm_w4a16_avx512.c), another order than the
 * reference (which decodes w = d q + m first): within TOL_W4A16_X16 of
 * tests/test_kernels_arm.c.
 *
 * Tiles: NT <= 4 tokens x 16 rows, the rows' quarters one after the other so that NT x 4
 * accumulators, the quarter's lo / hi and the NT x 2 activation vectors fit the 32
 * registers; y in memory (loaded, updated, stored once per group). Tokens go in cache
 * blocks of TOK_BLOCK (<= 32: xs of a block, TOK_BLOCK * n_in / G floats, must fit the
 * n_in floats of scratch). Not measured on hardware.
 */
#include <arm_neon.h>

#include "kernels/kernels.h"

#define TOK_BLOCK 32
#define NT_MAX    4

static inline float32x4_t bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* NT tokens x one row block. */
static inline __attribute__((always_inline)) void
tile(float *y, int64_t ldy, const float *x, int64_t ldx, const float *xs, const uint8_t *wp,
     const uint16_t *ds, const uint16_t *ms, int64_t ng, int group, const int NT)
{
    /* byte j of each dword -> the dword's low byte, zeros above (index >= 16 reads 0) */
    static const uint8_t ctrl_bytes[4][16] = {
        {0, 255, 255, 255, 4, 255, 255, 255, 8, 255, 255, 255, 12, 255, 255, 255},
        {1, 255, 255, 255, 5, 255, 255, 255, 9, 255, 255, 255, 13, 255, 255, 255},
        {2, 255, 255, 255, 6, 255, 255, 255, 10, 255, 255, 255, 14, 255, 255, 255},
        {3, 255, 255, 255, 7, 255, 255, 255, 11, 255, 255, 255, 15, 255, 255, 255}};
    const uint8x16_t ctrl[4] = {vld1q_u8(ctrl_bytes[0]), vld1q_u8(ctrl_bytes[1]),
                                vld1q_u8(ctrl_bytes[2]), vld1q_u8(ctrl_bytes[3])};
    const int64_t cpg = group / 8;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t g = 0; g < ng; g++) {
        float32x4_t acc[NT_MAX][4];
        for (int t = 0; t < NT; t++)
            for (int i = 0; i < 4; i++)
                acc[t][i] = vdupq_n_f32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            float32x4_t xv[NT_MAX][2];
            for (int t = 0; t < NT; t++) {
                xv[t][0] = vld1q_f32(x + t * ldx + c * 8);
                xv[t][1] = vld1q_f32(x + t * ldx + c * 8 + 4);
            }
            for (int i = 0; i < 4; i++) {
                uint8x16_t w = vld1q_u8(wp + c * 64 + 16 * i);
                const uint8x16_t lo = vandq_u8(w, m4), hi = vshrq_n_u8(w, 4);
#define STEP(J)                                                                                    \
    do {                                                                                           \
        float32x4_t q =                                                                            \
            vcvtq_f32_u32(vreinterpretq_u32_u8(vqtbl1q_u8((J) < 4 ? lo : hi, ctrl[(J)&3])));       \
        for (int t = 0; t < NT; t++)                                                               \
            acc[t][i] = vfmaq_laneq_f32(acc[t][i], q, xv[t][(J) >> 2], (J)&3);                     \
    } while (0)
                STEP(0);
                STEP(1);
                STEP(2);
                STEP(3);
                STEP(4);
                STEP(5);
                STEP(6);
                STEP(7);
#undef STEP
            }
        }
        for (int i = 0; i < 4; i++) {
            const float32x4_t dv = bf16x4(ds + g * 16 + 4 * i), mv = bf16x4(ms + g * 16 + 4 * i);
            for (int t = 0; t < NT; t++) {
                float *yp = y + t * ldy + 4 * i;
                float32x4_t v = g ? vld1q_f32(yp) : vdupq_n_f32(0);
                v = vfmaq_f32(v, dv, acc[t][i]);
                v = vfmaq_f32(v, mv, vdupq_n_f32(xs[t * ng + g]));
                vst1q_f32(yp, v);
            }
        }
    }
}

void nb_gemm_w4a16_x16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                            int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                            int64_t r1, float *scratch)
{
    struct nb_w4a16_x16_planes wpl;
    if (!nb_w4a16_x16_planes(w_blob, group, n_out, n_in, &wpl)) return;
    const uint8_t *qs = wpl.qs;
    const uint16_t *ds = wpl.ds, *ms = wpl.ms;
    const int64_t ng = n_in / group, bstride = 8 * n_in;
    for (int t0 = 0; t0 < n_tok; t0 += TOK_BLOCK) {
        const int nt = n_tok - t0 < TOK_BLOCK ? n_tok - t0 : TOK_BLOCK;
        const float *xt = x + t0 * ldx;
        float *yt = y + t0 * ldy;
        for (int t = 0; t < nt; t++) /* scratch[t][g] = sum of group g of token t */
            for (int64_t g = 0; g < ng; g++) {
                float32x4_t s = vdupq_n_f32(0);
                for (int i = 0; i < group; i += 4)
                    s = vaddq_f32(s, vld1q_f32(xt + t * ldx + g * group + i));
                scratch[t * ng + g] = vaddvq_f32(s);
            }
        for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {
            const uint8_t *wp = qs + blk * bstride;
            const uint16_t *db = ds + blk * ng * 16, *mb = ms + blk * ng * 16;
            int t = 0;
#define TILE(NT)                                                                                   \
    tile(yt + t * ldy + blk * 16, ldy, xt + t * ldx, ldx, scratch + t * ng, wp, db, mb, ng, group, \
         NT)
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
    }
}
