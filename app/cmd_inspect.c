/* nibble inspect / nibble verify — look inside a model file (a .nib: header, tensors,
 * bits per weight; a GGUF: metadata and tensors, like gguf-dump; safetensors: tensors)
 * and check every tensor checksum of a .nib. `inspect --json` prints one JSON object
 * through cJSON, so any file name or key gives valid JSON.
 *
 * Internal headers still used (a gguf-dump-like view of files, not of a loaded model, so
 * nibble.h does not carry it): formats/gguf.h (metadata keys, values and tensors),
 * formats/safetensors.h (tensors), formats/nib.h (header, tensors, checksum verify) and
 * formats/sniff.h (which kind of file a path is). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "formats/gguf.h"
#include "formats/nib.h"
#include "formats/safetensors.h"
#include "formats/sniff.h"
#include "nibble.h"

static void usage(FILE *f, const char *cmd)
{
    if (!strcmp(cmd, "verify")) fprintf(f, "usage: nibble verify FILE.nib\n");
    else fprintf(f, "usage: nibble inspect [--json] MODEL   (a .nib, a GGUF file, a safetensors "
                    "file or a model folder)\n");
}

static cJSON *shape_json(const int64_t *shape, int n_dims)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < n_dims; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[d]));
    return a;
}

static void shape_str(char *out, size_t size, const int64_t *shape, int n_dims)
{
    size_t k = 0;
    out[0] = '\0';
    for (int d = 0; d < n_dims && k < size; d++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", d ? " x " : "", (long long)shape[d]);
    if (!n_dims) snprintf(out, size, "-");
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
        for (int d = 0; d < t->n_dims; d++) elems *= (double)t->shape[d];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "kind", t->kind == NB_NIB_BLOB ? "blob" : nb_wpath_name(t->path));
        cJSON_AddItemToObject(e, "shape", shape_json(t->shape, t->n_dims));
        int int4 = t->kind != NB_NIB_BLOB && (t->path == NB_WPATH_W4A8 || t->path == NB_WPATH_W4A16);
        if (int4) {
            cJSON_AddNumberToObject(e, "group", t->group);
            cJSON_AddStringToObject(e, "layout", t->layout == NB_LAYOUT_X16 ? "x16" : "rows");
        }
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
    if (t == NB_GGUF_STRING) return nb_gguf_get_str(g, key, &s) ? cJSON_CreateNull() : cJSON_CreateString(s);
    if (t == NB_GGUF_BOOL) return nb_gguf_get_bool(g, key, &b) ? cJSON_CreateNull() : cJSON_CreateBool(b);
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
        cJSON_AddItemToArray(ts, e);
    }
    return ts;
}

static const struct nb_tensor *gguf_at(const void *g, int64_t i) { return nb_gguf_tensor(g, i); }
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

/* The human form: a few header lines, then one line per tensor. */
static void print_doc(const char *path, const cJSON *doc)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(doc, "tensors");
    int nib = !strcmp(fmt->valuestring, "nib");
    printf("file        %s (%s", path, fmt->valuestring);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (v) printf(" version %d", v->valueint);
    printf(", %d tensors)\n", cJSON_GetArraySize(ts));
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, nib ? "header" : "metadata");
    const cJSON *e;
    cJSON_ArrayForEach(e, meta)
    {
        char *s = cJSON_PrintUnformatted(e);
        printf("%-11s %s\n", e->string, s ? s : "?");
        cJSON_free(s);
    }
    printf("\n%-36s %-6s %-16s %5s %6s %12s %8s\n", "tensor", nib ? "kind" : "dtype", "shape",
           "group", "layout", "bytes", "bpw");
    cJSON_ArrayForEach(e, ts)
    {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, nib ? "kind" : "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "group");
        const cJSON *lay = cJSON_GetObjectItemCaseSensitive(e, "layout");
        const cJSON *bpw = cJSON_GetObjectItemCaseSensitive(e, "bits_per_weight");
        int64_t shape[4] = {0};
        int nd = 0;
        const cJSON *d;
        cJSON_ArrayForEach(d, sh) if (nd < 4) shape[nd++] = (int64_t)d->valuedouble;
        char shs[64];
        shape_str(shs, sizeof shs, shape, nd);
        printf("%-36s %-6s %-16s %5d %6s %12.0f ", cJSON_GetObjectItem(e, "name")->valuestring,
               k->valuestring, shs, g ? g->valueint : 0, lay ? lay->valuestring : "-",
               cJSON_GetObjectItem(e, "bytes")->valuedouble);
        if (bpw) printf("%8.3f\n", bpw->valuedouble);
        else printf("%8s\n", "-");
    }
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, "inspect");
            return 0;
        }
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] == '-' || path) {
            usage(stderr, "inspect");
            return 1;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr, "inspect");
        return 1;
    }
    enum nb_file_kind kind;
    struct nb_nib *n = NULL;
    struct nb_gguf *g = NULL;
    struct nb_safetensors *st = NULL;
    cJSON *doc = NULL;
    int rc = 1;
    if (nb_sniff_path(path, &kind) != NB_OK) goto fail;
    if (kind == NB_FILE_NIB) {
        if (nb_nib_open(&n, path) != NB_OK) goto fail;
        doc = nib_doc(n);
    } else if (kind == NB_FILE_GGUF) {
        if (nb_gguf_open(&g, path) != NB_OK) goto fail;
        doc = gguf_doc(g);
    } else if (kind == NB_FILE_DIR || kind == NB_FILE_UNKNOWN) {
        /* a folder of safetensors, or one safetensors file (no magic to sniff) */
        if (nb_safetensors_open(&st, path) != NB_OK) goto fail;
        doc = st_doc(st);
    } else {
        fprintf(stderr, "nibble inspect: %s: a llama2.c checkpoint: nothing to inspect beyond "
                        "its header (nibble run -m it, or quantize it to a .nib)\n", path);
        goto done;
    }
    if (!doc) {
        fprintf(stderr, "nibble inspect: out of memory\n");
        goto done;
    }
    cJSON_AddStringToObject(doc, "file", path);
    if (json) {
        char *s = cJSON_Print(doc);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        print_doc(path, doc);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble inspect: %s\n", nb_last_error());
done:
    cJSON_Delete(doc);
    nb_nib_free(n);
    nb_gguf_free(g);
    nb_safetensors_free(st);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    struct nb_nib *n = NULL;
    if (argc != 2 || argv[1][0] == '-') {
        int help = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
        usage(help ? stdout : stderr, "verify");
        return help ? 0 : 1;
    }
    if (nb_nib_open(&n, argv[1]) != NB_OK) {
        fprintf(stderr, "nibble verify: %s\n", nb_last_error());
        return 1;
    }
    int rc = 0;
    if (nb_nib_verify(n) != NB_OK) {
        fprintf(stderr, "nibble verify: %s\n", nb_last_error());
        rc = 1;
    } else {
        printf("%s: ok: %lld tensors, every checksum matches\n", argv[1],
               (long long)nb_nib_n_tensors(n));
    }
    nb_nib_free(n);
    return rc;
}
