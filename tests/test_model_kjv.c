/* test_model_kjv — the real kjv-7m model, in its three files (GGUF, HF safetensors,
 * llama2.c .bin), must give the greedy ids that llama.cpp and PyTorch agree on and
 * first-step logits within 2e-3 of PyTorch's float64 ones. An id that differs where the
 * two candidates' logits are within TIE_TOL is a tie, not a failure; that case's
 * comparison ends there (the continuations fork). ctest runs it at the best kernel level
 * and again at avx2 (test_model_kjv_avx2). */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define LOGIT_TOL 2e-3
/* A greedy near-tie: in the 'And it came to pass' case, step 18, the top two logits
 * (830 and 396) are 2e-5 apart with the reference kernels and 4e-5 with AVX-512; with the
 * AVX2 attention (clang build) 396 wins by 1e-6. Rounding differences between kernels
 * move these logits by about 4e-5. */
#define TIE_TOL 1e-4

static const char *const k_files[] = {"kjv-7m/kjv-7m-f32.gguf", "kjv-7m/hf", "kjv-7m/kjv-7m.bin"};


/* logits[a] - logits[b] after the prompt and ids[0..n) (one prefill pass). */
static double logit_gap(struct nb_ctx *ctx, const int32_t *prompt, int n_prompt,
                        const int32_t *ids, int n, int a, int b, float *logits)
{
    int32_t *tok = malloc(sizeof *tok * (size_t)(n_prompt + n));
    int32_t *pos = malloc(sizeof *pos * (size_t)(n_prompt + n));
    for (int i = 0; i < n_prompt + n; i++) {
        tok[i] = i < n_prompt ? prompt[i] : ids[i - n_prompt];
        pos[i] = i;
    }
    nb_ctx_clear_seq(ctx, 0);
    struct nb_batch bt = {.n_tokens = n_prompt + n, .token = tok, .pos = pos};
    assert_int_equal(nb_decode(ctx, &bt, logits), NB_OK);
    free(tok);
    free(pos);
    return (double)logits[a] - logits[b];
}

static void check_file(const char *rel, int n_threads, int n_batch)
{
    const char *ref_path = tu_model_path("kjv-7m/reference.json");
    const char *mp = tu_model_path(rel);
    if (!ref_path || !mp) skip();
    char model_path[4096];
    snprintf(model_path, sizeof model_path, "%s", mp);
    cJSON *ref = tu_load_json(tu_model_path("kjv-7m/reference.json"));
    struct nb_model *m = NULL;
    if (nb_model_load(&m, model_path) != NB_OK) fail_msg("%s", nb_last_error());
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    assert_int_equal(info.n_vocab, 4096);
    assert_int_equal(info.n_layers, 8);

    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = n_threads;
    cp.n_batch = n_batch;
    struct nb_ctx *ctx = NULL;
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK) fail_msg("%s", nb_last_error());
    struct nb_sampler_params sp = nb_sampler_default_params(); /* temperature 0: greedy */
    float *logits = malloc(sizeof(float) * 4096);

    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        int n_prompt, n_greedy, n_ref_logits;
        int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(c, "prompt"), &n_prompt);
        int32_t *greedy = tu_json_ids(cJSON_GetObjectItem(c, "greedy"), &n_greedy);
        float *ref_logits = tu_json_floats(cJSON_GetObjectItem(c, "first_logits"), &n_ref_logits);
        int agree = (int)cJSON_GetObjectItem(c, "agree_len")->valuedouble;
        assert_int_equal(n_ref_logits, 4096);

        /* first-step logits from one prefill pass */
        nb_ctx_clear_seq(ctx, 0);
        int32_t *pos = malloc(sizeof *pos * (size_t)n_prompt);
        for (int i = 0; i < n_prompt; i++) pos[i] = i;
        struct nb_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pos};
        assert_int_equal(nb_decode(ctx, &b, logits), NB_OK);
        double d = tu_max_abs_diff(logits, ref_logits, 4096);
        if (d > LOGIT_TOL)
            fail_msg("%s: case '%s': first logits differ by %g (> %g)", rel,
                     cJSON_GetObjectItem(c, "text")->valuestring, d, LOGIT_TOL);

        /* greedy continuation */
        nb_ctx_clear_seq(ctx, 0);
        struct nb_sampler *s = NULL;
        assert_int_equal(nb_sampler_init(&s, &sp, 4096), NB_OK);
        struct tu_collect got = {.n = 0};
        assert_int_equal(
            nb_generate(ctx, 0, s, prompt, n_prompt, agree, 0, tu_collect_cb, &got, NULL),
                         NB_OK);
        assert_int_equal(got.n, agree);
        for (int i = 0; i < agree; i++)
            if (got.ids[i] != greedy[i]) {
                const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
                double gap =
                    logit_gap(ctx, prompt, n_prompt, got.ids, i, got.ids[i], greedy[i], logits);
                if (!(gap <= TIE_TOL))
                    fail_msg("%s: case '%s': greedy id %d is %d, reference %d (logit gap %g)",
                             rel, text, i, got.ids[i], greedy[i], gap);
                fprintf(stderr, "%s: case '%s': greedy id %d is %d, reference %d: a tie (logit "
                        "gap %.2g <= %g); the rest of the case not compared\n",
                        rel, text, i, got.ids[i], greedy[i], gap, TIE_TOL);
                break;
            }
        nb_sampler_free(s);
        free(pos);
        free(prompt);
        free(greedy);
        free(ref_logits);
        n_cases++;
    }
    assert_int_equal(n_cases, 8);
    free(logits);
    nb_ctx_free(ctx);
    nb_model_free(m);
    cJSON_Delete(ref);
}

static void test_gguf(void **state) { check_file(k_files[0], 2, 512); }
static void test_safetensors(void **state) { check_file(k_files[1], 2, 512); }
static void test_llama2c(void **state) { check_file(k_files[2], 2, 512); }
/* one thread and tiny prefill chunks: the same ids and logits */
static void test_gguf_chunked_1thread(void **state) { check_file(k_files[0], 1, 3); }

int main(void)
{
    if (tu_isa_from_env()) return 1; /* the *_avx2 tests: NIBBLE_ISA=avx2 */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_llama2c),
        cmocka_unit_test(test_gguf_chunked_1thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
