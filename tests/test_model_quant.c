/* test_model_quant — kjv-7m through `nibble quantize` to every weight path:
 * the f32 path through a .nib is bit-identical to the float engine; every path runs
 * and its greedy fidelity against the f32 reference is printed (a measurement, not
 * a threshold); 8- and 16-bit paths stay close to f32 (a broken kernel would not);
 * the warm-start cache hits, and detects and rebuilds stale and corrupt entries. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/nib.h"
#include "model/model.h"
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

static void run_model_threads(const char *path, struct run *r, int n_threads)
{
    cJSON *ref = tu_load_json(tu_model_path("kjv-7m/reference.json"));
    struct nb_model *m = NULL;
    if (nb_model_load(&m, path) != NB_OK) fail_msg("%s", nb_last_error());
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_threads = n_threads;
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

static void run_model(const char *path, struct run *r) { run_model_threads(path, r, 2); }

static void quantize(const char *src, enum nb_wpath p, int head_bits, const char *out)
{
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = p;
    o.head_bits = head_bits;
    o.n_threads = 2;
    struct nb_quantize_result r;
    if (tu_quantize_file(src, &o, out, &r) != NB_OK) fail_msg("%s", nb_last_error());
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

/* The runner splits every op by whole rows (GEMM rows, token rows, attention tiles), so
 * a row's arithmetic never depends on how many threads share the work: one thread and
 * two give bit-identical logits and ids on the int4 paths. */
static void test_threads_identical(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char gguf[4096], nib[4200];
    snprintf(gguf, sizeof gguf, "%s", src);
    static struct run one, two;
    const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16};
    for (int i = 0; i < 2; i++) {
        snprintf(nib, sizeof nib, "%s/kjv-threads-%s.nib", tu_dir, nb_wpath_name(paths[i]));
        quantize(gguf, paths[i], 4, nib);
        run_model_threads(nib, &one, 1);
        run_model_threads(nib, &two, 2);
        assert_memory_equal(one.first, two.first, sizeof one.first);
        assert_memory_equal(one.ids, two.ids, sizeof one.ids);
    }
}

static enum nb_cache_event get(const char *model, const struct nb_quantize_opts *o,
                               const char *dir, struct nb_cache_entry *e)
{
    if (tu_cache_get(model, o, dir, e) != NB_OK) fail_msg("%s", nb_last_error());
    assert_non_null(e->nib);
    return e->event;
}

static void drop(struct nb_cache_entry *e)
{
    nb_nib_free(e->nib);
    e->nib = NULL;
}

static void test_cache(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char cache[4200], model[4200], old[4096];
    snprintf(cache, sizeof cache, "%s/cache/nibble", tu_dir);
    snprintf(model, sizeof model, "%s/kjv.gguf", tu_dir);
    tu_copy_file(src, model);
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = NB_WPATH_W4A8;
    o.n_threads = 2;
    static struct nb_cache_entry e;
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_MISS);
    assert_non_null(strstr(e.path, cache));
    drop(&e);
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_HIT);
    struct nb_model *m = NULL; /* the verified mapping is the one that runs */
    assert_int_equal(tu_model_load_nib(&m, e.nib), NB_OK);
    nb_model_free(m);
    tu_flip_byte(e.path, 1000); /* a weight byte of the cached file */
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_CORRUPT);
    assert_non_null(strstr(e.why, "checksum"));
    drop(&e);
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_HIT);
    drop(&e);
    /* the cached entry's name is keyed by the source bytes: simulate a stale entry by
     * putting this entry where a changed source will look for it */
    snprintf(old, sizeof old, "%s", e.path);
    tu_flip_byte(model, 5000); /* the source changes */
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_MISS);
    assert_string_not_equal(old, e.path);
    drop(&e);
    tu_copy_file(old, e.path);
    assert_int_equal(get(model, &o, cache, &e), NB_CACHE_STALE);
    assert_non_null(strstr(e.why, "other source bytes"));
    drop(&e);
    assert_int_equal(tu_count_files(cache, ".tmp"), 0); /* no temporary left behind */
}

