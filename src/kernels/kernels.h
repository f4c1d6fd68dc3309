/* kernels/kernels.h — the compute kernels, behind a dispatch table.
 *
 * Kernels take raw pointers and sizes: no allocation, no threads, no model
 * structs. Every kernel has a scalar `_ref` twin in kernels/ref/ that is the ground
 * truth for tests; fast variants (kernels/x86/, kernels/arm/) are picked once at
 * start-up from the CPU probe. nb_kernels_configure("ref", ...) (the CLI's NIBBLE_ISA=ref)
 * forces the reference kernels.
 */
#ifndef NB_KERNELS_H
#define NB_KERNELS_H

#include <stdint.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/wformat.h"

/* GEMM against a weight matrix W stored row-major as [n_out][n_in]:
 *     y[t * ldy + r] = sum_i x[t * ldx + i] * W[r][i]
 * for tokens t in [0, n_tok) and output rows r in [r0, r1). `scratch` holds at
 * least n_in floats (a converted weight row) for the f16/bf16 variants. */
typedef void (*nb_gemm_fn)(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                           int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);

/* GEMMs against packed quantized weights (core/wformat.h, NB_LAYOUT_ROWS). The
 * blob's plane offsets come from nb_layout_planes(path, group, n_out, n_in), hence
 * n_out in the signatures; rows r in [r0, r1) are computed, as above.
 *
 * w4a8: activations are int8 per token-group (nb_act_quant_q8_*):
 *     xq  [n_tok][ldxq bytes]  int8 codes, group g of token t at xq + t*ldxq + g*G
 *     xd  [n_tok][ldxg]        f32 scale per group
 *     xsum[n_tok][ldxg]        sum of the group's codes (the zero-point term)
 *   y[t][r] = sum_g dw[r][g] * xd[t][g] * (sum_k qw*qa - 8 * xsum[t][g])
 * with the inner sums in int32.
 * w4a16 / w8a16: f32 activations; `scratch` holds n_in floats (one decoded row). */
typedef void (*nb_gemm_w4a8_fn)(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                                int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                                int64_t r1);
typedef void (*nb_gemm_w4a16_fn)(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1, float *scratch);
typedef void (*nb_gemm_w8a16_fn)(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1, float *scratch);
/* Quantize n activations (n a multiple of group) to int8 per group of G values:
 *   d = max|x| / 127 (0 for an all-zero group, whose codes are 0),
 *   q = round-to-nearest-even(x / d), gsum = sum of the group's q. */
typedef void (*nb_act_quant_q8_fn)(const float *x, int64_t n, int group, int8_t *q, float *d,
                                   int32_t *gsum);

/* Prefill attention over one tile of query rows sharing a KV head (GQA group).
 * Rows: n_tok tokens x n_rep heads, row (t, g) reads q + t*ldq + g*hd and writes
 * out + t*ldo + g*hd (hd floats); n_tok * n_rep <= NB_ATTN_ROWS. Token t sits at
 * position qpos[t]; the key / value of position p is read through the view (struct
 * nb_kv_view, below). Row (t, g) attends to the keys p with p <= qpos[t] and, when
 * window > 0, qpos[t] - p < window:
 *     out = sum_p softmax_p(scale * q.k_p) v_p
 * Every key position from min(qpos) - window + 1 (or 0) to max(qpos) is read, so
 * those slots must hold finite values. `scratch`: NB_ATTN_SCRATCH(hd) floats. */
/* The gated MLP activation: out[i] = act(gate[i]) * up[i] (out may be gate). */
enum nb_glu_act { NB_GLU_SILU = 0, NB_GLU_GELU_TANH = 1 };
typedef void (*nb_glu_fn)(float *out, const float *gate, const float *up, int64_t n,
                          enum nb_glu_act act);
/* y = x / sqrt(mean(x^2) + eps) * w (y may be x). */
typedef void (*nb_rmsnorm_fn)(float *y, const float *x, const float *w, int64_t n, float eps);

