/* kernels/x86/gemm_kq_avx512vnni.c — GGUF Q4_K / Q5_K / Q6_K (and Q4_0 / Q8_0, at the
 * end) matrices, as their X16 records
 * (kernels/qblock.h), against int8 activations with AVX-512 VNNI: no float decode of
 * the weights. One record is 16 rows x 256 k; a 64-byte chunk of it is 16 rows x 8 k:
 *
 *   Q4_K   w  = load 64 B          lo = w & 0x0F, hi = (w >> 4) & 0x0F     (u8 codes)
 *   Q5_K   as Q4_K, | the fifth bits (16 B a chunk, shifted into place: kernels/qblock.h)
 *   Q6_K   w  = load 64 B (ql), h = load 32 B (qh) widened to 64 (byte p: its 4 bits)
 *          lo = (w & 0x0F) | (h & 3) << 4, hi = ((w >> 4) & 0x0F) | (h & 0xC) << 2
 *   isum[t] += vpdpbusd(lo, set1(a[t][k0..k3])) + vpdpbusd(hi, set1(a[t][k4..k7]))
 *
 * Per sub-block s (32 k for Q4_K, 16 for Q6_K): S[t] += float(isum[t]) * (d * sc_s),
 * with d * sc_s made once per record for the 16 rows (f16 d widened, the 6- or 8-bit
 * scale converted: exact, one rounding for the product, as the reference). The zero
 * terms are integers: Q4_K's mins sum_s mn_s * asum32_s and Q6_K's sum_s sc_s * asum16_s
 * are vpdpwssd of the record's (scale or min) pairs against the activation's pairs of
 * code sums. Then y[t] += xd[t][i] * (S[t] - dmin * float(M)) (Q6_K: - 32 d * float(B)).
 * The same operations as nb_gemm_q4_k_x16_ref / _q6_k_x16_ref except that the sums over
 * sub-blocks use fused multiply-adds (one rounding fewer per sub-block).
 *
 * Tiles: NT tokens share each unpacked chunk (prefill: NT = 6); a decode step (NT = 1)
 * keeps two accumulator chains (lo, hi) and prefetches PF_DIST bytes ahead. NT measured
 * in situ (Qwen3-1.7B Q4_K_M, pp512, 2 threads, 5 interleaved passes on the 2-core Xeon
 * of 2026-12-03): NT 4 99-118 tok/s, NT 6 99-140 (four of five pairs +15-19%); NT 8
 * (3 passes) no better than 4.
 * Q6_K with 2 or more tokens unpacks each record once into 4 KiB (L1) that every token tile
 * of the cache block reads, y accumulated in place record by record (the same operations in
 * the same order): its unpack (two loads, four shifts, ors and masks a chunk) cost more than
 * the products for tiles of a few tokens. bench/batch_kernels.sh, 2048 x 2048, 1 thread, two
 * interleaved passes on the model-167 Xeon (2026-12-06): 8 tokens 295-313 vs 361-369 us, 15
 * 482-511 vs 540-558, 64 1641-1805 vs 1934-2043; 2 tokens unchanged. Q4_K (2 and 4 tokens
 * 111-144 vs 87-129 us) and Q5_K (4 tokens 194-206 vs 183) lost, so they unpack per tile.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "kernels/x86/avx512_loads.h"

#ifndef KQ_NT /* prefill tokens a tile (at most 8) */
#define KQ_NT 6
#endif
#ifndef KQ_TOK_BLOCK
#define KQ_TOK_BLOCK 64
#endif
#ifndef KQ_UNPACK_ONCE /* 2+ tokens: each record unpacked once for all token tiles */
#define KQ_UNPACK_ONCE 1
#endif
#ifndef KQ_PF_DIST
#define KQ_PF_DIST 4096
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
    return acc;
}

/* One chunk's codes (lo: k 0..3, hi: k 4..7 of 16 rows) against NT tokens' activations at
 * a + t * ldxq: acc[t] += both; one token keeps hi in a second chain (acc2). */
