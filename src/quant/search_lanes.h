/* quant/search_lanes.h — the batched search of search.c for one lane count: a template,
 * included by search.c once per vector width with NL (lanes: floats per vector), QS(name)
 * (the name with the width appended) and INLINE (with the width's target) defined. Not a
 * header of its own.
 *
 * Lane l of every vector holds group (row) l of the batch and does exactly the float and
 * double operations quant.c's reference does for its group, in the same order; the
 * reference's per-candidate decisions (refit failed, better or not) become lane masks.
 */

#define vf QS(vf)
#define vi QS(vi)
#define vu QS(vu)
#define vb QS(vb)
#define vd QS(vd)
#define vd2 QS(vd2)
#define vh QS(vh)
#define vl QS(vl)
#define vih QS(vih)
#define dd QS(dd)
#define w4a8_s QS(w4a8_s)
#define w4a16_s QS(w4a16_s)
#define splat QS(splat)
#define sel QS(sel)
#define seli QS(seli)
#define any QS(any)
#define widen QS(widen)
#define dwiden QS(dwiden)
#define dnarrow QS(dnarrow)
#define dadd QS(dadd)
#define dsub QS(dsub)
#define dmul QS(dmul)
#define ddiv QS(ddiv)
#define dsplat QS(dsplat)
#define dless QS(dless)
#define djoin QS(djoin)
#define dsplit QS(dsplit)
#define dnz QS(dnz)
#define dsel QS(dsel)
#define dstore QS(dstore)
#define vabs QS(vabs)
#define finite QS(finite)
#define clamp_round QS(clamp_round)
#define vmin QS(vmin)
#define vmax QS(vmax)
#define bf16_val QS(bf16_val)
#define bf16_bits QS(bf16_bits)
#define inv_or0 QS(inv_or0)
#define transpose_in QS(transpose_in)
#define pack_int4 QS(pack_int4)
#define w4a8_refit QS(w4a8_refit)
#define w4a8_score QS(w4a8_score)
#define w4a8_cand QS(w4a8_cand)
#define w4a8_run QS(w4a8_run)
#define w4a16_sums QS(w4a16_sums)
#define w4a16_score QS(w4a16_score)
#define w4a16_cand QS(w4a16_cand)
#define w4a16_run QS(w4a16_run)
#define w8_sums QS(w8_sums)
#define w8_score QS(w8_score)
#define w8_cand QS(w8_cand)
#define w8_run QS(w8_run)

/* (may_alias: the transposes write vectors through float pointers) */
typedef float vf __attribute__((vector_size(4 * NL), may_alias));
typedef int32_t vi __attribute__((vector_size(4 * NL), may_alias));
typedef uint32_t vu __attribute__((vector_size(4 * NL), may_alias));
typedef uint8_t vb __attribute__((vector_size(NL), may_alias));
typedef double vd __attribute__((vector_size(4 * NL), may_alias));  /* NL / 2 lanes */
typedef int64_t vl __attribute__((vector_size(4 * NL), may_alias)); /* NL / 2 lanes */
typedef double vd2 __attribute__((vector_size(8 * NL), may_alias)); /* NL lanes */
typedef float vh __attribute__((vector_size(2 * NL), may_alias));   /* NL / 2 lanes */
typedef int32_t vih __attribute__((vector_size(2 * NL), may_alias)); /* NL / 2 lanes */
/* The NL lanes in double: lanes 0 .. NL/2 - 1 in v[0], the others in v[1]. */
typedef struct {
    vd v[2];
} dd;

/* ---- lanes of float, int32 and double ---- */

INLINE vf splat(float c)
{
    vf v;
    for (int l = 0; l < NL; l++) v[l] = c;
    return v;
}
INLINE vf sel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
INLINE vi seli(vi m, vi a, vi b) { return (a & m) | (b & ~m); }
INLINE int any(vi m)
{
    int r = 0;
    for (int l = 0; l < NL; l++) r |= m[l];
    return r != 0;
}
/* the lanes widened to double (one conversion of the whole vector where the target has
 * double vectors of NL lanes: GCC 12 lowers a half-width one into four instructions) */
