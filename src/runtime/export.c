/* runtime/export.c — a model out of nibble as a Hugging Face GPTQ checkpoint
 * (`nibble export --format gptq`), and one .nib tensor decoded to f32 (`inspect --dump`).
 *
 * What a GPTQ checkpoint is (read from the public descriptions: vLLM's
 * model_executor/layers/quantization/gptq.py and utils/gptq_utils.py, AutoGPTQ's and
 * GPTQModel's QuantLinear packing, transformers' GPTQConfig; no code taken). For each
 * quantized linear layer y = W x, W [N = out][K = in], group G along K:
 *
 *   <module>.qweight  int32 [K/8][N]    word (i, n) holds codes q[n][8i + j], j = 0..7,
 *                                       code j in bits 4j..4j+3 (low nibble first)
 *   <module>.qzeros   int32 [K/G][N/8]  word (g, c) holds zero[g][8c + j] - 1 in bits
 *                                       4j..4j+3 ("v1" checkpoints, checkpoint_format
 *                                       "gptq": the stored zero is one less)
 *   <module>.scales   f16   [K/G][N]
 *   <module>.g_idx    int32 [K]         k / G (no act-order: desc_act false)
 *   w[n][k] = scales[g][n] * (q[n][k] - zero[g][n]),  g = g_idx[k]
 *
 * nibble's grids map onto it without re-rounding where the grid allows:
 *   w4a8   w = d (q - 8), d bf16       -> zero 8 (stored 7), scale = d in f16: sym.
 *          bf16 -> f16 is exact when d is in f16's range (checked per scale; a matrix
 *          with a scale outside it goes out as float, with a note).
 *   w4a16  w = d q + m, d and m bf16   -> exact only where m == -d z for an integer z in
 *          1..15 (z = 0 would be stored as -1, which v1 readers take as 16): sym false.
 *          nibble's scale search leaves m free, so such a matrix is refused by name.
 * In f32 both sides are then the same numbers: d (q - z) is exact (8 significant bits
 * times 5), and so is nibble's d q + m. (GPU kernels multiply in f16, where d (q - z)
 * needs up to 12 significant bits of f16's 11: they may round the last bit.)
 *
 * One checkpoint has one bits / group_size. Matrices at another group or width (the
 * recipes' 8-bit rows, a head in groups of 32), and the embeddings, go out dequantized
 * as float tensors (--dtype). vLLM fuses q/k/v (qkv_proj) and gate/up (gate_up_proj) and
 * requires the parts of a fused layer to agree, so one float part makes its partners
 * float too. A float linear gets a GPTQModel "dynamic" negative rule ("-:regex": not
 * quantized), which vLLM's gptq and gptq_marlin read (utils/gptq_utils.py,
 * get_dynamic_override) and match against its fused module names; recent vLLM also finds
 * the quantized modules from the checkpoint's int32 tensors. A quantized head sets
 * "lm_head": true, which vLLM's GPTQConfig reads (lm_head_quantized: ParallelLMHead).
 *
 * Names are the loader's table (nb_model_tensor_names); GGUF-sourced Llama builds have
 * q/k rows permuted for interleaved RoPE (model/model.h, rope_pairing), put back in
 * Hugging Face order here (a row permutation: codes and scales move with their rows).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fp.h"
#include "core/log.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "formats/nib.h"
#include "formats/source.h"
#include "formats/safetensors_write.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "model/config.h"
#include "model/model.h"
#include "nibble.h"
#include "quant/quant.h"
#include "runtime/api.h"
#include "runtime/quantize.h"

#define EXPORT_BITS 4

/* ---------------------------------------------------------------- what goes out */

enum spec_kind { K_EMBD, K_VEC, K_LIN };
enum fuse { F_NONE, F_QKV, F_O, F_GATE_UP, F_DOWN, F_HEAD };
enum rope_rows { P_NONE, P_Q, P_K, P_HEAD_DIM };

/* The tensors of a model by their .nib (GGUF) name; the HF name comes from the table. */
static const struct spec {
    const char *gguf;
    int layered;
    enum spec_kind kind;
    enum fuse fuse;
    enum rope_rows rows; /* rows permuted for interleaved RoPE in GGUF-sourced Llamas */
    int required;        /* 1: always; 2: with qkv_bias; 3: with qk_norm; 0: if present */
} k_specs[] = {
    {"token_embd.weight", 0, K_EMBD, F_NONE, P_NONE, 1},
    {"output_norm.weight", 0, K_VEC, F_NONE, P_NONE, 1},
    {"output.weight", 0, K_LIN, F_HEAD, P_NONE, 1},
    {"blk.%d.attn_norm.weight", 1, K_VEC, F_NONE, P_NONE, 1},
    {"blk.%d.attn_q.weight", 1, K_LIN, F_QKV, P_Q, 1},
    {"blk.%d.attn_k.weight", 1, K_LIN, F_QKV, P_K, 1},
    {"blk.%d.attn_v.weight", 1, K_LIN, F_QKV, P_NONE, 1},
    {"blk.%d.attn_q.bias", 1, K_VEC, F_NONE, P_Q, 2},
    {"blk.%d.attn_k.bias", 1, K_VEC, F_NONE, P_K, 2},
    {"blk.%d.attn_v.bias", 1, K_VEC, F_NONE, P_NONE, 2},
    {"blk.%d.attn_q_norm.weight", 1, K_VEC, F_NONE, P_HEAD_DIM, 3},
    {"blk.%d.attn_k_norm.weight", 1, K_VEC, F_NONE, P_HEAD_DIM, 3},
    {"blk.%d.attn_output.weight", 1, K_LIN, F_O, P_NONE, 1},
    {"blk.%d.attn_output.bias", 1, K_VEC, F_NONE, P_NONE, 0},
    {"blk.%d.ffn_norm.weight", 1, K_VEC, F_NONE, P_NONE, 1},
    {"blk.%d.ffn_gate.weight", 1, K_LIN, F_GATE_UP, P_NONE, 1},
    {"blk.%d.ffn_up.weight", 1, K_LIN, F_GATE_UP, P_NONE, 1},
    {"blk.%d.ffn_down.weight", 1, K_LIN, F_DOWN, P_NONE, 1},
};
#define N_SPECS ((int)(sizeof k_specs / sizeof k_specs[0]))

