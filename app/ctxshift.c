/* app/ctxshift.c — context shift by truncating the cache and running the newest tokens
 * again (ctxshift.h). */
#include "app/ctxshift.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/text.h"

int app_ctx_size(const struct nb_model_info *info, int n_ctx_arg)
{
    if (n_ctx_arg > 0) return n_ctx_arg;
    return info->n_ctx_train > 0 && info->n_ctx_train < 4096 ? info->n_ctx_train : 4096;
}

int app_keep_resolve(const char *cmd, const struct app_shift_opts *o, const char *what,
                     const int32_t *prompt, int n_prompt, int bos_id, int n_ctx, int *n_keep)
{
    if (o->shift && o->no_shift) {
        fprintf(stderr, "nibble %s: --context-shift and --no-shift contradict each other\n",
                cmd);
        return 0;
    }
    int bos = n_prompt > 0 && bos_id >= 0 && prompt[0] == bos_id;
    int64_t want = o->keep < 0 ? n_prompt : (int64_t)o->keep + bos;
    *n_keep = want < n_prompt ? (int)want : n_prompt;
    if (o->no_shift) return 1; /* nothing is ever dropped */
    /* at a shift the cache holds n_ctx tokens and must drop at least one */
    if (o->keep >= 0 && want >= n_ctx) {
        fprintf(stderr, "nibble %s: --keep %d keeps %lld tokens%s, but the context holds %d "
                        "(-c) and a shift must drop at least one: give --keep %d or less, or "
                        "a larger -c\n", cmd, o->keep, (long long)want,
                bos ? " (BOS is always kept)" : "", n_ctx, n_ctx - 1 - bos);
        return 0;
    }
    if (*n_keep >= n_ctx) {
        fprintf(stderr, "nibble %s: --keep -1 keeps all of %s, %d tokens, which fills the "
                        "context of %d (-c): a shift would have nothing to drop; give a "
                        "larger -c or a smaller --keep\n", cmd, what, *n_keep, n_ctx);
        return 0;
    }
    return 1;
}

static int min_int(int a, int b) { return a < b ? a : b; }

enum nb_status app_seq_init(struct app_seq *s, struct nb_ctx *ctx, int n_ctx, int n_keep,
                            int shift)
{
    *s = (struct app_seq){.ctx = ctx, .n_ctx = n_ctx, .n_keep = n_keep, .shift = shift,
                          .off = n_keep};
    s->cap = 256;
    s->ids = malloc(sizeof *s->ids * (size_t)s->cap);
    s->batch = malloc(sizeof *s->batch * (size_t)n_ctx);
    s->pos = malloc(sizeof *s->pos * (size_t)n_ctx);
    if (!s->ids || !s->batch || !s->pos) {
        app_seq_free(s);
        return NB_ERR_NOMEM;
    }
    nb_ctx_clear_seq(ctx, 0);
    return NB_OK;
}

void app_seq_free(struct app_seq *s)
{
    free(s->ids);
    free(s->batch);
    free(s->pos);
    *s = (struct app_seq){0};
}

int app_seq_cached(const struct app_seq *s)
{
    return min_int(s->n, s->n_keep) + (s->n > s->off ? s->n - s->off : 0);
}

const char *app_seq_error(const struct app_seq *s)
{
    return s->why[0] ? s->why : nb_last_error();
}

static enum nb_status fail(struct app_seq *s, enum nb_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    return st;
}

/* The cache holds a prefix of what the sequence should hold (the view: ids[0 .. kept)
 * then ids[off .. n)); keep at most its first `valid` tokens. A sliding-window layer
 * may refuse to go back that far: then everything is run again. */
static void cut_cache(struct app_seq *s, int valid)
{
    if (nb_ctx_seq_len(s->ctx, 0) > valid && nb_ctx_truncate_seq(s->ctx, 0, valid) != NB_OK)
        nb_ctx_clear_seq(s->ctx, 0);
}

enum nb_status app_seq_rewind(struct app_seq *s, int n)
{
    s->why[0] = '\0';
    if (n < 0 || n > s->n)
        return fail(s, NB_ERR_INVALID_ARG, "rewind: the sequence has %d tokens, not %d", s->n, n);
    /* ids[off ..) starts again at n when what is forgotten reaches into the dropped part */
    if (n < s->off) s->off = n > s->n_keep ? n : s->n_keep;
    s->n = n;
    cut_cache(s, app_seq_cached(s));
    return NB_OK;
}

