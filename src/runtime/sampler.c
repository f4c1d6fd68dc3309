/* runtime/sampler.c — next-token choice: repetition, presence and frequency penalties,
 * then greedy, or
 * temperature with top-k, top-p and min-p filtering, then a draw from a seeded
 * generator (the same seed gives the same tokens).
 *
 * Order (as llama.cpp's default chain): penalty -> top-k -> softmax(logits / T)
 * -> top-p -> min-p -> draw. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nibble.h"
#include "runtime/api.h"
#include "runtime/constrain.h"
#include "runtime/gbnf.h"

#define SAMPLER_CHUNK 128 /* logits per chunk of top_k_select */

struct nb_sampler {
    struct nb_sampler_params p;
    int n_vocab;
    int32_t *history; /* ring of the last repeat_last_n tokens */
    int n_hist, hist_pos;
    uint64_t rng;
    struct cand {
        float logit;
        int32_t id;
    } *cand;          /* [n_vocab] */
    float *chunk_max; /* [n_vocab / SAMPLER_CHUNK + 1] (top_k_select) */
    /* the constraint stage (nb_sampler_set_grammar): the grammar, where the output is in
     * it, room for a masked copy of a row */
    const struct nb_grammar *grammar;
    struct nb_cons cons;      /* a JSON grammar's state */
    struct nb_gbstate *gbs;   /* a GBNF grammar's (made on first use) */
    float *work; /* [n_vocab] */
    int32_t *bias_id; /* [n_bias] (nb_sampler_set_logit_bias) */
    float *bias;
    int n_bias;
};

struct nb_sampler_params nb_sampler_default_params(void)
{
    struct nb_sampler_params p = {
        .size = sizeof(struct nb_sampler_params),
        .temperature = 0.0f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0x5eed,
    };
    return p;
}

/* splitmix64: small, fast, good enough for sampling. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

enum nb_status nb_sampler_init(struct nb_sampler **out, const struct nb_sampler_params *params,
                               int n_vocab)
{
    *out = NULL;
    if (!params) return nb_set_error(NB_ERR_INVALID_ARG, "sampler: no params");
    struct nb_sampler_params pv = nb_sampler_default_params();
    enum nb_status st = nb_params_in(&pv, sizeof pv, params, "sampler params");
    if (st) return st;
    const struct nb_sampler_params *p = &pv;
    if (n_vocab <= 0) return nb_set_error(NB_ERR_INVALID_ARG, "sampler: vocabulary is empty");
    if (p->temperature < 0 || !isfinite(p->temperature) || p->top_p < 0 || p->min_p < 0 ||
        p->min_p > 1 || !(p->repeat_penalty > 0) || p->repeat_last_n < 0 ||
        p->repeat_last_n > (1 << 20) || !(fabsf(p->presence_penalty) <= 2) ||
        !(fabsf(p->frequency_penalty) <= 2))
        return nb_set_error(NB_ERR_INVALID_ARG, "sampler: a parameter is out of range (temp "
                            "%g, top_p %g, min_p %g, repeat_penalty %g, repeat_last_n %d, "
                            "presence_penalty %g, frequency_penalty %g)",
                            p->temperature, p->top_p, p->min_p, p->repeat_penalty,
                            p->repeat_last_n, p->presence_penalty, p->frequency_penalty);
    struct nb_sampler *s = calloc(1, sizeof *s);
    if (!s) return nb_set_error(NB_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed;
    s->cand = malloc(sizeof *s->cand * (size_t)n_vocab);
    s->chunk_max = malloc(sizeof *s->chunk_max * (size_t)(n_vocab / SAMPLER_CHUNK + 1));
    s->history = malloc(sizeof *s->history * (size_t)(p->repeat_last_n ? p->repeat_last_n : 1));
    if (!s->cand || !s->history || !s->chunk_max) {
        nb_sampler_free(s);
        return nb_set_error(NB_ERR_NOMEM, "sampler: out of memory");
    }
    *out = s;
    return NB_OK;
}

void nb_sampler_free(struct nb_sampler *s)
{
    if (!s) return;
    free(s->cand);
    free(s->chunk_max);
    free(s->history);
    free(s->work);
    free(s->gbs);
    free(s->bias_id);
    free(s->bias);
    free(s);
}

void nb_sampler_accept(struct nb_sampler *s, int32_t token)
{
    if (s->p.repeat_last_n <= 0) return;
    s->history[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n) s->n_hist++;
}

static int cand_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id; /* ties: lower id first, deterministic */
}

