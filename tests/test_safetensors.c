/* tests/test_safetensors.c — the safetensors reader and writer: round trips,
 * sharded checkpoints, hostile headers, and the real kjv-7m model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/testutil.h"

#include "formats/safetensors.h"
#include "formats/safetensors_write.h"

/* ---------------------------------------------------------------- helpers */

static char g_dir[64];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/nb_test_st_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* `name` inside the test folder (a few rotating buffers, so results may be kept). */
static const char *in_dir(const char *name)
{
    static char paths[4][256];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", g_dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

/* Bytes of a file: u64 length of `header`, the header, `data_len` data bytes
 * (0, 1, 2, ...). Exactly sized so ASan catches any read past the end. */
static uint8_t *make_file(const char *header, size_t data_len, size_t *size)
{
    size_t h = strlen(header);
    *size = 8 + h + data_len;
    uint8_t *p = malloc(*size);
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(p + 8, header, h);
    for (size_t i = 0; i < data_len; i++)
        p[8 + h + i] = (uint8_t)i;
    return p;
}

/* Parse `header` + `data_len` bytes and expect `want` with every `needles` (NULL
 * ended) in the message. */
static void expect(const char *header, size_t data_len, enum nb_status want, ...)
{
    size_t size;
    uint8_t *p = make_file(header, data_len, &size);
    struct nb_safetensors *st = NULL;
    enum nb_status got = nb_safetensors_parse(&st, p, size, "bad.safetensors");
    if (got != want)
        fail_msg("header %s: status %d (%s), want %d", header, got, nb_last_error(), want);
    if (want == NB_OK) {
        nb_safetensors_free(st);
    } else {
        assert_null(st);
        va_list ap;
        va_start(ap, want);
        const char *needle;
        assert_non_null(strstr(nb_last_error(), "bad.safetensors"));
        while ((needle = va_arg(ap, const char *)))
            if (!strstr(nb_last_error(), needle))
                fail_msg("header %s: message '%s' lacks '%s'", header, nb_last_error(), needle);
        va_end(ap);
    }
    free(p);
}

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return p;
}

/* ---------------------------------------------------------------- round trips */

static const enum nb_dtype k_dtypes[] = {NB_DTYPE_F32, NB_DTYPE_F16, NB_DTYPE_BF16, NB_DTYPE_I8,
                                         NB_DTYPE_I32};
static const int64_t k_shapes[][NB_MAX_DIMS] = {{1, 1, 1, 1}, {5, 1, 1, 1}, {3, 4, 1, 1},
                                                {2, 3, 2, 1}, {2, 1, 3, 2}, {0, 3, 1, 1}};
static const int k_ndims[] = {0, 1, 2, 3, 4, 2};
#define N_SHAPES ((int)(sizeof k_ndims / sizeof k_ndims[0]))
#define N_DT     ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

