/* runtime/quantize.c — float checkpoint -> .nib of one weight path.
 *
 * Every linear layer is quantized, the output head included: a tied head gets its own
 * quantized copy (--head 4|8|16), because an unquantized head is a whole float GEMM per
 * token. Embeddings stay a row gather, as int4 or int8 rows or bf16. On the int4 paths
 * a recipe (runtime/recipe.h) gives each matrix its width. Norms, biases and the RoPE
 * frequencies stay f32. Rows are quantized in parallel.
 *
 * A GPTQ / AWQ checkpoint's 4-bit matrices keep their codes where the target grid can
 * hold them (quant/unpack.h: plain group order, group 32/64/128, every zero at 8 for
 * w4a8): the blob is built from the source codes with bf16 scales, at the source's
 * group size (it wins over --group for those matrices); the others are re-quantized
 * from their exact dequantization, and the log says why. */
#include "runtime/quantize.h"

#include <dirent.h>
#include <stdatomic.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "core/log.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "formats/nib.h"
#include "formats/source.h"
#include "model/config.h"
#include "model/model.h"
#include "quant/kq_repack.h"
#include "quant/kquant.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "quant/unpack.h"
#include "runtime/calib.h"
#include "runtime/model_tokenizer.h"
#include "runtime/recipe.h"
#include "runtime/source_hash.h"

void nb_quantize_default_opts(struct nb_quantize_opts *o)
{
    memset(o, 0, sizeof *o);
    o->path = NB_WPATH_W4A8;
    o->group = 128;
    o->search = 1;
    o->layout = NB_LAYOUT_X16;
}

/* A matrix is quantized in chunks of QUANT_CHUNK rows (a multiple of 16: whole w8a16
 * batches and X16 blocks), each converted from the source into the worker's own
 * buffer, then quantized: chunks go to whichever thread is free, and the bytes do not
 * depend on which (every group's choice depends on its own weights only). The stats
 * are summed per chunk, then over chunks in order, so the report is the same for
 * every thread count too. */
#define QUANT_CHUNK 32
#define QUANT_THREADS_MAX 64

struct qjob {
    enum nb_wformat block; /* a GGUF block format's rows to write (quant/kquant.h), or
                              NB_WF_COUNT: the int4 / int8 paths */
    enum nb_wpath path;
    int group, search;
    int from_q4k; /* a GGUF Q4_K source onto w4a16 g32: codes kept (quant/kq_repack.h) */
    const struct nb_weight *src;
    int64_t n_out, n_in;
    const float *imp;
    void *blob, *x16; /* x16: repack into it after quantizing (else NULL) */
    int64_t repack_rows;
    int64_t n_chunks;
    atomic_llong next; /* the next chunk to take */
    struct nb_qstats *stats; /* [n_chunks] */
    float **buf;             /* [thread]: QUANT_CHUNK rows as f32, grown on demand */
    int64_t *buf_cap;        /* [thread]: floats in buf */
    enum nb_status st[QUANT_THREADS_MAX];
    char msg[QUANT_THREADS_MAX][256]; /* a failing thread's nb_last_error() */
};

static void job_fail(struct qjob *j, int ith, enum nb_status st)
{
    j->st[ith] = st;
    snprintf(j->msg[ith], sizeof j->msg[ith], "%s", nb_last_error());
    atomic_store(&j->next, j->n_chunks); /* the others stop after their chunk */
}

static void quant_worker(void *arg, int ith, int nth)
{
    struct qjob *j = arg;
    j->st[ith] = NB_OK;
    if (j->src->format != NB_WF_F32 && j->buf_cap[ith] < QUANT_CHUNK * j->n_in) {
        free(j->buf[ith]);
        j->buf_cap[ith] = 0;
        if (!(j->buf[ith] = malloc(sizeof(float) * (size_t)(QUANT_CHUNK * j->n_in)))) {
            job_fail(j, ith, nb_set_error(NB_ERR_NOMEM, "quantize: out of memory"));
            return;
        }
        j->buf_cap[ith] = QUANT_CHUNK * j->n_in;
    }
    float *buf = j->buf[ith];
    for (;;) {
        int64_t c = atomic_fetch_add(&j->next, 1);
        if (c >= j->n_chunks) break;
        int64_t r0 = c * QUANT_CHUNK, r1 = r0 + QUANT_CHUNK < j->n_out ? r0 + QUANT_CHUNK : j->n_out;
        const float *f = NULL;
        enum nb_status st;
        if (j->from_q4k) {
            st = nb_q4_k_pack_w4a16(j->src->data, j->n_out, j->n_in, r0, r1, j->blob,
                                    &j->stats[c]);
            if (st) {
                job_fail(j, ith, st);
                break;
            }
            continue;
        }
        st = nb_weight_rows_f32(j->src, r0, r1, buf, &f);
        if (!st && j->block != NB_WF_COUNT) {
            struct nb_block_info bi;
            nb_wformat_block(j->block, &bi);
            st = nb_kquant_rows(j->block, f, r1 - r0, j->n_in, j->imp, 0, r1 - r0,
                                (uint8_t *)j->blob + r0 * (j->n_in / bi.elems * bi.bytes));
        } else if (!st)
            st = nb_quantize_rows_at(j->path, j->group, f, j->n_out, j->n_in, r0, r1, j->imp,
                                     j->search, j->blob, &j->stats[c]);
        if (st) {
            job_fail(j, ith, st);
            break;
        }
    }
    (void)nth;
}

/* Rows blob -> X16, the 16-row blocks split over the threads. */
static void repack_worker(void *arg, int ith, int nth)
{
    struct qjob *j = arg;
    long b0, b1;
    nb_split_range((long)(j->n_out / 16), ith, nth, 1, &b0, &b1);
    j->st[ith] = NB_OK;
    if (j->block != NB_WF_COUNT) { /* a block format's rows into its records */
        struct nb_block_info bi;
        nb_wformat_block(j->block, &bi);
        enum nb_status st = b0 < b1 ? nb_kq_repack_x16(bi.x16, j->blob, j->n_out, j->n_in, b0,
                                                       b1, j->x16)
                                    : NB_OK;
        if (st) job_fail(j, ith, st);
        return;
    }
    if (b0 < b1 || (ith == nth - 1)) {
        enum nb_status st = nb_repack_x16_blocks(j->path, j->group, j->blob, j->x16, j->n_out,
                                                 j->n_in, j->repack_rows, b0, b1);
        if (st) job_fail(j, ith, st);
    }
}

