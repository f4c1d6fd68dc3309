/* test_model_errors — hostile or inconsistent model inputs give a clear error that
 * names the file and the problem, never a crash. */
#include "helpers/convert.h"
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

static void copy_file(const char *from, const char *to, long max_bytes)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    long total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (max_bytes >= 0 && total + (long)n > max_bytes) n = (size_t)(max_bytes - total);
        fwrite(buf, 1, n, out);
        total += (long)n;
        if (max_bytes >= 0 && total >= max_bytes) break;
    }
    fclose(in);
    fclose(out);
}

/* A copy of qwen3-tiny whose config.json has `key` set to the JSON `value` (NULL:
 * removed), and whose safetensors is cut to `st_bytes` (-1: whole). */
static const char *make_variant(const char *key, const char *value, long st_bytes)
{
    const char *src = tu_model_path("tiny/qwen3-tiny");
    if (!src) return NULL;
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/variant", tu_dir);
    tu_rmtree(dir);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    char from[4300], to[4300];
    snprintf(from, sizeof from, "%s/model.safetensors", src);
    snprintf(to, sizeof to, "%s/model.safetensors", dir);
    copy_file(from, to, st_bytes);
    snprintf(from, sizeof from, "%s/config.json", src);
    cJSON *cfg = tu_load_json(from);
    if (key) {
        cJSON_DeleteItemFromObject(cfg, key);
        if (value) cJSON_AddItemToObject(cfg, key, cJSON_Parse(value));
    }
    char *text = cJSON_Print(cfg);
    snprintf(to, sizeof to, "%s/config.json", dir);
    FILE *f = fopen(to, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    cJSON_Delete(cfg);
    return dir;
}

static void expect_fail(const char *path, enum nb_status want, const char *needle)
{
    struct nb_model *m = NULL;
    enum nb_status st = nb_model_load(&m, path);
    if (st == NB_OK) fail_msg("loading %s succeeded, expected '%s'", path, needle);
    assert_null(m);
    if (want != NB_OK) assert_int_equal(st, want);
    if (!strstr(nb_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", nb_last_error(), needle);
}

static void test_config_disagrees_with_tensors(void **state)
{
    const char *d = make_variant("hidden_size", "96", -1);
    if (!d) skip();
    expect_fail(d, NB_ERR_FORMAT, "model.embed_tokens.weight");
    d = make_variant("num_hidden_layers", "5", -1);
    expect_fail(d, NB_ERR_FORMAT, "model.layers.4.");
    d = make_variant("intermediate_size", "100", -1);
    expect_fail(d, NB_ERR_FORMAT, "config needs");
}

static void test_bad_config(void **state)
{
    const char *d = make_variant("model_type", "\"gpt_neox\"", -1);
    if (!d) skip();
    expect_fail(d, NB_ERR_UNSUPPORTED, "gpt_neox");
    d = make_variant("hidden_size", NULL, -1);
    expect_fail(d, NB_ERR_FORMAT, "hidden_size");
    d = make_variant("num_key_value_heads", "3", -1);
    expect_fail(d, NB_ERR_FORMAT, "multiple");
    d = make_variant("hidden_size", "\"big\"", -1);
    expect_fail(d, NB_ERR_FORMAT, "hidden_size");
    d = make_variant("num_attention_heads", "-4", -1);
    expect_fail(d, NB_ERR_FORMAT, "config.json");
    d = make_variant("hidden_act", "\"relu\"", -1);
    expect_fail(d, NB_ERR_UNSUPPORTED, "relu");
    d = make_variant("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4}", -1);
    expect_fail(d, NB_ERR_UNSUPPORTED, "yarn");
    d = make_variant("layer_types", "[\"sliding_attention\"]", -1);
    expect_fail(d, NB_ERR_FORMAT, "layer_types");
}

static void test_truncated_weights(void **state)
{
    const char *d = make_variant(NULL, NULL, 100000);
    if (!d) skip();
    expect_fail(d, NB_OK, "model.safetensors");
    d = make_variant(NULL, NULL, 3);
    expect_fail(d, NB_OK, "model.safetensors");
}

static void test_gguf_truncated(void **state)
{
    const char *src = tu_model_path("tiny/spark-tiny");
    if (!src) skip();
    char hf[4096], path[4300], cut[4300];
    snprintf(hf, sizeof hf, "%s", src);
    snprintf(path, sizeof path, "%s/spark.gguf", tu_dir);
    snprintf(cut, sizeof cut, "%s/spark-cut.gguf", tu_dir);
    tu_hf_to_gguf(hf, path, "BF16");
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, path), NB_OK); /* BF16 matrices load */
    nb_model_free(m);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    for (long n = 0; n < size; n += size / 37 + 1) {
        copy_file(path, cut, n);
        expect_fail(cut, NB_OK, "spark-cut.gguf");
    }
}

static void test_not_a_model(void **state)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/junk.bin", tu_dir);
    FILE *f = fopen(path, "wb");
    fputs("this is not a model at all, just some text in a file", f);
    fclose(f);
    expect_fail(path, NB_ERR_FORMAT, "junk.bin");
    expect_fail("/nonexistent/model.gguf", NB_ERR_IO, "/nonexistent/model.gguf");
    expect_fail(tu_dir, NB_OK, "config.json"); /* a directory without config.json */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_disagrees_with_tensors),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_truncated_weights),
        cmocka_unit_test(test_gguf_truncated),
        cmocka_unit_test(test_not_a_model),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
