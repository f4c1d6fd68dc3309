/* test_model_errors — hostile or inconsistent model inputs give a clear error that
 * names the file and the problem, never a crash. */
#include "helpers/convert.h"
#include "helpers/llama2c_writer.h"
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mmap.h"
#include "model/config.h"
#include "nibble.h"
#include "runtime/model_tokenizer.h"
#include "runtime/quantize.h"
#include "runtime/source_hash.h"

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
    expect_fail("/nonexistent/model.gguf", NB_ERR_NOT_FOUND, "/nonexistent/model.gguf: no such file");
    expect_fail(tu_dir, NB_OK, "config.json"); /* a directory without config.json */
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void put_i32(uint8_t *p, int32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)((uint32_t)v >> (8 * b));
}

/* A tiny legacy llama2.c checkpoint whose header int `field` (0 = dim .. 6 = seq_len)
 * is `v`: loading it names the field and its value, not "not a model nibble knows". */
static void expect_l2c_field(int field, int32_t v, const char *needle)
{
    struct nb_llama2c_config c = nbt_l2c_tiny(0, 1);
    size_t size = 0;
    uint8_t *buf = nbt_l2c_build(&c, &size);
    assert_non_null(buf);
    put_i32(buf + 4 * field, v);
    char path[4300];
    snprintf(path, sizeof path, "%s/l2c-field%d.bin", tu_dir, field);
    write_bytes(path, buf, size);
    free(buf);
    expect_fail(path, NB_ERR_FORMAT, needle);
    expect_fail(path, NB_ERR_FORMAT, path);
}

static void test_llama2c_header_fields(void **state)
{
    expect_l2c_field(3, 0, "llama2.c header: n_heads = 0 is not positive");
    expect_l2c_field(0, -8, "llama2.c header: dim = -8 is not positive");
    expect_l2c_field(4, 3, "n_heads = 2 is not a multiple of n_kv_heads = 3");
    expect_l2c_field(2, 5000, "llama2.c header: n_layers = 5000 is out of range (1..1024)");
    expect_l2c_field(5, 0, "llama2.c header: vocab_size = 0 is not positive");
    /* -1 (one token, own classifier) parses but cannot hold llama2.c's fixed ids */
    expect_l2c_field(5, -1,
                     "llama2.c header: vocab_size = -1 (1 token, own classifier) is "
                     "too small");
    expect_l2c_field(5, 2, "llama2.c header: vocab_size = 2 (2 tokens) is too small");
}

/* vocab_size -1, 0 or absurd is refused when the config is read, naming the key. */
static void test_vocab_size(void **state)
{
    const char *d = make_variant("vocab_size", "-1", -1);
    if (!d) skip();
    expect_fail(d, NB_ERR_FORMAT, "config.json: vocab_size = -1 is not in 1..2^22");
    d = make_variant("vocab_size", "0", -1);
    expect_fail(d, NB_ERR_FORMAT, "vocab_size = 0 is not in 1..2^22");
    d = make_variant("vocab_size", "1000000000", -1);
    expect_fail(d, NB_ERR_FORMAT, "vocab_size = 1000000000 is not in 1..2^22");
    d = make_variant("bos_token_id", "600", -1);
    expect_fail(d, NB_ERR_FORMAT, "bos_token_id = 600 is not a token id (vocab_size = 512)");

    /* .nib config: the same check, naming the key of its "config" object */
    char cfg_path[4300];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", tu_model_path("tiny/qwen3-tiny"));
    cJSON *hf = tu_load_json(cfg_path);
    struct nb_config c;
    assert_int_equal(nb_config_from_hf(&c, hf, cfg_path), NB_OK);
    cJSON_Delete(hf);
    cJSON *j = nb_config_to_json(&c);
    struct nb_config back;
    assert_int_equal(nb_config_from_json(&back, j, "m.nib"), NB_OK);
    static const char *const bad[] = {"-1", "0", "16777216"};
    for (int i = 0; i < 3; i++) {
        cJSON_ReplaceItemInObject(j, "n_vocab", cJSON_CreateNumber(atof(bad[i])));
        assert_int_equal(nb_config_from_json(&back, j, "m.nib"), NB_ERR_FORMAT);
        char want[96];
        snprintf(want, sizeof want, "m.nib: config.n_vocab = %s is not in 1..2^22", bad[i]);
        if (!strstr(nb_last_error(), want))
            fail_msg("error '%s' does not mention '%s'", nb_last_error(), want);
    }
    cJSON_Delete(j);

    /* GGUF: <arch>.vocab_size, when written, must be the embedding's rows */
    const char *gguf = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!gguf) return;
    char *buf;
    size_t n;
    assert_int_equal(nb_file_read_all(gguf, (size_t)1 << 30, &buf, &n), NB_OK);
    static const char key[] = "llama.vocab_size";
    char *at = memmem(buf, n, key, sizeof key - 1);
    assert_non_null(at);
    uint32_t type, value;
    memcpy(&type, at + sizeof key - 1, 4);
    memcpy(&value, at + sizeof key - 1 + 4, 4);
    assert_int_equal(type, 4); /* GGUF u32 */
    assert_int_equal(value, 4096);
    value = 0xffffffffu; /* -1 as a u32 */
    memcpy(at + sizeof key - 1 + 4, &value, 4);
    char path[4300];
    snprintf(path, sizeof path, "%s/vocab.gguf", tu_dir);
    write_bytes(path, buf, n);
    free(buf);
    expect_fail(path, NB_ERR_FORMAT,
                "llama.vocab_size = 4294967295, but tensor 'token_embd.weight' has 4096 rows");
}

