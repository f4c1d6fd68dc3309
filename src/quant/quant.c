/* quant/quant.c — grids, the importance-weighted scale search, matrix packing.
 *
 * The search follows the idea of llama.cpp's make_qx_quants / make_qkx2_quants
 * (sweep inverse scales around absmax, refit by weighted least squares), with one
 * difference that matters for the "never worse than absmax" contract: every
 * candidate is scored after rounding its scale (and min) to the stored type and
 * re-quantizing to the nearest codes with those rounded values, and absmax is one
 * of the candidates. The winner is the stored group with the smallest error.
 */
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "quant/search.h"

/* The sweeps' constants live in search.h, shared with the batched search. */
#define SWEEP_HALF   NB_QS_SWEEP_HALF
#define SWEEP_STEP   NB_QS_SWEEP_STEP
#define ASYM_STEPS   NB_QS_ASYM_STEPS
#define W8_STEPS     NB_QS_W8_STEPS
#define W8_CLIP_STEP NB_QS_W8_CLIP_STEP
#define REFINE_ITERS NB_QS_REFINE_ITERS
#define SEEN_MAX     64 /* stored scales already scored (duplicates are skipped) */

double nb_quant_wsqerr(const float *x, const float *xhat, const float *imp, int64_t n)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double wi = imp ? (double)imp[i] : 1.0;
        double diff = (double)x[i] - (double)xhat[i];
        e += wi * diff * diff;
    }
    return e;
}

static double imp_at(const float *imp, int64_t i)
{
    return imp ? (double)imp[i] : 1.0;
}

/* v clamped to [lo, hi] (integers of magnitude < 2^22), then rounded to the nearest
 * integer, ties to even; NaN gives lo. Adding and subtracting 1.5 * 2^23 rounds in
 * the default FP mode without a libm call (nearbyintf is an out-of-line call on
 * baseline x86-64 and made the search ~3x slower). Clamping before rounding gives
 * the same result as after, since the bounds are integers. */
static int round_clamp(float v, float lo, float hi)
{
    if (!(v >= lo)) v = lo;
    if (v > hi) v = hi;
    return (int)((v + 0x1.8p23f) - 0x1.8p23f);
}

/* Whether `key` was scored already (then 1); else remembers it (room for `cap`). */
static int seen_before(uint32_t *seen, int *n_seen, int cap, uint32_t key)
{
    for (int i = 0; i < *n_seen; i++)
        if (seen[i] == key) return 1;
    if (*n_seen < cap) seen[(*n_seen)++] = key;
    return 0;
}

/* ------------------------------------------------------------ w4a8 (symmetric) */

static int code_w4a8(float x, float id)
{
    return round_clamp(x * id, -8.0f, 7.0f) + 8;
}

/* The search's inner loops run over LANES independent float accumulators (the group
 * zero-padded to a multiple of LANES, padding with weight 0), so a compiler vectorizes
 * them without reassociating anything (no -ffast-math); a candidate's codes are not
 * stored, only the winner's are made at the end. Float sums of at most 256 terms:
 * relative errors ~1e-6, far below the gaps between candidates that matter. */
#define LANES 16
#if defined(__GNUC__) || defined(__clang__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* round_clamp's signed code l = code - 8 of x * id, as a float (no int round trip). */
INLINE float level_w4a8(float x, float id)
{
    float v = x * id;
    v = v >= -8.0f ? v : -8.0f; /* NaN too */
    v = v > 7.0f ? 7.0f : v;
    return (v + 0x1.8p23f) - 0x1.8p23f;
}

/* A group for the search: x and its importance, padded. */
struct group_w4a8 {
    float x[NB_QUANT_GROUP_MAX], w[NB_QUANT_GROUP_MAX], wx[NB_QUANT_GROUP_MAX];
    int n; /* padded length */
};

