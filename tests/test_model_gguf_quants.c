/* test_model_gguf_quants — kjv-7m quantized by llama.cpp (tests/data/gguf-quants: Q4_K_M
 * and a file mixing every block type nibble reads) runs in nibble with its weights as
 * stored (dequantized to f32 exactly as llama.cpp does, test_dequant_k) and continues
 * the prompts of kjv-7m/reference.json greedily as llama.cpp does on the same file.
 *
 * llama.cpp multiplies k-quant weights with activations rounded to 8 bits (Q8_K), nibble
 * in f32, so their logits differ by ~1e-2: where llama.cpp's best two tokens are that
 * close, the two may pick differently and their continuations part. The test takes the
 * prompt's ids up to the first difference; a difference is accepted only as such a tie:
 * llama.cpp's pick must be within TIE_TOL of nibble's best logit there. With
 * $NIBBLE_GGUF_QUANTS_DIR, the files of golden.json not committed are run too.
 *
 * Each file runs twice: loaded as stored (f32 activations, nb_model_load) and opened as
 * `nibble run` opens it (nb_model_open, path "source"), where the Q4_K / Q6_K blocks are
 * repacked into the integer kernels' records and read int8 activations per 256, as
 * llama.cpp's Q8_K. The second must agree with llama.cpp at least as often. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define TIE_TOL 0.1 /* logits; widest gap measured at a difference: 0.040 (17 files) */
#define N_GEN 48

struct tally {
    int prompts, identical, ids_same, ids_total;
    double worst_gap;
};

static void run_file(const char *path, const cJSON *entry, const cJSON *ref, int opened,
                     struct tally *t)
{
    struct nb_model *m = NULL;
    if (opened) {
        struct nb_open_params op = nb_open_default_params();
        struct nb_open_report rep = {.size = sizeof rep};
        op.path = "source";
        op.use_cache = 0;
        op.n_threads = 1;
        if (nb_model_open(&m, path, &op, &rep) != NB_OK) fail_msg("%s", nb_last_error());
        assert_true(rep.as_stored);
    } else if (nb_model_load(&m, path) != NB_OK) {
        fail_msg("%s", nb_last_error());
    }
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = 1;
    struct nb_ctx *ctx = NULL;
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK) fail_msg("%s", nb_last_error());
    float *logits = malloc(sizeof(float) * 4096);
    assert_non_null(logits);
    const cJSON *c, *want_all = cJSON_GetObjectItem(entry, "greedy");
    int k = 0, same_file = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        int n_prompt, n_want;
        int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(c, "prompt"), &n_prompt);
        int32_t *want = tu_json_ids(cJSON_GetArrayItem(want_all, k++), &n_want);
        assert_int_equal(n_want, N_GEN);
        nb_ctx_clear_seq(ctx, 0);
        int32_t *pos = malloc(sizeof *pos * (size_t)n_prompt);
        for (int i = 0; i < n_prompt; i++) pos[i] = i;
        struct nb_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pos};
        assert_int_equal(nb_decode(ctx, &b, logits), NB_OK);
        int i;
        for (i = 0; i < N_GEN; i++) {
            int best = 0;
            for (int v = 1; v < 4096; v++)
                if (logits[v] > logits[best]) best = v;
            if (best != want[i]) {
                double gap = (double)logits[best] - (double)logits[want[i]];
                if (gap > t->worst_gap) t->worst_gap = gap;
                if (gap > TIE_TOL)
                    fail_msg("%s: case '%s': id %d is %d, llama.cpp's %d, whose logit is %.4f "
                             "below (more than a tie, %g)", path,
                             cJSON_GetObjectItem(c, "text")->valuestring, i, best, want[i], gap,
                             TIE_TOL);
                break;
            }
            int32_t p = n_prompt + i;
            struct nb_batch one = {.n_tokens = 1, .token = &want[i], .pos = &p};
            assert_int_equal(nb_decode(ctx, &one, logits), NB_OK);
        }
        t->prompts++;
        t->ids_same += i;
        t->ids_total += N_GEN;
        if (i == N_GEN) t->identical++, same_file++;
        free(pos);
        free(prompt);
        free(want);
    }
    print_message("%s (%s): %d/%d continuations identical to llama.cpp's\n", path,
                  opened ? "opened: k-quants repacked, int8 activations" : "loaded as stored",
                  same_file, k);
    free(logits);
    nb_ctx_free(ctx);
    nb_model_free(m);
}

static void test_greedy_vs_llamacpp(void **state)
{
    const char *ref_path = tu_model_path("kjv-7m/reference.json");
    if (!ref_path) skip();
    cJSON *ref = tu_load_json(ref_path);
    const char *src = getenv("NIBBLE_SOURCE_DIR");
    char dir[4096], path[4400];
    snprintf(dir, sizeof dir, "%s/tests/data/gguf-quants", src ? src : ".");
    snprintf(path, sizeof path, "%s/golden.json", dir);
    cJSON *golden = tu_load_json(path);
    const char *extra = getenv("NIBBLE_GGUF_QUANTS_DIR");
    struct tally t = {0}, to = {0};
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(golden, "files"))
    {
        if (cJSON_IsTrue(cJSON_GetObjectItem(e, "committed"))) {
            snprintf(path, sizeof path, "%s/%s", dir, e->string);
        } else {
            if (!extra) continue;
            snprintf(path, sizeof path, "%s/%s", extra, e->string);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            fclose(f);
        }
        run_file(path, e, ref, 0, &t);
        run_file(path, e, ref, 1, &to);
    }
    print_message("greedy vs llama.cpp: %d/%d continuations identical, %d/%d ids before the "
                  "first tie, widest tie %.4f\n",
                  t.identical, t.prompts, t.ids_same, t.ids_total, t.worst_gap);
    print_message("opened (k-quants repacked): %d/%d continuations identical, %d/%d ids before "
                  "the first tie, widest tie %.4f\n",
                  to.identical, to.prompts, to.ids_same, to.ids_total, to.worst_gap);
    assert_true(t.prompts >= 16);
    assert_true(to.identical >= t.identical);
    cJSON_Delete(golden);
    cJSON_Delete(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_vs_llamacpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
