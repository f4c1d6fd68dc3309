/* quant/kq_repack.c — GGUF Q4_K onto w4a16 groups of 32, codes kept (kq_repack.h). */
#include "quant/kq_repack.h"

#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/wformat.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

enum nb_status nb_q4_k_pack_w4a16(const void *blocks, int64_t n_out, int64_t n_in, int64_t r0,
                                  int64_t r1, void *blob, struct nb_qstats *stats)
{
    struct nb_layout_planes pl;
    if (stats) memset(stats, 0, sizeof *stats);
    if (n_in <= 0 || n_in % NB_QK_K || !nb_layout_planes(NB_WPATH_W4A16, 32, n_out, n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: shape [%lld, %lld] is not whole "
                            "blocks of 256", (long long)n_out, (long long)n_in);
    if (r0 < 0 || r1 > n_out || r0 > r1)
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: rows [%lld, %lld) out of 0..%lld",
                            (long long)r0, (long long)r1, (long long)n_out);
    if (!blocks || !blob || (uintptr_t)blob % NB_LAYOUT_ALIGN)
        return nb_set_error(NB_ERR_INVALID_ARG, "Q4_K -> w4a16: blocks or blob missing, or blob "
                            "not %d-byte aligned", NB_LAYOUT_ALIGN);
    float *exact = NULL, *back = NULL;
    if (stats && r1 > r0) {
        exact = malloc(sizeof(float) * (size_t)n_in);
        back = malloc(sizeof(float) * (size_t)n_in);
        if (!exact || !back) {
            free(exact);
            free(back);
            return nb_set_error(NB_ERR_NOMEM, "Q4_K -> w4a16: no memory for a row");
        }
    }
    uint8_t *b = blob;
    int64_t nb = n_in / NB_QK_K, ng = n_in / 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)blocks + r * nb * NB_Q4_K_BYTES;
        uint8_t *qs = b + pl.offset[0] + r * (n_in / 2);
        uint8_t *dp = b + pl.offset[1] + 2 * r * ng, *mp = b + pl.offset[2] + 2 * r * ng;
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *blk = src + i * NB_Q4_K_BYTES;
            float d = nb_f16_to_f32(nb_q_load_u16(blk)), dmin = nb_f16_to_f32(nb_q_load_u16(blk + 2));
            for (int sub = 0; sub < 8; sub++) {
                int sc, mn;
                nb_k4_scale_min(blk + 4, sub, &sc, &mn);
                float d1 = d * (float)sc, m1 = dmin * (float)mn;
                int64_t g = i * 8 + sub;
                nb_q_store_u16(dp + 2 * g, nb_f32_to_bf16(d1));
                nb_q_store_u16(mp + 2 * g, nb_f32_to_bf16(-m1));
                const uint8_t *c = blk + 16 + 32 * (sub / 2);
                int shift = 4 * (sub % 2);
                uint8_t *out = qs + (i * NB_QK_K + 32 * sub) / 2;
                for (int l = 0; l < 32; l += 2) /* element k: low nibble when k is even */
                    out[l / 2] = (uint8_t)(((c[l] >> shift) & 15) | ((c[l + 1] >> shift) & 15) << 4);
            }
        }
        if (stats) {
            nb_dequant_row_q4_k_ref(src, exact, n_in);
            nb_unpack_row_ref(NB_WPATH_W4A16, 32, blob, &pl, n_in, r, back);
            for (int64_t k = 0; k < n_in; k++) {
                double diff = (double)exact[k] - (double)back[k];
                stats->err_sq += diff * diff;
                stats->ref_sq += (double)exact[k] * exact[k];
            }
        }
    }
    if (r1 == n_out)
        for (int i = 0; i < pl.n_planes; i++) {
            int64_t end = pl.offset[i] + pl.size[i];
            int64_t next = i + 1 < pl.n_planes ? pl.offset[i + 1] : pl.total;
            memset(b + end, 0, (size_t)(next - end));
        }
    free(exact);
    free(back);
    return NB_OK;
}

/* ---------------------------------------------------------------- X16 records */

static uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void st32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Row r's 256 codes of a Q4_K / Q5_K block (qs: its 128 bytes; chunk c = sub-block c/4,
 * its low or high nibbles) into the record's X16 chunks: the codes of k = 8c..8c+3 (and
 * +4..+7) are 4 consecutive bytes, one 32-bit word each. */
static void k4_codes(const uint8_t *qs, int r, uint8_t *rec)
{
    for (int c = 0; c < 32; c++) {
        int s = c / 4, l0 = 8 * (c % 4);
        const uint8_t *q = qs + 32 * (s / 2) + l0;
        uint32_t lo = ld32(q), hi = ld32(q + 4);
        if (s & 1) lo >>= 4, hi >>= 4;
        st32(rec + 64 * c + 4 * r, (lo & 0x0f0f0f0fu) | (hi & 0x0f0f0f0fu) << 4);
    }
}