/* Weighted error of the stored scale `dbits`, codes by nearest rounding with it. */
INLINE double score_w4a8(const struct group_w4a8 *g, uint16_t dbits)
{
    float d = nb_bf16_to_f32(dbits), id = d != 0.0f ? 1.0f / d : 0.0f;
    float acc[LANES] = {0};
    for (int i = 0; i < g->n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float e = g->x[i + j] - d * level_w4a8(g->x[i + j], id);
            acc[j] += g->w[i + j] * e * e;
        }
    double e = 0;
    for (int j = 0; j < LANES; j++) e += acc[j];
    return e;
}

/* The weighted least-squares scale for the codes of inverse scale `id`; 0 if undefined. */
INLINE int refit_w4a8(const struct group_w4a8 *g, float id, float *d)
{
    float sxl[LANES] = {0}, sll[LANES] = {0};
    for (int i = 0; i < g->n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float l = level_w4a8(g->x[i + j], id);
            sxl[j] += g->wx[i + j] * l;
            sll[j] += g->w[i + j] * l * l;
        }
    double a = 0, b = 0;
    for (int j = 0; j < LANES; j++) a += sxl[j], b += sll[j];
    if (!(b > 0.0)) return 0;
    *d = (float)(a / b);
    return isfinite(*d);
}

INLINE double group_w4a8(const float *x, const float *imp, int n, int search, uint8_t *q,
                        uint16_t *d)
{
    struct group_w4a8 g;
    float amax = 0.0f, xm = 0.0f;
    g.n = (n + LANES - 1) / LANES * LANES;
    for (int i = 0; i < g.n; i++) {
        g.x[i] = i < n ? x[i] : 0.0f;
        g.w[i] = i < n ? (imp ? imp[i] : 1.0f) : 0.0f;
        g.wx[i] = g.w[i] * g.x[i];
    }
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            xm = x[i];
        }
    /* absmax: the largest magnitude lands on code 0 (value -8d) */
    uint16_t best_d = nb_f32_to_bf16(xm / -8.0f);
    double best = score_w4a8(&g, best_d);
    uint32_t seen[SEEN_MAX] = {best_d};
    int n_seen = 1;
    if (!search || amax == 0.0f) goto done;

    for (int side = 0; side < 2; side++)
        for (int s = -SWEEP_HALF; s <= SWEEP_HALF; s++) {
            /* side 0: x_amax towards code 0 (-8); side 1: towards code 15 (+7) */
            float iscale = side == 0 ? -(8.0f + SWEEP_STEP * (float)s) / xm
                                     : (7.0f + SWEEP_STEP * (float)s) / xm;
            float dc;
            if (!refit_w4a8(&g, iscale, &dc)) continue;
            uint16_t db = nb_f32_to_bf16(dc);
            if (seen_before(seen, &n_seen, SEEN_MAX, db)) continue;
            double e = score_w4a8(&g, db);
            if (e < best) {
                best = e;
                best_d = db;
            }
        }
    for (int it = 0; it < REFINE_ITERS; it++) {
        float dc, db_f = nb_bf16_to_f32(best_d);
        if (!refit_w4a8(&g, db_f != 0.0f ? 1.0f / db_f : 0.0f, &dc)) break;
        uint16_t db = nb_f32_to_bf16(dc);
        double e = score_w4a8(&g, db);
        if (!(e < best)) break;
        best = e;
        best_d = db;
    }
done:; /* the winner's codes, and its error exactly as nb_quant_wsqerr gives it */
    float xhat[NB_QUANT_GROUP_MAX];
    float df = nb_bf16_to_f32(best_d), id = df != 0.0f ? 1.0f / df : 0.0f;
    for (int i = 0; i < n; i++) {
        q[i] = (uint8_t)code_w4a8(x[i], id);
        xhat[i] = nb_q4s_value(df, q[i]);
    }
    *d = best_d;
    return nb_quant_wsqerr(x, xhat, imp, n);
}

