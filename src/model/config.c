/* model/config.c — the architecture description from GGUF metadata, from a
 * Hugging Face config.json and from a llama2.c header; validation; RoPE tables.
 * The keys read are documented in docs/config-keys.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"

static const char *k_arch_names[NB_ARCH_COUNT] = {"llama", "qwen2", "qwen3", "spark"};

const char *nb_arch_name(enum nb_arch a)
{
    return (unsigned)a < NB_ARCH_COUNT ? k_arch_names[a] : "?";
}

static int arch_from_name(const char *s, enum nb_arch *out)
{
    static const struct {
        const char *name;
        enum nb_arch arch;
    } k[] = {{"llama", NB_ARCH_LLAMA},   {"mistral", NB_ARCH_LLAMA}, {"qwen2", NB_ARCH_QWEN2},
             {"qwen3", NB_ARCH_QWEN3},   {"spark", NB_ARCH_SPARK}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(s, k[i].name)) {
            *out = k[i].arch;
            return 1;
        }
    return 0;
}

static void config_defaults(struct nb_config *c)
{
    memset(c, 0, sizeof *c);
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->rope_factor = 1.0f;
    c->act = NB_ACT_SILU;
    c->bos_id = -1;
    c->eos_id = -1;
}

static enum nb_status act_from_name(const char *s, enum nb_act *out, const char *what)
{
    if (!strcmp(s, "silu") || !strcmp(s, "swish")) {
        *out = NB_ACT_SILU;
        return NB_OK;
    }
    if (!strcmp(s, "gelu_pytorch_tanh") || !strcmp(s, "gelu_tanh") || !strcmp(s, "gelu_new")) {
        *out = NB_ACT_GELU_TANH;
        return NB_OK;
    }
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (silu, "
                        "gelu_pytorch_tanh)", what, s);
}

static enum nb_status layer_type(const char *s, int layer, uint8_t *out, const char *what)
{
    if (!strcmp(s, "sliding_attention")) *out = 1;
    else if (!strcmp(s, "full_attention")) *out = 0;
    else
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: layer_types[%d] = '%s' (expected "
                            "sliding_attention or full_attention)", what, layer, s);
    return NB_OK;
}

/* ---------------------------------------------------------------- validation */

/* What a source calls each checked field, so that a message names the key to fix
 * ("vocab_size", "llama.block_count", "n_vocab"). */
struct field_names {
    const char *n_layers, *n_embd, *n_heads, *n_kv_heads, *head_dim, *n_ff, *n_vocab, *n_ctx_train,
        *norm_eps, *rope_theta, *rope_factor, *sliding_window, *bos_id, *eos_id;
};

/* nibble's own names: the keys of the .nib "config" object */
static const struct field_names k_nib_names = {
    "config.n_layers", "config.n_embd",     "config.n_heads",     "config.n_kv_heads",
    "config.head_dim", "config.n_ff",       "config.n_vocab",     "config.n_ctx_train",
    "config.norm_eps", "config.rope_theta", "config.rope_factor", "config.sliding_window",
    "config.bos_id",   "config.eos_id"};

static const struct field_names k_hf_names = {
    "num_hidden_layers", "hidden_size",       "num_attention_heads", "num_key_value_heads",
    "head_dim",          "intermediate_size", "vocab_size",          "max_position_embeddings",
    "rms_norm_eps",      "rope_theta",        "rope_scaling.factor", "sliding_window",
    "bos_token_id",      "eos_token_id"};

static const struct field_names k_l2c_names = {"llama2.c header n_layers",
                                               "llama2.c header dim",
                                               "llama2.c header n_heads",
                                               "llama2.c header n_kv_heads",
                                               "head size (dim / n_heads)",
                                               "llama2.c header hidden_dim",
                                               "llama2.c header vocab_size",
                                               "llama2.c header seq_len",
                                               "norm eps",
                                               "rope theta",
                                               "rope factor",
                                               "sliding window",
                                               "BOS id (1 in llama2.c)",
                                               "EOS id (2 in llama2.c)"};

