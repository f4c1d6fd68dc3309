/* model/forward.c — the forward pass in f32, over a batch of tokens that may belong
 * to several sequences, each with its own positions and KV cache slot.
 *
 * One step, for a chunk of up to n_batch tokens (x holds one row per token):
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = rmsnorm(x)                                   attention block
 *       q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
 *       q, k = rmsnorm per head (Qwen3); rope(q, k, pos)
 *       cache[seq][pos] = k, v
 *       a = softmax(q k^T / sqrt(d)) v    over this sequence's keys at <= pos
 *                                         (and > pos - window on sliding layers)
 *       a *= sigmoid(h Wg) per head       (Spark head gate)
 *       x += a Wo
 *       h = rmsnorm(x)                                   MLP block
 *       x += (act(h Wgate) * (h Wup)) Wdown              act: silu or tanh-gelu
 *   logits = rmsnorm(x) Wout                             only rows that want them
 *
 * Prefill is this same pass over many tokens: every weight row is read once per
 * chunk and used for all its tokens. Sliding-window layers keep a ring buffer of
 * window + n_batch - 1 slots (enough for the oldest key the chunk's first token
 * needs while the chunk's own keys are written).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include "model/model.h"

/* Per-op profile (nb_ctx_profile_*): wall time, calls, and for fanned-out ops the
 * time thread 0 spent computing, so the rest (dispatch + waiting) shows as fan-out. */
enum prof_op {
    OP_EMBED, OP_NORM, OP_QKV, OP_ROPE_KV, OP_ATTN, OP_HEAD_GATE, OP_WO, OP_FFN_UP, OP_ACT,
    OP_FFN_DOWN, OP_OUTPUT, OP_QACT, OP_RESID, OP_COUNT
};
static const char *const k_op_names[OP_COUNT] = {
    "embed", "rmsnorm", "gemm qkv", "rope+kv store", "attention", "gemm head gate", "gemm wo",
    "gemm gate+up", "activation", "gemm down", "gemm output head", "quantize act",
    "residual add"};

struct prof_slot {
    uint64_t wall_ns, t0_ns, calls;
    int float_weights; /* a GEMM of this op ran on float (unquantized) weights */
    int threads;       /* threads it fanned out to (max seen) */
};

struct nb_ctx {
    const struct nb_model *model;
    const struct nb_kernels *kern;
    struct nb_pool *pool;
    int n_ctx, n_seq, n_batch, n_threads;

    /* KV cache, per layer: [n_seq][cap[l]][n_kv_heads * head_dim] */
    int *cap;
    float **k_cache, **v_cache;
    int *seq_len; /* [n_seq] tokens stored per sequence */

    /* Activations for one chunk of up to n_batch tokens. */
    float *x;     /* [n_batch][n_embd] residual stream */
    float *h;     /* [n_batch][n_embd] normed input of a block */
    float *q;     /* [n_batch][n_heads * head_dim] */
    float *k, *v; /* [n_batch][n_kv_heads * head_dim] */
    float *att;   /* [n_batch][n_heads * head_dim] */
    float *hg;    /* [n_batch][n_heads] head gate */
    float *ff_gate, *ff_up; /* [n_batch][n_ff] */
    float *rope_cs;         /* [n_batch][head_dim] cos, sin interleaved */
    float *scratch;         /* [n_threads][scratch_stride] */
    int64_t scratch_stride;
    int *chunk_rows;        /* [n_batch] rows that want logits */

    /* int8 activations for w4a8 weights, quantized once per input and shared by
     * every GEMM that reads the same input (q/k/v, gate/up). qa_src is the float
     * buffer they came from; NULL when it has been written since. */
    int8_t *qa_q;    /* [n_batch][max_in] */
    float *qa_d;     /* [n_batch][max_in / 32] */
    int32_t *qa_sum; /* [n_batch][max_in / 32] */
    int64_t qa_ld;   /* max_in */
    const float *qa_src;
    int qa_group, qa_ntok;

    struct nb_act_stats *stats; /* calibration, or NULL */
    unsigned fuse;              /* NB_FUSE_* bits (NIBBLE_FUSE) */
    int resid_pending;          /* h holds a block output not yet added to x */

    int profiling;
    struct prof_slot prof[OP_COUNT];
    int64_t prof_tokens; /* tokens run while profiling */
};

static inline uint64_t prof_begin(const struct nb_ctx *c) { return c->profiling ? nb_time_ns() : 0; }

static inline void prof_end(struct nb_ctx *c, enum prof_op op, uint64_t t0)
{
    if (!c->profiling) return;
    c->prof[op].wall_ns += nb_time_ns() - t0;
    c->prof[op].calls++;
}

