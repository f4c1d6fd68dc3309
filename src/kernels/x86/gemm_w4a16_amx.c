/* kernels/x86/gemm_w4a16_amx.c — w4a16 GEMM on the X16 layout with AMX-BF16 (prefill and
 * batches from 2 tokens): the body of gemm_w4a16_amx.inc on the tile instructions (its
 * emulated twin is in gemm_kq_amxemu_avx512vnni.c), the tile configuration and permission of
 * gemm_w4a8_amx.c. One token (decode) goes to the AVX512-BF16 kernel (every AMX-BF16 CPU has
 * AVX512-BF16). dispatch.c installs it by default (not with NIBBLE_AMX=0) on CPUs with
 * AMX-BF16 and AVX512-BF16, after a first-use self-check against nb_gemm_w4a16_x16_ref. */
#include "kernels/x86/amx_tiles.h"
#define W16_NAME nb_gemm_w4a16_x16_amx
#define W16_REST nb_gemm_w4a16_x16_avx512bf16
#include "kernels/x86/gemm_w4a16_amx.inc"