/* One tensor of the .nib on its way out. */
struct part {
    const struct spec *spec;
    int layer; /* -1: not layered */
    const struct nb_nib_tensor *t;
    char hf[200];        /* HF name: the module ("...q_proj") for a linear, the tensor
                            for the rest */
    const int32_t *perm; /* output row i is row perm[i] of t (NULL: i) */
    int64_t N, K;        /* matrices: rows, columns; vectors: 1, n */
    int gptq;            /* linears: 1 out as GPTQ, 0 as a float .weight */
    int asym;            /* GPTQ from the w4a16 grid */
    char why[200];       /* linears out as float: why */
};

/* What each tensor declared in the safetensors writer is made of. */
enum item_kind { I_QWEIGHT, I_QZEROS, I_SCALES, I_GIDX, I_FLOAT };
struct item {
    enum item_kind kind;
    const struct part *p;
};

struct exp {
    const struct nb_export_params *o;
    enum nb_dtype dtype; /* float tensors */
    struct nb_config cfg;
    struct nb_source *src; /* the .nib exported (the model's, or one quantized in memory) */
    const struct nb_nib *nib; /* its table */
    struct part *parts;
    int n_parts;
    int group;
    int32_t *perm_q, *perm_k, *perm_hd;
    struct nb_export_stats stats;
    size_t notes_len;
};

static void note(struct exp *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct exp *e, const char *fmt, ...)
{
    char *buf = e->stats.notes;
    size_t cap = sizeof e->stats.notes;
    if (e->notes_len + 2 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + e->notes_len, cap - e->notes_len - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    e->notes_len += (size_t)n < cap - e->notes_len - 1 ? (size_t)n : cap - e->notes_len - 2;
    buf[e->notes_len++] = '\n';
    buf[e->notes_len] = '\0';
}

/* ---------------------------------------------------------------- reading codes */

/* An int4 matrix of the .nib, either layout (core/wformat.h). */
struct qmat {
    enum nb_wpath path;
    int x16;
    int64_t N, K, ng;
    const uint8_t *qs, *d, *m;
};

static int qmat_of(const struct nb_nib_tensor *t, struct qmat *q)
{
    struct nb_layout_planes pl;
    memset(q, 0, sizeof *q);
    if (!nb_wpath_is_int4(t->path) || t->n_dims != 2) return 0;
    q->path = t->path;
    q->x16 = t->layout == NB_LAYOUT_X16;
    q->N = t->shape[0];
    q->K = t->shape[1];
    if (!nb_layout_planes_x(t->path, q->x16 ? NB_LAYOUT_X16 : NB_LAYOUT_ROWS, t->group, q->N, q->K,
                            &pl))
        return 0;
    q->ng = q->K / t->group;
    q->qs = (const uint8_t *)t->data + pl.offset[0];
    q->d = (const uint8_t *)t->data + pl.offset[1];
    q->m = t->path == NB_WPATH_W4A16 ? (const uint8_t *)t->data + pl.offset[2] : NULL;
    return 1;
}

static inline int q_code(const struct qmat *q, int64_t r, int64_t k)
{
    return q->x16 ? nb_q4x16_get(q->qs, q->K, r, k) : nb_q4_get(q->qs + r * (q->K / 2), k);
}

static inline int64_t q_sidx(const struct qmat *q, int64_t r, int64_t g)
{
    return q->x16 ? nb_x16_sidx(q->ng, r, g) : r * q->ng + g;
}

static inline float q_scale(const struct qmat *q, int64_t r, int64_t g)
{
    return nb_bf16_to_f32(nb_q_load_u16(q->d + 2 * q_sidx(q, r, g)));
}

static inline float q_min(const struct qmat *q, int64_t r, int64_t g)
{
    return nb_bf16_to_f32(nb_q_load_u16(q->m + 2 * q_sidx(q, r, g)));
}

/* The GPTQ zero of group (r, g): 8 on the w4a8 grid; on the w4a16 grid the integer z
 * with m == -d z, in 1..15, or -1 when there is none. */
static int q_zero(const struct qmat *q, int64_t r, int64_t g)
{
    if (q->path == NB_WPATH_W4A8) return 8;
    float d = q_scale(q, r, g), m = q_min(q, r, g);
    if (d == 0) return m == 0 ? 8 : -1;
    float z = rintf(-m / d);
    if (!(z >= 1 && z <= 15)) return -1;
    float back = -(d * z);
    return back == m ? (int)z : -1;
}

static int f16_exact(float x)
{
    return isfinite(x) && nb_f16_to_f32(nb_f32_to_f16(x)) == x;
}

/* Row r of any packed matrix as f32, as the reference kernels decode it. */
static enum nb_status row_f32(const struct nb_nib_tensor *t, int64_t r, float *out)
{
    int64_t N = t->shape[0], K = t->shape[1];
    if (nb_dequant_row_packed(t->format, t->data, t->group, N, K, r, out)) return NB_OK;
    return nb_dequantize_rows(t->path, t->group, t->data, N, K, r, r + 1, out);
}

/* ---------------------------------------------------------------- the model */

static enum nb_status check_arch(const struct nb_config *c, const char *what)
{
    if (c->arch == NB_ARCH_SPARK)
        return nb_set_error(NB_ERR_UNSUPPORTED,
                            "%s: architecture 'spark' cannot be exported: vLLM and transformers "
                            "have no model class for nibble's Spark (GEGLU MLP, per-head "
                            "attention gate, sliding-window layers); llama, qwen2 and qwen3 can",
                            what);
    if (c->arch != NB_ARCH_LLAMA && c->arch != NB_ARCH_QWEN2 && c->arch != NB_ARCH_QWEN3)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: architecture '%s' cannot be exported "
                            "(llama, qwen2, qwen3)", what, nb_arch_name(c->arch));
    if (c->head_gate || c->act != NB_ACT_SILU)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: a %s with %s has no Hugging Face class "
                            "vLLM runs", what, nb_arch_name(c->arch),
                            c->head_gate ? "a per-head attention gate" : "a GELU MLP");
    int n_sliding = 0, first = c->n_layers;
    for (int l = 0; l < c->n_layers; l++)
        if (c->layer_sliding[l]) {
            n_sliding++;
            if (l < first) first = l;
        }
    /* Qwen2's config says it with use_sliding_window + max_window_layers: layers from
     * max_window_layers up; the others have no key for a per-layer pattern */
    if (n_sliding && (c->arch != NB_ARCH_QWEN2 || n_sliding != c->n_layers - first))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: its sliding-window layers have no "
                            "config.json form for %s", what, nb_arch_name(c->arch));
    return NB_OK;
}

