/* test_fixtures — the tiny random models committed under tests/fixtures/models/ against
 * golden outputs of tools/ref_forward.py, an independent float64 numpy reference
 * (regenerate with /usr/bin/python3 tools/make_fixtures.py; docs/reference.md).
 *
 * They cover the options the shared models lack: llama with an untied head, q/k/v/o
 * biases and llama3 rope scaling; linear rope scaling; Qwen2's use_sliding_window +
 * max_window_layers; Qwen3 with an unusual head_dim; Spark with GEGLU, head gate and
 * mixed layer_types; BF16 and F16 storage. For each prompt: the logits at its middle
 * and last positions from one prefill, then greedy ids, with 1 and 2 threads and
 * prefill chunks of 3 tokens (smaller than the sliding window of 8). */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define LOGIT_TOL 1e-4

static double g_max_diff; /* the largest logit difference seen, reported at the end */


static double check_model(const char *dir, const cJSON *golden, const char *name, int n_threads,
                          int n_batch)
{
    double worst = 0;
    struct nb_model *m = NULL;
    if (nb_model_load(&m, dir) != NB_OK) fail_msg("%s: %s", name, nb_last_error());
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    int V = info.n_vocab;
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = n_threads;
    cp.n_batch = n_batch;
    cp.n_ctx = 64;
    struct nb_ctx *ctx = NULL;
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK) fail_msg("%s: %s", name, nb_last_error());
    struct nb_sampler_params sp = nb_sampler_default_params();
    float *logits = malloc(sizeof(float) * 2 * (size_t)V);

    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases"))
    {
        int n_prompt, n_greedy, nl, nm;
        int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(c, "prompt"), &n_prompt);
        int32_t *greedy = tu_json_ids(cJSON_GetObjectItem(c, "greedy"), &n_greedy);
        float *last = tu_json_floats(cJSON_GetObjectItem(c, "last_logits"), &nl);
        float *mid = tu_json_floats(cJSON_GetObjectItem(c, "mid_logits"), &nm);
        int mid_pos = (int)cJSON_GetObjectItem(c, "mid_logits_pos")->valuedouble;
        assert_int_equal(nl, V);
        assert_int_equal(nm, V);
        assert_true(mid_pos >= 0 && mid_pos < n_prompt);

        int32_t *pos = malloc(sizeof *pos * (size_t)n_prompt);
        uint8_t *want = calloc((size_t)n_prompt, 1);
        for (int i = 0; i < n_prompt; i++)
            pos[i] = i;
        want[mid_pos] = 1;
        want[n_prompt - 1] = 1;
        nb_ctx_clear_seq(ctx, 0);
        struct nb_batch b = {
            .n_tokens = n_prompt, .token = prompt, .pos = pos, .want_logits = want};
        assert_int_equal(nb_decode(ctx, &b, logits), NB_OK);
        int last_row = mid_pos == n_prompt - 1 ? 0 : 1;
        double dm = tu_max_abs_diff(logits, mid, V);
        double dl = tu_max_abs_diff(logits + (size_t)last_row * V, last, V);
        if (dm > worst) worst = dm;
        if (dl > worst) worst = dl;
        if (dm > LOGIT_TOL || dl > LOGIT_TOL)
            fail_msg("%s (threads %d, batch %d): prompt of %d: logits differ from the reference "
                     "by %g (position %d) / %g (last)",
                     name, n_threads, n_batch, n_prompt, dm, mid_pos, dl);

        nb_ctx_clear_seq(ctx, 0);
        struct nb_sampler *s = NULL;
        assert_int_equal(nb_sampler_init(&s, &sp, V), NB_OK);
        struct tu_collect got = {.n = 0};
        assert_int_equal(
            nb_generate(ctx, 0, s, prompt, n_prompt, n_greedy, 0, tu_collect_cb, &got, NULL), NB_OK);
        assert_int_equal(got.n, n_greedy);
        for (int i = 0; i < n_greedy; i++)
            if (got.ids[i] != greedy[i])
                fail_msg("%s (threads %d, batch %d): prompt of %d: greedy id %d is %d, reference "
                         "%d",
                         name, n_threads, n_batch, n_prompt, i, got.ids[i], greedy[i]);
        nb_sampler_free(s);
        free(pos);
        free(want);
        free(prompt);
        free(greedy);
        free(last);
        free(mid);
    }
    free(logits);
    nb_ctx_free(ctx);
    nb_model_free(m);
    return worst;
}

static void run_fixture(const char *name)
{
    const char *src = getenv("NIBBLE_SOURCE_DIR");
    if (!src) fail_msg("NIBBLE_SOURCE_DIR is not set (ctest sets it to the source directory)");
    char dir[4096], gpath[4200];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/models/%s", src, name);
    snprintf(gpath, sizeof gpath, "%s/golden.json", dir);
    cJSON *golden = tu_load_json(gpath);
    static const int k_runs[][2] = {{1, 512}, {2, 512}, {2, 3}, {1, 3}};
    double worst = 0;
    for (size_t i = 0; i < sizeof k_runs / sizeof k_runs[0]; i++) {
        double d = check_model(dir, golden, name, k_runs[i][0], k_runs[i][1]);
        if (d > worst) worst = d;
    }
    if (worst > g_max_diff) g_max_diff = worst;
    print_message("%s: max |logit - reference| %.3g\n", name, worst);
    cJSON_Delete(golden);
}

static void test_llama_llama3_bias(void **state)
{
    run_fixture("llama-llama3-bias");
}
static void test_llama_linear(void **state)
{
    run_fixture("llama-linear");
}
static void test_qwen2_sliding(void **state)
{
    run_fixture("qwen2-sliding");
}
static void test_qwen3_hd24(void **state)
{
    run_fixture("qwen3-hd24");
}
static void test_spark_window(void **state)
{
    run_fixture("spark-window");
}
static void test_qwen3_bf16(void **state)
{
    run_fixture("qwen3-bf16");
}
static void test_spark_f16(void **state)
{
    run_fixture("spark-f16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_llama3_bias), cmocka_unit_test(test_llama_linear),
        cmocka_unit_test(test_qwen2_sliding),     cmocka_unit_test(test_qwen3_hd24),
        cmocka_unit_test(test_spark_window),      cmocka_unit_test(test_qwen3_bf16),
        cmocka_unit_test(test_spark_f16),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("max |logit - reference| over all fixtures that passed: %.3g\n", g_max_diff);
    return failed;
}
