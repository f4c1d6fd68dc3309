/* quant/search.c — the scale search on 16 groups (w8a16: 16 rows) at once (search.h).
 *
 * search_lanes.h mirrors quant.c's reference functions operation for operation, with
 * every scalar replaced by a vector of lanes, one group (row) a lane (GCC / clang vector
 * extensions: IEEE arithmetic lane by lane, no reassociation; this file is built with
 * -ffp-contract=off, so nothing is fused into a multiply-add). Where the reference sums
 * a group in double along i, each lane does the same sequential sum; where it sums in 16
 * float lane accumulators (w4a8), accumulator j here is a vector whose lane l is group
 * l's accumulator j. The per-candidate decisions (refit failed, better or not, stop
 * refining) are lane masks. Sums of integers (sum of codes, of squared codes, without
 * importance) are exact in any order and are taken in float; everything else keeps the
 * reference's order.
 *
 * The data are transposed first: vector i holds element i of the batch's groups. The
 * template is instantiated for 16 lanes (AVX-512), 8 (AVX2) and 4 (the baseline, any
 * ISA) and chosen by the kernel table's level, as quant.c's own multiversioning is; the
 * bytes out do not depend on which runs, nor on which groups share a batch.
 *
 * bench/bench_quant (one thread's CPU time per weight, 256 x 2048 Gaussian, G = 128,
 * best of 5, the 2-core Zen 5 VM, 2026-12-01; the reference in brackets): AVX-512 w4a8
 * 7.1 ns (27.5), w4a16 8.6 (82.1), w8a16 7.6 (73.7); AVX2 13.6 (34.2), 16.0 (81.9),
 * 13.4 (73.2); baseline 51.4 (73.3), 44.9 (90.5), 44.3 (79.4).
 */
#include "quant/search.h"

#include <math.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

float nb_qs_absmax_w8(float amax)
{
    volatile float d = amax / 127.0f; /* volatile: no excess precision, no folding */
    for (int it = 0; it < 4; it++) {
        volatile float top = d * 127.0f;
        volatile float back = top / 127.0f;
        if (back == d) break;
        d = back;
    }
    return d;
}

#if defined(__GNUC__) || defined(__clang__)

#if defined(__GNUC__) && !defined(__clang__)
/* vectors pass by value only between always-inlined functions of this file */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define REF_LANES 16 /* the reference's w4a8 lane accumulators (quant.c's LANES) */

/* The engine once per vector width, each for the ISA that has vectors of that width:
 * a comparison of vectors wider than the target's is scalarized by GCC 12. The lane
 * count only sets how many groups run side by side, never a group's result. */
#if defined(__x86_64__)
#define INLINE static inline __attribute__((always_inline, target("avx512f,avx512vl,avx512bw,avx512dq")))
#else
#define INLINE static inline __attribute__((always_inline))
#endif
#define NL 16
#define QS(name) name##_16
#include "quant/search_lanes.h"
#undef NL
#undef QS
#undef INLINE
#if defined(__x86_64__)
#define INLINE static inline __attribute__((always_inline, target("avx2")))
#else
#define INLINE static inline __attribute__((always_inline))
#endif
#define NL 8
#define QS(name) name##_8
#include "quant/search_lanes.h"
#undef NL
#undef QS
#undef INLINE
#define INLINE static inline __attribute__((always_inline))
#define NL 4
#define QS(name) name##_4
#include "quant/search_lanes.h"
#undef NL
#undef QS

size_t nb_qs_scratch_bytes(enum nb_wpath path, int64_t n)
{
    switch (path) { /* the widest engine's */
    case NB_WPATH_W4A8: return sizeof(struct w4a8_s_16);
    case NB_WPATH_W4A16: return sizeof(struct w4a16_s_16);
    case NB_WPATH_W8A16: return (size_t)n * sizeof(vf_16);
    default: return 0;
    }
}

/* The batch's lanes, nl at a time, on the engine of nl lanes. */
#define RUN_LANES(nl, path, b, scratch)                                                          \
    for (int l0 = 0; l0 < (b)->n_lanes; l0 += (nl)) switch (path) {                                 \
        case NB_WPATH_W4A8: w4a8_run_##nl((b), l0, (scratch)); break;                          \
        case NB_WPATH_W4A16: w4a16_run_##nl((b), l0, (scratch)); break;                        \
        case NB_WPATH_W8A16: w8_run_##nl((b), l0, (scratch)); break;                           \
        default: break;                                                                        \
        }

static void run_base(enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
    RUN_LANES(4, path, b, scratch)
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) static void
run_avx512(enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
    RUN_LANES(16, path, b, scratch)
}

__attribute__((target("avx2"))) static void run_avx2(enum nb_wpath path, struct nb_qs_batch *b,
                                                     void *scratch)
{
    RUN_LANES(8, path, b, scratch)
}
#endif

void nb_qs_run_level(int level, enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
#if defined(__x86_64__)
    if (level == NB_LEVEL_AVX512) {
        run_avx512(path, b, scratch);
        return;
    }
    if (level == NB_LEVEL_AVX2) {
        run_avx2(path, b, scratch);
        return;
    }
#endif
    (void)level;
    run_base(path, b, scratch);
}

void nb_qs_run(enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
    const char *isa = nb_kernels_get()->isa;
    nb_qs_run_level(!strncmp(isa, "avx512", 6) ? NB_LEVEL_AVX512
                    : !strncmp(isa, "avx2", 4) ? NB_LEVEL_AVX2
                                               : NB_LEVEL_REF,
                    path, b, scratch);
}

#else /* no vector extensions: the reference, one group (row) at a time */

size_t nb_qs_scratch_bytes(enum nb_wpath path, int64_t n)
{
    return path == NB_WPATH_W8A16 ? NB_QUANT_W8_SCRATCH(n) : 0;
}

void nb_qs_run_level(int level, enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
    (void)level;
    nb_qs_run(path, b, scratch);
}

void nb_qs_run(enum nb_wpath path, struct nb_qs_batch *b, void *scratch)
{
    uint8_t q[NB_QUANT_GROUP_MAX];
    for (int l = 0; l < b->n_lanes; l++) {
        const float *x = b->x[l];
        double err = 0, ref = 0;
        if (path == NB_WPATH_W8A16) {
            nb_quant_row_w8a16(x, b->imp[0], b->n, b->search, (int8_t *)b->q[l], &b->d8[l],
                               scratch);
            for (int i = 0; i < b->n; i++) {
                double f = (double)x[i] - (double)(b->d8[l] * (float)(int8_t)b->q[l][i]);
                err += f * f;
                ref += (double)x[i] * x[i];
            }
        } else {
            float d, m = 0.0f;
            if (path == NB_WPATH_W4A8) {
                nb_quant_group_w4a8(x, b->imp[l], b->n, b->search, q, &b->d[l]);
            } else {
                nb_quant_group_w4a16(x, b->imp[l], b->n, b->search, q, &b->d[l], &b->m[l]);
                m = nb_bf16_to_f32(b->m[l]);
            }
            d = nb_bf16_to_f32(b->d[l]);
            for (int i = 0; i < b->n; i++) {
                float xh = path == NB_WPATH_W4A8 ? d * (float)(q[i] - 8) : d * (float)q[i] + m;
                double f = (double)x[i] - (double)xh;
                err += f * f;
                ref += (double)x[i] * x[i];
            }
            for (int i = 0; i < b->n; i += 2) b->q[l][i / 2] = (uint8_t)(q[i] | (q[i + 1] << 4));
        }
        b->err[l] = err;
        b->ref[l] = ref;
    }
}

#endif