static enum nb_status validate(const struct nb_config *c, const char *what,
                               const struct field_names *k)
{
#define NEED(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char msg_[512];                                                                        \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                                              \
            return nb_set_error(NB_ERR_FORMAT, "%s: %s", what, msg_);                              \
        }                                                                                          \
    } while (0)
    NEED(c->n_layers > 0 && c->n_layers <= NB_MAX_LAYERS, "%s = %d is not in 1..%d", k->n_layers,
         c->n_layers, NB_MAX_LAYERS);
    NEED(c->n_embd > 0 && c->n_embd <= (1 << 16), "%s = %d is not in 1..65536", k->n_embd,
         c->n_embd);
    NEED(c->n_heads > 0 && c->n_heads <= 1024, "%s = %d is not in 1..1024", k->n_heads, c->n_heads);
    NEED(c->n_kv_heads > 0 && c->n_kv_heads <= c->n_heads, "%s = %d is not in 1..%s (%d)",
         k->n_kv_heads, c->n_kv_heads, k->n_heads, c->n_heads);
    NEED(c->n_heads % c->n_kv_heads == 0, "%s = %d is not a multiple of %s = %d", k->n_heads,
         c->n_heads, k->n_kv_heads, c->n_kv_heads);
    NEED(c->head_dim > 0 && c->head_dim <= 1024 && c->head_dim % 2 == 0,
         "%s = %d must be even and in 2..1024", k->head_dim, c->head_dim);
    NEED(c->n_ff > 0 && c->n_ff <= (1 << 20), "%s = %d is not in 1..2^20", k->n_ff, c->n_ff);
    NEED(c->n_vocab > 0 && c->n_vocab <= (1 << 22), "%s = %d is not in 1..2^22 (4194304)",
         k->n_vocab, c->n_vocab);
    NEED(c->bos_id >= -1 && c->bos_id < c->n_vocab, "%s = %d is not a token id (%s = %d)",
         k->bos_id, c->bos_id, k->n_vocab, c->n_vocab);
    NEED(c->eos_id >= -1 && c->eos_id < c->n_vocab, "%s = %d is not a token id (%s = %d)",
         k->eos_id, c->eos_id, k->n_vocab, c->n_vocab);
    NEED(c->n_ctx_train > 0, "%s = %d must be positive", k->n_ctx_train, c->n_ctx_train);
    NEED(c->norm_eps > 0 && c->norm_eps < 1, "%s = %g is not in (0, 1)", k->norm_eps, c->norm_eps);
    NEED(c->rope_theta > 0 && isfinite(c->rope_theta), "%s = %g must be positive", k->rope_theta,
         c->rope_theta);
    NEED(c->rope_factor > 0 && isfinite(c->rope_factor), "%s = %g must be positive", k->rope_factor,
         c->rope_factor);
    NEED(c->sliding_window >= 0, "%s = %d is negative", k->sliding_window, c->sliding_window);
    for (int l = 0; l < c->n_layers; l++)
        NEED(!c->layer_sliding[l] || c->sliding_window > 0,
             "layer %d is marked sliding but no %s is set", l, k->sliding_window);
#undef NEED
    return NB_OK;
}

enum nb_status nb_config_validate(const struct nb_config *c, const char *what)
{
    return validate(c, what, &k_nib_names);
}

enum nb_status nb_model_init_rope(struct nb_model *m)
{
    const struct nb_config *c = &m->cfg;
    int half = c->head_dim / 2;
    m->rope_inv_freq = nb_arena_alloc(&m->arena, sizeof(float) * (size_t)half);
    if (!m->rope_inv_freq) return NB_ERR_NOMEM;
    for (int i = 0; i < half; i++) {
        double f = pow((double)c->rope_theta, -2.0 * i / c->head_dim);
        if (c->rope_scaling == NB_ROPE_SCALING_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_scaling == NB_ROPE_SCALING_LLAMA3) {
            /* Llama 3.1: long wavelengths are slowed by `factor`, short ones kept,
             * and the band between is interpolated smoothly. */
            double lo_wl = c->rope_orig_ctx / c->rope_low_freq_factor;
            double hi_wl = c->rope_orig_ctx / c->rope_high_freq_factor;
            double wl = 2 * M_PI / f;
            if (wl > lo_wl) {
                f /= c->rope_factor;
            } else if (wl >= hi_wl) {
                double s = (c->rope_orig_ctx / wl - c->rope_low_freq_factor) /
                           (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1 - s) * f / c->rope_factor + s * f;
            }
        }
        m->rope_inv_freq[i] = (float)f;
    }
    return NB_OK;
}

