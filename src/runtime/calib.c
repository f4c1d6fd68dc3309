/* runtime/calib.c — calibration passes for quantize (runtime/calib.h). */
#include "runtime/calib.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mmap.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include "quant/dequant.h"
#include "quant/gptq.h"
#include "quant/kq_repack.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "runtime/model_tokenizer.h"
#include "runtime/recipe.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- tokens */

enum nb_status nb_calib_load(struct nb_calib *out, const char *text_path, const struct nb_model *m,
                             int max_tokens)
{
    memset(out, 0, sizeof *out);
    struct nb_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len;
    enum nb_status st;
    if ((st = nb_file_read_all(text_path, 256u << 20, &text, &len))) goto done;
    if ((st = nb_tokenizer_for_source(&tok, nb_model_source(m)))) goto done;
    if ((st = nb_tokenize(tok, text, len, 1, 0, &out->ids, &out->n))) goto done;
    if (max_tokens > 0 && out->n > max_tokens) out->n = max_tokens;
    out->chunk = m->cfg.n_ctx_train < 512 ? m->cfg.n_ctx_train : 512;
    if (out->n == 0)
        st = nb_set_error(NB_ERR_INVALID_ARG, "quantize: %s gives no calibration tokens",
                          text_path);
done:
    free(text);
    nb_tokenizer_free(tok);
    if (st) nb_calib_free(out);
    return st;
}

void nb_calib_free(struct nb_calib *c)
{
    free(c->ids);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- squared activations */

enum nb_status nb_act_stats_init(struct nb_act_stats *s, const struct nb_config *c)
{
    int64_t L = c->n_layers, Q = (int64_t)c->n_heads * c->head_dim;
    memset(s, 0, sizeof *s);
    s->attn_in = calloc((size_t)(L * c->n_embd), sizeof(double));
    s->attn_out = calloc((size_t)(L * Q), sizeof(double));
    s->ffn_in = calloc((size_t)(L * c->n_embd), sizeof(double));
    s->ffn_mid = calloc((size_t)(L * c->n_ff), sizeof(double));
    s->out_in = calloc((size_t)c->n_embd, sizeof(double));
    if (s->attn_in && s->attn_out && s->ffn_in && s->ffn_mid && s->out_in) return NB_OK;
    nb_act_stats_free(s);
    return nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for calibration sums");
}

void nb_act_importance(const double *sum, int64_t n, int64_t n_tokens, float *out)
{
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += sum[i];
    mean /= (double)n * (double)n_tokens;
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)(sum[i] / (double)n_tokens + 1e-3 * mean + 1e-12);
}

void nb_act_stats_free(struct nb_act_stats *s)
{
    free(s->attn_in), free(s->attn_out), free(s->ffn_in), free(s->ffn_mid), free(s->out_in);
    memset(s, 0, sizeof *s);
}

/* Add sum_t x[t][i]^2 at the site's row of sums. */
static void sum_squares(struct nb_act_stats *s, enum nb_site site, int layer, const float *x,
                        int n, int64_t len)
{
    double *acc = site == NB_SITE_ATTN_IN    ? s->attn_in + layer * len
                  : site == NB_SITE_ATTN_OUT ? s->attn_out + layer * len
                  : site == NB_SITE_FFN_IN   ? s->ffn_in + layer * len
                  : site == NB_SITE_FFN_MID  ? s->ffn_mid + layer * len
                                             : s->out_in;
    for (int t = 0; t < n; t++)
        for (int64_t i = 0; i < len; i++) acc[i] += (double)x[t * len + i] * x[t * len + i];
    if (site == NB_SITE_OUT_IN) s->n_tokens += n;
}

static void stats_observer(void *user, enum nb_site site, int layer, const float *x, int n,
                           int64_t len)
{
    sum_squares(user, site, layer, x, n, len);
}

