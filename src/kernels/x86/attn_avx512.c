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
#include <math.h>
#include <immintrin.h>
#include <limits.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/x86/attn_avx512.h"

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

/* The row of `type` at dst = src[0..hd) rounded to nearest even, 16 lanes at a time, the
 * tail by the reference; bit-identical to nb_kv_row_store (a NaN becomes its quiet NaN,
 * as there). The K / V store of every token: scalar rounding cost a 16-stream decode step
 * more than its attention. */
void nb_kv_row_store_avx512(int type, const float *src, void *dst, int64_t hd)
{
    int64_t d = 0;
    if (type == NB_KVE_F16 || type == NB_KVE_BF16) {
        uint16_t *h = dst;
        for (; d + 16 <= hd; d += 16) {
            __m512 x = _mm512_loadu_ps(src + d);
            __m512i u = _mm512_castps_si512(x);
            __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
            __m256i r;
            if (type == NB_KVE_F16) {
                r = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                __m256i qnan = _mm512_cvtepi32_epi16(_mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
                    _mm512_set1_epi32(0x7e00)));
                r = _mm256_mask_mov_epi16(r, nan, qnan);
            } else {
                __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
                __m512i rn = _mm512_srli_epi32(
                    _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
                __m512i qn = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
                r = _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rn, nan, qn));
            }
            _mm256_storeu_si256((__m256i *)(h + d), r);
        }
        if (d < hd) nb_kv_row_store(type, src + d, h + d, hd - d);
        return;
    }
    if (type == NB_KVE_Q8_0) { /* hd is a multiple of 32 */
        uint8_t *b = dst;
        const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
        for (; d < hd; d += 32, b += 34) {
            __m512 x0 = _mm512_loadu_ps(src + d), x1 = _mm512_loadu_ps(src + d + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
            uint16_t dh = nb_f32_to_f16(amax / 127.0f);
            float dq = nb_f16_to_f32(dh), id = dq > 0 ? 1.0f / dq : 0.0f;
            memcpy(b, &dh, 2);
            __m512 iv = _mm512_set1_ps(id);
            for (int i = 0; i < 2; i++) {
                __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(i ? x1 : x0, iv),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
                _mm_storeu_si128((__m128i *)(b + 2 + 16 * i),
                                 _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(r)));
            }
        }
        return;
    }
    nb_kv_row_store(type, src, dst, hd);
}

ALWAYS_INLINE void tile(int NV, float *const *orow, int R, const int32_t *qp, const float *qt,
                        int hd, const struct nb_kv_view *kv, int window, int kmin, int kmax,
                        float *pt, float *al, float *ls, float *conv)
{
    __m512 m[2] = {_mm512_set1_ps(-FLT_MAX), _mm512_set1_ps(-FLT_MAX)};
    __m512 l[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int kb = kmin; kb <= kmax; kb += 16) {
        int nk = kmax - kb + 1 < 16 ? kmax - kb + 1 : 16;
        const float *kr[16], *vr[16];
        for (int j = 0; j < 16; j++) {
            int p = kb + (j < nk ? j : nk - 1);
            int64_t at = NB_KV_AT(kv, p);
            const char *ks = (const char *)kv->k + at, *vs = (const char *)kv->v + at;
            if (kv->type == NB_KVE_F32) {
                kr[j] = (const float *)ks;
                vr[j] = (const float *)vs;
            } else if (j < nk) { /* converted once per tile and key */
                float *kd = conv + (int64_t)j * hd, *vd = conv + (int64_t)(16 + j) * hd;
                nb_kv_row_load_avx512(kv->type, ks, kd, hd);
                nb_kv_row_load_avx512(kv->type, vs, vd, hd);
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
                         int hd, const int32_t *qpos, const struct nb_kv_view *kv, int window,
                         float scale, float *scratch)
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
    /* from a multiple of 16 keys: a row's sums then add in the same blocks in any tile, so it
     * gets what it gets alone (keys out of its window weigh exactly 0) */
    int kmin = window > 0 && pmin - window + 1 > 0 ? (pmin - window + 1) & ~15 : 0;
    if (R > 16)
        tile(2, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv);
    else
        tile(1, orow, R, qp, qt, hd, kv, window, kmin, pmax, pt, al, ls, conv);
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

/* ---------------------------------------------------------------- decode */

/* Lane i of the result = the sum of v[i]'s 16 lanes: 16 horizontal sums for 30 shuffles
 * and 15 adds (one reduce_add_ps each took 4 shuffles and 4 adds). */
ALWAYS_INLINE __m512 hsum16(const __m512 v[16])
{
    __m512 x[4], y[2];
    for (int i = 0; i < 4; i++) {
        /* quarters [v_i, v_i, v_i+4, v_i+4] and [v_i+8, v_i+8, v_i+12, v_i+12] ... */
        __m512 a = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 4], 0x44),
                                 _mm512_shuffle_f32x4(v[i], v[i + 4], 0xee));
        __m512 b = _mm512_add_ps(_mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x44),
                                 _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xee));
        /* ... then quarter k holds 4 partial sums of v_i+4k */
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
    }
    for (int i = 0; i < 2; i++) { /* quarter k: 2 of v_4k+2i, 2 of v_4k+2i+1 */
        __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
        y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xdd));
}

