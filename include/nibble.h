/* nibble — small LLMs, fast, on edge CPUs.
 *
 * The one public header of libnibble. Everything a program needs to load a model,
 * run it and sample from it. Internals live behind it in src/ (see docs/ and
 * DESIGN.md for the layering).
 *
 * Conventions: every fallible call returns enum nb_status; on failure a message
 * naming what went wrong is available from nb_last_error() (thread-local, valid
 * until the next failing call on the same thread). Library code never prints to
 * stdout and never exits.
 */
#ifndef NIBBLE_H
#define NIBBLE_H

#include <stddef.h>
#include <stdint.h>

/* The functions of this header are libnibble.so's only exported symbols (the rest of
 * the library is built with hidden visibility; tools/check_exports.py, ctest exports). */
#if defined(__GNUC__)
#define NB_API __attribute__((visibility("default")))
#else
#define NB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define NIBBLE_VERSION_MAJOR 0
#define NIBBLE_VERSION_MINOR 1
#define NIBBLE_VERSION_PATCH 0
#define NIBBLE_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------- status */

enum nb_status {
    NB_OK = 0,
    NB_ERR_IO,          /* open/read/mmap failed */
    NB_ERR_FORMAT,      /* a file is malformed (bad magic, offset past end, ...) */
    NB_ERR_UNSUPPORTED, /* valid input we do not handle (unknown type, arch) */
    NB_ERR_INVALID_ARG, /* caller passed something out of range */
    NB_ERR_NOMEM,       /* allocation failed or a size would overflow */
    NB_ERR_NOT_FOUND,   /* a key / tensor / file that must exist does not */
    NB_ERR_RANGE,       /* position or context exhausted */
    NB_ERR_INTERNAL,
};

/* Short name of a status ("format error", ...). Never NULL. */
NB_API const char *nb_status_str(enum nb_status s);
/* Message of the last failure on this thread ("" if none). Never NULL. */
NB_API const char *nb_last_error(void);
/* Library version string, e.g. "0.1.0". */
NB_API const char *nb_version(void);

/* ---------------------------------------------------------------- logging */

enum nb_log_level { NB_LOG_ERROR = 0, NB_LOG_WARN, NB_LOG_INFO, NB_LOG_DEBUG };
/* Messages at or below `level` are written to stderr. Default: NB_LOG_WARN,
 * overridden by the environment variable NIBBLE_LOG=error|warn|info|debug. */
NB_API void nb_log_set_level(enum nb_log_level level);

/* ---------------------------------------------------------------- model */

struct nb_model;

struct nb_model_info {
    const char *arch;        /* "llama", "qwen2", "qwen3", "spark" */
    const char *source_kind; /* "gguf", "safetensors", "llama2c" */
    int n_layers, n_embd, n_heads, n_kv_heads, head_dim, n_ff, n_vocab;
    int n_ctx_train;
    int bos_id, eos_id; /* -1 when the model does not say */
    int64_t n_params;
    const char *weight_path; /* "w4a8", "w4a16", "w8a16", "bf16", "f32", or "f16" (a float source) */
    int64_t linear_params;   /* weights of the linear layers, the output head included */
    int64_t linear_bytes;    /* their stored bytes: bpw = 8 * bytes / params */
    int64_t weight_bytes;    /* bytes a decode step streams: linear weights + one embedding row */
};

/* Load a model: a GGUF file, a llama2.c .bin checkpoint or a Hugging Face model
 * directory (config.json + *.safetensors). Weights are mapped read-only. */
NB_API enum nb_status nb_model_load(struct nb_model **out, const char *path);
NB_API void nb_model_free(struct nb_model *model);
NB_API void nb_model_get_info(const struct nb_model *model, struct nb_model_info *info);

/* ---------------------------------------------------------------- context */

struct nb_ctx;

struct nb_ctx_params {
    int n_ctx;     /* tokens of KV cache per sequence (0: min(model's, 4096)) */
    int n_seq;     /* independent sequences sharing the weights (default 1) */
    int n_batch;   /* max tokens per forward call chunk (default 512) */
    int n_threads; /* 0: all online cores */
    int pin;       /* bind thread i to core i */
};
NB_API struct nb_ctx_params nb_ctx_default_params(void);