/* The same loops compiled for wider vectors, chosen by the kernel table's level (so
 * NIBBLE_ISA=ref runs the baseline build). Without FMA contraction (ISO C mode) every
 * lane does the same arithmetic at every width: the results are identical. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QUANT_X86 1
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) static double
group_w4a8_avx512(const float *x, const float *imp, int n, int search, uint8_t *q, uint16_t *d)
{
    return group_w4a8(x, imp, n, search, q, d);
}

__attribute__((target("avx2"))) static double group_w4a8_avx2(const float *x, const float *imp,
                                                               int n, int search, uint8_t *q,
                                                               uint16_t *d)
{
    return group_w4a8(x, imp, n, search, q, d);
}
#endif

double nb_quant_group_w4a8(const float *x, const float *imp, int n, int search, uint8_t *q,
                           uint16_t *d)
{
#ifdef QUANT_X86
    const char *isa = nb_kernels_get()->isa;
    if (!strncmp(isa, "avx512", 6)) return group_w4a8_avx512(x, imp, n, search, q, d);
    if (!strncmp(isa, "avx2", 4)) return group_w4a8_avx2(x, imp, n, search, q, d);
#endif
    return group_w4a8(x, imp, n, search, q, d);
}

int nb_quant_code_w4a8(float x, float d)
{
    return code_w4a8(x, d != 0.0f ? 1.0f / d : 0.0f);
}

/* ----------------------------------------------------------- w4a16 (asymmetric) */

static int code_w4a16(float x, float id, float m)
{
    return round_clamp((x - m) * id, 0.0f, 15.0f);
}

int nb_quant_code_w4a16(float x, float d, float m)
{
    return code_w4a16(x, d != 0.0f ? 1.0f / d : 0.0f, m);
}

static double score_w4a16(const float *x, const float *imp, int n, uint16_t dbits, uint16_t mbits,
                          uint8_t *q)
{
    float xhat[NB_QUANT_GROUP_MAX];
    float d = nb_bf16_to_f32(dbits), m = nb_bf16_to_f32(mbits);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < n; i++) {
        q[i] = (uint8_t)code_w4a16(x[i], id, m);
        xhat[i] = nb_q4a_value(d, m, q[i]);
    }
    return nb_quant_wsqerr(x, xhat, imp, n);
}

/* Weighted least squares x ~ d q + m for fixed codes; 0 if degenerate. */
static int refit_w4a16(const float *x, const float *imp, int n, const uint8_t *q, float *d,
                       float *m)
{
    double sw = 0, sl = 0, sll = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
        double wi = imp_at(imp, i), l = q[i];
        sw += wi;
        sl += wi * l;
        sll += wi * l * l;
        sx += wi * x[i];
        sxl += wi * x[i] * l;
    }
    double det = sw * sll - sl * sl;
    if (!(det > 1e-9 * sw * sll)) return 0;
    *d = (float)((sw * sxl - sl * sx) / det);
    *m = (float)((sll * sx - sl * sxl) / det);
    return isfinite(*d) && isfinite(*m);
}

double nb_quant_group_w4a16(const float *x, const float *imp, int n, int search, uint8_t *q,
                            uint16_t *d, uint16_t *m)
{
    uint8_t cand[NB_QUANT_GROUP_MAX];
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) {
        mn = nb_qs_min(mn, x[i]);
        mx = nb_qs_max(mx, x[i]);
    }
    double range = (double)mx - (double)mn;
    uint16_t best_d = nb_f32_to_bf16((float)(range / 15.0));
    uint16_t best_m = nb_f32_to_bf16(mn);
    double best = score_w4a16(x, imp, n, best_d, best_m, q);
    uint32_t seen[SEEN_MAX] = {(uint32_t)best_d << 16 | best_m};
    int n_seen = 1;
    if (!search || range == 0.0) goto done;

    for (int s = 0; s <= ASYM_STEPS; s++) {
        float iscale = (float)((14.0 + (double)SWEEP_STEP * s) / range);
        for (int i = 0; i < n; i++)
            cand[i] = (uint8_t)code_w4a16(x[i], iscale, mn);
        float dc, mc;
        if (!refit_w4a16(x, imp, n, cand, &dc, &mc)) continue;
        uint16_t db = nb_f32_to_bf16(dc), mb = nb_f32_to_bf16(mc);
        if (seen_before(seen, &n_seen, SEEN_MAX, (uint32_t)db << 16 | mb)) continue;
        double e = score_w4a16(x, imp, n, db, mb, cand);
        if (e < best) {
            best = e;
            best_d = db;
            best_m = mb;
            memcpy(q, cand, (size_t)n);
        }
    }
    for (int it = 0; it < REFINE_ITERS; it++) {
        float dc, mc;
        if (!refit_w4a16(x, imp, n, q, &dc, &mc)) break;
        uint16_t db = nb_f32_to_bf16(dc), mb = nb_f32_to_bf16(mc);
        double e = score_w4a16(x, imp, n, db, mb, cand);
        if (!(e < best)) break;
        best = e;
        best_d = db;
        best_m = mb;
        memcpy(q, cand, (size_t)n);
    }
