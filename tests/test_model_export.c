/* tests/test_model_export.c — nb_export_gptq on .nib files made to order from
 * qwen3-tiny: a w4a16 build whose minimums are put on GPTQ's grid (m = -d z) goes out
 * asymmetric and exact (the zeros of the export are the z chosen here, every weight
 * decodes to nibble's value), a zero z = 0 or a free minimum is refused by name, and a
 * w4a8 scale outside f16's range sends its matrix out as float with a "dynamic" rule.
 * (The w4a8 path end to end, the reader in numpy and the CLI: tests/cli/export.sh.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/testutil.h"

#include "core/fp.h"
#include "core/wformat.h"
#include "formats/nib.h"
#include "formats/safetensors.h"
#include "nibble.h"

static const char *g_src;

static const char *path_in(const char *name)
{
    static char p[4][512];
    static int k;
    char *s = p[k++ % 4];
    snprintf(s, sizeof p[0], "%s/%s", tu_dir, name);
    return s;
}

static void quantize(const char *path, const char *out)
{
    struct nb_quantize_params q = nb_quantize_default_params();
    q.path = path;
    q.recipe = "speed";
    q.layout_rows = 1;
    q.n_threads = 2;
    if (nb_model_quantize(g_src, out, &q, NULL) != NB_OK) fail_msg("%s", nb_last_error());
}

/* The zero this test gives group (r, g) of a w4a16 matrix: powers of two, so -d z is a
 * bf16 value for every bf16 d. */
static int pick_z(int64_t r, int64_t g)
{
    static const int z[4] = {1, 2, 4, 8};
    return z[(r + 3 * g) % 4];
}

/* Rewrite `in` as `out`, every tensor copied; `patch` may change the bytes of each
 * packed matrix (ROWS layout) first. */
typedef void (*patch_fn)(const struct nb_nib_tensor *t, uint8_t *blob, void *user);
static void rewrite(const char *in, const char *out, patch_fn patch, void *user)
{
    struct nb_nib *nib = NULL;
    struct nb_nib_writer *w = NULL;
    if (nb_nib_open(&nib, in) != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    int64_t n = nb_nib_n_tensors(nib);
    uint8_t **copies = calloc((size_t)n, sizeof *copies);
    for (int64_t i = 0; i < n; i++) {
        const struct nb_nib_tensor *t = nb_nib_tensor(nib, i);
        copies[i] = malloc(t->size ? t->size : 1);
        memcpy(copies[i], t->data, t->size);
        if (patch && t->kind == NB_NIB_PACKED && t->n_dims == 2) patch(t, copies[i], user);
        assert_int_equal(nb_nib_writer_add(w, t->name, t->kind, t->path, t->group, t->layout,
                                           t->n_dims, t->shape, copies[i], t->size),
                         NB_OK);
    }
    cJSON *h = cJSON_Duplicate(nb_nib_header(nib), 1);
    cJSON_DeleteItemFromObjectCaseSensitive(h, "tensors");
    if (nb_nib_writer_write(w, h, out) != NB_OK) fail_msg("%s", nb_last_error());
    nb_nib_writer_free(w);
    for (int64_t i = 0; i < n; i++) free(copies[i]);
    free(copies);
    nb_nib_free(nib);
}

/* w4a16 matrices: m = -d z (z from pick_z; `zero_at` >= 0: row 0, group 0 of
 * blk.1.ffn_up gets z = 0 instead). kjv-7m's head is tied: its one copy, token_embd.weight,
 * is the head's matrix and is patched too. */
static void patch_mins(const struct nb_nib_tensor *t, uint8_t *blob, void *user)
{
    int zero_at = *(int *)user;
    struct nb_layout_planes pl;
    if (t->path != NB_WPATH_W4A16) return;
    assert_int_equal(t->layout, NB_LAYOUT_ROWS);
    assert_true(nb_layout_planes(t->path, t->group, t->shape[0], t->shape[1], &pl));
    int64_t ng = t->shape[1] / t->group;
    for (int64_t r = 0; r < t->shape[0]; r++)
        for (int64_t g = 0; g < ng; g++) {
            uint16_t d, m;
            memcpy(&d, blob + pl.offset[1] + 2 * (r * ng + g), 2);
            int z = pick_z(r, g);
            if (zero_at >= 0 && r == 0 && g == 0 && !strcmp(t->name, "blk.1.ffn_up.weight"))
                z = 0;
            m = nb_f32_to_bf16(-(nb_bf16_to_f32(d) * (float)z));
            assert_true(nb_bf16_to_f32(m) == -(nb_bf16_to_f32(d) * (float)z));
            memcpy(blob + pl.offset[2] + 2 * (r * ng + g), &m, 2);
        }
}

/* f32 contents of a raw dump. */
static float *dump(const char *nib, const char *name, int64_t *n_out, int64_t *n_in)
{
    int64_t shape[2];
    char f[512];
    snprintf(f, sizeof f, "%s/dump.f32", tu_dir);
    if (nb_nib_dump_f32(nib, name, f, shape) != NB_OK) fail_msg("%s", nb_last_error());
    *n_out = shape[0];
    *n_in = shape[1];
    float *w = malloc(sizeof(float) * (size_t)(shape[0] * shape[1]));
    FILE *fp = fopen(f, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(w, 4, (size_t)(shape[0] * shape[1]), fp), (size_t)(shape[0] * shape[1]));
    fclose(fp);
    return w;
}

static const struct nb_tensor *find(const struct nb_safetensors *st, const char *mod,
                                    const char *what)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", mod, what);
    const struct nb_tensor *t = nb_safetensors_find(st, name);
    if (!t) fail_msg("no tensor %s", name);
    return t;
}