/* HF name of a table entry, or NULL. */
static const char *hf_pattern(const char *gguf)
{
    const char *g, *h;
    for (int i = 0; nb_model_tensor_names(i, &g, &h); i++)
        if (g && h && !strcmp(g, gguf)) return h;
    return NULL;
}

/* llama.cpp's converter moves HF row s * (hd/2) + i of each head to row 2i + s; so HF
 * row h of a head is row 2 (h % (hd/2)) + h / (hd/2) of the .nib. */
static int32_t *rope_perm(int n_heads, int hd)
{
    int32_t *p = malloc(sizeof *p * (size_t)n_heads * (size_t)hd);
    if (!p) return NULL;
    for (int hh = 0; hh < n_heads; hh++)
        for (int h = 0; h < hd; h++)
            p[hh * hd + h] = hh * hd + 2 * (h % (hd / 2)) + h / (hd / 2);
    return p;
}

static const char *fuse_name(enum fuse f)
{
    return f == F_QKV ? "qkv_proj" : f == F_GATE_UP ? "gate_up_proj" : "";
}

/* Gather the .nib's tensors, check shapes, decide GPTQ or float for each linear. */
static enum nb_status collect(struct exp *e)
{
    const struct nb_config *c = &e->cfg;
    const char *what = nb_nib_path(e->nib);
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim;
    int64_t KV = (int64_t)c->n_kv_heads * c->head_dim;
    int interleaved = c->rope_pairing == NB_ROPE_INTERLEAVED;
    if (interleaved && (!(e->perm_q = rope_perm(c->n_heads, c->head_dim)) ||
                        !(e->perm_k = rope_perm(c->n_kv_heads, c->head_dim)) ||
                        !(e->perm_hd = rope_perm(1, c->head_dim))))
        return nb_set_error(NB_ERR_NOMEM, "export: out of memory");
    e->parts = calloc((size_t)N_SPECS * (size_t)(c->n_layers + 1), sizeof *e->parts);
    if (!e->parts) return nb_set_error(NB_ERR_NOMEM, "export: out of memory");
    for (int s = 0; s < N_SPECS; s++) {
        const struct spec *sp = &k_specs[s];
        const char *hp = hf_pattern(sp->gguf);
        if (!hp) return nb_set_error(NB_ERR_INTERNAL, "export: no HF name for '%s'", sp->gguf);
        for (int l = 0; l < (sp->layered ? c->n_layers : 1); l++) {
            char name[200];
            snprintf(name, sizeof name, sp->gguf, l);
            const struct nb_nib_tensor *t = nb_nib_find(e->nib, name);
            if (!t && sp->fuse == F_HEAD && c->tied_head) /* one copy: the head's, as token_embd */
                t = nb_nib_find(e->nib, "token_embd.weight");
            int need = sp->required == 1 || (sp->required == 2 && c->qkv_bias) ||
                       (sp->required == 3 && c->qk_norm);
            if (!t) {
                if (need)
                    return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is missing", what, name);
                continue;
            }
            struct part *p = &e->parts[e->n_parts++];
            p->spec = sp;
            p->layer = sp->layered ? l : -1;
            p->t = t;
            snprintf(p->hf, sizeof p->hf, hp, l);
            int64_t want_n = 0, want_k = 0;
            switch (sp->rows) {
            case P_Q: p->perm = e->perm_q; break;
            case P_K: p->perm = e->perm_k; break;
            case P_HEAD_DIM: p->perm = e->perm_hd; break;
            case P_NONE: break;
            }
            if (sp->kind == K_VEC) {
                want_k = sp->rows == P_Q ? Q : sp->rows == P_K ? KV
                         : sp->rows == P_HEAD_DIM ? c->head_dim
                         : strstr(sp->gguf, "attn_v.bias") ? KV : E;
                if (t->kind != NB_NIB_PACKED || t->path != NB_WPATH_F32 || t->n_dims != 1 ||
                    t->shape[0] != want_k)
                    return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is not an f32 vector "
                                        "of %lld", what, name, (long long)want_k);
                p->N = 1;
                p->K = want_k;
                continue;
            }
            if (sp->kind == K_EMBD || sp->fuse == F_HEAD) want_n = c->n_vocab, want_k = E;
            else if (sp->fuse == F_QKV) want_n = sp->rows == P_Q ? Q : KV, want_k = E;
            else if (sp->fuse == F_O) want_n = E, want_k = Q;
            else if (sp->fuse == F_GATE_UP) want_n = c->n_ff, want_k = E;
            else want_n = E, want_k = c->n_ff;
            if (t->kind != NB_NIB_PACKED || t->n_dims != 2 || t->shape[0] != want_n ||
                t->shape[1] != want_k)
                return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' is not a [%lld, %lld] "
                                    "matrix", what, name, (long long)want_n, (long long)want_k);
            p->N = want_n;
            p->K = want_k;
            if (sp->kind == K_LIN) { /* the HF module: the name without ".weight" */
                size_t n = strlen(p->hf);
                if (n > 7 && !strcmp(p->hf + n - 7, ".weight")) p->hf[n - 7] = '\0';
            }
        }
    }
    return NB_OK;
}

/* GPTQ or float for one linear (w4a16 off GPTQ's grid: an error naming it). */
static enum nb_status decide(struct exp *e, struct part *p)
{
    const struct nb_nib_tensor *t = p->t;
    struct qmat q;
    p->gptq = 0;
    if (!qmat_of(t, &q)) {
        snprintf(p->why, sizeof p->why, "%s (not a 4-bit grid)", nb_wpath_name(t->path));
        return NB_OK;
    }
    if (t->group != e->group) {
        snprintf(p->why, sizeof p->why, "%s in groups of %d (the checkpoint's group is %d)",
                 nb_wpath_name(t->path), t->group, e->group);
        return NB_OK;
    }
    if (p->N % 8 || p->K % 8) {
        snprintf(p->why, sizeof p->why, "shape [%lld, %lld] does not pack by 8", (long long)p->N,
                 (long long)p->K);
        return NB_OK;
    }
    for (int64_t r = 0; r < p->N; r++)
        for (int64_t g = 0; g < q.ng; g++) {
            float d = q_scale(&q, r, g);
            if (!f16_exact(d)) {
                snprintf(p->why, sizeof p->why, "the scale %g of row %lld, group %lld is not "
                         "exact in f16", (double)d, (long long)r, (long long)g);
                return NB_OK;
            }
            if (q.path == NB_WPATH_W4A16 && q_zero(&q, r, g) < 0)
                return nb_set_error(NB_ERR_UNSUPPORTED,
                                    "%s: tensor '%s' (w4a16) is not on GPTQ's grid: row %lld, "
                                    "group %lld has min %g = %g x scale %g, and GPTQ needs "
                                    "min = -zero x scale with an integer zero in 1..15 (nibble's "
                                    "w4a16 search leaves the min free). Export a w4a8 build "
                                    "(nibble quantize --path w4a8 --recipe speed) or the float "
                                    "model (it is quantized on the w4a8 grid)",
                                    nb_nib_path(e->nib), t->name, (long long)r, (long long)g,
                                    (double)q_min(&q, r, g),
                                    (double)(q_min(&q, r, g) / q_scale(&q, r, g)),
                                    (double)q_scale(&q, r, g));
        }
    p->gptq = 1;
    p->asym = q.path == NB_WPATH_W4A16;
    return NB_OK;
}

