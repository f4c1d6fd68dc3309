/* test_model_speculative — prompt-lookup speculative decoding (runtime/lookup.c):
 * nb_lookup_draft finds the latest earlier occurrence of the longest suffix n-gram;
 * on kjv-7m, for the float weights and the w4a8 path, nb_generate_lookup gives
 * nb_generate's tokens exactly (greedy and sampled, several draft sizes, a stop by the
 * callback mid-draft, a full context) and leaves the sequence as long as nb_generate
 * does, while accepting drafts on a repetitive text; w4a16 runs, its agreement printed. */
#include "helpers/testutil.h"

#include <stdlib.h>
#include <string.h>

#include "nibble.h"

static void test_lookup_draft(void **state)
{
    (void)state;
    int32_t d[8];
    /* ... 1 2 3 9 ... 1 2 3 -> the 3-gram's continuation, latest occurrence first */
    const int32_t h[] = {5, 1, 2, 3, 9, 8, 7, 1, 2, 3, 4, 6, 1, 2, 3};
    int n = (int)(sizeof h / sizeof *h);
    /* the latest earlier "1 2 3" is at 7: followed by 4 6 1 2 3, up to the end of the
       history (a draft never reaches past it) */
    assert_int_equal(nb_lookup_draft(h, n, 2, 4, 8, d), 5);
    assert_int_equal(d[0], 4);
    assert_int_equal(d[1], 6);
    assert_int_equal(d[2], 1);
    assert_int_equal(d[3], 2);
    assert_int_equal(d[4], 3);
    assert_int_equal(nb_lookup_draft(h, n, 2, 4, 2, d), 2); /* capped at max_draft */
    /* a 4-gram beats a later 2-gram: "0 1 2 3" only once earlier */
    const int32_t h2[] = {0, 1, 2, 3, 42, 1, 2, 3, 43, 2, 3, 44, 0, 1, 2, 3};
    assert_int_equal(nb_lookup_draft(h2, 16, 2, 4, 1, d), 1);
    assert_int_equal(d[0], 42);
    /* with 3-grams at most: the latest "1 2 3" is followed by 43 */
    assert_int_equal(nb_lookup_draft(h2, 16, 2, 3, 1, d), 1);
    assert_int_equal(d[0], 43);
    /* no earlier occurrence of any suffix n-gram, or bad arguments: no draft */
    const int32_t h3[] = {1, 2, 3, 4, 5};
    assert_int_equal(nb_lookup_draft(h3, 5, 2, 4, 8, d), 0);
    assert_int_equal(nb_lookup_draft(h3, 5, 2, 4, 0, d), 0);
    assert_int_equal(nb_lookup_draft(NULL, 5, 2, 4, 8, d), 0);
    assert_int_equal(nb_lookup_draft(h3, 1, 1, 4, 8, d), 0);
}

#define N_GEN 64

struct collect {
    int32_t ids[512];
    int n, stop_at;
};

static int collect_cb(int32_t tok, void *user)
{
    struct collect *c = user;
    if (c->n < 512) c->ids[c->n++] = tok;
    return c->stop_at > 0 && c->n == c->stop_at;
}

/* One generation: draft 0 is nb_generate. Returns the sequence's length after it. */
static int gen(struct nb_ctx *ctx, const struct nb_sampler_params *sp, int n_vocab,
               const int32_t *prompt, int n_prompt, int n_predict, int draft, int stop_at,
               struct collect *out, struct nb_gen_stats *gs)
{
    struct nb_sampler *s = NULL;
    assert_int_equal(nb_sampler_init(&s, sp, n_vocab), NB_OK);
    nb_ctx_clear_seq(ctx, 0);
    memset(out, 0, sizeof *out);
    out->stop_at = stop_at;
    enum nb_status st =
        draft ? nb_generate_lookup(ctx, 0, s, prompt, n_prompt, n_predict, 1, draft, collect_cb, out, gs)
              : nb_generate(ctx, 0, s, prompt, n_prompt, n_predict, 1, collect_cb, out, gs);
    if (st != NB_OK) fail_msg("generate (draft %d): %s", draft, nb_last_error());
    nb_sampler_free(s);
    return nb_ctx_seq_len(ctx, 0);
}