/* ---------------------------------------------------------------- GGUF */

static enum nb_status gguf_u32(const struct nb_gguf *g, const char *arch, const char *key,
                               int required, int dflt, int *out)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v;
    enum nb_status st = nb_gguf_get_u32(g, full, &v);
    if (st == NB_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return NB_OK;
    }
    if (st != NB_OK) return st;
    if (v > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s = %u is too large", nb_gguf_path(g), full, v);
    *out = (int)v;
    return NB_OK;
}

static enum nb_status gguf_f32(const struct nb_gguf *g, const char *arch, const char *key,
                               float dflt, float *out)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    enum nb_status st = nb_gguf_get_f32(g, full, out);
    if (st == NB_ERR_NOT_FOUND) {
        *out = dflt;
        return NB_OK;
    }
    return st;
}

/* <arch>.rope.scaling.type / .factor (none or linear). */
static enum nb_status gguf_rope_scaling(struct nb_config *c, const struct nb_gguf *g,
                                        const char *arch, const char *path)
{
    enum nb_status st;
    char key[160];
    const char *scaling = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    st = nb_gguf_get_str(g, key, &scaling);
    if (st != NB_OK && st != NB_ERR_NOT_FOUND) return st;
    if (st == NB_OK && strcmp(scaling, "none") != 0) {
        if (strcmp(scaling, "linear") != 0)
            return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s = '%s' is not supported "
                                "(none, linear)", path, key, scaling);
        c->rope_scaling = NB_ROPE_SCALING_LINEAR;
        if ((st = gguf_f32(g, arch, "rope.scaling.factor", 1.0f, &c->rope_factor))) return st;
    }
    return NB_OK;
}

/* The Spark options: activation, head gate, sliding window and which layers use it. */
static enum nb_status gguf_spark(struct nb_config *c, const struct nb_gguf *g, const char *arch,
                                 const char *path)
{
    enum nb_status st;
    char key[160];
    const char *act;
    snprintf(key, sizeof key, "%s.hidden_act", arch);
    st = nb_gguf_get_str(g, key, &act);
    if (st == NB_OK) {
        if ((st = act_from_name(act, &c->act, path))) return st;
    } else if (st != NB_ERR_NOT_FOUND) {
        return st;
    }
    snprintf(key, sizeof key, "%s.attention.head_gate", arch);
    st = nb_gguf_get_bool(g, key, &c->head_gate);
    if (st != NB_OK && st != NB_ERR_NOT_FOUND) return st;
    if ((st = gguf_u32(g, arch, "attention.sliding_window", 0, 0, &c->sliding_window)))
        return st;
    snprintf(key, sizeof key, "%s.attention.layer_types", arch);
    enum nb_gguf_type et;
    uint64_t n;
    st = nb_gguf_get_arr(g, key, &et, &n);
    if (st == NB_OK) {
        if (et != NB_GGUF_STRING || n != (uint64_t)c->n_layers ||
            c->n_layers > NB_MAX_LAYERS)
            return nb_set_error(NB_ERR_FORMAT, "%s: %s must be %d strings", path, key,
                                c->n_layers);
        for (uint64_t l = 0; l < n; l++) {
            const char *s;
            if ((st = nb_gguf_get_arr_str(g, key, l, &s))) return st;
            if ((st = layer_type(s, (int)l, &c->layer_sliding[l], path))) return st;
        }
    } else if (st != NB_ERR_NOT_FOUND) {
        return st;
    }
    return NB_OK;
}

/* The vocabulary size: the embedding's rows, and <arch>.vocab_size when written. */
static enum nb_status gguf_vocab(struct nb_config *c, const struct nb_gguf *g, const char *arch,
                                 const char *path)
{
    enum nb_status st;
    const struct nb_tensor *emb = nb_gguf_find_tensor(g, "token_embd.weight");
    if (!emb)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", path);
    if (emb->n_dims != 2 || emb->shape[0] > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor 'token_embd.weight' must be 2-D", path);
    c->n_vocab = (int)emb->shape[0];
    /* <arch>.vocab_size is optional; when written it must be the embedding's rows */
    char key[160];
    uint32_t nv;
    snprintf(key, sizeof key, "%s.vocab_size", arch);
    st = nb_gguf_get_u32(g, key, &nv);
    if (st != NB_OK && st != NB_ERR_NOT_FOUND) return st;
    nb_clear_error();
    if (st == NB_OK && (int64_t)nv != emb->shape[0])
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: %s = %u, but tensor 'token_embd.weight' has %lld rows", path,
                            key, nv, (long long)emb->shape[0]);
    return NB_OK;
}

