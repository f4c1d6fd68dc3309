/* kernels/arm/attn_neon.c — the KV-cache row conversions and the attention kernels with
 * NEON (armv8.0). Contracts in kernels/kernels.h.
 *
 * Rows: f16 <-> f32 by fcvtl / fcvtn (round to nearest even, gradual underflow, overflow
 * to inf, as core/fp.h does; a NaN is stored as core/fp.h's 0x7e00 with its sign), bf16
 * by shifts with the reference's rounding in integers, q8_0 with the reference's
 * arithmetic (f16 scale, x * (1 / d) rounded to nearest even, clamped to +-127): every
 * conversion is bit-identical to nb_kv_row_load / nb_kv_row_store.
 *
 * Attention: one pass over the keys in ascending order with an online softmax (running
 * max m, sum l, accumulator rescaled by e^(m_old - m_new) when the max grows); each K / V
 * row is converted once and used by every query row that attends to it (the GQA group in
 * decode, up to NB_ATTN_ROWS rows of a prefill tile). Dots with 4-lane FMAs, exp by expf.
 * Another summation order than the reference's two passes: within TOL_ATTN / TOL_SCORE
 * of tests/test_kernels_vec.c (which runs every attention kernel this CPU has).
 * Not measured on hardware.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"

/* ---------------------------------------------------------------- KV-cache rows */

void nb_kv_row_load_neon(int type, const void *src, float *dst, int64_t n)
{
    int64_t i = 0;
    switch (type) {
    case NB_KVE_F16: {
        const uint16_t *h = src;
        for (; i + 4 <= n; i += 4) {
            uint16x4_t v = vld1_u16(h + i);
            float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(v));
            /* a NaN keeps core/fp.h's bits (fcvtl would quiet a signalling one) */
            uint32x4_t nan = vmovl_u16(vcgt_u16(vand_u16(v, vdup_n_u16(0x7fff)), vdup_n_u16(0x7c00)));
            uint32x4_t raw = vorrq_u32(vshlq_n_u32(vmovl_u16(vand_u16(v, vdup_n_u16(0x8000))), 16),
                                       vorrq_u32(vdupq_n_u32(0x7f800000u),
                                                 vshlq_n_u32(vmovl_u16(vand_u16(v, vdup_n_u16(0x3ff))), 13)));
            vst1q_f32(dst + i, vbslq_f32(nan, vreinterpretq_f32_u32(raw), f));
        }
        for (; i < n; i++)
            dst[i] = nb_f16_to_f32(h[i]);
        break;
    }
    case NB_KVE_BF16: {
        const uint16_t *h = src;
        for (; i + 4 <= n; i += 4)
            vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h + i), 16)));
        for (; i < n; i++)
            dst[i] = nb_bf16_to_f32(h[i]);
        break;
    }
    case NB_KVE_Q8_0: {
        const uint8_t *b = src;
        for (int64_t g = 0; g < n; g += 32, b += 34) {
            uint16_t dh;
            memcpy(&dh, b, 2);
            const float32x4_t d = vdupq_n_f32(nb_f16_to_f32(dh));
            for (int j = 0; j < 32; j += 8) {
                int16x8_t q = vmovl_s8(vld1_s8((const int8_t *)b + 2 + j));
                vst1q_f32(dst + g + j, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(q)))));
                vst1q_f32(dst + g + j + 4, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_high_s16(q)))));
            }
        }
        break;
    }
    default: memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

/* 4 floats -> 4 f16, bit-identical to nb_f32_to_f16 */
static inline uint16x4_t f16x4(float32x4_t f)
{
    uint32x4_t u = vreinterpretq_u32_f32(f);
    uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(f));
    uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    uint16x4_t canon = vorr_u16(vmovn_u32(vshrq_n_u32(vandq_u32(u, vdupq_n_u32(0x80000000u)), 16)),
                                vdup_n_u16(0x7e00));
    return vbsl_u16(vmovn_u32(nan), canon, h);
}

void nb_kv_row_store_neon(int type, const float *src, void *dst, int64_t n)
{
    int64_t i = 0;
    switch (type) {
    case NB_KVE_F16: {
        uint16_t *h = dst;
        for (; i + 4 <= n; i += 4)
            vst1_u16(h + i, f16x4(vld1q_f32(src + i)));
        for (; i < n; i++)
            h[i] = nb_f32_to_f16(src[i]);
        break;
    }
    case NB_KVE_BF16: {
        uint16_t *h = dst;
        for (; i + 4 <= n; i += 4) {
            uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(src + i));
            uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)),
                                       vdupq_n_u32(0x7f800000u));
            uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
            uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), odd)), 16);
            uint32x4_t qn = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
            vst1_u16(h + i, vmovn_u32(vbslq_u32(nan, qn, r)));
        }
        for (; i < n; i++)
            h[i] = nb_f32_to_bf16(src[i]);
        break;
    }
    case NB_KVE_Q8_0: {
        uint8_t *b = dst;
        for (int64_t g = 0; g < n; g += 32, b += 34) {
            float32x4_t x[8], mx = vdupq_n_f32(0);
            for (int j = 0; j < 8; j++) {
                x[j] = vld1q_f32(src + g + 4 * j);
                mx = vmaxnmq_f32(mx, vabsq_f32(x[j]));
            }
            uint16_t dh = nb_f32_to_f16(vmaxnmvq_f32(mx) / 127.0f);
            float d = nb_f16_to_f32(dh), id = d > 0 ? 1.0f / d : 0.0f;
            memcpy(b, &dh, 2);
            const float32x4_t idv = vdupq_n_f32(id);
            const float32x4_t lim = vdupq_n_f32(127.0f), nlim = vdupq_n_f32(-127.0f);
            int16x4_t q16[8];
            for (int j = 0; j < 8; j++) {
                float32x4_t r = vrndnq_f32(vmulq_f32(x[j], idv));
                r = vminq_f32(vmaxq_f32(r, nlim), lim);
                q16[j] = vmovn_s32(vcvtq_s32_f32(r));
            }
            for (int j = 0; j < 4; j++)
                vst1_s8((int8_t *)b + 2 + 8 * j,
                        vmovn_s16(vcombine_s16(q16[2 * j], q16[2 * j + 1])));
        }
        break;
    }
    default: memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

