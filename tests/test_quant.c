/* test_quant — grids, scale search, packing of whole matrices, bits per weight. */
#include "helpers/testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fp.h"
#include "kernels/kernels.h"
#include "quant/dequant.h"
#include "quant/quant.h"
#include "quant/search.h"

/* Relative RMS error sqrt(sum (w - w^)^2 / sum w^2) on N(0, 1) weights, 64 x 1024,
 * seed 1. Measured (clang 14 and gcc 12, x86-64), absmax / search:
 *   w4a8  G=32 0.0859 / 0.0809   G=64 0.0949 / 0.0897   G=128 0.1031 / 0.0964
 *   w4a16 G=32 0.0782 / 0.0694   G=64 0.0898 / 0.0819   G=128 0.0996 / 0.0921
 *   w8a16      0.00778 / 0.00772
 *   bf16 0.00166, f32 0
 * Bounds below carry ~5% margin; the search must also beat absmax on the matrix. */
struct bound {
    enum nb_wpath path;
    int group;
    double absmax, search;
};
static const struct bound k_bounds[] = {
    {NB_WPATH_W4A8, 32, 0.090, 0.085},   {NB_WPATH_W4A8, 64, 0.100, 0.094},
    {NB_WPATH_W4A8, 128, 0.108, 0.101},  {NB_WPATH_W4A16, 32, 0.082, 0.073},
    {NB_WPATH_W4A16, 64, 0.094, 0.086},  {NB_WPATH_W4A16, 128, 0.105, 0.097},
    {NB_WPATH_W8A16, 0, 0.0082, 0.0081}, {NB_WPATH_BF16, 0, 0.0018, 0.0018},
    {NB_WPATH_F32, 0, 0.0, 0.0},
};

/* ---------------------------------------------------------------- helpers */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static void fill_gauss(float *w, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        w[i] = tu_rand_gauss(&g_rng);
}

static void *blob_alloc(enum nb_wpath path, int group, int64_t n_out, int64_t n_in)
{
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(path, group, n_out, n_in, &pl));
    void *p = aligned_alloc(NB_LAYOUT_ALIGN, (size_t)pl.total);
    assert_non_null(p);
    memset(p, 0xa5, (size_t)pl.total); /* the quantizer must define every byte */
    return p;
}

static size_t blob_size(enum nb_wpath path, int group, int64_t n_out, int64_t n_in)
{
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(path, group, n_out, n_in, &pl));
    return (size_t)pl.total;
}

static void quantize_ok(enum nb_wpath path, int group, const float *w, int64_t n_out, int64_t n_in,
                        const float *imp, int search, void *blob, struct nb_qstats *st)
{
    enum nb_status s =
        nb_quantize_rows(path, group, w, n_out, n_in, 0, n_out, imp, search, blob, st);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
}

static void dequantize_ok(enum nb_wpath path, int group, const void *blob, int64_t n_out,
                          int64_t n_in, float *out)
{
    enum nb_status s = nb_dequantize_rows(path, group, blob, n_out, n_in, 0, n_out, out);
    if (s != NB_OK) fail_msg("%s", nb_last_error());
}

/* ---------------------------------------------------------------- error bounds */

static void test_error_bounds(void **state)
{
    const int64_t n_out = 64, n_in = 1024;
    float *w = malloc(sizeof(float) * n_out * n_in);
    float *back = malloc(sizeof(float) * n_out * n_in);
    g_rng = 1;
    fill_gauss(w, n_out * n_in);
    for (size_t b = 0; b < sizeof k_bounds / sizeof k_bounds[0]; b++) {
        const struct bound *kb = &k_bounds[b];
        double rel_absmax = 0;
        for (int search = 0; search < 2; search++) {
            void *blob = blob_alloc(kb->path, kb->group, n_out, n_in);
            struct nb_qstats st;
            quantize_ok(kb->path, kb->group, w, n_out, n_in, NULL, search, blob, &st);
            dequantize_ok(kb->path, kb->group, blob, n_out, n_in, back);
            /* the stats are the error of what was stored */
            double e = nb_quant_wsqerr(w, back, NULL, n_out * n_in), ref = 0;
            for (int64_t i = 0; i < n_out * n_in; i++)
                ref += (double)w[i] * w[i];
            assert_true(fabs(e - st.err_sq) <= 1e-9 * ref);
            assert_true(fabs(ref - st.ref_sq) <= 1e-9 * ref);
            double rel = sqrt(st.err_sq / st.ref_sq);
            double bound = search ? kb->search : kb->absmax;
            if (getenv("NIBBLE_TEST_VERBOSE"))
                fprintf(stderr, "%-6s G=%-3d search=%d rel_rms=%.5f (bound %.4f)\n",
                        nb_wpath_name(kb->path), kb->group, search, rel, bound);
            if (rel > bound)
                fail_msg("%s G=%d search=%d: relative RMS %.5f above %.5f", nb_wpath_name(kb->path),
                         kb->group, search, rel, bound);
            if (!search) rel_absmax = rel;
            if (search && kb->path >= NB_WPATH_W8A16) assert_true(rel < rel_absmax);
            free(blob);
        }
    }
    free(w);
    free(back);
}

