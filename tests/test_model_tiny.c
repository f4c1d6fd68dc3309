/* test_model_tiny — Qwen2 (q/k/v bias), Qwen3 (q/k norm, head_dim != hidden/heads)
 * and Spark (GEGLU, head gate, sliding window) against an independent float64
 * PyTorch reference: logits after the prompt and at its middle (prefill), and greedy
 * ids. Each model is loaded from its HF directory and from a GGUF written from it,
 * with several thread counts and prefill chunk sizes (chunks smaller than the
 * sliding window and larger than it exercise the ring buffer). */
#include "helpers/convert.h"
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define LOGIT_TOL 1e-3

static const char *const k_models[] = {"qwen2-tiny", "qwen3-tiny", "spark-tiny"};

static void run_all(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tiny/%s/reference.json", name);
    const char *rp = tu_model_path(rel);
    if (!rp) skip();
    cJSON *ref = tu_load_json(rp);
    snprintf(rel, sizeof rel, "tiny/%s", name);
    char hf[4096];
    snprintf(hf, sizeof hf, "%s", tu_model_path(rel));

    tu_check_golden(hf, ref, name, 2, 512, 128, LOGIT_TOL);
    tu_check_golden(hf, ref, name, 1, 7, 128, LOGIT_TOL);
    tu_check_golden(hf, ref, name, 2, 33, 128, LOGIT_TOL);

    char *dir = tu_mkdtemp();
    char gguf[4200];
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, name);
    tu_hf_to_gguf(hf, gguf, "F32");
    tu_check_golden(gguf, ref, gguf, 2, 512, 128, LOGIT_TOL);
    tu_check_golden(gguf, ref, gguf, 1, 5, 128, LOGIT_TOL);
    tu_rmtree(dir);
    free(dir);
    cJSON_Delete(ref);
}

static void test_qwen2(void **state) { run_all(k_models[0]); }
static void test_qwen3(void **state) { run_all(k_models[1]); }
static void test_spark(void **state) { run_all(k_models[2]); }

/* Two sequences in one batch give what each gives alone. */
static void test_two_sequences(void **state)
{
    const char *p = tu_model_path("tiny/spark-tiny");
    if (!p) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, p), NB_OK);
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_seq = 2;
    cp.n_threads = 2;
    struct nb_ctx *ctx = NULL;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    enum { NA = 20, NB = 9, V = 512 };
    int32_t tok[NA + NB], pos[NA + NB];
    uint8_t want[NA + NB] = {0};
    for (int i = 0; i < NA; i++) tok[i] = (i * 37 + 11) % V, pos[i] = i;
    for (int i = 0; i < NB; i++) tok[NA + i] = (i * 53 + 5) % V, pos[NA + i] = i;
    want[NA - 1] = want[NA + NB - 1] = 1;
    /* interleave the two sequences' tokens */
    int32_t t2[NA + NB], p2[NA + NB], s2[NA + NB];
    uint8_t w2[NA + NB];
    int ia = 0, ib = 0, k = 0;
    while (ia < NA || ib < NB) {
        if (ia < NA) t2[k] = tok[ia], p2[k] = pos[ia], s2[k] = 0, w2[k++] = want[ia++];
        if (ib < NB) t2[k] = tok[NA + ib], p2[k] = pos[NA + ib], s2[k] = 1, w2[k++] = want[NA + ib++];
    }
    float both[2 * V], alone[V];
    struct nb_batch b = {.n_tokens = NA + NB, .token = t2, .pos = p2, .seq = s2, .want_logits = w2};
    assert_int_equal(nb_decode(ctx, &b, both), NB_OK);
    assert_int_equal(nb_ctx_seq_len(ctx, 0), NA);
    assert_int_equal(nb_ctx_seq_len(ctx, 1), NB);
    /* the rows come out in batch order: seq 1's last token comes first (k = 17) */
    nb_ctx_clear_seq(ctx, 0);
    struct nb_batch a = {.n_tokens = NA, .token = tok, .pos = pos};
    assert_int_equal(nb_decode(ctx, &a, alone), NB_OK);
    assert_true(tu_max_abs_diff(both + V, alone, V) < 1e-4);
    nb_ctx_clear_seq(ctx, 1);
    int32_t s1[NB];
    for (int i = 0; i < NB; i++) s1[i] = 1;
    struct nb_batch bb = {.n_tokens = NB, .token = tok + NA, .pos = pos + NA, .seq = s1};
    assert_int_equal(nb_decode(ctx, &bb, alone), NB_OK);
    assert_true(tu_max_abs_diff(both, alone, V) < 1e-4);

    /* a wrong position, sequence or token changes nothing and names the problem */
    int32_t bad_pos = 5, t0 = 1, s0 = 0;
    struct nb_batch bad = {.n_tokens = 1, .token = &t0, .pos = &bad_pos, .seq = &s0};
    assert_int_equal(nb_decode(ctx, &bad, alone), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "expects position 20"));
    int32_t big = V;
    int32_t p20 = 20;
    struct nb_batch badt = {.n_tokens = 1, .token = &big, .pos = &p20, .seq = &s0};
    assert_int_equal(nb_decode(ctx, &badt, alone), NB_ERR_INVALID_ARG);
    int32_t s9 = 9;
    struct nb_batch bads = {.n_tokens = 1, .token = &t0, .pos = &p20, .seq = &s9};
    assert_int_equal(nb_decode(ctx, &bads, alone), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_ctx_seq_len(ctx, 0), NA);
    nb_ctx_free(ctx);
    nb_model_free(m);
}

/* Filling the context is an error, not an overflow. */
static void test_context_full(void **state)
{
    const char *p = tu_model_path("tiny/qwen3-tiny");
    if (!p) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, p), NB_OK);
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 8;
    cp.n_threads = 1;
    struct nb_ctx *ctx = NULL;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, pos[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    float logits[512];
    struct nb_batch b = {.n_tokens = 9, .token = tok, .pos = pos};
    assert_int_equal(nb_decode(ctx, &b, logits), NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "context full"));
    b.n_tokens = 8;
    assert_int_equal(nb_decode(ctx, &b, logits), NB_OK);
    nb_ctx_free(ctx);
    nb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2),          cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_spark),          cmocka_unit_test(test_two_sequences),
        cmocka_unit_test(test_context_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