/* The first failure of a pool run, its message set again on this thread. */
static enum nb_status job_status(const struct qjob *j, int nth)
{
    for (int i = 0; i < nth; i++)
        if (j->st[i]) return nb_set_error(j->st[i], "%s", j->msg[i]);
    return NB_OK;
}

struct qctx {
    const struct nb_quantize_opts *o;
    const struct nb_act_stats *stats; /* calibration, or NULL */
    const struct nb_model *m;         /* the source (its matrices' source codes) */
    struct nb_prequant *pre;          /* matrices GPTQ quantized already */
    int n_pre;
    float *imp;                       /* scratch: one importance vector */
    struct nb_pool *pool;
    struct nb_nib_writer *w;
    void **owned; /* blobs to free after writing */
    int64_t n_owned, cap_owned;
    void *rows;          /* scratch: a matrix in the rows layout before its X16 repack */
    size_t rows_cap;
    float *wbuf[QUANT_THREADS_MAX]; /* the workers' source rows as f32 */
    int64_t wbuf_cap[QUANT_THREADS_MAX];
    /* the last matrix quantized without importance: a tied head quantized as its
     * embeddings were (same source, path, group and layout) gets the same bytes, so it
     * shares that blob (kept once) instead of being quantized again */
    struct {
        const void *src;
        enum nb_wpath path;
        int group, layout;
        int64_t n_out, n_in;
        const void *blob;
        double rel_rms;
    } last;
    int64_t done, total;
    int layout;            /* opts->layout: NB_LAYOUT_X16 (default) or NB_LAYOUT_ROWS */
    int64_t repack_rows;   /* opts->repack_rows: rows per repack step (0: whole matrix) */
    uint64_t linear_bytes, file_bytes;
    int64_t linear_params, file_params;
    struct nb_recipe rc; /* the widths (int4 paths) */
    int64_t n_kept, n_requant; /* int4 matrices that kept / could not keep source codes */
    const char *why_logged[8]; /* the reasons already logged */
};


/* A buffer for a packed matrix, NB_LAYOUT_ALIGN-aligned. One of 4 MiB or more is 2 MiB
 * aligned and asks for transparent huge pages: quantize writes each such buffer once,
 * and faulting it in 4 KiB pages cost more than the X16 repack itself (perf, Qwen3-1.7B
 * shape, 2 threads: page faults 9% of the CPU time). Free it with free(). */
#define BLOB_HUGE ((size_t)4 << 20)
static void *blob_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < BLOB_HUGE) return posix_memalign(&p, NB_LAYOUT_ALIGN, bytes) ? NULL : p;
    size_t huge = (size_t)2 << 20, size = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, size)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE); /* advice: without it, small pages */
#endif
    return p;
}

static enum nb_status keep(struct qctx *q, void *p)
{
    if (q->n_owned == q->cap_owned) {
        int64_t cap = q->cap_owned ? 2 * q->cap_owned : 256;
        void **n = realloc(q->owned, sizeof *n * (size_t)cap);
        if (!n) return nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
        q->owned = n;
        q->cap_owned = cap;
    }
    q->owned[q->n_owned++] = p;
    return NB_OK;
}

static void tick(struct qctx *q)
{
    q->done++;
    if (q->o->progress) q->o->progress(q->done, q->total, q->o->user);
}

/* A matrix written: counted in the file's (and the linear layers') bytes and parameters,
 * reported, ticked. */
static void counted(struct qctx *q, const char *name, const char *kind, const struct nb_weight *w,
                    uint64_t bytes, int linear, double rel_rms)
{
    q->file_bytes += bytes;
    q->file_params += w->n_out * w->n_in;
    if (linear) {
        q->linear_bytes += bytes;
        q->linear_params += w->n_out * w->n_in;
    }
    if (q->o->report) q->o->report(name, kind, w->n_out, w->n_in, bytes, rel_rms, q->o->user);
    tick(q);
}

/* Add a packed matrix (already kept in q->owned) to the file, count it, report it. */
static enum nb_status write_matrix(struct qctx *q, const char *name, enum nb_wpath path,
                                   int group, int layout, const struct nb_weight *w,
                                   const void *blob, uint64_t bytes, int linear, double rel_rms)
{
    int64_t shape[2] = {w->n_out, w->n_in};
    enum nb_status st = nb_nib_writer_add(q->w, name, NB_NIB_PACKED, path, group, layout, 2,
                                          shape, blob, bytes);
    if (!st) counted(q, name, nb_wpath_name(path), w, bytes, linear, rel_rms);
    return st;
}

/* Add a block format's matrix (kept in q->owned: rows, or X16 records) to the file, count
 * it, report it. */
static enum nb_status write_block(struct qctx *q, const char *name, const struct nb_weight *w,
                                  enum nb_wformat fmt, const void *blob, uint64_t bytes, int linear)
{
    struct nb_block_info bi;
    nb_wformat_block(fmt, &bi);
    enum nb_status st = nb_nib_writer_add_block(q->w, name, fmt, w->n_out, w->n_in, blob, bytes);
    if (!st) counted(q, name, nb_wformat_info(bi.rows)->name, w, bytes, linear, 0);
    return st;
}

/* The blob GPTQ made for w, if any (its ownership passes to q). */
static struct nb_prequant *prequant_of(struct qctx *q, const struct nb_weight *w)
{
    for (int i = 0; i < q->n_pre; i++)
        if (q->pre[i].w == w && q->pre[i].q.data) return &q->pre[i];
    return NULL;
}

/* Write a matrix GPTQ quantized (quant/gptq.h) as it is. */
static enum nb_status add_prequant(struct qctx *q, const char *name, struct nb_prequant *pq,
                                   int linear)
{
    const struct nb_weight *w = &pq->q;
    const struct nb_wformat_info *fi = nb_wformat_info(w->format);
    struct nb_layout_planes pl;
    const int block = nb_wformat_is_kquant(w->format);
    nb_wformat_planes(w->format, block ? 0 : w->group, w->n_out, w->n_in, &pl);
    void *blob = (void *)w->data;
    pq->q.data = NULL; /* now q's */
    enum nb_status st = keep(q, blob);
    if (st) {
        free(blob);
        return st;
    }
    if (block) /* GPTQ's codes on a block grid: the records add_block would write */
        return write_block(q, name, w, w->format, blob, (uint64_t)pl.total, linear);
    return write_matrix(q, name, fi->path, w->group, fi->layout, w, blob, (uint64_t)pl.total,
                        linear, pq->rel_rms);
}

/* A matrix a quantized source stored with more than 4 bits (Q5_K, Q6_K, Q8_0) keeps 8
 * on an int4 path: re-quantizing it to 4 would undo what the file's maker chose. */
