/* kernels/x86/attn_avx512.h — what the AVX-512 attention kernels (attn_avx512.c) and the
 * AMX-BF16 prefill tile (attn_amx.inc) share: exp on 16 lanes, the online-softmax step of
 * a block of 16 keys whose scores sit key by key in vectors of query rows (lanes), and 16
 * values of a cache row as f32. */
#ifndef NB_KERNELS_X86_ATTN_AVX512_H
#define NB_KERNELS_X86_ATTN_AVX512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* One block of keys kb .. kb+nk-1: scores, online-softmax update of m / l (per lane),
 * weights to pt, alpha to al. */
ALWAYS_INLINE void softmax_block(int NV, __m512 s[16][2], int kb, int nk, const int32_t *qp,
                                 int window, __m512 *m, __m512 *l, float *pt, float *al)
{
    for (int v = 0; v < NV; v++) {
        __m512i qv = _mm512_loadu_si512(qp + 16 * v);
        __mmask16 valid[16];
        __m512 mx = m[v];
        for (int j = 0; j < 16; j++) {
            __m512i kp = _mm512_set1_epi32(kb + j);
            __mmask16 mk = j < nk ? _mm512_cmple_epi32_mask(kp, qv) : 0;
            if (window > 0)
                mk &= _mm512_cmplt_epi32_mask(_mm512_sub_epi32(qv, kp), _mm512_set1_epi32(window));
            valid[j] = mk;
            mx = _mm512_mask_max_ps(mx, mk, mx, s[j][v]);
        }
        __m512 alpha = exp512(_mm512_sub_ps(m[v], mx));
        m[v] = mx;
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < 16; j++) {
            __m512 p = _mm512_maskz_mov_ps(valid[j], exp512(_mm512_sub_ps(s[j][v], mx)));
            sum = _mm512_add_ps(sum, p);
            _mm512_storeu_ps(pt + j * 32 + 16 * v, p);
        }
        l[v] = _mm512_fmadd_ps(l[v], alpha, sum);
        _mm512_storeu_ps(al + 16 * v, alpha);
    }
}

/* 16 values of a K / V row of a cache type from column d on, as f32 (those
 * nb_kv_row_load_avx512 gives). */
ALWAYS_INLINE __m512 ld16(int type, const char *row, int d)
{
    if (type == NB_KVE_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * d)));
    if (type == NB_KVE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * d))), 16));
    if (type == NB_KVE_Q8_0) {
        const uint8_t *b = (const uint8_t *)row + (d / 32) * 34;
        uint16_t dh;
        memcpy(&dh, b, 2);
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + d % 32));
        /* the scale in every lane: vcvtph2ps of a broadcast (AVX-512F, no F16C needed) */
        const __m512 sc = _mm512_cvtph_ps(_mm256_set1_epi16((short)dh));
        return _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
    }
    return _mm512_loadu_ps((const float *)row + d);
}

#endif
