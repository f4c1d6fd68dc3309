/* test_kernels_arm — every NEON kernel (kernels/arm/) against its _ref twin, and the Arm
 * rows of the kernel table. Built everywhere; the kernel tests run on aarch64 only (under
 * qemu-aarch64 in CI: -cpu max runs the dotprod and i8mm variants, -cpu cortex-a53 only
 * the plain-NEON ones, the others skip) and skip elsewhere.
 *
 * Tolerances (|y - y_ref| <= TOL * mag, mag = sum of |each term| the kernel adds):
 *   act quant, w4a8 X16 (neon, neon-dotprod, neon-i8mm), dot / axpy, f32 / f16 / bf16
 *     GEMMs: bit-identical (the same int32 sums, the same float operations in the same
 *     order as the reference); asserted with memcmp, NaN outside [r0, r1) both sides.
 *   TOL_W4A16_X16  d * sum q x + m * sum x with FMA vs the reference's w = d q + m first:
 *                  another summation order; mag = sum_k (|d q_k| + |m|) |x_k|.
 *   TOL_W4A16_BF16 the bfmmla variant (CPUs with bf16): activations rounded to bf16
 *                  (relative 2^-9 each), exact bf16 products, f32 sums: 2^-8 of the same
 *                  mag (the x86 AVX512-BF16 twin's bound).
 *   TOL_W8A16      d * sum q x (FMA, 16 lanes) vs sum (d q) x (8 lanes, no FMA);
 *                  mag = sum_k |d q_k x_k|.
 *   TOL_GLU        vector exp (Taylor to r^7) and a division vs expf / tanhf:
 *                  |out - ref| <= TOL_GLU |ref| + 2^-23 |g up| (the second term: the
 *                  reference's own cancellation in 1 + tanh u for g << 0).
 *   TOL_NORM       squares summed in two f64 lanes vs one: relative to |y|.
 *   TOL_KQ_X16     the GGUF block formats' X16 records with sdot (Q4_K, Q5_K, Q6_K,
 *                  IQ4_XS): the same int32 sums (IQ4_XS: signed grid products, the
 *                  reference's +128 form less its exact zero term), the sums over
 *                  sub-blocks with fused multiply-adds (the reference rounds each
 *                  product); mag = sum_k |w_k| |xd qa_k|. Q4_0 / Q8_0 / IQ4_NL:
 *                  bit-identical (the same integers, the reference's float operations).
 * The worst ratios measured are printed with NIBBLE_TEST_VERBOSE=1. */
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

#define TOL_W4A16_X16  1e-6
#define TOL_W4A16_BF16 0x1p-8
#define TOL_W8A16     1e-6
#define TOL_GLU       1e-6
#define TOL_NORM      1e-6
#define TOL_KQ_X16    1e-6

static uint64_t g_rng __attribute__((unused)) = 0xA2A2; /* used by the NEON tests only */

/* ---------------------------------------------------------------- the table (any build) */

