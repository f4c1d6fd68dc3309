/* kernels/x86/amx_tiles.h — the tile operations of the AMX kernel bodies (gemm_kq_amx.inc,
 * gemm_w4a8_amx.inc, gemm_w4a16_amx.inc) on AMX's own instructions, in the tile shapes of
 * nb_amx_config. gemm_kq_amxemu_avx512vnni.c defines the same names on an emulated tile file. */
#ifndef NB_KERNELS_X86_AMX_TILES_H
#define NB_KERNELS_X86_AMX_TILES_H

#include <immintrin.h>

#define T_CONFIG(K)         nb_amx_config(K, 16)
#define T_CONFIG_ROWS(K, M) nb_amx_config(K, M)
#define T_ZERO(i)           _tile_zero(i)
/* GCC's tileloadd asm names no memory operand: without the barrier, the stores that fill
 * the tile's source (the unpacked B rows, the packed A) may be moved after it. */
#define T_LOAD(i, p, stride)                                                                       \
    do {                                                                                           \
        __asm__ volatile("" ::: "memory");                                                         \
        _tile_loadd(i, p, stride);                                                                 \
    } while (0)
#define T_STORE(i, p, stride) _tile_stored(i, p, stride)
#define T_DPBSUD(c, a, b)     _tile_dpbsud(c, a, b)
#define T_DPBSSD(c, a, b)     _tile_dpbssd(c, a, b)
#define T_DPBF16PS(c, a, b)   _tile_dpbf16ps(c, a, b)
#define T_RELEASE()           _tile_release()

#endif
