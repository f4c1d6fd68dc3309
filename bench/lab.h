/* bench/lab.h — what the kernel labs (bench_kernels, bench_attn) share: the best and
 * worst time of a kernel over interleaved passes. */
#ifndef NB_BENCH_LAB_H
#define NB_BENCH_LAB_H

struct result {
    double best, worst;
};

/* Fold one pass's time into r (best 0: no pass yet). */
static inline void upd(struct result *r, double t)
{
    if (r->best == 0 || t < r->best) r->best = t;
    if (t > r->worst) r->worst = t;
}

#endif