/* validate() with the GGUF key each field came from, so a message names it. */
static enum nb_status gguf_validate(const struct nb_config *c, const char *arch, const char *path)
{
    char names[14][192];
    static const char *const keys[14] = {"block_count",
                                         "embedding_length",
                                         "attention.head_count",
                                         "attention.head_count_kv",
                                         "attention.key_length",
                                         "feed_forward_length",
                                         NULL,
                                         "context_length",
                                         "attention.layer_norm_rms_epsilon",
                                         "rope.freq_base",
                                         "rope.scaling.factor",
                                         "attention.sliding_window",
                                         NULL,
                                         NULL};
    for (int i = 0; i < 14; i++)
        snprintf(names[i], sizeof names[i], "%s.%s", arch, keys[i] ? keys[i] : "");
    snprintf(names[6], sizeof names[6], "tensor 'token_embd.weight' rows (the vocabulary)");
    snprintf(names[12], sizeof names[12], "tokenizer.ggml.bos_token_id");
    snprintf(names[13], sizeof names[13], "tokenizer.ggml.eos_token_id");
    const struct field_names k = {names[0],  names[1],  names[2],  names[3], names[4],
                                  names[5],  names[6],  names[7],  names[8], names[9],
                                  names[10], names[11], names[12], names[13]};
    return validate(c, path, &k);
}

enum nb_status nb_config_from_gguf(struct nb_config *c, const struct nb_gguf *g)
{
    const char *path = nb_gguf_path(g);
    const char *arch;
    enum nb_status st;
    config_defaults(c);
    if ((st = nb_gguf_get_str(g, "general.architecture", &arch)) != NB_OK) return st;
    if (!arch_from_name(arch, &c->arch))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported "
                            "(llama, qwen2, qwen3, spark)", path, arch);
    /* llama.cpp's converter permutes Q/K of llama-family models for interleaved
     * RoPE; qwen2/qwen3 (and spark, by nibble's definition) keep the HF halves. */
    c->rope_pairing = c->arch == NB_ARCH_LLAMA ? NB_ROPE_INTERLEAVED : NB_ROPE_HALF;

    if ((st = gguf_u32(g, arch, "block_count", 1, 0, &c->n_layers)) ||
        (st = gguf_u32(g, arch, "embedding_length", 1, 0, &c->n_embd)) ||
        (st = gguf_u32(g, arch, "feed_forward_length", 1, 0, &c->n_ff)) ||
        (st = gguf_u32(g, arch, "attention.head_count", 1, 0, &c->n_heads)) ||
        (st = gguf_u32(g, arch, "attention.head_count_kv", 0, c->n_heads, &c->n_kv_heads)) ||
        (st = gguf_u32(g, arch, "context_length", 0, 2048, &c->n_ctx_train)) ||
        (st = gguf_f32(g, arch, "rope.freq_base", 10000.0f, &c->rope_theta)) ||
        (st = gguf_f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f, &c->norm_eps)))
        return st;
    if (c->n_heads <= 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s.attention.head_count = %d must be positive",
                            path, arch, c->n_heads);
    if ((st = gguf_u32(g, arch, "attention.key_length", 0, c->n_embd / c->n_heads,
                       &c->head_dim)))
        return st;

    if ((st = gguf_rope_scaling(c, g, arch, path))) return st;
    if (c->arch == NB_ARCH_SPARK && (st = gguf_spark(c, g, arch, path))) return st;

    uint32_t id;
    /* a u32 beyond INT32_MAX (0xffffffff) is how some writers say "none": -1 */
    if (nb_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id) == NB_OK)
        c->bos_id = id <= INT32_MAX ? (int)id : -1;
    if (nb_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id) == NB_OK)
        c->eos_id = id <= INT32_MAX ? (int)id : -1;
    nb_clear_error();

    if ((st = gguf_vocab(c, g, arch, path))) return st;
    c->tied_head = nb_gguf_find_tensor(g, "output.weight") == NULL;
    c->qkv_bias = nb_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->qk_norm = nb_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    if (c->arch == NB_ARCH_SPARK && !c->head_gate)
        c->head_gate = nb_gguf_find_tensor(g, "blk.0.attn_gate.weight") != NULL;
    return gguf_validate(c, arch, path);
}