/* A cache that cannot be used degrades to memory and says why; --no-cache never
 * touches the folder. Either way the weights are those of a cached build. */
static void test_cache_fallback(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char cache[4200], blocker[4300], nib[4300];
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = NB_WPATH_W4A8;
    o.n_threads = 2;
    static struct nb_cache_entry e;
    /* a file where the cache folder should be */
    snprintf(cache, sizeof cache, "%s/fb", tu_dir);
    snprintf(blocker, sizeof blocker, "%s/nibble", cache);
    assert_int_equal(mkdir(cache, 0755), 0);
    tu_copy_file(src, blocker);
    assert_int_equal(get(src, &o, blocker, &e), NB_CACHE_MEMORY);
    assert_non_null(strstr(e.why, blocker));
    assert_non_null(strstr(e.why, "Not a directory"));
    struct nb_model *m = NULL;
    assert_int_equal(tu_model_load_nib(&m, e.nib), NB_OK);
    nb_model_free(m);
    /* the same bytes as a file made by quantize */
    snprintf(nib, sizeof nib, "%s/fb.nib", tu_dir);
    quantize(src, NB_WPATH_W4A8, 0, nib);
    struct nb_nib *n = NULL;
    assert_int_equal(nb_nib_open(&n, nib), NB_OK);
    assert_int_equal(get(src, &o, NULL, &e), NB_CACHE_MEMORY); /* --no-cache */
    assert_non_null(strstr(e.why, "turned off"));
    assert_int_equal(nb_nib_n_tensors(n), nb_nib_n_tensors(e.nib));
    for (int64_t i = 0; i < nb_nib_n_tensors(n); i++)
        assert_true(nb_nib_tensor(n, i)->xxh3 == nb_nib_tensor(e.nib, i)->xxh3);
    nb_nib_free(n);
    drop(&e);
    /* the usual folder from the two variables' values (the library reads neither) */
    char dir[4096];
    assert_int_equal(nb_cache_default_dir("/x", "/h", dir, sizeof dir), NB_OK);
    assert_string_equal(dir, "/x/nibble");
    assert_int_equal(nb_cache_default_dir("rel", "/h", dir, sizeof dir), NB_OK);
    assert_string_equal(dir, "/h/.cache/nibble");
    assert_int_equal(nb_cache_default_dir(NULL, "", dir, sizeof dir), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "HOME"));
}

/* quantize never replaces its source, and never writes through a planted symlink. */
static void test_quantize_outputs(void **state)
{
    const char *src = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!src) skip();
    char model[4200], link[4200], victim[4200], out[4200];
    snprintf(model, sizeof model, "%s/q.gguf", tu_dir);
    tu_copy_file(src, model);
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.n_threads = 2;
    struct nb_quantize_result r;
    assert_int_equal(tu_quantize_file(model, &o, model, &r), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "would replace the source"));
    snprintf(link, sizeof link, "%s/q-link.gguf", tu_dir); /* the same file by another name */
    assert_int_equal(symlink(model, link), 0);
    assert_int_equal(tu_quantize_file(model, &o, link, &r), NB_ERR_INVALID_ARG);
    assert_int_equal(tu_quantize_file(link, &o, model, &r), NB_ERR_INVALID_ARG);
    struct nb_nib *n = NULL; /* the source is intact */
    assert_int_equal(nb_nib_open(&n, model), NB_ERR_FORMAT);
    /* a symlink at every old fixed temporary name: the victim stays as it was */
    snprintf(victim, sizeof victim, "%s/victim.txt", tu_dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("keep me\n", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/out.nib", tu_dir);
    snprintf(link, sizeof link, "%s/out.nib.tmp", tu_dir);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(tu_quantize_file(model, &o, out, &r), NB_OK);
    char buf[64] = {0};
    f = fopen(victim, "r");
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "keep me\n");
    assert_int_equal(nb_nib_open(&n, out), NB_OK);
    assert_int_equal(nb_nib_verify(n), NB_OK);
    nb_nib_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_bit_identical),
        cmocka_unit_test(test_paths_fidelity),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_cache_fallback),
        cmocka_unit_test(test_quantize_outputs),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
