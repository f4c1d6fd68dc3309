/* tests/test_gguf.c — GGUF reader and writer: round trips, getter coercions,
 * hostile inputs (each must give the right status and a message naming the
 * problem), and the real kjv-7m model when NIBBLE_MODELS_DIR is set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/testutil.h"

#include "core/fp.h"
#include "core/mmap.h"
#include "formats/gguf.h"

static char g_dir[64];

static int setup_dir(void **state)
{
    strcpy(g_dir, "/tmp/nb_test_gguf_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* ------------------------------------------------------------------ raw builder */

/* A growable byte buffer for hand-made (and hand-broken) GGUF files. */
struct rb {
    uint8_t *p;
    size_t n, cap;
};

static void rb_bytes(struct rb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void rb_u8(struct rb *b, uint8_t v)
{
    rb_bytes(b, &v, 1);
}
static void rb_u32(struct rb *b, uint32_t v)
{
    rb_bytes(b, &v, 4);
}
static void rb_u64(struct rb *b, uint64_t v)
{
    rb_bytes(b, &v, 8);
}
static void rb_str(struct rb *b, const char *s)
{
    rb_u64(b, strlen(s));
    rb_bytes(b, s, strlen(s));
}
static void rb_pad(struct rb *b, size_t align)
{
    while (b->n % align)
        rb_u8(b, 0);
}
static void rb_header(struct rb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    rb_bytes(b, "GGUF", 4);
    rb_u32(b, version);
    rb_u64(b, n_tensors);
    rb_u64(b, n_kv);
}
static void rb_kv_u32(struct rb *b, const char *key, uint32_t v)
{
    rb_str(b, key);
    rb_u32(b, NB_GGUF_U32);
    rb_u32(b, v);
}
/* Tensor info with GGUF-order dims. */
static void rb_tensor(struct rb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t ggml_type, uint64_t offset)
{
    rb_str(b, name);
    rb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        rb_u64(b, ne[i]);
    rb_u32(b, ggml_type);
    rb_u64(b, offset);
}
/* A whole file with one tensor and `data_bytes` zero bytes of data after padding. */
static void rb_one_tensor(struct rb *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                          uint64_t offset, size_t data_bytes)
{
    rb_header(b, 3, 1, 0);
    rb_tensor(b, "w", n_dims, ne, type, offset);
    rb_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        rb_u8(b, 0);
}

/* Parses b from an exact-size heap copy (so ASan sees any over-read). */
static enum nb_status parse_rb(const struct rb *b, struct nb_gguf **out)
{
    uint8_t *copy = malloc(b->n ? b->n : 1);
    assert_non_null(copy);
    if (b->n) memcpy(copy, b->p, b->n);
    enum nb_status st = nb_gguf_parse(out, copy, b->n, "hostile.gguf");
    if (st == NB_OK) {
        nb_gguf_free(*out);
        *out = NULL;
    }
    free(copy);
    return st;
}

/* Expects parsing b to fail with `want` and a message naming the file and `what`. */
static void expect_fail(struct rb *b, enum nb_status want, const char *what, const char *what2)
{
    struct nb_gguf *g = NULL;
    enum nb_status st = parse_rb(b, &g);
    const char *msg = nb_last_error();
    if (st != want || !strstr(msg, "hostile.gguf") || !strstr(msg, what) ||
        (what2 && !strstr(msg, what2)))
        fprintf(stderr, "status %d (want %d), message: %s\n", st, want, msg);
    assert_int_equal(st, want);
    assert_non_null(strstr(msg, "hostile.gguf"));
    assert_non_null(strstr(msg, what));
    if (what2) assert_non_null(strstr(msg, what2));
    assert_null(g);
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------ round trips */

static void test_roundtrip_scalars(void **state)
{
    for (uint32_t version = 2; version <= 3; version++) {
        struct nb_gguf_writer *w;
        assert_int_equal(nb_gguf_writer_init(&w, version, 0), NB_OK);
        uint8_t u8 = 250;
        int8_t i8 = -120;
        uint16_t u16 = 65000;
        int16_t i16 = -32000;
        int64_t i64 = -(INT64_C(1) << 60);
        double f64 = -1.0 / 3.0;
        assert_int_equal(nb_gguf_writer_add_scalar(w, "u8", NB_GGUF_U8, &u8), NB_OK);
        assert_int_equal(nb_gguf_writer_add_scalar(w, "i8", NB_GGUF_I8, &i8), NB_OK);
        assert_int_equal(nb_gguf_writer_add_scalar(w, "u16", NB_GGUF_U16, &u16), NB_OK);
        assert_int_equal(nb_gguf_writer_add_scalar(w, "i16", NB_GGUF_I16, &i16), NB_OK);
        assert_int_equal(nb_gguf_writer_add_u32(w, "u32", 4000000000u), NB_OK);
        assert_int_equal(nb_gguf_writer_add_i32(w, "i32", -2000000000), NB_OK);
        assert_int_equal(nb_gguf_writer_add_f32(w, "f32", 1.5e-5f), NB_OK);
        assert_int_equal(nb_gguf_writer_add_bool(w, "bool.t", 7), NB_OK);
        assert_int_equal(nb_gguf_writer_add_bool(w, "bool.f", 0), NB_OK);
        assert_int_equal(nb_gguf_writer_add_u64(w, "u64", UINT64_C(1) << 40), NB_OK);
        assert_int_equal(nb_gguf_writer_add_scalar(w, "i64", NB_GGUF_I64, &i64), NB_OK);
        assert_int_equal(nb_gguf_writer_add_scalar(w, "f64", NB_GGUF_F64, &f64), NB_OK);
        assert_int_equal(nb_gguf_writer_add_str(w, "str", "héllo ▁world"), NB_OK);
        assert_int_equal(nb_gguf_writer_add_str(w, "empty", ""), NB_OK);
        assert_int_equal(nb_gguf_writer_add_u32(w, "u32", 1), NB_ERR_INVALID_ARG);
        assert_non_null(strstr(nb_last_error(), "duplicate key 'u32'"));
        assert_int_equal(nb_gguf_writer_add_scalar(w, "s", NB_GGUF_STRING, "x"),
                         NB_ERR_INVALID_ARG);
        const char *path = tmp_path("scalars.gguf");
        assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
        nb_gguf_writer_free(w);

        struct nb_gguf *g;
        assert_int_equal(nb_gguf_open(&g, path), NB_OK);
        assert_int_equal(nb_gguf_version(g), version);
        assert_int_equal(nb_gguf_alignment(g), 32);
        assert_string_equal(nb_gguf_path(g), path);
        assert_int_equal(nb_gguf_n_kv(g), 14);
        assert_int_equal(nb_gguf_n_tensors(g), 0);
        static const char *const keys[] = {"u8",     "i8",     "u16", "i16", "u32", "i32", "f32",
                                           "bool.t", "bool.f", "u64", "i64", "f64", "str", "empty"};
        static const enum nb_gguf_type types[] = {
            NB_GGUF_U8,  NB_GGUF_I8,  NB_GGUF_U16,    NB_GGUF_I16,   NB_GGUF_U32,
            NB_GGUF_I32, NB_GGUF_F32, NB_GGUF_BOOL,   NB_GGUF_BOOL,  NB_GGUF_U64,
            NB_GGUF_I64, NB_GGUF_F64, NB_GGUF_STRING, NB_GGUF_STRING};
        for (int i = 0; i < 14; i++) {
            assert_string_equal(nb_gguf_kv_key(g, i), keys[i]);
            assert_int_equal(nb_gguf_kv_type(g, i), types[i]);
            assert_int_equal(nb_gguf_find_kv(g, keys[i]), i);
        }
        assert_null(nb_gguf_kv_key(g, 14));
        assert_null(nb_gguf_kv_key(g, -1));
        int64_t v;
        uint32_t u;
        float f;
        int b;
        const char *s;
        assert_int_equal(nb_gguf_get_i64(g, "u8", &v), NB_OK);
        assert_int_equal(v, 250);
        assert_int_equal(nb_gguf_get_i64(g, "i8", &v), NB_OK);
        assert_int_equal(v, -120);
        assert_int_equal(nb_gguf_get_i64(g, "u16", &v), NB_OK);
        assert_int_equal(v, 65000);
        assert_int_equal(nb_gguf_get_i64(g, "i16", &v), NB_OK);
        assert_int_equal(v, -32000);
        assert_int_equal(nb_gguf_get_u32(g, "u32", &u), NB_OK);
        assert_int_equal(u, 4000000000u);
        assert_int_equal(nb_gguf_get_i64(g, "i32", &v), NB_OK);
        assert_int_equal(v, -2000000000);
        assert_int_equal(nb_gguf_get_f32(g, "f32", &f), NB_OK);
        assert_true(f == 1.5e-5f);
        assert_int_equal(nb_gguf_get_bool(g, "bool.t", &b), NB_OK);
        assert_int_equal(b, 1);
        assert_int_equal(nb_gguf_get_bool(g, "bool.f", &b), NB_OK);
        assert_int_equal(b, 0);
        assert_int_equal(nb_gguf_get_i64(g, "u64", &v), NB_OK);
        assert_int_equal(v, INT64_C(1) << 40);
        assert_int_equal(nb_gguf_get_i64(g, "i64", &v), NB_OK);
        assert_true(v == i64);
        assert_int_equal(nb_gguf_get_f32(g, "f64", &f), NB_OK);
        assert_true(f == (float)f64);
        assert_int_equal(nb_gguf_get_str(g, "str", &s), NB_OK);
        assert_string_equal(s, "héllo ▁world");
        assert_int_equal(nb_gguf_get_str(g, "empty", &s), NB_OK);
        assert_string_equal(s, "");
        nb_gguf_free(g);
    }
}

static void test_roundtrip_arrays(void **state)
{
    struct nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    const float fs[5] = {0.5f, -1.25f, 3e38f, 0.0f, -0.0f};
    const int32_t is[4] = {-7, 0, 7, INT32_MIN};
    const uint64_t us[2] = {UINT64_MAX, 5};
    const double ds[2] = {1e300, -2.5};
    const char *const strs[4] = {"<unk>", "", "▁the", "a b"};
    assert_int_equal(nb_gguf_writer_add_arr(w, "f32s", NB_GGUF_F32, fs, 5), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "i32s", NB_GGUF_I32, is, 4), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "u64s", NB_GGUF_U64, us, 2), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "f64s", NB_GGUF_F64, ds, 2), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "none", NB_GGUF_U8, NULL, 0), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr_str(w, "strs", strs, 4), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "bad", NB_GGUF_STRING, strs, 4), NB_ERR_INVALID_ARG);
    const char *path = tmp_path("arrays.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);

    struct nb_gguf *g;
    assert_int_equal(nb_gguf_open(&g, path), NB_OK);
    enum nb_gguf_type et;
    uint64_t n;
    const void *data;
    assert_int_equal(nb_gguf_get_arr(g, "f32s", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_F32);
    assert_int_equal(n, 5);
    assert_int_equal(nb_gguf_get_arr_data(g, "f32s", NB_GGUF_F32, &data, &n), NB_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(data, fs, sizeof fs);
    assert_int_equal(nb_gguf_get_arr_data(g, "i32s", NB_GGUF_I32, &data, &n), NB_OK);
    assert_memory_equal(data, is, sizeof is);
    double d;
    int64_t v;
    assert_int_equal(nb_gguf_get_arr_f64(g, "f32s", 1, &d), NB_OK);
    assert_true(d == -1.25);
    assert_int_equal(nb_gguf_get_arr_f64(g, "i32s", 3, &d), NB_OK);
    assert_true(d == (double)INT32_MIN);
    assert_int_equal(nb_gguf_get_arr_f64(g, "f64s", 0, &d), NB_OK);
    assert_true(d == 1e300);
    assert_int_equal(nb_gguf_get_arr_i64(g, "i32s", 0, &v), NB_OK);
    assert_int_equal(v, -7);
    assert_int_equal(nb_gguf_get_arr_i64(g, "u64s", 1, &v), NB_OK);
    assert_int_equal(v, 5);
    assert_int_equal(nb_gguf_get_arr_i64(g, "u64s", 0, &v), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_arr_i64(g, "i32s", 4, &v), NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "i32s"));
    assert_int_equal(nb_gguf_get_arr(g, "none", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_U8);
    assert_int_equal(n, 0);
    assert_int_equal(nb_gguf_get_arr(g, "strs", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_STRING);
    assert_int_equal(n, 4);
    for (uint64_t i = 0; i < 4; i++) {
        const char *s;
        assert_int_equal(nb_gguf_get_arr_str(g, "strs", i, &s), NB_OK);
        assert_string_equal(s, strs[i]);
    }
    const char *s;
    assert_int_equal(nb_gguf_get_arr_str(g, "strs", 4, &s), NB_ERR_RANGE);
    assert_int_equal(nb_gguf_get_arr_data(g, "strs", NB_GGUF_STRING, &data, &n),
                     NB_ERR_INVALID_ARG);
    nb_gguf_free(g);
}

/* A 150k-string vocabulary: every element must be reachable quickly (O(1) each). */
static void test_big_string_array(void **state)
{
    enum { N = 150000 };
    char **strs = malloc(N * sizeof *strs);
    assert_non_null(strs);
    for (int i = 0; i < N; i++) {
        strs[i] = malloc(16);
        snprintf(strs[i], 16, "tok%d", i);
    }
    struct nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    assert_int_equal(
        nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs, N),
        NB_OK);
    const char *path = tmp_path("vocab.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);
    struct nb_gguf *g;
    assert_int_equal(nb_gguf_open(&g, path), NB_OK);
    for (int i = N - 1; i >= 0; i--) {
        const char *s;
        assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s), NB_OK);
        if (strcmp(s, strs[i]) != 0) assert_string_equal(s, strs[i]);
    }
    nb_gguf_free(g);
    for (int i = 0; i < N; i++)
        free(strs[i]);
    free(strs);
}

/* Nested arrays (written raw): readable as "array of arrays", elements unsupported. */
static void test_nested_array(void **state)
{
    struct rb b = {0};
    rb_header(&b, 3, 0, 3);
    rb_str(&b, "nested");
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u64(&b, 2);
    rb_u32(&b, NB_GGUF_I32); /* [1, 2] */
    rb_u64(&b, 2);
    rb_u32(&b, 1);
    rb_u32(&b, 2);
    rb_u32(&b, NB_GGUF_STRING); /* ["x"] */
    rb_u64(&b, 1);
    rb_str(&b, "x");
    rb_str(&b, "deep"); /* [[[ ]]] */
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u64(&b, 1);
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u64(&b, 1);
    rb_u32(&b, NB_GGUF_F32);
    rb_u64(&b, 0);
    rb_kv_u32(&b, "after", 42);

    struct nb_gguf *g;
    assert_int_equal(nb_gguf_parse(&g, b.p, b.n, "nested.gguf"), NB_OK);
    enum nb_gguf_type et;
    uint64_t n;
    assert_int_equal(nb_gguf_get_arr(g, "nested", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_ARRAY);
    assert_int_equal(n, 2);
    const char *s;
    int64_t v;
    const void *data;
    assert_int_equal(nb_gguf_get_arr_str(g, "nested", 0, &s), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "nested"));
    assert_int_equal(nb_gguf_get_arr_i64(g, "nested", 0, &v), NB_ERR_UNSUPPORTED);
    assert_int_equal(nb_gguf_get_arr_data(g, "nested", NB_GGUF_I32, &data, &n), NB_ERR_UNSUPPORTED);
    assert_int_equal(nb_gguf_get_arr(g, "deep", &et, &n), NB_OK);
    uint32_t u;
    assert_int_equal(nb_gguf_get_u32(g, "after", &u), NB_OK);
    assert_int_equal(u, 42);
    nb_gguf_free(g);
    free(b.p);

    /* Deeper than the limit: a chain of 20 single-element arrays. */
    memset(&b, 0, sizeof b);
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "abyss");
    rb_u32(&b, NB_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        rb_u32(&b, NB_GGUF_ARRAY);
        rb_u64(&b, 1);
    }
    rb_u32(&b, NB_GGUF_U8);
    rb_u64(&b, 0);
    expect_fail(&b, NB_ERR_FORMAT, "abyss", "nested deeper");
}

