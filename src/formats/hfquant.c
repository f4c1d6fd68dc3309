/* formats/hfquant.c — GPTQ / AWQ quantization configs and tensor checks (hfquant.h). */
#include "formats/hfquant.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "formats/json.h"

const char *nb_hfq_method_name(enum nb_hfq_method m)
{
    switch (m) {
    case NB_HFQ_GPTQ: return "gptq";
    case NB_HFQ_AWQ: return "awq";
    default: return "none";
    }
}

/* The first of two spellings of an int key that is present (AutoAWQ's own files say
 * w_bit / q_group_size where transformers says bits / group_size). */
static enum nb_status get_int2(const cJSON *o, const char *k1, const char *k2, int64_t dflt,
                               int64_t *out, const char *name)
{
    if (k2 && !cJSON_GetObjectItemCaseSensitive(o, k1) && cJSON_GetObjectItemCaseSensitive(o, k2))
        return nb_json_get_int(o, k2, dflt, out, name);
    return nb_json_get_int(o, k1, dflt, out, name);
}

static enum nb_status parse_gptq(const cJSON *q, const char *name, struct nb_hfq_config *c)
{
    enum nb_status st;
    int is_marlin = 0;
    const char *fmt = NULL;
    if ((st = nb_json_get_bool(q, "desc_act", 0, &c->desc_act, name)) ||
        (st = nb_json_get_bool(q, "sym", 1, &c->sym, name)) ||
        (st = nb_json_get_bool(q, "is_marlin_format", 0, &is_marlin, name)) ||
        (st = nb_json_get_str(q, "checkpoint_format", NULL, &fmt, name)))
        return st;
    if (!fmt && (st = nb_json_get_str(q, "format", NULL, &fmt, name))) return st; /* GPTQModel */
    if (is_marlin) fmt = "marlin";
    if (c->bits != 4 && c->bits != 8)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: gptq with bits %d is "
                            "not supported (4, 8 are)", name, c->bits);
    if (!fmt || strcmp(fmt, "gptq") == 0) {
        c->version = 1;
        c->zero_offset = 1; /* v1 stores zero - 1 */
    } else if (strcmp(fmt, "gptq_v2") == 0) {
        c->version = 2;
        c->zero_offset = 0;
    } else {
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: gptq checkpoint_format "
                            "'%s' is not supported (gptq, gptq_v2 are)", name, fmt);
    }
    return NB_OK;
}

static enum nb_status parse_awq(const cJSON *q, const char *name, struct nb_hfq_config *c)
{
    enum nb_status st;
    int zero_point = 1;
    const char *ver = NULL;
    if ((st = nb_json_get_bool(q, "zero_point", 1, &zero_point, name)) ||
        (st = nb_json_get_str(q, "version", "gemm", &ver, name)))
        return st;
    if (strcasecmp(ver, "gemm") != 0)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: awq version '%s' is not "
                            "supported (gemm is)", name, ver);
    if (!zero_point)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: awq without zero points "
                            "(zero_point false) is not supported", name);
    if (c->bits != 4)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: awq with bits %d is not "
                            "supported (4 is)", name, c->bits);
    c->sym = 0;
    c->zero_offset = 0;
    return NB_OK;
}

enum nb_status nb_hfq_parse_config(const cJSON *config, const cJSON *qconfig, const char *name,
                                   struct nb_hfq_config *out)
{
    enum nb_status st;
    memset(out, 0, sizeof *out);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const char *method = NULL;
    if (!q || cJSON_IsNull(q)) {
        if (!qconfig) return NB_OK;
        q = qconfig;
        method = "gptq"; /* AutoGPTQ's quantize_config.json says nothing else */
    }
    if (!cJSON_IsObject(q))
        return nb_set_error(NB_ERR_FORMAT, "%s: quantization_config is not an object", name);
    if ((st = nb_json_get_str(q, "quant_method", method, &method, name))) return st;
    if (!method)
        return nb_set_error(NB_ERR_FORMAT, "%s: quantization_config has no quant_method", name);
    if (strcasecmp(method, "gptq") == 0) {
        out->method = NB_HFQ_GPTQ;
    } else if (strcasecmp(method, "awq") == 0) {
        out->method = NB_HFQ_AWQ;
    } else {
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: quant_method '%s' is "
                            "not supported (gptq, awq are)", name, method);
    }
    int64_t bits, group;
    int awq = out->method == NB_HFQ_AWQ;
    if ((st = get_int2(q, "bits", awq ? "w_bit" : NULL, -1, &bits, name)) ||
        (st = get_int2(q, "group_size", awq ? "q_group_size" : NULL, -1, &group, name)))
        return st;
    if (bits == -1)
        return nb_set_error(NB_ERR_FORMAT, "%s: quantization_config has no bits", name);
    if (bits < 1 || bits > 32)
        return nb_set_error(NB_ERR_FORMAT, "%s: quantization_config: bits %lld is out of range",
                            name, (long long)bits);
    if (group != -1 && (group < 1 || group > (INT64_C(1) << 30)))
        return nb_set_error(NB_ERR_FORMAT, "%s: quantization_config: group_size %lld is neither "
                            "-1 nor positive", name, (long long)group);
    out->bits = (int)bits;
    out->group_size = group == -1 ? 0 : (int)group;
    st = awq ? parse_awq(q, name, out) : parse_gptq(q, name, out);
    if (st) return st;
    if (awq && out->group_size == 0)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: quantization_config: awq with group_size -1 "
                            "is not supported", name);
    return NB_OK;
}

/* "{a, b}" of a tensor's shape. */
static void shape_str(const struct nb_tensor *t, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "{");
    for (int i = 0; i < t->n_dims && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "}");
}