/* Append m tokens to the sequence and run what the cache lacks, the logits of the last
 * into `logits`. When they do not fit, shift first: keep the first n_keep tokens, drop
 * the oldest half of the rest (llama.cpp's n_discard = (n_past - n_keep) / 2), again
 * while that is not room enough; the cache is then cut to the kept tokens and the newest
 * run again together with the m new ones, in one batch. *n_dropped: tokens dropped. */
static enum nb_status run_tokens(struct app_seq *s, const int32_t *toks, int m, float *logits,
                                 int *n_dropped)
{
    int kept = min_int(s->n, s->n_keep), vis = app_seq_cached(s);
    int valid = nb_ctx_seq_len(s->ctx, 0), dropped = 0;
    *n_dropped = 0;
    if (vis + m > s->n_ctx) {
        if (!s->shift)
            return fail(s, NB_ERR_RANGE, "the context of %d tokens is full: it holds %d, %d more "
                        "do not fit", s->n_ctx, vis, m);
        if (kept + m > s->n_ctx)
            return fail(s, NB_ERR_RANGE, "%d new tokens do not fit beside the %d kept ones in "
                        "the context of %d tokens", m, kept, s->n_ctx);
        while (vis + m > s->n_ctx) {
            int d = (vis - kept) / 2;
            if (d < 1) d = vis - kept; /* --keep leaves one token to drop: drop it */
            s->off += d;
            vis -= d;
            dropped += d;
        }
        if (valid > kept) valid = kept;
    }
    if (s->n + m > s->cap) {
        int cap = s->cap;
        while (cap < s->n + m) cap *= 2;
        int32_t *ids = realloc(s->ids, sizeof *ids * (size_t)cap);
        if (!ids) return fail(s, NB_ERR_NOMEM, "out of memory (%d tokens)", cap);
        s->ids = ids;
        s->cap = cap;
    }
    memcpy(s->ids + s->n, toks, sizeof *toks * (size_t)m);
    s->n += m;
    cut_cache(s, valid);
    /* the view from where the cache ends: the rest of the kept tokens, then ids[off ..) */
    int c = nb_ctx_seq_len(s->ctx, 0), nb = 0;
    kept = min_int(s->n, s->n_keep);
    for (int i = c; i < kept; i++) s->batch[nb++] = s->ids[i];
    for (int i = s->off + (c > kept ? c - kept : 0); i < s->n; i++) s->batch[nb++] = s->ids[i];
    for (int i = 0; i < nb; i++) s->pos[i] = c + i;
    struct nb_batch b = {.n_tokens = nb, .token = s->batch, .pos = s->pos};
    enum nb_status st = nb_decode(s->ctx, &b, logits);
    if (st) return st;
    if (dropped) {
        s->n_shifts++;
        s->n_dropped += dropped;
        s->n_rerun += nb - m;
    }
    *n_dropped = dropped;
    return NB_OK;
}

/* The runner nb_generate_with calls: run_tokens, timing the shifts after the prompt's
 * (a shift the prompt needs is part of the prefill). */
struct shift_run {
    struct app_seq *s;
    int n_calls;
    double t_shift;
};

static enum nb_status shift_step(void *self, const int32_t *toks, int m, float *logits,
                                 int *n_extra)
{
    struct shift_run *r = self;
    double t0 = app_time_s();
    int dropped;
    int64_t rerun0 = r->s->n_rerun;
    enum nb_status st = run_tokens(r->s, toks, m, logits, &dropped);
    if (st) return st;
    *n_extra = (int)(r->s->n_rerun - rerun0);
    if (r->n_calls++ > 0 && dropped) r->t_shift += app_time_s() - t0;
    return NB_OK;
}

enum nb_status app_generate(struct app_seq *s, struct nb_sampler *sampler, const int32_t *prompt,
                            int n_prompt, int n_predict, int stop_on_eos, nb_token_cb cb,
                            void *user, struct app_gen_stats *st)
{
    *st = (struct app_gen_stats){0};
    s->why[0] = '\0';
    int shifts0 = s->n_shifts;
    int64_t dropped0 = s->n_dropped, rerun0 = s->n_rerun;
    struct shift_run r = {.s = s};
    struct nb_gen_runner runner = {shift_step, &r};
    enum nb_status rc = nb_generate_with(s->ctx, 0, &runner, sampler, prompt, n_prompt,
                                         n_predict, stop_on_eos, cb, user, &st->gen);
    st->gen.t_gen_s -= r.t_shift;
    st->ctx_full = st->gen.stopped_by == NB_STOPPED_CONTEXT;
    st->n_shifts = s->n_shifts - shifts0;
    st->n_dropped = (int)(s->n_dropped - dropped0);
    st->n_rerun = (int)(s->n_rerun - rerun0);
    st->t_shift_s = r.t_shift;
    return rc;
}
