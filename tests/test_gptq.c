/* test_gptq — GPTQ (quant/gptq.c) against an independent float64 numpy GPTQ
 * (tests/gptq_ref.py: same codes), and on real kjv-7m activations: a lower layer output
 * error than round-to-nearest on held-out inputs. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fp.h"
#include "kernels/qblock.h"
#include "model/model.h"
#include "quant/dequant.h"
#include "quant/gptq.h"
#include "quant/kquant.h"
#include "quant/quant.h"

static uint64_t g_rng = 11;

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4400];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) fail();
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* H = X^T X for X [n_tok][n]. */
static double *hessian(const float *x, int n_tok, int64_t n)
{
    double *h = calloc((size_t)(n * n), sizeof(double));
    assert_non_null(h);
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) h[i * n + j] += (double)x[t * n + i] * x[t * n + j];
    return h;
}

static void *blob_for(enum nb_wpath path, int group, int64_t n_out, int64_t n_in)
{
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(path, group, n_out, n_in, &pl));
    void *b = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
    assert_non_null(b);
    return b;
}

/* One case against tests/gptq_ref.py. */
static void check_ref(enum nb_wpath path, int group, int act_order)
{
    const int64_t n_out = 12, n_in = 128;
    const int n_tok = 300;
    float *w = malloc(sizeof(float) * n_out * n_in), *x = malloc(sizeof(float) * n_tok * n_in);
    for (int64_t i = 0; i < n_out * n_in; i++) w[i] = tu_rand_gauss(&g_rng);
    /* inputs with uneven channel scales and correlations, as real activations have;
     * channel 5 never active (a dead column) */
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n_in; i++) {
            float common = tu_rand_gauss(&g_rng);
            x[t * n_in + i] = i == 5 ? 0.0f
                                     : (1.0f + (float)(i % 7)) * tu_rand_gauss(&g_rng) +
                                           0.5f * common;
        }
    double *h = hessian(x, n_tok, n_in);
    void *blob = blob_for(path, group, n_out, n_in);
    struct nb_gptq_params p = nb_gptq_default_params();
    p.act_order = act_order;
    p.block = 32; /* several lazy blocks in 128 columns */
    struct nb_gptq_stats st;
    if (nb_gptq_quantize(path, group, w, n_out, n_in, h, &p, blob, &st))
        fail_msg("%s", nb_last_error());
    assert_true(st.loss < st.loss_rtn);

    /* the grids and codes the blob holds */
    struct nb_layout_planes pl;
    nb_layout_planes(path, group, n_out, n_in, &pl);
    int64_t ng = n_in / group;
    float *d = malloc(sizeof(float) * n_out * ng), *m = calloc((size_t)(n_out * ng), 4);
    const uint8_t *b = blob;
    for (int64_t i = 0; i < n_out * ng; i++) {
        d[i] = nb_bf16_to_f32(nb_q_load_u16(b + pl.offset[1] + 2 * i));
        if (path == NB_WPATH_W4A16) m[i] = nb_bf16_to_f32(nb_q_load_u16(b + pl.offset[2] + 2 * i));
    }
    char dir[4200], json[256];
    snprintf(dir, sizeof dir, "%s/gptq-%s-%d-%d", tu_dir, nb_wpath_name(path), group, act_order);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(json, sizeof json,
             "{\"n_out\": %lld, \"n_in\": %lld, \"group\": %d, \"path\": \"%s\", \"damp\": %g, "
             "\"act_order\": %d}", (long long)n_out, (long long)n_in, group, nb_wpath_name(path),
             p.damp, act_order);
    write_file(dir, "case.json", json, strlen(json));
    write_file(dir, "w.f32", w, sizeof(float) * (size_t)(n_out * n_in));
    write_file(dir, "h.f64", h, sizeof(double) * (size_t)(n_in * n_in));
    write_file(dir, "d.f32", d, sizeof(float) * (size_t)(n_out * ng));
    write_file(dir, "m.f32", m, sizeof(float) * (size_t)(n_out * ng));
    char cmd[9000];
    const char *py = getenv("NIBBLE_PYTHON") ? getenv("NIBBLE_PYTHON") : "python3";
    snprintf(cmd, sizeof cmd, "%s %s/tests/gptq_ref.py %s", py, getenv("NIBBLE_SOURCE_DIR"), dir);
    if (system(cmd) != 0) fail_msg("%s failed (python3-numpy installed?)", cmd);
    snprintf(cmd, sizeof cmd, "%s/q.u8", dir);
    FILE *f = fopen(cmd, "rb");
    assert_non_null(f);
    uint8_t *q = malloc((size_t)(n_out * n_in));
    assert_int_equal(fread(q, 1, (size_t)(n_out * n_in), f), (size_t)(n_out * n_in));
    fclose(f);
    int differ = 0;
    for (int64_t i = 0; i < n_out * n_in; i++) {
        uint8_t byte = b[pl.offset[0] + i / 2];
        int code = i % 2 ? byte >> 4 : byte & 15;
        differ += code != q[i];
    }
    if (differ)
        fail_msg("%s G%d act_order %d: %d of %lld codes differ from the numpy reference",
                 nb_wpath_name(path), group, act_order, differ, (long long)(n_out * n_in));
    free(w), free(x), free(h), free(blob), free(d), free(m), free(q);
}

