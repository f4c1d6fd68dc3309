/* model/load.c — open a checkpoint (GGUF, HF safetensors directory, llama2.c .bin),
 * build its config and bind every weight, checking each shape against the config.
 *
 * Matrices stay in the mapped file when their type is F32/F16/BF16 and their data
 * is element-aligned, or Q4_K/Q5_K/Q6_K/Q4_0/Q8_0/IQ4_NL/IQ4_XS (kernels decode them on
 * the fly, or model/repack.c shuffles them for the integer kernels); other stored types
 * (the GGUF block types Q2_K, Q3_K, Q4_1, Q5_0, Q5_1; llama2.c int8)
 * and misaligned data are converted to f32 once, into the model's arena. So are the
 * matrices of a GPTQ / AWQ checkpoint (formats/hfquant.h): dequantized exactly, each
 * with a record of its source codes (quant/unpack.h) that quantize re-packs without
 * rounding the weights again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/mmap.h"
#include "formats/gguf.h"
#include "formats/hfquant.h"
#include "formats/json.h"
#include "formats/llama2c.h"
#include "formats/nib.h"
#include "formats/safetensors.h"
#include "formats/source.h"
#include "model/config.h"
#include "quant/dequant.h"
#include "quant/unpack.h"

enum source_kind { SRC_GGUF = 0, SRC_SAFETENSORS, SRC_LLAMA2C, SRC_NIB };

struct nb_model_source {
    enum source_kind kind;
    struct nb_source *file;   /* the opened source (a reference): gguf, l2c, nib are its */
    const struct nb_gguf *gguf;
    struct nb_safetensors *st; /* a directory's shards, opened here (owned) */
    const struct nb_llama2c *l2c;
    const struct nb_nib *nib; /* a .nib uses the GGUF tensor names */
    struct nb_hfq_config hfq; /* a GPTQ / AWQ checkpoint (safetensors), else method NONE */
    struct codes_node *codes; /* the source codes of its 4-bit matrices (arena) */
};

struct codes_node {
    const struct nb_weight *w;
    struct nb_src_codes c;
    struct codes_node *next;
};

const struct nb_src_codes *nb_model_src_codes(const struct nb_model *m, const struct nb_weight *w)
{
    for (const struct codes_node *n = m->src ? m->src->codes : NULL; n; n = n->next)
        if (n->w == w) return &n->c;
    return NULL;
}