/* prof_end for an op that ran on `nth` threads. */
static inline void prof_end_threads(struct nb_ctx *c, enum prof_op op, uint64_t t0, int nth)
{
    if (!c->profiling) return;
    prof_end(c, op, t0);
    if (nth > c->prof[op].threads) c->prof[op].threads = nth;
}

/* ---------------------------------------------------------------- fusions */

/* Each fusion has a switch, NIBBLE_FUSE=name,name,... ("all", "none"; unset: the
 * default set), and an in-situ measurement (bench/fusions.sh, docs/benchmarks.md)
 * that decides the default. On the 1.7B shape at 2 threads none of them moved pp512
 * or tg beyond the noise (all within 3%, spreads 4-9%), so the default set is empty
 * until one measures faster in the whole step on some machine:
 *   gemm        q/k/v and gate/up as one parallel job (one fan-out, one barrier)
 *   norm-quant  RMSNorm and the int8 quantization of its output, row by row
 *   act-quant   the gated activation and the int8 quantization for Wdown, row by row
 *   resid-norm  the residual add folded into the next RMSNorm pass */
enum {
    NB_FUSE_GEMM = 1u << 0,
    NB_FUSE_NORM_QUANT = 1u << 1,
    NB_FUSE_ACT_QUANT = 1u << 2,
    NB_FUSE_RESID_NORM = 1u << 3,
};
#define NB_FUSE_DEFAULT 0u

static const struct {
    const char *name;
    unsigned bit;
} k_fusions[] = {{"gemm", NB_FUSE_GEMM},
                 {"norm-quant", NB_FUSE_NORM_QUANT},
                 {"act-quant", NB_FUSE_ACT_QUANT},
                 {"resid-norm", NB_FUSE_RESID_NORM}};

/* NIBBLE_FUSE -> bits; an unknown name is warned about and ignored. */
static unsigned fuse_from_env(void)
{
    const char *s = getenv("NIBBLE_FUSE");
    if (!s || !*s) return NB_FUSE_DEFAULT;
    if (!strcmp(s, "all") || !strcmp(s, "1")) return ~0u;
    if (!strcmp(s, "none") || !strcmp(s, "0")) return 0;
    unsigned bits = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        size_t i = 0, n = sizeof k_fusions / sizeof k_fusions[0];
        for (; i < n; i++)
            if (strlen(k_fusions[i].name) == len && !strncmp(s, k_fusions[i].name, len)) break;
        if (i < n)
            bits |= k_fusions[i].bit;
        else
            NB_LOGW("NIBBLE_FUSE: unknown fusion '%.*s' (gemm, norm-quant, act-quant, "
                    "resid-norm, all, none)", (int)len, s);
        s += len + (s[len] == ',');
    }
    return bits;
}

/* ---------------------------------------------------------------- parallel GEMM */

/* Up to three GEMMs that read the same input (q, k, v; gate, up) can run as one
 * parallel job (fusion "gemm"): the threads split the rows of all of them together,
 * so there is one fan-out and one barrier instead of three. Off by default: measured
 * in situ on the 1.7B shape at 2 threads it changed neither decode nor prefill beyond
 * noise (docs/benchmarks.md). */
#define MAX_FUSED 3

struct gemm_one {
    float *y;
    int64_t ldy;
    const struct nb_weight *w;
};

struct gemm_job {
    const struct nb_ctx *c;
    const float *x;
    int64_t ldx;
    int n_tok;
    int n;                         /* GEMMs in this job */
    struct gemm_one g[MAX_FUSED];
    long blocks[MAX_FUSED + 1];    /* prefix sums of 16-row blocks */
    uint64_t t0_ns;                /* thread 0's compute time, when profiling */
};

/* Rows [r0, r1) of one GEMM. */
static void gemm_range(const struct nb_ctx *c, const struct gemm_one *g, const float *x,
                       int64_t ldx, int n_tok, int64_t r0, int64_t r1, float *scratch)
{
    const struct nb_kernels *k = c->kern;
    const struct nb_weight *w = g->w;
    switch (w->qpath) {
    case NB_WPATH_W4A8:
        (w->layout == NB_LAYOUT_X16 ? k->gemm_w4a8_x16 : k->gemm_w4a8)(
            g->y, g->ldy, c->qa_q, c->qa_d, c->qa_sum, c->qa_ld, c->qa_ld / 32, w->data, w->n_out,
            w->n_in, w->group, n_tok, r0, r1);
        return;
    case NB_WPATH_W4A16:
        (w->layout == NB_LAYOUT_X16 ? k->gemm_w4a16_x16 : k->gemm_w4a16)(
            g->y, g->ldy, x, ldx, w->data, w->n_out, w->n_in, w->group, n_tok, r0, r1, scratch);
        return;
    case NB_WPATH_W8A16:
        k->gemm_w8a16(g->y, g->ldy, x, ldx, w->data, w->n_out, w->n_in, n_tok, r0, r1, scratch);
        return;
    default: break;
    }
    nb_gemm_fn fn = w->dtype == NB_DTYPE_F32   ? k->gemm_f32
                    : w->dtype == NB_DTYPE_F16 ? k->gemm_f16
                                               : k->gemm_bf16;
    fn(g->y, g->ldy, x, ldx, w->data, w->n_in, n_tok, r0, r1, scratch);
}

