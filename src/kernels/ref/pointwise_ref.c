/* kernels/ref/pointwise_ref.c — element-wise ops of the forward pass, scalar: the
 * gated activation of the MLP and RMSNorm, and the KV cache's row conversions. The
 * ground truth for the SIMD variants. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"

static float act_one(float g, enum nb_glu_act act)
{
    if (act == NB_GLU_GELU_TANH) {
        const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
        return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g)));
    }
    return g / (1.0f + expf(-g));
}

void nb_glu_ref(float *out, const float *gate, const float *up, int64_t n, enum nb_glu_act act)
{
    for (int64_t i = 0; i < n; i++) out[i] = act_one(gate[i], act) * up[i];
}

void nb_rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* ---------------------------------------------------------------- KV-cache rows */

void nb_kv_row_load(int type, const void *src, float *dst, int64_t n)
{
    switch (type) {
    case NB_KVE_F16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = nb_f16_to_f32(h[i]);
        break;
    }
    case NB_KVE_BF16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = nb_bf16_to_f32(h[i]);
        break;
    }
    case NB_KVE_Q8_0: {
        const uint8_t *b = src;
        for (int64_t g = 0; g < n; g += 32, b += 34) {
            uint16_t dh;
            memcpy(&dh, b, 2);
            float d = nb_f16_to_f32(dh);
            for (int i = 0; i < 32; i++) dst[g + i] = d * (float)(int8_t)b[2 + i];
        }
        break;
    }
    default: memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

void nb_kv_row_store(int type, const float *src, void *dst, int64_t n)
{
    switch (type) {
    case NB_KVE_F16: {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = nb_f32_to_f16(src[i]);
        break;
    }
    case NB_KVE_BF16: {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = nb_f32_to_bf16(src[i]);
        break;
    }
    case NB_KVE_Q8_0: {
        uint8_t *b = dst;
        for (int64_t g = 0; g < n; g += 32, b += 34) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(src[g + i]));
            uint16_t dh = nb_f32_to_f16(amax / 127.0f);
            float d = nb_f16_to_f32(dh), id = d > 0 ? 1.0f / d : 0.0f;
            memcpy(b, &dh, 2);
            for (int i = 0; i < 32; i++) {
                float r = nearbyintf(src[g + i] * id);
                b[2 + i] = (uint8_t)(int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
            }
        }
        break;
    }
    default: memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}
