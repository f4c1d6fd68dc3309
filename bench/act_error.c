/* act_error — the activation lab: where w4a8's int8 activation rounding hurts a model,
 * per tensor class, and what each candidate fix buys (docs/activation-error.md).
 *
 * Three passes of the f32 model (weights as stored, activations through an observer,
 * model.h's nb_ctx_set_observer):
 *
 *   1. stats   over the calibration text: per site and layer, each input channel's
 *              max |x| (SmoothQuant's scales, the outlier channels) and the mean
 *              max|x| / rms(x) of a token's row;
 *   2. layer   over the calibration text: for every linear matrix W (classes q k v o
 *              gate up down head) and every input row x seen at its site, the output
 *              y = W x against y' = W' x' for each (activation treatment, weights)
 *              pair; printed as the relative error sqrt(sum |y' - y|^2 / sum |y|^2)
 *              pooled over the class's layers and tokens;
 *   3. e2e     over the held-out text: KL(f32 || model with the treatment), scored as
 *              nb_eval_chunks does (llama-perplexity's method, `nibble eval
 *              --ppl-chunks 256`), the activations rewritten in place at the chosen
 *              sites and the weights swapped for their int4 round trip; also the KL
 *              against the same weights with exact activations (the activations' own
 *              share).
 *
 * Activations are rounded exactly as nb_act_quant_q8_ref does (d = max|x| / 127 per
 * group, q = round-to-nearest-even(x / d), value d * q): "fake" quantization in f32, so
 * one f32 GEMM stands for the int8 one. Weights are f32 (activation rounding alone),
 * int4 by the w4a8 grid's scale search without calibration (RTN: what `nibble
 * quantize --path w4a8` stores), or GPTQ on the w4a8 grid (nb_gptq_model, which fits
 * each layer with int8 activations, as `--gptq` does). Both int4 forms are decoded back
 * to f32 rows (the values the kernels use).
 *
 * Treatments (all int8, symmetric, per token):
 *   g128 g64 g32  one scale per group of G channels (w4a8 today: G = the weight group)
 *   row           one scale per token row
 *   out4 out16    g128, with the k channels of largest calibration max|x| at this site
 *                 and layer kept exact (an f32 / int16 side GEMM at run time)
 *   top4          g128, with each token's own 4 largest |x| kept exact (dynamic: the
 *                 channels change per token; a sparse side product at run time)
 *   sq.5 sq.75    SmoothQuant: x / s rounded at g128, W * s; s_j = max|x_j|^a /
 *                 max|W_j|^(1-a) (max over every matrix reading the site; for o the
 *                 channels that share a kv head share s, as the v -> o fold needs).
 *                 Applied as x' = s * Q(x / s) against W' = int4(W * s) / s, which is
 *                 the folded model's arithmetic.
 *
 * The observer writes the activations it is shown (the context's own buffers, which
 * the GEMM reads next): the observer's const is a calibration contract, bent here on
 * purpose, in a lab tool only.
 *
 * Usage: act_error [-m MODEL] [--calib FILE] [--heldout FILE] [--tokens N] [-t N]
 *                  [--no-gptq] [--no-e2e] [--no-layer] [--layers]
 *   --tokens N  layer errors on the first N calibration tokens (8192; 0: all); the
 *               statistics and GPTQ always use the whole text
 * Paths default to kjv-7m and its calibration texts, relative to the repository root.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "eval/fidelity.h"
#include "model/context.h"
#include "model/model.h"
#include "quant/quant.h"
#include "runtime/calib.h"
#include "nibble.h"
#include "nibble_eval.h"

/* ---------------------------------------------------------------- what is measured */

enum cls { C_Q, C_K, C_V, C_O, C_GATE, C_UP, C_DOWN, C_HEAD, N_CLS };
static const char *const k_cls_name[N_CLS] = {"q", "k", "v", "o", "gate", "up", "down", "head"};
static const enum nb_site k_cls_site[N_CLS] = {
    NB_SITE_ATTN_IN, NB_SITE_ATTN_IN, NB_SITE_ATTN_IN, NB_SITE_ATTN_OUT,
    NB_SITE_FFN_IN,  NB_SITE_FFN_IN,  NB_SITE_FFN_MID, NB_SITE_OUT_IN};
static const char *const k_site_name[NB_SITE_COUNT] = {"attn_in (q k v)", "attn_out (o)",
                                                       "ffn_in (gate up)", "ffn_mid (down)",
                                                       "out_in (head)"};

#define N_ALPHA 2
static const float k_alpha[N_ALPHA] = {0.5f, 0.75f};
#define N_KEEP 2
static const int k_keep[N_KEEP] = {4, 16};

enum treat { T_EXACT, T_G128, T_G64, T_G32, T_ROW, T_OUT4, T_OUT16, T_TOP4, T_SQ50, T_SQ75,
             N_TREAT };
static const char *const k_treat_name[N_TREAT] = {"exact", "g128",  "g64",  "g32", "row",
                                                  "out4",  "out16", "top4", "sq.5", "sq.75"};
#define TOP_K 4
static int treat_group(enum treat t) { return t == T_G64 ? 64 : t == T_G32 ? 32 : t == T_ROW ? 0 : 128; }
static int treat_keep(enum treat t) { return t == T_OUT4 ? 0 : t == T_OUT16 ? 1 : -1; }
static int treat_alpha(enum treat t) { return t == T_SQ50 ? 0 : t == T_SQ75 ? 1 : -1; }

