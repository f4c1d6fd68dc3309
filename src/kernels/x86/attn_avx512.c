/* kernels/x86/attn_avx512.c — prefill attention tile with AVX-512 (contract in
 * kernels/kernels.h; scalar twin: kernels/ref/attn_ref.c).
 *
 * The tile's rows (tokens x heads of one GQA group, up to 32) live in the lanes of
 * one or two vectors, so nothing needs a horizontal sum: the queries are transposed
 * once into qt[hd][32] (pre-scaled), and for each block of 16 keys the score of key j
 * is sum_d k_j[d] * qt[d][:] (broadcast FMAs). The online softmax (running max m, sum
 * l, rescale alpha of the output accumulator) is then lane-wise too; the weights go
 * through scratch (pt[16][32]) to be broadcast for the P.V update of each output row,
 * which accumulates in place in `out`. Each K / V row is read once per tile (a 16-bit
 * or q8_0 cache's rows converted to f32 as a block of 16 keys is loaded). exp is a
 * degree-6 polynomial with scalef (about 2 ulp), so results differ from the reference
 * by rounding only (tests: test_kernels_vec.c).
 */
#include <float.h>
#include <immintrin.h>
#include <limits.h>
#include <string.h>

#include "kernels/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* Scores of keys kr[0..16) against the NV*16 lanes of qt: s[j][v]. */
ALWAYS_INLINE void scores(int NV, __m512 s[16][2], const float *const *kr, int nk, const float *qt,
                          int hd)
{
    for (int j0 = 0; j0 < 16; j0 += 8) {
        __m512 a[8][2];
        for (int j = 0; j < 8; j++)
            a[j][0] = a[j][1] = _mm512_setzero_ps();
        if (j0 < nk) {
            for (int d = 0; d < hd; d++) {
                __m512 x0 = _mm512_loadu_ps(qt + d * 32);
                __m512 x1 = NV == 2 ? _mm512_loadu_ps(qt + d * 32 + 16) : _mm512_setzero_ps();
                for (int j = 0; j < 8; j++) {
                    __m512 kk = _mm512_set1_ps(kr[j0 + j][d]);
                    a[j][0] = _mm512_fmadd_ps(kk, x0, a[j][0]);
                    if (NV == 2) a[j][1] = _mm512_fmadd_ps(kk, x1, a[j][1]);
                }
            }
        }
        for (int j = 0; j < 8; j++) {
            s[j0 + j][0] = a[j][0];
            s[j0 + j][1] = a[j][1];
        }
    }
}

/* One block of keys kb .. kb+nk-1: scores, online-softmax update of m / l (per lane),
 * weights to pt, alpha to al. */
ALWAYS_INLINE void softmax_block(int NV, __m512 s[16][2], int kb, int nk, const int32_t *qp,
                                 int window, __m512 *m, __m512 *l, float *pt, float *al)
{
    for (int v = 0; v < NV; v++) {
        __m512i qv = _mm512_loadu_si512(qp + 16 * v);
        __mmask16 valid[16];
        __m512 mx = m[v];
        for (int j = 0; j < 16; j++) {
            __m512i kp = _mm512_set1_epi32(kb + j);
            __mmask16 mk = j < nk ? _mm512_cmple_epi32_mask(kp, qv) : 0;
            if (window > 0)
                mk &= _mm512_cmplt_epi32_mask(_mm512_sub_epi32(qv, kp), _mm512_set1_epi32(window));
            valid[j] = mk;
            mx = _mm512_mask_max_ps(mx, mk, mx, s[j][v]);
        }
        __m512 alpha = exp512(_mm512_sub_ps(m[v], mx));
        m[v] = mx;
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < 16; j++) {
            __m512 p = _mm512_maskz_mov_ps(valid[j], exp512(_mm512_sub_ps(s[j][v], mx)));
            sum = _mm512_add_ps(sum, p);
            _mm512_storeu_ps(pt + j * 32 + 16 * v, p);
        }
        l[v] = _mm512_fmadd_ps(l[v], alpha, sum);
        _mm512_storeu_ps(al + 16 * v, alpha);
    }
}

