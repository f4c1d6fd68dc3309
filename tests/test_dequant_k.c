/* test_dequant_k — GGUF block types (Q4_1, Q5_0, Q5_1, Q2_K..Q8_K, IQ4_NL, IQ4_XS) to f32.
 *
 * (a) Blocks built by hand: each test draws the logical fields of a block (scales, mins,
 *     integer codes) at random, packs them into bytes as the GGUF block layout says
 *     (written here from the layout, not from quant/dequant_k.c), and expects
 *     x = d * scale * code - dmin * min computed from the fields. The scales are chosen
 *     so that every product and difference is exact in f32 (few significant bits), so
 *     the expected values do not depend on the order of operations.
 * (b) llama.cpp's own dequantization of files made by llama-quantize from kjv-7m
 *     (tests/data/gguf-quants/, README.md there): every tensor's f32 values must hash
 *     (XXH64) to what llama.cpp gave — bit-identical. Files not committed are checked
 *     too when $NIBBLE_GGUF_QUANTS_DIR holds them. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/fp.h"
#include "kernels/qblock.h"
#include "formats/gguf.h"
#include "quant/dequant.h"
#include "kernels/kernels.h"
#include "quant/kq_repack.h"
#include "quant/kquant.h"

#define N_BLOCKS 3 /* blocks per hand test: the block stride is checked too */

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng = 0x5eed;

static int rnd(int lo, int hi) /* uniform in [lo, hi] */
{
    return lo + (int)(tu_rand_u64(&g_rng) % (uint64_t)(hi - lo + 1));
}

/* A positive scale with 4 significant bits, exact in f16: (8..15) * 2^-e. */
static float rnd_scale(int e)
{
    return (float)rnd(8, 15) * ldexpf(1.0f, -e);
}

static void put_f16(unsigned char *p, float x)
{
    uint16_t h = nb_f32_to_f16(x);
    assert_true(nb_f16_to_f32(h) == x); /* the test's scales are exact in f16 */
    memcpy(p, &h, 2);
}

/* The non-linear grid of IQ4_NL / IQ4_XS, as the format defines it. */
static const int k_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

/* Dequantizes n_blocks blocks of `dtype` at `blocks` and compares with `want` exactly
 * (bit for bit; -0.0 and 0.0 are both accepted as zero). */
static void check(enum nb_dtype dtype, const unsigned char *blocks, const float *want, int n)
{
    float *got = malloc(sizeof(float) * (size_t)n);
    assert_non_null(got);
    assert_int_equal(nb_dequant(dtype, blocks, got, n), NB_OK);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: element %d (block %d, index %d) is %.9g, want %.9g", nb_dtype_name(dtype),
                     i, i / nb_dtype_block_elems(dtype), i % nb_dtype_block_elems(dtype),
                     (double)got[i], (double)want[i]);
    /* a partial block is refused */
    int be = nb_dtype_block_elems(dtype);
    assert_int_equal(nb_dequant(dtype, blocks, got, be - 1 > 0 ? be - 1 : 1), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), nb_dtype_name(dtype)));
    free(got);
}

/* ------------------------------------------------------------------ 32-element blocks */

/* Q4_1: | f16 d | f16 m | qs[16] |; element j < 16 low nibble of qs[j], j >= 16 the high
 * nibble of qs[j - 16]; x = d * q + m. */
static void test_q4_1(void **state)
{
    unsigned char blk[N_BLOCKS * 20] = {0};
    float want[N_BLOCKS * 32];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 20 * b;
        float d = rnd_scale(6), m = -rnd_scale(3);
        put_f16(p, d);
        put_f16(p + 2, m);
        for (int j = 0; j < 32; j++) {
            int q = b == 0 ? (j % 2 ? 15 : 0) : rnd(0, 15);
            p[4 + j % 16] |= (unsigned char)(q << (j < 16 ? 0 : 4));
            want[32 * b + j] = d * (float)q + m;
        }
    }
    check(NB_DTYPE_Q4_1, blk, want, N_BLOCKS * 32);
}

/* Q5_0: | f16 d | u32 qh | qs[16] |; low 4 bits as Q4_1, bit 4 of element j is bit j of
 * qh (little-endian); x = d * (q - 16). Q5_1 adds | f16 m | after d; x = d * q + m. */
