/* test_kernels_vec — the AVX-512 float kernels, and the AVX-512 and AVX2 attention
 * kernels, against their _ref twins. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/fp.h"
#include "kernels/kernels.h"

#define TOL_REL 1e-5 /* of sum |a_i b_i|: 16-lane vs 8-lane summation order */
/* Gated activation: vector exp (Taylor to r^7 + vscalefps) and a division vs expf /
 * tanhf: |out - ref| <= TOL_GLU |ref| + 2^-23 |g up|. The second term is the
 * reference's own error on gelu for g << 0, where 1 + tanh(u) cancels (one ulp of 1,
 * times 0.5 |g up|); the SIMD form g / (1 + e^-2u) has no such cancellation. */
#define TOL_GLU 1e-6
/* RMSNorm: squares summed in f32 over 16 lanes vs double: relative, measured < 2e-7. */
#define TOL_NORM 1e-6
/* Attention (values in [-1, 1]): vector exp (about 2 ulp) and another summation order.
 * Prefill tile: |out - ref| <= TOL_ATTN. Decode, per row: the largest score within
 * TOL_SCORE of the row's largest sum_d |q_d k_d| (f32 dot products of hd terms), the sum
 * l and the accumulator within TOL_ATTN l plus 2 score errors (each weight is
 * exp(score - m)). */
#define TOL_ATTN  2e-5
#define TOL_SCORE 1e-6
/* The AMX-BF16 tile (kernels/x86/attn_amx.inc) keeps f32's precision (Q and the weights
 * as three bf16, K and V as two): the AVX-512 tile's bound. (With two bf16 a factor, about
 * 16 bits, outputs were 4e-6 to 1.2e-5 off the reference.) */
#define TOL_ATTN_AMX TOL_ATTN

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static int have_avx512(void)
{
    const struct nb_cpu *c = nb_cpu_get();
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->f16c;
}

static __attribute__((unused)) int have_avx2(void) /* used by the x86 builds only */
{
    const struct nb_cpu *c = nb_cpu_get();
    return c->avx2 && c->fma && c->f16c;
}

/* The fast attention kernels this CPU runs, each checked against the reference. */
struct attn_impl {
    const char *name;
    nb_attn_tile_fn tile;
    nb_attn_decode_fn decode;
    void (*row_load)(int type, const void *src, float *dst, int64_t n);
    void (*row_store)(int type, const float *src, void *dst, int64_t n);
};

static int attn_impls(struct attn_impl *out)
{
    int n = 0;
#ifdef NB_HAVE_X86
    if (have_avx512())
        out[n++] = (struct attn_impl){"avx512", nb_attn_tile_avx512, nb_attn_decode_avx512,
                                      nb_kv_row_load_avx512, nb_kv_row_store_avx512};
    if (have_avx2())
        out[n++] = (struct attn_impl){"avx2", nb_attn_tile_avx2, nb_attn_decode_avx2,
                                      nb_kv_row_load_avx2, nb_kv_row_store_avx2};
#elif defined(NB_HAVE_ARM)
    out[n++] = (struct attn_impl){"neon", nb_attn_tile_neon, nb_attn_decode_neon,
                                  nb_kv_row_load_neon, nb_kv_row_store_neon};
#else
    (void)out;
#endif
    return n;
}

/* The prefill tiles this CPU runs, each with its bound: those of attn_impls, and the
 * AMX-BF16 tile on emulated tiles (any AVX-512 VNNI CPU) and on the CPU's own. */
struct tile_impl {
    const char *name;
    nb_attn_tile_fn tile;
    float tol;
};

static int tile_impls(struct tile_impl *out)
{
    struct attn_impl im[2];
    int n = 0, n_im = attn_impls(im);
    for (int i = 0; i < n_im; i++)
        out[n++] = (struct tile_impl){im[i].name, im[i].tile, TOL_ATTN};
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    if (have_avx512() && c->avx512_vnni)
        out[n++] = (struct tile_impl){"amx (emulated)", nb_attn_tile_amxemu, TOL_ATTN_AMX};
    if (have_avx512() && c->avx512_vnni && c->amx_tile && c->amx_bf16 && nb_amx_request_perm())
        out[n++] = (struct tile_impl){"amx", nb_attn_tile_amx, TOL_ATTN_AMX};
#endif
    return n;
}