static void test_against_numpy(void **state)
{
    if (!getenv("NIBBLE_SOURCE_DIR")) skip();
    check_ref(NB_WPATH_W4A8, 32, 0);
    check_ref(NB_WPATH_W4A8, 64, 1);
    check_ref(NB_WPATH_W4A16, 32, 1);
    check_ref(NB_WPATH_W4A16, 128, 0);
}

/* x = rmsnorm(embed(tok)) * attn_norm of layer 0: the input of wq, wk, wv. */
static float *layer0_inputs(const struct nb_model *m, const int32_t *tok, int n)
{
    int64_t E = m->cfg.n_embd;
    float *x = malloc(sizeof(float) * (size_t)(n * E));
    assert_non_null(x);
    assert_int_equal(m->tok_embd.format, NB_WF_F32);
    for (int t = 0; t < n; t++) {
        const float *e = (const float *)m->tok_embd.data + (int64_t)tok[t] * E;
        double ss = 0;
        for (int64_t i = 0; i < E; i++) ss += (double)e[i] * e[i];
        float r = (float)(1.0 / sqrt(ss / (double)E + m->cfg.norm_eps));
        for (int64_t i = 0; i < E; i++) x[t * E + i] = e[i] * r * m->layers[0].attn_norm[i];
    }
    return x;
}

static int collect(int32_t tok, void *user)
{
    int32_t **p = user;
    *(*p)++ = tok;
    return 0;
}

/* n tokens the model writes itself (sampled at temperature 1 from BOS). */
static int32_t *sample_tokens(struct nb_model *m, uint64_t seed, int n)
{
    struct nb_ctx *ctx = NULL;
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = 2;
    cp.n_ctx = n + 1;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    struct nb_sampler_params sp = nb_sampler_default_params();
    sp.temperature = 1.0f;
    sp.seed = seed;
    struct nb_sampler *s = NULL;
    assert_int_equal(nb_sampler_init(&s, &sp, m->cfg.n_vocab), NB_OK);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)n), *w = out, bos = 1;
    assert_int_equal(nb_generate(ctx, 0, s, &bos, 1, n, 0, collect, &w, NULL), NB_OK);
    assert_int_equal(w - out, n);
    nb_sampler_free(s);
    nb_ctx_free(ctx);
    return out;
}

/* sum_t |(W - Wq) x_t|^2 */
static double output_error(const float *w, const float *wq, int64_t n_out, int64_t n_in,
                           const float *x, int n)
{
    double total = 0;
    for (int t = 0; t < n; t++)
        for (int64_t r = 0; r < n_out; r++) {
            double e = 0;
            for (int64_t i = 0; i < n_in; i++)
                e += ((double)w[r * n_in + i] - wq[r * n_in + i]) * x[t * n_in + i];
            total += e * e;
        }
    return total;
}

