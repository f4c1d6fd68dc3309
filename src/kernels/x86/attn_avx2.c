/* kernels/x86/attn_avx2.c — attention with AVX2 + FMA + F16C, for CPUs without AVX-512
 * (contracts in kernels/kernels.h; scalar twins: kernels/ref/attn_ref.c; the AVX-512
 * versions, attn_avx512.c, are the same algorithms on 16 lanes).
 *
 * Prefill tile: the tile's rows (up to 32) sit in the lanes of NV = ceil(rows / 8)
 * vectors. The queries are transposed once into qt[hd][32] (pre-scaled); the scores of
 * a block of 16 keys are broadcast FMAs k_j[d] * qt[d][:] written to pt[16][32]; the
 * online softmax (running max m, sum l, rescale alpha) is lane-wise and overwrites pt
 * with the weights, which are broadcast for the P.V update of pairs of output rows,
 * accumulated in place in `out`. Each K / V row is read once per tile (a 16-bit or q8_0
 * cache's rows converted to f32 as their block is loaded). No FTZ / DAZ, as on AVX-512.
 *
 * Decode: blocks of 16 keys; each K row read (and converted) once for up to 4 query
 * rows, one dot product per (row, key) with a horizontal sum; the block's softmax update
 * on 2 x 8 lanes; each V row converted once and read by every row's accumulator. As on
 * AVX-512: FTZ / DAZ for the kernel's duration and weights below e^-80 exactly 0 (the
 * rescale factor too), so denormal products cost no microcode assists. hd not a
 * multiple of 16, or more than 8 rows: the reference.
 *
 * exp is the AVX-512 file's degree-6 polynomial (about 2 ulp) with 2^n built in the
 * exponent field, so results differ from the reference by rounding only (tests:
 * test_kernels_vec.c).
 *
 * Measured (bench/bench_attn 15, release build, one thread of the 2-core Zen 5 dev VM,
 * which has AVX-512 too; hd 128, group 2, 4096 f16 keys), ns per call, best of 15
 * interleaved passes: decode ref 4.63 ms, avx2 118 us, avx512 107 us; prefill tile of 32
 * rows ref 74.5 ms, avx2 0.95 ms, avx512 0.47 ms. Unmeasured on an AVX2-only CPU.
 */
#include <float.h>
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* e^x on 8 lanes; x clamped to [-87, 88], so 2^n (n in [-126, 127]) is a normal float. */
ALWAYS_INLINE __m256 exp256(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f)); /* a NaN lane becomes -87 */
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

ALWAYS_INLINE float hsum256(__m256 x)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ALWAYS_INLINE float hmax256(__m256 x)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lanes i < n all ones (n may be <= 0 or >= 8). */
ALWAYS_INLINE __m256i lanes_below(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The row of `type` at dst = src[0..n) rounded to nearest even, 8 lanes at a time, the
 * tail by the reference; bit-identical to nb_kv_row_store (NaN: its quiet NaN). */
void nb_kv_row_store_avx2(int type, const float *src, void *dst, int64_t n)
{
    int64_t d = 0;
    if (type == NB_KVE_F16 || type == NB_KVE_BF16) {
        uint16_t *h = dst;
        for (; d + 8 <= n; d += 8) {
            __m256 x = _mm256_loadu_ps(src + d);
            __m256i u = _mm256_castps_si256(x);
            __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            __m256i sgn = _mm256_srli_epi32(u, 16), r32;
            if (type == NB_KVE_F16) {
                __m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r32 = _mm256_cvtepu16_epi32(r);
                __m256i qn = _mm256_or_si256(_mm256_and_si256(sgn, _mm256_set1_epi32(0x8000)),
                                             _mm256_set1_epi32(0x7e00));
                r32 = _mm256_blendv_epi8(r32, qn, nan);
            } else {
                __m256i lsb = _mm256_and_si256(sgn, _mm256_set1_epi32(1));
                r32 = _mm256_srli_epi32(
                    _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
                r32 = _mm256_blendv_epi8(r32, _mm256_or_si256(sgn, _mm256_set1_epi32(0x40)), nan);
            }
            /* 8 x 32-bit values < 65536 -> 8 x 16-bit */
            __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r32), _mm256_extracti128_si256(r32, 1));
            _mm_storeu_si128((__m128i *)(h + d), p);
        }
        if (d < n) nb_kv_row_store(type, src + d, h + d, n - d);
        return;
    }
    if (type == NB_KVE_Q8_0) {
        uint8_t *b = dst;
        const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
        const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        for (; d < n; d += 32, b += 34) {
            __m256 x[4], m = _mm256_setzero_ps();
            for (int i = 0; i < 4; i++) {
                x[i] = _mm256_loadu_ps(src + d + 8 * i);
                m = _mm256_max_ps(m, _mm256_and_ps(x[i], absm));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
            float amax = _mm_cvtss_f32(m4);
            uint16_t dh = nb_f32_to_f16(amax / 127.0f);
            float dq = nb_f16_to_f32(dh), id = dq > 0 ? 1.0f / dq : 0.0f;
            memcpy(b, &dh, 2);
            __m256 iv = _mm256_set1_ps(id);
            __m256i q[4];
            for (int i = 0; i < 4; i++) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(x[i], iv),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
            }
            /* 32 x int32 in [-127, 127] -> 32 x int8 in order */
            __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
            __m256i by = _mm256_packs_epi16(w01, w23);
            by = _mm256_permutevar8x32_epi32(by, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(b + 2), by);
        }
        return;
    }
    nb_kv_row_store(type, src, dst, n);
}

