/* runtime/recipe.c — named recipes, the byte-budget recipe, and their table. */
#include "runtime/recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "formats/tensor.h"
#include "quant/dequant.h"
#include "quant/kquant.h"
#include "quant/quant.h"
#include "quant/unpack.h"
#include "runtime/calib.h"

static const char *const k_class_names[NB_TC_LAYER_COUNT] = {"q",    "k",  "v",   "o",
                                                             "gate", "up", "down"};

const char *nb_tclass_name(enum nb_tclass c)
{
    return c >= 0 && c < NB_TC_LAYER_COUNT ? k_class_names[c] : "?";
}

static void fill(struct nb_recipe *r, const char *name, int n_layers, int bits)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->n_layers = n_layers;
    memset(r->bits, bits, sizeof r->bits);
    r->head_bits = r->embd_bits = (uint8_t)bits;
}

static void set_class(struct nb_recipe *r, enum nb_tclass c, int bits)
{
    for (int l = 0; l < r->n_layers; l++) r->bits[l][c] = (uint8_t)bits;
}

enum nb_status nb_recipe_named(const char *name, int n_layers, struct nb_recipe *r)
{
    if (n_layers < 0 || n_layers > NB_MAX_LAYERS)
        return nb_set_error(NB_ERR_INVALID_ARG, "recipe: %d layers", n_layers);
    if (!name) name = "uniform";
    /* the ladder's names (llama.cpp's rung each answers): q3 and q4 are speed and balanced */
    if (!strcmp(name, "q3")) name = "speed";
    if (!strcmp(name, "q4")) name = "balanced";
    fill(r, name, n_layers, 4);
    if (!strcmp(name, "speed")) return NB_OK;
    if (!strcmp(name, "uniform")) {
        r->head_bits = r->embd_bits = 8;
        return NB_OK;
    }
    if (!strcmp(name, "balanced")) {
        r->head_bits = r->embd_bits = 6; /* Q6_K; one copy when the head is tied */
        r->head_group = 32;              /* where Q6_K does not fit: 4-bit, finer groups */
        r->embd_group = 64;
        return NB_OK;
    }
    if (!strcmp(name, "fidelity")) {
        set_class(r, NB_TC_V, 8);
        set_class(r, NB_TC_DOWN, 8);
        r->head_bits = r->embd_bits = 8;
        return NB_OK;
    }
    if (!strcmp(name, "q5") || !strcmp(name, "q6")) { /* balanced, k, v and down at 8 */
        r->head_bits = r->embd_bits = 6;
        r->head_group = 32;
        r->embd_group = 64;
        set_class(r, NB_TC_K, 8);
        set_class(r, NB_TC_V, 8);
        set_class(r, NB_TC_DOWN, 8);
        if (name[1] == '6') set_class(r, NB_TC_UP, 6); /* q6: up at 6 too */
        return NB_OK;
    }
    if (!strcmp(name, "q8")) { /* every matrix at 8 */
        for (int c = 0; c < NB_TC_LAYER_COUNT; c++) set_class(r, (enum nb_tclass)c, 8);
        r->head_bits = r->embd_bits = 8;
        r->damp = 0.02; /* both models' top-1 agreement up at the same KL (0.01: 89 of 95) */
        return NB_OK;
    }
    return nb_set_error(NB_ERR_INVALID_ARG, "recipe '%s' is not one of speed, balanced, fidelity, "
                        "uniform, q3, q4, q5, q6, q8", name);
}

enum nb_wformat nb_recipe_block(const struct nb_weight *w, int bits, int linear,
                                uint64_t *bytes)
{
    enum nb_wformat f = bits == 6 ? NB_WF_Q6_K : bits == 8 && linear ? NB_WF_Q8_0 : NB_WF_COUNT;
    struct nb_layout_planes pl;
    struct nb_block_info bi;
    if (f == NB_WF_COUNT || !nb_wformat_block(f, &bi) ||
        !nb_wformat_planes(linear ? bi.x16 : bi.rows, 0, w->n_out, w->n_in, &pl))
        return NB_WF_COUNT;
    if (bytes) *bytes = (uint64_t)pl.total;
    return f;
}

enum nb_wformat nb_recipe_block_of(const struct nb_model *m, enum nb_wpath path,
                                   const struct nb_weight *w, int bits, int linear)
{
    if (!nb_wpath_is_int4(path) || !w->data) return NB_WF_COUNT;
    const struct nb_src_codes *sc = m ? nb_model_src_codes(m, w) : NULL;
    if (sc && nb_src_codes_fit(sc, path, NULL)) return NB_WF_COUNT;
    return nb_recipe_block(w, bits, linear, NULL);
}

