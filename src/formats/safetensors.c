/* formats/safetensors.c — a validating safetensors reader (single file or sharded)
 * and a small writer.
 *
 *   +----------------+----------------------------+---------------------------+
 *   | u64 header_len | header_len bytes of JSON   | data section              |
 *   | little-endian  | (writers pad with spaces)  | tensors at data_offsets   |
 *   +----------------+----------------------------+---------------------------+
 *
 * Every shard is parsed into the same flat tensor list; a hash table over the
 * names gives nb_safetensors_find() in O(1) and catches duplicates across shards.
 */
#include "formats/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/checked.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "core/strindex.h"
#include "formats/json.h"

#define ST_MAX_HEADER (100ull * 1000 * 1000) /* as the reference implementation */
#define ST_MAX_EXACT  9007199254740992.0     /* 2^53: larger JSON numbers are inexact */

struct nb_safetensors {
    struct nb_mapped_file *maps; /* [n_maps]; none for nb_safetensors_parse */
    int n_maps;
    struct nb_tensor *tensors; /* [n_tensors] */
    int *shard_of;             /* [n_tensors] index of the shard holding each tensor */
    int64_t n_tensors, cap_tensors;
    struct nb_strindex index; /* names -> tensors */
    const char **meta_keys, **meta_vals; /* [n_meta] "__metadata__" of the first shard */
    int n_meta;
    struct nb_arena arena; /* names and metadata strings */
};

/* ---------------------------------------------------------------- helpers */

static uint64_t load_u64_le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static const char *out_name(const void *t, int64_t i)
{
    return ((const struct nb_tensor *)t)[i].name;
}

static const struct {
    const char *name;
    enum nb_dtype dtype;
} k_dtypes[] = {
    {"F32", NB_DTYPE_F32}, {"F16", NB_DTYPE_F16}, {"BF16", NB_DTYPE_BF16},
    {"I8", NB_DTYPE_I8},   {"I32", NB_DTYPE_I32},
};

/* dtypes of the safetensors spec that we do not read. */
static const char *const k_unsupported[] = {
    "BOOL",    "U8",      "I16",     "U16", "U32",     "I64",     "U64", "F64",
    "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64",
};

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_EXACT) || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static enum nb_status add_tensor_slot(struct nb_safetensors *st, const char *file)
{
    if (st->n_tensors < st->cap_tensors) return NB_OK;
    int64_t cap = st->cap_tensors ? st->cap_tensors * 2 : 64;
    struct nb_tensor *t = realloc(st->tensors, (size_t)cap * sizeof *t);
    if (!t) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
    st->tensors = t;
    int *s = realloc(st->shard_of, (size_t)cap * sizeof *s);
    if (!s) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
    st->shard_of = s;
    st->cap_tensors = cap;
    return NB_OK;
}

/* The file of shard `k` for messages. */
static const char *shard_name(const struct nb_safetensors *st, int k, const char *dflt)
{
    return (st->maps && k < st->n_maps && st->maps[k].path) ? st->maps[k].path : dflt;
}

/* Index the names; a repeated name is an error naming both files. */
static enum nb_status build_hash(struct nb_safetensors *st, const char *file)
{
    int64_t i, j;
    nb_strindex_free(&st->index);
    enum nb_status s = nb_strindex_build(&st->index, st->n_tensors, out_name, st->tensors, &j, &i);
    if (s == NB_ERR_FORMAT)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' appears twice (in %s and %s)", file,
                            st->tensors[i].name, shard_name(st, st->shard_of[j], file),
                            shard_name(st, st->shard_of[i], file));
    return s == NB_ERR_NOMEM ? nb_set_error(s, "%s: out of memory", file) : s;
}

/* ---------------------------------------------------------------- one shard */