/* Fills n bytes with a reproducible pattern. */
static void fill(void *p, size_t n, unsigned seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (uint8_t)(seed >> 16);
    }
}

static void test_roundtrip_tensors(void **state)
{
    static const struct {
        const char *name;
        enum nb_dtype dtype;
        int n_dims;
        int64_t shape[4];
    } spec[] = {
        {"a.f32", NB_DTYPE_F32, 2, {3, 5}},      {"b.f16", NB_DTYPE_F16, 4, {2, 1, 3, 4}},
        {"c.bf16", NB_DTYPE_BF16, 3, {2, 3, 5}}, {"d.q8", NB_DTYPE_Q8_0, 2, {3, 64}},
        {"e.q4", NB_DTYPE_Q4_0, 2, {2, 96}},     {"f.i8", NB_DTYPE_I8, 1, {7}},
        {"g.i32", NB_DTYPE_I32, 1, {3}},         {"h.q4_1", NB_DTYPE_Q4_1, 2, {2, 64}},
        {"i.q5_0", NB_DTYPE_Q5_0, 1, {32}},      {"j.q5_1", NB_DTYPE_Q5_1, 2, {3, 32}},
        {"k.q2_k", NB_DTYPE_Q2_K, 2, {2, 256}},  {"l.q3_k", NB_DTYPE_Q3_K, 2, {3, 256}},
        {"m.q4_k", NB_DTYPE_Q4_K, 2, {2, 512}},  {"n.q5_k", NB_DTYPE_Q5_K, 1, {256}},
        {"o.q6_k", NB_DTYPE_Q6_K, 3, {2, 1, 256}}, {"p.q8_k", NB_DTYPE_Q8_K, 1, {256}},
        {"q.iq4_nl", NB_DTYPE_IQ4_NL, 2, {3, 64}}, {"r.iq4_xs", NB_DTYPE_IQ4_XS, 2, {1, 768}},
    };
    enum { NT = sizeof spec / sizeof spec[0] };
    for (uint32_t align = 32; align <= 64; align *= 2) {
        uint8_t *bufs[NT];
        uint64_t sizes[NT];
        struct nb_gguf_writer *w;
        assert_int_equal(nb_gguf_writer_init(&w, 3, align), NB_OK);
        assert_int_equal(nb_gguf_writer_add_str(w, "general.architecture", "test"), NB_OK);
        for (int i = 0; i < NT; i++) {
            uint64_t nel = 1;
            for (int d = 0; d < spec[i].n_dims; d++)
                nel *= (uint64_t)spec[i].shape[d];
            sizes[i] = nel / (uint64_t)nb_dtype_block_elems(spec[i].dtype) *
                       (uint64_t)nb_dtype_block_bytes(spec[i].dtype);
            bufs[i] = malloc(sizes[i]);
            fill(bufs[i], sizes[i], (unsigned)i + align);
            if (spec[i].dtype == NB_DTYPE_F16) { /* real halves for good measure */
                for (uint64_t k = 0; k < nel; k++) {
                    uint16_t h = nb_f32_to_f16((float)k * 0.25f - 3.0f);
                    memcpy(bufs[i] + 2 * k, &h, 2);
                }
            }
            assert_int_equal(nb_gguf_writer_add_tensor(w, spec[i].name, spec[i].dtype,
                                                       spec[i].n_dims, spec[i].shape, bufs[i]),
                             NB_OK);
        }
        const int64_t bad[2] = {2, 33};
        assert_int_equal(nb_gguf_writer_add_tensor(w, "bad", NB_DTYPE_Q8_0, 2, bad, bufs[0]),
                         NB_ERR_INVALID_ARG);
        assert_int_equal(nb_gguf_writer_add_tensor(w, "a.f32", NB_DTYPE_F32, 2, bad, bufs[0]),
                         NB_ERR_INVALID_ARG);
        assert_non_null(strstr(nb_last_error(), "duplicate tensor 'a.f32'"));
        char path[256];
        snprintf(path, sizeof path, "%s", tmp_path("tensors.gguf"));
        assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
        nb_gguf_writer_free(w);
        assert_int_equal(tu_count_files(g_dir, ".tmp"), 0); /* renamed away */

        struct nb_gguf *g;
        assert_int_equal(nb_gguf_open(&g, path), NB_OK);
        assert_int_equal(nb_gguf_alignment(g), align);
        uint32_t a;
        if (align != 32) {
            assert_int_equal(nb_gguf_get_u32(g, "general.alignment", &a), NB_OK);
            assert_int_equal(a, align);
        } else {
            assert_int_equal(nb_gguf_get_u32(g, "general.alignment", &a), NB_ERR_NOT_FOUND);
        }
        assert_int_equal(nb_gguf_n_tensors(g), NT);
        const struct nb_tensor *t0 = nb_gguf_tensor(g, 0);
        for (int i = 0; i < NT; i++) {
            const struct nb_tensor *t = nb_gguf_tensor(g, i);
            assert_ptr_equal(nb_gguf_find_tensor(g, spec[i].name), t);
            assert_string_equal(t->name, spec[i].name);
            assert_int_equal(t->dtype, spec[i].dtype);
            assert_int_equal(t->n_dims, spec[i].n_dims);
            for (int d = 0; d < 4; d++)
                assert_int_equal(t->shape[d], d < spec[i].n_dims ? spec[i].shape[d] : 1);
            assert_int_equal(t->n_bytes, sizes[i]);
            assert_memory_equal(t->data, bufs[i], sizes[i]);
            assert_int_equal(((const uint8_t *)t->data - (const uint8_t *)t0->data) % align, 0);
        }
        assert_null(nb_gguf_tensor(g, NT));
        assert_null(nb_gguf_find_tensor(g, "missing"));
        nb_gguf_free(g);
        for (int i = 0; i < NT; i++)
            free(bufs[i]);
    }
}

