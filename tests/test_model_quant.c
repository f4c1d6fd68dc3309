/* test_model_quant — kjv-7m through `nibble quantize` to every weight path:
 * the f32 path through a .nib is bit-identical to the float engine; every path runs
 * and its greedy fidelity against the f32 reference is printed (a measurement, not
 * a threshold); 8- and 16-bit paths stay close to f32 (a broken kernel would not);
 * the warm-start cache hits, and detects and rebuilds stale and corrupt entries. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"
#include "runtime/cache.h"
#include "runtime/quantize.h"

#define N_GEN 48

struct run {
    float first[8][4096];
    int32_t ids[8][N_GEN];
};

struct collect {
    int32_t *ids;
    int n;
};

static int collect_cb(int32_t tok, void *user)
{
    struct collect *c = user;
    if (c->n < N_GEN) c->ids[c->n++] = tok;
    return 0;
}

static void run_model(const char *path, struct run *r)
{
    cJSON *ref = tu_load_json(tu_model_path("kjv-7m/reference.json"));
    struct nb_model *m = NULL;
    if (nb_model_load(&m, path) != NB_OK) fail_msg("%s", nb_last_error());
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = 2;
    struct nb_ctx *ctx = NULL;
    assert_int_equal(nb_ctx_init(&ctx, m, &cp), NB_OK);
    struct nb_sampler_params sp = nb_sampler_default_params();
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        int n;
        int32_t *prompt = tu_json_ids(cJSON_GetObjectItem(c, "prompt"), &n);
        int32_t pos[64];
        for (int i = 0; i < n; i++) pos[i] = i;
        nb_ctx_clear_seq(ctx, 0);
        struct nb_batch b = {.n_tokens = n, .token = prompt, .pos = pos};
        assert_int_equal(nb_decode(ctx, &b, r->first[k]), NB_OK);
        nb_ctx_clear_seq(ctx, 0);
        struct nb_sampler *s = NULL;
        assert_int_equal(nb_sampler_init(&s, &sp, 4096), NB_OK);
        struct collect col = {r->ids[k], 0};
        assert_int_equal(nb_generate(ctx, 0, s, prompt, n, N_GEN, 0, collect_cb, &col, NULL),
                         NB_OK);
        nb_sampler_free(s);
        free(prompt);
        k++;
    }
    nb_ctx_free(ctx);
    nb_model_free(m);
    cJSON_Delete(ref);
}

static void quantize(const char *src, enum nb_wpath p, int head_bits, const char *out)
{
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = p;
    o.head_bits = head_bits;
    o.n_threads = 2;
    struct nb_quantize_result r;
    if (nb_quantize_file(src, &o, out, &r) != NB_OK) fail_msg("%s", nb_last_error());
    printf("# %-6s head %-2d: %.3f bpw linear, %.3f bpw file, %llu bytes\n", nb_wpath_name(p),
           head_bits ? head_bits : 8, r.bpw_linear, r.bpw_file, (unsigned long long)r.file_bytes);
}

static void test_f32_bit_identical(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char gguf[4096], nib[4200];
    snprintf(gguf, sizeof gguf, "%s", src);
    snprintf(nib, sizeof nib, "%s/kjv-f32.nib", tu_dir);
    quantize(gguf, NB_WPATH_F32, 0, nib);
    static struct run a, b;
    run_model(gguf, &a);
    run_model(nib, &b);
    assert_memory_equal(a.first, b.first, sizeof a.first);
    assert_memory_equal(a.ids, b.ids, sizeof a.ids);
}

static void test_paths_fidelity(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char gguf[4096], nib[4200];
    snprintf(gguf, sizeof gguf, "%s", src);
    static struct run ref, q;
    run_model(gguf, &ref);
    static const struct {
        enum nb_wpath p;
        int head;
        double max_logit_diff; /* sanity bound: a broken kernel is far off */
    } k[] = {{NB_WPATH_BF16, 0, 0.2},  {NB_WPATH_W8A16, 0, 0.3}, {NB_WPATH_W4A16, 8, 3.0},
             {NB_WPATH_W4A8, 8, 3.0}, {NB_WPATH_W4A8, 4, 3.0}, {NB_WPATH_W4A16, 4, 3.0}};
    printf("# fidelity vs f32 on kjv-7m, %d greedy tokens x 8 prompts\n", N_GEN);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        snprintf(nib, sizeof nib, "%s/kjv-%s-h%d.nib", tu_dir, nb_wpath_name(k[i].p), k[i].head);
        quantize(gguf, k[i].p, k[i].head, nib);
        run_model(nib, &q);
        int reproduced = 0;
        double first_div = 0, maxd = 0;
        for (int c = 0; c < 8; c++) {
            int d = 0;
            while (d < N_GEN && q.ids[c][d] == ref.ids[c][d]) d++;
            reproduced += d == N_GEN;
            first_div += d;
            double m = tu_max_abs_diff(q.first[c], ref.first[c], 4096);
            if (m > maxd) maxd = m;
        }
        printf("# %-6s head %-2d: reproduced %d/8, mean first divergence %.1f, max first-step "
               "logit diff %.4f\n", nb_wpath_name(k[i].p), k[i].head ? k[i].head : 8, reproduced,
               first_div / 8, maxd);
        if (maxd > k[i].max_logit_diff)
            fail_msg("%s: first-step logits differ from f32 by %g (> %g)", nb_wpath_name(k[i].p),
                     maxd, k[i].max_logit_diff);
    }
}

