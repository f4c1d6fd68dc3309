/* quant/dequant_k.c — GGUF block types beyond Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, the
 * k-quants Q2_K..Q8_K and the non-linear IQ4_NL/IQ4_XS) to f32, written from the
 * block layouts below (ggml's public block structs, all little-endian, packed).
 *
 * Bit-exactness: every value is computed with the same float32 operations in the same
 * order as llama.cpp's reference dequantization (f16 scale widened to f32, a product of
 * the scale with an integer sub-block scale, then one multiply and at most one add or
 * subtract per element), so the result is bit-identical to it (tests/test_dequant_k.c
 * checks hashes of llama.cpp's own output). A fused multiply-add would round once
 * instead of twice and change the low bit: this file is compiled with -ffp-contract=off
 * (CMakeLists.txt), and clang is told so here too.
 *
 * Notation: "q" is an element's integer code, "e" its index in the block (0..255 or
 * 0..31), "sub" the sub-block it belongs to. */
#include <string.h>

#include "core/fp.h"
#include "kernels/qblock.h"
#include "quant/dequant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static float f16_at(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return nb_f16_to_f32(v);
}

/* The non-linear 4-bit grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

/* ------------------------------------------------------------------ 32-element blocks */

/* Q4_1 (20 bytes): | f16 d | f16 m | u8 qs[16] |
 *   q = nibble of qs (e < 16: low nibble of qs[e]; e >= 16: high nibble of qs[e-16])
 *   x = d * q + m */
static void dq_q4_1(const unsigned char *b, float *y)
{
    float d = f16_at(b), m = f16_at(b + 2);
    const unsigned char *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 0x0f) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* Q5_0 (22 bytes): | f16 d | u32 qh (LE) | u8 qs[16] |
 *   q = nibble as in Q4_1, plus bit e of qh as bit 4;  x = d * (q - 16)
 * Q5_1 (24 bytes): | f16 d | f16 m | u32 qh | u8 qs[16] |   x = d * q + m */
static void q5_codes(const unsigned char *qh4, const unsigned char *qs, int q[32])
{
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 |
                  (uint32_t)qh4[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

static void dq_q5_0(const unsigned char *b, float *y)
{
    int q[32];
    float d = f16_at(b);
    q5_codes(b + 2, b + 6, q);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(q[j] - 16);
}

static void dq_q5_1(const unsigned char *b, float *y)
{
    int q[32];
    float d = f16_at(b), m = f16_at(b + 2);
    q5_codes(b + 4, b + 8, q);
    for (int j = 0; j < 32; j++) y[j] = d * (float)q[j] + m;
}

/* IQ4_NL (18 bytes): | f16 d | u8 qs[16] |   nibbles as Q4_0;  x = d * grid[nibble] */
static void dq_iq4_nl(const unsigned char *b, float *y)
{
    float d = f16_at(b);
    const unsigned char *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)k_iq4nl[qs[j] & 0x0f];
        y[j + 16] = d * (float)k_iq4nl[qs[j] >> 4];
    }
}

/* ------------------------------------------------------------------ 256-element blocks */

/* Q2_K (84 bytes): | u8 scales[16] | u8 qs[64] | f16 d | f16 dmin |
 *   16 sub-blocks of 16; scales[sub] = | min:4 | scale:4 | (high nibble, low nibble)
 *   qs: two halves of 32 bytes; in half h, element e = 128h + 32j + l is the 2 bits
 *   at shift 2j of qs[32h + l] (j = 0..3, l = 0..31)
 *   x = (d * scale) * q - (dmin * min) */
static void dq_q2_k(const unsigned char *b, float *y)
{
    const unsigned char *sc = b, *qs = b + 16;
    float d = f16_at(b + 80), dmin = f16_at(b + 82);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32, sub = e / 16;
        int q = (qs[32 * h + l] >> (2 * j)) & 3;
        float dl = d * (float)(sc[sub] & 0x0f), ml = dmin * (float)(sc[sub] >> 4);
        y[e] = dl * (float)q - ml;
    }
}

/* 16 six-bit values packed into 12 bytes, as Q3_K stores its scales:
 *   byte  0..7 : low 4 bits of value i (i < 8: low nibble of byte i;
 *                8 <= i < 16: high nibble of byte i-8)
 *   byte 8..11 : high 2 bits; value i's are at shift 2*(i/4) of byte 8 + i%4
 *      0: IIIIAAAA  ...  7: PPPPHHHH
 *      8: MMIIEEAA  9: NNJJFFBB  10: OOKKGGCC  11: PPLLHHDD */
