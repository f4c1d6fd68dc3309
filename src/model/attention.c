/* model/attention.c — RoPE, the KV-cache store and attention, over a chunk of tokens
 * that may belong to several sequences.
 *
 * The cache is paged (kvcache.h): the key of position p of sequence s in layer l sits
 * in row nb_kv_row(kv, l, s, p) of the layer's pool, found through the sequence's block
 * table; nb_decode has made every position of the chunk writable before it runs.
 *
 * Decode (one token per sequence) walks the cache with a dot per key per head; a
 * prefill chunk runs in tiles (kernels' attn_tile) that read each K / V row once for
 * all the q heads of a GQA group and a block of tokens.
 */
#include <math.h>
#include <string.h>

#include "model/context.h"

void nb_rope_tables(struct nb_ctx *c, const int32_t *pos, int n_tok)
{
    const struct nb_model *m = c->model;
    float *cs = c->rope_cs;
    int half = m->cfg.head_dim / 2;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)pos[t] * (double)m->rope_inv_freq[i];
            cs[(int64_t)t * 2 * half + 2 * i] = (float)cos(a);
            cs[(int64_t)t * 2 * half + 2 * i + 1] = (float)sin(a);
        }
}

static void rope_apply(float *v, const float *cs, int hd, enum nb_rope_pairing pairing)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        int a = pairing == NB_ROPE_HALF ? i : 2 * i;
        int b = pairing == NB_ROPE_HALF ? i + half : 2 * i + 1;
        float va = v[a], vb = v[b];
        v[a] = va * c - vb * s;
        v[b] = va * s + vb * c;
    }
}

/* q/k norms, RoPE and the KV-cache store for tokens split over the threads. */
struct rope_job {
    struct nb_ctx *c;
    int layer, n;
    const int32_t *pos, *seq;
};

static void rope_worker(void *arg, int ith, int nth)
{
    const struct rope_job *j = arg;
    struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_layer *L = &c->model->layers[j->layer];
    int64_t hd = cfg->head_dim, H = cfg->n_heads;
    int64_t q_dim = H * hd, kv_dim = (int64_t)cfg->n_kv_heads * hd;
    int l = j->layer;
    long t0, t1;
    nb_split_range(j->n, ith, nth, 1, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        const float *cs = c->rope_cs + t * hd;
        for (int64_t h = 0; h < H; h++) {
            float *qh = c->q + t * q_dim + h * hd;
            if (L->q_norm) c->kern->rmsnorm(qh, qh, L->q_norm, hd, cfg->norm_eps);
            rope_apply(qh, cs, (int)hd, cfg->rope_pairing);
        }
        for (int64_t h = 0; h < cfg->n_kv_heads; h++) {
            float *kh = c->k + t * kv_dim + h * hd;
            if (L->k_norm) c->kern->rmsnorm(kh, kh, L->k_norm, hd, cfg->norm_eps);
            rope_apply(kh, cs, (int)hd, cfg->rope_pairing);
        }
        int64_t at = nb_kv_row(&c->kv, l, j->seq[t], j->pos[t]) * c->kv.row_bytes;
        nb_kv_row_store(c->kv.type, c->k + t * kv_dim, (char *)c->kv.k[l] + at, kv_dim);
        nb_kv_row_store(c->kv.type, c->v + t * kv_dim, (char *)c->kv.v[l] + at, kv_dim);
    }
}

void nb_rope_store_kv(struct nb_ctx *c, int layer, int n, const int32_t *pos, const int32_t *seq)
{
    const struct nb_config *cfg = &c->model->cfg;
    int64_t dims = (int64_t)(cfg->n_heads + cfg->n_kv_heads) * cfg->head_dim;
    struct rope_job j = {c, layer, n, pos, seq};
    nb_run_op(c, NB_OP_ROPE_KV, rope_worker, &j, nb_rows_threads(c, n, dims));
}

struct attn_job {
    const struct nb_ctx *c;
    int layer, n_tok;
    const int32_t *pos, *seq;
};

/* Prefill: tiles of (kv head, up to NB_ATTN_ROWS / group consecutive tokens of one
 * sequence), all q heads of the group together, so each K / V row is read once per
 * tile. The tiles are taken kv-head-major, so a thread works through all the token
 * blocks of one head while that head's K / V stay in its L2, and each thread takes a
 * contiguous run of them holding an equal share of the causal cost (a block's tokens
 * times the keys its last token reads). Against the earlier round-robin, block-major
 * order: attention 0.38 -> 0.28 ms per prompt token, pp512 425-435 -> 452-467 tok/s
 * (qwen3-1.7b w4a8, 2 threads, 3 interleaved passes). */
