/* core/arena.c — bump allocator with 64-byte aligned, zeroed allocations. */
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define NB_ARENA_ALIGN 64

struct nb_arena_block {
    struct nb_arena_block *next;
    size_t cap, used;
    unsigned char *mem; /* aligned start */
};

void nb_arena_init(struct nb_arena *a, size_t block_size)
{
    a->head = NULL;
    a->block_size = block_size ? block_size : (1u << 20);
    a->used_total = 0;
}

void *nb_arena_alloc(struct nb_arena *a, size_t size)
{
    if (size > (SIZE_MAX / 2)) {
        nb_set_error(NB_ERR_NOMEM, "arena: allocation of %zu bytes is too large", size);
        return NULL;
    }
    size_t need = (size + NB_ARENA_ALIGN - 1) & ~(size_t)(NB_ARENA_ALIGN - 1);
    if (need == 0) need = NB_ARENA_ALIGN;
    struct nb_arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > a->block_size ? need : a->block_size;
        b = NULL;
        void *mem = NULL;
        if (posix_memalign(&mem, NB_ARENA_ALIGN, cap) != 0) goto oom;
        b = malloc(sizeof *b);
        if (!b) {
            free(mem);
            goto oom;
        }
        b->mem = mem;
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->mem + b->used;
    b->used += need;
    a->used_total += need;
    memset(p, 0, size);
    return p;
oom:
    nb_set_error(NB_ERR_NOMEM, "arena: out of memory allocating %zu bytes", size);
    return NULL;
}

char *nb_arena_strdup(struct nb_arena *a, const char *s)
{
    size_t n = strlen(s);
    char *p = nb_arena_alloc(a, n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

void nb_arena_free(struct nb_arena *a)
{
    struct nb_arena_block *b = a->head;
    while (b) {
        struct nb_arena_block *n = b->next;
        free(b->mem);
        free(b);
        b = n;
    }
    a->head = NULL;
    a->used_total = 0;
}