/* nb_kernels_fill for Arm CPUs written by hand: the variant follows the HWCAPs. */
static void test_fill_arm(void **state)
{
    struct nb_cpu a53 = {.asimd = 1}, dot = {.asimd = 1, .asimddp = 1};
    struct nb_cpu mm = {.asimd = 1, .asimddp = 1, .i8mm = 1, .bf16 = 1};
    struct nb_cpu mm_nodot = {.asimd = 1, .i8mm = 1}; /* i8mm alone: plain NEON */
    struct nb_cpu bf = {.asimd = 1, .bf16 = 1};        /* bf16 alone: w4a16 only */
    enum nb_isa_level l;
    assert_true(nb_isa_level_from_name("neon", &l));
    assert_int_equal(l, NB_LEVEL_NEON);
    assert_int_equal(nb_cpu_isa_level(&a53), NB_LEVEL_NEON);
    assert_true(nb_isa_level_within(NB_LEVEL_REF, NB_LEVEL_NEON));
    assert_true(nb_isa_level_within(NB_LEVEL_NEON, NB_LEVEL_NEON));
    assert_false(nb_isa_level_within(NB_LEVEL_AVX2, NB_LEVEL_NEON));
    assert_false(nb_isa_level_within(NB_LEVEL_NEON, NB_LEVEL_AVX512));
    assert_true(nb_isa_level_within(NB_LEVEL_AVX2, NB_LEVEL_AVX512));
    assert_false(nb_isa_level_within(NB_LEVEL_AVX512, NB_LEVEL_AVX2));
    struct nb_kernels k;
#ifdef NB_HAVE_ARM
    const struct {
        const struct nb_cpu *cpu;
        enum nb_isa_level level;
        const char *isa, *w4a8, *w4a16, *f32, *kq; /* kq: every -x16 block format */
    } cases[] = {
        {&a53, NB_LEVEL_NEON, "neon", "neon", "neon", "neon", "ref"},
        {&dot, NB_LEVEL_NEON, "neon+dotprod", "neon-dotprod", "neon", "neon", "neon-dotprod"},
        {&mm, NB_LEVEL_NEON, "neon+dotprod+i8mm", "neon-i8mm", "neon-bf16", "neon",
         "neon-dotprod"},
        {&mm_nodot, NB_LEVEL_NEON, "neon", "neon", "neon", "neon", "ref"},
        {&bf, NB_LEVEL_NEON, "neon", "neon", "neon-bf16", "neon", "ref"},
        {&mm, NB_LEVEL_REF, "ref", "ref", "ref", "ref", "ref"},
        {&mm, NB_LEVEL_AVX512, "neon+dotprod+i8mm", "neon-i8mm", "neon-bf16", "neon",
         "neon-dotprod"}, /* not Arm: best */
    };
    static const enum nb_wformat kq_x16[] = {NB_WF_Q4_K_X16,   NB_WF_Q5_K_X16, NB_WF_Q6_K_X16,
                                             NB_WF_IQ4_XS_X16, NB_WF_Q4_0_X16, NB_WF_Q8_0_X16,
                                             NB_WF_IQ4_NL_X16};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_kernels_fill(&k, cases[i].cpu, cases[i].level, 1);
        assert_string_equal(k.isa, cases[i].isa);
        assert_string_equal(k.gemm[NB_WF_W4A8_X16].name, cases[i].w4a8);
        assert_string_equal(k.gemm[NB_WF_W4A16_X16].name, cases[i].w4a16);
        assert_string_equal(k.gemm[NB_WF_F32].name, cases[i].f32);
        assert_string_equal(k.gemm[NB_WF_W8A16].name, cases[i].f32);
        for (size_t f = 0; f < sizeof kq_x16 / sizeof kq_x16[0]; f++)
            assert_string_equal(k.gemm[kq_x16[f]].name, cases[i].kq);
        /* the ROWS int4 layouts and the k-quants as stored have only their reference kernel */
        assert_string_equal(k.gemm[NB_WF_W4A8].name, "ref");
        assert_string_equal(k.gemm[NB_WF_W4A16].name, "ref");
        assert_string_equal(k.gemm[NB_WF_Q4_K].name, "ref");
    }
    nb_kernels_fill(&k, &a53, NB_LEVEL_NEON, 0);
    assert_true(k.act_quant_q8 == nb_act_quant_q8_neon && k.dot_f32 == nb_dot_f32_neon &&
                k.rmsnorm == nb_rmsnorm_neon && k.glu == nb_glu_neon);
    assert_true(k.attn_tile == nb_attn_tile_neon && k.attn_decode == nb_attn_decode_neon &&
                k.kv_row_load == nb_kv_row_load_neon && k.kv_row_store == nb_kv_row_store_neon);
    /* an x86 CPU read on an Arm build: nothing of it runs here */
    struct nb_cpu avx512 = {.avx2 = 1,
                            .fma = 1,
                            .f16c = 1,
                            .avx512f = 1,
                            .avx512bw = 1,
                            .avx512vl = 1,
                            .avx512dq = 1,
                            .avx512_vnni = 1};
    assert_int_equal(nb_kernels_best_level(&avx512), NB_LEVEL_REF);
    nb_kernels_fill(&k, &avx512, NB_LEVEL_AVX512, 1);
    assert_string_equal(k.isa, "ref");