static void q5(enum nb_dtype dtype, int with_min)
{
    int bb = with_min ? 24 : 22;
    unsigned char blk[N_BLOCKS * 24] = {0};
    float want[N_BLOCKS * 32];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + bb * b;
        float d = rnd_scale(7), m = -rnd_scale(2);
        put_f16(p, d);
        if (with_min) put_f16(p + 2, m);
        unsigned char *qh = p + (with_min ? 4 : 2), *qs = qh + 4;
        uint32_t h = 0;
        for (int j = 0; j < 32; j++) {
            int q = b == 0 ? (j % 3 ? 31 : 0) : rnd(0, 31);
            qs[j % 16] |= (unsigned char)((q & 15) << (j < 16 ? 0 : 4));
            h |= (uint32_t)(q >> 4) << j;
            want[32 * b + j] = with_min ? d * (float)q + m : d * (float)(q - 16);
        }
        for (int k = 0; k < 4; k++) qh[k] = (unsigned char)(h >> (8 * k));
    }
    check(dtype, blk, want, N_BLOCKS * 32);
}
static void test_q5_0(void **state) { q5(NB_DTYPE_Q5_0, 0); }
static void test_q5_1(void **state) { q5(NB_DTYPE_Q5_1, 1); }

/* IQ4_NL: | f16 d | qs[16] | (nibbles as Q4_1); x = d * grid[nibble]. */
static void test_iq4_nl(void **state)
{
    unsigned char blk[N_BLOCKS * 18] = {0};
    float want[N_BLOCKS * 32];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 18 * b;
        float d = rnd_scale(10);
        put_f16(p, d);
        for (int j = 0; j < 32; j++) {
            int c = b == 0 ? j % 16 : rnd(0, 15);
            p[2 + j % 16] |= (unsigned char)(c << (j < 16 ? 0 : 4));
            want[32 * b + j] = d * (float)k_grid[c];
        }
    }
    check(NB_DTYPE_IQ4_NL, blk, want, N_BLOCKS * 32);
}

/* ------------------------------------------------------------------ 256-element blocks */

/* Where the 2 low bits of element e sit in the 64 qs bytes of Q2_K and Q3_K: halves of
 * 128 elements, each 32 bytes; element 128h + 32j + l at shift 2j of byte 32h + l. */
static void put_2bit(unsigned char *qs, int e, int v)
{
    int h = e / 128, j = e % 128 / 32, l = e % 32;
    qs[32 * h + l] |= (unsigned char)((v & 3) << (2 * j));
}

/* Q2_K: | scales[16] | qs[64] | f16 d | f16 dmin |; scales[s] = min << 4 | scale for the
 * 16-element sub-block s; x = d * scale * q - dmin * min. */
static void test_q2_k(void **state)
{
    unsigned char blk[N_BLOCKS * 84] = {0};
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 84 * b;
        float d = rnd_scale(8), dmin = rnd_scale(9);
        put_f16(p + 80, d);
        put_f16(p + 82, dmin);
        int sc[16], mn[16];
        for (int s = 0; s < 16; s++) {
            sc[s] = b == 0 ? 15 - s : rnd(0, 15);
            mn[s] = b == 0 ? s : rnd(0, 15);
            p[s] = (unsigned char)(mn[s] << 4 | sc[s]);
        }
        for (int e = 0; e < 256; e++) {
            int q = b == 0 ? e % 4 : rnd(0, 3);
            put_2bit(p + 16, e, q);
            want[256 * b + e] = d * (float)sc[e / 16] * (float)q - dmin * (float)mn[e / 16];
        }
    }
    check(NB_DTYPE_Q2_K, blk, want, N_BLOCKS * 256);
}

/* Q3_K: | hmask[32] | qs[64] | scales[12] | f16 d |. Codes -4..3: the 2 low bits of
 * (q + 4) as Q2_K, and a third bit that is SET when q >= 0 (bit i of hmask[l] for
 * element 32i + l). Scales -32..31 stored + 32 in 6 bits: the low 4 bits of scale s in
 * byte s % 8 (low nibble for s < 8, high for s >= 8), the high 2 bits in byte 8 + s % 4
 * at shift 2 * (s / 4). x = d * scale * q. */
