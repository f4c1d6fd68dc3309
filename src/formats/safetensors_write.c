/* formats/safetensors_write.c — the streaming safetensors writer (layout: the .h). */
#include "formats/safetensors_write.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/checked.h"
#include "core/outfile.h"

struct st_entry {
    char *name;
    enum nb_dtype dtype;
    int n_dims;
    int64_t shape[NB_MAX_DIMS];
    uint64_t n_bytes;
    uint64_t begin; /* data offset, set by begin */
};

struct nb_st_writer {
    char *path;
    struct st_entry *e;
    int64_t n, cap;
    char **meta; /* key, value, key, value, ... */
    int64_t n_meta;
    int64_t *order; /* data order: indices into e */
    int64_t pos;    /* position in order of the tensor being written */
    uint64_t done;  /* bytes of it written */
    int begun;
    struct nb_outfile f;
};

enum nb_status nb_st_writer_init(struct nb_st_writer **out, const char *path)
{
    struct nb_st_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
    }
    w->f.fd = -1;
    *out = w;
    return NB_OK;
}

void nb_st_writer_free(struct nb_st_writer *w)
{
    if (!w) return;
    nb_outfile_abort(&w->f);
    for (int64_t i = 0; i < w->n; i++) free(w->e[i].name);
    for (int64_t i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->e);
    free(w->meta);
    free(w->order);
    free(w->path);
    free(w);
}

enum nb_status nb_st_writer_add(struct nb_st_writer *w, const char *name, enum nb_dtype dtype,
                                int n_dims, const int64_t *shape, int64_t *index)
{
    if (w->begun)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s' declared after the header",
                            w->path, name);
    if (dtype != NB_DTYPE_F32 && dtype != NB_DTYPE_F16 && dtype != NB_DTYPE_BF16 &&
        dtype != NB_DTYPE_I8 && dtype != NB_DTYPE_I32)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': dtype %s cannot be written",
                            w->path, name, nb_dtype_name(dtype));
    if (n_dims < 0 || n_dims > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions", w->path, name,
                            n_dims);
    uint64_t n = 1;
    for (int d = 0; d < n_dims; d++)
        if (shape[d] < 0 || nb_mul_u64(n, (uint64_t)shape[d], &n))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': bad shape", w->path, name);
    uint64_t bytes;
    if (!nb_dtype_row_bytes(dtype, n, &bytes))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s' is too large", w->path, name);
    if (w->n == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 64;
        struct st_entry *e = realloc(w->e, sizeof *e * (size_t)cap);
        if (!e) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
        w->e = e;
        w->cap = cap;
    }
    struct st_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name))) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
    e->dtype = dtype;
    e->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) e->shape[d] = shape[d];
    e->n_bytes = bytes;
    if (index) *index = w->n;
    w->n++;
    return NB_OK;
}

enum nb_status nb_st_writer_meta(struct nb_st_writer *w, const char *key, const char *value)
{
    char **m = realloc(w->meta, sizeof *m * (size_t)(2 * w->n_meta + 2));
    if (!m) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
    w->meta = m;
    m[2 * w->n_meta] = strdup(key);
    m[2 * w->n_meta + 1] = strdup(value);
    w->n_meta++;
    if (!m[2 * w->n_meta - 2] || !m[2 * w->n_meta - 1])
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
    return NB_OK;
}

/* qsort_r over indices: by name (byte order). */
static int by_name(const void *a, const void *b, void *arg)
{
    const struct st_entry *e = arg;
    return strcmp(e[*(const int64_t *)a].name, e[*(const int64_t *)b].name);
}

/* The header object, keys in byte order ("__metadata__" sorts before lower-case names;
 * the tensors are given to it sorted). */
static cJSON *make_header(const struct nb_st_writer *w, const int64_t *sorted)
{
    cJSON *h = cJSON_CreateObject();
    if (!h) return NULL;
    if (w->n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(h, "__metadata__");
        for (int64_t i = 0; m && i < w->n_meta; i++)
            if (!cJSON_AddStringToObject(m, w->meta[2 * i], w->meta[2 * i + 1])) m = NULL;
        if (!m) goto fail;
    }
    for (int64_t i = 0; i < w->n; i++) {
        const struct st_entry *e = &w->e[sorted[i]];
        cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *off = cJSON_CreateArray();
        if (!t || !sh || !off) {
            cJSON_Delete(t);
            cJSON_Delete(sh);
            cJSON_Delete(off);
            goto fail;
        }
        cJSON_AddItemToObject(h, e->name, t);
        cJSON_AddStringToObject(t, "dtype", nb_dtype_name(e->dtype));
        for (int d = 0; d < e->n_dims; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e->shape[d]));
        cJSON_AddItemToObject(t, "shape", sh);
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)e->begin));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(e->begin + e->n_bytes)));
        cJSON_AddItemToObject(t, "data_offsets", off);
    }
    return h;
