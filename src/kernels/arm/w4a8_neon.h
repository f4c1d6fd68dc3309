/* kernels/arm/w4a8_neon.h — what the NEON w4a8 X16 kernels share (plain NEON only, so
 * every variant may include it): loads, and the per-group float epilogue
 *
 *   y[r] += (d_w[r] * xd) * (float)(isum[r] - 8 * xsum)     4 rows per vector
 *
 * written as nb_gemm_w4a8_ref writes it (one rounding per operation, in that order), so
 * the kernels are bit-identical to the reference. */
#ifndef NB_KERNELS_ARM_W4A8_NEON_H
#define NB_KERNELS_ARM_W4A8_NEON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

static inline int32_t nb_arm_ld32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 4 bf16 -> 4 f32 (exact: the bits shifted up). */
static inline float32x4_t nb_arm_bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* One group's contribution to 16 rows: s[i] holds the int32 sums of rows 4i..4i+3,
 * ds the rows' 16 bf16 scales of this group. */
static inline float32x4_t nb_w4a8_term(int32x4_t s, const uint16_t *ds4, float32x4_t xdv,
                                       int32x4_t corr)
{
    float32x4_t f = vcvtq_f32_s32(vsubq_s32(s, corr));
    return vmulq_f32(vmulq_f32(nb_arm_bf16x4(ds4), xdv), f);
}

/* y in registers (decode): yv[i] += term. */
static inline void nb_w4a8_group_regs(float32x4_t yv[4], const int32x4_t s[4], const uint16_t *ds,
                                      float xd, int32_t xsum)
{
    const float32x4_t xdv = vdupq_n_f32(xd);
    const int32x4_t corr = vdupq_n_s32(8 * xsum);
    for (int i = 0; i < 4; i++)
        yv[i] = vaddq_f32(yv[i], nb_w4a8_term(s[i], ds + 4 * i, xdv, corr));
}

/* y in memory (prefill): the 16 floats at y, 0 before group 0. */
static inline void nb_w4a8_group_mem(float *y, int64_t g, const int32x4_t s[4], const uint16_t *ds,
                                     float xd, int32_t xsum)
{
    const float32x4_t xdv = vdupq_n_f32(xd);
    const int32x4_t corr = vdupq_n_s32(8 * xsum);
    for (int i = 0; i < 4; i++) {
        float32x4_t prev = g ? vld1q_f32(y + 4 * i) : vdupq_n_f32(0);
        vst1q_f32(y + 4 * i, vaddq_f32(prev, nb_w4a8_term(s[i], ds + 4 * i, xdv, corr)));
    }
}

/* kernels/arm/gemm_w4a8_dotprod.c: the dotprod decode tile for one token over row blocks
 * [b0, b1) (qs, ds: the blob's planes 0 and 1); the i8mm kernel's odd token. Needs
 * dotprod. */
void nb_w4a8_x16_dotprod_tok(float *y, const int8_t *xq, const float *xd, const int32_t *xsum,
                             const uint8_t *qs, const uint16_t *ds, int64_t n_in, int group,
                             int64_t b0, int64_t b1);

#endif