INLINE void dot_chunk(__m512i *acc, __m512i *acc2, __m512i lo, __m512i hi, const int8_t *a,
                      int64_t ldxq, const int NT)
{
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        acc[t] = dpbusd(acc[t], lo, nb_bcast32(a + t * ldxq));
        if (NT == 1)
            *acc2 = dpbusd(*acc2, hi, nb_bcast32(a + t * ldxq + 4));
        else
            acc[t] = dpbusd(acc[t], hi, nb_bcast32(a + t * ldxq + 4));
    }
}

/* 16 f16 -> 16 f32 (exact). */
INLINE __m512 f16x16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* The pair p of a record's (scale or min) pairs: [16 rows][2] 8-bit values widened to
 * int16 lanes (2r: sub-block 2p, 2r+1: sub-block 2p+1). */
INLINE __m512i pair16(const uint8_t *p, const int is_signed)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return is_signed ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
}

/* Sub-block 2p + e of a widened pair, as 16 f32 (one per row). */
INLINE __m512 pair_f32(__m512i v, int e, const int is_signed)
{
    __m512i x = e ? (is_signed ? _mm512_srai_epi32(v, 16) : _mm512_srli_epi32(v, 16))
                  : _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 16);
    return _mm512_cvtepi32_ps(x);
}

enum kind { Q4K, Q6K, Q5K, IQ4XS };

/* The IQ4 grid + 128 (unsigned) in every 128-bit lane, for vpshufb. */
INLINE __m512i iq4_table(void)
{
    return _mm512_broadcast_i32x4(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129,
                                                (char)141, (char)153, (char)166, (char)181,
                                                (char)197, (char)217, (char)241));
}

/* The codes of chunk c of a record as u8: 16 rows x k 8c..8c+3 (lo), 8c+4..8c+7 (hi). */
INLINE void chunk(const uint8_t *rec, int c, const enum kind kd, __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i w = _mm512_loadu_si512((const void *)(rec + 64 * c));
    *lo = _mm512_and_si512(w, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    if (kd == Q5K) { /* 16 bytes of fifth bits: byte p%16 holds p's pair at bit 2 (p / 16) */
        __m128i h = _mm_loadu_si128((const __m128i *)(rec + NB_Q5_K_X16_QH + 16 * c));
        const __m512i sh = _mm512_set_epi64(0x0006000600060006, 0x0006000600060006,
                                            0x0004000400040004, 0x0004000400040004,
                                            0x0002000200020002, 0x0002000200020002, 0, 0);
        __m512i hz = _mm512_srlv_epi16(_mm512_broadcast_i32x4(h), sh);
        *lo = _mm512_or_si512(*lo, _mm512_slli_epi16(_mm512_and_si512(hz, _mm512_set1_epi8(1)), 4));
        *hi = _mm512_or_si512(*hi, _mm512_slli_epi16(_mm512_and_si512(hz, _mm512_set1_epi8(2)), 3));
    }
    if (kd == IQ4XS) {
        *lo = _mm512_shuffle_epi8(iq4_table(), *lo);
        *hi = _mm512_shuffle_epi8(iq4_table(), *hi);
    }
    if (kd == Q6K) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(rec + NB_Q6_K_X16_QH + 32 * c));
        __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 4), 1);
        *lo = _mm512_or_si512(*lo, _mm512_slli_epi16(_mm512_and_si512(hz, _mm512_set1_epi8(3)), 4));
        *hi = _mm512_or_si512(*hi, _mm512_slli_epi16(_mm512_and_si512(hz, _mm512_set1_epi8(12)), 2));
    }
}

/* Record i (16 rows x 256 k) for NT tokens: yv[t] += xd[t][i] * (S[t] - zero terms). The
 * codes come from u (UNP: the record unpacked by unpack(), 32 chunks of lo, hi) or are
 * unpacked here. */