static void test_dot_axpy(void **state)
{
#ifndef NB_HAVE_X86
    skip(); /* the NEON twins: test_kernels_arm (bit-identical) */
#else
    if (!have_avx512()) skip();
    uint64_t s = 1;
    for (int n = 1; n < 300; n += 7) {
        float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
        float *y1 = malloc(sizeof(float) * (size_t)n), *y2 = malloc(sizeof(float) * (size_t)n);
        double mag = 0;
        for (int i = 0; i < n; i++) {
            a[i] = frand(&s);
            b[i] = frand(&s);
            y1[i] = y2[i] = frand(&s);
            mag += fabs((double)a[i] * b[i]);
        }
        assert_true(fabs(nb_dot_f32_avx512(a, b, n) - nb_dot_f32_ref(a, b, n)) <=
                    TOL_REL * mag + 1e-7);
        nb_axpy_f32_avx512(y1, 0.37f, a, n);
        nb_axpy_f32_ref(y2, 0.37f, a, n);
        for (int i = 0; i < n; i++)
            assert_true(fabsf(y1[i] - y2[i]) <= 1e-6f);
        free(a);
        free(b);
        free(y1);
        free(y2);
    }
#endif
}

static void test_gemm_float(void **state)
{
#ifndef NB_HAVE_X86
    skip(); /* the NEON twins: test_kernels_arm (bit-identical) */
#else
    if (!have_avx512()) skip();
    uint64_t s = 7;
    enum { N_OUT = 37, N_IN = 200, N_TOK = 5 };
    static float w32[N_OUT * N_IN], x[N_TOK * N_IN], y1[N_TOK * N_OUT], y2[N_TOK * N_OUT];
    static uint16_t w16[N_OUT * N_IN], wb[N_OUT * N_IN];
    static float scratch[N_IN];
    for (int i = 0; i < N_OUT * N_IN; i++) {
        w32[i] = frand(&s);
        w16[i] = nb_f32_to_f16(w32[i]);
        wb[i] = nb_f32_to_bf16(w32[i]);
    }
    for (int i = 0; i < N_TOK * N_IN; i++)
        x[i] = frand(&s);
    const void *ws[3] = {w32, w16, wb};
    nb_gemm_fn fast[3] = {nb_gemm_f32_avx512, nb_gemm_f16_avx512, nb_gemm_bf16_avx512};
    nb_gemm_fn ref[3] = {nb_gemm_f32_ref, nb_gemm_f16_ref, nb_gemm_bf16_ref};
    for (int k = 0; k < 3; k++) {
        fast[k](y1, N_OUT, x, N_IN, ws[k], N_IN, N_TOK, 3, N_OUT, scratch);
        ref[k](y2, N_OUT, x, N_IN, ws[k], N_IN, N_TOK, 3, N_OUT, scratch);
        for (int t = 0; t < N_TOK; t++)
            for (int r = 3; r < N_OUT; r++)
                assert_true(fabsf(y1[t * N_OUT + r] - y2[t * N_OUT + r]) <= TOL_REL * N_IN);
    }
#endif
}

/* GGUF Q4_K / Q6_K rows run as stored: the AVX-512 row decode is bit-identical to the
 * reference (random blocks: every code, scale and min bit pattern, finite f16 d / dmin of
 * both signs), and the GEMMs agree as the float GEMMs do (the dot's summation order). */
static __attribute__((unused)) void random_kblocks(uint8_t *b, int64_t n_blocks, int bytes,
                                                   int d_at, uint64_t *s) /* x86 builds only */
{
    for (int64_t i = 0; i < n_blocks * bytes; i++) b[i] = (uint8_t)(frand(s) * 127.0f + 128.0f);
    for (int64_t i = 0; i < n_blocks; i++) {
        uint16_t d = nb_f32_to_f16(frand(s) * 0.01f), dmin = nb_f32_to_f16(frand(s) * 0.02f);
        memcpy(b + i * bytes + d_at, &d, 2);
        if (bytes == 144) memcpy(b + i * bytes + 2, &dmin, 2);
    }
}

