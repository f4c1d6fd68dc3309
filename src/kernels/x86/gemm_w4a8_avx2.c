/* kernels/x86/gemm_w4a8_avx2.c — w4a8 X16 GEMM with AVX2 (no VNNI): the u8 x s8
 * dot of 4 bytes per dword is vpmaddubsw (pairs to int16; |15 * 127 * 2| fits) and
 * vpmaddwd against ones (pairs to int32). Body: gemm_w4a8_x16_avx2.inc. */
#include <immintrin.h>

#include "kernels/kernels.h"

static inline __m256i dpbusd_avx2(__m256i acc, __m256i u, __m256i s)
{
    __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

#define NB_X16_FN         nb_gemm_w4a8_x16_avx2
#define DPBUSD(acc, u, s) dpbusd_avx2(acc, u, s)
#include "kernels/x86/gemm_w4a8_x16_avx2.inc"