/* GGUF stores ne innermost first: ne = {5, 3} is shape {3, 5}. */
static void test_shape_reversal_raw(void **state)
{
    struct rb b = {0};
    const uint64_t ne[3] = {4, 3, 2};
    rb_one_tensor(&b, 3, ne, 0, 0, 4 * 3 * 2 * 4);
    struct nb_gguf *g;
    assert_int_equal(nb_gguf_parse(&g, b.p, b.n, "shape.gguf"), NB_OK);
    const struct nb_tensor *t = nb_gguf_find_tensor(g, "w");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->shape[2], 4);
    assert_int_equal(t->shape[3], 1);
    assert_int_equal(nb_tensor_nelems(t), 24);
    assert_int_equal(t->n_bytes, 96);
    nb_gguf_free(g);
    free(b.p);
    /* an empty tensor (a zero dim) is legal and has no bytes */
    memset(&b, 0, sizeof b);
    const uint64_t ne0[2] = {8, 0};
    rb_one_tensor(&b, 2, ne0, 0, 0, 0);
    assert_int_equal(nb_gguf_parse(&g, b.p, b.n, "empty.gguf"), NB_OK);
    t = nb_gguf_tensor(g, 0);
    assert_int_equal(t->shape[0], 0);
    assert_int_equal(t->shape[1], 8);
    assert_int_equal(t->n_bytes, 0);
    assert_int_equal(nb_tensor_nelems(t), 0);
    nb_gguf_free(g);
    free(b.p);
}