#else
    /* an Arm CPU read on a build without Arm kernels: the reference table */
    assert_int_equal(nb_kernels_best_level(&mm), NB_LEVEL_REF);
    nb_kernels_fill(&k, &mm, NB_LEVEL_NEON, 0);
    assert_string_equal(k.isa, "ref");
    assert_string_equal(k.gemm[NB_WF_W4A8_X16].name, "ref");
    (void)dot, (void)mm_nodot, (void)bf;
#endif
}

/* This machine's table: on aarch64 the neon level, its variant named by the HWCAPs. */
static void test_dispatch_arm(void **state)
{
#ifdef NB_HAVE_ARM
    const struct nb_cpu *c = nb_cpu_get();
    assert_true(c->asimd); /* every aarch64 Linux reports it */
    assert_false(c->avx2);
    struct nb_kernels k;
    assert_true(nb_kernels_for_isa("neon", &k));
    assert_false(nb_kernels_for_isa("avx2", &k));
    assert_true(nb_kernels_for_isa("ref", &k));
    const struct nb_kernels *g = nb_kernels_get();
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "cpu: %s; kernels: %s, w4a8-x16 %s\n", nb_cpu_flags_str(), g->isa,
                g->gemm[NB_WF_W4A8_X16].name);
    const char *isa = getenv("NIBBLE_ISA");
    if (isa && strcmp(isa, "auto")) skip();
    assert_int_equal(g->level, NB_LEVEL_NEON);
    assert_string_equal(g->gemm[NB_WF_W4A8_X16].name, c->asimddp && c->i8mm ? "neon-i8mm"
                                                      : c->asimddp          ? "neon-dotprod"
                                                                            : "neon");
    assert_string_equal(g->gemm[NB_WF_Q4_K_X16].name, c->asimddp ? "neon-dotprod" : "ref");
    assert_string_equal(g->gemm[NB_WF_Q8_0_X16].name, c->asimddp ? "neon-dotprod" : "ref");
    assert_non_null(strstr(nb_cpu_flags_str(), "asimd"));
#else
    skip();
#endif
}

#ifdef NB_HAVE_ARM
/* ---------------------------------------------------------------- helpers */

/* Random shapes (multiples of 16 rows, 16-aligned sub-ranges; token counts at and
 * around every tile: 1 decode, 2..5 the prefill tiles and their remainders, 64 / 67 /
 * 131 across the 64-token cache blocks), then two model shapes (a thread's share of
 * rows). Kept small: this runs under qemu. */
static int make_shapes(struct tu_gshape *s, int max)
{
    static const int toks[] = {1, 2, 3, 4, 5, 7, 8, 17, 64, 67, 131, 1};
    static const int groups[] = {32, 64, 128};
    int n = 0;
    for (int i = 0; i < 24 && n < max; i++) {
        struct tu_gshape *g = &s[n++];
        g->group = groups[i % 3];
        g->n_in = g->group * (int64_t)(1 + tu_rand_u64(&g_rng) % (512 / g->group));
        g->n_out = 16 * (1 + (int64_t)(tu_rand_u64(&g_rng) % 6));
        int64_t nb = g->n_out / 16;
        int64_t b0 = (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)nb);
        int64_t b1 = b0 + 1 + (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)(nb - b0));
        if (i % 3 == 0) b0 = 0, b1 = nb;
        g->r0 = 16 * b0, g->r1 = 16 * b1;
        g->n_tok = toks[i % 12];
    }
    static const struct tu_gshape real[] = {{512, 1024, 128, 256 + 16, 64, 1},
                                            {256, 1024, 0, 256, 128, 9}};
    for (int i = 0; i < 2 && n < max; i++)
        s[n++] = real[i];
    return n;
}