enum nb_status nb_calib_stats(const struct nb_model *m, const struct nb_calib *cal, int n_threads,
                              struct nb_act_stats *s)
{
    struct nb_ctx *ctx = NULL;
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = cal->chunk;
    cp.n_threads = n_threads;
    enum nb_status st = nb_ctx_init(&ctx, m, &cp);
    if (st) return st;
    int chunk = cal->chunk;
    float *logits = malloc(sizeof(float) * (size_t)chunk * (size_t)m->cfg.n_vocab);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)chunk);
    uint8_t *want = malloc((size_t)chunk);
    if (!logits || !pos || !want) {
        st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    memset(want, 1, (size_t)chunk);
    for (int i = 0; i < chunk; i++) pos[i] = i;
    nb_ctx_set_observer(ctx, stats_observer, s);
    for (int i = 0; i < cal->n && st == NB_OK; i += chunk) {
        int n = cal->n - i < chunk ? cal->n - i : chunk;
        nb_ctx_clear_seq(ctx, 0);
        struct nb_batch b = {.n_tokens = n, .token = cal->ids + i, .pos = pos, .want_logits = want};
        st = nb_decode(ctx, &b, logits);
    }
    NB_LOGI("quantize: calibrated on %lld tokens", (long long)s->n_tokens);
done:
    free(logits), free(pos), free(want);
    nb_ctx_free(ctx);
    return st;
}

/* ---------------------------------------------------------------- GPTQ, layer by layer */

/* The matrices of a layer and the site whose inputs they read. */
enum { SLOT_Q, SLOT_K, SLOT_V, SLOT_GATE_HEAD, SLOT_O, SLOT_FFN_GATE, SLOT_UP, SLOT_DOWN,
       N_SLOTS };
static const enum nb_site k_slot_site[N_SLOTS] = {
    NB_SITE_ATTN_IN, NB_SITE_ATTN_IN, NB_SITE_ATTN_IN, NB_SITE_ATTN_IN,
    NB_SITE_ATTN_OUT, NB_SITE_FFN_IN, NB_SITE_FFN_IN, NB_SITE_FFN_MID};

/* ... and their class in a recipe (a Spark head gate goes with q) */
static const enum nb_tclass k_slot_class[N_SLOTS] = {
    NB_TC_Q, NB_TC_K, NB_TC_V, NB_TC_Q, NB_TC_O, NB_TC_GATE, NB_TC_UP, NB_TC_DOWN};

static struct nb_weight *slot_weight(struct nb_layer *L, int slot)
{
    struct nb_weight *w[N_SLOTS] = {&L->wq, &L->wk, &L->wv, &L->head_gate,
                                    &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return w[slot];
}

struct hess {
    int layer;                     /* the layer whose sites are summed; -1: none */
    double *h[NB_SITE_COUNT];      /* [dim][dim], upper triangle summed */
    int64_t dim[NB_SITE_COUNT];
    double *buf;                   /* [chunk][widest dim] */
    struct nb_act_stats *stats;
    int blas_threads;              /* BLAS threads for the products here */
    double *t_hessian;             /* seconds spent here */
};

/* H[site] += X^T X (upper triangle), and the squared-activation sums. In double (a
 * float product per chunk was 2x faster, ~1.5 s a layer on the 1.7 B shape, but moved
 * kjv-7m's GPTQ KL from 0.000705 to 0.000708). */
static void accumulate(struct hess *g, enum nb_site site, int layer, const float *x, int n,
                       int64_t len)
{
    if (n == 0) return;
    double t0 = nb_time_s();
    for (int64_t i = 0; i < (int64_t)n * len; i++) g->buf[i] = x[i];
    int blas = openblas_get_num_threads();
    openblas_set_num_threads(g->blas_threads);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)len, n, 1.0, g->buf, (int)len, 1.0,
                g->h[site], (int)len);
    openblas_set_num_threads(blas);
    sum_squares(g->stats, site, layer, x, n, len);
    *g->t_hessian += nb_time_s() - t0;
}

/* The calibration's float passes: f32 weights through BLAS (the engine's float GEMM is a
 * dot product per row and token, built for decode). A nb_gemm_op for the context's
 * threads, each on its own rows, so BLAS runs one thread per call during these passes. */