/* Tensor names per source: GGUF (llama.cpp's names), HF, llama2.c. "%d" = layer. */
enum tensor_id {
    T_EMBD, T_OUT_NORM, T_OUTPUT, T_ATTN_NORM, T_WQ, T_WK, T_WV, T_BQ, T_BK, T_BV, T_QNORM,
    T_KNORM, T_HGATE, T_WO, T_BO, T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_COUNT
};
static const char *const k_names[T_COUNT][3] = {
    [T_EMBD] = {"token_embd.weight", "model.embed_tokens.weight", "tok_embeddings"},
    [T_OUT_NORM] = {"output_norm.weight", "model.norm.weight", "norm"},
    [T_OUTPUT] = {"output.weight", "lm_head.weight", "output"},
    [T_ATTN_NORM] = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight",
                     "layers.%d.attention_norm"},
    [T_WQ] = {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight", "layers.%d.wq"},
    [T_WK] = {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight", "layers.%d.wk"},
    [T_WV] = {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight", "layers.%d.wv"},
    [T_BQ] = {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias", NULL},
    [T_BK] = {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias", NULL},
    [T_BV] = {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias", NULL},
    [T_QNORM] = {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", NULL},
    [T_KNORM] = {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", NULL},
    [T_HGATE] = {"blk.%d.attn_gate.weight", "model.layers.%d.self_attn.head_gate.weight", NULL},
    [T_WO] = {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight",
              "layers.%d.wo"},
    [T_BO] = {"blk.%d.attn_output.bias", "model.layers.%d.self_attn.o_proj.bias", NULL},
    [T_FFN_NORM] = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight",
                    "layers.%d.ffn_norm"},
    [T_GATE] = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight", "layers.%d.w1"},
    [T_UP] = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight", "layers.%d.w3"},
    [T_DOWN] = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight", "layers.%d.w2"},
};

static const struct nb_tensor *src_find(const struct nb_model_source *s, const char *name)
{
    switch (s->kind) {
    case SRC_GGUF: return nb_gguf_find_tensor(s->gguf, name);
    case SRC_SAFETENSORS: return nb_safetensors_find(s->st, name);
    case SRC_LLAMA2C: return nb_llama2c_find(s->l2c, name);
    case SRC_NIB: return NULL; /* packed tensors are bound by bind_nib() */
    }
    return NULL;
}

static const struct nb_tensor *find_id(const struct nb_model *m, enum tensor_id id, int layer,
                                       char *name, size_t name_size)
{
    const char *fmt = k_names[id][m->src->kind == SRC_NIB ? SRC_GGUF : m->src->kind];
    if (!fmt) {
        snprintf(name, name_size, "(%s has no such tensor)", m->source_kind);
        return NULL;
    }
    snprintf(name, name_size, fmt, layer);
    return src_find(m->src, name);
}

static enum nb_status shape_error(const struct nb_model *m, const char *name,
                                  const struct nb_tensor *t, int64_t d0, int64_t d1)
{
    char got[96] = "";
    size_t n = 0;
    for (int i = 0; i < t->n_dims && n < sizeof got - 24; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "",
                              (long long)t->shape[i]);
    if (d1 > 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' has shape {%s}, the config needs "
                            "{%lld, %lld}", m->path, name, got, (long long)d0, (long long)d1);
    return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' has shape {%s}, the config needs {%lld}",
                        m->path, name, got, (long long)d0);
}

/* llama2.c v2: int8 values with one f32 scale per group over the flattened tensor. */
static enum nb_status dequant_llama2c_i8(struct nb_model *m, const char *name,
                                         const struct nb_tensor *t, float *dst)
{
    char sname[200];
    snprintf(sname, sizeof sname, "%s.scale", name);
    const struct nb_tensor *s = src_find(m->src, sname);
    int gs = nb_llama2c_config(m->src->l2c)->group_size;
    int64_t n = nb_tensor_nelems(t);
    if (!s || s->dtype != NB_DTYPE_F32 || gs <= 0 || n % gs || nb_tensor_nelems(s) != n / gs)
        return nb_set_error(NB_ERR_FORMAT, "%s: int8 tensor '%s' has no matching scales",
                            m->path, name);
    const int8_t *q = t->data;
    for (int64_t g = 0; g < n / gs; g++) {
        float sc;
        memcpy(&sc, (const char *)s->data + 4 * g, 4);
        for (int j = 0; j < gs; j++) dst[g * gs + j] = sc * q[g * gs + j];
    }
    return NB_OK;
}

static enum nb_status to_f32_copy(struct nb_model *m, const char *name, const struct nb_tensor *t,
                                  float **out)
{
    int64_t n = nb_tensor_nelems(t);
    float *dst = nb_arena_alloc(&m->arena, sizeof(float) * (size_t)n);
    if (!dst) return nb_wrap_error(NB_ERR_NOMEM, "%s: tensor '%s': ", m->path, name);
    enum nb_status st = t->dtype == NB_DTYPE_I8 && m->src->kind == SRC_LLAMA2C
                            ? dequant_llama2c_i8(m, name, t, dst)
                            : nb_dequant(t->dtype, t->data, dst, n);
    if (st) return nb_wrap_error(st, "%s: tensor '%s': ", m->path, name);
    *out = dst;
    return NB_OK;
}

/* A tensor of a .nib: matrices (w) are used in place in their packed layout; vectors
 * (vec, f32) are copied. */
static enum nb_status bind_nib(struct nb_model *m, enum tensor_id id, int layer, int64_t n_out,
                               int64_t n_in, int required, struct nb_weight *w, const float **vec)
{
    char name[200];
    snprintf(name, sizeof name, k_names[id][SRC_GGUF], layer);
    const struct nb_nib_tensor *t = nb_nib_find(m->src->nib, name);
    if (!t) {
        if (!required) return NB_OK;
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    }
    int is_vec = vec != NULL;
    if (t->kind != NB_NIB_PACKED || t->n_dims != (is_vec ? 1 : 2) ||
        (is_vec && (t->path != NB_WPATH_F32 || t->shape[0] != n_in)) ||
        (!is_vec && (t->shape[0] != n_out || t->shape[1] != n_in)))
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' has the wrong kind or shape for the "
                            "config (needs %s [%lld, %lld])", m->path, name,
                            is_vec ? "f32" : "a matrix", (long long)n_out, (long long)n_in);
    if (is_vec) {
        float *f = nb_arena_alloc(&m->arena, sizeof(float) * (size_t)n_in);
        if (!f) return NB_ERR_NOMEM;
        memcpy(f, t->data, sizeof(float) * (size_t)n_in);
        *vec = f;
        return NB_OK;
    }
    w->n_out = n_out;
    w->n_in = n_in;
    w->data = t->data;
    w->format = t->format;
    if (t->format == NB_WF_COUNT)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': path %s has no layout %d", m->path,
                            name, nb_nib_kind_name(t->path, t->format), t->layout);
    w->group = nb_wformat_act_group(t->format, t->group); /* Q8_0 blocks: int8 inputs per 32 */
    return NB_OK;
}

/* Bits per code of a quantized stored type (what quantize must not go below), 0 for
 * float types. */
static int src_bits(enum nb_dtype t)
{
    switch (t) {
    case NB_DTYPE_Q2_K: return 2;
    case NB_DTYPE_Q3_K: return 3;
    case NB_DTYPE_Q4_0: case NB_DTYPE_Q4_1: case NB_DTYPE_Q4_K: case NB_DTYPE_IQ4_NL:
    case NB_DTYPE_IQ4_XS: return 4;
    case NB_DTYPE_Q5_0: case NB_DTYPE_Q5_1: case NB_DTYPE_Q5_K: return 5;
    case NB_DTYPE_Q6_K: return 6;
    case NB_DTYPE_Q8_0: case NB_DTYPE_Q8_K: return 8;
    default: return 0;
    }
}

/* A matrix of a GPTQ / AWQ checkpoint: `name` is its "<prefix>.weight", absent; its
 * <prefix>.qweight / .qzeros / .scales / .g_idx are checked against the config and
 * {n_out, n_in}, dequantized into the arena as f32, and a 4-bit one's codes recorded.
 * *found = 0 (and NB_OK) when there is no qweight either. */
static enum nb_status bind_hfq(struct nb_model *m, const char *name, int64_t n_out, int64_t n_in,
                               struct nb_weight *w, int *found)
{
    char prefix[200], tn[4][220];
    static const char *const sfx[4] = {"qweight", "qzeros", "scales", "g_idx"};
    const struct nb_tensor *t[4];
    size_t len = strlen(name);
    *found = 0;
    if (len < 7 || len - 7 >= sizeof prefix || strcmp(name + len - 7, ".weight") != 0) return NB_OK;
    memcpy(prefix, name, len - 7);
    prefix[len - 7] = '\0';
    for (int i = 0; i < 4; i++) {
        snprintf(tn[i], sizeof tn[i], "%s.%s", prefix, sfx[i]);
        t[i] = src_find(m->src, tn[i]);
    }
    if (!t[0]) return NB_OK;
    *found = 1;
    struct nb_hfq_matrix hm;
    enum nb_status st = nb_hfq_check(&m->src->hfq, m->path, prefix, t[0], t[1], t[2], t[3], n_out,
                                     n_in, &hm);
    if (st) return st;
    float *f = nb_arena_alloc(&m->arena, sizeof(float) * (size_t)(n_out * n_in));
    if (!f) return nb_set_error(NB_ERR_NOMEM, "%s: tensor '%s': out of memory", m->path, tn[0]);
    nb_hfq_dequant_rows(&hm, 0, n_out, f);
    w->n_out = n_out;
    w->n_in = n_in;
    w->format = NB_WF_F32;
    w->data = f;
    if (hm.bits != 4) return NB_OK; /* 8-bit codes are re-quantized */
    struct codes_node *n = nb_arena_alloc(&m->arena, sizeof *n);
    if (!n) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", m->path);
    n->w = w;
    nb_src_codes_from_hfq(&n->c, &hm);
    n->next = m->src->codes;
    m->src->codes = n;
    return NB_OK;
}

/* Bind a matrix of shape {n_out, n_in}. Missing and optional: data stays NULL. */
static enum nb_status bind_matrix(struct nb_model *m, enum tensor_id id, int layer, int64_t n_out,
                                  int64_t n_in, int required, struct nb_weight *w)
{
    char name[200];
    memset(w, 0, sizeof *w);
    if (m->src->kind == SRC_NIB) return bind_nib(m, id, layer, n_out, n_in, required, w, NULL);
    const struct nb_tensor *t = find_id(m, id, layer, name, sizeof name);
    if (!t && m->src->hfq.method != NB_HFQ_NONE) {
        int found;
        enum nb_status st = bind_hfq(m, name, n_out, n_in, w, &found);
        if (st || found) return st;
    }
    size_t len = strlen(name);
    if (!t && m->src->kind == SRC_SAFETENSORS && len > 7 && len < sizeof name - 1) {
        char qn[210]; /* "<prefix>.qweight" of a checkpoint whose config says nothing */
        snprintf(qn, sizeof qn, "%.*s.qweight", (int)(len - 7), name);
        if (src_find(m->src, qn))
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is missing; '%s' is there, but "
                                "config.json has no quantization_config (nor is there a "
                                "quantize_config.json)", m->path, name, qn);
    }
    if (!t) {
        if (!required) return NB_OK;
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    }
    if (t->n_dims != 2 || t->shape[0] != n_out || t->shape[1] != n_in)
        return shape_error(m, name, t, n_out, n_in);
    w->n_out = n_out;
    w->n_in = n_in;
    w->src_bits = src_bits(t->dtype);
    int plain = t->dtype == NB_DTYPE_F32 || t->dtype == NB_DTYPE_F16 || t->dtype == NB_DTYPE_BF16;
    size_t esz = t->dtype == NB_DTYPE_F32 ? 4 : 2;
    if (plain && ((uintptr_t)t->data % esz) == 0) {
        w->format = t->dtype == NB_DTYPE_F32   ? NB_WF_F32
                    : t->dtype == NB_DTYPE_F16 ? NB_WF_F16
                                               : NB_WF_BF16;
        w->data = t->data;
        return NB_OK;
    }
    struct nb_block_info bi;
    if (nb_wformat_block_named(nb_dtype_name(t->dtype), &bi)) {
        /* block rows stay in the mapped file: their kernels decode them on the fly
         * (kernels/qblock.h) or nb_model_repack_kquants shuffles them into records, and
         * every reader of source rows converts them */
        w->format = bi.rows;
        w->data = t->data;
        return NB_OK;
    }
    float *f;
    enum nb_status st = to_f32_copy(m, name, t, &f);
    if (st) return st;
    w->format = NB_WF_F32;
    w->data = f;
    return NB_OK;
}

/* Bind a vector of n values, always as an f32 copy (they are small). */
static enum nb_status bind_vector(struct nb_model *m, enum tensor_id id, int layer, int64_t n,
                                  int required, const float **out)
{
    char name[200];
    *out = NULL;
    if (m->src->kind == SRC_NIB) return bind_nib(m, id, layer, 1, n, required, NULL, out);
    const struct nb_tensor *t = find_id(m, id, layer, name, sizeof name);
    if (!t) {
        if (!required) return NB_OK;
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    }
    if (nb_tensor_nelems(t) != n || t->n_dims != 1) return shape_error(m, name, t, n, 0);
    float *f;
    enum nb_status st = to_f32_copy(m, name, t, &f);
    if (st == NB_OK) *out = f;
    return st;
}

static enum nb_status bind_weights(struct nb_model *m)
{
    const struct nb_config *c = &m->cfg;
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim;
    int64_t KV = (int64_t)c->n_kv_heads * c->head_dim, F = c->n_ff;
    enum nb_status st;
    m->layers = nb_arena_alloc(&m->arena, sizeof *m->layers * (size_t)c->n_layers);
    if (!m->layers) return NB_ERR_NOMEM;
    if ((st = bind_matrix(m, T_EMBD, 0, c->n_vocab, E, 1, &m->tok_embd)) ||
        (st = bind_vector(m, T_OUT_NORM, 0, E, 1, &m->out_norm)))
        return st;
    /* the gather decodes one row of any format, X16 records included (a tied head stored
     * once as the head's records: model/forward.c) */
    if (c->tied_head) {
        m->output = m->tok_embd;
    } else if ((st = bind_matrix(m, T_OUTPUT, 0, c->n_vocab, E, 1, &m->output))) {
        return st;
    }
    for (int l = 0; l < c->n_layers; l++) {
        struct nb_layer *L = &m->layers[l];
        if ((st = bind_vector(m, T_ATTN_NORM, l, E, 1, &L->attn_norm)) ||
            (st = bind_matrix(m, T_WQ, l, Q, E, 1, &L->wq)) ||
            (st = bind_matrix(m, T_WK, l, KV, E, 1, &L->wk)) ||
            (st = bind_matrix(m, T_WV, l, KV, E, 1, &L->wv)) ||
            (st = bind_matrix(m, T_WO, l, E, Q, 1, &L->wo)) ||
            (st = bind_vector(m, T_FFN_NORM, l, E, 1, &L->ffn_norm)) ||
            (st = bind_matrix(m, T_GATE, l, F, E, 1, &L->w_gate)) ||
            (st = bind_matrix(m, T_UP, l, F, E, 1, &L->w_up)) ||
            (st = bind_matrix(m, T_DOWN, l, E, F, 1, &L->w_down)))
            return st;
        if (c->qkv_bias && ((st = bind_vector(m, T_BQ, l, Q, 1, &L->bq)) ||
                            (st = bind_vector(m, T_BK, l, KV, 1, &L->bk)) ||
                            (st = bind_vector(m, T_BV, l, KV, 1, &L->bv))))
            return st;
        /* HF's attention_bias puts a bias on o_proj too (Qwen2's fixed bias does not). */
        if (c->qkv_bias && c->arch != NB_ARCH_QWEN2 &&
            (st = bind_vector(m, T_BO, l, E, 0, &L->bo)))
            return st;
        if (c->qk_norm && ((st = bind_vector(m, T_QNORM, l, c->head_dim, 1, &L->q_norm)) ||
                           (st = bind_vector(m, T_KNORM, l, c->head_dim, 1, &L->k_norm))))
            return st;
        if (c->head_gate && (st = bind_matrix(m, T_HGATE, l, c->n_heads, E, 1, &L->head_gate)))
            return st;
    }
    if (m->src->kind == SRC_NIB) {
        const struct nb_nib_tensor *rf = nb_nib_find(m->src->nib, "rope_inv_freq");
        if (!rf || rf->kind != NB_NIB_PACKED || rf->path != NB_WPATH_F32 || rf->n_dims != 1 ||
            rf->shape[0] != c->head_dim / 2)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor 'rope_inv_freq' is missing or has "
                                "the wrong shape", m->path);
        memcpy(m->rope_inv_freq, rf->data, sizeof(float) * (size_t)(c->head_dim / 2));
    }
    /* GGUF stores Llama 3.1 rope scaling as per-frequency divisors. */
    if (m->src->kind == SRC_GGUF) {
        const struct nb_tensor *rf = nb_gguf_find_tensor(m->src->gguf, "rope_freqs.weight");
        if (rf) {
            float *f;
            if (nb_tensor_nelems(rf) != c->head_dim / 2)
                return shape_error(m, "rope_freqs.weight", rf, c->head_dim / 2, 0);
            if ((st = to_f32_copy(m, "rope_freqs.weight", rf, &f))) return st;
            for (int i = 0; i < c->head_dim / 2; i++) {
                if (!(f[i] > 0))
                    return nb_set_error(NB_ERR_FORMAT, "%s: rope_freqs.weight[%d] is not positive",
                                        m->path, i);
                m->rope_inv_freq[i] /= f[i];
            }
        }
    }
    m->n_params = (int64_t)c->n_vocab * E * (c->tied_head ? 1 : 2) + E +
                  (int64_t)c->n_layers * (2 * E + 2 * Q * E + 2 * KV * E + 3 * F * E +
                                          (c->qkv_bias ? Q + 2 * KV : 0) +
                                          (m->layers[0].bo ? E : 0) +
                                          (c->qk_norm ? 2 * c->head_dim : 0) +
                                          (c->head_gate ? (int64_t)c->n_heads * E : 0));
    return NB_OK;
}

/* Stored bytes of a matrix. */
static int64_t weight_nbytes(const struct nb_weight *w)
{
    struct nb_layout_planes pl;
    if (!w->data) return 0;
    return nb_wformat_planes(w->format, w->group, w->n_out, w->n_in, &pl) ? pl.total : 0;
}

static void count_linear(struct nb_model *m, const struct nb_weight *w)
{
    if (!w->data) return;
    m->linear_params += w->n_out * w->n_in;
    m->linear_bytes += weight_nbytes(w);
}

/* Bits per weight and bytes per decode step, from what is actually stored. */
static void measure_weights(struct nb_model *m)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
        const struct nb_weight *ws[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                        &L->w_gate, &L->w_up, &L->w_down, &L->head_gate};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) count_linear(m, ws[i]);
    }
    count_linear(m, &m->output);
    m->weight_bytes = m->linear_bytes + weight_nbytes(&m->tok_embd) / m->cfg.n_vocab;
    const struct nb_weight *q = &m->layers[0].wq;
    const struct nb_wformat_info *fi = nb_wformat_info(q->format);
    m->weight_path = fi->plain || fi->path == NB_WPATH_F32 ? fi->name : nb_wpath_name(fi->path);
}

