/* runtime/recipe.c — named recipes, the byte-budget recipe, and their table. */
#include "runtime/recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
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

/* ---------------------------------------------------------------- the budget */

/* One matrix the budget may widen. */
struct unit {
    const struct nb_weight *w;
    const double *sum; /* its input channels' squared-activation sums, or NULL */
    uint8_t *bits;     /* where its width goes */
    uint64_t bytes4, bytes8;
    double err4; /* output error at 4 bits, on sampled rows */
    int gather;  /* the embeddings: one row per token */
    int group;   /* its int4 group */
};

#define SAMPLE_ROWS 64

/* sum_i imp_i (w_i - w^_i)^2 / sum_i imp_i w_i^2 over SAMPLE_ROWS rows spread over w,
 * each row quantized on the int4 grid with the scale search. */
static enum nb_status unit_error(struct unit *u, enum nb_wpath path, int64_t n_tok, float *imp)
{
    const struct nb_weight *w = u->w;
    int group = u->group;
    const float *f;
    float *owned;
    enum nb_status st = nb_weight_f32(w, &f, &owned);
    if (st) return st;
    int64_t K = w->n_in;
    if (u->sum) nb_act_importance(u->sum, K, n_tok, imp);
    const float *ip = u->sum ? imp : NULL;
    double err = 0, ref = 0;
    int64_t step = w->n_out > SAMPLE_ROWS ? w->n_out / SAMPLE_ROWS : 1;
    uint8_t q[NB_QUANT_GROUP_MAX];
    for (int64_t r = 0; r < w->n_out; r += step) {
        const float *row = f + r * K;
        for (int64_t g = 0; g + group <= K; g += group) {
            uint16_t d, m;
            const float *ig = ip ? ip + g : NULL;
            err += path == NB_WPATH_W4A8 && !u->gather
                       ? nb_quant_group_w4a8(row + g, ig, group, 1, q, &d)
                       : nb_quant_group_w4a16(row + g, ig, group, 1, q, &d, &m);
        }
        for (int64_t i = 0; i < K; i++) ref += (ip ? ip[i] : 1.0) * (double)row[i] * row[i];
    }
    free(owned);
    (void)ref;
    int64_t sampled = (w->n_out + step - 1) / step;
    u->err4 = u->gather ? err / (double)sampled : err * (double)w->n_out / (double)sampled;
    return NB_OK;
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
    if (!imp) {
        j->st[ith] = nb_set_error(NB_ERR_NOMEM, "recipe: out of memory");
        return;
    }
    for (int i = ith; i < j->n && !j->st[ith]; i += nth)
        j->st[ith] = unit_error(&j->u[i], j->path, j->n_tok, imp);
    free(imp);
}

static int by_gain(const void *a, const void *b)
{
    const struct unit *x = *(const struct unit *const *)a, *y = *(const struct unit *const *)b;
    double gx = x->err4 / (double)(x->bytes8 - x->bytes4);
    double gy = y->err4 / (double)(y->bytes8 - y->bytes4);
    return gx < gy ? 1 : gx > gy ? -1 : 0;
}

static uint64_t bytes_of(enum nb_wpath path, int group, const struct nb_weight *w)
{
    struct nb_layout_planes pl;
    return nb_layout_planes(path, group, w->n_out, w->n_in, &pl) ? (uint64_t)pl.total : 0;
}

