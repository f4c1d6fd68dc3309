/* eval/fidelity.h — how far a test build of a model strays from a reference build. The
 * comparisons themselves (nb_eval_fidelity, nb_eval_ppl, nb_eval_chunks and their result
 * structs) are public, in nibble.h; here are the log-softmax helpers they share. */
#ifndef NB_EVAL_FIDELITY_H
#define NB_EVAL_FIDELITY_H

#include <stdint.h>

#include "nibble.h"
#include "nibble_eval.h"

/* log-softmax helpers, in double: KL(p || q) of two logit vectors, and -log p[id]. */
double nb_kl_logits(const float *p_logits, const float *q_logits, int n);
double nb_nll_logits(const float *logits, int n, int32_t id);

#endif