done:
    *d = best_d;
    *m = best_m;
    return best;
}

/* ------------------------------------------------------- w8a16 (per output row) */

static int code_w8a16(float x, float id)
{
    return round_clamp(x * id, -127.0f, 127.0f);
}

static double score_w8a16(const float *x, const float *imp, int64_t n, float d, int8_t *q,
                          float *xhat)
{
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        q[i] = (int8_t)code_w8a16(x[i], id);
        xhat[i] = nb_q8_value(d, q[i]);
    }
    return nb_quant_wsqerr(x, xhat, imp, n);
}

static int refit_w8a16(const float *x, const float *imp, int64_t n, const int8_t *q, float *d)
{
    double sxl = 0.0, sll = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double l = q[i], wi = imp_at(imp, i);
        sxl += wi * x[i] * l;
        sll += wi * l * l;
    }
    if (!(sll > 0.0)) return 0;
    *d = (float)(sxl / sll);
    return isfinite(*d);
}

double nb_quant_row_w8a16(const float *x, const float *imp, int64_t n, int search, int8_t *q,
                          float *d, void *scratch)
{
    float *xhat = scratch;
    int8_t *cand = (int8_t *)(xhat + n);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        amax = nb_qs_max(amax, fabsf(x[i]));
    float best_d = nb_qs_absmax_w8(amax);
    double best = score_w8a16(x, imp, n, best_d, q, xhat);
    if (!search || amax == 0.0f) goto done;

    for (int s = 0; s <= W8_STEPS; s++) {
        float iscale = 127.0f / (amax * (1.0f - W8_CLIP_STEP * (float)s));
        for (int64_t i = 0; i < n; i++)
            cand[i] = (int8_t)code_w8a16(x[i], iscale);
        float dc;
        if (!refit_w8a16(x, imp, n, cand, &dc)) continue;
        double e = score_w8a16(x, imp, n, dc, cand, xhat);
        if (e < best) {
            best = e;
            best_d = dc;
            memcpy(q, cand, (size_t)n);
        }
    }
    for (int it = 0; it < REFINE_ITERS; it++) {
        float dc;
        if (!refit_w8a16(x, imp, n, q, &dc)) break;
        double e = score_w8a16(x, imp, n, dc, cand, xhat);
        if (!(e < best)) break;
        best = e;
        best_d = dc;
        memcpy(q, cand, (size_t)n);
    }
done:
    *d = best_d;
    return best;
}

/* ------------------------------------------------------------------ matrices */

/* Validate path / group / shape and compute the planes; sets the error message. */
static enum nb_status check_shape(enum nb_wpath path, int group, int64_t n_out, int64_t n_in,
                                  struct nb_layout_planes *pl)
{
    if ((unsigned)path >= NB_WPATH_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "unknown weight path %d", (int)path);
    const char *name = nb_wpath_name(path);
    if (n_out <= 0 || n_in <= 0 || n_out > ((int64_t)1 << 31) || n_in > ((int64_t)1 << 31))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: matrix shape %lld x %lld is out of range",
                            name, (long long)n_out, (long long)n_in);
    if (nb_wpath_is_int4(path)) {
        if (group != 32 && group != 64 && group != 128)
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "%s: group size %d is not supported (32, 64 or 128)", name, group);
        if (n_in % group)
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "%s: K=%lld is not a multiple of the group size %d", name,
                                (long long)n_in, group);
    }
    if (!nb_layout_planes(path, group, n_out, n_in, pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: shape %lld x %lld does not fit the layout",
                            name, (long long)n_out, (long long)n_in);
    return NB_OK;
}