static void test_q3_k(void **state)
{
    unsigned char blk[N_BLOCKS * 110] = {0};
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 110 * b, *hm = p, *qs = p + 32, *sb = p + 96;
        float d = rnd_scale(8);
        put_f16(p + 108, d);
        int sc[16];
        for (int s = 0; s < 16; s++) {
            sc[s] = b == 0 ? (s % 2 ? -32 : 31) : rnd(-32, 31);
            int u = sc[s] + 32;
            sb[s % 8] |= (unsigned char)((u & 15) << (s < 8 ? 0 : 4));
            sb[8 + s % 4] |= (unsigned char)((u >> 4) << (2 * (s / 4)));
        }
        for (int e = 0; e < 256; e++) {
            int q = b == 0 ? e % 8 - 4 : rnd(-4, 3);
            put_2bit(qs, e, q + 4);
            if (q >= 0) hm[e % 32] |= (unsigned char)(1u << (e / 32));
            want[256 * b + e] = d * (float)sc[e / 16] * (float)q;
        }
    }
    check(NB_DTYPE_Q3_K, blk, want, N_BLOCKS * 256);
}

/* The 12 scale bytes of Q4_K/Q5_K: 8 scales and 8 mins of 6 bits. For j < 4:
 * byte j = scale j | (scale j+4 >> 4) << 6, byte j+4 = min j | (min j+4 >> 4) << 6,
 * byte j+8 = (scale j+4 & 15) | (min j+4 & 15) << 4. */
static void put_k4_scales(unsigned char *s, const int *sc, const int *mn)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (unsigned char)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (unsigned char)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (unsigned char)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* Q4_K: | f16 d | f16 dmin | scales[12] | qs[128] |: sub-block s of 32 in the low (s even)
 * or high (s odd) nibbles of qs[32 * (s / 2) ...]; x = d * scale * q - dmin * min.
 * Q5_K: | f16 d | f16 dmin | scales[12] | qh[32] | qs[128] |: plus bit 4 of element l of
 * sub-block s as bit s of qh[l]. */
static void k45(enum nb_dtype dtype, int five)
{
    int bb = five ? 176 : 144, qmax = five ? 31 : 15;
    unsigned char blk[N_BLOCKS * 176] = {0};
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + bb * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        float d = rnd_scale(10), dmin = rnd_scale(11);
        put_f16(p, d);
        put_f16(p + 2, dmin);
        int sc[8], mn[8];
        for (int s = 0; s < 8; s++) {
            sc[s] = b == 0 ? (s < 4 ? 63 : 48 + s) : rnd(0, 63); /* block 0: high bits set */
            mn[s] = b == 0 ? (s < 4 ? 1 : 63 - s) : rnd(0, 63);
        }
        put_k4_scales(p + 4, sc, mn);
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) {
                int q = b == 0 ? (l + s) % (qmax + 1) : rnd(0, qmax);
                qs[32 * (s / 2) + l] |= (unsigned char)((q & 15) << (4 * (s % 2)));
                if (five) qh[l] |= (unsigned char)((q >> 4) << s);
                want[256 * b + 32 * s + l] = d * (float)sc[s] * (float)q - dmin * (float)mn[s];
            }
    }
    check(dtype, blk, want, N_BLOCKS * 256);
}
static void test_q4_k(void **state) { k45(NB_DTYPE_Q4_K, 0); }
static void test_q5_k(void **state) { k45(NB_DTYPE_Q5_K, 1); }

/* Q4_K onto w4a16 groups of 32 (quant/kq_repack.h): 2 rows of 2 blocks built by hand;
 * every code is the block's, D = bf16(d * sc), M = bf16(-(dmin * mn)), and the packed
 * matrix decodes to D * q + M (two roundings) element by element; bad shapes, ranges
 * and a misaligned blob are refused. */
