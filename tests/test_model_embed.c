/* test_model_embed — nb_embed on kjv-7m (f32): unit vectors, the same one twice, the same
 * for any n_batch, LAST pooling's hidden row times the head (tied: the embedding matrix)
 * giving nb_decode's logits, one token pooled alike three ways, a sequence beside it left
 * alone, and the argument checks. Skipped when the model is missing. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "nibble.h"

#define KJV "kjv-7m/kjv-7m-f32.gguf"
#define N_TOK 21

static struct nb_model *g_model;
static int g_e; /* n_embd */
static int32_t g_tok[N_TOK];

static int setup(void **state)
{
    (void)state;
    const char *path = tu_model_path(KJV);
    if (!path) return 0;
    if (nb_model_load(&g_model, path) != NB_OK) return -1;
    struct nb_model_info info;
    nb_model_get_info(g_model, &info);
    g_e = info.n_embd;
    g_tok[0] = 1; /* BOS */
    for (int i = 1; i < N_TOK; i++) g_tok[i] = 3 + (97 * i) % 4000;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_model_free(g_model);
    return 0;
}

static struct nb_ctx *make_ctx(int n_batch, int n_seq)
{
    struct nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 64;
    p.n_batch = n_batch;
    p.n_seq = n_seq;
    p.n_threads = 2;
    struct nb_ctx *c = NULL;
    assert_int_equal(nb_ctx_init(&c, g_model, &p), NB_OK);
    return c;
}

static double norm2(const float *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

static float max_diff(const float *a, const float *b, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > m) m = fabsf(a[i] - b[i]);
    return m;
}

static void test_unit_deterministic(void **state)
{
    (void)state;
    if (!g_model) skip();
    struct nb_ctx *c = make_ctx(64, 1);
    float *a = malloc(sizeof *a * (size_t)g_e), *b = malloc(sizeof *b * (size_t)g_e);
    for (int p = NB_POOLING_MEAN; p <= NB_POOLING_CLS; p++) {
        assert_int_equal(nb_embed(c, 0, g_tok, N_TOK, (enum nb_pooling)p, a), NB_OK);
        assert_true(fabs(norm2(a, g_e) - 1.0) < 1e-5);
        assert_int_equal(nb_ctx_seq_len(c, 0), 0); /* cleared after */
        assert_int_equal(nb_embed(c, 0, g_tok, N_TOK, (enum nb_pooling)p, b), NB_OK);
        assert_memory_equal(a, b, sizeof *a * (size_t)g_e);
    }
    free(a);
    free(b);
    nb_ctx_free(c);
}

/* n_batch 4 (six chunks) and 64 (one) give the same vector */
static void test_chunking(void **state)
{
    (void)state;
    if (!g_model) skip();
    struct nb_ctx *c4 = make_ctx(4, 1), *c64 = make_ctx(64, 1);
    float *a = malloc(sizeof *a * (size_t)g_e), *b = malloc(sizeof *b * (size_t)g_e);
    for (int p = NB_POOLING_MEAN; p <= NB_POOLING_CLS; p++) {
        assert_int_equal(nb_embed(c4, 0, g_tok, N_TOK, (enum nb_pooling)p, a), NB_OK);
        assert_int_equal(nb_embed(c64, 0, g_tok, N_TOK, (enum nb_pooling)p, b), NB_OK);
        assert_true(max_diff(a, b, g_e) < 1e-5f);
    }
    free(a);
    free(b);
    nb_ctx_free(c4);
    nb_ctx_free(c64);
}

/* LAST: the final-norm row of the last token; times the head (the tied embedding matrix)
 * it is the last token's logits from nb_decode, and nb_embed is it normalized. */
static void test_last_is_head_input(void **state)
{
    (void)state;
    if (!g_model) skip();
    assert_true(g_model->cfg.tied_head);
    struct nb_ctx *c = make_ctx(8, 1);
    int V = g_model->cfg.n_vocab;
    float *h = malloc(sizeof *h * (size_t)g_e), *u = malloc(sizeof *u * (size_t)g_e);
    float *row = malloc(sizeof *row * (size_t)g_e), *logits = malloc(sizeof *logits * (size_t)V);
    assert_int_equal(nb_embed_pooled(c, 0, g_tok, N_TOK, NB_POOLING_LAST, h), NB_OK);
    assert_int_equal(nb_embed(c, 0, g_tok, N_TOK, NB_POOLING_LAST, u), NB_OK);
    double n = norm2(h, g_e);
    assert_true(n > 1.0);
    for (int i = 0; i < g_e; i++) assert_true(fabs(h[i] / n - u[i]) < 1e-6);
    int32_t pos[N_TOK];
    for (int i = 0; i < N_TOK; i++) pos[i] = i;
    struct nb_batch b = {.n_tokens = N_TOK, .token = g_tok, .pos = pos};
    assert_int_equal(nb_decode(c, &b, logits), NB_OK);
    double worst = 0;
    for (int32_t v = 0; v < V; v++) {
        nb_model_embed(g_model, &v, 1, row);
        double d = 0;
        for (int i = 0; i < g_e; i++) d += (double)h[i] * row[i];
        if (fabs(d - logits[v]) > worst) worst = fabs(d - logits[v]);
    }
    assert_true(worst < 1e-3);
    free(h);
    free(u);
    free(row);
    free(logits);
    nb_ctx_free(c);
}

