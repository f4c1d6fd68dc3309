/* model/forward.c — the model: one forward pass in f32 over a chunk of tokens that may
 * belong to several sequences, each with its own positions and KV cache.
 *
 * n tokens (n <= n_batch); E = n_embd, D = head_dim, H = n_heads, Hkv = n_kv_heads,
 * F = n_ff, V = n_vocab. Every GEMM input is f32; a weight that reads int8 activations
 * (w4a8) gets them from an explicit quantization step beside its GEMM.
 *
 *   x = embed(tokens)                                     x [n][E]
 *   for each layer:
 *       h = rmsnorm(x) * attn_norm                          h [n][E]
 *       q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)        q [n][H*D], k, v [n][Hkv*D]
 *       q, k = rmsnorm per head (Qwen3); rope(q, k, pos); cache[seq][pos] = k, v
 *       att = softmax(q K^T / sqrt(D)) V  over this sequence's keys at <= pos
 *                                         (and > pos - window on sliding layers)
 *       att *= sigmoid(h Wg) per head     (Spark head gate)  att [n][H*D]
 *       x += att Wo (+bo)                                   residual add
 *       h = rmsnorm(x) * ffn_norm
 *       x += (act(h Wgate) * (h Wup)) Wdown                 act: silu or tanh-gelu; [n][F]
 *   logits = rmsnorm(x) * out_norm Wout                     only rows that want them [V]
 *                (nb_embed: rmsnorm(x) * out_norm itself)   [E]
 *
 * Prefill is this same pass over many tokens: every weight row is read once per chunk
 * and used for all its tokens. How each op runs on the threads (and is profiled):
 * runner.c; RoPE, the KV cache and attention: attention.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "model/context.h"

/* ---------------------------------------------------------------- small ops */

static void add_bias(float *y, const float *b, int n, int64_t len)
{
    if (!b) return;
    for (int t = 0; t < n; t++)
        for (int64_t i = 0; i < len; i++) y[t * len + i] += b[i];
}