static void test_gemm_kquant(void **state)
{
    if (!have_avx512()) skip();
#ifdef NB_HAVE_X86
    uint64_t s = 11;
    enum { N_OUT = 21, N_IN = 512, N_TOK = 4 };
    static uint8_t w[N_OUT * (N_IN / 256) * 210];
    static float x[N_TOK * N_IN], y1[N_TOK * N_OUT], y2[N_TOK * N_OUT], r1[N_IN], r2[N_IN];
    static float scratch[N_IN];
    for (int i = 0; i < N_TOK * N_IN; i++) x[i] = frand(&s);
    for (int k = 0; k < 2; k++) {
        int bytes = k ? 210 : 144;
        int64_t row = N_IN / 256 * bytes;
        random_kblocks(w, (int64_t)N_OUT * (N_IN / 256), bytes, k ? 208 : 0, &s);
        for (int r = 0; r < N_OUT; r++) {
            (k ? nb_dequant_row_q6_k_ref : nb_dequant_row_q4_k_ref)(w + r * row, r1, N_IN);
            (k ? nb_dequant_row_q6_k_avx512 : nb_dequant_row_q4_k_avx512)(w + r * row, r2, N_IN);
            assert_memory_equal(r1, r2, sizeof r1);
        }
        (k ? nb_gemm_q6_k_avx512 : nb_gemm_q4_k_avx512)(y1, N_OUT, x, N_IN, w, N_IN, N_TOK, 2,
                                                        N_OUT, scratch);
        (k ? nb_gemm_q6_k_ref : nb_gemm_q4_k_ref)(y2, N_OUT, x, N_IN, w, N_IN, N_TOK, 2, N_OUT,
                                                  scratch);
        for (int t = 0; t < N_TOK; t++)
            for (int r = 2; r < N_OUT; r++) {
                (k ? nb_dequant_row_q6_k_ref : nb_dequant_row_q4_k_ref)(w + r * row, r1, N_IN);
                double mag = 0;
                for (int i = 0; i < N_IN; i++) mag += fabs((double)x[t * N_IN + i] * r1[i]);
                assert_true(fabs(y1[t * N_OUT + r] - y2[t * N_OUT + r]) <= TOL_REL * mag + 1e-7);
            }
    }
#endif
}

/* Decode attention over runs of keys: each fast kernel against the reference for every
 * KV type, head sizes that are multiples of 32 and of 16 only (80, 48: AVX-512 runs the
 * reference there), GQA groups of 1-8 (more than 4 rows: two passes over K), runs that
 * are empty, shorter than a block of 16, on and across the 8-key pages of a shuffled
 * block table, and long; plain and peaked queries (scores far apart: weights below
 * e^-80 are zeroed, rescale factors 0). */
