/* kernels/ref/pointwise_ref.c — element-wise ops of the forward pass, scalar: the
 * gated activation of the MLP and RMSNorm. The ground truth for the SIMD variants. */
#include <math.h>

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