INLINE void widen(vf v, vd *a, vd *b)
{
#if defined(__x86_64__) && NL == 16 /* (no trip through memory) */
    *a = (vd)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v));
    *b = (vd)_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)v, 1));
#elif defined(__x86_64__) && NL == 8
    *a = (vd)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v));
    *b = (vd)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1));
#elif NL == 16
    vd2 w = __builtin_convertvector(v, vd2);
    memcpy(a, &w, sizeof *a);
    memcpy(b, (const char *)&w + sizeof *a, sizeof *b);
#else
    vh h0, h1;
    memcpy(&h0, &v, sizeof h0);
    memcpy(&h1, (const char *)&v + sizeof h0, sizeof h1);
    *a = __builtin_convertvector(h0, vd);
    *b = __builtin_convertvector(h1, vd);
#endif
}
INLINE dd dwiden(vf v)
{
    dd r;
    widen(v, &r.v[0], &r.v[1]);
    return r;
}
/* (float) of each lane */
INLINE vf dnarrow(dd x)
{
#if defined(__x86_64__) && NL == 16
    return (vf)_mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps((__m512d)x.v[0])),
                                  _mm512_cvtpd_ps((__m512d)x.v[1]), 1);
#elif defined(__x86_64__) && NL == 8
    return (vf)_mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps((__m256d)x.v[0])),
                                    _mm256_cvtpd_ps((__m256d)x.v[1]), 1);
#else
    vh h0 = __builtin_convertvector(x.v[0], vh), h1 = __builtin_convertvector(x.v[1], vh);
    vf r;
    memcpy(&r, &h0, sizeof h0);
    memcpy((char *)&r + sizeof h0, &h1, sizeof h1);
    return r;
#endif
}
INLINE dd dadd(dd a, dd b) { return (dd){{a.v[0] + b.v[0], a.v[1] + b.v[1]}}; }
INLINE dd dsub(dd a, dd b) { return (dd){{a.v[0] - b.v[0], a.v[1] - b.v[1]}}; }
INLINE dd dmul(dd a, dd b) { return (dd){{a.v[0] * b.v[0], a.v[1] * b.v[1]}}; }
INLINE dd ddiv(dd a, dd b) { return (dd){{a.v[0] / b.v[0], a.v[1] / b.v[1]}}; }
INLINE dd dsplat(double c)
{
    vd v;
    for (int l = 0; l < NL / 2; l++) v[l] = c;
    return (dd){{v, v}};
}
/* two halves of double-lane masks as one int32 lane mask, and back */
INLINE vi djoin(vl m0, vl m1)
{
#if defined(__x86_64__) && NL == 16
    return (vi)_mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32((__m512i)m0)),
                                  _mm512_cvtepi64_epi32((__m512i)m1), 1);
#else
    vih h0 = __builtin_convertvector(m0, vih), h1 = __builtin_convertvector(m1, vih);
    vi m;
    memcpy(&m, &h0, sizeof h0);
    memcpy((char *)&m + sizeof h0, &h1, sizeof h1);
    return m;
#endif
}
INLINE void dsplit(vi m, vl *m0, vl *m1)
{
#if defined(__x86_64__) && NL == 16
    *m0 = (vl)_mm512_cvtepi32_epi64(_mm512_castsi512_si256((__m512i)m));
    *m1 = (vl)_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64((__m512i)m, 1));
#else
    vih h0, h1;
    memcpy(&h0, &m, sizeof h0);
    memcpy(&h1, (const char *)&m + sizeof h0, sizeof h1);
    *m0 = __builtin_convertvector(h0, vl);
    *m1 = __builtin_convertvector(h1, vl);
