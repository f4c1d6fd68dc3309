/* kernels/x86/avx512_loads.h — the loads the AVX-512 weight kernels share: 16 bf16 scales
 * widened to f32 (exact), and one 4-byte group of activations broadcast to every dword lane
 * (the pair or quad a vpdpwssd, vdpbf16ps or vpdpbusd multiplies 16 rows by). */
#ifndef NB_KERNELS_X86_AVX512_LOADS_H
#define NB_KERNELS_X86_AVX512_LOADS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline __attribute__((always_inline)) __m512 nb_bf16x16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) __m512i nb_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

#endif
