/* test_kernels_quant — reference int4 / int8 GEMMs against dequantize + double math. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"

/* |y - y_ref| <= TOL * sum_k |w_k x_k| + ABS_FLOOR, y_ref in double over the decoded
 * weights (and, for w4a8, the decoded activations xd * xq). Measured worst ratios over
 * the random shapes below (n_in <= 1024): w4a16 3.9e-8, w8a16 3.5e-8, w4a8 3.2e-8. */
#define TOL_F32_DOT  1e-6
#define TOL_W4A8_INT 1e-6
#define ABS_FLOOR    1e-30
/* w4a8 against the f32 activations it approximates (int8 per-group activation
 * error): measured worst ratio 3.9e-3 of sum |w x| on Gaussian data. */
#define TOL_W4A8_VS_F32 1e-2

static uint64_t g_rng = 7;

struct shape {
    int64_t n_out, n_in, r0, r1;
    int group, n_tok;
};

static void random_shape(struct shape *s, int n_tok)
{
    static const int groups[] = {32, 64, 128};
    s->group = groups[tu_rand_u64(&g_rng) % 3];
    s->n_in = s->group * (int64_t)(1 + tu_rand_u64(&g_rng) % (1024 / s->group));
    s->n_out = (1 + (int64_t)(tu_rand_u64(&g_rng) % 70)) | 1; /* odd row counts */
    s->r0 = (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)s->n_out);
    s->r1 = s->r0 + 1 + (int64_t)(tu_rand_u64(&g_rng) % (uint64_t)(s->n_out - s->r0));
    s->n_tok = n_tok;
}

static void *packed(enum nb_wpath path, const struct shape *s, const float *w)
{
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(path, s->group, s->n_out, s->n_in, &pl));
    void *blob = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
    assert_non_null(blob);
    if (nb_quantize_rows(path, s->group, w, s->n_out, s->n_in, 0, s->n_out, NULL, 1, blob, NULL))
        fail_msg("%s", nb_last_error());
    return blob;
}

/* y[t][r] in rows r0..r1 against sum_k wd[r][k] * xr[t][k] in double; rows outside
 * r0..r1 must be untouched (NAN sentinel). Returns the worst error ratio. */
static double check_y(const float *y, int64_t ldy, const float *wd, const float *xr, int64_t ldx,
                      const struct shape *s, double tol, const char *what)
{
    double worst = 0;
    for (int t = 0; t < s->n_tok; t++)
        for (int64_t r = 0; r < s->n_out; r++) {
            float v = y[t * ldy + r];
            if (r < s->r0 || r >= s->r1) {
                if (!isnan(v))
                    fail_msg("%s: row %lld outside the range written", what, (long long)r);
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < s->n_in; k++) {
                double p = (double)wd[r * s->n_in + k] * xr[t * ldx + k];
                ref += p;
                mag += fabs(p);
            }
            double err = fabs((double)v - ref);
            if (err > tol * mag + ABS_FLOOR)
                fail_msg("%s: n_out %lld n_in %lld G %d tok %d row %lld: %.9g vs %.9g (tol %g)",
                         what, (long long)s->n_out, (long long)s->n_in, s->group, t, (long long)r,
                         (double)v, ref, tol);
            if (mag > 0 && err / mag > worst) worst = err / mag;
        }
    return worst;
}

static void test_gemm_w4a16_w8a16(void **state)
{
    double worst[2] = {0, 0};
    for (int it = 0; it < 24; it++) {
        struct shape s;
        random_shape(&s, it % 2 ? 7 : 1);
        int64_t ldx = s.n_in + 3, ldy = s.n_out + 5;
        float *w = malloc(sizeof(float) * s.n_out * s.n_in);
        float *wd = malloc(sizeof(float) * s.n_out * s.n_in);
        float *x = malloc(sizeof(float) * s.n_tok * ldx);
        float *y = malloc(sizeof(float) * s.n_tok * ldy);
        float *scratch = malloc(sizeof(float) * s.n_in);
        for (int64_t i = 0; i < s.n_out * s.n_in; i++)
            w[i] = tu_rand_gauss(&g_rng);
        for (int64_t i = 0; i < s.n_tok * ldx; i++)
            x[i] = tu_rand_gauss(&g_rng);
        for (int p = 0; p < 2; p++) {
            enum nb_wpath path = p ? NB_WPATH_W8A16 : NB_WPATH_W4A16;
            void *blob = packed(path, &s, w);
            assert_int_equal(
                nb_dequantize_rows(path, s.group, blob, s.n_out, s.n_in, 0, s.n_out, wd), NB_OK);
            for (int64_t i = 0; i < s.n_tok * ldy; i++)
                y[i] = NAN;
            if (p)
                nb_gemm_w8a16_ref(y, ldy, x, ldx, blob, s.n_out, s.n_in, s.n_tok, s.r0, s.r1,
                                  scratch);
            else
                nb_gemm_w4a16_ref(y, ldy, x, ldx, blob, s.n_out, s.n_in, s.group, s.n_tok, s.r0,
                                  s.r1, scratch);
            double wr = check_y(y, ldy, wd, x, ldx, &s, TOL_F32_DOT, nb_wpath_name(path));
            if (wr > worst[p]) worst[p] = wr;
            free(blob);
        }
        free(w);
        free(wd);
        free(x);
        free(y);
        free(scratch);
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "worst error ratio: w4a16 %.3g, w8a16 %.3g\n", worst[0], worst[1]);
}