static enum nb_wpath kept_bits(enum nb_wpath path, const struct nb_weight *w)
{
    return nb_wpath_is_int4(path) && w->src_bits > 4 ? nb_recipe_path(path, 8) : path;
}

/* Write a matrix from its checkpoint's codes (quant/unpack.h), in the layout add_matrix
 * would choose; rel_rms against its exact dequantization (the model's f32 matrix). */
static enum nb_status add_codes(struct qctx *q, const char *name, const struct nb_weight *w,
                                const struct nb_src_codes *sc, enum nb_wpath path, int linear)
{
    struct nb_layout_planes pl;
    int group = (int)sc->group;
    if (!nb_layout_planes(path, group, w->n_out, w->n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: tensor '%s' [%lld, %lld] does not fit "
                            "%s with group %d", name, (long long)w->n_out, (long long)w->n_in,
                            nb_wpath_name(path), group);
    int layout = linear && q->layout == NB_LAYOUT_X16 && w->n_out % 16 == 0 ? NB_LAYOUT_X16
                                                                            : NB_LAYOUT_ROWS;
    void *blob = blob_alloc((size_t)pl.total), *x16 = NULL;
    float *row = malloc(sizeof(float) * (size_t)w->n_in);
    enum nb_status st = NB_OK;
    if (!blob || !row) {
        st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for '%s'", name);
        goto done;
    }
    if ((st = nb_src_codes_pack(sc, path, blob))) {
        st = nb_wrap_error(st, "quantize: tensor '%s': ", name);
        goto done;
    }
    double err = 0, ref = 0;
    const float *src = w->data; /* f32: the loader's dequantization */
    for (int64_t r = 0; r < w->n_out; r++) {
        if ((st = nb_dequantize_rows(path, group, blob, w->n_out, w->n_in, r, r + 1, row)))
            goto done;
        for (int64_t k = 0; k < w->n_in; k++) {
            double x = src[r * w->n_in + k], e = x - row[k];
            err += e * e;
            ref += x * x;
        }
    }
    if (layout == NB_LAYOUT_X16) {
        if (!(x16 = blob_alloc((size_t)pl.total))) {
            st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for '%s'", name);
            goto done;
        }
        if ((st = nb_repack_x16(path, group, blob, x16, w->n_out, w->n_in, q->repack_rows)))
            goto done;
        free(blob);
        blob = x16;
        x16 = NULL;
    }
    if ((st = keep(q, blob))) goto done;
    void *kept = blob;
    blob = NULL;
    q->n_kept++;
    st = write_matrix(q, name, path, group, layout, w, kept, (uint64_t)pl.total, linear,
                      ref > 0 ? sqrt(err / ref) : 0);
done:
    free(blob);
    free(x16);
    free(row);
    return st;
}

/* The source codes of w that `path` keeps, or NULL; a matrix that has codes the path
 * cannot keep is counted, and its reason logged the first time it comes up. */
static const struct nb_src_codes *codes_for(struct qctx *q, const char *name,
                                            const struct nb_weight *w, enum nb_wpath path)
{
    const struct nb_src_codes *sc = q->m ? nb_model_src_codes(q->m, w) : NULL;
    const char *why = NULL;
    if (!sc || !nb_wpath_is_int4(path)) return NULL; /* wider paths re-quantize by choice */
    if (nb_src_codes_fit(sc, path, &why)) return sc;
    q->n_requant++;
    size_t i = 0, n = sizeof q->why_logged / sizeof q->why_logged[0];
    while (i < n && q->why_logged[i] && q->why_logged[i] != why) i++;
    if (i < n && !q->why_logged[i]) {
        q->why_logged[i] = why;
        NB_LOGW("quantize: '%s' (and any like it): the checkpoint's codes have %s, so %s "
                "re-quantizes its dequantized weights", name, why, nb_wpath_name(path));
    }
    return NULL;
}

static enum nb_status add_matrix(struct qctx *q, const char *name, const struct nb_weight *w,
                                 enum nb_wpath path, int group, int linear, const float *imp)
{
    struct nb_layout_planes pl;
    struct nb_prequant *pq = prequant_of(q, w);
    if (group <= 0) group = q->o->group;
    /* a checkpoint's own codes before anything nibble computed from their dequantization;
     * a matrix that has 4-bit codes the build's path keeps stays at 4 bits whatever width
     * the recipe gives its class (the checkpoint's maker chose it: an exported lm_head) */
    const struct nb_src_codes *sc0 = q->m ? nb_model_src_codes(q->m, w) : NULL;
    if (sc0 && nb_wpath_is_int4(q->o->path) && !nb_wpath_is_int4(path) &&
        nb_src_codes_fit(sc0, q->o->path, NULL))
        return add_codes(q, name, w, sc0, q->o->path, linear);
    const struct nb_src_codes *sc = codes_for(q, name, w, path);
    if (sc) return add_codes(q, name, w, sc, path, linear);
    /* A quantized source (a GGUF k-quant file): a matrix stored with more than 4 bits
     * (Q5_K, Q6_K, Q8_0) is not cut to 4; a Q4_K matrix keeps its codes on w4a16 (its
     * sub-blocks are groups of 32) and is re-quantized in those groups on w4a8. */
    enum nb_wpath wide = kept_bits(path, w);
    if (wide != path) path = wide, pq = NULL;
    int from_q4k = w->format == NB_WF_Q4_K && path == NB_WPATH_W4A16;
    if (w->format == NB_WF_Q4_K && nb_wpath_is_int4(path)) group = 32;
    if (from_q4k) pq = NULL, imp = NULL;
    if (pq && nb_wformat_info(pq->q.format)->path == path && pq->q.group == group)
        return add_prequant(q, name, pq, linear);
    if (!nb_layout_planes(path, group, w->n_out, w->n_in, &pl)) {
        if (nb_wpath_is_int4(path) && w->n_in % group)
            return nb_set_error(NB_ERR_INVALID_ARG, "quantize: tensor '%s': K=%lld is not a "
                                "multiple of the group size %d", name, (long long)w->n_in, group);
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: tensor '%s' [%lld, %lld] does not fit "
                            "%s", name, (long long)w->n_out, (long long)w->n_in,
                            nb_wpath_name(path));
    }
    /* int4 weights go to disk in the layout the fast kernels read (X16: 16 output rows
     * interleaved); the same plane sizes, another byte order: quantized into the rows
     * scratch, then repacked into the matrix's own buffer */
    int layout = linear && q->layout == NB_LAYOUT_X16 && nb_wpath_is_int4(path) &&
                         w->n_out % 16 == 0
                     ? NB_LAYOUT_X16
                     : NB_LAYOUT_ROWS;
    if (!imp && q->last.blob && q->last.src == w->data && q->last.path == path &&
        q->last.group == group && q->last.layout == layout && q->last.n_out == w->n_out &&
        q->last.n_in == w->n_in)
        return write_matrix(q, name, path, group, layout, w, q->last.blob, (uint64_t)pl.total,
                            linear, q->last.rel_rms);
    void *blob = NULL, *x16 = NULL;
    if (layout == NB_LAYOUT_X16 && q->rows_cap < (size_t)pl.total) {
        free(q->rows);
        q->rows_cap = 0;
        if (!(q->rows = blob_alloc((size_t)pl.total)))
            return nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for '%s'", name);
        q->rows_cap = (size_t)pl.total;
    }
    if (!(layout == NB_LAYOUT_X16 ? (x16 = blob_alloc((size_t)pl.total))
                                  : (blob = blob_alloc((size_t)pl.total))))
        return nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for '%s'", name);
    int64_t n_chunks = (w->n_out + QUANT_CHUNK - 1) / QUANT_CHUNK;
    struct qjob *j = calloc(1, sizeof *j);
    struct nb_qstats *cs = calloc((size_t)n_chunks, sizeof *cs);
    enum nb_status st = NB_OK;
    if (!j || !cs) {
        st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    *j = (struct qjob){.block = NB_WF_COUNT, .path = path, .group = group, .search = q->o->search,
                       .from_q4k = from_q4k, .src = w,
                       .n_out = w->n_out, .n_in = w->n_in, .imp = imp,
                       .blob = x16 ? q->rows : blob, .x16 = x16, .repack_rows = q->repack_rows,
                       .n_chunks = n_chunks, .stats = cs, .buf = q->wbuf,
                       .buf_cap = q->wbuf_cap};
    atomic_init(&j->next, 0);
    int nth = nb_pool_size(q->pool) < QUANT_THREADS_MAX ? nb_pool_size(q->pool) : QUANT_THREADS_MAX;
    if (nth > n_chunks) nth = (int)n_chunks;
    nb_pool_run_n(q->pool, quant_worker, j, nth);
    if ((st = job_status(j, nth))) goto done;
    double err = 0, ref = 0;
    for (int64_t c = 0; c < n_chunks; c++) {
        err += cs[c].err_sq;
        ref += cs[c].ref_sq;
    }
    if (x16) {
        nth = nb_pool_size(q->pool) < QUANT_THREADS_MAX ? nb_pool_size(q->pool) : QUANT_THREADS_MAX;
        nb_pool_run_n(q->pool, repack_worker, j, nth);
        if ((st = job_status(j, nth))) goto done;
        blob = x16;
        x16 = NULL;
    }
    if ((st = keep(q, blob))) goto done;
    void *kept = blob;
    blob = NULL;
    double rel = ref > 0 ? sqrt(err / ref) : 0;
    q->last.blob = NULL;
    if (!imp) {
        q->last.src = w->data;
        q->last.path = path;
        q->last.group = group;
        q->last.layout = layout;
        q->last.n_out = w->n_out;
        q->last.n_in = w->n_in;
        q->last.blob = kept;
        q->last.rel_rms = rel;
    }
    st = write_matrix(q, name, path, group, layout, w, kept, (uint64_t)pl.total, linear, rel);
done:
    free(j);
    free(cs);
    free(blob);
    free(x16);
    return st;
}

/* A matrix in a GGUF block format nibble writes (quant/kquant.h: Q6_K, Q8_0), the rows'
 * format for a row gather (the embeddings), else its X16 records for the integer kernels.
 * Quantized in chunks of rows over the threads (a GGUF source's matrix stored in that
 * very format keeps its blocks), then repacked (lossless) as a GGUF file's are at load. */
static enum nb_status add_block(struct qctx *q, const char *name, const struct nb_weight *w,
                                enum nb_wformat rows_fmt, int linear, const float *imp)
{
    struct nb_block_info bi;
    struct nb_layout_planes pl, rl;
    nb_wformat_block(rows_fmt, &bi);
    const enum nb_wformat fmt = linear ? bi.x16 : bi.rows;
    if (!nb_wformat_planes(fmt, 0, w->n_out, w->n_in, &pl) ||
        !nb_wformat_planes(bi.rows, 0, w->n_out, w->n_in, &rl))
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: tensor '%s' [%lld, %lld] does not fit "
                            "%s", name, (long long)w->n_out, (long long)w->n_in, bi.dtype);
    int64_t n_chunks = (w->n_out + QUANT_CHUNK - 1) / QUANT_CHUNK;
    void *rows = blob_alloc((size_t)rl.total), *x16 = linear ? blob_alloc((size_t)pl.total) : NULL;
    struct qjob *j = calloc(1, sizeof *j);
    struct nb_qstats *cs = calloc((size_t)n_chunks, sizeof *cs);
    enum nb_status st = NB_OK;
    if (!rows || (linear && !x16) || !j || !cs) {
        st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory for '%s'", name);
        goto done;
    }
    *j = (struct qjob){.block = bi.rows, .src = w, .n_out = w->n_out, .n_in = w->n_in,
                       .imp = imp, .blob = rows, .x16 = x16, .n_chunks = n_chunks, .stats = cs,
                       .buf = q->wbuf, .buf_cap = q->wbuf_cap};
    atomic_init(&j->next, 0);
    int nth = nb_pool_size(q->pool) < QUANT_THREADS_MAX ? nb_pool_size(q->pool) : QUANT_THREADS_MAX;
    if (w->format == bi.rows) { /* a GGUF source's own blocks of this type: kept, every bit */
        memcpy(rows, w->data, (size_t)rl.total);
    } else {
        nb_pool_run_n(q->pool, quant_worker, j, nth < n_chunks ? nth : (int)n_chunks);
        if ((st = job_status(j, nth < n_chunks ? nth : (int)n_chunks))) goto done;
    }
    if (linear) {
        nb_pool_run_n(q->pool, repack_worker, j, nth);
        if ((st = job_status(j, nth))) goto done;
        free(rows);
        rows = x16;
        x16 = NULL;
    }
    if ((st = keep(q, rows))) goto done;
    const void *kept = rows;
    rows = NULL;
    st = write_block(q, name, w, fmt, kept, (uint64_t)pl.total, linear);
done:
    free(j);
    free(cs);
    free(rows);
    free(x16);
    return st;
}

