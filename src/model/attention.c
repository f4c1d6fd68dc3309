/* model/attention.c — RoPE, the KV-cache store and attention, over a chunk of tokens
 * that may belong to several sequences.
 *
 * The cache is paged (kvcache.h): the key of position p of sequence s in layer l sits
 * at nb_kv_at(kv, l, s, p, head) of the layer's pool, found through the sequence's block
 * table; nb_decode has made every position of the chunk writable before it runs.
 *
 * Decode (one token per sequence) is flash-decoding over the kernels' attn_decode; a
 * prefill chunk runs in tiles (kernels' attn_tile) that read each K / V row once for
 * all the q heads of a GQA group and a block of tokens.
 */
#include <math.h>
#include <stdlib.h>
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
    int64_t hb = nb_kv_head_bytes(&c->kv, cfg->n_kv_heads);
    int64_t row = NB_KV_ROW_BYTES(c->kv.type, hd);
    /* the cache rows written below are cold (a new position): ask for them for writing
     * now, so their misses overlap the norms and rotations instead of stalling the
     * stores one row at a time */
    for (long t = t0; t < t1; t++)
        for (int h = 0; h < cfg->n_kv_heads; h++) {
            int64_t at = nb_kv_at(&c->kv, l, j->seq[t], j->pos[t], h, hb);
            for (int64_t o = 0; o < row; o += 64) {
                __builtin_prefetch((char *)c->kv.k[l] + at + o, 1, 3);
                __builtin_prefetch((char *)c->kv.v[l] + at + o, 1, 3);
            }
        }
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
        for (int h = 0; h < cfg->n_kv_heads; h++) {
            int64_t at = nb_kv_at(&c->kv, l, j->seq[t], j->pos[t], h, hb);
            c->kern->kv_row_store(c->kv.type, c->k + t * kv_dim + h * hd, (char *)c->kv.k[l] + at, hd);
            c->kern->kv_row_store(c->kv.type, c->v + t * kv_dim + h * hd, (char *)c->kv.v[l] + at, hd);
        }
    }
}

void nb_rope_store_kv(struct nb_ctx *c, int layer, int n, const int32_t *pos, const int32_t *seq)
{
    const struct nb_config *cfg = &c->model->cfg;
    int64_t dims = (int64_t)(cfg->n_heads + cfg->n_kv_heads) * cfg->head_dim;
    struct rope_job j = {c, layer, n, pos, seq};
    /* all threads from 4 tokens on: the stores of new cache rows are bound by misses,
     * which the threads take in parallel */
    nb_run_op(c, NB_OP_ROPE_KV, rope_worker, &j, n >= 4 ? c->n_threads : nb_rows_threads(c, n, dims));
}

/* The view the kernels read KV head h of seq in layer through (kernels.h). */
static struct nb_kv_view kv_view(const struct nb_ctx *c, int layer, int seq, int h)
{
    int64_t hb = nb_kv_head_bytes(&c->kv, c->model->cfg.n_kv_heads);
    int64_t off = h * nb_kv_head_pool(&c->kv, layer, hb);
    return (struct nb_kv_view){.k = (const char *)c->kv.k[layer] + off,
                               .v = (const char *)c->kv.v[layer] + off,
                               .blocks = nb_kv_table(&c->kv, layer, seq),
                               .ldblk = NB_KV_BLOCK * hb,
                               .ldrow = hb,
                               .bshift = NB_KV_BLOCK_SHIFT,
                               .type = c->kv.type};
}

/* Decode (a token whose sequence has no other in the batch): flash-decoding. A job is (token,
 * kv head, run of keys): it reads each K / V row once for all the q heads of the GQA
 * group (a 16-bit or q8_0 row converted once), and leaves per q head the max score m,
 * the sum l of exp(score - m) and the weighted sum of values acc. The runs split a long
 * context over the threads when there are fewer (token, kv head) pairs than threads;
 * attn_merge then combines a head's runs: out = sum_c e^(m_c - M) acc_c / sum_c
 * e^(m_c - M) l_c. Every token gets the runs its one-token step would have (one pair a
 * kv head, its own keys), so its sums are added in the same order batched or alone: with
 * one run count for the batch, a token past 128 keys had one run batched and two alone on
 * two threads; in a verified step kjv-7m's greedy text with drafts left plain decoding's
 * at a near tie, and a served stream's logits depended on the others in its step
 * (test_model_speculative: test_verify_logits, test_batch_logits). */