/* Every fusion (NIBBLE_FUSE, src/model/forward.c) does the same arithmetic in another
 * order of passes: w4a8 and w4a16 runs are bit-identical with all of them on and off. */
static void test_fusions_identical(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char gguf[4096], nib[4200];
    snprintf(gguf, sizeof gguf, "%s", src);
    static struct run off, on;
    const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16};
    for (int i = 0; i < 2; i++) {
        snprintf(nib, sizeof nib, "%s/kjv-fuse-%s.nib", tu_dir, nb_wpath_name(paths[i]));
        quantize(gguf, paths[i], 4, nib);
        setenv("NIBBLE_FUSE", "none", 1);
        run_model(nib, &off);
        setenv("NIBBLE_FUSE", "all", 1);
        run_model(nib, &on);
        unsetenv("NIBBLE_FUSE");
        assert_memory_equal(off.first, on.first, sizeof off.first);
        assert_memory_equal(off.ids, on.ids, sizeof off.ids);
    }
}

static void test_cache(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char cache[4200], model[4200], out[4096], why[512];
    snprintf(cache, sizeof cache, "%s/cache", tu_dir);
    setenv("XDG_CACHE_HOME", cache, 1);
    snprintf(model, sizeof model, "%s/kjv.gguf", tu_dir);
    tu_copy_file(src, model);
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = NB_WPATH_W4A8;
    o.n_threads = 2;
    enum nb_cache_event ev;
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_MISS);
    assert_non_null(strstr(out, cache));
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_HIT);
    struct nb_model *m = NULL; /* the entry just checked loads without a second check */
    assert_int_equal(nb_cache_load(&m, out), NB_OK);
    nb_model_free(m);
    tu_flip_byte(out, 1000); /* a weight byte of the cached file */
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_CORRUPT);
    assert_non_null(strstr(why, "checksum"));
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_HIT);
    /* the cached entry's name is keyed by the source bytes: simulate a stale entry by
     * putting this entry where a changed source will look for it */
    char old[4096];
    snprintf(old, sizeof old, "%s", out);
    tu_flip_byte(model, 5000); /* the source changes */
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_MISS);
    assert_string_not_equal(old, out);
    tu_copy_file(old, out);
    assert_int_equal(nb_cache_get(model, &o, out, sizeof out, &ev, why, sizeof why), NB_OK);
    assert_int_equal(ev, NB_CACHE_STALE);
    assert_non_null(strstr(why, "other source bytes"));
    unsetenv("XDG_CACHE_HOME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_bit_identical),
        cmocka_unit_test(test_paths_fidelity),
        cmocka_unit_test(test_fusions_identical),
        cmocka_unit_test(test_cache),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