/* The w4a8 X16 kernels this CPU runs. */
static int arm_w4a8(const char **names, nb_gemm_w4a8_fn *fns)
{
    const struct nb_cpu *c = nb_cpu_get();
    int n = 0;
    names[n] = "neon", fns[n++] = nb_gemm_w4a8_x16_neon;
    if (c->asimddp) names[n] = "neon-dotprod", fns[n++] = nb_gemm_w4a8_x16_dotprod;
    if (c->asimddp && c->i8mm) names[n] = "neon-i8mm", fns[n++] = nb_gemm_w4a8_x16_i8mm;
    return n;
}
#endif

/* ---------------------------------------------------------------- integer paths: exact */

static void test_act_quant_neon(void **state)
{
#ifdef NB_HAVE_ARM
    static const int groups[] = {32, 64, 128};
    for (int it = 0; it < 60; it++) {
        int group = groups[it % 3];
        int64_t n = group * (int64_t)(1 + tu_rand_u64(&g_rng) % 24);
        float *x = malloc(sizeof(float) * n);
        float scale = it % 4 == 0 ? 1e-30f : it % 4 == 1 ? 1e6f : 1.0f;
        for (int64_t i = 0; i < n; i++)
            x[i] = scale * tu_rand_gauss(&g_rng);
        if (it % 5 == 0) memset(x, 0, sizeof(float) * group); /* an all-zero group */
        if (it % 7 == 0) {                                    /* exact halves: ties to even */
            for (int i = 0; i < group; i++)
                x[i] = (float)((i % 17) - 8) + 0.5f;
            x[0] = 127.0f;
        }
        if (it % 11 == 0) x[n - 1] = NAN; /* the reference's fmaxf / fminf skip it */
        if (it % 13 == 0) x[n / 2] = -INFINITY;
        int64_t ng = n / group;
        int8_t *qa = malloc(n), *qb = malloc(n);
        float *da = malloc(sizeof(float) * ng), *db = malloc(sizeof(float) * ng);
        int32_t *sa = malloc(sizeof(int32_t) * ng), *sb = malloc(sizeof(int32_t) * ng);
        nb_act_quant_q8_ref(x, n, group, qa, da, sa);
        nb_act_quant_q8_neon(x, n, group, qb, db, sb);
        assert_memory_equal(qa, qb, n);
        assert_memory_equal(da, db, sizeof(float) * ng);
        assert_memory_equal(sa, sb, sizeof(int32_t) * ng);
        free(x), free(qa), free(qb), free(da), free(db), free(sa), free(sb);
    }
#else
    skip();
#endif
}

static void test_w4a8_x16_neon(void **state)
{
#ifdef NB_HAVE_ARM
    const char *names[3];
    nb_gemm_w4a8_fn fns[3];
    int nf = arm_w4a8(names, fns);
    struct tu_gshape shapes[32];
    int ns = make_shapes(shapes, 32);
    int runs = 0;
    for (int si = 0; si < ns; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct nb_layout_planes pl;
        uint8_t *rows =
            tu_random_rows_blob(&g_rng, NB_WPATH_W4A8, g->group, g->n_out, g->n_in, &pl);
        uint8_t *x16 = tu_to_x16(NB_WPATH_W4A8, g->group, rows, g->n_out, g->n_in, 0);
        struct tu_acts a;
        tu_acts_init(&a, &g_rng, g->n_tok, g->n_in, g->group, 4, 32, 1);
        int64_t ldy = g->n_out + 16;
        float *yr = tu_nan_y(g->n_tok, ldy);
        nb_gemm_w4a8_x16_ref(yr, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group,
                             g->n_tok, g->r0, g->r1);
        for (int f = 0; f < nf; f++) {
            float *y = tu_nan_y(g->n_tok, ldy);
            fns[f](y, ldy, a.q, a.d, a.s, a.ldq, a.ldg, x16, g->n_out, g->n_in, g->group, g->n_tok,
                   g->r0, g->r1);
            /* bit-identical, and NaN (untouched) outside [r0, r1) on both sides */
            if (memcmp(y, yr, sizeof(float) * (size_t)(g->n_tok * ldy)))
                fail_msg("w4a8 x16 %s differs from the reference: n_out %lld n_in %lld group %d "
                         "n_tok %d rows [%lld, %lld)",
                         names[f], (long long)g->n_out, (long long)g->n_in, g->group, g->n_tok,
                         (long long)g->r0, (long long)g->r1);
            runs++;
            free(y);
        }
        free(yr), free(rows), free(x16);
        tu_acts_free(&a);
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "w4a8 x16: %d kernels (%s), %d runs bit-identical\n", nf, names[nf - 1],
                runs);
#else
    skip();
#endif
}