static enum nb_status nib_config(struct nb_model *m, const char *path)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(nb_nib_header(m->src->nib), "config");
    m->src->kind = SRC_NIB;
    m->source_kind = "nib";
    return nb_config_from_json(&m->cfg, cfg, path);
}

/* The quantization of a Hugging Face directory: config.json's quantization_config, or
 * an older quantize_config.json beside it. */
static enum nb_status hfq_config(struct nb_model *m, const char *dir, const cJSON *root,
                                 const char *cfg_path)
{
    char qpath[4096];
    cJSON *qroot = NULL;
    struct stat sb;
    enum nb_status st;
    struct nb_hfq_config *h = &m->src->hfq;
    snprintf(qpath, sizeof qpath, "%s/quantize_config.json", dir);
    if (!cJSON_GetObjectItemCaseSensitive(root, "quantization_config") && stat(qpath, &sb) == 0 &&
        (st = nb_json_load(qpath, &qroot)))
        return st;
    st = nb_hfq_parse_config(root, qroot, qroot ? qpath : cfg_path, h);
    cJSON_Delete(qroot);
    if (st || h->method == NB_HFQ_NONE) return st;
    m->source_quant = nb_hfq_method_name(h->method);
    char group[32] = "one a row";
    if (h->group_size) snprintf(group, sizeof group, "%d", h->group_size);
    NB_LOGI("%s: %s checkpoint: %d-bit codes, group %s, %s zero points%s", dir, m->source_quant,
            h->bits, group, h->method == NB_HFQ_AWQ ? "awq" : h->version == 1 ? "v1" : "v2",
            h->desc_act ? ", act order" : "");
    return NB_OK;
}

