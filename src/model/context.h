/* model/context.h — what a context holds, and the small runner the forward pass calls.
 * Internal to model/: the public face is nibble.h's nb_ctx_* and nb_decode.
 *
 *   forward.c    the model: embed, layers, head — nothing but the maths and its order
 *   attention.c  RoPE, the KV-cache store, attention
 *   runner.c     ops on threads: GEMMs (one per weight format, from the kernel table),
 *                the int8 quantization of a GEMM input, row-wise ops; each op is
 *                timed here when profiling is on, so the maths has no profiler hooks
 *   context.c    the context's life: buffers, KV cache, sequences, nb_decode's checks
 *   kvcache.c    the paged KV cache: block pools, block tables, copy-on-write
 */
#ifndef NB_MODEL_CONTEXT_H
#define NB_MODEL_CONTEXT_H

#include <stdint.h>

#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "model/kvcache.h"
#include "model/model.h"

/* Ops as the profile names them (nb_ctx_profile_get). */
enum nb_op {
    NB_OP_EMBED, NB_OP_NORM, NB_OP_QKV, NB_OP_ROPE_KV, NB_OP_ATTN, NB_OP_HEAD_GATE, NB_OP_WO,
    NB_OP_FFN_UP, NB_OP_ACT, NB_OP_FFN_DOWN, NB_OP_OUTPUT, NB_OP_QACT, NB_OP_RESID, NB_OP_COUNT
};

struct nb_prof_slot {
    uint64_t wall_ns, t0_ns, calls; /* t0_ns: thread 0's compute time */
    int float_weights;              /* a GEMM of this op ran on float (unquantized) weights */
    int threads;                    /* threads it fanned out to (max seen) */
};

struct nb_ctx {
    const struct nb_model *model;
    const struct nb_kernels *kern;
    struct nb_pool *pool;
    int n_ctx, n_seq, n_batch, n_threads;

    struct nb_kv kv; /* the paged KV cache (kvcache.h); kv.len: tokens per sequence */

    /* Activations for one chunk of up to n_batch tokens. */
    float *x;     /* [n_batch][n_embd] residual stream */
    float *h;     /* [n_batch][n_embd] normed input of a block, then its output */
    float *q;     /* [n_batch][n_heads * head_dim] */
    float *k, *v; /* [n_batch][n_kv_heads * head_dim] */
    float *att;   /* [n_batch][n_heads * head_dim] */
    float *hg;    /* [n_batch][n_heads] head gate */
    float *ff_gate, *ff_up; /* [n_batch][n_ff] */
    float *rope_cs;         /* [n_batch][head_dim] cos, sin interleaved */
    float *scratch;         /* [n_threads][scratch_stride] */
    float *attn_part;       /* decode attention's partial results (attention.c) */
    size_t attn_part_cap;   /* floats; grown when a long context splits into more runs */
    int *attn_runs;         /* [n_batch] decode attention's runs of keys per token */
    int64_t *attn_first;    /* [n_batch + 1] each token's first (kv head, run) job */
    int *attn_seq_n;        /* [n_seq] a sequence's tokens in the batch (attention.c) */
    int64_t scratch_stride;

    /* The int8 form of one GEMM input (struct nb_input), for weights that read int8
     * activations (w4a8): per token, codes, a scale and a code sum per group. */
    int8_t *q8;      /* [n_batch][q8_ld] */
    float *q8_d;     /* [n_batch][q8_ld / 16] (a group's scale; up to one per 16) */
    int32_t *q8_sum; /* [n_batch][q8_ld / 16] (a group's code sum, or the k-quants' words) */
    int64_t q8_ld;   /* the widest GEMM input, rounded up to 256 */
    unsigned q8_epoch; /* bumped each time the buffers are written */

    nb_observer_fn observe; /* calibration, or NULL */
    void *observe_user;

    /* A GEMM of many tokens splits them over the threads too: parts of whole
     * gemm_token_unit tokens (runner.c, nb_gemm_token_parts). 0: the rows alone. */
    int gemm_token_unit;
#ifndef NB_GEMM_TOKEN_UNIT
#define NB_GEMM_TOKEN_UNIT 128
#endif

