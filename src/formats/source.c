/* formats/source.c — a model given by path, opened and classified once. */
#include "formats/source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "formats/json.h"
#include "formats/llama2c.h"
#include "formats/nib.h"

/* The one place a model's kind is decided: from its first bytes, never its name. */
static enum nb_file_kind sniff(const void *data, size_t size)
{
    if (size >= 8 && !memcmp(data, NB_NIB_MAGIC, 8)) return NB_FILE_NIB;
    if (size >= 4 && !memcmp(data, "GGUF", 4)) return NB_FILE_GGUF;
    if (nb_llama2c_sniff(data, size)) return NB_FILE_LLAMA2C;
    return NB_FILE_UNKNOWN;
}

static enum nb_status alloc_source(struct nb_source **out, const char *path)
{
    struct nb_source *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return nb_set_error(NB_ERR_NOMEM, "out of memory");
    }
    s->refs = 1;
    *out = s;
    return NB_OK;
}

/* Parse the header of a mapped file of a known kind (the views borrow the mapping). */
static enum nb_status parse(struct nb_source *s)
{
    const void *d = s->file.data;
    size_t n = s->file.size;
    switch (s->kind) {
    case NB_FILE_GGUF: return nb_gguf_parse(&s->gguf, d, n, s->path);
    case NB_FILE_NIB: return nb_nib_parse(&s->nib, d, n, s->path);
    case NB_FILE_LLAMA2C: return nb_llama2c_parse(&s->l2c, d, n, s->path);
    default: return NB_OK;
    }
}

enum nb_status nb_source_open(struct nb_source **out, const char *path)
{
    struct nb_source *s = NULL;
    struct stat sb;
    enum nb_status st;
    *out = NULL;
    if (!path || !*path) return nb_set_error(NB_ERR_INVALID_ARG, "no model path given");
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return nb_set_error(NB_ERR_NOT_FOUND, "%s: no such file", path);
        return nb_set_error(NB_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if ((st = alloc_source(&s, path))) return st;
    if (S_ISDIR(sb.st_mode)) {
        s->kind = NB_FILE_DIR;
        *out = s;
        return NB_OK;
    }
    int fd = -1;
    if ((st = nb_file_open(path, &fd))) goto fail;
    if (!(st = nb_file_map_fd(&s->file, fd, path))) {
        s->kind = s->file.data ? sniff(s->file.data, s->file.size) : NB_FILE_UNKNOWN;
        /* a .nib's weights run where they lie: into huge pages (core/mmap.h) */
        if (s->kind == NB_FILE_NIB) st = nb_file_copy_fd(&s->file, fd);
    }
    close(fd);
    if (st || (st = parse(s))) goto fail;
    *out = s;
    return NB_OK;
fail:
    nb_source_free(s);
    return st;
}

enum nb_status nb_source_from_nib(struct nb_source **out, struct nb_nib *nib, int verified)
{
    *out = NULL;
    enum nb_status st = alloc_source(out, nb_nib_path(nib));
    if (st) {
        nb_nib_free(nib);
        return st;
    }
    (*out)->kind = NB_FILE_NIB;
    (*out)->nib = nib;
    (*out)->verified = verified;
    return NB_OK;
}

struct nb_source *nb_source_ref(struct nb_source *s)
{
    s->refs++;
    return s;
}

void nb_source_free(struct nb_source *s)
{
    if (!s || --s->refs > 0) return;
    nb_gguf_free(s->gguf);
    nb_nib_free(s->nib);
    nb_llama2c_free(s->l2c);
    cJSON_Delete(s->config);
    nb_file_unmap(&s->file);
    free(s->path);
    free(s);
}

enum nb_status nb_source_verify(struct nb_source *s)
{
    if (s->kind != NB_FILE_NIB || s->verified) return NB_OK;
    enum nb_status st = nb_nib_verify(s->nib);
    s->verified = st == NB_OK;
    return st;
}

enum nb_status nb_source_config(struct nb_source *s, const cJSON **out)
{
    *out = NULL;
    if (s->kind != NB_FILE_DIR)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: not a model directory", s->path);
    if (!s->config) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s/config.json", s->path) >= (int)sizeof p)
            return nb_set_error(NB_ERR_INVALID_ARG, "%s: path too long", s->path);
        enum nb_status st = nb_json_load(p, &s->config);
        if (st) return st;
    }
    *out = s->config;
    return NB_OK;
}

const char *nb_file_kind_name(enum nb_file_kind k)
{
    switch (k) {
    case NB_FILE_DIR: return "directory";
    case NB_FILE_GGUF: return "gguf";
    case NB_FILE_NIB: return "nib";
    case NB_FILE_LLAMA2C: return "llama2c";
    default: return "unknown";
    }
}
