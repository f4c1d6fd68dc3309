/* test_nib — the .nib container: round trip, and refusal of corrupt, truncated and
 * foreign-version files with a message naming the problem. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <xxhash.h>

#include "core/mmap.h"
#include "formats/nib.h"

static char g_path[4200];
static unsigned char g_packed[4096] __attribute__((aligned(64)));
static float g_vec[16];
static const char g_blob[] = "tokenizer bytes";

static void write_sample(const char *path, uint64_t packed_size)
{
    struct nb_nib_writer *w = NULL;
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    int64_t shape2[2] = {8, 128}, shape1[1] = {16};
    assert_int_equal(nb_nib_writer_add(w, "blk.0.attn_q.weight", NB_NIB_PACKED, NB_WPATH_W4A8,
                                       128, 0, 2, shape2, g_packed, packed_size),
                     NB_OK);
    assert_int_equal(nb_nib_writer_add(w, "blk.0.attn_norm.weight", NB_NIB_PACKED, NB_WPATH_F32,
                                       0, 0, 1, shape1, g_vec, sizeof g_vec),
                     NB_OK);
    assert_int_equal(nb_nib_writer_add(w, "tokenizer/tok.bin", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0,
                                       NULL, g_blob, sizeof g_blob),
                     NB_OK);
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "weight_path", "w4a8");
    assert_int_equal(nb_nib_writer_write(w, h, path), NB_OK);
    nb_nib_writer_free(w);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void patch_byte(const char *path, long off, unsigned char x)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ x, f);
    fclose(f);
}

static void test_round_trip(void **state)
{
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl));
    for (size_t i = 0; i < sizeof g_packed; i++) g_packed[i] = (unsigned char)(i * 7 + 1);
    for (int i = 0; i < 16; i++) g_vec[i] = (float)i * 0.5f;
    write_sample(g_path, (uint64_t)pl.total);
    struct nb_nib *n = NULL;
    assert_int_equal(nb_nib_open(&n, g_path), NB_OK);
    assert_int_equal(nb_nib_n_tensors(n), 3);
    const struct nb_nib_tensor *q = nb_nib_find(n, "blk.0.attn_q.weight");
    assert_non_null(q);
    assert_int_equal(q->path, NB_WPATH_W4A8);
    assert_int_equal(q->group, 128);
    assert_int_equal(q->shape[0], 8);
    assert_int_equal(q->shape[1], 128);
    assert_int_equal((uintptr_t)q->data % 64, 0);
    assert_memory_equal(q->data, g_packed, (size_t)pl.total);
    const struct nb_nib_tensor *v = nb_nib_find(n, "blk.0.attn_norm.weight");
    assert_memory_equal(v->data, g_vec, sizeof g_vec);
    const struct nb_nib_tensor *b = nb_nib_find(n, "tokenizer/tok.bin");
    assert_int_equal(b->kind, NB_NIB_BLOB);
    assert_memory_equal(b->data, g_blob, sizeof g_blob);
    assert_string_equal(cJSON_GetObjectItem(nb_nib_header(n), "weight_path")->valuestring, "w4a8");
    assert_int_equal(nb_nib_verify(n), NB_OK);
    nb_nib_free(n);
}

static void test_corrupt_data(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    write_sample(g_path, (uint64_t)pl.total);
    long size = file_size(g_path);
    patch_byte(g_path, size - 100, 0x10); /* inside the data section */
    struct nb_nib *n = NULL;
    assert_int_equal(nb_nib_open(&n, g_path), NB_OK);
    assert_int_equal(nb_nib_verify(n), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "checksum mismatch"));
    nb_nib_free(n);
}

static void test_corrupt_header(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    write_sample(g_path, (uint64_t)pl.total);
    patch_byte(g_path, 70, 0x01); /* inside the JSON */
    struct nb_nib *n = NULL;
    assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "header checksum"));
    write_sample(g_path, (uint64_t)pl.total);
    patch_byte(g_path, 8, 0x03); /* version 2 -> 1 */
    assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "version"));
    write_sample(g_path, (uint64_t)pl.total);
    patch_byte(g_path, 0, 0x20);
    assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "not a .nib"));
}

