/* core/threadpool.c — persistent workers: spin, then sleep. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

#define NB_SPIN_ITERS 20000

struct worker {
    struct nb_pool *pool;
    pthread_t thread;
    int ith;
};

struct nb_pool {
    int n_threads;
    struct worker *workers; /* n_threads - 1 of them: thread 0 is the caller */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint generation; /* bumped for each job */
    atomic_int pending;     /* workers still running the current job */
    atomic_int stop;
    int n_sleeping;         /* guarded by mu */

    nb_pool_fn fn;
    void *ctx;
    int nth;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int nb_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void pin_to_core(pthread_t t, int core)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core % nb_cpu_count(), &set);
    if (pthread_setaffinity_np(t, sizeof set, &set) != 0)
        NB_LOGD("threadpool: could not pin a thread to core %d", core);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct nb_pool *p = w->pool;
    unsigned seen = 0; /* the generation at pool creation: a job may be posted before
                          this thread first runs, and must not be missed */
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < NB_SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            p->n_sleeping++;
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            p->n_sleeping--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = gen;
        if (w->ith < p->nth) p->fn(p->ctx, w->ith, p->nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

enum nb_status nb_pool_init(struct nb_pool **out, int n_threads, int pin)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = nb_cpu_count();
    if (n_threads > 1024)
        return nb_set_error(NB_ERR_INVALID_ARG, "threadpool: %d threads is too many", n_threads);
    struct nb_pool *p = calloc(1, sizeof *p);
    if (!p) return nb_set_error(NB_ERR_NOMEM, "threadpool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            nb_pool_free(p);
            return nb_set_error(NB_ERR_NOMEM, "threadpool: out of memory");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker *w = &p->workers[i - 1];
        w->pool = p;
        w->ith = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            p->n_threads = i; /* only the ones that started get joined */
            nb_pool_free(p);
            return nb_set_error(NB_ERR_INTERNAL, "threadpool: cannot start thread %d", i);
        }
        if (pin) pin_to_core(w->thread, i);
    }
    if (pin) pin_to_core(pthread_self(), 0);
    *out = p;
    return NB_OK;
}

void nb_pool_free(struct nb_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->workers);
    free(p);
}

int nb_pool_size(const struct nb_pool *p) { return p ? p->n_threads : 1; }

void nb_pool_run_n(struct nb_pool *p, nb_pool_fn fn, void *ctx, int nth)
{
    if (!p || nth <= 1 || p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (nth > p->n_threads) nth = p->n_threads;
    p->fn = fn;
    p->ctx = ctx;
    p->nth = nth;
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_mutex_lock(&p->mu);
    if (p->n_sleeping) pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, nth);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) cpu_relax();
}

void nb_pool_run(struct nb_pool *p, nb_pool_fn fn, void *ctx)
{
    nb_pool_run_n(p, fn, ctx, p ? p->n_threads : 1);
}