static enum nb_status open_source(struct nb_model *m, struct nb_source *src)
{
    struct nb_model_source *s = m->src;
    const char *path = src->path;
    enum nb_status st;
    s->file = nb_source_ref(src);
    switch (src->kind) {
    case NB_FILE_DIR: {
        char cfg_path[4096];
        const cJSON *root = NULL;
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
        s->kind = SRC_SAFETENSORS;
        m->source_kind = "safetensors";
        if ((st = nb_source_config(src, &root))) return st;
        if ((st = nb_config_from_hf(&m->cfg, root, cfg_path))) return st;
        if ((st = hfq_config(m, path, root, cfg_path))) return st;
        return nb_safetensors_open(&s->st, path);
    }
    case NB_FILE_NIB:
        s->nib = src->nib;
        if ((st = nb_source_verify(src))) return st;
        return nib_config(m, path);
    case NB_FILE_GGUF:
        s->kind = SRC_GGUF;
        m->source_kind = "gguf";
        s->gguf = src->gguf;
        return nb_config_from_gguf(&m->cfg, s->gguf);
    case NB_FILE_LLAMA2C:
        s->kind = SRC_LLAMA2C;
        m->source_kind = "llama2c";
        s->l2c = src->l2c;
        return nb_config_from_llama2c(&m->cfg, nb_llama2c_config(s->l2c), path);
    default:
        return nb_set_error(NB_ERR_FORMAT, "%s: not a model nibble knows (expected a GGUF "
                            "file, a llama2.c .bin or a Hugging Face model directory)", path);
    }
}

