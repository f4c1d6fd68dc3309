/* formats/llama2c.h — llama2.c checkpoints (.bin), every header version it wrote.
 *
 * legacy: 7 x i32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 *         seq_len} (vocab_size < 0: separate classifier), then f32 tensors:
 *         tok_embeddings, attention_norm[L], wq[L], wk[L], wv[L], wo[L], ffn_norm[L],
 *         w1[L], w2[L], w3[L], norm, freq_cis_real, freq_cis_imag, [output]
 * v1:     u32 magic 0x616b3432 ("ak42") | i32 version=1 | 7 x i32 as above |
 *         u8 shared_classifier | zero padding to 256 bytes; then f32 tensors:
 *         attention_norm[L], ffn_norm[L], norm, tok_embeddings, wq[L], wk[L], wv[L],
 *         wo[L], w1[L], w2[L], w3[L], [output]
 * v2:     as v1 with version=2 and an i32 group_size after shared_classifier; the
 *         norms f32, then each of tok_embeddings, wq..w3 (per layer), [output] as
 *         int8 values followed by one f32 scale per group_size values.
 *
 * Tensors are exposed under these names (shapes outermost first, as in
 * formats/tensor.h): "tok_embeddings" {vocab, dim}, "norm" {dim},
 * "output" {vocab, dim} (only when not shared), and per layer l:
 * "layers.l.attention_norm" {dim}, "layers.l.ffn_norm" {dim},
 * "layers.l.wq" {dim, dim}, "layers.l.wk" {kv_dim, dim}, "layers.l.wv" {kv_dim, dim},
 * "layers.l.wo" {dim, dim}, "layers.l.w1" {hidden, dim}, "layers.l.w2" {dim, hidden},
 * "layers.l.w3" {hidden, dim}. For v2 the quantized tensors have dtype I8 and a
 * companion "<name>.scale" of dtype F32 with one value per group (groups run over
 * the flattened tensor). The RoPE pairing of these checkpoints is interleaved.
 *
 * Validation: every header int in 1..max (dim 2^16, hidden_dim 2^18, n_layers,
 * n_heads, n_kv_heads 1024, vocab_size, seq_len 2^22), dim % n_heads == 0,
 * n_heads % n_kv_heads == 0, an even head size, v2 group_size > 0 dividing dim, sizes
 * overflow-checked; a message names the field and its value. The file must hold at
 * least what the header implies; legacy files may be longer (trailing bytes ignored),
 * v1/v2 files must match exactly. freq_cis tables are not exposed. Data pointers of v2
 * ".scale" tensors may be unaligned for f32.
 */
#ifndef NB_FORMATS_LLAMA2C_H
#define NB_FORMATS_LLAMA2C_H

#include <stddef.h>

#include "core/error.h"
#include "formats/tensor.h"

struct nb_llama2c_config {
    int version; /* 0 = legacy, 1, 2 */
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier;
    int group_size; /* v2 only */
};

struct nb_llama2c;

enum nb_status nb_llama2c_open(struct nb_llama2c **out, const char *path);
enum nb_status nb_llama2c_parse(struct nb_llama2c **out, const void *data, size_t size,
                                const char *name);
void nb_llama2c_free(struct nb_llama2c *m);
/* Does the buffer start like a llama2.c checkpoint? v1/v2 magic; a valid legacy header
 * the buffer is long enough for; or a legacy header with at most two ints out of range
 * in a buffer of header + whole floats, so that nb_llama2c_parse, not a generic "not a
 * model", says which field is wrong. Used to recognise a .bin when sniffing a path. */
int nb_llama2c_sniff(const void *data, size_t size);

const struct nb_llama2c_config *nb_llama2c_config(const struct nb_llama2c *m);
int64_t nb_llama2c_n_tensors(const struct nb_llama2c *m);
const struct nb_tensor *nb_llama2c_tensor(const struct nb_llama2c *m, int64_t i);
const struct nb_tensor *nb_llama2c_find(const struct nb_llama2c *m, const char *name);

#endif