/* W_RTN_D32: RTN, with down at group 32 (end to end only) */
enum wvar { W_F32, W_RTN, W_GPTQ, W_RTN_D32, N_WVAR };
static const char *const k_wvar_name[N_WVAR] = {"f32", "int4 RTN", "int4 GPTQ", "int4 RTN, down g32"};

/* ---------------------------------------------------------------- the model's pieces */

struct site_stats {
    int64_t len;
    float *amax;               /* [len] max |x| over the calibration tokens */
    float *s[N_ALPHA];         /* [len] SmoothQuant scales */
    uint8_t *keep[N_KEEP];     /* [len] 1: an outlier channel kept exact */
    double ratio_sum;          /* sum over tokens of max|x| / rms(x) */
    double max_ratio;          /* the largest channel max / median channel max */
    int64_t n;
};

struct lab {
    struct nb_model *m;
    int L;
    struct site_stats st[NB_SITE_COUNT][NB_MAX_LAYERS];
    /* per class and layer (the head: layer 0): the weights */
    struct nb_weight *wref[N_CLS][NB_MAX_LAYERS]; /* the model's own */
    const float *w[N_CLS][NB_MAX_LAYERS];         /* f32 rows of the source */
    float *wq[N_WVAR][N_CLS][NB_MAX_LAYERS];      /* int4 round trips (RTN, GPTQ) */
    float *wsq[N_ALPHA][N_CLS][NB_MAX_LAYERS];    /* int4(W * s) / s */

    /* pass 2 sums */
    double ref[N_CLS], ref_l[N_CLS][NB_MAX_LAYERS];
    double err[N_TREAT][N_WVAR][N_CLS];
    double err_l[N_CLS][NB_MAX_LAYERS]; /* g128, f32 weights */
    float *xt[N_TREAT];                 /* [chunk][widest] treated inputs */
    uint8_t *top;                       /* [widest] one token's top-k channels */
    float *y, *yt;                      /* [chunk][widest out] */

    /* pass 3: the treatment of each site (T_EXACT: none) */
    enum treat site_treat[NB_SITE_COUNT];
    enum { PASS_STATS, PASS_LAYER, PASS_E2E } pass;
};

static int n_layers_of(const struct lab *b, enum nb_site s) { return s == NB_SITE_OUT_IN ? 1 : b->L; }

static struct nb_weight *class_weight(struct nb_model *m, enum cls c, int l)
{
    struct nb_layer *L = &m->layers[l];
    switch (c) {
    case C_Q: return &L->wq;
    case C_K: return &L->wk;
    case C_V: return &L->wv;
    case C_O: return &L->wo;
    case C_GATE: return &L->w_gate;
    case C_UP: return &L->w_up;
    case C_DOWN: return &L->w_down;
    default: return &m->output;
    }
}

/* ---------------------------------------------------------------- activation rounding */

/* One group of n values, as nb_act_quant_q8_ref, except that channels with keep[i]
 * are left exact and do not set the scale. */
static void round_group(float *x, int n, const uint8_t *keep)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (!keep || !keep[i]) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f;
    for (int i = 0; i < n; i++) {
        if (keep && keep[i]) continue;
        float v = d > 0.0f ? nearbyintf(x[i] / d) : 0.0f;
        v = fminf(fmaxf(v, -127.0f), 127.0f);
        x[i] = v * d;
    }
}

/* x [n][len] in place: treatment t at site s, layer l. */
static void treat_rows(struct lab *b, enum treat t, enum nb_site s, int l, float *x, int n,
                       int64_t len)
{
    if (t == T_EXACT) return;
    const struct site_stats *ss = &b->st[s][l];
    int g = treat_group(t), k = treat_keep(t), a = treat_alpha(t);
    int64_t G = g ? g : len;
    const uint8_t *keep = k >= 0 ? ss->keep[k] : t == T_TOP4 ? b->top : NULL;
    const float *sc = a >= 0 ? ss->s[a] : NULL;
    for (int r = 0; r < n; r++) {
        float *row = x + (int64_t)r * len;
        if (t == T_TOP4) { /* this token's TOP_K largest |x| */
            memset(b->top, 0, (size_t)len);
            for (int j = 0; j < TOP_K; j++) {
                int64_t best = -1;
                for (int64_t i = 0; i < len; i++)
                    if (!b->top[i] && (best < 0 || fabsf(row[i]) > fabsf(row[best]))) best = i;
                b->top[best] = 1;
            }
        }
        if (sc)
            for (int64_t i = 0; i < len; i++) row[i] /= sc[i];
        for (int64_t i0 = 0; i0 < len; i0 += G)
            round_group(row + i0, (int)G, keep ? keep + i0 : NULL);
        if (sc)
            for (int64_t i = 0; i < len; i++) row[i] *= sc[i];
    }
}

/* ---------------------------------------------------------------- pass 1: statistics */

static void stats_rows(struct lab *b, enum nb_site s, int l, const float *x, int n, int64_t len)
{
    struct site_stats *ss = &b->st[s][l];
    for (int r = 0; r < n; r++) {
        const float *row = x + (int64_t)r * len;
        double sq = 0;
        float mx = 0;
        for (int64_t i = 0; i < len; i++) {
            float v = fabsf(row[i]);
            ss->amax[i] = fmaxf(ss->amax[i], v);
            mx = fmaxf(mx, v);
            sq += (double)v * v;
        }
        if (sq > 0) ss->ratio_sum += mx / sqrt(sq / (double)len);
        ss->n++;
    }
}

static int cmp_float_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* After pass 1: the outlier channels, and the SmoothQuant scales (tied within a kv
 * group at attn_out). */
