/* quant/quant.h — 4- and 8-bit weight grids, the scale search, and packing whole
 * matrices into the layouts of core/wformat.h.
 *
 * Grids (one group = G consecutive weights of a row along K; w8a16: the whole row):
 *
 *   w4a8   symmetric int4, zero fixed at 8     w ~ d * (q - 8)   q 0..15, d bf16
 *            codes:  0    1   ...   8   ...  15
 *            value: -8d  -7d  ...   0   ...  7d        (d may be negative)
 *   w4a16  asymmetric int4                     w ~ d * q + m     q 0..15, d, m bf16
 *            value:  m   m+d  ...  m+15d
 *   w8a16  symmetric int8 per output row       w ~ d * q         q -127..127, d f32
 *
 * Scale choice (`search`):
 *   0  absmax:  w4a8  d = x_amax / -8 (x_amax: the signed value of largest |x|,
 *                     which lands exactly on code 0, as GGUF Q4_0 does);
 *               w4a16 d = (max - min) / 15, m = min;
 *               w8a16 d = max|x| / 127.
 *   1  search:  minimise E = sum_i imp_i (x_i - x^_i)^2 over candidate scales: for
 *               each candidate inverse scale around absmax, round to codes, refit
 *               the scale (and min) by weighted least squares for those codes, round
 *               the fit to its stored type (bf16), re-quantize to the nearest codes
 *               with the rounded values and score E on exactly the stored values.
 *               The absmax candidate is one of the scored candidates, so the result
 *               is never worse than absmax on the same group (ties keep absmax).
 * `imp` is a per-column importance (e.g. mean x_i^2 over calibration tokens, an
 * imatrix); NULL means all ones. Entries must be finite and >= 0.
 */
#ifndef NB_QUANT_QUANT_H
#define NB_QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"

/* Largest group the per-group functions take (they work on the stack). */
#define NB_QUANT_GROUP_MAX 256

/* Bytes of scratch nb_quant_row_w8a16 needs for a row of n weights. */
#define NB_QUANT_W8_SCRATCH(n) ((size_t)(n) * (sizeof(float) + 2))

/* Weighted squared error sum_i imp_i * (x_i - xhat_i)^2 in double, i ascending,
 * each term computed as `imp_i * diff * diff` with diff = (double)x_i - xhat_i
 * (imp NULL: imp_i = 1). The search scores candidates with this very function. */
double nb_quant_wsqerr(const float *x, const float *xhat, const float *imp, int64_t n);

/* ---- one group / one row (exposed for tests and for GPTQ-style callers) ----
 * Each writes the codes and the stored scale(s) and returns the weighted error
 * nb_quant_wsqerr(x, decoded, imp, n) of what it stored. Inputs must be finite. */

/* w4a8 group of n (1..NB_QUANT_GROUP_MAX) weights: q[n] codes 0..15, *d bf16 bits. */
double nb_quant_group_w4a8(const float *x, const float *imp, int n, int search, uint8_t *q,
                           uint16_t *d);
/* w4a16 group: q[n] codes 0..15, *d and *m bf16 bits. */
double nb_quant_group_w4a16(const float *x, const float *imp, int n, int search, uint8_t *q,
                            uint16_t *d, uint16_t *m);
/* w8a16 row of n weights: q[n] in -127..127, *d f32. scratch: NB_QUANT_W8_SCRATCH(n)
 * bytes, float-aligned. */
double nb_quant_row_w8a16(const float *x, const float *imp, int64_t n, int search, int8_t *q,
                          float *d, void *scratch);

/* The code of x on a group's grid with stored scale d (and min m), exactly as the
 * quantizer assigns it after choosing the scale: w4a8 round(x / d) + 8, w4a16
 * round((x - m) / d), clamped to 0..15 (GPTQ quantizes column by column with these). */
int nb_quant_code_w4a8(float x, float d);
int nb_quant_code_w4a16(float x, float d, float m);

/* ---- whole matrices ---- */

/* Unweighted totals over the rows a call quantized. */
struct nb_qstats {
    double err_sq; /* sum (w - w^)^2 */
    double ref_sq; /* sum w^2 */
};

/* Quantize rows [r0, r1) of w [n_out][n_in] (row-major f32) into `blob`, a buffer
 * of nb_layout_planes(path, group, n_out, n_in).total bytes, 64-byte aligned.
 *   f32: copy; bf16: round to nearest even; w8a16, w4a16, w4a8: the grids above.
 * `group` is used by the int4 paths only (32, 64 or 128, dividing n_in).
 * Thread-safe: threads may fill disjoint row ranges of one blob concurrently. A call
 * whose range ends at n_out also zeroes the padding after each plane, so a blob
 * filled completely is fully defined (and deterministic).
 * importance: [n_in] or NULL. stats (may be NULL) is overwritten with this call's
 * totals; sum them over threads.
 * Errors: NB_ERR_INVALID_ARG for a shape that does not fit the path (e.g.
 * "w4a8: K=100 is not a multiple of the group size 32"), a bad row range, a
 * misaligned blob, a non-finite weight or a negative / non-finite importance;
 * NB_ERR_NOMEM. */
enum nb_status nb_quantize_rows(enum nb_wpath path, int group, const float *w, int64_t n_out,
                                int64_t n_in, int64_t r0, int64_t r1, const float *importance,
                                int search, void *blob, struct nb_qstats *stats);

/* nb_quantize_rows with `rows` holding rows [r0, r1) only: [r1 - r0][n_in] (a caller
 * that converts a source matrix a block of rows at a time). The same checks, bytes
 * and stats. */
enum nb_status nb_quantize_rows_at(enum nb_wpath path, int group, const float *rows,
                                   int64_t n_out, int64_t n_in, int64_t r0, int64_t r1,
                                   const float *importance, int search, void *blob,
                                   struct nb_qstats *stats);

/* Decode rows [r0, r1) of a packed blob into out [r1 - r0][n_in] (the exact values
 * the reference kernels use). Same shape errors as nb_quantize_rows. */
enum nb_status nb_dequantize_rows(enum nb_wpath path, int group, const void *blob, int64_t n_out,
                                  int64_t n_in, int64_t r0, int64_t r1, float *out);


#endif