/* ---------------------------------------------------------------- attention */

static inline float dot4(const float *a, const float *b, int n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* o = o * alpha + e * v (hd floats) */
static inline void rescale_add(float *o, float alpha, float e, const float *v, int n)
{
    const float32x4_t av = vdupq_n_f32(alpha), ev = vdupq_n_f32(e);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(o + i, vfmaq_f32(vmulq_f32(vld1q_f32(o + i), av), ev, vld1q_f32(v + i)));
    for (; i < n; i++)
        o[i] = o[i] * alpha + e * v[i];
}

/* One key of the online softmax for one row: score s, value row v. */
static inline void online_step(float *m, float *l, float *o, float s, const float *v, int hd)
{
    if (s > *m) {
        float alpha = expf(*m - s); /* 0 for the first key (m = -inf) */
        *l *= alpha;
        *m = s;
        *l += 1.0f;
        rescale_add(o, alpha, 1.0f, v, hd);
    } else {
        float e = expf(s - *m);
        *l += e;
        rescale_add(o, 1.0f, e, v, hd);
    }
}

static const float *kv_row(const struct nb_kv_view *kv, const void *base, int i, int hd,
                           float *buf)
{
    if (kv->type == NB_KVE_F32) return (const float *)((const char *)base + NB_KV_AT(kv, i));
    nb_kv_row_load_neon(kv->type, (const char *)base + NB_KV_AT(kv, i), buf, hd);
    return buf;
}

void nb_attn_decode_neon(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                         int b, float *out, int64_t ldo, float *scratch)
{
    float *kb = scratch, *vb = scratch + hd;
    for (int r = 0; r < n_rep; r++) {
        float *o = out + r * ldo;
        o[0] = -INFINITY;
        o[1] = 0;
        memset(o + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int i = a; i < b; i++) {
        const float *kr = kv_row(kv, kv->k, i, hd, kb);
        const float *vr = kv_row(kv, kv->v, i, hd, vb);
        for (int r = 0; r < n_rep; r++) {
            float *o = out + r * ldo;
            online_step(&o[0], &o[1], o + 2, dot4(q + (int64_t)r * hd, kr, hd), vr, hd);
        }
    }
}

void nb_attn_tile_neon(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                       int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                       float scale, float *scratch)
{
    float *kb = scratch, *vb = scratch + hd;
    float m[NB_ATTN_ROWS], l[NB_ATTN_ROWS];
    int lo_all = 0, hi_all = -1;
    for (int t = 0; t < n_tok; t++) {
        int p = qpos[t], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        if (t == 0 || lo < lo_all) lo_all = lo;
        if (p > hi_all) hi_all = p;
        for (int g = 0; g < n_rep; g++) {
            m[t * n_rep + g] = -INFINITY, l[t * n_rep + g] = 0;
            memset(out + t * ldo + (int64_t)g * hd, 0, sizeof(float) * (size_t)hd);
        }
    }
    for (int i = lo_all; i <= hi_all; i++) {
        const float *kr = NULL, *vr = NULL;
        for (int t = 0; t < n_tok; t++) {
            int p = qpos[t], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
            if (i < lo || i > p) continue;
            if (!kr) {
                kr = kv_row(kv, kv->k, i, hd, kb);
                vr = kv_row(kv, kv->v, i, hd, vb);
            }
            for (int g = 0; g < n_rep; g++) {
                int row = t * n_rep + g;
                float s = dot4(q + t * ldq + (int64_t)g * hd, kr, hd) * scale;
                online_step(&m[row], &l[row], out + t * ldo + (int64_t)g * hd, s, vr, hd);
            }
        }
    }
    for (int t = 0; t < n_tok; t++)
        for (int g = 0; g < n_rep; g++) {
            float *o = out + t * ldo + (int64_t)g * hd;
            const float32x4_t inv = vdupq_n_f32(1.0f / l[t * n_rep + g]);
            int d = 0;
            for (; d + 4 <= hd; d += 4)
                vst1q_f32(o + d, vmulq_f32(vld1q_f32(o + d), inv));
            for (; d < hd; d++)
                o[d] *= 1.0f / l[t * n_rep + g];
        }
}