static void test_q4_k_pack_w4a16(void **state)
{
    enum { ROWS = 2, NB = 2, N_IN = NB * 256 };
    static unsigned char blk[ROWS * NB * 144];
    static uint8_t want_q[ROWS][N_IN];
    static float want_d[ROWS][N_IN / 32], want_m[ROWS][N_IN / 32];
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < ROWS * NB; b++) {
        unsigned char *p = blk + 144 * b, *qs = p + 16;
        float d = rnd_scale(10), dmin = rnd_scale(11);
        put_f16(p, d);
        put_f16(p + 2, dmin);
        int sc[8], mn[8];
        for (int s = 0; s < 8; s++) sc[s] = rnd(0, 63), mn[s] = rnd(0, 63);
        put_k4_scales(p + 4, sc, mn);
        int r = b / NB, k0 = 256 * (b % NB);
        for (int s = 0; s < 8; s++) {
            float d1 = nb_f16_to_f32(nb_f32_to_f16(d)) * (float)sc[s];
            float m1 = nb_f16_to_f32(nb_f32_to_f16(dmin)) * (float)mn[s];
            want_d[r][k0 / 32 + s] = nb_bf16_to_f32(nb_f32_to_bf16(d1));
            want_m[r][k0 / 32 + s] = nb_bf16_to_f32(nb_f32_to_bf16(-m1));
            for (int l = 0; l < 32; l++) {
                int q = rnd(0, 15);
                qs[32 * (s / 2) + l] |= (unsigned char)(q << (4 * (s % 2)));
                want_q[r][k0 + 32 * s + l] = (uint8_t)q;
            }
        }
    }
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(NB_WPATH_W4A16, 32, ROWS, N_IN, &pl));
    uint8_t *blob = aligned_alloc(64, (size_t)pl.total);
    assert_non_null(blob);
    memset(blob, 0xAB, (size_t)pl.total);
    struct nb_qstats st;
    assert_int_equal(nb_q4_k_pack_w4a16(blk, ROWS, N_IN, 0, 1, blob, &st), NB_OK);
    assert_int_equal(nb_q4_k_pack_w4a16(blk, ROWS, N_IN, 1, 2, blob, NULL), NB_OK);
    assert_true(st.ref_sq > 0 && st.err_sq < 1e-4 * st.ref_sq); /* bf16 rounding only */
    float *got = malloc(sizeof(float) * ROWS * N_IN);
    assert_int_equal(nb_dequantize_rows(NB_WPATH_W4A16, 32, blob, ROWS, N_IN, 0, ROWS, got),
                     NB_OK);
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < N_IN; k++) {
            const uint8_t *row = blob + pl.offset[0] + r * (N_IN / 2);
            assert_int_equal((row[k / 2] >> (4 * (k % 2))) & 15, want_q[r][k]);
            float t = want_d[r][k / 32] * (float)want_q[r][k];
            float v = t + want_m[r][k / 32];
            assert_true(got[r * N_IN + k] == v);
        }
    for (int64_t i = pl.offset[0] + pl.size[0]; i < pl.offset[1]; i++) assert_int_equal(blob[i], 0);
    assert_int_equal(nb_q4_k_pack_w4a16(blk, ROWS, 300, 0, 1, blob, NULL), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "whole blocks of 256"));
    assert_int_equal(nb_q4_k_pack_w4a16(blk, ROWS, N_IN, 1, 3, blob, NULL), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_q4_k_pack_w4a16(blk, ROWS, N_IN, 0, 1, blob + 1, NULL), NB_ERR_INVALID_ARG);
    free(got);
    free(blob);
}

/* Q6_K: | ql[128] | qh[64] | int8 scales[16] | f16 d |. u = q + 32 (0..63); in half h
 * (128 elements), element r: low 4 bits in ql[64h + r % 64] (low nibble for r < 64),
 * high 2 bits in qh[32h + r % 32] at shift 2 * (r / 32). x = d * scale * q. */
static void test_q6_k(void **state)
{
    unsigned char blk[N_BLOCKS * 210] = {0};
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 210 * b, *ql = p, *qh = p + 128;
        float d = rnd_scale(12);
        put_f16(p + 208, d);
        int sc[16];
        for (int s = 0; s < 16; s++) {
            sc[s] = b == 0 ? (s % 2 ? -128 : 127) : rnd(-128, 127);
            p[192 + s] = (unsigned char)(int8_t)sc[s];
        }
        for (int e = 0; e < 256; e++) {
            int q = b == 0 ? e % 64 - 32 : rnd(-32, 31), u = q + 32, h = e / 128, r = e % 128;
            ql[64 * h + r % 64] |= (unsigned char)((u & 15) << (r < 64 ? 0 : 4));
            qh[32 * h + r % 32] |= (unsigned char)((u >> 4) << (2 * (r / 32)));
            want[256 * b + e] = d * (float)sc[e / 16] * (float)q;
        }
    }
    check(NB_DTYPE_Q6_K, blk, want, N_BLOCKS * 256);
}