/* A directory that holds no model: a clear error from the source hash (the first
 * thing run/quantize/cache do with it), never undefined behaviour. */
static void test_empty_dir(void **state)
{
    char d[4300], f[4400];
    uint64_t h;
    snprintf(d, sizeof d, "%s/empty", tu_dir);
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_equal(tu_source_hash(d, &h), NB_ERR_NOT_FOUND);
    if (!strstr(nb_last_error(), "the directory holds no model files") ||
        !strstr(nb_last_error(), d))
        fail_msg("empty dir: '%s'", nb_last_error());
    snprintf(f, sizeof f, "%s/notes.txt", d);
    write_bytes(f, "x", 1);
    assert_int_equal(tu_source_hash(d, &h), NB_ERR_NOT_FOUND);
    if (!strstr(nb_last_error(), "the directory has no config.json"))
        fail_msg("dir without config.json: '%s'", nb_last_error());
    snprintf(f, sizeof f, "%s/missing", tu_dir);
    assert_int_equal(tu_source_hash(f, &h), NB_ERR_NOT_FOUND);
    if (!strstr(nb_last_error(), "missing: no such file"))
        fail_msg("missing: '%s'", nb_last_error());
}

/* A .nib quantized from a Hugging Face folder: errors in its embedded tokenizer files
 * name the file embedded and where it came from, not only the .nib. */
static void test_embedded_tokenizer_names(void **state)
{
    const char *d = make_variant(NULL, NULL, -1);
    if (!d) skip();
    char p[4400], nib[4400];
    snprintf(p, sizeof p, "%s/tokenizer.json", d);
    const char *no_merges = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}";
    write_bytes(p, no_merges, strlen(no_merges));
    snprintf(nib, sizeof nib, "%s/variant.nib", tu_dir);
    struct nb_quantize_opts o;
    nb_quantize_default_opts(&o);
    o.path = NB_WPATH_F32;
    o.n_threads = 1;
    struct nb_quantize_result r;
    if (tu_quantize_file(d, &o, nib, &r) != NB_OK) fail_msg("quantize: %s", nb_last_error());
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_tokenizer_load(&tok, nib), NB_ERR_FORMAT);
    assert_null(tok);
    char want[9000];
    snprintf(want, sizeof want,
             "%s (tokenizer.json embedded from %s/tokenizer.json): "
             "model.merges missing",
             nib, d);
    if (!strstr(nb_last_error(), want))
        fail_msg("error '%s' does not mention '%s'", nb_last_error(), want);

    /* a broken tokenizer_config.json beside a good tokenizer.json: named as itself */
    const char *good = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
    write_bytes(p, good, strlen(good));
    snprintf(p, sizeof p, "%s/tokenizer_config.json", d);
    write_bytes(p, "{\"bos_token\": ", strlen("{\"bos_token\": "));
    if (tu_quantize_file(d, &o, nib, &r) != NB_OK) fail_msg("quantize: %s", nb_last_error());
    assert_int_equal(nb_tokenizer_load(&tok, nib), NB_ERR_FORMAT);
    snprintf(want, sizeof want, "%s (tokenizer_config.json embedded from %s/tokenizer_config.json)",
             nib, d);
    if (!strstr(nb_last_error(), want))
        fail_msg("error '%s' does not mention '%s'", nb_last_error(), want);
    assert_int_equal(nb_tokenizer_load(&tok, "/nonexistent/m.nib"), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/m.nib: no such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_header_fields),
        cmocka_unit_test(test_vocab_size),
        cmocka_unit_test(test_empty_dir),
        cmocka_unit_test(test_embedded_tokenizer_names),
        cmocka_unit_test(test_config_disagrees_with_tensors),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_truncated_weights),
        cmocka_unit_test(test_gguf_truncated),
        cmocka_unit_test(test_not_a_model),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
