/* test_kernels_x86 — the X16 layout, the ROWS -> X16 repack, and every fast kernel
 * against its _ref twin (skipped when the CPU lacks the ISA). */
#include "helpers/testutil.h"
#include "helpers/kernel_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "quant/kq_repack.h"
#include "quant/repack.h"

/* Tolerances: |y - y_ref| <= TOL * mag, mag = sum_k |each product term|.
 * w4a8 X16 SIMD vs X16 ref: the same int32 sums and the same float operations in the
 * same order; measured bit-identical (worst ratio 0), the bound only allows for a compiler that
 * contracts the reference's multiply-add. mag = sum_k |w_k| |xd qa_k|.
 * w4a16 X16 SIMD (d * sum q x + m * sum x, FMA) vs the reference (w = d q + m first):
 * another summation order; mag = sum_k (|d q_k| + |m|) |x_k| (the terms it adds);
 * measured worst ratio 8.9e-8 over the shapes below.
 * w4a16 X16 AVX512-BF16 tiled prefill: activations rounded to bf16 (relative 2^-9 each),
 * exact bf16 products, f32 sums: bound 2^-8 of the same mag.
 * w4a16 X16 AVX-512 VNNI decode (int16 activations per group, scale max|x| / 32767):
 * |error| <= d sum_k q_k max|x| 2^-16 per group, under the same 2^-8 of mag wherever the
 * group's largest activation meets a nonzero code; measured worst ratio about 1e-5.
 * act_quant_q8 SIMD vs ref: bit-identical (same division and rounding).
 * GGUF block X16 kernels (Q4_K, Q5_K, Q6_K, IQ4_XS) vs their twins: the same int32 sums, the sums
 * over sub-blocks with fused multiply-adds (the twin rounds each product): within
 * TOL_KQ_X16 of mag = sum_k |w_k| |xd qa_k|; Q4_0 / Q8_0 / IQ4_NL are bit-identical. */
#define TOL_KQ_X16     1e-6
#define TOL_W4A8_X16   1e-6
#define TOL_W4A16_X16  1e-6
#define TOL_W4A16_BF16 0x1p-8

static uint64_t g_rng = 12345;

/* ---------------------------------------------------------------- layout, repack */

static void test_layout_x16(void **state)
{
    struct nb_layout_planes a, b;
    for (int p = NB_WPATH_W4A16; p <= NB_WPATH_W4A8; p++) {
        assert_true(nb_layout_planes(p, 64, 48, 256, &a));
        assert_true(nb_layout_planes_x(p, NB_LAYOUT_X16, 64, 48, 256, &b));
        assert_memory_equal(&a, &b, sizeof a);
        assert_true(nb_layout_planes_x(p, NB_LAYOUT_ROWS, 64, 47, 256, &b));
        assert_false(nb_layout_planes_x(p, NB_LAYOUT_X16, 64, 47, 256, &b)); /* n_out % 16 */
    }
    assert_false(nb_layout_planes_x(NB_WPATH_W8A16, NB_LAYOUT_X16, 0, 48, 256, &b));
    assert_false(nb_layout_planes_x(NB_WPATH_F32, NB_LAYOUT_X16, 0, 48, 256, &b));
    assert_false(nb_layout_planes_x(NB_WPATH_W4A8, (enum nb_layout)7, 64, 48, 256, &b));
    uint8_t x[64];
    assert_int_equal(nb_repack_x16(NB_WPATH_W4A8, 32, x, x, 17, 64, 0), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_repack_x16(NB_WPATH_W8A16, 32, x, x, 16, 64, 0), NB_ERR_INVALID_ARG);
}

static void test_repack(void **state)
{
    static const int64_t shapes[][2] = {{16, 32}, {48, 128}, {80, 384}, {160, 1024}, {64, 2048}};
    static const int groups[] = {32, 64, 128};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int gi = 0; gi < 3; gi++)
            for (int p = NB_WPATH_W4A16; p <= NB_WPATH_W4A8; p++) {
                int64_t n_out = shapes[si][0], n_in = shapes[si][1];
                int group = groups[gi];
                if (n_in % group) continue;
                struct nb_layout_planes pl;
                uint8_t *rows = tu_random_rows_blob(&g_rng, p, group, n_out, n_in, &pl);
                /* direct scalar construction from the layout definition */
                uint8_t *want = calloc(1, (size_t)pl.total);
                int64_t ng = n_in / group;
                for (int64_t r = 0; r < n_out; r++) {
                    const uint8_t *row = rows + pl.offset[0] + r * (n_in / 2);
                    for (int64_t k = 0; k < n_in; k++) {
                        int64_t c = k / 8, j = k % 8;
                        uint8_t *o = want + pl.offset[0] + (r / 16) * (n_in / 8) * 64 + c * 64 +
                                     (r % 16) * 4 + (j & 3);
                        *o |= (uint8_t)(nb_q4_get(row, k) << (j < 4 ? 0 : 4));
                    }
                    for (int pi = 1; pi < pl.n_planes; pi++)
                        for (int64_t g = 0; g < ng; g++)
                            memcpy(want + pl.offset[pi] + 2 * (((r / 16) * ng + g) * 16 + r % 16),
                                   rows + pl.offset[pi] + 2 * (r * ng + g), 2);
                }
                static const int64_t steps[] = {0, 16, 48, 5};
                for (int s = 0; s < 4; s++) {
                    uint8_t *x = tu_to_x16(p, group, rows, n_out, n_in, steps[s]);
                    assert_memory_equal(x, want, (size_t)pl.total);
                    free(x);
                }
                /* the X16 decoder reads back the ROWS values */
                uint8_t *x = tu_to_x16(p, group, rows, n_out, n_in, 0);
                float *a = malloc(sizeof(float) * n_in), *b = malloc(sizeof(float) * n_in);
                for (int64_t r = 0; r < n_out; r++) {
                    nb_unpack_row_ref(p, group, rows, &pl, n_in, r, a);
                    nb_unpack_row_x16_ref(p, group, x, &pl, n_in, r, b);
                    assert_memory_equal(a, b, sizeof(float) * n_in);
                }
                free(a), free(b), free(x), free(want), free(rows);
            }
}

