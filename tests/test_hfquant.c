/* test_hfquant — GPTQ / AWQ checkpoints in (formats/hfquant.h, quant/unpack.h): the
 * config parse and its refusals, the tensor checks, the unpacking on words packed by
 * hand, and on checkpoints written by tools/make_gptq_fixture.py (numpy, independent of
 * this C) from kjv-7m/hf: nibble's dequantization equals numpy's bit for bit, the
 * codes-kept w4a16 / w4a8 .nib decodes to exactly the source codes on bf16 scales, and
 * every malformed checkpoint is refused with its message. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fp.h"
#include "formats/hfquant.h"
#include "formats/json.h"
#include "formats/nib.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/unpack.h"
#include "runtime/quantize.h"

static enum nb_status parse(const char *json, const char *qjson, struct nb_hfq_config *c)
{
    cJSON *root = NULL, *q = NULL;
    assert_int_equal(nb_json_parse(json, strlen(json), "config.json", &root), NB_OK);
    if (qjson) assert_int_equal(nb_json_parse(qjson, strlen(qjson), "q.json", &q), NB_OK);
    enum nb_status st = nb_hfq_parse_config(root, q, "config.json", c);
    cJSON_Delete(root);
    cJSON_Delete(q);
    return st;
}

static void expect_refused(const char *qc, enum nb_status want, const char *msg)
{
    char json[1024];
    struct nb_hfq_config c;
    snprintf(json, sizeof json, "{\"model_type\": \"llama\", \"quantization_config\": %s}", qc);
    enum nb_status st = parse(json, NULL, &c);
    if (st != want || !strstr(nb_last_error(), msg))
        fail_msg("%s: status %d, message '%s' (want %d, '%s')", qc, st, nb_last_error(), want, msg);
}

static void test_config(void **state)
{
    struct nb_hfq_config c;
    assert_int_equal(parse("{\"model_type\": \"llama\"}", NULL, &c), NB_OK);
    assert_int_equal(c.method, NB_HFQ_NONE);
    assert_int_equal(parse("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
                           "\"group_size\": 128, \"desc_act\": true, \"sym\": false}}", NULL, &c),
                     NB_OK);
    assert_int_equal(c.method, NB_HFQ_GPTQ);
    assert_int_equal(c.bits, 4);
    assert_int_equal(c.group_size, 128);
    assert_int_equal(c.desc_act, 1);
    assert_int_equal(c.sym, 0);
    assert_int_equal(c.zero_offset, 1); /* v1 by default: stored zero - 1 */
    assert_int_equal(parse("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 8, "
                           "\"group_size\": -1, \"checkpoint_format\": \"gptq_v2\"}}", NULL, &c),
                     NB_OK);
    assert_int_equal(c.group_size, 0);
    assert_int_equal(c.zero_offset, 0);
    assert_int_equal(c.version, 2);
    /* GPTQModel's "format" key */
    assert_int_equal(parse("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
                           "\"group_size\": 32, \"format\": \"gptq_v2\"}}", NULL, &c), NB_OK);
    assert_int_equal(c.zero_offset, 0);
    /* AutoGPTQ's quantize_config.json has no quant_method */
    assert_int_equal(parse("{}", "{\"bits\": 4, \"group_size\": 64, \"sym\": true}", &c), NB_OK);
    assert_int_equal(c.method, NB_HFQ_GPTQ);
    assert_int_equal(c.group_size, 64);
    /* AWQ, also in AutoAWQ's own spelling */
    assert_int_equal(parse("{\"quantization_config\": {\"quant_method\": \"awq\", \"w_bit\": 4, "
                           "\"q_group_size\": 128, \"version\": \"GEMM\", \"zero_point\": true}}",
                           NULL, &c), NB_OK);
    assert_int_equal(c.method, NB_HFQ_AWQ);
    assert_int_equal(c.bits, 4);
    assert_int_equal(c.group_size, 128);
    assert_int_equal(c.zero_offset, 0);

    expect_refused("{\"quant_method\": \"fp8\"}", NB_ERR_UNSUPPORTED,
                   "quantization_config: quant_method 'fp8' is not supported (gptq, awq are)");
    expect_refused("{\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true}",
                   NB_ERR_UNSUPPORTED, "quant_method 'bitsandbytes' is not supported");
    expect_refused("{\"quant_method\": \"compressed-tensors\"}", NB_ERR_UNSUPPORTED,
                   "quant_method 'compressed-tensors' is not supported");
    expect_refused("{\"quant_method\": \"exl2\"}", NB_ERR_UNSUPPORTED,
                   "quant_method 'exl2' is not supported");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": 3, \"group_size\": 128}",
                   NB_ERR_UNSUPPORTED, "gptq with bits 3 is not supported (4, 8 are)");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": 2, \"group_size\": 128}",
                   NB_ERR_UNSUPPORTED, "gptq with bits 2 is not supported");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
                   "\"checkpoint_format\": \"marlin\"}", NB_ERR_UNSUPPORTED,
                   "gptq checkpoint_format 'marlin' is not supported (gptq, gptq_v2 are)");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
                   "\"is_marlin_format\": true}", NB_ERR_UNSUPPORTED,
                   "checkpoint_format 'marlin' is not supported");
    expect_refused("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                   "\"version\": \"gemv\"}", NB_ERR_UNSUPPORTED,
                   "awq version 'gemv' is not supported (gemm is)");
    expect_refused("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                   "\"version\": \"gemv_fast\"}", NB_ERR_UNSUPPORTED,
                   "awq version 'gemv_fast' is not supported");
    expect_refused("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                   "\"version\": \"marlin\"}", NB_ERR_UNSUPPORTED,
                   "awq version 'marlin' is not supported");
    expect_refused("{\"quant_method\": \"awq\", \"bits\": 8, \"group_size\": 128}",
                   NB_ERR_UNSUPPORTED, "awq with bits 8 is not supported (4 is)");
    expect_refused("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                   "\"zero_point\": false}", NB_ERR_UNSUPPORTED, "zero_point false");
    expect_refused("{\"quant_method\": \"gptq\", \"group_size\": 128}", NB_ERR_FORMAT,
                   "quantization_config has no bits");
    expect_refused("{\"bits\": 4}", NB_ERR_FORMAT, "quantization_config has no quant_method");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 0}", NB_ERR_FORMAT,
                   "group_size 0 is neither -1 nor positive");
    expect_refused("{\"quant_method\": \"gptq\", \"bits\": \"4\"}", NB_ERR_FORMAT, "bits");
    expect_refused("[1]", NB_ERR_FORMAT, "quantization_config is not an object");
}