static enum nb_status decide_all(struct exp *e)
{
    const struct nb_config *c = &e->cfg;
    enum nb_status st;
    e->group = 0;
    for (int i = 0; i < e->n_parts && !e->group; i++) /* the layers' group */
        if (e->parts[i].spec->kind == K_LIN && e->parts[i].spec->fuse != F_HEAD &&
            nb_wpath_is_int4(e->parts[i].t->path))
            e->group = e->parts[i].t->group;
    if (!e->group)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: no 4-bit matrices in the layers: nothing "
                            "for a GPTQ checkpoint to hold (export the float model instead: it "
                            "is quantized on the w4a8 grid)", nb_nib_path(e->nib));
    for (int i = 0; i < e->n_parts; i++)
        if (e->parts[i].spec->kind == K_LIN && (st = decide(e, &e->parts[i]))) return st;
    /* the parts of one fused vLLM layer agree: one float part makes them all float */
    static const enum fuse fused[2] = {F_QKV, F_GATE_UP};
    for (int l = 0; l < c->n_layers; l++)
        for (int fi = 0; fi < 2; fi++) {
            enum fuse f = fused[fi];
            const struct part *flt = NULL;
            for (int i = 0; i < e->n_parts; i++)
                if (e->parts[i].layer == l && e->parts[i].spec->fuse == f && !e->parts[i].gptq)
                    flt = &e->parts[i];
            for (int i = 0; flt && i < e->n_parts; i++) {
                struct part *p = &e->parts[i];
                if (p->layer != l || p->spec->fuse != f || !p->gptq) continue;
                p->gptq = 0;
                snprintf(p->why, sizeof p->why, "fused with %.120s in vLLM's %s, which goes "
                         "out as float", flt->hf, fuse_name(f));
            }
        }
    e->stats.sym = 1; /* w4a8 matrices in an asymmetric checkpoint: zero 8, still exact */
    for (int i = 0; i < e->n_parts; i++) {
        const struct part *p = &e->parts[i];
        if (p->spec->kind != K_LIN) continue;
        if (p->gptq) {
            e->stats.n_gptq++;
            if (p->asym) e->stats.sym = 0;
            if (p->spec->fuse == F_HEAD) e->stats.lm_head = 1;
        } else {
            e->stats.n_float++;
            note(e, "%s: float (%s)", p->hf, p->why);
        }
    }
    if (!e->stats.n_gptq)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: no matrix can go out as GPTQ (%s)",
                            nb_nib_path(e->nib), e->stats.notes);
    e->stats.group = e->group;
    return NB_OK;
}

/* ---------------------------------------------------------------- tensor bytes */

/* Float rows out in e->dtype, `n` values of src. */
static void to_dtype(enum nb_dtype dt, const float *src, int64_t n, void *dst)
{
    if (dt == NB_DTYPE_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t *o = dst;
    for (int64_t i = 0; i < n; i++)
        o[i] = dt == NB_DTYPE_F16 ? nb_f32_to_f16(src[i]) : nb_f32_to_bf16(src[i]);
}

#define CHUNK_BYTES ((size_t)4 << 20)

static enum nb_status put_qweight(struct nb_st_writer *w, const struct part *p, void *buf)
{
    struct qmat q;
    qmat_of(p->t, &q);
    int64_t per = (int64_t)(CHUNK_BYTES / (4 * (size_t)p->N));
    if (per < 1) per = 1;
    uint32_t *o = buf;
    for (int64_t i0 = 0; i0 < p->K / 8; i0 += per) {
        int64_t i1 = i0 + per < p->K / 8 ? i0 + per : p->K / 8;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t n = 0; n < p->N; n++) {
                int64_t r = p->perm ? p->perm[n] : n;
                uint32_t word = 0;
                if (!q.x16) { /* 8 codes, low nibble first: the row's 4 bytes as they lie */
                    const uint8_t *b = q.qs + r * (q.K / 2) + 4 * i;
                    word = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                           (uint32_t)b[3] << 24;
                } else {
                    for (int j = 0; j < 8; j++)
                        word |= (uint32_t)q_code(&q, r, 8 * i + j) << (4 * j);
                }
                o[(i - i0) * p->N + n] = word;
            }
        enum nb_status st = nb_st_writer_data(w, o, (size_t)((i1 - i0) * p->N) * 4);
        if (st) return st;
    }
    return NB_OK;
}

static enum nb_status put_qzeros(struct nb_st_writer *w, const struct part *p, void *buf)
{
    struct qmat q;
    qmat_of(p->t, &q);
    uint32_t *o = buf;
    for (int64_t g = 0; g < q.ng; g++) { /* one row of N/8 words at a time */
        for (int64_t c = 0; c < p->N / 8; c++) {
            uint32_t word = 0;
            for (int j = 0; j < 8; j++) {
                int64_t n = 8 * c + j, r = p->perm ? p->perm[n] : n;
                word |= (uint32_t)((q_zero(&q, r, g) - 1) & 15) << (4 * j);
            }
            o[c] = word;
        }
        enum nb_status st = nb_st_writer_data(w, o, (size_t)(p->N / 8) * 4);
        if (st) return st;
    }
    return NB_OK;
}

