/* test_model_kjv — the real kjv-7m model, in its three files (GGUF, HF safetensors,
 * llama2.c .bin), must give the greedy ids that llama.cpp and PyTorch agree on and
 * first-step logits within 2e-3 of PyTorch's float64 ones. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define LOGIT_TOL 2e-3

static const char *const k_files[] = {"kjv-7m/kjv-7m-f32.gguf", "kjv-7m/hf", "kjv-7m/kjv-7m.bin"};


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
            if (got.ids[i] != greedy[i])
                fail_msg("%s: case '%s': greedy id %d is %d, reference %d", rel,
                         cJSON_GetObjectItem(c, "text")->valuestring, i, got.ids[i], greedy[i]);
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_llama2c),
        cmocka_unit_test(test_gguf_chunked_1thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
