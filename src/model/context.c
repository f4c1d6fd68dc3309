/* model/context.c — a context's life: its buffers and KV cache, its sequences, the
 * profile it keeps, and nb_decode, which checks a batch and runs it chunk by chunk
 * through the forward pass (forward.c).
 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/params.h"
#include "model/context.h"

static const char *const k_op_names[NB_OP_COUNT] = {
    "embed", "rmsnorm", "gemm qkv", "rope+kv store", "attention", "gemm head gate", "gemm wo",
    "gemm gate+up", "activation", "gemm down", "gemm output head", "quantize act",
    "residual add"};

void nb_ctx_set_observer(struct nb_ctx *c, nb_observer_fn fn, void *user)
{
    c->observe = fn;
    c->observe_user = user;
}

void nb_ctx_set_kernels(struct nb_ctx *c, const struct nb_kernels *k)
{
    c->kern = k ? k : nb_kernels_get();
}


static const char *const k_kv_type_names[] = {"default", "f32", "f16", "bf16", "q8_0"};

const char *nb_kv_type_name(enum nb_kv_type t)
{
    if (t == NB_KV_TYPE_DEFAULT) t = NB_KV_TYPE_F16; /* the default's own name */
    return t >= 0 && t <= NB_KV_TYPE_Q8_0 ? k_kv_type_names[t] : "?";
}

int nb_kv_type_parse(const char *name)
{
    for (int t = 0; name && t <= NB_KV_TYPE_Q8_0; t++)
        if (!strcmp(name, k_kv_type_names[t])) return t;
    return -1;
}

static int kv_elem(int t)
{
    switch (t) {
    case NB_KV_TYPE_F16: return NB_KVE_F16;
    case NB_KV_TYPE_BF16: return NB_KVE_BF16;
    case NB_KV_TYPE_Q8_0: return NB_KVE_Q8_0;
    default: return NB_KVE_F32;
    }
}

struct nb_ctx_params nb_ctx_default_params(void)
{
    struct nb_ctx_params p = {.size = sizeof p, .n_ctx = 0, .n_seq = 1, .n_batch = 512,
                              .n_threads = 0};
    return p;
}

static void *ctx_alloc(int *fail, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) *fail = 1;
    return p;
}

void nb_ctx_free(struct nb_ctx *c)
{
    if (!c) return;
    nb_pool_free(c->pool);
    nb_kv_free(&c->kv);
    free(c->x);
    free(c->h);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->hg);
    free(c->ff_gate);
    free(c->ff_up);
    free(c->rope_cs);
    free(c->scratch);
    free(c->attn_part);
    free(c->attn_runs);
    free(c->attn_first);
    free(c->attn_seq_n);
    free(c->q8);
    free(c->q8_d);
    free(c->q8_sum);
    free(c);
}

/* The activations of one chunk, the int8 input buffers and the per-thread scratch.
 * 0 when out of memory. */
/* The sizes of a context's working buffers: the activations of one chunk of n_batch
 * tokens, the int8 input buffers, the per-thread scratch and decode attention's partial
 * results. One plan for nb_ctx_init and nb_ctx_memory, so the prediction is the
 * allocation. */
struct work_plan {
    int64_t act_floats;    /* x, h, q, k, v, att, hg, ff_gate, ff_up, rope_cs */
    int64_t stride;        /* scratch floats per thread */
    int64_t part;          /* attention partials (floats); + their per-token run counts */
    int64_t q8_ld;
    int64_t bytes;
};

