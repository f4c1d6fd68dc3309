/* quant/search.h — the scale search of quant.h on 16 groups (w8a16: 16 rows) at once.
 *
 * quant.c's one-group functions (nb_quant_group_w4a8, nb_quant_group_w4a16,
 * nb_quant_row_w8a16) are the reference. Here lane l of every vector holds group l
 * and does exactly the float and double operations the reference does for its group,
 * in the same order (sums along the group stay sequential per lane; nothing is
 * reassociated, nothing fused), so each lane chooses the same scale, min and codes as
 * the reference, bit for bit, whatever the other lanes hold, whichever ISA runs it.
 * The only shortcut the reference takes and this does not — skipping a candidate
 * scale already scored — changes no choice: a repeated candidate scores the same
 * error and only a strictly smaller error wins. test_quant checks the equality.
 * Internal to quant/ (quant.c's nb_quantize_rows is the caller).
 */
#ifndef NB_QUANT_SEARCH_H
#define NB_QUANT_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/fp.h"
#include "core/wformat.h"

/* Candidate sweeps (quant.c's search). Symmetric: inverse scale = -(8 + STEP i) /
 * x_amax (x_amax towards code 0) and (7 + STEP i) / x_amax (towards code 15), i in
 * -HALF..HALF, i.e. +-2 codes around absmax. Asymmetric: (14 + STEP i) / (max - min),
 * i in 0..ASYM_STEPS, 14 .. 18 levels over the range (more than 15 clips both ends).
 * Steps of 0.2 code scored as well as 0.1 on the tests' data at half the cost. */
#define NB_QS_SWEEP_HALF   10
#define NB_QS_SWEEP_STEP   0.2f
#define NB_QS_ASYM_STEPS   20
#define NB_QS_W8_STEPS     20 /* w8a16: clip factors 1, 0.985, ..., 0.7 of max|x| */
#define NB_QS_W8_CLIP_STEP 0.015f
#define NB_QS_REFINE_ITERS 2 /* refit-from-best rounds after the sweep */

#define NB_QS_LANES 16

/* fminf / fmaxf of two non-NaN floats as C libraries give them (glibc, musl): a zero
 * of either sign against the other gives -0 for the min, +0 for the max. Written out
 * so that every platform, and every lane, takes the same min and max of a group. */
static inline float nb_qs_min(float a, float b)
{
    if (a < b) return a;
    if (b < a) return b;
    return nb_f32_from_bits(nb_bits_from_f32(a) | nb_bits_from_f32(b)); /* equal */
}
static inline float nb_qs_max(float a, float b)
{
    if (a > b) return a;
    if (b > a) return b;
    return nb_f32_from_bits(nb_bits_from_f32(a) & nb_bits_from_f32(b));
}

/* amax / 127, nudged to a fixed point of d -> fl(fl(127 d) / 127) so that
 * quantize -> dequantize -> quantize reproduces d exactly (w8a16's absmax scale). */
float nb_qs_absmax_w8(float amax);

/* One batch of up to NB_QS_LANES groups (int4) or rows (w8a16), n values each. */
struct nb_qs_batch {
    int n;       /* int4: the group, a multiple of 16 up to NB_QUANT_GROUP_MAX; w8a16: the row */
    int n_lanes; /* lanes in use, 1..NB_QS_LANES */
    int search;  /* 0: absmax; 1: the search */
    int stats;   /* 1: fill err and ref */
    const float *x[NB_QS_LANES];   /* lane l's n weights (finite) */
    const float *imp[NB_QS_LANES]; /* lane l's n importances, or NULL in every lane; w8a16
                                      reads imp[0] for all lanes (importance is per column) */
    /* out: int4 n/2 bytes (two codes a byte, the first in the low nibble); w8a16 n int8 */
    uint8_t *q[NB_QS_LANES];
    uint16_t d[NB_QS_LANES], m[NB_QS_LANES]; /* int4: the bf16 scale (and w4a16's min) */
    float d8[NB_QS_LANES];                   /* w8a16: the f32 scale */
    double err[NB_QS_LANES], ref[NB_QS_LANES]; /* sum (x - x^)^2, sum x^2 (stats) */
};

/* Bytes of 64-byte-aligned scratch a batch of `path` with n values a lane needs. */
size_t nb_qs_scratch_bytes(enum nb_wpath path, int64_t n);
/* Quantize the batch on `path` (w4a8, w4a16 or w8a16), at the kernel table's ISA level. */
void nb_qs_run(enum nb_wpath path, struct nb_qs_batch *b, void *scratch);
/* The same at ISA level `level` (enum nb_isa_level; the caller checks the CPU runs it):
 * for tests, which compare the levels' bytes. */
void nb_qs_run_level(int level, enum nb_wpath path, struct nb_qs_batch *b, void *scratch);

#endif