static void gemm_f32_blas(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch)
{
    (void)scratch;
    const float *w = a->w;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n_tok, (int)(r1 - r0), (int)a->n_in,
                1.0f, a->x, (int)a->ldx, w + r0 * a->n_in, (int)a->n_in, 0.0f, a->y + r0,
                (int)a->ldy);
}

/* The float pass of layer g->layer: its sites only. */
static void hess_observer(void *user, enum nb_site site, int layer, const float *x, int n,
                          int64_t len)
{
    struct hess *g = user;
    if (layer == g->layer && site != NB_SITE_OUT_IN) accumulate(g, site, layer, x, n, len);
}

static void symmetrize(double *h, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++) h[i * n + j] = h[j * n + i];
}

/* A GGUF source's block rows as stored (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, IQ4_NL, IQ4_XS),
 * and their type. */
static int is_kquant(const struct nb_weight *w)
{
    struct nb_block_info bi;
    return nb_wformat_block(w->format, &bi) && w->format == bi.rows;
}

static enum nb_dtype block_dtype(enum nb_wformat f)
{
    switch (f) {
    case NB_WF_Q4_K: return NB_DTYPE_Q4_K;
    case NB_WF_Q5_K: return NB_DTYPE_Q5_K;
    case NB_WF_Q6_K: return NB_DTYPE_Q6_K;
    case NB_WF_Q4_0: return NB_DTYPE_Q4_0;
    case NB_WF_IQ4_NL: return NB_DTYPE_IQ4_NL;
    case NB_WF_IQ4_XS: return NB_DTYPE_IQ4_XS;
    default: return NB_DTYPE_Q8_0;
    }
}

static enum nb_status check_plain(const struct nb_weight *w)
{
    const struct nb_wformat_info *fi = nb_wformat_info(w->format);
    if (!fi->plain && !is_kquant(w))
        return nb_set_error(NB_ERR_UNSUPPORTED, "quantize: the source is already packed "
                            "(%s); quantize from the float checkpoint", nb_wpath_name(fi->path));
    return NB_OK;
}

enum nb_status nb_weight_rows_f32(const struct nb_weight *w, int64_t r0, int64_t r1, float *buf,
                                  const float **out)
{
    enum nb_status st = check_plain(w);
    if (st) return st;
    if (w->format == NB_WF_F32) {
        *out = (const float *)w->data + r0 * w->n_in;
        return NB_OK;
    }
    if (is_kquant(w)) { /* a GGUF source's block rows: llama.cpp's values */
        struct nb_layout_planes pl;
        nb_wformat_planes(w->format, 0, w->n_out, w->n_in, &pl);
        const uint8_t *src = (const uint8_t *)w->data + pl.total / w->n_out * r0;
        st = nb_dequant(block_dtype(w->format), src, buf,
                        (r1 - r0) * w->n_in);
        if (!st) *out = buf;
        return st;
    }
    const uint8_t *src = (const uint8_t *)w->data + 2 * r0 * w->n_in;
    st = nb_dequant(w->format == NB_WF_F16 ? NB_DTYPE_F16 : NB_DTYPE_BF16, src, buf,
                    (r1 - r0) * w->n_in);
    if (!st) *out = buf;
    return st;
}

/* A matrix of the source as f32 rows: in place when it is f32, else converted. */
enum nb_status nb_weight_f32(const struct nb_weight *w, const float **out, float **owned)
{
    *owned = NULL;
    enum nb_status st = check_plain(w);
    if (st) return st;
    if (w->format == NB_WF_F32) {
        *out = w->data;
        return NB_OK;
    }
    float *f = malloc(sizeof(float) * (size_t)(w->n_out * w->n_in));
    if (!f) return nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
    if ((st = nb_weight_rows_f32(w, 0, w->n_out, f, out))) {
        free(f);
        return st;
    }
    *owned = f;
    return NB_OK;
}

