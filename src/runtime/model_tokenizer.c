/* runtime/model_tokenizer.c — a model's tokenizer, and its copy inside a .nib.
 *
 * Blobs in a .nib (kind "blob"):
 *   tokenizer/gguf                    a GGUF holding the source's tokenizer.* keys
 *   tokenizer/tokenizer.json          a Hugging Face tokenizer.json ...
 *   tokenizer/tokenizer.model         ... or a SentencePiece model
 *   tokenizer/tokenizer_config.json   with either, when the source has it
 *   tokenizer/llama2c.bin             a llama2.c tokenizer.bin */
#include "runtime/model_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mmap.h"
#include "formats/gguf.h"
#include "formats/source.h"

#define MAX_TOKENIZER_FILE (256u << 20)

void nb_blob_list_free(struct nb_blob_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->p[i]);
    free(l->p);
    l->p = NULL;
    l->n = 0;
}

static enum nb_status keep(struct nb_blob_list *l, void *p)
{
    void **n = realloc(l->p, sizeof *n * (size_t)(l->n + 1));
    if (!n) {
        free(p);
        return nb_set_error(NB_ERR_NOMEM, "out of memory");
    }
    l->p = n;
    l->p[l->n++] = p;
    return NB_OK;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Add a whole file as a blob, if it exists. */
static enum nb_status add_file(struct nb_nib_writer *w, const char *name, const char *path,
                               struct nb_blob_list *owned)
{
    if (!is_file(path)) return NB_OK;
    char *buf;
    size_t n;
    enum nb_status st = nb_file_read_all(path, MAX_TOKENIZER_FILE, &buf, &n);
    if (st) return st;
    if ((st = keep(owned, buf))) return st;
    return nb_nib_writer_add(w, name, NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, buf, n);
}

/* Copy one metadata value of a GGUF into a writer. */
static enum nb_status copy_kv(const struct nb_gguf *g, int64_t i, struct nb_gguf_writer *w)
{
    const char *key = nb_gguf_kv_key(g, i);
    enum nb_gguf_type t = nb_gguf_kv_type(g, i);
    enum nb_status st;
    if (t == NB_GGUF_STRING) {
        const char *v;
        if ((st = nb_gguf_get_str(g, key, &v))) return st;
        return nb_gguf_writer_add_str(w, key, v);
    }
    if (t == NB_GGUF_ARRAY) {
        enum nb_gguf_type et;
        uint64_t n;
        if ((st = nb_gguf_get_arr(g, key, &et, &n))) return st;
        if (et == NB_GGUF_STRING) {
            const char **v = malloc(sizeof *v * (size_t)(n ? n : 1));
            if (!v) return nb_set_error(NB_ERR_NOMEM, "out of memory");
            for (uint64_t k = 0; k < n && st == NB_OK; k++) st = nb_gguf_get_arr_str(g, key, k, &v[k]);
            if (st == NB_OK) st = nb_gguf_writer_add_arr_str(w, key, v, n);
            free(v);
            return st;
        }
        const void *data;
        if ((st = nb_gguf_get_arr_data(g, key, et, &data, &n))) return st;
        return nb_gguf_writer_add_arr(w, key, et, data, n);
    }
    /* scalars: read as raw bytes through the array-free getters */
    union {
        uint32_t u32;
        int64_t i64;
        float f32;
        int b;
    } v;
    switch (t) {
    case NB_GGUF_BOOL:
        if ((st = nb_gguf_get_bool(g, key, &v.b))) return st;
        return nb_gguf_writer_add_bool(w, key, v.b);
    case NB_GGUF_F32:
    case NB_GGUF_F64:
        if ((st = nb_gguf_get_f32(g, key, &v.f32))) return st;
        return nb_gguf_writer_add_f32(w, key, v.f32);
    default:
        if ((st = nb_gguf_get_i64(g, key, &v.i64))) return st;
        if (v.i64 >= 0 && v.i64 <= UINT32_MAX) return nb_gguf_writer_add_u32(w, key, (uint32_t)v.i64);
        return nb_gguf_writer_add_i32(w, key, (int32_t)v.i64);
    }
}

static enum nb_status embed_gguf(struct nb_nib_writer *nw, const struct nb_gguf *g,
                                 struct nb_blob_list *owned)
{
    struct nb_gguf_writer *w = NULL;
    struct nb_mapped_file mf = {0};
    int fd = -1;
    enum nb_status st;
    if ((st = nb_gguf_writer_init(&w, 3, 32))) goto done;
    for (int64_t i = 0; i < nb_gguf_n_kv(g) && st == NB_OK; i++)
        if (!strncmp(nb_gguf_kv_key(g, i), "tokenizer.", 10)) st = copy_kv(g, i, w);
    if (st) goto done;
    /* built in memory: no temporary file anyone else could see or replace */
    if ((st = nb_gguf_writer_write_memory(w, "tokenizer/gguf", &fd))) goto done;
    if ((st = nb_file_map_fd(&mf, fd, "tokenizer/gguf"))) goto done;
    void *buf = malloc(mf.size ? mf.size : 1);
    if (!buf) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(buf, mf.data, mf.size);
    if ((st = keep(owned, buf))) goto done;
    st = nb_nib_writer_add(nw, "tokenizer/gguf", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, buf,
                           mf.size);
done:
    nb_file_unmap(&mf);
    if (fd >= 0) close(fd);
    nb_gguf_writer_free(w);
    return st;
}

enum nb_status nb_tokenizer_embed(struct nb_nib_writer *w, const struct nb_source *src,
                                  struct nb_blob_list *owned)
{
    char p[4200];
    enum nb_status st;
    const char *dir = src->path;
    if (src->kind == NB_FILE_DIR) {
        snprintf(p, sizeof p, "%s/tokenizer.json", dir);
        if (is_file(p)) {
            if ((st = add_file(w, "tokenizer/tokenizer.json", p, owned))) return st;
        } else {
            snprintf(p, sizeof p, "%s/tokenizer.model", dir);
            if ((st = add_file(w, "tokenizer/tokenizer.model", p, owned))) return st;
        }
        snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
        return add_file(w, "tokenizer/tokenizer_config.json", p, owned);
    }
    if (src->kind == NB_FILE_GGUF) return embed_gguf(w, src->gguf, owned);
    if ((st = nb_tokenizer_llama2c_path(src->path, p, sizeof p))) return st;
    return add_file(w, "tokenizer/llama2c.bin", p, owned);
}

static const struct nb_nib_tensor *blob(const struct nb_nib *n, const char *name)
{
    const struct nb_nib_tensor *t = nb_nib_find(n, name);
    return t && t->kind == NB_NIB_BLOB ? t : NULL;
}

/* The name errors give an embedded tokenizer file: the .nib, what is embedded and
 * where it came from ("m.nib (tokenizer.json embedded from /models/x/tokenizer.json)"),
 * from the header's "source" object when there is one. */
static void embedded_name(const struct nb_nib *n, const char *nib_path, const char *what,
                          const char *file, char *out, size_t size)
{
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(nb_nib_header(n), "source");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(src, "path");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(src, "kind");
    if (!cJSON_IsString(sp) || !sp->valuestring[0]) {
        snprintf(out, size, "%s (embedded %s)", nib_path, what);
    } else if (file && cJSON_IsString(kind) && !strcmp(kind->valuestring, "safetensors")) {
        /* a Hugging Face folder: the file came from inside it */
        size_t l = strlen(sp->valuestring);
        snprintf(out, size, "%s (%s embedded from %s%s%s)", nib_path, what, sp->valuestring,
                 l && sp->valuestring[l - 1] == '/' ? "" : "/", file);
    } else {
        snprintf(out, size, "%s (%s embedded from %s)", nib_path, what, sp->valuestring);
    }
}

enum nb_status nb_tokenizer_for_source(struct nb_tokenizer **out, const struct nb_source *src)
{
    *out = NULL;
    if (src->kind != NB_FILE_NIB) return nb_tokenizer_load_source(out, src);
    enum nb_status st;
    const struct nb_nib *n = src->nib;
    const char *model_path = src->path;
    const struct nb_nib_tensor *g = blob(n, "tokenizer/gguf");
    const struct nb_nib_tensor *tj = blob(n, "tokenizer/tokenizer.json");
    const struct nb_nib_tensor *tm = blob(n, "tokenizer/tokenizer.model");
    const struct nb_nib_tensor *tc = blob(n, "tokenizer/tokenizer_config.json");
    const struct nb_nib_tensor *tl = blob(n, "tokenizer/llama2c.bin");
    char name[8400], cname[8400];
    embedded_name(n, model_path, "tokenizer_config.json", "tokenizer_config.json", cname,
                  sizeof cname);
    if (g) {
        struct nb_gguf *gg = NULL;
        embedded_name(n, model_path, "GGUF tokenizer metadata", NULL, name, sizeof name);
        if ((st = nb_gguf_parse(&gg, g->data, g->size, name)) == NB_OK) {
            st = nb_tokenizer_load_gguf(out, gg);
            nb_gguf_free(gg);
        }
    } else if (tj) {
        embedded_name(n, model_path, "tokenizer.json", "tokenizer.json", name, sizeof name);
        st = nb_tokenizer_load_hf_json_cfg(out, tj->data, tj->size, name, tc ? tc->data : NULL,
                                           tc ? tc->size : 0, cname);
    } else if (tm) {
        embedded_name(n, model_path, "tokenizer.model", "tokenizer.model", name, sizeof name);
        st = nb_tokenizer_load_spm_model_cfg(out, tm->data, tm->size, name, tc ? tc->data : NULL,
                                             tc ? tc->size : 0, cname);
    } else if (tl) {
        embedded_name(n, model_path, "llama2.c tokenizer", NULL, name, sizeof name);
        st = nb_tokenizer_load_llama2c_mem(out, tl->data, tl->size, name, 0);
    } else {
        st = nb_set_error(NB_ERR_NOT_FOUND,
                          "%s: this .nib holds no tokenizer (no tokenizer/* blob: its source "
                          "had no tokenizer files)",
                          model_path);
    }
    return st;
}
