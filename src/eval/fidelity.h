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

/* llama-perplexity's KL-divergence method, so the numbers can stand beside its own: the
 * text cut into consecutive chunks of n_ctx tokens (the first token of each replaced by
 * BOS when bos >= 0, as llama-perplexity does for models that add BOS), both builds run
 * over each chunk from an empty cache, and only the second half scored: the logits at
 * positions i in [n_ctx/2, n_ctx - 1) against token i + 1. */
struct nb_chunk_eval {
    int chunks;
    int64_t n_scored;
    double ppl_ref, ppl_test;
    double mean_kl, median_kl, p99_kl, max_kl; /* KL(ref || test) per scored position */
    double top1_agreement;                     /* llama-perplexity's "same top p" */
};
enum nb_status nb_eval_chunks(struct nb_ctx *ref, struct nb_ctx *test, const int32_t *ids, int n,
                              int n_ctx, int bos, struct nb_chunk_eval *r);

/* log-softmax helpers, in double: KL(p || q) of two logit vectors, and -log p[id]. */
double nb_kl_logits(const float *p_logits, const float *q_logits, int n);
double nb_nll_logits(const float *logits, int n, int32_t id);

#endif
