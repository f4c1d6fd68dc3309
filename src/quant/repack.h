/* quant/repack.h — convert packed int4 matrices between layouts (core/wformat.h). */
#ifndef NB_QUANT_REPACK_H
#define NB_QUANT_REPACK_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"

/* Convert a w4a8 / w4a16 blob from NB_LAYOUT_ROWS into NB_LAYOUT_X16 (same size,
 * nb_layout_planes_x(p, NB_LAYOUT_X16, ...).total bytes; the blobs must not overlap).
 * Codes are moved bit for bit and scales / mins copied; the padding after each plane
 * is zeroed, so the output is fully defined. rows_per_step: rows converted per step
 * (rounded up to a multiple of 16; <= 0: the whole matrix in one step); every value
 * gives byte-identical output, it only changes the memory access pattern (callers
 * take it from the quantize options, which the CLI fills from NIBBLE_REPACK_ROWS).
 * Errors: NB_ERR_INVALID_ARG for a path other than w4a8 / w4a16, or a shape that does
 * not fit X16 (n_out % 16 != 0, group not dividing n_in). */
enum nb_status nb_repack_x16(enum nb_wpath p, int group, const void *rows_blob, void *x16_blob,
                             int64_t n_out, int64_t n_in, int64_t rows_per_step);
/* The same for the 16-row blocks [b0, b1) only (rows 16 b0 .. 16 b1 - 1); the padding
 * is zeroed by the call whose range ends at the last block. Threads may convert
 * disjoint block ranges of one matrix at once. */
enum nb_status nb_repack_x16_blocks(enum nb_wpath p, int group, const void *rows_blob,
                                    void *x16_blob, int64_t n_out, int64_t n_in,
                                    int64_t rows_per_step, int64_t b0, int64_t b1);

#endif