/* one token: mean = last = cls; two: mean differs from last, cls is the first alone */
static void test_pooling_kinds(void **state)
{
    (void)state;
    if (!g_model) skip();
    struct nb_ctx *c = make_ctx(64, 1);
    float *m = malloc(sizeof *m * (size_t)g_e), *l = malloc(sizeof *l * (size_t)g_e);
    float *f = malloc(sizeof *f * (size_t)g_e);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 1, NB_POOLING_MEAN, m), NB_OK);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 1, NB_POOLING_LAST, l), NB_OK);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 1, NB_POOLING_CLS, f), NB_OK);
    assert_true(max_diff(m, l, g_e) < 1e-6f);
    assert_true(max_diff(m, f, g_e) < 1e-6f);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 2, NB_POOLING_MEAN, m), NB_OK);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 2, NB_POOLING_LAST, l), NB_OK);
    assert_true(max_diff(m, l, g_e) > 1e-3f);
    assert_int_equal(nb_embed(c, 0, g_tok + 3, 2, NB_POOLING_CLS, m), NB_OK);
    assert_true(max_diff(m, f, g_e) < 1e-6f);
    free(m);
    free(l);
    free(f);
    nb_ctx_free(c);
}

/* an embedding in sequence 1 leaves sequence 0's cache as it was: its next logits are
 * those it gets without the embedding */
static void test_other_sequence(void **state)
{
    (void)state;
    if (!g_model) skip();
    struct nb_ctx *c = make_ctx(64, 2);
    int V = g_model->cfg.n_vocab;
    float *x = malloc(sizeof *x * (size_t)V), *y = malloc(sizeof *y * (size_t)V);
    float *e = malloc(sizeof *e * (size_t)g_e);
    int32_t pos[N_TOK];
    for (int i = 0; i < N_TOK; i++) pos[i] = i;
    struct nb_batch b = {.n_tokens = N_TOK - 1, .token = g_tok, .pos = pos};
    struct nb_batch last = {.n_tokens = 1, .token = g_tok + N_TOK - 1, .pos = pos + N_TOK - 1};
    assert_int_equal(nb_decode(c, &b, x), NB_OK);
    assert_int_equal(nb_decode(c, &last, x), NB_OK);
    nb_ctx_clear_seq(c, 0);
    assert_int_equal(nb_decode(c, &b, y), NB_OK);
    assert_int_equal(nb_embed(c, 1, g_tok, N_TOK, NB_POOLING_MEAN, e), NB_OK);
    assert_int_equal(nb_ctx_seq_len(c, 0), N_TOK - 1);
    assert_int_equal(nb_ctx_seq_len(c, 1), 0);
    assert_int_equal(nb_decode(c, &last, y), NB_OK);
    assert_true(max_diff(x, y, V) < 1e-5f);
    free(x);
    free(y);
    free(e);
    nb_ctx_free(c);
}

static void test_bad_args(void **state)
{
    (void)state;
    if (!g_model) skip();
    struct nb_ctx *c = make_ctx(64, 1);
    float *e = malloc(sizeof *e * (size_t)g_e);
    int32_t many[65] = {0}, bad[2] = {1, 999999};
    assert_int_equal(nb_embed(c, 0, g_tok, 0, NB_POOLING_MEAN, e), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "0 tokens"));
    assert_int_equal(nb_embed(c, 0, many, 65, NB_POOLING_MEAN, e), NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "context holds 64"));
    assert_int_equal(nb_embed(c, 1, g_tok, 2, NB_POOLING_MEAN, e), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_embed(c, 0, g_tok, 2, (enum nb_pooling)7, e), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_embed(c, 0, g_tok, 2, NB_POOLING_MEAN, NULL), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_embed(c, 0, bad, 2, NB_POOLING_MEAN, e), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_ctx_seq_len(c, 0), 0);
    assert_int_equal(nb_pooling_parse("mean"), NB_POOLING_MEAN);
    assert_int_equal(nb_pooling_parse("last"), NB_POOLING_LAST);
    assert_int_equal(nb_pooling_parse("cls"), NB_POOLING_CLS);
    assert_int_equal(nb_pooling_parse("max"), -1);
    free(e);
    nb_ctx_free(c);
}

int main(void)
{
    tu_isa_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_deterministic), cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_last_is_head_input), cmocka_unit_test(test_pooling_kinds),
        cmocka_unit_test(test_other_sequence),     cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
