/* test_kernels_quant — reference int4 / int8 GEMMs against dequantize + double math. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "formats/tensor.h"
#include "quant/dequant.h"
#include "quant/kq_repack.h"
#include "quant/repack.h"

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

/* Every weight format through the kernel table's one signature (the reference table and
 * this CPU's), against double math over the decoded weights: catches an adapter that
 * passes an argument to the wrong place, and a format mapped to the wrong kernel.
 * Tolerance: f32 accumulation in the SIMD kernels; the AVX512-BF16 variant of the
 * w4a16-x16 kernel rounds the activations to bf16 (relative error <= 2^-8 per product). */
#define TOL_TABLE      1e-5
#define TOL_TABLE_BF16 4e-3

/* A random matrix in format f: the blob the table's GEMM reads and the exact values it
 * decodes to (wd). */
static void *format_blob(enum nb_wformat f, const struct shape *s, const float *w, float *wd)
{
    const struct nb_wformat_info *fi = nb_wformat_info(f);
    struct nb_layout_planes pl;
    assert_true(nb_wformat_planes(f, s->group, s->n_out, s->n_in, &pl));
    /* (k-quant rows are not padded: round the allocation up) */
    uint8_t *blob = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)(pl.total + 63) / 64 * 64);
    assert_non_null(blob);
    int64_t n = s->n_out * s->n_in;
    struct nb_block_info bi;
    if (nb_wformat_block(f, &bi)) { /* random blocks, finite f16 scales */
        int kx16 = f == bi.x16, bytes = bi.bytes;
        int d_at = f == NB_WF_Q6_K || f == NB_WF_Q6_K_X16 ? 208 : 0; /* the f16 d */
        int dmin_at = bi.elems == 256 && !d_at ? 2 : -1;               /* Q4_K, Q5_K */
        int64_t rows_total = s->n_out * (s->n_in / bi.elems) * bytes;
        uint8_t *rows = kx16 ? malloc((size_t)rows_total) : blob;
        assert_non_null(rows);
        for (int64_t i = 0; i < rows_total; i++) rows[i] = (uint8_t)tu_rand_u64(&g_rng);
        for (int64_t b = 0; b < rows_total / bytes; b++) {
            uint16_t d = nb_f32_to_f16(0.01f * tu_rand_gauss(&g_rng));
            memcpy(rows + b * bytes + d_at, &d, 2);
            if (dmin_at >= 0) memcpy(rows + b * bytes + dmin_at, &d, 2);
        }
        enum nb_dtype dt = NB_DTYPE_F32;
        for (int k = 0; k < NB_DTYPE_COUNT; k++)
            if (!strcmp(nb_dtype_name((enum nb_dtype)k), bi.dtype)) dt = (enum nb_dtype)k;
        assert_int_not_equal(dt, NB_DTYPE_F32);
        assert_int_equal(nb_dequant(dt, rows, wd, s->n_out * s->n_in), NB_OK);
        (void)w;
        if (!kx16) return blob;
        /* the records decode to the file's values, bit for bit (a lossless shuffle) */
        assert_int_equal(nb_kq_repack_x16(f, rows, s->n_out, s->n_in, 0, s->n_out / 16, blob),
                         NB_OK);
        void (*dq)(const void *, int64_t, int64_t, float *) =
            f == NB_WF_Q4_K_X16   ? nb_dequant_row_q4_k_x16_ref
            : f == NB_WF_Q5_K_X16 ? nb_dequant_row_q5_k_x16_ref
            : f == NB_WF_Q6_K_X16 ? nb_dequant_row_q6_k_x16_ref
            : f == NB_WF_Q4_0_X16 ? nb_dequant_row_q4_0_x16_ref
            : f == NB_WF_IQ4_NL_X16 ? nb_dequant_row_iq4_nl_x16_ref
            : f == NB_WF_IQ4_XS_X16 ? nb_dequant_row_iq4_xs_x16_ref
                                  : nb_dequant_row_q8_0_x16_ref;
        float *back = malloc(sizeof(float) * (size_t)s->n_in);
        assert_non_null(back);
        for (int64_t r = 0; r < s->n_out; r++) {
            dq(blob, s->n_in, r, back);
            assert_memory_equal(back, wd + r * s->n_in, sizeof(float) * (size_t)s->n_in);
        }
        free(back);
        free(rows);
        return blob;
    }
    if (fi->plain) {
        for (int64_t i = 0; i < n; i++) {
            if (f == NB_WF_F32) {
                memcpy(blob + 4 * i, &w[i], 4);
                wd[i] = w[i];
                continue;
            }
            uint16_t h = f == NB_WF_F16 ? nb_f32_to_f16(w[i]) : nb_f32_to_bf16(w[i]);
            memcpy(blob + 2 * i, &h, 2);
            wd[i] = f == NB_WF_F16 ? nb_f16_to_f32(h) : nb_bf16_to_f32(h);
        }
        return blob;
    }
    struct shape rows = *s;
    void *rb = packed(fi->path, &rows, w);
    assert_int_equal(nb_dequantize_rows(fi->path, s->group, rb, s->n_out, s->n_in, 0, s->n_out,
                                        wd), NB_OK);
    if (fi->layout == NB_LAYOUT_ROWS) {
        free(blob);
        return rb;
    }
    assert_int_equal(nb_repack_x16(fi->path, s->group, rb, blob, s->n_out, s->n_in, 0), NB_OK);
    free(rb);
    return blob;
}