/* Thread ith's share: a contiguous run of 16-row blocks across the job's GEMMs. */
static void gemm_rows(const struct gemm_job *j, int ith, int nth)
{
    long b0, b1;
    nb_split_range(j->blocks[j->n], ith, nth, 1, &b0, &b1);
    float *scratch = j->c->scratch + ith * j->c->scratch_stride;
    for (int m = 0; m < j->n && b0 < b1; m++) {
        long lo = b0 > j->blocks[m] ? b0 : j->blocks[m];
        long hi = b1 < j->blocks[m + 1] ? b1 : j->blocks[m + 1];
        if (lo >= hi) continue;
        int64_t n_out = j->g[m].w->n_out;
        int64_t r0 = (lo - j->blocks[m]) * 16, r1 = (hi - j->blocks[m]) * 16;
        gemm_range(j->c, &j->g[m], j->x, j->ldx, j->n_tok, r0, r1 < n_out ? r1 : n_out, scratch);
    }
}

static void gemm_worker(void *arg, int ith, int nth)
{
    struct gemm_job *j = arg;
    if (ith == 0 && j->c->profiling) {
        uint64_t t = nb_time_ns();
        gemm_rows(j, ith, nth);
        j->t0_ns = nb_time_ns() - t;
        return;
    }
    gemm_rows(j, ith, nth);
}

#define ROWS_MIN_PARALLEL 65536 /* elements; below this the fan-out costs more */

/* Threads for element-wise work on n rows of len elements: all of them for a big
 * batch (prefill), the calling thread alone for a decode step. */
static int rows_threads(const struct nb_ctx *c, int n, int64_t len)
{
    return n > 1 && (int64_t)n * len >= ROWS_MIN_PARALLEL ? c->n_threads : 1;
}

static void run_split(struct nb_ctx *c, nb_pool_fn fn, void *arg, int nth)
{
    if (nth > 1)
        nb_pool_run_n(c->pool, fn, arg, nth);
    else
        fn(arg, 0, 1);
}

/* Quantize n_tok rows of x to int8 per group, unless they already are. */
struct qact_job {
    struct nb_ctx *c;
    const float *x;
    int64_t ldx, n_in;
    int group, n_tok;
};

static void qact_worker(void *arg, int ith, int nth)
{
    const struct qact_job *j = arg;
    struct nb_ctx *c = j->c;
    long t0, t1;
    nb_split_range(j->n_tok, ith, nth, 1, &t0, &t1);
    for (long t = t0; t < t1; t++)
        c->kern->act_quant_q8(j->x + t * j->ldx, j->n_in, j->group, c->qa_q + t * c->qa_ld,
                              c->qa_d + t * (c->qa_ld / 32), c->qa_sum + t * (c->qa_ld / 32));
}

static void prepare_qact(struct nb_ctx *c, const float *x, int64_t ldx, int64_t n_in, int group,
                         int n_tok)
{
    if (c->qa_src == x && c->qa_group == group && c->qa_ntok == n_tok) return;
    struct qact_job j = {c, x, ldx, n_in, group, n_tok};
    int nth = rows_threads(c, n_tok, n_in);
    uint64_t t0 = prof_begin(c);
    run_split(c, qact_worker, &j, nth);
    prof_end_threads(c, OP_QACT, t0, nth);
    c->qa_src = x;
    c->qa_group = group;
    c->qa_ntok = n_tok;
}

/* y_i[t][:] = W_i x[t] for n GEMMs sharing the input x, n_tok rows. A job with few
 * output rows (the Spark head gate: n_heads rows) runs on one thread: fanning it out
 * costs more than it saves. */
static void matmul_n(struct nb_ctx *c, enum prof_op op, int n, const struct gemm_one *g,
                     const float *x, int64_t ldx, int n_tok)
{
    struct gemm_job j = {.c = c, .x = x, .ldx = ldx, .n_tok = n_tok, .n = n};
    int64_t rows = 0;
    int any_float = 0;
    for (int i = 0; i < n; i++) {
        j.g[i] = g[i];
        j.blocks[i + 1] = j.blocks[i] + (long)((g[i].w->n_out + 15) / 16);
        rows += g[i].w->n_out;
        any_float |= g[i].w->qpath == NB_WPATH_F32;
        if (g[i].y == c->qa_src) c->qa_src = NULL; /* its int8 copy is about to be stale */
    }
    const struct nb_weight *w = g[0].w;
    if (w->qpath == NB_WPATH_W4A8) prepare_qact(c, x, ldx, w->n_in, w->group, n_tok);
    int nth = rows < 64 ? 1 : c->n_threads;
    uint64_t t0 = prof_begin(c);
    nb_pool_run_n(c->pool, gemm_worker, &j, nth);
    if (c->profiling) {
        struct prof_slot *p = &c->prof[op];
        prof_end(c, op, t0);
        p->t0_ns += j.t0_ns;
        p->threads = nth > p->threads ? nth : p->threads;
        p->float_weights |= any_float;
    }
}

