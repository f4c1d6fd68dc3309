/* quant/search_lanes.h — the batched search of search.c for one lane count: a template,
 * included by search.c once per vector width with NL (lanes: floats per vector) and
 * QS(name) (a name with the width appended) defined. Not a header of its own.
 *
 * Lane l of every vector holds group (row) l of the batch and does exactly the float
 * and double operations quant.c's reference does for its group, in the same order. */

#define clamp_round QS(clamp_round)
#define hi QS(hi)
#define inv_of QS(inv_of)
#define lo QS(lo)
#define load QS(load)
#define pack_int4 QS(pack_int4)
#define scale2_of QS(scale2_of)
#define scale_of QS(scale_of)
#define sel QS(sel)
#define splat QS(splat)
#define store QS(store)
#define store2 QS(store2)
#define transpose_in QS(transpose_in)
#define vabs QS(vabs)
#define vmax QS(vmax)
#define vmin QS(vmin)
#define w4a16_candidates QS(w4a16_candidates)
#define w4a16_run QS(w4a16_run)
#define w4a16_score QS(w4a16_score)
#define w4a16_sums QS(w4a16_sums)
#define w4a8_candidates QS(w4a8_candidates)
#define w4a8_refit QS(w4a8_refit)
#define w4a8_run QS(w4a8_run)
#define w4a8_score QS(w4a8_score)
#define w8_candidates QS(w8_candidates)
#define w8_run QS(w8_run)
#define w8_score QS(w8_score)
#define w8_sums QS(w8_sums)
#define widen QS(widen)
#define vf QS(vf)
#define vi QS(vi)
#define vu QS(vu)
#define vb QS(vb)
#define vd QS(vd)
#define vd2 QS(vd2)
#define vh QS(vh)
#define w4a8_s QS(w4a8_s)
#define w4a16_s QS(w4a16_s)

/* (may_alias: the transposes write vectors through float pointers) */
typedef float vf __attribute__((vector_size(4 * NL), may_alias));
typedef int32_t vi __attribute__((vector_size(4 * NL), may_alias));
typedef uint32_t vu __attribute__((vector_size(4 * NL), may_alias));
typedef uint8_t vb __attribute__((vector_size(NL), may_alias));
typedef double vd __attribute__((vector_size(4 * NL), may_alias)); /* NL / 2 lanes */
typedef double vd2 __attribute__((vector_size(8 * NL), may_alias)); /* NL lanes */
typedef float vh __attribute__((vector_size(2 * NL), may_alias));  /* NL / 2 lanes */

