/* formats/inspect.c — a view of model files, not of a loaded model (nibble.h,
 * "inspect"): a .nib's header and tensors, a GGUF's metadata and tensors (like
 * gguf-dump), safetensors' tensors, as one JSON object printed by cJSON, so any file
 * name or key gives valid JSON. Also the .nib checksum check of `nibble verify`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/hfquant.h"
#include "formats/json.h"
#include "formats/nib.h"
#include "formats/safetensors.h"
#include "formats/source.h"
#include "nibble.h"

static cJSON *shape_json(const int64_t *shape, int n_dims)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < n_dims; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[d]));
    return a;
}

static cJSON *nib_doc(const struct nb_nib *n)
{
    cJSON *o = cJSON_CreateObject(), *ts = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "format", "nib");
    cJSON_AddNumberToObject(o, "version", nb_nib_version(n));
    cJSON_AddNumberToObject(o, "bytes", (double)nb_nib_file_size(n));
    cJSON *h = cJSON_Duplicate(nb_nib_header(n), 1);
    cJSON_DeleteItemFromObject(h, "tensors");
    cJSON_AddItemToObject(o, "header", h);
    for (int64_t i = 0; i < nb_nib_n_tensors(n); i++) {
        const struct nb_nib_tensor *t = nb_nib_tensor(n, i);
        double elems = 1;
        for (int d = 0; d < t->n_dims; d++)
            elems *= (double)t->shape[d];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "kind", t->kind == NB_NIB_BLOB
                                               ? "blob"
                                               : nb_nib_kind_name(t->path, t->format));
        cJSON_AddItemToObject(e, "shape", shape_json(t->shape, t->n_dims));
        int int4 =
            t->kind != NB_NIB_BLOB && nb_wpath_is_int4(t->path);
        if (int4) cJSON_AddNumberToObject(e, "group", t->group);
        if (int4 || (t->kind != NB_NIB_BLOB && t->path == NB_WPATH_COUNT))
            cJSON_AddStringToObject(e, "layout", t->layout == NB_LAYOUT_X16 ? "x16" : "rows");
        cJSON_AddNumberToObject(e, "bytes", (double)t->size);
        if (t->n_dims) cJSON_AddNumberToObject(e, "bits_per_weight", 8.0 * (double)t->size / elems);
        cJSON_AddItemToArray(ts, e);
    }
    cJSON_AddItemToObject(o, "tensors", ts);
    return o;
}

/* A GGUF value as JSON: scalars and strings as they are, arrays of up to 8 elements
 * whole, longer ones as {type, count, first: [8 elements]}. */
static cJSON *gguf_value(const struct nb_gguf *g, int64_t i)
{
    const char *key = nb_gguf_kv_key(g, i);
    enum nb_gguf_type t = nb_gguf_kv_type(g, i);
    const char *s;
    int64_t v;
    float f;
    int b;
    if (t == NB_GGUF_STRING)
        return nb_gguf_get_str(g, key, &s) ? cJSON_CreateNull() : cJSON_CreateString(s);
    if (t == NB_GGUF_BOOL)
        return nb_gguf_get_bool(g, key, &b) ? cJSON_CreateNull() : cJSON_CreateBool(b);
    if (t == NB_GGUF_F32 || t == NB_GGUF_F64)
        return nb_gguf_get_f32(g, key, &f) ? cJSON_CreateNull() : cJSON_CreateNumber(f);
    if (t != NB_GGUF_ARRAY)
        return nb_gguf_get_i64(g, key, &v) ? cJSON_CreateString("(out of range)")
                                           : cJSON_CreateNumber((double)v);
    enum nb_gguf_type et;
    uint64_t count;
    if (nb_gguf_get_arr(g, key, &et, &count)) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    for (uint64_t k = 0; k < count && k < 8; k++) {
        double d;
        if (et == NB_GGUF_STRING)
            cJSON_AddItemToArray(a, nb_gguf_get_arr_str(g, key, k, &s) ? cJSON_CreateNull()
                                                                       : cJSON_CreateString(s));
        else if (et != NB_GGUF_ARRAY && !nb_gguf_get_arr_f64(g, key, k, &d))
            cJSON_AddItemToArray(a, cJSON_CreateNumber(d));
    }
    if (count <= 8) return a;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", nb_gguf_type_name(et));
    cJSON_AddNumberToObject(o, "count", (double)count);
    cJSON_AddItemToObject(o, "first", a);
    return o;
}

static cJSON *tensors_doc(const struct nb_tensor *(*at)(const void *, int64_t), const void *src,
                          int64_t n)
{
    cJSON *ts = cJSON_CreateArray();
    for (int64_t i = 0; i < n; i++) {
        const struct nb_tensor *t = at(src, i);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "dtype", nb_dtype_name(t->dtype));
        cJSON_AddItemToObject(e, "shape", shape_json(t->shape, t->n_dims));
        cJSON_AddNumberToObject(e, "bytes", (double)t->n_bytes);
        double elems = (double)nb_tensor_nelems(t);
        if (elems > 0) /* from the block layout: 4.5 for Q4_K, 6.5625 for Q6_K */
            cJSON_AddNumberToObject(e, "bits_per_weight", 8.0 * (double)t->n_bytes / elems);
        cJSON_AddItemToArray(ts, e);
    }
    return ts;
}