#endif
}
/* a < b per lane; a != 0 per lane */
INLINE vi dless(dd a, dd b) { return djoin((vl)(a.v[0] < b.v[0]), (vl)(a.v[1] < b.v[1])); }
INLINE vi dnz(dd a) { return djoin((vl)(a.v[0] != 0.0), (vl)(a.v[1] != 0.0)); }
INLINE dd dsel(vi m, dd a, dd b)
{
    vl m0, m1;
    dsplit(m, &m0, &m1);
    return (dd){{(vd)(((vl)a.v[0] & m0) | ((vl)b.v[0] & ~m0)),
                 (vd)(((vl)a.v[1] & m1) | ((vl)b.v[1] & ~m1))}};
}
INLINE void dstore(double *p, dd x)
{
    memcpy(p, &x.v[0], sizeof x.v[0]);
    memcpy(p + NL / 2, &x.v[1], sizeof x.v[1]);
}
INLINE vf vabs(vf x) { return (vf)((vu)x & 0x7fffffffu); }
INLINE vi finite(vf x) { return (vi)(((vu)x & 0x7f800000u) != 0x7f800000u); }
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
/* nb_bf16_to_f32 / nb_f32_to_bf16 per lane (bf16 bits in the low half of an int32) */
INLINE vf bf16_val(vi bits) { return (vf)((vu)bits << 16); }
INLINE vi bf16_bits(vf f)
{
    vu u = (vu)f;
    vi nan = (vi)((u & 0x7fffffffu) > 0x7f800000u);
    return seli(nan, (vi)((u >> 16) | 0x40u), (vi)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
}
/* d != 0 ? 1 / d : 0 */
INLINE vf inv_or0(vf d) { return sel(d != 0.0f, 1.0f / d, splat(0.0f)); }

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

/* refit_w4a8's sums a = sum w x l, b = sum w l^2 for the codes of inverse scales id */
INLINE void w4a8_refit(const struct w4a8_s *s, int n, int wt, vf id, dd *a, dd *b)
{
    dd sa = dsplat(0.0), sb = dsplat(0.0);
    vf sb_int = {0};
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
            sa = dadd(sa, dwiden(sxl[k]));
            if (wt)
                sb = dadd(sb, dwiden(sll[k]));
            else /* integers below 2^24: every order of summing is exact */
                sb_int += sll[k];
        }
    }
    *a = sa;
    *b = wt ? sb : dwiden(sb_int);
}

/* score_w4a8 of scales d (inverses id) */
INLINE dd w4a8_score(const struct w4a8_s *s, int n, int wt, vf d, vf id)
{
    dd e = dsplat(0.0);
    for (int j0 = 0; j0 < REF_LANES; j0 += JB) {
        vf acc[JB] = {0};
        for (int i = j0; i < n; i += REF_LANES)
            for (int k = 0; k < JB; k++) {
                vf t = s->x[i + k] - d * clamp_round(s->x[i + k] * id, -8.0f, 7.0f);
                acc[k] += wt ? s->w[i + k] * t * t : t * t;
            }
        for (int k = 0; k < JB; k++) e = dadd(e, dwiden(acc[k]));
    }
    return e;
}

/* refit_w4a8's end: the candidate scale's bits (*cb; the best's where the lane has
 * none) and the lanes that have one: active, b > 0 and a / b finite */
INLINE vi w4a8_cand(vi act, dd a, dd b, vi bd, vi *cb)
{
    vf dc = dnarrow(ddiv(a, b));
    vi ok = act & dless(dsplat(0.0), b) & finite(dc);
    *cb = seli(ok, bf16_bits(dc), bd);
    return ok;
}

