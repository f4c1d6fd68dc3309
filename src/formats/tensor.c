/* formats/tensor.c — dtype sizes and names. */
#include "formats/tensor.h"

#include <stdlib.h>

#include "core/checked.h"

static const struct {
    const char *name;
    int block_elems, block_bytes;
} k_dtypes[NB_DTYPE_COUNT] = {
    [NB_DTYPE_F32] = {"F32", 1, 4},   [NB_DTYPE_F16] = {"F16", 1, 2},
    [NB_DTYPE_BF16] = {"BF16", 1, 2}, [NB_DTYPE_Q8_0] = {"Q8_0", 32, 34},
    [NB_DTYPE_Q4_0] = {"Q4_0", 32, 18}, [NB_DTYPE_I8] = {"I8", 1, 1},
    [NB_DTYPE_I32] = {"I32", 1, 4},
    [NB_DTYPE_Q4_1] = {"Q4_1", 32, 20},     [NB_DTYPE_Q5_0] = {"Q5_0", 32, 22},
    [NB_DTYPE_Q5_1] = {"Q5_1", 32, 24},     [NB_DTYPE_Q2_K] = {"Q2_K", 256, 84},
    [NB_DTYPE_Q3_K] = {"Q3_K", 256, 110},   [NB_DTYPE_Q4_K] = {"Q4_K", 256, 144},
    [NB_DTYPE_Q5_K] = {"Q5_K", 256, 176},   [NB_DTYPE_Q6_K] = {"Q6_K", 256, 210},
    [NB_DTYPE_Q8_K] = {"Q8_K", 256, 292},   [NB_DTYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [NB_DTYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
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

struct span {
    uintptr_t begin, end;
    int64_t idx;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

enum nb_status nb_tensors_check_overlap(const struct nb_tensor *t, int64_t n, const void *base,
                                        const char *file)
{
    struct span *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (!s) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", file);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (t[i].n_bytes)
            s[m++] = (struct span){(uintptr_t)t[i].data, (uintptr_t)t[i].data + t[i].n_bytes, i};
    qsort(s, (size_t)m, sizeof *s, cmp_span);
    enum nb_status st = NB_OK;
    for (int64_t i = 1; i < m && !st; i++)
        if (s[i].begin < s[i - 1].end) {
            uintptr_t o = (uintptr_t)base;
            st = nb_set_error(NB_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) "
                              "overlap", file, t[s[i - 1].idx].name,
                              (unsigned long long)(s[i - 1].begin - o),
                              (unsigned long long)(s[i - 1].end - o), t[s[i].idx].name,
                              (unsigned long long)(s[i].begin - o),
                              (unsigned long long)(s[i].end - o));
        }
    free(s);
    return st;
}