/* ---------------------------------------------------------------- never worse */

/* One group of n values of a random kind: Gaussian at a random scale, with outliers,
 * shifted (all of one sign), all zero, constant, tiny, or a two-level pattern. */
static void fill_group(float *x, int n)
{
    int kind = (int)(tu_rand_u64(&g_rng) % 8);
    float scale = (float)pow(10.0, 6.0 * tu_rand_unit(&g_rng) - 3.0);
    float shift = (float)(tu_rand_unit(&g_rng) * 4.0 - 2.0) * scale;
    for (int i = 0; i < n; i++) {
        float g = tu_rand_gauss(&g_rng) * scale;
        switch (kind) {
        case 0: x[i] = g; break;
        case 1: x[i] = tu_rand_u64(&g_rng) % 16 == 0 ? g * (float)(5.0 + 45.0 * tu_rand_unit(&g_rng)) : g; break;
        case 2: x[i] = g * 0.2f + shift; break;
        case 3: x[i] = 0.0f; break;
        case 4: x[i] = shift; break;
        case 5: x[i] = g * 1e-30f; break;
        case 6: x[i] = (tu_rand_u64(&g_rng) & 1) ? scale : -0.3f * scale; break;
        default: x[i] = i == 0 ? 1000.0f * scale : g; break; /* one huge outlier */
        }
    }
}

/* Per group (w8a16: per row), the searched quantization has weighted error <= the
 * absmax one, both computed from the stored (bf16-rounded) values. */
static void check_never_worse(enum nb_wpath path, int group, int64_t n_out, int64_t n_in,
                              int weighted)
{
    int64_t gs = path == NB_WPATH_W8A16 ? n_in : group;
    float *w = malloc(sizeof(float) * n_out * n_in);
    float *a = malloc(sizeof(float) * n_out * n_in);
    float *s = malloc(sizeof(float) * n_out * n_in);
    float *imp = malloc(sizeof(float) * n_in);
    for (int64_t g = 0; g < n_out * n_in / gs; g++)
        fill_group(w + g * gs, (int)gs);
    for (int64_t k = 0; k < n_in; k++)
        imp[k] = (float)(tu_rand_u64(&g_rng) % 4 == 0 ? 50.0 * tu_rand_unit(&g_rng) : tu_rand_unit(&g_rng) * 0.1);
    if (weighted) imp[3] = 0.0f;
    const float *ip = weighted ? imp : NULL;
    void *ba = blob_alloc(path, group, n_out, n_in), *bs = blob_alloc(path, group, n_out, n_in);
    quantize_ok(path, group, w, n_out, n_in, ip, 0, ba, NULL);
    quantize_ok(path, group, w, n_out, n_in, ip, 1, bs, NULL);
    dequantize_ok(path, group, ba, n_out, n_in, a);
    dequantize_ok(path, group, bs, n_out, n_in, s);
    int64_t n_groups = n_out * n_in / gs, better = 0;
    double ta = 0, ts = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        const float *ig = ip ? ip + (g * gs) % n_in : NULL;
        double ea = nb_quant_wsqerr(w + g * gs, a + g * gs, ig, gs);
        double es = nb_quant_wsqerr(w + g * gs, s + g * gs, ig, gs);
        if (!(es <= ea))
            fail_msg("%s G=%lld group %lld: search error %.9g > absmax %.9g", nb_wpath_name(path),
                     (long long)gs, (long long)g, es, ea);
        better += es < ea;
        ta += ea;
        ts += es;
    }
    if (getenv("NIBBLE_TEST_VERBOSE"))
        fprintf(stderr, "%-6s G=%-3lld imp=%d: %lld groups, %lld strictly better\n",
                nb_wpath_name(path), (long long)gs, weighted, (long long)n_groups,
                (long long)better);
    assert_true(better > n_groups / 2); /* the search does something */
    assert_true(ts < ta);
    free(w);
    free(a);
    free(s);
    free(imp);
    free(ba);
    free(bs);
}

