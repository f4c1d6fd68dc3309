/* test_model_paths_golden — kjv-7m written to each weight path (f32, w4a8, w4a16, w8a16,
 * bf16; round-to-nearest with the scale search, no GPTQ: the bytes do not depend on the
 * CPU) must give the greedy ids recorded on x86-64 (f32: those test_model_kjv checks
 * against llama.cpp and PyTorch) (tests/golden/kjv-7m-paths.json, from
 * the release build at its best kernel level), on every architecture and kernel level:
 * the Arm leg runs it under qemu-aarch64 (-cpu max: the dotprod / i8mm kernels,
 * -cpu cortex-a53: plain NEON), x86 at its levels. An id that differs where the two
 * candidates' logits are within TIE_TOL is a tie (kernels of another summation order
 * round differently), not a failure; that case's comparison ends there.
 * NIBBLE_GOLDEN_WRITE=FILE writes the golden file from this build instead.
 *
 * test_token_split: each path's prefill logits, and those of the GGUF block formats run
 * as stored, are the same bits whether the GEMMs split the tokens over the threads
 * (runner.c, nb_gemm_token_parts) or the rows alone. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h" /* the GEMMs' token split, set by hand in test_token_split */
#include "nibble.h"
#include "runtime/quantize.h"

#define N_CASES 4
#define N_GEN   24
/* As in test_model_kjv: the rounding differences between kernels move kjv-7m's logits
 * by about 4e-5; the int4 paths' kernels differ by their summation order only. */
#define TIE_TOL 1e-4

static const struct {
    enum nb_wpath path;
    const char *name;
} k_paths[] = {{NB_WPATH_F32, "f32"},
               {NB_WPATH_W4A8, "w4a8"},
               {NB_WPATH_W4A16, "w4a16"},
               {NB_WPATH_W8A16, "w8a16"},
               {NB_WPATH_BF16, "bf16"}};

static void quantize(const char *src, enum nb_wpath p, const char *out)
{
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = p;
    o.gptq = 0;
    o.n_threads = 2;
    struct nb_quantize_result r;
    if (tu_quantize_file(src, &o, out, &r) != NB_OK) fail_msg("%s", nb_last_error());
}

/* logits[a] - logits[b] after the prompt and ids[0..n) (one prefill). */
static double logit_gap(struct nb_ctx *ctx, const int32_t *prompt, int n_prompt,
                        const int32_t *ids, int n, int a, int b, float *logits)
{
    int32_t tok[64], pos[64];
    assert_true(n_prompt + n <= 64);
    for (int i = 0; i < n_prompt; i++) tok[i] = prompt[i];
    for (int i = 0; i < n; i++) tok[n_prompt + i] = ids[i];
    for (int i = 0; i < n_prompt + n; i++) pos[i] = i;
    nb_ctx_clear_seq(ctx, 0);
    struct nb_batch bt = {.n_tokens = n_prompt + n, .token = tok, .pos = pos};
    assert_int_equal(nb_decode(ctx, &bt, logits), NB_OK);
    return (double)logits[a] - logits[b];
}