/* Element types of the KV cache. A row of n values (n a multiple of 32 for q8_0) takes
 * NB_KV_ROW_BYTES(type, n) bytes; q8_0 is llama.cpp's block: per 32 values an f16
 * scale d = max|x| / 127 and 32 int8 codes round(x / d). */
enum nb_kv_elem { NB_KVE_F32, NB_KVE_F16, NB_KVE_BF16, NB_KVE_Q8_0 };
#define NB_KV_ROW_BYTES(type, n)                                                                   \
    ((type) == NB_KVE_F32    ? (int64_t)(n) * 4                                                    \
     : (type) == NB_KVE_Q8_0 ? (int64_t)(n) / 32 * 34                                              \
                             : (int64_t)(n) * 2)
/* dst[0..n) = the n values of a row of `type` at src (n a multiple of 32 for q8_0). */
void nb_kv_row_load(int type, const void *src, float *dst, int64_t n);
/* The row of `type` at dst = src[0..n) rounded (to nearest even). */
void nb_kv_row_store(int type, const float *src, void *dst, int64_t n);

/* A paged KV cache as the attention kernels read it: the hd values (of `type`) of
 * position p are at byte k + NB_KV_AT(view, p) (v likewise): block blocks[p >> bshift],
 * ldblk bytes a block, ldrow bytes a row within it. A cache that stores each KV head's
 * rows of a block together (model/kvcache.h) passes k, v already at the head. */
struct nb_kv_view {
    const void *k, *v;
    const int32_t *blocks;
    int64_t ldblk, ldrow;
    int bshift, type;
};
#define NB_KV_AT(kv, p)                                                                            \
    ((int64_t)(kv)->blocks[(p) >> (kv)->bshift] * (kv)->ldblk +                                   \
     (int64_t)((p) & ((1 << (kv)->bshift) - 1)) * (kv)->ldrow)

#define NB_ATTN_ROWS        32
/* floats: the AVX-512 / AVX2 / NEON tiles' 66 hd + 1024 (+ 32 rows converted to f32), the
 * AMX tile's 144 hd + 3700 (attn_amx.inc: bf16 Q, K, V, the output sums, scores, weights) */
#define NB_ATTN_SCRATCH(hd) (148 * (int64_t)(hd) + 4096)
struct nb_kv_view;
typedef void (*nb_attn_tile_fn)(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok,
                                int n_rep, int hd, const int32_t *qpos,
                                const struct nb_kv_view *kv, int window, float scale,
                                float *scratch);

/* Decode attention over one run of keys [a, b) for the n_rep query rows of one KV head
 * (row r: hd floats at q + r*hd, already multiplied by the softmax scale). The cache is
 * read as for nb_attn_tile_fn (k, v, ldkv in bytes, kv_type, blocks, bshift). Writes
 * per row, at out + r*ldo: out[0] = m, the largest score; out[1] = l, the sum of
 * exp(score - m); out[2..2+hd) = the sum of exp(score - m) v. An empty run (a == b)
 * gives m = -inf, l = 0, zeros. Runs combine (flash-decoding) as
 * out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c. `scratch`: NB_ATTN_DECODE_SCRATCH(hd)
 * floats. */
#define NB_ATTN_DECODE_SCRATCH(hd) (17 * (int64_t)(hd) + 128)
typedef void (*nb_attn_decode_fn)(const float *q, int n_rep, int hd, const struct nb_kv_view *kv,
                                  int a, int b, float *out, int64_t ldo, float *scratch);

/* ---- the GEMM of a weight format, one signature for all of them ----
 *
 * The kernel functions below keep the arguments their maths needs (the typedefs
 * above; tests and the kernel lab call them directly). The table holds each behind
 * one signature, so the forward pass calls table->gemm[weight format] and never asks
 * which format it holds. */
