/* test_model_kv — the paged KV cache through the public API: block accounting (a pool sized
 * for 8 x 4k holding 8 x 512 tokens uses the memory of 4k), release on clear and
 * truncate, prefix sharing with copy-on-write (a forked sequence that diverges leaves
 * its parent's logits unchanged), truncation across block boundaries, a full pool
 * (NB_ERR_RANGE, nothing else lost), the sliding-window layers' few blocks, and the
 * f16 cache against the f32 one on kjv-7m (greedy ids identical), and generation that
 * stops cleanly at a full context or pool. Logits
 * are compared with a fresh context that ran the same tokens without any of it. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

enum { V = 512 };

static struct nb_model *load(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "tiny/%s", name);
    const char *p = tu_model_path(rel);
    if (!p) return NULL;
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, p), NB_OK);
    return m;
}

static struct nb_ctx *ctx_new(struct nb_model *m, int n_ctx, int n_seq, int64_t total, int batch)
{
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_seq = n_seq;
    cp.n_ctx_total = total;
    cp.n_batch = batch;
    cp.n_threads = 2;
    struct nb_ctx *c = NULL;
    assert_int_equal(nb_ctx_init(&c, m, &cp), NB_OK);
    return c;
}

static int32_t tok_at(int i, int salt) { return (int32_t)((i * 37 + salt * 101 + 11) % V); }

/* Append n tokens (tok_at(from.., salt)) to seq; the last token's logits into out. */
static enum nb_status feed(struct nb_ctx *c, int seq, int n, int salt, float *out)
{
    int from = nb_ctx_seq_len(c, seq);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n), *p = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *s = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = tok_at(from + i, salt), p[i] = from + i, s[i] = seq;
    struct nb_batch b = {.n_tokens = n, .token = t, .pos = p, .seq = s};
    float *tmp = out ? NULL : malloc(sizeof(float) * V);
    enum nb_status st = nb_decode(c, &b, out ? out : tmp);
    free(tmp);
    free(t);
    free(p);
    free(s);
    return st;
}

static struct nb_kv_usage usage(const struct nb_ctx *c)
{
    struct nb_kv_usage u;
    nb_ctx_kv_usage(c, &u);
    return u;
}

/* 8 sequences of 512 tokens in a pool sized for 8 x 4096: the blocks of 4096 tokens. */
static void test_accounting(void **state)
{
    struct nb_model *m = load("qwen3-tiny");
    if (!m) skip();
    struct nb_ctx *c = ctx_new(m, 4096, 8, 0, 512);
    struct nb_kv_usage u = usage(c);
    assert_int_equal(u.block_tokens, 32);
    assert_int_equal(u.blocks_used, 0);
    assert_int_equal(u.blocks_total, 8 * 4096 / 32);
    for (int s = 0; s < 8; s++) assert_int_equal(feed(c, s, 512, s, NULL), NB_OK);
    u = usage(c);
    assert_int_equal(u.blocks_used, 8 * 512 / 32);
    assert_true(u.bytes_used * 8 == u.bytes_reserved); /* 4096 of 32768 tokens */
    nb_ctx_truncate_seq(c, 3, 100); /* 100 tokens: 4 blocks, the last one partial */
    assert_int_equal(usage(c).blocks_used, 7 * 16 + 4);
    for (int s = 0; s < 8; s++) nb_ctx_clear_seq(c, s);
    assert_int_equal(usage(c).blocks_used, 0);
    nb_ctx_free(c);
    nb_model_free(m);
}

/* A prefix shared by fork: no block copied until one side writes into the shared one;
 * then the child's tokens never reach the parent, and both give a fresh run's logits. */
