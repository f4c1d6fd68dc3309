/* kernels/ref/gemm_x16_ref.c — scalar GEMMs on the NB_LAYOUT_X16 int4 layout
 * (core/wformat.h), so every CPU can run X16 files. They decode each element
 * through kernels/qblock.h and sum in the same order as the ROWS reference kernels
 * (gemm_q_ref.c): for the same matrix they give bit-identical results.
 */
#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

void nb_unpack_row_x16_ref(enum nb_wpath path, int group, const void *w_blob,
                           const struct nb_layout_planes *pl, int64_t n_in, int64_t r, float *out)
{
    const uint8_t *b = w_blob;
    int64_t ng = n_in / group;
    const uint8_t *qs = b + pl->offset[0];
    const uint8_t *dp = b + pl->offset[1];
    const uint8_t *mp = path == NB_WPATH_W4A16 ? b + pl->offset[2] : NULL;
    for (int64_t g = 0; g < ng; g++) {
        int64_t si = nb_x16_sidx(ng, r, g);
        float d = nb_bf16_to_f32(nb_q_load_u16(dp + 2 * si));
        if (path == NB_WPATH_W4A8) {
            for (int64_t k = g * group; k < (g + 1) * group; k++)
                out[k] = nb_q4s_value(d, nb_q4x16_get(qs, n_in, r, k));
        } else {
            float m = nb_bf16_to_f32(nb_q_load_u16(mp + 2 * si));
            for (int64_t k = g * group; k < (g + 1) * group; k++)
                out[k] = nb_q4a_value(d, m, nb_q4x16_get(qs, n_in, r, k));
        }
    }
}

void nb_gemm_w4a8_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0, int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    const uint8_t *b = w_blob;
    const uint8_t *qs = b + pl.offset[0];
    const uint8_t *dp = b + pl.offset[1];
    int64_t ng = n_in / group;
    for (int64_t r = r0; r < r1; r++) {
        for (int t = 0; t < n_tok; t++) {
            const int8_t *a = xq + t * ldxq;
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                int32_t isum = 0;
                for (int64_t k = g * group; k < (g + 1) * group; k++)
                    isum += nb_q4x16_get(qs, n_in, r, k) * (int32_t)a[k];
                float dw = nb_bf16_to_f32(nb_q_load_u16(dp + 2 * nb_x16_sidx(ng, r, g)));
                acc += dw * xd[t * ldxg + g] * (float)(isum - 8 * xsum[t * ldxg + g]);
            }
            y[t * ldy + r] = acc;
        }
    }
}

void nb_gemm_w4a16_x16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                           int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0,
                           int64_t r1, float *scratch)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A16, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    for (int64_t r = r0; r < r1; r++) {
        nb_unpack_row_x16_ref(NB_WPATH_W4A16, group, w_blob, &pl, n_in, r, scratch);
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, scratch, n_in);
    }
}
