/* kernels/arm/pointwise_neon.c — the gated MLP activation and RMSNorm with NEON.
 *
 * exp(x) = 2^n e^r with n = round(x log2 e), r = x - n ln2 (ln2 in two parts, so r is
 * exact to ~1 ulp), e^r by its Taylor series to r^7 (|r| <= ln2/2: truncation < 6e-9
 * relative), 2^n as two exponent-field products 2^(n/2) 2^(n - n/2), so that |n| up to
 * 145 (x clamped to +-100) gives inf / 0 / subnormals as a float would. Then
 * silu(g) = g / (1 + e^-g) and gelu_tanh(g) = g / (1 + e^-2u), u = sqrt(2/pi) (g +
 * 0.044715 g^3), which is 0.5 g (1 + tanh u) rewritten (the x86 twin's formulas).
 * Against nb_glu_ref within TOL_GLU of tests/test_kernels_arm.c.
 * RMSNorm sums the squares in two f64 lanes (the reference: one f64 sum), then scales
 * as the reference does (x * scale * w, left to right): within TOL_NORM. */
#include <arm_neon.h>
#include <math.h>

#include "kernels/kernels.h"

static inline float32x4_t pow2i(int32x4_t n) /* 2^n for |n| <= 126 */
{
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n, vdupq_n_s32(127)), 23));
}

static inline float32x4_t exp4(float32x4_t x)
{
    const float32x4_t ln2_hi = vdupq_n_f32(0.693145751953125f);
    const float32x4_t ln2_lo = vdupq_n_f32(1.428606765330187045e-06f);
    x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(100.0f)), vdupq_n_f32(-100.0f));
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, ln2_hi);
    r = vfmsq_f32(r, n, ln2_lo);
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t ni = vcvtq_s32_f32(n);
    int32x4_t n1 = vshrq_n_s32(ni, 1); /* floor(n / 2) */
    return vmulq_f32(vmulq_f32(p, pow2i(n1)), pow2i(vsubq_s32(ni, n1)));
}

static inline float32x4_t act4(float32x4_t g, enum nb_glu_act act)
{
    float32x4_t z = g; /* silu: g / (1 + e^-g) */
    if (act == NB_GLU_GELU_TANH) {
        float32x4_t g3 = vmulq_f32(vmulq_f32(g, g), g);
        z = vmulq_f32(vdupq_n_f32(2 * 0.7978845608028654f),
                      vfmaq_f32(g, vdupq_n_f32(0.044715f), g3));
    }
    float32x4_t e = exp4(vnegq_f32(z));
    return vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e));
}

void nb_glu_neon(float *out, const float *gate, const float *up, int64_t n, enum nb_glu_act act)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(act4(vld1q_f32(gate + i), act), vld1q_f32(up + i)));
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, o[4];
        for (int64_t j = i; j < n; j++)
            g[j - i] = gate[j], u[j - i] = up[j];
        vst1q_f32(o, vmulq_f32(act4(vld1q_f32(g), act), vld1q_f32(u)));
        for (int64_t j = i; j < n; j++)
            out[j] = o[j - i];
    }
}

void nb_rmsnorm_neon(float *y, const float *x, const float *w, int64_t n, float eps)
{
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        s0 = vfmaq_f64(s0, lo, lo);
        s1 = vfmaq_f64(s1, hi, hi);
    }
    double ss = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    const float32x4_t sv = vdupq_n_f32(scale);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), sv), vld1q_f32(w + i)));
    for (; i < n; i++) {
        float v = x[i] * scale;
        y[i] = v * w[i];
    }
}
