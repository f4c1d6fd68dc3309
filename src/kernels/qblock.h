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

/* ---- GGUF k-quant blocks (a GGUF source run as stored: `--path source`) ----
 * The block layouts, bit for bit (ggml's public block structs, little-endian, packed);
 * the arithmetic is llama.cpp's reference dequantization (f16 scale widened to f32, its
 * product with the integer sub-block scale, then one multiply and one subtract per
 * element), so values are bit-identical to llama.cpp's (tests/test_dequant_k.c).
 *
 * 8 six-bit scales and 8 six-bit mins in 12 bytes, as Q4_K and Q5_K store them:
 *    0 EEAAAAAA   4 eeaaaaaa    8 eeeeEEEE
 *    1 FFBBBBBB   5 ffbbbbbb    9 ffffFFFF
 *    2 GGCCCCCC   6 ggcccccc   10 ggggGGGG
 *    3 HHDDDDDD   7 hhdddddd   11 hhhhHHHH
 *   scale A..H of sub-blocks 0..7 (upper case), min a..h (lower case):
 *   sub < 4: scale = byte[sub] & 63, min = byte[sub+4] & 63
 *   sub >= 4: scale = low nibble of byte[sub+4] | (top 2 bits of byte[sub-4]) << 4,
 *             min = high nibble of byte[sub+4] | (top 2 bits of byte[sub]) << 4 */
static inline void nb_k4_scale_min(const uint8_t *s, int sub, int *sc, int *mn)
{
    if (sub < 4) {
        *sc = s[sub] & 63;
        *mn = s[sub + 4] & 63;
    } else {
        *sc = (s[sub + 4] & 0x0f) | (s[sub - 4] >> 6) << 4;
        *mn = (s[sub + 4] >> 4) | (s[sub] >> 6) << 4;
    }
}

#define NB_QK_K        256 /* elements of a k-quant block */
#define NB_Q4_K_BYTES  144
#define NB_Q6_K_BYTES  210

/* Q4_K (144 bytes): | f16 d | f16 dmin | u8 scales[12] | u8 qs[128] |
 *   8 sub-blocks of 32 (nb_k4_scale_min); qs in 4 chunks of 32 bytes: chunk c holds
 *   sub-block 2c in its low nibbles and 2c+1 in its high nibbles
 *   x = (d * scale) * q - (dmin * min) */
static inline void nb_q4_k_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b)), dmin = nb_f16_to_f32(nb_q_load_u16(b + 2));
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int sub = 0; sub < 8; sub++) {
        int s, m;
        nb_k4_scale_min(sc, sub, &s, &m);
        float d1 = d * (float)s, m1 = dmin * (float)m;
        const uint8_t *c = qs + 32 * (sub / 2);
        int shift = 4 * (sub % 2);
        for (int l = 0; l < 32; l++) {
            float t = d1 * (float)((c[l] >> shift) & 0x0f);
            y[32 * sub + l] = t - m1;
        }
    }
}

/* Q6_K (210 bytes): | u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d |
 *   two halves of 128 elements; in half h, element r (0..127):
 *     low 4 bits: nibble (r / 64) of ql[64h + r % 64]   (low nibble first)
 *     high 2 bits: bits at shift 2*(r / 32) of qh[32h + r % 32]
 *   q = bits - 32 (-32..31); 16 sub-blocks of 16 with signed 8-bit scales
 *   x = (d * scale) * q */
static inline void nb_q6_k_block(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = nb_f16_to_f32(nb_q_load_u16(b + 208));
    for (int e = 0; e < 256; e++) {
        int h = e / 128, r = e % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dl = d * (float)sc[e / 16];
        y[e] = dl * (float)((lo | hi << 4) - 32);
    }
}

#define NB_Q5_K_BYTES 176
#define NB_Q4_0_BYTES 18 /* 32 elements */
#define NB_Q8_0_BYTES 34 /* 32 elements */