static void test_roundtrip(void **state)
{
    (void)state;
    struct nb_tensor ts[N_DT * N_SHAPES];
    char names[N_DT * N_SHAPES][48];
    uint8_t *bufs[N_DT * N_SHAPES];
    int n = 0;
    for (int d = 0; d < N_DT; d++) {
        for (int s = 0; s < N_SHAPES; s++, n++) {
            struct nb_tensor *t = &ts[n];
            memset(t, 0, sizeof *t);
            snprintf(names[n], sizeof names[n], "t.%s.%d \"q\"", nb_dtype_name(k_dtypes[d]), s);
            t->name = names[n];
            t->dtype = k_dtypes[d];
            t->n_dims = k_ndims[s];
            memcpy(t->shape, k_shapes[s], sizeof t->shape);
            t->n_bytes = (uint64_t)nb_tensor_nelems(t) * (uint64_t)nb_dtype_block_bytes(t->dtype);
            bufs[n] = malloc(t->n_bytes + 1);
            for (uint64_t i = 0; i < t->n_bytes; i++)
                bufs[n][i] = (uint8_t)(i * 7 + (uint64_t)n);
            t->data = bufs[n];
        }
    }
    const char *keys[] = {"format", "note"}, *vals[] = {"pt", "a \"quoted\"\nline"};
    const char *path = in_dir("rt.safetensors");
    enum nb_status s = nb_safetensors_write_meta(path, ts, n, keys, vals, 2);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(tu_count_files(g_dir, ".tmp"), 0); /* renamed away */

    size_t size;
    uint8_t *file = read_file(path, &size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | file[i];
    assert_int_equal(hlen % 8, 0);
    free(file);

    struct nb_safetensors *st = NULL;
    s = nb_safetensors_open(&st, path);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_safetensors_n_tensors(st), n);
    assert_string_equal(nb_safetensors_metadata(st, "format"), "pt");
    assert_string_equal(nb_safetensors_metadata(st, "note"), vals[1]);
    assert_null(nb_safetensors_metadata(st, "missing"));
    for (int i = 0; i < n; i++) {
        const struct nb_tensor *t = nb_safetensors_find(st, ts[i].name);
        assert_non_null(t);
        assert_string_equal(t->name, ts[i].name);
        assert_int_equal(t->dtype, ts[i].dtype);
        assert_int_equal(t->n_dims, ts[i].n_dims);
        for (int d = 0; d < NB_MAX_DIMS; d++)
            assert_int_equal(t->shape[d], ts[i].shape[d]);
        assert_int_equal(t->n_bytes, ts[i].n_bytes);
        if (t->n_bytes) assert_memory_equal(t->data, ts[i].data, t->n_bytes);
        assert_ptr_equal(nb_safetensors_tensor(st, i), t); /* file order kept */
    }
    assert_null(nb_safetensors_find(st, "nope"));
    assert_null(nb_safetensors_tensor(st, n));
    assert_null(nb_safetensors_tensor(st, -1));
    nb_safetensors_free(st);

    /* The writer refuses what it cannot represent. */
    struct nb_tensor bad = ts[0];
    bad.dtype = NB_DTYPE_Q8_0;
    assert_int_equal(nb_safetensors_write(path, &bad, 1), NB_ERR_UNSUPPORTED);
    bad = ts[1];
    bad.n_bytes += 1;
    assert_int_equal(nb_safetensors_write(path, &bad, 1), NB_ERR_INVALID_ARG);
    struct nb_tensor two[2] = {ts[1], ts[1]};
    assert_int_equal(nb_safetensors_write(path, two, 2), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_safetensors_write("/nonexistent/dir/x.safetensors", ts, 1), NB_ERR_IO);
    for (int i = 0; i < n; i++)
        free(bufs[i]);
}

static void test_many_tensors(void **state)
{
    (void)state;
    enum { N = 600 };
    static struct nb_tensor ts[N];
    static char names[N][40];
    static float vals[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.w%d", i / 9, i % 9);
        vals[i] = (float)i;
        ts[i] = (struct nb_tensor){.name = names[i],
                                   .dtype = NB_DTYPE_F32,
                                   .n_dims = 1,
                                   .shape = {1, 1, 1, 1},
                                   .data = &vals[i],
                                   .n_bytes = 4};
    }
    const char *path = in_dir("many.safetensors");
    assert_int_equal(nb_safetensors_write(path, ts, N), NB_OK);
    struct nb_safetensors *st = NULL;
    assert_int_equal(nb_safetensors_open(&st, path), NB_OK);
    for (int rep = 0; rep < 100; rep++) {
        for (int i = 0; i < N; i++) {
            const struct nb_tensor *t = nb_safetensors_find(st, names[i]);
            assert_non_null(t);
            float f;
            memcpy(&f, t->data, 4);
            assert_true(f == (float)i);
        }
    }
    nb_safetensors_free(st);
}

/* ---------------------------------------------------------------- sharded */

static void write_shards(void)
{
    static const float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {7, 8}, c[3] = {9, 10, 11};
    struct nb_tensor s1[2] = {{.name = "a",
                               .dtype = NB_DTYPE_F32,
                               .n_dims = 2,
                               .shape = {2, 3, 1, 1},
                               .data = a,
                               .n_bytes = 24},
                              {.name = "b",
                               .dtype = NB_DTYPE_F32,
                               .n_dims = 1,
                               .shape = {2, 1, 1, 1},
                               .data = b,
                               .n_bytes = 8}};
    struct nb_tensor s2[1] = {{.name = "c",
                               .dtype = NB_DTYPE_F32,
                               .n_dims = 1,
                               .shape = {3, 1, 1, 1},
                               .data = c,
                               .n_bytes = 12}};
    const char *k[] = {"format"}, *v1[] = {"first"}, *v2[] = {"second"};
    assert_int_equal(
        nb_safetensors_write_meta(in_dir("model-00001-of-00002.safetensors"), s1, 2, k, v1, 1),
        NB_OK);
    assert_int_equal(
        nb_safetensors_write_meta(in_dir("model-00002-of-00002.safetensors"), s2, 1, k, v2, 1),
        NB_OK);
}