/* ------------------------------------------------------------------ getter rules */

static void test_coercions(void **state)
{
    struct nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    uint8_t u8 = 200;
    int64_t neg = -5, big64 = INT64_C(1) << 40;
    uint64_t huge = UINT64_MAX;
    float fv = 2.5f;
    const float farr[2] = {1.0f, 2.0f};
    assert_int_equal(nb_gguf_writer_add_scalar(w, "u8", NB_GGUF_U8, &u8), NB_OK);
    assert_int_equal(nb_gguf_writer_add_scalar(w, "neg", NB_GGUF_I64, &neg), NB_OK);
    assert_int_equal(nb_gguf_writer_add_scalar(w, "big", NB_GGUF_I64, &big64), NB_OK);
    assert_int_equal(nb_gguf_writer_add_u64(w, "huge", huge), NB_OK);
    assert_int_equal(nb_gguf_writer_add_f32(w, "f", fv), NB_OK);
    assert_int_equal(nb_gguf_writer_add_bool(w, "b", 1), NB_OK);
    assert_int_equal(nb_gguf_writer_add_str(w, "s", "text"), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "fa", NB_GGUF_F32, farr, 2), NB_OK);
    const char *path = tmp_path("coerce.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);

    struct nb_gguf *g;
    assert_int_equal(nb_gguf_open(&g, path), NB_OK);
    uint32_t u;
    int64_t v;
    float f;
    int b;
    const char *s;
    enum nb_gguf_type et;
    uint64_t n;
    const void *data;
    /* integers widen and narrow when they fit */
    assert_int_equal(nb_gguf_get_u32(g, "u8", &u), NB_OK);
    assert_int_equal(u, 200);
    assert_int_equal(nb_gguf_get_i64(g, "neg", &v), NB_OK);
    assert_int_equal(v, -5);
    /* ... and fail naming key and types when they do not */
    assert_int_equal(nb_gguf_get_u32(g, "neg", &u), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'neg'"));
    assert_non_null(strstr(nb_last_error(), "u32"));
    assert_int_equal(nb_gguf_get_u32(g, "big", &u), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_i64(g, "huge", &v), NB_ERR_FORMAT);
    /* integers convert to float */
    assert_int_equal(nb_gguf_get_f32(g, "u8", &f), NB_OK);
    assert_true(f == 200.0f);
    assert_int_equal(nb_gguf_get_f32(g, "neg", &f), NB_OK);
    assert_true(f == -5.0f);
    assert_int_equal(nb_gguf_get_f32(g, "f", &f), NB_OK);
    assert_true(f == 2.5f);
    /* floats do not convert to integers; bools and strings are not numbers */
    assert_int_equal(nb_gguf_get_u32(g, "f", &u), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'f' is f32"));
    assert_int_equal(nb_gguf_get_i64(g, "b", &v), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_f32(g, "s", &f), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'s' is string"));
    assert_int_equal(nb_gguf_get_bool(g, "u8", &b), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_bool(g, "b", &b), NB_OK);
    assert_int_equal(b, 1);
    assert_int_equal(nb_gguf_get_str(g, "u8", &s), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "expected string"));
    assert_int_equal(nb_gguf_get_u32(g, "fa", &u), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_arr(g, "u8", &et, &n), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "expected array"));
    assert_int_equal(nb_gguf_get_arr_data(g, "fa", NB_GGUF_I32, &data, &n), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "array of f32"));
    assert_int_equal(nb_gguf_get_arr_i64(g, "fa", 0, &v), NB_ERR_FORMAT);
    assert_int_equal(nb_gguf_get_arr_str(g, "fa", 0, &s), NB_ERR_FORMAT);
    /* missing keys */
    assert_int_equal(nb_gguf_find_kv(g, "nope"), -1);
    assert_int_equal(nb_gguf_get_u32(g, "nope", &u), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "'nope' not found"));
    assert_non_null(strstr(nb_last_error(), "coerce.gguf"));
    assert_int_equal(nb_gguf_get_str(g, "nope", &s), NB_ERR_NOT_FOUND);
    assert_int_equal(nb_gguf_get_arr(g, "nope", &et, &n), NB_ERR_NOT_FOUND);
    assert_int_equal(nb_gguf_get_arr_str(g, "nope", 0, &s), NB_ERR_NOT_FOUND);
    nb_gguf_free(g);
}