/* A K / V row of a 16-bit or q8_0 cache as n floats in dst (n a multiple of 32 for
 * q8_0): 8 lanes at a time, the tail by the reference; bit-identical to it. */
void nb_kv_row_load_avx2(int type, const void *src, float *dst, int64_t n)
{
    int64_t d = 0;
    if (type == NB_KVE_F16 || type == NB_KVE_BF16) {
        const uint16_t *h = src;
        for (; d + 8 <= n; d += 8) {
            __m128i x = _mm_loadu_si128((const __m128i *)(h + d));
            __m256 f = type == NB_KVE_F16
                           ? _mm256_cvtph_ps(x)
                           : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
            _mm256_storeu_ps(dst + d, f);
        }
        if (d < n) nb_kv_row_load(type, h + d, dst + d, n - d);
        return;
    }
    if (type == NB_KVE_Q8_0) {
        const uint8_t *b = src;
        for (; d < n; d += 32, b += 34) {
            uint16_t dh;
            memcpy(&dh, b, 2);
            __m256 sc = _mm256_set1_ps(_cvtsh_ss(dh));
            for (int i = 0; i < 32; i += 8) {
                __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + i));
                _mm256_storeu_ps(dst + d + i,
                                 _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
            }
        }
        return;
    }
    nb_kv_row_load(type, src, dst, n);
}

/* ---------------------------------------------------------------- prefill tile */

/* Scores of keys kr[0..nk) against the NV * 8 lanes of qt, into st[j * 32 + lane];
 * J keys at a time (J * NV accumulators; kr holds 16 pointers, the tail padded). */
ALWAYS_INLINE void tile_scores(int NV, float *st, const float *const *kr, int nk, const float *qt,
                               int hd)
{
    const int J = NV == 1 ? 8 : NV == 2 ? 4 : 2;
    for (int j0 = 0; j0 < nk; j0 += J) {
        __m256 a[8][4];
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                a[j][v] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m256 x[4];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                x[v] = _mm256_loadu_ps(qt + d * 32 + 8 * v);
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) {
                __m256 kk = _mm256_broadcast_ss(kr[j0 + j] + d);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    a[j][v] = _mm256_fmadd_ps(kk, x[v], a[j][v]);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                _mm256_storeu_ps(st + (j0 + j) * 32 + 8 * v, a[j][v]);
    }
}

/* One block of keys kb .. kb+nk-1 (scores in pt): online-softmax update of m / l per
 * lane, the weights over the scores in pt, the rescale factors to al. A lane's key p is
 * valid when p <= qpos and, with a window, qpos - p < window (p > qpos - window). */
