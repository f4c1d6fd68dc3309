/* nibble — small LLMs, fast, on edge CPUs.
 *
 * The inference core of libnibble: everything a program needs to load a model, run it,
 * tokenize and sample from it, and to choose, quantize and cache its weights. The other
 * audiences have their own headers, each including this one: nibble_server.h (the
 * OpenAI-compatible server), nibble_eval.h (fidelity evaluation, benchmarks, the agent
 * tasks) and nibble_synth.h (synthetic models for tests and benchmarks). Internals live
 * behind them in src/ (docs/architecture.md has the layering).
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

/* The functions of the public headers are libnibble.so's only exported symbols (the rest of
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
/* Messages at or below `level` are written to stderr. Default: NB_LOG_WARN. The library
 * reads no NIBBLE_* environment variable (the nibble CLI calls this with its NIBBLE_LOG=
 * error|warn|info|debug); the only ones it reads are XDG_CACHE_HOME and HOME, for
 * nb_open_default_params' cache folder. */
NB_API void nb_log_set_level(enum nb_log_level level);

/* ---------------------------------------------------------------- versioned structs
 * The structs that start with `size` are versioned: a params struct comes from its
 * *_default_params() function (size set), an output struct is given with size = sizeof
 * it. The library reads and writes only the first `size` bytes, so a program built
 * against an older header keeps working with a newer library (fields are only ever added
 * at the end). A versioned struct held by value inside another is that struct's last
 * member (nb_open_params.select, nb_open_report.selection, nb_quantize_params.select,
 * nb_quantize_stats.selection, nb_server_params.ctx), so it can grow without moving
 * anything; the outer struct then gains no field after it (a field it needs would turn
 * the member into a pointer: an ABI change); any other is held by pointer
 * (nb_server_params.sampler). Structs without `size` (nb_batch, nb_model_info,
 * nb_gen_stats, ...) have a fixed layout: changing one is an ABI change.
 *
 * Lifetime and threads: each object type below says who owns it, what must outlive it
 * and whether several threads may use it at once. An object made by *_init / *_load is
 * the caller's, freed by its *_free (NULL is fine); the library keeps no object alive on
 * its own. Functions on different objects may run on different threads at once. */

/* Progress of a long job (quantization): done of total units, called after each. */
typedef void (*nb_progress_fn)(int64_t done, int64_t total, void *user);

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
 * directory (config.json + *.safetensors). Weights are mapped read-only (a .nib's are read
 * into huge pages where nb_set_weight_copy says so).
 * Lifetime and threads: the caller owns the model (nb_model_free). It is immutable once
 * loaded: any number of contexts and servers, on any threads, may use it at once, and it
 * must outlive every one of them (a tokenizer made from it need not). */
NB_API enum nb_status nb_model_load(struct nb_model **out, const char *path);
NB_API void nb_model_free(struct nb_model *model);
/* The info's strings stay valid until nb_model_free. */
NB_API void nb_model_get_info(const struct nb_model *model, struct nb_model_info *info);

/* ---------------------------------------------------------------- context */

struct nb_ctx;

/* What the KV cache stores: f32, f16, bf16, or q8_0 (llama.cpp's block of 32 int8 codes
 * and an f16 scale; the head size must be a multiple of 32). Default: f16 (kjv-7m's
 * greedy continuations identical to f32's, half the memory, faster at depth:
 * docs/kv-cache.md). */
enum nb_kv_type { NB_KV_TYPE_DEFAULT, NB_KV_TYPE_F32, NB_KV_TYPE_F16, NB_KV_TYPE_BF16,
                  NB_KV_TYPE_Q8_0 };

/* The KV cache is one pool of blocks (32 tokens) per context, shared by its sequences:
 * a sequence takes blocks as it grows and returns them when cleared or truncated, and
 * sliding-window layers keep only the blocks their window reads. */
struct nb_ctx_params {
    size_t size;   /* from nb_ctx_default_params() */
    int n_ctx;     /* most tokens of one sequence (0: min(model's, 4096)) */
    int n_seq;     /* independent sequences sharing the weights (default 1) */
    int n_batch;   /* max tokens per forward call chunk (default 512) */
    int n_threads; /* 0: all online cores */
    int pin;       /* bind thread i to core i */
    int64_t n_ctx_total; /* tokens the KV pool holds for all sequences together
                            (0: n_seq * n_ctx, every sequence can fill its context) */
    enum nb_kv_type kv_type; /* of the cached keys and values */
};
/* The name of a KV type; for NB_KV_TYPE_DEFAULT, the name of the type it stands for. */
NB_API const char *nb_kv_type_name(enum nb_kv_type kv_type);
/* "f32", "f16", "bf16", "q8_0" (or "default") -> enum nb_kv_type; -1 for anything else. */
NB_API int nb_kv_type_parse(const char *name);
NB_API struct nb_ctx_params nb_ctx_default_params(void);

/* A context: the KV cache of its n_seq sequences, its scratch and its worker threads
 * (n_threads, started here, joined by nb_ctx_free). Lifetime and threads: the caller owns
 * it (nb_ctx_free); the model must outlive it, and it must outlive the sequences made on
 * it. One thread at a time may call functions on a context, its nb_sequence objects
 * included (the server's engine thread owns its one); run several contexts for parallel
 * callers. params NULL: the defaults; else only params->size bytes are read. */
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
 * is the number of tokens that asked for logits. A token gets the attention sums it gets
 * in a batch of its sequence's tokens alone, whatever else the batch holds (a decoding
 * stream's one token: its one-token step's); its logits are then that batch's wherever
 * the GEMM kernel gives every row the same sums for any number of rows (w4a8: by design). */
NB_API enum nb_status nb_decode(struct nb_ctx *ctx, const struct nb_batch *batch, float *logits);
/* nb_decode for speculative verification: each token's attention runs as it would in a
 * one-token decode step (flash-decoding over its sequence's cache, never the prefill
 * tiles), so a token's logits are those it would get run alone wherever the GEMM kernel
 * gives every row the same sums for any number of rows (w4a8: bit-identical by design;
 * docs/speculative.md lists the paths checked). */
NB_API enum nb_status nb_decode_verify(struct nb_ctx *ctx, const struct nb_batch *batch,
                                       float *logits);
/* Forget sequence `seq` (its next position is 0 again). */
NB_API void nb_ctx_clear_seq(struct nb_ctx *ctx, int seq);
/* Keep only the first n tokens of sequence `seq` (a chat turn re-using its cache).
 * NB_ERR_RANGE when a sliding-window layer no longer holds what position n needs;
 * then clear the sequence and run it again. */