static void test_writer_errors(void **state)
{
    struct nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_init(&w, 1, 0), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_gguf_writer_init(&w, 3, 48), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_gguf_writer_init(&w, 0, 0), NB_OK);
    assert_int_equal(nb_gguf_writer_add_u32(w, "k", 1), NB_OK);
    assert_int_equal(nb_gguf_writer_write(w, "/nonexistent-dir/x.gguf"), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "/nonexistent-dir/x.gguf: cannot create a temporary"));
    assert_non_null(strstr(nb_last_error(), "No such file or directory"));
    /* a symlink where the old writer put PATH.tmp: the file it points to is untouched */
    char victim[4200];
    snprintf(victim, sizeof victim, "%s", tmp_path("victim.txt"));
    FILE *vf = fopen(victim, "w");
    fputs("keep", vf);
    fclose(vf);
    char out[4200], planted[4300];
    snprintf(out, sizeof out, "%s", tmp_path("sym.gguf"));
    snprintf(planted, sizeof planted, "%s.tmp", out);
    assert_int_equal(symlink(victim, planted), 0);
    assert_int_equal(nb_gguf_writer_write(w, out), NB_OK);
    char kept[16] = {0};
    vf = fopen(victim, "r");
    assert_non_null(fgets(kept, sizeof kept, vf));
    fclose(vf);
    assert_string_equal(kept, "keep");
    unlink(planted);
    /* still usable after a failed write */
    const char *path = tmp_path("after_fail.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);
    struct nb_gguf *g;
    assert_int_equal(nb_gguf_open(&g, path), NB_OK);
    assert_int_equal(nb_gguf_version(g), 3);
    assert_int_equal(nb_gguf_n_kv(g), 1);
    nb_gguf_free(g);
    assert_int_equal(nb_gguf_open(&g, tmp_path("missing.gguf")), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "missing.gguf"));
}

