/* core/strindex.c — open-addressing name index (see strindex.h). */
#include "core/strindex.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <xxhash.h>

static uint64_t seed(void)
{
    static uint64_t s; /* 0 until drawn; a race draws twice and keeps one: harmless */
    uint64_t v = __atomic_load_n(&s, __ATOMIC_RELAXED);
    if (v) return v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
    v |= 1;
    __atomic_store_n(&s, v, __ATOMIC_RELAXED);
    return v;
}

static size_t hash(const char *s, size_t mask)
{
    return (size_t)XXH3_64bits_withSeed(s, strlen(s), seed()) & mask;
}

enum nb_status nb_strindex_build(struct nb_strindex *ix, int64_t n, nb_name_at get,
                                 const void *table, int64_t *first, int64_t *second)
{
    memset(ix, 0, sizeof *ix);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    ix->slots = calloc(cap, sizeof *ix->slots);
    if (!ix->slots) return nb_set_error(NB_ERR_NOMEM, "out of memory indexing %lld names",
                                        (long long)n);
    ix->mask = cap - 1;
    for (int64_t i = 0; i < n; i++) {
        const char *s = get(table, i);
        size_t h = hash(s, ix->mask);
        while (ix->slots[h]) {
            if (strcmp(get(table, ix->slots[h] - 1), s) == 0) {
                if (first) *first = ix->slots[h] - 1;
                if (second) *second = i;
                nb_strindex_free(ix);
                return nb_set_error(NB_ERR_FORMAT, "name '%s' appears twice", s);
            }
            h = (h + 1) & ix->mask;
        }
        ix->slots[h] = i + 1;
    }
    return NB_OK;
}

int64_t nb_strindex_find(const struct nb_strindex *ix, nb_name_at get, const void *table,
                         const char *s)
{
    if (!ix->slots || !s) return -1;
    size_t h = hash(s, ix->mask);
    while (ix->slots[h]) {
        if (strcmp(get(table, ix->slots[h] - 1), s) == 0) return ix->slots[h] - 1;
        h = (h + 1) & ix->mask;
    }
    return -1;
}

void nb_strindex_free(struct nb_strindex *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}