static void test_paths(void **state)
{
    char gpath[4096], gguf[4096], nib[4200];
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf"); /* (a static buffer) */
    if (!src) skip();
    snprintf(gguf, sizeof gguf, "%s", src);
    const char *refp = tu_model_path("kjv-7m/reference.json");
    if (!refp) skip();
    const char *write = getenv("NIBBLE_GOLDEN_WRITE");
    snprintf(gpath, sizeof gpath, "%s/tests/golden/kjv-7m-paths.json",
             getenv("NIBBLE_SOURCE_DIR") ? getenv("NIBBLE_SOURCE_DIR") : ".");
    cJSON *ref = tu_load_json(refp);
    cJSON *golden = write ? cJSON_CreateObject() : tu_load_json(gpath);
    cJSON *gcases = write ? cJSON_AddArrayToObject(golden, "cases")
                          : cJSON_GetObjectItem(golden, "cases");
    if (write) cJSON_AddNumberToObject(golden, "n_gen", N_GEN);
    assert_non_null(gcases);
    float *logits = malloc(sizeof(float) * 4096);

    for (size_t p = 0; p < sizeof k_paths / sizeof k_paths[0]; p++) {
        snprintf(nib, sizeof nib, "%s/kjv-%s.nib", tu_dir, k_paths[p].name);
        quantize(gguf, k_paths[p].path, nib);
        struct nb_model *m = NULL;
        if (nb_model_load(&m, nib) != NB_OK) fail_msg("%s", nb_last_error());
        struct nb_ctx_params cp = nb_ctx_default_params();
        cp.n_threads = 2;
        struct nb_ctx *ctx = NULL;
        assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
        struct nb_sampler_params sp = nb_sampler_default_params();
        int exact = 0, ties = 0;
        for (int c = 0; c < N_CASES; c++) {
            int n_prompt;
            const cJSON *rc = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "cases"), c);
            int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(rc, "prompt"), &n_prompt);
            nb_ctx_clear_seq(ctx, 0);
            struct nb_sampler *s = NULL;
            assert_int_equal(nb_sampler_init(&s, &sp, 4096), NB_OK);
            struct tu_collect got = {.n = 0};
            assert_int_equal(
                nb_generate(ctx, 0, s, prompt, n_prompt, N_GEN, 0, tu_collect_cb, &got, NULL),
                NB_OK);
            nb_sampler_free(s);
            assert_int_equal(got.n, N_GEN);
            if (write) {
                cJSON *gc = p == 0 ? cJSON_CreateObject() : cJSON_GetArrayItem(gcases, c);
                if (p == 0) {
                    cJSON_AddItemToObject(gc, "prompt", cJSON_CreateIntArray(prompt, n_prompt));
                    cJSON_AddItemToArray(gcases, gc);
                }
                cJSON_AddItemToObject(gc, k_paths[p].name, cJSON_CreateIntArray(got.ids, N_GEN));
                free(prompt);
                continue;
            }
            int n_want;
            const cJSON *gc = cJSON_GetArrayItem(gcases, c);
            int32_t *want = tu_json_ids(cJSON_GetObjectItem(gc, k_paths[p].name), &n_want);
            assert_int_equal(n_want, N_GEN);
            int d = 0;
            while (d < N_GEN && got.ids[d] == want[d]) d++;
            if (d == N_GEN) {
                exact++;
            } else {
                double gap = logit_gap(ctx, prompt, n_prompt, got.ids, d, got.ids[d], want[d],
                                       logits);
                printf("# %s case %d: id %d is %d, x86 %d, logit gap %.2e\n", k_paths[p].name, c,
                       d, got.ids[d], want[d], gap);
                if (gap > TIE_TOL)
                    fail_msg("%s, case %d: greedy id %d is %d where x86 has %d, %.2e apart "
                             "(> the tie tolerance %g)",
                             k_paths[p].name, c, d, got.ids[d], want[d], gap, TIE_TOL);
                ties++;
            }
            free(want);
            free(prompt);
        }
        if (!write)
            printf("# %-6s kernel %s: %d/%d cases identical to x86 over %d ids, %d near-ties\n",
                   k_paths[p].name, nb_isa(), exact, N_CASES, N_GEN, ties);
        nb_ctx_free(ctx);
        nb_model_free(m);
    }
    if (write) {
        char *text = cJSON_Print(golden);
        FILE *f = fopen(write, "w");
        assert_non_null(f);
        fprintf(f, "%s\n", text);
        fclose(f);
        free(text);
        printf("# wrote %s\n", write);
    }
    free(logits);
    cJSON_Delete(golden);
    cJSON_Delete(ref);
}

/* The logits of every token of one 100-token prefill on `threads` threads, the GEMMs'
 * tokens in parts of `unit` (0: the rows alone split), into lg (n_vocab floats a token). */
#define SPLIT_TOKENS 100
static void prefill_all(const struct nb_model *m, int threads, int unit, int parts, float *lg)
{
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = threads;
    struct nb_ctx *ctx = NULL;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    ctx->gemm_token_unit = unit;
    assert_int_equal(nb_gemm_token_parts(ctx, threads, SPLIT_TOKENS), parts);
    int32_t tok[SPLIT_TOKENS], pos[SPLIT_TOKENS];
    uint8_t want[SPLIT_TOKENS];
    for (int i = 0; i < SPLIT_TOKENS; i++) {
        tok[i] = (i * 37 + 11) % 4096;
        pos[i] = i;
        want[i] = 1;
    }
    struct nb_batch b = {.n_tokens = SPLIT_TOKENS, .token = tok, .pos = pos, .want_logits = want};
    assert_int_equal(nb_decode(ctx, &b, lg), NB_OK);
    nb_ctx_free(ctx);
}