INLINE vf splat(float c)
{
    vf v;
    for (int l = 0; l < NL; l++) v[l] = c;
    return v;
}
INLINE vf load(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
INLINE void store(float *p, vf v) { memcpy(p, &v, sizeof v); }
INLINE void store2(double *p, vd lo_half, vd hi_half)
{
    memcpy(p, &lo_half, sizeof lo_half);
    memcpy(p + NL / 2, &hi_half, sizeof hi_half);
}
INLINE vf sel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
/* the lanes widened to double: lanes 0..NL/2-1 in *a, the rest in *b (one conversion of
 * the whole vector: GCC 12 lowers a half-width one into four instructions) */
INLINE void widen(vf v, vd *a, vd *b)
{
#if NL == 16
    vd2 w = __builtin_convertvector(v, vd2);
    memcpy(a, &w, sizeof *a);
    memcpy(b, (const char *)&w + sizeof *a, sizeof *b);
#else /* (a double vector of NL lanes is wider than the target's: convert halves) */
    vh h0, h1;
    memcpy(&h0, &v, sizeof h0);
    memcpy(&h1, (const char *)&v + sizeof h0, sizeof h1);
    *a = __builtin_convertvector(h0, vd);
    *b = __builtin_convertvector(h1, vd);
#endif
}
INLINE vd lo(vf v)
{
    vd a, b;
    widen(v, &a, &b);
    return a;
}
INLINE vd hi(vf v)
{
    vd a, b;
    widen(v, &a, &b);
    return b;
}
INLINE vf vabs(vf x) { return (vf)((vu)x & 0x7fffffffu); }
/* quant.c's round_clamp, as a float: clamp to [lo_v, hi_v] (NaN: lo_v), round to
 * nearest even by adding and subtracting 1.5 * 2^23 */
INLINE vf clamp_round(vf v, float lo_v, float hi_v)
{
#if defined(__x86_64__) && NL == 16
    /* vmaxps gives its second operand for a NaN, vminps its second on a tie: the same
     * values; vrndscaleps to nearest even equals the add-and-subtract for |v| <= 2^22 */
    __m512 c = _mm512_min_ps(_mm512_max_ps((__m512)v, _mm512_set1_ps(lo_v)), _mm512_set1_ps(hi_v));
    return (vf)_mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif defined(__x86_64__) && NL == 8
    __m256 c = _mm256_min_ps(_mm256_max_ps((__m256)v, _mm256_set1_ps(lo_v)), _mm256_set1_ps(hi_v));
    return (vf)_mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    v = sel(v >= lo_v, v, splat(lo_v));
    v = sel(v > hi_v, splat(hi_v), v);
    return (v + 0x1.8p23f) - 0x1.8p23f;
#endif
}
/* nb_qs_min / nb_qs_max per lane */
INLINE vf vmin(vf a, vf b) { return sel(a < b, a, sel(b < a, b, (vf)((vi)a | (vi)b))); }
INLINE vf vmax(vf a, vf b) { return sel(a > b, a, sel(b > a, b, (vf)((vi)a & (vi)b))); }

/* Lane l of the batch's data into lane l of vectors xs[0..n) (zeros for unused lanes). */
INLINE void transpose_in(int nl, const float *const *src, int64_t n, vf *xs)
{
    float *t = (float *)xs;
    for (int l = 0; l < NL; l++) {
        const float *s = l < nl ? src[l] : NULL;
        if (s)
            for (int64_t i = 0; i < n; i++) t[i * NL + l] = s[i];
        else
            for (int64_t i = 0; i < n; i++) t[i * NL + l] = 0.0f;
    }
}

/* d and 1/d (0 for d = 0) of bf16 scales, as the reference computes them */
INLINE void scale_of(const uint16_t *bits, float *d, float *id)
{
    for (int l = 0; l < NL; l++) {
        d[l] = nb_bf16_to_f32(bits[l]);
        id[l] = d[l] != 0.0f ? 1.0f / d[l] : 0.0f;
    }
}

/* Codes (0..15, one per byte of qv[i]) into the lanes' packed outputs. */
INLINE void pack_int4(uint8_t *const *out, int nl, const vb *qv, int n)
{
    for (int l = 0; l < nl; l++) {
        uint8_t *o = out[l];
        for (int i = 0; i < n; i += 2) o[i / 2] = (uint8_t)(qv[i][l] | (qv[i + 1][l] << 4));
    }
}

/* ------------------------------------------------------------ w4a8 (symmetric) */

struct w4a8_s {
    vf x[NB_QUANT_GROUP_MAX], w[NB_QUANT_GROUP_MAX], wx[NB_QUANT_GROUP_MAX];
    vb q[NB_QUANT_GROUP_MAX];
};

/* The reference's 16 float lane accumulators, JB at a time: accumulator j sums elements
 * j, j + 16, j + 32, ... in that order, and the double total adds them in order of j,
 * as the reference does; JB independent chains in flight. */
#define JB (NL == 16 ? 8 : 4)

/* refit_w4a8: a = sum w x l, b = sum w l^2 for the codes of inverse scales id */
INLINE void w4a8_refit(const struct w4a8_s *s, int n, int wt, const float *idp, double *a,
                       double *b)
{
    vf id = load(idp);
    vd a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (int j0 = 0; j0 < REF_LANES; j0 += JB) {
        vf sxl[JB] = {0}, sll[JB] = {0};
        for (int i = j0; i < n; i += REF_LANES)
            for (int k = 0; k < JB; k++) {
                vf l = clamp_round(s->x[i + k] * id, -8.0f, 7.0f);
                if (wt) {
                    sxl[k] += s->wx[i + k] * l;
                    sll[k] += s->w[i + k] * l * l;
                } else { /* w = 1: w x = x and (w l) l = l l exactly */
                    sxl[k] += s->x[i + k] * l;
                    sll[k] += l * l;
                }
            }
        for (int k = 0; k < JB; k++) {
            vd t0, t1, u0, u1;
            widen(sxl[k], &t0, &t1);
            widen(sll[k], &u0, &u1);
            a0 += t0;
            a1 += t1;
            b0 += u0;
            b1 += u1;
        }
    }
    store2(a, a0, a1);
    store2(b, b0, b1);
}

/* score_w4a8 of scales d (inverses id) */
INLINE void w4a8_score(const struct w4a8_s *s, int n, int wt, const float *dp, const float *idp,
                       double *e)
{
    vf d = load(dp), id = load(idp);
    vd e0 = {0}, e1 = {0};
    for (int j0 = 0; j0 < REF_LANES; j0 += JB) {
        vf acc[JB] = {0};
        for (int i = j0; i < n; i += REF_LANES)
            for (int k = 0; k < JB; k++) {
                vf t = s->x[i + k] - d * clamp_round(s->x[i + k] * id, -8.0f, 7.0f);
                acc[k] += wt ? s->w[i + k] * t * t : t * t;
            }
        for (int k = 0; k < JB; k++) {
            vd t0, t1;
            widen(acc[k], &t0, &t1);
            e0 += t0;
            e1 += t1;
        }
    }
    store2(e, e0, e1);
}

/* A refit's scale, its bf16 bits (the lane's best where the refit failed) and whether
 * it is a candidate: the lane is active, b > 0 and a / b is finite. */
INLINE int w4a8_candidates(const int *act, const double *a, const double *b, const uint16_t *bd,
                           uint16_t *cb, int *ok)
{
    int n_ok = 0;
    for (int l = 0; l < NL; l++) {
        float dc = (float)(a[l] / b[l]);
        ok[l] = act[l] && b[l] > 0.0 && isfinite(dc);
        cb[l] = ok[l] ? nb_f32_to_bf16(dc) : bd[l];
        n_ok += ok[l];
    }
    return n_ok;
}

INLINE void w4a8_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    struct w4a8_s *s = scratch;
    const int n = b->n, wt = b->imp[0] != NULL;
    float amax[NL], xm[NL], d[NL], id[NL], cd[NL], cid[NL];
    double best[NL], e[NL], sa[NL], sb[NL];
    uint16_t bd[NL], cb[NL];
    int act[NL], ok[NL], any = 0;
    transpose_in(nl, b->x + l0, n, s->x);
    if (wt) {
        transpose_in(nl, b->imp + l0, n, s->w);
        for (int i = 0; i < n; i++) s->wx[i] = s->w[i] * s->x[i];
    }
    vf va = {0}, vm = {0};
    for (int i = 0; i < n; i++) { /* the first largest |x|, signed */
        vi gt = vabs(s->x[i]) > va;
        va = sel(gt, vabs(s->x[i]), va);
        vm = sel(gt, s->x[i], vm);
    }
    store(amax, va);
    store(xm, vm);
    for (int l = 0; l < NL; l++) { /* absmax: the largest magnitude lands on code 0 */
        bd[l] = nb_f32_to_bf16(xm[l] / -8.0f);
        act[l] = b->search && amax[l] != 0.0f && l < nl;
        any |= act[l];
    }
    scale_of(bd, d, id);
    w4a8_score(s, n, wt, d, id, best);
    for (int side = 0; any && side < 2; side++)
        for (int st = -NB_QS_SWEEP_HALF; st <= NB_QS_SWEEP_HALF; st++) {
            for (int l = 0; l < NL; l++)
                cid[l] = side == 0 ? -(8.0f + NB_QS_SWEEP_STEP * (float)st) / xm[l]
                                   : (7.0f + NB_QS_SWEEP_STEP * (float)st) / xm[l];
            w4a8_refit(s, n, wt, cid, sa, sb);
            if (!w4a8_candidates(act, sa, sb, bd, cb, ok)) continue;
            scale_of(cb, cd, cid);
            w4a8_score(s, n, wt, cd, cid, e);
            for (int l = 0; l < NL; l++)
                if (ok[l] && e[l] < best[l]) {
                    best[l] = e[l];
                    bd[l] = cb[l];
                }
        }
    for (int it = 0; any && it < NB_QS_REFINE_ITERS; it++) {
        scale_of(bd, d, id);
        w4a8_refit(s, n, wt, id, sa, sb);
        if (!w4a8_candidates(act, sa, sb, bd, cb, ok)) break;
        scale_of(cb, cd, cid);
        w4a8_score(s, n, wt, cd, cid, e);
        any = 0;
        for (int l = 0; l < NL; l++)
            if (ok[l] && e[l] < best[l]) {
                best[l] = e[l];
                bd[l] = cb[l];
                any = 1;
            } else {
                act[l] = 0;
            }
    }
    /* the winners' codes, and the error of what is stored */
    scale_of(bd, d, id);
    vf vdd = load(d), vid = load(id);
    vd er0 = {0}, er1 = {0}, rf0 = {0}, rf1 = {0};
    for (int i = 0; i < n; i++) {
        vf l = clamp_round(s->x[i] * vid, -8.0f, 7.0f);
        s->q[i] = __builtin_convertvector(__builtin_convertvector(l, vi) + 8, vb);
        if (b->stats) {
            vf xh = vdd * l; /* nb_q4s_value */
            vd x0 = lo(s->x[i]), x1 = hi(s->x[i]), f0 = x0 - lo(xh), f1 = x1 - hi(xh);
            er0 += f0 * f0;
            er1 += f1 * f1;
            rf0 += x0 * x0;
            rf1 += x1 * x1;
        }
    }
    pack_int4(b->q + l0, nl, s->q, n);
    store2(b->err + l0, er0, er1);
    store2(b->ref + l0, rf0, rf1);
    memcpy(b->d + l0, bd, sizeof bd);
}

