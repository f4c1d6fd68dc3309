/* Fuzz target: a GPTQ / AWQ checkpoint's config parse, tensor checks, unpacking and
 * re-packing (formats/hfquant.h, quant/unpack.h).
 *
 * Input: config.json text, a NUL byte, then 4 control bytes and a data pool:
 *   c0, c1   the model's shape: n_out = 8 (1 + c0 % 8), n_in = 8 (1 + c1 % 32)
 *   c2       bit k set: tensor k (qweight, qzeros, scales, g_idx) gets one row more
 *            than the config implies (bits 4..7: the tensor is left out)
 *   c3       scales dtype: F16, BF16, F32, or I32 (wrong)
 *   pool     the tensors' bytes, repeated cyclically (zeros when empty)
 * Whatever the config and the tensors say, a checked matrix is dequantized and, when
 * its codes fit, packed into w4a16 and w4a8 blobs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hfquant.h"
#include "formats/json.h"
#include "quant/unpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *pool_fill(const uint8_t *pool, size_t n_pool, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = n_pool ? pool[i % n_pool] : 0;
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t jlen = (size_t)(nul - data), rest = size - jlen - 1;
    if (rest < 4) return 0;
    const uint8_t *ctl = nul + 1, *pool = ctl + 4;
    size_t n_pool = rest - 4;
    cJSON *root = NULL;
    if (nb_json_parse((const char *)data, jlen, "fuzz", &root) != NB_OK) return 0;
    struct nb_hfq_config c;
    if (nb_hfq_parse_config(root, NULL, "fuzz", &c) != NB_OK || c.method == NB_HFQ_NONE) {
        cJSON_Delete(root);
        return 0;
    }
    cJSON_Delete(root);
    int64_t n_out = 8 * (1 + ctl[0] % 8), n_in = 8 * (1 + ctl[1] % 32);
    int64_t b = c.bits > 0 && c.bits <= 32 ? c.bits : 4, per = 32 / b;
    int64_t G = c.group_size > 0 ? c.group_size : n_in, ng = (n_in + G - 1) / G;
    if (ng > 4096) ng = 4096;
    int awq = c.method == NB_HFQ_AWQ;
    int64_t d0[4] = {awq ? n_in : n_in / per, ng, ng, n_in};
    int64_t d1[4] = {awq ? n_out / per : n_out, n_out / per, n_out, 0};
    enum nb_dtype st_types[4] = {NB_DTYPE_F16, NB_DTYPE_BF16, NB_DTYPE_F32, NB_DTYPE_I32};
    enum nb_dtype dt[4] = {NB_DTYPE_I32, NB_DTYPE_I32, st_types[ctl[3] % 4], NB_DTYPE_I32};
    struct nb_tensor t[4];
    const struct nb_tensor *tp[4];
    void *buf[4] = {0};
    for (int k = 0; k < 4; k++) {
        int64_t rows = d0[k] + ((ctl[2] >> k) & 1), cols = d1[k] > 0 ? d1[k] : 1;
        size_t esz = dt[k] == NB_DTYPE_F16 || dt[k] == NB_DTYPE_BF16 ? 2 : 4;
        memset(&t[k], 0, sizeof t[k]);
        t[k].dtype = dt[k];
        t[k].n_dims = d1[k] > 0 ? 2 : 1;
        t[k].shape[0] = rows;
        t[k].shape[1] = d1[k] > 0 ? cols : 1;
        t[k].n_bytes = (uint64_t)(rows * cols) * esz;
        buf[k] = pool_fill(pool, n_pool, (size_t)t[k].n_bytes);
        t[k].data = buf[k];
        tp[k] = buf[k] && !((ctl[2] >> (4 + k)) & 1) ? &t[k] : NULL;
    }
    struct nb_hfq_matrix m;
    if (nb_hfq_check(&c, "fuzz", "p", tp[0], tp[1], tp[2], tp[3], n_out, n_in, &m) == NB_OK) {
        float *w = malloc(sizeof(float) * (size_t)(n_out * n_in));
        if (w) nb_hfq_dequant_rows(&m, 0, n_out, w);
        free(w);
        struct nb_src_codes sc;
        nb_src_codes_from_hfq(&sc, &m);
        enum nb_wpath paths[2] = {NB_WPATH_W4A16, NB_WPATH_W4A8};
        for (int p = 0; p < 2; p++) {
            struct nb_layout_planes pl;
            if (!nb_src_codes_fit(&sc, paths[p], NULL) ||
                !nb_layout_planes(paths[p], (int)sc.group, n_out, n_in, &pl))
                continue;
            void *blob = aligned_alloc(64, (size_t)pl.total);
            if (blob) (void)nb_src_codes_pack(&sc, paths[p], blob);
            free(blob);
        }
    }
    for (int k = 0; k < 4; k++) free(buf[k]);
    return 0;
}