/* Q5_K (176 bytes): | f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128] |
 *   as Q4_K, plus a fifth bit: bit `sub` of qh[l] for element l of sub-block sub
 *   x = (d * scale) * q - (dmin * min)   (q = 0..31) */
static inline void nb_q5_k_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b)), dmin = nb_f16_to_f32(nb_q_load_u16(b + 2));
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int sub = 0; sub < 8; sub++) {
        int s, m;
        nb_k4_scale_min(sc, sub, &s, &m);
        float d1 = d * (float)s, m1 = dmin * (float)m;
        const uint8_t *c = qs + 32 * (sub / 2);
        int shift = 4 * (sub % 2);
        for (int l = 0; l < 32; l++) {
            float t = d1 * (float)(((c[l] >> shift) & 0x0f) | ((qh[l] >> sub) & 1) << 4);
            y[32 * sub + l] = t - m1;
        }
    }
}

/* Q4_0 (18 bytes, 32 elements): | f16 d | u8 qs[16] |  element e < 16: low nibble of qs[e],
 *   e >= 16: high nibble of qs[e - 16];  x = d * (q - 8) */
static inline void nb_q4_0_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 0x0f) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

/* Q8_0 (34 bytes, 32 elements): | f16 d | i8 qs[32] |  x = d * q */
static inline void nb_q8_0_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b));
    for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
}

#define NB_IQ4_NL_BYTES 18  /* 32 elements */
#define NB_IQ4_XS_BYTES 136

/* The non-linear 4-bit grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t nb_iq4nl_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* IQ4_NL (18 bytes, 32 elements): | f16 d | u8 qs[16] |  nibbles as Q4_0's;
 *   x = d * grid[q] */
static inline void nb_iq4_nl_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)nb_iq4nl_grid[b[2 + j] & 0x0f];
        y[j + 16] = d * (float)nb_iq4nl_grid[b[2 + j] >> 4];
    }
}

/* IQ4_XS (136 bytes, 256 elements): | f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128] |
 *   sub-block s of 32: ls = (scales_l[s/2] >> 4 (s%2)) & 15 | ((scales_h >> 2s) & 3) << 4,
 *   its qs[16s + j]: low nibble element j, high nibble element j + 16;
 *   x = (d * (ls - 32)) * grid[q] */