static void fork_case(struct nb_model *m, int prompt, int at)
{
    float lp[V], lc[V], ref[V];
    struct nb_ctx *c = ctx_new(m, 256, 2, 0, 16);
    assert_int_equal(feed(c, 0, prompt, 0, NULL), NB_OK);
    int64_t before = usage(c).blocks_used;
    assert_int_equal(nb_ctx_fork_seq(c, 0, 1, at), NB_OK);
    assert_int_equal(nb_ctx_seq_len(c, 1), at);
    assert_int_equal(usage(c).blocks_used, before); /* shared, not copied */
    assert_int_equal(feed(c, 1, 9, 7, lc), NB_OK);  /* the child diverges first */
    assert_int_equal(feed(c, 0, 5, 0, lp), NB_OK);  /* then the parent goes on */

    struct nb_ctx *r = ctx_new(m, 256, 1, 0, 16); /* the parent alone */
    assert_int_equal(feed(r, 0, prompt + 5, 0, ref), NB_OK);
    assert_true(tu_max_abs_diff(lp, ref, V) < 1e-4);
    nb_ctx_clear_seq(r, 0); /* the child alone: the prefix, then its own tokens */
    assert_int_equal(feed(r, 0, at, 0, NULL), NB_OK);
    assert_int_equal(feed(r, 0, 9, 7, ref), NB_OK);
    assert_true(tu_max_abs_diff(lc, ref, V) < 1e-4);
    nb_ctx_free(r);
    nb_ctx_free(c);
}

static void test_fork(void **state)
{
    struct nb_model *m = load("qwen3-tiny");
    if (!m) skip();
    fork_case(m, 40, 40); /* the child writes into the shared, half-full second block */
    fork_case(m, 70, 20); /* a prefix ending inside the parent's first block */
    fork_case(m, 64, 64); /* on a block boundary: nothing to copy */
    struct nb_ctx *c = ctx_new(m, 64, 2, 0, 16);
    assert_int_equal(nb_ctx_fork_seq(c, 0, 0, 0), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_ctx_fork_seq(c, 0, 1, 3), NB_ERR_INVALID_ARG); /* src has 0 */
    assert_non_null(strstr(nb_last_error(), "has 0 tokens"));
    nb_ctx_free(c);
    nb_model_free(m);
}

/* Truncating into the middle of a block, onto a boundary, and going on from there. */
static void test_truncate(void **state)
{
    struct nb_model *m = load("qwen3-tiny");
    if (!m) skip();
    static const int cuts[] = {33, 32, 31, 1, 0};
    for (int i = 0; i < 5; i++) {
        float a[V], ref[V];
        struct nb_ctx *c = ctx_new(m, 128, 1, 0, 16);
        assert_int_equal(feed(c, 0, 70, 3, NULL), NB_OK); /* tokens past the cut: salt 3 */
        assert_int_equal(nb_ctx_truncate_seq(c, 0, cuts[i]), NB_OK);
        assert_int_equal(usage(c).blocks_used, (cuts[i] + 31) / 32);
        assert_int_equal(feed(c, 0, 40, 3, a), NB_OK);
        struct nb_ctx *r = ctx_new(m, 128, 1, 0, 16);
        assert_int_equal(feed(r, 0, cuts[i] + 40, 3, ref), NB_OK);
        assert_true(tu_max_abs_diff(a, ref, V) < 1e-4);
        nb_ctx_free(r);
        nb_ctx_free(c);
    }
    nb_model_free(m);
}

/* A full pool: NB_ERR_RANGE naming it, the batch not run, every sequence intact. */
static void test_pool_full(void **state)
{
    struct nb_model *m = load("qwen3-tiny");
    if (!m) skip();
    float a[V], ref[V];
    struct nb_ctx *c = ctx_new(m, 96, 2, 64, 16); /* two blocks for both sequences */
    assert_int_equal(feed(c, 0, 40, 0, NULL), NB_OK);
    assert_int_equal(feed(c, 1, 1, 1, NULL), NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "KV cache full"));
    assert_int_equal(nb_ctx_seq_len(c, 1), 0);
    assert_int_equal(feed(c, 0, 30, 0, NULL), NB_ERR_RANGE); /* 70 tokens: three blocks */
    assert_int_equal(nb_ctx_seq_len(c, 0), 40);
    assert_int_equal(feed(c, 0, 24, 0, a), NB_OK); /* 64: fits, and nothing was lost */
    struct nb_ctx *r = ctx_new(m, 96, 1, 0, 16);
    assert_int_equal(feed(r, 0, 64, 0, ref), NB_OK);
    assert_true(tu_max_abs_diff(a, ref, V) < 1e-4);
    nb_ctx_clear_seq(c, 0); /* returned blocks serve the other sequence */
    assert_int_equal(feed(c, 1, 60, 1, NULL), NB_OK);
    nb_ctx_free(r);
    nb_ctx_free(c);
    nb_model_free(m);
}

