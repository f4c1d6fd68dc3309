/* formats/hfquant.h — Hugging Face GPTQ and AWQ checkpoints: the quantization config
 * (config.json "quantization_config", or an older quantize_config.json) and the
 * validated views of one quantized linear layer's tensors. The arithmetic (unpacking
 * codes, dequantizing) is quant/unpack.h's; this file only parses and checks.
 *
 * A linear layer y = W x, W [n_out][n_in], stored as `<prefix>.qweight` etc. instead of
 * `<prefix>.weight`. b = bits, G = group size (n_in when the config says -1),
 * n_groups = ceil(n_in / G), all int32 little-endian, codes packed low bits first:
 *
 * GPTQ (AutoGPTQ / GPTQModel, checkpoint_format "gptq" = v1 or "gptq_v2"):
 *   qweight  I32 [n_in * b / 32][n_out]   packed along the INPUT dim: word [j][o]
 *                                          holds q[o][j*32/b + t] at bits t*b.. (t = 0..)
 *   qzeros   I32 [n_groups][n_out * b / 32] packed along the OUTPUT dim: word [g][u]
 *                                          holds z[g][u*32/b + t] at bits t*b..
 *   scales   F16 [n_groups][n_out]
 *   g_idx    I32 [n_in]                    the group of each input column (act order,
 *                                          desc_act: any permutation of the groups)
 *   w[o][i] = scales[g][o] * (q[o][i] - zero),  g = g_idx[i] (or i / G without g_idx),
 *   zero = stored z + 1 in v1 (it stores zero - 1), stored z in v2.
 *
 * AWQ (AutoAWQ, version "gemm"; 4 bits only):
 *   qweight  I32 [n_in][n_out / 8]         packed along the OUTPUT dim, 8 codes a word in
 *                                          the order 0 2 4 6 1 3 5 7: the nibble at bits
 *                                          4t.. holds output 8u + k(t), k = 0,2,4,6,1,3,5,7
 *   qzeros   I32 [n_in / G][n_out / 8]     the same packing; zeros as stored
 *   scales   F16 [n_in / G][n_out]
 *   w[o][i] = scales[i / G][o] * (q[o][i] - z[i / G][o])
 *
 * Everything else is refused by name: other methods (bitsandbytes, fp8, ...), bits
 * other than 4/8 (GPTQ) or 4 (AWQ), checkpoint formats marlin / bitblas / ..., AWQ
 * versions gemv / gemv_fast / marlin / ..., AWQ without zero points.
 */
#ifndef NB_FORMATS_HFQUANT_H
#define NB_FORMATS_HFQUANT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "formats/tensor.h"

enum nb_hfq_method { NB_HFQ_NONE = 0, NB_HFQ_GPTQ, NB_HFQ_AWQ };

struct nb_hfq_config {
    enum nb_hfq_method method;
    int bits;        /* 4 or 8 (GPTQ), 4 (AWQ) */
    int group_size;  /* columns per group; 0: the whole row (the config's -1) */
    int desc_act;    /* GPTQ act order: g_idx is required */
    int sym;         /* as the config says (the codes decide what nibble keeps) */
    int zero_offset; /* added to every stored zero: 1 for GPTQ v1, else 0 */
    int version;     /* GPTQ: 1 or 2 (checkpoint format); AWQ: 0 */
};

/* "gptq", "awq" or "none". */
const char *nb_hfq_method_name(enum nb_hfq_method m);

/* The quantization of a Hugging Face directory: `config` is config.json's root (its
 * "quantization_config" object is read), `qconfig` the root of a separate
 * quantize_config.json or NULL (read when config.json has no quantization_config;
 * AutoGPTQ's files have no quant_method: gptq). Neither: out->method NB_HFQ_NONE.
 * `name` for the messages. NB_ERR_UNSUPPORTED for a method, bit width or format
 * nibble does not read, naming it ("quantization_config: quant_method 'fp8' is not
 * supported (gptq, awq are)"); NB_ERR_FORMAT for a value of the wrong type or range. */
enum nb_status nb_hfq_parse_config(const cJSON *config, const cJSON *qconfig, const char *name,
                                   struct nb_hfq_config *out);

/* One quantized matrix, validated: every view covers its whole shape (views into the
 * mapped file, not necessarily 4-byte aligned: read words by copy). */
struct nb_hfq_matrix {
    enum nb_hfq_method method;
    int bits, zero_offset;
    int64_t n_out, n_in;
    int64_t group;        /* columns per group (n_in for a whole-row group) */
    int64_t n_groups;     /* ceil(n_in / group) */
    const uint8_t *qweight; /* int32 words, layout above */
    const uint8_t *qzeros;
    const uint8_t *scales;
    enum nb_dtype scale_type; /* F16 (as written by every quantizer), BF16 or F32 */
    const uint8_t *g_idx; /* int32 [n_in], or NULL */
    int plain_order;      /* no g_idx, or g_idx[i] == i / group for every i */
};

/* Check the tensors of one matrix against the config and the model's shape
 * {n_out, n_in} and fill *out. qweight, qzeros and scales are required; g_idx is
 * required by desc_act (GPTQ) and read when present (GPTQ; AWQ has none). `prefix`
 * (e.g. "model.layers.0.self_attn.q_proj") and `file` name the tensors in the messages:
 * NB_ERR_FORMAT for a missing tensor, a dtype, a shape that disagrees with the bits,
 * group and model shape (naming both), a g_idx value out of [0, n_groups). */
enum nb_status nb_hfq_check(const struct nb_hfq_config *c, const char *file, const char *prefix,
                            const struct nb_tensor *qweight, const struct nb_tensor *qzeros,
                            const struct nb_tensor *scales, const struct nb_tensor *g_idx,
                            int64_t n_out, int64_t n_in, struct nb_hfq_matrix *out);

#endif