/* Parse the "__metadata__" object: every value must be a string. */
static enum nb_status parse_metadata(struct nb_safetensors *st, const cJSON *meta, const char *file,
                                     int keep)
{
    if (!cJSON_IsObject(meta))
        return nb_set_error(NB_ERR_FORMAT, "%s: __metadata__ must be an object", file);
    int n = 0;
    for (const cJSON *m = meta->child; m; m = m->next) {
        if (!cJSON_IsString(m) || !m->valuestring || !m->string)
            return nb_set_error(NB_ERR_FORMAT, "%s: __metadata__ value '%s' must be a string", file,
                                m->string ? m->string : "?");
        n++;
    }
    if (!keep || n == 0 || st->meta_keys) return NB_OK; /* a repeated key: first wins */
    st->meta_keys = nb_arena_alloc(&st->arena, (size_t)n * sizeof *st->meta_keys);
    st->meta_vals = nb_arena_alloc(&st->arena, (size_t)n * sizeof *st->meta_vals);
    if (!st->meta_keys || !st->meta_vals)
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
    for (const cJSON *m = meta->child; m; m = m->next) {
        const char *k = nb_arena_strdup(&st->arena, m->string);
        const char *v = nb_arena_strdup(&st->arena, m->valuestring);
        if (!k || !v) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
        st->meta_keys[st->n_meta] = k;
        st->meta_vals[st->n_meta] = v;
        st->n_meta++;
    }
    return NB_OK;
}

/* Validate one tensor entry and fill `t` (data inside [data, data + dsize)). */
static enum nb_status parse_entry(struct nb_safetensors *st, const cJSON *e, const char *file,
                                  const unsigned char *data, uint64_t dsize, struct nb_tensor *t,
                                  uint64_t *begin_out, uint64_t *end_out)
{
    const char *tn = e->string;
    memset(t, 0, sizeof *t);
    if (!cJSON_IsObject(e))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': entry is not an object", file, tn);
    if (tn[0] == '\0') return nb_set_error(NB_ERR_FORMAT, "%s: tensor with an empty name", file);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': missing or non-string dtype", file,
                            tn);
    int found = 0;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++) {
        if (strcmp(dt->valuestring, k_dtypes[i].name) == 0) {
            t->dtype = k_dtypes[i].dtype;
            found = 1;
        }
    }
    if (!found) {
        for (size_t i = 0; i < sizeof k_unsupported / sizeof k_unsupported[0]; i++) {
            if (strcmp(dt->valuestring, k_unsupported[i]) == 0)
                return nb_set_error(NB_ERR_UNSUPPORTED,
                                    "%s: tensor '%s': dtype %s is not supported (F32, F16, "
                                    "BF16, I8, I32 are)",
                                    file, tn, dt->valuestring);
        }
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", file, tn,
                            dt->valuestring);
    }

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': missing or non-array shape", file, tn);
    int nd = cJSON_GetArraySize(shape);
    if (nd > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d)", file,
                            tn, nd, NB_MAX_DIMS);
    t->n_dims = nd;
    for (int i = 0; i < NB_MAX_DIMS; i++)
        t->shape[i] = 1;
    uint64_t nelems = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: tensor '%s': dimension %d is not a non-negative integer", file,
                                tn, i);
        if (nb_mul_u64(nelems, v, &nelems) || nelems > (uint64_t)INT64_MAX)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': element count overflows", file,
                                tn);
        t->shape[i] = (int64_t)v;
    }
    uint64_t nbytes;
    if (!nb_dtype_row_bytes(t->dtype, nelems, &nbytes))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': byte size overflows", file, tn);

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &begin) ||
        !json_uint(off->child->next, &end))
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets must be [begin, end] of non-negative "
                            "integers",
                            file, tn);
    if (begin > end)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %llu > end %llu",
                            file, tn, (unsigned long long)begin, (unsigned long long)end);
    if (end > dsize)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets end %llu past the end of the data "
                            "section (%llu bytes)",
                            file, tn, (unsigned long long)end, (unsigned long long)dsize);
    if (end - begin != nbytes)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets span %llu bytes but %s x %llu "
                            "elements needs %llu",
                            file, tn, (unsigned long long)(end - begin), dt->valuestring,
                            (unsigned long long)nelems, (unsigned long long)nbytes);
    t->name = nb_arena_strdup(&st->arena, tn);
    if (!t->name) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
    t->data = data + begin;
    t->n_bytes = nbytes;
    *begin_out = begin;
    *end_out = end;
    return NB_OK;
}