/* exact: the path's GEMM gives a row the same sums for any number of rows (f32, w4a8);
 * w4a16's FMA tiles need not (the clang build's first difference came at token 56), so
 * for it the agreement is printed, not asserted. */
static void check_path(const char *path, int exact)
{
    struct nb_model *m = NULL;
    struct nb_open_params op = nb_open_default_params();
    op.path = path;
    op.use_cache = 0;
    op.n_threads = 2;
    if (nb_model_open(&m, tu_model_path("kjv-7m/kjv-7m-f32.gguf"), &op, NULL) != NB_OK)
        fail_msg("%s: %s", path, nb_last_error());
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_tokenizer_load(&tok, tu_model_path("kjv-7m/kjv-7m-f32.gguf")), NB_OK);
    const char *text = "And God said, Let there be light: and there was light. And God saw the "
                       "light, that it was good: and God divided the light from the darkness. "
                       "And God said";
    int32_t prompt[256];
    int n_prompt = 0;
    assert_int_equal(nb_tokenize_text(tok, text, strlen(text), 1, 0, prompt, 256, &n_prompt), NB_OK);
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = 2;
    cp.n_ctx = 256;
    struct nb_ctx *ctx = NULL;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    static struct collect a, b;
    struct nb_gen_stats ga, gb;
    for (int sampled = 0; sampled < 2; sampled++) {
        struct nb_sampler_params sp = nb_sampler_default_params();
        if (sampled) {
            sp.temperature = 0.8f;
            sp.seed = 7;
        }
        int la = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, N_GEN, 0, 0, &a, &ga);
        const int drafts[] = {1, 3, 8};
        for (int d = 0; d < 3; d++) {
            int lb = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, N_GEN, drafts[d], 0, &b, &gb);
            if (!exact) {
                int same = 0;
                while (same < a.n && same < b.n && a.ids[same] == b.ids[same]) same++;
                print_message("  %s %s, %d drafts: the first %d of %d tokens the same\n", path,
                              sampled ? "sampled" : "greedy", drafts[d], same, a.n);
                assert_int_equal(b.n, gb.n_gen);
                continue;
            }
            assert_int_equal(a.n, b.n);
            assert_memory_equal(a.ids, b.ids, sizeof *a.ids * (size_t)a.n);
            assert_int_equal(la, lb);
            assert_int_equal(ga.n_gen, gb.n_gen);
            assert_true(gb.n_decode <= ga.n_decode);
            assert_true(gb.n_accepted <= gb.n_drafted);
            if (!sampled && drafts[d] == 8) {
                print_message("  %s greedy: %d tokens, %d decode steps (%d without), %d of %d "
                              "drafts accepted\n", path, gb.n_gen, gb.n_decode, ga.n_decode,
                              gb.n_accepted, gb.n_drafted);
                assert_true(gb.n_accepted > 0); /* the text repeats itself */
            }
        }
        if (!exact) continue;
        /* stopped by the callback mid-draft: the same tokens and the same cache */
        int lc = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, N_GEN, 0, 37, &a, &ga);
        int ld = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, N_GEN, 8, 37, &b, &gb);
        assert_int_equal(a.n, 37);
        assert_int_equal(b.n, 37);
        assert_memory_equal(a.ids, b.ids, sizeof *a.ids * 37);
        assert_int_equal(lc, ld);
        assert_int_equal(gb.stopped_by, 2);
    }
    /* a context that fills up: both stop there (stopped_by 3) with the same tokens */
    struct nb_sampler_params sp = nb_sampler_default_params();
    int la = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, 400, 0, 0, &a, &ga);
    int lb = gen(ctx, &sp, info.n_vocab, prompt, n_prompt, 400, 8, 0, &b, &gb);
    assert_int_equal(ga.stopped_by, 3);
    assert_int_equal(gb.stopped_by, 3);
    if (exact) {
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.ids, b.ids, sizeof *a.ids * (size_t)a.n);
        assert_int_equal(la, lb);
    }
    nb_ctx_free(ctx);
    nb_tokenizer_free(tok);
    nb_model_free(m);
}