static void test_attn_decode(void **state)
{
    struct attn_impl im[2];
    int n_im = attn_impls(im);
    if (!n_im) skip();
    uint64_t s = 17;
    enum { MAXHD = 128, POOL = 16, BSHIFT = 3, ROWS = POOL << BSHIFT, MAXREP = 8 };
    int32_t blocks[POOL];
    for (int b = 0; b < POOL; b++) blocks[b] = (b * 7 + 3) % POOL; /* a permutation */
    static float k[ROWS * 2 * MAXHD], v[ROWS * 2 * MAXHD], q[MAXREP * MAXHD];
    static float o1[MAXREP * (MAXHD + 2)], o2[MAXREP * (MAXHD + 2)];
    static float scr[NB_ATTN_DECODE_SCRATCH(MAXHD)], kf[MAXHD];
    static const int hds[] = {128, 64, 80, 48};
    static const int runs[][2] = {{5, 5},  {0, 1},  {3, 14},   {0, 16},   {8, 24},
                                  {1, 17}, {16, 33}, {120, 128}, {7, 100}, {0, ROWS}};
    double worst[3] = {0, 0, 0}; /* m, l, acc: error / tolerance */
    for (int ih = 0; ih < 4; ih++)
        for (int peak = 0; peak < 2; peak++) {
            int hd = hds[ih];
            int64_t ldkv = 2 * hd;
            for (int i = 0; i < ROWS * ldkv; i++) k[i] = 2 * frand(&s), v[i] = frand(&s);
            for (int i = 0; i < MAXREP * hd; i++) q[i] = (peak ? 3.0f : 0.3f) * frand(&s);
            for (int ty = NB_KVE_F32; ty <= NB_KVE_Q8_0; ty++) {
                if (ty == NB_KVE_Q8_0 && hd % 32) continue;
                int64_t rb = NB_KV_ROW_BYTES(ty, ldkv);
                char *kt = malloc((size_t)(ROWS * rb)), *vt = malloc((size_t)(ROWS * rb));
                for (int r = 0; r < ROWS; r++) {
                    nb_kv_row_store(ty, k + r * ldkv, kt + r * rb, ldkv);
                    nb_kv_row_store(ty, v + r * ldkv, vt + r * rb, ldkv);
                }
                int64_t head = NB_KV_ROW_BYTES(ty, hd); /* the second kv head */
                struct nb_kv_view view = {kt + head, vt + head, blocks, rb << BSHIFT, rb,
                                          BSHIFT, ty};
                for (int rep = 1; rep <= MAXREP; rep++)
                    for (int ir = 0; ir < 10; ir++) {
                        int a = runs[ir][0], b = runs[ir][1];
                        nb_attn_decode_ref(q, rep, hd, &view, a, b, o2, hd + 2, scr);
                        for (int ii = 0; ii < n_im; ii++) {
                            memset(o1, 0xff, sizeof o1); /* NaN: every output is written */
                            im[ii].decode(q, rep, hd, &view, a, b, o1, hd + 2, scr);
                            /* the same again over a scratch of other garbage: bit for bit
                             * (a batched step must give a sequence what it gets alone) */
                            static float o3[MAXREP * (MAXHD + 2)];
                            for (size_t i = 0; i < sizeof scr / sizeof *scr; i++)
                                scr[i] = (float)(i % 7) - 3.0f;
                            im[ii].decode(q, rep, hd, &view, a, b, o3, hd + 2, scr);
                            if (memcmp(o1, o3, sizeof(float) * (size_t)rep * (hd + 2)))
                                fail_msg("%s decode hd %d type %d rep %d run [%d, %d): not the "
                                         "same twice", im[ii].name, hd, ty, rep, a, b);
                            for (int r = 0; r < rep; r++) {
                                const float *x = o1 + r * (hd + 2), *y = o2 + r * (hd + 2);
                                if (a == b) {
                                    assert_true(x[0] == -INFINITY && y[0] == -INFINITY);
                                    assert_true(x[1] == 0 && y[1] == 0);
                                    for (int d = 0; d < hd; d++) assert_true(x[2 + d] == 0);
                                    continue;
                                }
                                double smax = 0; /* the largest sum |q_d k_d| of the run */
                                for (int p = a; p < b; p++) {
                                    nb_kv_row_load(ty, (const char *)view.k + NB_KV_AT(&view, p),
                                                   kf, hd);
                                    double sa = 0;
                                    for (int d = 0; d < hd; d++)
                                        sa += fabs((double)q[r * hd + d] * kf[d]);
                                    smax = sa > smax ? sa : smax;
                                }
                                double tm = TOL_SCORE * smax;
                                double tl = (TOL_ATTN + 2 * tm) * y[1];
                                double e[3] = {fabs((double)x[0] - y[0]),
                                               fabs((double)x[1] - y[1]), 0};
                                for (int d = 0; d < hd; d++) {
                                    double ed = fabs((double)x[2 + d] - y[2 + d]);
                                    e[2] = ed > e[2] ? ed : e[2];
                                }
                                double t[3] = {tm, tl, tl};
                                for (int c = 0; c < 3; c++) {
                                    worst[c] = e[c] / t[c] > worst[c] ? e[c] / t[c] : worst[c];
                                    if (!(e[c] <= t[c]))
                                        fail_msg("%s decode hd %d type %d peak %d rep %d run "
                                                 "[%d, %d) row %d: %s error %g > %g",
                                                 im[ii].name, hd, ty, peak, rep, a, b, r,
                                                 c == 0 ? "m" : c == 1 ? "l" : "acc", e[c], t[c]);
                                }
                            }
                        }
                    }
                free(kt);
                free(vt);
            }
        }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "attn decode: worst error / tolerance: m %.3g, l %.3g, acc %.3g\n",
                worst[0], worst[1], worst[2]);
}

/* KV rows: f16 and bf16 round to nearest (exact on their grids), q8_0 within half a
 * step of its block's scale. */