struct nb_gemm_args {
    float *y; /* y[t * ldy + r] */
    int64_t ldy;
    /* the input rows, in the form nb_wformat_info(format)->input names */
    const float *x; /* NB_INPUT_F32: x[t * ldx + i] */
    int64_t ldx;
    const int8_t *xq; /* NB_INPUT_Q8: nb_gemm_w4a8_fn's xq, xd, xsum, ldxq, ldxg */
    const float *xd;
    const int32_t *xsum;
    int64_t ldxq, ldxg;
    const void *w; /* the matrix: plain rows or a packed blob */
    int64_t n_out, n_in;
    int group; /* int4 formats */
    int n_tok;
};
/* Rows [r0, r1) of y (r0, r1 multiples of the format's row_block, or r1 = n_out);
 * `scratch`: n_in floats. */
typedef void (*nb_gemm_op)(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch);

struct nb_gemm_kernel {
    nb_gemm_op run;
    const char *name; /* the kernel as measurement records name it: "avx512vnni", "ref", ... */
};

/* ISA levels: what a table may use. The x86 levels are ordered (avx512 includes avx2);
 * neon is the one Arm level (dotprod / i8mm pick variants within it, as AVX-VNNI does
 * within avx2) and is neither above nor below an x86 level: compare levels with
 * nb_isa_level_within, never with < or >. */
enum nb_isa_level { NB_LEVEL_REF = 0, NB_LEVEL_AVX2, NB_LEVEL_AVX512, NB_LEVEL_NEON };

struct nb_kernels {
    const char *isa; /* "ref", "avx2", "avx512", "avx512+amx" */
    enum nb_isa_level level; /* the level the table was filled at (capped at the CPU's) */
    struct nb_gemm_kernel gemm[NB_WF_COUNT];
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n); /* y += a x */
    nb_act_quant_q8_fn act_quant_q8;
    nb_attn_tile_fn attn_tile;
    nb_attn_decode_fn attn_decode;
    void (*kv_row_load)(int type, const void *src, float *dst, int64_t n); /* decode's */
    void (*kv_row_store)(int type, const float *src, void *dst, int64_t n); /* the K/V store */
    nb_glu_fn glu;
    nb_rmsnorm_fn rmsnorm;
};

/* The one place kernels are chosen (kernels/table.c): the table for a CPU with
 * `cpu`'s features at `level` (capped at what the CPU has), with the AMX w4a8 kernel
 * when use_amx (the dispatcher sets it once the kernel passed its self-check on this
 * machine). A pure function of its arguments: the dispatcher calls it for this
 * machine, the selector for any probe (a record's CPU, a test's hand-written one). */
void nb_kernels_fill(struct nb_kernels *k, const struct nb_cpu *cpu, enum nb_isa_level level,
                     int use_amx);
/* The best level a CPU with these features runs in this build (ref where the build has
 * no x86 kernels). */
enum nb_isa_level nb_kernels_best_level(const struct nb_cpu *cpu);
/* The best level these features allow, whatever this build has: the rule itself, for
 * reading another machine's flags (a measurement record's). */
enum nb_isa_level nb_cpu_isa_level(const struct nb_cpu *cpu);
/* "ref", "avx2", "avx512", "neon" -> 1 and *out; 0 for another name. */
int nb_isa_level_from_name(const char *name, enum nb_isa_level *out);
/* 1 when a CPU whose best level is `best` runs `level`: ref, or the same architecture's
 * level at or below best. */
int nb_isa_level_within(enum nb_isa_level level, enum nb_isa_level best);

/* Before the first nb_kernels_get: cap the level ("ref", "avx2", "avx512", "neon"; NULL or
 * "auto": the best this CPU has) and allow or forbid the AMX kernel. The library reads
 * no environment: the CLI passes NIBBLE_ISA and NIBBLE_AMX here. NB_ERR_INVALID_ARG
 * for an unknown name or a call after the table was filled. */
