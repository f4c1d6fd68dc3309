/* quant/kq_repack.h — GGUF Q4_K matrices onto nibble's w4a16 grid without rounding any
 * weight to another code.
 *
 * A Q4_K block (kernels/qblock.h) is 8 sub-blocks of 32 weights, each
 *     x = (d * sc) * q - (dmin * mn)      q in 0..15, d and dmin f16, sc and mn 6-bit
 * and a w4a16 group of 32 is
 *     x = D * q + M                       q in 0..15, D and M bf16,
 * the same shape: every code is kept, D = bf16(d * sc) and M = bf16(-(dmin * mn)). The
 * only change is those two roundings (a product of an f16 and a 6-bit integer has up to
 * 17 significant bits, bf16 keeps 8), where re-quantizing the dequantized weights would
 * move codes as well (docs/interop.md has both KLs). */
#ifndef NB_QUANT_KQ_REPACK_H
#define NB_QUANT_KQ_REPACK_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"
#include "quant/quant.h"

/* Rows [r0, r1) of a Q4_K matrix [n_out][n_in] (n_in a multiple of 256; `blocks` the
 * file's rows of n_in / 256 blocks) into a w4a16 ROWS blob of group 32
 * (nb_layout_planes(NB_WPATH_W4A16, 32, n_out, n_in), 64-byte aligned); a call whose range
 * ends at n_out zeroes the padding after each plane, as nb_quantize_rows does. Stats
 * (may be NULL): the error against the Q4_K values themselves. Thread-safe over disjoint
 * row ranges. NB_ERR_INVALID_ARG for a shape that is not whole blocks, a bad range or a
 * misaligned blob. */
enum nb_status nb_q4_k_pack_w4a16(const void *blocks, int64_t n_out, int64_t n_in, int64_t r0,
                                  int64_t r1, void *blob, struct nb_qstats *stats);

/* Row blocks [b0, b1) (16 rows each) of a GGUF Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, IQ4_NL or IQ4_XS matrix
 * [n_out][n_in] (`to`: the format's X16 one, nb_wformat_block; n_out a multiple of 16,
 * n_in of the record's width; `blocks` the file's rows) into the X16 records of
 * kernels/qblock.h at dst (nb_wformat_planes(to, ...).total bytes): every code, scale,
 * min and super-scale kept bit for bit, so the
 * matrix decodes to the file's values exactly. Thread-safe over disjoint block ranges.
 * NB_ERR_INVALID_ARG for another format, a shape that does not fit or a bad range. */
enum nb_status nb_kq_repack_x16(enum nb_wformat to, const void *blocks, int64_t n_out,
                                int64_t n_in, int64_t b0, int64_t b1, void *dst);

#endif