/* ---------------------------------------------------------------- HF config.json */

static enum nb_status json_int(const cJSON *o, const char *key, int required, int64_t dflt,
                               int *out, const char *what)
{
    int64_t v;
    if (required && !cJSON_GetObjectItemCaseSensitive(o, key))
        return nb_set_error(NB_ERR_FORMAT, "%s: key '%s' is missing", what, key);
    enum nb_status st = nb_json_get_int(o, key, dflt, &v, what);
    if (st) return st;
    if (v < INT32_MIN || v > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' = %lld is out of range", what, key,
                            (long long)v);
    *out = (int)v;
    return NB_OK;
}

static enum nb_status json_float(const cJSON *o, const char *key, double dflt, float *out,
                                 const char *what)
{
    double v;
    enum nb_status st = nb_json_get_num(o, key, dflt, &v, what);
    if (st == NB_OK) *out = (float)v;
    return st;
}

static enum nb_status hf_token_id(const cJSON *o, const char *key, int *out, const char *what)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (!v || cJSON_IsNull(v)) return NB_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be a token id", what, key);
    *out = (int)v->valuedouble;
    return NB_OK;
}

static enum nb_status hf_rope_scaling(struct nb_config *c, const cJSON *root, const char *what)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return NB_OK;
    if (!cJSON_IsObject(rs))
        return nb_set_error(NB_ERR_FORMAT, "%s: 'rope_scaling' must be an object", what);
    const char *type = NULL;
    enum nb_status st = nb_json_get_str(rs, "rope_type", NULL, &type, what);
    if (st) return st;
    if (!type && (st = nb_json_get_str(rs, "type", "default", &type, what))) return st;
    if (!strcmp(type, "default")) return NB_OK;
    if ((st = json_float(rs, "factor", 1.0, &c->rope_factor, what))) return st;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = NB_ROPE_SCALING_LINEAR;
        return NB_OK;
    }
    if (!strcmp(type, "llama3")) {
        c->rope_scaling = NB_ROPE_SCALING_LLAMA3;
        if ((st = json_float(rs, "low_freq_factor", 1.0, &c->rope_low_freq_factor, what)) ||
            (st = json_float(rs, "high_freq_factor", 4.0, &c->rope_high_freq_factor, what)) ||
            (st = json_int(rs, "original_max_position_embeddings", 0, 8192, &c->rope_orig_ctx,
                           what)))
            return st;
        if (!(c->rope_high_freq_factor > c->rope_low_freq_factor) || c->rope_low_freq_factor <= 0 ||
            c->rope_orig_ctx <= 0)
            return nb_set_error(NB_ERR_FORMAT, "%s: llama3 rope_scaling needs high_freq_factor > "
                                "low_freq_factor > 0 and original_max_position_embeddings > 0",
                                what);
        return NB_OK;
    }
    return nb_set_error(NB_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' is not supported "
                        "(default, linear, llama3)", what, type);
}

