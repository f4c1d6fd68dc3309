/* tests/test_llama2c.c — llama2.c checkpoints: legacy, v1, v2, hostile headers,
 * and the real kjv-7m.bin against its safetensors twin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "formats/llama2c.h"
#include "formats/safetensors.h"
#include "helpers/llama2c_writer.h"

static float f32_at(const struct nb_tensor *t, int64_t i)
{
    float f;
    memcpy(&f, (const unsigned char *)t->data + 4 * i, 4);
    return f;
}

/* Every tensor of a parsed tiny model has the values the writer put there. */
static void check_model(const struct nb_llama2c *m, const struct nb_llama2c_config *c)
{
    const struct nb_llama2c_config *got = nb_llama2c_config(m);
    assert_int_equal(got->version, c->version);
    assert_int_equal(got->dim, c->dim);
    assert_int_equal(got->hidden_dim, c->hidden_dim);
    assert_int_equal(got->n_layers, c->n_layers);
    assert_int_equal(got->n_heads, c->n_heads);
    assert_int_equal(got->n_kv_heads, c->n_kv_heads);
    assert_int_equal(got->vocab_size, c->vocab_size);
    assert_int_equal(got->seq_len, c->seq_len);
    assert_int_equal(got->shared_classifier, c->shared_classifier);
    assert_int_equal(got->group_size, c->group_size);

    int64_t per = 9 * c->n_layers + 2 + !c->shared_classifier;
    int64_t n_quant = 7 * c->n_layers + 1 + !c->shared_classifier;
    assert_int_equal(nb_llama2c_n_tensors(m), per + (c->version == 2 ? n_quant : 0));

    int64_t D = c->dim, H = c->hidden_dim, KV = D / c->n_heads * c->n_kv_heads;
    const struct nb_tensor *t = nb_llama2c_find(m, "tok_embeddings");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], c->vocab_size);
    assert_int_equal(t->shape[1], D);
    assert_non_null(nb_llama2c_find(m, "norm"));
    if (c->shared_classifier)
        assert_null(nb_llama2c_find(m, "output"));
    else
        assert_non_null(nb_llama2c_find(m, "output"));
    t = nb_llama2c_find(m, "layers.1.wk");
    assert_non_null(t);
    assert_int_equal(t->shape[0], KV);
    assert_int_equal(t->shape[1], D);
    t = nb_llama2c_find(m, "layers.0.w2");
    assert_int_equal(t->shape[0], D);
    assert_int_equal(t->shape[1], H);
    assert_null(nb_llama2c_find(m, "layers.2.wq"));

    for (int64_t i = 0; i < nb_llama2c_n_tensors(m); i++) {
        t = nb_llama2c_tensor(m, i);
        assert_ptr_equal(nb_llama2c_find(m, t->name), t);
        int64_t n = nb_tensor_nelems(t);
        size_t len = strlen(t->name);
        if (len > 6 && strcmp(t->name + len - 6, ".scale") == 0) {
            char base[64];
            snprintf(base, sizeof base, "%.*s", (int)(len - 6), t->name);
            int tag = nbt_l2c_tag(base);
            const struct nb_tensor *q = nb_llama2c_find(m, base);
            assert_non_null(q);
            assert_int_equal(t->dtype, NB_DTYPE_F32);
            assert_int_equal(t->n_dims, 1);
            assert_int_equal(n * c->group_size, nb_tensor_nelems(q));
            for (int64_t g = 0; g < n; g++)
                assert_true(f32_at(t, g) == nbt_l2c_scale(tag, g));
            continue;
        }
        int tag = nbt_l2c_tag(t->name);
        assert_true(tag >= 0);
        if (t->dtype == NB_DTYPE_I8) {
            assert_int_equal(c->version, 2);
            assert_null(strstr(t->name, "norm"));
            assert_int_equal(t->n_bytes, (uint64_t)n);
            for (int64_t k = 0; k < n; k++)
                assert_int_equal(((const int8_t *)t->data)[k], nbt_l2c_q(tag, k));
        } else {
            assert_int_equal(t->dtype, NB_DTYPE_F32);
            assert_int_equal(t->n_bytes, (uint64_t)n * 4);
            for (int64_t k = 0; k < n; k++)
                assert_true(f32_at(t, k) == nbt_l2c_value(tag, k));
        }
    }
    if (c->version == 2) {
        assert_int_equal(nb_llama2c_find(m, "layers.0.wq")->dtype, NB_DTYPE_I8);
        assert_int_equal(nb_llama2c_find(m, "layers.0.attention_norm")->dtype, NB_DTYPE_F32);
        assert_non_null(nb_llama2c_find(m, "tok_embeddings.scale"));
    }
}