static void matmul(struct nb_ctx *c, enum prof_op op, float *y, int64_t ldy, const float *x,
                   int64_t ldx, const struct nb_weight *w, int n_tok)
{
    struct gemm_one g = {y, ldy, w};
    matmul_n(c, op, 1, &g, x, ldx, n_tok);
}

/* Several GEMMs of one input: fused into one job when their weights are of one kind. */
static void matmul_fused(struct nb_ctx *c, enum prof_op op, int n, const struct gemm_one *g,
                         const float *x, int64_t ldx, int n_tok)
{
    int same = (c->fuse & NB_FUSE_GEMM) != 0;
    for (int i = 1; i < n; i++)
        same &= g[i].w->qpath == g[0].w->qpath && g[i].w->group == g[0].w->group &&
                g[i].w->n_in == g[0].w->n_in;
    if (same) {
        matmul_n(c, op, n, g, x, ldx, n_tok);
        return;
    }
    for (int i = 0; i < n; i++) matmul_n(c, op, 1, &g[i], x, ldx, n_tok);
}

/* ---------------------------------------------------------------- calibration */

static void accum_sq(double *acc, const float *x, int n_tok, int64_t n)
{
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) acc[i] += (double)x[t * n + i] * x[t * n + i];
}

void nb_ctx_set_act_stats(struct nb_ctx *c, struct nb_act_stats *s) { c->stats = s; }

/* ---------------------------------------------------------------- small ops */

static void add_bias(float *y, const float *b, int n_tok, int64_t n)
{
    if (!b) return;
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b[i];
}

static void embed_row(const struct nb_weight *e, int32_t tok, float *out)
{
    int64_t n = e->n_in;
    if (e->qpath == NB_WPATH_W8A16) { /* int8 row with its f32 scale */
        struct nb_layout_planes pl;
        nb_layout_planes(NB_WPATH_W8A16, 0, e->n_out, n, &pl);
        const int8_t *q = (const int8_t *)e->data + pl.offset[0] + (int64_t)tok * n;
        float d;
        memcpy(&d, (const char *)e->data + pl.offset[1] + 4 * (int64_t)tok, 4);
        for (int64_t i = 0; i < n; i++) out[i] = d * (float)q[i];
        return;
    }
    const char *row = (const char *)e->data + (size_t)tok * (size_t)n *
                                                  (e->dtype == NB_DTYPE_F32 ? 4 : 2);
    if (e->dtype == NB_DTYPE_F32) {
        memcpy(out, row, (size_t)n * 4);
    } else {
        const uint16_t *r = (const uint16_t *)row;
        for (int64_t i = 0; i < n; i++)
            out[i] = e->dtype == NB_DTYPE_F16 ? nb_f16_to_f32(r[i]) : nb_bf16_to_f32(r[i]);
    }
}