enum nb_status nb_kernels_configure(const char *isa, int allow_amx);
/* The table for this CPU (probed once, within what nb_kernels_configure allows). */
const struct nb_kernels *nb_kernels_get(void);
/* The reference table: every kernel's scalar twin. */
const struct nb_kernels *nb_kernels_ref(void);
/* The table of one level ("ref", "avx2", "avx512", "neon") if this CPU runs it: 1, else 0. */
int nb_kernels_for_isa(const char *isa, struct nb_kernels *out);

/* ---- reference kernels ---- */
void nb_gemm_f32_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_f16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_bf16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* GGUF Q4_K / Q6_K rows as stored (NB_WF_Q4_K, NB_WF_Q6_K: n_in a multiple of 256, a row
 * n_in / 256 blocks of 144 / 210 bytes; kernels/qblock.h): row decode into n floats,
 * bit-identical to llama.cpp's dequantization, and the GEMM (decode a row into scratch,
 * dot it with every token). */
void nb_dequant_row_q4_k_ref(const void *row, float *y, int64_t n);
void nb_dequant_row_q6_k_ref(const void *row, float *y, int64_t n);
void nb_gemm_q4_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* The loop both share with their SIMD twins: each row of [r0, r1) (row_bytes apart) decoded
 * by `row` into scratch, then `dot` with every token. */
void nb_gemm_row_decoded(void (*row)(const void *, float *, int64_t), int64_t row_bytes,
                         float (*dot)(const float *, const float *, int64_t), float *y,
                         int64_t ldy, const float *x, int64_t ldx, const void *w, int64_t n_in,
                         int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_q6_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* Q5_K, Q4_0 and Q8_0 rows as stored, likewise (kernels/qblock.h's block decoders). */
void nb_dequant_row_q5_k_ref(const void *row, float *y, int64_t n);
void nb_dequant_row_q4_0_ref(const void *row, float *y, int64_t n);
void nb_dequant_row_q8_0_ref(const void *row, float *y, int64_t n);
void nb_dequant_row_iq4_nl_ref(const void *row, float *y, int64_t n);
void nb_dequant_row_iq4_xs_ref(const void *row, float *y, int64_t n);
void nb_gemm_iq4_nl_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_iq4_xs_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_q5_k_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_q4_0_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_q8_0_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* GGUF k-quant X16 records (kernels/qblock.h; kernels/ref/gemm_kq_ref.c): row r of a
 * matrix decoded (bit-identical to nb_dequant_row_q4_k_ref / _q6_k_ref on the rows it
 * came from), and the GEMMs against int8 activations in the NB_INPUT_Q8K form
 * (nb_gemm_w4a8_fn's arguments: xd one scale per 256, xsum 16 words per 256, the
 * group unused). */
/* Row r of a matrix [n_out][n_in] in format f as f32, as the reference kernels decode it:
 * a GGUF block format (its rows or its X16 records) or an int4 X16 blob (`group`). 0 for
 * another format (plain rows: the caller's). */
int nb_dequant_row_packed(enum nb_wformat f, const void *blob, int group, int64_t n_out,
                          int64_t n_in, int64_t r, float *y);
void nb_dequant_row_q4_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_q5_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_q6_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_q4_0_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_q8_0_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_iq4_nl_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_dequant_row_iq4_xs_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y);
void nb_gemm_iq4_nl_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                            const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                            int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_iq4_xs_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                            const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                            int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
typedef void (*nb_gemm_kq_fn)(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q4_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q6_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q5_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
/* Q4_0 / Q8_0 records read the w4a8 activation form with group 32 (xd, xsum per 32). */
void nb_gemm_q4_0_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q8_0_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
/* The k-quants' activation form: n values (a multiple of 256) to int8 per 256 with `q8`
 * (a table's act_quant_q8, group 256: codes and scales as it makes them), then the code
 * sums of each 256-block as 16 int32 words (kernels/qblock.h); sums holds n / 16 words. */
void nb_act_quant_q8k(nb_act_quant_q8_fn q8, const float *x, int64_t n, int8_t *q, float *d,
                      int32_t *sums);
float nb_dot_f32_ref(const float *a, const float *b, int64_t n);
void nb_axpy_f32_ref(float *y, float a, const float *x, int64_t n);
void nb_attn_decode_ref(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                        int b, float *out, int64_t ldo, float *scratch);
void nb_attn_tile_ref(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                      int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                      float scale, float *scratch);

void nb_act_quant_q8_ref(const float *x, int64_t n, int group, int8_t *q, float *d, int32_t *gsum);
void nb_glu_ref(float *out, const float *gate, const float *up, int64_t n, enum nb_glu_act act);
void nb_rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps);
void nb_gemm_w4a8_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                      int64_t ldxq, int64_t ldxg, const void *w_blob, int64_t n_out, int64_t n_in,
                      int group, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_w4a16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                       int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0, int64_t r1,
                       float *scratch);