/* The GGUF block formats' X16 kernels (sdot) against their _ref twins: random blocks
 * (finite f16 scales) repacked with nb_kq_repack_x16, 1..5 tokens (every tile and its
 * remainders), 9, 70 (past a token block of 64), one to three records along k, row
 * sub-ranges; rows outside the range stay untouched. Skipped without dotprod. */
static void test_kq_x16_dotprod(void **state)
{
#ifdef NB_HAVE_ARM
    if (!nb_cpu_get()->asimddp) skip();
    static const struct {
        enum nb_wformat f;
        nb_gemm_kq_fn fn, ref;
        void (*dq)(const void *, int64_t, int64_t, float *);
        int exact;
    } fs[] = {
        {NB_WF_Q4_K_X16, nb_gemm_q4_k_x16_dotprod, nb_gemm_q4_k_x16_ref,
         nb_dequant_row_q4_k_x16_ref, 0},
        {NB_WF_Q5_K_X16, nb_gemm_q5_k_x16_dotprod, nb_gemm_q5_k_x16_ref,
         nb_dequant_row_q5_k_x16_ref, 0},
        {NB_WF_Q6_K_X16, nb_gemm_q6_k_x16_dotprod, nb_gemm_q6_k_x16_ref,
         nb_dequant_row_q6_k_x16_ref, 0},
        {NB_WF_IQ4_XS_X16, nb_gemm_iq4_xs_x16_dotprod, nb_gemm_iq4_xs_x16_ref,
         nb_dequant_row_iq4_xs_x16_ref, 0},
        {NB_WF_Q4_0_X16, nb_gemm_q4_0_x16_dotprod, nb_gemm_q4_0_x16_ref,
         nb_dequant_row_q4_0_x16_ref, 1},
        {NB_WF_Q8_0_X16, nb_gemm_q8_0_x16_dotprod, nb_gemm_q8_0_x16_ref,
         nb_dequant_row_q8_0_x16_ref, 1},
        {NB_WF_IQ4_NL_X16, nb_gemm_iq4_nl_x16_dotprod, nb_gemm_iq4_nl_x16_ref,
         nb_dequant_row_iq4_nl_x16_ref, 1},
    };
    static const int toks[] = {1, 2, 3, 4, 5, 70, 9};
    double worst = 0;
    int runs = 0;
    for (size_t fi = 0; fi < sizeof fs / sizeof *fs; fi++)
        for (size_t ti = 0; ti < sizeof toks / sizeof *toks; ti++) {
            struct nb_block_info bi;
            assert_true(nb_wformat_block(fs[fi].f, &bi));
            int64_t n_in = bi.rec_k * (int64_t)(1 + ti % 3);
            int64_t r0 = ti == 2 || ti == 6 ? 16 : 0, r1 = ti == 3 || ti == 6 ? 32 : 48;
            double e = tu_kq_check(&g_rng, fs[fi].f, fs[fi].fn, fs[fi].ref, fs[fi].dq,
                                   fs[fi].exact, 48, n_in, toks[ti], r0, r1, TOL_KQ_X16,
                                   "neon-dotprod");
            if (e > worst) worst = e;
            runs++;
        }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "k-quant X16 neon-dotprod: %d runs, k-quant worst ratio %.3g\n", runs,
                worst);
