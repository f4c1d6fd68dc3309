/* kernels/arm/vec_neon.c — f32 dot / axpy and the float-weight GEMMs with NEON.
 *
 * The reference dot (kernels/ref/gemm_ref.c) keeps 8 partial sums, acc[j] += a b with a
 * multiply and an add (no fused multiply-add), and folds them as
 * ((0+4) + (1+5)) + ((2+6) + (3+7)). Two 4-lane registers hold acc[0..3] and acc[4..7]
 * and do the same operations (fmul, fadd), the tail goes to the same partial sums and
 * the fold is the same: the result is bit-identical to nb_dot_f32_ref, and so are axpy
 * and the f32 / f16 / bf16 GEMMs built on it (f16 and bf16 widen exactly). */
#include <arm_neon.h>

#include "core/fp.h"
#include "kernels/kernels.h"

float nb_dot_f32_neon(const float *a, const float *b, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vaddq_f32(s0, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
        s1 = vaddq_f32(s1, vmulq_f32(vld1q_f32(a + i + 4), vld1q_f32(b + i + 4)));
    }
    float acc[8];
    vst1q_f32(acc, s0);
    vst1q_f32(acc + 4, s1);
    for (; i < n; i++) {
        float p = a[i] * b[i];
        acc[i & 7] += p;
    }
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void nb_axpy_f32_neon(float *y, float a, const float *x, int64_t n)
{
    const float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(va, vld1q_f32(x + i))));
    for (; i < n; i++) {
        float p = a * x[i];
        y[i] += p;
    }
}

void nb_gemm_f32_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    (void)scratch;
    const float *W = w;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_neon(x + t * ldx, W + r * n_in, n_in);
}

/* f16 / bf16 weights: one row widened to f32 in scratch, then dotted with every token. */
void nb_gemm_f16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = W + r * n_in;
        int64_t i = 0;
        for (; i + 4 <= n_in; i += 4)
            vst1q_f32(scratch + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(row + i))));
        for (; i < n_in; i++)
            scratch[i] = nb_f16_to_f32(row[i]);
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_neon(x + t * ldx, scratch, n_in);
    }
}

void nb_gemm_bf16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                       int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = W + r * n_in;
        int64_t i = 0;
        for (; i + 4 <= n_in; i += 4)
            vst1q_f32(scratch + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(row + i), 16)));
        for (; i < n_in; i++)
            scratch[i] = nb_bf16_to_f32(row[i]);
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_neon(x + t * ldx, scratch, n_in);
    }
}