enum nb_status nb_model_load_source(struct nb_model **out, struct nb_source *src)
{
    *out = NULL;
    enum nb_status st;
    struct nb_model *m = calloc(1, sizeof *m);
    if (!m) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    nb_arena_init(&m->arena, 1 << 20);
    m->src = calloc(1, sizeof *m->src);
    m->path = strdup(src->path);
    if (!m->src || !m->path) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = open_source(m, src))) goto fail;
    m->arch_name = nb_arch_name(m->cfg.arch);
    if ((st = nb_model_init_rope(m))) goto fail;
    if ((st = bind_weights(m))) goto fail;
    measure_weights(m);
    NB_LOGI("%s: %s (%s), %d layers, hidden %d, %d/%d heads of %d, ffn %d, vocab %d, %.2f M "
            "params", m->path, m->arch_name, m->source_kind, m->cfg.n_layers, m->cfg.n_embd,
            m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim, m->cfg.n_ff, m->cfg.n_vocab,
            (double)m->n_params / 1e6);
    *out = m;
    return NB_OK;
fail:
    nb_model_free(m);
    return st;
}

enum nb_status nb_model_load(struct nb_model **out, const char *path)
{
    struct nb_source *src = NULL;
    *out = NULL;
    enum nb_status st = nb_source_open(&src, path);
    if (!st) st = nb_model_load_source(out, src);
    nb_source_free(src); /* the model keeps its own reference */
    return st;
}