static void check_token_split(const struct nb_model *m, const char *name)
{
    size_t n = (size_t)SPLIT_TOKENS * 4096;
    float *whole = malloc(sizeof(float) * n), *split = malloc(sizeof(float) * n);
    assert_true(whole && split);
    prefill_all(m, 3, 0, 1, whole);
    /* 3 threads, parts of 16: tokens 0-31, 32-63, 64-99 (the last part keeps the 4 tokens
     * that fill no tile of 16, as the whole call does), a thread each */
    prefill_all(m, 3, 16, 3, split);
    if (memcmp(whole, split, sizeof(float) * n))
        fail_msg("%s: the logits differ with the tokens in 3 parts", name);
    /* 4 threads, parts of 32: two parts of 50 tokens, two threads splitting each one's rows */
    prefill_all(m, 4, 32, 2, split);
    if (memcmp(whole, split, sizeof(float) * n))
        fail_msg("%s: the logits differ with the tokens in 2 parts of 2 threads", name);
    free(whole);
    free(split);
}

static void test_token_split(void **state)
{
    char gguf[4096], nib[4200];
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    snprintf(gguf, sizeof gguf, "%s", src);
    for (size_t p = 0; p < sizeof k_paths / sizeof k_paths[0]; p++) {
        snprintf(nib, sizeof nib, "%s/kjv-split-%s.nib", tu_dir, k_paths[p].name);
        quantize(gguf, k_paths[p].path, nib);
        struct nb_model *m = NULL;
        if (nb_model_load(&m, nib) != NB_OK) fail_msg("%s", nb_last_error());
        check_token_split(m, k_paths[p].name);
        nb_model_free(m);
    }
    /* a file of every GGUF block type, run as stored (the block kernels on int8 input) */
    snprintf(gguf, sizeof gguf, "%s/tests/data/gguf-quants/kjv-7m-mixed.gguf",
             getenv("NIBBLE_SOURCE_DIR") ? getenv("NIBBLE_SOURCE_DIR") : ".");
    struct nb_open_params op = nb_open_default_params();
    struct nb_open_report rep = {.size = sizeof rep};
    op.path = "source";
    op.use_cache = 0;
    op.n_threads = 2;
    struct nb_model *m = NULL;
    if (nb_model_open(&m, gguf, &op, &rep) != NB_OK) fail_msg("%s", nb_last_error());
    assert_true(rep.as_stored);
    check_token_split(m, "kjv-7m-mixed.gguf as stored");
    nb_model_free(m);
}

/* A .nib's weights read into huge pages (nb_set_weight_copy(2): whatever the size or THP)
 * give the same logits as the same file mapped (0). */
static void test_weights_copied(void **state)
{
    char gguf[4096], nib[4200];
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    snprintf(gguf, sizeof gguf, "%s", src);
    snprintf(nib, sizeof nib, "%s/kjv-copy-w4a8.nib", tu_dir);
    quantize(gguf, NB_WPATH_W4A8, nib);
    size_t n = (size_t)SPLIT_TOKENS * 4096;
    float *lg[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
    assert_true(lg[0] && lg[1]);
    for (int v = 0; v < 2; v++) {
        nb_set_weight_copy(v ? 2 : 0);
        struct nb_model *m = NULL;
        if (nb_model_load(&m, nib) != NB_OK) fail_msg("%s", nb_last_error());
        assert_int_equal(nb_model_weights_copied(m), v);
        prefill_all(m, 2, 0, 1, lg[v]);
        nb_model_free(m);
    }
    /* a warm-start cache entry (written, then found) is read into memory the same way */
    nb_set_weight_copy(2);
    for (int pass = 0; pass < 2; pass++) {
        struct nb_open_params op = nb_open_default_params();
        op.path = "w4a8";
        op.cache_dir = tu_dir;
        op.calib_path = NULL;
        op.n_threads = 2;
        struct nb_model *m = NULL;
        if (nb_model_open(&m, gguf, &op, NULL) != NB_OK) fail_msg("%s", nb_last_error());
        assert_int_equal(nb_model_weights_copied(m), 1);
        nb_model_free(m);
    }
    nb_set_weight_copy(1);
    assert_memory_equal(lg[0], lg[1], sizeof(float) * n);
    free(lg[0]);
    free(lg[1]);
}

int main(void)
{
    if (tu_isa_from_env()) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_paths),
                                       cmocka_unit_test(test_token_split),
                                       cmocka_unit_test(test_weights_copied)};
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