static enum nb_status put_scales(struct nb_st_writer *w, const struct part *p, void *buf)
{
    struct qmat q;
    qmat_of(p->t, &q);
    uint16_t *o = buf;
    for (int64_t g = 0; g < q.ng; g++) {
        for (int64_t n = 0; n < p->N; n++)
            o[n] = nb_f32_to_f16(q_scale(&q, p->perm ? p->perm[n] : n, g));
        enum nb_status st = nb_st_writer_data(w, o, (size_t)p->N * 2);
        if (st) return st;
    }
    return NB_OK;
}

static enum nb_status put_gidx(struct nb_st_writer *w, const struct part *p, int group, void *buf)
{
    int32_t *o = buf;
    for (int64_t k = 0; k < p->K; k++) o[k] = (int32_t)(k / group);
    return nb_st_writer_data(w, o, (size_t)p->K * 4);
}

/* A matrix or vector as float rows, permuted, in dtype. */
static enum nb_status put_float(struct nb_st_writer *w, const struct part *p, enum nb_dtype dt,
                                float *row, void *buf)
{
    size_t esz = dt == NB_DTYPE_F32 ? 4 : 2;
    enum nb_status st;
    if (p->spec->kind == K_VEC) {
        const float *v = p->t->data;
        for (int64_t i = 0; i < p->K; i++) {
            float x;
            memcpy(&x, v + (p->perm ? p->perm[i] : i), 4);
            row[i] = x;
        }
        to_dtype(dt, row, p->K, buf);
        return nb_st_writer_data(w, buf, (size_t)p->K * esz);
    }
    for (int64_t n = 0; n < p->N; n++) {
        if ((st = row_f32(p->t, p->perm ? p->perm[n] : n, row)))
            return nb_wrap_error(st, "tensor '%s': ", p->t->name);
        to_dtype(dt, row, p->K, buf);
        if ((st = nb_st_writer_data(w, buf, (size_t)p->K * esz))) return st;
    }
    return NB_OK;
}

/* model.safetensors: declare every tensor, then write them in the writer's order. */
static enum nb_status write_model(struct exp *e, const char *path)
{
    struct nb_st_writer *w = NULL;
    struct item *items = calloc((size_t)e->n_parts * 4 + 1, sizeof *items);
    int64_t n_items = 0, maxk = 0, maxn = 0;
    void *buf = NULL;
    float *row = NULL;
    enum nb_status st;
    if (!items) return nb_set_error(NB_ERR_NOMEM, "export: out of memory");
    if ((st = nb_st_writer_init(&w, path)) || (st = nb_st_writer_meta(w, "format", "pt")))
        goto fail;
    for (int i = 0; i < e->n_parts; i++) {
        const struct part *p = &e->parts[i];
        char name[240];
        if (p->K > maxk) maxk = p->K;
        if (p->N > maxn) maxn = p->N;
        if (p->spec->kind == K_LIN && p->gptq) {
            const int64_t sq[2] = {p->K / 8, p->N}, sz[2] = {p->K / e->group, p->N / 8};
            const int64_t ss[2] = {p->K / e->group, p->N}, sg[1] = {p->K};
            snprintf(name, sizeof name, "%s.qweight", p->hf);
            if ((st = nb_st_writer_add(w, name, NB_DTYPE_I32, 2, sq, NULL))) goto fail;
            items[n_items++] = (struct item){I_QWEIGHT, p};
            snprintf(name, sizeof name, "%s.qzeros", p->hf);
            if ((st = nb_st_writer_add(w, name, NB_DTYPE_I32, 2, sz, NULL))) goto fail;
            items[n_items++] = (struct item){I_QZEROS, p};
            snprintf(name, sizeof name, "%s.scales", p->hf);
            if ((st = nb_st_writer_add(w, name, NB_DTYPE_F16, 2, ss, NULL))) goto fail;
            items[n_items++] = (struct item){I_SCALES, p};
            snprintf(name, sizeof name, "%s.g_idx", p->hf);
            if ((st = nb_st_writer_add(w, name, NB_DTYPE_I32, 1, sg, NULL))) goto fail;
            items[n_items++] = (struct item){I_GIDX, p};
        } else {
            const int64_t sh[2] = {p->N, p->K};
            snprintf(name, sizeof name, "%s%s", p->hf, p->spec->kind == K_LIN ? ".weight" : "");
            int nd = p->spec->kind == K_VEC ? 1 : 2;
            if ((st = nb_st_writer_add(w, name, e->dtype, nd, nd == 1 ? sh + 1 : sh, NULL)))
                goto fail;
            items[n_items++] = (struct item){I_FLOAT, p};
        }
    }
    size_t bufsz = CHUNK_BYTES;
    if ((size_t)maxk * 4 > bufsz) bufsz = (size_t)maxk * 4;
    if ((size_t)maxn * 4 > bufsz) bufsz = (size_t)maxn * 4;
    if (!(buf = malloc(bufsz)) || !(row = malloc(sizeof(float) * (size_t)maxk))) {
        st = nb_set_error(NB_ERR_NOMEM, "export: out of memory");
        goto fail;
    }
    if ((st = nb_st_writer_begin(w))) goto fail;
    int64_t done = 0;
    for (int64_t k; (k = nb_st_writer_next(w)) >= 0;) {
        const struct item *it = &items[k];
        switch (it->kind) {
        case I_QWEIGHT: st = put_qweight(w, it->p, buf); break;
        case I_QZEROS: st = put_qzeros(w, it->p, buf); break;
        case I_SCALES: st = put_scales(w, it->p, buf); break;
        case I_GIDX: st = put_gidx(w, it->p, e->group, buf); break;
        case I_FLOAT: st = put_float(w, it->p, e->dtype, row, buf); break;
        }
        if (st) goto fail;
        if (e->o->progress) e->o->progress(++done, n_items, e->o->user);
    }
    st = nb_st_writer_finish(w, &e->stats.model_bytes);
fail:
    nb_st_writer_free(w);
    free(items);
    free(buf);
    free(row);
    return st;
}

/* ---------------------------------------------------------------- config.json */

/* A float as the shortest decimal that reads back as the same float. */
static cJSON *num_f32(float x)
{
    char s[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, (double)x);
        if (strtof(s, NULL) == x) break;
    }
    return cJSON_CreateNumber(strtod(s, NULL));
}

static const char *dtype_torch(enum nb_dtype dt)
{
    return dt == NB_DTYPE_F32 ? "float32" : dt == NB_DTYPE_BF16 ? "bfloat16" : "float16";
}