enum nb_status nb_config_from_hf(struct nb_config *c, const cJSON *root, const char *what)
{
    enum nb_status st;
    config_defaults(c);
    c->rope_pairing = NB_ROPE_HALF;
    if (!cJSON_IsObject(root)) return nb_set_error(NB_ERR_FORMAT, "%s: not a JSON object", what);
    const char *mt = NULL;
    if ((st = nb_json_get_str(root, "model_type", NULL, &mt, what))) return st;
    if (!mt) return nb_set_error(NB_ERR_FORMAT, "%s: key 'model_type' is missing", what);
    if (!arch_from_name(mt, &c->arch))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (llama, "
                            "mistral, qwen2, qwen3, spark)", what, mt);
    if ((st = json_int(root, "num_hidden_layers", 1, 0, &c->n_layers, what)) ||
        (st = json_int(root, "hidden_size", 1, 0, &c->n_embd, what)) ||
        (st = json_int(root, "intermediate_size", 1, 0, &c->n_ff, what)) ||
        (st = json_int(root, "num_attention_heads", 1, 0, &c->n_heads, what)) ||
        (st = json_int(root, "vocab_size", 1, 0, &c->n_vocab, what)) ||
        (st = json_int(root, "max_position_embeddings", 0, 2048, &c->n_ctx_train, what)) ||
        (st = json_float(root, "rms_norm_eps", 1e-6, &c->norm_eps, what)) ||
        (st = json_float(root, "rope_theta", 10000.0, &c->rope_theta, what)))
        return st;
    if (c->n_heads <= 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: num_attention_heads = %d must be positive", what,
                            c->n_heads);
    if ((st = json_int(root, "num_key_value_heads", 0, c->n_heads, &c->n_kv_heads, what)))
        return st;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    if (hd && !cJSON_IsNull(hd)) {
        if ((st = json_int(root, "head_dim", 0, 0, &c->head_dim, what))) return st;
    } else {
        c->head_dim = c->n_embd / c->n_heads;
    }
    if ((st = nb_json_get_bool(root, "tie_word_embeddings", c->arch != NB_ARCH_LLAMA,
                               &c->tied_head, what)))
        return st;
    const char *act = "silu";
    if ((st = nb_json_get_str(root, "hidden_act", "silu", &act, what))) return st;
    if ((st = act_from_name(act, &c->act, what))) return st;
    if (c->arch == NB_ARCH_QWEN2) {
        c->qkv_bias = 1;
    } else if ((st = nb_json_get_bool(root, "attention_bias", 0, &c->qkv_bias, what))) {
        return st;
    }
    c->qk_norm = c->arch == NB_ARCH_QWEN3;
    if ((st = nb_json_get_bool(root, "head_gate", 0, &c->head_gate, what))) return st;
    if ((st = hf_rope_scaling(c, root, what))) return st;
    if ((st = hf_token_id(root, "bos_token_id", &c->bos_id, what)) ||
        (st = hf_token_id(root, "eos_token_id", &c->eos_id, what)))
        return st;
    if (c->n_layers <= 0 || c->n_layers > NB_MAX_LAYERS) return validate(c, what, &k_hf_names);

    /* Sliding-window layers: `layer_types` when given; otherwise Qwen2's
     * use_sliding_window + max_window_layers convention. */
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    int use_sw = 0;
    if ((st = nb_json_get_bool(root, "use_sliding_window", 0, &use_sw, what))) return st;
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
            return nb_set_error(NB_ERR_FORMAT, "%s: 'layer_types' must be an array of %d strings",
                                what, c->n_layers);
        for (int l = 0; l < c->n_layers; l++) {
            const cJSON *e = cJSON_GetArrayItem(lt, l);
            if (!cJSON_IsString(e))
                return nb_set_error(NB_ERR_FORMAT, "%s: layer_types[%d] is not a string", what, l);
            if ((st = layer_type(e->valuestring, l, &c->layer_sliding[l], what))) return st;
        }
    } else if (use_sw) {
        int max_window_layers = 0;
        if ((st = json_int(root, "max_window_layers", 0, 0, &max_window_layers, what))) return st;
        for (int l = max_window_layers; l < c->n_layers; l++) c->layer_sliding[l] = 1;
    }
    int any_sliding = 0;
    for (int l = 0; l < c->n_layers; l++) any_sliding |= c->layer_sliding[l];
    if (any_sliding && (st = json_int(root, "sliding_window", 1, 0, &c->sliding_window, what)))
        return st;
    return validate(c, what, &k_hf_names);
}

/* ---------------------------------------------------------------- llama2.c */

enum nb_status nb_config_from_llama2c(struct nb_config *c, const struct nb_llama2c_config *h,
                                      const char *what)
{
    config_defaults(c);
    c->arch = NB_ARCH_LLAMA;
    c->rope_pairing = NB_ROPE_INTERLEAVED;
    c->n_layers = h->n_layers;
    c->n_embd = h->dim;
    c->n_heads = h->n_heads;
    c->n_kv_heads = h->n_kv_heads;
    c->head_dim = h->n_heads > 0 ? h->dim / h->n_heads : 0;
    c->n_ff = h->hidden_dim;
    c->n_vocab = h->vocab_size < 0 ? -h->vocab_size : h->vocab_size;
    c->n_ctx_train = h->seq_len;
    c->tied_head = h->shared_classifier;
    c->bos_id = 1;
    c->eos_id = 2;
    /* llama2.c's ids 0 <unk>, 1 <s>, 2 </s> are fixed: a smaller vocabulary (a legacy
     * header's -1 is one token with its own classifier) is a damaged header */
    if (c->n_vocab < 3) {
        int stored = h->version == 0 && !h->shared_classifier ? -c->n_vocab : c->n_vocab;
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: llama2.c header: vocab_size = %d (%d token%s%s) is too small: "
                            "llama2.c vocabularies start <unk> 0, <s> 1, </s> 2",
                            what, stored, c->n_vocab, c->n_vocab == 1 ? "" : "s",
                            stored < 0 ? ", own classifier" : "");
    }
    return validate(c, what, &k_l2c_names);
}