/* sqrt(sum (w - w^)^2 / sum w^2) of a ROWS blob. */
static double rel_rms(enum nb_wpath path, int group, const void *blob, const float *w,
                      int64_t n_out, int64_t n_in)
{
    float *row = malloc(sizeof(float) * (size_t)n_in);
    double err = 0, ref = 0;
    if (!row) return 0;
    for (int64_t r = 0; r < n_out; r++) {
        nb_dequantize_rows(path, group, blob, n_out, n_in, r, r + 1, row);
        for (int64_t i = 0; i < n_in; i++) {
            double d = (double)w[r * n_in + i] - row[i];
            err += d * d;
            ref += (double)w[r * n_in + i] * w[r * n_in + i];
        }
    }
    free(row);
    return ref > 0 ? sqrt(err / ref) : 0;
}

/* Seconds per phase of nb_gptq_model (logged at the end; per layer at debug level). */
struct gptq_times {
    double float_pass, hessian, factor, search, sweep, other, quant_pass;
};

/* GPTQ one matrix into a prequant entry (X16 when asked and the shape allows), with the
 * factor of its input's Hessian. */
static enum nb_status gptq_one(const struct nb_weight *w, const float *rows, enum nb_wpath path,
                               int group, const struct nb_gptq_opts *o, const struct nb_gptq_factor *f,
                               struct nb_prequant *pq, struct gptq_times *t)
{
    struct nb_layout_planes pl;
    enum nb_status st;
    if (!nb_layout_planes(path, group, w->n_out, w->n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: a [%lld, %lld] matrix does not fit %s "
                            "with groups of %d", (long long)w->n_out, (long long)w->n_in,
                            nb_wpath_name(path), group);
    const float *wf = rows; /* w as f32 rows when the caller has them */
    float *conv = NULL;
    if (!wf && (st = nb_weight_f32(w, &wf, &conv))) return st;
    void *blob = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
    if (!blob) {
        free(conv);
        return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory");
    }
    struct nb_gptq_params gp = nb_gptq_default_params();
    gp.act_order = o->act_order;
    gp.search = o->search;
    gp.n_threads = o->n_threads > 0 ? o->n_threads : nb_cpu_count();
    if (o->damp > 0) gp.damp = o->damp;
    /* no proxy-loss statistics (H NULL): two more n_out x n_in^2 products, a minute on a
     * large head; tests ask nb_gptq_quantize for them directly */
    struct nb_gptq_stats gs = {0};
    st = nb_gptq_quantize_factored(path, group, wf, w->n_out, w->n_in, f, NULL, &gp, blob, &gs);
    t->search += gs.seconds_search;
    t->sweep += gs.seconds_sweep;
    if (!st) pq->rel_rms = rel_rms(path, group, blob, wf, w->n_out, w->n_in);
    free(conv);
    enum nb_layout layout = NB_LAYOUT_ROWS;
    if (!st && o->layout == NB_LAYOUT_X16 && w->n_out % 16 == 0) {
        void *x16 = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
        if (!x16) {
            st = nb_set_error(NB_ERR_NOMEM, "gptq: out of memory");
        } else if ((st = nb_repack_x16(path, group, blob, x16, w->n_out, w->n_in, 0))) {
            free(x16);
        } else {
            free(blob);
            blob = x16;
            layout = NB_LAYOUT_X16;
        }
    }
    if (st) {
        free(blob);
        return st;
    }
    pq->w = w;
    pq->q = *w;
    nb_wformat_of(path, layout, &pq->q.format);
    pq->q.group = group;
    pq->q.data = blob;
    return NB_OK;
}

/* GPTQ one matrix onto a block format's grid (rows_fmt: Q6_K or Q8_0 rows) into a
 * prequant entry holding its X16 records, as quantize's add_block would store them. */
static enum nb_status gptq_one_block(const struct nb_weight *w, const float *rows,
                                     enum nb_wformat rows_fmt, const struct nb_gptq_opts *o,
                                     const struct nb_gptq_factor *f, struct nb_prequant *pq,
                                     struct gptq_times *t)
{
    struct nb_block_info bi;
    struct nb_layout_planes rl, pl;
    enum nb_status st;
    if (!nb_wformat_block(rows_fmt, &bi) || !nb_wformat_planes(bi.rows, 0, w->n_out, w->n_in, &rl) ||
        !nb_wformat_planes(bi.x16, 0, w->n_out, w->n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: a [%lld, %lld] matrix does not fit %s",
                            (long long)w->n_out, (long long)w->n_in, bi.dtype);
    const float *wf = rows;
    float *conv = NULL;
    if (!wf && (st = nb_weight_f32(w, &wf, &conv))) return st;
    void *blocks = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)rl.total);
    void *x16 = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
    if (!blocks || !x16) {
        free(conv), free(blocks), free(x16);
        return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory");
    }
    struct nb_gptq_params gp = nb_gptq_default_params();
    gp.n_threads = o->n_threads > 0 ? o->n_threads : nb_cpu_count();
    struct nb_gptq_stats gs = {0};
    st = nb_gptq_quantize_blocks(bi.rows, wf, w->n_out, w->n_in, f, &gp, blocks, &gs);
    t->search += gs.seconds_search;
    t->sweep += gs.seconds_sweep;
    free(conv);
    if (!st) st = nb_kq_repack_x16(bi.x16, blocks, w->n_out, w->n_in, 0, w->n_out / 16, x16);
    free(blocks);
    if (st) {
        free(x16);
        return st;
    }
    pq->w = w;
    pq->q = *w;
    pq->q.format = bi.x16;
    pq->q.group = nb_wformat_act_group(bi.x16, 0);
    pq->q.data = x16;
    pq->rel_rms = 0; /* as quantize reports a block matrix */
    return NB_OK;
}