static enum nb_status add_vector(struct qctx *q, const char *name, const float *v, int64_t n)
{
    if (!v) { /* absent (a bias this arch lacks): counted, so progress ends at its total */
        tick(q);
        return NB_OK;
    }
    int64_t shape[1] = {n};
    enum nb_status st = nb_nib_writer_add(q->w, name, NB_NIB_PACKED, NB_WPATH_F32, 0, 0, 1, shape, v,
                                          (uint64_t)n * 4);
    if (st) return st;
    q->file_bytes += (uint64_t)n * 4;
    q->file_params += n;
    if (q->o->report) q->o->report(name, "f32", 1, n, (uint64_t)n * 4, 0, q->o->user);
    tick(q);
    return NB_OK;
}

/* The head's and the embeddings' paths: the recipe's on the int4 paths; else --head
 * (default 8: w8a16) and --embd (default 8) around the one path. */
static enum nb_wpath head_path(const struct nb_quantize_opts *o, const struct nb_recipe *rc)
{
    if (nb_wpath_is_int4(o->path)) return nb_recipe_path(o->path, rc->head_bits);
    if (o->path == NB_WPATH_F32 || o->path == NB_WPATH_BF16) return o->path;
    switch (o->head_bits) {
    case 4: return o->path == NB_WPATH_W8A16 ? NB_WPATH_W4A16 : o->path;
    case 16: return NB_WPATH_BF16;
    default: return NB_WPATH_W8A16;
    }
}