/* ----------------------------------------------------------- w4a16 (asymmetric) */

struct w4a16_s {
    vf x[NB_QUANT_GROUP_MAX];
    vd xd[NB_QUANT_GROUP_MAX][2], wd[NB_QUANT_GROUP_MAX][2], wxd[NB_QUANT_GROUP_MAX][2];
    vb q[NB_QUANT_GROUP_MAX];
};

/* refit_w4a16's sums that depend on the codes round((x - m) id) clamped to 0..15 */
INLINE void w4a16_sums(const struct w4a16_s *s, int n, int wt, const float *mp, const float *idp,
                       double *sl, double *sll, double *sxl)
{
    vf m = load(mp), id = load(idp);
    vd l_0 = {0}, l_1 = {0}, ll0 = {0}, ll1 = {0}, xl0 = {0}, xl1 = {0};
    for (int i = 0; i < n; i++) {
        vf l = clamp_round((s->x[i] - m) * id, 0.0f, 15.0f);
        vd q0 = lo(l), q1 = hi(l);
        if (wt) {
            vd t0 = s->wd[i][0] * q0, t1 = s->wd[i][1] * q1;
            l_0 += t0;
            l_1 += t1;
            ll0 += t0 * q0;
            ll1 += t1 * q1;
            xl0 += s->wxd[i][0] * q0;
            xl1 += s->wxd[i][1] * q1;
        } else {
            l_0 += q0;
            l_1 += q1;
            ll0 += q0 * q0;
            ll1 += q1 * q1;
            xl0 += s->xd[i][0] * q0;
            xl1 += s->xd[i][1] * q1;
        }
    }
    store2(sl, l_0, l_1);
    store2(sll, ll0, ll1);
    store2(sxl, xl0, xl1);
}