struct split {
    const int *runs;      /* runs of keys of token t's (token, kv head) pairs; 0: a tile's */
    const int64_t *first; /* token t's first (kv head, run) job; first[n]: all of them */
    float *part;          /* per job: [group][2 + hd]: m, l, acc */
};

struct attn_job {
    const struct nb_ctx *c;
    int layer, n_tok;
    const int32_t *pos, *seq;
    int tiles;              /* prefill tiles for the sequences with several tokens here */
    const struct split *sp; /* decode (attn_split) for the others; NULL: none */
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
                if (j->sp && j->sp->runs[t0]) continue; /* a decode step's (attn_split) */
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
                struct nb_kv_view view = kv_view(c, j->layer, j->seq[t0], kvh);
                c->kern->attn_tile(c->att + t0 * q_dim + col, q_dim, c->q + t0 * q_dim + col,
                                   q_dim, t1 - t0, group, hd, j->pos + t0, &view, window, scale,
                                   scratch);
            }
}

static void key_range(const struct attn_job *j, int t, int *lo, int *hi)
{
    const struct nb_config *cfg = &j->c->model->cfg;
    int window = cfg->layer_sliding[j->layer] ? cfg->sliding_window : 0, p = j->pos[t];
    *lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    *hi = p + 1;
}

static void attn_split(const struct attn_job *j, int ith, int nth, float *scratch)
{
    const struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    int hd = cfg->head_dim, KV = cfg->n_kv_heads, group = cfg->n_heads / KV;
    int64_t q_dim = (int64_t)cfg->n_heads * hd, stride = 2 + hd;
    float scale = 1.0f / sqrtf((float)hd), *qs = scratch; /* the group's q rows, scaled */
    long j0, j1;
    nb_split_range((long)j->sp->first[j->n_tok], ith, nth, 1, &j0, &j1);
    int t = 0;
    for (long job = j0; job < j1; job++) {
        while (job >= j->sp->first[t + 1]) t++;
        const int R = j->sp->runs[t], r = (int)(job - j->sp->first[t]);
        int kvh = r / R, run = r % R;
        int lo, hi;
        key_range(j, t, &lo, &hi);
        int a = lo + (int)((int64_t)(hi - lo) * run / R);
        int b = lo + (int)((int64_t)(hi - lo) * (run + 1) / R);
        const float *q = c->q + t * q_dim + (int64_t)kvh * group * hd;
        for (int64_t i = 0; i < (int64_t)group * hd; i++) qs[i] = q[i] * scale;
        struct nb_kv_view view = kv_view(c, j->layer, j->seq[t], kvh);
        float *part = j->sp->part + (j->sp->first[t] + r) * group * stride;
        c->kern->attn_decode(qs, group, hd, &view, a, b, part, stride,
                             scratch + (int64_t)group * hd);
        if (R > 1) continue;
        /* one run: the job holds its heads' whole sums, so it finishes them here, while
         * they are in cache, and attn_merge is not run */
        for (int g = 0; g < group; g++) {
            const float *pg = part + g * stride;
            float *out = c->att + t * (int64_t)cfg->n_heads * hd + ((int64_t)kvh * group + g) * hd;
            for (int d = 0; d < hd; d++) out[d] = pg[2 + d] / pg[1]; /* as attn_merge */
        }
    }
}

