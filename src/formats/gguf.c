/* formats/gguf.c — a validating GGUF (v2, v3) reader and a small writer.
 *
 * Reading is one pass over the header with a bounds-checked cursor. Every count is
 * compared with the bytes that remain before anything is allocated (a kv needs at
 * least 13 bytes, a tensor info 32, an array element its size), so a hostile count
 * fails fast and every table is at most a small multiple of the file size.
 * Keys, names and strings are copied NUL-terminated into an arena; string arrays get
 * a pointer table at parse time so element i is O(1). Lookups go through open-
 * addressing indexes (core/strindex.h) built after each section (duplicates are
 * format errors).
 */
#include "formats/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/checked.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "core/strindex.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH         8
#define GGUF_KEY_MSG           100 /* longest key / name quoted in messages */

/* Smallest possible encodings, used to bound counts by the bytes that remain. */
#define MIN_KV_BYTES     13 /* key len + type + 1-byte value */
#define MIN_TENSOR_BYTES 32 /* name len + n_dims + ne[0] + type + offset */
#define MIN_STRING_BYTES 8  /* length prefix */
#define MIN_ARRAY_BYTES  12 /* elem type + count */

/* ------------------------------------------------------------------ types */

struct kv {
    const char *key;
    enum nb_gguf_type type;
    const uint8_t *data;         /* scalar value, or first array element, in the file */
    const char *str;             /* STRING: NUL-terminated copy */
    enum nb_gguf_type elem_type; /* ARRAY */
    uint64_t count;              /* ARRAY */
    const char **strs;           /* ARRAY of STRING: count copies */
};

struct nb_gguf {
    struct nb_mapped_file file; /* only for nb_gguf_open */
    const uint8_t *base;
    size_t size;
    const char *name;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_start;
    struct kv *kvs;
    int64_t n_kv;
    struct nb_tensor *tensors;
    int64_t n_tensors;
    struct nb_strindex kv_ix, tensor_ix;
    struct nb_arena arena;
};

static const int k_type_size[NB_GGUF_TYPE_COUNT] = {
    [NB_GGUF_U8] = 1,  [NB_GGUF_I8] = 1,  [NB_GGUF_U16] = 2, [NB_GGUF_I16] = 2,
    [NB_GGUF_U32] = 4, [NB_GGUF_I32] = 4, [NB_GGUF_F32] = 4, [NB_GGUF_BOOL] = 1,
    [NB_GGUF_U64] = 8, [NB_GGUF_I64] = 8, [NB_GGUF_F64] = 8,
};

const char *nb_gguf_type_name(enum nb_gguf_type t)
{
    static const char *const names[NB_GGUF_TYPE_COUNT] = {
        "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
        "bool", "string", "array", "u64", "i64", "f64",
    };
    return (unsigned)t < NB_GGUF_TYPE_COUNT ? names[t] : "?";
}

/* Fixed size of a scalar type; 0 for STRING, ARRAY and unknown types. */
static int type_size(enum nb_gguf_type t)
{
    return (unsigned)t < NB_GGUF_TYPE_COUNT ? k_type_size[t] : 0;
}

static int is_int_type(enum nb_gguf_type t)
{
    switch (t) {
    case NB_GGUF_U8:
    case NB_GGUF_I8:
    case NB_GGUF_U16:
    case NB_GGUF_I16:
    case NB_GGUF_U32:
    case NB_GGUF_I32:
    case NB_GGUF_U64:
    case NB_GGUF_I64: return 1;
    default: return 0;
    }
}

/* ggml tensor types we read, and the names of the rest for messages. */
static const struct {
    uint32_t ggml;
    enum nb_dtype dtype;
} k_ggml_map[] = {
    {0, NB_DTYPE_F32},     {1, NB_DTYPE_F16},     {2, NB_DTYPE_Q4_0},    {3, NB_DTYPE_Q4_1},
    {6, NB_DTYPE_Q5_0},    {7, NB_DTYPE_Q5_1},    {8, NB_DTYPE_Q8_0},    {10, NB_DTYPE_Q2_K},
    {11, NB_DTYPE_Q3_K},   {12, NB_DTYPE_Q4_K},   {13, NB_DTYPE_Q5_K},   {14, NB_DTYPE_Q6_K},
    {15, NB_DTYPE_Q8_K},   {20, NB_DTYPE_IQ4_NL}, {23, NB_DTYPE_IQ4_XS}, {30, NB_DTYPE_BF16},
    {24, NB_DTYPE_I8},     {26, NB_DTYPE_I32},
};
#define GGUF_TYPES_READ                                                                            \
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, "   \
    "IQ4_XS, I8, I32"

static const char *ggml_type_name(uint32_t t)
{
    static const char *const names[] = {
        "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
        "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
        "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
        "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "Q4_0_4_4",
        "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8",
        "MXFP4",   "NVFP4",  "Q1_0",    "Q2_0",
    };
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* Maps a ggml type number to our dtype; 0 if we do not read it. */
static int dtype_from_ggml(uint32_t t, enum nb_dtype *out)
{
    for (size_t i = 0; i < sizeof k_ggml_map / sizeof k_ggml_map[0]; i++) {
        if (k_ggml_map[i].ggml == t) {
            *out = k_ggml_map[i].dtype;
            return 1;
        }
    }
    return 0;
}

static uint32_t ggml_from_dtype(enum nb_dtype d)
{
    for (size_t i = 0; i < sizeof k_ggml_map / sizeof k_ggml_map[0]; i++)
        if (k_ggml_map[i].dtype == d) return k_ggml_map[i].ggml;
    return UINT32_MAX;
}

/* ------------------------------------------------------------------ little-endian */

static uint16_t ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | ((uint64_t)ld32(p + 4) << 32);
}

/* A scalar of type t at p as i64 (*is_int = 1) or as f64 (*is_int = 0). Returns 0
 * for BOOL, STRING, ARRAY. u64 above INT64_MAX sets *too_big. */
