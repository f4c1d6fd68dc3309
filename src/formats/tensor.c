/* formats/tensor.c — dtype sizes and names. */
#include "formats/tensor.h"

#include "core/checked.h"

static const struct {
    const char *name;
    int block_elems, block_bytes;
} k_dtypes[NB_DTYPE_COUNT] = {
    [NB_DTYPE_F32] = {"F32", 1, 4},   [NB_DTYPE_F16] = {"F16", 1, 2},
    [NB_DTYPE_BF16] = {"BF16", 1, 2}, [NB_DTYPE_Q8_0] = {"Q8_0", 32, 34},
    [NB_DTYPE_Q4_0] = {"Q4_0", 32, 18}, [NB_DTYPE_I8] = {"I8", 1, 1},
    [NB_DTYPE_I32] = {"I32", 1, 4},
};

const char *nb_dtype_name(enum nb_dtype t)
{
    return (unsigned)t < NB_DTYPE_COUNT ? k_dtypes[t].name : "?";
}
int nb_dtype_block_elems(enum nb_dtype t)
{
    return (unsigned)t < NB_DTYPE_COUNT ? k_dtypes[t].block_elems : 0;
}
int nb_dtype_block_bytes(enum nb_dtype t)
{
    return (unsigned)t < NB_DTYPE_COUNT ? k_dtypes[t].block_bytes : 0;
}

int nb_dtype_row_bytes(enum nb_dtype t, uint64_t n, uint64_t *out)
{
    if ((unsigned)t >= NB_DTYPE_COUNT) return 0;
    uint64_t be = (uint64_t)k_dtypes[t].block_elems;
    if (n % be) return 0;
    return !nb_mul_u64(n / be, (uint64_t)k_dtypes[t].block_bytes, out);
}

int64_t nb_tensor_nelems(const struct nb_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return n;
}
