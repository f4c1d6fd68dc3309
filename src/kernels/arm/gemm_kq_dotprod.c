/* kernels/arm/gemm_kq_dotprod.c — the GGUF block formats as X16 records (kernels/qblock.h:
 * Q4_K, Q5_K, Q6_K, IQ4_XS in records of 16 rows x 256 k; Q4_0, Q8_0, IQ4_NL in records of
 * 16 rows x 64 k, two blocks of 32) against int8 activations with the Armv8.2 dot product
 * (FEAT_DotProd, HWCAP asimddp): no float decode of the weights.
 *
 * A 64-byte chunk of a record is 16 rows x 8 k in the X16 byte order: quarter i (16 bytes)
 * holds rows 4i..4i+3, 4 bytes a row, so one 32-bit lane of `sdot` is one row x 4 k:
 *
 *   Q4_K    w = quarter i of chunk c   lo = w & 0x0F (k 8c..8c+3), hi = w >> 4 (8c+4..8c+7)
 *   Q5_K    as Q4_K, | 16 where the fifth bit is set (qh byte p % 16, bit 2 (p / 16) for
 *           lo and +1 for hi: quarter i reads the chunk's 16 qh bytes at bits 2i, 2i+1)
 *   Q6_K    as Q4_K, | the top two bits << 4 (quarter i: qh bytes 16 (i % 2)..+15 of the
 *           chunk, bits 4 (i / 2) +0..1 for lo, +2..3 for hi)
 *   IQ4_XS  lo = grid[w & 0x0F], hi = grid[w >> 4] (tbl on the signed grid)
 *   acc[t][i] = sdot(acc[t][i], lo, a[t][k 0..3]); sdot(.., hi, a[t][k 4..7])
 *
 * `sdot` multiplies signed by signed. The k-quant codes (0..15, 0..31, 0..63) are valid
 * non-negative int8 values and the IQ4 grid is signed, so every product is exact and
 * the int32 sums are the reference's: for IQ4_XS sum grid[q] * a = (the reference's
 * sum (grid[q] + 128) a) - 128 * (sum a), so its zero term is gone. Per sub-block s
 * (32 k; Q6_K 16 k) and token t:
 *
 *   S[t] += float(isum[t]) * (d * sc_s)          fused multiply-add, d * sc_s rounded once
 *   Z[t]  = sum_s z_s * asum_s                   int32, exact: Q4_K / Q5_K z = the mins and
 *                                                asum the sums of 32 codes; Q6_K z = the
 *                                                scales and asum the sums of 16
 *   y[t] += xd[t] * (S[t] - zs * float(Z[t]))    zs = dmin (Q4_K, Q5_K), 32 d (Q6_K), none
 *                                                for IQ4_XS
 *
 * the operations of nb_gemm_q4_k_x16_ref & co. except the fused multiply-adds (and, for
 * IQ4_XS, the signed products): within the tests' relative bound, not bit-identical.
 *
 * Q4_0 / Q8_0 / IQ4_NL, per block of 32 and token (the w4a8 activation form, groups of 32):
 *   Q4_0    isum = sum q * a - 8 * xsum       (q = 0..15 as stored)
 *   Q8_0    isum = sum (u ^ 0x80) * a         (u = q + 128 as stored: the sign bit flipped
 *                                             back gives q; the reference's
 *                                             sum u a - 128 xsum is the same integer)
 *   IQ4_NL  isum = sum grid[q] * a            (likewise the reference's (grid + 128) form)
 *   y   += (d * xd) * float(isum)             the reference's operations in its order:
 *                                             bit-identical to nb_gemm_q4_0_x16_ref & co.
 *
 * Tiles: NT = 4 tokens share each unpacked quarter (then 3, 2, 1 for the remainder). A
 * 256-k tile of 2..4 tokens takes a record's 16 rows in two halves of 8 (per token 2
 * int32x4 accumulators and 2 float32x4 S: no spills at NT = 4, each quarter still unpacked
 * once, the second half reads the record from L1); the 64-k tile holds 4 accumulators a
 * token (no S). y is accumulated in memory once a record (a block for the 64-k records).
 * A decode step (NT = 1) takes all 16 rows with two accumulator chains (lo and hi): 8
 * independent sdot chains. Tokens in cache blocks of KQ_TOK_BLOCK. Not measured on Arm
 * hardware: qemu only (docs/arm.md).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/qblock.h"

#pragma GCC target("arch=armv8.2-a+dotprod")

#define KQ_NT        4 /* prefill tokens a tile (at most 4: the register file) */
#define KQ_TOK_BLOCK 64
#define INLINE       static inline __attribute__((always_inline))

