/* tests/helpers/kernel_fixture.c — the GEMM kernel tests' shared data (kernel_fixture.h). */
#include "helpers/kernel_fixture.h"

#include "helpers/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "quant/kq_repack.h"
#include "quant/repack.h"

void *tu_random_rows_blob(uint64_t *rng, enum nb_wpath p, int group, int64_t n_out, int64_t n_in,
                          struct nb_layout_planes *pl)
{
    assert_true(nb_layout_planes(p, group, n_out, n_in, pl));
    uint8_t *b = aligned_alloc(64, (size_t)pl->total);
    assert_non_null(b);
    memset(b, 0, (size_t)pl->total);
    for (int64_t i = 0; i < pl->size[0]; i++)
        b[pl->offset[0] + i] = (uint8_t)tu_rand_u64(rng);
    if (p == NB_WPATH_W8A16) {
        for (int64_t i = 0; i < pl->size[0]; i++) /* codes -127..127 as the quantizer writes */
            b[pl->offset[0] + i] = (uint8_t)(int8_t)((int)(tu_rand_u64(rng) % 255) - 127);
        for (int64_t r = 0; r < n_out; r++) {
            float d = 0.001f * (1.0f + (float)tu_rand_unit(rng));
            memcpy(b + pl->offset[1] + 4 * r, &d, 4);
        }
        return b;
    }
    int64_t ns = pl->size[1] / 2;
    for (int64_t i = 0; i < ns; i++) {
        float d = 0.02f * tu_rand_gauss(rng);
        nb_q_store_u16(b + pl->offset[1] + 2 * i, nb_f32_to_bf16(d));
        if (p == NB_WPATH_W4A16)
            nb_q_store_u16(b + pl->offset[2] + 2 * i,
                           nb_f32_to_bf16(-8.0f * fabsf(d) + 0.01f * tu_rand_gauss(rng)));
    }
    return b;
}

void *tu_to_x16(enum nb_wpath p, int group, const void *rows, int64_t n_out, int64_t n_in,
                int64_t step)
{
    struct nb_layout_planes px;
    assert_true(nb_layout_planes_x(p, NB_LAYOUT_X16, group, n_out, n_in, &px));
    void *x = aligned_alloc(64, (size_t)px.total);
    assert_non_null(x);
    memset(x, 0xA5, (size_t)px.total);
    if (nb_repack_x16(p, group, rows, x, n_out, n_in, step)) fail_msg("%s", nb_last_error());
    return x;
}

void tu_acts_init(struct tu_acts *a, uint64_t *rng, int n_tok, int64_t n_in, int group,
                  int64_t pad_x, int64_t pad_q, int tight)
{
    a->n_tok = n_tok;
    a->n_in = n_in;
    a->ldx = n_in + pad_x;
    a->ldq = n_in + pad_q;
    a->ldg = a->ldq / 32;
    a->x = malloc(sizeof(float) * (size_t)(n_tok * a->ldx));
    a->q = malloc((size_t)(tight ? (n_tok - 1) * a->ldq + n_in : n_tok * a->ldq));
    a->d = malloc(sizeof(float) * (size_t)(n_tok * a->ldg));
    a->s = malloc(sizeof(int32_t) * (size_t)(n_tok * a->ldg));
    assert_true(a->x && a->q && a->d && a->s);
    for (int64_t i = 0; i < n_tok * a->ldx; i++)
        a->x[i] = tu_rand_gauss(rng);
    for (int t = 0; t < n_tok; t++)
        nb_act_quant_q8_ref(a->x + t * a->ldx, n_in, group, a->q + t * a->ldq, a->d + t * a->ldg,
                            a->s + t * a->ldg);
}

void tu_acts_free(struct tu_acts *a)
{
    free(a->x), free(a->q), free(a->d), free(a->s);
}

void tu_problem_init(struct tu_problem *pb, uint64_t *rng, enum nb_wpath p,
                     const struct tu_gshape *g, int64_t pad_x, int64_t pad_q, int tight)
{
    pb->rows = tu_random_rows_blob(rng, p, g->group, g->n_out, g->n_in, &pb->pl);
    pb->x16 = tu_to_x16(p, g->group, pb->rows, g->n_out, g->n_in, 0);
    tu_acts_init(&pb->a, rng, g->n_tok, g->n_in, g->group, pad_x, pad_q, tight);
    pb->ldy = g->n_out + 16;
}

void tu_problem_free(struct tu_problem *pb)
{
    free(pb->rows), free(pb->x16);
    tu_acts_free(&pb->a);
}

float *tu_nan_y(int n_tok, int64_t ldy)
{
    float *y = malloc(sizeof(float) * (size_t)(n_tok * ldy));
    assert_non_null(y);
    for (int64_t i = 0; i < n_tok * ldy; i++)
        y[i] = NAN;
    return y;
}

double tu_compare_y(const float *y, const float *yr, const double *mag, int n_tok, int64_t ldy,
                    int64_t n_out, int64_t r0, int64_t r1, double tol, const char *what)
{
    double worst = 0;
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_out; r++) {
            float v = y[t * ldy + r];
            if (r < r0 || r >= r1) {
                if (!isnan(v))
                    fail_msg("%s: row %lld outside [%lld, %lld) written", what, (long long)r,
                             (long long)r0, (long long)r1);
                continue;
            }
            double err = fabs((double)v - yr[t * ldy + r]), m = mag[t * n_out + r];
            if (!(err <= tol * m))
                fail_msg("%s: n_out %lld tok %d row %lld: %.9g vs %.9g (mag %g)", what,
                         (long long)n_out, t, (long long)r, (double)v, (double)yr[t * ldy + r], m);
            if (m > 0 && err / m > worst) worst = err / m;
        }
    return worst;
}