/* ------------------------------------------------------------------ hostile inputs */

static void test_bad_magic_and_version(void **state)
{
    struct rb b = {0};
    rb_bytes(&b, "GGML", 4);
    rb_u32(&b, 3);
    rb_u64(&b, 0);
    rb_u64(&b, 0);
    expect_fail(&b, NB_ERR_FORMAT, "magic", NULL);
    rb_header(&b, 1, 0, 0);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "version 1", NULL);
    rb_header(&b, 4, 0, 0);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "version 4", NULL);
    rb_header(&b, 0x03000000u, 0, 0);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "big-endian", NULL);
    rb_bytes(&b, "GG", 2);
    expect_fail(&b, NB_ERR_FORMAT, "truncated", NULL);
    expect_fail(&b, NB_ERR_FORMAT, "truncated", NULL); /* empty buffer */
    /* minimal valid files for both versions */
    for (uint32_t v = 2; v <= 3; v++) {
        struct nb_gguf *g;
        rb_header(&b, v, 0, 0);
        assert_int_equal(nb_gguf_parse(&g, b.p, b.n, "min.gguf"), NB_OK);
        assert_int_equal(nb_gguf_version(g), v);
        nb_gguf_free(g);
        free(b.p);
        memset(&b, 0, sizeof b);
    }
}

