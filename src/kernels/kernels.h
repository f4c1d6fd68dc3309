/* kernels/kernels.h — the compute kernels, behind a dispatch table.
 *
 * Kernels take raw pointers and sizes: no allocation, no threads, no model
 * structs. Every kernel has a scalar `_ref` twin in kernels/ref/ that is the ground
 * truth for tests; fast variants (kernels/x86/, kernels/arm/) are picked once at
 * start-up from the CPU probe. NIBBLE_ISA=ref forces the reference kernels.
 */
#ifndef NB_KERNELS_H
#define NB_KERNELS_H

#include <stdint.h>

/* GEMM against a weight matrix W stored row-major as [n_out][n_in]:
 *     y[t * ldy + r] = sum_i x[t * ldx + i] * W[r][i]
 * for tokens t in [0, n_tok) and output rows r in [r0, r1). `scratch` holds at
 * least n_in floats (a converted weight row) for the f16/bf16 variants. */
typedef void (*nb_gemm_fn)(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                           int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);

struct nb_kernels {
    const char *isa; /* "ref", "avx2", "avx512" */
    nb_gemm_fn gemm_f32;
    nb_gemm_fn gemm_f16;
    nb_gemm_fn gemm_bf16;
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n); /* y += a x */
};

/* The table for this CPU (probed once; NIBBLE_ISA=ref|avx2|avx512 overrides). */
const struct nb_kernels *nb_kernels_get(void);
/* The reference table. */
const struct nb_kernels *nb_kernels_ref(void);

/* ---- reference kernels ---- */
void nb_gemm_f32_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_f16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_bf16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
float nb_dot_f32_ref(const float *a, const float *b, int64_t n);
void nb_axpy_f32_ref(float *y, float a, const float *x, int64_t n);

/* Small element-wise ops (scalar; not worth dispatching yet). */
void nb_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void nb_softmax(float *x, int64_t n);

#endif