ALWAYS_INLINE void tile_softmax(int NV, float *pt, int kb, int nk, const int32_t *qp, int window,
                                __m256 *m, __m256 *l, float *al)
{
    for (int v = 0; v < NV; v++) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(qp + 8 * v));
        __m256i lo =
            window > 0 ? _mm256_sub_epi32(qv, _mm256_set1_epi32(window)) : _mm256_set1_epi32(-1);
        __m256 ok[16];
        __m256 mx = m[v];
        for (int j = 0; j < nk; j++) {
            __m256i kp = _mm256_set1_epi32(kb + j);
            ok[j] = _mm256_castsi256_ps(
                _mm256_andnot_si256(_mm256_cmpgt_epi32(kp, qv), _mm256_cmpgt_epi32(kp, lo)));
            __m256 s = _mm256_loadu_ps(pt + j * 32 + 8 * v);
            mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, s), ok[j]);
        }
        __m256 alpha = exp256(_mm256_sub_ps(m[v], mx));
        m[v] = mx;
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < nk; j++) {
            float *pj = pt + j * 32 + 8 * v;
            __m256 p = _mm256_and_ps(ok[j], exp256(_mm256_sub_ps(_mm256_loadu_ps(pj), mx)));
            sum = _mm256_add_ps(sum, p);
            _mm256_storeu_ps(pj, p);
        }
        l[v] = _mm256_fmadd_ps(l[v], alpha, sum);
        _mm256_storeu_ps(al + 8 * v, alpha);
    }
}

/* Columns [d0, d0 + 8 NC) of output rows o0, o1 (lanes r0, r0 + 1 of pt): alpha * o +
 * sum_j p_j v_j. MASKED: only the columns below hd exist (masked loads and stores). */