static inline int nb_iq4_xs_scale(const uint8_t *b, int s)
{
    unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
    return (((b[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (int)((sh >> (2 * s)) & 3) << 4) - 32;
}
static inline void nb_iq4_xs_block(const uint8_t *b, float *y)
{
    float d = nb_f16_to_f32(nb_q_load_u16(b));
    for (int s = 0; s < 8; s++) {
        float dl = d * (float)nb_iq4_xs_scale(b, s);
        const uint8_t *q = b + 8 + 16 * s;
        for (int j = 0; j < 16; j++) {
            y[32 * s + j] = dl * (float)nb_iq4nl_grid[q[j] & 0x0f];
            y[32 * s + j + 16] = dl * (float)nb_iq4nl_grid[q[j] >> 4];
        }
    }
}

/* ---- GGUF k-quant blocks shuffled into 16-row records (NB_WF_Q4_K_X16 / _Q6_K_X16) ----
 * A k-quant matrix with n_out % 16 == 0 is repacked at load (quant/kq_repack.h) so the
 * integer kernels stream it: record (b, i) holds rows 16b..16b+15, k = 256i..256i+255,
 * and records follow each other along k, then along the row blocks. Every code, scale,
 * min and f16 super-scale of the file is kept bit for bit; only the byte order changes.
 *
 * Q4_K record, NB_Q4_K_X16_BYTES = 2368 (37 x 64) bytes:
 *   [   0, 2048) qs    32 chunks of 64 bytes, chunk c = k 8c..8c+7 of the record, in the
 *                      X16 byte order (core/wformat.h): byte 4r+j: low nibble
 *                      q[r][8c+j], high nibble q[r][8c+4+j]
 *   [2048, 2176) sc    u8 [4 pairs][16 rows][2]: the 6-bit scales of sub-blocks 2p, 2p+1
 *   [2176, 2304) mn    u8 [4 pairs][16 rows][2]: the 6-bit mins, likewise
 *   [2304, 2336) d     f16 [16 rows]
 *   [2336, 2368) dmin  f16 [16 rows]
 *   x[r][k] = (d[r] * sc) * q - (dmin[r] * mn), sub-block (k % 256) / 32
 *
 * Q6_K record, NB_Q6_K_X16_BYTES = 3392 (53 x 64) bytes:
 *   [   0, 2048) ql    the low 4 bits of the 6-bit codes, chunks as Q4_K's qs
 *   [2048, 3072) qh    the high 2 bits, 32 bytes a chunk: byte p = 4r+j of the chunk's ql
 *                      has its pairs in qh byte p % 32 at bit 4 (p / 32): bits +0..1 for
 *                      k = 8c+j, +2..3 for k = 8c+4+j
 *   [3072, 3328) sc    i8 [8 pairs][16 rows][2]: the scales of sub-blocks 2p, 2p+1 (of 16)
 *   [3328, 3360) d     f16 [16 rows]
 *   [3360, 3392) zero
 *   x[r][k] = (d[r] * sc) * (q - 32), q = lo | hi << 4, sub-block (k % 256) / 16
 *
 * Q5_K record, NB_Q5_K_X16_BYTES = 2880 (45 x 64) bytes: Q4_K's, with the fifth bits
 *   [   0, 2048) qs    the low 4 bits, chunks as Q4_K's
 *   [2048, 2560) qh    16 bytes a chunk: byte p = 4r+j of the chunk's qs has its two fifth
 *                      bits in qh byte p % 16 at bit 2 (p / 16) (k = 8c+j) and +1 (8c+4+j)
 *   [2560, 2688) sc, [2688, 2816) mn, [2816, 2848) d, [2848, 2880) dmin: as Q4_K's
 *
 * Q4_0 record, NB_Q4_0_X16_BYTES = 576 (9 x 64) bytes, 16 rows x 64 k (two blocks):
 *   [   0,  512) qs    8 chunks of 64 bytes, the X16 byte order (codes 0..15)
 *   [ 512,  576) d     f16 [2 blocks][16 rows]           x = d * (q - 8)
 * Q8_0 record, NB_Q8_0_X16_BYTES = 1088 (17 x 64) bytes, 16 rows x 64 k (two blocks):
 *   [   0, 1024) qs    16 chunks of 64 bytes, chunk c = k 4c..4c+3: byte 4r+j holds
 *                      q[r][4c+j] + 128 as u8 (the code's sign bit flipped)
 *   [1024, 1088) d     f16 [2 blocks][16 rows]           x = d * q
 * IQ4_NL record, NB_IQ4_NL_X16_BYTES = 576: Q4_0's, the codes indexing the grid:
 *   x = d * grid[q]
 * These three read the w4a8 activation form with groups of 32 (NB_INPUT_Q8): per 32, an
 * f32 scale and the codes' sum (the zero-point term, 8 or 128 times it: the kernels
 * multiply u = q (Q4_0), q + 128 (Q8_0) or grid[q] + 128 (IQ4_NL), all unsigned).
 *
 * IQ4_XS record, NB_IQ4_XS_X16_BYTES = 2240 (35 x 64) bytes, 16 rows x 256 k:
 *   [   0, 2048) qs    the codes, chunks as Q4_K's (element order k, not the file's)
 *   [2048, 2176) sc    i8 [4 pairs][16 rows][2]: ls - 32 of sub-blocks 2p, 2p+1 (of 32)
 *   [2176, 2208) d     f16 [16 rows]
 *   [2208, 2240) zero
 *   x[r][k] = (d[r] * sc) * grid[q], sub-block (k % 256) / 32
 *
 * The int8 activations the k-quant kernels read (NB_INPUT_Q8K, nb_act_quant_q8k): per token,
 * codes xq[n], one f32 scale xd per 256, and per 256 sixteen int32 words of code sums:
 *   words 0..7   (int16) sum of codes 32p..32p+15 | (int16) sum of 32p+16..32p+31 << 16
 *   words 8..11  (int16) sum of codes 64p..64p+31 | (int16) sum of 64p+32..64p+63 << 16
 *   words 12..15 zero
 * (sums of 16 and of 32 codes, as int16 pairs: one vpdpwssd against a pair of scales). */
#define NB_Q4_K_X16_QS   0
#define NB_Q4_K_X16_SC   2048
#define NB_Q4_K_X16_MN   2176
#define NB_Q4_K_X16_D    2304
#define NB_Q4_K_X16_DMIN 2336
#define NB_Q6_K_X16_QL   0
#define NB_Q6_K_X16_QH   2048
#define NB_Q6_K_X16_SC   3072
#define NB_Q6_K_X16_D    3328
#define NB_Q5_K_X16_QH   2048
#define NB_Q5_K_X16_SC   2560
#define NB_Q5_K_X16_MN   2688
#define NB_Q5_K_X16_D    2816
#define NB_Q5_K_X16_DMIN 2848
#define NB_Q4_0_X16_D    512
#define NB_IQ4_XS_X16_SC 2048
#define NB_IQ4_XS_X16_D  2176
#define NB_Q8_0_X16_D    1024

/* The record of row r, super-block i, of an X16 k-quant matrix with n_in columns. */
static inline const uint8_t *nb_kx16_record(const void *blob, int64_t rec_bytes, int64_t n_in,
                                            int64_t r, int64_t i)
{
    return (const uint8_t *)blob + ((r >> 4) * (n_in / NB_QK_K) + i) * rec_bytes;
}

/* The 6-bit code (Q6_K: 0..63, before the - 32; Q4_K: 0..15) of row r % 16, element
 * k % 256 of a record. */
static inline int nb_q4_k_x16_code(const uint8_t *rec, int r, int k)
{
    return nb_q4x16_get(rec, NB_QK_K, r, k);
}
static inline int nb_q6_k_x16_code(const uint8_t *rec, int r, int k)
{
    int lo = nb_q4x16_get(rec, NB_QK_K, r, k);
    int p = 4 * r + (k & 3); /* byte of the chunk */
    int hbits = rec[NB_Q6_K_X16_QH + (k >> 3) * 32 + p % 32] >> (4 * (p / 32));
    return lo | ((hbits >> (k & 4 ? 2 : 0)) & 3) << 4;
}
static inline int nb_q5_k_x16_code(const uint8_t *rec, int r, int k)
{
    int lo = nb_q4x16_get(rec, NB_QK_K, r, k);
    int p = 4 * r + (k & 3);
    int hb = rec[NB_Q5_K_X16_QH + (k >> 3) * 16 + p % 16] >> (2 * (p / 16) + (k & 4 ? 1 : 0));
    return lo | (hb & 1) << 4;
}
/* Element k (0..63) of row r % 16 of a Q4_0 record (0..15) / a Q8_0 record (-128..127). */
static inline int nb_q4_0_x16_code(const uint8_t *rec, int r, int k)
{
    return nb_q4x16_get(rec, 64, r, k);
}
static inline int nb_q8_0_x16_code(const uint8_t *rec, int r, int k)
{
    return (int8_t)(rec[(k >> 2) * 64 + 4 * r + (k & 3)] ^ 0x80);
}
/* Scale (and Q4_K min) of sub-block s of row r in a record: the pair layout. */
static inline int nb_kx16_pair_at(int s, int r)
{
    return (s >> 1) * 32 + 2 * r + (s & 1);
}

#endif
