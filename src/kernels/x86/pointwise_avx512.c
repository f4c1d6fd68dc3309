/* kernels/x86/pointwise_avx512.c — the gated MLP activation and RMSNorm with AVX-512.
 *
 * exp(x) = 2^n e^r with n = round(x log2 e), r = x - n ln2 (ln2 split in two parts, so
 * r is exact to ~1 ulp), e^r by its Taylor series to r^7 (|r| <= ln2/2: truncation
 * < 6e-9 relative) and 2^n applied by vscalefps, which also gives inf / 0 beyond the
 * float range. Then silu(g) = g / (1 + e^-g) and gelu_tanh(g) = g / (1 + e^-2u) with
 * u = sqrt(2/pi) (g + 0.044715 g^3), which is 0.5 g (1 + tanh u) rewritten.
 * Measured against nb_glu_ref: relative error <= 4e-7 over [-90, 90]
 * (tests/test_kernels_x86.c, TOL_GLU).
 * RMSNorm sums squares in f32 over 16 lanes (the reference sums in double): relative
 * error <= 1e-6 for the model's sizes (TOL_NORM). */
#include <immintrin.h>

#include "kernels/kernels.h"

static inline __m512 exp16(__m512 x)
{
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2_hi = _mm512_set1_ps(0.693145751953125f);
    const __m512 ln2_lo = _mm512_set1_ps(1.428606765330187045e-06f);
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(100.0f)), _mm512_set1_ps(-100.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 act16(__m512 g, enum nb_glu_act act)
{
    __m512 z = g; /* silu: g / (1 + e^-g) */
    if (act == NB_GLU_GELU_TANH) {
        const __m512 k2 = _mm512_set1_ps(2 * 0.7978845608028654f);
        __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
        z = _mm512_mul_ps(k2, _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
    }
    __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), z));
    return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

void nb_glu_avx512(float *out, const float *gate, const float *up, int64_t n,
                   enum nb_glu_act act)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = act16(_mm512_loadu_ps(gate + i), act);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(a, _mm512_loadu_ps(up + i)));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 a = act16(_mm512_maskz_loadu_ps(m, gate + i), act);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, up + i)));
    }
}

void nb_rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    double ss = (double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    float scale = (float)(1.0 / __builtin_sqrt(ss / (double)n + eps));
    const __m512 sv = _mm512_set1_ps(scale);
    for (i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
    }
}
