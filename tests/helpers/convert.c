/* tests/helpers/convert.c — HF safetensors -> GGUF for loader tests. */
#include "helpers/convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "formats/gguf.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "helpers/testutil.h"

static const char *const k_map[][2] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.head_gate.weight", "attn_gate.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

static int gguf_name(const char *hf, char *out, size_t n)
{
    int layer;
    char rest[200];
    if (sscanf(hf, "model.layers.%d.%199s", &layer, rest) == 2) {
        for (size_t i = 3; i < sizeof k_map / sizeof k_map[0]; i++)
            if (!strcmp(rest, k_map[i][0])) {
                snprintf(out, n, "blk.%d.%s", layer, k_map[i][1]);
                return 1;
            }
        return 0;
    }
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(hf, k_map[i][0])) {
            snprintf(out, n, "%s", k_map[i][1]);
            return 1;
        }
    return 0;
}

/* HF rotates halves; llama.cpp's converter reorders each head's rows so that
 * interleaved pairs (2i, 2i+1) hold what HF has at (i, i + d/2). */
static void permute_rows(float *dst, const float *src, int n_heads, int64_t rows, int64_t cols)
{
    int64_t hd = rows / n_heads;
    for (int h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int k = 0; k < 2; k++)
                memcpy(dst + (h * hd + 2 * i + k) * cols, src + (h * hd + k * (hd / 2) + i) * cols,
                       sizeof(float) * (size_t)cols);
}

#define NEED(x)                                                                                    \
    do {                                                                                           \
        if ((x) != NB_OK) fail_msg("convert %s: %s", hf_dir, nb_last_error());                     \
    } while (0)

int tu_hf_to_gguf(const char *hf_dir, const char *out_path, const char *dtype_name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", hf_dir);
    cJSON *cfg = tu_load_json(path);
    struct nb_safetensors *st = NULL;
    NEED(nb_safetensors_open(&st, hf_dir));
    struct nb_gguf_writer *w = NULL;
    NEED(nb_gguf_writer_init(&w, 3, 32));
    const char *arch = cJSON_GetObjectItem(cfg, "model_type")->valuestring;
    int is_llama = !strcmp(arch, "llama");
    char key[256];
#define NUM(k) ((int)cJSON_GetObjectItem(cfg, k)->valuedouble)
    NEED(nb_gguf_writer_add_str(w, "general.architecture", arch));
    NEED(nb_gguf_writer_add_u32(w, "general.alignment", 32));
#define U32(suffix, v)                                                                             \
    snprintf(key, sizeof key, "%s.%s", arch, suffix);                                              \
    NEED(nb_gguf_writer_add_u32(w, key, (uint32_t)(v)))
#define F32(suffix, v)                                                                             \
    snprintf(key, sizeof key, "%s.%s", arch, suffix);                                              \
    NEED(nb_gguf_writer_add_f32(w, key, (float)(v)))
    int n_layers = NUM("num_hidden_layers"), n_heads = NUM("num_attention_heads");
    int n_kv = NUM("num_key_value_heads");
    U32("block_count", n_layers);
    U32("embedding_length", NUM("hidden_size"));
    U32("feed_forward_length", NUM("intermediate_size"));
    U32("attention.head_count", n_heads);
    U32("attention.head_count_kv", n_kv);
    U32("context_length", NUM("max_position_embeddings"));
    if (cJSON_GetObjectItem(cfg, "head_dim")) {
        U32("attention.key_length", NUM("head_dim"));
        U32("attention.value_length", NUM("head_dim"));
    }
    F32("rope.freq_base", cJSON_GetObjectItem(cfg, "rope_theta")->valuedouble);
    F32("attention.layer_norm_rms_epsilon", cJSON_GetObjectItem(cfg, "rms_norm_eps")->valuedouble);
    NEED(nb_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)NUM("bos_token_id")));
    NEED(nb_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)NUM("eos_token_id")));
    if (!strcmp(arch, "spark")) {
        snprintf(key, sizeof key, "%s.hidden_act", arch);
        NEED(nb_gguf_writer_add_str(w, key, cJSON_GetObjectItem(cfg, "hidden_act")->valuestring));
        snprintf(key, sizeof key, "%s.attention.head_gate", arch);
        NEED(nb_gguf_writer_add_bool(w, key, cJSON_IsTrue(cJSON_GetObjectItem(cfg, "head_gate"))));
        U32("attention.sliding_window", NUM("sliding_window"));
        const cJSON *lt = cJSON_GetObjectItem(cfg, "layer_types");
        const char *types[256];
        for (int l = 0; l < n_layers; l++) types[l] = cJSON_GetArrayItem(lt, l)->valuestring;
        snprintf(key, sizeof key, "%s.attention.layer_types", arch);
        NEED(nb_gguf_writer_add_arr_str(w, key, types, (uint64_t)n_layers));
    }
    /* tensors: converted copies live until the file is written */
    int64_t n = nb_safetensors_n_tensors(st);
    void **bufs = calloc((size_t)n, sizeof *bufs);
    for (int64_t i = 0; i < n; i++) {
        const struct nb_tensor *t = nb_safetensors_tensor(st, i);
        char gname[256];
        if (!gguf_name(t->name, gname, sizeof gname)) fail_msg("convert: unknown %s", t->name);
        int64_t ne = nb_tensor_nelems(t);
        float *f = malloc(sizeof(float) * (size_t)ne);
        memcpy(f, t->data, sizeof(float) * (size_t)ne); /* the tiny models are F32 */
        if (is_llama && (strstr(gname, "attn_q.weight") || strstr(gname, "attn_k.weight"))) {
            float *p = malloc(sizeof(float) * (size_t)ne);
            permute_rows(p, f, strstr(gname, "attn_q") ? n_heads : n_kv, t->shape[0], t->shape[1]);
            free(f);
            f = p;
        }
        enum nb_dtype dt = NB_DTYPE_F32;
        void *data = f;
        if (t->n_dims == 2 && strcmp(dtype_name, "F32") != 0) {
            uint16_t *h = malloc(2 * (size_t)ne);
            int bf = !strcmp(dtype_name, "BF16");
            for (int64_t k = 0; k < ne; k++) h[k] = bf ? nb_f32_to_bf16(f[k]) : nb_f32_to_f16(f[k]);
            free(f);
            data = h;
            dt = bf ? NB_DTYPE_BF16 : NB_DTYPE_F16;
        }
        bufs[i] = data;
        NEED(nb_gguf_writer_add_tensor(w, gname, dt, t->n_dims, t->shape, data));
    }
    NEED(nb_gguf_writer_write(w, out_path));
    for (int64_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    nb_gguf_writer_free(w);
    nb_safetensors_free(st);
    cJSON_Delete(cfg);
    return 0;
}
