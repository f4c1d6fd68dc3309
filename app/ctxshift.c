/* app/ctxshift.c — the context-shift options of run and chat (ctxshift.h). */
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
