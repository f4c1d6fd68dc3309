/* quant/kquant.c — float rows into GGUF Q6_K and Q8_0 blocks (quant/kquant.h). */
#include "quant/kquant.h"

#include <math.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/qblock.h"

#define SWEEP 10 /* candidates i in -SWEEP..SWEEP, steps of 0.1 level */

/* q = clamp(round-half-even(x / s), lo, hi); s != 0. */
static int code(float x, float s, int lo, int hi)
{
    float v = nearbyintf(x / s);
    return v < (float)lo ? lo : v > (float)hi ? hi : (int)v;
}

/* sum w (x - s q)^2 with q chosen for s; *sxq, *sqq: sum w x q and sum w q^2 (the refit). */
static double score(const float *x, const float *w, int n, float s, int lo, int hi, double *sxq,
                    double *sqq)
{
    double e = 0, a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        int q = code(x[i], s, lo, hi);
        double r = (double)x[i] - (double)s * q;
        e += w[i] * r * r;
        a += (double)w[i] * x[i] * q;
        b += (double)w[i] * q * q;
    }
    *sxq = a, *sqq = b;
    return e;
}

/* The scale of n values on the signed grid -nmax..nmax-1 (kquant.h's search); 0 for an
 * all-zero sub-block. */
static float best_scale(const float *x, const float *w, int n, int nmax)
{
    float big = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(big)) big = x[i];
    if (big == 0) return 0;
    float best = -big / (float)nmax;
    double best_e = INFINITY;
    for (int i = -SWEEP; i <= SWEEP; i++) {
        float s = -big / ((float)nmax + 0.1f * (float)i);
        double a, b;
        double e = score(x, w, n, s, -nmax, nmax - 1, &a, &b);
        if (e < best_e) best_e = e, best = s;
        if (b > 0 && a != 0) { /* the least-squares scale of these codes */
            float s2 = (float)(a / b);
            double e2 = score(x, w, n, s2, -nmax, nmax - 1, &a, &b);
            if (e2 < best_e) best_e = e2, best = s2;
        }
    }
    return best;
}

/* One Q6_K block (210 bytes, kernels/qblock.h) of 256 values. */
static void q6_k_block(const float *x, const float *w, uint8_t *b)
{
    float sc[16], big = 0;
    for (int s = 0; s < 16; s++) {
        sc[s] = best_scale(x + 16 * s, w + 16 * s, 16, 32);
        if (fabsf(sc[s]) > fabsf(big)) big = sc[s];
    }
    int8_t *isc = (int8_t *)(b + 192);
    uint16_t d16 = nb_f32_to_f16(big / -128.0f);
    float d = nb_f16_to_f32(d16);
    nb_q_store_u16(b + 208, d16);
    for (int s = 0; s < 16; s++)
        isc[s] = (int8_t)(d != 0 ? code(sc[s], d, -128, 127) : 0);
    uint8_t u[NB_QK_K];
    for (int e = 0; e < NB_QK_K; e++) {
        float dl = d * (float)isc[e / 16]; /* the decoder's value of the scale */
        u[e] = (uint8_t)((dl != 0 ? code(x[e], dl, -32, 31) : 0) + 32);
    }
    nb_q6_k_put_codes(b, u);
}

void nb_q6_k_put_codes(uint8_t *b, const uint8_t *u)
{
    uint8_t *ql = b, *qh = b + 128;
    memset(ql, 0, 192);
    for (int e = 0; e < NB_QK_K; e++) {
        int h = e / 128, r = e % 128;
        ql[64 * h + r % 64] |= (uint8_t)((u[e] & 15) << (4 * (r / 64)));
        qh[32 * h + r % 32] |= (uint8_t)((u[e] >> 4) << (2 * (r / 32)));
    }
}

/* One Q8_0 block (34 bytes) of 32 values: absmax / 127 as f16, codes against it. */
static void q8_0_block(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    uint16_t d16 = nb_f32_to_f16(amax / 127.0f);
    float d = nb_f16_to_f32(d16);
    nb_q_store_u16(b, d16);
    for (int i = 0; i < 32; i++) b[2 + i] = (uint8_t)(int8_t)(d != 0 ? code(x[i], d, -127, 127) : 0);
}

enum nb_status nb_kquant_rows(enum nb_wformat fmt, const float *x, int64_t n_out, int64_t n_in,
                              const float *imp, int64_t r0, int64_t r1, void *dst)
{
    struct nb_block_info bi;
    if ((fmt != NB_WF_Q6_K && fmt != NB_WF_Q8_0) || !nb_wformat_block(fmt, &bi))
        return nb_set_error(NB_ERR_INVALID_ARG, "nibble writes Q6_K and Q8_0 blocks, not format %d",
                            (int)fmt);
    if (n_in <= 0 || n_in % bi.elems || r0 < 0 || r0 > r1 || r1 > n_out)
        return nb_set_error(NB_ERR_INVALID_ARG, "%lld x %lld rows [%lld, %lld): not whole blocks of "
                            "%d or a bad range", (long long)n_out, (long long)n_in, (long long)r0,
                            (long long)r1, bi.elems);
    const int64_t nb = n_in / bi.elems, row_bytes = nb * bi.bytes;
    float w[NB_QK_K];
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * n_in;
        uint8_t *out = (uint8_t *)dst + r * row_bytes;
        for (int64_t i = 0; i < nb; i++) {
            const float *xb = xr + i * bi.elems;
            if (fmt == NB_WF_Q8_0) {
                q8_0_block(xb, out + i * bi.bytes);
                continue;
            }
            for (int k = 0; k < NB_QK_K; k++) /* the importance, or the value's own square */
                w[k] = imp ? imp[i * NB_QK_K + k] : xb[k] * xb[k];
            q6_k_block(xb, w, out + i * bi.bytes);
        }
    }
    return NB_OK;
}
