/* kernels/x86/amx_sums.h — the f32 sums of one C tile (up to 16 tokens x 16 rows) that the AMX
 * kernels (gemm_w4a8_amx.inc, gemm_w4a16_amx.inc) keep on the stack while a k-slab's groups
 * fold into them: y's rows are n_out floats apart (one L1 set at 2048 rows), the stack's
 * 64 bytes. They come from y (or start at zero, for the first slab) and go back to y once
 * per slab, so the f32 sums run in group order either way. */
#ifndef NB_KERNELS_X86_AMX_SUMS_H
#define NB_KERNELS_X86_AMX_SUMS_H

#include <stdint.h>
#include <string.h>

static inline void nb_amx_sums_get(float *acc, const float *y, int64_t ldy, int rows, int zero)
{
    for (int i = 0; i < rows; i++) {
        if (zero)
            memset(acc + 16 * i, 0, 16 * sizeof(float));
        else
            memcpy(acc + 16 * i, y + i * ldy, 16 * sizeof(float));
    }
}

static inline void nb_amx_sums_put(float *y, int64_t ldy, const float *acc, int rows)
{
    for (int i = 0; i < rows; i++)
        memcpy(y + i * ldy, acc + 16 * i, 16 * sizeof(float));
}

#endif