/* ------------------------------------------------------------------ nibble writes blocks
 * quant/kquant.c's Q6_K and Q8_0 rows, read back by the GGUF decoder: the codes are the
 * best for the stored scales (a code one step either way is never closer), the weighted
 * search is no worse than a plain absmax rounding, a zero block stays zero, and bad
 * shapes or formats are refused. */
static double rel_err(const float *x, const float *y, const float *w, int64_t n)
{
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        double ww = w ? w[i % 512] : 1;
        e += ww * ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        r += ww * (double)x[i] * x[i];
    }
    return sqrt(e / r);
}

static void test_kquant_write(void **state)
{
    (void)state;
    enum { N_OUT = 6, N_IN = 512, N = N_OUT * N_IN };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), imp[N_IN];
    uint8_t *q6 = malloc((size_t)N / 256 * NB_Q6_K_BYTES), *q8 = malloc((size_t)N / 32 * 34);
    for (int i = 0; i < N; i++) x[i] = 0.02f * tu_rand_gauss(&g_rng) * (i % 97 == 5 ? 8.0f : 1.0f);
    for (int i = 0; i < 256; i++) x[256 * 3 + i] = 0; /* a zero block */
    for (int i = 0; i < N_IN; i++) imp[i] = 0.1f + (float)(tu_rand_u64(&g_rng) % 1000) / 100.0f;

    /* Q6_K, unweighted: against absmax rounding of each 16 with an exact scale */
    assert_int_equal(nb_kquant_rows(NB_WF_Q6_K, x, N_OUT, N_IN, NULL, 0, N_OUT, q6), NB_OK);
    assert_int_equal(nb_dequant(NB_DTYPE_Q6_K, q6, y, N), NB_OK);
    for (int i = 0; i < 256; i++) assert_true(y[256 * 3 + i] == 0);
    double e6 = rel_err(x, y, NULL, N), e_abs = 0, r_abs = 0;
    for (int s = 0; s < N / 16; s++) {
        float big = 0;
        for (int k = 0; k < 16; k++) big = fabsf(x[16 * s + k]) > fabsf(big) ? x[16 * s + k] : big;
        for (int k = 0; k < 16 && big != 0; k++) {
            float sc = big / -32.0f, v = nearbyintf(x[16 * s + k] / sc);
            v = v < -32 ? -32 : v > 31 ? 31 : v;
            e_abs += ((double)x[16 * s + k] - sc * v) * ((double)x[16 * s + k] - sc * v);
            r_abs += (double)x[16 * s + k] * x[16 * s + k];
        }
    }
    print_message("Q6_K rel-rms %.5f, absmax rounding %.5f\n", e6, sqrt(e_abs / r_abs));
    assert_true(e6 <= sqrt(e_abs / r_abs) && e6 < 0.03);
    /* every code is the nearest on its stored scale */
    for (int b = 0; b < N / 256; b++) {
        const uint8_t *blk = q6 + (size_t)b * NB_Q6_K_BYTES;
        float d = nb_f16_to_f32(nb_q_load_u16(blk + 208));
        for (int e = 0; e < 256; e++) {
            float dl = d * (float)(int8_t)blk[192 + e / 16], xv = x[256 * b + e];
            float q = dl != 0 ? y[256 * b + e] / dl : 0;
            for (int dq = -1; dq <= 1; dq += 2)
                if (q + dq >= -32 && q + dq <= 31)
                    assert_true(fabsf(xv - dl * (q + dq)) >= fabsf(xv - y[256 * b + e]));
        }
    }
    /* weighted: the weighted error no worse than the unweighted encoding's */
    uint8_t *q6w = malloc((size_t)N / 256 * NB_Q6_K_BYTES);
    float *yw = malloc(sizeof(float) * N), *impr = malloc(sizeof(float) * N_IN);
    memcpy(impr, imp, sizeof imp);
    assert_int_equal(nb_kquant_rows(NB_WF_Q6_K, x, N_OUT, N_IN, impr, 0, N_OUT, q6w), NB_OK);
    assert_int_equal(nb_dequant(NB_DTYPE_Q6_K, q6w, yw, N), NB_OK);
    print_message("Q6_K weighted rel-rms %.5f (unweighted search %.5f)\n", rel_err(x, yw, imp, N),
                  rel_err(x, y, imp, N));
    assert_true(rel_err(x, yw, imp, N) <= rel_err(x, y, imp, N));

    /* Q8_0: absmax / 127 as f16, codes nearest on it; rows written one range at a time */
    assert_int_equal(nb_kquant_rows(NB_WF_Q8_0, x, N_OUT, N_IN, NULL, 0, 2, q8), NB_OK);
    assert_int_equal(nb_kquant_rows(NB_WF_Q8_0, x, N_OUT, N_IN, NULL, 2, N_OUT, q8), NB_OK);
    assert_int_equal(nb_dequant(NB_DTYPE_Q8_0, q8, y, N), NB_OK);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0, d = nb_f16_to_f32(nb_q_load_u16(q8 + 34 * b));
        for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[32 * b + k]));
        assert_true(d == nb_f16_to_f32(nb_f32_to_f16(amax / 127.0f)));
        for (int k = 0; k < 32; k++)
            assert_true(fabsf(x[32 * b + k] - y[32 * b + k]) <= 0.5f * d * 1.0001f);
    }
    print_message("Q8_0 rel-rms %.5f\n", rel_err(x, y, NULL, N));
    assert_true(rel_err(x, y, NULL, N) < 0.01);

    /* refused: another format, a partial block, a bad range */
    assert_int_equal(nb_kquant_rows(NB_WF_Q4_K, x, N_OUT, N_IN, NULL, 0, 1, q6), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_kquant_rows(NB_WF_Q6_K, x, 1, 300, NULL, 0, 1, q6), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_kquant_rows(NB_WF_Q8_0, x, N_OUT, N_IN, NULL, 3, 2, q8), NB_ERR_INVALID_ARG);
    free(x), free(y), free(q6), free(q8), free(q6w), free(yw), free(impr);
}