/* ---------------------------------------------------------------- GEMMs */

/* The fast w4a8 X16 kernels this CPU runs. */
static int fast_w4a8(const char **names, nb_gemm_w4a8_fn *fns)
{
    int n = 0;
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    int avx512 = c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
    if (avx512 && c->avx512_vnni) names[n] = "avx512vnni", fns[n++] = nb_gemm_w4a8_x16_avx512vnni;
    if (c->avx2 && c->avx_vnni) names[n] = "avxvnni", fns[n++] = nb_gemm_w4a8_x16_avxvnni;
    if (c->avx2 && c->fma) names[n] = "avx2", fns[n++] = nb_gemm_w4a8_x16_avx2;
#else
    (void)names, (void)fns;
#endif
    return n;
}

static int have_avx512(void)
{
    const struct nb_cpu *c = nb_cpu_get();
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
}

/* Shapes: random (multiples of 16 rows, 16-aligned sub-ranges), then the model's. */
static int make_shapes(struct tu_gshape *s, int max)
{
    /* 70 and 131: more than one 64-token cache block, and every remainder of the
     * 4-token prefill tile */
    static const int toks[] = {1, 3, 8, 17, 64, 70, 131};
    static const int groups[] = {32, 64, 128};
    int n = 0;
    for (int i = 0; i < 20 && n < max; i++) {
        struct tu_gshape *g = &s[n++];
        g->group = groups[tu_rand_u64(&g_rng) % 3];
        g->n_in = g->group * (int64_t)(1 + tu_rand_u64(&g_rng) % (1024 / g->group));
        g->n_out = 16 * (1 + (int64_t)(tu_rand_u64(&g_rng) % 9));
        int64_t nb = g->n_out / 16;
        int64_t b0 = (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)nb);
        int64_t b1 = b0 + 1 + (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)(nb - b0));
        if (i % 3 == 0) b0 = 0, b1 = nb;
        g->r0 = 16 * b0, g->r1 = 16 * b1;
        g->n_tok = toks[i % 7];
    }
    static const int64_t real[][2] = {{2048, 2048}, {1024, 2048}, {6144, 2048}, {2048, 6144}};
    for (int i = 0; i < 4 && n < max; i++) {
        struct tu_gshape *g = &s[n++];
        g->n_out = real[i][0], g->n_in = real[i][1], g->group = 64;
        g->r0 = i == 2 ? 1024 : 0, g->r1 = i == 2 ? 2048 + 16 : g->n_out; /* a thread's share */
        g->n_tok = i == 0 ? 3 : i == 1 ? 67 : 1;
    }
    return n;
}

static void test_w4a8_x16(void **state)
{
    const char *names[3];
    nb_gemm_w4a8_fn fns[3];
    int nf = fast_w4a8(names, fns);
    struct tu_gshape shapes[32];
    int ns = make_shapes(shapes, 32);
    double worst = 0;
    for (int si = 0; si < ns; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct tu_problem pb;
        tu_problem_init(&pb, &g_rng, NB_WPATH_W4A8, g, 16, 64, 0);
        const struct tu_acts a = pb.a;
        const uint8_t *rows = pb.rows, *x16 = pb.x16;
        const int64_t ldy = pb.ldy;
        float *yr = tu_nan_y(g->n_tok, ldy), *yx = tu_nan_y(g->n_tok, ldy);
        /* ROWS ref and X16 ref: bit-identical */
        nb_gemm_w4a8_ref(yr, ldy, a.q, a.d, a.s, a.ldq, a.ldg, rows, g->n_out, g->n_in, g->group,
                         g->n_tok, g->r0, g->r1);
        nb_gemm_w4a8_x16_ref(yx, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group,
                             g->n_tok, g->r0, g->r1);
        assert_memory_equal(yr, yx, sizeof(float) * (size_t)(g->n_tok * ldy));
        if (nf) {
            double *mag = calloc((size_t)(g->n_tok * g->n_out), sizeof(double));
            float *w = malloc(sizeof(float) * g->n_in);
            for (int64_t r = g->r0; r < g->r1; r++) {
                nb_unpack_row_ref(NB_WPATH_W4A8, g->group, rows, &pb.pl, g->n_in, r, w);
                for (int t = 0; t < g->n_tok; t++)
                    for (int64_t k = 0; k < g->n_in; k++)
                        mag[t * g->n_out + r] +=
                            fabs((double)w[k] * a.d[t * a.ldg + k / g->group] * a.q[t * a.ldq + k]);
            }
            for (int f = 0; f < nf; f++) {
                float *y = tu_nan_y(g->n_tok, ldy);
                fns[f](y, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group,
                       g->n_tok, g->r0, g->r1);
                double wr = tu_compare_y(y, yx, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1,
                                         TOL_W4A8_X16, names[f]);
                if (wr > worst) worst = wr;
                free(y);
            }
            free(mag), free(w);
        }
        free(yr), free(yx);
        tu_problem_free(&pb);
    }
    if (getenv("NIBBLE_TEST_VERBOSE")) fprintf(stderr, "w4a8 x16 worst ratio %.3g\n", worst);
    if (!nf) skip();
}

