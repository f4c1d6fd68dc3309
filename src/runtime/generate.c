/* runtime/generate.c — prompt in, tokens out: one prefill pass over the prompt,
 * then one decode step per generated token. */
#include <stdlib.h>

#include "core/error.h"
#include "core/timer.h"
#include "nibble.h"

enum nb_status nb_generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                           const int32_t *prompt, int n_prompt, int n_predict, int stop_on_eos,
                           nb_token_cb cb, void *user, struct nb_gen_stats *stats)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    struct nb_gen_stats st_local = {0};
    struct nb_gen_stats *S = stats ? stats : &st_local;
    *S = (struct nb_gen_stats){0};
    if (n_prompt <= 0) return nb_set_error(NB_ERR_INVALID_ARG, "generate: the prompt is empty");
    enum nb_status st = NB_OK;
    int32_t *pos = malloc(sizeof *pos * (size_t)n_prompt);
    int32_t *seqs = malloc(sizeof *seqs * (size_t)n_prompt);
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    if (!pos || !seqs || !logits) {
        st = nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    int p0 = nb_ctx_seq_len(ctx, seq);
    for (int i = 0; i < n_prompt; i++) {
        pos[i] = p0 + i;
        seqs[i] = seq;
        nb_sampler_accept(sampler, prompt[i]);
    }
    double t0 = nb_time_s();
    struct nb_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pos, .seq = seqs};
    if ((st = nb_decode(ctx, &b, logits))) goto done;
    double t1 = nb_time_s();
    S->n_prompt = n_prompt;
    S->t_prompt_s = t1 - t0;
    for (int i = 0; i < n_predict; i++) {
        int32_t tok = nb_sampler_sample(sampler, logits);
        if (stop_on_eos && tok == info.eos_id) {
            S->stopped_by = 1;
            break;
        }
        nb_sampler_accept(sampler, tok);
        S->n_gen++;
        if (cb && cb(tok, user)) {
            S->stopped_by = 2;
            break;
        }
        if (i + 1 == n_predict) break;
        int32_t p = nb_ctx_seq_len(ctx, seq);
        struct nb_batch one = {.n_tokens = 1, .token = &tok, .pos = &p, .seq = &seq};
        if ((st = nb_decode(ctx, &one, logits))) break;
        S->n_decode++;
    }
    S->t_gen_s = nb_time_s() - t1;
done:
    free(pos);
    free(seqs);
    free(logits);
    return st;
}