static cJSON *quant_config(const struct exp *e)
{
    cJSON *q = cJSON_CreateObject();
    if (!q) return NULL;
    cJSON_AddStringToObject(q, "quant_method", "gptq");
    cJSON_AddNumberToObject(q, "bits", EXPORT_BITS);
    cJSON_AddNumberToObject(q, "group_size", e->group);
    cJSON_AddBoolToObject(q, "desc_act", 0);
    cJSON_AddBoolToObject(q, "static_groups", 0);
    cJSON_AddBoolToObject(q, "sym", e->stats.sym);
    cJSON_AddBoolToObject(q, "true_sequential", 1);
    cJSON_AddStringToObject(q, "checkpoint_format", "gptq");
    cJSON_AddStringToObject(q, "pack_dtype", "int32");
    cJSON_AddBoolToObject(q, "lm_head", e->stats.lm_head);
    /* float linears: GPTQModel's negative rules, with vLLM's fused names too */
    cJSON *dyn = cJSON_CreateObject();
    for (int i = 0; dyn && i < e->n_parts; i++) {
        const struct part *p = &e->parts[i];
        if (p->spec->kind != K_LIN || p->gptq || p->layer < 0) continue;
        char rule[300];
        if (p->spec->fuse == F_QKV)
            snprintf(rule, sizeof rule, "-:model\\.layers\\.%d\\.self_attn\\.(q|k|v|qkv)_proj$",
                     p->layer);
        else if (p->spec->fuse == F_GATE_UP)
            snprintf(rule, sizeof rule, "-:model\\.layers\\.%d\\.mlp\\.(gate|up|gate_up)_proj$",
                     p->layer);
        else {
            char esc[256];
            size_t k = 0;
            for (const char *s = p->hf; *s && k + 3 < sizeof esc; s++) {
                if (*s == '.') esc[k++] = '\\';
                esc[k++] = *s;
            }
            esc[k] = '\0';
            snprintf(rule, sizeof rule, "-:%s$", esc);
        }
        if (!cJSON_GetObjectItemCaseSensitive(dyn, rule))
            cJSON_AddItemToObject(dyn, rule, cJSON_CreateObject());
    }
    if (dyn && cJSON_GetArraySize(dyn) > 0) cJSON_AddItemToObject(q, "dynamic", dyn);
    else cJSON_Delete(dyn);
    cJSON *meta = cJSON_AddObjectToObject(q, "meta");
    cJSON *qz = cJSON_AddArrayToObject(meta, "quantizer");
    cJSON_AddItemToArray(qz, cJSON_CreateString("nibble:" NIBBLE_VERSION_STRING));
    return q;
}

static cJSON *hf_config(const struct exp *e)
{
    const struct nb_config *c = &e->cfg;
    static const char *const k_class[] = {[NB_ARCH_LLAMA] = "LlamaForCausalLM",
                                          [NB_ARCH_QWEN2] = "Qwen2ForCausalLM",
                                          [NB_ARCH_QWEN3] = "Qwen3ForCausalLM"};
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(k_class[c->arch]));
    cJSON_AddStringToObject(o, "model_type", nb_arch_name(c->arch));
    cJSON_AddNumberToObject(o, "hidden_size", c->n_embd);
    cJSON_AddNumberToObject(o, "intermediate_size", c->n_ff);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "vocab_size", c->n_vocab);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->n_ctx_train);
    cJSON_AddItemToObject(o, "rms_norm_eps", num_f32(c->norm_eps));
    cJSON_AddItemToObject(o, "rope_theta", num_f32(c->rope_theta));
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", 0); /* the head has its own copy */
    if (c->arch != NB_ARCH_QWEN2) {
        int bo = 0;
        for (int i = 0; i < e->n_parts; i++) bo |= !!strstr(e->parts[i].spec->gguf, "output.bias");
        cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias || bo);
    }
    if (c->arch == NB_ARCH_LLAMA) cJSON_AddBoolToObject(o, "mlp_bias", 0);
    if (c->bos_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_id);
    if (c->eos_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", c->eos_id);
    if (c->rope_scaling == NB_ROPE_SCALING_NONE) {
        cJSON_AddNullToObject(o, "rope_scaling");
    } else {
        cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
        int l3 = c->rope_scaling == NB_ROPE_SCALING_LLAMA3;
        cJSON_AddStringToObject(rs, "rope_type", l3 ? "llama3" : "linear");
        cJSON_AddItemToObject(rs, "factor", num_f32(c->rope_factor));
        if (l3) {
            cJSON_AddItemToObject(rs, "low_freq_factor", num_f32(c->rope_low_freq_factor));
            cJSON_AddItemToObject(rs, "high_freq_factor", num_f32(c->rope_high_freq_factor));
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_orig_ctx);
        }
    }
    if (c->arch == NB_ARCH_QWEN2) {
        int first = c->n_layers;
        for (int l = c->n_layers - 1; l >= 0 && c->layer_sliding[l]; l--) first = l;
        cJSON_AddBoolToObject(o, "use_sliding_window", first < c->n_layers);
        if (first < c->n_layers) {
            cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
            cJSON_AddNumberToObject(o, "max_window_layers", first);
        }
    }
    cJSON_AddStringToObject(o, "torch_dtype", dtype_torch(e->dtype));
    cJSON_AddItemToObject(o, "quantization_config", quant_config(e));
    return o;
}

/* ---------------------------------------------------------------- files */

static enum nb_status write_bytes(const char *path, const void *p, size_t n)
{
    struct nb_outfile f = {.fd = -1};
    enum nb_status st;
    if ((st = nb_outfile_open(&f, path)) || (st = nb_outfile_write(&f, p, n)) ||
        (st = nb_outfile_commit(&f, NULL)))
        nb_outfile_abort(&f);
    return st;
}

/* JSON as Hugging Face writes it: two spaces per level, "key": value. cJSON indents with
 * tabs and puts one after each colon; a tab inside a string is always escaped, so every
 * raw tab is layout. */
static enum nb_status write_json(const char *path, const cJSON *o)
{
    char *s = o ? cJSON_Print(o) : NULL, *t = NULL;
    enum nb_status st;
    if (!s || !(t = malloc(2 * strlen(s) + 2))) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t n = 0;
    for (const char *c = s; *c; c++) {
        if (*c == '}') { /* an empty object on one line: {} */
            size_t j = n;
            while (j > 0 && (t[j - 1] == ' ' || t[j - 1] == '\n')) j--;
            if (j > 0 && t[j - 1] == '{') n = j;
        }
        if (*c != '\t') t[n++] = *c;
        else if (c > s && c[-1] == ':') t[n++] = ' ';
        else t[n++] = ' ', t[n++] = ' ';
    }
    t[n++] = '\n';
    st = write_bytes(path, t, n);
done:
    cJSON_free(s);
    free(t);
    return st;
}