/* Where GPTQ's passes keep their state. */
struct gptq_run {
    struct nb_model *m;
    const struct nb_calib *cal;
    const struct nb_gptq_opts *o;
    struct nb_ctx *ctx;
    struct hess g;
    float *xs;  /* [cal->n][n_embd]: every calibration token's residual stream */
    float *tmp; /* [chunk][n_embd] */
    struct nb_prequant *pq;
    struct nb_weight *saved; /* the replaced matrices, to restore */
    int n_pq;
    struct gptq_times t;
    struct nb_kernels kern_float; /* the machine's table, f32 GEMMs through BLAS */
    const float *rows[N_SLOTS];   /* the current layer's matrices as f32 */
    float *owned[N_SLOTS];        /* those converted here */
    int64_t done, total;          /* progress: steps (a pass, a matrix) */
};

static void tick(struct gptq_run *r)
{
    r->done++;
    if (r->o->progress) r->o->progress(r->done, r->total, r->o->user);
}

int nb_gptq_tokens(const struct nb_model *m, const struct nb_calib *cal, int asked)
{
    if (asked > 0) return cal->n < asked ? cal->n : asked;
    int64_t per_layer = 0;
    for (int slot = 0; m->cfg.n_layers > 0 && slot < N_SLOTS; slot++) {
        const struct nb_weight *w = slot_weight(&m->layers[0], slot);
        if (w->data) per_layer += w->n_out * w->n_in;
    }
    int64_t cap = per_layer > 0 ? NB_GPTQ_TOKEN_WORK / per_layer : cal->n;
    cap = cap / cal->chunk * cal->chunk; /* whole chunks, at least one */
    if (cap < cal->chunk) cap = cal->chunk;
    return cal->n < cap ? cal->n : (int)cap;
}

/* Run layer l over every chunk: on a copy (observed: the float pass that sums the
 * Hessians) or in place (the quantized pass that feeds the next layer). */
static enum nb_status run_layer_all(struct gptq_run *r, int l, int in_place)
{
    const struct nb_calib *cal = r->cal;
    int64_t E = r->m->cfg.n_embd;
    enum nb_status st = NB_OK;
    for (int i = 0; i < cal->n && st == NB_OK; i += cal->chunk) {
        int n = cal->n - i < cal->chunk ? cal->n - i : cal->chunk;
        float *x = r->xs + (int64_t)i * E;
        if (!in_place) {
            memcpy(r->tmp, x, sizeof(float) * (size_t)(n * E));
            x = r->tmp;
        }
        st = nb_ctx_run_layer(r->ctx, l, x, n);
    }
    return st;
}

