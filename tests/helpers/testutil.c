/* tests/helpers/testutil.c — shared helpers for the cmocka tests. */
#include "helpers/testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/json.h"
#include "formats/source.h"
#include "model/model.h"
#include "runtime/cache.h"
#include "runtime/quantize.h"
#include "runtime/source_hash.h"
#include "tokenizer/tokenizer.h"
#include "nibble.h"

const char *tu_model_path(const char *rel)
{
    static _Thread_local char buf[4096];
    const char *dir = getenv("NIBBLE_MODELS_DIR");
    if (!dir) return NULL;
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

int tu_isa_from_env(void)
{
    const char *isa = getenv("NIBBLE_ISA");
    if (!isa || !*isa) return 0;
    if (nb_set_isa(isa, 1) != NB_OK) {
        fprintf(stderr, "NIBBLE_ISA=%s: %s\n", isa, nb_last_error());
        return 1;
    }
    fprintf(stderr, "NIBBLE_ISA=%s: kernels %s\n", isa, nb_isa());
    return 0;
}

cJSON *tu_load_json(const char *path)
{
    cJSON *root = NULL;
    if (nb_json_load(path, &root) != NB_OK) fail_msg("%s", nb_last_error());
    return root;
}

int32_t *tu_json_ids(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (int32_t)cJSON_GetArrayItem(arr, i)->valuedouble;
    return v;
}

float *tu_json_floats(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    float *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (float)cJSON_GetArrayItem(arr, i)->valuedouble;
    return v;
}

double tu_max_abs_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/nibble-test-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(p)) fail_msg("mkdtemp failed");
    return p;
}

void tu_rmtree(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

int tu_collect_cb(int32_t tok, void *user)
{
    struct tu_collect *g = user;
    if (g->n < 64) g->ids[g->n++] = tok;
    return 0;
}

void tu_copy_file(const char *from, const char *to)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod u+w '%s'", from, to, to);
    if (system(cmd) != 0) fail_msg("cannot copy %s to %s", from, to);
}

void tu_flip_byte(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+b");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, -from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
}

/* ---------------------------------------------------------------- temporary folder */

char *tu_dir;

int tu_dir_setup(void **state)
{
    (void)state;
    tu_dir = tu_mkdtemp();
    return tu_dir ? 0 : -1;
}

int tu_dir_teardown(void **state)
{
    (void)state;
    tu_rmtree(tu_dir);
    free(tu_dir);
    tu_dir = NULL;
    return 0;
}

/* ---------------------------------------------------------------- random test data */

uint64_t tu_rand_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_rand_unit(uint64_t *state) { return (double)(tu_rand_u64(state) >> 11) * 0x1.0p-53; }

float tu_rand_gauss(uint64_t *state)
{
    double u1 = tu_rand_unit(state), u2 = tu_rand_unit(state);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---------------------------------------------------------------- golden model outputs */

double tu_check_golden(const char *dir, const cJSON *golden, const char *name, int n_threads,
                       int n_batch, int n_ctx, double tol)
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
    cp.n_ctx = n_ctx;
    cp.kv_type = NB_KV_TYPE_F32; /* the arithmetic against float64; f16's cost: test_model_kv */
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
        if (dm > tol || dl > tol)
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

int tu_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot list %s", dir);
    int n = 0;
    size_t ls = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l >= ls && !strcmp(e->d_name + l - ls, suffix)) n++;
    }
    closedir(d);
    return n;
}

int tu_quantize_file(const char *src, const struct nb_quantize_opts *o, const char *out,
                     struct nb_quantize_result *r)
{
    struct nb_source *s = NULL;
    enum nb_status st = nb_source_open(&s, src);
    if (!st) st = nb_quantize_file(s, o, out, r);
    nb_source_free(s);
    return st;
}

int tu_cache_get(const char *src, const struct nb_quantize_opts *o, const char *dir,
                 struct nb_cache_entry *e)
{
    struct nb_source *s = NULL;
    enum nb_status st = nb_source_open(&s, src);
    if (!st) st = nb_cache_get(s, o, dir, e);
    nb_source_free(s);
    return st;
}

int tu_source_hash(const char *src, uint64_t *h)
{
    struct nb_source *s = NULL;
    enum nb_status st = nb_source_open(&s, src);
    if (!st) st = nb_source_hash(s, h);
    nb_source_free(s);
    return st;
}

int tu_tokenizer_load_source(struct nb_tokenizer **t, const char *src)
{
    struct nb_source *s = NULL;
    *t = NULL;
    enum nb_status st = nb_source_open(&s, src);
    if (!st) st = nb_tokenizer_load_source(t, s);
    nb_source_free(s);
    return st;
}

int tu_model_load_nib(struct nb_model **m, struct nb_nib *nib)
{
    struct nb_source *s = NULL;
    *m = NULL;
    enum nb_status st = nb_source_from_nib(&s, nib, 1);
    if (!st) st = nb_model_load_source(m, s);
    nb_source_free(s);
    return st;
}