/* out rows o0, o1 = alpha * out + sum_j p_j v_j, for lanes r0, r0 + 1 of pt / al. */
static void pv_pair(float *o0, float *o1, int r0, const float *pt, const float *al,
                    const float *const *vr, int nk, int hd)
{
    __m512 a0 = _mm512_set1_ps(al[r0]), a1 = _mm512_set1_ps(al[r0 + 1]);
    for (int d0 = 0; d0 < hd; d0 += 64) {
        __mmask16 mk[4];
        __m512 c0[4], c1[4];
        for (int i = 0; i < 4; i++) {
            int rem = hd - d0 - 16 * i;
            mk[i] = rem >= 16 ? (__mmask16)0xffff : rem <= 0 ? 0 : (__mmask16)((1u << rem) - 1);
            c0[i] = _mm512_mul_ps(a0, _mm512_maskz_loadu_ps(mk[i], o0 + d0 + 16 * i));
            c1[i] = _mm512_mul_ps(a1, _mm512_maskz_loadu_ps(mk[i], o1 + d0 + 16 * i));
        }
        for (int j = 0; j < nk; j++) {
            __m512 p0 = _mm512_set1_ps(pt[j * 32 + r0]), p1 = _mm512_set1_ps(pt[j * 32 + r0 + 1]);
            for (int i = 0; i < 4; i++) {
                __m512 vv = _mm512_maskz_loadu_ps(mk[i], vr[j] + d0 + 16 * i);
                c0[i] = _mm512_fmadd_ps(p0, vv, c0[i]);
                c1[i] = _mm512_fmadd_ps(p1, vv, c1[i]);
            }
        }
        for (int i = 0; i < 4; i++) {
            _mm512_mask_storeu_ps(o0 + d0 + 16 * i, mk[i], c0[i]);
            _mm512_mask_storeu_ps(o1 + d0 + 16 * i, mk[i], c1[i]);
        }
    }
}

/* A K / V row of a 16-bit or q8_0 cache as hd floats in dst: 16 lanes at a time, the
 * tail (hd not a multiple of 16) by the reference. */
static void load_row(int type, const void *src, float *dst, int hd)
{
    nb_kv_row_load_avx512(type, src, dst, hd);
}

void nb_kv_row_load_avx512(int type, const void *src, float *dst, int64_t hd)
{
    int64_t d = 0;
    if (type == NB_KVE_F16 || type == NB_KVE_BF16) {
        const uint16_t *h = src;
        for (; d + 16 <= hd; d += 16) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(h + d));
            __m512 f = type == NB_KVE_F16
                           ? _mm512_cvtph_ps(x)
                           : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
            _mm512_storeu_ps(dst + d, f);
        }
        if (d < hd) nb_kv_row_load(type, h + d, dst + d, hd - d);
        return;
    }
    if (type == NB_KVE_Q8_0) { /* hd is a multiple of 32 */
        const uint8_t *b = src;
        for (; d < hd; d += 32, b += 34) {
            uint16_t dh;
            memcpy(&dh, b, 2);
            __m512 sc = _mm512_set1_ps(_cvtsh_ss(dh));
            for (int i = 0; i < 32; i += 16) {
                __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + i));
                _mm512_storeu_ps(dst + d + i,
                                 _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
            }
        }
        return;
    }
    nb_kv_row_load(type, src, dst, hd);
}

