/* quant/gptq.h — GPTQ: quantize a matrix column by column, each column's rounding error
 * compensated in the columns not yet quantized, weighted by the inverse Hessian of the
 * layer's inputs (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
 * Generative Pre-trained Transformers", 2022; written here from the paper).
 *
 * For y = W x over calibration inputs X (tokens x n_in), the layer's output error of a
 * quantized W^ is  sum_t |(W - W^) x_t|^2 = tr((W - W^) H (W - W^)^T),  H = X^T X.
 * Rows are independent; along a row, quantizing column i with error e_i and updating
 * the later columns by  w_j -= e_i / U_ii * U_ij  (U: upper Cholesky factor of H^-1)
 * is the optimal correction for that loss (the Optimal Brain Surgeon step).
 *
 * nibble's variant keeps the packed format unchanged (static groups): every group's
 * scale (and min) is chosen before the sweep, from the original weights, by the scale
 * search of quant.h weighted by diag(H) (an imatrix); the sweep then only chooses codes
 * on those fixed grids. So a GPTQ blob is an ordinary ROWS blob that every kernel reads,
 * and act-order (sweeping columns by descending H_ii) needs no permutation at load time.
 *
 * Steps: dampen H (+ damp * mean(diag H) on the diagonal; a column no input reaches,
 * H_ii = 0, gets H_ii = 1 and weight 0), U = chol(H^-1) upper, then lazy blocks of
 * `block` columns: the sweep inside a block, one GEMM to update the columns after it.
 * Linear algebra in double through LAPACK / BLAS (OpenBLAS).
 */
#ifndef NB_QUANT_GPTQ_H
#define NB_QUANT_GPTQ_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"

struct nb_gptq_params {
    double damp;   /* added to H's diagonal, times mean(diag H) (default 0.01) */
    int block;     /* columns per lazy block (default 128) */
    int act_order; /* sweep columns by descending H_ii (default 0) */
    int search;    /* the static groups' scale search, as nb_quantize_rows (default 1) */
    int n_threads; /* threads for the scale search and the sweep (rows are independent;
                      BLAS runs its own threads); default 1 */
};
struct nb_gptq_params nb_gptq_default_params(void);

/* The proxy loss tr(E H E^T), E = W - W^ (the layer's summed squared output error over
 * the calibration inputs H came from), of GPTQ's result and of round-to-nearest with
 * the same static groups; and the seconds of the static groups' scale search and of the
 * sweep. */
struct nb_gptq_stats {
    double loss, loss_rtn;
    double seconds_search, seconds_sweep;
};

/* Quantize w [n_out][n_in] (row-major f32) for an int4 path (w4a8 or w4a16) into
 * `blob`, a ROWS blob of nb_layout_planes(path, group, n_out, n_in).total bytes (as
 * nb_quantize_rows). H [n_in][n_in]: sum over calibration tokens of x x^T for this
 * matrix's input (symmetric, positive semi-definite; not modified). stats may be NULL;
 * computing them costs two more n_out x n_in x n_in products.
 * Errors: NB_ERR_INVALID_ARG for another path or a shape that does not fit,
 * NB_ERR_NOMEM, NB_ERR_INTERNAL when H stays indefinite after dampening tenfold twice. */
enum nb_status nb_gptq_quantize(enum nb_wpath path, int group, const float *w, int64_t n_out,
                                int64_t n_in, const double *H, const struct nb_gptq_params *p,
                                void *blob, struct nb_gptq_stats *stats);

/* The part of GPTQ that depends on H alone, shared by the matrices that read the same
 * input (q, k, v; gate, up): the sweep order, the dead columns, the upper Cholesky
 * factor of the dampened H^-1 and diag(H) as the static groups' importance. */
struct nb_gptq_factor {
    int64_t n;
    int64_t *perm; /* [n] the sweep order (act_order: by descending H_ii) */
    uint8_t *dead; /* [n] in sweep order: a column no input reaches */
    double *u;     /* [n][n] upper, in sweep order */
    float *imp;    /* [n] diag(H), original order */
};
/* H [n][n] as above (not modified); p's damp and act_order are used (NULL: defaults).
 * Errors: NB_ERR_NOMEM, NB_ERR_INTERNAL when H stays indefinite (as above). */
enum nb_status nb_gptq_factor_init(struct nb_gptq_factor *f, const double *H, int64_t n,
                                   const struct nb_gptq_params *p);
void nb_gptq_factor_free(struct nb_gptq_factor *f);
/* nb_gptq_quantize with the factor of its H (f->n == n_in, made with the same damp and
 * act_order). H is only read for the losses of stats: NULL skips them (stats then only
 * get the seconds). */
enum nb_status nb_gptq_quantize_factored(enum nb_wpath path, int group, const float *w,
                                         int64_t n_out, int64_t n_in,
                                         const struct nb_gptq_factor *f, const double *H,
                                         const struct nb_gptq_params *p, void *blob,
                                         struct nb_gptq_stats *stats);

/* GPTQ onto a GGUF block format nibble writes (quant/kquant.h: fmt NB_WF_Q6_K or NB_WF_Q8_0,
 * the file rows): the static scales are kquant's weighted search with diag(H) (f->imp) as
 * the importance, then the sweep chooses every code on its sub-block's decoded scale
 * (Q8_0: -127..127 per 32; Q6_K: -32..31 per 16), so the blocks are ordinary blocks
 * that every reader and kernel of the format takes. dst: n_out rows of n_in / elems
 * blocks. stats (may be NULL) gets the seconds only. Errors as nb_gptq_quantize. */
enum nb_status nb_gptq_quantize_blocks(enum nb_wformat fmt, const float *w, int64_t n_out,
                                       int64_t n_in, const struct nb_gptq_factor *f,
                                       const struct nb_gptq_params *p, void *dst,
                                       struct nb_gptq_stats *stats);

/* tr(E H E^T) for E = w - wq, both [n_out][n_in] f32: the proxy loss above. */
double nb_gptq_loss(const float *w, const float *wq, int64_t n_out, int64_t n_in,
                    const double *H);

#endif
