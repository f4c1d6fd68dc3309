/* core/strindex.h — find a name among n names in O(1): the tensor and key tables of
 * every file format (GGUF, safetensors, .nib).
 *
 * An open-addressing table of indices (at least 2n slots, linear probing) over strings
 * the caller keeps; the hash is XXH3 with a per-process random seed, so a hostile file
 * cannot choose names that all collide. Building it finds repeated names, which every
 * format treats as an error. */
#ifndef NB_CORE_STRINDEX_H
#define NB_CORE_STRINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Name i of the caller's table. */
typedef const char *(*nb_name_at)(const void *table, int64_t i);

struct nb_strindex {
    int64_t *slots; /* index + 1; 0 = empty */
    size_t mask;
};

/* Index names 0..n-1. A repeated name gives NB_ERR_FORMAT with *first and *second set
 * to its two entries (the message is generic: callers name the file). */
enum nb_status nb_strindex_build(struct nb_strindex *ix, int64_t n, nb_name_at get,
                                 const void *table, int64_t *first, int64_t *second);
/* The entry named `s`, or -1. */
int64_t nb_strindex_find(const struct nb_strindex *ix, nb_name_at get, const void *table,
                         const char *s);
void nb_strindex_free(struct nb_strindex *ix);

#endif
