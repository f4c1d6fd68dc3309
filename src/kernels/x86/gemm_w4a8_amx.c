/* kernels/x86/gemm_w4a8_amx.c — w4a8 GEMM on the X16 layout with AMX-INT8 (prefill): the
 * tile-data permission, the tile configuration shared with gemm_kq_amx.c, and the body of
 * gemm_w4a8_amx.inc on the tile instructions (its emulated twin is in
 * gemm_kq_amxemu_avx512vnni.c). dispatch.c installs it only after a first-use self-check
 * against nb_gemm_w4a8_x16_ref.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

int nb_amx_request_perm(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

void nb_amx_config(int kstep, int rows)
{
    _Alignas(64) struct tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 4; i++) /* C */
        cfg.rows[i] = (uint8_t)rows, cfg.colsb[i] = 64;
    for (int i = 4; i < 6; i++) /* A */
        cfg.rows[i] = (uint8_t)rows, cfg.colsb[i] = (uint16_t)kstep;
    for (int i = 6; i < 8; i++) /* B */
        cfg.rows[i] = (uint8_t)(kstep / 4), cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
}

#include "kernels/x86/amx_tiles.h"
#define W4_NAME nb_gemm_w4a8_x16_amx
#include "kernels/x86/gemm_w4a8_amx.inc"
