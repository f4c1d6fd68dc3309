/* formats/nib.c — the .nib packed model file: validating reader and atomic writer. */
#include "formats/nib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/checked.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "core/strindex.h"
#include "formats/json.h"

#define FIXED_HEADER 64
#define MAX_HEADER (256u << 20) /* the JSON, and the table, each */

struct nb_nib {
    struct nb_mapped_file file; /* when opened from a path */
    const unsigned char *data;
    size_t size;
    char *name;
    uint32_t version;
    uint64_t data_offset, data_size;
    cJSON *header;
    int64_t n_tensors;
    struct nb_nib_tensor *tensors;
    char *names; /* the tensors' names, NUL-terminated one after another */
    struct nb_strindex index; /* names -> tensors */
};

static int all_zero(const unsigned char *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static const char *tensor_name(const void *t, int64_t i)
{
    return ((const struct nb_nib_tensor *)t)[i].name;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The tensor table's kind codes (the index is the code): fixed, append only. */
static const char *const k_kinds[] = {"blob", "f32",  "bf16", "w8a16", "w4a16", "w4a8",  "q4_k",
                                      "q5_k", "q6_k", "q4_0", "q8_0",  "iq4_nl", "iq4_xs"};
#define N_KINDS ((int)(sizeof k_kinds / sizeof *k_kinds))

/* A cursor over the tensor table: every read is bounds-checked, the first failure
 * sticks (ok = 0) and later reads return 0. */
struct cursor {
    const unsigned char *p, *end;
    int ok;
};

static uint64_t fail(struct cursor *c)
{
    c->ok = 0;
    return 0;
}

static uint64_t get_u8(struct cursor *c)
{
    if (!c->ok || c->p >= c->end) return fail(c);
    return *c->p++;
}

/* LEB128: 7 bits a byte, low first, at most 63 bits. */
static uint64_t get_varint(struct cursor *c)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        uint64_t b = get_u8(c);
        if (!c->ok) return 0;
        if (shift == 56 && b > 0x7f) break; /* a 10th byte or bit 63: too large */
        v |= (b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    return fail(c);
}

static uint64_t get_u64(struct cursor *c)
{
    if (!c->ok || c->end - c->p < 8) return fail(c);
    uint64_t v = rd64(c->p);
    c->p += 8;
    return v;
}

static enum nb_status parse_kind(const char *name, const char *tname, const char *s,
                                 struct nb_nib_tensor *t)
{
    if (!strcmp(s, "blob")) {
        t->kind = NB_NIB_BLOB;
        return NB_OK;
    }
    t->kind = NB_NIB_PACKED;
    t->format = NB_WF_COUNT;
    if (nb_wpath_from_name(s, &t->path)) return NB_OK;
    for (int f = 0; f < NB_WF_COUNT; f++) { /* a block type: its rows' name ("q6_k") */
        struct nb_block_info bi;
        if (nb_wformat_block((enum nb_wformat)f, &bi) && f == (int)bi.rows &&
            !strcmp(nb_wformat_info(bi.rows)->name, s)) {
            t->path = NB_WPATH_COUNT; /* resolved with the layout */
            t->format = bi.rows;
            return NB_OK;
        }
    }
    return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': unknown kind '%s'", name, tname, s);
}

const char *nb_nib_kind_name(enum nb_wpath path, enum nb_wformat format)
{
    struct nb_block_info bi;
    if (path != NB_WPATH_COUNT || !nb_wformat_block(format, &bi)) return nb_wpath_name(path);
    return nb_wformat_info(bi.rows)->name; /* "q6_k": the rows' name is the type's */
}

/* Read and validate table entry idx into *t (its name at *name_at, which advances; the
 * previous entry's name is prev, NULL for the first), at data offset *off (advanced past
 * its 64-byte aligned end). */
static enum nb_status parse_tensor(struct nb_nib *n, struct cursor *c, int64_t idx,
                                   const char *prev, char **name_at, uint64_t *off,
                                   struct nb_nib_tensor *t)
{
    const char *name = n->name;
    uint64_t shared = get_varint(c), rest = get_varint(c);
    size_t prev_len = prev ? strlen(prev) : 0;
    if (!c->ok || shared > prev_len || rest > NB_NIB_NAME_MAX ||
        shared + rest > NB_NIB_NAME_MAX || shared + rest == 0 ||
        (uint64_t)(c->end - c->p) < rest || memchr(c->p, 0, rest))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor table entry %lld: bad name (empty, over "
                            "%d bytes, a NUL, or past the table)", name, (long long)idx,
                            NB_NIB_NAME_MAX);
    char *tname = *name_at;
    if (shared) memcpy(tname, prev, shared); /* prev is NULL for the first entry */
    memcpy(tname + shared, c->p, rest);
    tname[shared + rest] = '\0';
    c->p += rest;
    *name_at += shared + rest + 1;
    t->name = tname;
    uint64_t kind = get_u8(c), nd = get_u8(c);
    enum nb_status st;
    if (!c->ok || kind >= (uint64_t)N_KINDS || nd > 2)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': %s", name, tname,
                            !c->ok ? "the entry runs past the table"
                            : nd > 2 ? "more than 2 dimensions" : "unknown kind");
    if ((st = parse_kind(name, tname, k_kinds[kind], t))) return st;
    uint64_t layout = t->kind == NB_NIB_PACKED ? get_u8(c) : 0;
    uint64_t group = t->kind == NB_NIB_PACKED && nb_wpath_is_int4(t->path) ? get_varint(c) : 0;
    t->n_dims = (int)nd;
    t->shape[0] = t->shape[1] = 1;
    for (int i = 0; i < t->n_dims; i++) {
        uint64_t d = get_varint(c);
        if (c->ok && (d < 1 || d > (1u << 31)))
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a size in "
                                "1..2^31", name, tname, i);
        t->shape[i] = (int64_t)d;
    }
    uint64_t size = t->kind == NB_NIB_BLOB ? get_varint(c) : 0;
    t->xxh3 = get_u64(c);
    if (!c->ok)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': the entry runs past the table",
                            name, tname);
    t->group = group <= 1024 ? (int)group : -1;
    t->layout = layout <= 16 ? (int)layout : -1;
    if (t->kind == NB_NIB_PACKED) { /* the size is the layout's (vectors are [1][n]) */
        struct nb_layout_planes pl;
        int64_t n_out = nd == 2 ? t->shape[0] : 1, n_in = nd == 2 ? t->shape[1] : t->shape[0];
        if (t->path == NB_WPATH_COUNT) { /* a block kind: its rows or records, a matrix */
            struct nb_block_info bi;
            nb_wformat_block(t->format, &bi);
            if (t->layout == NB_LAYOUT_X16) t->format = bi.x16;
            if (nd != 2 || (t->layout != NB_LAYOUT_ROWS && t->layout != NB_LAYOUT_X16) ||
                !nb_wformat_planes(t->format, 0, n_out, n_in, &pl))
                return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld] does "
                                    "not fit %s in layout %d", name, tname, (long long)n_out,
                                    (long long)n_in, bi.dtype, t->layout);
        } else {
            if (!nb_wformat_of(t->path, (enum nb_layout)t->layout, &t->format))
                t->format = NB_WF_COUNT;
            if (nd == 0 || !nb_layout_planes_x(t->path, (enum nb_layout)t->layout, t->group,
                                               n_out, n_in, &pl))
                return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld] does "
                                    "not fit %s with group %d, layout %d", name, tname,
                                    (long long)n_out, (long long)n_in, nb_wpath_name(t->path),
                                    t->group, t->layout);
        }
        size = (uint64_t)pl.total;
    }
    uint64_t end, next;
    if (nb_add_u64(*off, size, &end) || end > n->data_size ||
        nb_align_u64(end, NB_LAYOUT_ALIGN, &next))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': bytes %llu..+%llu lie past the end "
                            "of the data (%llu bytes)", name, tname, (unsigned long long)*off,
                            (unsigned long long)size, (unsigned long long)n->data_size);
    t->data = n->data + n->data_offset + *off;
    t->size = size;
    *off = next;
    return NB_OK;
}

