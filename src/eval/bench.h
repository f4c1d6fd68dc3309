/* eval/bench.h — timing of prompt processing and generation, as llama-bench runs them:
 * pp: one forward pass over n random prompt tokens from an empty cache;
 * tg: n single-token decode steps from an empty cache. */
#ifndef NB_EVAL_BENCH_H
#define NB_EVAL_BENCH_H

#include <stdint.h>

#include "nibble.h"

/* Seconds for one pp run of n_prompt tokens (sequence 0 is cleared first). */
enum nb_status nb_bench_pp(struct nb_ctx *ctx, int n_prompt, uint64_t seed, double *seconds);
/* Seconds for n_gen decode steps from an empty cache. */
enum nb_status nb_bench_tg(struct nb_ctx *ctx, int n_gen, uint64_t seed, double *seconds);

struct nb_stats {
    double mean, stddev, median, best, worst, spread_pct; /* spread: (best-worst)/best */
};
/* Statistics of n samples (tok/s: higher is better). */
void nb_stats_of(const double *x, int n, struct nb_stats *out);



/* Run every (model, test) once per pass, passes one after another: A B C A B C ...
 * so that drift in the machine's speed hits every model alike. */
typedef enum nb_status (*nb_bench_run_fn)(int model, int test, int pass, void *user);
enum nb_status nb_bench_interleave(int n_models, int n_tests, int n_passes, nb_bench_run_fn run,
                                   void *user);
#endif