/* Q8_K: | f32 d | int8 qs[256] | int16 bsums[16] |; x = d * q (bsums are not values). */
static void test_q8_k(void **state)
{
    unsigned char blk[N_BLOCKS * 292];
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 292 * b;
        float d = (float)rnd(1, 1 << 15) * ldexpf(1.0f, -30); /* 15 bits times 8: exact */
        memcpy(p, &d, 4);
        for (int e = 0; e < 256; e++) {
            int q = b == 0 ? e - 128 : rnd(-128, 127);
            p[4 + e] = (unsigned char)(int8_t)q;
            want[256 * b + e] = d * (float)q;
        }
        for (int k = 0; k < 32; k++) p[260 + k] = (unsigned char)rnd(0, 255); /* noise */
    }
    check(NB_DTYPE_Q8_K, blk, want, N_BLOCKS * 256);
}

/* IQ4_XS: | f16 d | u16 scales_h | scales_l[4] | qs[128] |. Sub-block s of 32 has a 6-bit
 * scale ls (stored + 32): low 4 bits in nibble s % 2 of scales_l[s / 2], high 2 bits at
 * shift 2s of scales_h; its 16 bytes qs[16s ..] hold elements 0..15 in the low nibbles
 * and 16..31 in the high ones. x = d * (ls - 32) * grid[nibble]. */
static void test_iq4_xs(void **state)
{
    unsigned char blk[N_BLOCKS * 136] = {0};
    float want[N_BLOCKS * 256];
    for (int b = 0; b < N_BLOCKS; b++) {
        unsigned char *p = blk + 136 * b;
        float d = rnd_scale(14);
        put_f16(p, d);
        unsigned sh = 0;
        for (int s = 0; s < 8; s++) {
            int ls = b == 0 ? (s % 2 ? 0 : 63) : rnd(0, 63);
            p[4 + s / 2] |= (unsigned char)((ls & 15) << (4 * (s % 2)));
            sh |= (unsigned)(ls >> 4) << (2 * s);
            for (int j = 0; j < 32; j++) {
                int c = b == 0 ? (j + s) % 16 : rnd(0, 15);
                p[8 + 16 * s + j % 16] |= (unsigned char)(c << (j < 16 ? 0 : 4));
                want[256 * b + 32 * s + j] = d * (float)(ls - 32) * (float)k_grid[c];
            }
        }
        p[2] = (unsigned char)sh;
        p[3] = (unsigned char)(sh >> 8);
    }
    check(NB_DTYPE_IQ4_XS, blk, want, N_BLOCKS * 256);
}

