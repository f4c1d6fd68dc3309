/* quant/gptq.c — GPTQ with static groups (quant/gptq.h). */
#include "quant/gptq.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "quant/kquant.h"
#include "quant/quant.h"

struct nb_gptq_params nb_gptq_default_params(void)
{
    struct nb_gptq_params p = {.damp = 0.01, .block = 128, .act_order = 0, .search = 1,
                               .n_threads = 1};
    return p;
}

/* The grid of one group, decoded from the blob's stored bf16 scale (and min). */
struct grid {
    float d, m;
};

/* The codes' grid: an int4 path's, or a block format's signed codes lo..hi (Q6_K, Q8_0:
 * x = d q, d the sub-block's decoded scale), kept as q - lo in a byte. */
struct grid_kind {
    enum nb_wpath path; /* NB_WPATH_F32: the signed block grid */
    int lo, hi;
};

static int code_of(const struct grid_kind *k, const struct grid *g, double w)
{
    if (k->path == NB_WPATH_W4A8) return nb_quant_code_w4a8((float)w, g->d);
    if (k->path == NB_WPATH_W4A16) return nb_quant_code_w4a16((float)w, g->d, g->m);
    double v = g->d != 0 ? nearbyint(w / (double)g->d) : 0;
    return (v < k->lo ? k->lo : v > k->hi ? k->hi : (int)v) - k->lo;
}

static double value_of(const struct grid_kind *k, const struct grid *g, int q)
{
    if (k->path == NB_WPATH_W4A8) return (double)nb_q4s_value(g->d, q);
    if (k->path == NB_WPATH_W4A16) return (double)nb_q4a_value(g->d, g->m, q);
    return (double)g->d * (q + k->lo);
}

/* U, the upper Cholesky factor of (H + damp)^-1 in the sweep order perm, into u [n][n]
 * (lower part zero). dead[i] = 1 for a column no input reaches. 0 when H stays
 * indefinite.
 *
 * With P the reversal of the order and Hp = H[perm][perm], factor P Hp P = L L^T (lower
 * L); then Hp^-1 = P L^-T L^-1 P = U^T U for U = P L^-1 P, which is upper with a positive
 * diagonal, hence Hp^-1's Cholesky factor. One factorization and one triangular inverse
 * (2n^3/3 flops) instead of a factorization, an inverse and a second factorization
 * (4n^3/3), and column-major LAPACK calls on the row-major buffer (a symmetric matrix
 * is its own transpose), so LAPACKE transposes nothing. */
static int inverse_factor(const double *H, int64_t n, const int64_t *perm, double damp,
                          double *u, uint8_t *dead)
{
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += H[i * n + i];
    mean /= (double)n;
    if (!(mean > 0)) mean = 1;
    for (int64_t i = 0; i < n; i++) dead[i] = !(H[perm[i] * n + perm[i]] > 0);
    for (int attempt = 0; attempt < 3; attempt++, damp *= 10) {
        /* a[i][j] = Hp[n-1-i][n-1-j], dampened; a dead column gets 1 on the diagonal */
        for (int64_t i = 0; i < n; i++) {
            const double *hr = H + perm[n - 1 - i] * n;
            double *ar = u + i * n;
            for (int64_t j = 0; j < n; j++) ar[j] = hr[perm[n - 1 - j]];
            if (dead[n - 1 - i]) ar[i] = 1;
            ar[i] += damp * mean;
        }
        /* column-major lower = row-major upper: L^T in the upper triangle, then L^-T */
        if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, u, (lapack_int)n)) continue;
        if (LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (lapack_int)n, u, (lapack_int)n))
            continue;
        /* u holds M = L^-1 as M(r, c) = u[c n + r], r >= c; U[i][j] = M(n-1-i, n-1-j) =
         * u[(n-1-j) n + (n-1-i)]: swap each pair (i + j < n - 1 with its mirror) in
         * tiles, then clear the lower triangle */
        const int64_t T = 64;
        for (int64_t i0 = 0; i0 < n; i0 += T)
            for (int64_t j0 = 0; j0 + i0 < n - 1; j0 += T)
                for (int64_t i = i0; i < i0 + T && i < n; i++)
                    for (int64_t j = j0; j < j0 + T && i + j < n - 1; j++) {
                        double *x = u + i * n + j, *y = u + (n - 1 - j) * n + (n - 1 - i);
                        double t = *x;
                        *x = *y;
                        *y = t;
                    }
        for (int64_t i = 0; i < n; i++) memset(u + i * n, 0, sizeof(double) * (size_t)i);
        return 1;
    }
    return 0;
}