/* Parse one file of `size` bytes and append its tensors (shard index `shard`). */
static enum nb_status add_shard(struct nb_safetensors *st, const void *buf, size_t size,
                                const char *file, int shard)
{
    enum nb_status s = NB_OK;
    cJSON *root = NULL;
    const unsigned char *p = buf;
    int64_t first = st->n_tensors;

    if (size < 8) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors header", file,
                         size);
        goto fail;
    }
    uint64_t hlen = load_u64_le(p);
    if (hlen > ST_MAX_HEADER) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: header length %llu exceeds the limit of %llu bytes",
                         file, (unsigned long long)hlen, ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > (uint64_t)size - 8) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: header length %llu exceeds the file size (%zu bytes)",
                         file, (unsigned long long)hlen, size);
        goto fail;
    }
    s = nb_json_parse((const char *)p + 8, (size_t)hlen, file, &root);
    if (s != NB_OK) {
        nb_wrap_error(s, "safetensors header: ");
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: header is not a JSON object", file);
        goto fail;
    }
    const unsigned char *data = p + 8 + hlen;
    uint64_t dsize = (uint64_t)size - 8 - hlen;

    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) continue;
        if (strcmp(e->string, "__metadata__") == 0) {
            s = parse_metadata(st, e, file, shard == 0);
            if (s != NB_OK) goto fail;
            continue;
        }
        s = add_tensor_slot(st, file);
        if (s != NB_OK) goto fail;
        uint64_t b, en;
        s = parse_entry(st, e, file, data, dsize, &st->tensors[st->n_tensors], &b, &en);
        if (s != NB_OK) goto fail;
        st->shard_of[st->n_tensors] = shard;
        st->n_tensors++;
    }

    /* No two tensors of this file may share bytes. */
    if (st->n_tensors > first &&
        (s = nb_tensors_check_overlap(st->tensors + first, st->n_tensors - first, data, file)))
        goto fail;
    cJSON_Delete(root);
    return NB_OK;
fail:
    cJSON_Delete(root);
    return s;
}

static struct nb_safetensors *st_new(void)
{
    struct nb_safetensors *st = calloc(1, sizeof *st);
    if (st) nb_arena_init(&st->arena, 16u << 10);
    return st;
}

/* ---------------------------------------------------------------- public: reading */

enum nb_status nb_safetensors_parse(struct nb_safetensors **out, const void *data, size_t size,
                                    const char *name)
{
    enum nb_status s = NB_OK;
    *out = NULL;
    if (!name) name = "<safetensors>";
    struct nb_safetensors *st = st_new();
    if (!st) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    s = add_shard(st, data, size, name, 0);
    if (s != NB_OK) goto fail;
    s = build_hash(st, name);
    if (s != NB_OK) goto fail;
    *out = st;
    return NB_OK;
fail:
    nb_safetensors_free(st);
    return s;
}

void nb_safetensors_free(struct nb_safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_maps; i++)
        nb_file_unmap(&st->maps[i]);
    free(st->maps);
    free(st->tensors);
    free(st->shard_of);
    nb_strindex_free(&st->index);
    nb_arena_free(&st->arena);
    free(st);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Map `path` as shard `k` of `st` and parse it. */
static enum nb_status open_shard(struct nb_safetensors *st, const char *path, int k)
{
    enum nb_status s = nb_file_map(&st->maps[k], path);
    if (s != NB_OK) return s;
    st->n_maps = k + 1;
    return add_shard(st, st->maps[k].data, st->maps[k].size, path, k);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A shard name from an index must be a plain file name in the index's folder. */
static int shard_name_ok(const char *s)
{
    return s[0] != '\0' && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..");
}

static enum nb_status open_index(struct nb_safetensors *st, const char *index_path)
{
    enum nb_status s = NB_OK;
    cJSON *root = NULL;
    const char **files = NULL;
    char *dir = NULL, *path = NULL;
    size_t n_files = 0;