static int load_number(enum nb_gguf_type t, const uint8_t *p, int64_t *iv, double *fv, int *is_int,
                       int *too_big)
{
    *too_big = 0;
    *iv = 0;
    *fv = 0;
    *is_int = 1;
    switch (t) {
    case NB_GGUF_U8: *iv = p[0]; break;
    case NB_GGUF_I8: *iv = (int8_t)p[0]; break;
    case NB_GGUF_U16: *iv = ld16(p); break;
    case NB_GGUF_I16: *iv = (int16_t)ld16(p); break;
    case NB_GGUF_U32: *iv = ld32(p); break;
    case NB_GGUF_I32: *iv = (int32_t)ld32(p); break;
    case NB_GGUF_I64: *iv = (int64_t)ld64(p); break;
    case NB_GGUF_U64: {
        uint64_t u = ld64(p);
        *too_big = u > (uint64_t)INT64_MAX;
        *iv = (int64_t)(u & (uint64_t)INT64_MAX);
        *fv = (double)u;
        return 1;
    }
    case NB_GGUF_F32: {
        uint32_t u = ld32(p);
        float f;
        memcpy(&f, &u, 4);
        *fv = f;
        *is_int = 0;
        return 1;
    }
    case NB_GGUF_F64: {
        uint64_t u = ld64(p);
        memcpy(fv, &u, 8);
        *is_int = 0;
        return 1;
    }
    default: return 0;
    }
    *fv = (double)*iv;
    return 1;
}

/* ------------------------------------------------------------------ cursor */

struct cur {
    const uint8_t *p;
    size_t size, pos;
    const char *name;            /* file, for messages */
    char ctx[GGUF_KEY_MSG + 32]; /* what is being read: "header", "key 'x'", "tensor 'y'" */
};

static size_t left(const struct cur *c)
{
    return c->size - c->pos;
}

/* Error for a read of `need` bytes that does not fit; `what` says what was read. */
static enum nb_status truncated(const struct cur *c, const char *what, uint64_t need)
{
    return nb_set_error(
        NB_ERR_FORMAT, "%s: %s: truncated file: %s at offset %zu needs %" PRIu64 " bytes, %zu left",
        c->name, c->ctx, what, c->pos, need, left(c));
}

static int take(struct cur *c, uint64_t n, const uint8_t **out)
{
    if (n > left(c)) return 0;
    *out = c->p + c->pos;
    c->pos += (size_t)n;
    return 1;
}

static enum nb_status rd32(struct cur *c, const char *what, uint32_t *v)
{
    const uint8_t *p;
    *v = 0;
    if (!take(c, 4, &p)) return truncated(c, what, 4);
    *v = ld32(p);
    return NB_OK;
}

static enum nb_status rd64(struct cur *c, const char *what, uint64_t *v)
{
    const uint8_t *p;
    *v = 0;
    if (!take(c, 8, &p)) return truncated(c, what, 8);
    *v = ld64(p);
    return NB_OK;
}

/* Reads a GGUF string (u64 length + bytes): *s points into the file, unterminated. */
static enum nb_status rd_str(struct cur *c, const char *what, const uint8_t **s, uint64_t *len)
{
    *s = NULL;
    enum nb_status st = rd64(c, what, len);
    if (st) return st;
    if (*len > left(c))
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: %s: %s: string length %" PRIu64 " at offset %zu exceeds the %zu "
                            "bytes left in the file",
                            c->name, c->ctx, what, *len, c->pos - 8, left(c));
    take(c, *len, s);
    return NB_OK;
}

/* NUL-terminated arena copy of n bytes (embedded NULs are kept; C view stops there). */
static char *copy_str(struct nb_gguf *g, const uint8_t *s, uint64_t n)
{
    char *p = nb_arena_alloc(&g->arena, (size_t)n + 1);
    if (p && n) memcpy(p, s, (size_t)n);
    return p;
}

/* ------------------------------------------------------------------ indexing */

/* Index n names (core/strindex.h); a duplicate is a format error naming it (kind is
 * "key" or "tensor name"). */
static enum nb_status build_index(struct nb_gguf *g, int64_t n, const char *kind, nb_name_at get,
                                  struct nb_strindex *ix)
{
    int64_t first = -1, second = -1;
    enum nb_status st = nb_strindex_build(ix, n, get, g, &first, &second);
    if (st == NB_ERR_FORMAT)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: duplicate %s '%.*s' (entries %" PRId64 " and %" PRId64 ")",
                            g->name, kind, GGUF_KEY_MSG, get(g, second), first, second);
    return st;
}

static const char *kv_name(const void *g, int64_t i)
{
    return ((const struct nb_gguf *)g)->kvs[i].key;
}
static const char *tensor_name(const void *g, int64_t i)
{
    return ((const struct nb_gguf *)g)->tensors[i].name;
}

/* ------------------------------------------------------------------ values */

/* Skips (validates) one value of type t, recursing into arrays up to the depth limit.
 * Used for the elements of nested arrays, which are not stored. */
static enum nb_status skip_value(struct cur *c, const char *key, enum nb_gguf_type t, int depth)
{
    const uint8_t *p;
    if (type_size(t)) {
        if (!take(c, (uint64_t)type_size(t), &p)) return truncated(c, "nested array value", 8);
        return NB_OK;
    }
    if (t == NB_GGUF_STRING) {
        uint64_t len;
        return rd_str(c, "nested array string", &p, &len);
    }
    if (t != NB_GGUF_ARRAY)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s': unknown value type %u", c->name,
                            GGUF_KEY_MSG, key, (unsigned)t);
    if (depth >= GGUF_MAX_DEPTH)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s': arrays nested deeper than %d", c->name,
                            GGUF_KEY_MSG, key, GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t count;
    enum nb_status st = rd32(c, "nested array type", &et);
    if (!st) st = rd64(c, "nested array count", &count);
    if (st) return st;
    if (et >= NB_GGUF_TYPE_COUNT)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s': nested array of unknown type %u",
                            c->name, GGUF_KEY_MSG, key, et);
    uint64_t min = type_size(et)          ? (uint64_t)type_size(et)
                   : et == NB_GGUF_STRING ? MIN_STRING_BYTES
                                          : MIN_ARRAY_BYTES;
    if (count > left(c) / min)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: key '%.*s': nested array count %" PRIu64
                            " needs more than the %zu bytes left",
                            c->name, GGUF_KEY_MSG, key, count, left(c));
    if (type_size(et)) {
        take(c, count * min, &p);
        return NB_OK;
    }
    for (uint64_t i = 0; i < count; i++) {
        st = skip_value(c, key, (enum nb_gguf_type)et, depth + 1);
        if (st) return st;
    }
    return NB_OK;
}

/* Parses an array value (after the kv's type) into kv: fixed-size elements stay in
 * the file; string elements are copied into one arena block with a pointer table. */