INLINE void w4a8_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    struct w4a8_s *s = scratch;
    const int n = b->n, wt = b->imp[0] != NULL;
    transpose_in(nl, b->x + l0, n, s->x);
    if (wt) {
        transpose_in(nl, b->imp + l0, n, s->w);
        for (int i = 0; i < n; i++) s->wx[i] = s->w[i] * s->x[i];
    }
    vf amax = {0}, xm = {0};
    for (int i = 0; i < n; i++) { /* the first largest |x|, signed */
        vi gt = vabs(s->x[i]) > amax;
        amax = sel(gt, vabs(s->x[i]), amax);
        xm = sel(gt, s->x[i], xm);
    }
    vi lane_used;
    for (int l = 0; l < NL; l++) lane_used[l] = l < nl ? -1 : 0;
    /* absmax: the largest magnitude lands on code 0 */
    vi bd = bf16_bits(xm / -8.0f), cb;
    vi act = (lane_used & (b->search ? -1 : 0)) & (amax != 0.0f);
    vf d = bf16_val(bd);
    dd best = w4a8_score(s, n, wt, d, inv_or0(d)), sa, sb;
    for (int side = 0; any(act) && side < 2; side++)
        for (int st = -NB_QS_SWEEP_HALF; st <= NB_QS_SWEEP_HALF; st++) {
            /* side 0: x_amax towards code 0 (-8); side 1: towards code 15 (+7) */
            vf iscale = side == 0 ? -(8.0f + NB_QS_SWEEP_STEP * (float)st) / xm
                                  : (7.0f + NB_QS_SWEEP_STEP * (float)st) / xm;
            w4a8_refit(s, n, wt, iscale, &sa, &sb);
            vi ok = w4a8_cand(act, sa, sb, bd, &cb);
            if (!any(ok)) continue;
            vf cd = bf16_val(cb);
            dd e = w4a8_score(s, n, wt, cd, inv_or0(cd));
            vi win = ok & dless(e, best);
            best = dsel(win, e, best);
            bd = seli(win, cb, bd);
        }
    for (int it = 0; any(act) && it < NB_QS_REFINE_ITERS; it++) {
        w4a8_refit(s, n, wt, inv_or0(bf16_val(bd)), &sa, &sb);
        vi ok = w4a8_cand(act, sa, sb, bd, &cb);
        if (!any(ok)) break;
        vf cd = bf16_val(cb);
        dd e = w4a8_score(s, n, wt, cd, inv_or0(cd));
        act = ok & dless(e, best); /* a lane goes on while it improves */
        best = dsel(act, e, best);
        bd = seli(act, cb, bd);
    }
    /* the winners' codes, and the error of what is stored */
    d = bf16_val(bd);
    vf id = inv_or0(d);
    dd er = dsplat(0.0), rf = dsplat(0.0);
    for (int i = 0; i < n; i++) {
        vf l = clamp_round(s->x[i] * id, -8.0f, 7.0f);
        s->q[i] = __builtin_convertvector(__builtin_convertvector(l, vi) + 8, vb);
        if (b->stats) {
            dd x = dwiden(s->x[i]), f = dsub(x, dwiden(d * l)); /* nb_q4s_value */
            er = dadd(er, dmul(f, f));
            rf = dadd(rf, dmul(x, x));
        }
    }
    pack_int4(b->q + l0, nl, s->q, n);
    dstore(b->err + l0, er);
    dstore(b->ref + l0, rf);
    for (int l = 0; l < nl; l++) b->d[l0 + l] = (uint16_t)bd[l];
}

/* ----------------------------------------------------------- w4a16 (asymmetric) */

struct w4a16_s {
    vf x[NB_QUANT_GROUP_MAX];
    dd xd[NB_QUANT_GROUP_MAX], wd[NB_QUANT_GROUP_MAX], wxd[NB_QUANT_GROUP_MAX];
    vb q[NB_QUANT_GROUP_MAX];
};

/* refit_w4a16's sums that depend on the codes round((x - m) id) clamped to 0..15 */
INLINE void w4a16_sums(const struct w4a16_s *s, int n, int wt, vf m, vf id, dd *sl, dd *sll,
                       dd *sxl)
{
    dd a = dsplat(0.0), b = dsplat(0.0), c = dsplat(0.0);
    vf fa = {0}, fb = {0};
    for (int i = 0; i < n; i++) {
        vf lf = clamp_round((s->x[i] - m) * id, 0.0f, 15.0f);
        dd l = dwiden(lf);
        if (wt) {
            dd t = dmul(s->wd[i], l);
            a = dadd(a, t);
            b = dadd(b, dmul(t, l));
            c = dadd(c, dmul(s->wxd[i], l));
        } else { /* w = 1: w l = l, (w l) l = l l and (w x) l = x l exactly; sum l and
                  * sum l^2 are integers below 2^24, exact in float in any order */
            fa += lf;
            fb += lf * lf;
            c = dadd(c, dmul(s->xd[i], l));
        }
    }
    *sl = wt ? a : dwiden(fa);
    *sll = wt ? b : dwiden(fb);
    *sxl = c;
}