static void finish_stats(struct lab *b)
{
    const struct nb_config *c = &b->m->cfg;
    int64_t D = c->head_dim, rep = c->n_heads / c->n_kv_heads;
    for (int s = 0; s < NB_SITE_COUNT; s++)
        for (int l = 0; l < n_layers_of(b, s); l++) {
            struct site_stats *ss = &b->st[s][l];
            int64_t len = ss->len;
            float *sorted = malloc(sizeof(float) * (size_t)len);
            memcpy(sorted, ss->amax, sizeof(float) * (size_t)len);
            qsort(sorted, (size_t)len, sizeof(float), cmp_float_desc);
            ss->max_ratio = sorted[len / 2] > 0 ? sorted[0] / sorted[len / 2] : 0;
            for (int k = 0; k < N_KEEP; k++)
                for (int64_t i = 0, kept = 0; i < len; i++)
                    if (ss->amax[i] >= sorted[k_keep[k] - 1] && kept < k_keep[k])
                        ss->keep[k][i] = 1, kept++;
            free(sorted);
            /* max |W_j| over every matrix reading this site */
            float *wmax = calloc((size_t)len, sizeof(float));
            float *amax = malloc(sizeof(float) * (size_t)len);
            memcpy(amax, ss->amax, sizeof(float) * (size_t)len);
            for (int cl = 0; cl < N_CLS; cl++) {
                if (k_cls_site[cl] != (enum nb_site)s) continue;
                const struct nb_weight *w = b->wref[cl][l];
                for (int64_t r = 0; r < w->n_out; r++)
                    for (int64_t i = 0; i < len; i++)
                        wmax[i] = fmaxf(wmax[i], fabsf(b->w[cl][l][r * len + i]));
            }
            if (s == NB_SITE_ATTN_OUT) /* channel (h, i) comes from v row (h / rep, i) */
                for (int64_t kv = 0; kv < c->n_kv_heads; kv++)
                    for (int64_t i = 0; i < D; i++) {
                        float am = 0, wm = 0;
                        for (int64_t h = kv * rep; h < (kv + 1) * rep; h++)
                            am = fmaxf(am, amax[h * D + i]), wm = fmaxf(wm, wmax[h * D + i]);
                        for (int64_t h = kv * rep; h < (kv + 1) * rep; h++)
                            amax[h * D + i] = am, wmax[h * D + i] = wm;
                    }
            for (int a = 0; a < N_ALPHA; a++)
                for (int64_t i = 0; i < len; i++) {
                    double v = amax[i] > 0 && wmax[i] > 0
                                   ? pow(amax[i], k_alpha[a]) / pow(wmax[i], 1 - k_alpha[a])
                                   : 1.0;
                    ss->s[a][i] = (float)v;
                }
            free(wmax), free(amax);
        }
}

/* ---------------------------------------------------------------- weights */

/* out = int4 w4a8 round trip of w [n_out][n_in] scaled by columns `sc` (NULL: none)
 * and scaled back. */
static enum nb_status int4_round_trip(const float *w, int64_t n_out, int64_t n_in, int group,
                                      const float *sc, float *out)
{
    struct nb_layout_planes pl;
    nb_layout_planes(NB_WPATH_W4A8, group, n_out, n_in, &pl);
    void *blob = aligned_alloc(64, (size_t)((pl.total + 63) / 64 * 64));
    float *ws = sc ? malloc(sizeof(float) * (size_t)(n_out * n_in)) : NULL;
    if (!blob || (sc && !ws)) {
        free(blob), free(ws);
        return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    }
    if (sc)
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t i = 0; i < n_in; i++) ws[r * n_in + i] = w[r * n_in + i] * sc[i];
    enum nb_status st = nb_quantize_rows(NB_WPATH_W4A8, group, sc ? ws : w, n_out, n_in, 0, n_out,
                                         NULL, 1, blob, NULL);
    if (!st) st = nb_dequantize_rows(NB_WPATH_W4A8, group, blob, n_out, n_in, 0, n_out, out);
    if (!st && sc)
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t i = 0; i < n_in; i++) out[r * n_in + i] /= sc[i];
    free(blob), free(ws);
    return st;
}

static enum nb_status prepare_rtn(struct lab *b, int group)
{
    enum nb_status st = NB_OK;
    for (int cl = 0; cl < N_CLS && !st; cl++)
        for (int l = 0; l < n_layers_of(b, k_cls_site[cl]) && !st; l++) {
            const struct nb_weight *w = b->wref[cl][l];
            size_t sz = sizeof(float) * (size_t)(w->n_out * w->n_in);
            b->wq[W_RTN][cl][l] = malloc(sz);
            st = int4_round_trip(b->w[cl][l], w->n_out, w->n_in, group, NULL, b->wq[W_RTN][cl][l]);
            if (!st && cl == C_DOWN) {
                b->wq[W_RTN_D32][cl][l] = malloc(sz);
                st = int4_round_trip(b->w[cl][l], w->n_out, w->n_in, 32, NULL,
                                     b->wq[W_RTN_D32][cl][l]);
            }
            for (int a = 0; a < N_ALPHA && !st; a++) {
                b->wsq[a][cl][l] = malloc(sz);
                st = int4_round_trip(b->w[cl][l], w->n_out, w->n_in, group,
                                     b->st[k_cls_site[cl]][l].s[a], b->wsq[a][cl][l]);
            }
        }
    return st;
}