/* A tensor view over caller memory. */
static struct nb_tensor view(enum nb_dtype dt, int64_t d0, int64_t d1, const void *data)
{
    struct nb_tensor t = {.dtype = dt, .n_dims = d1 > 0 ? 2 : 1, .shape = {d0, d1 > 0 ? d1 : 1},
                          .data = data};
    return t;
}

/* GPTQ 4-bit, n_out 8, n_in 16, group 8: words packed by hand from the layout, v1 and
 * v2 zeros, plain and permuted g_idx; AWQ's nibble order likewise. */
static void test_unpack_by_hand(void **state)
{
    enum { NO = 8, NI = 16, G = 8, NG = 2 };
    int q[NO][NI], z[NG][NO];
    float s[NG][NO];
    for (int o = 0; o < NO; o++)
        for (int i = 0; i < NI; i++) q[o][i] = (o * 7 + i * 3) % 16;
    for (int g = 0; g < NG; g++)
        for (int o = 0; o < NO; o++) {
            z[g][o] = 1 + (g * 5 + o) % 15; /* 1..15: v1 can store it */
            s[g][o] = 0.125f * (float)(1 + g + o);
        }
    uint16_t scales[NG][NO];
    for (int g = 0; g < NG; g++)
        for (int o = 0; o < NO; o++) scales[g][o] = nb_f32_to_f16(s[g][o]);
    for (int version = 1; version <= 2; version++) {
        uint32_t qw[NI / 8][NO] = {{0}}, qz[NG][NO / 8] = {{0}};
        for (int o = 0; o < NO; o++)
            for (int i = 0; i < NI; i++) qw[i / 8][o] |= (uint32_t)q[o][i] << (4 * (i % 8));
        for (int g = 0; g < NG; g++)
            for (int o = 0; o < NO; o++)
                qz[g][o / 8] |= (uint32_t)(z[g][o] - (version == 1)) << (4 * (o % 8));
        int32_t gi[NI];
        for (int i = 0; i < NI; i++) gi[i] = i / G;
        struct nb_hfq_config c = {.method = NB_HFQ_GPTQ, .bits = 4, .group_size = G,
                                  .zero_offset = version == 1, .version = version};
        struct nb_tensor tq = view(NB_DTYPE_I32, NI / 8, NO, qw), tz = view(NB_DTYPE_I32, NG, 1, qz),
                         ts = view(NB_DTYPE_F16, NG, NO, scales), tg = view(NB_DTYPE_I32, NI, 0, gi);
        struct nb_hfq_matrix m;
        assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &ts, &tg, NO, NI, &m), NB_OK);
        assert_int_equal(m.plain_order, 1);
        float out[NO * NI];
        nb_hfq_dequant_rows(&m, 0, NO, out);
        for (int o = 0; o < NO; o++)
            for (int i = 0; i < NI; i++)
                assert_true(out[o * NI + i] == s[i / G][o] * (float)(q[o][i] - z[i / G][o]));
        /* act order: g_idx swaps the groups of columns 0 and 15 */
        gi[0] = 1;
        gi[15] = 0;
        assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &ts, &tg, NO, NI, &m), NB_OK);
        assert_int_equal(m.plain_order, 0);
        nb_hfq_dequant_rows(&m, 3, 4, out);
        assert_true(out[0] == s[1][3] * (float)(q[3][0] - z[1][3]));
        assert_true(out[15] == s[0][3] * (float)(q[3][15] - z[0][3]));
        struct nb_src_codes sc;
        nb_src_codes_from_hfq(&sc, &m);
        const char *why = NULL;
        assert_int_equal(nb_src_codes_fit(&sc, NB_WPATH_W4A16, &why), 0);
        assert_string_equal(why, "act order (g_idx)");
        /* out of range */
        gi[7] = NG;
        assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &ts, &tg, NO, NI, &m), NB_ERR_FORMAT);
        assert_non_null(strstr(nb_last_error(), "tensor 'p.g_idx' [7] = 2 is out of range (2 groups)"));
        gi[7] = -1;
        assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &ts, &tg, NO, NI, &m), NB_ERR_FORMAT);
    }
    /* AWQ: qweight [NI][NO/8], output 8u + k in nibble pos(k), pos = 0 4 1 5 2 6 3 7 */
    static const int pos[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    uint32_t aw[NI][NO / 8] = {{0}}, az[NG][NO / 8] = {{0}};
    for (int o = 0; o < NO; o++)
        for (int i = 0; i < NI; i++) aw[i][o / 8] |= (uint32_t)q[o][i] << (4 * pos[o % 8]);
    for (int g = 0; g < NG; g++)
        for (int o = 0; o < NO; o++) az[g][o / 8] |= (uint32_t)z[g][o] << (4 * pos[o % 8]);
    /* the packing order by its definition: nibble t holds output 0,2,4,6,1,3,5,7 [t] */
    assert_int_equal((aw[0][0] >> 4) & 15, q[2][0]);
    assert_int_equal((aw[0][0] >> 16) & 15, q[1][0]);
    struct nb_hfq_config c = {.method = NB_HFQ_AWQ, .bits = 4, .group_size = G};
    struct nb_tensor tq = view(NB_DTYPE_I32, NI, NO / 8, aw), tz = view(NB_DTYPE_I32, NG, NO / 8, az),
                     ts = view(NB_DTYPE_F16, NG, NO, scales);
    struct nb_hfq_matrix m;
    assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &ts, NULL, NO, NI, &m), NB_OK);
    float out[NO * NI];
    nb_hfq_dequant_rows(&m, 0, NO, out);
    for (int o = 0; o < NO; o++)
        for (int i = 0; i < NI; i++)
            assert_true(out[o * NI + i] == s[i / G][o] * (float)(q[o][i] - z[i / G][o]));
    /* shapes and dtypes that disagree */
    struct nb_tensor bad = view(NB_DTYPE_I32, NI, NO / 8 + 1, aw);
    assert_int_equal(nb_hfq_check(&c, "f", "p", &bad, &tz, &ts, NULL, NO, NI, &m), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "tensor 'p.qweight' has shape {16, 2}, awq 4-bit, "
                                            "group 8, for the config's {8, 16} needs {16, 1}"));
    assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, NULL, NULL, NO, NI, &m), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "tensor 'p.scales' is missing (awq checkpoint)"));
    struct nb_tensor f32z = view(NB_DTYPE_F32, NG, NO / 8, az);
    assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &f32z, &ts, NULL, NO, NI, &m), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "tensor 'p.qzeros' has dtype F32, awq needs I32"));
    struct nb_tensor few = view(NB_DTYPE_F16, NG - 1, NO, scales);
    assert_int_equal(nb_hfq_check(&c, "f", "p", &tq, &tz, &few, NULL, NO, NI, &m), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "tensor 'p.scales' has shape {1, 8}"));
}