static void write_index(const char *a, const char *b, const char *c)
{
    char text[1024];
    snprintf(
        text, sizeof text,
        "{\"metadata\": {\"total_size\": 44},\n \"weight_map\": {\"a\": \"%s\", \"b\": \"%s\", "
        "\"c\": \"%s\"}}\n",
        a, b, c);
    write_text(in_dir("model.safetensors.index.json"), text);
}

static const char *k_s1 = "model-00001-of-00002.safetensors";
static const char *k_s2 = "model-00002-of-00002.safetensors";

static void expect_index(enum nb_status want, const char *needle)
{
    struct nb_safetensors *st = NULL;
    enum nb_status got = nb_safetensors_open(&st, g_dir);
    if (got != want) fail_msg("status %d (%s), want %d", got, nb_last_error(), want);
    assert_null(st);
    if (!strstr(nb_last_error(), needle))
        fail_msg("message '%s' lacks '%s'", nb_last_error(), needle);
}

static void test_sharded(void **state)
{
    (void)state;
    write_shards();
    write_index(k_s1, k_s1, k_s2);
    const char *paths[] = {g_dir, in_dir("model.safetensors.index.json")};
    for (int p = 0; p < 2; p++) {
        struct nb_safetensors *st = NULL;
        enum nb_status s = nb_safetensors_open(&st, paths[p]);
        if (s != NB_OK) fail_msg("%s", nb_last_error());
        assert_int_equal(nb_safetensors_n_tensors(st), 3);
        const struct nb_tensor *t = nb_safetensors_find(st, "c");
        assert_non_null(t);
        assert_int_equal(t->shape[0], 3);
        float f;
        memcpy(&f, (const char *)t->data + 8, 4);
        assert_true(f == 11.0f);
        memcpy(&f, (const char *)nb_safetensors_find(st, "b")->data, 4);
        assert_true(f == 7.0f);
        assert_int_equal(nb_safetensors_find(st, "a")->shape[1], 3);
        assert_string_equal(nb_safetensors_metadata(st, "format"), "first");
        nb_safetensors_free(st);
    }

    /* Hostile indexes. */
    write_index(k_s1, k_s1, "model-00003-of-00002.safetensors");
    expect_index(NB_ERR_NOT_FOUND, "model-00003-of-00002.safetensors");
    write_index(k_s1, k_s1, "../model-00002-of-00002.safetensors");
    expect_index(NB_ERR_FORMAT, "'../model-00002-of-00002.safetensors'");
    write_index(k_s1, k_s1, "/etc/passwd");
    expect_index(NB_ERR_FORMAT, "/etc/passwd");
    write_index(k_s1, k_s1, "..");
    expect_index(NB_ERR_FORMAT, "not a plain file name");
    write_index(k_s1, k_s2, k_s2); /* b is in shard 1, listed in shard 2 */
    expect_index(NB_ERR_FORMAT, "tensor 'b' is listed in shard 'model-00002");
    write_text(in_dir("model.safetensors.index.json"), "{\"weight_map\": {\"a\": 3}}");
    expect_index(NB_ERR_FORMAT, "'a'");
    write_text(in_dir("model.safetensors.index.json"), "{\"weight_map\": {}}");
    expect_index(NB_ERR_FORMAT, "empty");
    write_text(in_dir("model.safetensors.index.json"), "{\"weight\": {}}");
    expect_index(NB_ERR_FORMAT, "weight_map");
    write_text(in_dir("model.safetensors.index.json"), "{\"weight_map\": {\n");
    expect_index(NB_ERR_FORMAT, "index.json:2:");

    /* The same name in two shards. */
    static const float x = 1;
    struct nb_tensor dup = {.name = "c",
                            .dtype = NB_DTYPE_F32,
                            .n_dims = 0,
                            .shape = {1, 1, 1, 1},
                            .data = &x,
                            .n_bytes = 4};
    assert_int_equal(nb_safetensors_write(in_dir(k_s1), &dup, 1), NB_OK);
    write_index(k_s1, k_s1, k_s2);
    expect_index(NB_ERR_FORMAT, "'c' appears twice");

    /* A directory with neither file; a path that does not exist. */
    unlink(in_dir("model.safetensors.index.json"));
    expect_index(NB_ERR_NOT_FOUND, "model.safetensors");
    struct nb_safetensors *st = NULL;
    assert_int_equal(nb_safetensors_open(&st, in_dir("nothing.safetensors")), NB_ERR_NOT_FOUND);
    unlink(in_dir(k_s1));
    unlink(in_dir(k_s2));
}