/* GPTQ on the w4a8 grid (int8 activations while fitting, as `quantize --gptq`). */
static enum nb_status prepare_gptq(struct lab *b, const struct nb_calib *cal, int group,
                                   int n_threads)
{
    struct nb_act_stats as;
    struct nb_prequant *pq = NULL;
    int npq = 0;
    struct nb_gptq_opts o = {.path = NB_WPATH_W4A8, .head_path = NB_WPATH_W4A8, .group = group,
                             .layout = NB_LAYOUT_ROWS, .search = 1, .n_threads = n_threads,
                             .damp = 0.01};
    enum nb_status st = nb_act_stats_init(&as, &b->m->cfg);
    if (!st) st = nb_gptq_model(b->m, cal, &o, &pq, &npq, &as);
    for (int i = 0; i < npq && !st; i++)
        for (int cl = 0; cl < N_CLS; cl++)
            for (int l = 0; l < n_layers_of(b, k_cls_site[cl]); l++) {
                if (pq[i].w != b->wref[cl][l]) continue;
                const struct nb_weight *q = &pq[i].q;
                b->wq[W_GPTQ][cl][l] = malloc(sizeof(float) * (size_t)(q->n_out * q->n_in));
                st = nb_dequantize_rows(NB_WPATH_W4A8, q->group, q->data, q->n_out, q->n_in, 0,
                                        q->n_out, b->wq[W_GPTQ][cl][l]);
            }
    for (int cl = 0; cl < N_CLS && !st; cl++)
        for (int l = 0; l < n_layers_of(b, k_cls_site[cl]); l++)
            if (!b->wq[W_GPTQ][cl][l])
                st = nb_set_error(NB_ERR_INTERNAL, "act_error: GPTQ left %s of layer %d",
                                  k_cls_name[cl], l);
    nb_prequant_free(pq, npq);
    nb_act_stats_free(&as);
    return st;
}

/* The weights of variant v (and for a SmoothQuant treatment with int4 weights, the
 * int4 round trip of the smoothed matrix). */
static const float *weights_for(const struct lab *b, enum wvar v, enum treat t, enum cls cl, int l)
{
    if (v == W_F32) return b->w[cl][l];
    if (v == W_RTN && treat_alpha(t) >= 0) return b->wsq[treat_alpha(t)][cl][l];
    if (v == W_RTN_D32 && cl != C_DOWN) return b->wq[W_RTN][cl][l];
    return b->wq[v][cl][l];
}

/* ---------------------------------------------------------------- pass 2: layer errors */

static int wvar_ok(const struct lab *b, enum wvar v, enum treat t)
{
    if (v == W_GPTQ) return b->wq[W_GPTQ][C_HEAD][0] && treat_alpha(t) < 0;
    return v != W_RTN_D32;
}

static double diff_sq(const float *a, const float *c, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)a[i] - c[i]) * ((double)a[i] - c[i]);
    return s;
}

static void layer_rows(struct lab *b, enum nb_site s, int l, const float *x, int n, int64_t len)
{
    for (int t = 1; t < N_TREAT; t++) {
        memcpy(b->xt[t], x, sizeof(float) * (size_t)(n * len));
        treat_rows(b, t, s, l, b->xt[t], n, len);
    }
    for (int cl = 0; cl < N_CLS; cl++) {
        if (k_cls_site[cl] != s) continue;
        int64_t no = b->wref[cl][l]->n_out;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, (int)no, (int)len, 1.0f, x,
                    (int)len, b->w[cl][l], (int)len, 0.0f, b->y, (int)no);
        double r = 0;
        for (int64_t i = 0; i < n * no; i++) r += (double)b->y[i] * b->y[i];
        b->ref[cl] += r, b->ref_l[cl][l] += r;
        for (int t = 0; t < N_TREAT; t++)
            for (int v = 0; v < N_WVAR; v++) {
                if ((t == T_EXACT && v == W_F32) || !wvar_ok(b, v, t)) continue;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, (int)no, (int)len, 1.0f,
                            t == T_EXACT ? x : b->xt[t], (int)len, weights_for(b, v, t, cl, l),
                            (int)len, 0.0f, b->yt, (int)no);
                double e = diff_sq(b->yt, b->y, n * no);
                b->err[t][v][cl] += e;
                if (t == T_G128 && v == W_F32) b->err_l[cl][l] += e;
            }
    }
}

/* ---------------------------------------------------------------- the observer */

static void observer(void *user, enum nb_site site, int layer, const float *x, int n, int64_t len)
{
    struct lab *b = user;
    int l = layer < 0 ? 0 : layer;
    if (n == 0) return;
    switch (b->pass) {
    case PASS_STATS: stats_rows(b, site, l, x, n, len); break;
    case PASS_LAYER: layer_rows(b, site, l, x, n, len); break;
    case PASS_E2E: treat_rows(b, b->site_treat[site], site, l, (float *)x, n, len); break;
    }
}

static enum nb_status run_text(struct nb_ctx *ctx, const struct nb_calib *cal, float *logits)
{
    int32_t pos[512];
    uint8_t want[512]; /* every row reaches the head's site */
    enum nb_status st = NB_OK;
    for (int i = 0; i < cal->chunk; i++) pos[i] = i, want[i] = 1;
    for (int i = 0; i < cal->n && !st; i += cal->chunk) {
        int n = cal->n - i < cal->chunk ? cal->n - i : cal->chunk;
        nb_ctx_clear_seq(ctx, 0);
        struct nb_batch bt = {.n_tokens = n, .token = cal->ids + i, .pos = pos,
                               .want_logits = want};
        st = nb_decode(ctx, &bt, logits);
    }
    return st;
}

