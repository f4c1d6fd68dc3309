/* quant/repack.c — ROWS -> X16 int4 repacking (layouts: core/wformat.h).
 *
 * Per row r of block b and chunk c (k = 8c..8c+7) the four ROWS bytes
 *   s0 = k1:k0  s1 = k3:k2  s2 = k5:k4  s3 = k7:k6          (hi:lo nibbles)
 * become the row's X16 dword
 *   j=0: k4:k0 = (s2 & 0x0F) << 4 | (s0 & 0x0F)    j=1: k5:k1 = (s2 & 0xF0) | s0 >> 4
 *   j=2: k6:k2 = (s3 & 0x0F) << 4 | (s1 & 0x0F)    j=3: k7:k3 = (s3 & 0xF0) | s1 >> 4
 */
#include "quant/repack.h"

#include <string.h>

/* Blocks [b0, b1) of 16 rows. */
static void repack_blocks(const uint8_t *src, uint8_t *dst, const struct nb_layout_planes *pl,
                          int n_planes_sc, int64_t n_in, int group, int64_t b0, int64_t b1)
{
    int64_t ng = n_in / group, half = n_in / 2;
    for (int64_t b = b0; b < b1; b++) {
        uint8_t *db = dst + pl->offset[0] + b * 8 * n_in;
        for (int rr = 0; rr < 16; rr++) {
            const uint8_t *s = src + pl->offset[0] + (16 * b + rr) * half;
            for (int64_t c = 0; c < n_in / 8; c++, s += 4) {
                uint8_t *o = db + c * 64 + rr * 4;
                o[0] = (uint8_t)(((s[2] & 0x0F) << 4) | (s[0] & 0x0F));
                o[1] = (uint8_t)((s[2] & 0xF0) | (s[0] >> 4));
                o[2] = (uint8_t)(((s[3] & 0x0F) << 4) | (s[1] & 0x0F));
                o[3] = (uint8_t)((s[3] & 0xF0) | (s[1] >> 4));
            }
        }
        for (int p = 1; p <= n_planes_sc; p++) { /* scales, mins: [b][g][16] */
            const uint8_t *s = src + pl->offset[p];
            uint8_t *o = dst + pl->offset[p] + b * ng * 32;
            for (int rr = 0; rr < 16; rr++)
                for (int64_t g = 0; g < ng; g++)
                    memcpy(o + (g * 16 + rr) * 2, s + ((16 * b + rr) * ng + g) * 2, 2);
        }
    }
}

enum nb_status nb_repack_x16_blocks(enum nb_wpath p, int group, const void *rows_blob,
                                    void *x16_blob, int64_t n_out, int64_t n_in,
                                    int64_t rows_per_step, int64_t b0, int64_t b1)
{
    struct nb_layout_planes pl, px;
    if (!nb_wpath_is_int4(p))
        return nb_set_error(NB_ERR_INVALID_ARG, "repack: %s has no X16 layout", nb_wpath_name(p));
    if (!nb_layout_planes(p, group, n_out, n_in, &pl) ||
        !nb_layout_planes_x(p, NB_LAYOUT_X16, group, n_out, n_in, &px))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "repack: %s [%lld, %lld] group %d does not fit "
                            "the X16 layout (rows must be a multiple of 16)",
                            nb_wpath_name(p), (long long)n_out, (long long)n_in, group);
    int64_t nblk = n_out / 16;
    if (b0 < 0 || b1 < b0 || b1 > nblk)
        return nb_set_error(NB_ERR_INVALID_ARG, "repack: blocks [%lld, %lld) outside [0, %lld)",
                            (long long)b0, (long long)b1, (long long)nblk);
    /* (a huge value means the whole range, without overflowing the rounding) */
    int64_t step = rows_per_step <= 0 || rows_per_step / 16 >= nblk ? nblk
                                                                     : (rows_per_step + 15) / 16;
    if (step < 1) step = 1;
    for (int64_t b = b0; b < b1; b += step)
        repack_blocks(rows_blob, x16_blob, &px, (int)px.n_planes - 1, n_in, group, b,
                      b + step < b1 ? b + step : b1);
    uint8_t *o = x16_blob; /* padding after each plane */
    for (int i = 0; b1 == nblk && i < px.n_planes; i++) {
        int64_t end = px.offset[i] + px.size[i];
        int64_t next = i + 1 < px.n_planes ? px.offset[i + 1] : px.total;
        memset(o + end, 0, (size_t)(next - end));
    }
    return NB_OK;
}

enum nb_status nb_repack_x16(enum nb_wpath p, int group, const void *rows_blob, void *x16_blob,
                             int64_t n_out, int64_t n_in, int64_t rows_per_step)
{
    return nb_repack_x16_blocks(p, group, rows_blob, x16_blob, n_out, n_in, rows_per_step, 0,
                                n_out / 16);
}