static void check_table(const struct nb_kernels *k, const char *table)
{
    double worst = 0;
    for (int f = 0; f < NB_WF_COUNT; f++)
        for (int it = 0; it < 4; it++) {
            const struct nb_wformat_info *fi = nb_wformat_info((enum nb_wformat)f);
            assert_non_null(k->gemm[f].run);
            assert_non_null(k->gemm[f].name);
            struct shape s;
            random_shape(&s, it == 1 ? 5 : it == 3 ? 7 : 1);
            s.n_out = 16 * (1 + (int64_t)(tu_rand_u64(&g_rng) % 4));
            struct nb_block_info bi;
            if (nb_wformat_block((enum nb_wformat)f, &bi)) { /* whole blocks and records */
                s.n_in = bi.rec_k * (1 + (int64_t)(tu_rand_u64(&g_rng) % (768 / bi.rec_k)));
                if (bi.elems == 32) s.group = 32; /* Q4_0 / Q8_0: int8 activations per 32 */
            }
            s.r0 = it < 2 ? 0 : 16;
            s.r1 = it == 3 ? s.n_out - (s.n_out > 16 ? 16 : 0) : s.n_out;
            if (s.r0 >= s.r1) s.r0 = 0;
            int64_t ng = s.n_in / s.group, ldx = s.n_in + 3, ldy = s.n_out + 5;
            int64_t ldxq = s.n_in + 256, ldxg = ldxq / 16; /* Q8K: 16 words per 256 */
            float *w = malloc(sizeof(float) * s.n_out * s.n_in);
            float *wd = malloc(sizeof(float) * s.n_out * s.n_in);
            float *x = malloc(sizeof(float) * s.n_tok * ldx);
            float *xr = malloc(sizeof(float) * s.n_tok * ldx);
            int8_t *xq = malloc((size_t)(s.n_tok * ldxq));
            float *xd = malloc(sizeof(float) * s.n_tok * ldxg);
            int32_t *xsum = malloc(sizeof(int32_t) * s.n_tok * ldxg);
            float *y = malloc(sizeof(float) * s.n_tok * ldy);
            float *scratch = malloc(sizeof(float) * s.n_in);
            for (int64_t i = 0; i < s.n_out * s.n_in; i++) w[i] = tu_rand_gauss(&g_rng);
            for (int64_t i = 0; i < s.n_tok * ldx; i++) xr[i] = x[i] = tu_rand_gauss(&g_rng);
            for (int t = 0; t < s.n_tok && fi->input != NB_INPUT_F32; t++) {
                int g = fi->input == NB_INPUT_Q8K ? 256 : s.group;
                if (g == 256)
                    nb_act_quant_q8k(nb_act_quant_q8_ref, x + t * ldx, s.n_in, xq + t * ldxq,
                                     xd + t * ldxg, xsum + t * ldxg);
                else
                    nb_act_quant_q8_ref(x + t * ldx, s.n_in, s.group, xq + t * ldxq,
                                        xd + t * ldxg, xsum + t * ldxg);
                for (int64_t i = 0; i < s.n_in; i++)
                    xr[t * ldx + i] = xd[t * ldxg + i / g] * (float)xq[t * ldxq + i];
            }
            (void)ng;
            void *blob = format_blob((enum nb_wformat)f, &s, w, wd);
            for (int64_t i = 0; i < s.n_tok * ldy; i++) y[i] = NAN;
            struct nb_gemm_args a = {.y = y, .ldy = ldy, .x = x, .ldx = ldx, .xq = xq, .xd = xd,
                                     .xsum = xsum, .ldxq = ldxq, .ldxg = ldxg, .w = blob,
                                     .n_out = s.n_out, .n_in = s.n_in, .group = s.group,
                                     .n_tok = s.n_tok};
            k->gemm[f].run(&a, s.r0, s.r1, scratch);
            char what[96];
            snprintf(what, sizeof what, "%s table, format %s (kernel %s)", table, fi->name,
                     k->gemm[f].name);
            int bf16_act = f == NB_WF_W4A16_X16 && strcmp(k->gemm[f].name, "ref") != 0;
            double r = check_y(y, ldy, wd, xr, ldx, &s, bf16_act ? TOL_TABLE_BF16 : TOL_TABLE,
                               what);
            worst = r > worst ? r : worst;
            free(blob), free(w), free(wd), free(x), free(xr), free(xq), free(xd), free(xsum);
            free(y), free(scratch);
        }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "%s table (%s): worst error ratio %.3g\n", table, k->isa, worst);
}