static void test_kv_rows(void **state)
{
    uint64_t s = 5;
    float x[64], y[64];
    char buf[256];
    for (int i = 0; i < 64; i++) x[i] = 4 * frand(&s);
    x[7] = 0;
    for (int ty = NB_KVE_F32; ty <= NB_KVE_Q8_0; ty++) {
        nb_kv_row_store(ty, x, buf, 64);
        nb_kv_row_load(ty, buf, y, 64);
        for (int i = 0; i < 64; i++) {
            float tol = ty == NB_KVE_F32 ? 0 : ty == NB_KVE_F16 ? fabsf(x[i]) * 4.9e-4f
                      : ty == NB_KVE_BF16 ? fabsf(x[i]) * 3.91e-3f : 4.0f / 127 / 2 * 1.01f;
            assert_true(fabsf(y[i] - x[i]) <= tol);
        }
        assert_true(y[7] == 0);
    }
    /* the fast loaders: bit-identical to the reference, with tails (n not a multiple of
     * 8 or 16) for the 16-bit types, f16 subnormals and an infinity */
    struct attn_impl im[2];
    int n_im = attn_impls(im);
    x[9] = 3e-6f, x[10] = -7e-8f, x[11] = 1e5f; /* f16: subnormal, subnormal, inf */
    static const int ns[] = {64, 8, 5, 37, 23};
    for (int ty = NB_KVE_F32; ty <= NB_KVE_Q8_0; ty++)
        for (int in = 0; in < 5; in++) {
            int n = ns[in];
            if (ty == NB_KVE_Q8_0 && n % 32) continue;
            float yr[64], yf[64];
            nb_kv_row_store(ty, x, buf, n);
            nb_kv_row_load(ty, buf, yr, n);
            for (int ii = 0; ii < n_im; ii++) {
                memset(yf, 0xff, sizeof yf);
                im[ii].row_load(ty, buf, yf, n);
                if (memcmp(yf, yr, sizeof(float) * (size_t)n))
                    fail_msg("%s kv_row_load type %d n %d differs from the reference", im[ii].name,
                             ty, n);
            }
        }
    /* the fast stores: bit-identical bytes to the reference on random rows with ties
     * (x.5 steps of each type's grid), subnormals, overflow, infinities, NaN and -0 */
    float z[96];
    char br[512], bf[512];
    for (int rep = 0; rep < 40; rep++) {
        for (int i = 0; i < 96; i++) z[i] = frand(&s) * (rep < 10 ? 1 : rep < 20 ? 1e-5f : 3e4f);
        z[3] = -0.0f, z[4] = 65520.0f, z[5] = 65519.0f, z[6] = INFINITY, z[7] = -1e9f;
        z[8] = 2.98e-8f, z[9] = 1.0f + 1.0f / 2048, z[10] = 1.0f + 3.0f / 2048; /* f16 ties */
        z[11] = 1.0f + 1.0f / 256, z[12] = 1.0f + 3.0f / 256;                    /* bf16 ties */
        if (rep == 39) z[13] = NAN, z[14] = -NAN;
        for (int ty = NB_KVE_F32; ty <= NB_KVE_Q8_0; ty++)
            for (int n = ty == NB_KVE_Q8_0 ? 32 : 1; n <= 96; n += (ty == NB_KVE_Q8_0 ? 32 : 1)) {
                if (ty == NB_KVE_Q8_0 && rep == 39) continue; /* NaN: no code to compare */
                float zz[96]; /* q8_0 of an infinity has no code either */
                memcpy(zz, z, sizeof zz);
                if (ty == NB_KVE_Q8_0) zz[6] = 1e4f;
                memset(br, 0x55, sizeof br);
                nb_kv_row_store(ty, zz, br, n);
                for (int ii = 0; ii < n_im; ii++) {
                    memset(bf, 0x55, sizeof bf);
                    im[ii].row_store(ty, zz, bf, n);
                    if (memcmp(bf, br, sizeof br))
                        fail_msg("%s kv_row_store type %d n %d rep %d differs from the reference",
                                 im[ii].name, ty, n, rep);
                }
            }
    }
    assert_int_equal(NB_KV_ROW_BYTES(NB_KVE_Q8_0, 64), 68);
    assert_int_equal(NB_KV_ROW_BYTES(NB_KVE_F16, 64), 128);
}

/* Prefill attention tile, each fast kernel against the reference: odd tile sizes (1 to
 * 4 vectors of 8 rows), GQA groups of 1-4, head sizes that are and are not multiples of
 * 32, 16 and 8, causal and sliding-window masks, every KV type, a paged cache whose
 * block table is a shuffled choice of twice as many blocks (a wrong slot reads other
 * data). */