/* Sizes from the layouts: 32 or 256 elements and the bytes each layout adds up to. */
static void test_block_sizes(void **state)
{
    static const struct {
        enum nb_dtype t;
        int elems, bytes;
    } k[] = {
        {NB_DTYPE_Q4_1, 32, 2 + 2 + 16},       {NB_DTYPE_Q5_0, 32, 2 + 4 + 16},
        {NB_DTYPE_Q5_1, 32, 2 + 2 + 4 + 16},   {NB_DTYPE_Q2_K, 256, 16 + 64 + 2 + 2},
        {NB_DTYPE_Q3_K, 256, 32 + 64 + 12 + 2}, {NB_DTYPE_Q4_K, 256, 2 + 2 + 12 + 128},
        {NB_DTYPE_Q5_K, 256, 2 + 2 + 12 + 32 + 128}, {NB_DTYPE_Q6_K, 256, 128 + 64 + 16 + 2},
        {NB_DTYPE_Q8_K, 256, 4 + 256 + 32},    {NB_DTYPE_IQ4_NL, 32, 2 + 16},
        {NB_DTYPE_IQ4_XS, 256, 2 + 2 + 4 + 128},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        assert_int_equal(nb_dtype_block_elems(k[i].t), k[i].elems);
        assert_int_equal(nb_dtype_block_bytes(k[i].t), k[i].bytes);
        uint64_t rb = 0;
        assert_true(nb_dtype_row_bytes(k[i].t, 3 * (uint64_t)k[i].elems, &rb));
        assert_int_equal(rb, 3 * k[i].bytes);
        assert_false(nb_dtype_row_bytes(k[i].t, (uint64_t)k[i].elems / 2, &rb));
    }
}

/* ------------------------------------------------------------------ llama.cpp golden data */

static char *data_dir(void)
{
    const char *src = getenv("NIBBLE_SOURCE_DIR");
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/data/gguf-quants", src ? src : ".");
    return dir;
}

static uint64_t file_xxh64(const char *path, uint64_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    XXH64_state_t *s = XXH64_createState();
    XXH64_reset(s, 0);
    unsigned char buf[1 << 16];
    size_t n;
    *size = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        XXH64_update(s, buf, n);
        *size += n;
    }
    fclose(f);
    uint64_t h = XXH64_digest(s);
    XXH64_freeState(s);
    return h;
}

/* Every tensor of `path` against the golden entry `e`; returns the tensors checked. */
static int n_x16; /* tensors checked through the X16 repack as well */