/* Every strict prefix of a valid file must fail cleanly (never crash or over-read). */
static void test_truncation_everywhere(void **state)
{
    struct nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    const char *const toks[3] = {"a", "bc", ""};
    const int32_t arr[3] = {1, 2, 3};
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* 32 bytes: the file ends with the data */
    const int64_t shape[2] = {2, 4};
    assert_int_equal(nb_gguf_writer_add_str(w, "general.architecture", "llama"), NB_OK);
    assert_int_equal(nb_gguf_writer_add_u32(w, "llama.block_count", 2), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr_str(w, "tokens", toks, 3), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr(w, "ints", NB_GGUF_I32, arr, 3), NB_OK);
    assert_int_equal(nb_gguf_writer_add_tensor(w, "w", NB_DTYPE_F32, 2, shape, data), NB_OK);
    const char *path = tmp_path("trunc.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);
    char *file;
    size_t size;
    assert_int_equal(nb_file_read_all(path, 1 << 20, &file, &size), NB_OK);
    struct rb b = {0};
    rb_bytes(&b, file, size);
    struct nb_gguf *g;
    assert_int_equal(parse_rb(&b, &g), NB_OK);
    for (size_t cut = 0; cut < size; cut++) {
        b.n = cut;
        enum nb_status st = parse_rb(&b, &g);
        if (st != NB_ERR_FORMAT) fprintf(stderr, "cut %zu: status %d\n", cut, st);
        assert_int_equal(st, NB_ERR_FORMAT);
        assert_non_null(strstr(nb_last_error(), "hostile.gguf"));
    }
    free(b.p);
    free(file);
}

static void test_hostile_counts(void **state)
{
    struct rb b = {0};
    rb_header(&b, 3, UINT64_C(1) << 60, 0);
    expect_fail(&b, NB_ERR_FORMAT, "tensor count", NULL);
    rb_header(&b, 3, 0, UINT64_MAX);
    expect_fail(&b, NB_ERR_FORMAT, "kv count", NULL);
    /* key length huge */
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, UINT64_C(1) << 62);
    rb_bytes(&b, "key.............", 16);
    expect_fail(&b, NB_ERR_FORMAT, "string length", NULL);
    /* string value length huge */
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "name");
    rb_u32(&b, NB_GGUF_STRING);
    rb_u64(&b, UINT64_MAX);
    rb_bytes(&b, "abcd", 4);
    expect_fail(&b, NB_ERR_FORMAT, "'name'", "string length");
    /* array counts huge, for fixed-size, string and nested elements */
    static const uint32_t elem[3] = {NB_GGUF_U64, NB_GGUF_STRING, NB_GGUF_ARRAY};
    for (int i = 0; i < 3; i++) {
        rb_header(&b, 3, 0, 1);
        rb_str(&b, "arr");
        rb_u32(&b, NB_GGUF_ARRAY);
        rb_u32(&b, elem[i]);
        rb_u64(&b, (UINT64_C(1) << 61) + 1); /* x 8 wraps around 2^64 */
        rb_u64(&b, 0);
        expect_fail(&b, NB_ERR_FORMAT, "'arr'", "array count");
    }
    /* unknown value and element types */
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "odd");
    rb_u32(&b, 13);
    rb_u64(&b, 0);
    expect_fail(&b, NB_ERR_FORMAT, "'odd'", "unknown value type 13");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "odd");
    rb_u32(&b, NB_GGUF_ARRAY);
    rb_u32(&b, 99);
    rb_u64(&b, 0);
    expect_fail(&b, NB_ERR_FORMAT, "'odd'", "unknown type 99");
    /* duplicate keys */
    rb_header(&b, 3, 0, 3);
    rb_kv_u32(&b, "x", 1);
    rb_kv_u32(&b, "y", 1);
    rb_kv_u32(&b, "x", 2);
    expect_fail(&b, NB_ERR_FORMAT, "duplicate key 'x'", NULL);
}

static void test_hostile_tensors(void **state)
{
    struct rb b = {0};
    const uint64_t ne8[1] = {8};
    /* offset past the end */
    rb_one_tensor(&b, 1, ne8, 0, 32, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "past the end");
    /* data shorter than the tensor */
    rb_one_tensor(&b, 1, ne8, 0, 0, 31);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "past the end");
    /* offset near 2^64 */
    rb_one_tensor(&b, 1, ne8, 0, UINT64_MAX - 31, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "past the end");
    /* misaligned offset */
    rb_one_tensor(&b, 1, ne8, 0, 4, 64);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "alignment");
    /* element count overflow */
    const uint64_t ne_big[3] = {UINT64_C(1) << 32, UINT64_C(1) << 32, UINT64_C(1) << 32};
    rb_one_tensor(&b, 3, ne_big, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "overflow");
    /* a zero dim makes the count 0, but the other dims still must not overflow */
    const uint64_t ne_zero[3] = {0, UINT64_C(1) << 62, 4};
    rb_one_tensor(&b, 3, ne_zero, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "overflow");
    /* elements fit in i64 but bytes do not */
    const uint64_t ne_bytes[2] = {UINT64_C(1) << 31, UINT64_C(1) << 31};
    rb_one_tensor(&b, 2, ne_bytes, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", NULL);
    const uint64_t ne_neg[1] = {UINT64_MAX};
    rb_one_tensor(&b, 1, ne_neg, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "too large");
    /* n_dims 0 and 5 */
    const uint64_t ne5[5] = {1, 1, 1, 1, 1};
    rb_one_tensor(&b, 0, ne5, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "n_dims 0");
    rb_one_tensor(&b, 5, ne5, 0, 0, 32);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "n_dims 5");
    /* unsupported ggml types, refused by name (IQ2_XXS = 16, TQ1_0 = 34, and an unknown
     * number), the message listing the types that are read */
    const uint64_t ne256[1] = {256};
    rb_one_tensor(&b, 1, ne256, 16, 0, 144);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "ggml type 16 (IQ2_XXS) is not supported", "Q4_K");
    rb_one_tensor(&b, 1, ne256, 34, 0, 144);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "tensor 'w'", "ggml type 34 (TQ1_0)");
    rb_one_tensor(&b, 1, ne256, 1000, 0, 144);
    expect_fail(&b, NB_ERR_UNSUPPORTED, "tensor 'w'", "ggml type 1000");
    /* partial quant block (Q8_0: 32; the k-quants and IQ4_XS: rows of whole 256-blocks) */
    const uint64_t ne33[2] = {33, 2};
    rb_one_tensor(&b, 2, ne33, 8, 0, 128);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "block size");
    static const struct {
        uint32_t type, bytes; /* ggml type, bytes per 256 elements */
        const char *name;
    } kq[] = {{10, 84, "Q2_K"},  {11, 110, "Q3_K"}, {12, 144, "Q4_K"}, {13, 176, "Q5_K"},
              {14, 210, "Q6_K"}, {15, 292, "Q8_K"}, {23, 136, "IQ4_XS"}};
    for (size_t k = 0; k < sizeof kq / sizeof kq[0]; k++) {
        const uint64_t ne128x2[2] = {128, 2}; /* 256 elements, but rows of half a block */
        rb_one_tensor(&b, 2, ne128x2, kq[k].type, 0, kq[k].bytes);
        expect_fail(&b, NB_ERR_FORMAT, "tensor 'w': innermost dimension 128", kq[k].name);
        const uint64_t ne512x3[2] = {512, 3}; /* data one byte short */
        rb_one_tensor(&b, 2, ne512x3, kq[k].type, 0, 6 * kq[k].bytes - 1);
        expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "past the end");
        rb_one_tensor(&b, 2, ne512x3, kq[k].type, 0, 6 * kq[k].bytes); /* exact: fine */
        struct nb_gguf *g = NULL;
        assert_int_equal(parse_rb(&b, &g), NB_OK);
        free(b.p);
        memset(&b, 0, sizeof b);
    }
    const uint64_t ne48[1] = {48}; /* IQ4_NL: blocks of 32 */
    rb_one_tensor(&b, 1, ne48, 20, 0, 36);
    expect_fail(&b, NB_ERR_FORMAT, "tensor 'w'", "IQ4_NL block size 32");
    /* duplicate tensor names */
    rb_header(&b, 3, 2, 0);
    rb_tensor(&b, "w", 1, ne8, 0, 0);
    rb_tensor(&b, "w", 1, ne8, 0, 32);
    rb_pad(&b, 32);
    for (int i = 0; i < 64; i++)
        rb_u8(&b, 0);
    expect_fail(&b, NB_ERR_FORMAT, "duplicate tensor name 'w'", NULL);
    /* tensors sharing bytes: the same offset, and one inside another */
    const uint64_t ne16[1] = {16};
    for (int k = 0; k < 2; k++) {
        rb_header(&b, 3, 2, 0);
        rb_tensor(&b, "a", 1, ne16, 0, 0);
        rb_tensor(&b, "b", 1, ne8, 0, k ? 32 : 0);
        rb_pad(&b, 32);
        for (int i = 0; i < 64; i++)
            rb_u8(&b, 0);
        expect_fail(&b, NB_ERR_FORMAT, "'a' [0, 64)", "overlap");
    }
    /* alignment 0..4 (and a string alignment) */
    for (uint32_t a = 0; a <= 4; a++) { /* 1, 2 and 4 too: the spec says a multiple of 8 */
        rb_header(&b, 3, 0, 1);
        rb_kv_u32(&b, "general.alignment", a);
        expect_fail(&b, NB_ERR_FORMAT, "general.alignment", "power of two");
    }
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "general.alignment");
    rb_u32(&b, NB_GGUF_STRING);
    rb_str(&b, "32");
    expect_fail(&b, NB_ERR_FORMAT, "general.alignment", "string");
    /* a valid non-default alignment is honoured */
    rb_header(&b, 3, 1, 1);
    rb_kv_u32(&b, "general.alignment", 16);
    rb_tensor(&b, "w", 1, ne8, 0, 16);
    rb_pad(&b, 16);
    for (int i = 0; i < 48; i++)
        rb_u8(&b, 0);
    struct nb_gguf *g;
    assert_int_equal(nb_gguf_parse(&g, b.p, b.n, "a16.gguf"), NB_OK);
    assert_int_equal(nb_gguf_alignment(g), 16);
    nb_gguf_free(g);
    free(b.p);
}