static void test_attn_tile(void **state)
{
    struct tile_impl im[4];
    int n_im = tile_impls(im);
    if (!n_im) skip();
    uint64_t s = 11;
    static const int hds[] = {128, 40, 8, 20, 96};
    static const int reps[] = {1, 2, 3, 4};
    static const int ntoks[] = {1, 3, 5, 7, 8, 11, 16};
    static const int windows[] = {0, 1, 6, 37};
    for (int ih = 0; ih < 5; ih++)
        for (int ir = 0; ir < 4; ir++)
            for (int it = 0; it < 7; it++)
                for (int iw = 0; iw < 4; iw++) {
                    int hd = hds[ih], rep = reps[ir], nt = ntoks[it], win = windows[iw];
                    if (nt * rep > NB_ATTN_ROWS) continue;
                    int kvh = 2, p0 = 60 + it, bshift = 3;
                    int n_blk = ((p0 + nt) >> bshift) + 1, pool = 2 * n_blk;
                    int32_t blocks[64], all[64];
                    for (int b = 0; b < pool; b++)
                        all[b] = b;
                    for (int b = pool - 1; b > 0; b--) { /* Fisher-Yates */
                        int o = (int)(frand(&s) * 1e6) % (b + 1);
                        o = o < 0 ? -o : o;
                        int tmp = all[b];
                        all[b] = all[o];
                        all[o] = tmp;
                    }
                    for (int b = 0; b < n_blk; b++)
                        blocks[b] = all[b];
                    int64_t ldkv = (int64_t)kvh * hd, ldq = (int64_t)kvh * rep * hd;
                    size_t nkv = ((size_t)pool << bshift) * (size_t)ldkv;
                    size_t nq = (size_t)nt * (size_t)ldq;
                    float *k = malloc(sizeof(float) * nkv), *v = malloc(sizeof(float) * nkv);
                    float *q = malloc(sizeof(float) * nq), *o1 = calloc(nq, sizeof(float));
                    float *o2 = calloc(nq, sizeof(float));
                    float *scr = malloc(sizeof(float) * (size_t)NB_ATTN_SCRATCH(hd));
                    for (size_t i = 0; i < nkv; i++) {
                        k[i] = 2 * frand(&s);
                        v[i] = frand(&s);
                    }
                    for (size_t i = 0; i < nq; i++)
                        q[i] = 2 * frand(&s);
                    int32_t pos[16];
                    for (int t = 0; t < nt; t++)
                        pos[t] = p0 + t;
                    /* the second kv head's columns: q / out offset by rep * hd */
                    int64_t col = (int64_t)rep * hd;
                    float sc = 1.0f / sqrtf((float)hd);
                    /* every KV element type: the same rows stored as that type */
                    for (int ty = NB_KVE_F32; ty <= NB_KVE_Q8_0; ty++) {
                        if (ty == NB_KVE_Q8_0 && hd % 32) continue;
                        int64_t rb = NB_KV_ROW_BYTES(ty, ldkv);
                        size_t rows = (size_t)pool << bshift;
                        char *kt = malloc(rows * (size_t)rb), *vt = malloc(rows * (size_t)rb);
                        for (size_t r = 0; r < rows; r++) {
                            nb_kv_row_store(ty, k + r * (size_t)ldkv, kt + r * (size_t)rb, ldkv);
                            nb_kv_row_store(ty, v + r * (size_t)ldkv, vt + r * (size_t)rb, ldkv);
                        }
                        int64_t head = NB_KV_ROW_BYTES(ty, hd); /* the second kv head */
                        memset(o2, 0, sizeof(float) * nq);
                        /* rows token-major: a block is 2^bshift whole rows */
                        struct nb_kv_view view = {kt + head, vt + head, blocks, rb << bshift, rb,
                                                  bshift, ty};
                        nb_attn_tile_ref(o2 + col, ldq, q + col, ldq, nt, rep, hd, pos, &view, win,
                                         sc, scr);
                        for (int ii = 0; ii < n_im; ii++) {
                            memset(o1, 0, sizeof(float) * nq);
                            im[ii].tile(o1 + col, ldq, q + col, ldq, nt, rep, hd, pos, &view, win,
                                        sc, scr);
                            for (size_t i = 0; i < nq; i++)
                                if (!(fabsf(o1[i] - o2[i]) <= im[ii].tol))
                                    fail_msg("%s tile hd %d rep %d ntok %d window %d type %d: "
                                             "out[%zu] %g, ref %g",
                                             im[ii].name, hd, rep, nt, win, ty, i, o1[i], o2[i]);
                            /* each token alone gives its rows of the tile bit for bit: a
                             * prompt's numbers must not depend on how it was cut into
                             * chunks (a served prompt beside others') */
                            for (int t = 0; t < nt; t++) {
                                float o3[4 * 128];
                                im[ii].tile(o3, ldq, q + t * ldq + col, ldq, 1, rep, hd, pos + t,
                                            &view, win, sc, scr);
                                if (memcmp(o3, o1 + t * ldq + col, sizeof(float) * (size_t)col))
                                    fail_msg("%s tile hd %d rep %d ntok %d window %d type %d: "
                                             "token %d alone differs from its rows in the tile",
                                             im[ii].name, hd, rep, nt, win, ty, t);
                            }
                        }
                        free(kt);
                        free(vt);
                    }
                    free(k);
                    free(v);
                    free(q);
                    free(o1);
                    free(o2);
                    free(scr);
                }
}