static void roundtrip(int version, int shared)
{
    struct nb_llama2c_config c = nbt_l2c_tiny(version, shared);
    size_t size = 0;
    uint8_t *buf = nbt_l2c_build(&c, &size);
    assert_non_null(buf);
    assert_true(nb_llama2c_sniff(buf, size));
    struct nb_llama2c *m = NULL;
    enum nb_status st = nb_llama2c_parse(&m, buf, size, "tiny.bin");
    if (st != NB_OK) fail_msg("%s", nb_last_error());
    check_model(m, &c);
    nb_llama2c_free(m);

    /* Truncated anywhere: an error, never a crash. A copy of exactly `cut` bytes
     * lets ASan catch any read past the end. */
    for (size_t cut = 0; cut < size; cut += (cut < 300 ? 1 : 97)) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, buf, cut);
        m = NULL;
        assert_int_not_equal(nb_llama2c_parse(&m, p, cut, "cut.bin"), NB_OK);
        assert_null(m);
        assert_non_null(strstr(nb_last_error(), "cut.bin"));
        free(p);
    }

    /* One byte longer: fine for legacy, trailing bytes for v1/v2. */
    uint8_t *longer = malloc(size + 1);
    memcpy(longer, buf, size);
    longer[size] = 0;
    st = nb_llama2c_parse(&m, longer, size + 1, "long.bin");
    if (version == 0) {
        assert_int_equal(st, NB_OK);
        nb_llama2c_free(m);
    } else {
        assert_int_equal(st, NB_ERR_FORMAT);
        assert_non_null(strstr(nb_last_error(), "trailing"));
    }
    free(longer);
    free(buf);
}

static void test_legacy_shared(void **s)
{
    (void)s, roundtrip(0, 1);
}
static void test_legacy_unshared(void **s)
{
    (void)s, roundtrip(0, 0);
}
static void test_v1_shared(void **s)
{
    (void)s, roundtrip(1, 1);
}
static void test_v1_unshared(void **s)
{
    (void)s, roundtrip(1, 0);
}
static void test_v2_shared(void **s)
{
    (void)s, roundtrip(2, 1);
}
static void test_v2_unshared(void **s)
{
    (void)s, roundtrip(2, 0);
}

static void put_i32(uint8_t *p, int32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)((uint32_t)v >> (8 * b));
}

static const char *const k_field_name[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                            "n_kv_heads", "vocab_size", "seq_len"};

/* A file of `version` whose header int `field` (0 = dim .. 6 = seq_len) is `v`: the
 * parser refuses it with a message holding `what`. A legacy file with one bad field
 * still sniffs as llama2.c (so that loading it reaches this message). */
static void expect_bad_field(int version, int field, int32_t v, const char *what)
{
    struct nb_llama2c_config c = nbt_l2c_tiny(version, 1);
    size_t size = 0;
    uint8_t *buf = nbt_l2c_build(&c, &size);
    put_i32(buf + (version ? 8 : 0) + 4 * field, v);
    struct nb_llama2c *m = NULL;
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "bad.bin"), NB_ERR_FORMAT);
    assert_null(m);
    if (!strstr(nb_last_error(), what) || !strstr(nb_last_error(), "bad.bin"))
        fail_msg("field %d = %d: message '%s' lacks '%s'", field, v, nb_last_error(), what);
    assert_true(nb_llama2c_sniff(buf, size));
    free(buf);
}

