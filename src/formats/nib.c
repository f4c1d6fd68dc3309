/* formats/nib.c — the .nib packed model file: validating reader and atomic writer. */
#include "formats/nib.h"

#include <errno.h>
#include <inttypes.h>
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
#define MAX_JSON_HEADER (256u << 20)

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

static int parse_hex64(const char *s, uint64_t *out)
{
    if (!s || strlen(s) != 16) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 1;
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

/* Validate one entry of the "tensors" array into *t. */
static enum nb_status parse_tensor(struct nb_nib *n, const cJSON *e, int64_t idx,
                                   uint64_t data_offset, uint64_t data_size,
                                   struct nb_nib_tensor *t)
{
    const char *name = n->name, *tname = NULL, *kind = NULL, *hash = NULL;
    int64_t off, size, group, layout;
    enum nb_status st;
    if (!cJSON_IsObject(e))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensors[%lld] is not an object", name,
                            (long long)idx);
    if ((st = nb_json_get_str(e, "name", NULL, &tname, name)) ||
        (st = nb_json_get_str(e, "kind", NULL, &kind, name)) ||
        (st = nb_json_get_str(e, "xxh3", NULL, &hash, name)) ||
        (st = nb_json_get_int(e, "offset", -1, &off, name)) ||
        (st = nb_json_get_int(e, "size", -1, &size, name)) ||
        (st = nb_json_get_int(e, "group", 0, &group, name)) ||
        (st = nb_json_get_int(e, "layout", NB_LAYOUT_ROWS, &layout, name)))
        return st;
    if (!tname || !kind || !hash || off < 0 || size < 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensors[%lld] lacks name, kind, xxh3, offset or "
                            "size", name, (long long)idx);
    t->name = tname;
    if ((st = parse_kind(name, tname, kind, t))) return st;
    if (!parse_hex64(hash, &t->xxh3))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': bad xxh3 '%s'", name, tname, hash);
    if (off % NB_LAYOUT_ALIGN)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': offset %lld is not 64-byte aligned",
                            name, tname, (long long)off);
    uint64_t end;
    if (nb_add_u64((uint64_t)off, (uint64_t)size, &end) || end > data_size)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': bytes %lld..+%lld lie past the end "
                            "of the data (%llu bytes)", name, tname, (long long)off,
                            (long long)size, (unsigned long long)data_size);
    t->data = n->data + data_offset + (uint64_t)off;
    t->size = (uint64_t)size;
    t->group = (int)(group >= 0 && group <= 1024 ? group : -1);
    t->layout = (int)(layout >= 0 && layout <= 16 ? layout : -1);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 0 || nd > 2)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape must be an array of 0..2 "
                            "sizes", name, tname);
    t->n_dims = nd;
    t->shape[0] = t->shape[1] = 1;
    for (int i = 0; i < nd; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > (double)(1u << 31) ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a size in "
                                "1..2^31", name, tname, i);
        t->shape[i] = (int64_t)d->valuedouble;
    }
    if (t->kind == NB_NIB_BLOB) return NB_OK;
    /* packed: the size must be what the layout says (vectors are [1][n]) */
    struct nb_layout_planes pl;
    int64_t n_out = nd == 2 ? t->shape[0] : 1, n_in = nd == 2 ? t->shape[1] : t->shape[0];
    if (t->path == NB_WPATH_COUNT) { /* a block kind: its rows or records, a matrix */
        struct nb_block_info bi;
        nb_wformat_block(t->format, &bi);
        if (t->layout == NB_LAYOUT_X16) t->format = bi.x16;
        if (nd != 2 || (t->layout != NB_LAYOUT_ROWS && t->layout != NB_LAYOUT_X16) ||
            !nb_wformat_planes(t->format, 0, n_out, n_in, &pl))
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld] does not fit "
                                "%s in layout %d", name, tname, (long long)n_out,
                                (long long)n_in, bi.dtype, t->layout);
        if (pl.total != size)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': %lld bytes, %s needs %lld", name,
                                tname, (long long)size, bi.dtype, (long long)pl.total);
        return NB_OK;
    }
    if (!nb_wformat_of(t->path, (enum nb_layout)t->layout, &t->format)) t->format = NB_WF_COUNT;
    if (nd == 0 || !nb_layout_planes_x(t->path, (enum nb_layout)t->layout, t->group, n_out, n_in, &pl))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld] does not fit "
                            "%s with group %d, layout %d", name, tname, (long long)n_out,
                            (long long)n_in, nb_wpath_name(t->path), t->group, t->layout);
    if (pl.total != size)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': %lld bytes, the %s layout needs "
                            "%lld", name, tname, (long long)size, nb_wpath_name(t->path),
                            (long long)pl.total);
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
    uint64_t hsize = rd64(p + 16), doff = rd64(p + 24), dsize = rd64(p + 32), hhash = rd64(p + 40);
    uint64_t end;
    if (hsize == 0 || hsize > MAX_JSON_HEADER || doff % NB_LAYOUT_ALIGN ||
        doff < FIXED_HEADER + hsize || nb_add_u64(doff, dsize, &end) || end != size) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: header sizes are inconsistent (header %llu, data "
                          "at %llu + %llu, file %zu bytes): truncated or corrupt", name,
                          (unsigned long long)hsize, (unsigned long long)doff,
                          (unsigned long long)dsize, size);
        goto fail;
    }
    /* bytes no checksum covers must be zero (the flags, the reserved words, the padding
     * after the JSON): then a change anywhere in the file is seen (issue 35 item 12) */
    if (rd32(p + 12) != 0 || !all_zero(p + 48, 16) ||
        !all_zero(p + FIXED_HEADER + hsize, doff - FIXED_HEADER - hsize)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: the flags, reserved bytes or header padding are "
                          "not zero: the file is corrupt", name);
        goto fail;
    }
    n->data_offset = doff;
    n->data_size = dsize;
    if (XXH3_64bits(p + FIXED_HEADER, hsize) != hhash) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: header checksum mismatch: the file is corrupt", name);
        goto fail;
    }
    if ((st = nb_json_parse((const char *)p + FIXED_HEADER, hsize, name, &n->header))) goto fail;
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(n->header, "tensors");
    if (!cJSON_IsObject(n->header) || !cJSON_IsArray(tensors)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: header has no \"tensors\" array", name);
        goto fail;
    }
    n->n_tensors = cJSON_GetArraySize(tensors);
    n->tensors = calloc((size_t)(n->n_tensors ? n->n_tensors : 1), sizeof *n->tensors);
    if (!n->tensors) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors)
    {
        if ((st = parse_tensor(n, e, i, doff, dsize, &n->tensors[i]))) goto fail;
        i++;
    }
    int64_t d0, d1; /* a hash index: a header of 80k entries is not 3.2e9 comparisons */
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