enum nb_status nb_nib_parse(struct nb_nib **out, const void *data, size_t size, const char *name)
{
    *out = NULL;
    enum nb_status st;
    struct nb_nib *n = calloc(1, sizeof *n);
    if (!n) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    n->data = data;
    n->size = size;
    n->name = strdup(name);
    if (!n->name) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    const unsigned char *p = data;
    if (size < FIXED_HEADER || memcmp(p, NB_NIB_MAGIC, 8) != 0) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: not a .nib file (bad magic or shorter than 64 "
                          "bytes)", name);
        goto fail;
    }
    n->version = rd32(p + 8);
    if (n->version != NB_NIB_VERSION) {
        st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: .nib format version %u, this nibble reads "
                          "version %d: quantize the model again", name, n->version,
                          NB_NIB_VERSION);
        goto fail;
    }
    uint64_t hsize = rd64(p + 16), doff = rd64(p + 24), dsize = rd64(p + 32), hhash = rd64(p + 40),
             tsize = rd64(p + 48);
    uint64_t hend, end;
    if (hsize == 0 || hsize > MAX_HEADER || tsize == 0 || tsize > MAX_HEADER ||
        nb_add_u64(FIXED_HEADER + hsize, tsize, &hend) || doff % NB_LAYOUT_ALIGN || doff < hend ||
        nb_add_u64(doff, dsize, &end) || end != size) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: header sizes are inconsistent (header %llu + table "
                          "%llu, data at %llu + %llu, file %zu bytes): truncated or corrupt", name,
                          (unsigned long long)hsize, (unsigned long long)tsize,
                          (unsigned long long)doff, (unsigned long long)dsize, size);
        goto fail;
    }
    /* bytes no checksum covers must be zero (the flags, the reserved word, the padding
     * after the table): then a change anywhere in the file is seen (issue 35 item 12) */
    if (rd32(p + 12) != 0 || !all_zero(p + 56, 8) || !all_zero(p + hend, doff - hend)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: the flags, reserved bytes or header padding are "
                          "not zero: the file is corrupt", name);
        goto fail;
    }
    n->data_offset = doff;
    n->data_size = dsize;
    if (XXH3_64bits(p + FIXED_HEADER, hsize + tsize) != hhash) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: header checksum mismatch: the file is corrupt", name);
        goto fail;
    }
    if ((st = nb_json_parse((const char *)p + FIXED_HEADER, hsize, name, &n->header))) goto fail;
    if (!cJSON_IsObject(n->header)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: the header is not a JSON object", name);
        goto fail;
    }
    struct cursor c = {p + FIXED_HEADER + hsize, p + hend, 1};
    uint64_t nt = get_varint(&c);
    /* an entry is at least 12 bytes; a name at most NB_NIB_NAME_MAX + 1 with its NUL */
    if (!c.ok || nt > tsize / 12 || nt > NB_NIB_MAX_TENSORS) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: the tensor table's count is bad or larger than "
                          "the table holds", name);
        goto fail;
    }
    n->n_tensors = (int64_t)nt;
    n->tensors = calloc((size_t)(nt ? nt : 1), sizeof *n->tensors);
    n->names = malloc((size_t)(nt ? nt : 1) * (NB_NIB_NAME_MAX + 1));
    if (!n->tensors || !n->names) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    char *name_at = n->names;
    uint64_t off = 0;
    for (int64_t i = 0; i < n->n_tensors; i++)
        if ((st = parse_tensor(n, &c, i, i ? n->tensors[i - 1].name : NULL, &name_at, &off,
                               &n->tensors[i])))
            goto fail;
    if (c.p != c.end || off != dsize) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: %s", name, c.p != c.end
                          ? "bytes follow the tensor table's last entry"
                          : "the data size is not the tensors' (each 64-byte aligned)");
        goto fail;
    }
    int64_t d0, d1; /* a hash index: a table of 80k entries is not 3.2e9 comparisons */
    if ((st = nb_strindex_build(&n->index, n->n_tensors, tensor_name, n->tensors, &d0, &d1))) {
        if (st == NB_ERR_FORMAT)
            st = nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' appears twice (entries %lld and "
                              "%lld)", name, n->tensors[d1].name, (long long)d0, (long long)d1);
        goto fail;
    }
    *out = n;
    return NB_OK;