NB_API enum nb_status nb_ctx_init(struct nb_ctx **out, const struct nb_model *model,
                           const struct nb_ctx_params *params);
NB_API void nb_ctx_free(struct nb_ctx *ctx);

/* A batch of tokens, possibly from several sequences (as llama.cpp's llama_batch).
 * token[i] sits at position pos[i] of sequence seq[i]; each sequence's positions
 * must continue where its cache ends (0 for a fresh one) and rise by one.
 * Logits are produced for the tokens with want_logits[i] != 0 (NULL: only the
 * last token), in batch order, n_vocab floats each. */
struct nb_batch {
    int n_tokens;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq;         /* NULL: all sequence 0 */
    const uint8_t *want_logits; /* NULL: last token only */
};

/* Run the model over a batch. `logits` receives n_out * n_vocab floats where n_out
 * is the number of tokens that asked for logits. */
NB_API enum nb_status nb_decode(struct nb_ctx *ctx, const struct nb_batch *batch, float *logits);
/* Forget sequence `seq` (its next position is 0 again). */
NB_API void nb_ctx_clear_seq(struct nb_ctx *ctx, int seq);
/* Keep only the first n tokens of sequence `seq` (a chat turn re-using its cache).
 * NB_ERR_RANGE when a sliding-window layer no longer holds what position n needs;
 * then clear the sequence and run it again. */
NB_API enum nb_status nb_ctx_truncate_seq(struct nb_ctx *ctx, int seq, int n);
/* Next position of sequence `seq` (number of tokens in its cache). */
NB_API int nb_ctx_seq_len(const struct nb_ctx *ctx, int seq);

/* Per-op profile: nb_ctx_profile(ctx, 1) resets and starts counting, 0 stops. */
struct nb_profile_entry {
    const char *op;    /* "gemm qkv", "attention", ... */
    double ms;         /* wall time, all calls */
    int64_t calls;
    int threads;       /* threads the op fanned out to */
    double fanout_ms;  /* wall time not spent computing on thread 0: dispatch + waiting */
    int float_weights; /* a weight GEMM of this op ran in float precision */
};
NB_API void nb_ctx_profile(struct nb_ctx *ctx, int on);
/* Fills up to max entries (ops that ran); returns the count. *n_tokens: tokens run. */
NB_API int nb_ctx_profile_get(const struct nb_ctx *ctx, struct nb_profile_entry *out, int max,
                       int64_t *n_tokens);

/* The model a context runs. */
NB_API const struct nb_model *nb_ctx_model(const struct nb_ctx *ctx);

/* ---------------------------------------------------------------- sampler */

struct nb_sampler_params {
    float temperature;        /* <= 0: greedy */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off */
    int repeat_last_n;        /* window for the penalty */
    uint64_t seed;
};
NB_API struct nb_sampler_params nb_sampler_default_params(void);

struct nb_sampler;
NB_API enum nb_status nb_sampler_init(struct nb_sampler **out, const struct nb_sampler_params *p,
                               int n_vocab);
NB_API void nb_sampler_free(struct nb_sampler *s);
/* Tell the sampler about a token in the history (prompt or generated). */
NB_API void nb_sampler_accept(struct nb_sampler *s, int32_t token);
/* Choose the next token from `logits` (n_vocab floats; may be modified). */
NB_API int32_t nb_sampler_sample(struct nb_sampler *s, float *logits);

/* ---------------------------------------------------------------- generation */

struct nb_gen_stats {
    int n_prompt, n_gen;
    int n_decode;      /* one-token forward steps run (n_gen - 1 when stopped by length) */
    double t_prompt_s; /* prefill wall time */
    double t_gen_s;    /* wall time of sampling and the n_decode steps */
    int stopped_by;    /* 0: length, 1: end-of-sequence token, 2: callback */
};

/* Called for each generated token; return non-zero to stop. */
typedef int (*nb_token_cb)(int32_t token, void *user);

/* Prefill `prompt` into sequence `seq` (appending to what it holds), then sample up
 * to n_predict tokens, calling cb for each. Stops at the model's end-of-sequence
 * token when stop_on_eos (that token is not passed to cb). */
NB_API enum nb_status nb_generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                           const int32_t *prompt, int n_prompt, int n_predict, int stop_on_eos,
                           nb_token_cb cb, void *user, struct nb_gen_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* NIBBLE_H */