/* score_w4a16 of stored scales d, mins m (inverses id) */
INLINE dd w4a16_score(const struct w4a16_s *s, int n, int wt, vf d, vf m, vf id)
{
    dd e = dsplat(0.0);
    for (int i = 0; i < n; i++) {
        vf q = clamp_round((s->x[i] - m) * id, 0.0f, 15.0f);
        dd f = dsub(s->xd[i], dwiden(d * q + m)); /* nb_q4a_value: two roundings */
        e = dadd(e, wt ? dmul(dmul(s->wd[i], f), f) : dmul(f, f));
    }
    return e;
}

/* refit_w4a16's solve: the candidate's bits (the best's where the lane has none) and
 * the lanes that have one */
INLINE vi w4a16_cand(vi act, dd sw, dd sx, dd sl, dd sll, dd sxl, vi bd, vi bm, vi *cb, vi *cm)
{
    dd det = dsub(dmul(sw, sll), dmul(sl, sl));
    vf dc = dnarrow(ddiv(dsub(dmul(sw, sxl), dmul(sl, sx)), det));
    vf mc = dnarrow(ddiv(dsub(dmul(sll, sx), dmul(sl, sxl)), det));
    vi ok = act & dless(dmul(dmul(dsplat(1e-9), sw), sll), det) & finite(dc) & finite(mc);
    *cb = seli(ok, bf16_bits(dc), bd);
    *cm = seli(ok, bf16_bits(mc), bm);
    return ok;
}