fail:
    nb_nib_free(n);
    return st;
}

static enum nb_status parse_mapped(struct nb_nib **out, struct nb_mapped_file *f,
                                   const char *name)
{
    enum nb_status st = nb_nib_parse(out, f->data, f->size, name);
    if (st) {
        nb_file_unmap(f);
        return st;
    }
    (*out)->file = *f;
    return NB_OK;
}

/* The file mapped (run 0) or, for a file that will run, read into huge pages where
 * nb_file_load_weights does so; by path, or by descriptor when path is NULL. */
static enum nb_status open_as(struct nb_nib **out, const char *path, int fd, const char *name,
                              int run)
{
    struct nb_mapped_file f;
    *out = NULL;
    enum nb_status st = path ? (run ? nb_file_load_weights(&f, path) : nb_file_map(&f, path))
                             : (run ? nb_file_load_weights_fd(&f, fd, name)
                                    : nb_file_map_fd(&f, fd, name));
    return st ? st : parse_mapped(out, &f, name);
}

enum nb_status nb_nib_open(struct nb_nib **out, const char *path)
{
    return open_as(out, path, -1, path, 0);
}

enum nb_status nb_nib_open_fd(struct nb_nib **out, int fd, const char *name)
{
    return open_as(out, NULL, fd, name, 0);
}