/* cos/sin of every rotated pair for each token's position. */
static void rope_tables(const struct nb_model *m, const int32_t *pos, int n_tok, float *cs)
{
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

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* ---------------------------------------------------------------- row-wise ops */

/* Element-wise work on whole token rows: RMSNorm (with the pending residual add
 * first, fusion "resid-norm"), the gated activation, and the int8 quantization of the
 * result for a w4a8 GEMM (fusions "norm-quant", "act-quant": each row is quantized
 * while it is still in L1 instead of in a second pass over the batch). Rows are split
 * over the threads when the batch is big enough to pay for the fan-out (prefill);
 * a decode step runs on the calling thread. */
enum rows_kind { ROWS_NORM, ROWS_GLU, ROWS_RESID };

struct rows_job {
    struct nb_ctx *c;
    enum rows_kind kind;
    int n;
    const float *w;  /* ROWS_NORM: the norm weight */
    int resid;       /* ROWS_NORM: x += h before the norm */
    int qgroup;      /* > 0: quantize the output rows with this group */
};

static void rows_worker(void *arg, int ith, int nth)
{
    const struct rows_job *j = arg;
    struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_kernels *k = c->kern;
    int64_t E = cfg->n_embd, F = cfg->n_ff, len = j->kind == ROWS_GLU ? F : E;
    long t0, t1;
    nb_split_range(j->n, ith, nth, 1, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *out;
        if (j->kind == ROWS_GLU) {
            out = c->ff_gate + t * F;
            k->glu(out, out, c->ff_up + t * F, F,
                   cfg->act == NB_ACT_SILU ? NB_GLU_SILU : NB_GLU_GELU_TANH);
        } else {
            float *x = c->x + t * E;
            out = c->h + t * E;
            if (j->resid || j->kind == ROWS_RESID)
                for (int64_t i = 0; i < E; i++) x[i] += out[i];
            if (j->kind == ROWS_RESID) continue;
            k->rmsnorm(out, x, j->w, E, cfg->norm_eps);
        }
        if (j->qgroup > 0)
            k->act_quant_q8(out, len, j->qgroup, c->qa_q + t * c->qa_ld,
                            c->qa_d + t * (c->qa_ld / 32), c->qa_sum + t * (c->qa_ld / 32));
    }
}

static void run_rows(struct nb_ctx *c, enum prof_op op, struct rows_job *j)
{
    const struct nb_config *cfg = &c->model->cfg;
    int64_t len = j->kind == ROWS_GLU ? cfg->n_ff : cfg->n_embd;
    int nth = rows_threads(c, j->n, len);
    uint64_t t0 = prof_begin(c);
    run_split(c, rows_worker, j, nth);
    if (j->qgroup > 0) {
        c->qa_src = j->kind == ROWS_GLU ? c->ff_gate : c->h;
        c->qa_group = j->qgroup;
        c->qa_ntok = j->n;
    } else if (j->kind != ROWS_RESID) {
        c->qa_src = NULL;
    }
    prof_end_threads(c, op, t0, nth);
}

/* x += h (if pending), h = rmsnorm(x) * w, quantized for `next` when it is w4a8 and
 * the fusion is on. */
static void norm_rows(struct nb_ctx *c, int n, const float *w, const struct nb_weight *next)
{
    struct rows_job j = {.c = c, .kind = ROWS_NORM, .n = n, .w = w};
    if (c->resid_pending && (c->fuse & NB_FUSE_RESID_NORM)) {
        j.resid = 1;
    } else if (c->resid_pending) {
        struct rows_job r = {.c = c, .kind = ROWS_RESID, .n = n};
        run_rows(c, OP_RESID, &r);
    }
    c->resid_pending = 0;
    if (next && next->qpath == NB_WPATH_W4A8 && (c->fuse & NB_FUSE_NORM_QUANT))
        j.qgroup = next->group;
    run_rows(c, OP_NORM, &j);
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
        int cap = c->cap[l];
        int64_t slot = (int64_t)j->seq[t] * cap + j->pos[t] % cap;
        memcpy(c->k_cache[l] + slot * kv_dim, c->k + t * kv_dim, sizeof(float) * (size_t)kv_dim);
        memcpy(c->v_cache[l] + slot * kv_dim, c->v + t * kv_dim, sizeof(float) * (size_t)kv_dim);
    }
}

/* ---------------------------------------------------------------- attention */

struct attn_job {
    const struct nb_ctx *c;
    int layer, n_tok;
    const int32_t *pos, *seq;
};

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    const struct nb_ctx *c = j->c;
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_kernels *k = c->kern;
    int hd = cfg->head_dim, H = cfg->n_heads, group = cfg->n_heads / cfg->n_kv_heads;
    int64_t kv_dim = (int64_t)cfg->n_kv_heads * hd, q_dim = (int64_t)H * hd;
    int cap = c->cap[j->layer];
    int window = cfg->layer_sliding[j->layer] ? cfg->sliding_window : 0;
    float scale = 1.0f / sqrtf((float)hd);
    float *scores = c->scratch + ith * c->scratch_stride;
    if (j->n_tok > 1 && group <= NB_ATTN_ROWS) {
        /* Prefill: tiles of (kv head, up to NB_ATTN_ROWS / group consecutive tokens of
         * one sequence), all q heads of the group together, so each K / V row is read
         * once per tile. The tiles are taken kv-head-major, so a thread works through
         * all the token blocks of one head while that head's K / V stay in its L2, and
         * each thread takes a contiguous run of them holding an equal share of the
         * causal cost (a block's tokens times the keys its last token reads). Against
         * the earlier round-robin, block-major order: attention 0.38 -> 0.28 ms per
         * prompt token, pp512 425-435 -> 452-467 tok/s (qwen3-1.7b w4a8, 2 threads,
         * 3 interleaved passes). */
        int KV = cfg->n_kv_heads, tb = NB_ATTN_ROWS / group;
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
                    int64_t base = (int64_t)j->seq[t0] * cap * kv_dim + (int64_t)kvh * hd;
                    int64_t col = (int64_t)kvh * group * hd;
                    k->attn_tile(c->att + t0 * q_dim + col, q_dim, c->q + t0 * q_dim + col,
                                 q_dim, t1 - t0, group, hd, j->pos + t0,
                                 c->k_cache[j->layer] + base, c->v_cache[j->layer] + base,
                                 kv_dim, cap, window, scale, scores);
                }
        return;
    }
    long lo_job, hi_job;
    nb_split_range((long)j->n_tok * H, ith, nth, 1, &lo_job, &hi_job);
    for (long job = lo_job; job < hi_job; job++) {
        int t = (int)(job / H), h = (int)(job % H);
        int s = j->seq[t], p = j->pos[t];
        int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        const float *qv = c->q + t * q_dim + (int64_t)h * hd;
        const float *kc = c->k_cache[j->layer] + (int64_t)s * cap * kv_dim + (h / group) * hd;
        const float *vc = c->v_cache[j->layer] + (int64_t)s * cap * kv_dim + (h / group) * hd;
        for (int i = lo; i <= p; i++)
            scores[i - lo] = k->dot_f32(qv, kc + (int64_t)(i % cap) * kv_dim, hd) * scale;
        nb_softmax(scores, p - lo + 1);
        float *out = c->att + t * q_dim + (int64_t)h * hd;
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int i = lo; i <= p; i++)
            k->axpy_f32(out, scores[i - lo], vc + (int64_t)(i % cap) * kv_dim, hd);
    }
}