/* GPTQ parameters for a site's factor (damp and act_order matter). */
static struct nb_gptq_params factor_params(const struct nb_gptq_opts *o)
{
    struct nb_gptq_params gp = nb_gptq_default_params();
    gp.act_order = o->act_order;
    if (o->damp > 0) gp.damp = o->damp;
    return gp;
}

/* Quantize one matrix with the factor of its site's Hessian; put the result in the model. */
static enum nb_status quantize_in_place(struct gptq_run *r, struct nb_weight *w,
                                        const float *rows, enum nb_wpath path, int group,
                                        enum nb_wformat block, const struct nb_gptq_factor *f)
{
    struct nb_prequant *pq = &r->pq[r->n_pq];
    double t0 = nb_time_s(), s0 = r->t.search + r->t.sweep;
    enum nb_status st = block != NB_WF_COUNT ? gptq_one_block(w, rows, block, r->o, f, pq, &r->t)
                                             : gptq_one(w, rows, path, group, r->o, f, pq, &r->t);
    r->t.other += nb_time_s() - t0 - (r->t.search + r->t.sweep - s0);
    if (st) return st;
    r->saved[r->n_pq++] = *w;
    *w = pq->q;
    pq->w = w;
    return NB_OK;
}

/* The factor of a site's Hessian (symmetrized first), timed. */
static enum nb_status site_factor(struct gptq_run *r, int site, struct nb_gptq_factor *f)
{
    double t0 = nb_time_s();
    symmetrize(r->g.h[site], r->g.dim[site]);
    struct nb_gptq_params gp = factor_params(r->o);
    enum nb_status st = nb_gptq_factor_init(f, r->g.h[site], r->g.dim[site], &gp);
    r->t.factor += nb_time_s() - t0;
    return st;
}

static enum nb_status gptq_layer(struct gptq_run *r, int l)
{
    struct nb_layer *L = &r->m->layers[l];
    enum nb_status st;
    for (int s = 0; s < NB_SITE_OUT_IN; s++)
        memset(r->g.h[s], 0, sizeof(double) * (size_t)(r->g.dim[s] * r->g.dim[s]));
    /* the float pass on f32 copies of the layer's matrices (made once; GPTQ reads them
     * too), with BLAS GEMMs, one BLAS thread per context thread */
    double t0 = nb_time_s(), h0 = r->t.hessian;
    struct nb_weight orig[N_SLOTS];
    for (int slot = 0; slot < N_SLOTS; slot++) {
        struct nb_weight *w = slot_weight(L, slot);
        orig[slot] = *w;
        r->rows[slot] = NULL;
        if (!w->data) continue;
        if ((st = nb_weight_f32(w, &r->rows[slot], &r->owned[slot]))) {
            while (slot-- > 0) *slot_weight(L, slot) = orig[slot];
            return st;
        }
        w->format = NB_WF_F32;
        w->data = r->rows[slot];
    }
    int blas = openblas_get_num_threads();
    openblas_set_num_threads(1);
    nb_ctx_set_kernels(r->ctx, &r->kern_float);
    r->g.layer = l;
    st = run_layer_all(r, l, 0);
    r->g.layer = -1;
    nb_ctx_set_kernels(r->ctx, NULL);
    openblas_set_num_threads(blas);
    for (int slot = 0; slot < N_SLOTS; slot++) *slot_weight(L, slot) = orig[slot];
    r->t.float_pass += nb_time_s() - t0 - (r->t.hessian - h0);
    if (st) return st;
    tick(r);
    /* the slots of a site are adjacent: one factor per site */
    struct nb_gptq_factor f = {0};
    int site = -1;
    for (int slot = 0; slot < N_SLOTS && !st; slot++) {
        struct nb_weight *w = slot_weight(L, slot);
        if (!w->data) continue;
        int bits = r->o->recipe ? r->o->recipe->bits[l][k_slot_class[slot]] : 4;
        enum nb_wformat block = bits == 4 ? NB_WF_COUNT
                                          : nb_recipe_block_of(r->m, r->o->path, w, bits, 1);
        if (bits != 4 && block == NB_WF_COUNT) {
            tick(r); /* left to quantize (bf16; a checkpoint's codes; int8 rows) */
            continue;
        }
        if ((int)k_slot_site[slot] != site) {
            nb_gptq_factor_free(&f);
            site = (int)k_slot_site[slot];
            if ((st = site_factor(r, site, &f))) break;
        }
        st = quantize_in_place(r, w, r->rows[slot], r->o->path, r->o->group, block, &f);
        if (!st) tick(r);
    }
    nb_gptq_factor_free(&f);
    for (int slot = 0; slot < N_SLOTS; slot++) {
        free(r->owned[slot]);
        r->owned[slot] = NULL;
    }
    if (st) return st;
    t0 = nb_time_s();
    st = run_layer_all(r, l, 1);
    r->t.quant_pass += nb_time_s() - t0;
    if (!st) tick(r);
    const struct gptq_times *t = &r->t;
    NB_LOGD("gptq: after layer %d: float pass %.1f s, Hessians %.1f, factors %.1f, scale search "
            "%.1f, sweep %.1f, other %.1f, quantized pass %.1f", l, t->float_pass, t->hessian,
            t->factor, t->search, t->sweep, t->other, t->quant_pass);
    return st;
}

