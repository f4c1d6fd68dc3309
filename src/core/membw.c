/* core/membw.c — measured read bandwidth: threads sum disjoint parts of a large
 * buffer with independent accumulators (so the loads, not the adds, bound it), with
 * and without software prefetch; the best of both counts. (The decode kernels
 * prefetch 6 KiB ahead, which streams faster than the hardware prefetchers alone on
 * the Zen 5 dev VM; a bandwidth measured without it made the kernels look faster than
 * the memory.) The buffer is on huge pages where Linux gives them (nb_huge_alloc), as the
 * weights of a .nib are since 2026-12-06 (core/mmap.h): on 4 KiB pages the same test read
 * 24.2-24.4 GB/s at 2 threads on the model-167 Xeon VM, on 2 MiB pages 37.6-38.6, so a
 * roofline against the 4 KiB figure flattered every kernel. */
#include "core/membw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mmap.h"
#include "core/threadpool.h"
#include "core/timer.h"

#define BW_PF_DIST 6144 /* bytes, as the decode kernels */

struct bw_job {
    const uint64_t *buf;
    size_t n;
    int prefetch;
    uint64_t sink[64];
};

static void bw_worker(void *arg, int ith, int nth)
{
    struct bw_job *j = arg;
    long lo, hi;
    nb_split_range((long)j->n, ith, nth, 64, &lo, &hi);
    uint64_t a[8] = {0};
    if (j->prefetch)
        for (long i = lo; i + 8 <= hi; i += 8) {
            __builtin_prefetch(j->buf + i + BW_PF_DIST / 8);
            for (int k = 0; k < 8; k++) a[k] += j->buf[i + k];
        }
    else
        for (long i = lo; i + 8 <= hi; i += 8)
            for (int k = 0; k < 8; k++) a[k] += j->buf[i + k];
    j->sink[ith & 63] = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

double nb_measure_read_bw(int n_threads, size_t bytes, int reps)
{
    struct nb_pool *pool = NULL;
    void *mem = NULL;
    if (!(mem = nb_huge_alloc(bytes))) return 0;
    memset(mem, 1, bytes); /* fault the pages in */
    if (nb_pool_init(&pool, n_threads, 1) != NB_OK) {
        nb_huge_free(mem, bytes);
        return 0;
    }
    struct bw_job j = {.buf = mem, .n = bytes / 8};
    double best = 0;
    for (int r = 0; r < 2 * reps; r++) {
        j.prefetch = r & 1;
        uint64_t t0 = nb_time_ns();
        nb_pool_run(pool, bw_worker, &j);
        double s = (double)(nb_time_ns() - t0) * 1e-9;
        double gbs = (double)bytes / s * 1e-9;
        if (gbs > best) best = gbs;
    }
    nb_pool_free(pool);
    nb_huge_free(mem, bytes);
    return best;
}