/* One tensor: present, I32 (want_float: F16, BF16 or F32, the scales), shape {d0, d1}
 * (d1 < 0: a vector of d0); `why` says where the shape comes from. */
static enum nb_status check_tensor(const struct nb_hfq_config *c, const char *file,
                                   const char *prefix, const char *suffix,
                                   const struct nb_tensor *t, int want_float, int64_t d0, int64_t d1,
                                   const char *why)
{
    const char *m = nb_hfq_method_name(c->method);
    if (!t)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.%s' is missing (%s checkpoint)", file,
                            prefix, suffix, m);
    int ok_type = want_float ? (t->dtype == NB_DTYPE_F16 || t->dtype == NB_DTYPE_BF16 ||
                                t->dtype == NB_DTYPE_F32)
                             : t->dtype == NB_DTYPE_I32;
    if (!ok_type)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.%s' has dtype %s, %s needs %s", file,
                            prefix, suffix, nb_dtype_name(t->dtype), m, want_float ? "F16" : "I32");
    if (t->n_dims != (d1 < 0 ? 1 : 2) || t->shape[0] != d0 || (d1 >= 0 && t->shape[1] != d1)) {
        char got[96];
        shape_str(t, got, sizeof got);
        if (d1 < 0)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.%s' has shape %s, %s needs {%lld}",
                                file, prefix, suffix, got, why, (long long)d0);
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.%s' has shape %s, %s needs {%lld, "
                            "%lld}", file, prefix, suffix, got, why, (long long)d0, (long long)d1);
    }
    return NB_OK;
}

enum nb_status nb_hfq_check(const struct nb_hfq_config *c, const char *file, const char *prefix,
                            const struct nb_tensor *qweight, const struct nb_tensor *qzeros,
                            const struct nb_tensor *scales, const struct nb_tensor *g_idx,
                            int64_t n_out, int64_t n_in, struct nb_hfq_matrix *out)
{
    enum nb_status st;
    char why[160];
    memset(out, 0, sizeof *out);
    if (c->method != NB_HFQ_GPTQ && c->method != NB_HFQ_AWQ)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: '%s' is not a quantized checkpoint", file,
                            prefix);
    int64_t b = c->bits, G = c->group_size > 0 ? c->group_size : n_in;
    if (n_out <= 0 || n_in <= 0 || (b != 4 && b != 8) || (c->method == NB_HFQ_AWQ && b != 4))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: '%s': %lld bits, shape {%lld, %lld}: not a "
                            "checked config", file, prefix, (long long)b, (long long)n_out,
                            (long long)n_in);
    int64_t per = 32 / b, n_groups = (n_in + G - 1) / G;
    snprintf(why, sizeof why, "%s %d-bit, group %lld, for the config's {%lld, %lld}",
             nb_hfq_method_name(c->method), c->bits, (long long)G, (long long)n_out,
             (long long)n_in);
    if (c->method == NB_HFQ_GPTQ) {
        if (n_in % per || n_out % per)
            return nb_set_error(NB_ERR_FORMAT, "%s: '%s': gptq %d-bit packs %lld codes a word, and "
                                "the shape {%lld, %lld} is not a multiple of it", file, prefix,
                                c->bits, (long long)per, (long long)n_out, (long long)n_in);
        if ((st = check_tensor(c, file, prefix, "qweight", qweight, 0, n_in / per, n_out, why)) ||
            (st = check_tensor(c, file, prefix, "qzeros", qzeros, 0, n_groups, n_out / per, why)) ||
            (st = check_tensor(c, file, prefix, "scales", scales, 1, n_groups, n_out, why)))
            return st;
        if (!g_idx && c->desc_act)
            return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.g_idx' is missing (desc_act needs "
                                "it)", file, prefix);
        if (g_idx && (st = check_tensor(c, file, prefix, "g_idx", g_idx, 0, n_in, -1, why)))
            return st;
    } else {
        if (n_out % per || n_in % G)
            return nb_set_error(NB_ERR_FORMAT, "%s: '%s': awq needs n_out a multiple of 8 and n_in "
                                "of the group %lld, the shape is {%lld, %lld}", file, prefix,
                                (long long)G, (long long)n_out, (long long)n_in);
        if ((st = check_tensor(c, file, prefix, "qweight", qweight, 0, n_in, n_out / per, why)) ||
            (st = check_tensor(c, file, prefix, "qzeros", qzeros, 0, n_groups, n_out / per, why)) ||
            (st = check_tensor(c, file, prefix, "scales", scales, 1, n_groups, n_out, why)))
            return st;
        g_idx = NULL; /* AWQ has none */
    }
    out->plain_order = 1;
    if (g_idx) {
        const uint8_t *p = g_idx->data;
        for (int64_t i = 0; i < n_in; i++) {
            int32_t g;
            memcpy(&g, p + 4 * i, 4);
            if (g < 0 || g >= n_groups)
                return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s.g_idx' [%lld] = %d is out of "
                                    "range (%lld groups)", file, prefix, (long long)i, (int)g,
                                    (long long)n_groups);
            if (g != i / G) out->plain_order = 0;
        }
        out->g_idx = g_idx->data;
    }
    out->method = c->method;
    out->bits = c->bits;
    out->zero_offset = c->zero_offset;
    out->n_out = n_out;
    out->n_in = n_in;
    out->group = G;
    out->n_groups = n_groups;
    out->qweight = qweight->data;
    out->qzeros = qzeros->data;
    out->scales = scales->data;
    out->scale_type = scales->dtype;
    return NB_OK;
}