/* score_w4a16 of stored scales d, mins m (inverses id) */
INLINE void w4a16_score(const struct w4a16_s *s, int n, int wt, const float *dp, const float *mp,
                        const float *idp, double *e)
{
    vf d = load(dp), m = load(mp), id = load(idp);
    vd e0 = {0}, e1 = {0};
    for (int i = 0; i < n; i++) {
        vf q = clamp_round((s->x[i] - m) * id, 0.0f, 15.0f);
        vf xh = d * q + m; /* nb_q4a_value: two roundings */
        vd f0 = s->xd[i][0] - lo(xh), f1 = s->xd[i][1] - hi(xh);
        if (wt) {
            e0 += s->wd[i][0] * f0 * f0;
            e1 += s->wd[i][1] * f1 * f1;
        } else {
            e0 += f0 * f0;
            e1 += f1 * f1;
        }
    }
    store2(e, e0, e1);
}

/* d, m and 1/d of bf16 pairs */
INLINE void scale2_of(const uint16_t *db, const uint16_t *mb, float *d, float *m, float *id)
{
    scale_of(db, d, id);
    for (int l = 0; l < NL; l++) m[l] = nb_bf16_to_f32(mb[l]);
}

/* refit_w4a16's solve, lane by lane: candidate bits (the best's where it fails). */
INLINE int w4a16_candidates(const int *act, const double *sw, const double *sx, const double *sl,
                            const double *sll, const double *sxl, const uint16_t *bd,
                            const uint16_t *bm, uint16_t *cb, uint16_t *cm, int *ok)
{
    int n_ok = 0;
    for (int l = 0; l < NL; l++) {
        double det = sw[l] * sll[l] - sl[l] * sl[l];
        float dc = (float)((sw[l] * sxl[l] - sl[l] * sx[l]) / det);
        float mc = (float)((sll[l] * sx[l] - sl[l] * sxl[l]) / det);
        ok[l] = act[l] && det > 1e-9 * sw[l] * sll[l] && isfinite(dc) && isfinite(mc);
        cb[l] = ok[l] ? nb_f32_to_bf16(dc) : bd[l];
        cm[l] = ok[l] ? nb_f32_to_bf16(mc) : bm[l];
        n_ok += ok[l];
    }
    return n_ok;
}