/* mag[t * n_out + r] = sum_k (|d q_k| + |m|) |x_k| over rows [r0, r1) of a w4a16 ROWS blob:
 * the terms a w4a16 kernel adds (calloc'd; free()). */
static double *w4a16_mag(const uint8_t *rows, const struct nb_layout_planes *pl,
                         const struct tu_gshape *g, const struct tu_acts *a)
{
    double *mag = calloc((size_t)(g->n_tok * g->n_out), sizeof(double));
    int64_t ng = g->n_in / g->group;
    for (int64_t r = g->r0; r < g->r1; r++)
        for (int64_t k = 0; k < g->n_in; k++) {
            int64_t i = r * ng + k / g->group;
            double d = nb_bf16_to_f32(nb_q_load_u16(rows + pl->offset[1] + 2 * i));
            double m = nb_bf16_to_f32(nb_q_load_u16(rows + pl->offset[2] + 2 * i));
            int q = nb_q4_get(rows + pl->offset[0] + r * (g->n_in / 2), k);
            for (int t = 0; t < g->n_tok; t++)
                mag[t * g->n_out + r] += (fabs(d * q) + fabs(m)) * fabs(a->x[t * a->ldx + k]);
        }
    return mag;
}

static void test_w4a16_x16(void **state)
{
#ifdef NB_HAVE_X86
    struct tu_gshape shapes[32];
    int ns = make_shapes(shapes, 32);
    double worst = 0, worst_bf16 = 0, worst_i16 = 0;
    for (int si = 0; si < ns; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct tu_problem pb;
        tu_problem_init(&pb, &g_rng, NB_WPATH_W4A16, g, 16, 64, 0);
        const struct tu_acts a = pb.a;
        const uint8_t *rows = pb.rows, *x16 = pb.x16;
        const int64_t ldy = pb.ldy;
        float *scratch = malloc(sizeof(float) * g->n_in);
        float *yr = tu_nan_y(g->n_tok, ldy), *yx = tu_nan_y(g->n_tok, ldy);
        nb_gemm_w4a16_ref(yr, ldy, a.x, a.ldx, rows, g->n_out, g->n_in, g->group, g->n_tok, g->r0,
                          g->r1, scratch);
        nb_gemm_w4a16_x16_ref(yx, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok,
                              g->r0, g->r1, scratch);
        assert_memory_equal(yr, yx, sizeof(float) * (size_t)(g->n_tok * ldy));
        if (have_avx512()) {
            double *mag = w4a16_mag(rows, &pb.pl, g, &a);
            float *y = tu_nan_y(g->n_tok, ldy);
            nb_gemm_w4a16_x16_avx512(y, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok,
                                     g->r0, g->r1, scratch);
            double wr = tu_compare_y(y, yx, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1,
                                     TOL_W4A16_X16, "w4a16 avx512");
            if (wr > worst) worst = wr;
            /* int16 decode (and prefill: avx512vnni) or bf16 prefill (avx512bf16): the decode
             * sizes, 5 tokens, then all the shape's tokens */
            const struct {
                nb_gemm_w4a16_fn fn;
                const char *name;
                int ok;
                double *worst;
            } v[2] = {{nb_gemm_w4a16_x16_avx512vnni, "w4a16 avx512vnni", nb_cpu_get()->avx512_vnni,
                       &worst_i16},
                      {nb_gemm_w4a16_x16_avx512bf16, "w4a16 avx512bf16",
                       nb_cpu_get()->avx512_vnni && nb_cpu_get()->avx512_bf16, &worst_bf16}};
            for (int vi = 0; vi < 2; vi++)
                for (int nt = 1; v[vi].ok && nt <= 6; nt++) {
                    int ntk = nt == 6 ? g->n_tok : g->n_tok < nt ? g->n_tok : nt;
                    float *yb = tu_nan_y(g->n_tok, ldy);
                    v[vi].fn(yb, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, ntk, g->r0,
                             g->r1, scratch);
                    double wb = tu_compare_y(yb, yx, mag, ntk, ldy, g->n_out, g->r0, g->r1,
                                             TOL_W4A16_BF16, v[vi].name);
                    if (wb > *v[vi].worst) *v[vi].worst = wb;
                    free(yb);
                }
            free(y), free(mag);
        }
        free(yr), free(yx), free(scratch);
        tu_problem_free(&pb);
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "w4a16 x16 worst ratio %.3g, bf16 %.3g, int16 %.3g\n", worst,
                worst_bf16, worst_i16);
    if (!have_avx512()) skip();
#else
    skip();
#endif
}

