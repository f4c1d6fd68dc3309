/* kernels/arm/gemm_w8a16_neon.c — w8a16 GEMM (ROWS layout: int8 codes, one f32 scale per
 * output row) with NEON fused multiply-adds (armv8.0: every aarch64 CPU). The phone
 * export's path.
 *
 * Per row r: the codes widened to f32 (exact) into scratch once, then for every token
 *   y[t][r] = d[r] * sum_k q[k] x[t][k]        (4 x 4-lane FMA chains, then folded)
 * The reference multiplies w = d q first and sums in 8 lanes without FMA: another
 * order, within TOL_W8A16 of tests/test_kernels_arm.c. Not measured on hardware.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"

static float dot_fma(const float *a, const float *b, int64_t n)
{
    float32x4_t s[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 4; j++)
            s[j] = vfmaq_f32(s[j], vld1q_f32(a + i + 4 * j), vld1q_f32(b + i + 4 * j));
    for (; i + 4 <= n; i += 4)
        s[0] = vfmaq_f32(s[0], vld1q_f32(a + i), vld1q_f32(b + i));
    float r = vaddvq_f32(vaddq_f32(vaddq_f32(s[0], s[1]), vaddq_f32(s[2], s[3])));
    for (; i < n; i++)
        r += a[i] * b[i];
    return r;
}

void nb_gemm_w8a16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                        int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1,
                        float *scratch)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes(NB_WPATH_W8A16, 0, n_out, n_in, &pl)) return;
    const uint8_t *b = w_blob;
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *row = (const int8_t *)(b + pl.offset[0] + r * n_in);
        float d;
        memcpy(&d, b + pl.offset[1] + 4 * r, 4);
        int64_t k = 0;
        for (; k + 16 <= n_in; k += 16) {
            int8x16_t q = vld1q_s8(row + k);
            int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
            vst1q_f32(scratch + k, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))));
            vst1q_f32(scratch + k + 4, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))));
            vst1q_f32(scratch + k + 8, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))));
            vst1q_f32(scratch + k + 12, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))));
        }
        for (; k < n_in; k++)
            scratch[k] = (float)row[k];
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = d * dot_fma(x + t * ldx, scratch, n_in);
    }
}