static int check_file(const char *path, const cJSON *e)
{
    uint64_t size;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)file_xxh64(path, &size));
    if (size != (uint64_t)cJSON_GetObjectItem(e, "bytes")->valuedouble ||
        strcmp(hex, cJSON_GetObjectItem(e, "xxh64")->valuestring))
        fail_msg("%s is not the file the golden data was made from (size %llu, XXH64 %s)", path,
                 (unsigned long long)size, hex);
    struct nb_gguf *g = NULL;
    if (nb_gguf_open(&g, path) != NB_OK) fail_msg("%s", nb_last_error());
    const cJSON *ts = cJSON_GetObjectItem(e, "tensors"), *t;
    assert_int_equal(nb_gguf_n_tensors(g), cJSON_GetArraySize(ts));
    int n = 0;
    cJSON_ArrayForEach(t, ts)
    {
        const struct nb_tensor *nt = nb_gguf_find_tensor(g, t->string);
        if (!nt) fail_msg("%s: tensor '%s' is missing", path, t->string);
        char type[16], want[17];
        assert_int_equal(sscanf(t->valuestring, "%15s %16s", type, want), 2);
        assert_string_equal(nb_dtype_name(nt->dtype), type);
        int64_t ne = nb_tensor_nelems(nt);
        float *f = malloc(sizeof(float) * (size_t)ne);
        assert_non_null(f);
        if (nb_dequant(nt->dtype, nt->data, f, ne) != NB_OK) fail_msg("%s", nb_last_error());
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64(f, sizeof(float) * (size_t)ne, 0));
        if (strcmp(hex, want))
            fail_msg("%s: tensor '%s' (%s): XXH64 of the f32 values %s, llama.cpp's %s", path,
                     t->string, type, hex, want);
        /* a Q4_K / Q5_K / Q6_K / Q4_0 / Q8_0 matrix shuffled into the integer kernels' X16
         * records decodes to
         * llama.cpp's values too: the repack is lossless */
        struct nb_block_info bi;
        enum nb_wformat xf =
            nb_wformat_block_named(nb_dtype_name(nt->dtype), &bi) ? bi.x16 : NB_WF_COUNT;
        struct nb_layout_planes pl;
        if (xf != NB_WF_COUNT && nt->n_dims == 2 &&
            nb_wformat_planes(xf, 0, nt->shape[0], nt->shape[1], &pl)) {
            void *rec = aligned_alloc(64, (size_t)pl.total);
            assert_non_null(rec);
            assert_int_equal(nb_kq_repack_x16(xf, nt->data, nt->shape[0], nt->shape[1], 0,
                                              nt->shape[0] / 16, rec), NB_OK);
            void (*dq)(const void *, int64_t, int64_t, float *) =
                xf == NB_WF_Q4_K_X16   ? nb_dequant_row_q4_k_x16_ref
                : xf == NB_WF_Q5_K_X16 ? nb_dequant_row_q5_k_x16_ref
                : xf == NB_WF_Q6_K_X16 ? nb_dequant_row_q6_k_x16_ref
                : xf == NB_WF_Q4_0_X16 ? nb_dequant_row_q4_0_x16_ref
                : xf == NB_WF_IQ4_NL_X16 ? nb_dequant_row_iq4_nl_x16_ref
                : xf == NB_WF_IQ4_XS_X16 ? nb_dequant_row_iq4_xs_x16_ref
                                       : nb_dequant_row_q8_0_x16_ref;
            for (int64_t r = 0; r < nt->shape[0]; r++)
                dq(rec, nt->shape[1], r, f + r * nt->shape[1]);
            snprintf(hex, sizeof hex, "%016llx",
                     (unsigned long long)XXH64(f, sizeof(float) * (size_t)ne, 0));
            if (strcmp(hex, want))
                fail_msg("%s: tensor '%s' (%s) repacked to X16 records: XXH64 of the f32 "
                         "values %s, llama.cpp's %s", path, t->string, type, hex, want);
            free(rec);
            n_x16++;
        }
        free(f);
        n++;
    }
    nb_gguf_free(g);
    return n;
}

static void test_llamacpp_golden(void **state)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/golden.json", data_dir());
    cJSON *golden = tu_load_json(path);
    const char *extra = getenv("NIBBLE_GGUF_QUANTS_DIR");
    const cJSON *e;
    int n_files = 0, n_tensors = 0, n_committed = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(golden, "files"))
    {
        int committed = cJSON_IsTrue(cJSON_GetObjectItem(e, "committed"));
        if (committed) {
            snprintf(path, sizeof path, "%s/%s", data_dir(), e->string);
            n_committed++;
        } else {
            if (!extra) continue;
            snprintf(path, sizeof path, "%s/%s", extra, e->string);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            fclose(f);
        }
        n_tensors += check_file(path, e);
        n_files++;
    }
    assert_true(n_committed >= 2);
    print_message("llama.cpp golden dequantization: %d files, %d tensors bit-identical (%d "
                  "of them also through the X16 repack)\n", n_files, n_tensors, n_x16);
    assert_true(n_x16 >= 57); /* kjv-7m-Q4_K_M's Q4_K and Q6_K matrices at least */
    cJSON_Delete(golden);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_sizes), cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q5_0),        cmocka_unit_test(test_q5_1),
        cmocka_unit_test(test_iq4_nl),      cmocka_unit_test(test_q2_k),
        cmocka_unit_test(test_q3_k),        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q5_k),        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_q4_k_pack_w4a16),
        cmocka_unit_test(test_q8_k),        cmocka_unit_test(test_iq4_xs),
        cmocka_unit_test(test_llamacpp_golden), cmocka_unit_test(test_kquant_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
