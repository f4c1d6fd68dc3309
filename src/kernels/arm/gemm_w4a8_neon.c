/* kernels/arm/gemm_w4a8_neon.c — w4a8 GEMM on the X16 layout with plain NEON (armv8.0:
 * every aarch64 CPU, the cortex-a53 included), and the epilogue the dotprod / i8mm
 * variants share (kernels/arm/w4a8_neon.h).
 *
 * One 64-byte chunk of a row block is 16 rows x 8 k (core/wformat.h); a 16-byte
 * quarter is 4 rows x 4 bytes:
 *
 *   w   = vld1q_u8          lo = w & 0x0F    -> rows 4i..4i+3 x k 0..3 (u8 0..15)
 *                           hi = w >> 4      -> rows 4i..4i+3 x k 4..7
 *   a   = 8 activation bytes, each half broadcast to both 32-bit lanes of a d-register
 *   p   = vmull_s8(lo[rows 4i, 4i+1], a0..a3 a0..a3) + vmlal_s8(hi.., a4..a7 a4..a7)
 *         8 int16 products (|p| <= 2 * 15 * 128: no overflow)
 *   acc = vpadalq_s16(acc, p)   -> [r (k0+k1+k4+k5), r (k2+k3+k6+k7), r+1 (..), r+1 (..)]
 *
 * After each group vpaddq_s32 folds the two halves of each row: 4 rows per vector; then
 * y[t] += (d_w * xd[t][g]) * (float)(isum - 8 xsum[t][g]), the float operations of
 * nb_gemm_w4a8_ref in the same order: the result is bit-identical to the reference.
 *
 * Tiles: decode (1 token) keeps the 16 sums of y in registers; prefill runs NT = 2 tokens
 * per unpacked chunk and keeps y in memory (loaded, updated, stored once per group).
 * Not measured on hardware: the fallback for CPUs without dotprod.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/w4a8_neon.h"
#include "kernels/kernels.h"

#define TOK_BLOCK 64
#define NT_MAX    2

/* NT tokens x one row block (16 rows), one group at a time. */
static inline __attribute__((always_inline)) void
tile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum, int64_t ldxq,
     int64_t ldxg, const uint8_t *wp, const uint16_t *ds, int64_t ng, int group, int NT)
{
    const int64_t cpg = group / 8;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t yv[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t g = 0; g < ng; g++) {
        int32x4_t acc[NT_MAX][8];
        for (int t = 0; t < NT; t++)
            for (int j = 0; j < 8; j++)
                acc[t][j] = vdupq_n_s32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            int8x16_t lo[4], hi[4];
            for (int i = 0; i < 4; i++) {
                uint8x16_t w = vld1q_u8(wp + c * 64 + 16 * i);
                lo[i] = vreinterpretq_s8_u8(vandq_u8(w, m4));
                hi[i] = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *a = xq + t * ldxq + c * 8;
                const int8x8_t a0 = vreinterpret_s8_s32(vdup_n_s32(nb_arm_ld32(a)));
                const int8x8_t a1 = vreinterpret_s8_s32(vdup_n_s32(nb_arm_ld32(a + 4)));
                for (int i = 0; i < 4; i++) {
                    int16x8_t p0 = vmull_s8(vget_low_s8(lo[i]), a0);
                    int16x8_t p1 = vmull_s8(vget_high_s8(lo[i]), a0);
                    p0 = vmlal_s8(p0, vget_low_s8(hi[i]), a1);
                    p1 = vmlal_s8(p1, vget_high_s8(hi[i]), a1);
                    acc[t][2 * i] = vpadalq_s16(acc[t][2 * i], p0);
                    acc[t][2 * i + 1] = vpadalq_s16(acc[t][2 * i + 1], p1);
                }
            }
        }
        for (int t = 0; t < NT; t++) {
            int32x4_t s[4];
            for (int i = 0; i < 4; i++)
                s[i] = vpaddq_s32(acc[t][2 * i], acc[t][2 * i + 1]);
            if (NT == 1)
                nb_w4a8_group_regs(yv, s, ds + g * 16, xd[t * ldxg + g], xsum[t * ldxg + g]);
            else
                nb_w4a8_group_mem(y + t * ldy, g, s, ds + g * 16, xd[t * ldxg + g],
                                  xsum[t * ldxg + g]);
        }
    }
    if (NT == 1)
        for (int i = 0; i < 4; i++)
            vst1q_f32(y + 4 * i, yv[i]);
}

void nb_gemm_w4a8_x16_neon(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                           const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    const uint8_t *qs = (const uint8_t *)w_blob + pl.offset[0];
    const uint16_t *ds = (const uint16_t *)((const uint8_t *)w_blob + pl.offset[1]);
    const int64_t ng = n_in / group, bstride = 8 * n_in;
    for (int t0 = 0; t0 < n_tok; t0 += TOK_BLOCK) {
        int nt = n_tok - t0 < TOK_BLOCK ? n_tok - t0 : TOK_BLOCK;
        for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {
            const uint8_t *wp = qs + blk * bstride;
            const uint16_t *db = ds + blk * ng * 16;
            int t = t0;
            for (; t + 2 <= t0 + nt; t += 2)
                tile(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg,
                     ldxq, ldxg, wp, db, ng, group, 2);
            if (t < t0 + nt)
                tile(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg,
                     ldxq, ldxg, wp, db, ng, group, 1);
        }
    }
}
