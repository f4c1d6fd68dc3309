/* quant/unpack.h — integer codes a checkpoint brings with it: unpack and dequantize
 * them, and re-pack them into nibble's int4 grids without rounding any weight again.
 *
 * A "source codes" record describes one matrix W [n_out][n_in] whose checkpoint stores
 * it as integer codes on per-group grids. Whatever the source, each row r reads as
 *
 *     w[r][i] = d[r][g] * q[r][i] + m[r][g],   g = group of column i,
 *
 * with codes q in 0..2^bits-1 and the group's scale d and offset m exact in f32
 * (GPTQ / AWQ: d = scale, m = -scale * zero; both products are exact in f32, since
 * a f16 scale has 11 significant bits and a zero at most 9). nibble's grids are the
 * same shape at 4 bits:
 *     w4a16:  w = D * q + M            D, M bf16
 *     w4a8:   w = D * (q - 8)          D bf16, i.e. M = -8 D
 * so a 4-bit matrix whose groups run in plain order along K with a size nibble has
 * (32, 64, 128) keeps its codes: D = bf16(d), M = bf16(m). The only change is the
 * rounding of d and m to bf16 (a f16 scale has 3 bits more); no weight moves to
 * another code. w4a8 needs every group symmetric (m == -8 d exactly). Anything else
 * (act order, other group sizes, 8 bits) is dequantized and re-quantized by the caller.
 *
 * The record is one kind per source layout; the row reader is the only thing a kind
 * adds. GGUF Q4_0 (d, codes, m = -8 d) and Q4_K (group 32: d * sc and -dmin * m per
 * sub-block) fit the same record (docs/interop.md).
 */
#ifndef NB_QUANT_UNPACK_H
#define NB_QUANT_UNPACK_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"
#include "formats/hfquant.h"

enum nb_src_codes_kind {
    NB_SRC_CODES_HFQ = 0, /* a GPTQ or AWQ checkpoint's qweight / qzeros / scales */
};

struct nb_src_codes {
    enum nb_src_codes_kind kind;
    int bits;
    int64_t n_out, n_in;
    int64_t group;    /* columns per group along K (plain order); n_in: the whole row */
    int plain_order;  /* the group of column i is i / group */
    struct nb_hfq_matrix hfq; /* kind NB_SRC_CODES_HFQ */
};

/* A record for a validated GPTQ / AWQ matrix (no copy: it points where m does). */
void nb_src_codes_from_hfq(struct nb_src_codes *c, const struct nb_hfq_matrix *m);

/* Dequantize rows [r0, r1) of a GPTQ / AWQ matrix into out [r1 - r0][n_in]:
 * w = f32(scale) * (float)(q - zero), one rounding of exact values (the product is exact
 * in f32 for every bit width read), g from g_idx when there is one. */
void nb_hfq_dequant_rows(const struct nb_hfq_matrix *m, int64_t r0, int64_t r1, float *out);

/* The codes of row r in column order, q [n_in], and its groups' d [n_groups], m
 * [n_groups] as in the formula above. Plain order only (c->plain_order). */
void nb_src_codes_row(const struct nb_src_codes *c, int64_t r, uint8_t *q, float *d, float *m);

/* Can `path` keep the codes of c? 1, or 0 with *why set to a short reason ("act order",
 * "group 256", "8 bits", "asymmetric grid for w4a8"). Every group is read for the w4a8
 * symmetry test. */
int nb_src_codes_fit(const struct nb_src_codes *c, enum nb_wpath path, const char **why);

/* Pack c into `blob`, a ROWS blob of nb_layout_planes(path, c->group, n_out, n_in).total
 * bytes (w4a8 or w4a16, 64-byte aligned): codes as stored, D = bf16(d), M = bf16(m);
 * the padding zeroed. NB_ERR_INVALID_ARG when nb_src_codes_fit says no. */
enum nb_status nb_src_codes_pack(const struct nb_src_codes *c, enum nb_wpath path, void *blob);

#endif