/* ---------------------------------------------------------------- hostile */

static void test_hostile_headers(void **state)
{
    (void)state;
    const char *ok1 = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect(ok1, 8, NB_OK);
    expect(ok1, 9, NB_OK); /* unreferenced bytes at the end are allowed */

    /* Header length huge, or beyond the file. */
    uint8_t p[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'};
    struct nb_safetensors *st = NULL;
    assert_int_equal(nb_safetensors_parse(&st, p, sizeof p, "huge"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "header length"));
    assert_non_null(strstr(nb_last_error(), "limit"));
    p[5] = 0;
    p[0] = 9; /* 9 > 16 - 8 */
    assert_int_equal(nb_safetensors_parse(&st, p, sizeof p, "long"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "exceeds the file size"));
    assert_int_equal(nb_safetensors_parse(&st, p, 5, "short"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "too short"));

    expect("{\"w\": nope}", 0, NB_ERR_FORMAT, "JSON syntax error", ":1:7:", NULL);
    expect("[1, 2]", 0, NB_ERR_FORMAT, "not a JSON object", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, NB_ERR_FORMAT,
           "'w'", "past the end", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,16]}}", 16, NB_ERR_FORMAT,
           "'w'", "needs 8", NULL);
    expect("{\"w\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, NB_ERR_FORMAT,
           "'w'", "span 24 bytes", NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
           8, NB_ERR_FORMAT, "'a'", "'b'", "overlap", NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           8, NB_OK); /* empty tensors overlap nothing */
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, NB_ERR_FORMAT,
           "'w'", "dimension 0", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, NB_ERR_FORMAT,
           "'w'", "dimension 0", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
           NB_ERR_UNSUPPORTED, "'w'", "5 dimensions", NULL);
    expect("{\"w\":{\"dtype\":\"Q9\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NB_ERR_FORMAT,
           "'w'", "unknown dtype 'Q9'", NULL);
    const char *unsup[] = {"F64", "U8", "I64", "F8_E4M3", "BOOL"};
    for (int i = 0; i < 5; i++) {
        char h[128];
        snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"%s\",\"shape\":[],\"data_offsets\":[0,1]}}",
                 unsup[i]);
        expect(h, 8, NB_ERR_UNSUPPORTED, "'w'", unsup[i], NULL);
    }
    expect("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NB_ERR_FORMAT, "'w'", "dtype",
           NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, NB_ERR_FORMAT, "'w'", "shape",
           NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, NB_ERR_FORMAT, "'w'", "data_offsets",
           NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 9, NB_ERR_FORMAT,
           "'w'", "data_offsets", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, NB_ERR_FORMAT,
           "'w'", "begin 8 > end 0", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, NB_ERR_FORMAT,
           "'w'", "data_offsets", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 8, NB_ERR_FORMAT,
           "'w'", "data_offsets", NULL);
    expect("{\"w\":{\"dtype\":\"I8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
           NB_ERR_FORMAT, "'w'", "overflow", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952,4],"
           "\"data_offsets\":[0,8]}}",
           8, NB_ERR_FORMAT, "'w'", NULL);
    expect("{\"w\": 3}", 0, NB_ERR_FORMAT, "'w'", "not an object", NULL);
    expect("{\"__metadata__\": {\"a\": 1}}", 0, NB_ERR_FORMAT, "__metadata__", "'a'", NULL);
    expect("{\"__metadata__\": [\"a\"]}", 0, NB_ERR_FORMAT, "__metadata__", NULL);
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, NB_ERR_FORMAT, "'w' appears twice", NULL);
    expect("{}", 0, NB_OK);
    expect("{\"__metadata__\": {}}        ", 3, NB_OK);
}

