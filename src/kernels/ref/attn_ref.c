/* kernels/ref/attn_ref.c — prefill attention tile, the plain way: per row, a pass
 * for the max score, then exp, sum and the weighted sum of values (contract in
 * kernels/kernels.h). Each K / V row is converted to f32 (scratch) as it is read. */
#include <math.h>

#include "kernels/kernels.h"

static float dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* The hd values of position i (k or v) as f32, in buf. */
static const float *row(const struct nb_kv_view *kv, const void *base, int i, int hd, float *buf)
{
    nb_kv_row_load(kv->type, (const char *)base + NB_KV_AT(kv, i), buf, hd);
    return buf;
}

void nb_attn_tile_ref(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                      int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                      float scale, float *scratch)
{
    float *kb = scratch, *vb = scratch + hd;
    for (int t = 0; t < n_tok; t++) {
        int p = qpos[t];
        int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        for (int g = 0; g < n_rep; g++) {
            const float *qr = q + t * ldq + (int64_t)g * hd;
            float *o = out + t * ldo + (int64_t)g * hd;
            float mx = -INFINITY;
            for (int i = lo; i <= p; i++) {
                float s = dot(qr, row(kv, kv->k, i, hd, kb), hd) * scale;
                if (s > mx) mx = s;
            }
            for (int d = 0; d < hd; d++)
                o[d] = 0;
            float sum = 0;
            for (int i = lo; i <= p; i++) {
                float e = expf(dot(qr, row(kv, kv->k, i, hd, kb), hd) * scale -
                               mx);
                sum += e;
                const float *vr = row(kv, kv->v, i, hd, vb);
                for (int d = 0; d < hd; d++)
                    o[d] += e * vr[d];
            }
            for (int d = 0; d < hd; d++)
                o[d] /= sum;
        }
    }
}

void nb_attn_decode_ref(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                        int b, float *out, int64_t ldo, float *scratch)
{
    float *kb = scratch, *vb = scratch + hd;
    for (int r = 0; r < n_rep; r++) {
        const float *qr = q + (int64_t)r * hd;
        float *o = out + r * ldo, mx = -INFINITY, sum = 0;
        for (int i = a; i < b; i++) {
            float s = dot(qr, row(kv, kv->k, i, hd, kb), hd);
            if (s > mx) mx = s;
        }
        for (int d = 0; d < hd; d++)
            o[2 + d] = 0;
        for (int i = a; i < b; i++) {
            float e = expf(dot(qr, row(kv, kv->k, i, hd, kb), hd) - mx);
            sum += e;
            const float *vr = row(kv, kv->v, i, hd, vb);
            for (int d = 0; d < hd; d++)
                o[2 + d] += e * vr[d];
        }
        o[0] = mx;
        o[1] = sum;
    }
}