static void test_format_table(void **state)
{
    const struct nb_kernels *r = nb_kernels_ref();
    for (int f = 0; f < NB_WF_COUNT; f++) assert_string_equal(r->gemm[f].name, "ref");
    assert_ptr_equal(r->act_quant_q8, nb_act_quant_q8_ref);
    check_table(r, "reference");
    check_table(nb_kernels_get(), "this CPU's");
}

/* The format vocabulary: every (path, layout) pair that exists maps to a format whose
 * traits give it back; bits per weight come from the planes. */
static void test_wformat(void **state)
{
    for (int f = 0; f < NB_WF_COUNT; f++) {
        const struct nb_wformat_info *fi = nb_wformat_info((enum nb_wformat)f);
        assert_non_null(fi);
        enum nb_wformat back;
        if (f == NB_WF_F16) {
            assert_true(fi->plain);
            continue;
        }
        struct nb_block_info bi;
        if (nb_wformat_block((enum nb_wformat)f, &bi)) { /* a GGUF source's blocks */
            assert_false(fi->plain);
            assert_int_equal(fi->layout, (enum nb_wformat)f == bi.x16 ? NB_LAYOUT_X16 : NB_LAYOUT_ROWS);
            assert_int_equal(fi->input, (enum nb_wformat)f == bi.rows ? NB_INPUT_F32
                                        : bi.elems == 256 ? NB_INPUT_Q8K
                                                          : NB_INPUT_Q8);
            continue;
        }
        assert_true(nb_wformat_of(fi->path, fi->layout, &back));
        assert_int_equal(back, f);
        assert_int_equal(fi->input == NB_INPUT_Q8, fi->path == NB_WPATH_W4A8);
    }
    assert_null(nb_wformat_info(NB_WF_COUNT));
    enum nb_wformat out;
    assert_false(nb_wformat_of(NB_WPATH_W8A16, NB_LAYOUT_X16, &out));
    assert_true(nb_wformat_of(NB_WPATH_W4A8, 0, &out)); /* 0 reads as ROWS (old files) */
    assert_int_equal(out, NB_WF_W4A8);
    struct nb_layout_planes pl;
    assert_true(nb_wformat_planes(NB_WF_F16, 0, 4, 8, &pl));
    assert_int_equal(pl.size[0], 2 * 4 * 8);
    assert_false(nb_wformat_planes(NB_WF_W4A8_X16, 128, 8, 256, &pl)); /* n_out % 16 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_w4a16_w8a16),
        cmocka_unit_test(test_act_quant),
        cmocka_unit_test(test_gemm_w4a8),
        cmocka_unit_test(test_format_table), cmocka_unit_test(test_wformat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