ALWAYS_INLINE void tile_pv_cols(int NC, int MASKED, float *o0, float *o1, int r0, const float *pt,
                                __m256 a0, __m256 a1, const float *const *vr, int nk, int d0,
                                int hd)
{
    __m256i mk[4];
    __m256 c0[4], c1[4];
#pragma GCC unroll 4
    for (int i = 0; i < NC; i++) {
        if (MASKED) {
            mk[i] = lanes_below(hd - d0 - 8 * i);
            c0[i] = _mm256_mul_ps(a0, _mm256_maskload_ps(o0 + d0 + 8 * i, mk[i]));
            c1[i] = _mm256_mul_ps(a1, _mm256_maskload_ps(o1 + d0 + 8 * i, mk[i]));
        } else {
            c0[i] = _mm256_mul_ps(a0, _mm256_loadu_ps(o0 + d0 + 8 * i));
            c1[i] = _mm256_mul_ps(a1, _mm256_loadu_ps(o1 + d0 + 8 * i));
        }
    }
    for (int j = 0; j < nk; j++) {
        __m256 p0 = _mm256_broadcast_ss(pt + j * 32 + r0);
        __m256 p1 = _mm256_broadcast_ss(pt + j * 32 + r0 + 1);
#pragma GCC unroll 4
        for (int i = 0; i < NC; i++) {
            __m256 vv = MASKED ? _mm256_maskload_ps(vr[j] + d0 + 8 * i, mk[i])
                               : _mm256_loadu_ps(vr[j] + d0 + 8 * i);
            c0[i] = _mm256_fmadd_ps(p0, vv, c0[i]);
            c1[i] = _mm256_fmadd_ps(p1, vv, c1[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NC; i++) {
        if (MASKED) {
            _mm256_maskstore_ps(o0 + d0 + 8 * i, mk[i], c0[i]);
            _mm256_maskstore_ps(o1 + d0 + 8 * i, mk[i], c1[i]);
        } else {
            _mm256_storeu_ps(o0 + d0 + 8 * i, c0[i]);
            _mm256_storeu_ps(o1 + d0 + 8 * i, c1[i]);
        }
    }
}

/* Output rows o0, o1 = alpha * out + sum_j p_j v_j, for lanes r0, r0 + 1 of pt / al:
 * 32 columns at a time, the tail (hd not a multiple of 32) masked. */
static void tile_pv_pair(float *o0, float *o1, int r0, const float *pt, const float *al,
                         const float *const *vr, int nk, int hd)
{
    __m256 a0 = _mm256_set1_ps(al[r0]), a1 = _mm256_set1_ps(al[r0 + 1]);
    int d0 = 0;
    for (; d0 + 32 <= hd; d0 += 32)
        tile_pv_cols(4, 0, o0, o1, r0, pt, a0, a1, vr, nk, d0, hd);
    switch ((hd - d0 + 7) / 8) {
    case 1: tile_pv_cols(1, 1, o0, o1, r0, pt, a0, a1, vr, nk, d0, hd); break;
    case 2: tile_pv_cols(2, 1, o0, o1, r0, pt, a0, a1, vr, nk, d0, hd); break;
    case 3: tile_pv_cols(3, 1, o0, o1, r0, pt, a0, a1, vr, nk, d0, hd); break;
    case 4: tile_pv_cols(4, 1, o0, o1, r0, pt, a0, a1, vr, nk, d0, hd); break;
    default: break;
    }
}

ALWAYS_INLINE void tile(int NV, float *const *orow, int R, const int32_t *qp, const float *qt,
                        int hd, const struct nb_kv_view *kv, int window, int kmin, int kmax,
                        float *pt, float *al, float *ls, float *conv)
{
    __m256 m[4], l[4];
    for (int v = 0; v < NV; v++) {
        m[v] = _mm256_set1_ps(-FLT_MAX);
        l[v] = _mm256_setzero_ps();
    }
    for (int kb = kmin; kb <= kmax; kb += 16) {
        int nk = kmax - kb + 1 < 16 ? kmax - kb + 1 : 16;
        const float *kr[16], *vr[16];
        for (int j = 0; j < 16; j++) {
            if (j >= nk) { /* padding for the score loop's whole groups of keys */
                kr[j] = kr[nk - 1];
                vr[j] = vr[nk - 1];
                continue;
            }
            int64_t at = NB_KV_AT(kv, kb + j);
            const char *ks = (const char *)kv->k + at, *vs = (const char *)kv->v + at;
            if (kv->type == NB_KVE_F32) {
                kr[j] = (const float *)ks;
                vr[j] = (const float *)vs;
            } else { /* converted once per tile and key */
                float *kd = conv + (int64_t)j * hd, *vd = conv + (int64_t)(16 + j) * hd;
                nb_kv_row_load_avx2(kv->type, ks, kd, hd);
                nb_kv_row_load_avx2(kv->type, vs, vd, hd);
                kr[j] = kd;
                vr[j] = vd;
            }
        }
        tile_scores(NV, pt, kr, nk, qt, hd);
        tile_softmax(NV, pt, kb, nk, qp, window, m, l, al);
        for (int r = 0; r < R; r += 2)
            tile_pv_pair(orow[r], orow[r + 1], r, pt, al, vr, nk, hd);
    }
    for (int v = 0; v < NV; v++)
        _mm256_storeu_ps(ls + 8 * v, l[v]);
}

void nb_attn_tile_avx2(float *out, int64_t ldo, const float *q, int64_t ldq, int n_tok, int n_rep,
                       int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                       float scale, float *scratch)
{
    int R = n_tok * n_rep;
    float *qt = scratch;               /* [hd][32] */
    float *pt = qt + (int64_t)hd * 32; /* [16][32] scores, then weights */
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
        qp[r] = r < R ? qpos[r / n_rep] : -1; /* pad lanes: no valid key */
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
    /* from a multiple of 16 keys: a row's sums then add in the same blocks in any tile, so it
     * gets what it gets alone (keys out of its window weigh exactly 0) */
    int kmin = window > 0 && pmin - window + 1 > 0 ? (pmin - window + 1) & ~15 : 0;
    switch ((R + 7) / 8) {
    case 1: tile(1, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv); break;
    case 2: tile(2, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv); break;
    case 3: tile(3, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv); break;
    default: tile(4, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv); break;
    }
    for (int r = 0; r < R; r++) {
        float inv = 1.0f / ls[r];
        __m256 vinv = _mm256_set1_ps(inv);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(orow[r] + d, _mm256_mul_ps(vinv, _mm256_loadu_ps(orow[r] + d)));
        for (; d < hd; d++)
            orow[r][d] *= inv;
    }
}

/* ---------------------------------------------------------------- decode */

/* 8 values of a K / V row of type TYPE from column d on (a multiple of 8), as f32. */
ALWAYS_INLINE __m256 ld8(int TYPE, const char *row, int d)
{
    if (TYPE == NB_KVE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * d)));
    if (TYPE == NB_KVE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * d))), 16));
    if (TYPE == NB_KVE_Q8_0) {
        const uint8_t *b = (const uint8_t *)row + (d / 32) * 34;
        uint16_t dh;
        memcpy(&dh, b, 2);
        __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + d % 32));
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(dh)),
                             _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
    return _mm256_loadu_ps((const float *)row + d);
}