/* ---- checkpoints written by tools/make_gptq_fixture.py ---- */

static char *make_fixture(const char *variant, const char *brk)
{
    const char *src = tu_model_path("kjv-7m/hf/config.json");
    if (!src) return NULL;
    char dir[4400], srcdir[4096], cmd[9800];
    snprintf(srcdir, sizeof srcdir, "%s", src);
    *strrchr(srcdir, '/') = '\0';
    snprintf(dir, sizeof dir, "%s/%s%s%s", tu_dir, variant, brk ? "-" : "", brk ? brk : "");
    const char *py = getenv("NIBBLE_PYTHON") ? getenv("NIBBLE_PYTHON") : "python3";
    snprintf(cmd, sizeof cmd, "%s %s/tools/make_gptq_fixture.py %s %s %s%s%s", py,
             getenv("NIBBLE_SOURCE_DIR"), srcdir, dir, variant, brk ? " --break " : "",
             brk ? brk : "");
    if (system(cmd) != 0) fail_msg("%s failed (python3-numpy installed?)", cmd);
    return strdup(dir);
}

/* dir/expected/<name> as floats (n of them), or NULL when absent. */
static float *read_expected(const char *dir, const char *name, int64_t n)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/expected/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(x);
    assert_int_equal(fread(x, sizeof(float), (size_t)n, f), (size_t)n);
    fclose(f);
    return x;
}