/* ------------------------------------------------------------------ real model */

static void test_kjv_model(void **state)
{
    const char *dir = getenv("NIBBLE_MODELS_DIR");
    if (!dir || !*dir) skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/kjv-7m/kjv-7m-f32.gguf", dir);
    if (access(path, R_OK) != 0) skip();
    struct nb_gguf *g;
    assert_int_equal(nb_gguf_open(&g, path), NB_OK);
    assert_int_equal(nb_gguf_version(g), 3);
    const char *s;
    uint32_t u;
    float f;
    assert_int_equal(nb_gguf_get_str(g, "general.architecture", &s), NB_OK);
    assert_string_equal(s, "llama");
    assert_int_equal(nb_gguf_get_u32(g, "llama.block_count", &u), NB_OK);
    assert_int_equal(u, 8);
    assert_int_equal(nb_gguf_get_u32(g, "llama.embedding_length", &u), NB_OK);
    assert_int_equal(u, 256);
    assert_int_equal(nb_gguf_get_u32(g, "llama.attention.head_count_kv", &u), NB_OK);
    assert_int_equal(u, 2);
    assert_int_equal(nb_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f), NB_OK);
    assert_true(f == 1e-5f);
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.model", &s), NB_OK);
    assert_string_equal(s, "llama");
    enum nb_gguf_type et;
    uint64_t n;
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_STRING);
    assert_int_equal(n, 4096);
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 0, &s), NB_OK);
    assert_string_equal(s, "<unk>");
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s), NB_OK);
    assert_string_equal(s, "<s>");
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_F32);
    assert_int_equal(n, 4096);
    const struct nb_tensor *t = nb_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, NB_DTYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], 4096);
    assert_int_equal(t->shape[1], 256);
    assert_int_equal(t->n_bytes, 4096 * 256 * 4);
    t = nb_gguf_find_tensor(g, "blk.7.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 256);
    assert_int_equal(t->shape[1], 768);
    assert_int_equal(nb_gguf_n_tensors(g), 2 + 8 * 9);
    nb_gguf_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_scalars),
        cmocka_unit_test(test_roundtrip_arrays),
        cmocka_unit_test(test_big_string_array),
        cmocka_unit_test(test_nested_array),
        cmocka_unit_test(test_roundtrip_tensors),
        cmocka_unit_test(test_shape_reversal_raw),
        cmocka_unit_test(test_coercions),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_bad_magic_and_version),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_hostile_counts),
        cmocka_unit_test(test_hostile_tensors),
        cmocka_unit_test(test_kjv_model),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