static void test_search_never_worse(void **state)
{
    g_rng = 2;
    for (int weighted = 0; weighted < 2; weighted++) {
        check_never_worse(NB_WPATH_W4A8, 32, 48, 1024, weighted); /* 1536 groups */
        check_never_worse(NB_WPATH_W4A8, 128, 32, 1024, weighted);
        check_never_worse(NB_WPATH_W4A16, 32, 48, 1024, weighted);
        check_never_worse(NB_WPATH_W4A16, 64, 32, 1024, weighted);
        check_never_worse(NB_WPATH_W8A16, 0, 400, 64, weighted);
    }
}

/* The group functions return the error of what they stored. */
static void test_group_functions(void **state)
{
    float x[128], imp[128], xhat[128];
    uint8_t q[128];
    g_rng = 3;
    for (int it = 0; it < 200; it++) {
        fill_group(x, 128);
        for (int i = 0; i < 128; i++)
            imp[i] = (float)tu_rand_unit(&g_rng);
        for (int search = 0; search < 2; search++) {
            uint16_t d, m;
            double e = nb_quant_group_w4a8(x, imp, 128, search, q, &d);
            for (int i = 0; i < 128; i++) {
                assert_true(q[i] <= 15);
                xhat[i] = nb_bf16_to_f32(d) * (float)(q[i] - 8);
            }
            assert_true(e == nb_quant_wsqerr(x, xhat, imp, 128));
            e = nb_quant_group_w4a16(x, imp, 128, search, q, &d, &m);
            for (int i = 0; i < 128; i++) {
                float t = nb_bf16_to_f32(d) * (float)q[i];
                xhat[i] = t + nb_bf16_to_f32(m);
            }
            assert_true(e == nb_quant_wsqerr(x, xhat, imp, 128));
        }
    }
}

/* ---------------------------------------------------------------- batched search */

/* Groups (w8a16: rows) of every kind fill_group makes, plus zeros of both signs at the
 * minimum (a w4a16 min of -0 or +0 is stored as such). */
