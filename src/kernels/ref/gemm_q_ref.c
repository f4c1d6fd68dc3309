/* kernels/ref/gemm_q_ref.c — scalar GEMMs against packed int4 / int8 weights and
 * the int8 activation quantizer: the ground truth the SIMD kernels are tested
 * against. Layouts: core/wformat.h; element decoding: kernels/qblock.h.
 *
 *   w4a8, one output row r, one token t, group g (G codes each):
 *     qs row r:  [ byte k/2: hi = k odd | lo = k even ] ... n_in/2 bytes
 *     d  row r:  [ bf16 d_0 | bf16 d_1 | ... ]           n_in/G scales
 *     acc_g = sum_{k in g} qw_k * qa_k                   (int32, qw in 0..15)
 *     y    += d_g * xd_g * (acc_g - 8 * xsum_g)          (f32, g ascending)
 */
#include <math.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

void nb_act_quant_q8_ref(const float *x, int64_t n, int group, int8_t *q, float *d, int32_t *gsum)
{
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        int8_t *qg = q + g * group;
        float amax = 0.0f;
        for (int i = 0; i < group; i++)
            amax = fmaxf(amax, fabsf(xg[i]));
        float dg = amax / 127.0f;
        int32_t sum = 0;
        for (int i = 0; i < group; i++) {
            float v = dg > 0.0f ? nearbyintf(xg[i] / dg) : 0.0f;
            v = fminf(fmaxf(v, -127.0f), 127.0f);
            qg[i] = (int8_t)v;
            sum += qg[i];
        }
        d[g] = dg;
        gsum[g] = sum;
    }
}

void nb_unpack_row_ref(enum nb_wpath path, int group, const void *w_blob,
                       const struct nb_layout_planes *pl, int64_t n_in, int64_t r, float *out)
{
    const uint8_t *b = w_blob;
    switch (path) {
    case NB_WPATH_F32: memcpy(out, b + pl->offset[0] + 4 * r * n_in, (size_t)n_in * 4); break;
    case NB_WPATH_BF16: {
        const uint8_t *row = b + pl->offset[0] + 2 * r * n_in;
        for (int64_t k = 0; k < n_in; k++)
            out[k] = nb_bf16_to_f32(nb_q_load_u16(row + 2 * k));
        break;
    }
    case NB_WPATH_W8A16: {
        const int8_t *row = (const int8_t *)(b + pl->offset[0] + r * n_in);
        float d;
        memcpy(&d, b + pl->offset[1] + 4 * r, 4);
        for (int64_t k = 0; k < n_in; k++)
            out[k] = nb_q8_value(d, row[k]);
        break;
    }
    case NB_WPATH_W4A16:
    case NB_WPATH_W4A8: {
        int64_t ng = n_in / group;
        const uint8_t *row = b + pl->offset[0] + r * (n_in / 2);
        const uint8_t *dp = b + pl->offset[1] + 2 * r * ng;
        const uint8_t *mp = path == NB_WPATH_W4A16 ? b + pl->offset[2] + 2 * r * ng : NULL;
        for (int64_t g = 0; g < ng; g++) {
            float d = nb_bf16_to_f32(nb_q_load_u16(dp + 2 * g));
            if (path == NB_WPATH_W4A8) {
                for (int64_t k = g * group; k < (g + 1) * group; k++)
                    out[k] = nb_q4s_value(d, nb_q4_get(row, k));
            } else {
                float m = nb_bf16_to_f32(nb_q_load_u16(mp + 2 * g));
                for (int64_t k = g * group; k < (g + 1) * group; k++)
                    out[k] = nb_q4a_value(d, m, nb_q4_get(row, k));
            }
        }
        break;
    }
    default: break;
    }
}

void nb_gemm_w4a8_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                      int64_t ldxq, int64_t ldxg, const void *w_blob, int64_t n_out, int64_t n_in,
                      int group, int n_tok, int64_t r0, int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes(NB_WPATH_W4A8, group, n_out, n_in, &pl)) return;
    const uint8_t *b = w_blob;
    int64_t ng = n_in / group;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = b + pl.offset[0] + r * (n_in / 2);
        const uint8_t *dp = b + pl.offset[1] + 2 * r * ng;
        for (int t = 0; t < n_tok; t++) {
            const int8_t *a = xq + t * ldxq;
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                int32_t isum = 0;
                for (int64_t k = g * group; k < (g + 1) * group; k++)
                    isum += nb_q4_get(row, k) * (int32_t)a[k];
                float dw = nb_bf16_to_f32(nb_q_load_u16(dp + 2 * g));
                acc += dw * xd[t * ldxg + g] * (float)(isum - 8 * xsum[t * ldxg + g]);
            }
            y[t * ldy + r] = acc;
        }
    }
}

void nb_gemm_w4a16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                       int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0, int64_t r1,
                       float *scratch)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes(NB_WPATH_W4A16, group, n_out, n_in, &pl)) return;
    for (int64_t r = r0; r < r1; r++) {
        nb_unpack_row_ref(NB_WPATH_W4A16, group, w_blob, &pl, n_in, r, scratch);
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, scratch, n_in);
    }
}

void nb_gemm_w8a16_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w_blob,
                       int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1,
                       float *scratch)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes(NB_WPATH_W8A16, 0, n_out, n_in, &pl)) return;
    for (int64_t r = r0; r < r1; r++) {
        nb_unpack_row_ref(NB_WPATH_W8A16, 0, w_blob, &pl, n_in, r, scratch);
        for (int t = 0; t < n_tok; t++)
            y[t * ldy + r] = nb_dot_f32_ref(x + t * ldx, scratch, n_in);
    }
}