static void plan_work(const struct nb_config *cfg, const struct nb_ctx_params *p, int q8,
                      struct work_plan *w)
{
    int64_t B = p->n_batch, E = cfg->n_embd, hd = cfg->head_dim, F = cfg->n_ff;
    int64_t q_dim = (int64_t)cfg->n_heads * hd, kv_dim = (int64_t)cfg->n_kv_heads * hd;
    w->act_floats = B * (2 * E + 2 * q_dim + 2 * kv_dim + cfg->n_heads + 2 * F + hd);
    /* per-thread scratch: a converted weight row (largest n_in), a decode attention run
     * (a GQA group's scaled q rows and attn_decode's scratch) or a prefill attention tile */
    int64_t max_in = E > F ? E : F;
    if (q_dim > max_in) max_in = q_dim;
    int64_t need = max_in, group = cfg->n_heads / cfg->n_kv_heads;
    if (group * hd + NB_ATTN_DECODE_SCRATCH(hd) > need) /* decode: q rows, attn_decode's */
        need = group * hd + NB_ATTN_DECODE_SCRATCH(hd);
    if (NB_ATTN_SCRATCH(hd) > need) need = NB_ATTN_SCRATCH(hd);
    w->stride = (need + 15) & ~(int64_t)15;
    w->part = B * cfg->n_heads * (hd + 2); /* one run of keys a head */
    w->q8_ld = (max_in + 255) & ~(int64_t)255; /* whole k-quant blocks */
    w->bytes = 4 * (w->act_floats + w->stride * p->n_threads + w->part) + 4 * B + 8 * (B + 1) +
               4 * (int64_t)p->n_seq;
    if (q8) w->bytes += (int64_t)((double)(B * w->q8_ld) * (1 + 4 / 16.0 + 4 / 16.0));
}

/* 1 when a matrix of m reads int8 activations (the q8 buffers are then used; they are
 * made either way, untouched otherwise). */
static int is_q8(const struct nb_weight *w)
{
    enum nb_gemm_input in = nb_wformat_info(w->format)->input;
    return w->data && (in == NB_INPUT_Q8 || in == NB_INPUT_Q8K);
}

static int reads_q8(const struct nb_model *m)
{
    if (is_q8(&m->output)) return 1;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
        const struct nb_weight *w[] = {&L->wq, &L->wk, &L->wv, &L->head_gate,
                                       &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++)
            if (is_q8(w[i])) return 1;
    }
    return 0;
}

static int alloc_activations(struct nb_ctx *c, const struct nb_ctx_params *p)
{
    const struct nb_config *cfg = &c->model->cfg;
    struct work_plan w;
    plan_work(cfg, p, 1, &w);
    int fail = 0;
    int64_t B = p->n_batch, E = cfg->n_embd, hd = cfg->head_dim, F = cfg->n_ff;
    int64_t q_dim = (int64_t)cfg->n_heads * hd, kv_dim = (int64_t)cfg->n_kv_heads * hd;
    c->x = ctx_alloc(&fail, (size_t)(B * E), sizeof(float));
    c->h = ctx_alloc(&fail, (size_t)(B * E), sizeof(float));
    c->q = ctx_alloc(&fail, (size_t)(B * q_dim), sizeof(float));
    c->k = ctx_alloc(&fail, (size_t)(B * kv_dim), sizeof(float));
    c->v = ctx_alloc(&fail, (size_t)(B * kv_dim), sizeof(float));
    c->att = ctx_alloc(&fail, (size_t)(B * q_dim), sizeof(float));
    c->hg = ctx_alloc(&fail, (size_t)(B * cfg->n_heads), sizeof(float));
    c->ff_gate = ctx_alloc(&fail, (size_t)(B * F), sizeof(float));
    c->ff_up = ctx_alloc(&fail, (size_t)(B * F), sizeof(float));
    c->rope_cs = ctx_alloc(&fail, (size_t)(B * hd), sizeof(float));
    c->scratch_stride = w.stride;
    c->scratch = ctx_alloc(&fail, (size_t)(w.stride * p->n_threads), sizeof(float));
    c->attn_part_cap = (size_t)w.part;
    c->attn_part = ctx_alloc(&fail, c->attn_part_cap, sizeof(float));
    c->attn_runs = ctx_alloc(&fail, (size_t)B, sizeof(int));
    c->attn_first = ctx_alloc(&fail, (size_t)(B + 1), sizeof(int64_t));
    c->attn_seq_n = ctx_alloc(&fail, (size_t)p->n_seq, sizeof(int));
    c->q8_ld = w.q8_ld;
    c->q8 = ctx_alloc(&fail, (size_t)(B * c->q8_ld), 1);
    c->q8_d = ctx_alloc(&fail, (size_t)(B * c->q8_ld / 16), sizeof(float));
    c->q8_sum = ctx_alloc(&fail, (size_t)(B * c->q8_ld / 16), sizeof(int32_t));
    return !fail;
}