/* Copy a whole (small) file; NB_ERR_NOT_FOUND when it is not there. */
static enum nb_status copy_file(const char *src, const char *dst)
{
    struct nb_mapped_file mf;
    struct stat sb;
    if (stat(src, &sb) != 0 || !S_ISREG(sb.st_mode)) return NB_ERR_NOT_FOUND;
    enum nb_status st = nb_file_map(&mf, src);
    if (st) return st;
    st = write_bytes(dst, mf.data, mf.size);
    nb_file_unmap(&mf);
    return st;
}

/* The tokenizer (.nib blobs first, then the source folder) and generation files. */
static enum nb_status write_tokenizer(struct exp *e, const char *dir, const char *src_dir)
{
    static const char *const files[] = {"tokenizer.json", "tokenizer.model",
                                        "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json"};
    char dst[4096], src[4096], blob[64];
    int have_vocab = 0;
    enum nb_status st;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        snprintf(blob, sizeof blob, "tokenizer/%s", files[i]);
        const struct nb_nib_tensor *b = nb_nib_find(e->nib, blob);
        if (b && b->kind == NB_NIB_BLOB) {
            st = write_bytes(dst, b->data, (size_t)b->size);
        } else if (src_dir) {
            snprintf(src, sizeof src, "%s/%s", src_dir, files[i]);
            st = copy_file(src, dst);
        } else {
            st = NB_ERR_NOT_FOUND;
        }
        if (st == NB_ERR_NOT_FOUND) continue;
        if (st) return st;
        e->stats.n_tokenizer_files++;
        have_vocab |= i < 2;
    }
    nb_clear_error();
    if (!have_vocab)
        note(e, "tokenizer: none written (the source's tokenizer is %s; copy tokenizer.json or "
             "tokenizer.model from the original Hugging Face model)",
             nb_nib_find(e->nib, "tokenizer/gguf")          ? "GGUF metadata"
             : nb_nib_find(e->nib, "tokenizer/llama2c.bin") ? "llama2.c's format"
                                                            : "not in the model");
    return NB_OK;
}

/* 1 when path is a folder holding anything. */
static int dir_nonempty(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    int any = 0;
    while (!any && (de = readdir(d)))
        any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return any;
}

/* Remove a folder this export wrote (plain files only; subfolders are left). */
static void remove_dir_files(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    char p[4096];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (unlink(p) != 0) NB_LOGW("export: could not remove %s: %s", p, strerror(errno));
    }
    closedir(d);
    if (rmdir(path) != 0) NB_LOGW("export: could not remove %s: %s", path, strerror(errno));
}

/* ---------------------------------------------------------------- the export */

static enum nb_status parse_params(const struct nb_export_params *in, struct nb_export_params *p,
                                   enum nb_dtype *dt)
{
    *p = nb_export_default_params();
    enum nb_status st = nb_params_in(p, sizeof *p, in, "nb_export_params");
    if (st) return st;
    const char *d = p->dtype ? p->dtype : "f16";
    if (!strcmp(d, "f16")) *dt = NB_DTYPE_F16;
    else if (!strcmp(d, "bf16")) *dt = NB_DTYPE_BF16;
    else if (!strcmp(d, "f32")) *dt = NB_DTYPE_F32;
    else
        return nb_set_error(NB_ERR_INVALID_ARG, "export: dtype '%s' is not one of f16, bf16, f32",
                            d);
    if (p->group != 32 && p->group != 64 && p->group != 128)
        return nb_set_error(NB_ERR_INVALID_ARG, "export: group %d is not one of 32, 64, 128",
                            p->group);
    if (p->head_bits != 4 && p->head_bits != 16)
        return nb_set_error(NB_ERR_INVALID_ARG, "export: head bits %d are not 4 or 16",
                            p->head_bits);
    if (p->gptq && !p->calib_path)
        return nb_set_error(NB_ERR_INVALID_ARG, "export: GPTQ needs a calibration text "
                            "(--calib FILE)");
    if (p->n_threads < 0 || p->calib_tokens < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "export: n_threads and calib_tokens must not "
                            "be negative");
    return NB_OK;
}

struct nb_export_params nb_export_default_params(void)
{
    return (struct nb_export_params){.size = sizeof(struct nb_export_params), .dtype = "f16",
                                     .group = 128, .head_bits = 4};
}

/* The .nib to export: the model itself, or a float model quantized into memory. */
static enum nb_status open_packed(struct exp *e, const char *model, char **src_dir)
{
    struct nb_source *src = NULL;
    enum nb_status st = nb_source_open(&src, model);
    *src_dir = NULL;
    if (st) return st;
    if (src->kind == NB_FILE_NIB) {
        e->src = src;
        e->nib = src->nib;
        if ((st = nb_source_verify(src))) return st;
        const cJSON *from = cJSON_GetObjectItemCaseSensitive(nb_nib_header(e->nib), "source");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(from, "path");
        struct stat sb;
        if (cJSON_IsString(sp) && stat(sp->valuestring, &sb) == 0 && S_ISDIR(sb.st_mode))
            *src_dir = strdup(sp->valuestring);
        return NB_OK;
    }
    if (src->kind == NB_FILE_DIR) *src_dir = strdup(model);
    const struct nb_export_params *p = e->o;
    struct nb_quantize_opts qo;
    struct nb_quantize_result qr;
    nb_quantize_default_opts(&qo);
    qo.path = NB_WPATH_W4A8;
    qo.recipe = "speed";
    qo.group = p->group;
    qo.head_bits = p->head_bits;
    qo.embd_bits = 16; /* a GPTQ checkpoint keeps embeddings as float anyway */
    qo.layout = NB_LAYOUT_ROWS;
    qo.calib_path = p->calib_path;
    qo.calib_tokens = p->calib_tokens;
    qo.gptq = p->gptq;
    qo.n_threads = p->n_threads;
    int fd = -1;
    struct nb_nib *nib = NULL;
    st = nb_quantize_memory(src, &qo, &fd, &qr);
    nb_source_free(src);
    if (st) return st;
    st = nb_nib_open_fd(&nib, fd, model);
    close(fd);
    if (st) return st;
    if ((st = nb_source_from_nib(&e->src, nib, 0))) return st;
    e->nib = nib;
    return NB_OK;
}