enum kind { Q4K, Q5K, Q6K, IQ4XS };
enum kind32 { B_Q4_0, B_Q8_0, B_IQ4_NL };

/* 4 f16 -> 4 f32 (exact). */
INLINE float32x4_t f16x4(const uint8_t *p)
{
    uint16x4_t h = vld1_u16((const uint16_t *)(const void *)p);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* Sub-block 2p + e of a record's pair plane at p32 = plane + 32 p ([16 rows][2] bytes):
 * 16 rows of 8-bit values, unsigned (Q4_K / Q5_K scales and mins) or signed (Q6_K and
 * IQ4_XS scales), widened to 2 x int16x8 (rows 0..7, 8..15). */
INLINE void pair_s16(const uint8_t *p32, const int e, const int is_signed, int16x8_t v[2])
{
    if (is_signed) {
        int8x16x2_t b = vld2q_s8((const int8_t *)p32);
        v[0] = vmovl_s8(vget_low_s8(b.val[e]));
        v[1] = vmovl_high_s8(b.val[e]);
    } else {
        uint8x16x2_t b = vld2q_u8(p32);
        v[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b.val[e])));
        v[1] = vreinterpretq_s16_u16(vmovl_high_u8(b.val[e]));
    }
}

/* The sum of 16 codes j (0..15) of a 256-block from its activation words (words 0..7);
 * j = 16 + s: the sum of 32 codes of sub-block s (words 8..11). */
INLINE int16_t asum_at(const int32_t *w, const int j)
{
    return (int16_t)(uint16_t)((uint32_t)w[j >> 1] >> (16 * (j & 1)));
}

/* The IQ4 grid, signed, as a 16-byte table for tbl. */
INLINE int8x16_t iq4_table(void)
{
    return vld1q_s8(nb_iq4nl_grid);
}

/* Quarter i (rows 4i..4i+3) of chunk c of a 256-k record, as signed bytes: lo = k
 * 8c..8c+3, hi = 8c+4..8c+7 of each row. */
INLINE void quarter(const uint8_t *rec, const int c, const int i, const enum kind kd, int8x16_t *lo,
                    int8x16_t *hi)
{
    const uint8x16_t w = vld1q_u8(rec + 64 * c + 16 * i);
    uint8x16_t l = vandq_u8(w, vdupq_n_u8(0x0F)), h = vshrq_n_u8(w, 4);
    if (kd == Q5K) {
        /* the fifth bits: bit 2i (lo) and 2i+1 (hi) of the chunk's 16 qh bytes -> 16 */
        const uint8x16_t qh = vld1q_u8(rec + NB_Q5_K_X16_QH + 16 * c), b16 = vdupq_n_u8(16);
        l = vorrq_u8(l, vandq_u8(vtstq_u8(qh, vdupq_n_u8((uint8_t)(1u << (2 * i)))), b16));
        h = vorrq_u8(h, vandq_u8(vtstq_u8(qh, vdupq_n_u8((uint8_t)(2u << (2 * i)))), b16));
    }
    if (kd == Q6K) {
        /* the top two bits: qh bytes 16 (i % 2).. of the chunk, nibble i / 2: bits 0..1 of
         * it for lo, 2..3 for hi, moved to bits 4..5 */
        const uint8x16_t qh = vld1q_u8(rec + NB_Q6_K_X16_QH + 32 * c + 16 * (i & 1));
        const uint8x16_t m30 = vdupq_n_u8(0x30);
        if (i < 2) {
            l = vorrq_u8(l, vandq_u8(vshlq_n_u8(qh, 4), m30));
            h = vorrq_u8(h, vandq_u8(vshlq_n_u8(qh, 2), m30));
        } else {
            l = vorrq_u8(l, vandq_u8(qh, m30));
            h = vorrq_u8(h, vandq_u8(vshrq_n_u8(qh, 2), m30));
        }
    }
    if (kd == IQ4XS) {
        *lo = vqtbl1q_s8(iq4_table(), l);
        *hi = vqtbl1q_s8(iq4_table(), h);
    } else {
        *lo = vreinterpretq_s8_u8(l);
        *hi = vreinterpretq_s8_u8(h);
    }
}

