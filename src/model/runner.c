/* model/runner.c — the ops of the forward pass on the context's threads.
 *
 * Every op runs through nb_run_op, which times it when profiling is on (wall time,
 * calls, threads, and thread 0's own compute time, so dispatch + waiting shows as
 * fan-out). The maths in forward.c and attention.c has no profiler hooks.
 *
 * GEMMs: the kernel table has one GEMM per weight format (kernels->gemm[format]), so
 * a GEMM here is the same code whatever the weight holds; threads take contiguous runs
 * of 16-row blocks (the X16 layout's unit; the other formats accept any split), and a
 * prefill batch's tokens are split too (nb_gemm_token_parts).
 */
#include <string.h>

#include "core/timer.h"
#include "model/context.h"

/* ---------------------------------------------------------------- running an op */

struct timed_job {
    nb_pool_fn fn;
    void *arg;
    uint64_t t0_ns; /* thread 0's compute time */
};

static void timed_worker(void *arg, int ith, int nth)
{
    struct timed_job *t = arg;
    if (ith != 0) {
        t->fn(t->arg, ith, nth);
        return;
    }
    uint64_t start = nb_time_ns();
    t->fn(t->arg, ith, nth);
    t->t0_ns = nb_time_ns() - start;
}

void nb_run_op(struct nb_ctx *c, enum nb_op op, nb_pool_fn fn, void *arg, int nth)
{
    if (!c->profiling) {
        nb_pool_run_n(c->pool, fn, arg, nth);
        return;
    }
    struct timed_job t = {fn, arg, 0};
    uint64_t start = nb_time_ns();
    nb_pool_run_n(c->pool, timed_worker, &t, nth);
    struct nb_prof_slot *p = &c->prof[op];
    p->wall_ns += nb_time_ns() - start;
    p->t0_ns += t.t0_ns;
    p->calls++;
    if (nth > p->threads) p->threads = nth;
}

#define ROWS_MIN_PARALLEL 65536 /* elements; below this the fan-out costs more */

int nb_rows_threads(const struct nb_ctx *c, int n, int64_t len)
{
    return n > 1 && (int64_t)n * len >= ROWS_MIN_PARALLEL ? c->n_threads : 1;
}

/* ---------------------------------------------------------------- GEMM inputs */

struct nb_input nb_input(const float *x, int64_t ldx, int n)
{
    struct nb_input in = {.x = x, .ldx = ldx, .n = n};
    return in;
}

struct qact_job {
    struct nb_ctx *c;
    const struct nb_input *in;
    int64_t n_in;
    int group;
};

#define Q8K_KEY (-256) /* struct nb_input's q8_group for the k-quants' form */

static void qact_worker(void *arg, int ith, int nth)
{
    const struct qact_job *j = arg;
    struct nb_ctx *c = j->c;
    const int64_t ldg = c->q8_ld / 16;
    long t0, t1;
    nb_split_range(j->in->n, ith, nth, 1, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        const float *x = j->in->x + t * j->in->ldx;
        if (j->group == Q8K_KEY)
            nb_act_quant_q8k(c->kern->act_quant_q8, x, j->n_in, c->q8 + t * c->q8_ld,
                             c->q8_d + t * ldg, c->q8_sum + t * ldg);
        else
            c->kern->act_quant_q8(x, j->n_in, j->group, c->q8 + t * c->q8_ld, c->q8_d + t * ldg,
                                  c->q8_sum + t * ldg);
    }
}

void nb_input_quantize(struct nb_ctx *c, struct nb_input *in, const struct nb_weight *w)
{
    enum nb_gemm_input kind = nb_wformat_info(w->format)->input;
    if (kind != NB_INPUT_Q8 && kind != NB_INPUT_Q8K) return;
    int key = kind == NB_INPUT_Q8K ? Q8K_KEY : w->group;
    if (in->q8_group == key && in->epoch == c->q8_epoch) return;
    struct qact_job j = {c, in, w->n_in, key};
    nb_run_op(c, NB_OP_QACT, qact_worker, &j, nb_rows_threads(c, in->n, w->n_in));
    in->q8_group = key;
    in->epoch = ++c->q8_epoch;
}

/* ---------------------------------------------------------------- GEMM */

struct gemm_job {
    const struct nb_ctx *c;
    nb_gemm_op run;
    struct nb_gemm_args a;
    int parts; /* token parts (nb_gemm_token_parts); 1: rows only */
};

/* Prefill GEMMs split the tokens as well as the rows. A thread of the AMX kernels first
 * brings its tokens' activations into tile form (w4a8 packs every token's int8 row per
 * 2048-k slab; w4a16 converts them to bf16 per 1024-k slab), and when only the rows are
 * split every thread does that for all the tokens: work that does not shrink with the
 * threads. Kernel lab, 1 thread, the 2048 x 2048 shape, group 128, what one thread of N does
 * (NIBBLE_BENCH_SLICE=N bench/batch_kernels.sh, us a call; the whole matrix at 512 tokens:
 * w4a8 3438-3466, w4a16 4876):
 *                          w4a8 AMX     w4a16 AMX
 *   16 threads, 512 tokens x 1/16 of the rows   283-300      454-499
 *              256 tokens x 1/8                 250          385
 *              128 tokens x 1/4                 226          315
 *    8 threads, 512 tokens x 1/8                438-536      724-740
 *              128 tokens x 1/2                 423-443      606-610
 * In situ, 2 threads, pp512 (model-167 Xeon, bench/ab.sh, three interleaved passes): w4a16
 * balanced 409.8-413.5 against 370.9-382.7 tok/s, w4a8 441.9-483.2 against 444.8-466.0;
 * with NIBBLE_AMX=0 and on a Q4_K_M file as stored, the same within the noise. So: as many
 * parts as the threads allow (a divisor of them, each part's threads splitting the rows)
 * with at least gemm_token_unit tokens each. */