/* The head's input: the final norm of every token; its Hessian and sums. */
static enum nb_status gptq_head(struct gptq_run *r)
{
    const struct nb_model *m = r->m;
    const struct nb_kernels *k = nb_kernels_get();
    int64_t E = m->cfg.n_embd;
    double *h = r->g.h[NB_SITE_OUT_IN];
    memset(h, 0, sizeof(double) * (size_t)(E * E));
    for (int i = 0; i < r->cal->n; i += r->cal->chunk) {
        int n = r->cal->n - i < r->cal->chunk ? r->cal->n - i : r->cal->chunk;
        for (int t = 0; t < n; t++)
            k->rmsnorm(r->tmp + t * E, r->xs + (int64_t)(i + t) * E, m->out_norm, E,
                       m->cfg.norm_eps);
        accumulate(&r->g, NB_SITE_OUT_IN, -1, r->tmp, n, E);
    }
    const enum nb_wformat hb = nb_wformat_is_kquant(r->o->head_block) ? r->o->head_block
                                                                      : NB_WF_COUNT;
    if (!nb_wpath_is_int4(r->o->head_path) && hb == NB_WF_COUNT) {
        symmetrize(h, E);
        return NB_OK;
    }
    struct nb_gptq_factor f;
    enum nb_status st = site_factor(r, NB_SITE_OUT_IN, &f);
    int group = r->o->recipe && r->o->recipe->head_group ? r->o->recipe->head_group : r->o->group;
    if (!st)
        st = quantize_in_place(r, &r->m->output, NULL, r->o->head_path, group, hb, &f);
    nb_gptq_factor_free(&f);
    return st;
}