/* kjv-7m layer 0's q projection with calibration and held-out inputs (sampled tokens). */
struct layer0 {
    struct nb_model *m;
    int n_test;
    int32_t *cal, *held;
    float *xc, *xt;
    double *h; /* the calibration inputs' Hessian */
    const float *w;
    int64_t n_out, E;
};

static int layer0_open(struct layer0 *c)
{
    const char *path = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!path) return 0;
    memset(c, 0, sizeof *c);
    if (nb_model_load(&c->m, path)) fail_msg("%s", nb_last_error());
    const int n_cal = 512;
    c->n_test = 256;
    c->cal = sample_tokens(c->m, 1, n_cal);
    c->held = sample_tokens(c->m, 2, c->n_test);
    c->xc = layer0_inputs(c->m, c->cal, n_cal);
    c->xt = layer0_inputs(c->m, c->held, c->n_test);
    c->E = c->m->cfg.n_embd;
    c->h = hessian(c->xc, n_cal, c->E);
    const struct nb_weight *wq = &c->m->layers[0].wq;
    assert_int_equal(wq->format, NB_WF_F32);
    c->w = wq->data;
    c->n_out = wq->n_out;
    return 1;
}

static void layer0_close(struct layer0 *c)
{
    free(c->h), free(c->xc), free(c->xt), free(c->cal), free(c->held);
    nb_model_free(c->m);
}

static void test_kjv_layer0(void **state)
{
    struct layer0 c;
    if (!layer0_open(&c)) skip();
    const float *w = c.w, *xt = c.xt;
    const double *h = c.h;
    const int64_t E = c.E, n_out = c.n_out;
    const int n_test = c.n_test;
    float *deq = malloc(sizeof(float) * (size_t)(n_out * E));
    const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16};
    for (int i = 0; i < 2; i++)
        for (int act_order = 0; act_order < 2; act_order++) {
            void *blob = blob_for(paths[i], 128, n_out, E);
            struct nb_gptq_params p = nb_gptq_default_params();
            p.act_order = act_order;
            struct nb_gptq_stats st;
            if (nb_gptq_quantize(paths[i], 128, w, n_out, E, h, &p, blob, &st))
                fail_msg("%s", nb_last_error());
            assert_int_equal(nb_dequantize_rows(paths[i], 128, blob, n_out, E, 0, n_out, deq),
                             NB_OK);
            double e_gptq = output_error(w, deq, n_out, E, xt, n_test);
            /* round-to-nearest with the same scale search (the static groups) */
            float *imp = malloc(sizeof(float) * (size_t)E);
            for (int64_t k = 0; k < E; k++) imp[k] = (float)h[k * E + k];
            assert_int_equal(nb_quantize_rows(paths[i], 128, w, n_out, E, 0, n_out, imp, 1, blob,
                                              NULL), NB_OK);
            assert_int_equal(nb_dequantize_rows(paths[i], 128, blob, n_out, E, 0, n_out, deq),
                             NB_OK);
            double e_rtn = output_error(w, deq, n_out, E, xt, n_test);
            if (getenv("NIBBLE_TEST_VERBOSE"))
                fprintf(stderr, "kjv-7m layer 0 wq %s act_order %d: held-out output error "
                        "GPTQ %.4g, RTN %.4g (x%.2f); calibration loss %.4g vs %.4g\n",
                        nb_wpath_name(paths[i]), act_order, e_gptq, e_rtn, e_rtn / e_gptq,
                        st.loss, st.loss_rtn);
            assert_true(st.loss < st.loss_rtn);
            assert_true(e_gptq < e_rtn);
            free(imp);
            free(blob);
        }
    free(deq);
    layer0_close(&c);
}

/* GPTQ onto the Q8_0 and Q6_K grids (nb_gptq_quantize_blocks): on kjv-7m layer 0's q
 * projection, a lower held-out output error than the same blocks rounded to nearest on
 * the same static scales (nb_kquant_rows with diag(H) as the importance), and blocks that
 * the reference dequantizer reads with those scales unchanged. */
