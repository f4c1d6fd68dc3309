/* core/threadpool.h — a persistent pool of worker threads.
 *
 * nb_pool_run() calls fn(ctx, ith, nth) once for each ith in [0, nth) — the caller
 * runs ith = 0 itself — and returns when all calls are done. Workers spin briefly
 * after each job (a decode step issues hundreds of jobs back to back) and then sleep
 * on a condition variable, so an idle pool costs no CPU.
 */
#ifndef NB_CORE_THREADPOOL_H
#define NB_CORE_THREADPOOL_H

#include "core/error.h"

struct nb_pool;
typedef void (*nb_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0: number of online cores. pin: bind thread i to core i. */
enum nb_status nb_pool_init(struct nb_pool **out, int n_threads, int pin);
void nb_pool_free(struct nb_pool *pool);
int nb_pool_size(const struct nb_pool *pool);
/* Run on all threads of the pool. */
void nb_pool_run(struct nb_pool *pool, nb_pool_fn fn, void *ctx);
/* Run on the first `nth` threads only (1: on the caller alone, no fan-out). */
void nb_pool_run_n(struct nb_pool *pool, nb_pool_fn fn, void *ctx, int nth);
/* Number of online cores. */
int nb_cpu_count(void);

/* Split [0, n) into nth contiguous parts, the part of thread ith, rounded to
 * multiples of `align` (except the last). */
static inline void nb_split_range(long n, int ith, int nth, long align, long *lo, long *hi)
{
    long blocks = (n + align - 1) / align;
    long per = blocks / nth, rem = blocks % nth;
    long b0 = ith * per + (ith < rem ? ith : rem);
    long b1 = b0 + per + (ith < rem ? 1 : 0);
    *lo = b0 * align;
    *hi = b1 * align;
    if (*lo > n) *lo = n;
    if (*hi > n) *hi = n;
}

#endif