enum nb_status nb_recipe_set_bits(struct nb_recipe *r, const char *spec)
{
    char buf[256];
    if (!spec || !*spec) return NB_OK;
    if (strlen(spec) >= sizeof buf)
        return nb_set_error(NB_ERR_INVALID_ARG, "bits '%.40s...': longer than %zu characters",
                            spec, sizeof buf - 1);
    memcpy(buf, spec, strlen(spec) + 1);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(it, '='), *end = NULL;
        long bits = eq ? strtol(eq + 1, &end, 10) : 0;
        if (!eq || end == eq + 1 || *end)
            return nb_set_error(NB_ERR_INVALID_ARG, "bits '%s': '%s' is not CLASS=WIDTH (e.g. "
                                "v=8,down=6)", spec, it);
        if (bits != 4 && bits != 6 && bits != 8 && bits != 16)
            return nb_set_error(NB_ERR_INVALID_ARG, "bits '%s': width %s is not one of 4, 6, 8, "
                                "16", spec, eq + 1);
        *eq = '\0';
        if (!strcmp(it, "head")) {
            r->head_bits = (uint8_t)bits;
        } else if (!strcmp(it, "embd")) {
            r->embd_bits = (uint8_t)bits;
        } else {
            int c = 0;
            while (c < NB_TC_LAYER_COUNT && strcmp(it, k_class_names[c])) c++;
            if (c == NB_TC_LAYER_COUNT)
                return nb_set_error(NB_ERR_INVALID_ARG, "bits '%s': '%s' is not one of q, k, v, "
                                    "o, gate, up, down, head, embd", spec, it);
            set_class(r, (enum nb_tclass)c, (int)bits);
        }
    }
    size_t n = strlen(r->name);
    snprintf(r->name + n, sizeof r->name - n, "+%s", spec); /* cut to fit: the table is whole */
    return NB_OK;
}

enum nb_wpath nb_recipe_path(enum nb_wpath path, int bits)
{
    if (!nb_wpath_is_int4(path)) return path; /* one width */
    return bits == 16 ? NB_WPATH_BF16 : bits == 8 ? NB_WPATH_W8A16 : path;
}

void nb_recipe_fit_groups(struct nb_recipe *r, const struct nb_model *m, int group)
{
    int *finer[2] = {&r->head_group, &r->embd_group};
    for (int i = 0; i < 2; i++)
        if (*finer[i] && (*finer[i] >= group || m->cfg.n_embd % *finer[i])) *finer[i] = 0;
}

int nb_recipe_shared_head(const struct nb_model *m, const struct nb_recipe *r)
{
    return m->cfg.tied_head && m->output.data == m->tok_embd.data &&
           r->head_bits == r->embd_bits;
}

/* ---------------------------------------------------------------- the plan */

enum role { LAYER, HEAD, EMBD };

/* The bytes quantize writes for w at width bits (runtime/quantize.c add_width): the
 * block format where the shape takes it, else the width's row form (4 and a 6 that Q6_K
 * cannot take: the int4 grid, the embeddings' asymmetric one; 8: int8 rows; 16: bf16)
 * in the role's group. 0: the shape fits neither. */
static uint64_t matrix_bytes(const struct nb_model *m, enum nb_wpath path, int group,
                             const struct nb_recipe *r, const struct nb_weight *w, int bits,
                             enum role role)
{
    uint64_t bytes = 0;
    struct nb_layout_planes pl;
    if (!w->data) return 0;
    const int linear = role != EMBD;
    if ((bits == 6 || bits == 8) && nb_recipe_block_of(m, path, w, bits, linear) != NB_WF_COUNT &&
        nb_recipe_block(w, bits, linear, &bytes) != NB_WF_COUNT)
        return bytes;
    enum nb_wpath p = role == EMBD ? (bits == 4 || bits == 6 ? NB_WPATH_W4A16
                                                             : nb_recipe_path(path, bits))
                                   : nb_recipe_path(path, bits);
    int g = role == HEAD && r->head_group ? r->head_group
            : role == EMBD && r->embd_group ? r->embd_group
                                           : group;
    return nb_layout_planes(p, g, w->n_out, w->n_in, &pl) ? (uint64_t)pl.total : 0;
}

