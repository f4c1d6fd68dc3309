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
        double d = tu_check_golden(dir, golden, name, k_runs[i][0], k_runs[i][1], 64, LOGIT_TOL);
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
