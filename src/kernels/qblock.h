/* kernels/qblock.h — how one stored element of a packed weight becomes a float.
 *
 * The quantizer (quant/), the reference dequantizer and the reference kernels all
 * decode through these helpers, so "the value the kernel multiplies" and "the value
 * the scale search scored" are the same float, bit for bit. The arithmetic is
 * written one rounding per statement (C11 with the default -ffp-contract keeps
 * `d * q` and `+ m` as two roundings; a fused multiply-add is a different value).
 *
 *   int4 byte k/2 of a row:   | k odd: bits 7..4 | k even: bits 3..0 |
 *
 *   w4a8   w = d * (q - 8)     q in 0..15, d bf16 per group
 *   w4a16  w = d * q + m       q in 0..15, d and m bf16 per group
 *   w8a16  w = d * q           q in -127..127 (i8), d f32 per output row
 */
#ifndef NB_KERNELS_QBLOCK_H
#define NB_KERNELS_QBLOCK_H

#include <stdint.h>
#include <string.h>

#include "core/fp.h"

/* The 4-bit code of element k of a packed row. */
static inline int nb_q4_get(const uint8_t *row, int64_t k)
{
    return (row[k >> 1] >> ((k & 1) * 4)) & 15;
}

/* NB_LAYOUT_X16: the 4-bit code of element k of row r of a plane-0 `qs` of a
 * matrix with n_in columns (core/wformat.h: block r/16 is 8 * n_in bytes, chunk
 * k/8 of it 64 bytes, row r%16 owns bytes 4(r%16)..+3; k%8 < 4: low nibble). */
static inline int nb_q4x16_get(const uint8_t *qs, int64_t n_in, int64_t r, int64_t k)
{
    const uint8_t *p = qs + (r >> 4) * (n_in * 8) + (k >> 3) * 64 + (r & 15) * 4 + (k & 3);
    return (*p >> (k & 4)) & 15;
}

/* NB_LAYOUT_X16: index (in bf16 elements) of the scale / min of row r, group g,
 * for ng = n_in / G groups per row. */
static inline int64_t nb_x16_sidx(int64_t ng, int64_t r, int64_t g)
{
    return ((r >> 4) * ng + g) * 16 + (r & 15);
}

static inline uint16_t nb_q_load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline void nb_q_store_u16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}

/* w4a8: d * (q - 8). Exact in f32 (8-bit mantissa times a 4-bit integer). */
static inline float nb_q4s_value(float d, int q)
{
    return d * (float)(q - 8);
}

/* w4a16: d * q + m, two roundings in this order. */
static inline float nb_q4a_value(float d, float m, int q)
{
    float t = d * (float)q;
    return t + m;
}

/* w8a16: d * q. */
static inline float nb_q8_value(float d, int q)
{
    return d * (float)q;
}

#endif
