/* quant/kq_repack.c — GGUF Q4_K onto w4a16 groups of 32, codes kept (kq_repack.h). */
#include "quant/kq_repack.h"

#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/wformat.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

enum nb_status nb_q4_k_pack_w4a16(const void *blocks, int64_t n_out, int64_t n_in, int64_t r0,
                                  int64_t r1, void *blob, struct nb_qstats *stats)
{
    struct nb_layout_planes pl;
    if (stats) memset(stats, 0, sizeof *stats);
    if (n_in <= 0 || n_in % NB_QK_K || !nb_layout_planes(NB_WPATH_W4A16, 32, n_out, n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: shape [%lld, %lld] is not whole "
                            "blocks of 256", (long long)n_out, (long long)n_in);
    if (r0 < 0 || r1 > n_out || r0 > r1)
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: rows [%lld, %lld) out of 0..%lld",
                            (long long)r0, (long long)r1, (long long)n_out);
    if (!blocks || !blob || (uintptr_t)blob % NB_LAYOUT_ALIGN)
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: blocks or blob missing, or blob "
                            "not %d-byte aligned", NB_LAYOUT_ALIGN);
    float *exact = NULL, *back = NULL;
    if (stats && r1 > r0) {
        exact = malloc(sizeof(float) * (size_t)n_in);
        back = malloc(sizeof(float) * (size_t)n_in);
        if (!exact || !back) {
            free(exact);
            free(back);
            return nb_set_error(NB_ERR_NOMEM, "Q4_K -> w4a16: no memory for a row");
        }
    }
    uint8_t *b = blob;
    int64_t nb = n_in / NB_QK_K, ng = n_in / 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)blocks + r * nb * NB_Q4_K_BYTES;
        uint8_t *qs = b + pl.offset[0] + r * (n_in / 2);
        uint8_t *dp = b + pl.offset[1] + 2 * r * ng, *mp = b + pl.offset[2] + 2 * r * ng;
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *blk = src + i * NB_Q4_K_BYTES;
            float d = nb_f16_to_f32(nb_q_load_u16(blk)), dmin = nb_f16_to_f32(nb_q_load_u16(blk + 2));
            for (int sub = 0; sub < 8; sub++) {
                int sc, mn;
                nb_k4_scale_min(blk + 4, sub, &sc, &mn);
                float d1 = d * (float)sc, m1 = dmin * (float)mn;
                int64_t g = i * 8 + sub;
                nb_q_store_u16(dp + 2 * g, nb_f32_to_bf16(d1));
                nb_q_store_u16(mp + 2 * g, nb_f32_to_bf16(-m1));
                const uint8_t *c = blk + 16 + 32 * (sub / 2);
                int shift = 4 * (sub % 2);
                uint8_t *out = qs + (i * NB_QK_K + 32 * sub) / 2;
                for (int l = 0; l < 32; l += 2) /* element k: low nibble when k is even */
                    out[l / 2] = (uint8_t)(((c[l] >> shift) & 15) | ((c[l + 1] >> shift) & 15) << 4);
            }
        }
        if (stats) {
            nb_dequant_row_q4_k_ref(src, exact, n_in);
            nb_unpack_row_ref(NB_WPATH_W4A16, 32, blob, &pl, n_in, r, back);
            for (int64_t k = 0; k < n_in; k++) {
                double diff = (double)exact[k] - (double)back[k];
                stats->err_sq += diff * diff;
                stats->ref_sq += (double)exact[k] * exact[k];
            }
        }
    }
    if (r1 == n_out)
        for (int i = 0; i < pl.n_planes; i++) {
            int64_t end = pl.offset[i] + pl.size[i];
            int64_t next = i + 1 < pl.n_planes ? pl.offset[i + 1] : pl.total;
            memset(b + end, 0, (size_t)(next - end));
        }
    free(exact);
    free(back);
    return NB_OK;
}