static void test_hostile(void **state)
{
    (void)state;
    char want[96];
    for (int version = 0; version <= 2; version++) {
        for (int f = 0; f < 7; f++) {
            snprintf(want, sizeof want, "llama2.c header: %s = 0 is not positive", k_field_name[f]);
            expect_bad_field(version, f, 0, want);
            if (f == 5 && version == 0) continue; /* negative vocab = unshared in legacy */
            snprintf(want, sizeof want, "llama2.c header: %s = -4 is not positive",
                     k_field_name[f]);
            expect_bad_field(version, f, -4, want);
        }
        expect_bad_field(version, 0, 9, "dim = 9 is not a multiple of n_heads = 2");
        expect_bad_field(version, 3, 3, "dim = 8 is not a multiple of n_heads = 3");
        expect_bad_field(version, 4, 3, "n_heads = 2 is not a multiple of n_kv_heads = 3");
        expect_bad_field(version, 3, 8, "head size dim / n_heads = 8 / 8 = 1 is odd");
        expect_bad_field(version, 1, 0x7fffffff, "hidden_dim = 2147483647 is out of range");
        expect_bad_field(version, 0, 1 << 30, "dim = 1073741824 is out of range (1..65536)");
        expect_bad_field(version, 2, 0x7fffffff, "n_layers = 2147483647 is out of range");
        expect_bad_field(version, 6, 1 << 23, "seq_len = 8388608 is out of range");
        expect_bad_field(version, 2, 3,
                         "truncated: the llama2.c header (dim 8, hidden_dim 12, "
                         "n_layers 3");
    }
    /* Several fields out of range: sizes whose products would overflow 64 bits. */
    struct nb_llama2c_config c = nbt_l2c_tiny(0, 1);
    size_t size = 0;
    uint8_t *buf = nbt_l2c_build(&c, &size);
    put_i32(buf + 0, 1 << 30);    /* dim */
    put_i32(buf + 4, 0x7fffffff); /* hidden */
    put_i32(buf + 8, 0x7fffffff); /* layers */
    put_i32(buf + 12, 2);
    put_i32(buf + 16, 2);
    struct nb_llama2c *m = NULL;
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "ovf.bin"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "dim = 1073741824"));
    assert_false(nb_llama2c_sniff(buf, size)); /* 3 of 7 ints out of range: not llama2.c */
    put_i32(buf + 20, INT32_MIN);              /* vocab */
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "ovf.bin"), NB_ERR_FORMAT);
    assert_false(nb_llama2c_sniff(buf, size));
    free(buf);

    /* A sniff keeps the caller's message; zeros and text are not llama2.c. */
    uint8_t zeros[256] = {0};
    nb_set_error(NB_ERR_IO, "earlier message");
    assert_false(nb_llama2c_sniff(zeros, sizeof zeros));
    assert_string_equal(nb_last_error(), "earlier message");
    const char *text = "this is not a model at all, just some text in a file....";
    assert_false(nb_llama2c_sniff(text, strlen(text)));

    /* v2: bad group size, unknown version, bad shared flag. */
    c = nbt_l2c_tiny(2, 1);
    buf = nbt_l2c_build(&c, &size);
    put_i32(buf + 37, 3);
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "g.bin"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "group_size = 3 does not divide dim = 8"));
    put_i32(buf + 37, 0);
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "g.bin"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "group_size = 0 is not positive"));
    put_i32(buf + 37, 4);
    buf[36] = 7;
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "g.bin"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "shared_classifier"));
    buf[36] = 1;
    put_i32(buf + 4, 3);
    assert_int_equal(nb_llama2c_parse(&m, buf, size, "g.bin"), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "version 3"));
    free(buf);

    /* Sniffing: not a llama2.c file. */
    const char *gguf = "GGUF\3\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
    assert_false(nb_llama2c_sniff(gguf, 32));
    assert_false(nb_llama2c_sniff("ak", 2));
    uint8_t st8[64] = {0x40, 0x1f};
    assert_false(nb_llama2c_sniff(st8, sizeof st8));
    assert_int_equal(nb_llama2c_open(&m, "/nonexistent.bin"), NB_ERR_IO);
}