/* NT tokens x quarters q0..q0+NQ-1 (rows 4 q0..4 (q0 + NQ) - 1) of record i of a row
 * block: y[t][4 q0 .. 4 (q0 + NQ)) += xd * S (y written, not read, for i = 0). */
INLINE void tile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                 int64_t ldxq, int64_t ldxg, const uint8_t *recs, const int64_t i,
                 const enum kind kd, const int NT, const int q0, const int NQ)
{
    const int q6 = kd == Q6K, sgn = q6 || kd == IQ4XS; /* signed scales, no mins */
    const int64_t rb = q6            ? NB_Q6_K_X16_BYTES
                       : kd == Q5K   ? NB_Q5_K_X16_BYTES
                       : kd == IQ4XS ? NB_IQ4_XS_X16_BYTES
                                     : NB_Q4_K_X16_BYTES;
    const int64_t o_sc = q6            ? NB_Q6_K_X16_SC
                         : kd == Q5K   ? NB_Q5_K_X16_SC
                         : kd == IQ4XS ? NB_IQ4_XS_X16_SC
                                       : NB_Q4_K_X16_SC;
    const int64_t o_mn = kd == Q5K ? NB_Q5_K_X16_MN : NB_Q4_K_X16_MN;
    const int64_t o_d = q6            ? NB_Q6_K_X16_D
                        : kd == Q5K   ? NB_Q5_K_X16_D
                        : kd == IQ4XS ? NB_IQ4_XS_X16_D
                                      : NB_Q4_K_X16_D;
    const int64_t o_dmin = kd == Q5K ? NB_Q5_K_X16_DMIN : NB_Q4_K_X16_DMIN;
    const int npair = q6 ? 8 : 4, cps = q6 ? 2 : 4; /* sub-block pairs, chunks a sub-block */
    const uint8_t *rec = recs + i * rb;
    const uint8_t *scp = rec + o_sc;
    float32x4_t d[4], S[KQ_NT][4];
    for (int j = 0; j < NQ; j++) {
        d[j] = f16x4(rec + o_d + 8 * (q0 + j));
        for (int t = 0; t < NT; t++)
            S[t][j] = vdupq_n_f32(0.0f);
    }
    for (int p = 0; p < npair; p++) {
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) { /* sub-block s = 2p + e */
            const int s = 2 * p + e;
            int32x4_t acc[KQ_NT][4], acc2[4];
            for (int j = 0; j < NQ; j++) {
                acc2[j] = vdupq_n_s32(0);
                for (int t = 0; t < NT; t++)
                    acc[t][j] = vdupq_n_s32(0);
            }
#pragma GCC unroll 1
            for (int c = s * cps; c < (s + 1) * cps; c++) {
                int8x8_t a[KQ_NT];
                for (int t = 0; t < NT; t++)
                    a[t] = vld1_s8(xq + t * ldxq + NB_QK_K * i + 8 * c);
                for (int j = 0; j < NQ; j++) {
                    int8x16_t lo, hi;
                    quarter(rec, c, q0 + j, kd, &lo, &hi);
                    for (int t = 0; t < NT; t++) {
                        acc[t][j] = vdotq_lane_s32(acc[t][j], lo, a[t], 0);
                        if (NT == 1)
                            acc2[j] = vdotq_lane_s32(acc2[j], hi, a[t], 1);
                        else
                            acc[t][j] = vdotq_lane_s32(acc[t][j], hi, a[t], 1);
                    }
                }
            }
            /* S += float(isum) * (d * sc_s): the 8-bit scale widened (exact), d * sc_s
             * one rounding, then one fused multiply-add */
            int16x8_t sc16[2];
            pair_s16(scp + 32 * p, e, sgn, sc16);
            for (int j = 0; j < NQ; j++) {
                const int q = q0 + j;
                int16x4_t v = q & 1 ? vget_high_s16(sc16[q >> 1]) : vget_low_s16(sc16[q >> 1]);
                float32x4_t dsc = vmulq_f32(d[j], vcvtq_f32_s32(vmovl_s16(v)));
                if (NT == 1) acc[0][j] = vaddq_s32(acc[0][j], acc2[j]);
                for (int t = 0; t < NT; t++)
                    S[t][j] = vfmaq_f32(S[t][j], vcvtq_f32_s32(acc[t][j]), dsc);
            }
        }
    }
    if (kd != IQ4XS) {
        /* the zero terms, exact in int32: Q4_K / Q5_K sum_s mn_s * asum32_s (8
         * sub-blocks of 32), Q6_K sum_s sc_s * asum16_s (16 sub-blocks of 16);
         * S -= zs * float(Z), zs = dmin or 32 d (exact) */
        const uint8_t *zp = q6 ? scp : rec + o_mn;
        int32x4_t Z[KQ_NT][4];
        for (int j = 0; j < NQ; j++)
            for (int t = 0; t < NT; t++)
                Z[t][j] = vdupq_n_s32(0);
#pragma GCC unroll 8
        for (int p = 0; p < npair; p++)
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++) {
                int16x8_t z16[2];
                pair_s16(zp + 32 * p, e, sgn, z16);
                for (int t = 0; t < NT; t++) {
                    const int s = 2 * p + e;
                    const int16_t as = asum_at(xsum + t * ldxg + 16 * i, q6 ? s : 16 + s);
                    for (int j = 0; j < NQ; j++) {
                        const int q = q0 + j;
                        int16x4_t v =
                            q & 1 ? vget_high_s16(z16[q >> 1]) : vget_low_s16(z16[q >> 1]);
                        Z[t][j] = vmlal_n_s16(Z[t][j], v, as);
                    }
                }
            }
        for (int j = 0; j < NQ; j++) {
            const float32x4_t zs =
                q6 ? vmulq_n_f32(d[j], 32.0f) : f16x4(rec + o_dmin + 8 * (q0 + j));
            for (int t = 0; t < NT; t++)
                S[t][j] = vfmsq_f32(S[t][j], zs, vcvtq_f32_s32(Z[t][j]));
        }
    }
    /* y += xd * S */
    for (int t = 0; t < NT; t++) {
        const float32x4_t x = vdupq_n_f32(xd[t * ldxg + i]);
        for (int j = 0; j < NQ; j++) {
            float *yp = y + t * ldy + 4 * (q0 + j);
            const float32x4_t prev = i ? vld1q_f32(yp) : vdupq_n_f32(0.0f);
            vst1q_f32(yp, vfmaq_f32(prev, S[t][j], x));
        }
    }
}

