/* eval/fidelity.h — how far a test build of a model strays from a reference build:
 * greedy reproductions, teacher-forced top-1 agreement and KL, perplexity. */
#ifndef NB_EVAL_FIDELITY_H
#define NB_EVAL_FIDELITY_H

#include <stdint.h>

#include "nibble.h"

struct nb_fidelity {
    int prompts;
    int reproduced;               /* greedy continuations identical over all n_gen tokens */
    double mean_first_divergence; /* index of the first differing token (n_gen if none) */
    double top1_agreement;        /* teacher-forced on the reference continuation */
    double mean_kl;               /* mean KL(ref || test) per token, nats */
    int64_t n_tokens;             /* teacher-forced positions compared */
};

/* Both contexts need n_ctx >= longest prompt + n_gen and use sequence 0. */
enum nb_status nb_eval_fidelity(struct nb_ctx *ref, struct nb_ctx *test, int32_t *const *prompts,
                                const int *lens, int n_prompts, int n_gen, struct nb_fidelity *r);

/* Perplexity over `ids` in consecutive windows of at most `window` tokens (each
 * window from an empty cache; every token after a window's first is scored). */
enum nb_status nb_eval_ppl(struct nb_ctx *ctx, const int32_t *ids, int n, int window, double *ppl);

/* log-softmax helpers, in double: KL(p || q) of two logit vectors, and -log p[id]. */
double nb_kl_logits(const float *p_logits, const float *q_logits, int n);
double nb_nll_logits(const float *logits, int n, int32_t id);

#endif
