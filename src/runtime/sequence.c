/* runtime/sequence.c — one generated sequence: the one generation loop of the library.
 *
 * A sequence owns what one stream of tokens needs between forward steps: every token run
 * into it (`ids`, never shifted: chat compares a new rendering against it), the view the
 * cache holds (ids[0 .. min(n, n_keep)) then ids[off .. n): the context shift drops the
 * oldest half after the kept start and runs the newest again), and prompt-lookup drafts.
 * A step is a pair: prepare() lays out the tokens the cache lacks (a prompt, the last
 * token, its drafts) and accept() draws from the logits rows in order, keeping a draft
 * only while the draw equals it, and cuts the cache back to what was right. nb_generate,
 * nb_generate_lookup and the CLI's run and chat all go through nb_sequence_generate.
 *
 * A drafted step is verified (nb_decode_verify: every row as a one-token step would give
 * it), so a draw consumes the sampler exactly as plain decoding would: the output does
 * not depend on the drafts, and a context shift happens at the same token with or without
 * them (drafts that do not fit are not fed; the last token alone decides a shift). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"
#include "core/timer.h"
#include "nibble.h"
#include "runtime/sequence.h"

#define NGRAM_MIN 2
#define NGRAM_MAX 4
#define MAX_DRAFT 64

struct nb_sequence {
    struct nb_ctx *ctx;
    struct nb_sequence_params p;
    int n_vocab, eos_id;
    int base;            /* tokens the sequence held at init, not ours (no shift then) */
    int32_t *ids;        /* every token run or to run, in order */
    int n, cap;
    int n_run;           /* ids[0 .. n_run) have run (the rest waits for the next step) */
    int off;             /* >= n_keep: the first token after the kept ones in the view */
    /* the step (nb_sequence_generate's own batch; a caller stepping it passes its own) */
    struct nb_seq_batch b;
    int32_t draft[MAX_DRAFT];
    int k;               /* drafts fed after the view's last token */
    float *logits;       /* [(MAX_DRAFT + 1) * n_vocab] */
    int rows;            /* logits rows the step produced */
    int placed;          /* view tokens the step put (nb_sequence_put) */
    int draws, last_in;  /* the step's draws, and whether the last one was appended */
    int dropped, rerun;  /* the step's shift */
    struct nb_sequence_shifts sh;
};

static int min_i(int a, int b) { return a < b ? a : b; }

struct nb_sequence_params nb_sequence_default_params(void)
{
    return (struct nb_sequence_params){.size = sizeof(struct nb_sequence_params), .n_keep = -1};
}

/* Tokens of the view of ids[0 .. n): the kept start, then ids[off .. n). */
static int view_of(const struct nb_sequence *s, int n)
{
    return min_i(n, s->p.n_keep) + (n > s->off ? n - s->off : 0);
}

static int view_len(const struct nb_sequence *s)
{
    return view_of(s, s->n);
}

/* The view's token i. */
static int32_t view_at(const struct nb_sequence *s, int i)
{
    int kept = min_i(s->n, s->p.n_keep);
    return i < kept ? s->ids[i] : s->ids[s->off + (i - kept)];
}

int nb_sequence_cached(const struct nb_sequence *s)
{
    return nb_ctx_seq_len(s->ctx, s->p.seq) - s->base;
}

int nb_sequence_pending(const struct nb_sequence *s)
{
    return s->n - s->n_run;
}

const int32_t *nb_sequence_ids(const struct nb_sequence *s, int *n)
{
    *n = s->n;
    return s->ids;
}

void nb_sequence_shifts(const struct nb_sequence *s, struct nb_sequence_shifts *out)
{
    *out = s->sh;
}

/* The cache holds a prefix of the view: keep at most `valid` of it. A sliding-window
 * layer may refuse to go back that far: then the sequence is run again from its start. */
static void cut_cache(struct nb_sequence *s, int valid)
{
    int seq = s->p.seq;
    if (nb_ctx_seq_len(s->ctx, seq) > s->base + valid &&
        nb_ctx_truncate_seq(s->ctx, seq, s->base + valid) != NB_OK)
        nb_ctx_clear_seq(s->ctx, seq);
}

static enum nb_status grow(struct nb_sequence *s, int need)
{
    if (need > s->cap) {
        int cap = s->cap ? s->cap : 256;
        while (cap < need) cap *= 2;
        int32_t *ids = realloc(s->ids, sizeof *ids * (size_t)cap);
        if (!ids) return nb_set_error(NB_ERR_NOMEM, "generate: out of memory (%d tokens)", cap);
        s->ids = ids;
        s->cap = cap;
    }
    return NB_OK;
}

