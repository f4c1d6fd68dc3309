/* tests/helpers/kernel_fixture.h — test data shared by the GEMM kernel tests
 * (test_kernels_x86, test_kernels_arm): random ROWS weight blobs and their X16 repack,
 * f32 activations with their int8 groups, NaN-filled outputs and the bounded comparison of
 * a kernel's output against its reference. Random data comes from the caller's stream
 * (tu_rand_u64), so each test keeps its own seed and its own sequence. */
#ifndef NB_KERNEL_FIXTURE_H
#define NB_KERNEL_FIXTURE_H

#include <stdint.h>

#include "core/wformat.h"
#include "kernels/kernels.h"

/* A random ROWS blob of path p (layout planes in *pl; free()): random codes; w4a8 / w4a16:
 * bf16 scales ~ N(0, 0.02), w4a16 mins ~ -8 d + noise; w8a16: codes -127..127 and f32 row
 * scales in [0.001, 0.002). Fails the test when the shape has no layout. */
void *tu_random_rows_blob(uint64_t *rng, enum nb_wpath p, int group, int64_t n_out, int64_t n_in,
                          struct nb_layout_planes *pl);

/* rows (ROWS layout) repacked to X16 with nb_repack_x16(step) into a new 64-byte aligned
 * buffer (free()); it is filled with 0xA5 first, so the repack must define every byte. */
void *tu_to_x16(enum nb_wpath p, int group, const void *rows, int64_t n_out, int64_t n_in,
                int64_t step);

/* Activations: n_tok f32 rows of N(0, 1) (ldx = n_in + pad_x floats apart) and their int8
 * groups from nb_act_quant_q8_ref (codes ldq = n_in + pad_q apart, pad_q a multiple of 32;
 * scales and sums ldg = ldq / 32 apart). tight: the last token's codes end the buffer
 * (a kernel reading past a row is caught by ASan); else the buffer is n_tok * ldq. */
struct tu_acts {
    int n_tok;
    int64_t n_in, ldx, ldq, ldg;
    float *x;
    int8_t *q;
    float *d;
    int32_t *s;
};
void tu_acts_init(struct tu_acts *a, uint64_t *rng, int n_tok, int64_t n_in, int group,
                  int64_t pad_x, int64_t pad_q, int tight);
void tu_acts_free(struct tu_acts *a);

/* n_tok * ldy floats, all NaN (free()): rows a kernel must not write stay NaN. */
float *tu_nan_y(int n_tok, int64_t ldy);

/* y against yr, token t row r at t * ldy + r: in rows [r0, r1) |y - yr| <= tol * mag
 * (mag[t * n_out + r], the sum of |each term|), outside them y must be NaN (untouched).
 * Fails the test naming `what`; returns the worst |y - yr| / mag. */
double tu_compare_y(const float *y, const float *yr, const double *mag, int n_tok, int64_t ldy,
                    int64_t n_out, int64_t r0, int64_t r1, double tol, const char *what);

/* A GGUF block format's X16 kernel `fn` against its reference `ref` on one random problem:
 * n_out x n_in rows of random blocks (finite f16 scales, every other byte random) repacked
 * with nb_kq_repack_x16, n_tok tokens of N(0, 1) activations (every third token with
 * spikes of 8) quantized as the format reads them (per 256 with code sums, or per 32),
 * rows [r0, r1). Rows outside the range must stay untouched; inside, exact: bit-identical,
 * else |y - yref| <= tol * sum_k |w_k| |xd q_k| (w decoded with dq). Fails the test naming
 * `what`; returns the worst ratio. */
double tu_kq_check(uint64_t *rng, enum nb_wformat f, nb_gemm_kq_fn fn, nb_gemm_kq_fn ref,
                   void (*dq)(const void *, int64_t, int64_t, float *), int exact,
                   int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1, double tol,
                   const char *what);

/* One GEMM test shape: n_out x n_in weights, rows [r0, r1) computed, n_tok tokens. */
struct tu_gshape {
    int64_t n_out, n_in, r0, r1;
    int group, n_tok;
};

/* One random problem of shape g on path p: a ROWS blob (its planes in pl), its X16 repack,
 * the activations (tu_acts_init with pad_x, pad_q, tight) and ldy = n_out + 16.
 * tu_problem_free releases it. */
struct tu_problem {
    struct nb_layout_planes pl;
    uint8_t *rows, *x16;
    struct tu_acts a;
    int64_t ldy;
};
void tu_problem_init(struct tu_problem *pb, uint64_t *rng, enum nb_wpath p,
                     const struct tu_gshape *g, int64_t pad_x, int64_t pad_q, int tight);
void tu_problem_free(struct tu_problem *pb);

#endif