/* GPTQ module `mod` of the export (v1 zeros) against tensor `nib_name` of the .nib:
 * every weight equal; with want_z, every zero is pick_z of its (row, group). */
static void check_module(const struct nb_safetensors *st, const char *mod, const char *nib,
                         const char *nib_name, int want_z)
{
    int64_t N, K;
    float *ref = dump(nib, nib_name, &N, &K);
    const struct nb_tensor *qw = find(st, mod, "qweight"), *qz = find(st, mod, "qzeros");
    const struct nb_tensor *sc = find(st, mod, "scales"), *gi = find(st, mod, "g_idx");
    assert_int_equal(qw->dtype, NB_DTYPE_I32);
    assert_int_equal(qw->shape[0], K / 8);
    assert_int_equal(qw->shape[1], N);
    assert_int_equal(sc->dtype, NB_DTYPE_F16);
    int64_t G = K / sc->shape[0];
    const uint8_t *pw = qw->data, *pz = qz->data, *ps = sc->data, *pg = gi->data;
    for (int64_t k = 0; k < K; k++) {
        int32_t g;
        memcpy(&g, pg + 4 * k, 4);
        assert_int_equal(g, k / G);
        for (int64_t n = 0; n < N; n++) {
            uint32_t word, zword;
            uint16_t s;
            memcpy(&word, pw + 4 * ((k / 8) * N + n), 4);
            memcpy(&zword, pz + 4 * (g * (N / 8) + n / 8), 4);
            memcpy(&s, ps + 2 * (g * N + n), 2);
            int q = (int)(word >> (4 * (k % 8)) & 15);
            int z = (int)(zword >> (4 * (n % 8)) & 15) + 1;
            if (want_z && k % G == 0) assert_int_equal(z, pick_z(n, g));
            float w = nb_f16_to_f32(s) * (float)(q - z);
            if (w != ref[n * K + k])
                fail_msg("%s [%lld, %lld]: %g, nibble %g", mod, (long long)n, (long long)k,
                         (double)w, (double)ref[n * K + k]);
        }
    }
    free(ref);
}

static void test_asym(void **state)
{
    (void)state;
    if (!g_src) skip();
    char a16[512], asym[512], out[512];
    snprintf(a16, sizeof a16, "%s", path_in("a16.nib"));
    snprintf(asym, sizeof asym, "%s", path_in("asym.nib"));
    snprintf(out, sizeof out, "%s", path_in("out-asym"));
    quantize("w4a16", a16);
    /* free minimums: refused, naming the tensor */
    struct nb_export_stats s = {.size = sizeof s};
    assert_int_equal(nb_export_gptq(a16, path_in("out-free"), NULL, &s), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "(w4a16) is not on GPTQ's grid"));

    int zero_at = -1;
    rewrite(a16, asym, patch_mins, &zero_at);
    if (nb_export_gptq(asym, out, NULL, &s) != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(s.sym, 0);
    assert_int_equal(s.n_gptq, 29);
    assert_int_equal(s.n_float, 0);
    assert_int_equal(s.lm_head, 1);
    assert_int_equal(s.group, 128);
    cJSON *cfg = tu_load_json(path_in("out-asym/config.json"));
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(q, "sym")));
    cJSON_Delete(cfg);
    struct nb_safetensors *st = NULL;
    if (nb_safetensors_open(&st, out) != NB_OK) fail_msg("%s", nb_last_error());
    check_module(st, "model.layers.1.mlp.up_proj", asym, "blk.1.ffn_up.weight", 1);
    check_module(st, "model.layers.3.self_attn.k_proj", asym, "blk.3.attn_k.weight", 1);
    check_module(st, "lm_head", asym, "token_embd.weight", 1); /* tied: the head's one copy */
    nb_safetensors_free(st);

    /* a zero of 0 has no v1 form (stored -1, read as 16): refused */
    zero_at = 0;
    rewrite(a16, asym, patch_mins, &zero_at);
    assert_int_equal(nb_export_gptq(asym, path_in("out-z0"), NULL, &s), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "blk.1.ffn_up.weight"));
}