struct nb_source *nb_model_source(const struct nb_model *m)
{
    return m->src ? m->src->file : NULL;
}

void nb_model_free(struct nb_model *m)
{
    if (!m) return;
    if (m->src) {
        nb_safetensors_free(m->src->st);
        nb_source_free(m->src->file);
        free(m->src);
    }
    nb_arena_free(&m->arena);
    nb_huge_free(m->repacked, m->repacked_size);
    free(m->path);
    free(m);
}

void nb_model_get_info(const struct nb_model *m, struct nb_model_info *info)
{
    const struct nb_config *c = &m->cfg;
    info->arch = m->arch_name;
    info->source_kind = m->source_kind;
    info->n_layers = c->n_layers;
    info->n_embd = c->n_embd;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->n_ff = c->n_ff;
    info->n_vocab = c->n_vocab;
    info->n_ctx_train = c->n_ctx_train;
    info->bos_id = c->bos_id;
    info->eos_id = c->eos_id;
    info->n_params = m->n_params;
    info->weight_path = m->weight_path;
    info->linear_params = m->linear_params;
    info->linear_bytes = m->linear_bytes;
    info->weight_bytes = m->weight_bytes;
}

int nb_model_tensor_names(int i, const char **gguf_name, const char **hf_name)
{
    if (i < 0 || i >= T_COUNT) return 0;
    *gguf_name = k_names[i][SRC_GGUF];
    *hf_name = k_names[i][SRC_SAFETENSORS];
    return 1;
}