static enum nb_status parse_array(struct nb_gguf *g, struct cur *c, struct kv *kv)
{
    uint32_t et;
    enum nb_status st = rd32(c, "array element type", &et);
    if (!st) st = rd64(c, "array count", &kv->count);
    if (st) return st;
    if (et >= NB_GGUF_TYPE_COUNT)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s': array of unknown type %u", g->name,
                            GGUF_KEY_MSG, kv->key, et);
    kv->elem_type = (enum nb_gguf_type)et;
    uint64_t min = type_size(et)          ? (uint64_t)type_size(et)
                   : et == NB_GGUF_STRING ? MIN_STRING_BYTES
                                          : MIN_ARRAY_BYTES;
    if (kv->count > left(c) / min)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: key '%.*s': array count %" PRIu64 " of %s needs at least %" PRIu64
                            " bytes each, only %zu bytes left",
                            g->name, GGUF_KEY_MSG, kv->key, kv->count, nb_gguf_type_name(et), min,
                            left(c));
    kv->data = c->p + c->pos;
    if (type_size(et)) {
        const uint8_t *p;
        take(c, kv->count * min, &p);
        return NB_OK;
    }
    if (et == NB_GGUF_ARRAY) {
        for (uint64_t i = 0; i < kv->count; i++) {
            st = skip_value(c, kv->key, NB_GGUF_ARRAY, 1);
            if (st) return st;
        }
        return NB_OK;
    }
    /* Strings: validate and measure, then copy. */
    size_t start = c->pos;
    uint64_t total = 0;
    for (uint64_t i = 0; i < kv->count; i++) {
        const uint8_t *s;
        uint64_t len;
        st = rd_str(c, "array string", &s, &len);
        if (st) return st;
        total += len + 1; /* bounded by the file size */
    }
    kv->strs = nb_arena_alloc(&g->arena, (size_t)(kv->count ? kv->count : 1) * sizeof(char *));
    char *buf = nb_arena_alloc(&g->arena, (size_t)(total ? total : 1));
    if (!kv->strs || !buf)
        return nb_wrap_error(NB_ERR_NOMEM, "%s: key '%.*s': ", g->name, GGUF_KEY_MSG, kv->key);
    const uint8_t *p = c->p + start;
    for (uint64_t i = 0; i < kv->count; i++) {
        uint64_t len = ld64(p);
        if (len) memcpy(buf, p + 8, (size_t)len);
        buf[len] = '\0';
        kv->strs[i] = buf;
        buf += len + 1;
        p += 8 + len;
    }
    return NB_OK;
}

/* Parses key, type and value of kv number i. */
static enum nb_status parse_kv(struct nb_gguf *g, struct cur *c, int64_t i, struct kv *kv)
{
    snprintf(c->ctx, sizeof c->ctx, "kv %" PRId64, i);
    const uint8_t *s;
    uint64_t len;
    enum nb_status st = rd_str(c, "key", &s, &len);
    if (st) return st;
    if (memchr(s, 0, (size_t)len))
        return nb_set_error(NB_ERR_FORMAT, "%s: key of kv %" PRId64 " contains a NUL byte", g->name,
                            i);
    kv->key = copy_str(g, s, len);
    if (!kv->key) return nb_wrap_error(NB_ERR_NOMEM, "%s: ", g->name);
    snprintf(c->ctx, sizeof c->ctx, "key '%.*s'", GGUF_KEY_MSG, kv->key);
    uint32_t t;
    st = rd32(c, "value type", &t);
    if (st) return st;
    if (t >= NB_GGUF_TYPE_COUNT)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s': unknown value type %u", g->name,
                            GGUF_KEY_MSG, kv->key, t);
    kv->type = (enum nb_gguf_type)t;
    if (type_size(kv->type)) {
        if (!take(c, (uint64_t)type_size(kv->type), &kv->data))
            return truncated(c, "value", (uint64_t)type_size(kv->type));
        return NB_OK;
    }
    if (kv->type == NB_GGUF_STRING) {
        st = rd_str(c, "string value", &s, &len);
        if (st) return st;
        kv->data = s;
        kv->str = copy_str(g, s, len);
        if (!kv->str) return nb_wrap_error(NB_ERR_NOMEM, "%s: ", g->name);
        return NB_OK;
    }
    return parse_array(g, c, kv);
}

/* Reads general.alignment if present: a power of two, at least 8 (the GGUF spec: "a
 * multiple of 8"; below that, f32 data could start at any byte). */
static enum nb_status parse_alignment(struct nb_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = nb_gguf_find_kv(g, "general.alignment");
    if (i < 0) return NB_OK;
    const struct kv *kv = &g->kvs[i];
    int64_t v = 0;
    double f = 0;
    int is_int = 0, big = 0;
    if (!is_int_type(kv->type) || !load_number(kv->type, kv->data, &v, &f, &is_int, &big))
        return nb_set_error(NB_ERR_FORMAT, "%s: key 'general.alignment' is %s, expected u32",
                            g->name, nb_gguf_type_name(kv->type));
    if (big || v < 8 || v > (int64_t)UINT32_MAX || (v & (v - 1)) != 0)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: key 'general.alignment' = %" PRId64
                            " is not a power of two of at least 8 (u32)",
                            g->name, big ? -1 : v);
    g->alignment = (uint64_t)v;
    return NB_OK;
}

/* ------------------------------------------------------------------ tensors */

/* Parses tensor info i: name, dims (reversed into t->shape), type, and its offset
 * into *offset. Sizes are computed and checked here; placement is checked later. */