/* ---------------------------------------------------------------- pass 3: end to end */

struct e2e {
    const char *name;
    enum wvar w;
    enum treat t;     /* at the sites in `sites` */
    unsigned sites;   /* bit per nb_site */
};
#define ALL_SITES ((1u << NB_SITE_COUNT) - 1)

/* Point every linear matrix at variant v's rows (v == W_F32: the model's own). */
static void swap_weights(struct lab *b, enum wvar v, enum treat t, const struct nb_weight *saved)
{
    int k = 0;
    for (int cl = 0; cl < N_CLS; cl++)
        for (int l = 0; l < n_layers_of(b, k_cls_site[cl]); l++, k++) {
            struct nb_weight *w = b->wref[cl][l];
            *w = saved[k];
            if (v != W_F32) {
                w->format = NB_WF_F32;
                w->data = weights_for(b, v, t, cl, l);
            }
        }
}

/* The logits of every scored position of the held-out text, as nb_eval_chunks scores
 * them: chunks of CHUNK tokens (the first replaced by BOS), each from an empty cache,
 * the positions i in [CHUNK/2, CHUNK - 1) against token i + 1. out [chunks * per][V]. */
#define CHUNK 256
static enum nb_status chunk_logits(struct nb_ctx *c, const int32_t *ids, int n, int bos, float *out)
{
    int first = CHUNK / 2, per = CHUNK - 1 - first, V = c->model->cfg.n_vocab;
    int32_t tok[CHUNK], pos[CHUNK];
    uint8_t want[CHUNK];
    enum nb_status st = NB_OK;
    for (int i = 0; i < CHUNK; i++) pos[i] = i, want[i] = i >= first && i < CHUNK - 1;
    for (int k = 0; k + CHUNK <= n && !st; k += CHUNK) {
        memcpy(tok, ids + k, sizeof tok);
        if (bos >= 0) tok[0] = bos;
        nb_ctx_clear_seq(c, 0);
        struct nb_batch bt = {.n_tokens = CHUNK, .token = tok, .pos = pos, .want_logits = want};
        st = nb_decode(c, &bt, out + (int64_t)(k / CHUNK) * per * V);
    }
    return st;
}

struct kl_stats {
    double mean, p99, top1, ppl;
};