enum nb_status nb_nib_open_run(struct nb_nib **out, const char *path)
{
    return open_as(out, path, -1, path, 1);
}

enum nb_status nb_nib_open_run_fd(struct nb_nib **out, int fd, const char *name)
{
    return open_as(out, NULL, fd, name, 1);
}

void nb_nib_free(struct nb_nib *n)
{
    if (!n) return;
    cJSON_Delete(n->header);
    nb_strindex_free(&n->index);
    free(n->tensors);
    free(n->names);
    free(n->name);
    nb_file_unmap(&n->file);
    free(n);
}

static int by_data(const void *a, const void *b)
{
    const struct nb_nib_tensor *x = *(const struct nb_nib_tensor *const *)a;
    const struct nb_nib_tensor *y = *(const struct nb_nib_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* The data region's bytes that no tensor holds (the alignment padding between tensors and
 * after the last) are zero: no checksum covers them. */
static enum nb_status check_gaps(const struct nb_nib *n)
{
    const struct nb_nib_tensor **order = malloc(sizeof *order * (size_t)(n->n_tensors + 1));
    if (!order) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", n->name);
    for (int64_t i = 0; i < n->n_tensors; i++) order[i] = &n->tensors[i];
    qsort(order, (size_t)n->n_tensors, sizeof *order, by_data);
    const unsigned char *at = n->data + n->data_offset, *end = at + n->data_size;
    enum nb_status st = NB_OK;
    for (int64_t i = 0; i <= n->n_tensors && !st; i++) {
        const unsigned char *next = i < n->n_tensors ? (const unsigned char *)order[i]->data : end;
        if (next > at && !all_zero(at, (uint64_t)(next - at)))
            st = nb_set_error(NB_ERR_FORMAT, "%s: padding %s is not zero: the file is corrupt",
                              n->name, i < n->n_tensors ? "before a tensor" : "after the last tensor");
        if (i < n->n_tensors && next + order[i]->size > at) at = next + order[i]->size;
    }
    free(order);
    return st;
}

enum nb_status nb_nib_verify(const struct nb_nib *n)
{
    for (int64_t i = 0; i < n->n_tensors; i++) {
        const struct nb_nib_tensor *t = &n->tensors[i];
        if (XXH3_64bits(t->data, t->size) != t->xxh3)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': checksum mismatch: the file is "
                                "corrupt", n->name, t->name);
    }
    return check_gaps(n);
}