enum nb_status nb_nib_open(struct nb_nib **out, const char *path)
{
    struct nb_mapped_file f;
    *out = NULL;
    enum nb_status st = nb_file_map(&f, path);
    return st ? st : parse_mapped(out, &f, path);
}

enum nb_status nb_nib_open_fd(struct nb_nib **out, int fd, const char *name)
{
    struct nb_mapped_file f;
    *out = NULL;
    enum nb_status st = nb_file_map_fd(&f, fd, name);
    return st ? st : parse_mapped(out, &f, name);
}

void nb_nib_free(struct nb_nib *n)
{
    if (!n) return;
    cJSON_Delete(n->header);
    nb_strindex_free(&n->index);
    free(n->tensors);
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

/* The header (consumed) and the tensors into f. */
static enum nb_status write_to(struct nb_nib_writer *w, cJSON *header, struct nb_outfile *f)
{
    enum nb_status st = NB_OK;
    char *json = NULL;
    cJSON *arr = cJSON_CreateArray();
    if (!header || !cJSON_IsObject(header) || !arr) {
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
    cJSON_DeleteItemFromObject(header, "tensors");
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n; i++) {
        struct wtensor *t = &w->t[i];
        char hex[17];
        if (!t->have_xxh3) nb_nib_writer_checksum(w, i);
        snprintf(hex, sizeof hex, "%016" PRIx64, t->xxh3);
        t->offset = off;
        off += (t->size + NB_LAYOUT_ALIGN - 1) & ~(uint64_t)(NB_LAYOUT_ALIGN - 1);
        cJSON *e = cJSON_CreateObject();
        cJSON *shape = cJSON_CreateArray();
        for (int d = 0; d < t->n_dims; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "kind", t->kind == NB_NIB_BLOB ? "blob"
                                           : nb_nib_kind_name(t->path, t->format));
        cJSON_AddItemToObject(e, "shape", shape);
        if (t->kind == NB_NIB_PACKED && nb_wpath_is_int4(t->path)) {
            cJSON_AddNumberToObject(e, "group", t->group);
            cJSON_AddNumberToObject(e, "layout", t->layout);
        }
        if (t->kind == NB_NIB_PACKED && t->path == NB_WPATH_COUNT)
            cJSON_AddNumberToObject(e, "layout", t->layout);
        cJSON_AddNumberToObject(e, "offset", (double)t->offset);
        cJSON_AddNumberToObject(e, "size", (double)t->size);
        cJSON_AddStringToObject(e, "xxh3", hex);
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddItemToObject(header, "tensors", arr);
    arr = NULL;
    json = cJSON_PrintUnformatted(header);
    if (!json) {
        st = nb_set_error(NB_ERR_NOMEM, "nib writer: out of memory");
        goto done;
    }
    uint64_t hsize = strlen(json);
    uint64_t doff = (FIXED_HEADER + hsize + NB_LAYOUT_ALIGN - 1) & ~(uint64_t)(NB_LAYOUT_ALIGN - 1);
    unsigned char fixed[FIXED_HEADER] = {0};
    uint32_t version = NB_NIB_VERSION;
    uint64_t hhash = XXH3_64bits(json, hsize);
    memcpy(fixed, NB_NIB_MAGIC, 8);
    memcpy(fixed + 8, &version, 4);
    memcpy(fixed + 16, &hsize, 8);
    memcpy(fixed + 24, &doff, 8);
    memcpy(fixed + 32, &off, 8);
    memcpy(fixed + 40, &hhash, 8);
    if ((st = nb_outfile_write(f, fixed, sizeof fixed)) || (st = nb_outfile_write(f, json, hsize)) ||
        (st = nb_outfile_zeros(f, doff - FIXED_HEADER - hsize)))
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
    cJSON_Delete(arr);
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
