/* kernels/x86/gemm_kq_avx2.c — the GGUF block formats' X16 GEMMs with AVX2 (no VNNI):
 * the u8 x s8 dot of 4 bytes a dword is vpmaddubsw (pairs to int16) and vpmaddwd against
 * ones (pairs to int32). The k-quant codes (<= 63) times |a| <= 127 stay below the int16
 * pair's saturation; Q8_0 and the IQ4 grids are multiplied as signed codes (|code| <= 128).
 * Body: gemm_kq_x16_avx2.inc. */
#include <immintrin.h>

#include "kernels/kernels.h"

static inline __m256i dpbusd_avx2(__m256i acc, __m256i u, __m256i s)
{
    __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

#define KQ_NAME(f)        nb_gemm_##f##_x16_avx2
#define DPBUSD(acc, u, s) dpbusd_avx2(acc, u, s)
#define KQ_SIGNED         1
#include "kernels/x86/gemm_kq_x16_avx2.inc"
