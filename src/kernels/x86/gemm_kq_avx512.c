/* kernels/x86/gemm_kq_avx512.c — GGUF Q4_K / Q6_K rows run as stored (`--path source`
 * on a k-quant GGUF), AVX-512: a row is decoded into scratch 16 values at a time and
 * dotted with every token, as the f16 GEMM does.
 *
 * The decode is the reference's arithmetic lane by lane (kernels/qblock.h: the scalar
 * products d * scale and dmin * min in f32, then one multiply and one subtract per
 * element, never fused), so the row is bit-identical to nb_dequant_row_*_ref and to
 * llama.cpp's dequantization; only the dot's summation order differs from the
 * reference GEMM (test_kernels_vec). */
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/qblock.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* 16 unsigned bytes -> 16 floats. */
static inline __m512 u8_to_ps(__m128i b)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
}

/* y[0..16) = d * q - m for the 16 byte codes q (the two roundings of the reference). */
static inline void store_dqm(float *y, __m128i q, __m512 d, __m512 m)
{
    _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(d, u8_to_ps(q)), m));
}

void nb_dequant_row_q4_k_avx512(const void *row, float *y, int64_t n)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++, b += NB_Q4_K_BYTES, y += NB_QK_K) {
        float d = nb_f16_to_f32(nb_q_load_u16(b)), dmin = nb_f16_to_f32(nb_q_load_u16(b + 2));
        const uint8_t *sc = b + 4, *qs = b + 16;
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i q[2] = {_mm256_and_si256(raw, m4),
                            _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)};
            for (int k = 0; k < 2; k++) {
                int sub = 2 * c + k, s, m;
                nb_k4_scale_min(sc, sub, &s, &m);
                float d1 = d * (float)s, m1 = dmin * (float)m;
                __m512 vd = _mm512_set1_ps(d1), vm = _mm512_set1_ps(m1);
                store_dqm(y + 32 * sub, _mm256_castsi256_si128(q[k]), vd, vm);
                store_dqm(y + 32 * sub + 16, _mm256_extracti128_si256(q[k], 1), vd, vm);
            }
        }
    }
}

void nb_dequant_row_q6_k_avx512(const void *row, float *y, int64_t n)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    const __m512i k32 = _mm512_set1_epi32(32);
    const uint8_t *b = row;
    for (int64_t i = 0; i < n / NB_QK_K; i++, b += NB_Q6_K_BYTES, y += NB_QK_K) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = nb_f16_to_f32(nb_q_load_u16(b + 208));
        for (int h = 0; h < 2; h++) {
            __m256i hbits = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
            for (int j = 0; j < 4; j++) { /* elements 128h + 32j .. +31 */
                __m256i l = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32 * (j % 2)));
                if (j / 2) l = _mm256_srli_epi16(l, 4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), m2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_slli_epi16(hi, 4));
                for (int k = 0; k < 2; k++) {
                    __m128i q16 = k ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
                    __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(q16), k32));
                    float dl = d * (float)sc[8 * h + 2 * j + k];
                    _mm512_storeu_ps(y + 128 * h + 32 * j + 16 * k,
                                     _mm512_mul_ps(_mm512_set1_ps(dl), v));
                }
            }
        }
    }
}

void nb_gemm_q4_k_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q4_k_avx512, n_in / NB_QK_K * NB_Q4_K_BYTES,
                        nb_dot_f32_avx512, y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}

void nb_gemm_q6_k_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    nb_gemm_row_decoded(nb_dequant_row_q6_k_avx512, n_in / NB_QK_K * NB_Q6_K_BYTES,
                        nb_dot_f32_avx512, y, ldy, x, ldx, w, n_in, n_tok, r0, r1, scratch);
}
