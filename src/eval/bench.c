/* eval/bench.c — pp and tg timing runs, sample statistics, the read bandwidth. */
#include "eval/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/membw.h"
#include "core/timer.h"
#include "runtime/api.h"

static int32_t rand_token(uint64_t *s, int n_vocab)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((*s >> 33) % (uint64_t)n_vocab);
}

enum nb_status nb_bench_pp(struct nb_ctx *ctx, int n_prompt, uint64_t seed, double *seconds)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    int32_t *tok = malloc(sizeof *tok * (size_t)n_prompt);
    int32_t *pos = malloc(sizeof *pos * (size_t)n_prompt);
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    enum nb_status st = NB_OK;
    if (!tok || !pos || !logits) {
        st = nb_set_error(NB_ERR_NOMEM, "bench: out of memory");
        goto done;
    }
    for (int i = 0; i < n_prompt; i++) {
        tok[i] = rand_token(&seed, info.n_vocab);
        pos[i] = i;
    }
    nb_ctx_clear_seq(ctx, 0);
    struct nb_batch b = {.n_tokens = n_prompt, .token = tok, .pos = pos};
    uint64_t t0 = nb_time_ns();
    st = nb_decode(ctx, &b, logits);
    *seconds = (double)(nb_time_ns() - t0) * 1e-9;
done:
    free(tok);
    free(pos);
    free(logits);
    return st;
}

enum nb_status nb_bench_tg(struct nb_ctx *ctx, int n_gen, uint64_t seed, double *seconds)
{
    struct nb_model_info info;
    nb_model_get_info(nb_ctx_model(ctx), &info);
    float *logits = malloc(sizeof *logits * (size_t)info.n_vocab);
    if (!logits) return nb_set_error(NB_ERR_NOMEM, "bench: out of memory");
    enum nb_status st = NB_OK;
    nb_ctx_clear_seq(ctx, 0);
    uint64_t t0 = nb_time_ns();
    for (int i = 0; i < n_gen && st == NB_OK; i++) {
        int32_t tok = rand_token(&seed, info.n_vocab), pos = i;
        struct nb_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos};
        st = nb_decode(ctx, &b, logits);
    }
    *seconds = (double)(nb_time_ns() - t0) * 1e-9;
    free(logits);
    return st;
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