/* Calibration: show a linear layer's input to the observer (model.h). */
static void observe(const struct nb_ctx *c, enum nb_site site, int l, const float *x, int n,
                    int64_t len)
{
    if (c->observe) c->observe(c->observe_user, site, l, x, n, len);
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* att[t][head] *= sigmoid(g[t][head]): the Spark per-head output gate. */
static void gate_heads(float *att, const float *g, int n, int64_t H, int64_t D)
{
    for (int t = 0; t < n; t++)
        for (int64_t h = 0; h < H; h++) {
            float s = sigmoid(g[t * H + h]);
            float *a = att + (t * H + h) * D;
            for (int64_t i = 0; i < D; i++) a[i] *= s;
        }
}

/* One row of the embedding table, decoded to f32. */
static void embed_row(const struct nb_weight *e, int32_t tok, float *out)
{
    int64_t n = e->n_in;
    if (e->format == NB_WF_W8A16) { /* int8 row with its f32 scale */
        struct nb_layout_planes pl;
        nb_layout_planes(NB_WPATH_W8A16, 0, e->n_out, n, &pl);
        const int8_t *q = (const int8_t *)e->data + pl.offset[0] + (int64_t)tok * n;
        float d;
        memcpy(&d, (const char *)e->data + pl.offset[1] + 4 * (int64_t)tok, 4);
        for (int64_t i = 0; i < n; i++) out[i] = d * (float)q[i];
        return;
    }
    if (e->format == NB_WF_F32) {
        memcpy(out, (const float *)e->data + (int64_t)tok * n, (size_t)n * 4);
        return;
    }
    if (e->format == NB_WF_W4A8 || e->format == NB_WF_W4A16) { /* int4 row, its groups */
        struct nb_layout_planes pl;
        enum nb_wpath p = nb_wformat_info(e->format)->path;
        nb_layout_planes(p, e->group, e->n_out, n, &pl);
        nb_unpack_row_ref(p, e->group, e->data, &pl, n, tok, out);
        return;
    }
    /* a GGUF source's block rows, or a tied head's one copy (int4 or block records) */
    if (nb_dequant_row_packed(e->format, e->data, e->group, e->n_out, n, tok, out)) return;
    const uint16_t *r = (const uint16_t *)e->data + (int64_t)tok * n; /* f16 or bf16 */
    for (int64_t i = 0; i < n; i++)
        out[i] = e->format == NB_WF_F16 ? nb_f16_to_f32(r[i]) : nb_bf16_to_f32(r[i]);
}

void nb_model_embed(const struct nb_model *m, const int32_t *tok, int n, float *x)
{
    for (int t = 0; t < n; t++) embed_row(&m->tok_embd, tok[t], x + (int64_t)t * m->cfg.n_embd);
}

struct embed_job {
    struct nb_ctx *c;
    int n;
    const int32_t *tok, *pos;
};

static void embed_worker(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    const struct embed_job *j = arg;
    nb_model_embed(j->c->model, j->tok, j->n, j->c->x);
    nb_rope_tables(j->c, j->pos, j->n);
}

/* ---------------------------------------------------------------- one layer */

static void attention_block(struct nb_ctx *c, int l, int n, const int32_t *pos,
                            const int32_t *seq)
{
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_layer *L = &c->model->layers[l];
    int64_t E = cfg->n_embd, D = cfg->head_dim, H = cfg->n_heads;
    int64_t q_dim = H * D, kv_dim = (int64_t)cfg->n_kv_heads * D;

    nb_rmsnorm_rows(c, c->h, c->x, L->attn_norm, n, E);        /* h = rmsnorm(x)   */
    observe(c, NB_SITE_ATTN_IN, l, c->h, n, E);
    struct nb_input hin = nb_input(c->h, E, n);
    nb_input_quantize(c, &hin, &L->wq);                         /* h as int8 (w4a8) */
    nb_matmul(c, NB_OP_QKV, c->q, q_dim, &hin, &L->wq);         /* q = h Wq         */
    nb_matmul(c, NB_OP_QKV, c->k, kv_dim, &hin, &L->wk);        /* k = h Wk         */
    nb_matmul(c, NB_OP_QKV, c->v, kv_dim, &hin, &L->wv);        /* v = h Wv         */
    add_bias(c->q, L->bq, n, q_dim);
    add_bias(c->k, L->bk, n, kv_dim);
    add_bias(c->v, L->bv, n, kv_dim);
    nb_rope_store_kv(c, l, n, pos, seq);                        /* rope; cache k, v */
    nb_attention(c, l, n, pos, seq);                            /* att              */
    if (L->head_gate.data) {
        nb_matmul(c, NB_OP_HEAD_GATE, c->hg, H, &hin, &L->head_gate); /* g = h Wg   */
        gate_heads(c->att, c->hg, n, H, D);
    }
    observe(c, NB_SITE_ATTN_OUT, l, c->att, n, q_dim);
    struct nb_input ain = nb_input(c->att, q_dim, n);
    nb_input_quantize(c, &ain, &L->wo);
    nb_matmul(c, NB_OP_WO, c->h, E, &ain, &L->wo);              /* h = att Wo       */
    add_bias(c->h, L->bo, n, E);
    nb_add_rows(c, c->x, c->h, n, E);                           /* x += h           */
}

static void mlp_block(struct nb_ctx *c, int l, int n)
{
    const struct nb_config *cfg = &c->model->cfg;
    const struct nb_layer *L = &c->model->layers[l];
    int64_t E = cfg->n_embd, F = cfg->n_ff;

    nb_rmsnorm_rows(c, c->h, c->x, L->ffn_norm, n, E);         /* h = rmsnorm(x)   */
    observe(c, NB_SITE_FFN_IN, l, c->h, n, E);
    struct nb_input hin = nb_input(c->h, E, n);
    nb_input_quantize(c, &hin, &L->w_gate);
    nb_matmul(c, NB_OP_FFN_UP, c->ff_gate, F, &hin, &L->w_gate); /* g = h Wgate     */
    nb_matmul(c, NB_OP_FFN_UP, c->ff_up, F, &hin, &L->w_up);     /* u = h Wup       */
    nb_glu_rows(c, c->ff_gate, c->ff_up, n);                     /* g = act(g) * u  */
    observe(c, NB_SITE_FFN_MID, l, c->ff_gate, n, F);
    struct nb_input gin = nb_input(c->ff_gate, F, n);
    nb_input_quantize(c, &gin, &L->w_down);
    nb_matmul(c, NB_OP_FFN_DOWN, c->h, E, &gin, &L->w_down);    /* h = g Wdown      */
    nb_add_rows(c, c->x, c->h, n, E);                           /* x += h           */
}

/* ---------------------------------------------------------------- one chunk */

void nb_forward_chunk(struct nb_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                      const int32_t *seq, const uint8_t *want, float *logits, int *n_out)
{
    const struct nb_model *m = c->model;
    const struct nb_config *cfg = &m->cfg;
    int64_t E = cfg->n_embd;
    struct embed_job ej = {c, n, tok, pos};
    nb_run_op(c, NB_OP_EMBED, embed_worker, &ej, 1);             /* x = embed(tok)   */
    if (c->profiling) c->prof_tokens += n;
    for (int l = 0; l < cfg->n_layers; l++) {
        attention_block(c, l, n, pos, seq);
        mlp_block(c, l, n);
    }
    int rows = 0; /* h = rmsnorm(x) of the rows that want logits, packed */
    for (int t = 0; t < n; t++)
        if (want[t]) {
            c->kern->rmsnorm(c->h + rows * E, c->x + t * E, m->out_norm, E, cfg->norm_eps);
            rows++;
        }
    observe(c, NB_SITE_OUT_IN, -1, c->h, rows, E);
    if (rows && c->embed_rows) { /* nb_embed: the normed rows themselves, no head */
        memcpy(logits + (int64_t)*n_out * E, c->h, sizeof(float) * (size_t)(rows * E));
    } else if (rows) {
        struct nb_input hin = nb_input(c->h, E, rows);
        nb_input_quantize(c, &hin, &m->output);
        nb_matmul(c, NB_OP_OUTPUT, logits + (int64_t)*n_out * cfg->n_vocab, cfg->n_vocab, &hin,
                  &m->output);                                   /* logits = h Wout  */
    }
    *n_out += rows;
}

enum nb_status nb_ctx_run_layer(struct nb_ctx *c, int layer, float *x, int n)
{
    const struct nb_config *cfg = &c->model->cfg;
    if (layer < 0 || layer >= cfg->n_layers || n <= 0 || n > c->n_batch)
        return nb_set_error(NB_ERR_INVALID_ARG, "run layer: layer %d of %d, %d tokens (batch %d)",
                            layer, cfg->n_layers, n, c->n_batch);
    int32_t *pos = malloc(sizeof(int32_t) * 2 * (size_t)n);
    if (!pos) return nb_set_error(NB_ERR_NOMEM, "run layer: out of memory");
    int32_t *seq = pos + n;
    for (int t = 0; t < n; t++) pos[t] = t, seq[t] = 0;
    nb_ctx_clear_seq(c, 0);
    /* sequence 0's blocks for positions [0, n) (nb_decode's reservation) */
    int *n_new = calloc((size_t)c->n_seq, sizeof(int));
    enum nb_status st = n_new ? NB_OK : nb_set_error(NB_ERR_NOMEM, "run layer: out of memory");
    if (!st) {
        n_new[0] = n;
        st = nb_kv_reserve_full(&c->kv, n_new);
    }
    if (!st) st = nb_kv_reserve_swa(&c->kv, 0, 0, n);
    free(n_new);
    if (st) {
        free(pos);
        return st;
    }
    int64_t bytes = sizeof(float) * (int64_t)n * cfg->n_embd;
    memcpy(c->x, x, (size_t)bytes);
    nb_rope_tables(c, pos, n);
    attention_block(c, layer, n, pos, seq);
    mlp_block(c, layer, n);
    memcpy(x, c->x, (size_t)bytes);
    free(pos);
    return NB_OK;
}