/* ---------------------------------------------------------------- .nib config */

/* Every scalar field of struct nb_config: X(name, is_float). */
#define CONFIG_FIELDS(X)                                                                           \
    X(n_layers, 0) X(n_embd, 0) X(n_heads, 0) X(n_kv_heads, 0) X(head_dim, 0) X(n_ff, 0)           \
    X(n_vocab, 0) X(n_ctx_train, 0) X(norm_eps, 1) X(rope_theta, 1) X(rope_pairing, 0)              \
    X(rope_scaling, 0) X(rope_factor, 1) X(rope_low_freq_factor, 1) X(rope_high_freq_factor, 1)     \
    X(rope_orig_ctx, 0) X(act, 0) X(qkv_bias, 0) X(qk_norm, 0) X(head_gate, 0)                     \
    X(sliding_window, 0) X(tied_head, 0) X(bos_id, 0) X(eos_id, 0)

/* nibble's own serialisation of struct nb_config inside a .nib header. */
cJSON *nb_config_to_json(const struct nb_config *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "arch", nb_arch_name(c->arch));
#define PUT(f, is_float) cJSON_AddNumberToObject(o, #f, (double)c->f);
    CONFIG_FIELDS(PUT)
#undef PUT
    cJSON *ls = cJSON_CreateArray();
    for (int l = 0; l < c->n_layers && l < NB_MAX_LAYERS; l++)
        cJSON_AddItemToArray(ls, cJSON_CreateNumber(c->layer_sliding[l]));
    cJSON_AddItemToObject(o, "layer_sliding", ls);
    return o;
}

enum nb_status nb_config_from_json(struct nb_config *c, const cJSON *o, const char *what)
{
    enum nb_status st = NB_OK;
    const char *arch = NULL;
    config_defaults(c);
    if (!cJSON_IsObject(o)) return nb_set_error(NB_ERR_FORMAT, "%s: \"config\" is missing", what);
    if ((st = nb_json_get_str(o, "arch", NULL, &arch, what))) return st;
    if (!arch || !arch_from_name(arch, &c->arch))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: config arch '%s' is not supported", what,
                            arch ? arch : "(missing)");
    float fv = 0;
    int iv = 0;
#define GET(f, is_float)                                                                           \
    if (st == NB_OK && is_float) st = json_float(o, #f, 0, &fv, what), c->f = fv;                  \
    if (st == NB_OK && !is_float) st = json_int(o, #f, 1, 0, &iv, what), c->f = iv;
    CONFIG_FIELDS(GET)
#undef GET
    if (st) return st;
    if ((unsigned)c->rope_pairing > NB_ROPE_INTERLEAVED || (unsigned)c->act > NB_ACT_GELU_TANH ||
        (unsigned)c->rope_scaling > NB_ROPE_SCALING_LLAMA3)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: config enum out of range (rope_pairing %d, act %d, "
                            "rope_scaling %d)",
                            what, (int)c->rope_pairing, (int)c->act, (int)c->rope_scaling);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "layer_sliding");
    if (!cJSON_IsArray(ls) || c->n_layers <= 0 || c->n_layers > NB_MAX_LAYERS ||
        cJSON_GetArraySize(ls) != c->n_layers)
        return nb_set_error(NB_ERR_FORMAT, "%s: config layer_sliding must list %d layers", what,
                            c->n_layers);
    for (int l = 0; l < c->n_layers; l++)
        c->layer_sliding[l] = cJSON_GetArrayItem(ls, l)->valueint != 0;
    return nb_config_validate(c, what);
}
