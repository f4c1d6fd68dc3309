/* eval/fidelity.c — reference vs test build of one model. */
#include "eval/fidelity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/api.h"
#include "nibble_eval.h"

static double log_sum_exp(const float *x, int n, double *mx_out)
{
    double mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    *mx_out = mx;
    return mx + log(s);
}

double nb_kl_logits(const float *p, const float *q, int n)
{
    double mp, mq;
    double lp = log_sum_exp(p, n, &mp), lq = log_sum_exp(q, n, &mq);
    double kl = 0;
    for (int i = 0; i < n; i++) {
        double a = (double)p[i] - lp, b = (double)q[i] - lq;
        kl += exp(a) * (a - b);
    }
    return kl > 0 ? kl : 0;
}

double nb_nll_logits(const float *logits, int n, int32_t id)
{
    double mx;
    return log_sum_exp(logits, n, &mx) - (double)logits[id];
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Greedy continuation of n_gen tokens. */
static enum nb_status greedy(struct nb_ctx *c, const int32_t *prompt, int n, int n_gen, int32_t *out,
                             float *logits, int V)
{
    int32_t *pos = malloc(sizeof *pos * (size_t)n);
    if (!pos) return nb_set_error(NB_ERR_NOMEM, "eval: out of memory");
    for (int i = 0; i < n; i++) pos[i] = i;
    nb_ctx_clear_seq(c, 0);
    struct nb_batch b = {.n_tokens = n, .token = prompt, .pos = pos};
    enum nb_status st = nb_decode(c, &b, logits);
    free(pos);
    for (int i = 0; i < n_gen && st == NB_OK; i++) {
        out[i] = argmax(logits, V);
        if (i + 1 == n_gen) break;
        int32_t p = n + i;
        struct nb_batch one = {.n_tokens = 1, .token = &out[i], .pos = &p};
        st = nb_decode(c, &one, logits);
    }
    return st;
}

/* Logits at every position of seq[0..n) that predicts a token of seq[from..n). */
static enum nb_status forced(struct nb_ctx *c, const int32_t *seq, int n, int from, float *logits)
{
    int32_t *pos = malloc(sizeof *pos * (size_t)n);
    uint8_t *want = calloc((size_t)n, 1);
    if (!pos || !want) {
        free(pos);
        free(want);
        return nb_set_error(NB_ERR_NOMEM, "eval: out of memory");
    }
    for (int i = 0; i < n; i++) {
        pos[i] = i;
        want[i] = i >= from - 1 && i < n - 1;
    }
    nb_ctx_clear_seq(c, 0);
    struct nb_batch b = {.n_tokens = n, .token = seq, .pos = pos, .want_logits = want};
    enum nb_status st = nb_decode(c, &b, logits);
    free(pos);
    free(want);
    return st;
}

/* *V: the vocabulary both builds share; NB_ERR_INVALID_ARG when they differ. */
static enum nb_status same_vocab(struct nb_ctx *ref, struct nb_ctx *test, int *V)
{
    struct nb_model_info ri, ti;
    nb_model_get_info(nb_ctx_model(ref), &ri);
    nb_model_get_info(nb_ctx_model(test), &ti);
    *V = ri.n_vocab;
    if (ri.n_vocab != ti.n_vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "eval: the models' vocabularies differ (%d vs %d)",
                            ri.n_vocab, ti.n_vocab);
    return NB_OK;
}

/* The comparisons fill the library's whole struct; the public calls copy out as much of
 * it as the caller's `size` says (nibble.h, versioned structs). */
static enum nb_status eval_fidelity(struct nb_ctx *ref, struct nb_ctx *test,
                                    int32_t *const *prompts, const int *lens, int n_prompts,
                                    int n_gen, struct nb_fidelity *r, int *first_div,
                                    float *ref_gap)
{
    int V;
    memset(r, 0, sizeof *r);
    enum nb_status vst = same_vocab(ref, test, &V);
    if (vst) return vst;
    int max_len = 0;
    for (int p = 0; p < n_prompts; p++) max_len = lens[p] > max_len ? lens[p] : max_len;
    enum nb_status st = NB_OK;
    int32_t *g_ref = malloc(sizeof(int32_t) * (size_t)(n_gen + 1));
    int32_t *g_test = malloc(sizeof(int32_t) * (size_t)(n_gen + 1));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(max_len + n_gen));
    float *la = malloc(sizeof(float) * (size_t)V * (size_t)(n_gen + 1));
    float *lb = malloc(sizeof(float) * (size_t)V * (size_t)(n_gen + 1));
    if (!g_ref || !g_test || !seq || !la || !lb) {
        st = nb_set_error(NB_ERR_NOMEM, "eval: out of memory");
        goto done;
    }
    double sum_div = 0, sum_kl = 0;
    int64_t agree = 0;
    for (int p = 0; p < n_prompts && st == NB_OK; p++) {
        int n = lens[p];
        if ((st = greedy(ref, prompts[p], n, n_gen, g_ref, la, V)) ||
            (st = greedy(test, prompts[p], n, n_gen, g_test, lb, V)))
            break;
        int d = 0;
        while (d < n_gen && g_ref[d] == g_test[d]) d++;
        r->reproduced += d == n_gen;
        sum_div += d;
        memcpy(seq, prompts[p], sizeof(int32_t) * (size_t)n);
        memcpy(seq + n, g_ref, sizeof(int32_t) * (size_t)n_gen);
        if ((st = forced(ref, seq, n + n_gen, n, la)) || (st = forced(test, seq, n + n_gen, n, lb)))
            break;
        for (int i = 0; i < n_gen; i++) {
            const float *a = la + (size_t)i * V, *b = lb + (size_t)i * V;
            agree += argmax(a, V) == argmax(b, V);
            sum_kl += nb_kl_logits(a, b, V);
        }
        if (first_div) first_div[p] = d;
        if (ref_gap) /* logits differ from log-probabilities by one constant a position */
            ref_gap[p] = d < n_gen ? la[(size_t)d * V + g_ref[d]] - la[(size_t)d * V + g_test[d]]
                                   : NAN;
        r->n_tokens += n_gen;
        r->prompts++;
    }
    if (r->prompts) {
        r->mean_first_divergence = sum_div / r->prompts;
        r->top1_agreement = r->n_tokens ? (double)agree / (double)r->n_tokens : 0;
        r->mean_kl = r->n_tokens ? sum_kl / (double)r->n_tokens : 0;
    }
done:
    free(g_ref);
    free(g_test);
    free(seq);
    free(la);
    free(lb);
    return st;
}