NB_API enum nb_status nb_ctx_truncate_seq(struct nb_ctx *ctx, int seq, int n);
/* Next position of sequence `seq` (number of tokens in its cache). */
NB_API int nb_ctx_seq_len(const struct nb_ctx *ctx, int seq);
/* Sequence `dst` becomes the first n tokens of `src` (its own tokens are dropped),
 * sharing src's KV blocks: a common prompt is stored once. A block is copied only when
 * one of them writes into a block both hold (copy-on-write), so neither ever sees the
 * other's later tokens. NB_ERR_RANGE as nb_ctx_truncate_seq for a window layer. */
NB_API enum nb_status nb_ctx_fork_seq(struct nb_ctx *ctx, int src, int dst, int n);
/* The KV pool: bytes of the blocks in use (what the cache costs in memory now) and of
 * the whole pool (address space; untouched blocks are never written and cost nothing). */
struct nb_kv_usage {
    int64_t bytes_used, bytes_reserved;
    int64_t blocks_used, blocks_total;
    int block_tokens;
};
NB_API void nb_ctx_kv_usage(const struct nb_ctx *ctx, struct nb_kv_usage *usage);
/* The anonymous memory a context with these parameters (read as nb_ctx_init reads them)
 * takes once its sequences are full (before making it: nibble kv-budget, and run's check
 * against free memory). */
struct nb_ctx_memory {
    int64_t kv_bytes;      /* the KV pools: full-attention layers hold every token,
                              sliding-window layers their window (hybrid accounting) */
    int64_t kv_flat_bytes; /* the same cache if every layer held every token */
    int64_t kv_bytes_per_token; /* one token in every layer */
    int64_t work_bytes;    /* activations of a chunk, scratch, attention partials */
    int64_t total_bytes;   /* kv_bytes + work_bytes */
};
NB_API enum nb_status nb_ctx_memory(const struct nb_model *model, const struct nb_ctx_params *params,
                                    struct nb_ctx_memory *out);

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
/* Tokens each sequence may hold, and tokens one forward chunk takes, as the context
 * resolved them from its params (llama.cpp's llama_n_ctx / llama_n_batch). */
NB_API int nb_ctx_n_ctx(const struct nb_ctx *ctx);
NB_API int nb_ctx_n_batch(const struct nb_ctx *ctx);

/* How nb_embed pools a sequence's last hidden states (after the final norm: what HF's
 * LlamaModel returns as last_hidden_state) into one vector, as llama-server's --pooling:
 * their mean, the last token's, or the first token's (CLS; a causal model's first token
 * sees only itself). */
enum nb_pooling { NB_POOLING_MEAN, NB_POOLING_LAST, NB_POOLING_CLS };
/* "mean", "last", "cls" -> enum nb_pooling; -1 for anything else. */
NB_API int nb_pooling_parse(const char *name);
/* The embedding of tokens[0..n): run as sequence `seq` (cleared before and after), in
 * chunks of n_batch, pooled into out[n_embd] (nb_model_info.n_embd) and L2-normalized (a
 * unit vector, as OpenAI's and llama-server's). NB_ERR_INVALID_ARG for n <= 0, a bad
 * sequence, pooling or token; NB_ERR_RANGE for n > n_ctx or a full KV pool. */
NB_API enum nb_status nb_embed(struct nb_ctx *ctx, int seq, const int32_t *tokens, int n,
                               enum nb_pooling pooling, float *out);

/* ---------------------------------------------------------------- sampler */

struct nb_sampler_params {
    size_t size;              /* from nb_sampler_default_params() (versioned) */
    float temperature;        /* <= 0: greedy */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off */
    int repeat_last_n;        /* window for the penalties */
    uint64_t seed;
    float presence_penalty;   /* subtracted once from a token in the window (0: off;
                                 OpenAI's, -2..2) */
    float frequency_penalty;  /* subtracted per occurrence in the window (0: off) */
};
NB_API struct nb_sampler_params nb_sampler_default_params(void);

/* A sampler holds one sequence's sampling state (its history for the penalties, its random
 * generator). Lifetime and threads: the caller owns it (nb_sampler_free); one per
 * sequence, used by one thread at a time; it refers to no model or context and may
 * outlive them; a grammar set on it (nb_sampler_set_grammar) must live until the sampler
 * is freed or given another grammar. */
struct nb_sampler;
NB_API enum nb_status nb_sampler_init(struct nb_sampler **out, const struct nb_sampler_params *p,
                               int n_vocab);
NB_API void nb_sampler_free(struct nb_sampler *s);
/* Add bias[i] to the logit of token ids[i] before every draw, first in the chain (OpenAI's
 * and llama.cpp's logit_bias; -INFINITY bans a token). Replaces the biases set before;
 * n 0: none. NB_ERR_INVALID_ARG naming an id outside the vocabulary or a NaN or +inf bias. */
NB_API enum nb_status nb_sampler_set_logit_bias(struct nb_sampler *s, const int32_t *ids,
                                                const float *bias, int n);
/* Tell the sampler about a token in the history (prompt or generated). */
NB_API void nb_sampler_accept(struct nb_sampler *s, int32_t token);
/* Choose the next token from `logits` (n_vocab floats; may be modified). With a grammar
 * (nb_sampler_set_grammar) the token is one the grammar allows next, and the grammar's
 * state advances by it (nb_sampler_accept does not: it only keeps the penalties'
 * history); -1 when no token of the vocabulary continues the output. */
NB_API int32_t nb_sampler_sample(struct nb_sampler *s, float *logits);

/* ---------------------------------------------------------------- constrained output
 * A grammar the output keeps to, made for one vocabulary: one JSON object that keeps
 * to a JSON Schema — the subset docs/serve.md ("JSON schemas") lists (type, properties, required,
 * items, min/maxItems, enum, const, anyOf/oneOf of distinct types, local $ref); `{}` is
 * any JSON object — or a grammar in GBNF, llama.cpp's notation (docs/grammar.md). Lifetime and threads: the caller owns a grammar (nb_grammar_free); it
 * copies what it needs of the tokenizer, which may be freed once it is made. It is
 * read-only once made: any number of samplers, on any threads, may use it at once; it
 * must outlive them. */
struct nb_grammar;
struct nb_tokenizer;
/* Compile `schema` (len bytes of JSON text) for a tokenizer and the model's n_vocab (the
 * logits' length; ids past the tokenizer's are never drawn). NB_ERR_FORMAT when it is
 * not JSON, NB_ERR_UNSUPPORTED naming the keyword outside the subset or a root that
 * allows no object, NB_ERR_NOMEM. */