/* params with the defaults filled in and checked (warn: say what is unusual). */
static enum nb_status resolve(const struct nb_model *m, const struct nb_ctx_params *params,
                              struct nb_ctx_params *out, int warn)
{
    /* a versioned struct: the caller's first params->size bytes over the defaults */
    struct nb_ctx_params p = nb_ctx_default_params();
    enum nb_status st = nb_params_in(&p, sizeof p, params, "context params");
    if (st) return st;
    if (p.kv_type < 0 || p.kv_type > NB_KV_TYPE_Q8_0)
        return nb_set_error(NB_ERR_INVALID_ARG, "context: KV type %d is not one of f32, f16, "
                            "bf16, q8_0", p.kv_type);
    if (p.kv_type == NB_KV_TYPE_DEFAULT) p.kv_type = NB_KV_TYPE_F16; /* docs/kv-cache.md */
    if (p.n_ctx_total < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "context: n_ctx_total %lld is negative",
                            (long long)p.n_ctx_total);
    const struct nb_config *cfg = &m->cfg;
    if (p.n_ctx <= 0) p.n_ctx = cfg->n_ctx_train < 4096 ? cfg->n_ctx_train : 4096;
    if (p.n_seq <= 0) p.n_seq = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_threads <= 0) p.n_threads = nb_cpu_count();
    if (p.n_ctx > (1 << 24) || p.n_seq > 4096 || p.n_batch > 65536 || p.n_threads > 1024)
        return nb_set_error(NB_ERR_INVALID_ARG, "context: n_ctx %d / n_seq %d / n_batch %d / "
                            "threads %d out of range", p.n_ctx, p.n_seq, p.n_batch, p.n_threads);
    if (warn && p.n_ctx > cfg->n_ctx_train)
        NB_LOGW("context of %d tokens is longer than the model was trained for (%d)", p.n_ctx,
                cfg->n_ctx_train);
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    *out = p;
    return NB_OK;
}

enum nb_status nb_ctx_memory(const struct nb_model *m, const struct nb_ctx_params *params,
                             struct nb_ctx_memory *out)
{
    memset(out, 0, sizeof *out);
    struct nb_ctx_params p = {0};
    enum nb_status st = resolve(m, params, &p, 0);
    if (st) return st;
    struct nb_kv_plan kp;
    nb_kv_plan(&m->cfg, kv_elem(p.kv_type), p.n_seq, p.n_ctx, p.n_ctx_total, p.n_batch, &kp);
    struct work_plan w;
    plan_work(&m->cfg, &p, reads_q8(m), &w);
    out->kv_bytes = kp.bytes;
    out->kv_flat_bytes = kp.flat_bytes;
    out->kv_bytes_per_token = 2 * kp.row_bytes * m->cfg.n_layers;
    out->work_bytes = w.bytes;
    out->total_bytes = kp.bytes + w.bytes;
    return NB_OK;
}

enum nb_status nb_ctx_init(struct nb_ctx **out, const struct nb_model *m,
                           const struct nb_ctx_params *params)
{
    *out = NULL;
    struct nb_ctx_params p = {0};
    enum nb_status st = resolve(m, params, &p, 1);
    if (st) return st;
    const struct nb_config *cfg = &m->cfg;
    struct nb_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->kern = nb_kernels_get();
    c->n_ctx = p.n_ctx;
    c->n_seq = p.n_seq;
    c->n_batch = p.n_batch;
    c->n_threads = p.n_threads;
    c->gemm_token_unit = NB_GEMM_TOKEN_UNIT;
    if ((st = nb_pool_init(&c->pool, p.n_threads, p.pin))) goto fail;
    if ((st = nb_kv_init(&c->kv, cfg, kv_elem(p.kv_type), p.n_seq, p.n_ctx, p.n_ctx_total,
                         p.n_batch)))
        goto fail;
    if (!alloc_activations(c, &p)) {
        st = nb_set_error(NB_ERR_NOMEM, "context: out of memory (n_ctx %d, n_seq %d, "
                          "n_batch %d)", p.n_ctx, p.n_seq, p.n_batch);
        goto fail;
    }
    NB_LOGI("context: %d tokens x %d sequences, batch %d, %d threads, KV pool %.1f MiB (%s, "
            "blocks of %d tokens, taken as used)", p.n_ctx, p.n_seq, p.n_batch, p.n_threads,
            (double)nb_kv_bytes_reserved(&c->kv) / (1 << 20), nb_kv_type_name(p.kv_type),
            NB_KV_BLOCK);
    *out = c;
    return NB_OK;
fail:
    nb_ctx_free(c);
    return st;
}