/* ---------------------------------------------------------------- one chunk */

static void forward_layer(struct nb_ctx *c, int l, int n, const int32_t *pos, const int32_t *seq)
{
    const struct nb_model *m = c->model;
    const struct nb_config *cfg = &m->cfg;
    const struct nb_layer *L = &m->layers[l];
    int64_t E = cfg->n_embd, hd = cfg->head_dim, H = cfg->n_heads;
    int64_t q_dim = H * hd, kv_dim = (int64_t)cfg->n_kv_heads * hd, F = cfg->n_ff;

    /* attention block */
    norm_rows(c, n, L->attn_norm, &L->wq);
    if (c->stats) accum_sq(c->stats->attn_in + l * E, c->h, n, E);
    struct gemm_one qkv[3] = {{c->q, q_dim, &L->wq}, {c->k, kv_dim, &L->wk}, {c->v, kv_dim, &L->wv}};
    matmul_fused(c, OP_QKV, 3, qkv, c->h, E, n);
    add_bias(c->q, L->bq, n, q_dim);
    add_bias(c->k, L->bk, n, kv_dim);
    add_bias(c->v, L->bv, n, kv_dim);
    struct rope_job rj = {c, l, n, pos, seq};
    uint64_t t0 = prof_begin(c);
    int rth = rows_threads(c, n, q_dim + kv_dim);
    run_split(c, rope_worker, &rj, rth);
    prof_end_threads(c, OP_ROPE_KV, t0, rth);
    struct attn_job aj = {c, l, n, pos, seq};
    t0 = prof_begin(c);
    nb_pool_run(c->pool, attn_worker, &aj);
    prof_end_threads(c, OP_ATTN, t0, c->n_threads);
    c->qa_src = NULL; /* att (and below, h, ff_gate) are rewritten in place */
    if (L->head_gate.data) {
        matmul(c, OP_HEAD_GATE, c->hg, H, c->h, E, &L->head_gate, n);
        for (int t = 0; t < n; t++)
            for (int64_t h = 0; h < H; h++) {
                float g = sigmoid(c->hg[t * H + h]);
                float *a = c->att + t * q_dim + h * hd;
                for (int64_t i = 0; i < hd; i++) a[i] *= g;
            }
    }
    if (c->stats) accum_sq(c->stats->attn_out + l * q_dim, c->att, n, q_dim);
    matmul(c, OP_WO, c->h, E, c->att, q_dim, &L->wo, n); /* h is free again: reuse for a Wo */
    add_bias(c->h, L->bo, n, E);
    c->resid_pending = 1;

    /* MLP block */
    norm_rows(c, n, L->ffn_norm, &L->w_gate);
    if (c->stats) accum_sq(c->stats->ffn_in + l * E, c->h, n, E);
    struct gemm_one gu[2] = {{c->ff_gate, F, &L->w_gate}, {c->ff_up, F, &L->w_up}};
    matmul_fused(c, OP_FFN_UP, 2, gu, c->h, E, n);
    struct rows_job aj2 = {.c = c, .kind = ROWS_GLU, .n = n};
    if (L->w_down.qpath == NB_WPATH_W4A8 && (c->fuse & NB_FUSE_ACT_QUANT))
        aj2.qgroup = L->w_down.group;
    run_rows(c, OP_ACT, &aj2);
    if (c->stats) accum_sq(c->stats->ffn_mid + l * F, c->ff_gate, n, F);
    matmul(c, OP_FFN_DOWN, c->h, E, c->ff_gate, F, &L->w_down, n);
    c->resid_pending = 1;
}

