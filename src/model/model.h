/* model/model.h — the architecture description and the loaded weights.
 *
 * One description covers Llama 1/2/3, Qwen2 (q/k/v bias), Qwen3 (per-head q/k
 * RMSNorm) and the Spark options (GEGLU MLP, per-head attention output gate,
 * sliding-window layers). Loaders for GGUF, Hugging Face safetensors and llama2.c
 * fill the same struct; the forward pass (forward.c) reads only this.
 */
#ifndef NB_MODEL_MODEL_H
#define NB_MODEL_MODEL_H

#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "formats/tensor.h"
#include "core/wformat.h"

#define NB_MAX_LAYERS 256

enum nb_arch { NB_ARCH_LLAMA = 0, NB_ARCH_QWEN2, NB_ARCH_QWEN3, NB_ARCH_SPARK, NB_ARCH_COUNT };
enum nb_act { NB_ACT_SILU = 0, NB_ACT_GELU_TANH };
/* Which dimensions RoPE rotates together. HF checkpoints rotate (i, i + d/2);
 * GGUF llama and llama2.c checkpoints have Q/K rows permuted so that the pairs are
 * (2i, 2i + 1). Both give the same model. */
enum nb_rope_pairing { NB_ROPE_HALF = 0, NB_ROPE_INTERLEAVED };
enum nb_rope_scaling { NB_ROPE_SCALING_NONE = 0, NB_ROPE_SCALING_LINEAR, NB_ROPE_SCALING_LLAMA3 };

struct nb_config {
    enum nb_arch arch;
    int n_layers;
    int n_embd;      /* hidden size */
    int n_heads;     /* query heads */
    int n_kv_heads;  /* key/value heads (GQA: n_heads % n_kv_heads == 0) */
    int head_dim;    /* may differ from n_embd / n_heads (Qwen3) */
    int n_ff;        /* MLP inner size */
    int n_vocab;
    int n_ctx_train; /* the model's maximum context */
    float norm_eps;
    float rope_theta;
    enum nb_rope_pairing rope_pairing;
    enum nb_rope_scaling rope_scaling;
    float rope_factor;              /* linear / llama3 */
    float rope_low_freq_factor;     /* llama3 */
    float rope_high_freq_factor;    /* llama3 */
    int rope_orig_ctx;              /* llama3 original_max_position_embeddings */
    enum nb_act act;                /* SwiGLU (silu) or GEGLU (tanh gelu) */
    int qkv_bias;                   /* Qwen2 */
    int qk_norm;                    /* Qwen3 */
    int head_gate;                  /* Spark: sigmoid gate per head on attention output */
    int sliding_window;             /* keys with q_pos - k_pos < window (0: none) */
    uint8_t layer_sliding[NB_MAX_LAYERS]; /* 1: this layer uses the window */
    int tied_head;                  /* output head shares the embedding matrix */
    int bos_id, eos_id;             /* -1 when unknown */
};

/* A weight matrix as stored: y = W x, W has n_out rows of n_in values, in one of the
 * weight formats of core/wformat.h: plain f32 / f16 / bf16 rows (row-major,
 * element-aligned; other source types are converted at load) or a packed blob (w8a16,
 * w4a16, w4a8 in the ROWS or X16 layout, from a .nib). The format alone picks the GEMM
 * (kernels->gemm[format]). */
struct nb_weight {
    enum nb_wformat format;
    int group; /* int4 group size */
    int src_bits; /* a quantized source's bits per code (GGUF Q2_K: 2 ... Q8_0: 8), 0: float */
    int64_t n_out, n_in;
    const void *data;
};

struct nb_layer {
    const float *attn_norm;           /* [n_embd] */
    struct nb_weight wq;              /* [n_heads * head_dim, n_embd] */
    struct nb_weight wk, wv;          /* [n_kv_heads * head_dim, n_embd] */
    const float *bq, *bk, *bv;        /* biases (Qwen2) or NULL */
    const float *bo;                  /* o_proj bias (attention_bias: llama, qwen3) or NULL */
    const float *q_norm, *k_norm;     /* [head_dim] (Qwen3) or NULL */
    struct nb_weight head_gate;       /* [n_heads, n_embd] (Spark) or data NULL */
    struct nb_weight wo;              /* [n_embd, n_heads * head_dim] */
    const float *ffn_norm;            /* [n_embd] */
    struct nb_weight w_gate, w_up;    /* [n_ff, n_embd] */
    struct nb_weight w_down;          /* [n_embd, n_ff] */
};

struct nb_model_source; /* the open file(s) the weights point into */

struct nb_model {
    struct nb_config cfg;
    const char *arch_name;   /* "llama", ... */
    const char *source_kind; /* "gguf", "safetensors", "llama2c" */
    const char *source_quant; /* a safetensors checkpoint's quantization: "gptq", "awq"; or NULL */
    char *path;