static const struct nb_tensor *gguf_at(const void *g, int64_t i)
{
    return nb_gguf_tensor(g, i);
}
static const struct nb_tensor *st_at(const void *s, int64_t i)
{
    return nb_safetensors_tensor(s, i);
}

static cJSON *gguf_doc(const struct nb_gguf *g)
{
    cJSON *o = cJSON_CreateObject(), *kv = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "gguf");
    cJSON_AddNumberToObject(o, "version", nb_gguf_version(g));
    cJSON_AddNumberToObject(o, "alignment", (double)nb_gguf_alignment(g));
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++)
        cJSON_AddItemToObject(kv, nb_gguf_kv_key(g, i), gguf_value(g, i));
    cJSON_AddItemToObject(o, "metadata", kv);
    cJSON_AddItemToObject(o, "tensors", tensors_doc(gguf_at, g, nb_gguf_n_tensors(g)));
    return o;
}

static cJSON *st_doc(const struct nb_safetensors *st)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "safetensors");
    const char *fmt = nb_safetensors_metadata(st, "format");
    if (fmt) cJSON_AddStringToObject(o, "metadata_format", fmt);
    cJSON_AddItemToObject(o, "tensors", tensors_doc(st_at, st, nb_safetensors_n_tensors(st)));
    return o;
}

/* A Hugging Face folder's quantization (formats/hfquant.h) as nibble reads it:
 * "quantization": {...}, or "quantization_error" with the refusal; nothing for a float
 * checkpoint or a folder without a readable config.json. */
static void add_quantization(cJSON *doc, const char *dir)
{
    char path[4096];
    cJSON *root = NULL, *qroot = NULL;
    struct nb_hfq_config c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (nb_json_load(path, &root) != NB_OK) return;
    snprintf(path, sizeof path, "%s/quantize_config.json", dir);
    if (!cJSON_GetObjectItemCaseSensitive(root, "quantization_config") &&
        nb_json_load(path, &qroot) != NB_OK)
        qroot = NULL;
    if (nb_hfq_parse_config(root, qroot, "config.json", &c) != NB_OK) {
        cJSON_AddStringToObject(doc, "quantization_error", nb_last_error());
    } else if (c.method != NB_HFQ_NONE) {
        cJSON *q = cJSON_AddObjectToObject(doc, "quantization");
        cJSON_AddStringToObject(q, "method", nb_hfq_method_name(c.method));
        cJSON_AddNumberToObject(q, "bits", c.bits);
        cJSON_AddNumberToObject(q, "group_size", c.group_size ? c.group_size : -1);
        if (c.method == NB_HFQ_GPTQ) {
            cJSON_AddBoolToObject(q, "desc_act", c.desc_act);
            cJSON_AddBoolToObject(q, "sym", c.sym);
            cJSON_AddStringToObject(q, "checkpoint_format", c.version == 1 ? "gptq" : "gptq_v2");
        }
    }
    cJSON_Delete(root);
    cJSON_Delete(qroot);
}

enum nb_status nb_inspect_json(const char *path, char **json_out)
{
    if (!path || !json_out)
        return nb_set_error(NB_ERR_INVALID_ARG, "inspect: %s is NULL", !path ? "path" : "json_out");
    *json_out = NULL;
    struct nb_source *src = NULL;
    struct nb_safetensors *st = NULL;
    cJSON *doc = NULL;
    enum nb_status s = nb_source_open(&src, path);
    if (s) goto done;
    enum nb_file_kind kind = src->kind;
    if (kind == NB_FILE_NIB) {
        doc = nib_doc(src->nib);
    } else if (kind == NB_FILE_GGUF) {
        doc = gguf_doc(src->gguf);
    } else if (kind == NB_FILE_DIR || kind == NB_FILE_UNKNOWN) {
        /* a folder of safetensors, or one safetensors file (no magic to sniff) */
        if ((s = nb_safetensors_open(&st, path))) goto done;
        doc = st_doc(st);
        if (doc && kind == NB_FILE_DIR) add_quantization(doc, path);
    } else {
        s = nb_set_error(NB_ERR_UNSUPPORTED,
                         "%s: a llama2.c checkpoint: nothing to inspect beyond its header "
                         "(nibble run -m it, or quantize it to a .nib)",
                         path);
        goto done;
    }
    if (!doc || !cJSON_AddStringToObject(doc, "file", path) || !(*json_out = cJSON_Print(doc)))
        s = nb_set_error(NB_ERR_NOMEM, "inspect: %s: out of memory", path);
done:
    cJSON_Delete(doc);
    nb_source_free(src);
    nb_safetensors_free(st);
    return s;
}

enum nb_status nb_nib_verify_file(const char *path, int64_t *n_tensors)
{
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "verify: path is NULL");
    struct nb_nib *n = NULL;
    enum nb_status s = nb_nib_open(&n, path);
    if (s == NB_OK) s = nb_nib_verify(n);
    if (s == NB_OK && n_tensors) *n_tensors = nb_nib_n_tensors(n);
    nb_nib_free(n);
    return s;
}

/* The text of nb_inspect_json comes from cJSON_Print: cJSON's allocator (malloc unless a
 * program set hooks for its own cJSON, which is why the caller frees it here). */
void nb_free(void *p)
{
    cJSON_free(p);
}