static int argmax_of(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* KL(p || q) per scored position (mean and 99th percentile), top-1 agreement, and q's
 * perplexity on the text. */
static void kl_of(const float *p, const float *q, int64_t rows, int V, const int32_t *ids,
                  double *scratch, struct kl_stats *r)
{
    int first = CHUNK / 2, per = CHUNK - 1 - first;
    double sum = 0, nll = 0;
    int64_t agree = 0;
    for (int64_t i = 0; i < rows; i++) {
        const float *a = p + i * V, *c = q + i * V;
        int64_t chunk = i / per, at = first + i % per;
        scratch[i] = nb_kl_logits(a, c, V);
        sum += scratch[i];
        nll += nb_nll_logits(c, V, ids[chunk * CHUNK + at + 1]);
        agree += argmax_of(a, V) == argmax_of(c, V);
    }
    qsort(scratch, (size_t)rows, sizeof *scratch, cmp_double);
    r->mean = sum / (double)rows;
    r->p99 = scratch[(int64_t)(0.99 * (double)(rows - 1))];
    r->top1 = (double)agree / (double)rows;
    r->ppl = exp(nll / (double)rows);
}

/* The weights' key: which int4 round trip (smoothed ones are their own weights). */
static int weights_key(enum wvar v, enum treat t)
{
    return v == W_RTN && treat_alpha(t) >= 0 ? N_WVAR + treat_alpha(t) : (int)v;
}
#define N_WKEY (N_WVAR + N_ALPHA)

static enum nb_status run_e2e(struct lab *b, const char *model, const int32_t *ids, int n, int bos,
                              int n_threads)
{
    static const struct e2e runs[] = {
        {"f32 weights, g128 at attn_in", W_F32, T_G128, 1u << NB_SITE_ATTN_IN},
        {"f32 weights, g128 at attn_out", W_F32, T_G128, 1u << NB_SITE_ATTN_OUT},
        {"f32 weights, g128 at ffn_in", W_F32, T_G128, 1u << NB_SITE_FFN_IN},
        {"f32 weights, g128 at ffn_mid", W_F32, T_G128, 1u << NB_SITE_FFN_MID},
        {"f32 weights, g128 at out_in", W_F32, T_G128, 1u << NB_SITE_OUT_IN},
        {"f32 weights, g128", W_F32, T_G128, ALL_SITES},
        {"f32 weights, g64", W_F32, T_G64, ALL_SITES},
        {"f32 weights, g32", W_F32, T_G32, ALL_SITES},
        {"f32 weights, row", W_F32, T_ROW, ALL_SITES},
        {"f32 weights, out4", W_F32, T_OUT4, ALL_SITES},
        {"f32 weights, out16", W_F32, T_OUT16, ALL_SITES},
        {"f32 weights, top4", W_F32, T_TOP4, ALL_SITES},
        {"f32 weights, g32 at ffn_mid, g128 elsewhere", W_F32, T_G32, 0},
        {"f32 weights, sq.5", W_F32, T_SQ50, ALL_SITES},
        {"f32 weights, sq.75", W_F32, T_SQ75, ALL_SITES},
        {"RTN, exact", W_RTN, T_EXACT, 0},
        {"RTN, g32 at ffn_mid, g128 elsewhere", W_RTN, T_G32, 0},
        {"RTN, g128", W_RTN, T_G128, ALL_SITES},
        {"RTN, g64", W_RTN, T_G64, ALL_SITES},
        {"RTN, g32", W_RTN, T_G32, ALL_SITES},
        {"RTN, row", W_RTN, T_ROW, ALL_SITES},
        {"RTN, out4", W_RTN, T_OUT4, ALL_SITES},
        {"RTN, out16", W_RTN, T_OUT16, ALL_SITES},
        {"RTN, top4", W_RTN, T_TOP4, ALL_SITES},
        {"RTN, down g32 (weights and its input), exact", W_RTN_D32, T_EXACT, 0},
        {"RTN, down g32 (weights and its input), g128 elsewhere", W_RTN_D32, T_G32, 0},
        {"RTN(W*s .5), exact", W_RTN, T_SQ50, 0},
        {"RTN(W*s .5), sq.5", W_RTN, T_SQ50, ALL_SITES},
        {"RTN(W*s .75), exact", W_RTN, T_SQ75, 0},
        {"RTN(W*s .75), sq.75", W_RTN, T_SQ75, ALL_SITES},
        {"GPTQ, exact", W_GPTQ, T_EXACT, 0},
        {"GPTQ, g128", W_GPTQ, T_G128, ALL_SITES},
        {"GPTQ, g128 at attn_in", W_GPTQ, T_G128, 1u << NB_SITE_ATTN_IN},
        {"GPTQ, g128 at attn_out", W_GPTQ, T_G128, 1u << NB_SITE_ATTN_OUT},
        {"GPTQ, g128 at ffn_in", W_GPTQ, T_G128, 1u << NB_SITE_FFN_IN},
        {"GPTQ, g128 at ffn_mid", W_GPTQ, T_G128, 1u << NB_SITE_FFN_MID},
        {"GPTQ, g128 at out_in", W_GPTQ, T_G128, 1u << NB_SITE_OUT_IN},
        {"GPTQ, g64", W_GPTQ, T_G64, ALL_SITES},
        {"GPTQ, g32", W_GPTQ, T_G32, ALL_SITES},
        {"GPTQ, row", W_GPTQ, T_ROW, ALL_SITES},
        {"GPTQ, out4", W_GPTQ, T_OUT4, ALL_SITES},
        {"GPTQ, out16", W_GPTQ, T_OUT16, ALL_SITES},
        {"GPTQ, top4", W_GPTQ, T_TOP4, ALL_SITES},
        {"GPTQ, g32 at ffn_mid, g128 elsewhere", W_GPTQ, T_G32, 0},
    };
    int V = b->m->cfg.n_vocab, per = CHUNK - 1 - CHUNK / 2;
    int64_t rows = (int64_t)(n / CHUNK) * per, sz = rows * V;
    int n_saved = N_CLS * b->L;
    struct nb_weight *saved = malloc(sizeof *saved * (size_t)n_saved);
    float *lf = malloc(sizeof(float) * (size_t)sz), *lt = malloc(sizeof(float) * (size_t)sz);
    float *lw[N_WKEY] = {0};
    double *scratch = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
    struct nb_model *fm = NULL; /* the f32 reference: a second, untouched load */
    struct nb_ctx *ref = NULL, *test = NULL;
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = CHUNK;
    cp.n_batch = CHUNK;
    cp.n_threads = n_threads;
    enum nb_status st = saved && lf && lt && scratch
                            ? NB_OK
                            : nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    if (!st && rows == 0) st = nb_set_error(NB_ERR_INVALID_ARG, "act_error: held-out text < 256 tokens");
    int k = 0;
    for (int cl = 0; cl < N_CLS && !st; cl++)
        for (int l = 0; l < n_layers_of(b, k_cls_site[cl]); l++) saved[k++] = *b->wref[cl][l];
    if (!st) st = nb_model_load(&fm, model);
    if (!st) st = nb_ctx_init(&ref, fm, &cp);
    if (!st) st = nb_ctx_init(&test, b->m, &cp);
    if (!st) st = chunk_logits(ref, ids, n, bos, lf);
    if (st) goto done;
    nb_ctx_set_observer(test, observer, b);
    b->pass = PASS_E2E;
    printf("\n## End to end: held-out text, chunks of %d, second halves (%lld positions)\n\n",
           CHUNK, (long long)rows);
    printf("KL vs f32: KL(f32 model || this build); act. only: KL(same weights, exact "
           "activations || this build)\n\n");
    printf("| weights, activations | KL vs f32 | p99 | same top-1 | ppl | KL act. only |\n");
    printf("|---|---|---|---|---|---|\n");
    double ppl_ref = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0] && !st; i++) {
        const struct e2e *r = &runs[i];
        if (r->w == W_GPTQ && !b->wq[W_GPTQ][C_HEAD][0]) continue;
        int key = weights_key(r->w, r->t);
        swap_weights(b, r->w, r->t, saved);
        if (!lw[key]) { /* these weights with exact activations */
            if (key == W_F32) lw[key] = lf;
            else if (!(lw[key] = malloc(sizeof(float) * (size_t)sz)))
                st = nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
            for (int s = 0; s < NB_SITE_COUNT; s++) b->site_treat[s] = T_EXACT;
            if (!st && key != W_F32) st = chunk_logits(test, ids, n, bos, lw[key]);
        }
        for (int s = 0; s < NB_SITE_COUNT; s++)
            b->site_treat[s] = r->sites & (1u << s) ? r->t : T_EXACT;
        if (!r->sites) /* g32 at ffn_mid, g128 elsewhere (or nothing: exact) */
            for (int s = 0; s < NB_SITE_COUNT && r->t == T_G32; s++)
                b->site_treat[s] = s == NB_SITE_FFN_MID ? T_G32 : T_G128;
        if (!st) st = chunk_logits(test, ids, n, bos, lt);
        swap_weights(b, W_F32, T_EXACT, saved);
        if (st) break;
        struct kl_stats kf, ka, kr;
        kl_of(lf, lf, rows, V, ids, scratch, &kr);
        kl_of(lf, lt, rows, V, ids, scratch, &kf);
        kl_of(lw[key], lt, rows, V, ids, scratch, &ka);
        ppl_ref = kr.ppl;
        printf("| %s | %.6f | %.5f | %.2f%% | %.4f | %.6f |\n", r->name, kf.mean, kf.p99,
               100 * kf.top1, kf.ppl, ka.mean);
        fflush(stdout);
    }
    if (!st) printf("\nf32 perplexity on these positions: %.4f\n", ppl_ref);