static void test_act_quant(void **state)
{
#ifdef NB_HAVE_X86
    if (!have_avx512()) skip();
    static const int groups[] = {32, 64, 128};
    for (int it = 0; it < 60; it++) {
        int group = groups[it % 3];
        int64_t n = group * (int64_t)(1 + tu_rand_u64(&g_rng) % 48);
        float *x = malloc(sizeof(float) * n);
        float scale = it % 4 == 0 ? 1e-30f : it % 4 == 1 ? 1e6f : 1.0f;
        for (int64_t i = 0; i < n; i++)
            x[i] = scale * tu_rand_gauss(&g_rng);
        if (it % 5 == 0) memset(x, 0, sizeof(float) * group); /* all-zero group */
        if (it % 7 == 0) x[n / 2] = 0.5f * (x[0] + x[1]);     /* ties etc. */
        int64_t ng = n / group;
        int8_t *qa = malloc(n), *qb = malloc(n);
        float *da = malloc(sizeof(float) * ng), *db = malloc(sizeof(float) * ng);
        int32_t *sa = malloc(sizeof(int32_t) * ng), *sb = malloc(sizeof(int32_t) * ng);
        nb_act_quant_q8_ref(x, n, group, qa, da, sa);
        nb_act_quant_q8_avx512(x, n, group, qb, db, sb);
        assert_memory_equal(qa, qb, n);
        assert_memory_equal(da, db, sizeof(float) * ng);
        assert_memory_equal(sa, sb, sizeof(int32_t) * ng);
        free(x), free(qa), free(qb), free(da), free(db), free(sa), free(sb);
    }
#else
    skip();
#endif
}

/* The GGUF block formats' X16 kernels (AVX-512 VNNI, AVX-VNNI, AVX2, the AMX code on
 * emulated tiles, AMX's own tiles: each this CPU runs) against their _ref twins: random blocks (finite f16 scales) repacked, 1..5 tokens (every
 * tile), 70 (past a token block of 64), sub-ranges. */
static void test_kq_x16(void **state)
{
#ifdef NB_HAVE_X86
    const struct nb_cpu *cpu = nb_cpu_get();
    const int vnni = have_avx512() && cpu->avx512_vnni;
    const int have[5] = {vnni, cpu->avx2 && cpu->avx_vnni, cpu->avx2 && cpu->fma && cpu->f16c,
                         vnni, vnni && cpu->amx_tile && cpu->amx_int8 && nb_amx_request_perm()};
    static const char *const variant[5] = {"avx512vnni", "avxvnni", "avx2", "amx (emulated)",
                                           "amx"};
    if (!have[0] && !have[1] && !have[2]) skip();
    static const struct {
        enum nb_wformat f;
        nb_gemm_kq_fn simd[5], ref;
        void (*dq)(const void *, int64_t, int64_t, float *);
        int exact;
    } fs[] = {
        {NB_WF_Q4_K_X16,
         {nb_gemm_q4_k_x16_avx512vnni, nb_gemm_q4_k_x16_avxvnni, nb_gemm_q4_k_x16_avx2,
          nb_gemm_q4_k_x16_amxemu, nb_gemm_q4_k_x16_amx},
         nb_gemm_q4_k_x16_ref,
         nb_dequant_row_q4_k_x16_ref, 0},
        {NB_WF_Q5_K_X16,
         {nb_gemm_q5_k_x16_avx512vnni, nb_gemm_q5_k_x16_avxvnni, nb_gemm_q5_k_x16_avx2,
          nb_gemm_q5_k_x16_amxemu, nb_gemm_q5_k_x16_amx},
         nb_gemm_q5_k_x16_ref,
         nb_dequant_row_q5_k_x16_ref, 0},
        {NB_WF_Q6_K_X16,
         {nb_gemm_q6_k_x16_avx512vnni, nb_gemm_q6_k_x16_avxvnni, nb_gemm_q6_k_x16_avx2,
          nb_gemm_q6_k_x16_amxemu, nb_gemm_q6_k_x16_amx},
         nb_gemm_q6_k_x16_ref,
         nb_dequant_row_q6_k_x16_ref, 0},
        {NB_WF_Q4_0_X16,
         {nb_gemm_q4_0_x16_avx512vnni, nb_gemm_q4_0_x16_avxvnni, nb_gemm_q4_0_x16_avx2,
          nb_gemm_q4_0_x16_amxemu, nb_gemm_q4_0_x16_amx},
         nb_gemm_q4_0_x16_ref,
         nb_dequant_row_q4_0_x16_ref, 1},
        {NB_WF_Q8_0_X16,
         {nb_gemm_q8_0_x16_avx512vnni, nb_gemm_q8_0_x16_avxvnni, nb_gemm_q8_0_x16_avx2,
          nb_gemm_q8_0_x16_amxemu, nb_gemm_q8_0_x16_amx},
         nb_gemm_q8_0_x16_ref,
         nb_dequant_row_q8_0_x16_ref, 1},
        {NB_WF_IQ4_NL_X16,
         {nb_gemm_iq4_nl_x16_avx512vnni, nb_gemm_iq4_nl_x16_avxvnni, nb_gemm_iq4_nl_x16_avx2,
          nb_gemm_iq4_nl_x16_amxemu, nb_gemm_iq4_nl_x16_amx},
         nb_gemm_iq4_nl_x16_ref,
         nb_dequant_row_iq4_nl_x16_ref, 1},
        {NB_WF_IQ4_XS_X16,
         {nb_gemm_iq4_xs_x16_avx512vnni, nb_gemm_iq4_xs_x16_avxvnni, nb_gemm_iq4_xs_x16_avx2,
          nb_gemm_iq4_xs_x16_amxemu, nb_gemm_iq4_xs_x16_amx},
         nb_gemm_iq4_xs_x16_ref,
         nb_dequant_row_iq4_xs_x16_ref, 0},
    };
    static const int toks[] = {1, 2, 3, 4, 5, 70, 21}; /* 21: one AMX tile of 16 + 5 */
    double worst = 0;
    for (int v = 0; v < 5; v++)
        for (size_t fi = 0; fi < sizeof fs / sizeof *fs && have[v]; fi++)
            for (size_t ti = 0; ti < sizeof toks / sizeof *toks; ti++) {
                struct nb_block_info bi;
                assert_true(nb_wformat_block(fs[fi].f, &bi));
                int64_t n_in = bi.rec_k * (int64_t)(1 + ti % 3);
                int64_t r0 = ti == 2 ? 16 : 0, r1 = ti == 3 ? 32 : 48;
                double e = tu_kq_check(&g_rng, fs[fi].f, fs[fi].simd[v], fs[fi].ref, fs[fi].dq,
                                       fs[fi].exact, 48, n_in, toks[ti], r0, r1, TOL_KQ_X16,
                                       variant[v]);
                if (e > worst) worst = e;
            }
    if (getenv("NIBBLE_TEST_VERBOSE")) fprintf(stderr, "k-quant X16: worst ratio %.3g\n", worst);
#else
    skip();
#endif
}