/* Columns by descending H_ii (ties by index), or in order. */
struct col_key {
    double h;
    int64_t i;
};

static int by_diag(const void *a, const void *b)
{
    const struct col_key *x = a, *y = b;
    if (x->h != y->h) return x->h > y->h ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int order_columns(const double *H, int64_t n, int act_order, int64_t *perm)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!act_order) return 1;
    struct col_key *k = malloc(sizeof *k * (size_t)n);
    if (!k) return 0;
    for (int64_t i = 0; i < n; i++) k[i] = (struct col_key){H[i * n + i], i};
    qsort(k, (size_t)n, sizeof *k, by_diag);
    for (int64_t i = 0; i < n; i++) perm[i] = k[i].i;
    free(k);
    return 1;
}

struct sweep {
    struct grid_kind kind;
    int64_t n_out, n, block;
    const int64_t *perm;
    const struct grid *grids; /* [n_out][n / group] */
    int64_t ng;
    int group;
    const double *u;
    double *w;   /* [n_out][n], permuted columns; overwritten */
    double *err; /* [n_out][block] */
    uint8_t *q;  /* [n_out][n], codes at the original column positions */
};

/* The GPTQ sweep over lazy blocks of columns, for a run of rows (rows are independent:
 * each thread sweeps its own rows through every block, with its own GEMM per block, so
 * there is no fan-out per block and the rows stay in the thread's cache). */
#if defined(__GNUC__) || defined(__clang__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* Columns [i1, i2) of row r: quantize each, spread its error over the block's later
 * columns (the GEMM after the block does the rest). */
INLINE void sweep_block_row(const struct sweep *s, int64_t r, int64_t i1, int64_t i2)
{
    int64_t n = s->n;
    double *wr = s->w + r * n, *er = s->err + r * s->block;
    for (int64_t i = i1; i < i2; i++) {
        const double *ui = s->u + i * n;
        int64_t col = s->perm[i];
        const struct grid *gr = &s->grids[r * s->ng + col / s->group];
        int q = code_of(&s->kind, gr, wr[i]);
        double e = (wr[i] - value_of(&s->kind, gr, q)) / ui[i];
        s->q[r * n + col] = (uint8_t)q;
        er[i - i1] = e;
        for (int64_t k = i + 1; k < i2; k++) wr[k] -= e * ui[k];
    }
}

/* The in-block updates are a quarter to a third of the sweep: built also for AVX2 and
 * AVX-512, chosen by the kernel table's level. No FMA contraction (ISO C mode): the
 * same arithmetic, hence the same codes, at every width. */
typedef void (*sweep_block_fn)(const struct sweep *s, int64_t r0, int64_t r1, int64_t i1,
                               int64_t i2);

static void sweep_block(const struct sweep *s, int64_t r0, int64_t r1, int64_t i1, int64_t i2)
{
    for (int64_t r = r0; r < r1; r++) sweep_block_row(s, r, i1, i2);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) static void
sweep_block_avx512(const struct sweep *s, int64_t r0, int64_t r1, int64_t i1, int64_t i2)
{
    for (int64_t r = r0; r < r1; r++) sweep_block_row(s, r, i1, i2);
}

__attribute__((target("avx2"))) static void sweep_block_avx2(const struct sweep *s, int64_t r0,
                                                             int64_t r1, int64_t i1, int64_t i2)
{
    for (int64_t r = r0; r < r1; r++) sweep_block_row(s, r, i1, i2);
}
#endif

static sweep_block_fn sweep_block_for_machine(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const char *isa = nb_kernels_get()->isa;
    if (!strncmp(isa, "avx512", 6)) return sweep_block_avx512;
    if (!strncmp(isa, "avx2", 4)) return sweep_block_avx2;
#endif
    return sweep_block;
}