/* The model's vectors (norms, biases, RoPE frequencies), stored as f32: their count. */
static int64_t vector_params(const struct nb_model *m)
{
    const struct nb_config *c = &m->cfg;
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim;
    int64_t KV = (int64_t)c->n_kv_heads * c->head_dim, n = E + c->head_dim / 2;
    for (int l = 0; l < c->n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
        n += 2 * E; /* attention and FFN norms */
        n += (L->bq ? Q : 0) + (L->bk ? KV : 0) + (L->bv ? KV : 0) + (L->bo ? E : 0);
        n += (L->q_norm ? c->head_dim : 0) + (L->k_norm ? c->head_dim : 0);
    }
    return n;
}

static int64_t params_of(const struct nb_weight *w)
{
    return w->data ? w->n_out * w->n_in : 0;
}

/* The matrices of layer l's class k (q takes a Spark head gate with it). */
static int class_weights(const struct nb_layer *L, int k, const struct nb_weight *w[2])
{
    const struct nb_weight *one[NB_TC_LAYER_COUNT] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                                      &L->w_gate, &L->w_up, &L->w_down};
    w[0] = one[k];
    w[1] = k == NB_TC_Q && L->head_gate.data ? &L->head_gate : NULL;
    return w[1] ? 2 : 1;
}

enum nb_status nb_recipe_plan(const struct nb_model *m, enum nb_wpath path, int group,
                              const struct nb_recipe *r, uint64_t *bytes, int64_t *params)
{
    const struct nb_config *c = &m->cfg;
    uint64_t b = 0;
    int64_t n = vector_params(m);
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < NB_TC_LAYER_COUNT; k++) {
            const struct nb_weight *w[2];
            for (int i = 0, nw = class_weights(&m->layers[l], k, w); i < nw; i++) {
                uint64_t wb = matrix_bytes(m, path, group, r, w[i], r->bits[l][k], LAYER);
                if (!wb && w[i]->data) goto unfit;
                b += wb;
                n += params_of(w[i]);
            }
        }
    const int shared = nb_recipe_shared_head(m, r);
    uint64_t hb = matrix_bytes(m, path, group, r, &m->output, r->head_bits, HEAD);
    uint64_t eb = shared ? 0 : matrix_bytes(m, path, group, r, &m->tok_embd, r->embd_bits, EMBD);
    if (!hb || (!shared && !eb)) goto unfit;
    b += hb + eb + 4 * (uint64_t)vector_params(m);
    n += params_of(&m->output);
    if (m->output.data != m->tok_embd.data) n += params_of(&m->tok_embd);
    *bytes = b;
    if (params) *params = n;
    return NB_OK;
unfit:
    return nb_set_error(NB_ERR_INVALID_ARG, "recipe %s: a matrix does not fit %s with groups "
                        "of %d", r->name, nb_wpath_name(path), group);
}

/* ---------------------------------------------------------------- the budget */

/* What the budget may widen: one class of one layer, the head (with the embeddings
 * when one copy serves both) or the embeddings. */
struct unit {
    const struct nb_weight *w[2]; /* its matrices (w[1]: a Spark head gate, or NULL) */
    int nw;
    enum role role;
    const double *sum; /* its input channels' squared-activation sums, or NULL */
    uint8_t *bits, *bits2; /* its width (bits2: the embeddings a shared head carries) */
    int group;             /* its int4 group */
    uint64_t bytes[3];     /* at widths 4, 6, 8 (0: no such step) */
    double err[3];         /* output error at widths 4, 6, 8 on sampled rows */
};

static int width_index(int bits)
{
    return bits == 4 ? 0 : bits == 6 ? 1 : bits == 8 ? 2 : -1;
}

#define SAMPLE_ROWS 64

/* Sum over sampled rows of w of imp . (x - x^)^2 at widths 4, 6 and 8, each as quantize
 * would store it (the int4 grid with the scale search, Q6_K, Q8_0 or int8 rows), scaled to
 * the whole matrix; a gather (the embeddings) counts one row per token: the mean row. */