/* Run tokens [0, n) of a chunk; write logits for rows with want[t] to `logits`. */
static void forward_chunk(struct nb_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                          const int32_t *seq, const uint8_t *want, float *logits, int *n_out)
{
    const struct nb_model *m = c->model;
    const struct nb_config *cfg = &m->cfg;
    int64_t E = cfg->n_embd;
    uint64_t t0 = prof_begin(c);
    for (int t = 0; t < n; t++) embed_row(&m->tok_embd, tok[t], c->x + t * E);
    c->resid_pending = 0; /* x is the embeddings: nothing to add yet */
    rope_tables(m, pos, n, c->rope_cs);
    prof_end(c, OP_EMBED, t0);
    if (c->profiling) c->prof_tokens += n;
    for (int l = 0; l < cfg->n_layers; l++) forward_layer(c, l, n, pos, seq);

    if (c->resid_pending) { /* the last block's output */
        struct rows_job r = {.c = c, .kind = ROWS_RESID, .n = n};
        run_rows(c, OP_RESID, &r);
        c->resid_pending = 0;
    }
    int rows = 0;
    c->qa_src = NULL;
    for (int t = 0; t < n; t++)
        if (want[t]) {
            c->kern->rmsnorm(c->h + rows * E, c->x + t * E, m->out_norm, E, cfg->norm_eps);
            rows++;
        }
    if (c->stats) {
        accum_sq(c->stats->out_in, c->h, rows, E);
        c->stats->n_tokens += n;
    }
    if (rows)
        matmul(c, OP_OUTPUT, logits + (int64_t)*n_out * cfg->n_vocab, cfg->n_vocab, c->h, E,
               &m->output, rows);
    *n_out += rows;
}

/* ---------------------------------------------------------------- public API */

struct nb_ctx_params nb_ctx_default_params(void)
{
    struct nb_ctx_params p = {.n_ctx = 0, .n_seq = 1, .n_batch = 512, .n_threads = 0};
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
    if (c->k_cache)
        for (int l = 0; l < c->model->cfg.n_layers; l++) {
            free(c->k_cache[l]);
            free(c->v_cache[l]);
        }
    free(c->k_cache);
    free(c->v_cache);
    free(c->cap);
    free(c->seq_len);
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
    free(c->chunk_rows);
    free(c->qa_q);
    free(c->qa_d);
    free(c->qa_sum);
    free(c);
}

enum nb_status nb_ctx_init(struct nb_ctx **out, const struct nb_model *m,
                           const struct nb_ctx_params *params)
{
    *out = NULL;
    struct nb_ctx_params p = params ? *params : nb_ctx_default_params();
    const struct nb_config *cfg = &m->cfg;
    if (p.n_ctx <= 0) p.n_ctx = cfg->n_ctx_train < 4096 ? cfg->n_ctx_train : 4096;
    if (p.n_seq <= 0) p.n_seq = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_threads <= 0) p.n_threads = nb_cpu_count();
    if (p.n_ctx > (1 << 24) || p.n_seq > 4096 || p.n_batch > 65536 || p.n_threads > 1024)
        return nb_set_error(NB_ERR_INVALID_ARG, "context: n_ctx %d / n_seq %d / n_batch %d / "
                            "threads %d out of range", p.n_ctx, p.n_seq, p.n_batch, p.n_threads);
    if (p.n_ctx > cfg->n_ctx_train)
        NB_LOGW("context of %d tokens is longer than the model was trained for (%d)", p.n_ctx,
                cfg->n_ctx_train);
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;

    struct nb_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_set_error(NB_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->kern = nb_kernels_get();
    c->fuse = fuse_from_env();
    c->n_ctx = p.n_ctx;
    c->n_seq = p.n_seq;
    c->n_batch = p.n_batch;
    c->n_threads = p.n_threads;
    enum nb_status st = nb_pool_init(&c->pool, p.n_threads, p.pin);
    if (st) goto fail;

    int fail = 0;
    int64_t B = p.n_batch, E = cfg->n_embd, hd = cfg->head_dim;
    int64_t q_dim = (int64_t)cfg->n_heads * hd, kv_dim = (int64_t)cfg->n_kv_heads * hd;
    c->cap = ctx_alloc(&fail, (size_t)cfg->n_layers, sizeof(int));
    c->k_cache = ctx_alloc(&fail, (size_t)cfg->n_layers, sizeof(float *));
    c->v_cache = ctx_alloc(&fail, (size_t)cfg->n_layers, sizeof(float *));
    c->seq_len = ctx_alloc(&fail, (size_t)p.n_seq, sizeof(int));
    if (fail) goto oom;
    int64_t kv_bytes = 0;
    for (int l = 0; l < cfg->n_layers; l++) {
        int cap = p.n_ctx;
        if (cfg->layer_sliding[l] && (int64_t)cfg->sliding_window + p.n_batch - 1 < cap)
            cap = cfg->sliding_window + p.n_batch - 1;
        c->cap[l] = cap;
        size_t n = (size_t)p.n_seq * (size_t)cap * (size_t)kv_dim;
        c->k_cache[l] = ctx_alloc(&fail, n, sizeof(float));
        c->v_cache[l] = ctx_alloc(&fail, n, sizeof(float));
        kv_bytes += 2 * (int64_t)n * 4;
    }
    int64_t F = cfg->n_ff;
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
    c->chunk_rows = ctx_alloc(&fail, (size_t)B, sizeof(int));
    /* per-thread scratch: a converted weight row (largest n_in) or attention scores */
    int64_t need = E > F ? E : F;
    if (q_dim > need) need = q_dim;
    if (p.n_ctx > need) need = p.n_ctx;
    if (NB_ATTN_SCRATCH(hd) > need) need = NB_ATTN_SCRATCH(hd); /* attention tile */
    c->scratch_stride = (need + 15) & ~(int64_t)15;
    int64_t max_in = E > F ? E : F;
    if (q_dim > max_in) max_in = q_dim;
    c->qa_ld = (max_in + 127) & ~(int64_t)127;
    c->qa_q = ctx_alloc(&fail, (size_t)(B * c->qa_ld), 1);
    c->qa_d = ctx_alloc(&fail, (size_t)(B * c->qa_ld / 32), sizeof(float));
    c->qa_sum = ctx_alloc(&fail, (size_t)(B * c->qa_ld / 32), sizeof(int32_t));
    c->scratch = ctx_alloc(&fail, (size_t)(c->scratch_stride * p.n_threads), sizeof(float));
    if (fail) goto oom;
    NB_LOGI("context: %d tokens x %d sequences, batch %d, %d threads, KV cache %.1f MiB (f32)",
            p.n_ctx, p.n_seq, p.n_batch, p.n_threads, (double)kv_bytes / (1 << 20));
    *out = c;
    return NB_OK;
oom:
    st = nb_set_error(NB_ERR_NOMEM, "context: out of memory (n_ctx %d, n_seq %d, n_batch %d)",
                      p.n_ctx, p.n_seq, p.n_batch);
fail:
    nb_ctx_free(c);
    return st;
}