/* The GPTQ sweep over lazy blocks of columns, for a run of rows (rows are independent:
 * each thread sweeps its own rows through every block, with its own GEMM per block, so
 * there is no fan-out per block and the rows stay in the thread's cache). */
static void sweep_rows(void *arg, int ith, int nth)
{
    const struct sweep *s = arg;
    int64_t n = s->n, B = s->block;
    long r0, r1;
    nb_split_range((long)s->n_out, ith, nth, 1, &r0, &r1);
    if (r0 >= r1) return;
    sweep_block_fn block = sweep_block_for_machine();
    for (int64_t i1 = 0; i1 < n; i1 += B) {
        int64_t i2 = i1 + B < n ? i1 + B : n;
        block(s, r0, r1, i1, i2);
        if (i2 < n) /* w[r0:r1, i2:] -= err[r0:r1, :i2-i1] u[i1:i2, i2:] */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)(n - i2),
                        (int)(i2 - i1), -1.0, s->err + r0 * B, (int)B, s->u + i1 * n + i2, (int)n,
                        1.0, s->w + r0 * n + i2, (int)n);
    }
}

static void run_sweep(const struct sweep *s, struct nb_pool *pool)
{
    int nth = nb_pool_size(pool);
    if (nth == 1) { /* one row run: BLAS may use its own threads for the GEMMs */
        sweep_rows((void *)s, 0, 1);
        return;
    }
    /* several row runs, each with a one-thread GEMM */
    int blas = openblas_get_num_threads();
    openblas_set_num_threads(1);
    nb_pool_run(pool, sweep_rows, (void *)s);
    openblas_set_num_threads(blas);
}

/* The static groups: round-to-nearest with the scale search (an int4 path's, or a block
 * format's when fmt is one: quant/kquant.h), rows over the threads. */
struct rtn_job {
    enum nb_wpath path;
    enum nb_wformat fmt; /* NB_WF_Q6_K, NB_WF_Q8_0, or NB_WF_COUNT: the int4 path */
    int group, search;
    const float *w, *imp;
    int64_t n_out, n_in;
    void *blob;
    enum nb_status st[256];
};

static void rtn_rows(void *arg, int ith, int nth)
{
    struct rtn_job *j = arg;
    long r0, r1;
    nb_split_range((long)j->n_out, ith, nth, 1, &r0, &r1);
    if (r0 >= r1)
        j->st[ith] = NB_OK;
    else if (j->fmt != NB_WF_COUNT)
        j->st[ith] = nb_kquant_rows(j->fmt, j->w, j->n_out, j->n_in, j->imp, r0, r1, j->blob);
    else
        j->st[ith] = nb_quantize_rows(j->path, j->group, j->w, j->n_out, j->n_in, r0, r1, j->imp,
                                      j->search, j->blob, NULL);
}

/* Run a static-groups job over the pool: its first failure. */
static enum nb_status run_rtn(struct rtn_job *j, struct nb_pool *pool, int nth)
{
    nb_pool_run(pool, rtn_rows, j);
    for (int i = 0; i < nth; i++)
        if (j->st[i]) return j->st[i];
    return NB_OK;
}

/* Read the static groups' grids from a ROWS blob; write codes into it. */
static void read_grids(enum nb_wpath path, const uint8_t *b, const struct nb_layout_planes *pl,
                       int64_t count, struct grid *g)
{
    for (int64_t i = 0; i < count; i++) {
        g[i].d = nb_bf16_to_f32(nb_q_load_u16(b + pl->offset[1] + 2 * i));
        g[i].m = path == NB_WPATH_W4A16 ? nb_bf16_to_f32(nb_q_load_u16(b + pl->offset[2] + 2 * i))
                                        : 0.0f;
    }
}

static void write_codes(uint8_t *b, const struct nb_layout_planes *pl, const uint8_t *q,
                        int64_t count)
{
    for (int64_t i = 0; i < count; i += 2)
        b[pl->offset[0] + i / 2] = (uint8_t)(q[i] | (q[i + 1] << 4));
}