int nb_gemm_token_parts(const struct nb_ctx *c, int nth, int n_tok)
{
    const int unit = c->gemm_token_unit;
    if (unit <= 0) return 1;
    int parts = 1;
    for (int d = 2; d <= nth && n_tok / d >= unit; d++)
        if (nth % d == 0) parts = d;
    return parts;
}

static void gemm_worker(void *arg, int ith, int nth)
{
    const struct gemm_job *j = arg;
    const int rows_nth = nth / j->parts, part = ith / rows_nth;
    long b0, b1;
    nb_split_range((long)((j->a.n_out + 15) / 16), ith % rows_nth, rows_nth, 1, &b0, &b1);
    if (b0 >= b1) return;
    int64_t r1 = (int64_t)b1 * 16;
    struct nb_gemm_args a = j->a;
    if (j->parts > 1) {
        /* whole units of tokens a part, the last part the rest: each token runs the code
         * (tiles, a short tile, vector kernel) it runs in one call, so the same bits */
        const long unit = j->c->gemm_token_unit, units = a.n_tok / unit;
        long u0, u1;
        nb_split_range(units, part, j->parts, 1, &u0, &u1);
        const int64_t t0 = u0 * unit, t1 = part == j->parts - 1 ? a.n_tok : u1 * unit;
        a.y += t0 * a.ldy;
        if (a.x) a.x += t0 * a.ldx;
        if (a.xq) a.xq += t0 * a.ldxq;
        if (a.xd) a.xd += t0 * a.ldxg;
        if (a.xsum) a.xsum += t0 * a.ldxg;
        a.n_tok = (int)(t1 - t0);
    }
    j->run(&a, (int64_t)b0 * 16, r1 < a.n_out ? r1 : a.n_out,
           j->c->scratch + ith * j->c->scratch_stride);
}

void nb_matmul(struct nb_ctx *c, enum nb_op op, float *y, int64_t ldy, struct nb_input *in,
               const struct nb_weight *w)
{
    nb_input_quantize(c, in, w); /* a no-op when the caller's step already did it */
    struct gemm_job j = {
        .c = c,
        .run = c->kern->gemm[w->format].run,
        .a = {.y = y, .ldy = ldy, .x = in->x, .ldx = in->ldx, .xq = c->q8, .xd = c->q8_d,
              .xsum = c->q8_sum, .ldxq = c->q8_ld, .ldxg = c->q8_ld / 16, .w = w->data,
              .n_out = w->n_out, .n_in = w->n_in, .group = w->group, .n_tok = in->n},
    };
    const int nth = w->n_out < 64 ? 1 : c->n_threads;
    j.parts = nb_gemm_token_parts(c, nth, in->n);
    nb_run_op(c, op, gemm_worker, &j, nth);
    if (c->profiling) c->prof[op].float_weights |= nb_wformat_info(w->format)->plain;
}

/* ---------------------------------------------------------------- row-wise ops */

enum rows_kind { ROWS_NORM, ROWS_GLU, ROWS_ADD };

struct rows_job {
    struct nb_ctx *c;
    enum rows_kind kind;
    float *y;
    const float *x, *w;
    int n;
    int64_t len;
};

static void rows_worker(void *arg, int ith, int nth)
{
    const struct rows_job *j = arg;
    const struct nb_kernels *k = j->c->kern;
    const struct nb_config *cfg = &j->c->model->cfg;
    long t0, t1;
    nb_split_range(j->n, ith, nth, 1, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *y = j->y + t * j->len;
        const float *x = j->x + t * j->len;
        switch (j->kind) {
        case ROWS_NORM: k->rmsnorm(y, x, j->w, j->len, cfg->norm_eps); break;
        case ROWS_GLU:
            k->glu(y, y, x, j->len, cfg->act == NB_ACT_SILU ? NB_GLU_SILU : NB_GLU_GELU_TANH);
            break;
        case ROWS_ADD:
            for (int64_t i = 0; i < j->len; i++) y[i] += x[i];
            break;
        }
    }
}

static void run_rows(struct nb_ctx *c, enum nb_op op, struct rows_job *j)
{
    nb_run_op(c, op, rows_worker, j, nb_rows_threads(c, j->n, j->len));
}

void nb_rmsnorm_rows(struct nb_ctx *c, float *y, const float *x, const float *w, int n,
                     int64_t len)
{
    struct rows_job j = {c, ROWS_NORM, y, x, w, n, len};
    run_rows(c, NB_OP_NORM, &j);
}

void nb_glu_rows(struct nb_ctx *c, float *gate, const float *up, int n)
{
    struct rows_job j = {c, ROWS_GLU, gate, up, NULL, n, c->model->cfg.n_ff};
    run_rows(c, NB_OP_ACT, &j);
}

void nb_add_rows(struct nb_ctx *c, float *x, const float *d, int n, int64_t len)
{
    struct rows_job j = {c, ROWS_ADD, x, d, NULL, n, len};
    run_rows(c, NB_OP_RESID, &j);
}