/* kjv-7m quantized to w4a8 in memory (the path whose GEMM is bit-identical for any
 * number of rows). */
static struct nb_model *open_kjv_w4a8(void)
{
    struct nb_model *m = NULL;
    struct nb_open_params op = nb_open_default_params();
    op.path = "w4a8";
    op.use_cache = 0;
    op.n_threads = 2;
    if (nb_model_open(&m, tu_model_path("kjv-7m/kjv-7m-f32.gguf"), &op, NULL) != NB_OK)
        fail_msg("%s", nb_last_error());
    return m;
}

/* nb_decode_verify's logits for a step of 5 tokens equal those of 5 one-token steps, bit
 * for bit, on 1, 2 and 3 threads: at positions 150-154 (past 128 keys a one-token step on
 * two threads splits its keys into two runs, which a batch of 5 tokens did not) and 60-64
 * (one run either way). */
static void test_verify_logits(void **state)
{
    (void)state;
    struct nb_model *m = open_kjv_w4a8();
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    const int V = info.n_vocab, K = 5;
    float *one = malloc(sizeof(float) * (size_t)(K * V));
    float *ver = malloc(sizeof(float) * (size_t)(K * V));
    int32_t tok[160], pos[160];
    for (int i = 0; i < 160; i++) {
        tok[i] = (i * 37 + 11) % V;
        pos[i] = i;
    }
    for (int threads = 1; threads <= 3; threads++)
        for (int at = 60; at <= 150; at += 90) {
            struct nb_ctx_params cp = nb_ctx_default_params();
            cp.n_threads = threads;
            cp.n_ctx = 256;
            struct nb_ctx *ctx = NULL;
            assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
            struct nb_batch pre = {.n_tokens = at, .token = tok, .pos = pos};
            assert_int_equal(nb_decode(ctx, &pre, ver), NB_OK); /* the last token's logits */
            for (int i = 0; i < K; i++) {
                struct nb_batch b = {.n_tokens = 1, .token = tok + at + i, .pos = pos + at + i};
                assert_int_equal(nb_decode(ctx, &b, one + (size_t)i * V), NB_OK);
            }
            assert_int_equal(nb_ctx_truncate_seq(ctx, 0, at), NB_OK);
            uint8_t want[8] = {1, 1, 1, 1, 1};
            struct nb_batch b = {
                .n_tokens = K, .token = tok + at, .pos = pos + at, .want_logits = want};
            assert_int_equal(nb_decode_verify(ctx, &b, ver), NB_OK);
            if (memcmp(one, ver, sizeof(float) * (size_t)(K * V)))
                fail_msg("%d threads, positions %d..%d: a verified step's logits differ from "
                         "one-token steps'", threads, at, at + K - 1);
            nb_ctx_free(ctx);
        }
    free(one);
    free(ver);
    nb_model_free(m);
}

/* A decode step of several sequences (one token each, as nb_serve batches its streams)
 * gives each sequence the logits its own one-token step gives, bit for bit, on 1-3
 * threads: sequences at 60, 150 and 200 keys (past 128, a one-token step on two threads
 * splits its keys into two runs, which the batch's run count did not); and so does a step
 * that prefills another sequence's prompt chunk beside it (whose attention ran all tokens
 * in prefill tiles). */
