/* runtime/source_hash.c — a content hash of a model source (file or directory). */
#include "runtime/source_hash.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "core/mmap.h"
#include "formats/source.h"

static enum nb_status hash_file(XXH3_state_t *s, const char *path)
{
    struct nb_mapped_file f;
    enum nb_status st = nb_file_map(&f, path);
    if (st) return st;
    if (f.size) XXH3_64bits_update(s, f.data, f.size);
    nb_file_unmap(&f);
    return NB_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory `path` (no dot files), malloc'd, in name order. */
static enum nb_status list_dir(const char *path, char ***out, size_t *n_out)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    enum nb_status st = NB_OK;
    struct dirent *e;
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(path);
    if (!d) return nb_set_error(NB_ERR_IO, "%s: cannot list: %s", path, strerror(errno));
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory listing the directory", path);
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory listing the directory", path);
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str); /* names is NULL when n == 0 */
    if (st) {
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return st;
    }
    *out = names;
    *n_out = n;
    return NB_OK;
}

static enum nb_status hash_dir(XXH3_state_t *s, const char *path)
{
    char **names;
    size_t n;
    int n_files = 0, has_config = 0;
    enum nb_status st = list_dir(path, &names, &n);
    if (st) return st;
    for (size_t i = 0; i < n && st == NB_OK; i++) {
        char full[4096];
        struct stat sb;
        if (snprintf(full, sizeof full, "%s/%s", path, names[i]) >= (int)sizeof full) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s/%s: path too long", path, names[i]);
        } else if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
            XXH3_64bits_update(s, names[i], strlen(names[i]) + 1);
            st = hash_file(s, full);
            n_files++;
            has_config |= !strcmp(names[i], "config.json");
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st) return st;
    /* A model directory is config.json + *.safetensors (+ tokenizer files): say so
     * here, before anyone tries to quantize or cache what is not a model. */
    if (n_files == 0)
        return nb_set_error(NB_ERR_NOT_FOUND,
                            "%s: the directory holds no model files (a model directory has "
                            "config.json and *.safetensors)",
                            path);
    if (!has_config)
        return nb_set_error(NB_ERR_NOT_FOUND,
                            "%s: the directory has no config.json (a model directory has "
                            "config.json and *.safetensors)",
                            path);
    return NB_OK;
}

static enum nb_status hash_path(const char *path, int dir, uint64_t *out)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    XXH3_64bits_reset(s);
    enum nb_status st = dir ? hash_dir(s, path) : hash_file(s, path);
    if (st == NB_OK) *out = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return st;
}

enum nb_status nb_source_hash(const struct nb_source *src, uint64_t *out)
{
    if (src->kind == NB_FILE_DIR) return hash_path(src->path, 1, out);
    if (!src->file.data && src->kind == NB_FILE_NIB) /* handed over with its own mapping */
        return hash_path(src->path, 0, out);
    *out = XXH3_64bits(src->file.data, src->file.size); /* the one mapping, read again */
    return NB_OK;
}

enum nb_status nb_file_hash(const char *path, uint64_t *out)
{
    return hash_path(path, 0, out);
}
