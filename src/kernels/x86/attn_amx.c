/* kernels/x86/attn_amx.c — the prefill attention tile on AMX-BF16: the body of attn_amx.inc
 * on the tile instructions (its emulated twin is in gemm_kq_amxemu_avx512vnni.c), the tile
 * configuration and permission of gemm_w4a8_amx.c. Head sizes off the tiles go to the
 * AVX-512 tile. dispatch.c installs it on CPUs with AMX-BF16 (not with NIBBLE_AMX=0) after
 * a first-use self-check against nb_attn_tile_ref. */
#include "kernels/x86/amx_tiles.h"
#define ATT_NAME nb_attn_tile_amx
#define ATT_REST nb_attn_tile_avx512
#include "kernels/x86/attn_amx.inc"