static void test_glu(void **state)
{
#ifdef NB_HAVE_X86
    if (!have_avx512()) skip();
    uint64_t s = 7;
    const int ns[] = {1, 15, 16, 17, 100, 6144};
    for (int act = 0; act < 2; act++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int n = ns[ni];
            float *g = malloc(sizeof(float) * (size_t)n), *u = malloc(sizeof(float) * (size_t)n);
            float *o1 = malloc(sizeof(float) * (size_t)n), *o2 = malloc(sizeof(float) * (size_t)n);
            for (int i = 0; i < n; i++) {
                /* mostly N(0, ~3), plus the tails where exp overflows or underflows */
                g[i] = i % 97 == 3 ? 90.0f * frand(&s) : 4.0f * frand(&s);
                u[i] = frand(&s);
            }
            if (n > 4) g[0] = 0.0f, g[1] = -0.0f, g[2] = 88.7f, g[3] = -88.7f;
            nb_glu_ref(o1, g, u, n, (enum nb_glu_act)act);
            nb_glu_avx512(o2, g, u, n, (enum nb_glu_act)act);
            for (int i = 0; i < n; i++) {
                double tol = TOL_GLU * fabs(o1[i]) + 0x1p-23 * fabs((double)g[i] * u[i]) + 1e-37;
                if (!(fabs((double)o1[i] - o2[i]) <= tol))
                    fail_msg("glu act %d n %d i %d: g %g ref %g simd %g", act, n, i, g[i], o1[i],
                             o2[i]);
            }
            nb_glu_avx512(g, g, u, n, (enum nb_glu_act)act); /* in place */
            assert_memory_equal(g, o2, sizeof(float) * (size_t)n);
            free(g), free(u), free(o1), free(o2);
        }
#else
    skip();
#endif
}

static void test_rmsnorm(void **state)
{
#ifdef NB_HAVE_X86
    if (!have_avx512()) skip();
    uint64_t s = 9;
    const int ns[] = {1, 24, 64, 128, 130, 2048, 6144};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        int n = ns[ni];
        float *x = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n);
        float *y1 = malloc(sizeof(float) * (size_t)n), *y2 = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) x[i] = 3.0f * frand(&s), w[i] = 1.0f + frand(&s);
        nb_rmsnorm_ref(y1, x, w, n, 1e-6f);
        nb_rmsnorm_avx512(y2, x, w, n, 1e-6f);
        for (int i = 0; i < n; i++)
            assert_true(fabs((double)y1[i] - y2[i]) <= TOL_NORM * fabs(y1[i]) + 1e-30);
        nb_rmsnorm_avx512(x, x, w, n, 1e-6f); /* in place */
        assert_memory_equal(x, y2, sizeof(float) * (size_t)n);
        free(x), free(w), free(y1), free(y2);
    }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_axpy),
        cmocka_unit_test(test_gemm_float),
        cmocka_unit_test(test_gemm_kquant),
        cmocka_unit_test(test_attn_tile), cmocka_unit_test(test_kv_rows),
        cmocka_unit_test(test_attn_decode),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_rmsnorm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