double nb_gptq_loss(const float *w, const float *wq, int64_t n_out, int64_t n_in,
                    const double *H)
{
    /* blocks of rows through one GEMM each (a matrix-vector product per row would stream
     * H once per row: memory-bound, minutes on a large head) */
    const int64_t R = 64;
    double *e = malloc(sizeof(double) * (size_t)(R * n_in));
    double *eh = malloc(sizeof(double) * (size_t)(R * n_in));
    double loss = 0;
    if (!e || !eh) {
        free(e), free(eh);
        return NAN;
    }
    for (int64_t r0 = 0; r0 < n_out; r0 += R) {
        int64_t nr = n_out - r0 < R ? n_out - r0 : R;
        for (int64_t i = 0; i < nr * n_in; i++)
            e[i] = (double)w[r0 * n_in + i] - wq[r0 * n_in + i];
        cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, (int)nr, (int)n_in, 1.0, H,
                    (int)n_in, e, (int)n_in, 0.0, eh, (int)n_in);
        loss += cblas_ddot((int)(nr * n_in), e, 1, eh, 1);
    }
    free(e), free(eh);
    return loss;
}

/* The proxy loss of what the blob holds. */
static double blob_loss(enum nb_wpath path, int group, const void *blob, const float *w,
                        int64_t n_out, int64_t n_in, const double *H)
{
    float *wq = malloc(sizeof(float) * (size_t)(n_out * n_in));
    if (!wq) return NAN;
    double loss = NAN;
    if (nb_dequantize_rows(path, group, blob, n_out, n_in, 0, n_out, wq) == NB_OK)
        loss = nb_gptq_loss(w, wq, n_out, n_in, H);
    free(wq);
    return loss;
}

static int n_threads_of(const struct nb_gptq_params *p)
{
    return p->n_threads > 0 ? (p->n_threads < 256 ? p->n_threads : 256) : 1;
}

enum nb_status nb_gptq_factor_init(struct nb_gptq_factor *f, const double *H, int64_t n,
                                   const struct nb_gptq_params *p)
{
    struct nb_gptq_params prm = p ? *p : nb_gptq_default_params();
    if (!(prm.damp > 0)) prm.damp = 0.01;
    memset(f, 0, sizeof *f);
    if (n <= 0 || n > INT32_MAX / 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: a Hessian of %lld columns", (long long)n);
    f->n = n;
    f->perm = malloc(sizeof(int64_t) * (size_t)n);
    f->dead = malloc((size_t)n);
    f->imp = malloc(sizeof(float) * (size_t)n);
    f->u = malloc(sizeof(double) * (size_t)(n * n));
    if (!f->perm || !f->dead || !f->imp || !f->u || !order_columns(H, n, prm.act_order, f->perm)) {
        nb_gptq_factor_free(f);
        return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory for a Hessian of %lld columns",
                            (long long)n);
    }
    /* the static groups' importance: diag(H) */
    for (int64_t i = 0; i < n; i++) f->imp[i] = H[i * n + i] > 0 ? (float)H[i * n + i] : 0;
    if (!inverse_factor(H, n, f->perm, prm.damp, f->u, f->dead)) {
        nb_gptq_factor_free(f);
        return nb_set_error(NB_ERR_INTERNAL, "gptq: the Hessian of %lld columns is not positive "
                            "definite even dampened by %g%%", (long long)n, prm.damp * 100);
    }
    return NB_OK;
}

void nb_gptq_factor_free(struct nb_gptq_factor *f)
{
    free(f->perm), free(f->dead), free(f->imp), free(f->u);
    memset(f, 0, sizeof *f);
}

/* An int4 path and a shape that fits it in groups of `group`. */
static enum nb_status check_shape(enum nb_wpath path, int group, int64_t n_out, int64_t n_in,
                                  struct nb_layout_planes *pl)
{
    if (!nb_wpath_is_int4(path))
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: path %s is not an int4 path (w4a8, "
                            "w4a16)", nb_wpath_name(path));
    if (!nb_layout_planes(path, group, n_out, n_in, pl) || n_in > INT32_MAX / 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: [%lld, %lld] does not fit %s with groups "
                            "of %d", (long long)n_out, (long long)n_in, nb_wpath_name(path),
                            group);
    return NB_OK;
}

/* The sweep's buffers for [n_out][n_in] in groups of `group`. */
struct bufs {
    double *w, *err;
    uint8_t *q;
    struct grid *grids;
};