void nb_ctx_clear_seq(struct nb_ctx *c, int seq) { nb_kv_clear(&c->kv, seq); }

const struct nb_model *nb_ctx_model(const struct nb_ctx *c) { return c->model; }

int nb_ctx_n_ctx(const struct nb_ctx *c) { return c->n_ctx; }

int nb_ctx_n_batch(const struct nb_ctx *c) { return c->n_batch; }

enum nb_status nb_ctx_truncate_seq(struct nb_ctx *c, int seq, int n)
{
    if (seq < 0 || seq >= c->n_seq || n < 0 || n > c->kv.len[seq])
        return nb_set_error(NB_ERR_INVALID_ARG, "truncate: sequence %d has %d tokens, not %d",
                            seq, seq >= 0 && seq < c->n_seq ? c->kv.len[seq] : 0, n);
    return nb_kv_truncate(&c->kv, seq, n);
}

enum nb_status nb_ctx_fork_seq(struct nb_ctx *c, int src, int dst, int n)
{
    if (src < 0 || src >= c->n_seq || dst < 0 || dst >= c->n_seq || src == dst)
        return nb_set_error(NB_ERR_INVALID_ARG, "fork: sequences %d -> %d: each in 0..%d, and "
                            "two different ones", src, dst, c->n_seq - 1);
    if (n < 0 || n > c->kv.len[src])
        return nb_set_error(NB_ERR_INVALID_ARG, "fork: sequence %d has %d tokens, not %d", src,
                            c->kv.len[src], n);
    return nb_kv_fork(&c->kv, src, dst, n);
}

void nb_ctx_kv_usage(const struct nb_ctx *c, struct nb_kv_usage *u)
{
    memset(u, 0, sizeof *u);
    u->bytes_reserved = nb_kv_bytes_reserved(&c->kv);
    u->bytes_used = nb_kv_bytes_used(&c->kv);
    u->block_tokens = NB_KV_BLOCK;
    for (int gi = 0; gi < NB_KV_GROUPS; gi++) {
        u->blocks_total += c->kv.g[gi].n_blocks;
        u->blocks_used += c->kv.g[gi].n_blocks - c->kv.g[gi].n_free;
    }
}

void nb_ctx_profile(struct nb_ctx *c, int on)
{
    c->profiling = on;
    memset(c->prof, 0, sizeof c->prof);
    c->prof_tokens = 0;
}

int nb_ctx_profile_get(const struct nb_ctx *c, struct nb_profile_entry *out, int max,
                       int64_t *n_tokens)
{
    int n = 0;
    for (int i = 0; i < NB_OP_COUNT && n < max; i++) {
        const struct nb_prof_slot *p = &c->prof[i];
        if (!p->calls) continue;
        out[n].op = k_op_names[i];
        out[n].ms = (double)p->wall_ns * 1e-6;
        out[n].calls = (int64_t)p->calls;
        out[n].threads = p->threads ? p->threads : 1;
        out[n].fanout_ms = p->t0_ns && p->wall_ns > p->t0_ns ? (double)(p->wall_ns - p->t0_ns) * 1e-6
                                                            : 0;
        out[n].float_weights = p->float_weights;
        n++;
    }
    if (n_tokens) *n_tokens = c->prof_tokens;
    return n;
}

int nb_ctx_seq_len(const struct nb_ctx *c, int seq)
{
    return seq >= 0 && seq < c->n_seq ? c->kv.len[seq] : 0;
}

/* Check the whole batch before touching the cache, so a bad batch changes nothing; then
 * take the full-attention layers' blocks for all of it. */