    s = nb_json_load(index_path, &root);
    if (s != NB_OK) goto fail;
    const cJSON *wm =
        cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: missing \"weight_map\" object", index_path);
        goto fail;
    }
    int n = cJSON_GetArraySize(wm);
    files = malloc((size_t)(n ? n : 1) * sizeof *files);
    if (!files) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", index_path);
        goto fail;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring) {
            s = nb_set_error(NB_ERR_FORMAT, "%s: weight_map entry '%s' is not a string", index_path,
                             e->string ? e->string : "?");
            goto fail;
        }
        if (!shard_name_ok(e->valuestring)) {
            s = nb_set_error(NB_ERR_FORMAT,
                             "%s: tensor '%s': shard name '%s' is not a plain file name",
                             index_path, e->string, e->valuestring);
            goto fail;
        }
        files[n_files++] = e->valuestring;
    }
    if (n_files == 0) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto fail;
    }
    qsort(files, n_files, sizeof *files, cmp_str);
    size_t u = 1;
    for (size_t i = 1; i < n_files; i++)
        if (strcmp(files[i], files[u - 1]) != 0) files[u++] = files[i];
    n_files = u;

    /* Shards live beside the index. */
    dir = strdup(index_path);
    if (!dir) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", index_path);
        goto fail;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        dir[0] = '\0';
    st->maps = calloc(n_files, sizeof *st->maps);
    if (!st->maps) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", index_path);
        goto fail;
    }
    for (size_t k = 0; k < n_files; k++) {
        size_t len = strlen(dir) + strlen(files[k]) + 1;
        free(path);
        path = malloc(len);
        if (!path) {
            s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", index_path);
            goto fail;
        }
        snprintf(path, len, "%s%s", dir, files[k]);
        if (access(path, F_OK) != 0 && errno == ENOENT) {
            s = nb_set_error(NB_ERR_NOT_FOUND, "%s: shard '%s' is missing", index_path, files[k]);
            goto fail;
        }
        s = open_shard(st, path, (int)k);
        if (s != NB_OK) goto fail;
    }
    s = build_hash(st, index_path);
    if (s != NB_OK) goto fail;

    /* Every tensor of the weight map must be in the shard it names. */
    for (const cJSON *e = wm->child; e; e = e->next) {
        const struct nb_tensor *t = nb_safetensors_find(st, e->string);
        if (!t || strcmp(files[st->shard_of[t - st->tensors]], e->valuestring) != 0) {
            s = nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is listed in shard '%s' but not there",
                             index_path, e->string, e->valuestring);
            goto fail;
        }
    }
    free(path);
    free(dir);
    free(files);
    cJSON_Delete(root);
    return NB_OK;
fail:
    free(path);
    free(dir);
    free(files);
    cJSON_Delete(root);
    return s;
}

enum nb_status nb_safetensors_open(struct nb_safetensors **out, const char *path)
{
    enum nb_status s = NB_OK;
    char *p = NULL;
    *out = NULL;
    struct nb_safetensors *st = st_new();
    if (!st) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        s = nb_set_error(errno == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s: %s", path,
                         strerror(errno));
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        size_t len = strlen(path) + sizeof "/model.safetensors.index.json";
        p = malloc(len);
        if (!p) {
            s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        snprintf(p, len, "%s/model.safetensors", path);
        if (!is_regular(p)) {
            snprintf(p, len, "%s/model.safetensors.index.json", path);
            if (!is_regular(p)) {
                s = nb_set_error(NB_ERR_NOT_FOUND,
                                 "%s: no model.safetensors or model.safetensors.index.json", path);
                goto fail;
            }
        }
    } else {
        p = strdup(path);
        if (!p) {
            s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
    }
    if (ends_with(p, ".json")) {
        s = open_index(st, p);
    } else {
        st->maps = calloc(1, sizeof *st->maps);
        if (!st->maps) {
            s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", p);
            goto fail;
        }
        s = open_shard(st, p, 0);
        if (s == NB_OK) s = build_hash(st, p);
    }
    if (s != NB_OK) goto fail;
    free(p);
    *out = st;
    return NB_OK;
fail:
    free(p);
    nb_safetensors_free(st);
    return s;
}

int64_t nb_safetensors_n_tensors(const struct nb_safetensors *st)
{
    return st->n_tensors;
}

const struct nb_tensor *nb_safetensors_tensor(const struct nb_safetensors *st, int64_t i)
{
    return (i >= 0 && i < st->n_tensors) ? &st->tensors[i] : NULL;
}

const struct nb_tensor *nb_safetensors_find(const struct nb_safetensors *st, const char *name)
{
    int64_t i = nb_strindex_find(&st->index, out_name, st->tensors, name);
    return i >= 0 ? &st->tensors[i] : NULL;
}

const char *nb_safetensors_metadata(const struct nb_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_vals[i];
    return NULL;
}

/* ---------------------------------------------------------------- writing */

/* A growable text buffer for the header. */
struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* A JSON string literal. */
static void sb_json_str(struct sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, s, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(struct sbuf *b, uint64_t v)
{
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_str(b, tmp);
}

/* Check a tensor handed to the writer; its byte size in *nbytes. */
static enum nb_status check_out_tensor(const struct nb_tensor *t, const char *path,
                                       uint64_t *nbytes)
{
    if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor with an empty or reserved name", path);
    if (t->dtype != NB_DTYPE_F32 && t->dtype != NB_DTYPE_F16 && t->dtype != NB_DTYPE_BF16 &&
        t->dtype != NB_DTYPE_I8 && t->dtype != NB_DTYPE_I32)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s has no safetensors name",
                            path, t->name, nb_dtype_name(t->dtype));
    if (t->n_dims < 0 || t->n_dims > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions", path, t->name,
                            t->n_dims);
    uint64_t ne = 1;
    for (int i = 0; i < t->n_dims; i++) {
        if (t->shape[i] < 0 || nb_mul_u64(ne, (uint64_t)t->shape[i], &ne))
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s': bad shape", path, t->name);
    }
    if (!nb_dtype_row_bytes(t->dtype, ne, nbytes) || *nbytes != t->n_bytes || (*nbytes && !t->data))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s: tensor '%s': n_bytes %llu does not match dtype x shape", path,
                            t->name, (unsigned long long)t->n_bytes);
    return NB_OK;
}