INLINE void w4a16_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    struct w4a16_s *s = scratch;
    const int n = b->n, wt = b->imp[0] != NULL;
    float mn[NL], mx[NL], d[NL], m[NL], id[NL], cd[NL], cmf[NL], cid[NL];
    double range[NL], best[NL], e[NL], sw[NL], sx[NL], sl[NL], sll[NL], sxl[NL];
    uint16_t bd[NL], bm[NL], cb[NL], cm[NL];
    int act[NL], ok[NL], any = 0;
    transpose_in(nl, b->x + l0, n, s->x);
    vd w0 = {0}, w1 = {0}, x0 = {0}, x1 = {0};
    for (int i = 0; i < n; i++) {
        s->xd[i][0] = lo(s->x[i]);
        s->xd[i][1] = hi(s->x[i]);
    }
    if (wt) {
        vf *w = (vf *)s->wxd; /* importance, transposed, before the products fill wxd */
        transpose_in(nl, b->imp + l0, n, w);
        for (int i = 0; i < n; i++) {
            s->wd[i][0] = lo(w[i]);
            s->wd[i][1] = hi(w[i]);
        }
        for (int i = 0; i < n; i++) {
            s->wxd[i][0] = s->wd[i][0] * s->xd[i][0];
            s->wxd[i][1] = s->wd[i][1] * s->xd[i][1];
        }
    }
    vf vmn = s->x[0], vmx = s->x[0];
    for (int i = 1; i < n; i++) {
        vmn = vmin(vmn, s->x[i]);
        vmx = vmax(vmx, s->x[i]);
    }
    store(mn, vmn);
    store(mx, vmx);
    for (int i = 0; i < n; i++) { /* refit_w4a16's sw, sx: the same for every candidate */
        if (wt) {
            w0 += s->wd[i][0];
            w1 += s->wd[i][1];
            x0 += s->wxd[i][0];
            x1 += s->wxd[i][1];
        } else {
            w0 += 1.0;
            w1 += 1.0;
            x0 += s->xd[i][0];
            x1 += s->xd[i][1];
        }
    }
    store2(sw, w0, w1);
    store2(sx, x0, x1);
    for (int l = 0; l < NL; l++) {
        range[l] = (double)mx[l] - (double)mn[l];
        bd[l] = nb_f32_to_bf16((float)(range[l] / 15.0));
        bm[l] = nb_f32_to_bf16(mn[l]);
        act[l] = b->search && range[l] != 0.0 && l < nl;
        any |= act[l];
    }
    scale2_of(bd, bm, d, m, id);
    w4a16_score(s, n, wt, d, m, id, best);
    for (int st = 0; any && st <= NB_QS_ASYM_STEPS; st++) {
        for (int l = 0; l < NL; l++)
            cid[l] = (float)((14.0 + (double)NB_QS_SWEEP_STEP * st) / range[l]);
        w4a16_sums(s, n, wt, mn, cid, sl, sll, sxl);
        if (!w4a16_candidates(act, sw, sx, sl, sll, sxl, bd, bm, cb, cm, ok)) continue;
        scale2_of(cb, cm, cd, cmf, cid);
        w4a16_score(s, n, wt, cd, cmf, cid, e);
        for (int l = 0; l < NL; l++)
            if (ok[l] && e[l] < best[l]) {
                best[l] = e[l];
                bd[l] = cb[l];
                bm[l] = cm[l];
            }
    }
    for (int it = 0; any && it < NB_QS_REFINE_ITERS; it++) {
        scale2_of(bd, bm, d, m, id); /* refit from the best's codes */
        w4a16_sums(s, n, wt, m, id, sl, sll, sxl);
        if (!w4a16_candidates(act, sw, sx, sl, sll, sxl, bd, bm, cb, cm, ok)) break;
        scale2_of(cb, cm, cd, cmf, cid);
        w4a16_score(s, n, wt, cd, cmf, cid, e);
        any = 0;
        for (int l = 0; l < NL; l++)
            if (ok[l] && e[l] < best[l]) {
                best[l] = e[l];
                bd[l] = cb[l];
                bm[l] = cm[l];
                any = 1;
            } else {
                act[l] = 0;
            }
    }
    scale2_of(bd, bm, d, m, id);
    vf vdd = load(d), vmm = load(m), vid = load(id);
    vd er0 = {0}, er1 = {0}, rf0 = {0}, rf1 = {0};
    for (int i = 0; i < n; i++) {
        vf q = clamp_round((s->x[i] - vmm) * vid, 0.0f, 15.0f);
        s->q[i] = __builtin_convertvector(__builtin_convertvector(q, vi), vb);
        if (b->stats) {
            vf xh = vdd * q + vmm;
            vd f0 = s->xd[i][0] - lo(xh), f1 = s->xd[i][1] - hi(xh);
            er0 += f0 * f0;
            er1 += f1 * f1;
            rf0 += s->xd[i][0] * s->xd[i][0];
            rf1 += s->xd[i][1] * s->xd[i][1];
        }
    }
    pack_int4(b->q + l0, nl, s->q, n);
    store2(b->err + l0, er0, er1);
    store2(b->ref + l0, rf0, rf1);
    memcpy(b->d + l0, bd, sizeof bd);
    memcpy(b->m + l0, bm, sizeof bm);
}