static enum nb_status check_range(int64_t n_out, int64_t r0, int64_t r1)
{
    if (r0 < 0 || r1 < r0 || r1 > n_out)
        return nb_set_error(NB_ERR_INVALID_ARG, "row range [%lld, %lld) is outside [0, %lld)",
                            (long long)r0, (long long)r1, (long long)n_out);
    return NB_OK;
}

/* Whether x[0..n) are all finite (a loop without an early exit, which vectorizes). */
static int all_finite(const float *x, int64_t n)
{
    uint32_t bad = 0;
    for (int64_t k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, x + k, 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* The batched search (search.h) over rows [r0, r1): int4 groups of consecutive rows,
 * or w8a16 rows, NB_QS_LANES at a time. rows: [r1 - r0][n_in], checked finite. */
static void quantize_batched(enum nb_wpath path, int group, const float *rows, int64_t n_in,
                             int64_t r0, int64_t r1, const float *imp, int search, uint8_t *b,
                             const struct nb_layout_planes *pl, void *scratch,
                             struct nb_qstats *stats)
{
    struct nb_qs_batch bt = {0};
    const int int4 = nb_wpath_is_int4(path);
    const int64_t ng = int4 ? n_in / group : 1, total = (r1 - r0) * ng;
    bt.n = int4 ? group : (int)n_in;
    bt.search = search;
    bt.stats = stats != NULL;
    for (int64_t base = 0; base < total; base += NB_QS_LANES) {
        bt.n_lanes = total - base < NB_QS_LANES ? (int)(total - base) : NB_QS_LANES;
        for (int l = 0; l < NB_QS_LANES; l++) {
            int64_t idx = base + (l < bt.n_lanes ? l : 0), rr = idx / ng, g = idx % ng;
            bt.x[l] = rows + rr * n_in + g * bt.n;
            bt.imp[l] = imp ? imp + g * bt.n : NULL;
            bt.q[l] = int4 ? b + pl->offset[0] + (r0 + rr) * (n_in / 2) + g * (group / 2)
                           : b + pl->offset[0] + (r0 + rr) * n_in;
        }
        nb_qs_run(path, &bt, scratch);
        for (int l = 0; l < bt.n_lanes; l++) {
            int64_t idx = base + l, r = r0 + idx / ng, g = idx % ng;
            if (int4) {
                nb_q_store_u16(b + pl->offset[1] + 2 * (r * ng + g), bt.d[l]);
                if (path == NB_WPATH_W4A16)
                    nb_q_store_u16(b + pl->offset[2] + 2 * (r * ng + g), bt.m[l]);
            } else {
                memcpy(b + pl->offset[1] + 4 * r, &bt.d8[l], 4);
            }
            if (stats) {
                stats->err_sq += bt.err[l];
                stats->ref_sq += bt.ref[l];
            }
        }
    }
}

enum nb_status nb_quantize_rows(enum nb_wpath path, int group, const float *w, int64_t n_out,
                                int64_t n_in, int64_t r0, int64_t r1, const float *importance,
                                int search, void *blob, struct nb_qstats *stats)
{
    /* (w + r0 * n_in only once the range is known to be inside the matrix) */
    int inside = w && r0 >= 0 && r0 <= n_out;
    return nb_quantize_rows_at(path, group, inside ? w + r0 * n_in : w, n_out, n_in, r0, r1,
                               importance, search, blob, stats);
}

enum nb_status nb_quantize_rows_at(enum nb_wpath path, int group, const float *rows,
                                   int64_t n_out, int64_t n_in, int64_t r0, int64_t r1,
                                   const float *importance, int search, void *blob,
                                   struct nb_qstats *stats)
{
    enum nb_status st;
    struct nb_layout_planes pl;
    void *scratch = NULL;
    uint8_t *b = blob;
    if (stats) memset(stats, 0, sizeof *stats);
    if ((st = check_shape(path, group, n_out, n_in, &pl)) != NB_OK) goto fail;
    if ((st = check_range(n_out, r0, r1)) != NB_OK) goto fail;
    if (!rows || !blob || ((uintptr_t)blob % NB_LAYOUT_ALIGN)) {
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "%s: weights or blob missing, or blob not %d-byte aligned",
                          nb_wpath_name(path), NB_LAYOUT_ALIGN);
        goto fail;
    }
    for (int64_t k = 0; importance && k < n_in; k++)
        if (!(importance[k] >= 0.0f) || !isfinite(importance[k])) {
            st =
                nb_set_error(NB_ERR_INVALID_ARG, "%s: importance[%lld] = %g is not finite and >= 0",
                             nb_wpath_name(path), (long long)k, (double)importance[k]);
            goto fail;
        }
    for (int64_t r = r0; r < r1; r++) {
        const float *row = rows + (r - r0) * n_in;
        if (all_finite(row, n_in)) continue;
        for (int64_t k = 0; k < n_in; k++)
            if (!isfinite(row[k])) {
                st = nb_set_error(NB_ERR_INVALID_ARG, "%s: weight [%lld][%lld] is not finite",
                                  nb_wpath_name(path), (long long)r, (long long)k);
                goto fail;
            }
    }
    int batched = nb_wpath_is_int4(path) || path == NB_WPATH_W8A16;
    /* the batch's scratch, or one decoded row for the stats */
    size_t bytes = batched ? nb_qs_scratch_bytes(path, n_in) : (size_t)n_in * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    if (r1 > r0 && !(scratch = aligned_alloc(64, bytes ? bytes : 64))) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: no memory for a row of %lld", nb_wpath_name(path),
                          (long long)n_in);
        goto fail;
    }
    if (batched && r1 > r0) {
        quantize_batched(path, group, rows, n_in, r0, r1, importance, search, b, &pl, scratch,
                         stats);
    } else {
        for (int64_t r = r0; r < r1; r++) {
            const float *row = rows + (r - r0) * n_in;
            if (path == NB_WPATH_F32) {
                memcpy(b + pl.offset[0] + 4 * r * n_in, row, (size_t)n_in * 4);
            } else { /* bf16 */
                uint8_t *dst = b + pl.offset[0] + 2 * r * n_in;
                for (int64_t k = 0; k < n_in; k++)
                    nb_q_store_u16(dst + 2 * k, nb_f32_to_bf16(row[k]));
            }
            if (stats) {
                float *back = scratch;
                nb_unpack_row_ref(path, group, blob, &pl, n_in, r, back);
                for (int64_t k = 0; k < n_in; k++) {
                    double diff = (double)row[k] - (double)back[k];
                    stats->err_sq += diff * diff;
                    stats->ref_sq += (double)row[k] * row[k];
                }
            }
        }
    }
    if (r1 == n_out) /* the padding after each plane, so the whole blob is defined */
        for (int i = 0; i < pl.n_planes; i++) {
            int64_t end = pl.offset[i] + pl.size[i];
            int64_t next = i + 1 < pl.n_planes ? pl.offset[i + 1] : pl.total;
            memset(b + end, 0, (size_t)(next - end));
        }
    st = NB_OK;
fail:
    free(scratch);
    return st;
}

enum nb_status nb_dequantize_rows(enum nb_wpath path, int group, const void *blob, int64_t n_out,
                                  int64_t n_in, int64_t r0, int64_t r1, float *out)
{
    enum nb_status st;
    struct nb_layout_planes pl;
    if ((st = check_shape(path, group, n_out, n_in, &pl)) != NB_OK) goto fail;
    if ((st = check_range(n_out, r0, r1)) != NB_OK) goto fail;
    if (!blob || !out) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "%s: blob or output missing", nb_wpath_name(path));
        goto fail;
    }
    for (int64_t r = r0; r < r1; r++)
        nb_unpack_row_ref(path, group, blob, &pl, n_in, r, out + (r - r0) * n_in);
fail:
    return st;
}