/* spark-tiny's window layers (window 16) hold a few blocks however long the sequence;
 * truncating below what they still hold is refused by name. */
static void test_sliding_window(void **state)
{
    struct nb_model *m = load("spark-tiny");
    if (!m) skip();
    float a[V], ref[V];
    struct nb_ctx *c = ctx_new(m, 1024, 1, 0, 8);
    for (int i = 0; i < 100; i++) assert_int_equal(feed(c, 0, 8, 5, a), NB_OK);
    struct nb_kv_usage u = usage(c);
    struct nb_ctx *r = ctx_new(m, 1024, 1, 0, 800); /* one chunk: no window trimming */
    assert_int_equal(feed(r, 0, 800, 5, ref), NB_OK);
    assert_true(tu_max_abs_diff(a, ref, V) < 1e-4);
    struct nb_kv_usage ur = usage(r);
    assert_true(u.blocks_used < ur.blocks_used); /* the window layers' blocks returned */
    assert_int_equal(nb_ctx_truncate_seq(c, 0, 100), NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "sliding-window"));
    assert_int_equal(nb_ctx_seq_len(c, 0), 800);
    assert_int_equal(nb_ctx_truncate_seq(c, 0, 795), NB_OK);
    nb_ctx_free(r);
    nb_ctx_free(c);
    nb_model_free(m);
}

/* nb_generate into a context that fills up is not an error: it stops with stopped_by 3
 * after the token that no longer fits, and what it generated is what a larger context
 * generates; likewise when the pool (not the sequence's length) runs out. */
static void test_generate_full(void **state)
{
    struct nb_model *m = load("qwen3-tiny");
    if (!m) skip();
    struct nb_sampler_params sp = nb_sampler_default_params();
    sp.temperature = 0;
    int32_t prompt[10];
    for (int i = 0; i < 10; i++) prompt[i] = tok_at(i, 3);
    struct tu_collect big = {0}, got = {0};
    struct nb_gen_stats gs;
    struct nb_sampler *s = NULL;
    struct nb_ctx *r = ctx_new(m, 128, 1, 0, 16), *c = ctx_new(m, 40, 1, 0, 16);
    assert_int_equal(nb_sampler_init(&s, &sp, V), NB_OK);
    assert_int_equal(nb_generate(r, 0, s, prompt, 10, 60, 0, tu_collect_cb, &big, &gs), NB_OK);
    assert_int_equal(gs.n_gen, 60);
    assert_int_equal(gs.stopped_by, 0);
    nb_sampler_free(s);
    assert_int_equal(nb_sampler_init(&s, &sp, V), NB_OK);
    assert_int_equal(nb_generate(c, 0, s, prompt, 10, 60, 0, tu_collect_cb, &got, &gs), NB_OK);
    assert_int_equal(gs.stopped_by, 3);
    assert_int_equal(gs.n_gen, 31); /* 30 run into the 40 positions, the 31st not */
    assert_int_equal(gs.n_decode, 30);
    assert_int_equal(nb_ctx_seq_len(c, 0), 40);
    assert_memory_equal(got.ids, big.ids, sizeof(int32_t) * 31);
    nb_ctx_free(c);
    /* the pool of two sequences holds 64 tokens; sequence 1 takes 32 of them */
    c = ctx_new(m, 128, 2, 64, 16);
    assert_int_equal(feed(c, 1, 20, 1, NULL), NB_OK);
    nb_sampler_free(s);
    assert_int_equal(nb_sampler_init(&s, &sp, V), NB_OK);
    got = (struct tu_collect){0};
    assert_int_equal(nb_generate(c, 0, s, prompt, 10, 60, 0, tu_collect_cb, &got, &gs), NB_OK);
    assert_int_equal(gs.stopped_by, 3);
    assert_int_equal(gs.n_gen, 23);
    assert_int_equal(nb_ctx_seq_len(c, 0), 32);
    assert_memory_equal(got.ids, big.ids, sizeof(int32_t) * 23);
    /* a prompt that does not fit fails, and changes nothing */
    int32_t longp[40];
    for (int i = 0; i < 40; i++) longp[i] = tok_at(i, 4);
    assert_int_equal(nb_generate(c, 1, s, longp, 40, 4, 0, NULL, NULL, &gs), NB_ERR_RANGE);
    assert_int_equal(nb_ctx_seq_len(c, 1), 20);
    nb_sampler_free(s);
    nb_ctx_free(c);
    nb_ctx_free(r);
    nb_model_free(m);
}