static void fill_matrix(float *w, int64_t n_groups, int64_t gs)
{
    for (int64_t g = 0; g < n_groups; g++) {
        float *x = w + g * gs;
        fill_group(x, (int)gs);
        if (g % 11 == 5) /* non-negative, with +0 and -0 */
            for (int64_t i = 0; i < gs; i++)
                x[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? -0.0f : fabsf(x[i]);
        if (g % 13 == 7) /* all -0 */
            for (int64_t i = 0; i < gs; i++) x[i] = -0.0f;
        if (g % 17 == 9) /* subnormal, with zeros: scales whose inverse overflows */
            for (int64_t i = 0; i < gs; i++) x[i] = i % 4 ? x[i] * 1e-39f / (fabsf(x[i]) + 1.0f) : 0.0f;
    }
}

/* nb_quantize_rows (the search on 16 groups at once, quant/search.h) stores exactly
 * what the one-group reference functions choose, codes and scales, with and without
 * importance and search, on every ISA level this CPU runs; its stats are the error of
 * what it stored. */
static void check_batched(enum nb_wpath path, int group, int64_t n_out, int64_t n_in,
                          int weighted, int search)
{
    int64_t gs = path == NB_WPATH_W8A16 ? n_in : group, ng = n_in / gs;
    float *w = malloc(sizeof(float) * n_out * n_in), *imp = malloc(sizeof(float) * n_in);
    float *back = malloc(sizeof(float) * n_out * n_in);
    void *scratch = malloc(NB_QUANT_W8_SCRATCH(n_in));
    fill_matrix(w, n_out * ng, gs);
    for (int64_t k = 0; k < n_in; k++)
        imp[k] = k % 17 == 3 ? 0.0f : (float)(tu_rand_unit(&g_rng) * (k % 5 == 0 ? 40.0 : 0.2));
    const float *ip = weighted ? imp : NULL;
    uint8_t *blob = blob_alloc(path, group, n_out, n_in);
    struct nb_layout_planes pl;
    assert_true(nb_layout_planes(path, group, n_out, n_in, &pl));
    struct nb_qstats st;
    quantize_ok(path, group, w, n_out, n_in, ip, search, blob, &st);
    uint8_t q[2048];
    int8_t q8[2048];
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t g = 0; g < ng; g++) {
            const float *x = w + r * n_in + g * gs;
            const float *ig = ip ? ip + g * gs : NULL;
            uint16_t d = 0, m = 0;
            if (path == NB_WPATH_W8A16) {
                float d8, got;
                nb_quant_row_w8a16(x, ig, n_in, search, q8, &d8, scratch);
                memcpy(&got, blob + pl.offset[1] + 4 * r, 4);
                if (memcmp(&got, &d8, 4) || memcmp(blob + pl.offset[0] + r * n_in, q8, n_in))
                    fail_msg("w8a16 row %lld (imp %d, search %d): scale %g, reference %g",
                             (long long)r, weighted, search, (double)got, (double)d8);
                continue;
            }
            if (path == NB_WPATH_W4A8)
                nb_quant_group_w4a8(x, ig, (int)gs, search, q, &d);
            else
                nb_quant_group_w4a16(x, ig, (int)gs, search, q, &d, &m);
            const uint8_t *qs = blob + pl.offset[0] + r * (n_in / 2) + g * (gs / 2);
            uint16_t gd, gm = 0;
            memcpy(&gd, blob + pl.offset[1] + 2 * (r * ng + g), 2);
            if (path == NB_WPATH_W4A16) memcpy(&gm, blob + pl.offset[2] + 2 * (r * ng + g), 2);
            int same = gd == d && gm == m;
            for (int64_t i = 0; i < gs; i++)
                same &= ((qs[i / 2] >> (4 * (i % 2))) & 15) == q[i];
            if (!same)
                fail_msg("%s G=%d row %lld group %lld (imp %d, search %d): d %04x m %04x, "
                         "reference d %04x m %04x", nb_wpath_name(path), group, (long long)r,
                         (long long)g, weighted, search, gd, gm, d, m);
        }
    /* the stats: the error of the stored values */
    dequantize_ok(path, group, blob, n_out, n_in, back);
    double e = nb_quant_wsqerr(w, back, NULL, n_out * n_in);
    assert_true(fabs(e - st.err_sq) <= 1e-9 * st.ref_sq + 1e-300);
    /* every ISA level, one batch: the same bytes and scales */
    struct nb_qs_batch ref = {0};
    ref.n = (int)gs;
    ref.n_lanes = n_out * ng < NB_QS_LANES ? (int)(n_out * ng) : NB_QS_LANES;
    ref.search = search;
    ref.stats = 1;
    size_t qbytes = path == NB_WPATH_W8A16 ? (size_t)gs : (size_t)gs / 2;
    uint8_t *out = malloc(3 * NB_QS_LANES * qbytes);
    void *qsc = aligned_alloc(64, (nb_qs_scratch_bytes(path, gs) + 63) / 64 * 64);
    struct nb_qs_batch got[3];
    for (int lv = 0; lv < 3; lv++) {
        static const char *names[] = {"ref", "avx2", "avx512"};
        struct nb_kernels k;
        got[lv] = ref;
        for (int l = 0; l < ref.n_lanes; l++) {
            got[lv].x[l] = w + l * gs;
            got[lv].imp[l] = ip ? ip + (l % ng) * gs : NULL;
            got[lv].q[l] = out + (lv * NB_QS_LANES + l) * qbytes;
        }
        if (lv && !nb_kernels_for_isa(names[lv], &k)) {
            got[lv] = got[0];
            continue;
        }
        nb_qs_run_level(lv, path, &got[lv], qsc);
        for (int l = 0; lv && l < ref.n_lanes; l++) {
            assert_memory_equal(got[lv].q[l], got[0].q[l], qbytes);
            assert_int_equal(got[lv].d[l], got[0].d[l]);
            assert_int_equal(got[lv].m[l], got[0].m[l]);
            assert_memory_equal(&got[lv].d8[l], &got[0].d8[l], 4);
            assert_memory_equal(&got[lv].err[l], &got[0].err[l], sizeof(double));
        }
    }
    free(out);
    free(qsc);
    free(w);
    free(imp);
    free(back);
    free(scratch);
    free(blob);
}

