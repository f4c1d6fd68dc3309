/* runtime/sequence.h — a sequence's step, driven from outside (the server's continuous
 * batching): several sequences of one context put their tokens into one shared batch,
 * the caller decodes it and draws each sequence's tokens from its rows with its own
 * sampler (constrained, with logprobs), and each sequence then keeps in its cache what
 * was right. nb_sequence_generate (nibble.h) is the same step for one sequence that also
 * decodes and draws: both cut the cache back by the same rule (nb_sequence_settle).
 *
 * A step, per sequence:
 *   nb_sequence_put     its tokens the cache lacks (a prompt chunk, or the last token
 *                       and prompt-lookup drafts) into the batch;
 *   (the caller decodes; on success:)
 *   nb_sequence_ran     they are in the cache;
 *   nb_sequence_take    each token drawn from its rows, in order (a draft's row only
 *                       while every draw before it equalled its draft);
 *   nb_sequence_settle  the cache cut back to the view without the drafts not taken.
 * These sequences never shift (the server's context is a hard limit). */
#ifndef NB_RUNTIME_SEQUENCE_H
#define NB_RUNTIME_SEQUENCE_H

#include <stdint.h>

#include "nibble.h"

/* The batch a step fills: room for cap tokens, n so far. */
struct nb_seq_batch {
    int32_t *tok, *pos, *seq;
    uint8_t *want;
    int n, cap;
};

/* Append m tokens to run (a prompt): they wait for nb_sequence_put. */
enum nb_status nb_sequence_append(struct nb_sequence *s, const int32_t *t, int m);
/* Room for n tokens in all: appends and draws up to that never allocate. NB_ERR_NOMEM. */
enum nb_status nb_sequence_reserve(struct nb_sequence *s, int n);
/* Sequence s becomes the first n cached tokens of src (another sequence of the same
 * context), sharing its KV blocks (nb_ctx_fork_seq). On a failure s is empty. */
enum nb_status nb_sequence_adopt(struct nb_sequence *s, const struct nb_sequence *src, int n);
/* Put up to max_new of the tokens the cache lacks into b, then, when that is all of them,
 * up to max_draft prompt-lookup drafts copied from the sequence's own text (none past its
 * n_ctx). Returns the logits rows the step asks for: 0 when the chunk leaves tokens for a
 * later step, else 1 (the last token's) + the drafts. */
int nb_sequence_put(struct nb_sequence *s, struct nb_seq_batch *b, int max_new, int max_draft);
/* The step's draft i (i < the drafts put). */
int32_t nb_sequence_draft(const struct nb_sequence *s, int i);
/* The batch with the tokens put ran. */
void nb_sequence_ran(struct nb_sequence *s);
/* A token drawn from the step's rows, in order: row i only while the draws from rows
 * 0 .. i-1 equalled drafts 0 .. i-1. append 0: a draw that ends the output (an
 * end-of-generation token), not part of the text. NB_ERR_NOMEM. */
enum nb_status nb_sequence_take(struct nb_sequence *s, int32_t y, int append);
/* After the draws: the drafts every draw but the last confirmed stay in the cache, the
 * rest are dropped; the last token drawn is not in the cache (the next step runs it)
 * unless it ended the output. *accepted (may be NULL): the drafts confirmed. */
enum nb_status nb_sequence_settle(struct nb_sequence *s, int *accepted);

#endif