static enum nb_status parse_tensor(struct nb_gguf *g, struct cur *c, int64_t i, struct nb_tensor *t,
                                   uint64_t *offset)
{
    snprintf(c->ctx, sizeof c->ctx, "tensor %" PRId64, i);
    const uint8_t *s;
    uint64_t len;
    enum nb_status st = rd_str(c, "name", &s, &len);
    if (st) return st;
    if (memchr(s, 0, (size_t)len))
        return nb_set_error(NB_ERR_FORMAT, "%s: name of tensor %" PRId64 " contains a NUL byte",
                            g->name, i);
    t->name = copy_str(g, s, len);
    if (!t->name) return nb_wrap_error(NB_ERR_NOMEM, "%s: ", g->name);
    const char *nm = t->name;
    snprintf(c->ctx, sizeof c->ctx, "tensor '%.*s'", GGUF_KEY_MSG, nm);
    uint32_t n_dims;
    st = rd32(c, "n_dims", &n_dims);
    if (st) return st;
    if (n_dims < 1 || n_dims > NB_MAX_DIMS)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%.*s': n_dims %u is not in 1..%d", g->name,
                            GGUF_KEY_MSG, nm, n_dims, NB_MAX_DIMS);
    uint64_t ne[NB_MAX_DIMS] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < n_dims; d++) {
        st = rd64(c, "dimension", &ne[d]);
        if (st) return st;
        if (ne[d] > (uint64_t)INT64_MAX)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: tensor '%.*s': dimension %u = %" PRIu64 " is too large",
                                g->name, GGUF_KEY_MSG, nm, d, ne[d]);
    }
    uint32_t gt;
    st = rd32(c, "ggml type", &gt);
    if (!st) st = rd64(c, "offset", offset);
    if (st) return st;
    if (!dtype_from_ggml(gt, &t->dtype))
        return nb_set_error(NB_ERR_UNSUPPORTED,
                            "%s: tensor '%.*s': ggml type %u (%s) is not supported "
                            "(" GGUF_TYPES_READ " are)",
                            g->name, GGUF_KEY_MSG, nm, gt, ggml_type_name(gt));
    t->n_dims = (int)n_dims;
    for (int d = 0; d < NB_MAX_DIMS; d++)
        t->shape[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        t->shape[n_dims - 1 - d] = (int64_t)ne[d];
    /* The product of the nonzero dims must fit in i64, so that every partial product
     * (e.g. in nb_tensor_nelems, in any order) does too, even when a dim is 0. */
    uint64_t bound = 1, rows = 1, row_bytes;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (nb_mul_u64(bound, ne[d] ? ne[d] : 1, &bound) || bound > (uint64_t)INT64_MAX)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: tensor '%.*s': element count of shape [%" PRIu64 ", %" PRIu64
                                ", %" PRIu64 ", %" PRIu64 "] (ggml order) overflows",
                                g->name, GGUF_KEY_MSG, nm, ne[0], ne[1], ne[2], ne[3]);
        if (d > 0) rows *= ne[d]; /* <= bound, cannot overflow */
    }
    if (!nb_dtype_row_bytes(t->dtype, ne[0], &row_bytes))
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: tensor '%.*s': innermost dimension %" PRIu64
                            " is not a multiple of the %s block size %d",
                            g->name, GGUF_KEY_MSG, nm, ne[0], nb_dtype_name(t->dtype),
                            nb_dtype_block_elems(t->dtype));
    if (nb_mul_u64(row_bytes, rows, &t->n_bytes))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%.*s': byte size overflows", g->name,
                            GGUF_KEY_MSG, nm);
    return NB_OK;
}

/* Checks that every tensor lies aligned inside the file and sets its data pointer. */
static enum nb_status place_tensors(struct nb_gguf *g, const uint64_t *offsets)
{
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct nb_tensor *t = &g->tensors[i];
        uint64_t off = offsets[i], start, end;
        if (off % g->alignment)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: tensor '%.*s': offset %" PRIu64
                                " is not a multiple of the alignment %" PRIu64,
                                g->name, GGUF_KEY_MSG, t->name, off, g->alignment);
        if (nb_add_u64(g->data_start, off, &start) || nb_add_u64(start, t->n_bytes, &end) ||
            end > g->size)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: tensor '%.*s': data at offset %" PRIu64 " + %" PRIu64
                                " (%" PRIu64 " bytes) runs past the end of the file (%zu bytes)",
                                g->name, GGUF_KEY_MSG, t->name, g->data_start, off, t->n_bytes,
                                g->size);
        t->data = g->base + start;
    }
    return nb_tensors_check_overlap(g->tensors, g->n_tensors, g->base + g->data_start, g->name);
}

/* ------------------------------------------------------------------ parse */

/* Parses the whole header of g->base[0, g->size) into g. */
static enum nb_status parse_all(struct nb_gguf *g)
{
    struct cur c = {g->base, g->size, 0, g->name, "header"};
    uint64_t *offsets = NULL;
    const uint8_t *p;
    enum nb_status st;
    if (!take(&c, 4, &p)) {
        st = truncated(&c, "magic", 4);
        goto fail;
    }
    if (memcmp(p, "GGUF", 4) != 0) {
        st = nb_set_error(NB_ERR_FORMAT,
                          "%s: bad magic %02x %02x %02x %02x (expected \"GGUF\"): not a GGUF file",
                          g->name, p[0], p[1], p[2], p[3]);
        goto fail;
    }
    if ((st = rd32(&c, "version", &g->version))) goto fail;
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version;
        uint32_t sw = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "%s: GGUF version %u is not supported (only 2 and 3)%s", g->name, v,
                          v == 1 ? "; version 1 files are obsolete, re-convert the model"
                          : (sw == 2 || sw == 3) ? "; the file looks big-endian"
                                                 : "");
        goto fail;
    }
    uint64_t n_tensors, n_kv;
    if ((st = rd64(&c, "tensor count", &n_tensors))) goto fail;
    if ((st = rd64(&c, "kv count", &n_kv))) goto fail;
    if (n_kv > left(&c) / MIN_KV_BYTES) {
        st = nb_set_error(NB_ERR_FORMAT,
                          "%s: kv count %" PRIu64 " cannot fit in the %zu bytes left in the file",
                          g->name, n_kv, left(&c));
        goto fail;
    }
    if (n_tensors > left(&c) / MIN_TENSOR_BYTES) {
        st = nb_set_error(NB_ERR_FORMAT,
                          "%s: tensor count %" PRIu64
                          " cannot fit in the %zu bytes left in the file",
                          g->name, n_tensors, left(&c));
        goto fail;
    }
    /* Bounded by the file size via the checks above. */
    g->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    offsets = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *offsets);
    if (!g->kvs || !g->tensors || !offsets) {
        st = nb_set_error(NB_ERR_NOMEM,
                          "%s: out of memory for %" PRIu64 " kvs and %" PRIu64 " tensors", g->name,
                          n_kv, n_tensors);
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((st = parse_kv(g, &c, (int64_t)i, &g->kvs[i]))) goto fail;
        g->n_kv = (int64_t)i + 1;
    }
    if ((st = build_index(g, g->n_kv, "key", kv_name, &g->kv_ix))) goto fail;
    if ((st = parse_alignment(g))) goto fail;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((st = parse_tensor(g, &c, (int64_t)i, &g->tensors[i], &offsets[i]))) goto fail;
        g->n_tensors = (int64_t)i + 1;
    }
    if ((st = build_index(g, g->n_tensors, "tensor name", tensor_name, &g->tensor_ix)))
        goto fail;
    if (nb_align_u64(c.pos, g->alignment, &g->data_start)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: data section offset overflows", g->name);
        goto fail;
    }
    if ((st = place_tensors(g, offsets))) goto fail;
    free(offsets);
    return NB_OK;
fail:
    free(offsets);
    return st;
}

/* Allocates g, names it, parses data[0, size); on failure frees everything except
 * a mapping, which the caller owns until success. */