static enum nb_status bufs_alloc(struct bufs *b, int64_t n_out, int64_t n_in, int64_t block,
                                 int group)
{
    b->w = malloc(sizeof(double) * (size_t)(n_out * n_in));
    b->err = malloc(sizeof(double) * (size_t)(n_out * block));
    b->q = malloc((size_t)(n_out * n_in));
    b->grids = malloc(sizeof(struct grid) * (size_t)(n_out * (n_in / group)));
    if (b->w && b->err && b->q && b->grids) return NB_OK;
    return nb_set_error(NB_ERR_NOMEM, "gptq: out of memory for [%lld, %lld]", (long long)n_out,
                        (long long)n_in);
}

static void bufs_free(struct bufs *b)
{
    free(b->w), free(b->err), free(b->q), free(b->grids);
    memset(b, 0, sizeof *b);
}

/* The sweep over w's rows with the grids of s (permuted into s->w first). */
static void sweep_matrix(struct sweep *s, const float *w, const struct nb_gptq_factor *f,
                         struct nb_pool *pool)
{
    int64_t n_in = s->n;
    for (int64_t r = 0; r < s->n_out; r++)
        for (int64_t i = 0; i < n_in; i++)
            s->w[r * n_in + i] = f->dead[i] ? 0.0 : (double)w[r * n_in + f->perm[i]];
    run_sweep(s, pool);
}

enum nb_status nb_gptq_quantize_factored(enum nb_wpath path, int group, const float *w,
                                         int64_t n_out, int64_t n_in,
                                         const struct nb_gptq_factor *f, const double *H,
                                         const struct nb_gptq_params *p, void *blob,
                                         struct nb_gptq_stats *stats)
{
    struct nb_gptq_params prm = p ? *p : nb_gptq_default_params();
    struct nb_layout_planes pl;
    enum nb_status st;
    if ((st = check_shape(path, group, n_out, n_in, &pl))) return st;
    if (f->n != n_in)
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: a factor of %lld columns for [%lld, %lld]",
                            (long long)f->n, (long long)n_out, (long long)n_in);
    if (prm.block <= 0) prm.block = 128;
    struct nb_pool *pool = NULL;
    int64_t ng = n_in / group;
    struct bufs b;
    if ((st = bufs_alloc(&b, n_out, n_in, prm.block, group))) goto out;
    /* static groups: round-to-nearest on the scale search, weighted by diag(H) */
    int nth = n_threads_of(&prm);
    if ((st = nb_pool_init(&pool, nth, 0))) goto out;
    struct rtn_job rj = {path, NB_WF_COUNT, group, prm.search, w, f->imp, n_out, n_in, blob,
                         {NB_OK}};
    double t0 = nb_time_s();
    st = run_rtn(&rj, pool, nth);
    if (stats) stats->seconds_search = nb_time_s() - t0;
    if (st) goto out;
    if (stats && H) stats->loss_rtn = blob_loss(path, group, blob, w, n_out, n_in, H);
    t0 = nb_time_s();
    read_grids(path, blob, &pl, n_out * ng, b.grids);
    struct sweep s = {{path, 0, 15}, n_out, n_in, prm.block, f->perm, b.grids, ng, group, f->u,
                      b.w, b.err, b.q};
    sweep_matrix(&s, w, f, pool);
    write_codes(blob, &pl, b.q, n_out * n_in);
    if (stats) stats->seconds_sweep = nb_time_s() - t0;
    if (stats && H) stats->loss = blob_loss(path, group, blob, w, n_out, n_in, H);
out:
    bufs_free(&b);
    nb_pool_free(pool);
    return st;
}

enum nb_status nb_gptq_quantize(enum nb_wpath path, int group, const float *w, int64_t n_out,
                                int64_t n_in, const double *H, const struct nb_gptq_params *p,
                                void *blob, struct nb_gptq_stats *stats)
{
    struct nb_layout_planes pl;
    enum nb_status st;
    if ((st = check_shape(path, group, n_out, n_in, &pl))) return st;
    struct nb_gptq_factor f;
    st = nb_gptq_factor_init(&f, H, n_in, p);
    if (st) return st;
    st = nb_gptq_quantize_factored(path, group, w, n_out, n_in, &f, H, p, blob, stats);
    nb_gptq_factor_free(&f);
    return st;
}