    int attn_per_token; /* every token's attention as a decode step's (nb_decode_verify) */
    int embed_rows; /* the output rows are the normed hidden states [E], not logits (nb_embed) */

    int profiling;
    struct nb_prof_slot prof[NB_OP_COUNT];
    int64_t prof_tokens; /* tokens run while profiling */
};

/* ---------------------------------------------------------------- runner.c */

/* Run fn(arg, ith, nth) for ith in [0, nth) (nth 1: on the calling thread), timed as
 * `op` when profiling. */
void nb_run_op(struct nb_ctx *c, enum nb_op op, nb_pool_fn fn, void *arg, int nth);
/* Threads for element-wise work on n rows of len elements: all of them for a big
 * batch (prefill), the calling thread alone for a decode step. */
int nb_rows_threads(const struct nb_ctx *c, int n, int64_t len);

/* A GEMM input: n rows of f32 and, once nb_input_quantize ran, their int8 form in the
 * context's q8 buffers (valid while c->q8_epoch == epoch). */
struct nb_input {
    const float *x;
    int64_t ldx;
    int n;
    int q8_group; /* group of the int8 form; 0: none */
    unsigned epoch;
};
struct nb_input nb_input(const float *x, int64_t ldx, int n);
/* The activation-quantization step: when w reads int8 activations (w4a8), quantize the
 * input per group of w's group size, unless it already is. One int8 form exists at a
 * time: quantizing another input makes older ones re-quantize on their next use. */
void nb_input_quantize(struct nb_ctx *c, struct nb_input *in, const struct nb_weight *w);
/* y[t][:] = W x[t] for the input's rows: the kernel of w's format, rows split over
 * the threads (one thread for a tiny projection: fanning it out costs more), and the
 * tokens too where nb_gemm_token_parts says so. */
void nb_matmul(struct nb_ctx *c, enum nb_op op, float *y, int64_t ldy, struct nb_input *in,
               const struct nb_weight *w);
/* How many parts nb_matmul splits n_tok tokens into on nth threads (1: the rows alone
 * are split); each part's threads split the rows. */
int nb_gemm_token_parts(const struct nb_ctx *c, int nth, int n_tok);
/* y[t] = rmsnorm(x[t]) * w for n rows of len (y may be x). */
void nb_rmsnorm_rows(struct nb_ctx *c, float *y, const float *x, const float *w, int n,
                     int64_t len);
/* gate[t] = act(gate[t]) * up[t] for n rows of n_ff: the gated MLP activation. */
void nb_glu_rows(struct nb_ctx *c, float *gate, const float *up, int n);
/* x[t] += d[t] for n rows of len: a residual add. */
void nb_add_rows(struct nb_ctx *c, float *x, const float *d, int n, int64_t len);

/* ---------------------------------------------------------------- attention.c */

/* cos/sin of every rotated pair for each token's position, into c->rope_cs. */
void nb_rope_tables(struct nb_ctx *c, const int32_t *pos, int n);
/* Per token of the chunk: q/k RMSNorm per head (Qwen3), RoPE on q and k, and k, v
 * stored in the cache slot of (seq[t], pos[t]). */
void nb_rope_store_kv(struct nb_ctx *c, int layer, int n, const int32_t *pos,
                      const int32_t *seq);
/* att[t] = softmax(q[t] K^T / sqrt(head_dim)) V over the keys of seq[t] at positions
 * <= pos[t] (and > pos[t] - window on a sliding layer). */
void nb_attention(struct nb_ctx *c, int layer, int n, const int32_t *pos, const int32_t *seq);

/* ---------------------------------------------------------------- forward.c */

/* Run the n tokens of one chunk (n <= n_batch); write the logits of the rows with
 * want[t] after the *n_out rows already in `logits`, and add their count to *n_out. */
void nb_forward_chunk(struct nb_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                      const int32_t *seq, const uint8_t *want, float *logits, int *n_out);

/* ---------------------------------------------------------------- embed.c */

/* nb_embed before its L2 normalization: the pooled hidden state itself (tests check it
 * against the head's logits). */
enum nb_status nb_embed_pooled(struct nb_ctx *c, int seq, const int32_t *tok, int n,
                               enum nb_pooling pooling, float *out);

#endif