static enum nb_wpath embd_path(const struct nb_quantize_opts *o, const struct nb_recipe *rc)
{
    if (nb_wpath_is_int4(o->path)) /* not a GEMM: the finer asymmetric grid at 4 bits (and
                                      for a 6-bit width that Q6_K cannot take) */
        return rc->embd_bits == 4 || rc->embd_bits == 6 ? NB_WPATH_W4A16
                                                        : nb_recipe_path(o->path, rc->embd_bits);
    if (o->path == NB_WPATH_F32 || o->path == NB_WPATH_BF16) return o->path;
    return o->embd_bits == 16 ? NB_WPATH_BF16 : o->embd_bits == 4 ? NB_WPATH_W4A16 : NB_WPATH_W8A16;
}

/* The embeddings' path for this model: a GPTQ / AWQ checkpoint keeps its float
 * embeddings at 16 bits on an int4 build (their maker left them unquantized, as vLLM
 * runs them; a row gather costs no bandwidth per token), so that `nibble run` on
 * nibble's own GPTQ export rebuilds the .nib it came from; else embd_path. */
static enum nb_wpath src_embd_path(const struct nb_model *m, const struct nb_quantize_opts *o,
                                   const struct nb_recipe *rc)
{
    if (m->source_quant && nb_wpath_is_int4(o->path) && !nb_model_src_codes(m, &m->tok_embd))
        return NB_WPATH_BF16;
    return embd_path(o, rc);
}

/* Mean squared activation of each input channel (the importance of its weights), from
 * the calibration sums; NULL without calibration. */
static const float *importance(struct qctx *q, const double *sum, int64_t n)
{
    if (!q->stats || !sum || q->stats->n_tokens <= 0) return NULL;
    nb_act_importance(sum, n, q->stats->n_tokens, q->imp);
    return q->imp;
}

/* A tied head whose head and embeddings get the same width is stored once: the head's
 * matrix (its format, group and importance: GPTQ's when it ran), which the gather decodes a
 * row at a time (model/forward.c) — one copy where two cost twice the bytes (docs/
 * quantization.md, "One copy of a tied head"). A source that stores the head apart, or
 * a recipe that gives the two different widths, keeps two. */
static int shared_head(const struct nb_model *m, const struct nb_quantize_opts *o,
                       const struct nb_recipe *rc)
{
    if (!m->cfg.tied_head || m->output.data != m->tok_embd.data) return 0;
    return nb_wpath_is_int4(o->path) ? nb_recipe_shared_head(m, rc)
                                     : head_path(o, rc) == src_embd_path(m, o, rc);
}

static enum nb_status add_width(struct qctx *q, const char *name, const struct nb_weight *w,
                                int bits, int group, int linear, const float *imp,
                                enum nb_wpath other)
{
    if (bits == 6 || bits == 8) {
        enum nb_wformat f = nb_recipe_block_of(q->m, q->o->path, w, bits, linear);
        struct nb_prequant *pq = linear ? prequant_of(q, w) : NULL;
        if (f != NB_WF_COUNT && pq) /* GPTQ's codes on the block grid (the same rule chose it) */
            return add_prequant(q, name, pq, linear);
        if (f != NB_WF_COUNT) return add_block(q, name, w, f, linear, imp);
        if (bits == 6 && nb_wpath_is_int4(q->o->path) && w->data &&
            nb_recipe_block(w, 6, linear, NULL) == NB_WF_COUNT)
            NB_LOGW("quantize: '%s' [%lld, %lld] does not take Q6_K blocks (K a multiple of "
                    "256): %s", name, (long long)w->n_out, (long long)w->n_in,
                    nb_wpath_name(other));
    }
    return add_matrix(q, name, w, other, group, linear, imp);
}

