/* runtime/source_hash.c — a content hash of a model source (file or directory). */
#include "runtime/source_hash.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "core/mmap.h"

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

enum nb_status nb_source_hash(const char *path, uint64_t *out)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return nb_set_error(NB_ERR_IO, "%s: cannot stat", path);
    XXH3_state_t *s = XXH3_createState();
    if (!s) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    XXH3_64bits_reset(s);
    enum nb_status st = NB_OK;
    if (!S_ISDIR(sb.st_mode)) {
        st = hash_file(s, path);
    } else {
        DIR *d = opendir(path);
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        if (!d) {
            XXH3_freeState(s);
            return nb_set_error(NB_ERR_IO, "%s: cannot list", path);
        }
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 32;
                char **nn = realloc(names, cap * sizeof *nn);
                if (!nn) break;
                names = nn;
            }
            names[n] = strdup(e->d_name);
            if (names[n]) n++;
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && st == NB_OK; i++) {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", path, names[i]);
            if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
                XXH3_64bits_update(s, names[i], strlen(names[i]) + 1);
                st = hash_file(s, full);
            }
        }
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
    }
    *out = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return st;
}