static void attn_tiles(const struct attn_job *j, int ith, int nth, float *scratch)
{
    const struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    int hd = cfg->head_dim, group = cfg->n_heads / cfg->n_kv_heads, KV = cfg->n_kv_heads;
    int64_t q_dim = (int64_t)cfg->n_heads * hd;
    int tb = NB_ATTN_ROWS / group;
    int window = cfg->layer_sliding[j->layer] ? cfg->sliding_window : 0;
    float scale = 1.0f / sqrtf((float)hd);
    double total = 0, done = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int kvh = 0; kvh < KV; kvh++)
            for (int t0 = 0, t1; t0 < j->n_tok; t0 = t1) {
                t1 = t0 + 1;
                while (t1 < j->n_tok && t1 - t0 < tb && j->seq[t1] == j->seq[t0]) t1++;
                int keys = j->pos[t1 - 1] + 1;
                if (window > 0 && keys > window + tb) keys = window + tb;
                double cost = (double)(t1 - t0) * keys;
                if (pass == 0) {
                    total += cost;
                    continue;
                }
                double mid = done + 0.5 * cost; /* the tile goes where its middle falls */
                done += cost;
                if ((int)(mid * nth / total) != ith) continue;
                int64_t col = (int64_t)kvh * group * hd;
                int64_t head = NB_KV_ROW_BYTES(c->kv.type, (int64_t)kvh * hd);
                c->kern->attn_tile(c->att + t0 * q_dim + col, q_dim, c->q + t0 * q_dim + col,
                                   q_dim, t1 - t0, group, hd, j->pos + t0,
                                   (const char *)c->kv.k[j->layer] + head,
                                   (const char *)c->kv.v[j->layer] + head, c->kv.row_bytes,
                                   c->kv.type, nb_kv_table(&c->kv, j->layer, j->seq[t0]),
                                   NB_KV_BLOCK_SHIFT, window, scale, scratch);
            }
}

/* Decode: (token, head) pairs split over the threads, a dot per key, softmax, and the
 * weighted sum of the values. */
static void attn_rows(const struct attn_job *j, int ith, int nth, float *scores)
{
    const struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_kernels *k = c->kern;
    int hd = cfg->head_dim, H = cfg->n_heads, group = cfg->n_heads / cfg->n_kv_heads;
    int64_t q_dim = (int64_t)H * hd;
    int window = cfg->layer_sliding[j->layer] ? cfg->sliding_window : 0, type = c->kv.type;
    float scale = 1.0f / sqrtf((float)hd);
    long lo_job, hi_job;
    nb_split_range((long)j->n_tok * H, ith, nth, 1, &lo_job, &hi_job);
    for (long job = lo_job; job < hi_job; job++) {
        int t = (int)(job / H), h = (int)(job % H);
        int s = j->seq[t], p = j->pos[t];
        int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        const float *qv = c->q + t * q_dim + (int64_t)h * hd;
        int64_t head = NB_KV_ROW_BYTES(type, (int64_t)(h / group) * hd), ld = c->kv.row_bytes;
        const char *kc = (const char *)c->kv.k[j->layer] + head;
        const char *vc = (const char *)c->kv.v[j->layer] + head;
        const int32_t *blocks = nb_kv_table(&c->kv, j->layer, s);
        float *row = scores + c->n_ctx; /* a 16-bit or q8_0 row as f32 */
        for (int i = lo; i <= p; i++) {
            const char *kr = kc + NB_KV_SLOT(blocks, NB_KV_BLOCK_SHIFT, i) * ld;
            if (type != NB_KVE_F32) k->kv_row_load(type, kr, row, hd);
            scores[i - lo] = k->dot_f32(qv, type == NB_KVE_F32 ? (const float *)kr : row, hd) * scale;
        }
        nb_softmax(scores, p - lo + 1);
        float *out = c->att + t * q_dim + (int64_t)h * hd;
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int i = lo; i <= p; i++) {
            const char *vr = vc + NB_KV_SLOT(blocks, NB_KV_BLOCK_SHIFT, i) * ld;
            if (type != NB_KVE_F32) k->kv_row_load(type, vr, row, hd);
            k->axpy_f32(out, scores[i - lo], type == NB_KVE_F32 ? (const float *)vr : row, hd);
        }
    }
}

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    const struct nb_config *cfg = &j->c->model->cfg;
    float *scratch = j->c->scratch + ith * j->c->scratch_stride;
    if (j->n_tok > 1 && cfg->n_heads / cfg->n_kv_heads <= NB_ATTN_ROWS)
        attn_tiles(j, ith, nth, scratch);
    else
        attn_rows(j, ith, nth, scratch);
}

void nb_attention(struct nb_ctx *c, int layer, int n, const int32_t *pos, const int32_t *seq)
{
    struct attn_job j = {c, layer, n, pos, seq};
    nb_run_op(c, NB_OP_ATTN, attn_worker, &j, c->n_threads);
}