static enum nb_status add_tensors(struct qctx *q, const struct nb_model *m)
{
    const struct nb_config *c = &m->cfg;
    const struct nb_recipe *rc = &q->rc;
    enum nb_status st;
    char name[128];
    int64_t E = c->n_embd, Q = (int64_t)c->n_heads * c->head_dim;
    int64_t KV = (int64_t)c->n_kv_heads * c->head_dim;
    const struct nb_act_stats *S = q->stats;
    int64_t F = c->n_ff;
    const int shared = shared_head(m, q->o, rc);
    if (shared) { /* one copy, the head's, gathered from */
        if ((st = add_width(q, "token_embd.weight", &m->output, rc->head_bits, rc->head_group, 1,
                            importance(q, S ? S->out_in : NULL, E), head_path(q->o, rc))))
            return st;
        tick(q); /* the head, counted in q.total */
    }
    if ((!shared && (st = add_width(q, "token_embd.weight", &m->tok_embd, rc->embd_bits,
                                    rc->embd_group, 0, NULL, src_embd_path(m, q->o, rc)))) ||
        (st = add_vector(q, "output_norm.weight", m->out_norm, E)) ||
        (!shared && (st = add_width(q, "output.weight", &m->output, rc->head_bits,
                                    rc->head_group, 1, importance(q, S ? S->out_in : NULL, E),
                                    head_path(q->o, rc)))) ||
        (st = add_vector(q, "rope_inv_freq", m->rope_inv_freq, c->head_dim / 2)))
        return st;
    for (int l = 0; l < c->n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
#define MAT(suffix, field, cls, stat, n)                                                           \
    snprintf(name, sizeof name, "blk.%d." suffix, l);                                              \
    if ((st = add_width(q, name, &L->field, rc->bits[l][cls], 0, 1,                               \
                        importance(q, S ? S->stat + l * (n) : NULL, n),                             \
                        nb_recipe_path(q->o->path, rc->bits[l][cls]))))                             \
    return st
#define VEC(suffix, field, n)                                                                      \
    snprintf(name, sizeof name, "blk.%d." suffix, l);                                              \
    if ((st = add_vector(q, name, L->field, n))) return st
        VEC("attn_norm.weight", attn_norm, E);
        MAT("attn_q.weight", wq, NB_TC_Q, attn_in, E);
        MAT("attn_k.weight", wk, NB_TC_K, attn_in, E);
        MAT("attn_v.weight", wv, NB_TC_V, attn_in, E);
        VEC("attn_q.bias", bq, Q);
        VEC("attn_k.bias", bk, KV);
        VEC("attn_v.bias", bv, KV);
        VEC("attn_q_norm.weight", q_norm, c->head_dim);
        VEC("attn_k_norm.weight", k_norm, c->head_dim);
        if (L->head_gate.data) {
            MAT("attn_gate.weight", head_gate, NB_TC_Q, attn_in, E);
        } else {
            tick(q); /* counted in q.total either way */
        }
        MAT("attn_output.weight", wo, NB_TC_O, attn_out, Q);
        VEC("attn_output.bias", bo, E);
        VEC("ffn_norm.weight", ffn_norm, E);
        MAT("ffn_gate.weight", w_gate, NB_TC_GATE, ffn_in, E);
        MAT("ffn_up.weight", w_up, NB_TC_UP, ffn_in, E);
        MAT("ffn_down.weight", w_down, NB_TC_DOWN, ffn_mid, F);
#undef MAT
#undef VEC
    }
    return NB_OK;
}

static cJSON *make_header(const struct nb_model *m, const struct nb_quantize_opts *o,
                          const struct nb_recipe *rc, const char *src_path, uint64_t src_hash)
{
    cJSON *h = cJSON_CreateObject();
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)src_hash);
    cJSON_AddStringToObject(h, "nibble_version", NIBBLE_VERSION_STRING);
    cJSON_AddStringToObject(h, "weight_path", nb_wpath_name(o->path));
    cJSON_AddNumberToObject(h, "layout", nb_quantize_opts_layout(o));
    cJSON_AddNumberToObject(h, "group", o->group);
    const int shared = shared_head(m, o, rc);
    const enum nb_wformat hb = nb_recipe_block_of(m, o->path, &m->output, rc->head_bits, 1);
    const enum nb_wformat eb = nb_recipe_block_of(m, o->path, &m->tok_embd, rc->embd_bits, 0);
    const char *head = hb != NB_WF_COUNT ? nb_wformat_info(hb)->name
                                         : nb_wpath_name(kept_bits(head_path(o, rc), &m->output));
    char tied[64];
    snprintf(tied, sizeof tied, "%s (tied: one copy)", head);
    cJSON_AddStringToObject(h, "head", shared ? tied : head);
    cJSON_AddStringToObject(h, "embeddings",
                            shared ? "the head's copy"
                            : eb != NB_WF_COUNT ? nb_wformat_info(eb)->name
                                : nb_wpath_name(kept_bits(src_embd_path(m, o, rc), &m->tok_embd)));
    cJSON *src = cJSON_AddObjectToObject(h, "source");
    cJSON_AddStringToObject(src, "path", src_path);
    cJSON_AddStringToObject(src, "kind", m->source_kind);
    if (m->source_quant) cJSON_AddStringToObject(src, "quantization", m->source_quant);
    cJSON_AddStringToObject(src, "xxh3", hex);
    cJSON *r = cJSON_AddObjectToObject(h, "recipe");
    cJSON_AddStringToObject(r, "scale_search", o->search ? "weighted-mse" : "absmax");
    if (nb_wpath_is_int4(o->path)) cJSON_AddItemToObject(r, "bits", nb_recipe_to_json(rc));
    if (o->calib_path) {
        cJSON_AddStringToObject(r, "calib", o->calib_path);
        if (o->calib_tokens > 0) cJSON_AddNumberToObject(r, "calib_tokens", o->calib_tokens);
        cJSON_AddStringToObject(r, "importance", "mean squared input activation per channel");
    }
    if (o->gptq) {
        cJSON *g = cJSON_AddObjectToObject(r, "gptq");
        cJSON_AddStringToObject(g, "groups", "static (scales chosen before the sweep)");
        cJSON_AddNumberToObject(g, "damp", o->gptq_damp > 0 ? o->gptq_damp
                                           : rc->damp > 0   ? rc->damp
                                                            : 0.01);
        cJSON_AddBoolToObject(g, "act_order", o->act_order != 0);
    }
    struct nb_config cfg = m->cfg;
    cfg.tied_head = shared; /* else the head has its own (quantized) copy */
    cJSON_AddItemToObject(h, "config", nb_config_to_json(&cfg));
    return h;
}

/* The widths before calibration: the named recipe with --head/--embd over it; for --bpw
 * balanced until the budget (which needs the activations) chooses, before GPTQ runs. */
static enum nb_status start_recipe(struct qctx *q, const struct nb_model *m,
                                   const struct nb_quantize_opts *o)
{
    int L = m->cfg.n_layers;
    if (!nb_wpath_is_int4(o->path)) {
        if (o->recipe || o->bpw > 0 || (o->bits && *o->bits))
            return nb_set_error(NB_ERR_INVALID_ARG, "quantize: --recipe, --bits and --bpw need "
                                "an int4 weight path (w4a8, w4a16), not %s",
                                nb_wpath_name(o->path));
        return nb_recipe_named(NULL, L, &q->rc);
    }
    if (o->bpw > 0 && (o->recipe || o->head_bits || o->embd_bits || (o->bits && *o->bits)))
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: --bpw chooses every width itself: "
                            "drop --recipe, --head, --embd and --bits");
    enum nb_status st = nb_recipe_named(o->bpw > 0 ? "balanced" : o->recipe, L, &q->rc);
    if (st) return st;
    /* a recipe's finer groups, never coarser than the build's, and only where they fit */
    nb_recipe_fit_groups(&q->rc, m, o->group);
    size_t n = strlen(q->rc.name);
    if (o->head_bits && o->head_bits != q->rc.head_bits) {
        q->rc.head_bits = (uint8_t)o->head_bits;
        n += (size_t)snprintf(q->rc.name + n, sizeof q->rc.name - n, ", head %d", o->head_bits);
    }
    if (o->embd_bits && o->embd_bits != q->rc.embd_bits && n < sizeof q->rc.name) {
        q->rc.embd_bits = (uint8_t)o->embd_bits;
        snprintf(q->rc.name + n, sizeof q->rc.name - n, ", embd %d", o->embd_bits);
    }
    if (o->bits && *o->bits && (st = nb_recipe_set_bits(&q->rc, o->bits))) return st;
    return NB_OK;
}