/* Bytes no checksum covers must be zero: the reserved words, the padding after the JSON
 * header (nb_nib_open refuses) and the padding after a tensor (nb_nib_verify refuses). */
static void test_corrupt_padding(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    struct nb_nib *n = NULL;
    write_sample(g_path, (uint64_t)pl.total);
    patch_byte(g_path, 58, 0x01); /* a reserved byte */
    assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "not zero"));
    write_sample(g_path, (uint64_t)pl.total);
    unsigned char fixed[64];
    FILE *f = fopen(g_path, "rb");
    assert_int_equal(fread(fixed, 1, 64, f), 64);
    fclose(f);
    uint64_t hsize, doff, tsize;
    memcpy(&hsize, fixed + 16, 8);
    memcpy(&doff, fixed + 24, 8);
    memcpy(&tsize, fixed + 48, 8);
    assert_true(doff > 64 + hsize + tsize); /* the sample's header and table are padded */
    patch_byte(g_path, (long)(64 + hsize + tsize), 0x01);
    assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "header padding"));
    /* the blob is last and not a multiple of 64 bytes: the file's last byte is padding */
    assert_true(sizeof g_blob % 64 != 0);
    write_sample(g_path, (uint64_t)pl.total);
    patch_byte(g_path, file_size(g_path) - 1, 0x01);
    assert_int_equal(nb_nib_open(&n, g_path), NB_OK);
    assert_int_equal(nb_nib_verify(n), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "padding after the last tensor is not zero"));
    nb_nib_free(n);
}

static void test_truncated(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    write_sample(g_path, (uint64_t)pl.total);
    FILE *f = fopen(g_path, "rb");
    long size = file_size(g_path);
    unsigned char *buf = malloc((size_t)size);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    for (long cut = 0; cut < size; cut += 7) {
        unsigned char *copy = malloc((size_t)(cut ? cut : 1));
        memcpy(copy, buf, (size_t)cut);
        struct nb_nib *n = NULL;
        assert_int_not_equal(nb_nib_parse(&n, copy, (size_t)cut, "cut.nib"), NB_OK);
        assert_null(n);
        free(copy);
    }
    free(buf);
}

/* A packed tensor's size is not stored (the layout gives it): the writer refuses one
 * that is not the layout's, and leaves no file. */
static void test_wrong_layout_size(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    struct nb_nib_writer *w = NULL;
    char path[4300];
    snprintf(path, sizeof path, "%s/short.nib", tu_dir);
    int64_t shape[2] = {8, 128};
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    assert_int_equal(nb_nib_writer_add(w, "blk.0.attn_q.weight", NB_NIB_PACKED, NB_WPATH_W4A8,
                                       128, 0, 2, shape, g_packed, (uint64_t)pl.total - 64),
                     NB_OK);
    assert_int_equal(nb_nib_writer_write(w, cJSON_CreateObject(), path), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "layout needs"));
    assert_int_equal(access(path, F_OK), -1);
    nb_nib_writer_free(w);
}

/* The tensor table of the file at path: its offset and size; fix_checksum rewrites the
 * header checksum after a patch of the JSON or the table. */
static void table_at(const char *path, long *off, long *size)
{
    unsigned char fixed[64];
    FILE *f = fopen(path, "rb");
    assert_int_equal(fread(fixed, 1, 64, f), 64);
    fclose(f);
    uint64_t hsize, tsize;
    memcpy(&hsize, fixed + 16, 8);
    memcpy(&tsize, fixed + 48, 8);
    *off = (long)(64 + hsize);
    *size = (long)tsize;
}