void nb_gemm_w8a16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                       int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1,
                       float *scratch);
/* Decode row r of a packed matrix (any path) into out[n_in]: the values every
 * reference kernel multiplies. `pl` is nb_layout_planes(path, group, n_out, n_in). */
void nb_unpack_row_ref(enum nb_wpath path, int group, const void *w_blob,
                       const struct nb_layout_planes *pl, int64_t n_in, int64_t r, float *out);

/* NB_LAYOUT_X16 reference kernels (kernels/ref/gemm_x16_ref.c): bit-identical to the
 * ROWS ones above on the same matrix; any r0..r1 works. */
void nb_gemm_w4a8_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                          int64_t r1);
void nb_gemm_w4a16_x16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1, float *scratch);
/* The planes of a w4a16 X16 blob: codes, bf16 scales d and bf16 minimums m (16 per row
 * block and group). 0 when the shape has no X16 layout (nothing to compute). */
struct nb_w4a16_x16_planes {
    const uint8_t *qs;
    const uint16_t *ds, *ms;
};
static inline int nb_w4a16_x16_planes(const void *w_blob, int group, int64_t n_out, int64_t n_in,
                                      struct nb_w4a16_x16_planes *p)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A16, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return 0;
    const uint8_t *b = (const uint8_t *)w_blob;
    p->qs = b + pl.offset[0];
    p->ds = (const uint16_t *)(b + pl.offset[1]);
    p->ms = (const uint16_t *)(b + pl.offset[2]);
    return 1;
}
/* Decode row r of an X16 int4 blob; `pl` is nb_layout_planes_x(path, NB_LAYOUT_X16, ...). */
void nb_unpack_row_x16_ref(enum nb_wpath path, int group, const void *w_blob,
                           const struct nb_layout_planes *pl, int64_t n_in, int64_t r, float *out);

/* ---- x86 kernels (kernels/x86/; present on x86-64 builds, run only when the CPU
 * probe says so). X16 kernels need r0, r1 multiples of 16. ---- */
#if defined(__x86_64__) || defined(_M_X64)
#define NB_HAVE_X86 1
void nb_gemm_w4a8_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1);
/* AMX-INT8 prefill variant (gemm_w4a8_amx.c, body gemm_w4a8_amx.inc).
 * Needs amx_tile + amx_int8 + AVX-512 VNNI and the Linux tile-data permission, asked
 * for (process-wide, idempotent) by nb_amx_request_perm(): 1 if granted, else 0. */
int nb_amx_request_perm(void);
/* Tiles 0..3 (C) rows x 64 B, 4, 5 (A) rows x kstep B, 6, 7 (B) kstep/4 x 64 B: palette 1.
 * rows (1..16) is the tokens of a token tile: 16 for prefill, fewer for small batches. */