static enum nb_status weight_error(const struct unit *u, const struct nb_weight *w,
                                   enum nb_wpath path, int64_t n_tok, float *imp, float *dec,
                                   void *scratch, double err[3])
{
    const int group = u->group;
    const float *f;
    float *owned;
    enum nb_status st = nb_weight_f32(w, &f, &owned);
    if (st) return st;
    int64_t K = w->n_in;
    if (u->sum) nb_act_importance(u->sum, K, n_tok, imp);
    const float *ip = u->sum ? imp : NULL;
    const int linear = u->role != EMBD;
    const int has6 = nb_recipe_block(w, 6, linear, NULL) != NB_WF_COUNT;
    const int has8 = nb_recipe_block(w, 8, linear, NULL) != NB_WF_COUNT;
    int64_t step = w->n_out > SAMPLE_ROWS ? w->n_out / SAMPLE_ROWS : 1, sampled = 0;
    uint8_t q[NB_QUANT_GROUP_MAX];
    int8_t *codes = (int8_t *)dec + K; /* dec holds 2 K floats: the decoded row, then codes */
    double e[3] = {0, 0, 0};
    for (int64_t r = 0; r < w->n_out && !st; r += step, sampled++) {
        const float *row = f + r * K;
        for (int64_t g = 0; g + group <= K; g += group) {
            uint16_t d, mm;
            const float *ig = ip ? ip + g : NULL;
            e[0] += path == NB_WPATH_W4A8 && linear
                        ? nb_quant_group_w4a8(row + g, ig, group, 1, q, &d)
                        : nb_quant_group_w4a16(row + g, ig, group, 1, q, &d, &mm);
        }
        if (has6 && !(st = nb_kquant_rows(NB_WF_Q6_K, row, 1, K, ip, 0, 1, scratch)) &&
            !(st = nb_dequant_blocks(NB_DTYPE_Q6_K, scratch, dec, K)))
            e[1] += nb_quant_wsqerr(row, dec, ip, K);
        if (has8 && !st && !(st = nb_kquant_rows(NB_WF_Q8_0, row, 1, K, ip, 0, 1, scratch)) &&
            !(st = nb_dequant(NB_DTYPE_Q8_0, scratch, dec, K)))
            e[2] += nb_quant_wsqerr(row, dec, ip, K);
        if (!has8 && !st) { /* int8 rows */
            float d8;
            e[2] += nb_quant_row_w8a16(row, ip, K, 1, codes, &d8, scratch);
        }
    }
    free(owned);
    if (!has6) e[1] = e[0]; /* 6 is the 4-bit form there */
    double scale = u->role == EMBD ? 1.0 / (double)sampled : (double)w->n_out / (double)sampled;
    for (int i = 0; i < 3; i++) err[i] += e[i] * scale;
    return st;
}

struct err_job {
    struct unit *u;
    int n;
    enum nb_wpath path;
    int64_t n_tok, widest;
    enum nb_status st[64];
};

static void err_worker(void *arg, int ith, int nth)
{
    struct err_job *j = arg;
    j->st[ith] = NB_OK;
    float *imp = malloc(sizeof(float) * (size_t)j->widest);
    float *dec = malloc(sizeof(float) * 2 * (size_t)j->widest);
    void *scratch = malloc(NB_QUANT_W8_SCRATCH(j->widest) + 2 * (size_t)j->widest);
    if (!imp || !dec || !scratch)
        j->st[ith] = nb_set_error(NB_ERR_NOMEM, "recipe: out of memory");
    for (int i = ith; i < j->n && !j->st[ith]; i += nth)
        for (int k = 0; k < j->u[i].nw && !j->st[ith]; k++)
            j->st[ith] = weight_error(&j->u[i], j->u[i].w[k], j->path, j->n_tok, imp, dec,
                                      scratch, j->u[i].err);
    free(imp);
    free(dec);
    free(scratch);
}

/* The matrices of the model as units (the head, and the embeddings unless the head's
 * copy serves them, last), with their bytes at each width; into u. */
static int list_units(const struct nb_model *m, const struct nb_act_stats *s, struct nb_recipe *r,
                      enum nb_wpath path, int group, struct unit *u)
{
    const struct nb_config *c = &m->cfg;
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim, F = c->n_ff;
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const double *sum[NB_TC_LAYER_COUNT] = {
            s ? s->attn_in + l * E : NULL, s ? s->attn_in + l * E : NULL,
            s ? s->attn_in + l * E : NULL, s ? s->attn_out + l * Q : NULL,
            s ? s->ffn_in + l * E : NULL,  s ? s->ffn_in + l * E : NULL,
            s ? s->ffn_mid + l * F : NULL};
        for (int k = 0; k < NB_TC_LAYER_COUNT; k++) {
            u[n] = (struct unit){.role = LAYER, .sum = sum[k], .bits = &r->bits[l][k]};
            u[n].nw = class_weights(&m->layers[l], k, u[n].w);
            n++;
        }
    }
    const int shared = nb_recipe_shared_head(m, r);
    u[n++] = (struct unit){.w = {&m->output}, .nw = 1, .role = HEAD, .sum = s ? s->out_in : NULL,
                           .bits = &r->head_bits, .bits2 = shared ? &r->embd_bits : NULL};
    if (!shared)
        u[n++] = (struct unit){.w = {&m->tok_embd}, .nw = 1, .role = EMBD, .bits = &r->embd_bits};
    for (int i = 0; i < n; i++) {
        u[i].group = u[i].role == HEAD && r->head_group   ? r->head_group
                     : u[i].role == EMBD && r->embd_group ? r->embd_group
                                                          : group;
        for (int b = 4; b <= 8; b += 2)
            for (int k = 0; k < u[i].nw; k++)
                u[i].bytes[width_index(b)] +=
                    matrix_bytes(m, path, group, r, u[i].w[k], b, u[i].role);
    }
    return n;
}