done:
    nb_ctx_free(ref), nb_ctx_free(test);
    if (fm) nb_model_free(fm);
    for (int i = 0; i < N_WKEY; i++)
        if (lw[i] != lf) free(lw[i]);
    free(saved), free(lf), free(lt), free(scratch);
    return st;
}

/* ---------------------------------------------------------------- report */

static double rel(double e, double r) { return r > 0 ? sqrt(e / r) : 0; }

static void print_layer_tables(const struct lab *b, int per_layer)
{
    static const enum treat cols[] = {T_G128, T_G64, T_G32,  T_ROW,
                                      T_OUT4, T_OUT16, T_TOP4, T_SQ50, T_SQ75};
    int nc = (int)(sizeof cols / sizeof cols[0]);
    double tot_ref = 0;
    for (int cl = 0; cl < N_CLS; cl++) tot_ref += b->ref[cl];
    for (int v = 0; v < N_WVAR; v++) {
        if (!wvar_ok(b, v, T_G128)) continue;
        printf("\n## Layer output error, weights %s: sqrt(sum |y' - y|^2 / sum |y|^2)%s\n\n",
               k_wvar_name[v], v == W_RTN ? " (sq: int4 of W * s)" : "");
        printf("| class |%s", v == W_F32 ? "" : " exact act |");
        for (int i = 0; i < nc; i++)
            if (wvar_ok(b, v, cols[i])) printf(" %s |", k_treat_name[cols[i]]);
        printf("\n|---|%s", v == W_F32 ? "" : "---|");
        for (int i = 0; i < nc; i++)
            if (wvar_ok(b, v, cols[i])) printf("---|");
        printf("\n");
        for (int cl = 0; cl <= N_CLS; cl++) {
            double r = cl < N_CLS ? b->ref[cl] : tot_ref;
            printf("| %s |", cl < N_CLS ? k_cls_name[cl] : "all (pooled)");
            for (int i = -1; i < nc; i++) {
                enum treat t = i < 0 ? T_EXACT : cols[i];
                if ((i < 0 && v == W_F32) || !wvar_ok(b, v, t)) continue;
                double e = 0;
                if (cl < N_CLS) e = b->err[t][v][cl];
                else
                    for (int c2 = 0; c2 < N_CLS; c2++) e += b->err[t][v][c2];
                printf(" %.5f |", rel(e, r));
            }
            printf("\n");
        }
    }
    if (!per_layer) return;
    printf("\n## g128 activation rounding alone (f32 weights), per layer\n\n| class |");
    for (int l = 0; l < b->L; l++) printf(" L%d |", l);
    printf("\n|---|");
    for (int l = 0; l < b->L; l++) printf("---|");
    printf("\n");
    for (int cl = 0; cl < C_HEAD; cl++) {
        printf("| %s |", k_cls_name[cl]);
        for (int l = 0; l < b->L; l++) printf(" %.5f |", rel(b->err_l[cl][l], b->ref_l[cl][l]));
        printf("\n");
    }
}

static void print_site_stats(const struct lab *b)
{
    printf("\n## Activations per site (calibration text)\n\n");
    printf("| site | mean max/rms per token | channel max/median (worst layer) |\n");
    printf("|---|---|---|\n");
    for (int s = 0; s < NB_SITE_COUNT; s++) {
        double r = 0, mr = 0;
        int64_t n = 0;
        for (int l = 0; l < n_layers_of(b, s); l++) {
            r += b->st[s][l].ratio_sum, n += b->st[s][l].n;
            mr = fmax(mr, b->st[s][l].max_ratio);
        }
        printf("| %s | %.2f | %.1f |\n", k_site_name[s], n ? r / (double)n : 0, mr);
    }
}

/* ---------------------------------------------------------------- main */