INLINE void w4a16_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    struct w4a16_s *s = scratch;
    const int n = b->n, wt = b->imp[0] != NULL;
    transpose_in(nl, b->x + l0, n, s->x);
    for (int i = 0; i < n; i++) s->xd[i] = dwiden(s->x[i]);
    if (wt) {
        vf *w = (vf *)s->wxd; /* importance, transposed, before the products fill wxd */
        transpose_in(nl, b->imp + l0, n, w);
        for (int i = 0; i < n; i++) s->wd[i] = dwiden(w[i]);
        for (int i = 0; i < n; i++) s->wxd[i] = dmul(s->wd[i], s->xd[i]);
    }
    vf mn = s->x[0], mx = s->x[0];
    for (int i = 1; i < n; i++) {
        mn = vmin(mn, s->x[i]);
        mx = vmax(mx, s->x[i]);
    }
    dd sw = dsplat(0.0), sx = dsplat(0.0); /* refit_w4a16's sw, sx: the same every time */
    for (int i = 0; i < n; i++) {
        sw = dadd(sw, wt ? s->wd[i] : dsplat(1.0));
        sx = dadd(sx, wt ? s->wxd[i] : s->xd[i]);
    }
    vi lane_used;
    for (int l = 0; l < NL; l++) lane_used[l] = l < nl ? -1 : 0;
    dd range = dsub(dwiden(mx), dwiden(mn));
    vi bd = bf16_bits(dnarrow(ddiv(range, dsplat(15.0)))), bm = bf16_bits(mn), cb, cm;
    vi act = (lane_used & (b->search ? -1 : 0)) & dnz(range);
    vf d = bf16_val(bd), m = bf16_val(bm);
    dd best = w4a16_score(s, n, wt, d, m, inv_or0(d)), sl, sll, sxl;
    for (int st = 0; any(act) && st <= NB_QS_ASYM_STEPS; st++) {
        vf iscale = dnarrow(ddiv(dsplat(14.0 + (double)NB_QS_SWEEP_STEP * st), range));
        w4a16_sums(s, n, wt, mn, iscale, &sl, &sll, &sxl);
        vi ok = w4a16_cand(act, sw, sx, sl, sll, sxl, bd, bm, &cb, &cm);
        if (!any(ok)) continue;
        vf cd = bf16_val(cb);
        dd e = w4a16_score(s, n, wt, cd, bf16_val(cm), inv_or0(cd));
        vi win = ok & dless(e, best);
        best = dsel(win, e, best);
        bd = seli(win, cb, bd);
        bm = seli(win, cm, bm);
    }
    for (int it = 0; any(act) && it < NB_QS_REFINE_ITERS; it++) {
        d = bf16_val(bd); /* refit from the best's codes */
        w4a16_sums(s, n, wt, bf16_val(bm), inv_or0(d), &sl, &sll, &sxl);
        vi ok = w4a16_cand(act, sw, sx, sl, sll, sxl, bd, bm, &cb, &cm);
        if (!any(ok)) break;
        vf cd = bf16_val(cb);
        dd e = w4a16_score(s, n, wt, cd, bf16_val(cm), inv_or0(cd));
        act = ok & dless(e, best);
        best = dsel(act, e, best);
        bd = seli(act, cb, bd);
        bm = seli(act, cm, bm);
    }
    d = bf16_val(bd);
    m = bf16_val(bm);
    vf id = inv_or0(d);
    dd er = dsplat(0.0), rf = dsplat(0.0);
    for (int i = 0; i < n; i++) {
        vf q = clamp_round((s->x[i] - m) * id, 0.0f, 15.0f);
        s->q[i] = __builtin_convertvector(__builtin_convertvector(q, vi), vb);
        if (b->stats) {
            dd f = dsub(s->xd[i], dwiden(d * q + m));
            er = dadd(er, dmul(f, f));
            rf = dadd(rf, dmul(s->xd[i], s->xd[i]));
        }
    }
    pack_int4(b->q + l0, nl, s->q, n);
    dstore(b->err + l0, er);
    dstore(b->ref + l0, rf);
    for (int l = 0; l < nl; l++) {
        b->d[l0 + l] = (uint16_t)bd[l];
        b->m[l0 + l] = (uint16_t)bm[l];
    }
}

/* ------------------------------------------------------- w8a16 (per output row) */

/* refit_w8a16's sums for the codes of inverse scales id */
INLINE void w8_sums(const vf *x, int64_t n, const float *imp, vf id, dd *sxl, dd *sll)
{
    dd a = dsplat(0.0), b = dsplat(0.0);
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        /* w = 1: sum l^2 in float, 1024 terms of at most 127^2 at a time: integers
         * below 2^24, exact, as the reference's double sum of integers is */
        vf fb = {0};
        int64_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
        for (int64_t i = i0; i < i1; i++) {
            vf lf = clamp_round(x[i] * id, -127.0f, 127.0f);
            dd l = dwiden(lf), xd = dwiden(x[i]);
            if (imp) {
                dd wi = dsplat(imp[i]);
                a = dadd(a, dmul(dmul(wi, xd), l));
                b = dadd(b, dmul(dmul(wi, l), l));
            } else {
                a = dadd(a, dmul(xd, l));
                fb += lf * lf;
            }
        }
        if (!imp) b = dadd(b, dwiden(fb));
    }
    *sxl = a;
    *sll = b;
}

/* score_w8a16 of f32 scales d (inverses id) */
INLINE dd w8_score(const vf *x, int64_t n, const float *imp, vf d, vf id)
{
    dd e = dsplat(0.0);
    for (int64_t i = 0; i < n; i++) {
        dd f = dsub(dwiden(x[i]), dwiden(d * clamp_round(x[i] * id, -127.0f, 127.0f)));
        e = dadd(e, imp ? dmul(dmul(dsplat(imp[i]), f), f) : dmul(f, f));
    }
    return e;
}

