/* model/kvcache.h — the paged KV cache (internal to model/; docs/kv-cache.md).
 *
 * Keys and values live in pools of fixed-size blocks (NB_KV_BLOCK tokens; a layer's
 * pool head-major: nb_kv_at), one pool per layer group: the full-attention layers share one block table per sequence, the
 * sliding-window layers another (a hybrid model's window layers drop the blocks that
 * fall out of their window, so they hold a few blocks per sequence however long it
 * gets). Block b of layer l holds rows [b * NB_KV_BLOCK, (b + 1) * NB_KV_BLOCK) of that
 * layer's storage, each row n_kv_heads * head_dim values of the cache's element type
 * (f32, f16, bf16 or q8_0: kernels.h, enum nb_kv_elem).
 *
 * Blocks are taken on demand, lowest free id first (a pool's untouched tail is never
 * written, so it costs address space, not memory: RssAnon grows with the tokens held),
 * and returned when a sequence is cleared or truncated. A block may be held by several
 * sequences (nb_kv_fork: a shared prompt); it carries a reference count, and a sequence
 * about to write into a block it shares first copies it (copy-on-write).
 */
#ifndef NB_MODEL_KVCACHE_H
#define NB_MODEL_KVCACHE_H

#include <stdint.h>

#include "core/error.h"
#include "model/model.h"

#define NB_KV_BLOCK_SHIFT 5
#define NB_KV_BLOCK       (1 << NB_KV_BLOCK_SHIFT)

enum { NB_KV_FULL, NB_KV_SWA, NB_KV_GROUPS };

struct nb_kv_group {
    int n_layers;   /* layers in the group (0: the group is unused) */
    int n_blocks;   /* blocks in its pool */
    int n_free;
    int32_t *free;  /* stack of free ids: free[n_free - 1] is taken next */
    int32_t *ref;   /* [n_blocks]: sequences holding the block */
    int32_t *table; /* [n_seq][max_blocks]: the block of positions [i*B, (i+1)*B), or -1 */
    int max_blocks; /* per sequence: ceil(n_ctx / B) */
    int peak_used;  /* most blocks ever in use at once */
};

struct nb_kv {
    struct nb_kv_group g[NB_KV_GROUPS];
    int8_t *group_of;   /* [n_layers]: NB_KV_FULL or NB_KV_SWA */
    void **k, **v;      /* [n_layers]: the layer's pool, [n_blocks][B] rows */
    int64_t kv_dim;
    int n_kv_heads;
    int type;           /* enum nb_kv_elem (kernels.h) */
    int64_t row_bytes;  /* one row: kv_dim values of `type` */
    int n_layers, n_seq, n_ctx, window, n_batch;
    int *len; /* [n_seq]: tokens held (the next position) */
};

/* What nb_kv_init allocates for these parameters: blocks and layers per group, and the
 * bytes of the pools (`bytes`; all of it in use once every sequence is full) against a
 * cache where every layer holds every token (`flat_bytes`). */
struct nb_kv_plan {
    int max_blocks;
    int64_t n_blocks[NB_KV_GROUPS];
    int n_layers[NB_KV_GROUPS];
    int64_t row_bytes, bytes, flat_bytes;
};
void nb_kv_plan(const struct nb_config *cfg, int type, int n_seq, int n_ctx, int64_t n_total,
                int n_batch, struct nb_kv_plan *plan);

/* Pools for n_seq sequences of up to n_ctx tokens each, n_total tokens in all in the
 * full-attention pool (0: n_seq * n_ctx). Sliding-window layers get what their
 * windows need (window + n_batch tokens a sequence, rounded up to blocks). */
enum nb_status nb_kv_init(struct nb_kv *kv, const struct nb_config *cfg, int type, int n_seq,
                          int n_ctx, int64_t n_total, int n_batch);
void nb_kv_free(struct nb_kv *kv);
/* Bytes of address space the pools reserve, and bytes of the blocks in use now. */
int64_t nb_kv_bytes_reserved(const struct nb_kv *kv);
int64_t nb_kv_bytes_used(const struct nb_kv *kv);

/* Make positions [len, len + n) of seq writable in every group: blocks taken, a shared
 * block copied. Nothing changes when the pool cannot hold them (NB_ERR_RANGE, with a
 * message naming the pool). `n_new` is per sequence (n_seq entries) for a whole batch;
 * the window layers' blocks are reserved one chunk at a time (nb_kv_reserve_swa), after
 * the ones that fell out of the window were returned. */
enum nb_status nb_kv_reserve_full(struct nb_kv *kv, const int *n_new);
enum nb_status nb_kv_reserve_swa(struct nb_kv *kv, int seq, int from, int to);
/* Return the window layers' blocks that no position >= len can read again. */
void nb_kv_trim_window(struct nb_kv *kv, int seq);

/* The block table of seq in layer's group. */
static inline const int32_t *nb_kv_table(const struct nb_kv *kv, int layer, int seq)
{
    const struct nb_kv_group *g = &kv->g[kv->group_of[layer]];
    return g->table + (int64_t)seq * g->max_blocks;
}
/* A layer's pool is head-major: KV head h's rows of every block lie together, block
 * after block ([kv head][block][B rows][head_dim]), so the keys of one head of a sequence
 * whose blocks were taken in order are one run of memory, which the prefetchers follow.
 * (Token-major rows put 2 KB between two keys of a head on the 1.7 B shape, and
 * head-major blocks alone left 8 KB runs: decode at depth was latency-bound.) */
static inline int64_t nb_kv_head_bytes(const struct nb_kv *kv, int n_kv_heads)
{
    return kv->row_bytes / n_kv_heads;
}
/* Bytes of one head's part of a layer's pool (n_blocks blocks of its group). */
static inline int64_t nb_kv_head_pool(const struct nb_kv *kv, int layer, int64_t head_bytes)
{
    return (int64_t)kv->g[kv->group_of[layer]].n_blocks * NB_KV_BLOCK * head_bytes;
}
/* Byte offset of (seq, pos, kv head h) in layer's pool. */
static inline int64_t nb_kv_at(const struct nb_kv *kv, int layer, int seq, int pos, int h,
                               int64_t head_bytes)
{
    int32_t b = nb_kv_table(kv, layer, seq)[pos >> NB_KV_BLOCK_SHIFT];
    return h * nb_kv_head_pool(kv, layer, head_bytes) +
           ((int64_t)b * NB_KV_BLOCK + (pos & (NB_KV_BLOCK - 1))) * head_bytes;
}

void nb_kv_clear(struct nb_kv *kv, int seq);
/* Keep the first n tokens of seq (NB_ERR_RANGE when a window layer has returned a block
 * position n still needs). */
enum nb_status nb_kv_truncate(struct nb_kv *kv, int seq, int n);
/* dst becomes the first n tokens of src, sharing its blocks (dst's own are returned). */
enum nb_status nb_kv_fork(struct nb_kv *kv, int src, int dst, int n);

#endif
