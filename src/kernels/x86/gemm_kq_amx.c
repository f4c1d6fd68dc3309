/* kernels/x86/gemm_kq_amx.c — the GGUF block formats' X16 GEMMs on AMX-INT8 tiles (prefill;
 * correct on AMX tiles, no faster than VNNI in situ: opt-in, NIBBLE_AMX=all). Body: gemm_kq_amx.inc; the
 * tile shapes are the w4a8 AMX kernel's (nb_amx_config). */
#include <immintrin.h>

#include "kernels/kernels.h"

#define KQ_NAME(f)               nb_gemm_##f##_x16_amx
#define T_CONFIG(K)              nb_amx_config(K)
#define T_ZERO(i)                _tile_zero(i)
#define T_LOAD(i, p, stride)     _tile_loadd(i, p, stride)
#define T_STORE(i, p, stride)    _tile_stored(i, p, stride)
#define T_DPBSUD(c, a, b)        _tile_dpbsud(c, a, b)
#define T_RELEASE()              _tile_release()
#include "kernels/x86/gemm_kq_amx.inc"