    struct nb_weight tok_embd; /* [n_vocab, n_embd], a row gather */
    struct nb_layer *layers;   /* [n_layers] */
    const float *out_norm;     /* [n_embd] */
    struct nb_weight output;   /* [n_vocab, n_embd]; the embedding when tied */
    float *rope_inv_freq;      /* [head_dim / 2], scaling applied */
    int64_t n_params;
    const char *weight_path;   /* see nb_model_info */
    int64_t linear_params, linear_bytes, weight_bytes;

    struct nb_model_source *src;
    struct nb_arena arena; /* converted vectors, copies of misaligned data */
    void *repacked;        /* the k-quant X16 records (nb_model_repack_kquants), or NULL */
    size_t repacked_size;  /* its bytes (nb_huge_alloc) */
};

/* Calibration: the forward pass shows each linear layer's input to an observer, at
 * these sites (q/k/v and the head gate read ATTN_IN; o reads ATTN_OUT; gate/up read
 * FFN_IN; down reads FFN_MID; the output head reads OUT_IN, only the rows that want
 * logits). x is [n][len], row-major. quantize sums squared activations (an imatrix) and
 * GPTQ's Hessians X^T X from it (runtime/quantize.c, runtime/gptq_calib.c). */
enum nb_site { NB_SITE_ATTN_IN, NB_SITE_ATTN_OUT, NB_SITE_FFN_IN, NB_SITE_FFN_MID, NB_SITE_OUT_IN,
               NB_SITE_COUNT };
typedef void (*nb_observer_fn)(void *user, enum nb_site site, int layer, const float *x, int n,
                               int64_t len);
struct nb_ctx;
void nb_ctx_set_observer(struct nb_ctx *c, nb_observer_fn fn, void *user);
/* Run the context on another kernel table (NULL: the machine's, nb_kernels_get()), which
 * must outlive its use: calibration's float passes swap in a faster float GEMM. */
struct nb_kernels;
void nb_ctx_set_kernels(struct nb_ctx *c, const struct nb_kernels *k);
/* Run layer `layer` alone, in place, over x [n][n_embd]: the n tokens of one chunk at
 * positions 0..n-1 of sequence 0 (cleared first), n <= the context's n_batch. For
 * calibration passes that go layer by layer. */
enum nb_status nb_ctx_run_layer(struct nb_ctx *c, int layer, float *x, int n);
/* A GGUF source's Q4_K / Q6_K matrices (rows a multiple of 16) into the X16 records of
 * kernels/qblock.h, on n_threads threads (<= 0: every core): lossless, the kernels then
 * read int8 activations. The token embedding stays as stored. *seconds (may be NULL):
 * the time it took. On failure the model is unchanged. */
enum nb_status nb_model_repack_kquants(struct nb_model *m, int n_threads, double *seconds);
/* 1 when this machine's kernel table runs the X16 block format `x16` with a SIMD kernel
 * (not its reference): only then are such matrices repacked, and "auto" runs a file of
 * them as stored. */
int nb_model_block_fast(enum nb_wformat x16);
/* x[t] = the embedding row of tok[t] (decoded to f32), x [n][n_embd]. */
void nb_model_embed(const struct nb_model *m, const int32_t *tok, int n, float *x);

const char *nb_arch_name(enum nb_arch a);
/* Check the config for consistency (positive sizes, divisibility, limits);
 * `what` names the source in the message. */
enum nb_status nb_config_validate(const struct nb_config *c, const char *what);
/* Load from an opened source (formats/source.h), which the model keeps a reference to:
 * its mapping is the one the weights point into. A .nib source is verified here unless
 * it was (the warm-start cache verifies its entries: what was checked is what runs). */
struct nb_source;
enum nb_status nb_model_load_source(struct nb_model **out, struct nb_source *src);
/* The source a model was loaded from (its reference; NULL for none). */
struct nb_source *nb_model_source(const struct nb_model *m);
/* Entry i of the loader's tensor-name table (model/load.c): the name pattern in GGUF
 * files and .nib files (llama.cpp's names) and in Hugging Face checkpoints ("%d" =
 * layer); 1, or 0 past the end (i from 0 up). The exporter (runtime/export.c) maps
 * .nib names to Hugging Face names through it. */
int nb_model_tensor_names(int i, const char **gguf_name, const char **hf_name);
/* The codes a matrix of the model had in its checkpoint (a 4-bit GPTQ / AWQ matrix,
 * quant/unpack.h), valid while the model is; NULL for any other matrix. The matrix
 * itself is their exact f32 dequantization. */
struct nb_src_codes;
const struct nb_src_codes *nb_model_src_codes(const struct nb_model *m, const struct nb_weight *w);
/* Fill rope_inv_freq from the config (theta and scaling). */
enum nb_status nb_model_init_rope(struct nb_model *m);

#endif