/* Scores of the R query rows against keys kb .. kb+nk-1, into sc[r][16]: each K row read
 * and converted once for the R rows; G = 16 / R keys at a time, one accumulator per (row,
 * key) in lane-sized partial sums, reduced together by hsum16 (a reduce_add_ps per key and
 * row, with its accumulators on the stack, made this half of the kernel's time). Each key
 * also asks for the K row of the key 16 on (below b), a line per step of d, so that the
 * prefetches are spread among the arithmetic: a whole block's rows asked for at once
 * filled the line-fill buffers and the core waited on them. */
ALWAYS_INLINE void score_block(int R, int type, const float *q, int hd, const struct nb_kv_view *kv,
                               int kb, int nk, int b, float *sc)
{
    const int G = 16 / R;
    const int64_t row = NB_KV_ROW_BYTES(type, hd);
    for (int j0 = 0; j0 < nk; j0 += G) {
        __m512 a[16]; /* a[r * G + j]: constant indices only, so registers, not the stack */
        const char *kr[16];
        int64_t pf[16];
        for (int i = 0; i < 16; i++)
            a[i] = _mm512_setzero_ps();
        for (int j = 0; j < G; j++) { /* keys past nk: the last one again, its sums unused */
            kr[j] = (const char *)kv->k + NB_KV_AT(kv, kb + (j0 + j < nk ? j0 + j : nk - 1));
            int p = kb + 16 + j0 + j;
            pf[j] = p < b ? NB_KV_AT(kv, p) : NB_KV_AT(kv, kb + (j0 + j < nk ? j0 + j : nk - 1));
        }
        for (int d = 0; d < hd; d += 16)
            for (int j = 0; j < G; j++) {
                if (d * 4 < row || d + 16 == hd) { /* line d / 16 of the row, and its end */
                    int64_t o = d * 4 < row ? d * 4 : row - 1;
                    _mm_prefetch((const char *)kv->k + pf[j] + o, _MM_HINT_T0);
                }
                __m512 k = ld16(type, kr[j], d);
                for (int r = 0; r < R; r++)
                    a[r * G + j] =
                        _mm512_fmadd_ps(_mm512_loadu_ps(q + (int64_t)r * hd + d), k, a[r * G + j]);
            }
        float t[16];
        _mm512_storeu_ps(t, hsum16(a));
        int n = nk - j0 < G ? nk - j0 : G;
        for (int r = 0; r < R; r++)
            memcpy(sc + r * 16 + j0, t + r * G, sizeof(float) * (size_t)n);
    }
}