double tu_kq_check(uint64_t *rng, enum nb_wformat f, nb_gemm_kq_fn fn, nb_gemm_kq_fn ref,
                   void (*dq)(const void *, int64_t, int64_t, float *), int exact,
                   int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1, double tol,
                   const char *what)
{
    struct nb_block_info bi;
    assert_true(nb_wformat_block(f, &bi));
    const int64_t rows_bytes = n_out * (n_in / bi.elems) * bi.bytes;
    /* the f16 scales: Q6_K's d at byte 208, the others' at 0 (Q4_K / Q5_K's dmin at 2) */
    const int d_at = f == NB_WF_Q6_K_X16 ? 208 : 0;
    const int dmin = f == NB_WF_Q4_K_X16 || f == NB_WF_Q5_K_X16;
    uint8_t *rows = malloc((size_t)rows_bytes);
    assert_non_null(rows);
    for (int64_t i = 0; i < rows_bytes; i++) rows[i] = (uint8_t)tu_rand_u64(rng);
    for (int64_t b = 0; b < rows_bytes / bi.bytes; b++) {
        uint16_t d = nb_f32_to_f16(0.02f * tu_rand_gauss(rng));
        memcpy(rows + b * bi.bytes + d_at, &d, 2);
        if (dmin) {
            d = nb_f32_to_f16(0.01f * tu_rand_gauss(rng));
            memcpy(rows + b * bi.bytes + 2, &d, 2);
        }
    }
    struct nb_layout_planes pl;
    assert_true(nb_wformat_planes(f, 0, n_out, n_in, &pl));
    uint8_t *rec = aligned_alloc(64, (size_t)(pl.total + 63) / 64 * 64);
    assert_non_null(rec);
    assert_int_equal(nb_kq_repack_x16(f, rows, n_out, n_in, 0, n_out / 16, rec), NB_OK);
    const int64_t ldxq = n_in + 64, ldxg = ldxq / 16, ldy = n_out + 3;
    const int g = bi.elems == 256 ? 256 : 32;
    int8_t *xq = malloc((size_t)(n_tok * ldxq));
    float *xd = calloc((size_t)(n_tok * ldxg), sizeof(float));
    int32_t *xs = calloc((size_t)(n_tok * ldxg), sizeof(int32_t));
    float *x = malloc(sizeof(float) * (size_t)n_in), *w = malloc(sizeof(float) * (size_t)n_in);
    float *ya = malloc(sizeof(float) * (size_t)(n_tok * ldy));
    float *yb = malloc(sizeof(float) * (size_t)(n_tok * ldy));
    assert_true(xq && xd && xs && x && w && ya && yb);
    for (int t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < n_in; i++)
            x[i] = tu_rand_gauss(rng) * (t % 3 == 2 && i % 7 == 0 ? 8.0f : 1.0f);
        if (g == 256)
            nb_act_quant_q8k(nb_act_quant_q8_ref, x, n_in, xq + t * ldxq, xd + t * ldxg,
                             xs + t * ldxg);
        else
            nb_act_quant_q8_ref(x, n_in, 32, xq + t * ldxq, xd + t * ldxg, xs + t * ldxg);
    }
    for (int64_t i = 0; i < n_tok * ldy; i++) ya[i] = yb[i] = 7.0f;
    ref(ya, ldy, xq, xd, xs, ldxq, ldxg, rec, n_out, n_in, n_tok, r0, r1);
    fn(yb, ldy, xq, xd, xs, ldxq, ldxg, rec, n_out, n_in, n_tok, r0, r1);
    const char *name = nb_wformat_info(f)->name;
    double worst = 0;
    for (int64_t r = 0; r < n_out; r++) {
        dq(rec, n_in, r, w);
        for (int t = 0; t < n_tok; t++) {
            float a = ya[t * ldy + r], b = yb[t * ldy + r];
            if (r < r0 || r >= r1) { /* rows outside the range are not written */
                if (!(a == 7.0f && b == 7.0f))
                    fail_msg("%s, %s, %d tokens: row %lld outside [%lld, %lld) written", what,
                             name, n_tok, (long long)r, (long long)r0, (long long)r1);
                continue;
            }
            if (exact) {
                if (memcmp(&a, &b, sizeof a))
                    fail_msg("%s, %s, %d tokens: row %lld token %d: %.9g vs ref %.9g (must be "
                             "equal)", what, name, n_tok, (long long)r, t, (double)b, (double)a);
                continue;
            }
            double mag = 0;
            for (int64_t i = 0; i < n_in; i++)
                mag += fabs(w[i]) * fabs((double)xd[t * ldxg + i / g] * xq[t * ldxq + i]);
            double ratio = fabs((double)a - b) / (mag > 0 ? mag : 1);
            if (ratio > worst) worst = ratio;
            if (!(ratio <= tol))
                fail_msg("%s, %s, %d tokens: row %lld token %d: %g vs ref %g (ratio %g)", what,
                         name, n_tok, (long long)r, t, (double)b, (double)a, ratio);
        }
    }
    free(rows), free(rec), free(xq), free(xd), free(xs), free(x), free(w), free(ya), free(yb);
    return worst;
}