/* ------------------------------------------------------- w8a16 (per output row) */

/* refit_w8a16's sums for the codes of inverse scales id */
INLINE void w8_sums(const vf *x, int64_t n, const float *imp, const float *idp, double *sxl,
                    double *sll)
{
    vf id = load(idp);
    vd a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (int64_t i = 0; i < n; i++) {
        vf l = clamp_round(x[i] * id, -127.0f, 127.0f);
        vd l0 = lo(l), l1 = hi(l), x0 = lo(x[i]), x1 = hi(x[i]);
        if (imp) {
            double wi = imp[i];
            a0 += wi * x0 * l0;
            a1 += wi * x1 * l1;
            b0 += wi * l0 * l0;
            b1 += wi * l1 * l1;
        } else {
            a0 += x0 * l0;
            a1 += x1 * l1;
            b0 += l0 * l0;
            b1 += l1 * l1;
        }
    }
    store2(sxl, a0, a1);
    store2(sll, b0, b1);
}

/* score_w8a16 of f32 scales d (inverses id) */
INLINE void w8_score(const vf *x, int64_t n, const float *imp, const float *dp, const float *idp,
                     double *e)
{
    vf d = load(dp), id = load(idp);
    vd e0 = {0}, e1 = {0};
    for (int64_t i = 0; i < n; i++) {
        vf xh = d * clamp_round(x[i] * id, -127.0f, 127.0f); /* nb_q8_value */
        vd f0 = lo(x[i]) - lo(xh), f1 = hi(x[i]) - hi(xh);
        if (imp) {
            double wi = imp[i];
            e0 += wi * f0 * f0;
            e1 += wi * f1 * f1;
        } else {
            e0 += f0 * f0;
            e1 += f1 * f1;
        }
    }
    store2(e, e0, e1);
}

INLINE void inv_of(const float *d, float *id)
{
    for (int l = 0; l < NL; l++) id[l] = d[l] != 0.0f ? 1.0f / d[l] : 0.0f;
}