static int64_t n_bit_diffs(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

/* Quantize dir to `path` (ROWS) and decode layer 0's q_proj: its group must be the
 * source's (128, not --group 32) and its values bit for bit those of expected/<want>. */
static void check_kept(const char *dir, enum nb_wpath path, const char *want)
{
    enum { NO = 256, NI = 256 };
    float *exp = read_expected(dir, want, NO * NI);
    if (!exp) fail_msg("%s/expected/%s is missing", dir, want);
    char out[4600];
    snprintf(out, sizeof out, "%s/%s.nib", dir, nb_wpath_name(path));
    struct nb_quantize_opts o;
    struct nb_quantize_result res;
    nb_quantize_default_opts(&o);
    o.path = path;
    o.group = 32;
    o.layout = NB_LAYOUT_ROWS;
    o.n_threads = 2;
    if (tu_quantize_file(dir, &o, out, &res)) fail_msg("%s", nb_last_error());
    struct nb_nib *nib = NULL;
    assert_int_equal(nb_nib_open(&nib, out), NB_OK);
    const struct nb_nib_tensor *t = nb_nib_find(nib, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->path, path);
    assert_int_equal(t->group, 128);
    float *got = malloc(sizeof(float) * NO * NI);
    assert_int_equal(nb_dequantize_rows(path, t->group, t->data, NO, NI, 0, NO, got), NB_OK);
    int64_t d = n_bit_diffs(got, exp, NO * NI);
    if (d) fail_msg("%s %s: %lld of %d values differ from numpy's", dir, want, (long long)d,
                    NO * NI);
    /* every other layer's matrices kept their codes too: group 128 */
    const struct nb_nib_tensor *dn = nb_nib_find(nib, "blk.7.ffn_down.weight");
    assert_non_null(dn);
    assert_int_equal(dn->group, 128);
    nb_nib_free(nib);
    free(got);
    free(exp);
}

static void test_fixtures(void **state)
{
    static const struct {
        const char *variant;
        int w4a16, w4a8; /* codes kept */
    } cases[] = {
        {"gptq-sym-v1", 1, 1}, {"gptq-asym-v1", 1, 0}, {"gptq-sym-v2", 1, 1},
        {"gptq-asym-v2", 1, 0}, {"gptq-act", 0, 0},    {"gptq-8bit", 0, 0},
        {"awq", 1, 0},
    };
    if (!tu_model_path("kjv-7m/hf/config.json")) skip();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *dir = make_fixture(cases[c].variant, NULL);
        struct nb_model *m = NULL;
        if (nb_model_load(&m, dir)) fail_msg("%s: %s", dir, nb_last_error());
        assert_string_equal(m->source_quant, strncmp(cases[c].variant, "awq", 3) ? "gptq" : "awq");
        const struct nb_weight *wq = &m->layers[0].wq;
        assert_int_equal(wq->format, NB_WF_F32);
        float *exp = read_expected(dir, "deq.f32", 256 * 256);
        assert_non_null(exp);
        int64_t d = n_bit_diffs(wq->data, exp, 256 * 256);
        if (d) fail_msg("%s: %lld values differ from numpy's dequantization", dir, (long long)d);
        const struct nb_src_codes *sc = nb_model_src_codes(m, wq);
        if (strcmp(cases[c].variant, "gptq-8bit") == 0) {
            assert_null(sc); /* 8-bit codes are re-quantized */
        } else {
            assert_non_null(sc);
            assert_int_equal(nb_src_codes_fit(sc, NB_WPATH_W4A16, NULL), cases[c].w4a16);
            assert_int_equal(nb_src_codes_fit(sc, NB_WPATH_W4A8, NULL), cases[c].w4a8);
        }
        assert_null(nb_model_src_codes(m, &m->tok_embd));
        free(exp);
        nb_model_free(m);
        if (cases[c].w4a16) check_kept(dir, NB_WPATH_W4A16, "w4a16.f32");
        if (cases[c].w4a8) check_kept(dir, NB_WPATH_W4A8, "w4a8.f32");
        free(dir);
    }
}