static void test_batched_matches_groups(void **state)
{
    g_rng = 7;
    for (int weighted = 0; weighted < 2; weighted++)
        for (int search = 0; search < 2; search++) {
            check_batched(NB_WPATH_W4A8, 32, 37, 512, weighted, search);
            check_batched(NB_WPATH_W4A8, 64, 21, 384, weighted, search);
            check_batched(NB_WPATH_W4A8, 128, 29, 768, weighted, search);
            check_batched(NB_WPATH_W4A16, 32, 37, 512, weighted, search);
            check_batched(NB_WPATH_W4A16, 64, 21, 384, weighted, search);
            check_batched(NB_WPATH_W4A16, 128, 29, 768, weighted, search);
            check_batched(NB_WPATH_W8A16, 32, 53, 96, weighted, search);
            check_batched(NB_WPATH_W8A16, 32, 19, 2048, weighted, search);
        }
}

/* nb_dequant's f16 conversion (vcvtph2ps where the CPU has it) gives every f16 value
 * the scalar conversion's f32, bit for bit (NaNs: a NaN), at any length. */
static void test_dequant_f16(void **state)
{
    uint16_t *h = malloc(2 * 65536 + 2);
    float *f = malloc(4 * 65536 + 4);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int n = 65536; n >= 65531; n--) { /* the vector body and a scalar tail */
        assert_int_equal(nb_dequant(NB_DTYPE_F16, h + (65536 - n), f, n), NB_OK);
        for (int i = 0; i < n; i++) {
            float want = nb_f16_to_f32(h[65536 - n + i]);
            if (isnan(want))
                assert_true(isnan(f[i]));
            else
                assert_memory_equal(&f[i], &want, 4);
        }
    }
    free(h);
    free(f);
}

/* ---------------------------------------------------------------- importance */

static void test_importance(void **state)
{
    const int64_t n_out = 64, n_in = 256;
    static const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16, NB_WPATH_W8A16};
    float *w = malloc(sizeof(float) * n_out * n_in);
    float *back = malloc(sizeof(float) * n_out * n_in);
    float imp[256];
    g_rng = 4;
    fill_gauss(w, n_out * n_in);
    for (int64_t k = 0; k < n_in; k++)
        imp[k] = k % 8 == 3 ? 100.0f : 0.01f;
    for (int p = 0; p < 3; p++) {
        double e[2];
        for (int use = 0; use < 2; use++) {
            void *blob = blob_alloc(paths[p], 64, n_out, n_in);
            quantize_ok(paths[p], 64, w, n_out, n_in, use ? imp : NULL, 1, blob, NULL);
            dequantize_ok(paths[p], 64, blob, n_out, n_in, back);
            e[use] = 0;
            for (int64_t r = 0; r < n_out; r++)
                e[use] += nb_quant_wsqerr(w + r * n_in, back + r * n_in, imp, n_in);
            free(blob);
        }
        if (getenv("NIBBLE_TEST_VERBOSE"))
            fprintf(stderr, "%-6s weighted error: unweighted search %.4g, weighted %.4g (%.3f)\n",
                    nb_wpath_name(paths[p]), e[0], e[1], e[1] / e[0]);
        /* measured ratios: w4a8 0.567, w4a16 0.439, w8a16 0.562 */
        assert_true(e[1] < 0.8 * e[0]);
    }
    free(w);
    free(back);
}

/* ---------------------------------------------------------------- round trip */

static void test_round_trip(void **state)
{
    const int64_t n_out = 37, n_in = 384;
    float *w = malloc(sizeof(float) * n_out * n_in);
    float *back = malloc(sizeof(float) * n_out * n_in);
    g_rng = 5;
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t k = 0; k < n_in; k++)
            w[r * n_in + k] = tu_rand_gauss(&g_rng) * (float)(r + 1) * 0.01f;
    for (int path = 0; path < NB_WPATH_COUNT; path++)
        for (int group = 32; group <= 128; group *= 2) {
            size_t size = blob_size(path, group, n_out, n_in);
            void *b1 = blob_alloc(path, group, n_out, n_in);
            void *b2 = blob_alloc(path, group, n_out, n_in);
            quantize_ok(path, group, w, n_out, n_in, NULL, 0, b1, NULL);
            dequantize_ok(path, group, b1, n_out, n_in, back);
            quantize_ok(path, group, back, n_out, n_in, NULL, 0, b2, NULL);
            if (memcmp(b1, b2, size))
                fail_msg("%s G=%d: requantized blob differs", nb_wpath_name(path), group);
            free(b1);
            free(b2);
        }
    free(w);
    free(back);
}

/* Row ranges quantized separately, in threads, give the same blob as one call. */
struct job {
    enum nb_wpath path;
    const float *w;
    int64_t n_out, n_in, r0, r1;
    void *blob;
    struct nb_qstats st;
    enum nb_status s;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    j->s = nb_quantize_rows(j->path, 64, j->w, j->n_out, j->n_in, j->r0, j->r1, NULL, 1, j->blob,
                            &j->st);
    return NULL;
}