/* Scores of R query rows against keys kb .. kb+nk-1, into sc[r][16]: each K row read
 * and converted once, two accumulators a row (half the FMA chain), a horizontal sum
 * per (row, key). */
ALWAYS_INLINE void dec_scores(int TYPE, int R, const float *q, int hd, const struct nb_kv_view *kv,
                              int kb, int nk, float *sc)
{
    for (int j = 0; j < nk; j++) {
        const char *kr = (const char *)kv->k + NB_KV_AT(kv, kb + j);
        __m256 a0[4], a1[4]; /* constant indices only: registers, not the stack */
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            a0[r] = a1[r] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 16) {
            __m256 k0 = ld8(TYPE, kr, d), k1 = ld8(TYPE, kr, d + 8);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const float *qr = q + (int64_t)r * hd + d;
                a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qr), k0, a0[r]);
                a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qr + 8), k1, a1[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            sc[r * 16 + j] = hsum256(_mm256_add_ps(a0[r], a1[r]));
    }
}

/* The scores of up to 4 rows (R), with the K type and the row count as constants. */
#define DEC_SCORES_R(T)                                                                            \
    switch (R) {                                                                                   \
    case 1: dec_scores(T, 1, q, hd, kv, kb, nk, sc); break;                                        \
    case 2: dec_scores(T, 2, q, hd, kv, kb, nk, sc); break;                                        \
    case 3: dec_scores(T, 3, q, hd, kv, kb, nk, sc); break;                                        \
    default: dec_scores(T, 4, q, hd, kv, kb, nk, sc); break;                                       \
    }
static void dec_scores_rows(int R, const float *q, int hd, const struct nb_kv_view *kv, int kb,
                            int nk, float *sc)
{
    switch (kv->type) {
    case NB_KVE_F16: DEC_SCORES_R(NB_KVE_F16) break;
    case NB_KVE_BF16: DEC_SCORES_R(NB_KVE_BF16) break;
    case NB_KVE_Q8_0: DEC_SCORES_R(NB_KVE_Q8_0) break;
    default: DEC_SCORES_R(NB_KVE_F32) break;
    }
}
#undef DEC_SCORES_R

/* Columns [d, d + 8 NC) of NR (1 or 2) accumulators o_r = alpha_r o_r + sum_j p_r[j] v_j
 * (pr: the rows' weights, 16 apart). */
