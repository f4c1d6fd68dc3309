/* kernels/x86/gemm_kq_avxvnni.c — the GGUF block formats' X16 GEMMs with AVX-VNNI (256-bit
 * vpdpbusd, for CPUs with AVX-VNNI but no AVX-512 VNNI): the codes as the AVX-512 kernel
 * multiplies them (unsigned, zero terms subtracted). Body: gemm_kq_x16_avx2.inc. */
#include <immintrin.h>

#include "kernels/kernels.h"

#define KQ_NAME(f)        nb_gemm_##f##_x16_avxvnni
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define KQ_SIGNED         0
#include "kernels/x86/gemm_kq_x16_avx2.inc"