static void attn_merge(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    const struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    int hd = cfg->head_dim, H = cfg->n_heads, KV = cfg->n_kv_heads, group = H / KV;
    int64_t stride = 2 + hd;
    long h0, h1;
    nb_split_range((long)j->n_tok * H, ith, nth, 1, &h0, &h1);
    for (long th = h0; th < h1; th++) {
        int t = (int)(th / H), h = (int)(th % H), kvh = h / group, g = h % group;
        const int R = j->sp->runs[t];
        if (R <= 1) continue; /* attn_split finished it (0: a prefill tile's) */
        const float *p0 = j->sp->part + (j->sp->first[t] + (int64_t)kvh * R) * group * stride +
                          g * stride;
        float M = -INFINITY, L = 0;
        for (int r = 0; r < R; r++) M = p0[r * group * stride] > M ? p0[r * group * stride] : M;
        float *out = c->att + t * (int64_t)H * hd + (int64_t)h * hd;
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int r = 0; r < R; r++) {
            const float *pr = p0 + r * group * stride;
            if (pr[1] == 0) continue; /* an empty run */
            float w = expf(pr[0] - M);
            L += w * pr[1];
            c->kern->axpy_f32(out, w, pr + 2, hd);
        }
        for (int d = 0; d < hd; d++) out[d] /= L;
    }
}

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    float *scratch = j->c->scratch + ith * j->c->scratch_stride;
    if (j->tiles) attn_tiles(j, ith, nth, scratch);
    if (j->sp) attn_split(j, ith, nth, scratch);
}

/* Runs of keys for `pairs` (token, kv head) jobs over `keys` keys on n_threads: enough
 * jobs for the threads, at least 128 keys a run. */
static int split_runs(int n_threads, int pairs, int keys)
{
    int runs = (2 * n_threads + pairs - 1) / pairs;
    if (runs > (keys + 127) / 128) runs = (keys + 127) / 128;
    return runs < 1 ? 1 : runs;
}

void nb_attention(struct nb_ctx *c, int layer, int n, const int32_t *pos, const int32_t *seq)
{
    const struct nb_config *cfg = &c->model->cfg;
    int hd = cfg->head_dim, KV = cfg->n_kv_heads, group = cfg->n_heads / KV;
    struct attn_job j = {c, layer, n, pos, seq, 0, NULL};
    /* A token runs as it would in a batch of its sequence's tokens alone: in prefill tiles
     * where its sequence has several here (a prompt's chunk) and the group fits a tile,
     * else (a step's decoders) as a decode step, with the runs of keys of its one-token
     * step (its kv heads' pairs, its own keys). So its sums do not depend on what else the
     * batch holds. A verified step runs every token as a one-token decode step. */
    int *seq_n = c->attn_seq_n;
    for (int t = 0; t < n; t++) seq_n[seq[t]] = 0;
    for (int t = 0; t < n; t++) seq_n[seq[t]]++;
    const int can_tile = !c->attn_per_token && group <= NB_ATTN_ROWS;
    int max_runs = 1;
    int64_t jobs = 0;
    for (int t = 0; t < n; t++) {
        int r = 0;
        if (can_tile && seq_n[seq[t]] > 1) {
            j.tiles = 1;
        } else {
            /* a prompt no tile takes (more q heads a kv head than a tile's rows) splits by
             * the batch's pairs: one run a token for a long prompt, not one-token steps' */
            const int pairs = seq_n[seq[t]] > 1 && !c->attn_per_token ? n * KV : KV;
            int lo, hi;
            key_range(&j, t, &lo, &hi);
            r = split_runs(c->n_threads, pairs, hi - lo);
        }
        c->attn_runs[t] = r;
        c->attn_first[t] = jobs;
        jobs += (int64_t)KV * r;
        max_runs = r > max_runs ? r : max_runs;
    }
    c->attn_first[n] = jobs;
    size_t need = (size_t)jobs * (size_t)group * (size_t)(2 + hd);
    if (need > c->attn_part_cap) {
        float *p = realloc(c->attn_part, need * sizeof(float));
        if (!p) { /* one run a pair fits what there is (allocated for n_batch tokens) */
            jobs = 0;
            for (int t = 0; t <= n; t++) {
                c->attn_first[t] = jobs;
                if (t == n) break;
                c->attn_runs[t] = c->attn_runs[t] ? 1 : 0;
                jobs += (int64_t)KV * c->attn_runs[t];
            }
            max_runs = 1;
        } else {
            c->attn_part = p;
            c->attn_part_cap = need;
        }
    }
    struct split sp = {c->attn_runs, c->attn_first, c->attn_part};
    j.sp = jobs ? &sp : NULL; /* no jobs: every token in tiles */
    nb_run_op(c, NB_OP_ATTN, attn_worker, &j, c->n_threads);
    if (max_runs > 1)
        nb_run_op(c, NB_OP_ATTN, attn_merge, &j, nb_rows_threads(c, n, (int64_t)cfg->n_heads * hd));
}
