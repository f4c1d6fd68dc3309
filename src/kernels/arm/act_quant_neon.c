/* kernels/arm/act_quant_neon.c — int8 activation quantizer with NEON, the arithmetic of
 * nb_act_quant_q8_ref: d = max|x| / 127, q = x / d rounded to nearest even (frintn),
 * clamped to +-127, so codes, scales and sums are bit-identical. The max and the clamp
 * use the maxNum / minNum forms (fmaxnm, fminnm), which like fmaxf / fminf ignore a NaN
 * operand: a NaN input gives the reference's code too. */
#include <arm_neon.h>

#include "kernels/kernels.h"

void nb_act_quant_q8_neon(const float *x, int64_t n, int group, int8_t *q, float *d, int32_t *gsum)
{
    if (group % 16) {
        nb_act_quant_q8_ref(x, n, group, q, d, gsum);
        return;
    }
    const float32x4_t lim = vdupq_n_f32(127.0f), nlim = vdupq_n_f32(-127.0f);
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        int8_t *qg = q + g * group;
        float32x4_t mx = vdupq_n_f32(0);
        for (int i = 0; i < group; i += 4)
            mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(xg + i)));
        float dg = vmaxnmvq_f32(mx) / 127.0f;
        int32x4_t sum = vdupq_n_s32(0);
        if (dg > 0.0f) {
            const float32x4_t dv = vdupq_n_f32(dg);
            for (int i = 0; i < group; i += 16) {
                int32x4_t qi[4];
                for (int j = 0; j < 4; j++) {
                    float32x4_t v = vrndnq_f32(vdivq_f32(vld1q_f32(xg + i + 4 * j), dv));
                    v = vminnmq_f32(vmaxnmq_f32(v, nlim), lim);
                    qi[j] = vcvtq_s32_f32(v);
                    sum = vaddq_s32(sum, qi[j]);
                }
                int16x8_t h0 = vcombine_s16(vmovn_s32(qi[0]), vmovn_s32(qi[1]));
                int16x8_t h1 = vcombine_s16(vmovn_s32(qi[2]), vmovn_s32(qi[3]));
                vst1q_s8(qg + i, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
            }
        } else {
            for (int i = 0; i < group; i += 16)
                vst1q_s8(qg + i, vdupq_n_s8(0));
        }
        d[g] = dg;
        gsum[g] = vaddvq_s32(sum);
    }
}