static void fix_checksum(const char *path)
{
    char *buf;
    size_t n;
    assert_int_equal(nb_file_read_all(path, 64u << 20, &buf, &n), NB_OK);
    uint64_t hsize, tsize, hash;
    memcpy(&hsize, buf + 16, 8);
    memcpy(&tsize, buf + 48, 8);
    hash = XXH3_64bits(buf + 64, hsize + tsize);
    memcpy(buf + 40, &hash, 8);
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

/* A checksummed table that lies is refused by name: a count past the table, a name
 * sharing more than the previous name has or running past the table, an unknown kind,
 * three dimensions. */
static void test_bad_table(void **state)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, 128, 8, 128, &pl);
    struct nb_nib *n = NULL;
    long toff, tsize;
    /* the sample's table: count 3, then "blk.0.attn_q.weight" (shared 0, 19 bytes) */
    static const struct {
        long at;
        unsigned char x;
        const char *msg;
    } bad[] = {{0, 0x03 ^ 0x7f, "count"},          {1, 0x01, "bad name"},
               {2, 19 ^ 0x7f, "bad name"},         {2 + 1 + 19, 5 ^ 0x7f, "unknown kind"},
               {2 + 1 + 19 + 1, 0x02 ^ 0x03, "dimensions"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_sample(g_path, (uint64_t)pl.total);
        table_at(g_path, &toff, &tsize);
        patch_byte(g_path, toff + bad[i].at, bad[i].x);
        fix_checksum(g_path);
        assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
        if (!strstr(nb_last_error(), bad[i].msg)) fail_msg("entry %zu: %s", i, nb_last_error());
    }
}

/* GGUF block kinds: Q6_K records and Q8_0 rows round-trip with their format; a size the
 * format does not have, an unknown or upper-case block name and a bad layout are refused. */
static void write_blocks(const char *path, uint64_t rec_size, long patch_at,
                         unsigned char patch_x)
{
    static unsigned char rec[2 * NB_Q6_K_X16_BYTES] __attribute__((aligned(64)));
    static unsigned char rows[16 * 256 / 32 * 34];
    struct nb_nib_writer *w = NULL;
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    assert_int_equal(nb_nib_writer_add_block(w, "output.weight", NB_WF_Q6_K_X16, 16, 512, rec,
                                             rec_size),
                     NB_OK);
    assert_int_equal(nb_nib_writer_add_block(w, "token_embd.weight", NB_WF_Q8_0, 16, 256, rows,
                                             sizeof rows),
                     NB_OK);
    assert_int_equal(nb_nib_writer_add_block(w, "x", NB_WF_W4A8, 16, 256, rows, sizeof rows),
                     NB_ERR_INVALID_ARG);
    assert_int_equal(nb_nib_writer_write(w, cJSON_CreateObject(), path), NB_OK);
    nb_nib_writer_free(w);
    if (patch_at < 0) return;
    /* patch one byte of the table, then its checksum: the entry fails on the tensor */
    long toff, tsize;
    table_at(path, &toff, &tsize);
    patch_byte(path, toff + patch_at, patch_x);
    fix_checksum(path);
}

static void test_block_kinds(void **state)
{
    (void)state;
    struct nb_nib *n = NULL;
    write_blocks(g_path, 2 * NB_Q6_K_X16_BYTES, -1, 0);
    assert_int_equal(nb_nib_open(&n, g_path), NB_OK);
    const struct nb_nib_tensor *t = nb_nib_find(n, "output.weight");
    assert_non_null(t);
    assert_int_equal(t->format, NB_WF_Q6_K_X16);
    assert_int_equal(t->layout, NB_LAYOUT_X16);
    assert_string_equal(nb_nib_kind_name(t->path, t->format), "q6_k");
    t = nb_nib_find(n, "token_embd.weight");
    assert_int_equal(t->format, NB_WF_Q8_0);
    assert_string_equal(nb_nib_kind_name(t->path, t->format), "q8_0");
    assert_int_equal(nb_nib_verify(n), NB_OK);
    nb_nib_free(n);
    /* records one short: the writer refuses them (the size is the layout's) */
    struct nb_nib_writer *w = NULL;
    static unsigned char rec[NB_Q6_K_X16_BYTES] __attribute__((aligned(64)));
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    assert_int_equal(nb_nib_writer_add_block(w, "output.weight", NB_WF_Q6_K_X16, 16, 512, rec,
                                             sizeof rec),
                     NB_OK);
    assert_int_equal(nb_nib_writer_write(w, cJSON_CreateObject(), g_path), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "q6_k layout needs"));
    nb_nib_writer_free(w);
    /* the first entry, "output.weight" (shared 0, 13 bytes): kind q6_k (8), layout 2 at
     * 2 + 13 + 0 and + 2; an unknown kind and a layout neither rows nor records */
    static const struct {
        long at;
        unsigned char x;
        const char *msg;
    } bad[] = {{2 + 13, 8 ^ 13, "unknown kind"}, {2 + 13 + 2, 0x02 ^ 0x03, "layout 3"},
               {2 + 13, 8 ^ 10, "past the end"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_blocks(g_path, 2 * NB_Q6_K_X16_BYTES, 1 + bad[i].at, bad[i].x);
        assert_int_equal(nb_nib_open(&n, g_path), NB_ERR_FORMAT);
        if (!strstr(nb_last_error(), bad[i].msg)) fail_msg("%zu: %s", i, nb_last_error());
    }
}