NB_API enum nb_status nb_grammar_from_json_schema(struct nb_grammar **out,
                                                  const struct nb_tokenizer *tok, int n_vocab,
                                                  const char *schema, size_t len);
/* Compile len bytes of GBNF text (rules `name ::= ...`; the output is one `root`) for a
 * tokenizer and n_vocab. NB_ERR_FORMAT naming the line and column of a syntax error, a
 * rule used but not defined, no root, or a left-recursive rule; NB_ERR_UNSUPPORTED past
 * the limits (docs/grammar.md); NB_ERR_NOMEM. */
NB_API enum nb_status nb_grammar_from_gbnf(struct nb_grammar **out, const struct nb_tokenizer *tok,
                                           int n_vocab, const char *text, size_t len);
NB_API void nb_grammar_free(struct nb_grammar *g);
/* Keep the sampler's draws to g from now on, from the start of the output (NULL: free
 * again). End-of-generation tokens are allowed only once the output is complete (a JSON
 * object: then only they are; a GBNF grammar: with what else its rules allow to follow). NB_ERR_INVALID_ARG when g was made for another n_vocab. */
NB_API enum nb_status nb_sampler_set_grammar(struct nb_sampler *s, const struct nb_grammar *g);
/* Tokens the output may still take, the next draw included (< 0: no limit): a token is
 * drawn only if the output can still be completed in the rest, so a limit ends in a
 * complete output, not a cut one. nb_sequence_generate sets it from n_predict before
 * each draw. */
NB_API void nb_sampler_set_budget(struct nb_sampler *s, int n_tokens);
/* 1 when the sampler has a grammar and the output drawn so far completes it. */
NB_API int nb_sampler_grammar_complete(const struct nb_sampler *s);

/* ---------------------------------------------------------------- generation */

/* Why a generation stopped. */
enum nb_stopped_by {
    NB_STOPPED_LENGTH = 0,   /* n_predict tokens */
    NB_STOPPED_EOG = 1,      /* an end-of-generation token */
    NB_STOPPED_CALLBACK = 2, /* the token callback returned non-zero */
    NB_STOPPED_CONTEXT = 3,  /* the context is full (the last token passed to cb is not in it) */
};

struct nb_gen_stats {
    int n_prompt, n_gen;
    int n_decode;      /* one-token forward steps run (n_gen - 1 when stopped by length) */
    double t_prompt_s; /* prefill wall time */
    double t_gen_s;    /* wall time of sampling and the n_decode steps */
    enum nb_stopped_by stopped_by;
    int n_drafted;     /* nb_generate_lookup: draft tokens verified, and those accepted */
    int n_accepted;
    /* context shifts of this call (nb_sequence with shift): how many, the tokens dropped
     * and those run again, and their time (not in t_gen_s) */
    int n_shifts, n_dropped, n_rerun;
    double t_shift_s;
};

/* Called for each generated token; return non-zero to stop. */
typedef int (*nb_token_cb)(int32_t token, void *user);

/* Prefill `prompt` into sequence `seq` (appending to what it holds), then sample up
 * to n_predict tokens, calling cb for each. Stops at the model's end-of-sequence
 * token when stop_on_eos (that token is not passed to cb). */
NB_API enum nb_status nb_generate(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                           const int32_t *prompt, int n_prompt, int n_predict, int stop_on_eos,
                           nb_token_cb cb, void *user, struct nb_gen_stats *stats);

/* Prompt lookup: the longest suffix of hist[0, n) of ngram_max down to ngram_min tokens
 * that also occurs earlier in hist; the tokens that followed its latest earlier
 * occurrence, up to max_draft, are written to draft. Returns how many (0: no match). */
NB_API int nb_lookup_draft(const int32_t *hist, int n, int ngram_min, int ngram_max,
                           int max_draft, int32_t *draft);

/* nb_generate with prompt-lookup speculative decoding: each step runs the last token
 * and up to max_draft tokens nb_lookup_draft copies from the text so far (prompt and
 * output, n-grams of 4 down to 2), verified in one batched step (nb_decode_verify); the
 * sampler draws at each position in turn and the drafts after its first disagreement
 * are dropped from the cache. A draw consumes the sampler exactly as nb_generate's
 * would, so with logits that do not depend on the batch (nb_decode_verify) the output
 * is nb_generate's, greedy or sampled. max_draft 0: nb_generate. The sequence holds
 * what nb_generate would leave in it. */
NB_API enum nb_status nb_generate_lookup(struct nb_ctx *ctx, int seq, struct nb_sampler *sampler,
                                         const int32_t *prompt, int n_prompt, int n_predict,
                                         int stop_on_eos, int max_draft, nb_token_cb cb,
                                         void *user, struct nb_gen_stats *stats);

/* ---------------------------------------------------------------- sequences
 * One generated sequence of a context, across calls (chat turns): the one generation loop
 * of the library (nb_generate and nb_generate_lookup are one-call forms of it). It keeps
 * every token run into it (never shifted), the view its cache holds, and with `shift`,
 * when the next tokens do not fit n_ctx, keeps the first n_keep tokens, drops the oldest
 * half of the rest and runs the newest again (llama.cpp's context shift). With max_draft,
 * each step also runs up to that many prompt-lookup drafts, verified (nb_generate_lookup):
 * the output is the same as without, shifts included. Lifetime and threads: the caller
 * owns it (nb_sequence_free); the context must outlive it; it keeps no sampler (each call
 * is given one). It shares its context's rule: one thread at a time on the context and
 * all its sequences. */
struct nb_sequence_params {
    size_t size;   /* from nb_sequence_default_params() */
    int seq;       /* the context's sequence (0) */
    int n_ctx;     /* tokens the sequence may hold (needed for shift; 0: until decode says
                      the context is full) */
    int shift;     /* 1: shift when full (the sequence is cleared at init); 0: a full context
                      stops generation (NB_STOPPED_CONTEXT) */
    int n_keep;    /* tokens at the start a shift keeps (< 0: 0) */
    int max_draft; /* prompt-lookup drafts per step (0: off; at most 64) */
};
NB_API struct nb_sequence_params nb_sequence_default_params(void);
struct nb_sequence;
NB_API enum nb_status nb_sequence_init(struct nb_sequence **out, struct nb_ctx *ctx,
                                       const struct nb_sequence_params *params);