static enum nb_status parse_into(struct nb_gguf **out, const void *data, size_t size,
                                 const char *name, struct nb_mapped_file *file)
{
    *out = NULL;
    enum nb_status st;
    struct nb_gguf *g = calloc(1, sizeof *g);
    if (!g) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name ? name : "gguf");
    nb_arena_init(&g->arena, 1u << 16);
    g->name = nb_arena_strdup(&g->arena, name ? name : "<gguf>");
    if (!g->name) {
        st = NB_ERR_NOMEM;
        goto fail;
    }
    g->base = data;
    g->size = data ? size : 0;
    if ((st = parse_all(g))) goto fail;
    if (file) g->file = *file;
    *out = g;
    return NB_OK;
fail:
    nb_gguf_free(g);
    return st;
}

enum nb_status nb_gguf_parse(struct nb_gguf **out, const void *data, size_t size, const char *name)
{
    return parse_into(out, data, size, name, NULL);
}

enum nb_status nb_gguf_open(struct nb_gguf **out, const char *path)
{
    struct nb_mapped_file f;
    *out = NULL;
    enum nb_status st = nb_file_map(&f, path);
    if (st) return st;
    st = parse_into(out, f.data, f.size, path, &f);
    if (st) nb_file_unmap(&f);
    return st;
}

void nb_gguf_free(struct nb_gguf *g)
{
    if (!g) return;
    nb_file_unmap(&g->file);
    free(g->kvs);
    free(g->tensors);
    nb_strindex_free(&g->kv_ix);
    nb_strindex_free(&g->tensor_ix);
    nb_arena_free(&g->arena);
    free(g);
}

uint32_t nb_gguf_version(const struct nb_gguf *g)
{
    return g->version;
}
const char *nb_gguf_path(const struct nb_gguf *g)
{
    return g->name;
}
uint64_t nb_gguf_alignment(const struct nb_gguf *g)
{
    return g->alignment;
}

/* ------------------------------------------------------------------ metadata */

int64_t nb_gguf_n_kv(const struct nb_gguf *g)
{
    return g->n_kv;
}

const char *nb_gguf_kv_key(const struct nb_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL;
}

enum nb_gguf_type nb_gguf_kv_type(const struct nb_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kvs[i].type : NB_GGUF_TYPE_COUNT;
}

int64_t nb_gguf_find_kv(const struct nb_gguf *g, const char *key)
{
    return nb_strindex_find(&g->kv_ix, kv_name, g, key);
}

/* The kv for key, or NULL with NB_ERR_NOT_FOUND set. */
static const struct kv *get_kv(const struct nb_gguf *g, const char *key, enum nb_status *st)
{
    int64_t i = nb_gguf_find_kv(g, key);
    if (i < 0) {
        *st = nb_set_error(NB_ERR_NOT_FOUND, "%s: key '%.*s' not found", g->name, GGUF_KEY_MSG,
                           key ? key : "(null)");
        return NULL;
    }
    *st = NB_OK;
    return &g->kvs[i];
}

static enum nb_status type_error(const struct nb_gguf *g, const struct kv *kv, const char *want)
{
    return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s' is %s, expected %s", g->name, GGUF_KEY_MSG,
                        kv->key, nb_gguf_type_name(kv->type), want);
}

/* Integer value of a scalar kv with range [lo, hi]; format error otherwise. */
static enum nb_status get_int(const struct nb_gguf *g, const char *key, int64_t lo, int64_t hi,
                              const char *want, int64_t *out)
{
    enum nb_status st;
    const struct kv *kv = get_kv(g, key, &st);
    if (!kv) return st;
    int64_t v = 0;
    double f = 0;
    int is_int = 0, big = 0;
    if (!is_int_type(kv->type) || !load_number(kv->type, kv->data, &v, &f, &is_int, &big))
        return type_error(g, kv, want);
    if (big || v < lo || v > hi)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s' (%s) = %.0f does not fit in %s", g->name,
                            GGUF_KEY_MSG, kv->key, nb_gguf_type_name(kv->type), f, want);
    *out = v;
    return NB_OK;
}

enum nb_status nb_gguf_get_u32(const struct nb_gguf *g, const char *key, uint32_t *out)
{
    int64_t v = 0;
    enum nb_status st = get_int(g, key, 0, UINT32_MAX, "u32", &v);
    if (!st) *out = (uint32_t)v;
    return st;
}

enum nb_status nb_gguf_get_i64(const struct nb_gguf *g, const char *key, int64_t *out)
{
    return get_int(g, key, INT64_MIN, INT64_MAX, "i64", out);
}

enum nb_status nb_gguf_get_f32(const struct nb_gguf *g, const char *key, float *out)
{
    enum nb_status st;
    const struct kv *kv = get_kv(g, key, &st);
    if (!kv) return st;
    int64_t v = 0;
    double f = 0;
    int is_int = 0, big = 0;
    if (!type_size(kv->type) || kv->type == NB_GGUF_BOOL ||
        !load_number(kv->type, kv->data, &v, &f, &is_int, &big))
        return type_error(g, kv, "f32");
    *out = (float)f;
    return NB_OK;
}

enum nb_status nb_gguf_get_bool(const struct nb_gguf *g, const char *key, int *out)
{
    enum nb_status st;
    const struct kv *kv = get_kv(g, key, &st);
    if (!kv) return st;
    if (kv->type != NB_GGUF_BOOL) return type_error(g, kv, "bool");
    *out = kv->data[0] != 0;
    return NB_OK;
}

enum nb_status nb_gguf_get_str(const struct nb_gguf *g, const char *key, const char **out)
{
    enum nb_status st;
    const struct kv *kv = get_kv(g, key, &st);
    if (!kv) return st;
    if (kv->type != NB_GGUF_STRING) return type_error(g, kv, "string");
    *out = kv->str;
    return NB_OK;
}

/* The array kv for key; format error if it is not an array. */
static const struct kv *get_arr_kv(const struct nb_gguf *g, const char *key, enum nb_status *st)
{
    const struct kv *kv = get_kv(g, key, st);
    if (kv && kv->type != NB_GGUF_ARRAY) {
        *st = type_error(g, kv, "array");
        return NULL;
    }
    return kv;
}

enum nb_status nb_gguf_get_arr(const struct nb_gguf *g, const char *key,
                               enum nb_gguf_type *elem_type, uint64_t *count)
{
    enum nb_status st;
    const struct kv *kv = get_arr_kv(g, key, &st);
    if (!kv) return st;
    if (elem_type) *elem_type = kv->elem_type;
    if (count) *count = kv->count;
    return NB_OK;
}