/* Would writing out_path replace the source (or a file of a source folder)? */
static int replaces_source(const char *src_path, const char *out_path)
{
    if (nb_same_file(src_path, out_path)) return 1;
    struct stat sb;
    if (stat(src_path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
    char *src = realpath(src_path, NULL), *out = realpath(out_path, NULL);
    int inside = 0;
    if (src && out) {
        char *slash = strrchr(out, '/');
        if (slash) *slash = '\0';
        inside = strcmp(src, slash == out ? "/" : out) == 0;
    }
    free(src);
    free(out);
    return inside;
}

/* The tensors' checksums, on all threads (the writer would take them one by one). */
struct sum_job {
    struct nb_nib_writer *w;
    atomic_llong next;
};

static void sum_worker(void *arg, int ith, int nth)
{
    struct sum_job *j = arg;
    int64_t n = nb_nib_writer_count(j->w);
    for (int64_t i; (i = atomic_fetch_add(&j->next, 1)) < n;) nb_nib_writer_checksum(j->w, i);
    (void)ith;
    (void)nth;
}

/* The source's content hash (for the header), on a thread of its own while the rest
 * works: it reads the whole source once more, seconds for a 3 GB model on one core, and
 * nothing before the header needs it. */
struct hash_job {
    const struct nb_source *src;
    uint64_t hash;
    enum nb_status st;
    char msg[256];
    pthread_t th;
    int running;
};

static void *hash_main(void *arg)
{
    struct hash_job *h = arg;
    h->st = nb_source_hash(h->src, &h->hash);
    if (h->st) snprintf(h->msg, sizeof h->msg, "%s", nb_last_error());
    return NULL;
}

static void hash_start(struct hash_job *h, const struct nb_source *src)
{
    h->src = src;
    h->running = pthread_create(&h->th, NULL, hash_main, h) == 0;
    if (!h->running) hash_main(h); /* no thread: here and now */
}

/* The hash, once the thread is done; its error set again on this thread. */
static enum nb_status hash_finish(struct hash_job *h)
{
    if (h->running) pthread_join(h->th, NULL);
    h->running = 0;
    return h->st ? nb_set_error(h->st, "%s", h->msg) : NB_OK;
}

/* Does every linear matrix of the layers keep what its source stored on `path`: a
 * checkpoint's codes, a GGUF Q4_K's on w4a16, or 8 bits for a matrix the file stored
 * with more than 4? Then GPTQ would compute blobs nobody writes. */
static int all_codes_fit(const struct nb_model *m, enum nb_wpath path)
{
    if (!nb_wpath_is_int4(path)) return 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct nb_layer *L = &m->layers[l];
        const struct nb_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                        &L->w_down, &L->head_gate};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            const struct nb_weight *w = ws[i];
            if (!w->data || w->src_bits > 4 || (w->format == NB_WF_Q4_K && path == NB_WPATH_W4A16))
                continue;
            const struct nb_src_codes *sc = nb_model_src_codes(m, w);
            if (!sc || !nb_src_codes_fit(sc, path, NULL)) return 0;
        }
    }
    return 1;
}

enum nb_status nb_quantize_check_opts(const struct nb_quantize_opts *opts)
{
    if (opts->gptq && !opts->calib_path)
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: --gptq needs a calibration text "
                            "(--calib FILE)");
    return NB_OK;
}