NB_API void nb_sequence_free(struct nb_sequence *s);
/* Run `prompt` after what the sequence holds (shifting first when it does not fit), then
 * sample up to n_predict tokens (< 0: no limit), calling cb for each (non-zero: stop).
 * Stops at the model's end-of-sequence token when stop_on_eos (not passed to cb). The
 * last token passed to cb is not in the cache yet (the next call runs it first).
 * NB_ERR_RANGE naming the numbers when the prompt cannot fit (beside the kept tokens).
 * stats may be NULL. */
NB_API enum nb_status nb_sequence_generate(struct nb_sequence *s, struct nb_sampler *sampler,
                                           const int32_t *prompt, int n_prompt, int n_predict,
                                           int stop_on_eos, nb_token_cb cb, void *user,
                                           struct nb_gen_stats *stats);
/* Every token given to or generated by the sequence, in order (valid until the next call). */
NB_API const int32_t *nb_sequence_ids(const struct nb_sequence *s, int *n);
/* Tokens its cache holds now. */
NB_API int nb_sequence_cached(const struct nb_sequence *s);
/* Tokens of nb_sequence_ids that have not run yet (the last generated one waits for the
 * next call, which runs it first). */
NB_API int nb_sequence_pending(const struct nb_sequence *s);
/* Forget all but the first n tokens (a chat turn rendered differently from there on); the
 * cache keeps what it holds of them. NB_ERR_INVALID_ARG when n is out of range. */
NB_API enum nb_status nb_sequence_rewind(struct nb_sequence *s, int n);
/* The shifts so far, all calls together. */
struct nb_sequence_shifts {
    int n_shifts;
    int n_dropped, n_rerun;
};
NB_API void nb_sequence_shifts(const struct nb_sequence *s, struct nb_sequence_shifts *out);

/* ---------------------------------------------------------------- kernels */

/* Before the first model runs: cap the kernel level ("ref", "avx2", "avx512"; NULL or
 * "auto": the best this CPU has) and what AMX may run: 0 nothing, 1 the w4a8 kernel and,
 * on AMX-BF16 CPUs, the w4a16 prefill kernel (the default), 2 also the tile kernels not
 * shown to pay in situ: the GGUF block formats' (the CLI passes NIBBLE_ISA and NIBBLE_AMX:
 * 0, 1, all). Each is installed only after its first-use self-check. NB_ERR_INVALID_ARG for an
 * unknown level or a call after the kernels were chosen. */
NB_API enum nb_status nb_set_isa(const char *isa, int allow_amx);
/* Before a model is opened: how the weights of a .nib (a file, or a warm-start cache
 * entry) are held while they run. 1 (the default): read into anonymous memory on
 * transparent huge pages where Linux enables them (THP "always" or "madvise") and the file
 * has at least 64 MiB and at most half of MemAvailable (a larger one stays mapped). A decode step streams every weight, and on the 4 KiB pages of a
 * file mapping that is a TLB miss every 4 KiB, whose cost depends on where the page cache
 * put the file: Qwen3-1.7B balanced on a 2-core Xeon VM decoded 10.9-14.3 tok/s mapped
 * (1 thread) by placement, 14.4-14.8 in huge pages (docs/benchmarks.md). The weights then
 * count in RssAnon. 0: run them from the file's mapping (the page cache), as llama.cpp
 * does by default (the CLI: NIBBLE_MMAP=1). 2: always copied, whatever the size or THP
 * (for tests). */
NB_API void nb_set_weight_copy(int on);
/* 1 when the model's weights run from such a copy in huge pages, 0 when from the file's
 * mapping or memory of their own (a GGUF repacked or quantized at load). */
NB_API int nb_model_weights_copied(const struct nb_model *model);
/* The kernel level in use ("avx512vnni", "avx2", "ref", ...); chooses it if not yet. */
NB_API const char *nb_isa(void);

/* ---------------------------------------------------------------- tokenizer */

struct nb_tokenizer;

/* The tokenizer of a model: `path` as given to nb_model_load (a GGUF's metadata, a
 * model directory's tokenizer.json / tokenizer.model, a llama2.c checkpoint's
 * tokenizer, a .nib's embedded copy), or a tokenizer file itself (tokenizer.json,
 * tokenizer.model, a llama2.c tokenizer .bin). Lifetime and threads: the caller owns it
 * (nb_tokenizer_free); it must outlive the detokenizers, text outputs and servers made
 * with it (a grammar copies what it needs). It is immutable once loaded: any number of
 * threads may use it at once. */
NB_API enum nb_status nb_tokenizer_load(struct nb_tokenizer **out, const char *path);
/* The tokenizer of a loaded model, read from the file the model was loaded from (a .nib
 * or cache entry: its embedded copy), which is not opened or parsed again. The
 * tokenizer does not keep the model: free each on its own. */
NB_API enum nb_status nb_tokenizer_from_model(struct nb_tokenizer **out,
                                              const struct nb_model *model);
NB_API void nb_tokenizer_free(struct nb_tokenizer *tok);

struct nb_tokenizer_info {
    size_t size;
    int n_vocab;
    int bos_id, eos_id, eot_id; /* -1 when the tokenizer has none (eot: <|im_end|>, ...) */
    int adds_bos;               /* nb_tokenize with add_special puts BOS first */
    const char *desc;           /* "spm (gguf)", "bpe-byte-level (tokenizer.json)", ... */
    const char *chat_template;  /* the template's Jinja source, or NULL */
};
/* Pointers stay valid until nb_tokenizer_free. */
NB_API void nb_tokenizer_get_info(const struct nb_tokenizer *tok, struct nb_tokenizer_info *info);

/* Text -> ids, as llama.cpp's llama_tokenize: `len` bytes of `text` (any bytes: invalid
 * UTF-8 reads as U+FFFD) into ids[0..n_max). add_special: BOS (and EOS) as the
 * tokenizer's config says; parse_special: special-token text ("<|im_start|>") becomes
 * its id (0 for untrusted text). *n_ids gets the count; when it exceeds n_max the
 * call returns NB_ERR_RANGE, writes nothing, and *n_ids is the size needed. */
NB_API enum nb_status nb_tokenize_text(const struct nb_tokenizer *tok, const char *text,
                                       size_t len, int add_special, int parse_special,
                                       int32_t *ids, int n_max, int *n_ids);
/* Ids -> text (valid UTF-8, NUL-terminated) into buf[0..size). Special tokens are
 * left out unless `special`. *len gets the text's length; NB_ERR_RANGE when
 * *len + 1 > size (then *len is the length, without the NUL, and buf is untouched).
 * NB_ERR_INVALID_ARG for an id outside the vocabulary. */