const char *nb_nib_path(const struct nb_nib *n) { return n->name; }
int nb_nib_in_memory(const struct nb_nib *n) { return n->file.anon; }
uint32_t nb_nib_version(const struct nb_nib *n) { return n->version; }
const cJSON *nb_nib_header(const struct nb_nib *n) { return n->header; }
size_t nb_nib_file_size(const struct nb_nib *n) { return n->size; }
int64_t nb_nib_n_tensors(const struct nb_nib *n) { return n->n_tensors; }

const struct nb_nib_tensor *nb_nib_tensor(const struct nb_nib *n, int64_t i)
{
    return i >= 0 && i < n->n_tensors ? &n->tensors[i] : NULL;
}

const struct nb_nib_tensor *nb_nib_find(const struct nb_nib *n, const char *name)
{
    int64_t i = nb_strindex_find(&n->index, tensor_name, n->tensors, name);
    return i >= 0 ? &n->tensors[i] : NULL;
}

/* ---------------------------------------------------------------- writer */

struct wtensor {
    char *name;
    enum nb_nib_kind kind;
    enum nb_wpath path; /* NB_WPATH_COUNT: a block format */
    enum nb_wformat format;
    int group, layout, n_dims;
    int64_t shape[2];
    const void *data;
    uint64_t size, offset;
    uint64_t xxh3;
    int have_xxh3;
};

static const char *wtensor_name(const void *t, int64_t i)
{
    return ((const struct wtensor *)t)[i].name;
}

struct nb_nib_writer {
    struct wtensor *t;
    int64_t n, cap;
};

enum nb_status nb_nib_writer_init(struct nb_nib_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? NB_OK : nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
}