/* Move the written folder tmp to out (replacing out when allowed). */
static enum nb_status install_dir(const char *tmp, const char *out, int force)
{
    struct stat sb;
    if (stat(out, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return nb_set_error(NB_ERR_INVALID_ARG, "export: %s exists and is not a folder", out);
        if (dir_nonempty(out) && !force)
            return nb_set_error(NB_ERR_INVALID_ARG, "export: %s exists and is not empty "
                                "(--force replaces it)", out);
        char old[4200];
        snprintf(old, sizeof old, "%s.old.XXXXXX", out);
        if (!mkdtemp(old) || rename(out, old) != 0)
            return nb_set_error(NB_ERR_IO, "export: cannot move %s aside: %s", out,
                                strerror(errno));
        if (rename(tmp, out) != 0) {
            int err = errno;
            if (rename(old, out) != 0) NB_LOGW("export: %s is now at %s", out, old);
            return nb_set_error(NB_ERR_IO, "export: cannot rename %s to %s: %s", tmp, out,
                                strerror(err));
        }
        remove_dir_files(old);
        return NB_OK;
    }
    if (rename(tmp, out) != 0)
        return nb_set_error(NB_ERR_IO, "export: cannot rename %s to %s: %s", tmp, out,
                            strerror(errno));
    return NB_OK;
}

enum nb_status nb_export_gptq(const char *model, const char *out_dir,
                              const struct nb_export_params *params,
                              struct nb_export_stats *stats)
{
    struct nb_export_params p;
    struct exp e = {0};
    char out[4000], tmp[4096] = "", path[4200];
    char *src_dir = NULL;
    cJSON *cfg = NULL;
    int made_tmp = 0;
    enum nb_status st;
    if (stats && stats->size < sizeof(size_t))
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_export_gptq: stats->size is %zu: set it to "
                            "sizeof(struct nb_export_stats)", stats->size);
    if ((st = parse_params(params, &p, &e.dtype))) return st;
    e.o = &p;
    e.stats.size = sizeof e.stats;
    if (!model || !*model || !out_dir || !*out_dir)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_export_gptq: give a model and an output "
                            "folder");
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/') n--;
    if (n >= sizeof out - 32)
        return nb_set_error(NB_ERR_INVALID_ARG, "export: output path too long");
    memcpy(out, out_dir, n);
    out[n] = '\0';
    struct stat sb;
    if (stat(out, &sb) == 0 && (!S_ISDIR(sb.st_mode) || (dir_nonempty(out) && !p.force)))
        return nb_set_error(NB_ERR_INVALID_ARG, "export: %s exists and %s", out,
                            S_ISDIR(sb.st_mode) ? "is not empty (--force replaces it)"
                                                : "is not a folder");
    if ((st = open_packed(&e, model, &src_dir))) goto fail;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(nb_nib_header(e.nib), "config");
    if ((st = nb_config_from_json(&e.cfg, c, nb_nib_path(e.nib))) ||
        (st = check_arch(&e.cfg, model)) || (st = collect(&e)) || (st = decide_all(&e)))
        goto fail;
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", out);
    if (!mkdtemp(tmp)) {
        st = nb_set_error(NB_ERR_IO, "export: cannot create a folder beside %s: %s", out,
                          strerror(errno));
        goto fail;
    }
    made_tmp = 1;
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    if ((st = write_model(&e, path))) goto fail;
    if (!(cfg = hf_config(&e))) {
        st = nb_set_error(NB_ERR_NOMEM, "export: out of memory");
        goto fail;
    }
    snprintf(path, sizeof path, "%s/config.json", tmp);
    if ((st = write_json(path, cfg))) goto fail;
    snprintf(path, sizeof path, "%s/quantize_config.json", tmp);
    if ((st = write_json(path, cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config"))))
        goto fail;
    if ((st = write_tokenizer(&e, tmp, src_dir))) goto fail;
    if (chmod(tmp, 0755) != 0) NB_LOGW("export: chmod %s: %s", tmp, strerror(errno));
    if ((st = install_dir(tmp, out, p.force))) goto fail;
    made_tmp = 0;
    nb_api_out(stats, &e.stats, sizeof e.stats);
fail:
    if (st && made_tmp) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", nb_last_error());
        remove_dir_files(tmp);
        nb_set_error(st, "%s (nothing written to %s)", msg, out);
    }
    cJSON_Delete(cfg);
    free(src_dir);
    free(e.parts);
    free(e.perm_q);
    free(e.perm_k);
    free(e.perm_hd);
    nb_source_free(e.src);
    return st;
}

/* ---------------------------------------------------------------- dump */

enum nb_status nb_nib_dump_f32(const char *nib_path, const char *tensor, const char *out_path,
                               int64_t shape[2])
{
    struct nb_nib *nib = NULL;
    struct nb_outfile f = {.fd = -1};
    float *row = NULL;
    enum nb_status st;
    if ((st = nb_nib_open(&nib, nib_path))) return st;
    const struct nb_nib_tensor *t = nb_nib_find(nib, tensor);
    if (!t || t->kind != NB_NIB_PACKED || t->n_dims < 1 ||
        (t->n_dims == 1 && t->path != NB_WPATH_F32)) {
        st = nb_set_error(NB_ERR_NOT_FOUND, "%s: no tensor '%s'", nib_path, tensor);
        goto fail;
    }
    int64_t N = t->n_dims == 2 ? t->shape[0] : 1, K = t->n_dims == 2 ? t->shape[1] : t->shape[0];
    if (!(row = malloc(sizeof(float) * (size_t)K))) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = nb_outfile_open(&f, out_path))) goto fail;
    for (int64_t r = 0; r < N; r++) {
        if (t->n_dims == 1) memcpy(row, t->data, sizeof(float) * (size_t)K);
        else if ((st = row_f32(t, r, row)))
            goto fail;
        if ((st = nb_outfile_write(&f, row, sizeof(float) * (size_t)K))) goto fail;
    }
    if ((st = nb_outfile_commit(&f, NULL))) goto fail;
    if (shape) shape[0] = N, shape[1] = K;
fail:
    nb_outfile_abort(&f);
    free(row);
    nb_nib_free(nib);
    return st;
}