NB_API enum nb_status nb_detokenize_text(const struct nb_tokenizer *tok, const int32_t *ids,
                                         int n_ids, int special, char *buf, size_t size,
                                         size_t *len);
/* The bytes token `id` decodes to on its own (a byte token is its raw byte, which may be
 * part of a UTF-8 character; '▁' / byte-level marks are spaces), as llama.cpp's
 * llama_token_to_piece; the same buffer contract as nb_detokenize_text. */
NB_API enum nb_status nb_token_to_piece(const struct nb_tokenizer *tok, int32_t id, char *buf,
                                        size_t size, size_t *len);
/* The vocabulary entry of `id` as stored ("▁the", "Ġthe", "<0x0A>"), or NULL for an id
 * outside the vocabulary. Valid until nb_tokenizer_free. */
NB_API const char *nb_token_vocab_entry(const struct nb_tokenizer *tok, int32_t id);
/* End of generation (EOS, EOT or another end-of-turn token): 1, else 0. */
NB_API int nb_tokenizer_is_eog(const struct nb_tokenizer *tok, int32_t id);
/* A special (control) token, left out of decoded text by default: 1, else 0. */
NB_API int nb_tokenizer_is_special(const struct nb_tokenizer *tok, int32_t id);

/* A streaming detokenizer: feed generated ids one at a time, get back complete UTF-8
 * only (bytes of a character split over tokens are held until it is whole). Lifetime and
 * threads: the caller owns it (nb_detokenizer_free); the tokenizer must outlive it; one
 * per sequence, used by one thread at a time. */
struct nb_detokenizer;
NB_API enum nb_status nb_detokenizer_init(struct nb_detokenizer **out,
                                          const struct nb_tokenizer *tok, int special);
/* *text (valid until the next call) gets the text now complete, *len its length. */
NB_API enum nb_status nb_detokenizer_feed(struct nb_detokenizer *d, int32_t id,
                                          const char **text, size_t *len);
/* End of stream: what is held, an incomplete character as U+FFFD. */
NB_API enum nb_status nb_detokenizer_flush(struct nb_detokenizer *d, const char **text,
                                           size_t *len);
NB_API void nb_detokenizer_free(struct nb_detokenizer *d);

/* Stop strings: text is held back while it may be the start of one, so a caller that
 * prints only what the matcher releases never prints a stop string or part of it.
 * Lifetime and threads: the caller owns it (nb_stop_matcher_free); it refers to nothing
 * else (the strings are copied); one per sequence, used by one thread at a time. */
struct nb_stop_matcher;
/* Copies the strings; empty ones are ignored. */
NB_API enum nb_status nb_stop_matcher_init(struct nb_stop_matcher **out,
                                           const char *const *stops, int n_stops);
/* Add generated text; *emit / *n_emit: text safe to print now. 1 when a stop string
 * was found (the text before it released, the rest dropped), else 0. */
NB_API int nb_stop_matcher_feed(struct nb_stop_matcher *m, const char *text, size_t len,
                                const char **emit, size_t *n_emit);
/* End of generation without a stop: the held-back text. */
NB_API void nb_stop_matcher_flush(struct nb_stop_matcher *m, const char **emit, size_t *n_emit);
NB_API void nb_stop_matcher_free(struct nb_stop_matcher *m);

/* The token -> text step of one generated sequence, as run, chat and serve take it: an
 * end-of-generation id ends it, every other id goes through the streaming detokenizer
 * and the stop strings, and only text that can no longer become part of a stop string
 * is released. Lifetime and threads: the caller owns it (nb_text_out_free); the
 * tokenizer must outlive it (the stop strings are copied); one per sequence, used by one
 * thread at a time. */
struct nb_text_out;
struct nb_text_out_params {
    size_t size;              /* from nb_text_out_default_params() */
    int special;              /* 1: special tokens' text is output (a tool-call wrapper) */
    int ignore_eog;           /* 1: end-of-generation ids are text like any other */
    const char *const *stops; /* stop strings (copied; empty ones ignored) */
    int n_stops;
};
enum nb_text_event {
    NB_TEXT_ERROR = -1, /* the detokenizer failed: nb_last_error() */
    NB_TEXT_MORE = 0,   /* text (maybe none) released; generation goes on */
    NB_TEXT_EOG = 1,    /* an end-of-generation id: nothing added, the sequence ends */
    NB_TEXT_STOP = 2,   /* a stop string: the text before it released, the sequence ends */
};
/* No stop strings, no special text, end-of-generation ids end the sequence. */
NB_API struct nb_text_out_params nb_text_out_default_params(void);
/* p NULL: the defaults; else only p->size bytes are read. */
NB_API enum nb_status nb_text_out_init(struct nb_text_out **out, const struct nb_tokenizer *tok,
                                       const struct nb_text_out_params *p);
/* One generated id: *text / *len the text released now (valid until the next call). */
NB_API enum nb_text_event nb_text_out_feed(struct nb_text_out *o, int32_t id, const char **text,
                                           size_t *len);
/* The sequence ended (a length limit, an end-of-generation id): what is still held (an
 * incomplete character as U+FFFD; a stop string completed by it is cut, as in feed).
 * Nothing after NB_TEXT_STOP. Valid until the next call. */
NB_API void nb_text_out_flush(struct nb_text_out *o, const char **text, size_t *len);
NB_API void nb_text_out_free(struct nb_text_out *o);

/* ---------------------------------------------------------------- chat templates */

struct nb_chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
};

/* The template a conversation would be rendered with: `name` ("chatml", "qwen3",
 * "llama3", "llama2", "gemma"), or NULL for the tokenizer's own, recognised from its
 * Jinja source. *kind gets the name of the template. NB_ERR_NOT_FOUND when name is
 * NULL and the tokenizer has no template; NB_ERR_UNSUPPORTED for one nibble does not
 * know (the message quotes its start); NB_ERR_INVALID_ARG for an unknown name. */
NB_API enum nb_status nb_chat_template_resolve(const struct nb_tokenizer *tok, const char *name,
                                               const char **kind);
/* The built-in family nibble chat and nibble serve render with when the model's own
 * Jinja template does not run (one rule for both): `name` when given (NB_ERR_INVALID_ARG
 * when unknown), else the one the tokenizer's template is recognised as, else ChatML;
 * then *note (may be NULL) is the sentence to say once ("no chat template in the model:
 * using ChatML; --chat-template NAME picks another"), NULL otherwise. *kind as for
 * nb_chat_template_resolve. */