/* AMX w4a8 vs the X16 reference: groups 32 / 64 / 128, token counts below, at and
 * between tiles of 16, odd row blocks, sub-ranges, a K past one unpacked chunk (W4_KC)
 * and not a multiple of it. The code on emulated tiles on every AVX-512 VNNI CPU; on
 * AMX's own tiles where the CPU has them and Linux grants tile data. */
/* The int16 decode's activation quantization at its edges: an all-zero group, a group whose
 * largest activation is under 1e-34 (32767 / max|x| would overflow f32: it divides instead),
 * an outlier 1e4 times its group's others, and a NaN, which must reach every output row. */
static void test_w4a16_int16_edges(void **state)
{
#ifdef NB_HAVE_X86
    if (!have_avx512() || !nb_cpu_get()->avx512_vnni) skip();
    const struct tu_gshape g = {.n_out = 48, .n_in = 512, .r0 = 0, .r1 = 48, .group = 64,
                                .n_tok = 4};
    struct tu_problem pb;
    tu_problem_init(&pb, &g_rng, NB_WPATH_W4A16, &g, 16, 64, 0);
    float *x = pb.a.x;
    const int64_t ldx = pb.a.ldx, ldy = pb.ldy;
    for (int64_t k = 0; k < 64; k++)
        x[k] = 0;                          /* token 0, group 0: all zero */
    x[2 * 64 + 5] *= 1e4f;                 /* token 0, group 2: an outlier */
    for (int64_t k = 0; k < g.n_in; k++)
        x[ldx + k] *= 1e-35f;              /* token 1: every group under 1e-34 */
    x[3 * ldx + 200] = NAN;                /* token 3: a NaN */
    float *scratch = malloc(sizeof(float) * g.n_in);
    float *yr = tu_nan_y(g.n_tok, ldy), *y = tu_nan_y(g.n_tok, ldy);
    nb_gemm_w4a16_x16_ref(yr, ldy, x, ldx, pb.x16, g.n_out, g.n_in, g.group, 3, g.r0, g.r1,
                          scratch);
    nb_gemm_w4a16_x16_avx512vnni(y, ldy, x, ldx, pb.x16, g.n_out, g.n_in, g.group, 4, g.r0, g.r1,
                                 scratch);
    double *mag = w4a16_mag(pb.rows, &pb.pl, &g, &pb.a);
    tu_compare_y(y, yr, mag, 3, ldy, g.n_out, g.r0, g.r1, TOL_W4A16_BF16, "w4a16 int16 edges");
    for (int64_t r = 0; r < g.n_out; r++) {
        assert_true(fabsf(y[ldy + r]) > 0 && fabsf(y[ldy + r]) < 1e-30f); /* not flushed */
        assert_true(isnan(y[3 * ldy + r]));
    }
    free(mag), free(y), free(yr), free(scratch);
    tu_problem_free(&pb);
#else
    skip();
#endif
}

