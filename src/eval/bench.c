/* eval/bench.c — pp and tg timing runs (from an empty cache or on top of a filled
 * context, llama-bench's -d), sample statistics, the read bandwidth. */
#include "eval/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/membw.h"
#include "core/timer.h"
#include "runtime/api.h"
#include "nibble_eval.h"

static int32_t rand_token(uint64_t *s, int n_vocab)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((*s >> 33) % (uint64_t)n_vocab);
}

/* n random tokens decoded at positions pos0.. of sequence 0 in one call (so in chunks of
 * the context's batch size), logits for the last one only; *seconds (may be NULL): the
 * decode's wall time, allocation and token drawing left out. */
static enum nb_status decode_random(struct nb_ctx *ctx, int pos0, int n, uint64_t seed,
                                    double *seconds)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    int32_t *tok = malloc(sizeof *tok * (size_t)n);
    int32_t *pos = malloc(sizeof *pos * (size_t)n);
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    enum nb_status st = NB_OK;
    if (!tok || !pos || !logits) {
        st = nb_set_error(NB_ERR_NOMEM, "bench: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        tok[i] = rand_token(&seed, info.n_vocab);
        pos[i] = pos0 + i;
    }
    struct nb_batch b = {.n_tokens = n, .token = tok, .pos = pos};
    uint64_t t0 = nb_time_ns();
    st = nb_decode(ctx, &b, logits);
    if (seconds) *seconds = (double)(nb_time_ns() - t0) * 1e-9;
done:
    free(tok);
    free(pos);
    free(logits);
    return st;
}

/* Sequence 0 cut back to its first n_depth tokens: the filled context a test runs on. */
static enum nb_status keep_depth(struct nb_ctx *ctx, int n_depth)
{
    if (n_depth < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "bench: depth %d is negative", n_depth);
    if (n_depth == 0) {
        nb_ctx_clear_seq(ctx, 0);
        return NB_OK;
    }
    int held = nb_ctx_seq_len(ctx, 0);
    if (held < n_depth)
        return nb_set_error(NB_ERR_INVALID_ARG, "bench: sequence 0 holds %d tokens, fewer than "
                            "the depth %d (nb_bench_fill first)", held, n_depth);
    return nb_ctx_truncate_seq(ctx, 0, n_depth);
}

enum nb_status nb_bench_fill(struct nb_ctx *ctx, int n_depth, uint64_t seed)
{
    if (n_depth < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "bench: depth %d is negative", n_depth);
    nb_ctx_clear_seq(ctx, 0);
    return n_depth ? decode_random(ctx, 0, n_depth, seed, NULL) : NB_OK;
}

enum nb_status nb_bench_pp_at(struct nb_ctx *ctx, int n_depth, int n_prompt, uint64_t seed,
                              double *seconds)
{
    enum nb_status st = keep_depth(ctx, n_depth);
    return st ? st : decode_random(ctx, n_depth, n_prompt, seed, seconds);
}

enum nb_status nb_bench_pp(struct nb_ctx *ctx, int n_prompt, uint64_t seed, double *seconds)
{
    return nb_bench_pp_at(ctx, 0, n_prompt, seed, seconds);
}

enum nb_status nb_bench_tg_at(struct nb_ctx *ctx, int n_depth, int n_gen, uint64_t seed,
                              double *seconds)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    enum nb_status st = keep_depth(ctx, n_depth);
    if (st) return st;
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    if (!logits) return nb_set_error(NB_ERR_NOMEM, "bench: out of memory");
    uint64_t t0 = nb_time_ns();
    for (int i = 0; i < n_gen && st == NB_OK; i++) {
        int32_t tok = rand_token(&seed, info.n_vocab), pos = n_depth + i;
        struct nb_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos};
        st = nb_decode(ctx, &b, logits);
    }
    *seconds = (double)(nb_time_ns() - t0) * 1e-9;
    free(logits);
    return st;
}

enum nb_status nb_bench_tg(struct nb_ctx *ctx, int n_gen, uint64_t seed, double *seconds)
{
    return nb_bench_tg_at(ctx, 0, n_gen, seed, seconds);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The whole struct here; nb_stats_of copies out what the caller's `size` says. */
static void stats_of(const double *x, int n, struct nb_stats *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    if (n <= 0 || !x) return;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s) return;
    memcpy(s, x, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    o->mean = sum / n;
    double v = 0;
    for (int i = 0; i < n; i++) v += (s[i] - o->mean) * (s[i] - o->mean);
    o->stddev = n > 1 ? sqrt(v / (n - 1)) : 0;
    o->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    o->best = s[n - 1];
    o->worst = s[0];
    o->spread_pct = o->best > 0 ? 100.0 * (o->best - o->worst) / o->best : 0;
    free(s);
}

void nb_stats_of(const double *x, int n, struct nb_stats *out)
{
    struct nb_stats s;
    stats_of(x, n, &s);
    nb_api_out(out, &s, sizeof s);
}

double nb_measure_read_bandwidth(int n_threads, size_t bytes, int reps)
{
    return nb_measure_read_bw(n_threads, bytes, reps);
}

enum nb_status nb_bench_interleave(int n_models, int n_tests, int n_passes, nb_bench_run_fn run,
                                   void *user)
{
    for (int p = 0; p < n_passes; p++)
        for (int m = 0; m < n_models; m++)
            for (int t = 0; t < n_tests; t++) {
                enum nb_status st = run(m, t, p, user);
                if (st) return st;
            }
    return NB_OK;
}