static enum nb_status check_batch(struct nb_ctx *c, const struct nb_batch *b)
{
    if (!b || b->n_tokens <= 0 || !b->token || !b->pos)
        return nb_set_error(NB_ERR_INVALID_ARG, "decode: empty batch");
    int *next = calloc((size_t)c->n_seq, sizeof(int));
    if (!next) return nb_set_error(NB_ERR_NOMEM, "decode: out of memory");
    memcpy(next, c->kv.len, sizeof(int) * (size_t)c->n_seq);
    enum nb_status st = NB_OK;
    for (int i = 0; i < b->n_tokens && st == NB_OK; i++) {
        int s = b->seq ? b->seq[i] : 0;
        if (b->token[i] < 0 || b->token[i] >= c->model->cfg.n_vocab)
            st = nb_set_error(NB_ERR_INVALID_ARG, "decode: token %d at batch index %d is not in "
                              "the vocabulary (0..%d)", b->token[i], i, c->model->cfg.n_vocab - 1);
        else if (s < 0 || s >= c->n_seq)
            st = nb_set_error(NB_ERR_INVALID_ARG, "decode: sequence %d at batch index %d is not "
                              "in 0..%d", s, i, c->n_seq - 1);
        else if (b->pos[i] != next[s])
            st = nb_set_error(NB_ERR_INVALID_ARG, "decode: sequence %d expects position %d, "
                              "batch index %d has %d", s, next[s], i, b->pos[i]);
        else if (b->pos[i] >= c->n_ctx)
            st = nb_set_error(NB_ERR_RANGE, "decode: context full: sequence %d reached %d "
                              "tokens (--ctx %d)", s, b->pos[i], c->n_ctx);
        else
            next[s]++;
    }
    /* every new position's block, taken now (or nothing taken: the pool is full) */
    if (st == NB_OK) {
        for (int s = 0; s < c->n_seq; s++) next[s] -= c->kv.len[s];
        st = nb_kv_reserve_full(&c->kv, next);
    }
    free(next);
    return st;
}

enum nb_status nb_decode(struct nb_ctx *c, const struct nb_batch *b, float *logits)
{
    enum nb_status st = check_batch(c, b);
    if (st) return st;
    int32_t *seq0 = NULL;
    uint8_t *last = NULL;
    const int32_t *seq = b->seq;
    const uint8_t *want = b->want_logits;
    if (!seq) {
        seq0 = calloc((size_t)b->n_tokens, sizeof *seq0);
        if (!seq0) return nb_set_error(NB_ERR_NOMEM, "decode: out of memory");
        seq = seq0;
    }
    if (!want) {
        last = calloc((size_t)b->n_tokens, 1);
        if (!last) {
            free(seq0);
            return nb_set_error(NB_ERR_NOMEM, "decode: out of memory");
        }
        last[b->n_tokens - 1] = 1;
        want = last;
    }
    int n_out = 0;
    for (int i0 = 0; i0 < b->n_tokens; i0 += c->n_batch) {
        int n = b->n_tokens - i0 < c->n_batch ? b->n_tokens - i0 : c->n_batch;
        /* the window layers: return what fell out of the window, take the chunk's blocks */
        for (int t = 0; t < n && st == NB_OK; t++) {
            int s = seq[i0 + t], p = b->pos[i0 + t];
            if (t > 0 && seq[i0 + t - 1] == s) continue; /* a run of s: reserved at its start */
            int e = t;
            while (e + 1 < n && seq[i0 + e + 1] == s) e++;
            nb_kv_trim_window(&c->kv, s);
            st = nb_kv_reserve_swa(&c->kv, s, p, b->pos[i0 + e] + 1);
        }
        if (st) break;
        nb_forward_chunk(c, n, b->token + i0, b->pos + i0, seq + i0, want + i0, logits, &n_out);
        for (int t = 0; t < n; t++) c->kv.len[seq[i0 + t]] = b->pos[i0 + t] + 1;
    }
    free(seq0);
    free(last);
    return st;
}

enum nb_status nb_decode_verify(struct nb_ctx *c, const struct nb_batch *b, float *logits)
{
    c->attn_per_token = 1;
    enum nb_status st = nb_decode(c, b, logits);
    c->attn_per_token = 0;
    return st;
}