/* Element check shared by the element getters. */
static enum nb_status arr_elem_error(const struct nb_gguf *g, const struct kv *kv, const char *want)
{
    if (kv->elem_type == NB_GGUF_ARRAY)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: key '%.*s' is a nested array (not readable)",
                            g->name, GGUF_KEY_MSG, kv->key);
    return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s' is an array of %s, expected %s", g->name,
                        GGUF_KEY_MSG, kv->key, nb_gguf_type_name(kv->elem_type), want);
}

static enum nb_status index_error(const struct nb_gguf *g, const struct kv *kv, uint64_t i)
{
    return nb_set_error(NB_ERR_RANGE,
                        "%s: key '%.*s': index %" PRIu64 " out of range (%" PRIu64 " elements)",
                        g->name, GGUF_KEY_MSG, kv->key, i, kv->count);
}

enum nb_status nb_gguf_get_arr_data(const struct nb_gguf *g, const char *key,
                                    enum nb_gguf_type elem_type, const void **data, uint64_t *count)
{
    if (!type_size(elem_type))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s: key '%.*s': get_arr_data needs a fixed-size type, not %s", g->name,
                            GGUF_KEY_MSG, key ? key : "(null)", nb_gguf_type_name(elem_type));
    enum nb_status st;
    const struct kv *kv = get_arr_kv(g, key, &st);
    if (!kv) return st;
    if (kv->elem_type != elem_type) return arr_elem_error(g, kv, nb_gguf_type_name(elem_type));
    *data = kv->data;
    if (count) *count = kv->count;
    return NB_OK;
}

enum nb_status nb_gguf_get_arr_str(const struct nb_gguf *g, const char *key, uint64_t i,
                                   const char **out)
{
    enum nb_status st;
    const struct kv *kv = get_arr_kv(g, key, &st);
    if (!kv) return st;
    if (kv->elem_type != NB_GGUF_STRING) return arr_elem_error(g, kv, "string");
    if (i >= kv->count) return index_error(g, kv, i);
    *out = kv->strs[i];
    return NB_OK;
}

/* Element i of a numeric array as i64 or f64. */
static enum nb_status arr_number(const struct nb_gguf *g, const char *key, uint64_t i, int want_int,
                                 int64_t *iv, double *fv)
{
    enum nb_status st;
    const struct kv *kv = get_arr_kv(g, key, &st);
    if (!kv) return st;
    int ok = type_size(kv->elem_type) && kv->elem_type != NB_GGUF_BOOL &&
             (!want_int || is_int_type(kv->elem_type));
    if (!ok) return arr_elem_error(g, kv, want_int ? "integers" : "numbers");
    if (i >= kv->count) return index_error(g, kv, i);
    int is_int = 0, big = 0;
    load_number(kv->elem_type, kv->data + i * (uint64_t)type_size(kv->elem_type), iv, fv, &is_int,
                &big);
    if (want_int && big)
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%.*s' element %" PRIu64 " does not fit in i64",
                            g->name, GGUF_KEY_MSG, kv->key, i);
    return NB_OK;
}

enum nb_status nb_gguf_get_arr_f64(const struct nb_gguf *g, const char *key, uint64_t i,
                                   double *out)
{
    int64_t iv = 0;
    return arr_number(g, key, i, 0, &iv, out);
}

enum nb_status nb_gguf_get_arr_i64(const struct nb_gguf *g, const char *key, uint64_t i,
                                   int64_t *out)
{
    double fv = 0;
    return arr_number(g, key, i, 1, out, &fv);
}

/* ------------------------------------------------------------------ tensors */

int64_t nb_gguf_n_tensors(const struct nb_gguf *g)
{
    return g->n_tensors;
}

const struct nb_tensor *nb_gguf_tensor(const struct nb_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct nb_tensor *nb_gguf_find_tensor(const struct nb_gguf *g, const char *name)
{
    int64_t i = nb_strindex_find(&g->tensor_ix, tensor_name, g, name);
    return i >= 0 ? &g->tensors[i] : NULL;
}

/* ------------------------------------------------------------------ writer */

struct wtensor {
    char *name;
    uint32_t ggml_type;
    int n_dims;
    uint64_t ne[NB_MAX_DIMS]; /* GGUF order, innermost first */
    const void *data;
    nb_gguf_fill_fn fill; /* instead of data: bytes produced at write time */
    void *fill_user;
    uint64_t n_bytes, offset;
};

struct nb_gguf_writer {
    uint32_t version, alignment;
    unsigned char *kv; /* serialized kv section */
    size_t kv_len, kv_cap;
    char **keys;
    size_t n_keys, keys_cap;
    struct wtensor *tensors;
    size_t n_tensors, tensors_cap;
    uint64_t data_size; /* aligned end of the data section so far */
};

/* Grows *buf (element size es) to hold at least n elements. */
static int grow(void **buf, size_t *cap, size_t n, size_t es)
{
    if (n <= *cap) return 1;
    size_t nc = *cap ? *cap : 16;
    while (nc < n) {
        if (nc > SIZE_MAX / 2 / es) return 0;
        nc *= 2;
    }
    void *p = realloc(*buf, nc * es);
    if (!p) return 0;
    *buf = p;
    *cap = nc;
    return 1;
}

static int put(struct nb_gguf_writer *w, const void *p, size_t n)
{
    if (n > SIZE_MAX - w->kv_len) return 0;
    void *buf = w->kv;
    if (!grow(&buf, &w->kv_cap, w->kv_len + n, 1)) return 0;
    w->kv = buf;
    if (n) memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return 1;
}

static int put32(struct nb_gguf_writer *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return put(w, b, 4);
}

static int put64(struct nb_gguf_writer *w, uint64_t v)
{
    return put32(w, (uint32_t)v) && put32(w, (uint32_t)(v >> 32));
}

static int put_str(struct nb_gguf_writer *w, const char *s)
{
    size_t n = strlen(s);
    return put64(w, n) && put(w, s, n);
}

/* Starts a kv: checks the key is new, writes key and type. On failure the kv
 * section is rolled back by the caller via *mark. */
static enum nb_status begin_kv(struct nb_gguf_writer *w, const char *key, enum nb_gguf_type t,
                               size_t *mark)
{
    if (!key) return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: NULL key");
    for (size_t i = 0; i < w->n_keys; i++)
        if (strcmp(w->keys[i], key) == 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: duplicate key '%.*s'",
                                GGUF_KEY_MSG, key);
    *mark = w->kv_len;
    void *keys = w->keys;
    int ok = grow(&keys, &w->keys_cap, w->n_keys + 1, sizeof(char *));
    if (ok) w->keys = keys;
    char *copy = ok ? strdup(key) : NULL;
    if (!copy || !put_str(w, key) || !put32(w, (uint32_t)t)) {
        free(copy);
        w->kv_len = *mark;
        return nb_set_error(NB_ERR_NOMEM, "gguf writer: out of memory adding key '%.*s'",
                            GGUF_KEY_MSG, key);
    }
    w->keys[w->n_keys++] = copy;
    return NB_OK;
}

/* Finishes a kv begun with begin_kv: ok = 0 undoes it with an out-of-memory error. */
static enum nb_status end_kv(struct nb_gguf_writer *w, int ok, size_t mark)
{
    if (ok) return NB_OK;
    w->kv_len = mark;
    w->n_keys--;
    char *key = w->keys[w->n_keys];
    nb_set_error(NB_ERR_NOMEM, "gguf writer: out of memory adding key '%.*s'", GGUF_KEY_MSG, key);
    free(key);
    return NB_ERR_NOMEM;
}

enum nb_status nb_gguf_writer_add_scalar(struct nb_gguf_writer *w, const char *key,
                                         enum nb_gguf_type type, const void *value)
{
    int n = type_size(type);
    if (!n)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: key '%.*s': %s is not a scalar type",
                            GGUF_KEY_MSG, key ? key : "(null)", nb_gguf_type_name(type));
    size_t mark;
    enum nb_status st = begin_kv(w, key, type, &mark);
    if (st) return st;
    /* Little-endian host (x86-64, arm64): the in-memory bytes are the file bytes. */
    return end_kv(w, put(w, value, (size_t)n), mark);
}

