/* formats/tensor.h — what every reader hands to the model loader: a named, typed,
 * shaped view of bytes inside a mapped file.
 *
 * Shapes are row-major, outermost first, as numpy/PyTorch/safetensors write them:
 * a linear weight of a layer y = W x with n_out outputs and n_in inputs has
 * shape {n_out, n_in}. (GGUF stores dimensions innermost first; the GGUF reader
 * reverses them so that every reader agrees.)
 */
#ifndef NB_FORMATS_TENSOR_H
#define NB_FORMATS_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum nb_dtype {
    NB_DTYPE_F32 = 0,
    NB_DTYPE_F16,
    NB_DTYPE_BF16,
    NB_DTYPE_Q8_0, /* GGUF Q8_0: blocks of 32: f16 scale + 32 x int8 (34 bytes) */
    NB_DTYPE_Q4_0, /* GGUF Q4_0: blocks of 32: f16 scale + 16 bytes of nibbles (18 bytes) */
    NB_DTYPE_I8,
    NB_DTYPE_I32,
    /* More GGUF block types, read by converting them to f32 (quant/dequant.h has the
     * block layouts). Blocks run along the innermost dimension: a row is whole blocks. */
    NB_DTYPE_Q4_1,   /* 32 elements, 20 bytes */
    NB_DTYPE_Q5_0,   /* 32 elements, 22 bytes */
    NB_DTYPE_Q5_1,   /* 32 elements, 24 bytes */
    NB_DTYPE_Q2_K,   /* 256 elements, 84 bytes */
    NB_DTYPE_Q3_K,   /* 256 elements, 110 bytes */
    NB_DTYPE_Q4_K,   /* 256 elements, 144 bytes */
    NB_DTYPE_Q5_K,   /* 256 elements, 176 bytes */
    NB_DTYPE_Q6_K,   /* 256 elements, 210 bytes */
    NB_DTYPE_Q8_K,   /* 256 elements, 292 bytes */
    NB_DTYPE_IQ4_NL, /* 32 elements, 18 bytes */
    NB_DTYPE_IQ4_XS, /* 256 elements, 136 bytes */
    NB_DTYPE_COUNT
};

#define NB_MAX_DIMS 4

struct nb_tensor {
    const char *name;
    enum nb_dtype dtype;
    int n_dims;
    int64_t shape[NB_MAX_DIMS]; /* outermost first; unused entries are 1 */
    const void *data;           /* inside the mapped file, bounds-checked */
    uint64_t n_bytes;
};

/* "F32", "F16", ... */
const char *nb_dtype_name(enum nb_dtype t);
/* Elements per block and bytes per block (1 and the element size for plain types). */
int nb_dtype_block_elems(enum nb_dtype t);
int nb_dtype_block_bytes(enum nb_dtype t);
/* Bytes needed for n elements (n must be a multiple of the block size); returns
 * 0 and leaves *out untouched on overflow or a partial block. */
int nb_dtype_row_bytes(enum nb_dtype t, uint64_t n, uint64_t *out);
/* Total number of elements of a tensor. */
int64_t nb_tensor_nelems(const struct nb_tensor *t);

/* Refuse tensors t[0..n) whose bytes overlap (empty tensors never do): NB_ERR_FORMAT
 * naming `file`, the pair and their byte ranges from `base`. A write through one view
 * must never change another, and no exporter writes such files. */
enum nb_status nb_tensors_check_overlap(const struct nb_tensor *t, int64_t n, const void *base,
                                        const char *file);

#endif