/* NT tokens x one row block, all records along k: the 16 rows of a record in one pass
 * for a decode step, in two halves of 8 rows for 2..4 tokens (acc and S: 2 NT registers
 * each, not 4 NT; each quarter is still unpacked once, the second half reads the record
 * from L1). */
INLINE void tile16(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *recs, int64_t nsb, const enum kind kd,
                   const int NT)
{
    for (int64_t i = 0; i < nsb; i++) {
        if (NT == 1) {
            tile(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, i, kd, NT, 0, 4);
        } else {
            tile(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, i, kd, NT, 0, 2);
            tile(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, i, kd, NT, 2, 2);
        }
    }
}

/* ---------------------------------------------------------------- Q4_0 / Q8_0 / IQ4_NL
 * 16 rows x 64 k, two blocks of 32 with an f16 scale each. Step c (0..3) of a block is 8 k
 * with one 8-byte activation load: Q4_0 / IQ4_NL chunk 4 bl + c (lo / hi nibbles), Q8_0
 * chunks 8 bl + 2c (lo, k 0..3) and 8 bl + 2c + 1 (hi, k 4..7). */
INLINE void quarter32(const uint8_t *rec, const int bl, const int c, const int i,
                      const enum kind32 kd, int8x16_t *lo, int8x16_t *hi)
{
    if (kd == B_Q8_0) {
        const uint8x16_t s = vdupq_n_u8(0x80);
        *lo = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(rec + 64 * (8 * bl + 2 * c) + 16 * i), s));
        *hi = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(rec + 64 * (8 * bl + 2 * c + 1) + 16 * i), s));
        return;
    }
    const uint8x16_t w = vld1q_u8(rec + 64 * (4 * bl + c) + 16 * i);
    const uint8x16_t l = vandq_u8(w, vdupq_n_u8(0x0F)), h = vshrq_n_u8(w, 4);
    if (kd == B_IQ4_NL) {
        *lo = vqtbl1q_s8(iq4_table(), l);
        *hi = vqtbl1q_s8(iq4_table(), h);
    } else {
        *lo = vreinterpretq_s8_u8(l);
        *hi = vreinterpretq_s8_u8(h);
    }
}

