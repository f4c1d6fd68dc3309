/* kernels/arm/gemm_w4a8_dotprod.c — w4a8 GEMM on the X16 layout with the Armv8.2
 * dot product (FEAT_DotProd, HWCAP asimddp): `sdot` sums 4 byte products into each
 * 32-bit lane, which is the X16 layout's unit (one row x 4 k per dword):
 *
 *   w   = vld1q_u8 (rows 4i..4i+3 x 4 bytes)   lo = w & 0x0F (k 0..3), hi = w >> 4 (k 4..7)
 *   a   = 8 activation bytes of the chunk: lane 0 = k 0..3, lane 1 = k 4..7
 *   acc[i] = sdot(acc[i], lo, a[lane 0]); acc[i] = sdot(acc[i], hi, a[lane 1])
 *
 * (codes 0..15 are valid signed bytes, so the signed dot product is exact). After each
 * group the float epilogue of kernels/arm/w4a8_neon.h: bit-identical to the reference.
 *
 * Tiles: decode (1 token) walks one row block, two accumulator sets (even / odd chunks)
 * for two independent sdot chains, y in registers; prefill runs NT = 4 tokens per
 * unpacked chunk (16 accumulators + 8 unpacked quarters + 4 activation registers of the
 * 32), y in memory once per group. Tokens in cache blocks of TOK_BLOCK. Not measured on
 * hardware (no Arm machine): instruction counts under qemu only (docs/arm.md).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/w4a8_neon.h"
#include "kernels/kernels.h"

#pragma GCC target("arch=armv8.2-a+dotprod")

#define TOK_BLOCK 64
#define NT_MAX    4

/* Decode: one token x one row block. cpg (chunks per group) is even. */
static void tile1(float *y, const int8_t *xq, const float *xd, const int32_t *xsum,
                  const uint8_t *wp, const uint16_t *ds, int64_t ng, int group)
{
    const int64_t cpg = group / 8;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t yv[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t g = 0; g < ng; g++) {
        int32x4_t acc[2][4];
        for (int u = 0; u < 2; u++)
            for (int i = 0; i < 4; i++)
                acc[u][i] = vdupq_n_s32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c += 2) {
            const int8x16_t a = vld1q_s8(xq + c * 8); /* chunks c and c + 1: 16 bytes */
            for (int u = 0; u < 2; u++)
                for (int i = 0; i < 4; i++) {
                    uint8x16_t w = vld1q_u8(wp + (c + u) * 64 + 16 * i);
                    int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(w, m4));
                    int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
                    if (u == 0) {
                        acc[0][i] = vdotq_laneq_s32(acc[0][i], lo, a, 0);
                        acc[0][i] = vdotq_laneq_s32(acc[0][i], hi, a, 1);
                    } else {
                        acc[1][i] = vdotq_laneq_s32(acc[1][i], lo, a, 2);
                        acc[1][i] = vdotq_laneq_s32(acc[1][i], hi, a, 3);
                    }
                }
        }
        int32x4_t s[4];
        for (int i = 0; i < 4; i++)
            s[i] = vaddq_s32(acc[0][i], acc[1][i]);
        nb_w4a8_group_regs(yv, s, ds + g * 16, xd[g], xsum[g]);
    }
    for (int i = 0; i < 4; i++)
        vst1q_f32(y + 4 * i, yv[i]);
}

/* Prefill: NT tokens x one row block, y in memory. */
static inline __attribute__((always_inline)) void
tilen(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum, int64_t ldxq,
      int64_t ldxg, const uint8_t *wp, const uint16_t *ds, int64_t ng, int group, const int NT)
{
    const int64_t cpg = group / 8;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t g = 0; g < ng; g++) {
        int32x4_t acc[NT_MAX][4];
        for (int t = 0; t < NT; t++)
            for (int i = 0; i < 4; i++)
                acc[t][i] = vdupq_n_s32(0);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++) {
            int8x16_t lo[4], hi[4];
            for (int i = 0; i < 4; i++) {
                uint8x16_t w = vld1q_u8(wp + c * 64 + 16 * i);
                lo[i] = vreinterpretq_s8_u8(vandq_u8(w, m4));
                hi[i] = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
            }
            for (int t = 0; t < NT; t++) {
                const int8x8_t a = vld1_s8(xq + t * ldxq + c * 8);
                for (int i = 0; i < 4; i++) {
                    acc[t][i] = vdotq_lane_s32(acc[t][i], lo[i], a, 0);
                    acc[t][i] = vdotq_lane_s32(acc[t][i], hi[i], a, 1);
                }
            }
        }
        for (int t = 0; t < NT; t++)
            nb_w4a8_group_mem(y + t * ldy, g, acc[t], ds + g * 16, xd[t * ldxg + g],
                              xsum[t * ldxg + g]);
    }
}

void nb_gemm_w4a8_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
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
        const int t1 = n_tok - t0 < TOK_BLOCK ? n_tok : t0 + TOK_BLOCK;
        for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {
            const uint8_t *wp = qs + blk * bstride;
            const uint16_t *db = ds + blk * ng * 16;
            int t = t0;
#define TILE(NT)                                                                                   \
    tilen(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg, ldxq, ldxg,  \
          wp, db, ng, group, NT)
            for (; t + 4 <= t1; t += 4)
                TILE(4);
            switch (t1 - t) {
            case 3: TILE(3); break;
            case 2: TILE(2); break;
            case 1:
                tile1(y + t * ldy + blk * 16, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg, wp, db,
                      ng, group);
                break;
            default: break;
            }
#undef TILE
        }
    }
}

/* The decode tile for one token over row blocks [b0, b1): the i8mm kernel's odd token. */
void nb_w4a8_x16_dotprod_tok(float *y, const int8_t *xq, const float *xd, const int32_t *xsum,
                             const uint8_t *qs, const uint16_t *ds, int64_t n_in, int group,
                             int64_t b0, int64_t b1)
{
    const int64_t ng = n_in / group;
    for (int64_t blk = b0; blk < b1; blk++)
        tile1(y + blk * 16, xq, xd, xsum, qs + blk * 8 * n_in, ds + blk * ng * 16, ng, group);
}