static enum nb_status gptq_setup(struct gptq_run *r, struct nb_act_stats *s)
{
    const struct nb_config *c = &r->m->cfg;
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim, F = c->n_ff;
    int64_t dims[NB_SITE_COUNT] = {E, Q, E, F, E}, widest = 0;
    int cap = c->n_layers * N_SLOTS + 1;
    r->g.layer = -1;
    r->g.stats = s;
    r->g.t_hessian = &r->t.hessian;
    for (int i = 0; i < NB_SITE_COUNT; i++) {
        r->g.dim[i] = dims[i];
        r->g.h[i] = malloc(sizeof(double) * (size_t)(dims[i] * dims[i]));
        widest = dims[i] > widest ? dims[i] : widest;
        if (!r->g.h[i]) return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory for Hessians");
    }
    r->g.buf = malloc(sizeof(double) * (size_t)(r->cal->chunk * widest));
    r->g.blas_threads = r->o->n_threads > 0 ? r->o->n_threads : nb_cpu_count();
    r->kern_float = *nb_kernels_get();
    r->kern_float.gemm[NB_WF_F32].run = gemm_f32_blas;
    r->xs = malloc(sizeof(float) * (size_t)((int64_t)r->cal->n * E));
    r->tmp = malloc(sizeof(float) * (size_t)((int64_t)r->cal->chunk * E));
    r->pq = calloc((size_t)cap, sizeof *r->pq);
    r->saved = calloc((size_t)cap, sizeof *r->saved);
    if (!r->g.buf || !r->xs || !r->tmp || !r->pq || !r->saved)
        return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory for %d calibration tokens",
                            r->cal->n);
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = r->cal->chunk;
    cp.n_threads = r->o->n_threads;
    enum nb_status st = nb_ctx_init(&r->ctx, r->m, &cp);
    if (st) return st;
    nb_ctx_set_observer(r->ctx, hess_observer, &r->g);
    nb_model_embed(r->m, r->cal->ids, r->cal->n, r->xs);
    if (r->o->n_threads > 0) openblas_set_num_threads(r->o->n_threads);
    return NB_OK;
}

enum nb_status nb_gptq_model(struct nb_model *m, const struct nb_calib *cal,
                             const struct nb_gptq_opts *o, struct nb_prequant **out, int *n_out,
                             struct nb_act_stats *s)
{
    *out = NULL;
    *n_out = 0;
    if (!nb_wpath_is_int4(o->path))
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: --gptq needs an int4 weight path "
                            "(w4a8, w4a16), not %s", nb_wpath_name(o->path));
    struct nb_calib used = *cal;
    used.n = nb_gptq_tokens(m, cal, o->max_tokens);
    if (used.n < cal->n)
        NB_LOGI("gptq: the first %d of %d calibration tokens (GPTQ's default cap for this "
                "model; --calib-tokens overrides it)", used.n, cal->n);
    struct gptq_run r = {.m = m, .cal = &used, .o = o};
    double t0 = nb_time_s();
    enum nb_status st = gptq_setup(&r, s);
    int L = m->cfg.n_layers;
    r.total = 1; /* the head */
    for (int slot = 0; slot < N_SLOTS; slot++) r.total += slot_weight(&m->layers[0], slot)->data != 0;
    r.total = (r.total - 1 + 2) * L + 1; /* per layer: the two passes and each matrix */
    for (int l = 0; l < L && st == NB_OK; l++) st = gptq_layer(&r, l);
    if (st == NB_OK) st = gptq_head(&r);
    if (st == NB_OK) tick(&r);
    for (int i = r.n_pq - 1; i >= 0; i--) *(struct nb_weight *)r.pq[i].w = r.saved[i];
    if (st == NB_OK) {
        const struct gptq_times *t = &r.t;
        NB_LOGI("gptq: %d matrices on %d calibration tokens in %.1f s: float pass %.1f, "
                "Hessians %.1f, factors %.1f, scale search %.1f, sweep %.1f, other %.1f, "
                "quantized pass %.1f", r.n_pq, used.n, nb_time_s() - t0, t->float_pass,
                t->hessian, t->factor, t->search, t->sweep, t->other, t->quant_pass);
        *out = r.pq;
        *n_out = r.n_pq;
        r.pq = NULL;
    }
    nb_prequant_free(r.pq, r.n_pq);
    nb_ctx_free(r.ctx);
    for (int i = 0; i < NB_SITE_COUNT; i++) free(r.g.h[i]);
    for (int i = 0; i < N_SLOTS; i++) free(r.owned[i]);
    free(r.g.buf), free(r.xs), free(r.tmp), free(r.saved);
    return st;
}

void nb_prequant_free(struct nb_prequant *p, int n)
{
    if (!p) return;
    for (int i = 0; i < n; i++) free((void *)p[i].q.data);
    free(p);
}