void nb_amx_config(int kstep, int rows);
void nb_gemm_w4a8_x16_amx(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                          int64_t r1);
/* The same code on emulated tiles (gemm_kq_amxemu_avx512vnni.c; tests, any VNNI CPU). */
void nb_gemm_w4a8_x16_amxemu(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                             const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                             int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                             int64_t r1);
/* AMX-BF16 w4a16 prefill (gemm_w4a16_amx.c, body gemm_w4a16_amx.inc): amx_tile + amx_bf16 +
 * AVX512-BF16 and the tile-data permission; tokens that do not fill a tile of 16 go to
 * nb_gemm_w4a16_x16_avx512bf16. Within TOL_W4A16_BF16 of nb_gemm_w4a16_x16_ref, like that
 * kernel. */
void nb_gemm_w4a16_x16_amx(float *y, int64_t ldy, const float *x, int64_t ldx,
                           const void *w_blob, int64_t n_out, int64_t n_in, int group, int n_tok,
                           int64_t r0, int64_t r1, float *scratch);
/* The same code on emulated tiles (rest: nb_gemm_w4a16_x16_avx512; any AVX-512 CPU). */
void nb_gemm_w4a16_x16_amxemu(float *y, int64_t ldy, const float *x, int64_t ldx,
                              const void *w_blob, int64_t n_out, int64_t n_in, int group,
                              int n_tok, int64_t r0, int64_t r1, float *scratch);
/* The dispatcher's first-use self-check of a w4a16 X16 kernel (three random problems
 * against nb_gemm_w4a16_x16_ref, each output within 2^-8 of its terms): 1 if it passes. */
int nb_kernels_check_w4a16(nb_gemm_w4a16_fn fn);
void nb_gemm_w4a8_x16_avxvnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                              int64_t r1);
void nb_gemm_w4a8_x16_avx2(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                           const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1);
void nb_gemm_w4a16_x16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx,
                              const void *w_blob, int64_t n_out, int64_t n_in, int group, int n_tok,
                              int64_t r0, int64_t r1, float *scratch);
void nb_gemm_w4a16_x16_avx512bf16(float *y, int64_t ldy, const float *x, int64_t ldx,
                                  const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                  int n_tok, int64_t r0, int64_t r1, float *scratch);
/* kernels/x86/gemm_w4a16_avx512vnni.c: w4a16 decode on int16 activations (per weight group,
 * scale max|x| / 32767) and vpdpwssd; error <= d sum_k q_k max|x| 2^-16 per group, within
 * TOL_W4A16_BF16 of the reference. The gemv does 1 to 4 tokens (n_tok * n_in <= 32768,
 * group a multiple of 32) and returns 1, or returns 0 and writes nothing; the gemm also
 * prefills on int16 (n_in <= 8192, group a multiple of 32) and sends the rest to
 * nb_gemm_w4a16_x16_avx512. */
int nb_gemv_w4a16_x16_avx512vnni(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_w4a16_x16_avx512vnni(float *y, int64_t ldy, const float *x, int64_t ldx,
                                  const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                  int n_tok, int64_t r0, int64_t r1, float *scratch);
/* kernels/x86/gemm_kq_avx512vnni.c: the k-quant X16 GEMMs (within f32 rounding of the
 * _ref twins: fused multiply-adds); r0, r1 multiples of 16. */
void nb_gemm_q4_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1);
void nb_gemm_q6_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1);
void nb_gemm_q5_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1);
/* bit-identical to their _ref twins */
void nb_gemm_q4_0_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1);
void nb_gemm_q8_0_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1);
void nb_gemm_iq4_nl_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                   const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                   const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                   int64_t r0, int64_t r1);
/* within f32 rounding of its twin, as the k-quants */
void nb_gemm_iq4_xs_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                   const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                   const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                   int64_t r0, int64_t r1);
/* kernels/x86/gemm_kq_avx2.c (vpmaddubsw) and gemm_kq_avxvnni.c (256-bit vpdpbusd): the
 * same seven GEMMs on 256-bit registers, with the same agreement with the _ref twins
 * (k-quants and IQ4_XS within f32 rounding, Q4_0 / Q8_0 / IQ4_NL bit-identical). */