/* Row r's 6-bit scales and mins (the 12 bytes at sc12) into the record's pairs. */
static void k4_scales(const uint8_t *sc12, int r, uint8_t *sc, uint8_t *mn)
{
    for (int s = 0; s < 8; s++) {
        int a, m;
        nb_k4_scale_min(sc12, s, &a, &m);
        sc[nb_kx16_pair_at(s, r)] = (uint8_t)a;
        mn[nb_kx16_pair_at(s, r)] = (uint8_t)m;
    }
}

/* One Q4_K record from the 16 rows' blocks i (src[r] = row r's block). */
static void q4_k_record(const uint8_t *const src[16], uint8_t *rec)
{
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = src[r];
        k4_codes(b + 16, r, rec);
        k4_scales(b + 4, r, rec + NB_Q4_K_X16_SC, rec + NB_Q4_K_X16_MN);
        memcpy(rec + NB_Q4_K_X16_D + 2 * r, b, 2);
        memcpy(rec + NB_Q4_K_X16_DMIN + 2 * r, b + 2, 2);
    }
}

/* One Q6_K record: element e of a block has its low 4 bits in nibble e % 128 / 64 of
 * ql[64 (e / 128) + e % 64] and its high 2 at bit 2 (e % 128 / 32) of qh[32 (e / 128) + e % 32]. */
static void q6_k_record(const uint8_t *const src[16], uint8_t *rec)
{
    memset(rec + NB_Q6_K_X16_QH, 0, 1024);
    for (int r = 0; r < 16; r++) {
        const uint8_t *ql = src[r], *qh = src[r] + 128;
        for (int c = 0; c < 32; c++) {
            int e = 8 * c, h = e / 128, rem = e % 128; /* k 8c..8c+7: one half, one 64-run */
            const uint8_t *lp = ql + 64 * h + rem % 64;
            uint32_t lo = ld32(lp), hi = ld32(lp + 4);
            if (rem / 64) lo >>= 4, hi >>= 4;
            st32(rec + 64 * c + 4 * r, (lo & 0x0f0f0f0fu) | (hi & 0x0f0f0f0fu) << 4);
            /* the high pairs of k = 8c+j and 8c+4+j (j = 0..3): 4 bytes of one 32-run of qh
             * each, at the same shift; byte p = 4r+j of the chunk goes to qh byte p % 32,
             * nibble p / 32 = r / 8 */
            int sh = 2 * (rem / 32);
            uint32_t h_lo = (ld32(qh + 32 * h + rem % 32) >> sh) & 0x03030303u;
            uint32_t h_hi = (ld32(qh + 32 * h + (rem + 4) % 32) >> sh) & 0x03030303u;
            uint8_t *hp = rec + NB_Q6_K_X16_QH + 32 * c + 4 * (r % 8);
            st32(hp, ld32(hp) | (h_lo | h_hi << 2) << (4 * (r / 8)));
        }
        for (int s = 0; s < 16; s++) rec[NB_Q6_K_X16_SC + nb_kx16_pair_at(s, r)] = src[r][192 + s];
        memcpy(rec + NB_Q6_K_X16_D + 2 * r, src[r] + 208, 2);
    }
    memset(rec + NB_Q6_K_X16_D + 32, 0, NB_Q6_K_X16_BYTES - NB_Q6_K_X16_D - 32);
}

/* One Q5_K record: Q4_K's codes (qs at byte 48 of a block) and scales, and the fifth bit
 * of element l of sub-block sub at bit sub of qh[l] (qh at byte 16). */
static void q5_k_record(const uint8_t *const src[16], uint8_t *rec)
{
    memset(rec + NB_Q5_K_X16_QH, 0, 512);
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = src[r], *qh = b + 16;
        k4_codes(b + 48, r, rec);
        for (int c = 0; c < 32; c++) {
            int s = c / 4, l0 = 8 * (c % 4);
            for (int j = 0; j < 4; j++) {
                int p = 4 * r + j;
                int b_lo = (qh[l0 + j] >> s) & 1, b_hi = (qh[l0 + 4 + j] >> s) & 1;
                rec[NB_Q5_K_X16_QH + 16 * c + p % 16] |=
                    (uint8_t)((b_lo | b_hi << 1) << (2 * (p / 16)));
            }
        }
        k4_scales(b + 4, r, rec + NB_Q5_K_X16_SC, rec + NB_Q5_K_X16_MN);
        memcpy(rec + NB_Q5_K_X16_D + 2 * r, b, 2);
        memcpy(rec + NB_Q5_K_X16_DMIN + 2 * r, b + 2, 2);
    }
}

/* One Q4_0 record: two blocks a row (src[r]: the first); element e of a block is the low
 * nibble of qs[e] (e < 16) or the high nibble of qs[e - 16]. */