/* Cut a valid file at every offset: always an error, never a crash or a read
 * past the cut (each cut is its own exactly-sized allocation). */
static void test_truncated(void **state)
{
    (void)state;
    static const float a[4] = {1, 2, 3, 4};
    static const uint16_t b[3] = {1, 2, 3};
    struct nb_tensor ts[2] = {{.name = "a",
                               .dtype = NB_DTYPE_F32,
                               .n_dims = 2,
                               .shape = {2, 2, 1, 1},
                               .data = a,
                               .n_bytes = 16},
                              {.name = "b",
                               .dtype = NB_DTYPE_BF16,
                               .n_dims = 1,
                               .shape = {3, 1, 1, 1},
                               .data = b,
                               .n_bytes = 6}};
    const char *path = in_dir("trunc.safetensors");
    assert_int_equal(nb_safetensors_write(path, ts, 2), NB_OK);
    size_t size;
    uint8_t *full = read_file(path, &size);
    for (size_t cut = 0; cut < size; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, full, cut);
        struct nb_safetensors *st = NULL;
        enum nb_status s = nb_safetensors_parse(&st, p, cut, "cut.safetensors");
        if (s == NB_OK) fail_msg("cut at %zu of %zu parsed", cut, size);
        assert_null(st);
        assert_non_null(strstr(nb_last_error(), "cut.safetensors"));
        free(p);
    }
    struct nb_safetensors *st = NULL;
    assert_int_equal(nb_safetensors_parse(&st, full, size, "full"), NB_OK);
    nb_safetensors_free(st);
    free(full);
}

/* ---------------------------------------------------------------- real model */

static void test_kjv(void **state)
{
    (void)state;
    const char *dir = getenv("NIBBLE_MODELS_DIR");
    if (!dir) skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/kjv-7m/hf/model.safetensors", dir);
    struct nb_safetensors *st = NULL;
    enum nb_status s = nb_safetensors_open(&st, path);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_safetensors_n_tensors(st), 8 * 9 + 2);
    const struct nb_tensor *t = nb_safetensors_find(st, "model.embed_tokens.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, NB_DTYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], 4096);
    assert_int_equal(t->shape[1], 256);
    assert_int_equal(t->n_bytes, 4096u * 256u * 4u);
    t = nb_safetensors_find(st, "model.layers.7.self_attn.k_proj.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 128);
    assert_int_equal(t->shape[1], 256);
    assert_null(nb_safetensors_find(st, "lm_head.weight")); /* tied */
    assert_string_equal(nb_safetensors_metadata(st, "format"), "pt");
    nb_safetensors_free(st);

    /* The folder form finds model.safetensors. */
    snprintf(path, sizeof path, "%s/kjv-7m/hf", dir);
    s = nb_safetensors_open(&st, path);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_safetensors_n_tensors(st), 74);
    nb_safetensors_free(st);
}

/* The streaming writer (exports): header keys sorted, data laid out with the tensors
 * whose size is a multiple of 8 first, bytes given in pieces in the order it asks for,
 * read back by the reader; misuse refused. */
