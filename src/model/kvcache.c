/* model/kvcache.c — the paged KV cache: block pools, block tables, reference counts
 * (see kvcache.h). */
#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define B NB_KV_BLOCK

static int blocks_for(int64_t tokens) { return (int)((tokens + B - 1) / B); }

static int32_t *slot_of(struct nb_kv_group *g, int seq, int i)
{
    return &g->table[(int64_t)seq * g->max_blocks + i];
}

static int32_t take(struct nb_kv_group *g)
{
    int32_t b = g->free[--g->n_free];
    g->ref[b] = 1;
    int used = g->n_blocks - g->n_free;
    if (used > g->peak_used) g->peak_used = used;
    return b;
}

/* Drop one holder of the block in *slot (if any) and empty the slot. */
static void put(struct nb_kv_group *g, int32_t *slot)
{
    int32_t b = *slot;
    *slot = -1;
    if (b < 0) return;
    if (--g->ref[b] == 0) g->free[g->n_free++] = b; /* reused first: its pages are warm */
}

static enum nb_status group_init(struct nb_kv_group *g, int n_seq, int max_blocks, int n_blocks)
{
    g->max_blocks = max_blocks;
    g->n_blocks = n_blocks;
    g->n_free = n_blocks;
    g->free = malloc(sizeof(int32_t) * (size_t)(n_blocks ? n_blocks : 1));
    g->ref = calloc((size_t)(n_blocks ? n_blocks : 1), sizeof(int32_t));
    g->table = malloc(sizeof(int32_t) * (size_t)n_seq * (size_t)max_blocks);
    if (!g->free || !g->ref || !g->table) return nb_set_error(NB_ERR_NOMEM, "KV cache: out of memory");
    for (int i = 0; i < n_blocks; i++) g->free[i] = n_blocks - 1 - i; /* block 0 first */
    for (int64_t i = 0; i < (int64_t)n_seq * max_blocks; i++) g->table[i] = -1;
    return NB_OK;
}

/* A window layer is worth its own pool only when its window is shorter than the
 * context (with a chunk's worth of keys written at once). */
static int in_window_pool(const struct nb_config *cfg, int l, int n_ctx, int n_batch)
{
    return cfg->layer_sliding[l] && cfg->sliding_window > 0 &&
           cfg->sliding_window + n_batch - 1 + B < n_ctx;
}

void nb_kv_plan(const struct nb_config *cfg, int type, int n_seq, int n_ctx, int64_t n_total,
                int n_batch, struct nb_kv_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    for (int l = 0; l < cfg->n_layers; l++)
        plan->n_layers[in_window_pool(cfg, l, n_ctx, n_batch) ? NB_KV_SWA : NB_KV_FULL]++;
    plan->max_blocks = blocks_for(n_ctx);
    int64_t all = (int64_t)n_seq * plan->max_blocks;
    int64_t full = n_total > 0 ? blocks_for(n_total) : all;
    int64_t swa = (int64_t)n_seq * (blocks_for(cfg->sliding_window + n_batch - 1) + 1);
    plan->n_blocks[NB_KV_FULL] = plan->n_layers[NB_KV_FULL] ? (full < all ? full : all) : 0;
    plan->n_blocks[NB_KV_SWA] = plan->n_layers[NB_KV_SWA] ? (swa < all ? swa : all) : 0;
    plan->row_bytes = NB_KV_ROW_BYTES(type, (int64_t)cfg->n_kv_heads * cfg->head_dim);
    for (int gi = 0; gi < NB_KV_GROUPS; gi++)
        plan->bytes += 2 * plan->n_blocks[gi] * B * plan->row_bytes * plan->n_layers[gi];
    plan->flat_bytes = 2 * (int64_t)n_seq * n_ctx * plan->row_bytes * cfg->n_layers;
}