/* The matrices of the model as units (head and embeddings last), into u. */
static int list_units(const struct nb_model *m, const struct nb_act_stats *s, struct nb_recipe *r,
                      enum nb_wpath path, int group, struct unit *u)
{
    const struct nb_config *c = &m->cfg;
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim, F = c->n_ff;
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
        const struct nb_weight *w[NB_TC_LAYER_COUNT] = {&L->wq, &L->wk,     &L->wv,  &L->wo,
                                                        &L->w_gate, &L->w_up, &L->w_down};
        const double *sum[NB_TC_LAYER_COUNT] = {
            s ? s->attn_in + l * E : NULL, s ? s->attn_in + l * E : NULL,
            s ? s->attn_in + l * E : NULL, s ? s->attn_out + l * Q : NULL,
            s ? s->ffn_in + l * E : NULL,  s ? s->ffn_in + l * E : NULL,
            s ? s->ffn_mid + l * F : NULL};
        for (int k = 0; k < NB_TC_LAYER_COUNT; k++)
            u[n++] = (struct unit){.w = w[k], .sum = sum[k], .bits = &r->bits[l][k],
                                   .group = group};
    }
    u[n++] = (struct unit){.w = &m->output, .sum = s ? s->out_in : NULL, .bits = &r->head_bits,
                           .group = r->head_group ? r->head_group : group};
    u[n++] = (struct unit){.w = &m->tok_embd, .bits = &r->embd_bits, .gather = 1,
                           .group = r->embd_group ? r->embd_group : group};
    for (int i = 0; i < n; i++) {
        u[i].bytes4 = bytes_of(u[i].gather ? NB_WPATH_W4A16 : path, u[i].group, u[i].w);
        /* 8 bits as quantize writes them: Q8_0 records on a GEMM, else int8 rows */
        if (nb_recipe_block(u[i].w, 8, !u[i].gather, &u[i].bytes8) == NB_WF_COUNT)
            u[i].bytes8 = bytes_of(NB_WPATH_W8A16, 0, u[i].w);
    }
    return n;
}

enum nb_status nb_recipe_budget(const struct nb_model *m, enum nb_wpath path, int group,
                                double bpw, const struct nb_act_stats *stats, int n_threads,
                                struct nb_recipe *r)
{
    const struct nb_config *c = &m->cfg;
    enum nb_status st = NB_OK;
    snprintf(r->name, sizeof r->name, "bpw %.2f", bpw);
    int cap = c->n_layers * NB_TC_LAYER_COUNT + 2;
    struct unit *u = calloc((size_t)cap, sizeof *u);
    struct unit **order = calloc((size_t)cap, sizeof *order);
    struct nb_pool *pool = NULL;
    if (!u || !order) {
        st = nb_set_error(NB_ERR_NOMEM, "recipe: out of memory");
        goto done;
    }
    const struct nb_act_stats *s = stats && stats->n_tokens > 0 ? stats : NULL;
    int n = list_units(m, s, r, path, group, u);
    uint64_t bytes = 0;
    double params = 0;
    int64_t widest = 0;
    for (int i = 0; i < n; i++) {
        if (!u[i].bytes4 || !u[i].bytes8) {
            st = nb_set_error(NB_ERR_INVALID_ARG, "--bpw: a [%lld, %lld] matrix does not fit %s "
                              "with groups of %d", (long long)u[i].w->n_out,
                              (long long)u[i].w->n_in, nb_wpath_name(path), group);
            goto done;
        }
        bytes += u[i].bytes4;
        params += (double)u[i].w->n_out * (double)u[i].w->n_in;
        widest = u[i].w->n_in > widest ? u[i].w->n_in : widest;
        order[i] = &u[i];
    }
    double budget = bpw * params / 8.0;
    if ((double)bytes > budget) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "--bpw %.3g is below the all-4-bit build of this "
                          "model (%.3f bits per weight with groups of %d)", bpw,
                          8.0 * (double)bytes / params, group);
        goto done;
    }
    if ((st = nb_pool_init(&pool, n_threads, 0))) goto done;
    struct err_job *j = calloc(1, sizeof *j);
    if (!j) {
        st = nb_set_error(NB_ERR_NOMEM, "recipe: out of memory");
        goto done;
    }
    *j = (struct err_job){.u = u, .n = n, .path = path,
                          .n_tok = s ? s->n_tokens : 1, .widest = widest};
    int nth = nb_pool_size(pool) < 64 ? nb_pool_size(pool) : 64;
    nb_pool_run_n(pool, err_worker, j, nth);
    for (int i = 0; i < nth && !st; i++) st = j->st[i];
    free(j);
    if (st) goto done;
    qsort(order, (size_t)n, sizeof *order, by_gain);
    for (int i = 0; i < n; i++) { /* most error per extra byte first, while it fits */
        uint64_t more = order[i]->bytes8 - order[i]->bytes4;
        if ((double)(bytes + more) > budget) continue;
        bytes += more;
        *order[i]->bits = 8;
    }
done:
    nb_pool_free(pool);
    free(u);
    free(order);
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