static void q4_0_record(const uint8_t *const src[16], uint8_t *rec)
{
    for (int r = 0; r < 16; r++)
        for (int bi = 0; bi < 2; bi++) {
            const uint8_t *b = src[r] + NB_Q4_0_BYTES * bi;
            for (int cc = 0; cc < 4; cc++) { /* e = 8cc..8cc+7 */
                const uint8_t *q = b + 2 + 8 * (cc % 2);
                uint32_t lo = ld32(q), hi = ld32(q + 4);
                if (cc / 2) lo >>= 4, hi >>= 4;
                st32(rec + 64 * (4 * bi + cc) + 4 * r,
                     (lo & 0x0f0f0f0fu) | (hi & 0x0f0f0f0fu) << 4);
            }
            memcpy(rec + NB_Q4_0_X16_D + 2 * (16 * bi + r), b, 2);
        }
}

/* One Q8_0 record: two blocks a row; the codes with their sign bit flipped (q + 128). */
static void q8_0_record(const uint8_t *const src[16], uint8_t *rec)
{
    for (int r = 0; r < 16; r++)
        for (int bi = 0; bi < 2; bi++) {
            const uint8_t *b = src[r] + NB_Q8_0_BYTES * bi;
            for (int cc = 0; cc < 8; cc++)
                st32(rec + 64 * (8 * bi + cc) + 4 * r, ld32(b + 2 + 4 * cc) ^ 0x80808080u);
            memcpy(rec + NB_Q8_0_X16_D + 2 * (16 * bi + r), b, 2);
        }
}

/* One IQ4_XS record: sub-block s of a block holds element j (low nibble) and j + 16
 * (high nibble) in qs[16s + j] (qs at byte 8); the scales ls - 32 as int8 pairs. */
static void iq4_xs_record(const uint8_t *const src[16], uint8_t *rec)
{
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = src[r];
        for (int c = 0; c < 32; c++) { /* k 8c..8c+7: sub-block c/4, elements 8(c%4).. */
            int s = c / 4, e0 = 8 * (c % 4);
            const uint8_t *q = b + 8 + 16 * s + (e0 % 16);
            uint32_t lo = ld32(q), hi = ld32(q + 4);
            if (e0 >= 16) lo >>= 4, hi >>= 4;
            st32(rec + 64 * c + 4 * r, (lo & 0x0f0f0f0fu) | (hi & 0x0f0f0f0fu) << 4);
        }
        for (int s = 0; s < 8; s++)
            rec[NB_IQ4_XS_X16_SC + nb_kx16_pair_at(s, r)] = (uint8_t)(int8_t)nb_iq4_xs_scale(b, s);
        memcpy(rec + NB_IQ4_XS_X16_D + 2 * r, b, 2);
    }
    memset(rec + NB_IQ4_XS_X16_D + 32, 0, NB_IQ4_XS_X16_BYTES - NB_IQ4_XS_X16_D - 32);
}

enum nb_status nb_kq_repack_x16(enum nb_wformat to, const void *blocks, int64_t n_out,
                                int64_t n_in, int64_t b0, int64_t b1, void *dst)
{
    struct nb_layout_planes pl;
    struct nb_block_info bi;
    if (!nb_wformat_block(to, &bi) || to != bi.x16 || !blocks || !dst ||
        !nb_wformat_planes(to, 0, n_out, n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "GGUF blocks -> X16: format %d, shape [%lld, "
                            "%lld] (rows a multiple of 16, columns of the record's %d)", (int)to,
                            (long long)n_out, (long long)n_in, bi.rec_k);
    if (b0 < 0 || b1 > n_out / 16 || b0 > b1)
        return nb_set_error(NB_ERR_INVALID_ARG, "GGUF blocks -> X16: row blocks [%lld, %lld) out "
                            "of 0..%lld", (long long)b0, (long long)b1, (long long)(n_out / 16));
    void (*record)(const uint8_t *const[16], uint8_t *) =
        to == NB_WF_Q4_K_X16   ? q4_k_record
        : to == NB_WF_Q5_K_X16 ? q5_k_record
        : to == NB_WF_Q6_K_X16 ? q6_k_record
        : to == NB_WF_Q4_0_X16 || to == NB_WF_IQ4_NL_X16 ? q4_0_record /* the same layout */
        : to == NB_WF_IQ4_XS_X16                         ? iq4_xs_record
                                                         : q8_0_record;
    int64_t row_bytes = n_in / bi.elems * bi.bytes, nrec = n_in / bi.rec_k;
    int64_t rec_src = (int64_t)bi.rec_k / bi.elems * bi.bytes; /* source bytes a record */
    for (int64_t b = b0; b < b1; b++)
        for (int64_t i = 0; i < nrec; i++) {
            const uint8_t *src[16];
            for (int r = 0; r < 16; r++)
                src[r] = (const uint8_t *)blocks + (16 * b + r) * row_bytes + i * rec_src;
            record(src, (uint8_t *)dst + (b * nrec + i) * bi.rec_bytes);
        }
    return NB_OK;
}
