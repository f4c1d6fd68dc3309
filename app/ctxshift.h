/* app/ctxshift.h — generation that goes on when the context is full (llama.cpp's
 * context shift), shared by nibble run and nibble chat.
 *
 * The shift itself is the library's (nb_sequence, runtime/sequence.c): when the next
 * token does not fit the KV cache, the first n_keep tokens of the sequence stay and the
 * oldest half of the rest is dropped: n_discard = (n_past - n_keep) / 2, as llama.cpp
 * counts it. llama.cpp moves the cached keys and rotates them to their new positions;
 * here the cache is truncated to the kept tokens and the newest ones are run again in one
 * prefill. That is exact (the cache then holds what a fresh run of the shortened text
 * would), costs one prefill of at most half the context per shift, and does not depend
 * on how the cache is laid out. This file reads the options and plans n_keep. */
#ifndef NB_APP_CTXSHIFT_H
#define NB_APP_CTXSHIFT_H

#include <stdint.h>

#include "app/args.h"
#include "nibble.h"

/* The options, with llama.cpp's spellings. */
struct app_shift_opts {
    int keep;       /* --keep N: tokens after BOS that a shift keeps; -1: the whole prompt */
    int no_shift;   /* --no-shift, --no-context-shift: stop when the context is full */
    int shift;      /* --context-shift: the default, accepted for llama.cpp's users */
};
#define OPTS_SHIFT(o)                                                                       \
    OPT_INT("--keep", &(o)->keep, -1, 1 << 24),                                             \
        OPT_FLAG("--no-shift|--no-context-shift", &(o)->no_shift),                          \
        OPT_FLAG("--context-shift", &(o)->shift)

/* The context length nb_ctx_init chooses for -c N (0: min(the model's, 4096)), fixed
 * before the context is made so that the app can plan shifts against it. */
int app_ctx_size(const struct nb_model_info *info, int n_ctx_arg);

/* How many tokens a shift keeps, as llama.cpp reads --keep: -1 keeps all of `prompt`
 * (`what` names it in messages: "the prompt"); N >= 0 keeps a BOS that starts it and N
 * more; never more than the prompt. 0 after printing "nibble CMD: ..." when --no-shift
 * and --context-shift are both given, or when what --keep asks for would leave a full
 * context nothing to drop. */
int app_keep_resolve(const char *cmd, const struct app_shift_opts *o, const char *what,
                     const int32_t *prompt, int n_prompt, int bos_id, int n_ctx, int *n_keep);

#endif
