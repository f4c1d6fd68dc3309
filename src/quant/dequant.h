/* quant/dequant.h — reference conversion of stored weight types to f32. */
#ifndef NB_QUANT_DEQUANT_H
#define NB_QUANT_DEQUANT_H

#include <stdint.h>

#include "core/error.h"
#include "formats/tensor.h"

/* Convert n elements of `src` (dtype F32, F16, BF16, Q8_0, Q4_0 or I8 — I8 taken as
 * plain integers) to f32. n must be a multiple of the dtype's block size. */
enum nb_status nb_dequant(enum nb_dtype dtype, const void *src, float *dst, int64_t n);

/* Q8_0 / Q4_0 block layouts (GGUF):
 *   Q8_0: | f16 d | int8 q[32] |              x = d * q
 *   Q4_0: | f16 d | u8 qs[16] |               x = d * (nibble - 8); element j < 16 is
 *          the low nibble of qs[j], element j + 16 the high nibble of qs[j]. */

#endif