static void test_stream_writer(void **state)
{
    (void)state;
    const char *path = in_dir("stream.safetensors");
    struct nb_st_writer *w = NULL;
    int32_t a[8] = {1, -2, 3, -4, 5, -6, 7, 0x7fffffff};
    uint16_t b[3] = {0x3c00, 0xbc00, 0x0001};
    float c[5] = {1.5f, -2.25f, 0, 1e-30f, 3};
    int8_t e[16];
    for (int i = 0; i < 16; i++) e[i] = (int8_t)(i - 8);
    const int64_t sa[2] = {2, 4}, sb[1] = {3}, sc[1] = {5}, sd[1] = {0}, se[2] = {4, 4};
    int64_t ia, ib, ic, id, ie;
    assert_int_equal(nb_st_writer_init(&w, path), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "b.half", NB_DTYPE_F16, 1, sb, &ib), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "a.ints", NB_DTYPE_I32, 2, sa, &ia), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "c.floats", NB_DTYPE_F32, 1, sc, &ic), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "d.empty", NB_DTYPE_BF16, 1, sd, &id), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "e.bytes", NB_DTYPE_I8, 2, se, &ie), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "q", NB_DTYPE_Q8_0, 1, sb, NULL), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_st_writer_meta(w, "format", "pt"), NB_OK);
    assert_int_equal(nb_st_writer_next(w), -1); /* nothing before the header */
    assert_int_equal(nb_st_writer_begin(w), NB_OK);
    /* 8-byte multiples by name (a, the empty d skipped, e), then b, c */
    assert_int_equal(nb_st_writer_next(w), ia);
    assert_int_equal(nb_st_writer_data(w, a, 12), NB_OK); /* in pieces */
    assert_int_equal(nb_st_writer_data(w, (const char *)a + 12, 24), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_st_writer_data(w, (const char *)a + 12, 20), NB_OK);
    assert_int_equal(nb_st_writer_next(w), ie);
    assert_int_equal(nb_st_writer_finish(w, NULL), NB_ERR_INVALID_ARG); /* bytes missing */
    assert_int_equal(nb_st_writer_data(w, e, 16), NB_OK);
    assert_int_equal(nb_st_writer_next(w), ib);
    assert_int_equal(nb_st_writer_data(w, b, 6), NB_OK);
    assert_int_equal(nb_st_writer_next(w), ic);
    assert_int_equal(nb_st_writer_data(w, c, 20), NB_OK);
    assert_int_equal(nb_st_writer_next(w), -1);
    assert_int_equal(nb_st_writer_data(w, c, 1), NB_ERR_INVALID_ARG);
    uint64_t bytes = 0;
    assert_int_equal(nb_st_writer_finish(w, &bytes), NB_OK);
    nb_st_writer_free(w);
    (void)id;
    assert_int_equal(tu_count_files(g_dir, ".tmp"), 0);

    size_t size;
    uint8_t *file = read_file(path, &size);
    assert_int_equal(size, bytes);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | file[i];
    assert_int_equal(hlen % 8, 0);
    assert_int_equal(size, 8 + hlen + 32 + 16 + 6 + 20);
    const char *want = "{\"__metadata__\":{\"format\":\"pt\"},\"a.ints\":{\"dtype\":\"I32\","
                       "\"shape\":[2,4],\"data_offsets\":[0,32]},\"b.half\":";
    assert_memory_equal(file + 8, want, strlen(want));
    free(file);
    struct nb_safetensors *st = NULL;
    enum nb_status s = nb_safetensors_open(&st, path);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_safetensors_n_tensors(st), 5);
    assert_string_equal(nb_safetensors_metadata(st, "format"), "pt");
    const struct nb_tensor *t = nb_safetensors_find(st, "a.ints");
    assert_memory_equal(t->data, a, 32);
    assert_int_equal((uintptr_t)t->data % 8, 0);
    t = nb_safetensors_find(st, "e.bytes");
    assert_memory_equal(t->data, e, 16);
    assert_int_equal((uintptr_t)t->data % 8, 0);
    assert_memory_equal(nb_safetensors_find(st, "b.half")->data, b, 6);
    assert_memory_equal(nb_safetensors_find(st, "c.floats")->data, c, 20);
    assert_int_equal(nb_safetensors_find(st, "d.empty")->n_bytes, 0);
    nb_safetensors_free(st);

    /* a name given twice fails at the header; an unfinished writer leaves no file */
    const char *p2 = in_dir("dup.safetensors");
    assert_int_equal(nb_st_writer_init(&w, p2), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "x", NB_DTYPE_F32, 1, sc, NULL), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "x", NB_DTYPE_F32, 1, sc, NULL), NB_OK);
    assert_int_equal(nb_st_writer_begin(w), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "tensor 'x' given twice"));
    nb_st_writer_free(w);
    assert_int_equal(nb_st_writer_init(&w, p2), NB_OK);
    assert_int_equal(nb_st_writer_add(w, "x", NB_DTYPE_F32, 1, sc, NULL), NB_OK);
    assert_int_equal(nb_st_writer_begin(w), NB_OK);
    assert_int_equal(nb_st_writer_data(w, c, 8), NB_OK);
    nb_st_writer_free(w);
    struct stat sbuf;
    assert_int_not_equal(stat(p2, &sbuf), 0);
    assert_int_equal(tu_count_files(g_dir, ".tmp"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_many_tensors),
        cmocka_unit_test(test_sharded),   cmocka_unit_test(test_hostile_headers),
        cmocka_unit_test(test_truncated), cmocka_unit_test(test_kjv),
        cmocka_unit_test(test_stream_writer),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
