/* kernels/x86/act_quant_avx512.c — int8 activation quantizer with AVX-512, the same
 * arithmetic as nb_act_quant_q8_ref (max|x| / 127, x / d rounded to nearest even,
 * clamped to +-127), so the codes, scales and sums are bit-identical. */
#include <immintrin.h>

#include "kernels/kernels.h"

void nb_act_quant_q8_avx512(const float *x, int64_t n, int group, int8_t *q, float *d,
                            int32_t *gsum)
{
    if (group % 16) {
        nb_act_quant_q8_ref(x, n, group, q, d, gsum);
        return;
    }
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 lim = _mm512_set1_ps(127.0f);
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        __m512 mx = _mm512_setzero_ps();
        for (int i = 0; i < group; i += 16)
            mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_loadu_ps(xg + i), absmask));
        float dg = _mm512_reduce_max_ps(mx) / 127.0f;
        __m512i sum = _mm512_setzero_si512();
        if (dg > 0.0f) {
            __m512 dv = _mm512_set1_ps(dg);
            for (int i = 0; i < group; i += 16) {
                __m512 v = _mm512_div_ps(_mm512_loadu_ps(xg + i), dv);
                v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v = _mm512_min_ps(_mm512_max_ps(v, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
                __m512i qi = _mm512_cvtps_epi32(v);
                sum = _mm512_add_epi32(sum, qi);
                _mm_storeu_si128((__m128i *)(q + g * group + i), _mm512_cvtsepi32_epi8(qi));
            }
        } else {
            for (int i = 0; i < group; i += 16)
                _mm_storeu_si128((__m128i *)(q + g * group + i), _mm_setzero_si128());
        }
        d[g] = dg;
        gsum[g] = _mm512_reduce_add_epi32(sum);
    }
}