/* Greedy ids of kjv-7m's reference prompts, 48 tokens, with a cache of `type`. */
static void greedy(struct nb_model *m, int type, const int32_t *prompt, int n_prompt,
                   int32_t *out)
{
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.kv_type = type;
    struct nb_ctx *c = NULL;
    assert_int_equal(nb_ctx_init(&c, m, &cp), NB_OK);
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    float *logits = malloc(sizeof(float) * (size_t)info.n_vocab);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_prompt);
    for (int i = 0; i < n_prompt; i++) pos[i] = i;
    struct nb_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pos};
    assert_int_equal(nb_decode(c, &b, logits), NB_OK);
    for (int i = 0; i < 48; i++) {
        int best = 0;
        for (int v = 1; v < info.n_vocab; v++) best = logits[v] > logits[best] ? v : best;
        out[i] = best;
        int32_t p = n_prompt + i;
        struct nb_batch one = {.n_tokens = 1, .token = &out[i], .pos = &p};
        assert_int_equal(nb_decode(c, &one, logits), NB_OK);
    }
    free(pos);
    free(logits);
    nb_ctx_free(c);
}

/* An f16 cache gives kjv-7m's greedy continuations of the f32 cache, token for token;
 * q8_0 and bf16 run (their agreement is measured, docs/kv-cache.md). */
static void test_kv_types_kjv(void **state)
{
    const char *mp = tu_model_path("kjv-7m/kjv-7m-f32.gguf"); /* a static buffer */
    if (!mp) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, mp), NB_OK);
    const char *rp = tu_model_path("kjv-7m/reference.json");
    if (!rp) skip();
    cJSON *ref = tu_load_json(rp), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        int n_prompt;
        int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(c, "prompt"), &n_prompt);
        int32_t a[48], b[48], q[48];
        greedy(m, NB_KV_TYPE_F32, prompt, n_prompt, a);
        greedy(m, NB_KV_TYPE_F16, prompt, n_prompt, b);
        assert_memory_equal(a, b, sizeof a);
        greedy(m, NB_KV_TYPE_Q8_0, prompt, n_prompt, q);
        greedy(m, NB_KV_TYPE_BF16, prompt, n_prompt, q);
        free(prompt);
    }
    cJSON_Delete(ref);
    nb_model_free(m);
}

int main(void)
{
    if (tu_isa_from_env()) return 1; /* the *_avx2 tests: NIBBLE_ISA=avx2 */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounting), cmocka_unit_test(test_fork),
        cmocka_unit_test(test_truncate),   cmocka_unit_test(test_pool_full),
        cmocka_unit_test(test_sliding_window), cmocka_unit_test(test_kv_types_kjv),
        cmocka_unit_test(test_generate_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