static void test_row_ranges(void **state)
{
    const int64_t n_out = 45, n_in = 192;
    float *w = malloc(sizeof(float) * n_out * n_in);
    g_rng = 6;
    fill_gauss(w, n_out * n_in);
    for (int path = 0; path < NB_WPATH_COUNT; path++) {
        size_t size = blob_size(path, 64, n_out, n_in);
        void *one = blob_alloc(path, 64, n_out, n_in), *split = blob_alloc(path, 64, n_out, n_in);
        struct nb_qstats st;
        quantize_ok(path, 64, w, n_out, n_in, NULL, 1, one, &st);
        struct job jobs[3] = {{path, w, n_out, n_in, 0, 13, split, {0, 0}, NB_OK},
                              {path, w, n_out, n_in, 13, 31, split, {0, 0}, NB_OK},
                              {path, w, n_out, n_in, 31, 45, split, {0, 0}, NB_OK}};
        pthread_t th[3];
        for (int i = 0; i < 3; i++)
            assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
        double err = 0;
        for (int i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(jobs[i].s, NB_OK);
            err += jobs[i].st.err_sq;
        }
        assert_memory_equal(one, split, size);
        assert_true(fabs(err - st.err_sq) <= 1e-12 * st.ref_sq);
        free(one);
        free(split);
    }
    free(w);
}

/* ---------------------------------------------------------------- bpw */

static void test_bpw(void **state)
{
    /* shapes where every plane is a multiple of 64 bytes: no padding */
    for (int g = 32; g <= 128; g *= 2) {
        assert_true(nb_layout_bpw(NB_WPATH_W4A8, g, 64, 1024) == 4.0 + 16.0 / g);
        assert_true(nb_layout_bpw(NB_WPATH_W4A16, g, 64, 1024) == 4.0 + 32.0 / g);
    }
    assert_true(nb_layout_bpw(NB_WPATH_W8A16, 0, 64, 256) == 8.0 + 32.0 / 256);
    assert_true(nb_layout_bpw(NB_WPATH_BF16, 0, 64, 256) == 16.0);
    assert_true(nb_layout_bpw(NB_WPATH_F32, 0, 64, 256) == 32.0);
    /* padding only adds */
    assert_true(nb_layout_bpw(NB_WPATH_W4A8, 128, 3, 128) > 4.0 + 16.0 / 128);
    assert_true(nb_layout_bpw(NB_WPATH_W4A8, 128, 64, 100) == 0.0);
}

/* ---------------------------------------------------------------- errors */

static void test_bad_args(void **state)
{
    float w[4 * 128] = {0};
    float out[4 * 128];
    void *blob = blob_alloc(NB_WPATH_W4A8, 32, 4, 128);
    enum nb_status s = nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 100, 0, 4, NULL, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "K=100 is not a multiple of the group size 32"));
    s = nb_dequantize_rows(NB_WPATH_W4A16, 64, blob, 4, 96, 0, 4, out);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "K=96 is not a multiple of the group size 64"));
    s = nb_quantize_rows(NB_WPATH_W4A8, 48, w, 4, 96, 0, 4, NULL, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "group size 48"));
    s = nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 128, 2, 5, NULL, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    s = nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 128, 0, 4, NULL, 1, (char *)blob + 8, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    w[130] = NAN;
    s = nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 128, 0, 4, NULL, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "[1][2]"));
    w[130] = 0;
    float imp[128] = {0};
    imp[5] = -1.0f;
    s = nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 128, 0, 4, imp, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    s = nb_quantize_rows(NB_WPATH_COUNT, 32, w, 4, 128, 0, 4, NULL, 1, blob, NULL);
    assert_int_equal(s, NB_ERR_INVALID_ARG);
    /* an empty range is fine */
    assert_int_equal(nb_quantize_rows(NB_WPATH_W4A8, 32, w, 4, 128, 2, 2, NULL, 1, blob, NULL),
                     NB_OK);
    free(blob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_bounds),
        cmocka_unit_test(test_search_never_worse),
        cmocka_unit_test(test_group_functions),
        cmocka_unit_test(test_batched_matches_groups),
        cmocka_unit_test(test_dequant_f16),
        cmocka_unit_test(test_importance),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_row_ranges),
        cmocka_unit_test(test_bpw),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