enum nb_status nb_gguf_writer_init(struct nb_gguf_writer **out, uint32_t version,
                                   uint32_t alignment)
{
    *out = NULL;
    if (version == 0) version = 3;
    if (alignment == 0) alignment = GGUF_DEFAULT_ALIGNMENT;
    if (version != 2 && version != 3)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: version %u (only 2 and 3)", version);
    if ((alignment & (alignment - 1)) || alignment < 8)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: alignment %u is not a power of two "
                            "of at least 8", alignment);
    struct nb_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return nb_set_error(NB_ERR_NOMEM, "gguf writer: out of memory");
    w->version = version;
    w->alignment = alignment;
    if (alignment != GGUF_DEFAULT_ALIGNMENT) {
        enum nb_status st = nb_gguf_writer_add_u32(w, "general.alignment", alignment);
        if (st) {
            nb_gguf_writer_free(w);
            return st;
        }
    }
    *out = w;
    return NB_OK;
}

void nb_gguf_writer_free(struct nb_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_keys; i++)
        free(w->keys[i]);
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    free(w);
}

enum nb_status nb_gguf_writer_add_u32(struct nb_gguf_writer *w, const char *key, uint32_t v)
{
    return nb_gguf_writer_add_scalar(w, key, NB_GGUF_U32, &v);
}
enum nb_status nb_gguf_writer_add_i32(struct nb_gguf_writer *w, const char *key, int32_t v)
{
    return nb_gguf_writer_add_scalar(w, key, NB_GGUF_I32, &v);
}
enum nb_status nb_gguf_writer_add_u64(struct nb_gguf_writer *w, const char *key, uint64_t v)
{
    return nb_gguf_writer_add_scalar(w, key, NB_GGUF_U64, &v);
}
enum nb_status nb_gguf_writer_add_f32(struct nb_gguf_writer *w, const char *key, float v)
{
    return nb_gguf_writer_add_scalar(w, key, NB_GGUF_F32, &v);
}
enum nb_status nb_gguf_writer_add_bool(struct nb_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    return nb_gguf_writer_add_scalar(w, key, NB_GGUF_BOOL, &b);
}

enum nb_status nb_gguf_writer_add_str(struct nb_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: key '%.*s': NULL string",
                            GGUF_KEY_MSG, key ? key : "(null)");
    size_t mark;
    enum nb_status st = begin_kv(w, key, NB_GGUF_STRING, &mark);
    if (st) return st;
    return end_kv(w, put_str(w, v), mark);
}

enum nb_status nb_gguf_writer_add_arr(struct nb_gguf_writer *w, const char *key,
                                      enum nb_gguf_type elem_type, const void *data, uint64_t count)
{
    int es = type_size(elem_type);
    uint64_t n;
    if (!es || nb_mul_u64(count, (uint64_t)es, &n) || n > SIZE_MAX / 2 || (count && !data))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "gguf writer: key '%.*s': bad array (%s x %" PRIu64 ")", GGUF_KEY_MSG,
                            key ? key : "(null)", nb_gguf_type_name(elem_type), count);
    size_t mark;
    enum nb_status st = begin_kv(w, key, NB_GGUF_ARRAY, &mark);
    if (st) return st;
    return end_kv(w, put32(w, (uint32_t)elem_type) && put64(w, count) && put(w, data, (size_t)n),
                  mark);
}

enum nb_status nb_gguf_writer_add_arr_str(struct nb_gguf_writer *w, const char *key,
                                          const char *const *strs, uint64_t count)
{
    if (count && !strs)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: key '%.*s': NULL string array",
                            GGUF_KEY_MSG, key ? key : "(null)");
    for (uint64_t i = 0; i < count; i++)
        if (!strs[i])
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "gguf writer: key '%.*s': string %" PRIu64 " is NULL", GGUF_KEY_MSG,
                                key ? key : "(null)", i);
    size_t mark;
    enum nb_status st = begin_kv(w, key, NB_GGUF_ARRAY, &mark);
    if (st) return st;
    int ok = put32(w, NB_GGUF_STRING) && put64(w, count);
    for (uint64_t i = 0; ok && i < count; i++)
        ok = put_str(w, strs[i]);
    return end_kv(w, ok, mark);
}