/* Quantize into out_path, or into memory (*fd_out) when out_path is NULL. */
static enum nb_status quantize_to(struct nb_source *src, const struct nb_quantize_opts *opts,
                                  const char *out_path, int *fd_out,
                                  struct nb_quantize_result *res)
{
    enum nb_status st;
    struct nb_model *m = NULL;
    struct qctx q = {.o = opts};
    struct nb_blob_list blobs = {0};
    struct nb_act_stats calib = {0};
    struct nb_calib cal = {0};
    cJSON *header = NULL;
    struct hash_job hj = {.hash = opts->source_hash};
    double t0 = nb_time_s();
    const char *src_path = src->path;
    memset(res, 0, sizeof *res);
    if ((st = nb_quantize_check_opts(opts))) return st; /* before anything is read */
    if (!opts->have_source_hash) hash_start(&hj, src);
    if ((st = nb_model_load_source(&m, src))) goto fail;
    q.m = m;
    if ((st = start_recipe(&q, m, opts))) goto fail;
    struct nb_quantize_opts eff = *opts; /* what is done (the header says it) */
    if (eff.gptq && all_codes_fit(m, eff.path)) {
        NB_LOGI("quantize: %s: every matrix keeps the %s codes: no GPTQ pass", src_path,
                m->source_quant ? m->source_quant : "file's");
        eff.gptq = 0;
        if (opts->bpw <= 0) eff.calib_path = NULL; /* nor the statistics: nothing reads them */
    }
    if (eff.calib_path) {
        const struct nb_config *cc = &m->cfg;
        int64_t Qd = (int64_t)cc->n_heads * cc->head_dim;
        int64_t mx = cc->n_ff > cc->n_embd ? cc->n_ff : cc->n_embd;
        q.imp = malloc(sizeof(float) * (size_t)(mx > Qd ? mx : Qd));
        if (!q.imp) {
            st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
            goto fail;
        }
        if ((st = nb_act_stats_init(&calib, cc)) ||
            (st = nb_calib_load(&cal, opts->calib_path, m, opts->calib_tokens)))
            goto fail;
        /* the budget's widths come first: GPTQ sweeps each matrix on its final grid */
        if (opts->bpw > 0 && nb_wpath_is_int4(opts->path) &&
            ((st = nb_calib_stats(m, &cal, opts->n_threads, &calib)) ||
             (st = nb_recipe_budget(m, opts->path, opts->group, opts->bpw, &calib,
                                    opts->n_threads, &q.rc))))
            goto fail;
        if (eff.gptq) {
            /* a Q6_K or Q8_0 head: GPTQ on that block grid */
            enum nb_wformat hb = nb_recipe_block_of(m, opts->path, &m->output, q.rc.head_bits, 1);
            enum nb_wpath hp = hb != NB_WF_COUNT ? NB_WPATH_F32 : head_path(opts, &q.rc);
            struct nb_gptq_opts go = {.path = opts->path, .head_path = hp, .head_block = hb,
                                      .recipe = &q.rc,
                                      .group = opts->group, .layout = nb_quantize_opts_layout(opts),
                                      .search = opts->search, .act_order = opts->act_order,
                                      .n_threads = opts->n_threads,
                                      .damp = opts->gptq_damp > 0 ? opts->gptq_damp : q.rc.damp,
                                      .max_tokens = opts->calib_tokens,
                                      .progress = opts->progress, .user = opts->user};
            nb_act_stats_free(&calib); /* GPTQ's passes sum them again, as quantized */
            if (!(st = nb_act_stats_init(&calib, &m->cfg)))
                st = nb_gptq_model(m, &cal, &go, &q.pre, &q.n_pre, &calib);
        } else if (opts->bpw <= 0) {
            st = nb_calib_stats(m, &cal, opts->n_threads, &calib);
        }
        if (st) goto fail;
        q.stats = &calib;
    } else if (nb_wpath_is_int4(opts->path) && opts->bpw > 0 &&
               (st = nb_recipe_budget(m, opts->path, opts->group, opts->bpw, NULL,
                                      opts->n_threads, &q.rc))) {
        goto fail;
    }
    if (nb_wpath_is_int4(opts->path)) {
        snprintf(res->recipe, sizeof res->recipe, "%s", q.rc.name);
        nb_recipe_table(&q.rc, res->recipe_table, sizeof res->recipe_table);
    }
    if ((st = nb_pool_init(&q.pool, opts->n_threads, 0))) goto fail;
    q.layout = nb_quantize_opts_layout(opts);
    q.repack_rows = opts->repack_rows > 0 ? opts->repack_rows : 0;
    if ((st = nb_nib_writer_init(&q.w))) goto fail;
    const struct nb_config *c = &m->cfg;
    q.total = 4 + (int64_t)c->n_layers * 16; /* add_tensors' calls: absent ones tick too */
    if ((st = add_tensors(&q, m))) goto fail;
    uint64_t planned;
    int64_t pp;
    if (nb_wpath_is_int4(opts->path) && !m->source_quant &&
        nb_recipe_plan(m, opts->path, opts->group, &q.rc, &planned, &pp) == NB_OK &&
        planned != q.file_bytes) /* the budget counts on the plan */
        NB_LOGW("quantize: %s: the recipe's plan is %llu bytes of tensors, %llu were written",
                src_path, (unsigned long long)planned, (unsigned long long)q.file_bytes);
    if (m->source_quant && nb_wpath_is_int4(opts->path))
        NB_LOGI("quantize: %s: %lld int4 matrices kept the checkpoint's codes, %lld were "
                "re-quantized", m->source_quant, (long long)q.n_kept, (long long)q.n_requant);
    /* a source without a tokenizer still quantizes (e.g. random-weight test models) */
    if (nb_tokenizer_embed(q.w, src, &blobs) != NB_OK)
        NB_LOGW("quantize: %s: no tokenizer embedded (%s)", src_path, nb_last_error());
    if ((st = hash_finish(&hj))) goto fail;
    header = make_header(m, &eff, &q.rc, src_path, hj.hash);
    if (!header) {
        st = nb_set_error(NB_ERR_NOMEM, "quantize: out of memory");
        goto fail;
    }
    res->linear_bytes = q.linear_bytes;
    res->linear_params = q.linear_params;
    res->file_params = q.file_params;
    res->bpw_linear = q.linear_params ? 8.0 * (double)q.linear_bytes / (double)q.linear_params : 0;
    cJSON *bpw = cJSON_AddObjectToObject(header, "bits_per_weight");
    cJSON_AddNumberToObject(bpw, "linear", res->bpw_linear);
    cJSON_AddNumberToObject(bpw, "tensors", q.file_params ? 8.0 * (double)q.file_bytes /
                                                                (double)q.file_params : 0);
    struct sum_job sj = {.w = q.w};
    atomic_init(&sj.next, 0);
    nb_pool_run(q.pool, sum_worker, &sj);
    st = out_path ? nb_nib_writer_write(q.w, header, out_path)
                  : nb_nib_writer_write_memory(q.w, header, "(in memory)", fd_out);
    header = NULL; /* consumed */
    if (st) goto fail;
    struct stat sb;
    if (out_path ? stat(out_path, &sb) == 0 : fstat(*fd_out, &sb) == 0)
        res->file_bytes = (uint64_t)sb.st_size;
    res->bpw_file = q.file_params ? 8.0 * (double)res->file_bytes / (double)q.file_params : 0;
    res->seconds = nb_time_s() - t0;
fail:
    if (hj.running) { /* an earlier failure: wait for the thread, keep that failure */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nb_last_error());
        hash_finish(&hj);
        nb_set_error(st, "%s", msg);
    }
    cJSON_Delete(header);
    nb_nib_writer_free(q.w);
    nb_blob_list_free(&blobs);
    nb_act_stats_free(&calib);
    nb_calib_free(&cal);
    nb_prequant_free(q.pre, q.n_pre);
    free(q.imp);
    for (int64_t i = 0; i < q.n_owned; i++) free(q.owned[i]);
    free(q.owned);
    free(q.rows);
    for (int i = 0; i < QUANT_THREADS_MAX; i++) free(q.wbuf[i]);
    nb_pool_free(q.pool);
    nb_model_free(m);
    return st;
}

enum nb_status nb_quantize_file(struct nb_source *src, const struct nb_quantize_opts *opts,
                                const char *out_path, struct nb_quantize_result *res)
{
    memset(res, 0, sizeof *res);
    if (replaces_source(src->path, out_path))
        return nb_set_error(NB_ERR_INVALID_ARG, "quantize: the output %s would replace the source "
                            "model (%s): choose another output file", out_path, src->path);
    return quantize_to(src, opts, out_path, NULL, res);
}

enum nb_status nb_quantize_memory(struct nb_source *src, const struct nb_quantize_opts *opts,
                                  int *fd_out, struct nb_quantize_result *res)
{
    *fd_out = -1;
    return quantize_to(src, opts, NULL, fd_out, res);
}