static int q3k_scale(const unsigned char *s, int i)
{
    int lo = (s[i % 8] >> (4 * (i / 8))) & 0x0f;
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K (110 bytes): | u8 hmask[32] | u8 qs[64] | u8 scales[12] | f16 d |
 *   16 sub-blocks of 16, signed 6-bit scales (q3k_scale, stored + 32)
 *   low 2 bits as Q2_K's qs; the third bit of element e = 32i + l is bit i of hmask[l],
 *   and a CLEAR bit subtracts 4:  q = low2 - (bit ? 0 : 4)   (-4..3)
 *   x = (d * scale) * q */
static void dq_q3_k(const unsigned char *b, float *y)
{
    const unsigned char *hm = b, *qs = b + 32, *sc = b + 96;
    float d = f16_at(b + 108);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32;
        int q = ((qs[32 * h + l] >> (2 * j)) & 3) - ((hm[l] >> (e / 32)) & 1 ? 0 : 4);
        float dl = d * (float)q3k_scale(sc, e / 16);
        y[e] = dl * (float)q;
    }
}

/* Q4_K (144 bytes) and the 12 scale bytes Q4_K and Q5_K share: kernels/qblock.h draws
 * them (the on-the-fly kernels of `--path source` decode through the same functions). */
static void dq_q4_k(const unsigned char *b, float *y) { nb_q4_k_block(b, y); }

/* Q5_K (176 bytes): kernels/qblock.h. */
static void dq_q5_k(const unsigned char *b, float *y) { nb_q5_k_block(b, y); }

/* Q6_K (210 bytes): kernels/qblock.h. */
static void dq_q6_k(const unsigned char *b, float *y) { nb_q6_k_block(b, y); }

/* Q8_K (292 bytes): | f32 d | i8 qs[256] | i16 bsums[16] |   x = d * q
 * (bsums, the sums of each 16 codes, are a cache for dot products; not read here) */
static void dq_q8_k(const unsigned char *b, float *y)
{
    float d;
    memcpy(&d, b, 4);
    for (int e = 0; e < 256; e++) y[e] = d * (float)(int8_t)b[4 + e];
}

/* IQ4_XS (136 bytes): | f16 d | u16 scales_h (LE) | u8 scales_l[4] | u8 qs[128] |
 *   8 sub-blocks of 32 with 6-bit scales stored + 32: low 4 bits = nibble (sub % 2)
 *   of scales_l[sub / 2], high 2 bits at shift 2*sub of scales_h
 *   qs: 16 bytes per sub-block, nibbles ordered as Q4_0 (low nibbles first)
 *   x = (d * (scale - 32)) * grid[nibble] */
static void dq_iq4_xs(const unsigned char *b, float *y)
{
    float d = f16_at(b);
    unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
    const unsigned char *sl = b + 4, *qs = b + 8;
    for (int sub = 0; sub < 8; sub++) {
        int ls = ((sl[sub / 2] >> (4 * (sub % 2))) & 0x0f) | (int)((sh >> (2 * sub)) & 3) << 4;
        float dl = d * (float)(ls - 32);
        const unsigned char *q = qs + 16 * sub;
        for (int j = 0; j < 16; j++) {
            y[32 * sub + j] = dl * (float)k_iq4nl[q[j] & 0x0f];
            y[32 * sub + j + 16] = dl * (float)k_iq4nl[q[j] >> 4];
        }
    }
}

/* ------------------------------------------------------------------ dispatch */

typedef void (*block_fn)(const unsigned char *, float *);

static block_fn block_fn_of(enum nb_dtype t)
{
    switch (t) {
    case NB_DTYPE_Q4_1: return dq_q4_1;
    case NB_DTYPE_Q5_0: return dq_q5_0;
    case NB_DTYPE_Q5_1: return dq_q5_1;
    case NB_DTYPE_Q2_K: return dq_q2_k;
    case NB_DTYPE_Q3_K: return dq_q3_k;
    case NB_DTYPE_Q4_K: return dq_q4_k;
    case NB_DTYPE_Q5_K: return dq_q5_k;
    case NB_DTYPE_Q6_K: return dq_q6_k;
    case NB_DTYPE_Q8_K: return dq_q8_k;
    case NB_DTYPE_IQ4_NL: return dq_iq4_nl;
    case NB_DTYPE_IQ4_XS: return dq_iq4_xs;
    default: return NULL;
    }
}

int nb_dequant_is_block_type(enum nb_dtype t) { return block_fn_of(t) != NULL; }

enum nb_status nb_dequant_blocks(enum nb_dtype dtype, const void *src, float *dst, int64_t n)
{
    block_fn fn = block_fn_of(dtype);
    int64_t be = nb_dtype_block_elems(dtype), bb = nb_dtype_block_bytes(dtype);
    if (!fn || n < 0 || n % be)
        return nb_set_error(NB_ERR_UNSUPPORTED, "cannot convert %lld elements of type %s to f32",
                            (long long)n, nb_dtype_name(dtype));
    const unsigned char *s = src;
    for (int64_t i = 0; i < n / be; i++) fn(s + i * bb, dst + i * be);
    return NB_OK;
}