INLINE vi w8_cand(vi act, dd sxl, dd sll, vf bd, vf *cd)
{
    vf dc = dnarrow(ddiv(sxl, sll));
    vi ok = act & dless(dsplat(0.0), sll) & finite(dc);
    *cd = sel(ok, dc, bd);
    return ok;
}

INLINE void w8_run(struct nb_qs_batch *b, int l0, void *scratch)
{
    const int nl = b->n_lanes - l0 < NL ? b->n_lanes - l0 : NL;
    vf *x = scratch;
    const int64_t n = b->n;
    const float *imp = b->imp[0];
    transpose_in(nl, b->x + l0, n, x);
    vf amax = {0}, bd, cd;
    for (int64_t i = 0; i < n; i++) amax = sel(vabs(x[i]) > amax, vabs(x[i]), amax);
    vi lane_used;
    for (int l = 0; l < NL; l++) {
        lane_used[l] = l < nl ? -1 : 0;
        bd[l] = nb_qs_absmax_w8(amax[l]);
    }
    vi act = (lane_used & (b->search ? -1 : 0)) & (amax != 0.0f);
    dd best = w8_score(x, n, imp, bd, inv_or0(bd)), sxl, sll;
    for (int st = 0; any(act) && st <= NB_QS_W8_STEPS; st++) {
        vf iscale = 127.0f / (amax * (1.0f - NB_QS_W8_CLIP_STEP * (float)st));
        w8_sums(x, n, imp, iscale, &sxl, &sll);
        vi ok = w8_cand(act, sxl, sll, bd, &cd);
        if (!any(ok)) continue;
        dd e = w8_score(x, n, imp, cd, inv_or0(cd));
        vi win = ok & dless(e, best);
        best = dsel(win, e, best);
        bd = sel(win, cd, bd);
    }
    for (int it = 0; any(act) && it < NB_QS_REFINE_ITERS; it++) {
        w8_sums(x, n, imp, inv_or0(bd), &sxl, &sll);
        vi ok = w8_cand(act, sxl, sll, bd, &cd);
        if (!any(ok)) break;
        dd e = w8_score(x, n, imp, cd, inv_or0(cd));
        act = ok & dless(e, best);
        best = dsel(act, e, best);
        bd = sel(act, cd, bd);
    }
    vf id = inv_or0(bd);
    dd er = dsplat(0.0), rf = dsplat(0.0);
    for (int64_t i = 0; i < n; i++) {
        vf q = clamp_round(x[i] * id, -127.0f, 127.0f);
        vi qi = __builtin_convertvector(q, vi);
        for (int l = 0; l < nl; l++) b->q[l0 + l][i] = (uint8_t)(int8_t)qi[l];
        if (b->stats) {
            dd xd = dwiden(x[i]), f = dsub(xd, dwiden(bd * q));
            er = dadd(er, dmul(f, f));
            rf = dadd(rf, dmul(xd, xd));
        }
    }
    dstore(b->err + l0, er);
    dstore(b->ref + l0, rf);
    for (int l = 0; l < nl; l++) b->d8[l0 + l] = bd[l];
}

#undef JB
#undef vf
#undef vi
#undef vu
#undef vb
#undef vd
#undef vd2
#undef vh
#undef vl
#undef vih
#undef dd
#undef w4a8_s
#undef w4a16_s
#undef splat
#undef sel
#undef seli
#undef any
#undef widen
#undef dwiden
#undef dnarrow
#undef dadd
#undef dsub
#undef dmul
#undef ddiv
#undef dsplat
#undef dless
#undef djoin
#undef dsplit
#undef dnz
#undef dsel
#undef dstore
#undef vabs
#undef finite
#undef clamp_round
#undef vmin
#undef vmax
#undef bf16_val
#undef bf16_bits
#undef inv_or0
#undef transpose_in
#undef pack_int4
#undef w4a8_refit
#undef w4a8_score
#undef w4a8_cand
#undef w4a8_run
#undef w4a16_sums
#undef w4a16_score
#undef w4a16_cand
#undef w4a16_run
#undef w8_sums
#undef w8_score
#undef w8_cand
#undef w8_run