static enum nb_status setup(struct lab *b, int chunk)
{
    const struct nb_config *c = &b->m->cfg;
    int64_t dims[NB_SITE_COUNT] = {c->n_embd, (int64_t)c->n_heads * c->head_dim, c->n_embd,
                                   c->n_ff, c->n_embd};
    int64_t widest = 0, widest_out = c->n_vocab;
    b->L = c->n_layers;
    for (int s = 0; s < NB_SITE_COUNT; s++) {
        widest = dims[s] > widest ? dims[s] : widest;
        for (int l = 0; l < n_layers_of(b, s); l++) {
            struct site_stats *ss = &b->st[s][l];
            ss->len = dims[s];
            ss->amax = calloc((size_t)dims[s], sizeof(float));
            if (!ss->amax) return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
            for (int a = 0; a < N_ALPHA; a++)
                if (!(ss->s[a] = malloc(sizeof(float) * (size_t)dims[s])))
                    return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
            for (int k = 0; k < N_KEEP; k++)
                if (!(ss->keep[k] = calloc((size_t)dims[s], 1)))
                    return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
        }
    }
    for (int cl = 0; cl < N_CLS; cl++)
        for (int l = 0; l < n_layers_of(b, k_cls_site[cl]); l++) {
            b->wref[cl][l] = class_weight(b->m, cl, l);
            float *owned;
            enum nb_status st = nb_weight_f32(b->wref[cl][l], &b->w[cl][l], &owned);
            if (st) return st; /* a converted copy lives as long as the lab (never freed) */
            widest_out = b->wref[cl][l]->n_out > widest_out ? b->wref[cl][l]->n_out : widest_out;
        }
    for (int t = 0; t < N_TREAT; t++)
        if (!(b->xt[t] = malloc(sizeof(float) * (size_t)(chunk * widest))))
            return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    if (!(b->top = malloc((size_t)widest)))
        return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    b->y = malloc(sizeof(float) * (size_t)(chunk * widest_out));
    b->yt = malloc(sizeof(float) * (size_t)(chunk * widest_out));
    if (!b->y || !b->yt) return nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    return NB_OK;
}

int main(int argc, char **argv)
{
    const char *model = "../shared/models/kjv-7m/kjv-7m-f32.gguf";
    const char *calib = "data/calib/kjv-7m-calib.txt", *heldout = "data/calib/kjv-7m-heldout.txt";
    int tokens = 8192, threads = 2, gptq = 1, e2e = 1, layer = 1, per_layer = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) model = v, i++;
        else if (!strcmp(a, "--calib") && v) calib = v, i++;
        else if (!strcmp(a, "--heldout") && v) heldout = v, i++;
        else if (!strcmp(a, "--tokens") && v) tokens = atoi(v), i++;
        else if (!strcmp(a, "-t") && v) threads = atoi(v), i++;
        else if (!strcmp(a, "--no-gptq")) gptq = 0;
        else if (!strcmp(a, "--no-e2e")) e2e = 0;
        else if (!strcmp(a, "--no-layer")) layer = 0;
        else if (!strcmp(a, "--layers")) per_layer = 1;
        else {
            fprintf(stderr, "usage: act_error [-m MODEL] [--calib FILE] [--heldout FILE] "
                            "[--tokens N] [-t N] [--no-gptq] [--no-e2e] [--no-layer] [--layers]\n");
            return 2;
        }
    }
    static struct lab b; /* large: the per-layer tables */
    struct nb_calib cal = {0}, held = {0};
    struct nb_ctx *ctx = NULL;
    float *logits = NULL;
    double t0 = nb_time_s();
    enum nb_status st = nb_model_load(&b.m, model);
    if (!st) st = nb_calib_load(&cal, calib, b.m, 0);
    if (!st && e2e) st = nb_calib_load(&held, heldout, b.m, 0);
    if (!st) st = setup(&b, cal.chunk);
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = cal.chunk;
    cp.n_threads = threads;
    if (!st) st = nb_ctx_init(&ctx, b.m, &cp);
    if (!st && !(logits = malloc(sizeof(float) * (size_t)cal.chunk * (size_t)b.m->cfg.n_vocab)))
        st = nb_set_error(NB_ERR_NOMEM, "act_error: out of memory");
    if (st) goto done;
    printf("# act_error: %s, %d calibration tokens (%s; layer errors on the first %d), "
           "chunks of %d\n", model, cal.n, calib, tokens > 0 && tokens < cal.n ? tokens : cal.n,
           cal.chunk);
    nb_ctx_set_observer(ctx, observer, &b);
    b.pass = PASS_STATS;
    if ((st = run_text(ctx, &cal, logits))) goto done;
    finish_stats(&b);
    fprintf(stderr, "act_error: stats %.1f s\n", nb_time_s() - t0);
    if ((st = prepare_rtn(&b, 128))) goto done;
    if (gptq && (st = prepare_gptq(&b, &cal, 128, threads))) goto done;
    fprintf(stderr, "act_error: weights %.1f s\n", nb_time_s() - t0);
    print_site_stats(&b);
    if (layer) {
        b.pass = PASS_LAYER;
        struct nb_calib head = cal; /* the layer errors: the first --tokens tokens */
        if (tokens > 0 && tokens < head.n) head.n = tokens;
        if ((st = run_text(ctx, &head, logits))) goto done;
        fprintf(stderr, "act_error: layer errors %.1f s\n", nb_time_s() - t0);
        print_layer_tables(&b, per_layer);
    }
    fflush(stdout);
    if (e2e) {
        struct nb_tokenizer *tok = NULL;
        struct nb_tokenizer_info ti = {.size = sizeof ti};
        if ((st = nb_tokenizer_load(&tok, model))) goto done;
        nb_tokenizer_get_info(tok, &ti);
        nb_tokenizer_free(tok);
        st = run_e2e(&b, model, held.ids, held.n, ti.bos_id, threads);
        fprintf(stderr, "act_error: end to end %.1f s\n", nb_time_s() - t0);
    }
done:
    if (st) fprintf(stderr, "act_error: %s\n", nb_last_error());
    free(logits);
    nb_ctx_free(ctx);
    nb_calib_free(&cal), nb_calib_free(&held);
    if (b.m) nb_model_free(b.m);
    return st ? 1 : 0;
}