INLINE void record(__m512 *yv, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *rec, const __m512i *u, int64_t i,
                   const enum kind kd, const int NT, const int UNP)
{
    const int q6 = kd == Q6K, sgn = q6 || kd == IQ4XS; /* signed scales, no mins */
    const int64_t o_sc = q6 ? NB_Q6_K_X16_SC : kd == Q5K ? NB_Q5_K_X16_SC
                         : kd == IQ4XS ? NB_IQ4_XS_X16_SC : NB_Q4_K_X16_SC;
    const int64_t o_mn = kd == Q5K ? NB_Q5_K_X16_MN : NB_Q4_K_X16_MN;
    const int64_t o_d = q6 ? NB_Q6_K_X16_D : kd == Q5K ? NB_Q5_K_X16_D
                        : kd == IQ4XS ? NB_IQ4_XS_X16_D : NB_Q4_K_X16_D;
    const int64_t o_dmin = kd == Q5K ? NB_Q5_K_X16_DMIN : NB_Q4_K_X16_DMIN;
    const int nsub = q6 ? 16 : 8, cps = q6 ? 2 : 4; /* sub-blocks, chunks a sub-block */
    const __m512 d = f16x16(rec + o_d);
    const uint8_t *scp = rec + o_sc;
    __m512 S[KQ_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        S[t] = _mm512_setzero_ps();
    for (int s = 0; s < nsub; s++) {
        __m512i acc[KQ_NT], acc2 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int cc = 0; cc < cps; cc++) {
            const int c = s * cps + cc;
            __m512i lo, hi;
            if (UNP) {
                lo = _mm512_load_si512((const void *)(u + 2 * c));
                hi = _mm512_load_si512((const void *)(u + 2 * c + 1));
            } else {
                if (NT == 1 && KQ_PF_DIST > 0)
                    _mm_prefetch((const char *)(rec + 64 * c + KQ_PF_DIST), _MM_HINT_T0);
                chunk(rec, c, kd, &lo, &hi);
            }
            dot_chunk(acc, &acc2, lo, hi, xq + NB_QK_K * i + 8 * c, ldxq, NT);
        }
        if (NT == 1) acc[0] = _mm512_add_epi32(acc[0], acc2);
        const __m512 dsc = _mm512_mul_ps(d, pair_f32(pair16(scp + 32 * (s >> 1), sgn), s & 1, sgn));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++)
            S[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), dsc, S[t]);
    }
    /* the zero terms: Q4_K sum_s mn_s * asum32_s (4 pairs), Q6_K sum_s sc_s * asum16_s
     * (8 pairs), IQ4_XS sum_s sc_s * asum32_s (4 pairs), exact in int32 */
    const uint8_t *zp = sgn ? scp : rec + o_mn;
    const int npair = q6 ? 8 : 4, woff = q6 ? 0 : 8;
    const __m512 zs = q6 ? _mm512_mul_ps(_mm512_set1_ps(32.0f), d)
                      : kd == IQ4XS ? _mm512_mul_ps(_mm512_set1_ps(128.0f), d)
                                    : f16x16(rec + o_dmin);
    __m512i Z[KQ_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        Z[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int p = 0; p < npair; p++) {
        const __m512i zv = pair16(zp + 32 * p, sgn);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++)
            Z[t] = _mm512_dpwssd_epi32(Z[t], zv, nb_bcast32(xsum + t * ldxg + 16 * i + woff + p));
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        __m512 v = _mm512_fnmadd_ps(zs, _mm512_cvtepi32_ps(Z[t]), S[t]);
        yv[t] = _mm512_fmadd_ps(_mm512_set1_ps(xd[t * ldxg + i]), v, yv[t]);
    }
}

INLINE int64_t rec_bytes(const enum kind kd)
{
    return kd == Q6K ? NB_Q6_K_X16_BYTES : kd == Q5K ? NB_Q5_K_X16_BYTES
           : kd == IQ4XS ? NB_IQ4_XS_X16_BYTES : NB_Q4_K_X16_BYTES;
}

/* NT tokens x one row block, all records along k, the codes unpacked as they stream in:
 * y[t][16 rows] written. */
INLINE void tile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                 int64_t ldxq, int64_t ldxg, const uint8_t *recs, int64_t nsb, const enum kind kd,
                 const int NT)
{
    __m512 yv[KQ_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        yv[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; i++)
        record(yv, xq, xd, xsum, ldxq, ldxg, recs + i * rec_bytes(kd), NULL, i, kd, NT, 0);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + t * ldy, yv[t]);
}

/* Record i, unpacked once (u), for NT tokens: y[t][16 rows] += (stored on the first record,
 * so the same operations in the same order as tile()). */