static void test_w4a8_x16_amx(void **state)
{
    (void)state;
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    if (!(have_avx512() && c->avx512_vnni)) skip();
    const int tiles = c->amx_tile && c->amx_int8 && nb_amx_request_perm();
    static const struct tu_gshape shapes[] = {
        {48, 256, 0, 48, 128, 35},      {32, 192, 0, 32, 64, 16},  {64, 96, 16, 48, 32, 49},
        {16, 128, 0, 16, 128, 5},       {80, 512, 16, 80, 64, 64}, {2048, 2048, 1024, 1552, 64, 33},
        {1024, 6144, 0, 1024, 128, 96}, {96, 1024, 0, 96, 32, 17}, {48, 2560, 16, 48, 128, 40},
        /* past one 2048-k slab of packed A tiles, not a multiple of it */
        {32, 4160, 0, 32, 32, 33},      {48, 2112, 0, 48, 64, 48},
        /* W4_MIN_ROWS (5) to 15 tokens left over: a tile of fewer rows, alone or after 16s */
        {64, 256, 0, 64, 128, 8},       {64, 640, 0, 64, 128, 31}, {48, 2112, 16, 48, 64, 9},
        {32, 4160, 0, 32, 32, 12},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct tu_problem pb;
        tu_problem_init(&pb, &g_rng, NB_WPATH_W4A8, g, 16, 64, 0);
        const struct tu_acts a = pb.a;
        const uint8_t *x16 = pb.x16;
        const int64_t ldy = pb.ldy;
        float *yr = tu_nan_y(g->n_tok, ldy), *y = tu_nan_y(g->n_tok, ldy);
        nb_gemm_w4a8_x16_ref(yr, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group,
                             g->n_tok, g->r0, g->r1);
        /* the emulated tiles are a scalar loop: shapes up to ~10^8 multiply-adds */
        const int emu = (double)g->n_tok * (double)(g->r1 - g->r0) * (double)g->n_in < 1e8;
        for (int v = !emu; v < 1 + tiles; v++) {
            (v ? nb_gemm_w4a8_x16_amx : nb_gemm_w4a8_x16_amxemu)(
                y, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group, g->n_tok,
                g->r0, g->r1);
            /* bit-identical by construction, NaN outside [r0, r1) on both sides */
            if (memcmp(y, yr, sizeof(float) * (size_t)(g->n_tok * ldy)))
                fail_msg("w4a8 %s, shape %zu differs from the reference",
                         v ? "amx" : "amx (emulated)", si);
        }
        free(yr), free(y);
        tu_problem_free(&pb);
    }
#else
    skip();
#endif
}

/* AMX-BF16 w4a16 vs the X16 reference (within TOL_W4A16_BF16, as the AVX512-BF16 kernel):
 * groups 32 / 64 / 128; token counts
 * below, at and between tiles of 16, past one 128-token block; n_in past one k-slab (1024)
 * and not a multiple of it; odd row blocks, sub-ranges. On emulated tiles on every
 * AVX-512 VNNI CPU (the rest kernel: AVX-512 FMA); on AMX's own tiles where the CPU has
 * AMX-BF16 and AVX512-BF16 and Linux grants tile data. */
/* The reference with the last token's outputs from the first token's activations (a
 * wrong A-tile stride): what the dispatcher's self-check must refuse. */
static void w4a16_off(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0, int64_t r1,
                      float *scratch)
{
    nb_gemm_w4a16_x16_ref(y, ldy, x, ldx, w, n_out, n_in, group, n_tok - 1, r0, r1, scratch);
    nb_gemm_w4a16_x16_ref(y + (n_tok - 1) * ldy, ldy, x, ldx, w, n_out, n_in, group, 1, r0, r1,
                          scratch);
}

static void test_w4a16_x16_amx(void **state)
{
    (void)state;
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    if (!(have_avx512() && c->avx512_vnni)) skip();
    const int tiles = c->amx_tile && c->amx_bf16 && c->avx512_bf16 && nb_amx_request_perm();
    static const struct tu_gshape shapes[] = {
        {48, 256, 0, 48, 128, 35},     {32, 192, 0, 32, 64, 16},   {64, 96, 16, 48, 32, 49},
        {16, 128, 0, 16, 128, 5},      {80, 512, 16, 80, 64, 64},  {32, 2048, 0, 32, 64, 33},
        {48, 1536, 16, 48, 128, 80},   {96, 1024, 0, 96, 32, 17},  {32, 512, 0, 32, 64, 130},
        {32, 384, 0, 32, 128, 31},     {16, 2560, 0, 16, 128, 16}, {2048, 2048, 1024, 1552, 64, 48},
        {1024, 6144, 0, 1024, 128, 96}, {32, 512, 0, 32, 128, 176}, /* past one 128-token block */
        /* under 16 tokens from 2 (a tile of fewer rows): runs of four groups and one, the
         * B-row ring across row blocks and slabs, group 32's one step a group */
        {64, 640, 0, 64, 128, 2},      {48, 3072, 16, 48, 64, 7},  {32, 1024, 0, 32, 32, 9},
        {48, 384, 0, 48, 128, 15},     {32, 256, 0, 32, 64, 1},
    };
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct tu_problem pb;
        tu_problem_init(&pb, &g_rng, NB_WPATH_W4A16, g, 16, 64, 0);
        const struct tu_acts a = pb.a;
        const uint8_t *rows = pb.rows, *x16 = pb.x16;
        const int64_t ldy = pb.ldy;
        float *scratch = malloc(sizeof(float) * (size_t)(g->n_in * g->n_tok));
        float *yr = tu_nan_y(g->n_tok, ldy);
        nb_gemm_w4a16_x16_ref(yr, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok,
                              g->r0, g->r1, scratch);
        double *mag = w4a16_mag(rows, &pb.pl, g, &a);
        /* the emulated tiles are a scalar loop: shapes up to ~10^8 multiply-adds */
        const int emu = (double)g->n_tok * (double)(g->r1 - g->r0) * (double)g->n_in < 1e8;
        for (int v = !emu; v < 1 + tiles; v++) {
            float *y = tu_nan_y(g->n_tok, ldy);
            (v ? nb_gemm_w4a16_x16_amx : nb_gemm_w4a16_x16_amxemu)(
                y, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok, g->r0, g->r1,
                scratch);
            double wr = tu_compare_y(y, yr, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1,
                                     TOL_W4A16_BF16, v ? "w4a16 amx" : "w4a16 amx (emulated)");
            if (wr > worst) worst = wr;
            free(y);
        }
        free(yr), free(mag), free(scratch);
        tu_problem_free(&pb);
    }
    /* the first-use self-check: passes the emulated code and the reference, not a kernel
     * that mixes up tokens */
    assert_true(nb_kernels_check_w4a16(nb_gemm_w4a16_x16_amxemu));
    assert_true(nb_kernels_check_w4a16(nb_gemm_w4a16_x16_ref));
    assert_false(nb_kernels_check_w4a16(w4a16_off));
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "w4a16 amx%s: worst ratio %.3g\n", tiles ? " (tiles too)" : "", worst);
#else
    skip();