static int setup(void **state)
{
    if (tu_dir_setup(state)) return -1;
    snprintf(g_path, sizeof g_path, "%s/a.nib", tu_dir);
    return 0;
}

/* A name added twice fails the write and leaves no file. */
static void test_writer_duplicate(void **state)
{
    struct nb_nib_writer *w = NULL;
    char path[4300];
    snprintf(path, sizeof path, "%s/dup.nib", tu_dir);
    assert_int_equal(nb_nib_writer_init(&w), NB_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(nb_nib_writer_add(w, "tokenizer/tok.bin", NB_NIB_BLOB, NB_WPATH_F32, 0,
                                           0, 0, NULL, g_blob, sizeof g_blob),
                         NB_OK);
    assert_int_equal(nb_nib_writer_write(w, cJSON_CreateObject(), path), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "'tokenizer/tok.bin' added twice"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(tu_count_files(tu_dir, ".tmp"), 0);
    nb_nib_writer_free(w);
}

/* A header with 100k entries parses in linear time (a hash index, not every pair: the
 * old pairwise check took ~5e9 comparisons here), and a repeated name among them is
 * still found and named. */
static void test_many_entries(void **state)
{
    enum { N = 100000 };
    char path[4300], name[32];
    snprintf(path, sizeof path, "%s/many.nib", tu_dir);
    for (int dup = 0; dup < 2; dup++) {
        struct nb_nib_writer *w = NULL;
        assert_int_equal(nb_nib_writer_init(&w), NB_OK);
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "blob.%d", i);
            assert_int_equal(nb_nib_writer_add(w, name, NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL,
                                               g_blob, 1),
                             NB_OK);
        }
        assert_int_equal(nb_nib_writer_write(w, cJSON_CreateObject(), path), NB_OK);
        nb_nib_writer_free(w);
        if (dup) { /* the last entry's name "blob.99999" (front-coded after "blob.99998":
                    * its one own byte, 12 bytes before the table's end) made "blob.99998" */
            long toff, tsize;
            table_at(path, &toff, &tsize);
            patch_byte(path, toff + tsize - 12, '9' ^ '8');
            fix_checksum(path);
        }
        struct nb_nib *nb = NULL;
        if (!dup) {
            assert_int_equal(nb_nib_open(&nb, path), NB_OK);
            assert_int_equal(nb_nib_n_tensors(nb), N);
            assert_non_null(nb_nib_find(nb, "blob.77777"));
            assert_null(nb_nib_find(nb, "blob.100000"));
            nb_nib_free(nb);
        } else {
            assert_int_equal(nb_nib_open(&nb, path), NB_ERR_FORMAT);
            assert_non_null(strstr(nb_last_error(), "'blob.99998' appears twice"));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_corrupt_data),
        cmocka_unit_test(test_corrupt_header),
        cmocka_unit_test(test_corrupt_padding), cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_wrong_layout_size), cmocka_unit_test(test_writer_duplicate),
        cmocka_unit_test(test_many_entries),  cmocka_unit_test(test_block_kinds),
        cmocka_unit_test(test_bad_table),
    };
    return cmocka_run_group_tests(tests, setup, tu_dir_teardown);
}
