/* runtime/lookup.c — prompt-lookup speculative decoding: drafts copied from the text
 * so far (no draft model), verified in one batched step.
 *
 * A step feeds [last token, d1 .. dk] at positions P .. P+k and gets k+1 rows of logits;
 * row i is what follows the token at P+i. The sampler draws from row 0; while the draw
 * equals the next draft, that draft was the right token to have fed, so row i+1 is valid
 * and the sampler draws from it too. The first draw that differs is kept (it is the
 * token the model chose) and the cache is cut back to P+i+1, so the drafts after it
 * never happened. Every emitted token is one draw from the logits nb_generate would
 * have given it, in the same order: the output does not depend on the drafts. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timer.h"
#include "nibble.h"

#define LOOKUP_NGRAM_MIN 2
#define LOOKUP_NGRAM_MAX 4
#define LOOKUP_MAX_DRAFT 64

int nb_lookup_draft(const int32_t *hist, int n, int ngram_min, int ngram_max, int max_draft,
                    int32_t *draft)
{
    if (!hist || !draft || max_draft <= 0 || ngram_min < 1) return 0;
    for (int g = ngram_max; g >= ngram_min; g--) {
        if (g >= n) continue;
        const int32_t *suf = hist + n - g;
        /* the latest earlier occurrence: start at n - g - 1 and walk back */
        for (int i = n - g - 1; i >= 0; i--) {
            if (hist[i] != suf[0] || memcmp(hist + i, suf, sizeof *suf * (size_t)g) != 0)
                continue;
            int k = 0;
            while (k < max_draft && i + g + k < n) {
                draft[k] = hist[i + g + k];
                k++;
            }
            if (k > 0) return k;
        }
    }
    return 0;
}

enum nb_status nb_generate_lookup(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                                  const int32_t *prompt, int n_prompt, int n_predict,
                                  int stop_on_eos, int max_draft, nb_token_cb cb, void *user,
                                  struct nb_gen_stats *stats)
{
    if (max_draft <= 0)
        return nb_generate(ctx, seq, sampler, prompt, n_prompt, n_predict, stop_on_eos, cb, user,
                           stats);
    if (max_draft > LOOKUP_MAX_DRAFT) max_draft = LOOKUP_MAX_DRAFT;
    struct nb_gen_stats st_local = {0};
    struct nb_gen_stats *S = stats ? stats : &st_local;
    *S = (struct nb_gen_stats){0};
    if (n_prompt <= 0 || !prompt)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: the prompt is empty");
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    int V = info.n_vocab, K = max_draft + 1;
    enum nb_status st = NB_OK;
    int cap = n_prompt + 256, n_hist = 0;
    int32_t *hist = malloc(sizeof *hist * (size_t)cap);
    float *logits = malloc(sizeof *logits * (size_t)V * (size_t)K);
    int32_t *tok = malloc(sizeof *tok * (size_t)K * 3);
    uint8_t *want = malloc((size_t)K);
    if (!hist || !logits || !tok || !want) {
        st = nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    int32_t *pos = tok + K, *seqs = tok + 2 * K;
    memcpy(hist, prompt, sizeof *hist * (size_t)n_prompt);
    n_hist = n_prompt;
    for (int i = 0; i < n_prompt; i++) nb_sampler_accept(sampler, prompt[i]);

    double t0 = nb_time_s();
    int p0 = nb_ctx_seq_len(ctx, seq);
    { /* the prompt, as nb_generate runs it */
        int32_t *pp = malloc(sizeof *pp * (size_t)n_prompt * 2);
        if (!pp) {
            st = nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
            goto done;
        }
        for (int i = 0; i < n_prompt; i++) {
            pp[i] = p0 + i;
            pp[n_prompt + i] = seq;
        }
        struct nb_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pp, .seq = pp + n_prompt};
        st = nb_decode(ctx, &b, logits);
        free(pp);
        if (st) goto done;
    }
    double t1 = nb_time_s();
    S->n_prompt = n_prompt;
    S->t_prompt_s = t1 - t0;

    int k = 0; /* drafts fed after the token whose logits are row 0 */
    for (long long n_out = 0;;) {
        int P = nb_ctx_seq_len(ctx, seq) - k - 1; /* position of row 0's token */
        int i = 0, stop = 0;
        int32_t y = -1;
        for (; i <= k; i++) { /* draws while they agree with the drafts */
            y = nb_sampler_sample(sampler, logits + (size_t)i * (size_t)V);
            if (stop_on_eos && y == info.eos_id) {
                S->stopped_by = NB_STOPPED_EOG;
                stop = 1;
                break;
            }
            nb_sampler_accept(sampler, y);
            S->n_gen++;
            n_out++;
            if (n_hist == cap) {
                int32_t *h = realloc(hist, sizeof *h * (size_t)cap * 2);
                if (!h) {
                    st = nb_set_error(NB_ERR_NOMEM, "generate: out of memory");
                    goto done;
                }
                hist = h;
                cap *= 2;
            }
            hist[n_hist++] = y;
            if (cb && cb(y, user)) {
                S->stopped_by = NB_STOPPED_CALLBACK;
                stop = 1;
                break;
            }
            if (n_predict >= 0 && n_out == n_predict) {
                stop = 1;
                break;
            }
            if (i == k || y != tok[i + 1]) break; /* y is not in the cache */
            S->n_accepted++;
        }
        /* the cache keeps row i's token and what came before: P + i + 1 positions */
        if (nb_ctx_seq_len(ctx, seq) > P + i + 1 &&
            (st = nb_ctx_truncate_seq(ctx, seq, P + i + 1)))
            goto done;
        if (stop) break;
        /* the next step: y, then drafts copied from the text so far */
        tok[0] = y;
        k = nb_lookup_draft(hist, n_hist, LOOKUP_NGRAM_MIN, LOOKUP_NGRAM_MAX, max_draft, tok + 1);
        if (n_predict >= 0 && k > n_predict - n_out - 1) k = (int)(n_predict - n_out - 1);
        if (k < 0) k = 0;
        int Q = P + i + 1;
        for (;;) {
            for (int j = 0; j <= k; j++) {
                pos[j] = Q + j;
                seqs[j] = seq;
                want[j] = 1;
            }
            struct nb_batch b = {.n_tokens = k + 1, .token = tok, .pos = pos, .seq = seqs,
                                 .want_logits = want};
            st = nb_decode_verify(ctx, &b, logits);
            if (st == NB_ERR_RANGE && k > 0) { /* the drafts do not fit: try without */
                k = 0;
                continue;
            }
            break;
        }
        if (st == NB_ERR_RANGE) { /* the context is full: the text so far is the answer */
            S->stopped_by = NB_STOPPED_CONTEXT;
            st = NB_OK;
            break;
        }
        if (st) goto done;
        S->n_decode++;
        S->n_drafted += k;
    }
    S->t_gen_s = nb_time_s() - t1;
done:
    free(hist);
    free(logits);
    free(tok);
    free(want);
    return st;
}
