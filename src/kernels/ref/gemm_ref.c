/* kernels/ref/gemm_ref.c — scalar GEMM / dot / axpy: the ground truth.
 * Dot products use 8 independent partial sums (a fixed, documented summation
 * order, also friendlier to the compiler than one serial chain). */
#include <math.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

float nb_dot_f32_ref(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void nb_axpy_f32_ref(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void nb_gemm_f32_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    (void)scratch;
    const float *W = w;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, W + r * n_in, n_in);
}

void nb_gemm_f16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t i = 0; i < n_in; i++) scratch[i] = nb_f16_to_f32(W[r * n_in + i]);
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, scratch, n_in);
    }
}

void nb_gemm_bf16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t i = 0; i < n_in; i++) scratch[i] = nb_bf16_to_f32(W[r * n_in + i]);
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, scratch, n_in);
    }
}

void nb_softmax(float *x, int64_t n)
{
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* ---- GGUF Q4_K / Q6_K rows (a GGUF source run as stored) ----
 * Decode one row into scratch with the block decoders of kernels/qblock.h (llama.cpp's
 * values bit for bit), then dot it with every token, as the f16 GEMM does. */
void nb_dequant_row_q4_k_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++) nb_q4_k_block(b + i * NB_Q4_K_BYTES, y + i * NB_QK_K);
}

void nb_dequant_row_q6_k_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++) nb_q6_k_block(b + i * NB_Q6_K_BYTES, y + i * NB_QK_K);
}

void nb_gemm_row_decoded(void (*row)(const void *, float *, int64_t), int64_t row_bytes,
                         float (*dot)(const float *, const float *, int64_t), float *y,
                         int64_t ldy, const float *x, int64_t ldx, const void *w, int64_t n_in,
                         int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint8_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        row(W + r * row_bytes, scratch, n_in);
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = dot(x + t * ldx, scratch, n_in);
    }
}

void nb_gemm_q4_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q4_k_ref, n_in / NB_QK_K * NB_Q4_K_BYTES, nb_dot_f32_ref,
                        y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_gemm_q6_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q6_k_ref, n_in / NB_QK_K * NB_Q6_K_BYTES, nb_dot_f32_ref,
                        y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_dequant_row_q5_k_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++) nb_q5_k_block(b + i * NB_Q5_K_BYTES, y + i * NB_QK_K);
}

void nb_dequant_row_q4_0_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / 32; i++) nb_q4_0_block(b + i * NB_Q4_0_BYTES, y + i * 32);
}

void nb_dequant_row_q8_0_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / 32; i++) nb_q8_0_block(b + i * NB_Q8_0_BYTES, y + i * 32);
}

void nb_gemm_q5_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q5_k_ref, n_in / NB_QK_K * NB_Q5_K_BYTES, nb_dot_f32_ref,
                        y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_gemm_q4_0_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q4_0_ref, n_in / 32 * NB_Q4_0_BYTES, nb_dot_f32_ref, y,
                        ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_gemm_q8_0_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q8_0_ref, n_in / 32 * NB_Q8_0_BYTES, nb_dot_f32_ref, y,
                        ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_dequant_row_iq4_nl_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / 32; i++) nb_iq4_nl_block(b + i * NB_IQ4_NL_BYTES, y + i * 32);
}

void nb_dequant_row_iq4_xs_ref(const void *row, float *y, int64_t n)
{
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++)
        nb_iq4_xs_block(b + i * NB_IQ4_XS_BYTES, y + i * NB_QK_K);
}

void nb_gemm_iq4_nl_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_iq4_nl_ref, n_in / 32 * NB_IQ4_NL_BYTES, nb_dot_f32_ref,
                        y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_gemm_iq4_xs_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_iq4_xs_ref, n_in / NB_QK_K * NB_IQ4_XS_BYTES,
                        nb_dot_f32_ref, y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}