/* The k best of logits[0..n) by cand_desc into c[0..k), sorted: a min-heap of k (its root
 * the worst kept) over one pass, then sorted — the first k of a full sort, ties included,
 * in O(n log k) instead of O(n log n) (a 151k vocabulary sorted per token cost more than
 * a decode step of a 1.7B model on 2 cores). */
static void heap_down(struct cand *h, int k, int i)
{
    for (;;) {
        int l = 2 * i + 1, w = i;
        if (l < k && cand_desc(&h[l], &h[w]) > 0) w = l; /* h[l] ranks after h[w]: worse */
        if (l + 1 < k && cand_desc(&h[l + 1], &h[w]) > 0) w = l + 1;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The k best of c[0..n) into c[0..k), sorted (c[k..n) is left in any order). */
static void heap_select(struct cand *c, int n, int k)
{
    for (int i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
    for (int i = k; i < n; i++)
        if (cand_desc(&c[i], &c[0]) < 0) { /* c[i] ranks before the worst kept */
            c[0] = c[i];
            heap_down(c, k, 0);
        }
    qsort(c, (size_t)k, sizeof *c, cand_desc);
}

/* The largest of x[0..n) (NaN skipped; -inf when none): 16 running maxima the compiler
 * keeps in vector registers. */
static float max_of(const float *x, int n)
{
    float m[16];
    for (int j = 0; j < 16; j++) m[j] = -INFINITY;
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float r = m[0];
    for (int j = 1; j < 16; j++) r = m[j] > r ? m[j] : r;
    return r;
}

/* The k best of logits[0..n) into c[0..k), sorted. The k largest of the maxima of chunks
 * of SAMPLER_CHUNK are k tokens at or above the k-th of those maxima, t, so every token of
 * the k best is >= t: only those are kept for the heap (a few hundred of a 151k vocabulary
 * instead of a heap test per token; the same k tokens, ties included). */
static void top_k_select(struct cand *c, float *chunk_max, const float *logits, int n, int k)
{
    int n_chunks = n / SAMPLER_CHUNK, m = 0;
    float t = -INFINITY;
    if (n_chunks >= 4 * k) {
        for (int b = 0; b < n_chunks; b++) {
            int len = b == n_chunks - 1 ? n - b * SAMPLER_CHUNK : SAMPLER_CHUNK;
            chunk_max[b] = max_of(logits + (int64_t)b * SAMPLER_CHUNK, len);
            c[b] = (struct cand){chunk_max[b], b};
        }
        heap_select(c, n_chunks, k);
        t = c[k - 1].logit;
        for (int b = 0; b < n_chunks; b++) {
            if (!(chunk_max[b] >= t)) continue;
            int end = b == n_chunks - 1 ? n : (b + 1) * SAMPLER_CHUNK;
            for (int i = b * SAMPLER_CHUNK; i < end; i++)
                if (logits[i] >= t) c[m++] = (struct cand){logits[i], i};
        }
    }
    if (m < k) { /* few chunks, or NaN logits: every token */
        for (int i = 0; i < n; i++) c[i] = (struct cand){logits[i], i};
        m = n;
    }
    heap_select(c, m, k);
}

/* Once per distinct token in the window: the CTRL-style repetition penalty (a positive
 * logit divided, a negative one multiplied), then OpenAI's presence penalty (subtracted
 * once) and frequency penalty (subtracted per occurrence), in llama.cpp's order. */
static void apply_penalty(struct nb_sampler *s, float *logits)
{
    const float rp = s->p.repeat_penalty, pp = s->p.presence_penalty,
                fp = s->p.frequency_penalty;
    if ((rp == 1.0f && pp == 0 && fp == 0) || s->n_hist == 0) return;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->history[i];
        if (t < 0 || t >= s->n_vocab) continue;
        int seen = 0, count = 1;
        for (int j = 0; j < i; j++) seen |= s->history[j] == t;
        if (seen) continue;
        for (int j = i + 1; j < s->n_hist; j++) count += s->history[j] == t;
        if (rp != 1.0f) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
        logits[t] -= (float)count * fp + pp;
    }
}

enum nb_status nb_sampler_set_logit_bias(struct nb_sampler *s, const int32_t *ids,
                                         const float *bias, int n)
{
    if (!s || n < 0 || (n > 0 && (!ids || !bias)))
        return nb_set_error(NB_ERR_INVALID_ARG, "logit bias: no sampler, or no ids or biases");
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return nb_set_error(NB_ERR_INVALID_ARG, "logit bias: token %d is outside the "
                                "vocabulary of %d", ids[i], s->n_vocab);
        if (isnan(bias[i]) || bias[i] == INFINITY)
            return nb_set_error(NB_ERR_INVALID_ARG, "logit bias: token %d's bias is %g", ids[i],
                                bias[i]);
    }
    int32_t *id = NULL;
    float *b = NULL;
    if (n > 0 && (!(id = malloc(sizeof *id * (size_t)n)) || !(b = malloc(sizeof *b * (size_t)n)))) {
        free(id);
        return nb_set_error(NB_ERR_NOMEM, "logit bias: out of memory");
    }
    if (n > 0) {
        memcpy(id, ids, sizeof *id * (size_t)n);
        memcpy(b, bias, sizeof *b * (size_t)n);
    }
    free(s->bias_id);
    free(s->bias);
    s->bias_id = id;
    s->bias = b;
    s->n_bias = n;
    return NB_OK;
}

static int32_t sample_free(struct nb_sampler *s, float *logits)
{
    for (int i = 0; i < s->n_bias; i++) logits[s->bias_id[i]] += s->bias[i];
    apply_penalty(s, logits);
    int n = s->n_vocab;
    if (s->p.temperature <= 0) { /* greedy: first index of the maximum (0 when logits[0]
                                    * is NaN, as a running comparison gives) */
        float mx = n > 1 ? max_of(logits + 1, n - 1) : -INFINITY;
        if (!(mx > logits[0])) return 0;
        int32_t best = 1;
        while (logits[best] != mx) best++;
        return best;
    }
    int k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    if (k < n) {
        top_k_select(s->cand, s->chunk_max, logits, n, k); /* cand[0..k), cand_desc order */
    } else {
        for (int i = 0; i < n; i++) {
            s->cand[i].logit = logits[i];
            s->cand[i].id = i;
        }
        qsort(s->cand, (size_t)n, sizeof *s->cand, cand_desc);
    }
    /* softmax over the top k at temperature T (cand[0] holds the maximum) */
    double sum = 0;
    float mx = s->cand[0].logit;
    for (int i = 0; i < k; i++) {
        double e = exp(((double)s->cand[i].logit - mx) / s->p.temperature);
        s->cand[i].logit = (float)e;
        sum += e;
    }
    for (int i = 0; i < k; i++) s->cand[i].logit = (float)(s->cand[i].logit / sum);
    if (s->p.top_p < 1.0f) { /* smallest prefix whose mass reaches top_p */
        double cum = 0;
        int keep = k;
        for (int i = 0; i < k; i++) {
            cum += s->cand[i].logit;
            if (cum >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        k = keep;
    }
    if (s->p.min_p > 0) { /* drop tokens below min_p x the top probability */
        float floor = s->cand[0].logit * s->p.min_p;
        int keep = 1;
        while (keep < k && s->cand[keep].logit >= floor) keep++;
        k = keep;
    }
    double mass = 0;
    for (int i = 0; i < k; i++) mass += s->cand[i].logit;
    double r = rng_uniform(&s->rng) * mass;
    for (int i = 0; i < k; i++) {
        r -= s->cand[i].logit;
        if (r < 0) return s->cand[i].id;
    }
    return s->cand[k - 1].id;
}

/* ---------------------------------------------------------------- the constraint stage */

/* One draw's constraint: a JSON grammar (g, c) or a GBNF one (gb, gs), over v. */
struct cons_draw {
    const struct nb_gram *g;
    struct nb_cons *c;
    const struct nb_gbnf *gb;
    struct nb_gbstate *gs;
    const struct nb_vocab_bytes *v;
    int special;
};

static int d_allows(const struct cons_draw *d, int32_t tok)
{
    return d->gb ? nb_gb_allows(d->gb, d->v, d->gs, tok, d->special)
                 : nb_cons_allows(d->g, d->v, d->c, tok, d->special);
}

static int d_refused(const struct cons_draw *d, int32_t tok)
{
    return d->gb ? nb_gb_refused(d->gb, d->v, d->gs, tok, d->special)
                 : nb_cons_refused(d->g, d->v, d->c, tok, d->special);
}

static int d_next(const struct cons_draw *d, float *row, float *work)
{
    return d->gb ? nb_gb_next(d->gb, d->v, d->gs, d->gs->budget, d->special, row, work)
                 : nb_cons_next(d->g, d->v, d->c, d->c->budget, d->special, row, work);
}

/* The sampler's choice when the constraint allows it; for greedy sampling without
 * penalties the next candidates by logit (16 at most); else the sampler again over the
 * row with every refused token masked. */
static int32_t cons_draw(struct nb_sampler *s, const struct cons_draw *d, float *row, float *work)
{
    int n_vocab = s->n_vocab;
    memcpy(work, row, sizeof *work * (size_t)n_vocab);
    int32_t tok = sample_free(s, work);
    if (d_allows(d, tok)) return tok;
    /* the model's choice no longer fits the budget: close, and it may still be the way */
    if (d_refused(d, tok) && d_allows(d, tok)) return tok;
    const struct nb_sampler_params *p = &s->p;
    if (p->temperature <= 0 && p->repeat_penalty == 1.0f && p->presence_penalty == 0 &&
        p->frequency_penalty == 0 && s->n_bias == 0) { /* greedy on the raw row: its next best */
        for (int t = 0; t < 16 && tok >= 0; t++) {
            row[tok] = -INFINITY;
            int best = -1;
            float bv = -INFINITY;
            for (int i = 0; i < n_vocab; i++)
                if (row[i] > bv) bv = row[i], best = i;
            if (best >= 0 && d_allows(d, best)) return best;
            tok = best;
        }
    }
    if (d_next(d, row, work) == 0) return -1;
    return sample_free(s, work);
}

int32_t nb_cons_sample(struct nb_sampler *s, const struct nb_gram *g, const struct nb_vocab_bytes *v,
                       struct nb_cons *c, int special, float *row, float *work)
{
    struct cons_draw d = {.g = g, .c = c, .v = v, .special = special};
    return cons_draw(s, &d, row, work);
}

int32_t nb_gb_sample(struct nb_sampler *s, const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
                     struct nb_gbstate *c, int special, float *row, float *work)
{
    struct cons_draw d = {.gb = g, .gs = c, .v = v, .special = special};
    return cons_draw(s, &d, row, work);
}

int32_t nb_sampler_sample(struct nb_sampler *s, float *logits)
{
    const struct nb_grammar *g = s->grammar;
    if (!g) return sample_free(s, logits);
    struct cons_draw d = {.g = &g->gram, .c = &s->cons, .gb = g->gbnf, .gs = s->gbs, .v = &g->vb};
    int32_t tok = cons_draw(s, &d, logits, s->work);
    if (tok >= 0 && g->vb.kind[tok] != NB_VTOK_EOG) {
        const char *b = g->vb.bytes + g->vb.off[tok];
        uint32_t n = g->vb.off[tok + 1] - g->vb.off[tok];
        if (g->gbnf)
            nb_gb_feed(g->gbnf, s->gbs, b, n);
        else
            nb_cons_feed(&g->gram, &s->cons, b, n);
    }
    return tok;
}

enum nb_status nb_sampler_set_grammar(struct nb_sampler *s, const struct nb_grammar *g)
{
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "nb_sampler_set_grammar: no sampler");
    if (g && g->vb.n_vocab != s->n_vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_sampler_set_grammar: the grammar was made "
                            "for %d tokens, the sampler draws from %d", g->vb.n_vocab, s->n_vocab);
    if (g && !s->work && !(s->work = malloc(sizeof *s->work * (size_t)s->n_vocab)))
        return nb_set_error(NB_ERR_NOMEM, "sampler: out of memory");
    if (g && g->gbnf && !s->gbs && !(s->gbs = malloc(sizeof *s->gbs)))
        return nb_set_error(NB_ERR_NOMEM, "sampler: out of memory");
    s->grammar = g;
    if (g && g->gbnf)
        nb_gb_start(g->gbnf, s->gbs);
    else if (g)
        nb_cons_start(&g->gram, &s->cons);
    return NB_OK;
}

void nb_sampler_set_budget(struct nb_sampler *s, int n_tokens)
{
    if (!s) return;
    s->cons.budget = n_tokens < 0 ? -1 : n_tokens;
    if (s->gbs) s->gbs->budget = s->cons.budget;
}

int nb_sampler_grammar_complete(const struct nb_sampler *s)
{
    if (!s || !s->grammar) return 0;
    if (s->grammar->gbnf) return nb_gb_complete(s->grammar->gbnf, s->gbs);
    return nb_cons_complete(&s->grammar->gram, &s->cons);
}