NB_API enum nb_status nb_chat_template_choose(const struct nb_tokenizer *tok, const char *name,
                                              const char **kind, const char **note);
/* Render messages as that template does (the Jinja rendering of the model's own
 * template), with the assistant header appended when add_assistant; the tokenizer
 * (may be NULL when `name` is given) supplies the bos/eos texts. The text goes to
 * buf[0..size) with the contract of nb_detokenize_text (NB_ERR_RANGE: *len is the
 * size needed). A conversation the template refuses (roles not alternating) is
 * NB_ERR_INVALID_ARG. Tokenize the result with add_special 0, parse_special 1. */
NB_API enum nb_status nb_chat_apply(const struct nb_tokenizer *tok, const char *name,
                                    const struct nb_chat_msg *msgs, int n_msgs,
                                    int add_assistant, char *buf, size_t size, size_t *len);
/* Render a chat template's own Jinja source (docs/chat-templates.md): `source`, or the
 * tokenizer's template when source is NULL (NB_ERR_NOT_FOUND if it has none), over
 * `context_json`, a JSON object whose members are the template's variables (messages,
 * tools, add_generation_prompt, ...; NULL: {}). Members it leaves out: bos_token and
 * eos_token are the tokenizer's (tok may be NULL: then ""), add_generation_prompt is
 * true. The text goes to buf[0..size) with the contract of nb_detokenize_text
 * (NB_ERR_RANGE: *len is the size needed). A template that does not parse is
 * NB_ERR_FORMAT / NB_ERR_UNSUPPORTED (the message names the line), bad context JSON
 * NB_ERR_INVALID_ARG, raise_exception() in the template NB_ERR_INVALID_ARG with its
 * message, a render past the step, depth or size limits NB_ERR_RANGE. */
NB_API enum nb_status nb_chat_template_render_json(const struct nb_tokenizer *tok,
                                                   const char *source, const char *context_json,
                                                   char *buf, size_t size, size_t *len);

/* ---------------------------------------------------------------- probe and selector
 * Which weight path runs best here: the CPU probe, the priority and the measurement
 * records (docs/selector.md). Weight paths are named by strings everywhere: "w4a8",
 * "w4a16", "w8a16", "bf16", "f32". */

struct nb_select_params {
    size_t size;
    const char *priority;   /* "balanced" | "speed" | "fidelity" | "memory"; NULL:
                               balanced, not given */
    const char *target;     /* "host" | "phone" | "arm" (an Arm CPU: docs/arm.md); NULL: host */
    const char *path;       /* a weight-path name that replaces the choice (NULL, "auto":
                               none; the CLI's NIBBLE_WEIGHT_PATH) */
    const char *path_from;  /* who named `path`, quoted in reasons and errors */
    const char *records_dir; /* more measurement records (*.json) besides the built-in */
    int measure_bw;         /* also measure the read bandwidth (about a second) */
};
NB_API struct nb_select_params nb_select_default_params(void);

/* What this machine is (plain data). */
struct nb_probe_info {
    size_t size;
    char arch[16];           /* "x86_64", "aarch64" */
    char vendor[16];         /* "GenuineIntel", or the Arm implementer ("0x41") */
    int family, model;       /* x86 family / model; Arm: -1 / part number */
    char cpu_name[128];
    char family_key[64];     /* "x86:<vendor>:<family>": coarse, for people (not matched) */
    char features[512];      /* usable features, space-separated ("avx2 fma ...") */
    char cpuid_features[512]; /* what CPUID reports whatever the OS enables (x86) */
    uint64_t xcr0;           /* x86: state components the OS enabled */
    int amx_permitted;       /* 1 / 0: Linux granted / refused AMX tile data; -1: n/a */
    int n_logical, n_physical;
    int64_t l1d_bytes, l2_bytes, l3_bytes, mem_total_bytes; /* 0: unknown */
    double read_bw_gbs;      /* 0: not measured */
    int bw_threads;
    char json[4096];         /* all of the above as one JSON object (`nibble probe --json`) */
    char cpu_key[64];        /* "x86:GenuineIntel:6:207", "arm:0x41:0xd0b": the CPU part of
                                the record keys measurement records are matched by ("": none) */
};

#define NB_SELECTION_MAX_REASONS 12
/* The selector's decision. */
struct nb_selection {
    size_t size;
    char weight_path[16];
    char kernel[64];        /* "avx512vnni", "amx (not built: avx512vnni)" */
    char kernel_run[32];    /* the kernel this build runs for it ("ref": scalar) */
    int head_bits;          /* output head: 4 or 8 */
    double bits_per_weight; /* of the linear layers, from the layout */
    int runs_locally;       /* nibble runs this path on this device */
    int verified;           /* a measurement record with this choice's record_key */
    char verified_by[128];  /* that record's file ("" when unverified) */
    char priority[16];      /* "speed", ... as used */
    int priority_given;
    char target[16];        /* "host" | "phone" | "arm" */
    int n_records;          /* measurement records read */
    int n_reasons;          /* each cites its record */
    char reasons[NB_SELECTION_MAX_REASONS][400];
    char recipe[16];        /* bits per matrix ("balanced", ...: nb_quantize_params.recipe) */
    int gptq;               /* a float model is quantized with GPTQ on a calibration text
                               (nb_open_params.calib_path) */
    char record_key[160];   /* what a record must say to verify this choice on this CPU:
                               "<cpu key>/<path>/<kernel>/<features>" (docs/selector.md);
                               "" for the phone target or a CPU without a key */
};

/* Probe this machine and choose its weight path. probe and sel may be NULL (not
 * wanted). NB_ERR_INVALID_ARG names a bad priority, target or path. */
NB_API enum nb_status nb_select_weight_path(const struct nb_select_params *params,
                                            struct nb_probe_info *probe,
                                            struct nb_selection *sel);

/* ---------------------------------------------------------------- open (as `nibble run`) */