#else
    skip();
#endif
}

/* ---------------------------------------------------------------- float paths */

static void test_w4a16_x16_neon(void **state)
{
#ifdef NB_HAVE_ARM
    struct tu_gshape shapes[32];
    int ns = make_shapes(shapes, 32);
    double worst = 0, worst_bf16 = 0;
    int n_bf16 = 0;
    for (int si = 0; si < ns; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct nb_layout_planes pl;
        uint8_t *rows =
            tu_random_rows_blob(&g_rng, NB_WPATH_W4A16, g->group, g->n_out, g->n_in, &pl);
        uint8_t *x16 = tu_to_x16(NB_WPATH_W4A16, g->group, rows, g->n_out, g->n_in, 0);
        struct tu_acts a;
        tu_acts_init(&a, &g_rng, g->n_tok, g->n_in, g->group, 4, 32, 1);
        int64_t ldy = g->n_out + 16, ng = g->n_in / g->group;
        float *scratch = malloc(sizeof(float) * g->n_in);
        float *yr = tu_nan_y(g->n_tok, ldy), *y = tu_nan_y(g->n_tok, ldy);
        nb_gemm_w4a16_x16_ref(yr, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok,
                              g->r0, g->r1, scratch);
        double *mag = calloc((size_t)(g->n_tok * g->n_out), sizeof(double));
        for (int64_t r = g->r0; r < g->r1; r++)
            for (int64_t k = 0; k < g->n_in; k++) {
                int64_t i = r * ng + k / g->group;
                double d = nb_bf16_to_f32(nb_q_load_u16(rows + pl.offset[1] + 2 * i));
                double m = nb_bf16_to_f32(nb_q_load_u16(rows + pl.offset[2] + 2 * i));
                int q = nb_q4_get(rows + pl.offset[0] + r * (g->n_in / 2), k);
                for (int t = 0; t < g->n_tok; t++)
                    mag[t * g->n_out + r] += (fabs(d * q) + fabs(m)) * fabs(a.x[t * a.ldx + k]);
            }
        nb_gemm_w4a16_x16_neon(y, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group, g->n_tok,
                               g->r0, g->r1, scratch);
        double wr = tu_compare_y(y, yr, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1, TOL_W4A16_X16,
                                 "w4a16 x16 neon");
        if (wr > worst) worst = wr;
        if (nb_cpu_get()->bf16) {
            float *yb = tu_nan_y(g->n_tok, ldy);
            nb_gemm_w4a16_x16_neon_bf16(yb, ldy, a.x, a.ldx, x16, g->n_out, g->n_in, g->group,
                                        g->n_tok, g->r0, g->r1, scratch);
            double wb = tu_compare_y(yb, yr, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1,
                                     TOL_W4A16_BF16, "w4a16 x16 neon-bf16");
            if (wb > worst_bf16) worst_bf16 = wb;
            n_bf16++;
            free(yb);
        }
        free(y), free(yr), free(mag), free(rows), free(x16), free(scratch);
        tu_acts_free(&a);
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "w4a16 x16 neon worst ratio %.3g; neon-bf16 %d shapes, worst %.3g\n",
                worst, n_bf16, worst_bf16);
#else
    skip();
#endif
}