#endif
}

static void test_dispatch(void **state)
{
    struct nb_kernels k;
    assert_true(nb_kernels_for_isa("ref", &k));
    assert_string_equal(k.gemm[NB_WF_W4A8_X16].name, "ref");
    assert_string_equal(k.gemm[NB_WF_W4A16_X16].name, "ref");
    assert_false(nb_kernels_for_isa("sse9", &k));
    assert_int_equal(nb_kernels_configure("sse9", 1), NB_ERR_INVALID_ARG);
    const struct nb_kernels *g = nb_kernels_get();
    /* the table is fixed once filled: a later cap is refused, not half applied */
    assert_int_equal(nb_kernels_configure("ref", 1), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "before the first use"));
    for (int f = 0; f < NB_WF_COUNT; f++) assert_non_null(g->gemm[f].run);
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "cpu: %s; kernels: %s\n", nb_cpu_flags_str(), g->isa);
#ifdef NB_HAVE_X86
    if (have_avx512() && nb_cpu_get()->avx512_vnni && !getenv("NIBBLE_ISA")) {
        if (!strcmp(g->gemm[NB_WF_W4A8_X16].name, "amx")) {
            assert_string_equal(g->isa, "avx512+amx");
        } else {
            assert_string_equal(g->isa, "avx512");
            assert_string_equal(g->gemm[NB_WF_W4A8_X16].name, "avx512vnni");
        }
    }
#endif
}