enum nb_status nb_kv_init(struct nb_kv *kv, const struct nb_config *cfg, int type, int n_seq,
                          int n_ctx, int64_t n_total, int n_batch)
{
    memset(kv, 0, sizeof *kv);
    if (type == NB_KVE_Q8_0 && cfg->head_dim % 32)
        return nb_set_error(NB_ERR_INVALID_ARG, "KV cache: q8_0 needs a head size that is a "
                            "multiple of 32 (this model's: %d); use f16", cfg->head_dim);
    struct nb_kv_plan plan;
    nb_kv_plan(cfg, type, n_seq, n_ctx, n_total, n_batch, &plan);
    kv->type = type;
    kv->n_layers = cfg->n_layers;
    kv->n_seq = n_seq;
    kv->n_ctx = n_ctx;
    kv->n_batch = n_batch;
    kv->window = cfg->sliding_window;
    kv->kv_dim = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    kv->n_kv_heads = cfg->n_kv_heads;
    kv->row_bytes = plan.row_bytes;
    kv->group_of = calloc((size_t)cfg->n_layers, 1);
    kv->k = calloc((size_t)cfg->n_layers, sizeof(void *));
    kv->v = calloc((size_t)cfg->n_layers, sizeof(void *));
    kv->len = calloc((size_t)n_seq, sizeof(int));
    if (!kv->group_of || !kv->k || !kv->v || !kv->len)
        return nb_set_error(NB_ERR_NOMEM, "KV cache: out of memory");
    for (int l = 0; l < cfg->n_layers; l++)
        kv->group_of[l] = (int8_t)(in_window_pool(cfg, l, n_ctx, n_batch) ? NB_KV_SWA : NB_KV_FULL);
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) {
        struct nb_kv_group *g = &kv->g[gi];
        g->n_layers = plan.n_layers[gi];
        if (plan.n_blocks[gi] > INT32_MAX)
            return nb_set_error(NB_ERR_INVALID_ARG, "KV cache: %lld blocks is too many",
                                (long long)plan.n_blocks[gi]);
        enum nb_status st = group_init(g, n_seq, plan.max_blocks, (int)plan.n_blocks[gi]);
        if (st) return st;
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        /* calloc: the kernel maps the pages on first write, so a large pool's untouched
         * blocks cost no memory */
        size_t rows = (size_t)kv->g[kv->group_of[l]].n_blocks * B;
        kv->k[l] = calloc(rows, (size_t)kv->row_bytes);
        kv->v[l] = calloc(rows, (size_t)kv->row_bytes);
        if (!kv->k[l] || !kv->v[l])
            return nb_set_error(NB_ERR_NOMEM, "KV cache: out of memory for %zu tokens x %d "
                                "layers", rows, cfg->n_layers);
    }
    return NB_OK;
}

void nb_kv_free(struct nb_kv *kv)
{
    if (kv->k)
        for (int l = 0; l < kv->n_layers; l++) {
            free(kv->k[l]);
            free(kv->v[l]);
        }
    free(kv->k);
    free(kv->v);
    free(kv->group_of);
    free(kv->len);
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) {
        free(kv->g[gi].free);
        free(kv->g[gi].ref);
        free(kv->g[gi].table);
    }
    memset(kv, 0, sizeof *kv);
}

static int64_t group_row_bytes(const struct nb_kv *kv, int gi)
{
    return 2 * (int64_t)B * kv->row_bytes * kv->g[gi].n_layers;
}

int64_t nb_kv_bytes_reserved(const struct nb_kv *kv)
{
    int64_t n = 0;
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) n += group_row_bytes(kv, gi) * kv->g[gi].n_blocks;
    return n;
}

int64_t nb_kv_bytes_used(const struct nb_kv *kv)
{
    int64_t n = 0;
    for (int gi = 0; gi < NB_KV_GROUPS; gi++)
        n += group_row_bytes(kv, gi) * (kv->g[gi].n_blocks - kv->g[gi].n_free);
    return n;
}

/* Blocks that making [from, to) of seq writable in group gi takes. */
static int blocks_needed(struct nb_kv *kv, int gi, int seq, int from, int to)
{
    struct nb_kv_group *g = &kv->g[gi];
    int n = 0;
    for (int i = from >> NB_KV_BLOCK_SHIFT; i <= (to - 1) >> NB_KV_BLOCK_SHIFT; i++) {
        int32_t b = *slot_of(g, seq, i);
        n += b < 0 || g->ref[b] > 1;
    }
    return n;
}

/* Make [from, to) of seq writable in group gi; the blocks are there (counted before). */
static void make_writable(struct nb_kv *kv, int gi, int seq, int from, int to)
{
    struct nb_kv_group *g = &kv->g[gi];
    int64_t hb = nb_kv_head_bytes(kv, kv->n_kv_heads);
    size_t bytes = (size_t)B * (size_t)hb; /* one head's rows of a block */
    for (int i = from >> NB_KV_BLOCK_SHIFT; i <= (to - 1) >> NB_KV_BLOCK_SHIFT; i++) {
        int32_t *slot = slot_of(g, seq, i), old = *slot;
        if (old >= 0 && g->ref[old] == 1) continue;
        int32_t b = take(g);
        if (old >= 0) { /* shared: copy what the others see, then write our own */
            for (int l = 0; l < kv->n_layers; l++) {
                if (kv->group_of[l] != gi) continue;
                for (int h = 0; h < kv->n_kv_heads; h++) {
                    size_t base = (size_t)(h * nb_kv_head_pool(kv, l, hb));
                    size_t at = base + (size_t)b * bytes, from_at = base + (size_t)old * bytes;
                    memcpy((char *)kv->k[l] + at, (char *)kv->k[l] + from_at, bytes);
                    memcpy((char *)kv->v[l] + at, (char *)kv->v[l] + from_at, bytes);
                }
            }
            g->ref[old]--;
        }
        *slot = b;
    }
}