/* Room in the sequence's own batch for a step of `need` tokens and its drafts. */
static enum nb_status grow_batch(struct nb_sequence *s, int need)
{
    struct nb_seq_batch *b = &s->b;
    if (need + MAX_DRAFT + 1 <= b->cap) return NB_OK;
    int cap = b->cap ? b->cap : 512;
    while (cap < need + MAX_DRAFT + 1) cap *= 2;
    int32_t *t = realloc(b->tok, sizeof *t * (size_t)cap * 3);
    if (!t) return nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
    b->tok = t;
    uint8_t *w = realloc(b->want, (size_t)cap);
    if (!w) return nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
    b->want = w;
    b->cap = cap;
    b->pos = b->tok + cap;
    b->seq = b->tok + 2 * (size_t)cap;
    return NB_OK;
}

enum nb_status nb_sequence_init(struct nb_sequence **out, struct nb_ctx *ctx,
                                const struct nb_sequence_params *params)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "nb_sequence_init: out is NULL");
    *out = NULL;
    if (!ctx) return nb_set_error(NB_ERR_INVALID_ARG, "nb_sequence_init: no context");
    struct nb_sequence_params p = nb_sequence_default_params();
    if (params && params->size > sizeof p)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_sequence_init: params->size is %zu: "
                            "use nb_sequence_default_params()", params->size);
    enum nb_status pst = nb_params_in(&p, sizeof p, params, "nb_sequence_init");
    if (pst) return pst;
    if (p.seq < 0 || p.n_ctx < 0 || p.max_draft < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_sequence_init: seq %d, n_ctx %d and "
                            "max_draft %d must not be negative", p.seq, p.n_ctx, p.max_draft);
    if (p.shift && p.n_ctx <= 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_sequence_init: a context shift needs n_ctx");
    if (p.n_keep < 0) p.n_keep = 0;
    if (p.max_draft > MAX_DRAFT) p.max_draft = MAX_DRAFT;
    struct nb_sequence *s = calloc(1, sizeof *s);
    if (!s) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    s->ctx = ctx;
    s->p = p;
    s->n_vocab = info.n_vocab;
    s->eos_id = info.eos_id;
    s->off = p.n_keep;
    if (p.shift) nb_ctx_clear_seq(ctx, p.seq); /* a shift runs its own tokens again */
    s->base = nb_ctx_seq_len(ctx, p.seq);
    if (grow(s, 256)) {
        nb_sequence_free(s);
        return nb_set_error(NB_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return NB_OK;
}

void nb_sequence_free(struct nb_sequence *s)
{
    if (!s) return;
    free(s->ids);
    free(s->b.tok);
    free(s->b.want);
    free(s->logits);
    free(s);
}

enum nb_status nb_sequence_rewind(struct nb_sequence *s, int n)
{
    if (n < 0 || n > s->n)
        return nb_set_error(NB_ERR_INVALID_ARG, "rewind: the sequence has %d tokens, not %d",
                            s->n, n);
    /* ids[off ..) starts again at n when what is forgotten reaches into the dropped part */
    if (n < s->off) s->off = n > s->p.n_keep ? n : s->p.n_keep;
    s->n = n;
    if (s->n_run > n) s->n_run = n;
    cut_cache(s, min_i(nb_sequence_cached(s), view_len(s)));
    return NB_OK;
}

/* Append tokens to ids (not run yet). */
static enum nb_status append(struct nb_sequence *s, const int32_t *t, int m)
{
    enum nb_status st = grow(s, s->n + m);
    if (st) return st;
    memcpy(s->ids + s->n, t, sizeof *t * (size_t)m);
    s->n += m;
    return NB_OK;
}

/* Make room when the view does not fit n_ctx: keep the first n_keep tokens, drop the
 * oldest half of the rest of what has run (llama.cpp's n_discard = (n_past - n_keep) / 2),
 * again while that is not room enough for the m new tokens; the cache is then cut to the
 * kept tokens (the newest run again with the new ones, in one batch). */
static enum nb_status shift(struct nb_sequence *s)
{
    int n_ctx = s->p.n_ctx, m = s->n - s->n_run;
    int vis = view_of(s, s->n_run), kept = min_i(s->n_run, s->p.n_keep);
    if (vis + m <= n_ctx) return NB_OK;
    if (!s->p.shift)
        return nb_set_error(NB_ERR_RANGE, "the context of %d tokens is full: it holds %d, %d "
                            "more do not fit", n_ctx, vis, m);
    if (kept + m > n_ctx)
        return nb_set_error(NB_ERR_RANGE, "%d new tokens do not fit beside the %d kept ones in "
                            "the context of %d tokens", m, kept, n_ctx);
    int dropped = 0;
    while (vis + m > n_ctx) {
        int d = (vis - kept) / 2;
        if (d < 1) d = vis - kept; /* --keep leaves one token to drop: drop it */
        s->off += d;
        vis -= d;
        dropped += d;
    }
    cut_cache(s, kept);
    s->dropped = dropped;
    return NB_OK;
}

/* Into b: view tokens [c, c + m), none asking for logits. */
static void put_view(const struct nb_sequence *s, struct nb_seq_batch *b, int c, int m)
{
    for (int i = c; i < c + m; i++, b->n++) {
        b->tok[b->n] = view_at(s, i);
        b->pos[b->n] = s->base + i;
        b->seq[b->n] = s->p.seq;
        b->want[b->n] = 0;
    }
}

/* Into b: the view's last token asks for logits, then k drafts (s->draft) after the view
 * of vis tokens, each asking for its own. */
static void put_drafts(struct nb_sequence *s, struct nb_seq_batch *b, int vis, int k)
{
    b->want[b->n - 1] = 1;
    for (int i = 0; i < k; i++, b->n++) {
        b->tok[b->n] = s->draft[i];
        b->pos[b->n] = s->base + vis + i;
        b->seq[b->n] = s->p.seq;
        b->want[b->n] = 1;
    }
    s->k = k;
}

/* The step's batch: what the view holds beyond the cache (the prompt, the last token;
 * after a shift the newest tokens again), then up to `k` drafts copied from ids. */
static void prepare(struct nb_sequence *s, int k)
{
    int c = nb_sequence_cached(s), vis = view_len(s);
    s->b.n = 0;
    put_view(s, &s->b, c, vis - c);
    put_drafts(s, &s->b, vis, k);
    s->rerun = (vis - c) - (s->n - s->n_run); /* run again besides the new tokens */
}

/* Run the step (after a shift if the view does not fit), drafts first dropped when they
 * do not fit. NB_ERR_RANGE having run nothing when the view itself does not fit. */
static enum nb_status run_step(struct nb_sequence *s, int k, int verify)
{
    enum nb_status st;
    s->dropped = 0;
    if (s->p.n_ctx > 0) {
        if (view_len(s) + k > s->p.n_ctx) k = 0; /* no room for drafts */
        if ((st = shift(s))) return st;
    }
    if ((st = grow_batch(s, view_len(s) - nb_sequence_cached(s)))) return st;
    for (;;) {
        prepare(s, k);
        struct nb_batch b = {.n_tokens = s->b.n, .token = s->b.tok, .pos = s->b.pos,
                             .seq = s->b.seq, .want_logits = s->b.want};
        st = verify && !s->dropped ? nb_decode_verify(s->ctx, &b, s->logits)
                                   : nb_decode(s->ctx, &b, s->logits);
        if (st == NB_ERR_RANGE && k > 0) { /* the drafts do not fit: try without */
            k = 0;
            continue;
        }
        break;
    }
    if (st) return st;
    s->rows = 1 + s->k;
    s->n_run = s->n;
    if (s->dropped) {
        s->sh.n_shifts++;
        s->sh.n_dropped += s->dropped;
        s->sh.n_rerun += s->rerun;
    }
    return NB_OK;
}

enum nb_status nb_sequence_take(struct nb_sequence *s, int32_t y, int append_it)
{
    s->draws++;
    s->last_in = append_it;
    return append_it ? append(s, &y, 1) : NB_OK;
}

enum nb_status nb_sequence_settle(struct nb_sequence *s, int *accepted)
{
    int conf = s->draws > 0 ? s->draws - 1 : 0, pending = s->draws > 0 && s->last_in;
    if (conf > s->k) conf = s->k;
    if (accepted) *accepted = conf;
    int keep = view_len(s) - pending;
    s->n_run = s->n - pending;
    s->draws = 0;
    if (s->k && nb_sequence_cached(s) > keep)
        return nb_ctx_truncate_seq(s->ctx, s->p.seq, s->base + keep);
    return NB_OK;
}

/* What accept() found. */
enum outcome { GO_ON = 0, STOP };

/* Draw from the step's rows in order: row i is valid while every draw before it equalled
 * its draft. Each draw is appended to ids (the last is not in the cache: the next step
 * runs it); the cache is cut back to what was right (nb_sequence_settle). */
static enum outcome accept(struct nb_sequence *s, struct nb_sampler *smp, int stop_on_eos,
                           long long *left, nb_token_cb cb, void *user, struct nb_gen_stats *S,
                           enum nb_status *st)
{
    enum outcome o = GO_ON;
    s->draws = 0;
    for (int i = 0; i < s->rows; i++) {
        if (*left > 0) nb_sampler_set_budget(smp, *left > INT_MAX ? INT_MAX : (int)*left);
        int32_t y = nb_sampler_sample(smp, s->logits + (size_t)i * (size_t)s->n_vocab);
        if (y < 0) { /* the sampler's grammar: no token continues the output */
            *st = nb_set_error(NB_ERR_RANGE, "constrained output: no token of the vocabulary "
                               "continues it");
            return STOP;
        }
        if (stop_on_eos && y == s->eos_id) {
            nb_sequence_take(s, y, 0);
            S->stopped_by = NB_STOPPED_EOG;
            o = STOP;
            break;
        }
        nb_sampler_accept(smp, y);
        S->n_gen++;
        if ((*st = nb_sequence_take(s, y, 1))) return STOP;
        if (*left > 0) --*left;
        if (cb && cb(y, user)) {
            S->stopped_by = NB_STOPPED_CALLBACK;
            o = STOP;
            break;
        }
        if (*left == 0) {
            o = STOP;
            break;
        }
        if (i == s->k || y != s->draft[i]) break; /* y is not in the cache */
    }
    int acc = 0;
    if ((*st = nb_sequence_settle(s, &acc))) return STOP;
    S->n_accepted += acc;
    return o;
}

enum nb_status nb_sequence_generate(struct nb_sequence *s, struct nb_sampler *sampler,
                                    const int32_t *prompt, int n_prompt, int n_predict,
                                    int stop_on_eos, nb_token_cb cb, void *user,
                                    struct nb_gen_stats *stats)
{
    struct nb_gen_stats local = {0};
    struct nb_gen_stats *S = stats ? stats : &local;
    *S = (struct nb_gen_stats){0};
    if (!s || !sampler) return nb_set_error(NB_ERR_INVALID_ARG, "generate: no sequence or sampler");
    if (n_prompt <= 0 || !prompt)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: the prompt is empty");
    /* the logits rows of a step (not needed by a sequence a caller steps: the server) */
    if (!s->logits &&
        !(s->logits = malloc(sizeof *s->logits * (size_t)s->n_vocab * (MAX_DRAFT + 1))))
        return nb_set_error(NB_ERR_NOMEM, "generate: out of memory (the logits rows)");
    struct nb_sequence_shifts sh0 = s->sh;
    enum nb_status st = append(s, prompt, n_prompt);
    if (st) return st;
    for (int i = 0; i < n_prompt; i++) nb_sampler_accept(sampler, prompt[i]);
    double t0 = nb_time_s();
    const int verify = s->p.max_draft > 0;
    if ((st = run_step(s, 0, 0))) {
        s->n -= n_prompt; /* the prompt did not run */
        return st;
    }
    double t1 = nb_time_s(), t_shift = 0;
    S->n_prompt = n_prompt;
    S->t_prompt_s = t1 - t0;
    long long left = n_predict < 0 ? -1 : n_predict;
    while (left != 0) {
        if (accept(s, sampler, stop_on_eos, &left, cb, user, S, &st) == STOP) break;
        int k = 0;
        if (verify) {
            k = nb_lookup_draft(s->ids, s->n, NGRAM_MIN, NGRAM_MAX, s->p.max_draft, s->draft);
            if (left >= 0 && k > left - 1) k = (int)(left - 1);
            if (k < 0) k = 0;
        }
        double ts = nb_time_s();
        st = run_step(s, k, verify);
        if (st == NB_ERR_RANGE) { /* the context is full: the text so far is the answer */
            S->stopped_by = NB_STOPPED_CONTEXT;
            st = NB_OK;
            break;
        }
        if (st) break;
        if (s->dropped) {
            t_shift += nb_time_s() - ts;
        } else {
            S->n_decode++;
            S->n_drafted += s->k;
        }
    }
    S->t_gen_s = nb_time_s() - t1 - t_shift;
    S->n_shifts = s->sh.n_shifts - sh0.n_shifts;
    S->n_dropped = s->sh.n_dropped - sh0.n_dropped;
    S->n_rerun = s->sh.n_rerun - sh0.n_rerun;
    S->t_shift_s = t_shift;
    return st;
}

/* ---------------------------------------------------------------- a step driven from outside */

enum nb_status nb_sequence_append(struct nb_sequence *s, const int32_t *t, int m)
{
    return append(s, t, m);
}

enum nb_status nb_sequence_reserve(struct nb_sequence *s, int n)
{
    return grow(s, n);
}

enum nb_status nb_sequence_adopt(struct nb_sequence *s, const struct nb_sequence *src, int n)
{
    if (n < 0 || n > nb_sequence_cached(src) || n > src->n || src->off != src->p.n_keep ||
        s->off != s->p.n_keep)
        return nb_set_error(NB_ERR_INVALID_ARG, "adopt: %d tokens of a sequence that holds %d",
                            n, nb_sequence_cached(src));
    enum nb_status st = grow(s, n);
    if (!st) st = nb_ctx_fork_seq(s->ctx, src->p.seq, s->p.seq, n);
    if (st) {
        nb_ctx_clear_seq(s->ctx, s->p.seq);
        s->n = s->n_run = 0;
        return st;
    }
    memcpy(s->ids, src->ids, sizeof *s->ids * (size_t)n);
    s->n = s->n_run = n;
    return NB_OK;
}

int nb_sequence_put(struct nb_sequence *s, struct nb_seq_batch *b, int max_new, int max_draft)
{
    int c = nb_sequence_cached(s), vis = view_len(s), m = vis - c;
    if (m > max_new) m = max_new;
    if (m > b->cap - b->n) m = b->cap - b->n;
    s->placed = m > 0 ? m : 0;
    s->k = 0;
    s->draws = 0;
    if (m <= 0) return 0;
    put_view(s, b, c, m);
    if (c + m < vis) return 0;
    if (max_draft > MAX_DRAFT) max_draft = MAX_DRAFT;
    if (s->p.n_ctx > 0 && vis + max_draft > s->p.n_ctx) max_draft = s->p.n_ctx - vis;
    if (max_draft > b->cap - b->n) max_draft = b->cap - b->n;
    int k = max_draft > 0 ? nb_lookup_draft(s->ids, s->n, NGRAM_MIN, NGRAM_MAX, max_draft,
                                            s->draft)
                          : 0;
    put_drafts(s, b, vis, k);
    return 1 + k;
}

int32_t nb_sequence_draft(const struct nb_sequence *s, int i)
{
    return i >= 0 && i < s->k ? s->draft[i] : -1;
}

void nb_sequence_ran(struct nb_sequence *s)
{
    s->n_run += s->placed;
    s->placed = 0;
}

/* ---------------------------------------------------------------- prompt lookup */

int nb_lookup_draft(const int32_t *hist, int n, int ngram_min, int ngram_max, int max_draft,
                    int32_t *draft)
{
    if (!hist || !draft || max_draft <= 0 || ngram_min < 1) return 0;
    for (int g = ngram_max; g >= ngram_min; g--) {
        if (g >= n) continue;
        const int32_t *suf = hist + n - g;
        /* the latest earlier occurrence: start at n - g - 1 and walk back */
        for (int i = n - g - 1; i >= 0; i--) {
            if (hist[i] != suf[0] || memcmp(hist + i, suf, sizeof *suf * (size_t)g) != 0)
                continue;
            int k = 0;
            while (k < max_draft && i + g + k < n) {
                draft[k] = hist[i + g + k];
                k++;
            }
            if (k > 0) return k;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- one-call forms */

static enum nb_status generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                               const int32_t *prompt, int n_prompt, int n_predict,
                               int stop_on_eos, int max_draft, nb_token_cb cb, void *user,
                               struct nb_gen_stats *stats)
{
    struct nb_sequence *s = NULL;
    struct nb_sequence_params p = nb_sequence_default_params();
    p.seq = seq;
    p.max_draft = max_draft;
    if (stats) *stats = (struct nb_gen_stats){0};
    enum nb_status st = nb_sequence_init(&s, ctx, &p);
    if (st) return st;
    st = nb_sequence_generate(s, sampler, prompt, n_prompt, n_predict, stop_on_eos, cb, user,
                              stats);
    nb_sequence_free(s);
    return st;
}

enum nb_status nb_generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                           const int32_t *prompt, int n_prompt, int n_predict, int stop_on_eos,
                           nb_token_cb cb, void *user, struct nb_gen_stats *stats)
{
    return generate(ctx, seq, sampler, prompt, n_prompt, n_predict, stop_on_eos, 0, cb, user,
                    stats);
}

enum nb_status nb_generate_lookup(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                                  const int32_t *prompt, int n_prompt, int n_predict,
                                  int stop_on_eos, int max_draft, nb_token_cb cb, void *user,
                                  struct nb_gen_stats *stats)
{
    return generate(ctx, seq, sampler, prompt, n_prompt, n_predict, stop_on_eos, max_draft, cb,
                    user, stats);
}