INLINE int w8_candidates(const int *act, const double *sxl, const double *sll, const float *bd,
                         float *cd, int *ok)
{
    int n_ok = 0;
    for (int l = 0; l < NL; l++) {
        float dc = (float)(sxl[l] / sll[l]);
        ok[l] = act[l] && sll[l] > 0.0 && isfinite(dc);
        cd[l] = ok[l] ? dc : bd[l];
        n_ok += ok[l];
    }
    return n_ok;
}

INLINE void w8_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    vf *x = scratch;
    const int64_t n = b->n;
    const float *imp = b->imp[0];
    float amax[NL], bd[NL], id[NL], cd[NL], cid[NL];
    double best[NL], e[NL], sxl[NL], sll[NL];
    int act[NL], ok[NL], any = 0;
    transpose_in(nl, b->x + l0, n, x);
    vf va = {0};
    for (int64_t i = 0; i < n; i++) va = sel(vabs(x[i]) > va, vabs(x[i]), va);
    store(amax, va);
    for (int l = 0; l < NL; l++) {
        bd[l] = nb_qs_absmax_w8(amax[l]);
        act[l] = b->search && amax[l] != 0.0f && l < nl;
        any |= act[l];
    }
    inv_of(bd, id);
    w8_score(x, n, imp, bd, id, best);
    for (int st = 0; any && st <= NB_QS_W8_STEPS; st++) {
        for (int l = 0; l < NL; l++)
            cid[l] = 127.0f / (amax[l] * (1.0f - NB_QS_W8_CLIP_STEP * (float)st));
        w8_sums(x, n, imp, cid, sxl, sll);
        if (!w8_candidates(act, sxl, sll, bd, cd, ok)) continue;
        inv_of(cd, cid);
        w8_score(x, n, imp, cd, cid, e);
        for (int l = 0; l < NL; l++)
            if (ok[l] && e[l] < best[l]) {
                best[l] = e[l];
                bd[l] = cd[l];
            }
    }
    for (int it = 0; any && it < NB_QS_REFINE_ITERS; it++) {
        inv_of(bd, id);
        w8_sums(x, n, imp, id, sxl, sll);
        if (!w8_candidates(act, sxl, sll, bd, cd, ok)) break;
        inv_of(cd, cid);
        w8_score(x, n, imp, cd, cid, e);
        any = 0;
        for (int l = 0; l < NL; l++)
            if (ok[l] && e[l] < best[l]) {
                best[l] = e[l];
                bd[l] = cd[l];
                any = 1;
            } else {
                act[l] = 0;
            }
    }
    inv_of(bd, id);
    vf vdd = load(bd), vid = load(id);
    vd er0 = {0}, er1 = {0}, rf0 = {0}, rf1 = {0};
    for (int64_t i = 0; i < n; i++) {
        vf q = clamp_round(x[i] * vid, -127.0f, 127.0f);
        vi qi = __builtin_convertvector(q, vi);
        for (int l = 0; l < nl; l++) b->q[l0 + l][i] = (uint8_t)(int8_t)qi[l];
        if (b->stats) {
            vf xh = vdd * q;
            vd x0 = lo(x[i]), x1 = hi(x[i]), f0 = x0 - lo(xh), f1 = x1 - hi(xh);
            er0 += f0 * f0;
            er1 += f1 * f1;
            rf0 += x0 * x0;
            rf1 += x1 * x1;
        }
    }
    store2(b->err + l0, er0, er1);
    store2(b->ref + l0, rf0, rf1);
    memcpy(b->d8 + l0, bd, sizeof bd);
}

#undef clamp_round
#undef hi
#undef inv_of
#undef lo
#undef load
#undef pack_int4
#undef scale2_of
#undef scale_of
#undef sel
#undef splat
#undef store
#undef store2
#undef transpose_in
#undef vabs
#undef vmax
#undef vmin
#undef w4a16_candidates
#undef w4a16_run
#undef w4a16_score
#undef w4a16_sums
#undef w4a8_candidates
#undef w4a8_refit
#undef w4a8_run
#undef w4a8_score
#undef w8_candidates
#undef w8_run
#undef w8_score
#undef w8_sums
#undef widen
#undef vf
#undef vi
#undef vu
#undef vb
#undef vd
#undef vd2
#undef vh
#undef w4a8_s
#undef w4a16_s
#undef JB