/* The ladder's rungs, smallest first: the budget starts from the largest that fits. */
static const char *const k_rungs[] = {"q3", "q4", "q5", "q6", "q8"};

enum nb_status nb_recipe_budget(const struct nb_model *m, enum nb_wpath path, int group,
                                double bpw, const struct nb_act_stats *stats, int n_threads,
                                struct nb_recipe *r)
{
    const struct nb_config *c = &m->cfg;
    enum nb_status st = NB_OK;
    int cap = c->n_layers * NB_TC_LAYER_COUNT + 2;
    struct unit *u = calloc((size_t)cap, sizeof *u);
    struct nb_pool *pool = NULL;
    struct err_job *j = calloc(1, sizeof *j);
    if (!u || !j) {
        st = nb_set_error(NB_ERR_NOMEM, "recipe: out of memory");
        goto done;
    }
    /* the largest rung whose tensors fit: bits per weight over the model's parameters
     * (a tied head once), the bytes every tensor takes as quantize writes it */
    uint64_t bytes = 0, rb;
    int64_t params = 0;
    int rung = -1;
    double low = 0;
    for (int i = 0; i < (int)(sizeof k_rungs / sizeof *k_rungs); i++) {
        struct nb_recipe t;
        if ((st = nb_recipe_named(k_rungs[i], c->n_layers, &t))) goto done;
        nb_recipe_fit_groups(&t, m, group);
        if ((st = nb_recipe_plan(m, path, group, &t, &rb, &params))) goto done;
        if (i == 0) low = 8.0 * (double)rb / (double)params;
        if (8.0 * (double)rb > bpw * (double)params) break;
        *r = t;
        bytes = rb;
        rung = i;
    }
    if (rung < 0) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "--bpw %.4g is below q3, the smallest recipe "
                          "(%.4f bits per weight for this model with groups of %d)", bpw, low,
                          group);
        goto done;
    }
    snprintf(r->name, sizeof r->name, "bpw %.2f (%s+)", bpw, k_rungs[rung]);
    /* then the widening steps (4 to 6, 6 to 8; 4 to 8 where Q6_K does not fit) that buy
     * the most error per byte, while they fit */
    const struct nb_act_stats *s = stats && stats->n_tokens > 0 ? stats : NULL;
    int n = list_units(m, s, r, path, group, u);
    int64_t widest = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < u[i].nw; k++)
            if (u[i].w[k]->n_in > widest) widest = u[i].w[k]->n_in;
    if ((st = nb_pool_init(&pool, n_threads, 0))) goto done;
    *j = (struct err_job){.u = u, .n = n, .path = path, .n_tok = s ? s->n_tokens : 1,
                          .widest = widest};
    int nth = nb_pool_size(pool) < 64 ? nb_pool_size(pool) : 64;
    nb_pool_run_n(pool, err_worker, j, nth);
    for (int i = 0; i < nth && !st; i++) st = j->st[i];
    if (st) goto done;
    const uint64_t budget = (uint64_t)(bpw * (double)params / 8.0);
    for (;;) {
        int best = -1, best_to = 0;
        double best_gain = 0;
        for (int i = 0; i < n; i++) {
            int at = width_index(*u[i].bits);
            if (at < 0) continue;
            for (int to = at + 1; to < 3; to++) { /* the next width that costs bytes */
                if (u[i].bytes[to] <= u[i].bytes[at]) continue;
                uint64_t more = u[i].bytes[to] - u[i].bytes[at];
                double gain = (u[i].err[at] - u[i].err[to]) / (double)more;
                if (bytes + more <= budget && gain > best_gain) {
                    best = i;
                    best_to = to;
                    best_gain = gain;
                }
                break;
            }
        }
        if (best < 0) break;
        bytes += u[best].bytes[best_to] - u[best].bytes[width_index(*u[best].bits)];
        *u[best].bits = (uint8_t)(4 + 2 * best_to);
        if (u[best].bits2) *u[best].bits2 = *u[best].bits;
    }