static void test_w8a16_neon(void **state)
{
#ifdef NB_HAVE_ARM
    static const struct tu_gshape shapes[] = {{17, 100, 0, 17, 0, 1},  {33, 64, 5, 30, 0, 3},
                                              {64, 1024, 0, 64, 0, 1}, {48, 500, 16, 47, 0, 7},
                                              {8, 2048, 0, 8, 0, 2},   {96, 18, 0, 96, 0, 5}};
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct tu_gshape *g = &shapes[si];
        struct nb_layout_planes pl;
        uint8_t *blob = tu_random_rows_blob(&g_rng, NB_WPATH_W8A16, 0, g->n_out, g->n_in, &pl);
        struct tu_acts a;
        /* only the f32 rows are used */
        tu_acts_init(&a, &g_rng, g->n_tok, g->n_in, (int)g->n_in, 4, 32, 1);
        int64_t ldy = g->n_out + 3;
        float *scratch = malloc(sizeof(float) * g->n_in);
        float *yr = tu_nan_y(g->n_tok, ldy), *y = tu_nan_y(g->n_tok, ldy);
        double *mag = calloc((size_t)(g->n_tok * g->n_out), sizeof(double));
        for (int64_t r = g->r0; r < g->r1; r++) {
            nb_unpack_row_ref(NB_WPATH_W8A16, 0, blob, &pl, g->n_in, r, scratch);
            for (int t = 0; t < g->n_tok; t++)
                for (int64_t k = 0; k < g->n_in; k++)
                    mag[t * g->n_out + r] += fabs((double)scratch[k] * a.x[t * a.ldx + k]);
        }
        nb_gemm_w8a16_ref(yr, ldy, a.x, a.ldx, blob, g->n_out, g->n_in, g->n_tok, g->r0, g->r1,
                          scratch);
        nb_gemm_w8a16_neon(y, ldy, a.x, a.ldx, blob, g->n_out, g->n_in, g->n_tok, g->r0, g->r1,
                           scratch);
        double wr = tu_compare_y(y, yr, mag, g->n_tok, ldy, g->n_out, g->r0, g->r1, TOL_W8A16,
                                 "w8a16 neon");
        if (wr > worst) worst = wr;
        free(y), free(yr), free(mag), free(blob), free(scratch);
        tu_acts_free(&a);
    }
    if (getenv("NIBBLE_TEST_VERBOSE")) fprintf(stderr, "w8a16 neon worst ratio %.3g\n", worst);
#else
    skip();
#endif
}

/* dot, axpy and the f32 / f16 / bf16 GEMMs: bit-identical to the reference. */
static void test_vec_neon(void **state)
{
#ifdef NB_HAVE_ARM
    static const int64_t lens[] = {1, 3, 7, 8, 9, 15, 16, 31, 64, 100, 257, 1024};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        float *y1 = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n);
        for (int64_t i = 0; i < n; i++) {
            a[i] = tu_rand_gauss(&g_rng);
            b[i] = tu_rand_gauss(&g_rng) * (i % 5 == 0 ? 1e4f : 1.0f);
            y1[i] = y2[i] = tu_rand_gauss(&g_rng);
        }
        float d1 = nb_dot_f32_ref(a, b, n), d2 = nb_dot_f32_neon(a, b, n);
        assert_memory_equal(&d1, &d2, sizeof d1);
        nb_axpy_f32_ref(y1, 0.37f, a, n);
        nb_axpy_f32_neon(y2, 0.37f, a, n);
        assert_memory_equal(y1, y2, sizeof(float) * n);
        free(a), free(b), free(y1), free(y2);
    }
    enum { N_OUT = 13, N_IN = 203, N_TOK = 3 };
    float *w = malloc(sizeof(float) * N_OUT * N_IN), *x = malloc(sizeof(float) * N_TOK * N_IN);
    uint16_t *wh = malloc(2 * N_OUT * N_IN), *wb = malloc(2 * N_OUT * N_IN);
    for (int i = 0; i < N_OUT * N_IN; i++) {
        w[i] = tu_rand_gauss(&g_rng);
        wh[i] = nb_f32_to_f16(w[i] * (i % 7 == 0 ? 1e-6f : 1.0f)); /* f16 subnormals too */
        wb[i] = nb_f32_to_bf16(w[i]);
    }
    for (int i = 0; i < N_TOK * N_IN; i++)
        x[i] = tu_rand_gauss(&g_rng);
    float scratch[N_IN], y1[N_TOK * N_OUT], y2[N_TOK * N_OUT];
    for (int f = 0; f < 3; f++) {
        nb_gemm_fn ref = f == 0 ? nb_gemm_f32_ref : f == 1 ? nb_gemm_f16_ref : nb_gemm_bf16_ref;
        nb_gemm_fn neon = f == 0 ? nb_gemm_f32_neon : f == 1 ? nb_gemm_f16_neon : nb_gemm_bf16_neon;
        const void *wf = f == 0 ? (const void *)w : f == 1 ? (const void *)wh : (const void *)wb;
        for (int i = 0; i < N_TOK * N_OUT; i++)
            y1[i] = y2[i] = NAN;
        ref(y1, N_OUT, x, N_IN, wf, N_IN, N_TOK, 2, 11, scratch);
        neon(y2, N_OUT, x, N_IN, wf, N_IN, N_TOK, 2, 11, scratch);
        assert_memory_equal(y1, y2, sizeof y1);
    }
    free(w), free(x), free(wh), free(wb);