INLINE void tile32(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *recs, int64_t nrec,
                   const enum kind32 kd, const int NT)
{
    const int64_t rb = kd == B_Q8_0 ? NB_Q8_0_X16_BYTES : NB_Q4_0_X16_BYTES;
    const int64_t o_d = kd == B_Q8_0 ? NB_Q8_0_X16_D : NB_Q4_0_X16_D;
    for (int64_t i = 0; i < nrec; i++) {
        const uint8_t *rec = recs + i * rb;
#pragma GCC unroll 2
        for (int bl = 0; bl < 2; bl++) {
            const int64_t g = 2 * i + bl; /* the block's index along the row */
            int32x4_t acc[KQ_NT][4], acc2[4];
            for (int q = 0; q < 4; q++) {
                acc2[q] = vdupq_n_s32(0);
                for (int t = 0; t < NT; t++)
                    acc[t][q] = vdupq_n_s32(0);
            }
#pragma GCC unroll 1
            for (int c = 0; c < 4; c++) {
                int8x8_t a[KQ_NT];
                for (int t = 0; t < NT; t++)
                    a[t] = vld1_s8(xq + t * ldxq + 32 * g + 8 * c);
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    int8x16_t lo, hi;
                    quarter32(rec, bl, c, q, kd, &lo, &hi);
                    for (int t = 0; t < NT; t++) {
                        acc[t][q] = vdotq_lane_s32(acc[t][q], lo, a[t], 0);
                        if (NT == 1)
                            acc2[q] = vdotq_lane_s32(acc2[q], hi, a[t], 1);
                        else
                            acc[t][q] = vdotq_lane_s32(acc[t][q], hi, a[t], 1);
                    }
                }
            }
            /* y += (d * xd) * float(isum - zp * xsum), zp = 8 for Q4_0's unsigned codes and
             * 0 for the signed ones: separate roundings, the reference's order */
            for (int t = 0; t < NT; t++) {
                const int32x4_t corr = vdupq_n_s32(kd == B_Q4_0 ? 8 * xsum[t * ldxg + g] : 0);
                const float32x4_t x = vdupq_n_f32(xd[t * ldxg + g]);
                for (int q = 0; q < 4; q++) {
                    int32x4_t s = NT == 1 ? vaddq_s32(acc[0][q], acc2[q]) : acc[t][q];
                    float32x4_t f = vcvtq_f32_s32(vsubq_s32(s, corr));
                    float32x4_t dx = vmulq_f32(f16x4(rec + o_d + 32 * bl + 8 * q), x);
                    float *yp = y + t * ldy + 4 * q;
                    const float32x4_t prev = g ? vld1q_f32(yp) : vdupq_n_f32(0.0f);
                    vst1q_f32(yp, vaddq_f32(prev, vmulq_f32(dx, f)));
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- the drivers
 * Row blocks [r0/16, r1/16), tokens in cache blocks of KQ_TOK_BLOCK, tiles of KQ_NT tokens
 * then 3, 2, 1 (the decode tile). */
#define KQ_DRIVER(TILEFN, NREC, RB, KIND)                                                          \
    do {                                                                                           \
        const int64_t nrec_ = (NREC), rb_ = (RB);                                                  \
        for (int t0 = 0; t0 < n_tok; t0 += KQ_TOK_BLOCK) {                                         \
            const int t1 = n_tok - t0 < KQ_TOK_BLOCK ? n_tok : t0 + KQ_TOK_BLOCK;                  \
            for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {                                    \
                const uint8_t *recs = (const uint8_t *)w_blob + blk * nrec_ * rb_;                 \
                int t = t0;                                                                        \
                for (; t + KQ_NT <= t1; t += KQ_NT)                                                \
                    TILEFN(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg,              \
                           xsum + t * ldxg, ldxq, ldxg, recs, nrec_, KIND, KQ_NT);                 \
                switch (t1 - t) {                                                                  \
                case 3:                                                                            \
                    TILEFN(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg,              \
                           xsum + t * ldxg, ldxq, ldxg, recs, nrec_, KIND, 3);                     \
                    break;                                                                         \
                case 2:                                                                            \
                    TILEFN(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg,              \
                           xsum + t * ldxg, ldxq, ldxg, recs, nrec_, KIND, 2);                     \
                    break;                                                                         \
                case 1:                                                                            \
                    TILEFN(y + t * ldy + blk * 16, ldy, xq + t * ldxq, xd + t * ldxg,              \
                           xsum + t * ldxg, ldxq, ldxg, recs, nrec_, KIND, 1);                     \
                    break;                                                                         \
                default: break;                                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define KQ_DEFINE(f, TILEFN, NREC, RB, KIND)                                                       \
    void nb_gemm_##f##_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,       \
                                   const int32_t *xsum, int64_t ldxq, int64_t ldxg,                \
                                   const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,     \
                                   int64_t r0, int64_t r1)                                         \
    {                                                                                              \
        (void)n_out;                                                                               \
        KQ_DRIVER(TILEFN, NREC, RB, KIND);                                                         \
    }

KQ_DEFINE(q4_k, tile16, n_in / NB_QK_K, NB_Q4_K_X16_BYTES, Q4K)
KQ_DEFINE(q5_k, tile16, n_in / NB_QK_K, NB_Q5_K_X16_BYTES, Q5K)
KQ_DEFINE(q6_k, tile16, n_in / NB_QK_K, NB_Q6_K_X16_BYTES, Q6K)
KQ_DEFINE(iq4_xs, tile16, n_in / NB_QK_K, NB_IQ4_XS_X16_BYTES, IQ4XS)
KQ_DEFINE(q4_0, tile32, n_in / 64, NB_Q4_0_X16_BYTES, B_Q4_0)
KQ_DEFINE(q8_0, tile32, n_in / 64, NB_Q8_0_X16_BYTES, B_Q8_0)
KQ_DEFINE(iq4_nl, tile32, n_in / 64, NB_IQ4_NL_X16_BYTES, B_IQ4_NL)