/* nb_kernels_fill is a pure function of (features, level, amx): CPUs written by hand. */
static void test_fill_pure(void **state)
{
    struct nb_cpu none = {0}, avx2 = {.avx2 = 1, .fma = 1, .f16c = 1};
    struct nb_cpu avxvnni = avx2, avx512 = avx2;
    avxvnni.avx_vnni = 1;
    avx512.avx512f = avx512.avx512bw = avx512.avx512vl = avx512.avx512dq = 1;
    struct nb_cpu vnni = avx512, bf16 = avx512;
    vnni.avx512_vnni = 1;
    bf16.avx512_bf16 = 1;
    struct nb_cpu amxbf = vnni; /* AMX-BF16 too: the w4a16 tile kernel with amx 1 and 2 */
    amxbf.avx512_bf16 = amxbf.amx_tile = amxbf.amx_int8 = amxbf.amx_bf16 = 1;
    struct nb_kernels k;
    const struct {
        const struct nb_cpu *cpu;
        enum nb_isa_level level;
        int amx;
        const char *isa, *w4a8, *w4a16, *bf16, *kq; /* kq: the block formats' X16 */
    } cases[] = {
        {&none, NB_LEVEL_AVX512, 1, "ref", "ref", "ref", "ref", "ref"}, /* capped at what it has */
#ifdef NB_HAVE_X86
        {&avx2, NB_LEVEL_AVX512, 0, "avx2", "avx2", "ref", "ref", "avx2"},
        {&avxvnni, NB_LEVEL_AVX2, 0, "avx2", "avxvnni", "ref", "ref", "avxvnni"},
        {&avx512, NB_LEVEL_AVX512, 0, "avx512", "avx2", "avx512", "avx512", "avx2"},
        {&vnni, NB_LEVEL_AVX512, 0, "avx512", "avx512vnni", "avx512vnni", "avx512", "avx512vnni"},
        {&vnni, NB_LEVEL_AVX2, 1, "avx2", "avx2", "ref", "ref", "avx2"},
        {&vnni, NB_LEVEL_AVX512, 1, "avx512+amx", "amx", "avx512vnni",
         "avx512", "avx512vnni"},
        {&vnni, NB_LEVEL_AVX512, 2, "avx512+amx", "amx", "avx512vnni",
         "avx512", "amx"}, /* NIBBLE_AMX=all: the block kernels too */
        {&bf16, NB_LEVEL_AVX512, 0, "avx512", "avx2", "avx512", "avx512", "avx2"},
        {&amxbf, NB_LEVEL_AVX512, 1, "avx512+amx", "amx", "amx", "avx512", "avx512vnni"},
        {&amxbf, NB_LEVEL_AVX512, 0, "avx512", "avx512vnni", "avx512vnni", "avx512", "avx512vnni"},
        {&amxbf, NB_LEVEL_AVX512, 2, "avx512+amx", "amx", "amx", "avx512", "amx"},
        {&vnni, NB_LEVEL_AVX512, 2, "avx512+amx", "amx", "avx512vnni", "avx512", "amx"},
        {&vnni, NB_LEVEL_REF, 1, "ref", "ref", "ref", "ref", "ref"},
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_kernels_fill(&k, cases[i].cpu, cases[i].level, cases[i].amx);
        assert_string_equal(k.isa, cases[i].isa);
        assert_string_equal(k.gemm[NB_WF_W4A8_X16].name, cases[i].w4a8);
        assert_string_equal(k.gemm[NB_WF_W4A16_X16].name, cases[i].w4a16);
        assert_string_equal(k.gemm[NB_WF_BF16].name, cases[i].bf16);
        for (int f = NB_WF_Q4_K_X16; f < NB_WF_COUNT; f++) {
            struct nb_block_info bi;
            if (nb_wformat_block((enum nb_wformat)f, &bi) && f == (int)bi.x16)
                assert_string_equal(k.gemm[f].name, cases[i].kq);
        }
        /* the ROWS layouts and w8a16 have only their reference kernel */
        assert_string_equal(k.gemm[NB_WF_W4A8].name, "ref");
        assert_string_equal(k.gemm[NB_WF_W8A16].name, "ref");
    }
#ifdef NB_HAVE_X86
    /* attention: the AVX2 kernels at the avx2 level, the AVX-512 ones above it */
    nb_kernels_fill(&k, &avx2, NB_LEVEL_AVX512, 0);
    assert_true(k.attn_tile == nb_attn_tile_avx2 && k.attn_decode == nb_attn_decode_avx2 &&
                k.kv_row_load == nb_kv_row_load_avx2);
    nb_kernels_fill(&k, &vnni, NB_LEVEL_AVX2, 1);
    assert_true(k.attn_tile == nb_attn_tile_avx2 && k.attn_decode == nb_attn_decode_avx2);
    nb_kernels_fill(&k, &avx512, NB_LEVEL_AVX512, 0);
    assert_true(k.attn_tile == nb_attn_tile_avx512 && k.attn_decode == nb_attn_decode_avx512 &&
                k.kv_row_load == nb_kv_row_load_avx512);
    nb_kernels_fill(&k, &none, NB_LEVEL_AVX512, 0);
    assert_true(k.attn_tile == nb_attn_tile_ref && k.attn_decode == nb_attn_decode_ref);
    /* the AMX-BF16 prefill tile where AMX may run on a CPU with AMX-BF16 (decode stays) */
    nb_kernels_fill(&k, &amxbf, NB_LEVEL_AVX512, 1);
    assert_true(k.attn_tile == nb_attn_tile_amx && k.attn_decode == nb_attn_decode_avx512);
    nb_kernels_fill(&k, &amxbf, NB_LEVEL_AVX512, 0);
    assert_true(k.attn_tile == nb_attn_tile_avx512);
    /* the w4a16 variants: FMA (avx512: plain AVX-512, and BF16 without VNNI, which no CPU
     * has), int16 decode (avx512vnni), int16 decode + bf16 prefill (avx512vnni with BF16) */
    struct nb_kernels k2, k3, k4;
    nb_kernels_fill(&k, &bf16, NB_LEVEL_AVX512, 0);
    nb_kernels_fill(&k2, &avx512, NB_LEVEL_AVX512, 0);
    nb_kernels_fill(&k3, &vnni, NB_LEVEL_AVX512, 0);
    nb_kernels_fill(&k4, &amxbf, NB_LEVEL_AVX512, 0);
    assert_ptr_equal(k.gemm[NB_WF_W4A16_X16].run, k2.gemm[NB_WF_W4A16_X16].run);
    assert_ptr_not_equal(k3.gemm[NB_WF_W4A16_X16].run, k2.gemm[NB_WF_W4A16_X16].run);
    assert_ptr_not_equal(k4.gemm[NB_WF_W4A16_X16].run, k2.gemm[NB_WF_W4A16_X16].run);
    assert_ptr_not_equal(k4.gemm[NB_WF_W4A16_X16].run, k3.gemm[NB_WF_W4A16_X16].run);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_x16), cmocka_unit_test(test_repack),
        cmocka_unit_test(test_act_quant),
        cmocka_unit_test(test_kq_x16),  cmocka_unit_test(test_w4a8_x16),
        cmocka_unit_test(test_w4a16_x16),  cmocka_unit_test(test_w4a8_x16_amx),
        cmocka_unit_test(test_w4a16_x16_amx),
        cmocka_unit_test(test_dispatch), cmocka_unit_test(test_fill_pure),
        cmocka_unit_test(test_w4a16_int16_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