static void test_act_quant(void **state)
{
    float x[256];
    int8_t q[256];
    float d[8];
    int32_t gs[8];
    for (int i = 0; i < 256; i++)
        x[i] = tu_rand_gauss(&g_rng) * (i < 128 ? 1.0f : 1e-3f);
    for (int i = 64; i < 96; i++)
        x[i] = 0.0f; /* an all-zero group of 32 */
    nb_act_quant_q8_ref(x, 256, 32, q, d, gs);
    for (int g = 0; g < 8; g++) {
        float amax = 0;
        int32_t sum = 0;
        for (int i = g * 32; i < (g + 1) * 32; i++) {
            amax = fmaxf(amax, fabsf(x[i]));
            sum += q[i];
            assert_true(q[i] >= -127 && q[i] <= 127);
            assert_true(fabsf(x[i] - d[g] * (float)q[i]) <= 0.5001f * d[g]);
        }
        assert_true(d[g] == amax / 127.0f);
        assert_int_equal(gs[g], sum);
    }
    assert_true(d[2] == 0.0f && gs[2] == 0);
}

static void test_gemm_w4a8(void **state)
{
    double worst = 0, worst_f32 = 0;
    for (int it = 0; it < 24; it++) {
        struct shape s;
        random_shape(&s, it % 2 ? 7 : 1);
        int64_t ng = s.n_in / s.group;
        int64_t ldx = s.n_in, ldy = s.n_out + 2, ldxq = s.n_in + 16, ldxg = ng + 1;
        float *w = malloc(sizeof(float) * s.n_out * s.n_in);
        float *wd = malloc(sizeof(float) * s.n_out * s.n_in);
        float *x = malloc(sizeof(float) * s.n_tok * ldx);
        float *xr = malloc(sizeof(float) * s.n_tok * ldx);
        int8_t *xq = malloc((size_t)(s.n_tok * ldxq));
        float *xd = malloc(sizeof(float) * s.n_tok * ldxg);
        int32_t *xsum = malloc(sizeof(int32_t) * s.n_tok * ldxg);
        float *y = malloc(sizeof(float) * s.n_tok * ldy);
        for (int64_t i = 0; i < s.n_out * s.n_in; i++)
            w[i] = tu_rand_gauss(&g_rng);
        for (int64_t i = 0; i < s.n_tok * ldx; i++)
            x[i] = tu_rand_gauss(&g_rng);
        for (int t = 0; t < s.n_tok; t++) {
            nb_act_quant_q8_ref(x + t * ldx, s.n_in, s.group, xq + t * ldxq, xd + t * ldxg,
                                xsum + t * ldxg);
            for (int64_t k = 0; k < s.n_in; k++)
                xr[t * ldx + k] = xd[t * ldxg + k / s.group] * (float)xq[t * ldxq + k];
        }
        void *blob = packed(NB_WPATH_W4A8, &s, w);
        assert_int_equal(
            nb_dequantize_rows(NB_WPATH_W4A8, s.group, blob, s.n_out, s.n_in, 0, s.n_out, wd),
            NB_OK);
        for (int64_t i = 0; i < s.n_tok * ldy; i++)
            y[i] = NAN;
        nb_gemm_w4a8_ref(y, ldy, xq, xd, xsum, ldxq, ldxg, blob, s.n_out, s.n_in, s.group, s.n_tok,
                         s.r0, s.r1);
        double wr = check_y(y, ldy, wd, xr, ldx, &s, TOL_W4A8_INT, "w4a8 vs decoded activations");
        double wf = check_y(y, ldy, wd, x, ldx, &s, TOL_W4A8_VS_F32, "w4a8 vs f32 activations");
        worst = wr > worst ? wr : worst;
        worst_f32 = wf > worst_f32 ? wf : worst_f32;
        free(blob);
        free(w);
        free(wd);
        free(x);
        free(xr);
        free(xq);
        free(xd);
        free(xsum);
        free(y);
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "worst error ratio: w4a8 %.3g (decoded x), %.3g (f32 x)\n", worst,
                worst_f32);
}

static void test_dispatch(void **state)
{
    const struct nb_kernels *k = nb_kernels_ref();
    assert_ptr_equal(k->gemm_w4a8, nb_gemm_w4a8_ref);
    assert_ptr_equal(k->gemm_w4a16, nb_gemm_w4a16_ref);
    assert_ptr_equal(k->gemm_w8a16, nb_gemm_w8a16_ref);
    assert_ptr_equal(k->act_quant_q8, nb_act_quant_q8_ref);
    k = nb_kernels_get();
    assert_non_null(k->gemm_w4a8);
    assert_non_null(k->gemm_w4a16);
    assert_non_null(k->gemm_w8a16);
    assert_non_null(k->act_quant_q8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_w4a16_w8a16),
        cmocka_unit_test(test_act_quant),
        cmocka_unit_test(test_gemm_w4a8),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
