/* model/repack.c — a GGUF source's block matrices (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, IQ4_NL,
 * IQ4_XS) shuffled into the X16 records the
 * integer kernels read (kernels/qblock.h), once, at load: every code and scale kept, so
 * the model computes with the file's own weights (its fidelity, exactly), without a
 * float decode of the weights at every step. The token embedding stays as stored (a
 * row gather reads a few rows); a tied head gets its own records. */
#include <stdlib.h>
#include <string.h>

#include "core/mmap.h"
#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "core/timer.h"
#include "model/model.h"
#include "quant/kq_repack.h"

struct repack_job {
    struct nb_weight **w; /* [n] the matrices */
    uint8_t **dst;        /* [n] their records */
    int n;
    int64_t bytes;     /* the records of all matrices: the work, split evenly by bytes */
    enum nb_status st; /* the first failure (none expected: shapes were checked) */
};

static enum nb_wformat x16_of(enum nb_wformat f)
{
    struct nb_block_info bi;
    return nb_wformat_block(f, &bi) ? bi.x16 : f;
}

/* Thread ith repacks the row blocks that start in its share of the output bytes (a
 * Q6_K block costs more than a Q4_K one: an even split by blocks left one thread
 * waiting), matrix by matrix. */
static void repack_worker(void *arg, int ith, int nth)
{
    struct repack_job *j = arg;
    int64_t lo = j->bytes / nth * ith + (ith ? j->bytes % nth : 0);
    int64_t hi = ith == nth - 1 ? j->bytes : lo + j->bytes / nth + (ith ? 0 : j->bytes % nth);
    int64_t base = 0;
    for (int i = 0; i < j->n && base < hi; i++) {
        const struct nb_weight *w = j->w[i];
        struct nb_layout_planes pl;
        nb_wformat_planes(x16_of(w->format), 0, w->n_out, w->n_in, &pl);
        int64_t nb = w->n_out / 16, bb = pl.total / nb; /* bytes a row block */
        int64_t b0 = lo <= base ? 0 : (lo - base + bb - 1) / bb;
        int64_t b1 = hi >= base + pl.total ? nb : (hi - base + bb - 1) / bb;
        if (b0 < b1) {
            enum nb_status st = nb_kq_repack_x16(x16_of(w->format), w->data, w->n_out, w->n_in, b0,
                                                 b1, j->dst[i]);
            if (st) j->st = st;
        }
        base += pl.total;
    }
}

/* A block matrix whose records fit its shape and have a SIMD kernel on this machine (the
 * records' reference kernel is slower than the rows' float decode: without VNNI the rows
 * stay). */
static int repackable(const struct nb_weight *w)
{
    struct nb_layout_planes pl;
    struct nb_block_info bi;
    return w->data && nb_wformat_block(w->format, &bi) && w->format == bi.rows &&
           nb_wformat_planes(bi.x16, 0, w->n_out, w->n_in, &pl) && nb_model_block_fast(bi.x16);
}

int nb_model_block_fast(enum nb_wformat x16)
{
    return strcmp(nb_kernels_get()->gemm[x16].name, "ref") != 0;
}

enum nb_status nb_model_repack_kquants(struct nb_model *m, int n_threads, double *seconds)
{
    double t0 = nb_time_s();
    struct repack_job job = {0}, *j = &job;
    struct nb_pool *pool = NULL;
    enum nb_status st = NB_OK;
    size_t cap = 8 * (size_t)m->cfg.n_layers + 1;
    j->w = calloc(cap, sizeof *j->w);
    j->dst = calloc(cap, sizeof *j->dst);
    if (!j->w || !j->dst) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t total = 0;
    for (int l = 0; l <= m->cfg.n_layers; l++) {
        struct nb_layer *L = l < m->cfg.n_layers ? &m->layers[l] : NULL;
        struct nb_weight *ws[] = {L ? &L->wq : &m->output, L ? &L->wk : NULL, L ? &L->wv : NULL,
                                  L ? &L->head_gate : NULL, L ? &L->wo : NULL,
                                  L ? &L->w_gate : NULL, L ? &L->w_up : NULL,
                                  L ? &L->w_down : NULL};
        for (int k = 0; k < 8; k++) {
            if (!ws[k] || !repackable(ws[k])) continue;
            struct nb_layout_planes pl;
            nb_wformat_planes(x16_of(ws[k]->format), 0, ws[k]->n_out, ws[k]->n_in, &pl);
            j->w[j->n] = ws[k];
            j->dst[j->n] = (uint8_t *)(intptr_t)total; /* an offset until the buffer exists */
            j->n++;
            total += pl.total;
        }
    }
    if (j->n == 0) goto done;
    uint8_t *buf = nb_huge_alloc((size_t)total);
    if (!buf) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: no memory for %lld bytes of repacked k-quant "
                          "weights", m->path, (long long)total);
        goto done;
    }
    nb_huge_free(m->repacked, m->repacked_size);
    m->repacked = buf;
    m->repacked_size = (size_t)total;
    for (int i = 0; i < j->n; i++) j->dst[i] = buf + (intptr_t)j->dst[i];
    j->bytes = total;
    if ((st = nb_pool_init(&pool, n_threads, 0))) goto done;
    nb_pool_run(pool, repack_worker, j);
    if ((st = j->st)) goto done;
    for (int i = 0; i < j->n; i++) { /* only now: a failure above leaves the model as it was */
        j->w[i]->format = x16_of(j->w[i]->format);
        j->w[i]->group = nb_wformat_act_group(j->w[i]->format, j->w[i]->group);
        j->w[i]->data = j->dst[i];
    }
done:
    nb_pool_free(pool);
    free(j->w);
    free(j->dst);
    if (seconds) *seconds = nb_time_s() - t0;
    return st;
}
