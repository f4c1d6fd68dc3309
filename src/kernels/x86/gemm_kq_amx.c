/* kernels/x86/gemm_kq_amx.c — the GGUF block formats' X16 GEMMs on AMX-INT8 tiles (prefill;
 * correct on AMX tiles, no faster than VNNI in situ: opt-in, NIBBLE_AMX=all). Body: gemm_kq_amx.inc; the
 * tile shapes are the w4a8 AMX kernel's (nb_amx_config). */
#include <immintrin.h>

#include "kernels/kernels.h"

#include "kernels/x86/amx_tiles.h"
#define KQ_NAME(f) nb_gemm_##f##_x16_amx
#include "kernels/x86/gemm_kq_amx.inc"
