/* kernels/x86/vec_avx512.c — f32 dot / axpy and float-weight GEMMs with AVX-512
 * (attention and the f32/f16/bf16 weight paths). Same contracts as the _ref twins in
 * kernels/ref/gemm_ref.c; sums run in 16 lanes, so results differ from the reference
 * by rounding only (tests: test_kernels_vec.c). */
#include <immintrin.h>

#include "kernels/kernels.h"

float nb_dot_f32_avx512(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void nb_axpy_f32_avx512(float *y, float a, const float *x, int64_t n)
{
    __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i),
                                              _mm512_maskz_loadu_ps(m, y + i)));
    }
}

void nb_gemm_f32_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    (void)scratch;
    const float *W = w;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = nb_dot_f32_avx512(x + t * ldx, W + r * n_in, n_in);
}

/* f16 / bf16 weights: convert one row to f32 in scratch, then dot it with every token. */
void nb_gemm_f16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = W + r * n_in;
        int64_t i = 0;
        for (; i + 16 <= n_in; i += 16)
            _mm512_storeu_ps(scratch + i,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + i))));
        for (; i < n_in; i++) scratch[i] = _cvtsh_ss(row[i]);
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = nb_dot_f32_avx512(x + t * ldx, scratch, n_in);
    }
}

void nb_gemm_bf16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                         int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = W + r * n_in;
        int64_t i = 0;
        for (; i + 16 <= n_in; i += 16) {
            __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + i)));
            _mm512_storeu_ps(scratch + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        }
        for (; i < n_in; i++) {
            uint32_t u = (uint32_t)row[i] << 16;
            __builtin_memcpy(&scratch[i], &u, 4);
        }
        for (int t = 0; t < n_tok; t++) y[t * ldy + r] = nb_dot_f32_avx512(x + t * ldx, scratch, n_in);
    }
}
