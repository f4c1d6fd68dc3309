/* runtime/calib.h — calibration for quantize: the tokens of a text, the mean squared
 * activation of every linear input channel (an importance matrix), and GPTQ run over
 * the whole model layer by layer. */
#ifndef NB_RUNTIME_CALIB_H
#define NB_RUNTIME_CALIB_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"
#include "model/model.h"

struct nb_recipe;

/* The calibration text as tokens, cut into chunks of `chunk` tokens (each run as its
 * own sequence from position 0; the first starts with BOS). */
struct nb_calib {
    int32_t *ids;
    int n, chunk;
};
/* Tokenize text_path with the tokenizer of model m (from its source); keep at most
 * max_tokens (0: all). NB_ERR_INVALID_ARG when the text gives no token. */
enum nb_status nb_calib_load(struct nb_calib *out, const char *text_path, const struct nb_model *m,
                             int max_tokens);
void nb_calib_free(struct nb_calib *c);

/* Sums over calibration tokens of each linear input channel's squared activation, per
 * layer and site (model.h's nb_site); divide by n_tokens for the mean. */
struct nb_act_stats {
    double *attn_in;  /* [n_layers][n_embd] */
    double *attn_out; /* [n_layers][n_heads * head_dim] */
    double *ffn_in;   /* [n_layers][n_embd] */
    double *ffn_mid;  /* [n_layers][n_ff] */
    double *out_in;   /* [n_embd] */
    int64_t n_tokens;
};
enum nb_status nb_act_stats_init(struct nb_act_stats *s, const struct nb_config *c);
/* The importance of n input channels from their sums over n_tokens (n_tokens > 0): the
 * mean squared activation, with a floor of 1e-3 of the channels' mean so that a silent
 * channel is not ignored. */
void nb_act_importance(const double *sum, int64_t n, int64_t n_tokens, float *out);
void nb_act_stats_free(struct nb_act_stats *s);
/* The float model over the calibration chunks, summing squared activations. */
enum nb_status nb_calib_stats(const struct nb_model *m, const struct nb_calib *cal, int n_threads,
                              struct nb_act_stats *s);

/* A matrix of the source as f32 rows: in place (*owned NULL) when it is f32, else a
 * converted copy the caller frees (*owned). NB_ERR_UNSUPPORTED for a packed matrix. */
enum nb_status nb_weight_f32(const struct nb_weight *w, const float **out, float **owned);
/* Rows [r0, r1) of the same: *out points into the source when it is f32, else at buf
 * ((r1 - r0) * n_in floats) holding the converted rows. */
enum nb_status nb_weight_rows_f32(const struct nb_weight *w, int64_t r0, int64_t r1, float *buf,
                                  const float **out);

/* One quantized matrix of the model (the blob GPTQ wrote), for quantize to store. */
struct nb_prequant {
    const struct nb_weight *w; /* the model's matrix it replaces */
    struct nb_weight q;        /* format, group, shape, data (malloc'ed, 64-byte aligned) */
    double rel_rms;            /* sqrt(sum (w - w^)^2 / sum w^2) */
};
struct nb_gptq_opts {
    enum nb_wpath path;      /* int4: w4a8 or w4a16 */
    enum nb_wpath head_path; /* the head's path: GPTQ when int4, else left to quantize */
    enum nb_wformat head_block; /* the head's block format (Q6_K, Q8_0: GPTQ on that grid);
                                   any other (0 included): none */
    const struct nb_recipe *recipe; /* the widths: 4 on the int4 grid, 6 and 8 on their block
                                       grids where the shape takes them (quant/gptq.h), 16
                                       and the rest left to quantize; NULL: every matrix at 4 */
    int group, layout, search, act_order, n_threads;
    int max_tokens;          /* --calib-tokens as asked (0: nb_gptq_tokens' default cap) */
    double damp;
    void (*progress)(int64_t done, int64_t total, void *user);
    void *user;
};
/* GPTQ over every linear matrix, layer by layer: each layer's Hessians come from
 * running it on the outputs of the layers before it *as quantized* (w4a8: with int8
 * activations), its matrices are quantized, and the layer is run again quantized to
 * feed the next; last the output head on the final norm's outputs. The model is
 * restored when this returns; *out (n_out entries) holds the blobs, and `s` the
 * squared-activation sums of the same passes (for matrices GPTQ leaves to quantize). */
/* GPTQ's calibration tokens: the first `asked` (> 0), else at most NB_GPTQ_TOKEN_WORK /
 * (weights of one layer), in whole chunks (at least one). The passes over a layer cost
 * tokens x its weights, and a text larger than that budget makes them dominate: on the
 * Qwen3-1.7B shape (50.3 M weights a layer) the cap is 2,560 tokens; kjv-7m (0.79 M)
 * keeps its whole 27 k-token calibration text. */
#define NB_GPTQ_TOKEN_WORK (INT64_C(1) << 37)
int nb_gptq_tokens(const struct nb_model *m, const struct nb_calib *cal, int asked);
enum nb_status nb_gptq_model(struct nb_model *m, const struct nb_calib *cal,
                             const struct nb_gptq_opts *o, struct nb_prequant **out, int *n_out,
                             struct nb_act_stats *s);
void nb_prequant_free(struct nb_prequant *p, int n);

#endif