INLINE void rtile(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                  int64_t ldxq, int64_t ldxg, const uint8_t *rec, const __m512i *u, int64_t i,
                  const enum kind kd, const int NT)
{
    __m512 yv[KQ_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        yv[t] = i ? _mm512_loadu_ps(y + t * ldy) : _mm512_setzero_ps();
    record(yv, xq, xd, xsum, ldxq, ldxg, rec, u, i, kd, NT, 1);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + t * ldy, yv[t]);
}

/* A record's 32 chunks as lo, hi (4 KiB, L1-resident). */
INLINE void unpack(__m512i *u, const uint8_t *rec, const enum kind kd)
{
    for (int c = 0; c < 32; c++) {
        __m512i lo, hi;
        chunk(rec, c, kd, &lo, &hi);
        _mm512_store_si512((void *)(u + 2 * c), lo);
        _mm512_store_si512((void *)(u + 2 * c + 1), hi);
    }
}

/* ---------------------------------------------------------------- Q4_0 / Q8_0 records
 * 16 rows x 64 k, two blocks of 32 with an f16 scale each; the activations in w4a8's form
 * with groups of 32. Per block and token (u the stored unsigned code):
 *   isum = sum u * a (Q4_0: 4 nibble chunks, 8 vpdpbusd; Q8_0: 8 byte chunks, 8 vpdpbusd)
 *   y   += (d * xd_b) * float(isum - zp * xsum_b)      zp = 8 or 128
 * the reference's operations in its order (bit-identical to nb_gemm_q4_0_x16_ref). */
INLINE void tile32(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                   int64_t ldxq, int64_t ldxg, const uint8_t *recs, int64_t nrec, const int kd32,
                   const int NT)
{
    const int q8 = kd32 == 1, nl = kd32 == 2; /* Q8_0, IQ4_NL (else Q4_0) */
    const int64_t rb = q8 ? NB_Q8_0_X16_BYTES : NB_Q4_0_X16_BYTES;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 yv[KQ_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        yv[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nrec; i++) {
        const uint8_t *rec = recs + i * rb;
        if (NT == 1 && KQ_PF_DIST > 0) {
            for (int64_t o = 0; o < rb; o += 64)
                _mm_prefetch((const char *)(rec + o + KQ_PF_DIST), _MM_HINT_T0);
        }
#pragma GCC unroll 2
        for (int bl = 0; bl < 2; bl++) {
            const int64_t g = 2 * i + bl; /* the block's index along the row */
            __m512i acc[KQ_NT], acc2 = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++)
                acc[t] = _mm512_setzero_si512();
            if (q8) {
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) { /* k 4c..4c+3 of the block */
                    __m512i w = _mm512_loadu_si512((const void *)(rec + 64 * (8 * bl + c)));
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++) {
                        const __m512i a = nb_bcast32(xq + t * ldxq + 32 * g + 4 * c);
                        if (NT == 1 && (c & 1))
                            acc2 = dpbusd(acc2, w, a);
                        else
                            acc[t] = dpbusd(acc[t], w, a);
                    }
                }
            } else {
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) { /* k 8c..8c+7 of the block */
                    __m512i w = _mm512_loadu_si512((const void *)(rec + 64 * (4 * bl + c)));
                    __m512i lo = _mm512_and_si512(w, m4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
                    if (nl) {
                        lo = _mm512_shuffle_epi8(iq4_table(), lo);
                        hi = _mm512_shuffle_epi8(iq4_table(), hi);
                    }
                    dot_chunk(acc, &acc2, lo, hi, xq + 32 * g + 8 * c, ldxq, NT);
                }
            }
            if (NT == 1) acc[0] = _mm512_add_epi32(acc[0], acc2);
            const __m512 dw = f16x16(rec + (q8 ? NB_Q8_0_X16_D : NB_Q4_0_X16_D) + 32 * bl);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const __m512i corr = _mm512_set1_epi32((q8 || nl ? 128 : 8) * xsum[t * ldxg + g]);
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t], corr));
                __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xd[t * ldxg + g]));
                yv[t] = _mm512_add_ps(yv[t], _mm512_mul_ps(s, f));
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + t * ldy, yv[t]);
}

/* The tile of NT tokens from token t of row block blk: the two-block records (kd >= 100),
 * the 256-blocks streamed (u NULL: tile), or record i of them unpacked once in u (rtile). */
