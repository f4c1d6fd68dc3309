/* core/arena.h — a bump allocator for buffers that live as long as their owner
 * (model, context). Allocations are 64-byte aligned and zeroed; freed all at once. */
#ifndef NB_CORE_ARENA_H
#define NB_CORE_ARENA_H

#include <stddef.h>

struct nb_arena_block;
struct nb_arena {
    struct nb_arena_block *head;
    size_t block_size; /* default size of a new block */
    size_t used_total; /* bytes handed out */
};

void nb_arena_init(struct nb_arena *a, size_t block_size);
/* NULL when out of memory or on overflow (sets nb_last_error). */
void *nb_arena_alloc(struct nb_arena *a, size_t size);
char *nb_arena_strdup(struct nb_arena *a, const char *s);
void nb_arena_free(struct nb_arena *a);

#endif