static void test_malformed(void **state)
{
    static const struct {
        const char *variant, *brk;
        enum nb_status st;
        const char *msg;
    } cases[] = {
        {"gptq-asym-v2", "qweight-shape", NB_ERR_FORMAT,
         "tensor 'model.layers.0.self_attn.q_proj.qweight' has shape {31, 256}, gptq 4-bit, "
         "group 128, for the config's {256, 256} needs {32, 256}"},
        {"gptq-act", "g_idx-range", NB_ERR_FORMAT,
         "tensor 'model.layers.0.self_attn.q_proj.g_idx' [5] = 2 is out of range (2 groups)"},
        {"awq", "method", NB_ERR_UNSUPPORTED,
         "quantization_config: quant_method 'fp8' is not supported (gptq, awq are)"},
        {"gptq-sym-v1", "no-scales", NB_ERR_FORMAT,
         "tensor 'model.layers.0.self_attn.q_proj.scales' is missing (gptq checkpoint)"},
        {"awq", "qweight-shape", NB_ERR_FORMAT,
         "tensor 'model.layers.0.self_attn.q_proj.qweight' has shape {255, 32}"},
    };
    if (!tu_model_path("kjv-7m/hf/config.json")) skip();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *dir = make_fixture(cases[c].variant, cases[c].brk);
        struct nb_model *m = NULL;
        enum nb_status st = nb_model_load(&m, dir);
        if (st != cases[c].st || !strstr(nb_last_error(), cases[c].msg))
            fail_msg("%s: status %d '%s', want %d '%s'", dir, st, nb_last_error(), cases[c].st,
                     cases[c].msg);
        assert_null(m);
        free(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_unpack_by_hand),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
