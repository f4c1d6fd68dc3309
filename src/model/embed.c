/* model/embed.c — nb_embed: a sequence's last hidden states (the final norm's output,
 * forward.c's rows with embed_rows set instead of the head's logits) pooled into one
 * vector and L2-normalized. The tokens run through nb_decode chunk by chunk, so the
 * checks, the KV blocks and the threads are decode's own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"

int nb_pooling_parse(const char *name)
{
    static const char *const names[] = {"mean", "last", "cls"};
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

/* Does pooling read the row of token t of n? */
static int wanted(enum nb_pooling pooling, int t, int n)
{
    return pooling == NB_POOLING_MEAN || (pooling == NB_POOLING_LAST && t == n - 1) ||
           (pooling == NB_POOLING_CLS && t == 0);
}

static enum nb_status check_args(struct nb_ctx *c, int seq, const int32_t *tok, int n,
                                 enum nb_pooling pooling, const float *out)
{
    if (!c || !tok || !out) return nb_set_error(NB_ERR_INVALID_ARG, "embed: NULL argument");
    if (seq < 0 || seq >= c->n_seq)
        return nb_set_error(NB_ERR_INVALID_ARG, "embed: sequence %d is not in 0..%d", seq,
                            c->n_seq - 1);
    if ((int)pooling < NB_POOLING_MEAN || (int)pooling > NB_POOLING_CLS)
        return nb_set_error(NB_ERR_INVALID_ARG, "embed: unknown pooling %d", (int)pooling);
    if (n <= 0) return nb_set_error(NB_ERR_INVALID_ARG, "embed: %d tokens: at least one is needed", n);
    if (n > c->n_ctx)
        return nb_set_error(NB_ERR_RANGE, "embed: %d tokens: the context holds %d", n, c->n_ctx);
    return NB_OK;
}

enum nb_status nb_embed_pooled(struct nb_ctx *c, int seq, const int32_t *tok, int n,
                               enum nb_pooling pooling, float *out)
{
    enum nb_status st = check_args(c, seq, tok, n, pooling, out);
    if (st) return st;
    int64_t E = c->model->cfg.n_embd;
    int nb = c->n_batch;
    /* causal attention: the first token's state depends on it alone */
    int n_run = pooling == NB_POOLING_CLS ? 1 : n;
    int32_t *pos = malloc(sizeof *pos * 2 * (size_t)nb);
    uint8_t *want = malloc((size_t)nb);
    float *rows = malloc(sizeof *rows * (size_t)(nb * E));
    double *acc = calloc((size_t)E, sizeof *acc);
    if (!pos || !want || !rows || !acc) {
        st = nb_set_error(NB_ERR_NOMEM, "embed: out of memory");
        goto done;
    }
    int32_t *sq = pos + nb;
    nb_ctx_clear_seq(c, seq);
    for (int i0 = 0; i0 < n_run && !st; i0 += nb) {
        int m = n_run - i0 < nb ? n_run - i0 : nb, n_want = 0;
        for (int t = 0; t < m; t++) {
            pos[t] = i0 + t;
            sq[t] = seq;
            want[t] = (uint8_t)wanted(pooling, i0 + t, n);
            n_want += want[t];
        }
        struct nb_batch b = {.n_tokens = m, .token = tok + i0, .pos = pos, .seq = sq,
                             .want_logits = want};
        c->embed_rows = 1;
        st = nb_decode(c, &b, rows);
        c->embed_rows = 0;
        for (int k = 0; k < n_want && !st; k++)
            for (int64_t i = 0; i < E; i++) acc[i] += rows[k * E + i];
    }
    nb_ctx_clear_seq(c, seq);
    double scale = pooling == NB_POOLING_MEAN ? 1.0 / n : 1.0;
    for (int64_t i = 0; i < E && !st; i++) out[i] = (float)(acc[i] * scale);
done:
    free(pos);
    free(want);
    free(rows);
    free(acc);
    return st;
}

enum nb_status nb_embed(struct nb_ctx *c, int seq, const int32_t *tok, int n,
                        enum nb_pooling pooling, float *out)
{
    enum nb_status st = nb_embed_pooled(c, seq, tok, n, pooling, out);
    if (st) return st;
    int64_t E = c->model->cfg.n_embd;
    double ss = 0;
    for (int64_t i = 0; i < E; i++) ss += (double)out[i] * out[i];
    if (ss > 0) {
        float inv = (float)(1.0 / sqrt(ss));
        for (int64_t i = 0; i < E; i++) out[i] *= inv;
    }
    return NB_OK;
}
