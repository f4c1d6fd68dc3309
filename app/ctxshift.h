/* app/ctxshift.h — generation that goes on when the context is full (llama.cpp's
 * context shift), shared by nibble run and nibble chat.
 *
 * When the next token does not fit the KV cache, the first n_keep tokens of the
 * sequence stay and the oldest half of the rest is dropped: n_discard = (n_past -
 * n_keep) / 2, as llama.cpp counts it. llama.cpp moves the cached keys and rotates them
 * to their new positions; here the cache is truncated to the kept tokens and the newest
 * ones are run again in one prefill, through nibble.h only. That is exact (the cache
 * then holds what a fresh run of the shortened text would), costs one prefill of at most
 * half the context per shift, and does not depend on how the cache is laid out. */
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

/* Sequence 0 of a context as the app runs it. `ids` is every token run into it, in order,
 * never shifted (chat compares a newly rendered conversation against it); the cache holds
 * ids[0 .. min(n, n_keep)) followed by ids[off .. n). */
struct app_seq {
    struct nb_ctx *ctx;
    int n_ctx;   /* the context's length (app_ctx_size) */
    int n_keep;  /* tokens at the start that a shift keeps */
    int shift;   /* 0: never shift (the caller stops when full) */
    int32_t *ids;
    int n, cap;
    int off;     /* >= n_keep: the first token after the kept ones still in the cache */
    int32_t *batch; /* [n_ctx] tokens of a batch */
    int32_t *pos;   /* [n_ctx] their positions */
    /* every shift so far: how many, the tokens dropped and run again, the time taken */
    int n_shifts;
    int64_t n_dropped, n_rerun;
    double t_shift_s;
    char why[256]; /* what app_generate found wrong itself ("": the library's error) */
};

/* Starts empty: sequence 0 of ctx is cleared. NB_ERR_NOMEM when out of memory. */
enum nb_status app_seq_init(struct app_seq *s, struct nb_ctx *ctx, int n_ctx, int n_keep,
                            int shift);
void app_seq_free(struct app_seq *s);
/* Tokens the cache holds (once what was appended has run). */
int app_seq_cached(const struct app_seq *s);
/* The message of the last failure of app_generate or app_seq_rewind: its own, or
 * nb_last_error() when the library failed. */
const char *app_seq_error(const struct app_seq *s);
/* Forget all but the first n of ids (a chat turn re-rendered differently from there on);
 * the cache keeps what it holds of them. n may reach into what a shift dropped. */
enum nb_status app_seq_rewind(struct app_seq *s, int n);

struct app_gen_stats {
    struct nb_gen_stats gen; /* as nb_generate's; t_gen_s leaves out the shifts' prefills */
    int ctx_full;            /* stopped because the context was full (no shift): gen's
                                stopped_by 3 */
    int n_shifts, n_dropped, n_rerun; /* this call's shifts */
    double t_shift_s;
};

/* nb_generate with context shift (nb_generate_with, the shift as its runner): run `prompt` after what the sequence holds (shifting
 * first when it does not fit), then sample up to n_predict tokens (-1: no limit), calling
 * cb for each (non-zero: stop). Stops at the model's end-of-sequence token when
 * stop_on_eos (not passed to cb). When the next token does not fit, s->shift shifts and
 * goes on; otherwise generation stops with st->ctx_full set (the last token passed to cb
 * then is not in the cache, as nb_generate leaves the last of n_predict). NB_ERR_RANGE
 * naming the numbers when the prompt cannot fit beside the kept tokens, or at all
 * without shift. */
enum nb_status app_generate(struct app_seq *s, struct nb_sampler *sampler, const int32_t *prompt,
                            int n_prompt, int n_predict, int stop_on_eos, nb_token_cb cb,
                            void *user, struct app_gen_stats *st);

#endif