fail:
    cJSON_Delete(h);
    return NULL;
}

enum nb_status nb_st_writer_begin(struct nb_st_writer *w)
{
    enum nb_status st = NB_OK;
    int64_t *sorted = malloc(sizeof *sorted * (size_t)(w->n ? w->n : 1));
    char *text = NULL;
    cJSON *h = NULL;
    if (w->begun) return nb_set_error(NB_ERR_INVALID_ARG, "%s: header written twice", w->path);
    w->order = malloc(sizeof *w->order * (size_t)(w->n ? w->n : 1));
    if (!sorted || !w->order) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
        goto fail;
    }
    for (int64_t i = 0; i < w->n; i++) sorted[i] = i;
    qsort_r(sorted, (size_t)w->n, sizeof *sorted, by_name, w->e);
    for (int64_t i = 1; i < w->n; i++)
        if (!strcmp(w->e[sorted[i]].name, w->e[sorted[i - 1]].name)) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s' given twice", w->path,
                              w->e[sorted[i]].name);
            goto fail;
        }
    /* data order: sizes that keep 8-byte alignment first, then the rest */
    int64_t k = 0;
    uint64_t off = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < w->n; i++) {
            struct st_entry *e = &w->e[sorted[i]];
            if ((e->n_bytes % 8 == 0) != (pass == 0)) continue;
            e->begin = off;
            if (nb_add_u64(off, e->n_bytes, &off)) {
                st = nb_set_error(NB_ERR_INVALID_ARG, "%s: the tensors are too large", w->path);
                goto fail;
            }
            w->order[k++] = sorted[i];
        }
    if (!(h = make_header(w, sorted)) || !(text = cJSON_PrintUnformatted(h))) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", w->path);
        goto fail;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if ((st = nb_outfile_open(&w->f, w->path)) || (st = nb_outfile_write(&w->f, len8, 8)) ||
        (st = nb_outfile_write(&w->f, text, len)) ||
        (st = nb_outfile_write(&w->f, "        ", padded - len)))
        goto fail;
    w->begun = 1;
    w->pos = 0;
    w->done = 0;
    while (w->pos < w->n && w->e[w->order[w->pos]].n_bytes == 0) w->pos++;
fail:
    cJSON_free(text);
    cJSON_Delete(h);
    free(sorted);
    return st;
}

int64_t nb_st_writer_next(const struct nb_st_writer *w)
{
    return w->begun && w->pos < w->n ? w->order[w->pos] : -1;
}

enum nb_status nb_st_writer_data(struct nb_st_writer *w, const void *p, size_t n)
{
    if (!n) return NB_OK;
    if (!w->begun || w->pos >= w->n)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %zu bytes past the last tensor", w->path, n);
    const struct st_entry *e = &w->e[w->order[w->pos]];
    if (n > e->n_bytes - w->done)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': %zu bytes given, %llu left",
                            w->path, e->name, n, (unsigned long long)(e->n_bytes - w->done));
    enum nb_status st = nb_outfile_write(&w->f, p, n);
    if (st) return st;
    w->done += n;
    if (w->done == e->n_bytes) {
        w->done = 0;
        w->pos++;
        while (w->pos < w->n && w->e[w->order[w->pos]].n_bytes == 0) w->pos++;
    }
    return NB_OK;
}

enum nb_status nb_st_writer_finish(struct nb_st_writer *w, uint64_t *file_bytes)
{
    if (!w->begun || w->pos < w->n)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s' was not written", w->path,
                            w->begun ? w->e[w->order[w->pos]].name : "(header)");
    uint64_t n = w->f.n_written;
    enum nb_status st = nb_outfile_commit(&w->f, NULL);
    if (st == NB_OK && file_bytes) *file_bytes = n;
    return st;
}