/* ---- GPTQ onto a block format's grid (gptq.h) ---- */

/* Every sub-block's decoded scale (Q8_0: a block of 32; Q6_K: d times the int8 scale of
 * each 16), as the decoder computes it, and the codes written back. */
static void read_block_grids(enum nb_wformat fmt, const uint8_t *b, int64_t n_blocks,
                             struct grid *g)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        if (fmt == NB_WF_Q8_0) {
            g[i] = (struct grid){nb_f16_to_f32(nb_q_load_u16(b + i * NB_Q8_0_BYTES)), 0};
            continue;
        }
        const uint8_t *blk = b + i * NB_Q6_K_BYTES;
        float d = nb_f16_to_f32(nb_q_load_u16(blk + 208));
        for (int s = 0; s < 16; s++) g[i * 16 + s] = (struct grid){d * (float)(int8_t)blk[192 + s], 0};
    }
}

static void write_block_codes(enum nb_wformat fmt, uint8_t *b, int64_t n_blocks, const uint8_t *q)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        if (fmt == NB_WF_Q8_0) { /* q kept as code + 127 */
            for (int k = 0; k < 32; k++)
                b[i * NB_Q8_0_BYTES + 2 + k] = (uint8_t)(int8_t)(q[i * 32 + k] - 127);
            continue;
        }
        nb_q6_k_put_codes(b + i * NB_Q6_K_BYTES, q + i * NB_QK_K); /* q kept as code + 32 */
    }
}

enum nb_status nb_gptq_quantize_blocks(enum nb_wformat fmt, const float *w, int64_t n_out,
                                       int64_t n_in, const struct nb_gptq_factor *f,
                                       const struct nb_gptq_params *p, void *dst,
                                       struct nb_gptq_stats *stats)
{
    struct nb_gptq_params prm = p ? *p : nb_gptq_default_params();
    struct nb_block_info bi;
    if ((fmt != NB_WF_Q6_K && fmt != NB_WF_Q8_0) || !nb_wformat_block(fmt, &bi))
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: blocks of format %d (Q6_K, Q8_0 rows only)",
                            (int)fmt);
    if (n_in <= 0 || n_in % bi.elems || n_out <= 0 || f->n != n_in || n_in > INT32_MAX / 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "gptq: [%lld, %lld] is not whole %s blocks or "
                            "does not match a factor of %lld columns", (long long)n_out,
                            (long long)n_in, bi.dtype, (long long)f->n);
    if (prm.block <= 0) prm.block = 128;
    const int group = fmt == NB_WF_Q8_0 ? 32 : 16;
    const int64_t ng = n_in / group, nb = n_in / bi.elems;
    struct nb_pool *pool = NULL;
    struct bufs b;
    enum nb_status st = bufs_alloc(&b, n_out, n_in, prm.block, group);
    if (st) goto out;
    int nth = n_threads_of(&prm);
    if ((st = nb_pool_init(&pool, nth, 0))) goto out;
    /* static scales: the block format's own weighted search, importance diag(H) */
    struct rtn_job rj = {NB_WPATH_F32, fmt, 0, 1, w, f->imp, n_out, n_in, dst, {NB_OK}};
    double t0 = nb_time_s();
    st = run_rtn(&rj, pool, nth);
    if (stats) stats->seconds_search = nb_time_s() - t0;
    if (st) goto out;
    t0 = nb_time_s();
    read_block_grids(fmt, dst, n_out * nb, b.grids);
    struct sweep s = {{NB_WPATH_F32, fmt == NB_WF_Q8_0 ? -127 : -32, fmt == NB_WF_Q8_0 ? 127 : 31},
                      n_out, n_in, prm.block, f->perm, b.grids, ng, group, f->u, b.w, b.err, b.q};
    sweep_matrix(&s, w, f, pool);
    write_block_codes(fmt, dst, n_out * nb, b.q);
    if (stats) stats->seconds_sweep = nb_time_s() - t0;
out:
    bufs_free(&b);
    nb_pool_free(pool);
    return st;
}