ALWAYS_INLINE void tile(int NV, float *const *orow, int R, const int32_t *qp, const float *qt,
                        int hd, const void *k, const void *v, int64_t ldkv, int kv_type,
                        const int32_t *blocks, int bshift, int window,
                        int kmin, int kmax, float *pt, float *al, float *ls, float *conv)
{
    __m512 m[2] = {_mm512_set1_ps(-FLT_MAX), _mm512_set1_ps(-FLT_MAX)};
    __m512 l[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int kb = kmin; kb <= kmax; kb += 16) {
        int nk = kmax - kb + 1 < 16 ? kmax - kb + 1 : 16;
        const float *kr[16], *vr[16];
        for (int j = 0; j < 16; j++) {
            int p = kb + (j < nk ? j : nk - 1);
            int64_t at = NB_KV_SLOT(blocks, bshift, p) * ldkv;
            const char *ks = (const char *)k + at, *vs = (const char *)v + at;
            if (kv_type == NB_KVE_F32) {
                kr[j] = (const float *)ks;
                vr[j] = (const float *)vs;
            } else if (j < nk) { /* converted once per tile and key */
                float *kd = conv + (int64_t)j * hd, *vd = conv + (int64_t)(16 + j) * hd;
                load_row(kv_type, ks, kd, hd);
                load_row(kv_type, vs, vd, hd);
                kr[j] = kd;
                vr[j] = vd;
            } else {
                kr[j] = kr[nk - 1];
                vr[j] = vr[nk - 1];
            }
        }
        __m512 s[16][2];
        scores(NV, s, kr, nk, qt, hd);
        softmax_block(NV, s, kb, nk, qp, window, m, l, pt, al);
        for (int r = 0; r < R; r += 2)
            pv_pair(orow[r], orow[r + 1], r, pt, al, vr, nk, hd);
    }
    for (int i = 0; i < NV; i++)
        _mm512_storeu_ps(ls + 16 * i, l[i]);
}

void nb_attn_tile_avx512(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                         int hd, const int32_t *qpos, const void *k, const void *v, int64_t ldkv,
                         int kv_type, const int32_t *blocks, int bshift, int window, float scale,
                         float *scratch)
{
    int R = n_tok * n_rep;
    float *qt = scratch;               /* [hd][32] */
    float *pt = qt + (int64_t)hd * 32; /* [16][32] */
    float *al = pt + 16 * 32;          /* [32] */
    float *ls = al + 32;               /* [32] */
    float *dummy = ls + 32;            /* [hd] output of the pad row of an odd tile */
    float *conv = dummy + hd;          /* [32][hd] K / V rows of a 16-bit or q8_0 cache */
    int32_t qp[32];
    float *orow[NB_ATTN_ROWS + 1];
    int pmin = INT_MAX, pmax = -1;
    for (int t = 0; t < n_tok; t++) {
        if (qpos[t] < pmin) pmin = qpos[t];
        if (qpos[t] > pmax) pmax = qpos[t];
    }
    for (int r = 0; r < 32; r++)
        qp[r] = r < R ? qpos[r / n_rep] : -1;
    memset(qt, 0, sizeof(float) * (size_t)hd * 32);
    memset(dummy, 0, sizeof(float) * (size_t)hd);
    for (int r = 0; r < R; r++) {
        const float *qr = q + (r / n_rep) * ldq + (int64_t)(r % n_rep) * hd;
        for (int d = 0; d < hd; d++)
            qt[d * 32 + r] = qr[d] * scale;
        orow[r] = out + (r / n_rep) * ldo + (int64_t)(r % n_rep) * hd;
        memset(orow[r], 0, sizeof(float) * (size_t)hd);
    }
    orow[R] = dummy;
    if (R == 0) return;
    int kmin = window > 0 && pmin - window + 1 > 0 ? pmin - window + 1 : 0;
    if (R > 16)
        tile(2, orow, R, qp, qt, hd, k, v, ldkv, kv_type, blocks, bshift, window, kmin, pmax, pt,
             al, ls, conv);
    else
        tile(1, orow, R, qp, qt, hd, k, v, ldkv, kv_type, blocks, bshift, window, kmin, pmax, pt,
             al, ls, conv);
    for (int r = 0; r < R; r++) {
        __m512 inv = _mm512_set1_ps(1.0f / ls[r]);
        for (int d = 0; d < hd; d += 16) {
            int rem = hd - d;
            __mmask16 mk = rem >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rem) - 1);
            _mm512_mask_storeu_ps(orow[r] + d, mk,
                                  _mm512_mul_ps(inv, _mm512_maskz_loadu_ps(mk, orow[r] + d)));
        }
    }
}