#define NB_GEMM_KQ_DECL(fn)                                                                        \
    void fn(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,        \
            int64_t ldxq, int64_t ldxg, const void *w_blob, int64_t n_out, int64_t n_in,           \
            int n_tok, int64_t r0, int64_t r1)
NB_GEMM_KQ_DECL(nb_gemm_q4_k_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_q5_k_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_q6_k_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_iq4_xs_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_q4_0_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_q8_0_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_iq4_nl_x16_avx2);
NB_GEMM_KQ_DECL(nb_gemm_q4_k_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_q5_k_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_q6_k_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_iq4_xs_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_q4_0_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_q8_0_x16_avxvnni);
NB_GEMM_KQ_DECL(nb_gemm_iq4_nl_x16_avxvnni);
/* kernels/x86/gemm_kq_amx.c: the same on AMX-INT8 tiles for tiles of 16 tokens (the rest
 * on the AVX-512 VNNI kernels; opt-in, installed after dispatch.c's self-check), and
 * gemm_kq_amxemu_avx512vnni.c: that code on emulated tiles (tests, any VNNI CPU). */
NB_GEMM_KQ_DECL(nb_gemm_q4_k_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_q5_k_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_q6_k_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_iq4_xs_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_q4_0_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_q8_0_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_iq4_nl_x16_amx);
NB_GEMM_KQ_DECL(nb_gemm_q4_k_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_q5_k_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_q6_k_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_iq4_xs_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_q4_0_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_q8_0_x16_amxemu);
NB_GEMM_KQ_DECL(nb_gemm_iq4_nl_x16_amxemu);
void nb_act_quant_q8_avx512(const float *x, int64_t n, int group, int8_t *q, float *d,
                            int32_t *gsum);
void nb_glu_avx512(float *out, const float *gate, const float *up, int64_t n,
                   enum nb_glu_act act);
void nb_rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps);
#endif

/* ---- AVX-512 float kernels (kernels/x86/vec_avx512.c) ---- */
float nb_dot_f32_avx512(const float *a, const float *b, int64_t n);
void nb_axpy_f32_avx512(float *y, float a, const float *x, int64_t n);
/* kernels/x86/attn_avx512.c: online softmax over blocks of 16 keys, rows in lanes. */
void nb_kv_row_load_avx512(int type, const void *src, float *dst, int64_t n);
void nb_kv_row_store_avx512(int type, const float *src, void *dst, int64_t n);
void nb_attn_decode_avx512(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                           int b, float *out, int64_t ldo, float *scratch);
void nb_attn_tile_avx512(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                         int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                         float scale, float *scratch);
/* kernels/x86/attn_amx.c: the prefill tile on AMX-BF16 (hd a multiple of 32 up to 256;
 * other head sizes: nb_attn_tile_avx512); gemm_kq_amxemu_avx512vnni.c: the same code on
 * emulated tiles (tests, any AVX-512 VNNI CPU). */
void nb_attn_tile_amx(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                      int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                      float scale, float *scratch);
void nb_attn_tile_amxemu(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok,
                         int n_rep, int hd, const int32_t *qpos, const struct nb_kv_view *kv,
                         int window, float scale, float *scratch);
/* kernels/x86/attn_avx2.c: the same on 8 lanes, for CPUs with AVX2 + FMA + F16C only. */
void nb_kv_row_load_avx2(int type, const void *src, float *dst, int64_t n);
void nb_kv_row_store_avx2(int type, const float *src, void *dst, int64_t n);
void nb_attn_decode_avx2(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                         int b, float *out, int64_t ldo, float *scratch);
void nb_attn_tile_avx2(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                       int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                       float scale, float *scratch);
void nb_gemm_f32_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_f16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                        int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_bf16_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                         int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* kernels/x86/gemm_kq_avx512.c: the same row decode on 16 lanes (the same values, bit
 * for bit) and the GEMM with the AVX-512 dot. */