/* P.V of one block of nk keys for R rows (o rows ldo apart, weights pr rows 16 apart, each
 * row's sums first scaled by its al) and C column chunks of 16 from chunk d: R*C
 * accumulators in registers, each V vector loaded (and converted: ld16, the same values
 * nb_kv_row_load_avx512 gives) once for the R rows, and R*C independent FMA chains (one
 * chain of 16 dependent FMAs per chunk left the FMA units waiting on latency). Each
 * element still adds its keys in order j = 0..nk-1, so results do not change. With vnext,
 * key j also asks for the same columns of the cache row vnext[j] (of `type`). */
ALWAYS_INLINE void pv_block(int R, int C, float *o, int64_t ldo, const float *pr, const float *al,
                            int type, const char *const *vrow, const char *const *vnext, int nk,
                            int d)
{
    __m512 acc[2][4];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            acc[r][c] =
                _mm512_mul_ps(_mm512_set1_ps(al[r]), _mm512_loadu_ps(o + r * ldo + 16 * (d + c)));
    int64_t o0 = NB_KV_ROW_BYTES(type, 16 * d), o1 = NB_KV_ROW_BYTES(type, 16 * (d + C));
    for (int j = 0; j < nk; j++) {
        if (vnext)
            for (int64_t b = o0; b < o1; b += 64)
                _mm_prefetch(vnext[j] + b, _MM_HINT_T0);
        __m512 v[4];
        for (int c = 0; c < C; c++)
            v[c] = ld16(type, vrow[j], 16 * (d + c));
        for (int r = 0; r < R; r++) {
            __m512 p = _mm512_set1_ps(pr[r * 16 + j]);
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(p, v[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            _mm512_storeu_ps(o + r * ldo + 16 * (d + c), acc[r][c]);
}

/* The rows [0, r1) of a block's P.V (see pv_block), V rows of `type`. */
ALWAYS_INLINE void pv_rows(int r1, int nd, float *out, int64_t ldo, const float *sc,
                           const float *al, int type, const char *const *vrow,
                           const char *const *vnext, int nk)
{
    int r = 0;
    for (; r + 2 <= r1; r += 2)
        for (int d = 0; d < nd; d += 4) {
            const char *const *vn = r ? NULL : vnext; /* asked for once */
            if (nd - d >= 4)
                pv_block(2, 4, out + r * ldo + 2, ldo, sc + r * 16, al + r, type, vrow, vn, nk, d);
            else
                pv_block(2, 2, out + r * ldo + 2, ldo, sc + r * 16, al + r, type, vrow, vn, nk, d);
        }
    for (; r < r1; r++)
        for (int d = 0; d < nd; d += 4) {
            const char *const *vn = r ? NULL : vnext;
            if (nd - d >= 4)
                pv_block(1, 4, out + r * ldo + 2, ldo, sc + r * 16, al + r, type, vrow, vn, nk, d);
            else
                pv_block(1, 2, out + r * ldo + 2, ldo, sc + r * 16, al + r, type, vrow, vn, nk, d);
        }
}

/* Asks for the K and V rows of keys kb .. min(kb + 16, b) - 1: the first block of a run.
 * The cache is paged (a block of keys of one head is apart from the next, where the
 * hardware prefetcher stops), so in a batched decode step (each run of keys cold, ~70 keys
 * a stream) every run started with a row of misses. */
ALWAYS_INLINE void prefetch_rows(const struct nb_kv_view *kv, int kb, int b, int64_t row)
{
    int ke = kb + 16 < b ? kb + 16 : b;
    for (int p = kb; p < ke; p++) {
        int64_t at = NB_KV_AT(kv, p);
        for (int64_t o = 0; o < row; o += 64) {
            _mm_prefetch((const char *)kv->k + at + o, _MM_HINT_T0);
            _mm_prefetch((const char *)kv->v + at + o, _MM_HINT_T0);
        }
    }
}

/* The online-softmax step of a block of nk keys for R rows: scores sc[r][16] become
 * weights, m / l are updated and alpha[r] is what the row's sums so far are scaled by. */
ALWAYS_INLINE void softmax_rows(int R, float *sc, int nk, float *m, float *l, float *alpha)
{
    __mmask16 valid = (__mmask16)((1u << nk) - 1);
    for (int r = 0; r < R; r++) {
        __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(-FLT_MAX), valid, sc + r * 16);
        float bm = _mm512_reduce_max_ps(s), mn = bm > m[r] ? bm : m[r];
        /* weights below e^-80 are exactly 0: denormal products of them cost microcode
         * assists in every FMA that follows (decode at depth ran 5x slower on a model
         * with peaked attention), and they are below f32's resolution of the sum */
        alpha[r] = m[r] - mn < -80.0f ? 0.0f : expf(m[r] - mn);
        __m512 x = _mm512_sub_ps(s, _mm512_set1_ps(mn));
        __mmask16 live = valid & _mm512_cmp_ps_mask(x, _mm512_set1_ps(-80.0f), _CMP_GT_OQ);
        __m512 p = _mm512_maskz_mov_ps(live, exp512(x));
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(p);
        m[r] = mn;
        _mm512_storeu_ps(sc + r * 16, p);
    }
}

/* Decode of R rows with hd = 16 ND (R * ND <= 16), software-pipelined so that K and V
 * are read together: the loop over the keys of block i reads, per key, the K row of block
 * i + 1 (its scores) and the V row of block i (P.V with the weights of the softmax step
 * that ended block i's scores), and asks for both a block on. Scoring a whole block and
 * then weighting it (decode_blocks) reads 16 K rows and then 16 V rows, and with the cache
 * cold (decode at depth: 470 MB of K / V a token on the 1.7 B shape at 4096) one thread
 * kept fewer lines in flight that way: 8.6 against 11.3 GB/s in bench_attn's cold case.
 * The output sums stay in registers over the whole run; per key the scores' R
 * partial-sum vectors go to fold[], and every 16 / R keys hsum16 turns them into scores. */
ALWAYS_INLINE void decode_fused(int R, int ND, int type, const float *q,
                                const struct nb_kv_view *kv, int a, int b, float *out, int64_t ldo,
                                float *sc, float *nsc, float *m, float *l)
{
    __m512 fold[16];
    const int hd = 16 * ND, G = 16 / R;
    const int64_t row = NB_KV_ROW_BYTES(type, hd);
    __m512 acc[16];
    for (int i = 0; i < R * ND; i++)
        acc[i] = _mm512_setzero_ps();
    prefetch_rows(kv, a, b, row);
    score_block(R, type, q, hd, kv, a, b - a < 16 ? b - a : 16, b, sc);
    for (int kb = a; kb < b; kb += 16) {
        int nk = b - kb < 16 ? b - kb : 16, kn = kb + 16, nkn = b - kn < 16 ? b - kn : 16;
        float alpha[8];
        softmax_rows(R, sc, nk, m, l, alpha);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < ND; c++)
                acc[r * ND + c] = _mm512_mul_ps(_mm512_set1_ps(alpha[r]), acc[r * ND + c]);
        for (int j = 0; j < 16; j++) {
            if (j < nkn) { /* the scores of key kn + j */
                int64_t at = NB_KV_AT(kv, kn + j);
                const char *kr = (const char *)kv->k + at;
                int pk = kn + 16 + j < b ? kn + 16 + j : kn + j; /* asked for a block on */
                const char *kp = (const char *)kv->k + NB_KV_AT(kv, pk);
                for (int64_t o = 0; o < row; o += 64)
                    _mm_prefetch(kp + o, _MM_HINT_T0);
                __m512 s[8];
                for (int r = 0; r < R; r++)
                    s[r] = _mm512_setzero_ps();
                for (int c = 0; c < ND; c++) {
                    __m512 k = ld16(type, kr, 16 * c);
                    for (int r = 0; r < R; r++)
                        s[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + r * hd + 16 * c), k, s[r]);
                }
                int g = j % G;
                for (int r = 0; r < R; r++)
                    fold[r * G + g] = s[r];
                if (g == G - 1 || j == nkn - 1) {
                    for (int i = g + 1; i < G; i++)
                        for (int r = 0; r < R; r++)
                            fold[r * G + i] = _mm512_setzero_ps();
                    float t[16];
                    _mm512_storeu_ps(t, hsum16(fold));
                    for (int r = 0; r < R; r++)
                        memcpy(nsc + r * 16 + j - g, t + r * G, sizeof(float) * (size_t)(g + 1));
                }
            }
            if (j < nk) { /* key kb + j's value row into every row's sums */
                const char *vr = (const char *)kv->v + NB_KV_AT(kv, kb + j);
                int pv = kn + j < b ? kn + j : kb + j;
                const char *vp = (const char *)kv->v + NB_KV_AT(kv, pv);
                for (int64_t o = 0; o < row; o += 64)
                    _mm_prefetch(vp + o, _MM_HINT_T0);
                for (int c = 0; c < ND; c++) {
                    __m512 v = ld16(type, vr, 16 * c);
                    for (int r = 0; r < R; r++)
                        acc[r * ND + c] =
                            _mm512_fmadd_ps(_mm512_set1_ps(sc[r * 16 + j]), v, acc[r * ND + c]);
                }
            }
        }
        float *t = sc;
        sc = nsc;
        nsc = t;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < ND; c++)
            _mm512_storeu_ps(out + r * ldo + 2 + 16 * c, acc[r * ND + c]);
}

/* The blocks of keys [a, b) of nb_attn_decode_avx512 for a cache of `type` (a constant at
 * each call: ld16's branches fold): scores, the online softmax in m / l, P.V into out. */
ALWAYS_INLINE void decode_blocks(int type, const float *q, int n_rep, int hd,
                                 const struct nb_kv_view *kv, int a, int b, float *out, int64_t ldo,
                                 float *sc, float *vbuf, float *m, float *l)
{
    int nd = hd / 16;
    int64_t row = NB_KV_ROW_BYTES(type, hd);
    prefetch_rows(kv, a, b, row);
    for (int kb = a; kb < b; kb += 16) {
        int nk = b - kb < 16 ? b - kb : 16;
        switch (n_rep) { /* a constant row count: the accumulators stay in registers */
        case 1: score_block(1, type, q, hd, kv, kb, nk, b, sc); break;
        case 2: score_block(2, type, q, hd, kv, kb, nk, b, sc); break;
        case 3: score_block(3, type, q, hd, kv, kb, nk, b, sc); break;
        case 4: score_block(4, type, q, hd, kv, kb, nk, b, sc); break;
        default:
            for (int r = 0; r < n_rep; r += 4)
                score_block(n_rep - r < 4 ? n_rep - r : 4, type, q + (int64_t)r * hd, hd, kv, kb,
                            nk, b, sc + r * 16);
        }
        float alpha[8];
        softmax_rows(n_rep, sc, nk, m, l, alpha);
        /* P.V: up to 2 rows (one GQA pair) convert each V vector as it is used; more rows
         * convert the block's V rows once into vbuf first. Either asks for the next block's
         * V rows as it goes (K's: score_block). */
        const char *vrow[16], *vnext[16];
        for (int j = 0; j < nk; j++) {
            vrow[j] = (const char *)kv->v + NB_KV_AT(kv, kb + j);
            vnext[j] = kb + 16 + j < b ? (const char *)kv->v + NB_KV_AT(kv, kb + 16 + j) : vrow[j];
        }
        if (n_rep <= 2 || type == NB_KVE_F32) {
            pv_rows(n_rep, nd, out, ldo, sc, alpha, type, vrow, vnext, nk);
        } else {
            for (int j = 0; j < nk; j++) {
                for (int64_t o = 0; o < row; o += 64)
                    _mm_prefetch(vnext[j] + o, _MM_HINT_T0);
                nb_kv_row_load_avx512(type, vrow[j], vbuf + (int64_t)j * hd, hd);
                vrow[j] = (const char *)(vbuf + (int64_t)j * hd);
            }
            pv_rows(n_rep, nd, out, ldo, sc, alpha, NB_KVE_F32, vrow, NULL, nk);
        }
    }
}

/* Decode over a run of keys (contract in kernels.h): blocks of 16 keys; each K row is
 * read (and converted) once for all n_rep query rows, its scores reduced per row into
 * lanes of a block vector, the block's softmax update done on 16 lanes at once, and each
 * V row read once to update every row's accumulator. Where the rows' sums fit in 16
 * registers (n_rep x hd: 1-4 x 64, 1-2 x 128) decode_fused streams K and V together;
 * other shapes go block by block (decode_blocks). hd not a multiple of 32, or more than
 * 8 rows: the reference. */
void nb_attn_decode_avx512(const float *q, int n_rep, int hd, const struct nb_kv_view *kv, int a,
                           int b, float *out, int64_t ldo, float *scratch)
{
    if (hd % 32 || n_rep > 8) { /* (q8_0 blocks and pv_rows chunk pairs want 32) */
        nb_attn_decode_ref(q, n_rep, hd, kv, a, b, out, ldo, scratch);
        return;
    }
    /* Denormals flushed to zero here: small values times small weights make denormal
     * products, and each costs a microcode assist (decode at depth on the 1.7 B shape:
     * 157 ms of attention a token on one thread, 93 with the weights below e^-80 zeroed,
     * less with FTZ/DAZ). They are far below the sum's resolution. */
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040); /* FTZ | DAZ */
    /* kbuf: one K row as f32; sc: [n_rep][16] scores; vbuf: [16][hd] V rows as f32 */
    float *sc = scratch + hd, *vbuf = sc + 16 * 8;
    float m[8], l[8];
    for (int r = 0; r < n_rep; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
    }
    /* the pipelined loop where the output sums fit in registers (one instance per shape
     * and cache type: the sums and ld16's branches are constants there) */
    int shape = n_rep * 100 + hd / 16, type = kv->type;
#define FUSED(R, ND)                                                                               \
    case R * 100 + ND:                                                                             \
        if (type == NB_KVE_F16)                                                                    \
            decode_fused(R, ND, NB_KVE_F16, q, kv, a, b, out, ldo, sc, vbuf, m, l);                \
        else if (type == NB_KVE_BF16)                                                              \
            decode_fused(R, ND, NB_KVE_BF16, q, kv, a, b, out, ldo, sc, vbuf, m, l);               \
        else if (type == NB_KVE_Q8_0)                                                              \
            decode_fused(R, ND, NB_KVE_Q8_0, q, kv, a, b, out, ldo, sc, vbuf, m, l);               \
        else                                                                                       \
            decode_fused(R, ND, NB_KVE_F32, q, kv, a, b, out, ldo, sc, vbuf, m, l);                \
        break;
    switch (shape) {
        FUSED(1, 4)
        FUSED(2, 4)
        FUSED(4, 4)
        FUSED(1, 8)
        FUSED(2, 8)
#undef FUSED
    default:
        for (int r = 0; r < n_rep; r++)
            memset(out + r * ldo + 2, 0, sizeof(float) * (size_t)hd);
        switch (type) {
        case NB_KVE_F16:
            decode_blocks(NB_KVE_F16, q, n_rep, hd, kv, a, b, out, ldo, sc, vbuf, m, l);
            break;
        case NB_KVE_BF16:
            decode_blocks(NB_KVE_BF16, q, n_rep, hd, kv, a, b, out, ldo, sc, vbuf, m, l);
            break;
        case NB_KVE_Q8_0:
            decode_blocks(NB_KVE_Q8_0, q, n_rep, hd, kv, a, b, out, ldo, sc, vbuf, m, l);
            break;
        default: decode_blocks(NB_KVE_F32, q, n_rep, hd, kv, a, b, out, ldo, sc, vbuf, m, l); break;
        }
    }
    for (int r = 0; r < n_rep; r++) {
        out[r * ldo] = m[r];
        out[r * ldo + 1] = l[r];
    }
    _mm_setcsr(csr);
}