done:
    nb_pool_free(pool);
    free(u);
    free(j);
    return st;
}

/* ---------------------------------------------------------------- the table */

/* "0-3, 24-27" for the layers where bits[l][c] == b. */
static void layer_ranges(const struct nb_recipe *r, int c, int b, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int l = 0; l < r->n_layers; l++) {
        if (r->bits[l][c] != b) continue;
        int e = l;
        while (e + 1 < r->n_layers && r->bits[e + 1][c] == b) e++;
        int k = e > l ? snprintf(buf + at, size - at, "%s%d-%d", at ? ", " : "", l, e)
                      : snprintf(buf + at, size - at, "%s%d", at ? ", " : "", l);
        if (k < 0 || (size_t)k >= size - at) return;
        at += (size_t)k;
        l = e;
    }
}

static void append(char *buf, size_t size, size_t *at, const char *fmt, const char *a,
                   const char *b)
{
    if (*at >= size) return;
    int k = snprintf(buf + *at, size - *at, fmt, a, b);
    if (k > 0) *at += (size_t)k < size - *at ? (size_t)k : size - *at - 1;
}

void nb_recipe_table(const struct nb_recipe *r, char *buf, size_t size)
{
    size_t at = 0;
    char line[512], ranges[400];
    if (!size) return;
    buf[0] = '\0';
    if (r->embd_bits == 4 && r->embd_group)
        snprintf(line, sizeof line, "4 (w4a16 grid, groups of %d)", r->embd_group);
    else
        snprintf(line, sizeof line, r->embd_bits == 4   ? "4 (w4a16 grid)"
                                    : r->embd_bits == 6 ? "6 (Q6_K; the head's copy when tied)"
                                                        : "%d",
                 r->embd_bits);
    append(buf, size, &at, "  %-11s %s\n", "embeddings", line);
    for (int c = 0; c < NB_TC_LAYER_COUNT; c++) {
        int seen[17] = {0}, kinds = 0;
        for (int l = 0; l < r->n_layers; l++) kinds += !seen[r->bits[l][c]]++;
        size_t k = 0;
        line[0] = '\0';
        static const int widths[] = {16, 8, 6, 4};
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            const int b = widths[wi];
            if (!seen[b]) continue;
            if (kinds == 1) {
                k += (size_t)snprintf(line + k, sizeof line - k, "%d", b);
                break;
            }
            layer_ranges(r, c, b, ranges, sizeof ranges);
            k += (size_t)snprintf(line + k, sizeof line - k, "%s%d (layers %s)", k ? ", " : "",
                                  b, ranges);
            if (k >= sizeof line) break;
        }
        append(buf, size, &at, "  %-11s %s\n", k_class_names[c], line);
    }
    if (r->head_bits == 4 && r->head_group)
        snprintf(line, sizeof line, "4 (groups of %d)", r->head_group);
    else
        snprintf(line, sizeof line, r->head_bits == 6 ? "6 (Q6_K)" : "%d", r->head_bits);
    append(buf, size, &at, "  %-11s %s\n", "head", line);
}

cJSON *nb_recipe_to_json(const struct nb_recipe *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddNumberToObject(o, "embeddings", r->embd_bits);
    for (int c = 0; c < NB_TC_LAYER_COUNT; c++) {
        int same = 1;
        for (int l = 1; l < r->n_layers; l++) same &= r->bits[l][c] == r->bits[0][c];
        if (same) {
            cJSON_AddNumberToObject(o, k_class_names[c], r->n_layers ? r->bits[0][c] : 4);
            continue;
        }
        cJSON *a = cJSON_AddArrayToObject(o, k_class_names[c]);
        for (int l = 0; l < r->n_layers; l++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(r->bits[l][c]));
    }
    cJSON_AddNumberToObject(o, "head", r->head_bits);
    if (r->head_group) cJSON_AddNumberToObject(o, "head_group", r->head_group);
    if (r->embd_group) cJSON_AddNumberToObject(o, "embeddings_group", r->embd_group);
    return o;
}