static enum nb_status add_tensor(struct nb_gguf_writer *w, const char *name, enum nb_dtype dtype,
                                 int n_dims, const int64_t *shape, const void *data,
                                 nb_gguf_fill_fn fill, void *fill_user)
{
    const char *nm = name ? name : "(null)";
    if (!name || n_dims < 1 || n_dims > NB_MAX_DIMS || !shape ||
        ggml_from_dtype(dtype) == UINT32_MAX)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "gguf writer: tensor '%.*s': bad arguments (dtype %d, n_dims %d)",
                            GGUF_KEY_MSG, nm, (int)dtype, n_dims);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: duplicate tensor '%.*s'",
                                GGUF_KEY_MSG, nm);
    struct wtensor t = {.ggml_type = ggml_from_dtype(dtype),
                        .n_dims = n_dims,
                        .data = data,
                        .fill = fill,
                        .fill_user = fill_user};
    uint64_t rows = 1, row_bytes;
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: tensor '%.*s': negative dim",
                                GGUF_KEY_MSG, nm);
        t.ne[n_dims - 1 - d] = (uint64_t)shape[d];
        if (d < n_dims - 1 && nb_mul_u64(rows, (uint64_t)shape[d], &rows))
            return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: tensor '%.*s': size overflows",
                                GGUF_KEY_MSG, nm);
    }
    if (!nb_dtype_row_bytes(dtype, t.ne[0], &row_bytes) || nb_mul_u64(row_bytes, rows, &t.n_bytes))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "gguf writer: tensor '%.*s': innermost dim %" PRIu64
                            " does not fit %s blocks, or the size overflows",
                            GGUF_KEY_MSG, nm, t.ne[0], nb_dtype_name(dtype));
    if (t.n_bytes && !data && !fill)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: tensor '%.*s': NULL data",
                            GGUF_KEY_MSG, nm);
    t.offset = w->data_size;
    uint64_t end;
    if (nb_add_u64(t.offset, t.n_bytes, &end) || nb_align_u64(end, w->alignment, &end))
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: tensor '%.*s': data too large",
                            GGUF_KEY_MSG, nm);
    void *buf = w->tensors;
    t.name = strdup(name);
    if (!t.name || !grow(&buf, &w->tensors_cap, w->n_tensors + 1, sizeof t)) {
        free(t.name);
        return nb_set_error(NB_ERR_NOMEM, "gguf writer: out of memory adding tensor '%.*s'",
                            GGUF_KEY_MSG, nm);
    }
    w->tensors = buf;
    w->tensors[w->n_tensors++] = t;
    w->data_size = end;
    return NB_OK;
}

enum nb_status nb_gguf_writer_add_tensor(struct nb_gguf_writer *w, const char *name,
                                         enum nb_dtype dtype, int n_dims, const int64_t *shape,
                                         const void *data)
{
    return add_tensor(w, name, dtype, n_dims, shape, data, NULL, NULL);
}

enum nb_status nb_gguf_writer_add_tensor_fill(struct nb_gguf_writer *w, const char *name,
                                              enum nb_dtype dtype, int n_dims, const int64_t *shape,
                                              nb_gguf_fill_fn fill, void *user)
{
    if (!fill)
        return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: tensor '%.*s': NULL fill function",
                            GGUF_KEY_MSG, name ? name : "(null)");
    return add_tensor(w, name, dtype, n_dims, shape, NULL, fill, user);
}

static enum nb_status write_zeros(struct nb_outfile *f, uint64_t n)
{
    return nb_outfile_zeros(f, n);
}

/* Header, kvs, tensor infos, padding, data into f (core/outfile.h). */
static enum nb_status write_to(struct nb_gguf_writer *w, struct nb_outfile *f, const char *path)
{
    enum nb_status st = NB_OK;
    unsigned char *chunk = NULL; /* buffer for fill() tensors */
    size_t kv_mark = w->kv_len;
    /* Build header + tensor infos after the kv bytes, then write them in order. */
    int ok = 1;
    for (size_t i = 0; ok && i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        ok = put_str(w, t->name) && put32(w, (uint32_t)t->n_dims);
        for (int d = 0; ok && d < t->n_dims; d++)
            ok = put64(w, t->ne[d]);
        ok = ok && put32(w, t->ggml_type) && put64(w, t->offset);
    }
    if (!ok) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory building the header", path);
        goto done;
    }
    unsigned char hdr[24];
    memcpy(hdr, "GGUF", 4);
    uint64_t fields[3] = {w->version, w->n_tensors, w->n_keys};
    for (int i = 0; i < 4; i++)
        hdr[4 + i] = (unsigned char)(fields[0] >> (8 * i));
    for (int i = 0; i < 8; i++)
        hdr[8 + i] = (unsigned char)(fields[1] >> (8 * i));
    for (int i = 0; i < 8; i++)
        hdr[16 + i] = (unsigned char)(fields[2] >> (8 * i));
    uint64_t pos = sizeof hdr + w->kv_len, aligned = pos;
    nb_align_u64(pos, w->alignment, &aligned);
    if ((st = nb_outfile_write(f, hdr, sizeof hdr))) goto done;
    if ((st = nb_outfile_write(f, w->kv, w->kv_len))) goto done;
    if ((st = write_zeros(f, aligned - pos))) goto done;
    uint64_t at = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        if ((st = write_zeros(f, t->offset - at))) goto done;
        if (!t->fill) {
            if ((st = nb_outfile_write(f, t->data, (size_t)t->n_bytes))) goto done;
        } else {
            if (!chunk && !(chunk = malloc(NB_GGUF_FILL_CHUNK))) {
                st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            for (uint64_t off = 0; off < t->n_bytes; off += NB_GGUF_FILL_CHUNK) {
                uint64_t left = t->n_bytes - off;
                size_t n = left < NB_GGUF_FILL_CHUNK ? (size_t)left : NB_GGUF_FILL_CHUNK;
                if ((st = t->fill(t->fill_user, chunk, off, n)) != NB_OK) {
                    nb_wrap_error(st, "%s: tensor '%s': ", path, t->name);
                    goto done;
                }
                if ((st = nb_outfile_write(f, chunk, n))) goto done;
            }
        }
        at = t->offset + t->n_bytes;
    }
    st = write_zeros(f, w->data_size - at);
done:
    w->kv_len = kv_mark;
    free(chunk);
    return st;
}

/* f was just opened with status st: write and commit it (fd_out: a memory file's
 * descriptor), or drop it. */
static enum nb_status finish(struct nb_gguf_writer *w, struct nb_outfile *f, enum nb_status st,
                             const char *name, int *fd_out)
{
    if (st) return st;
    if ((st = write_to(w, f, name)) || (st = nb_outfile_commit(f, fd_out))) nb_outfile_abort(f);
    return st;
}

/* Written to a new temporary beside PATH, synced and renamed over it, so PATH is
 * either the old file or the complete new one (core/outfile.h). */
enum nb_status nb_gguf_writer_write(struct nb_gguf_writer *w, const char *path)
{
    struct nb_outfile f;
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "gguf writer: NULL path");
    return finish(w, &f, nb_outfile_open(&f, path), path, NULL);
}

enum nb_status nb_gguf_writer_write_memory(struct nb_gguf_writer *w, const char *name, int *fd_out)
{
    struct nb_outfile f;
    return finish(w, &f, nb_outfile_open_memory(&f, name), name, fd_out);
}