static enum nb_status pool_full(const struct nb_kv *kv, int gi, int need)
{
    const struct nb_kv_group *g = &kv->g[gi];
    return nb_set_error(NB_ERR_RANGE, "KV cache full: %d more blocks of %d tokens needed, %d of "
                        "%d free (%s pool of %lld tokens)", need, B, g->n_free, g->n_blocks,
                        gi == NB_KV_FULL ? "the" : "the sliding-window layers'",
                        (long long)g->n_blocks * B);
}

enum nb_status nb_kv_reserve_full(struct nb_kv *kv, const int *n_new)
{
    struct nb_kv_group *g = &kv->g[NB_KV_FULL];
    if (!g->n_layers) return NB_OK;
    int need = 0;
    for (int s = 0; s < kv->n_seq; s++)
        if (n_new[s] > 0) need += blocks_needed(kv, NB_KV_FULL, s, kv->len[s], kv->len[s] + n_new[s]);
    if (need > g->n_free) return pool_full(kv, NB_KV_FULL, need);
    for (int s = 0; s < kv->n_seq; s++)
        if (n_new[s] > 0) make_writable(kv, NB_KV_FULL, s, kv->len[s], kv->len[s] + n_new[s]);
    return NB_OK;
}

enum nb_status nb_kv_reserve_swa(struct nb_kv *kv, int seq, int from, int to)
{
    struct nb_kv_group *g = &kv->g[NB_KV_SWA];
    if (!g->n_layers || to <= from) return NB_OK;
    int need = blocks_needed(kv, NB_KV_SWA, seq, from, to);
    if (need > g->n_free) return pool_full(kv, NB_KV_SWA, need);
    make_writable(kv, NB_KV_SWA, seq, from, to);
    return NB_OK;
}

void nb_kv_trim_window(struct nb_kv *kv, int seq)
{
    struct nb_kv_group *g = &kv->g[NB_KV_SWA];
    if (!g->n_layers) return;
    /* the next position, len, reads keys from len - window + 1 on */
    int lo = kv->len[seq] - kv->window + 1;
    for (int i = 0; (i + 1) * B <= lo; i++) put(g, slot_of(g, seq, i));
}

/* Return every block of seq from block index i0 on, in every group. */
static void release_from(struct nb_kv *kv, int seq, int i0)
{
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) {
        struct nb_kv_group *g = &kv->g[gi];
        if (!g->n_layers) continue;
        for (int i = i0; i < g->max_blocks; i++) put(g, slot_of(g, seq, i));
    }
}

void nb_kv_clear(struct nb_kv *kv, int seq)
{
    if (seq < 0 || seq >= kv->n_seq) return;
    release_from(kv, seq, 0);
    kv->len[seq] = 0;
}

/* NB_ERR_RANGE when a window layer of seq no longer holds the keys position n reads. */
static enum nb_status window_holds(struct nb_kv *kv, int seq, int n, const char *what)
{
    struct nb_kv_group *g = &kv->g[NB_KV_SWA];
    if (!g->n_layers || n == 0) return NB_OK;
    int first = 0;
    while (first < g->max_blocks && *slot_of(g, seq, first) < 0) first++;
    if (first > 0 && n - kv->window + 1 < first * B)
        return nb_set_error(NB_ERR_RANGE, "%s: the sliding-window layers no longer hold the keys "
                            "position %d needs (they keep positions %d on)", what, n, first * B);
    return NB_OK;
}

enum nb_status nb_kv_truncate(struct nb_kv *kv, int seq, int n)
{
    enum nb_status st = window_holds(kv, seq, n, "truncate");
    if (st) return st;
    release_from(kv, seq, blocks_for(n));
    kv->len[seq] = n;
    return NB_OK;
}

enum nb_status nb_kv_fork(struct nb_kv *kv, int src, int dst, int n)
{
    enum nb_status st = window_holds(kv, src, n, "fork");
    if (st) return st;
    nb_kv_clear(kv, dst);
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) {
        struct nb_kv_group *g = &kv->g[gi];
        if (!g->n_layers) continue;
        for (int i = 0; i < blocks_for(n); i++) {
            int32_t b = *slot_of(g, src, i);
            *slot_of(g, dst, i) = b;
            if (b >= 0) g->ref[b]++;
        }
    }
    kv->len[dst] = n;
    nb_kv_trim_window(kv, dst);
    return NB_OK;
}
