/* quant/dequant.h — reference conversion of stored weight types to f32. */
#ifndef NB_QUANT_DEQUANT_H
#define NB_QUANT_DEQUANT_H

#include <stdint.h>

#include "core/error.h"
#include "formats/tensor.h"

/* Convert n elements of `src` (dtype F32, F16, BF16, I8 — I8 taken as plain integers —
 * or any GGUF block type of formats/tensor.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q8_K,
 * IQ4_NL, IQ4_XS) to f32. n must be a multiple of the dtype's block size. The block
 * types give results bit-identical to llama.cpp's dequantization. */
enum nb_status nb_dequant(enum nb_dtype dtype, const void *src, float *dst, int64_t n);

/* quant/dequant_k.c: the block types other than Q8_0 and Q4_0 (their layouts are
 * drawn there). nb_dequant_is_block_type says whether nb_dequant_blocks reads t. */
int nb_dequant_is_block_type(enum nb_dtype t);
enum nb_status nb_dequant_blocks(enum nb_dtype dtype, const void *src, float *dst, int64_t n);

/* Q8_0 / Q4_0 block layouts (GGUF):
 *   Q8_0: | f16 d | int8 q[32] |              x = d * q
 *   Q4_0: | f16 d | u8 qs[16] |               x = d * (nibble - 8); element j < 16 is
 *          the low nibble of qs[j], element j + 16 the high nibble of qs[j]. */

#endif