void nb_dequant_row_q4_k_avx512(const void *row, float *y, int64_t n);
void nb_dequant_row_q6_k_avx512(const void *row, float *y, int64_t n);
void nb_gemm_q4_k_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                         int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_q6_k_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                         int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);

/* ---- Arm kernels (kernels/arm/; present on aarch64 builds). Plain NEON (armv8.0, every
 * aarch64 CPU) unless the name says otherwise: _dotprod needs asimddp (FEAT_DotProd),
 * _i8mm asimddp and i8mm (FEAT_I8MM), _bf16 bf16 (FEAT_BF16); the functions carry their own target attributes,
 * so one binary runs on a cortex-a53 and picks variants at run time. X16 kernels need
 * r0, r1 multiples of 16. ---- */
#if defined(__aarch64__)
#define NB_HAVE_ARM 1
void nb_gemm_w4a8_x16_neon(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                           const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1);
void nb_gemm_w4a8_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                              int64_t r1);
void nb_gemm_w4a8_x16_i8mm(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                           const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1);
/* kernels/arm/gemm_kq_dotprod.c: the GGUF block formats' X16 records with sdot (needs
 * asimddp); nb_gemm_kq_fn's signature. Q4_0 / Q8_0 / IQ4_NL bit-identical to their _ref
 * twins, the k-quants and IQ4_XS within fused multiply-adds of them. */
void nb_gemm_q4_k_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q5_k_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q6_k_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_iq4_xs_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                                int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q4_0_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_q8_0_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                              const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                              int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_iq4_nl_x16_dotprod(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                                int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1);
void nb_gemm_w4a16_x16_neon(float *y, int64_t ldy, const float *x, int64_t ldx,
                            const void *w_blob, int64_t n_out, int64_t n_in, int group, int n_tok,
                            int64_t r0, int64_t r1, float *scratch);
/* bf16 activations, bfmmla (kernels/arm/gemm_w4a16_bf16.c): within 2^-9 of the products */
void nb_gemm_w4a16_x16_neon_bf16(float *y, int64_t ldy, const float *x, int64_t ldx,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int group,
                                 int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_w8a16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                        int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1,
                        float *scratch);
void nb_act_quant_q8_neon(const float *x, int64_t n, int group, int8_t *q, float *d,
                          int32_t *gsum);
/* kernels/arm/vec_neon.c: bit-identical to their _ref twins (the same operations). */
float nb_dot_f32_neon(const float *a, const float *b, int64_t n);
void nb_axpy_f32_neon(float *y, float a, const float *x, int64_t n);
void nb_gemm_f32_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_f16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
void nb_gemm_bf16_neon(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                       int64_t n_in, int n_tok, int64_t r0, int64_t r1, float *scratch);
/* kernels/arm/attn_neon.c: KV rows bit-identical to nb_kv_row_load / _store; attention
 * with an online softmax (one pass over the keys). */
void nb_kv_row_load_neon(int type, const void *src, float *dst, int64_t n);
void nb_kv_row_store_neon(int type, const float *src, void *dst, int64_t n);
void nb_attn_decode_neon(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                         int b, float *out, int64_t ldo, float *scratch);
void nb_attn_tile_neon(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                       int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                       float scale, float *scratch);
/* kernels/arm/pointwise_neon.c */
void nb_glu_neon(float *out, const float *gate, const float *up, int64_t n, enum nb_glu_act act);
void nb_rmsnorm_neon(float *y, const float *x, const float *w, int64_t n, float eps);
#endif

/* Small element-wise ops (scalar; not worth dispatching yet). */
void nb_softmax(float *x, int64_t n);

#endif