struct nb_open_params {
    size_t size;
    const char *path;        /* "auto" (NULL): the selector's choice; "source": the weights
                                as stored; or a weight path. A .nib is used as it is. */
    int n_threads;           /* for quantizing (0: all cores) */
    int use_cache;           /* 1 (default): find or write the quantized model in cache_dir */
    const char *cache_dir;   /* the warm-start cache; default: the CLI's, nb_cache_default_dir
                                of $XDG_CACHE_HOME and $HOME (NULL when neither is set);
                                NULL: none, quantize into memory */
    int layout_rows;         /* int4 matrices row-major instead of X16 (to compare) */
    int64_t repack_rows;     /* rows per repack step (0: whole matrices; for timing) */
    nb_progress_fn progress; /* during a first-use quantization; may be NULL */
    void *user;
    /* the calibration text GPTQ uses when the choice asks for it (selection.gptq); default:
     * nb_calib_default_path(), the text installed with nibble, as the CLI's (which a
     * NIBBLE_CALIB in its environment replaces); NULL: none, so the choice's recipe is
     * quantized without GPTQ. */
    const char *calib_path;
    /* for "auto" (measure_bw is ignored). Versioned, so it stays the last member. */
    struct nb_select_params select;
};
/* use_cache 1, the cache folder and calibration text below, "auto" as the selector's
 * defaults: with them nb_model_open builds and caches the bytes `nibble run` does (when
 * the CLI's NIBBLE_* variables are unset). The folder and text are found at the first
 * call (of this or nb_calib_default_path) and kept for the process; their strings stay
 * valid for it. */
NB_API struct nb_open_params nb_open_default_params(void);
/* The calibration text installed with nibble, share/nibble/calib.txt (from
 * data/calib/kjv-7m-calib.txt) of the tree the library runs from: beside it in a build
 * folder, or in the install prefix of its lib/, lib/<multiarch>/ or bin/ (libnibble.so's
 * folder, or that of the program the static library is linked into). The resolved path,
 * or NULL when there is none. */
NB_API const char *nb_calib_default_path(void);

/* What nb_model_open did. The choice (weight_path, selected, selection) is filled
 * before the first progress call, so a progress callback may print it. */
struct nb_open_report {
    size_t size;
    char loaded[4096];     /* what runs: the model, the cache entry or "(in memory)" */
    char weight_path[16];  /* the path quantized to ("" when run as stored) */
    int selected;          /* "auto" chose it: `selection` holds the decision */
    int path_ignored;      /* the model is already packed: the path asked for was ignored */
    int as_stored;         /* the weights run as stored (source, a .nib, or a fallback) */
    int fell_back;         /* auto: the model does not fit the chosen path (`why` says
                              how) and runs as stored */
    int quantized;         /* quantized now (a cache miss, a rebuild or in memory) */
    double quantize_s;     /* how long that took */
    char cache_event[32];  /* "hit", "miss", "stale", "corrupt", "memory"; "": no quantized form */
    int cache_waited;      /* another process was writing the entry: waited for it */
    int cache_off;         /* no cache was used because use_cache is 0 or cache_dir NULL */
    char why[8192];        /* stale / corrupt / memory / fell_back: why, in a sentence */
    int repacked;          /* a GGUF file's k-quant blocks were shuffled, losslessly, into the
                              integer kernels' records (as_stored is 1: the file's weights) */
    double repack_s;       /* how long that took */
    char route[256];       /* auto on a quantized GGUF: why it runs as stored, in a sentence */
    struct nb_selection selection; /* versioned, so it stays the last member */
};

/* Load `model` as `nibble run` does: resolve the path, quantize a float source once
 * into the cache (or memory), map the result. params NULL: nb_open_default_params().
 * report may be NULL. Errors: a bad path
 * or priority name (NB_ERR_INVALID_ARG), a missing or malformed model. */
NB_API enum nb_status nb_model_open(struct nb_model **out, const char *model,
                                    const struct nb_open_params *params,
                                    struct nb_open_report *report);

/* ---------------------------------------------------------------- quantize */

struct nb_quantize_params {
    size_t size;
    const char *path;      /* a weight path, or "auto" (NULL): the choice nb_model_open
                              makes for the model (nb_select_weight_path with `select`: path,
                              recipe, head width, GPTQ on calib_path when it asks for it),
                              so both calls build the same bytes */
    int group;             /* int4 group along K: 32, 64, 128 (default 128) */
    int head_bits;         /* output head: 4, 6 (Q6_K), 8 (Q8_0 on the int4 paths) or 16;
                              0: default (8) */
    int embd_bits;         /* embeddings: 4, 6 (Q6_K), 8 or 16; 0: the recipe's (8 without one) */
    int search;            /* 1: MSE scale search (default), 0: absmax scales */
    const char *calib_path; /* text whose activations weight the error, or NULL */
    int n_threads;         /* 0: all cores */
    int layout_rows;       /* int4 matrices row-major instead of X16 */
    int64_t repack_rows;   /* rows per repack step (0: whole matrices) */
    nb_progress_fn progress; /* after each tensor; may be NULL */
    /* once per tensor: name, kind ("w4a8", "f32", ...), shape, stored bytes and the
     * relative RMS error (0: not measured); may be NULL */
    void (*report)(const char *name, const char *kind, int64_t n_out, int64_t n_in,
                   uint64_t bytes, double rel_rms, void *user);
    void *user;
    int calib_tokens;      /* use at most this many tokens of calib_path (0: all) */
    /* GPTQ on every int4 matrix (needs calib_path), layer by layer on the outputs of the
     * layers before it as quantized; static groups, so the file reads like any other */
    int gptq;
    int act_order;         /* GPTQ sweeps columns by descending activation energy */
    double gptq_damp;      /* GPTQ dampening, a fraction of mean diag H (0: 0.01) */
    /* int4 paths: how many bits each matrix gets. A named recipe: "speed" (all 4-bit,
     * head and embeddings too), "balanced" (the layers 4-bit, head and embeddings 6-bit
     * Q6_K blocks, one copy when the head is tied), "fidelity" (v, down, head and
     * embeddings at 8), "uniform" (NULL: the layers at 4, head and embeddings at 8);
     * widths 4, 6 (Q6_K), 8 (Q8_0 blocks on a GEMM, int8 rows for the embeddings), 16;
     * head_bits / embd_bits override its head and embeddings. Or, with bpw > 0, a
     * budget in bits per weight over the model's tensors: the largest ladder recipe
     * (q3..q8) within it, then 6- and 8-bit steps for the matrices whose measured error
     * drops most per byte, while the tensors stay within bpw (no recipe, head_bits or
     * embd_bits then; below q3: NB_ERR_INVALID_ARG). */
    const char *recipe;
    double bpw;
    /* int4 paths: widths per matrix class over the recipe, "v=8,down=6,head=6" (classes
     * q, k, v, o, gate, up, down, head, embd; widths 4, 6, 8, 16), as llama-quantize's
     * --tensor-type; NULL: none. Not with bpw. */
    const char *bits;
    /* for "auto" (measure_bw is ignored); recipe, bpw and head_bits given above stay over
     * the choice's. Versioned, so it stays the last member. */
    struct nb_select_params select;
};
NB_API struct nb_quantize_params nb_quantize_default_params(void);