static void test_batch_logits(void **state)
{
    (void)state;
    struct nb_model *m = open_kjv_w4a8();
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    const int V = info.n_vocab, S = 3, len[3] = {150, 60, 200};
    float *one = malloc(sizeof(float) * (size_t)(S * V));
    float *bat = malloc(sizeof(float) * (size_t)(S * V));
    int32_t tok[201], pos[201];
    for (int i = 0; i <= 200; i++) {
        tok[i] = (i * 37 + 11) % V;
        pos[i] = i;
    }
    for (int threads = 1; threads <= 3; threads++) {
        struct nb_ctx_params cp = nb_ctx_default_params();
        cp.n_threads = threads;
        cp.n_ctx = 256;
        cp.n_seq = S;
        struct nb_ctx *ctx = NULL;
        assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
        int32_t seq[201], bt[3], bp[3], bs[3];
        uint8_t want[3] = {1, 1, 1};
        for (int s = 0; s < S; s++) { /* each sequence's prompt, then its next token alone */
            for (int i = 0; i <= len[s]; i++) seq[i] = s;
            struct nb_batch pre = {.n_tokens = len[s], .token = tok, .pos = pos, .seq = seq};
            assert_int_equal(nb_decode(ctx, &pre, bat), NB_OK);
            struct nb_batch b = {.n_tokens = 1, .token = tok + len[s], .pos = pos + len[s],
                                 .seq = seq};
            assert_int_equal(nb_decode(ctx, &b, one + (size_t)s * V), NB_OK);
            assert_int_equal(nb_ctx_truncate_seq(ctx, s, len[s]), NB_OK);
            bt[s] = tok[len[s]], bp[s] = pos[len[s]], bs[s] = s;
        }
        struct nb_batch b = {.n_tokens = S, .token = bt, .pos = bp, .seq = bs, .want_logits = want};
        assert_int_equal(nb_decode(ctx, &b, bat), NB_OK);
        for (int s = 0; s < S; s++)
            if (memcmp(one + (size_t)s * V, bat + (size_t)s * V, sizeof(float) * (size_t)V))
                fail_msg("%d threads: sequence %d (%d keys) batched with %d others gets other "
                         "logits than alone", threads, s, len[s] + 1, S - 1);
        /* a step that also prefills: sequence 0's token beside 20 prompt tokens of 1 */
        for (int s = 0; s < S; s++) assert_int_equal(nb_ctx_truncate_seq(ctx, s, len[s]), NB_OK);
        int32_t mt[21], mp[21], ms[21];
        uint8_t mw[21] = {1};
        mt[0] = tok[len[0]], mp[0] = pos[len[0]], ms[0] = 0;
        for (int i = 1; i <= 20; i++)
            mt[i] = tok[len[1] + i - 1], mp[i] = pos[len[1] + i - 1], ms[i] = 1;
        struct nb_batch mb = {.n_tokens = 21, .token = mt, .pos = mp, .seq = ms, .want_logits = mw};
        assert_int_equal(nb_decode(ctx, &mb, bat), NB_OK);
        if (memcmp(one, bat, sizeof(float) * (size_t)V))
            fail_msg("%d threads: a decoding sequence (%d keys) beside a prompt's chunk gets "
                     "other logits than alone", threads, len[0] + 1);
        nb_ctx_free(ctx);
    }
    free(one);
    free(bat);
    nb_model_free(m);
}

static void test_same_tokens_f32(void **state)
{
    (void)state;
    check_path("source", 1);
}

static void test_same_tokens_w4a8(void **state)
{
    (void)state;
    check_path("w4a8", 1);
}

static void test_same_tokens_w4a16(void **state)
{
    (void)state;
    check_path("w4a16", 0);
}

int main(void)
{
    if (tu_isa_from_env()) return 1; /* test_model_speculative_avx2: NIBBLE_ISA=avx2 */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_draft),
        cmocka_unit_test(test_verify_logits),
        cmocka_unit_test(test_batch_logits),
        cmocka_unit_test(test_same_tokens_f32),
        cmocka_unit_test(test_same_tokens_w4a8),
        cmocka_unit_test(test_same_tokens_w4a16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