INLINE void tile_at(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                    const int32_t *xsum, int64_t ldxq, int64_t ldxg, const uint8_t *recs,
                    int64_t nrec, const __m512i *u, int64_t i, int64_t blk, int t, const int kd,
                    const int NT)
{
    y += t * ldy + blk * 16, xq += t * ldxq, xd += t * ldxg, xsum += t * ldxg;
    if (kd >= 100)
        tile32(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, nrec, kd - 100, NT);
    else if (u)
        rtile(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, u, i, (enum kind)kd, NT);
    else
        tile(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, nrec, (enum kind)kd, NT);
}

/* Tokens [t, end) in tiles of KQ_NT, then 4, 3, 2, 1 (tile_at's arguments otherwise). */
INLINE void tiles(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                  int64_t ldxq, int64_t ldxg, const uint8_t *recs, int64_t nrec, const __m512i *u,
                  int64_t i, int64_t blk, int t, int end, const int kd)
{
#define TILE(NT) tile_at(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, nrec, u, i, blk, t, kd, NT)
    for (; t + KQ_NT <= end; t += KQ_NT)
        TILE(KQ_NT);
    for (; t + 4 <= end; t += 4)
        TILE(4);
    switch (end - t) {
    case 3: TILE(3); break;
    case 2: TILE(2); break;
    case 1: TILE(1); break;
    default: break;
    }
#undef TILE
}

/* ---------------------------------------------------------------- the driver
 * Row blocks [r0/16, r1/16), tokens in cache blocks of KQ_TOK_BLOCK. kd: a 256-block kind
 * (tile) or, for the two-block records, 100 + the tile32 kind. Q6_K with two or more tokens:
 * per row block and record, the codes unpacked once into 4 KiB (L1) and read by every
 * token tile of the cache block, y accumulated in place (rtile). */
INLINE void gemm(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                 int64_t ldxq, int64_t ldxg, const void *w_blob, int64_t n_in, int n_tok,
                 int64_t r0, int64_t r1, const int kd)
{
    const int b32 = kd >= 100;
    const int64_t nrec = b32 ? n_in / 64 : n_in / NB_QK_K;
    const int64_t rb = kd == 101 ? NB_Q8_0_X16_BYTES : b32 ? NB_Q4_0_X16_BYTES
                       : kd == Q6K ? NB_Q6_K_X16_BYTES : kd == Q5K ? NB_Q5_K_X16_BYTES
                       : kd == IQ4XS ? NB_IQ4_XS_X16_BYTES : NB_Q4_K_X16_BYTES;
    const int once = kd == Q6K && n_tok > 1 && KQ_UNPACK_ONCE;
    __m512i u[64] __attribute__((aligned(64)));
    for (int t0 = 0; t0 < n_tok; t0 += KQ_TOK_BLOCK) {
        int end = n_tok - t0 < KQ_TOK_BLOCK ? n_tok : t0 + KQ_TOK_BLOCK;
        for (int64_t blk = r0 / 16; blk < r1 / 16; blk++) {
            const uint8_t *recs = (const uint8_t *)w_blob + blk * nrec * rb;
            if (!once) {
                tiles(y, ldy, xq, xd, xsum, ldxq, ldxg, recs, nrec, NULL, 0, blk, t0, end, kd);
                continue;
            }
            for (int64_t i = 0; i < nrec; i++) {
                unpack(u, recs + i * rb, (enum kind)kd);
                tiles(y, ldy, xq, xd, xsum, ldxq, ldxg, recs + i * rb, nrec, u, i, blk, t0, end,
                      kd);
            }
        }
    }
}

void nb_gemm_q4_0_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, 100);
}

void nb_gemm_q8_0_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, 101);
}

void nb_gemm_iq4_nl_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                   const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                   const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                   int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, 102);
}

void nb_gemm_iq4_xs_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                   const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                   const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                   int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, IQ4XS);
}

void nb_gemm_q4_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, Q4K);
}

void nb_gemm_q5_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, Q5K);
}

void nb_gemm_q6_k_x16_avx512vnni(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                                 const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                                 const void *w_blob, int64_t n_out, int64_t n_in, int n_tok,
                                 int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm(y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1, Q6K);
}
