/* kernels/x86/gemm_w4a8_avxvnni.c — w4a8 X16 GEMM with AVX-VNNI (256-bit vpdpbusd,
 * for CPUs with AVX-VNNI but no AVX-512). Body: gemm_w4a8_x16_avx2.inc. */
#include <immintrin.h>

#include "kernels/kernels.h"

#define NB_X16_FN         nb_gemm_w4a8_x16_avxvnni
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#include "kernels/x86/gemm_w4a8_x16_avx2.inc"
