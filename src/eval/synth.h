/* eval/synth.h — random-weight models at real shapes, written as GGUF, for benchmarks
 * and tests (`nibble synth`).
 *
 * A synthetic model has the tensor names and metadata keys llama.cpp uses (plus
 * nibble's spark.* keys), weights drawn from a fixed-seed generator and a minimal
 * byte-level BPE vocabulary (tokenizer.ggml.model "gpt2", pre "qwen2"), so that both
 * llama.cpp and nibble load it and their speeds can be compared on identical files.
 *
 * Weights: every matrix (and the embedding) ~ N(0, 0.02^2); norm weights 1 + N(0, 0.02^2).
 * The values are a pure function of (seed, tensor name, element index): a tensor is
 * cut into blocks of NB_SYNTH_BLOCK elements, each drawn from its own splitmix64
 * stream by Marsaglia's polar method with a logarithm of our own (IEEE +, *, /, sqrt
 * only), so the bytes are identical across runs, thread counts and machines.
 */
#ifndef NB_EVAL_SYNTH_H
#define NB_EVAL_SYNTH_H

#include <stdint.h>

#include "core/error.h"
#include "formats/tensor.h"

#define NB_SYNTH_BLOCK 4096

struct nb_synth_shape {
    const char *name; /* "qwen3-1.7b", ... */
    const char *arch; /* general.architecture: "llama", "qwen3", "spark" */
    const char *desc;
    int n_layers, n_embd, n_heads, n_kv_heads, head_dim, n_ff, n_vocab, n_ctx;
    float rope_theta, norm_eps;
    int tied_head;      /* no output.weight */
    int qk_norm;        /* blk.N.attn_q_norm / attn_k_norm [head_dim] */
    int geglu;          /* spark.hidden_act = gelu_pytorch_tanh */
    int head_gate;      /* spark: blk.N.attn_gate.weight [n_heads, n_embd] */
    int sliding_window; /* spark: > 0: even layers slide, odd layers are full */
};

/* The built-in shapes: index 0 .. nb_synth_n_shapes() - 1. */
int nb_synth_n_shapes(void);
const struct nb_synth_shape *nb_synth_shape_at(int i);
/* By name; NULL if unknown. */
const struct nb_synth_shape *nb_synth_find_shape(const char *name);
/* Parameters of the model (embedding counted once when tied). */
int64_t nb_synth_n_params(const struct nb_synth_shape *s);

struct nb_synth_config {
    enum nb_dtype dtype; /* F16, BF16 or F32: matrices and embedding; norms are F32 */
    uint64_t seed;
    int n_threads; /* generation threads; 0: all cores (the bytes do not depend on it) */
};

/* Write shape `s` to `path` (via path.tmp + rename). */
enum nb_status nb_synth_write(const struct nb_synth_shape *s, const struct nb_synth_config *p,
                              const char *path);

#endif