void nb_ctx_clear_seq(struct nb_ctx *c, int seq)
{
    if (seq >= 0 && seq < c->n_seq) c->seq_len[seq] = 0;
}

const struct nb_model *nb_ctx_model(const struct nb_ctx *c) { return c->model; }

enum nb_status nb_ctx_truncate_seq(struct nb_ctx *c, int seq, int n)
{
    if (seq < 0 || seq >= c->n_seq || n < 0 || n > c->seq_len[seq])
        return nb_set_error(NB_ERR_INVALID_ARG, "truncate: sequence %d has %d tokens, not %d",
                            seq, seq >= 0 && seq < c->n_seq ? c->seq_len[seq] : 0, n);
    const struct nb_config *cfg = &c->model->cfg;
    /* A ring of cap slots: positions [len - cap, len) are held. Position n needs keys
     * down to n - window + 1. */
    for (int l = 0; l < cfg->n_layers; l++)
        if (cfg->layer_sliding[l] && c->cap[l] < c->n_ctx &&
            n - cfg->sliding_window + 1 < c->seq_len[seq] - c->cap[l] && n > 0)
            return nb_set_error(NB_ERR_RANGE, "truncate: layer %d's window no longer holds the "
                                "keys position %d needs", l, n);
    c->seq_len[seq] = n;
    return NB_OK;
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
    for (int i = 0; i < OP_COUNT && n < max; i++) {
        const struct prof_slot *p = &c->prof[i];
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
    return seq >= 0 && seq < c->n_seq ? c->seq_len[seq] : 0;
}

/* Check the whole batch before touching the cache, so a bad batch changes nothing. */
static enum nb_status check_batch(const struct nb_ctx *c, const struct nb_batch *b)
{
    if (!b || b->n_tokens <= 0 || !b->token || !b->pos)
        return nb_set_error(NB_ERR_INVALID_ARG, "decode: empty batch");
    int *next = calloc((size_t)c->n_seq, sizeof(int));
    if (!next) return nb_set_error(NB_ERR_NOMEM, "decode: out of memory");
    memcpy(next, c->seq_len, sizeof(int) * (size_t)c->n_seq);
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
        forward_chunk(c, n, b->token + i0, b->pos + i0, seq + i0, want + i0, logits, &n_out);
        for (int t = 0; t < n; t++) c->seq_len[seq[i0 + t]] = b->pos[i0 + t] + 1;
    }
    free(seq0);
    free(last);
    return NB_OK;
}