enum nb_status nb_safetensors_write_meta(const char *path, const struct nb_tensor *tensors,
                                         int n_tensors, const char *const *meta_keys,
                                         const char *const *meta_vals, int n_meta)
{
    enum nb_status s = NB_OK;
    struct sbuf h = {0};
    struct nb_outfile f = {.fd = -1};
    struct nb_strindex names = {0};

    if (n_tensors < 0 || n_meta < 0 || (n_tensors && !tensors)) {
        s = nb_set_error(NB_ERR_INVALID_ARG, "%s: bad tensor list", path);
        goto fail;
    }
    int64_t d0, d1;
    if ((s = nb_strindex_build(&names, n_tensors, out_name, tensors, &d0, &d1))) {
        if (s == NB_ERR_FORMAT)
            s = nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor '%s' given twice", path,
                             tensors[d1].name);
        goto fail;
    }
    nb_strindex_free(&names);
    sb_str(&h, "{");
    if (n_meta > 0) {
        sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) sb_str(&h, ",");
            sb_json_str(&h, meta_keys[i]);
            sb_str(&h, ":");
            sb_json_str(&h, meta_vals[i]);
        }
        sb_str(&h, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n_tensors; i++) {
        const struct nb_tensor *t = &tensors[i];
        uint64_t nbytes;
        s = check_out_tensor(t, path, &nbytes);
        if (s != NB_OK) goto fail;
        if (i || n_meta > 0) sb_str(&h, ",");
        sb_json_str(&h, t->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, nb_dtype_name(t->dtype));
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->n_dims; d++) {
            if (d) sb_str(&h, ",");
            sb_u64(&h, (uint64_t)t->shape[d]);
        }
        sb_str(&h, "],\"data_offsets\":[");
        sb_u64(&h, off);
        sb_str(&h, ",");
        if (nb_add_u64(off, nbytes, &off)) {
            s = nb_set_error(NB_ERR_INVALID_ARG, "%s: total size overflows", path);
            goto fail;
        }
        sb_u64(&h, off);
        sb_str(&h, "]}");
    }
    sb_str(&h, "}");
    while (!h.oom && h.n % 8)
        sb_str(&h, " ");
    if (h.oom) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }

    if ((s = nb_outfile_open(&f, path))) goto fail;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    if ((s = nb_outfile_write(&f, len8, 8)) || (s = nb_outfile_write(&f, h.p, h.n))) goto fail;
    for (int i = 0; i < n_tensors; i++)
        if (tensors[i].n_bytes && (s = nb_outfile_write(&f, tensors[i].data, tensors[i].n_bytes)))
            goto fail;
    if ((s = nb_outfile_commit(&f, NULL))) goto fail;
    free(h.p);
    return NB_OK;
fail:
    nb_outfile_abort(&f);
    free(h.p);
    return s;
}

enum nb_status nb_safetensors_write(const char *path, const struct nb_tensor *tensors,
                                    int n_tensors)
{
    return nb_safetensors_write_meta(path, tensors, n_tensors, NULL, NULL, 0);
}