static void test_kjv(void **state)
{
    (void)state;
    const char *dir = getenv("NIBBLE_MODELS_DIR");
    if (!dir) skip();
    char bin[4096], hf[4096];
    snprintf(bin, sizeof bin, "%s/kjv-7m/kjv-7m.bin", dir);
    snprintf(hf, sizeof hf, "%s/kjv-7m/hf/model.safetensors", dir);
    struct nb_llama2c *m = NULL;
    enum nb_status s = nb_llama2c_open(&m, bin);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    const struct nb_llama2c_config *c = nb_llama2c_config(m);
    assert_int_equal(c->version, 0);
    assert_int_equal(c->dim, 256);
    assert_int_equal(c->hidden_dim, 768);
    assert_int_equal(c->n_layers, 8);
    assert_int_equal(c->n_heads, 4);
    assert_int_equal(c->n_kv_heads, 2);
    assert_int_equal(c->vocab_size, 4096);
    assert_int_equal(c->seq_len, 256);
    assert_int_equal(c->shared_classifier, 1);
    assert_int_equal(nb_llama2c_n_tensors(m), 8 * 9 + 2);

    struct nb_safetensors *st = NULL;
    s = nb_safetensors_open(&st, hf);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    static const struct {
        const char *l2c, *hf;
    } same[] = {{"attention_norm", "input_layernorm"},
                {"ffn_norm", "post_attention_layernorm"},
                {"wv", "self_attn.v_proj"},
                {"wo", "self_attn.o_proj"},
                {"w1", "mlp.gate_proj"},
                {"w2", "mlp.down_proj"},
                {"w3", "mlp.up_proj"}};
    const struct nb_tensor *a = nb_llama2c_find(m, "tok_embeddings");
    const struct nb_tensor *b = nb_safetensors_find(st, "model.embed_tokens.weight");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->n_bytes, b->n_bytes);
    assert_memory_equal(a->data, b->data, a->n_bytes);
    a = nb_llama2c_find(m, "norm");
    b = nb_safetensors_find(st, "model.norm.weight");
    assert_memory_equal(a->data, b->data, a->n_bytes);
    for (int l = 0; l < 8; l++) {
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
            char n1[64], n2[96];
            snprintf(n1, sizeof n1, "layers.%d.%s", l, same[k].l2c);
            snprintf(n2, sizeof n2, "model.layers.%d.%s.weight", l, same[k].hf);
            a = nb_llama2c_find(m, n1);
            b = nb_safetensors_find(st, n2);
            assert_non_null(a);
            assert_non_null(b);
            assert_int_equal(a->n_dims, b->n_dims);
            for (int d = 0; d < a->n_dims; d++)
                assert_int_equal(a->shape[d], b->shape[d]);
            assert_int_equal(a->n_bytes, b->n_bytes);
            if (memcmp(a->data, b->data, a->n_bytes) != 0) fail_msg("%s != %s", n1, n2);
        }
        /* wq/wk: same shape, rows permuted for interleaved RoPE. */
        char n1[64], n2[96];
        snprintf(n1, sizeof n1, "layers.%d.wk", l);
        snprintf(n2, sizeof n2, "model.layers.%d.self_attn.k_proj.weight", l);
        a = nb_llama2c_find(m, n1);
        b = nb_safetensors_find(st, n2);
        assert_int_equal(a->shape[0], b->shape[0]);
        assert_int_equal(a->shape[1], b->shape[1]);
    }
    nb_safetensors_free(st);
    nb_llama2c_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_shared), cmocka_unit_test(test_legacy_unshared),
        cmocka_unit_test(test_v1_shared),     cmocka_unit_test(test_v1_unshared),
        cmocka_unit_test(test_v2_shared),     cmocka_unit_test(test_v2_unshared),
        cmocka_unit_test(test_hostile),       cmocka_unit_test(test_kjv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