static void test_kjv_layer0_blocks(void **state)
{
    struct layer0 c;
    if (!layer0_open(&c)) skip();
    const float *w = c.w, *xt = c.xt;
    const double *h = c.h;
    const int64_t E = c.E, n_out = c.n_out;
    const int n_test = c.n_test;
    float *deq = malloc(sizeof(float) * (size_t)(n_out * E)), *imp = malloc(sizeof(float) * E);
    for (int64_t k = 0; k < E; k++) imp[k] = (float)h[k * E + k];
    const enum nb_wformat fmts[] = {NB_WF_Q8_0, NB_WF_Q6_K};
    const enum nb_dtype dts[] = {NB_DTYPE_Q8_0, NB_DTYPE_Q6_K};
    for (int i = 0; i < 2; i++)
        for (int act_order = 0; act_order < 2; act_order++) {
            struct nb_block_info bi;
            assert_true(nb_wformat_block(fmts[i], &bi));
            size_t bytes = (size_t)(n_out * (E / bi.elems) * bi.bytes);
            uint8_t *gq = malloc(bytes), *rtn = malloc(bytes);
            struct nb_gptq_params p = nb_gptq_default_params();
            p.act_order = act_order;
            struct nb_gptq_factor f;
            if (nb_gptq_factor_init(&f, h, E, &p) ||
                nb_gptq_quantize_blocks(fmts[i], w, n_out, E, &f, &p, gq, NULL))
                fail_msg("%s", nb_last_error());
            nb_gptq_factor_free(&f);
            assert_int_equal(nb_dequant(dts[i], gq, deq, n_out * E), NB_OK);
            double e_gptq = output_error(w, deq, n_out, E, xt, n_test);
            assert_int_equal(nb_kquant_rows(fmts[i], w, n_out, E, imp, 0, n_out, rtn), NB_OK);
            assert_int_equal(nb_dequant(dts[i], rtn, deq, n_out * E), NB_OK);
            double e_rtn = output_error(w, deq, n_out, E, xt, n_test);
            /* the static scales are the round-to-nearest blocks' own */
            int64_t differ = 0;
            for (int64_t b = 0; b < n_out * (E / bi.elems); b++) {
                const uint8_t *x = gq + b * bi.bytes, *y = rtn + b * bi.bytes;
                if (fmts[i] == NB_WF_Q8_0) differ += memcmp(x, y, 2) != 0;
                else differ += memcmp(x + 192, y + 192, 18) != 0;
            }
            assert_int_equal(differ, 0);
            if (getenv("NIBBLE_TEST_VERBOSE"))
                fprintf(stderr, "kjv-7m layer 0 wq %s act_order %d: held-out output error "
                        "GPTQ %.4g, RTN %.4g (x%.2f)\n", bi.dtype, act_order, e_gptq, e_rtn,
                        e_rtn / e_gptq);
            assert_true(e_gptq < e_rtn);
            free(gq), free(rtn);
        }
    free(deq), free(imp);
    layer0_close(&c);
}

static void test_errors(void **state)
{
    float w[4 * 64] = {0};
    double h[64 * 64] = {0};
    _Alignas(64) uint8_t blob[4096];
    assert_int_equal(nb_gptq_quantize(NB_WPATH_W8A16, 32, w, 4, 64, h, NULL, blob, NULL),
                     NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "not an int4 path"));
    assert_int_equal(nb_gptq_quantize(NB_WPATH_W4A8, 48, w, 4, 64, h, NULL, blob, NULL),
                     NB_ERR_INVALID_ARG);
    /* an all-zero Hessian (no calibration input) still quantizes: every column dead */
    if (nb_gptq_quantize(NB_WPATH_W4A8, 32, w, 4, 64, h, NULL, blob, NULL))
        fail_msg("%s", nb_last_error());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_numpy),
        cmocka_unit_test(test_kjv_layer0),
        cmocka_unit_test(test_kjv_layer0_blocks),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