#else
    skip();
#endif
}

static void test_glu_norm_neon(void **state)
{
#ifdef NB_HAVE_ARM
    enum { N = 1027 };
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N);
    float *o1 = malloc(sizeof(float) * N), *o2 = malloc(sizeof(float) * N);
    double worst = 0, worst_n = 0;
    for (int it = 0; it < 4; it++) {
        for (int i = 0; i < N; i++) { /* [-90, 90] on the first pass, then N(0, s) */
            g[i] = it == 0 ? -90.0f + 180.0f * (float)i / (N - 1)
                           : tu_rand_gauss(&g_rng) * (it == 1   ? 1.0f
                                                      : it == 2 ? 4.0f
                                                                : 20.0f);
            u[i] = tu_rand_gauss(&g_rng);
        }
        for (int act = NB_GLU_SILU; act <= NB_GLU_GELU_TANH; act++) {
            for (int n = 1; n <= N; n += n < 9 ? 1 : 509) { /* tails 1..3, then N */
                nb_glu_ref(o1, g, u, n, (enum nb_glu_act)act);
                nb_glu_neon(o2, g, u, n, (enum nb_glu_act)act);
                for (int i = 0; i < n; i++) {
                    double tol =
                        TOL_GLU * fabs(o1[i]) + 0x1p-23 * fabs((double)g[i] * u[i]) + 1e-37;
                    double err = fabs((double)o1[i] - o2[i]);
                    if (!(err <= tol))
                        fail_msg("glu act %d g %.9g: %.9g vs %.9g", act, (double)g[i],
                                 (double)o2[i], (double)o1[i]);
                    if (err / tol > worst) worst = err / tol;
                }
            }
        }
        for (int n = 1; n <= N; n += n < 9 ? 1 : 509) {
            nb_rmsnorm_ref(o1, g, u, n, 1e-6f);
            nb_rmsnorm_neon(o2, g, u, n, 1e-6f);
            for (int i = 0; i < n; i++) {
                double err = fabs((double)o1[i] - o2[i]);
                if (!(err <= TOL_NORM * fabs(o1[i]) + 1e-30))
                    fail_msg("rmsnorm n %d [%d]: %.9g vs %.9g", n, i, (double)o2[i], (double)o1[i]);
                if (o1[i] != 0 && err / fabs(o1[i]) > worst_n) worst_n = err / fabs(o1[i]);
            }
        }
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "glu worst error / bound %.3g, rmsnorm worst relative %.3g\n", worst,
                worst_n);
    free(g), free(u), free(o1), free(o2);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_arm),       cmocka_unit_test(test_dispatch_arm),
        cmocka_unit_test(test_act_quant_neon), cmocka_unit_test(test_w4a8_x16_neon),
        cmocka_unit_test(test_w4a16_x16_neon), cmocka_unit_test(test_w8a16_neon),
        cmocka_unit_test(test_vec_neon),       cmocka_unit_test(test_glu_norm_neon),
        cmocka_unit_test(test_kq_x16_dotprod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
