/* runtime/generate.c — prompt in, tokens out: one prefill pass over the prompt,
 * then one decode step per generated token. The tokens are run by a runner: the
 * default one decodes them into one sequence at its next positions; nibble run's
 * context shift brings its own (nb_gen_runner). */
#include <stdlib.h>

#include "core/error.h"
#include "core/timer.h"
#include "nibble.h"

/* The default runner: nb_decode into one sequence, positions after what it holds. */
struct seq_runner {
    struct nb_ctx *ctx;
    int seq;
    int32_t *pos, *seqs; /* [cap] */
    int cap;
};

static enum nb_status seq_run(void *self, const int32_t *tok, int n, float *logits, int *extra)
{
    struct seq_runner *r = self;
    *extra = 0;
    if (n > r->cap) {
        int32_t *p = realloc(r->pos, sizeof *p * (size_t)n);
        if (p) r->pos = p;
        int32_t *q = p ? realloc(r->seqs, sizeof *q * (size_t)n) : NULL;
        if (q) r->seqs = q;
        if (!p || !q) return nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
        r->cap = n;
    }
    int p0 = nb_ctx_seq_len(r->ctx, r->seq);
    for (int i = 0; i < n; i++) {
        r->pos[i] = p0 + i;
        r->seqs[i] = r->seq;
    }
    struct nb_batch b = {.n_tokens = n, .token = tok, .pos = r->pos, .seq = r->seqs};
    return nb_decode(r->ctx, &b, logits); /* NB_ERR_RANGE when full, nothing changed */
}

enum nb_status nb_generate_with(struct nb_ctx *ctx, int seq, const struct nb_gen_runner *runner,
                                struct nb_sampler *sampler, const int32_t *prompt, int n_prompt,
                                int n_predict, int stop_on_eos, nb_token_cb cb, void *user,
                                struct nb_gen_stats *stats)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    struct nb_gen_stats st_local = {0};
    struct nb_gen_stats *S = stats ? stats : &st_local;
    *S = (struct nb_gen_stats){0};
    if (n_prompt <= 0 || !prompt)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: the prompt is empty");
    struct seq_runner def = {.ctx = ctx, .seq = seq};
    struct nb_gen_runner R = runner ? *runner : (struct nb_gen_runner){seq_run, &def};
    enum nb_status st = NB_OK;
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    if (!logits) {
        st = nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    for (int i = 0; i < n_prompt; i++) nb_sampler_accept(sampler, prompt[i]);
    double t0 = nb_time_s();
    int extra;
    if ((st = R.run(R.self, prompt, n_prompt, logits, &extra))) goto done;
    double t1 = nb_time_s();
    S->n_prompt = n_prompt;
    S->t_prompt_s = t1 - t0;
    for (long long i = 0; n_predict < 0 || i < n_predict; i++) {
        int32_t tok = nb_sampler_sample(sampler, logits);
        if (stop_on_eos && tok == info.eos_id) {
            S->stopped_by = NB_STOPPED_EOG;
            break;
        }
        nb_sampler_accept(sampler, tok);
        S->n_gen++;
        if (cb && cb(tok, user)) {
            S->stopped_by = NB_STOPPED_CALLBACK;
            break;
        }
        if (i + 1 == n_predict) break;
        st = R.run(R.self, &tok, 1, logits, &extra);
        if (st == NB_ERR_RANGE) { /* the context is full: the text so far is the answer */
            S->stopped_by = NB_STOPPED_CONTEXT;
            st = NB_OK;
            break;
        }
        if (st) break;
        if (!extra) S->n_decode++;
    }
    S->t_gen_s = nb_time_s() - t1;
done:
    free(def.pos);
    free(def.seqs);
    free(logits);
    return st;
}

enum nb_status nb_generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                           const int32_t *prompt, int n_prompt, int n_predict, int stop_on_eos,
                           nb_token_cb cb, void *user, struct nb_gen_stats *stats)
{
    return nb_generate_with(ctx, seq, NULL, sampler, prompt, n_prompt, n_predict, stop_on_eos,
                            cb, user, stats);
}
