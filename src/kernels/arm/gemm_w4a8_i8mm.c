/* kernels/arm/gemm_w4a8_i8mm.c — w4a8 GEMM on the X16 layout with the Armv8.6 int8
 * matrix multiply (FEAT_I8MM, HWCAP2 i8mm) for prefill; decode (and an odd last token)
 * runs the dotprod tile (kernels/arm/gemm_w4a8_dotprod.c). Needs dotprod and i8mm.
 *
 * `smmla` multiplies a 2x8 int8 matrix by the transpose of another 2x8 and adds the 2x2
 * int32 result: 32 multiply-adds, twice `sdot`'s 16. Its operands:
 *
 *   weights  2 rows x 8 k: the X16 chunk holds row r's k 0..3 in the low nibbles of its
 *            dword and k 4..7 in the high ones, so for a quarter (rows 4i..4i+3)
 *              zip1.4s(lo, hi) = [r0 k0..3 | r0 k4..7 | r1 k0..3 | r1 k4..7] = rows 4i, 4i+1
 *              zip2.4s(lo, hi) = rows 4i+2, 4i+3
 *   tokens   2 tokens x 8 k: the 8 activation bytes of the chunk of tokens t, t+1
 *   acc      [r t | r t+1 | r+1 t | r+1 t+1]
 *
 * After each group uzp1 / uzp2 of the two accumulators of a quarter give rows 4i..4i+3 of
 * token t / t+1, and the float epilogue of kernels/arm/w4a8_neon.h: bit-identical to the
 * reference. Tile: 2 token pairs x 16 rows (16 accumulators, 8 unpacked weight pairs, 2
 * activation registers); y in memory once per group. Not measured on hardware.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/w4a8_neon.h"
#include "kernels/kernels.h"

#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")

#define TOK_BLOCK 64
#define NP_MAX    2 /* token pairs per tile */

static inline __attribute__((always_inline)) void
tile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum, int64_t ldxq,
     int64_t ldxg, const uint8_t *wp, const uint16_t *ds, int64_t ng, int group, const int NP)
{
    const int64_t cpg = group / 8;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t g = 0; g < ng; g++) {
        int32x4_t acc[NP_MAX][8];
        for (int p = 0; p < NP; p++)
            for (int j = 0; j < 8; j++)
                acc[p][j] = vdupq_n_s32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            int8x16_t wz[8];
            for (int i = 0; i < 4; i++) {
                uint8x16_t w = vld1q_u8(wp + c * 64 + 16 * i);
                uint32x4_t lo = vreinterpretq_u32_u8(vandq_u8(w, m4));
                uint32x4_t hi = vreinterpretq_u32_u8(vshrq_n_u8(w, 4));
                wz[2 * i] = vreinterpretq_s8_u32(vzip1q_u32(lo, hi));
                wz[2 * i + 1] = vreinterpretq_s8_u32(vzip2q_u32(lo, hi));
            }
            for (int p = 0; p < NP; p++) {
                const int8_t *a = xq + 2 * p * ldxq + c * 8;
                const int8x16_t av = vcombine_s8(vld1_s8(a), vld1_s8(a + ldxq));
                for (int j = 0; j < 8; j++)
                    acc[p][j] = vmmlaq_s32(acc[p][j], wz[j], av);
            }
        }
        for (int p = 0; p < NP; p++) {
            int32x4_t s0[4], s1[4];
            for (int i = 0; i < 4; i++) {
                s0[i] = vuzp1q_s32(acc[p][2 * i], acc[p][2 * i + 1]);
                s1[i] = vuzp2q_s32(acc[p][2 * i], acc[p][2 * i + 1]);
            }
            const int t = 2 * p;
            nb_w4a8_group_mem(y + t * ldy, g, s0, ds + g * 16, xd[t * ldxg + g],
                              xsum[t * ldxg + g]);
            nb_w4a8_group_mem(y + (t + 1) * ldy, g, s1, ds + g * 16, xd[(t + 1) * ldxg + g],
                              xsum[(t + 1) * ldxg + g]);
        }
    }
}

void nb_gemm_w4a8_x16_i8mm(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                           const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    const uint8_t *qs = (const uint8_t *)w_blob + pl.offset[0];
    const uint16_t *ds = (const uint16_t *)((const uint8_t *)w_blob + pl.offset[1]);
    const int64_t ng = n_in / group, bstride = 8 * n_in, b0 = r0 / 16, b1 = r1 / 16;
    for (int t0 = 0; t0 < n_tok; t0 += TOK_BLOCK) {
        const int t1 = n_tok - t0 < TOK_BLOCK ? n_tok : t0 + TOK_BLOCK;
        const int tp = t0 + (t1 - t0) / 2 * 2; /* tokens [t0, tp) go in pairs */
        for (int64_t blk = b0; blk < b1; blk++) {
            const uint8_t *wp = qs + blk * bstride;
            const uint16_t *db = ds + blk * ng * 16;
            int t = t0;
            for (; t + 4 <= tp; t += 4)
                tile(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg,
                     ldxq, ldxg, wp, db, ng, group, 2);
            if (t < tp)
                tile(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg,
                     ldxq, ldxg, wp, db, ng, group, 1);
        }
        if (tp < t1) /* the odd token: sdot */
            nb_w4a8_x16_dotprod_tok(y + tp * ldy, xq + tp * ldxq, xd + tp * ldxg, xsum + tp * ldxg,
                                    qs, ds, n_in, group, b0, b1);
    }
}