struct nb_quantize_stats {
    size_t size;
    uint64_t linear_bytes; /* stored bytes of the linear weights (head included) */
    int64_t linear_params;
    uint64_t file_bytes;
    int64_t file_params;   /* every parameter stored */
    double bpw_linear, bpw_file; /* bits per weight from the bytes actually stored */
    double seconds;
    char recipe[32];          /* the recipe's name (int4 paths; else "") */
    char recipe_table[2048];  /* its bits per class, one line each */
    char weight_path[16];     /* the path quantized to */
    int selected;             /* "auto" chose it: `selection` holds the decision */
    struct nb_selection selection; /* versioned, so it stays the last member */
};

/* Quantize the float model at `src` into a new .nib at `dst` (written under a temporary
 * name and renamed). A dst that is the source, or inside a source folder, is refused.
 * stats may be NULL. */
NB_API enum nb_status nb_model_quantize(const char *src, const char *dst,
                                        const struct nb_quantize_params *params,
                                        struct nb_quantize_stats *stats);

/* ---------------------------------------------------------------- export
 * A model out of nibble, for other engines (`nibble export`): a Hugging Face GPTQ
 * checkpoint that vLLM, transformers and GPTQModel load (docs/interop.md, "GPTQ out").
 * Layouts, exactness rules and what goes out as float: runtime/export.c. */

struct nb_export_params {
    size_t size;
    const char *dtype;      /* float tensors (embeddings, norms, biases, float matrices):
                               "f16" (default, what GPTQ checkpoints carry), "bf16", "f32"
                               (f32 keeps nibble's values exactly) */
    int force;              /* replace an existing, non-empty output folder */
    /* a float source (GGUF, safetensors folder, llama2.c) is quantized first, in memory,
     * on the w4a8 grid with recipe speed (embeddings kept as bf16): */
    int group;              /* 32, 64 or 128 (default 128) */
    int head_bits;          /* 4 (default: the head goes out as GPTQ too) or 16 (float) */
    const char *calib_path; /* weight the scale search by this text's activations */
    int calib_tokens;       /* at most this many of its tokens (0: all) */
    int gptq;               /* GPTQ on the calibration text (needs calib_path) */
    int n_threads;          /* 0: all cores */
    nb_progress_fn progress; /* after each tensor written; may be NULL */
    void *user;
};
NB_API struct nb_export_params nb_export_default_params(void);

struct nb_export_stats {
    size_t size;
    uint64_t model_bytes;  /* model.safetensors */
    int group;             /* the checkpoint's group_size */
    int sym;               /* 1: symmetric (every GPTQ matrix from the w4a8 grid) */
    int lm_head;           /* 1: the output head went out as GPTQ */
    int n_gptq, n_float;   /* linear layers (head included) out as GPTQ / as float */
    int n_tokenizer_files; /* tokenizer and generation files written beside the model */
    char notes[4096];      /* one line per matrix that went out as float, and why; the
                              tokenizer when none could be written */
};

/* Write `model` (a .nib, or a float model quantized first as the params say) to the
 * folder out_dir as a GPTQ checkpoint: config.json with "quantization_config",
 * quantize_config.json, model.safetensors and the tokenizer files. The folder is
 * written beside out_dir under a temporary name and renamed; an existing non-empty
 * out_dir is refused (NB_ERR_INVALID_ARG) unless params->force. Refused by name:
 * an architecture vLLM has no class for (spark), a w4a16 matrix whose minimums are not
 * on GPTQ's grid (m = -d z, z integer in 1..15), a .nib without int4 matrices. stats
 * may be NULL. */
NB_API enum nb_status nb_export_gptq(const char *model, const char *out_dir,
                                     const struct nb_export_params *params,
                                     struct nb_export_stats *stats);

/* One tensor of a .nib decoded to f32 as nibble's reference kernels see it (matrices:
 * [n_out][n_in] row-major, the packed layout undone; vectors: [n]), written raw
 * (little-endian f32, no header) to out_path. shape (may be NULL) gets {n_out, n_in}
 * ({1, n} for a vector). NB_ERR_NOT_FOUND for a tensor the file does not have. */
NB_API enum nb_status nb_nib_dump_f32(const char *nib_path, const char *tensor,
                                      const char *out_path, int64_t shape[2]);

/* ---------------------------------------------------------------- warm-start cache */

/* The usual folder: xdg_cache_home/nibble when that is an absolute path, else
 * home/.cache/nibble (the CLI and nb_open_default_params pass $XDG_CACHE_HOME and $HOME). NB_ERR_NOT_FOUND
 * when neither is set. */
NB_API enum nb_status nb_cache_default_dir(const char *xdg_cache_home, const char *home,
                                           char *out, size_t size);
/* fn once per .nib in the folder: its file, size, weight path and source model (both
 * NULL when the entry does not parse: it would be rebuilt). A missing folder is empty. */
typedef void (*nb_cache_entry_cb)(const char *file, uint64_t bytes, const char *weight_path,
                                  const char *source, void *user);
NB_API enum nb_status nb_cache_entries(const char *dir, nb_cache_entry_cb fn, void *user);
/* Remove every entry no writer holds (those being written are counted in *n_busy);
 * programs that mapped an entry keep running. */
NB_API enum nb_status nb_cache_clear(const char *dir, int *n_removed, int *n_busy,
                                     uint64_t *bytes_freed);

/* ---------------------------------------------------------------- inspect
 * A view of model files, not of a loaded model (`nibble inspect`, like gguf-dump). */

/* Describe a .nib (header, tensors with kind, shape, group, layout, bytes, bits per
 * weight), a GGUF file (version, alignment, metadata, tensors with dtype, shape, bytes)
 * or safetensors (a file or a model folder: tensors; a GPTQ / AWQ folder also its
 * "quantization" as nibble reads it, or "quantization_error" naming what it refuses) as
 * one JSON object with "format" and "file" (= path). *json_out gets the printed JSON
 * (indented), freed with nb_free.
 * NB_ERR_UNSUPPORTED for a llama2.c checkpoint (nothing to see beyond its header). */
NB_API enum nb_status nb_inspect_json(const char *path, char **json_out);
/* Check every tensor checksum of a .nib; *n_tensors (may be NULL) gets their count. */
NB_API enum nb_status nb_nib_verify_file(const char *path, int64_t *n_tensors);
/* Free memory the library handed to the caller (nb_inspect_json's text). NULL is fine. */
NB_API void nb_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* NIBBLE_H */