void nb_nib_writer_free(struct nb_nib_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

enum nb_status nb_nib_writer_add(struct nb_nib_writer *w, const char *name, enum nb_nib_kind kind,
                                 enum nb_wpath path, int group, int layout, int n_dims,
                                 const int64_t *shape, const void *data, uint64_t size)
{
    if (n_dims < 0 || n_dims > 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "nib writer: tensor '%s': %d dims", name, n_dims);
    if (w->n == w->cap) {
        int64_t cap = w->cap ? w->cap * 2 : 64;
        struct wtensor *nt = realloc(w->t, sizeof *nt * (size_t)cap);
        if (!nt) return nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
        w->t = nt;
        w->cap = cap;
    }
    struct wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
    t->kind = kind;
    t->path = path;
    t->group = group;
    t->layout = layout ? layout : NB_LAYOUT_ROWS;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->shape[i] = shape[i];
    t->data = data;
    t->size = size;
    w->n++;
    return NB_OK;
}

enum nb_status nb_nib_writer_add_block(struct nb_nib_writer *w, const char *name,
                                       enum nb_wformat format, int64_t n_out, int64_t n_in,
                                       const void *data, uint64_t size)
{
    struct nb_block_info bi;
    if (!nb_wformat_block(format, &bi))
        return nb_set_error(NB_ERR_INVALID_ARG, "nib writer: tensor '%s': format %d is not a "
                            "block format", name, (int)format);
    int64_t shape[2] = {n_out, n_in};
    enum nb_status st = nb_nib_writer_add(w, name, NB_NIB_PACKED, NB_WPATH_COUNT, 0,
                                          format == bi.x16 ? NB_LAYOUT_X16 : NB_LAYOUT_ROWS, 2,
                                          shape, data, size);
    if (!st) w->t[w->n - 1].format = format;
    return st;
}

int64_t nb_nib_writer_count(const struct nb_nib_writer *w)
{
    return w->n;
}

void nb_nib_writer_checksum(struct nb_nib_writer *w, int64_t i)
{
    struct wtensor *t = &w->t[i];
    t->xxh3 = (uint64_t)XXH3_64bits(t->data, t->size);
    t->have_xxh3 = 1;
}

/* A growing byte buffer for the tensor table. */
struct bytes {
    unsigned char *p;
    size_t n, cap;
    int failed;
};

static void put(struct bytes *b, const void *src, size_t n)
{
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u8(struct bytes *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void put_varint(struct bytes *b, uint64_t v)
{
    for (; v > 0x7f; v >>= 7) put_u8(b, (unsigned)(v & 0x7f) | 0x80);
    put_u8(b, (unsigned)v);
}

static int kind_code(const struct wtensor *t)
{
    const char *s = t->kind == NB_NIB_BLOB ? "blob" : nb_nib_kind_name(t->path, t->format);
    for (int k = 0; s && k < N_KINDS; k++)
        if (!strcmp(k_kinds[k], s)) return k;
    return -1;
}

/* Tensor t's table entry after prev's (NULL for the first). */
static enum nb_status put_entry(struct bytes *b, const struct wtensor *t, const char *prev)
{
    size_t len = strlen(t->name), shared = 0;
    int kind = kind_code(t);
    if (len == 0 || len > NB_NIB_NAME_MAX || kind < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "nib writer: tensor '%s': %s", t->name,
                            kind < 0 ? "a kind the table has no code for"
                                     : "the name is empty or longer than 255 bytes");
    while (prev && shared < len && prev[shared] == t->name[shared]) shared++;
    put_varint(b, shared);
    put_varint(b, len - shared);
    put(b, t->name + shared, len - shared);
    put_u8(b, (unsigned)kind);
    put_u8(b, (unsigned)t->n_dims);
    if (t->kind == NB_NIB_PACKED) put_u8(b, (unsigned)t->layout);
    if (t->kind == NB_NIB_PACKED && nb_wpath_is_int4(t->path)) put_varint(b, (uint64_t)t->group);
    for (int d = 0; d < t->n_dims; d++) put_varint(b, (uint64_t)t->shape[d]);
    if (t->kind == NB_NIB_BLOB) put_varint(b, t->size);
    unsigned char h[8];
    memcpy(h, &t->xxh3, 8);
    put(b, h, 8);
    return NB_OK;
}

/* A packed tensor's size is not stored: it must be what its layout says. */
static enum nb_status check_size(const struct wtensor *t)
{
    struct nb_layout_planes pl;
    int64_t n_out = t->n_dims == 2 ? t->shape[0] : 1;
    int64_t n_in = t->n_dims == 2 ? t->shape[1] : t->shape[0];
    if (t->kind == NB_NIB_BLOB) return NB_OK;
    int ok = t->n_dims > 0 &&
             (t->path == NB_WPATH_COUNT
                  ? nb_wformat_planes(t->format, 0, n_out, n_in, &pl)
                  : nb_layout_planes_x(t->path, (enum nb_layout)t->layout, t->group, n_out, n_in,
                                       &pl));
    if (!ok || (uint64_t)pl.total != t->size)
        return nb_set_error(NB_ERR_INVALID_ARG, "nib writer: tensor '%s': %llu bytes, the %s "
                            "layout needs %lld", t->name, (unsigned long long)t->size,
                            nb_nib_kind_name(t->path, t->format), ok ? (long long)pl.total : -1LL);
    return NB_OK;
}

/* The header (consumed) and the tensors into f. */
static enum nb_status write_to(struct nb_nib_writer *w, cJSON *header, struct nb_outfile *f)
{
    enum nb_status st = NB_OK;
    char *json = NULL;
    struct bytes table = {0};
    if (!header || !cJSON_IsObject(header)) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "nib writer: the header must be a JSON object");
        goto done;
    }
    struct nb_strindex names; /* a repeated name is refused before anything is written */
    int64_t d0, d1;
    if ((st = nb_strindex_build(&names, w->n, wtensor_name, w->t, &d0, &d1))) {
        if (st == NB_ERR_FORMAT)
            st = nb_set_error(NB_ERR_INVALID_ARG, "nib writer: tensor '%s' added twice",
                              w->t[d1].name);
        goto done;
    }
    nb_strindex_free(&names);
    cJSON_DeleteItemFromObject(header, "tensors"); /* the table holds them */
    uint64_t off = 0;
    put_varint(&table, (uint64_t)w->n);
    for (int64_t i = 0; i < w->n; i++) {
        struct wtensor *t = &w->t[i];
        if (!t->have_xxh3) nb_nib_writer_checksum(w, i);
        if ((st = check_size(t)) || (st = put_entry(&table, t, i ? w->t[i - 1].name : NULL)))
            goto done;
        t->offset = off;
        off += (t->size + NB_LAYOUT_ALIGN - 1) & ~(uint64_t)(NB_LAYOUT_ALIGN - 1);
    }
    json = cJSON_PrintUnformatted(header);
    if (!json || table.failed) {
        st = nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
        goto done;
    }
    uint64_t hsize = strlen(json), tsize = table.n;
    uint64_t doff = (FIXED_HEADER + hsize + tsize + NB_LAYOUT_ALIGN - 1) &
                    ~(uint64_t)(NB_LAYOUT_ALIGN - 1);
    unsigned char fixed[FIXED_HEADER] = {0};
    uint32_t version = NB_NIB_VERSION;
    put(&table, json, hsize); /* then the JSON and the table as one run, checksummed */
    if (table.failed) {
        st = nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
        goto done;
    }
    memmove(table.p + hsize, table.p, tsize);
    memcpy(table.p, json, hsize);
    uint64_t hhash = XXH3_64bits(table.p, hsize + tsize);
    memcpy(fixed, NB_NIB_MAGIC, 8);
    memcpy(fixed + 8, &version, 4);
    memcpy(fixed + 16, &hsize, 8);
    memcpy(fixed + 24, &doff, 8);
    memcpy(fixed + 32, &off, 8);
    memcpy(fixed + 40, &hhash, 8);
    memcpy(fixed + 48, &tsize, 8);
    if ((st = nb_outfile_write(f, fixed, sizeof fixed)) ||
        (st = nb_outfile_write(f, table.p, hsize + tsize)) ||
        (st = nb_outfile_zeros(f, doff - FIXED_HEADER - hsize - tsize)))
        goto done;
    for (int64_t i = 0; i < w->n; i++) {
        const struct wtensor *t = &w->t[i];
        uint64_t padded = (t->size + NB_LAYOUT_ALIGN - 1) & ~(uint64_t)(NB_LAYOUT_ALIGN - 1);
        if ((st = nb_outfile_write(f, t->data, t->size)) ||
            (st = nb_outfile_zeros(f, padded - t->size)))
            goto done;
    }
done:
    free(json);
    free(table.p);
    cJSON_Delete(header);
    return st;
}

/* f was just opened with status st: write the file and commit it (fd_out: a memory
 * file's descriptor), or drop it. The header is consumed either way. */
static enum nb_status finish(struct nb_nib_writer *w, cJSON *header, struct nb_outfile *f,
                             enum nb_status st, int *fd_out)
{
    if (st) {
        cJSON_Delete(header);
        return st;
    }
    if ((st = write_to(w, header, f)) || (st = nb_outfile_commit(f, fd_out))) nb_outfile_abort(f);
    return st;
}

enum nb_status nb_nib_writer_write(struct nb_nib_writer *w, cJSON *header, const char *path)
{
    struct nb_outfile f;
    return finish(w, header, &f, nb_outfile_open(&f, path), NULL);
}

enum nb_status nb_nib_writer_write_memory(struct nb_nib_writer *w, cJSON *header,
                                          const char *name, int *fd_out)
{
    struct nb_outfile f;
    return finish(w, header, &f, nb_outfile_open_memory(&f, name), fd_out);
}