enum nb_status nb_eval_ppl(struct nb_ctx *ctx, const int32_t *ids, int n, int window, double *ppl)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    int V = info.n_vocab;
    if (window < 2 || n < 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "eval: perplexity needs at least 2 tokens");
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)window);
    if (!logits) return nb_set_error(NB_ERR_NOMEM, "eval: out of memory");
    double nll = 0;
    int64_t count = 0;
    enum nb_status st = NB_OK;
    for (int s = 0; s + 1 < n && st == NB_OK; s += window) {
        int len = n - s < window ? n - s : window;
        if (len < 2) break;
        if ((st = forced(ctx, ids + s, len, 1, logits))) break;
        for (int i = 0; i + 1 < len; i++) nll += nb_nll_logits(logits + (size_t)i * V, V, ids[s + i + 1]);
        count += len - 1;
    }
    free(logits);
    if (st == NB_OK) *ppl = exp(nll / (double)count);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static enum nb_status eval_chunks(struct nb_ctx *ref, struct nb_ctx *test, const int32_t *ids,
                                  int n, int n_ctx, int bos, struct nb_chunk_eval *r)
{
    int V;
    memset(r, 0, sizeof *r);
    enum nb_status vst = same_vocab(ref, test, &V);
    if (vst) return vst;
    if (n_ctx < 4 || n < n_ctx)
        return nb_set_error(NB_ERR_INVALID_ARG, "eval: --ppl-chunks needs a text of at least one "
                            "chunk (%d tokens; it has %d)", n_ctx, n);
    int first = n_ctx / 2, per = n_ctx - 1 - first, chunks = n / n_ctx;
    float *la = malloc(sizeof(float) * (size_t)V * (size_t)per);
    float *lb = malloc(sizeof(float) * (size_t)V * (size_t)per);
    int32_t *chunk = malloc(sizeof(int32_t) * (size_t)n_ctx);
    double *kls = malloc(sizeof(double) * (size_t)chunks * (size_t)per);
    enum nb_status st = NB_OK;
    if (!la || !lb || !chunk || !kls) {
        st = nb_set_error(NB_ERR_NOMEM, "eval: out of memory");
        goto done;
    }
    double nll_a = 0, nll_b = 0;
    int64_t agree = 0, k = 0;
    for (int c = 0; c < chunks && st == NB_OK; c++) {
        memcpy(chunk, ids + (int64_t)c * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (bos >= 0) chunk[0] = bos;
        if ((st = forced(ref, chunk, n_ctx, first + 1, la)) ||
            (st = forced(test, chunk, n_ctx, first + 1, lb)))
            break;
        for (int i = 0; i < per; i++) {
            const float *a = la + (size_t)i * V, *b = lb + (size_t)i * V;
            int32_t next = chunk[first + i + 1];
            nll_a += nb_nll_logits(a, V, next);
            nll_b += nb_nll_logits(b, V, next);
            agree += argmax(a, V) == argmax(b, V);
            kls[k++] = nb_kl_logits(a, b, V);
        }
        r->chunks++;
    }
    if (st == NB_OK && k > 0) {
        double sum = 0;
        for (int64_t i = 0; i < k; i++) sum += kls[i];
        qsort(kls, (size_t)k, sizeof *kls, cmp_double);
        r->n_scored = k;
        r->mean_kl = sum / (double)k;
        r->median_kl = kls[k / 2];
        r->p99_kl = kls[(int64_t)(0.99 * (double)(k - 1))];
        r->max_kl = kls[k - 1];
        r->ppl_ref = exp(nll_a / (double)k);
        r->ppl_test = exp(nll_b / (double)k);
        r->top1_agreement = (double)agree / (double)k;
    }
done:
    free(la), free(lb), free(chunk), free(kls);
    return st;
}

enum nb_status nb_eval_fidelity_cases(struct nb_ctx *ref, struct nb_ctx *test,
                                      int32_t *const *prompts, const int *lens, int n_prompts,
                                      int n_gen, struct nb_fidelity *r, int *first_div,
                                      float *ref_gap)
{
    struct nb_fidelity f;
    if (!ref || !test || !r || (n_prompts > 0 && (!prompts || !lens)))
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_eval_fidelity: %s",
                            !ref || !test ? "a context is NULL"
                            : !r          ? "the result is NULL"
                                          : "the prompts or their lengths are NULL");
    enum nb_status st =
        eval_fidelity(ref, test, prompts, lens, n_prompts, n_gen, &f, first_div, ref_gap);
    f.size = sizeof f;
    nb_api_out(r, &f, sizeof f);
    return st;
}

enum nb_status nb_eval_fidelity(struct nb_ctx *ref, struct nb_ctx *test, int32_t *const *prompts,
                                const int *lens, int n_prompts, int n_gen, struct nb_fidelity *r)
{
    return nb_eval_fidelity_cases(ref, test, prompts, lens, n_prompts, n_gen, r, NULL, NULL);
}

enum nb_status nb_eval_chunks(struct nb_ctx *ref, struct nb_ctx *test, const int32_t *ids, int n,
                              int n_ctx, int bos, struct nb_chunk_eval *r)
{
    struct nb_chunk_eval c;
    if (!ref || !test || (!ids && n > 0) || !r)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_eval_chunks: %s",
                            !ref || !test ? "a context is NULL"
                            : !ids        ? "the text's ids are NULL"
                                          : "the result is NULL");
    enum nb_status st = eval_chunks(ref, test, ids, n, n_ctx, bos, &c);
    c.size = sizeof c;
    nb_api_out(r, &c, sizeof c);
    return st;
}