/* A w4a8 scale f16 cannot hold (1e-6: below f16's normal range, not on its subnormal
 * grid) in blk.2.ffn_down: that matrix goes out as float, with a dynamic rule. */
static void patch_scale(const struct nb_nib_tensor *t, uint8_t *blob, void *user)
{
    struct nb_layout_planes pl;
    (void)user;
    if (strcmp(t->name, "blk.2.ffn_down.weight") != 0) return;
    assert_int_equal(t->path, NB_WPATH_W4A8);
    assert_true(nb_layout_planes(t->path, t->group, t->shape[0], t->shape[1], &pl));
    uint16_t d = nb_f32_to_bf16(1e-6f);
    memcpy(blob + pl.offset[1] + 2 * 5, &d, 2);
}

static void test_scale_range(void **state)
{
    (void)state;
    if (!g_src) skip();
    char a8[512], bad[512], out[512];
    snprintf(a8, sizeof a8, "%s", path_in("a8.nib"));
    snprintf(bad, sizeof bad, "%s", path_in("a8-bad.nib"));
    snprintf(out, sizeof out, "%s", path_in("out-range"));
    quantize("w4a8", a8);
    rewrite(a8, bad, patch_scale, NULL);
    struct nb_export_stats s = {.size = sizeof s};
    struct nb_export_params p = nb_export_default_params();
    p.dtype = "f32";
    if (nb_export_gptq(bad, out, &p, &s) != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(s.sym, 1);
    assert_int_equal(s.n_gptq, 28);
    assert_int_equal(s.n_float, 1);
    assert_non_null(strstr(s.notes, "model.layers.2.mlp.down_proj: float (the scale"));
    assert_non_null(strstr(s.notes, "is not exact in f16"));
    cJSON *cfg = tu_load_json(path_in("out-range/config.json"));
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config");
    const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(q, "dynamic");
    assert_int_equal(cJSON_GetArraySize(dyn), 1);
    assert_string_equal(dyn->child->string, "-:model\\.layers\\.2\\.mlp\\.down_proj$");
    cJSON_Delete(cfg);
    /* the float matrix is nibble's decoding, in f32 */
    struct nb_safetensors *st = NULL;
    if (nb_safetensors_open(&st, out) != NB_OK) fail_msg("%s", nb_last_error());
    assert_null(nb_safetensors_find(st, "model.layers.2.mlp.down_proj.qweight"));
    const struct nb_tensor *w = nb_safetensors_find(st, "model.layers.2.mlp.down_proj.weight");
    assert_non_null(w);
    assert_int_equal(w->dtype, NB_DTYPE_F32);
    int64_t N, K;
    float *ref = dump(bad, "blk.2.ffn_down.weight", &N, &K);
    assert_int_equal(w->n_bytes, (uint64_t)(N * K * 4));
    assert_memory_equal(w->data, ref, w->n_bytes);
    free(ref);
    check_module(st, "model.layers.2.mlp.up_proj", bad, "blk.2.ffn_up.weight", 0);
    nb_safetensors_free(st);
    /* the folder exists now: a second export is refused, --force replaces it */
    assert_int_equal(nb_export_gptq(bad, out, &p, &s), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "exists and is not empty"));
    p.force = 1;
    assert_int_equal(nb_export_gptq(bad, out, &p, &s), NB_OK);
    assert_int_equal(tu_count_files(tu_dir, ".tmp"), 0);
}

int main(void)
{
    g_src = tu_model_path("tiny/qwen3-tiny");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asym),
        cmocka_unit_test(test_scale_range),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