ALWAYS_INLINE void dec_pv_cols(int NR, int NC, float *const *o, const float *pr, const float *al,
                               const float *const *vrow, int nk, int d)
{
    __m256 c[2][4];
#pragma GCC unroll 2
    for (int r = 0; r < NR; r++) {
        __m256 a = _mm256_set1_ps(al[r]);
#pragma GCC unroll 4
        for (int i = 0; i < NC; i++)
            c[r][i] = _mm256_mul_ps(a, _mm256_loadu_ps(o[r] + d + 8 * i));
    }
    for (int j = 0; j < nk; j++) {
        __m256 p[2];
#pragma GCC unroll 2
        for (int r = 0; r < NR; r++)
            p[r] = _mm256_broadcast_ss(pr + r * 16 + j);
#pragma GCC unroll 4
        for (int i = 0; i < NC; i++) {
            __m256 vv = _mm256_loadu_ps(vrow[j] + d + 8 * i);
#pragma GCC unroll 2
            for (int r = 0; r < NR; r++)
                c[r][i] = _mm256_fmadd_ps(p[r], vv, c[r][i]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int i = 0; i < NC; i++)
            _mm256_storeu_ps(o[r] + d + 8 * i, c[r][i]);
}

/* The whole row of NR accumulators: 32 columns at a time, then 16 (hd % 16 == 0). */
ALWAYS_INLINE void dec_pv_rows(int NR, float *const *o, const float *pr, const float *al,
                               const float *const *vrow, int nk, int hd)
{
    int d = 0;
    for (; d + 32 <= hd; d += 32)
        dec_pv_cols(NR, 4, o, pr, al, vrow, nk, d);
    if (d < hd) dec_pv_cols(NR, 2, o, pr, al, vrow, nk, d);
}

/* Decode over a run of keys (contract in kernels.h); see the file's comment. */
void nb_attn_decode_avx2(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                         int b, float *out, int64_t ldo, float *scratch)
{
    if (hd % 16 || n_rep > 8) {
        nb_attn_decode_ref(q, n_rep, hd, kv, a, b, out, ldo, scratch);
        return;
    }
    int kv_type = kv->type;
    /* FTZ | DAZ: denormal products of small values and small weights each cost a
     * microcode assist (measured on AVX-512; attn_avx512.c), and they are far below the
     * sums' resolution */
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);
    /* (scratch[0, hd) unused, as on AVX-512) sc: [8][16] scores, then weights;
     * vbuf: [16][hd] V rows as f32 */
    float *sc = scratch + hd, *vbuf = sc + 16 * 8;
    float m[8], l[8];
    for (int r = 0; r < n_rep; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
        memset(out + r * ldo + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int kb = a; kb < b; kb += 16) {
        int nk = b - kb < 16 ? b - kb : 16;
        for (int r0 = 0; r0 < n_rep; r0 += 4)
            dec_scores_rows(n_rep - r0 < 4 ? n_rep - r0 : 4, q + (int64_t)r0 * hd, hd, kv, kb, nk,
                            sc + r0 * 16);
        __m256 valid0 = _mm256_castsi256_ps(lanes_below(nk));
        __m256 valid1 = _mm256_castsi256_ps(lanes_below(nk - 8));
        float alpha[8];
        for (int r = 0; r < n_rep; r++) {
            float *s = sc + r * 16;
            for (int j = nk; j < 16; j++)
                s[j] = -FLT_MAX; /* a short last block */
            __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
            float bm = hmax256(_mm256_max_ps(s0, s1)), mn = bm > m[r] ? bm : m[r];
            /* weights below e^-80 are exactly 0 (as on AVX-512): denormal products of
             * them cost microcode assists in every FMA that follows */
            alpha[r] = m[r] - mn < -80.0f ? 0.0f : expf(m[r] - mn);
            __m256 vm = _mm256_set1_ps(mn), cut = _mm256_set1_ps(-80.0f);
            __m256 x0 = _mm256_sub_ps(s0, vm), x1 = _mm256_sub_ps(s1, vm);
            __m256 live0 = _mm256_and_ps(valid0, _mm256_cmp_ps(x0, cut, _CMP_GT_OQ));
            __m256 live1 = _mm256_and_ps(valid1, _mm256_cmp_ps(x1, cut, _CMP_GT_OQ));
            __m256 p0 = _mm256_and_ps(live0, exp256(x0)), p1 = _mm256_and_ps(live1, exp256(x1));
            l[r] = l[r] * alpha[r] + hsum256(_mm256_add_ps(p0, p1));
            m[r] = mn;
            _mm256_storeu_ps(s, p0);
            _mm256_storeu_ps(s + 8, p1);
        }
        /* P.V: the block's V rows as f32 (converted once), then pairs of rows, each
         * accumulator in a register across the block's keys (the rescale by alpha
         * folded into its load) */
        const float *vrow[16];
        for (int j = 0; j < nk; j++) {
            const char *vr = (const char *)kv->v + NB_KV_AT(kv, kb + j);
            if (kv_type == NB_KVE_F32) {
                vrow[j] = (const float *)vr;
            } else {
                nb_kv_row_load_avx2(kv_type, vr, vbuf + (int64_t)j * hd, hd);
                vrow[j] = vbuf + (int64_t)j * hd;
            }
        }
        int r = 0;
        for (; r + 2 <= n_rep; r += 2) {
            float *o[2] = {out + r * ldo + 2, out + (r + 1) * ldo + 2};
            dec_pv_rows(2, o, sc + r * 16, alpha + r, vrow, nk, hd);
        }
        if (r < n_rep) {
            float *o[2] = {out + r * ldo + 2, NULL};
            dec_pv_rows(1, o, sc + r * 16, alpha + r, vrow, nk, hd);
        }
    }
    for (int r = 0; r < n_rep; r++) {
        out[r * ldo] = m[r];
        out[r * ldo + 1] = l[r];
    }
    _mm_setcsr(csr);
}
