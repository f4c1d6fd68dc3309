/* kernels/ref/gemm_kq_ref.c — the GGUF k-quant X16 records (kernels/qblock.h) read by
 * scalar code: a record row decoded to floats (bit-identical to llama.cpp's
 * dequantization of the block it came from), the int8 activation quantizer of the
 * k-quants (one scale per 256, code sums per 16 and 32), and the reference GEMMs the
 * SIMD kernels are tested against.
 *
 *   Q4_K, one row, one token, super-block i (sub-blocks s of 32):
 *     isum_s = sum q * a                          int32, q in 0..15, a the int8 codes
 *     S      = sum_s float(isum_s) * (d * sc_s)   f32, s ascending
 *     M      = sum_s mn_s * (sum of a in s)       int32, exact
 *     y     += xd_i * (S - dmin * float(M))
 *   Q6_K, sub-blocks of 16, u = the 6-bit code 0..63 (the weight is u - 32):
 *     S      = sum_s float(sum u * a) * (d * sc_s)
 *     B      = sum_s sc_s * (sum of a in s)       int32, exact
 *     y     += xd_i * (S - (32 d) * float(B))
 *   Q5_K: as Q4_K with 5-bit codes. Q4_0 / Q8_0: see gemm_b32 below.
 */
#include <math.h>

#include "core/fp.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Q4_K and Q5_K records: where their planes are, and a code's reader. */
struct k45 {
    int64_t bytes, sc, mn, d, dmin;
    int (*code)(const uint8_t *, int, int);
};
static const struct k45 k_q4 = {NB_Q4_K_X16_BYTES, NB_Q4_K_X16_SC, NB_Q4_K_X16_MN,
                                NB_Q4_K_X16_D, NB_Q4_K_X16_DMIN, nb_q4_k_x16_code};
static const struct k45 k_q5 = {NB_Q5_K_X16_BYTES, NB_Q5_K_X16_SC, NB_Q5_K_X16_MN,
                                NB_Q5_K_X16_D, NB_Q5_K_X16_DMIN, nb_q5_k_x16_code};

static void dequant_k45(const struct k45 *f, const void *blob, int64_t n_in, int64_t r, float *y)
{
    for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
        const uint8_t *rec = nb_kx16_record(blob, f->bytes, n_in, r, i);
        int rr = (int)(r & 15);
        float d = nb_f16_to_f32(nb_q_load_u16(rec + f->d + 2 * rr));
        float dmin = nb_f16_to_f32(nb_q_load_u16(rec + f->dmin + 2 * rr));
        for (int s = 0; s < 8; s++) {
            float d1 = d * (float)rec[f->sc + nb_kx16_pair_at(s, rr)];
            float m1 = dmin * (float)rec[f->mn + nb_kx16_pair_at(s, rr)];
            for (int l = 0; l < 32; l++) {
                float t = d1 * (float)f->code(rec, rr, 32 * s + l);
                y[NB_QK_K * i + 32 * s + l] = t - m1;
            }
        }
    }
}

void nb_dequant_row_q4_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    dequant_k45(&k_q4, blob, n_in, r, y);
}

void nb_dequant_row_q5_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    dequant_k45(&k_q5, blob, n_in, r, y);
}

/* Q4_0 / Q8_0 / IQ4_NL records: 64 k, two blocks, f16 d per block and row. */
enum b32 { B_Q4_0, B_Q8_0, B_IQ4_NL };

/* The stored code of element k of row rr as the kernels multiply it (unsigned), and the
 * zero point that makes it the weight's integer: u - zp. */
static int b32_u(enum b32 kd, const uint8_t *rec, int rr, int k)
{
    return kd == B_Q8_0 ? nb_q8_0_x16_code(rec, rr, k) + 128
           : kd == B_Q4_0 ? nb_q4_0_x16_code(rec, rr, k)
                          : nb_iq4nl_grid[nb_q4_0_x16_code(rec, rr, k)] + 128;
}

static void dequant_b32(enum b32 kd, const void *blob, int64_t n_in, int64_t r, float *y)
{
    int q8 = kd == B_Q8_0;
    int64_t bytes = q8 ? NB_Q8_0_X16_BYTES : NB_Q4_0_X16_BYTES;
    for (int64_t i = 0; i < n_in / 64; i++) {
        const uint8_t *rec = (const uint8_t *)blob + ((r >> 4) * (n_in / 64) + i) * bytes;
        int rr = (int)(r & 15);
        for (int k = 0; k < 64; k++) {
            const uint8_t *dp = rec + (q8 ? NB_Q8_0_X16_D : NB_Q4_0_X16_D) + 2 * (16 * (k / 32) + rr);
            float d = nb_f16_to_f32(nb_q_load_u16(dp));
            int q = b32_u(kd, rec, rr, k) - (kd == B_Q4_0 ? 8 : 128);
            y[64 * i + k] = d * (float)q;
        }
    }
}

void nb_dequant_row_q4_0_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    dequant_b32(B_Q4_0, blob, n_in, r, y);
}

void nb_dequant_row_iq4_nl_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    dequant_b32(B_IQ4_NL, blob, n_in, r, y);
}

void nb_dequant_row_q8_0_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    dequant_b32(B_Q8_0, blob, n_in, r, y);
}

void nb_dequant_row_q6_k_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
        const uint8_t *rec = nb_kx16_record(blob, NB_Q6_K_X16_BYTES, n_in, r, i);
        int rr = (int)(r & 15);
        float d = nb_f16_to_f32(nb_q_load_u16(rec + NB_Q6_K_X16_D + 2 * rr));
        const int8_t *sc = (const int8_t *)(rec + NB_Q6_K_X16_SC);
        for (int k = 0; k < NB_QK_K; k++) {
            float dl = d * (float)sc[nb_kx16_pair_at(k / 16, rr)];
            y[NB_QK_K * i + k] = dl * (float)(nb_q6_k_x16_code(rec, rr, k) - 32);
        }
    }
}

/* The sums of codes 16 and 32 at a time of one 256-block, as the words of the format. */
static void q8k_sums(const int8_t *q, int32_t *w)
{
    int32_t s16[16];
    for (int j = 0; j < 16; j++) {
        s16[j] = 0;
        for (int l = 0; l < 16; l++) s16[j] += q[16 * j + l];
    }
    for (int p = 0; p < 8; p++)
        w[p] = (int32_t)((uint32_t)(uint16_t)s16[2 * p] | (uint32_t)(uint16_t)s16[2 * p + 1] << 16);
    for (int p = 0; p < 4; p++) {
        int32_t a = s16[4 * p] + s16[4 * p + 1], b = s16[4 * p + 2] + s16[4 * p + 3];
        w[8 + p] = (int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16);
    }
    for (int p = 12; p < 16; p++) w[p] = 0;
}

void nb_act_quant_q8k(nb_act_quant_q8_fn q8, const float *x, int64_t n, int8_t *q, float *d,
                      int32_t *sums)
{
    /* the per-256 sums land in sums[0 .. n/256), read by nobody and overwritten below
     * in ascending order (block b's words start at 16b >= b) */
    q8(x, n, NB_QK_K, q, d, sums);
    for (int64_t b = 0; b < n / NB_QK_K; b++) q8k_sums(q + NB_QK_K * b, sums + 16 * b);
}

/* The sum of 16 codes of sub-block j (0..15) of a 256-block from its words, and of 32. */
static int32_t sum16(const int32_t *w, int j)
{
    return (int16_t)(uint16_t)((uint32_t)w[j / 2] >> (16 * (j & 1)));
}
static int32_t sum32(const int32_t *w, int s)
{
    return (int16_t)(uint16_t)((uint32_t)w[8 + s / 2] >> (16 * (s & 1)));
}

static void gemm_k45(const struct k45 *f, float *y, int64_t ldy, const int8_t *xq,
                     const float *xd, const int32_t *xsum, int64_t ldxq, int64_t ldxg,
                     const void *w_blob, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
                const uint8_t *rec = nb_kx16_record(w_blob, f->bytes, n_in, r, i);
                const int8_t *a = xq + t * ldxq + NB_QK_K * i;
                const int32_t *w = xsum + t * ldxg + 16 * i;
                int rr = (int)(r & 15);
                float d = nb_f16_to_f32(nb_q_load_u16(rec + f->d + 2 * rr));
                float dmin = nb_f16_to_f32(nb_q_load_u16(rec + f->dmin + 2 * rr));
                float S = 0.0f;
                int32_t M = 0;
                for (int s = 0; s < 8; s++) {
                    int32_t isum = 0;
                    for (int l = 0; l < 32; l++)
                        isum += f->code(rec, rr, 32 * s + l) * (int32_t)a[32 * s + l];
                    float dsc = d * (float)rec[f->sc + nb_kx16_pair_at(s, rr)];
                    S += (float)isum * dsc;
                    M += rec[f->mn + nb_kx16_pair_at(s, rr)] * sum32(w, s);
                }
                acc += xd[t * ldxg + i] * (S - dmin * (float)M);
            }
            y[t * ldy + r] = acc;
        }
}

void nb_gemm_q4_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm_k45(&k_q4, y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1);
}

void nb_gemm_q5_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm_k45(&k_q5, y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1);
}

void nb_gemm_q6_k_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
                const uint8_t *rec = nb_kx16_record(w_blob, NB_Q6_K_X16_BYTES, n_in, r, i);
                const int8_t *a = xq + t * ldxq + NB_QK_K * i;
                const int32_t *w = xsum + t * ldxg + 16 * i;
                const int8_t *sc = (const int8_t *)(rec + NB_Q6_K_X16_SC);
                int rr = (int)(r & 15);
                float d = nb_f16_to_f32(nb_q_load_u16(rec + NB_Q6_K_X16_D + 2 * rr));
                float S = 0.0f;
                int32_t B = 0;
                for (int s = 0; s < 16; s++) {
                    int32_t isum = 0;
                    for (int l = 0; l < 16; l++)
                        isum += nb_q6_k_x16_code(rec, rr, 16 * s + l) * (int32_t)a[16 * s + l];
                    int scs = sc[nb_kx16_pair_at(s, rr)];
                    S += (float)isum * (d * (float)scs);
                    B += scs * sum16(w, s);
                }
                acc += xd[t * ldxg + i] * (S - (32.0f * d) * (float)B);
            }
            y[t * ldy + r] = acc;
        }
}

/* Q4_0 / Q8_0 records against int8 activations per 32 (w4a8's form, group 32): per block
 * isum = sum u * a (u the stored unsigned code: Q4_0 0..15, Q8_0 q + 128), and
 *   y += (d * xd_b) * float(isum - zp * xsum_b),   zp = 8 (Q4_0) or 128 (Q8_0),
 * the w4a8 reference's operations in its order. */
static void gemm_b32(enum b32 kd, float *y, int64_t ldy, const int8_t *xq, const float *xd,
                     const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                     int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    int q8 = kd == B_Q8_0;
    int64_t bytes = q8 ? NB_Q8_0_X16_BYTES : NB_Q4_0_X16_BYTES;
    int zp = kd == B_Q4_0 ? 8 : 128;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            int rr = (int)(r & 15);
            for (int64_t g = 0; g < n_in / 32; g++) {
                const uint8_t *rec = (const uint8_t *)w_blob + ((r >> 4) * (n_in / 64) + g / 2) * bytes;
                int32_t isum = 0;
                for (int l = 0; l < 32; l++) {
                    int k = 32 * (int)(g % 2) + l;
                    isum += b32_u(kd, rec, rr, k) * (int32_t)xq[t * ldxq + 32 * g + l];
                }
                const uint8_t *dp = rec + (q8 ? NB_Q8_0_X16_D : NB_Q4_0_X16_D) + 2 * (16 * (g % 2) + rr);
                float dw = nb_f16_to_f32(nb_q_load_u16(dp));
                acc += dw * xd[t * ldxg + g] * (float)(isum - zp * xsum[t * ldxg + g]);
            }
            y[t * ldy + r] = acc;
        }
}

void nb_gemm_q4_0_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm_b32(B_Q4_0, y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1);
}

void nb_gemm_iq4_nl_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                            const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                            int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm_b32(B_IQ4_NL, y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1);
}

void nb_gemm_q8_0_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    gemm_b32(B_Q8_0, y, ldy, xq, xd, xsum, ldxq, ldxg, w_blob, n_in, n_tok, r0, r1);
}

/* IQ4_XS records: u = grid[q] + 128 (1..241), signed sub-block scales sc = ls - 32:
 *   S = sum_s float(sum u * a) * (d * sc_s),  Z = sum_s sc_s * (sum of a in s)   (int32)
 *   y += xd_i * (S - (128 d) * float(Z)) */
void nb_dequant_row_iq4_xs_x16_ref(const void *blob, int64_t n_in, int64_t r, float *y)
{
    for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
        const uint8_t *rec = nb_kx16_record(blob, NB_IQ4_XS_X16_BYTES, n_in, r, i);
        int rr = (int)(r & 15);
        float d = nb_f16_to_f32(nb_q_load_u16(rec + NB_IQ4_XS_X16_D + 2 * rr));
        for (int s = 0; s < 8; s++) {
            float dl = d * (float)(int8_t)rec[NB_IQ4_XS_X16_SC + nb_kx16_pair_at(s, rr)];
            for (int l = 0; l < 32; l++)
                y[NB_QK_K * i + 32 * s + l] =
                    dl * (float)nb_iq4nl_grid[nb_q4_k_x16_code(rec, rr, 32 * s + l)];
        }
    }
}

void nb_gemm_iq4_xs_x16_ref(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                            const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                            int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1)
{
    (void)n_out;
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n_tok; t++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n_in / NB_QK_K; i++) {
                const uint8_t *rec = nb_kx16_record(w_blob, NB_IQ4_XS_X16_BYTES, n_in, r, i);
                const int8_t *a = xq + t * ldxq + NB_QK_K * i;
                const int32_t *w = xsum + t * ldxg + 16 * i;
                int rr = (int)(r & 15);
                float d = nb_f16_to_f32(nb_q_load_u16(rec + NB_IQ4_XS_X16_D + 2 * rr));
                float S = 0.0f;
                int32_t Z = 0;
                for (int s = 0; s < 8; s++) {
                    int32_t isum = 0;
                    for (int l = 0; l < 32; l++)
                        isum += (nb_iq4nl_grid[nb_q4_k_x16_code(rec, rr, 32 * s + l)] + 128) *
                                (int32_t)a[32 * s + l];
                    int sc = (int8_t)rec[NB_IQ4_XS_X16_SC + nb_kx16_pair_at(s, rr)];
                    S += (float)isum * (d * (float)sc);
                    Z += sc * sum32(w, s);
                }
                acc += xd[t * ldxg + i] * (S - (128.0f * d) * (float)Z);
            }
            y[t * ldy + r] = acc;
        }
}

int nb_dequant_row_packed(enum nb_wformat f, const void *blob, int group, int64_t n_out,
                          int64_t n_in, int64_t r, float *y)
{
    if (f == NB_WF_W4A8_X16 || f == NB_WF_W4A16_X16) {
        struct nb_layout_planes pl;
        enum nb_wpath p = nb_wformat_info(f)->path;
        if (!nb_layout_planes_x(p, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return 0;
        nb_unpack_row_x16_ref(p, group, blob, &pl, n_in, r, y);
        return 1;
    }
    struct nb_block_info bi;
    if (!nb_wformat_block(f, &bi)) return 0;
    if (f == bi.x16) {
        void (*dq)(const void *, int64_t, int64_t, float *) =
            bi.rows == NB_WF_Q4_K     ? nb_dequant_row_q4_k_x16_ref
            : bi.rows == NB_WF_Q5_K   ? nb_dequant_row_q5_k_x16_ref
            : bi.rows == NB_WF_Q6_K   ? nb_dequant_row_q6_k_x16_ref
            : bi.rows == NB_WF_Q4_0   ? nb_dequant_row_q4_0_x16_ref
            : bi.rows == NB_WF_IQ4_NL ? nb_dequant_row_iq4_nl_x16_ref
            : bi.rows == NB_WF_IQ4_XS ? nb_dequant_row_iq4_xs_x16_ref
                                      : nb_dequant_row_q8_0_x16_ref;
        dq(blob, n_in, r, y);
        return 1;
    }
    const uint8_t *row = (const uint8_t *)blob + r * (n_in / bi.elems * bi.bytes);
    void (*dq)(const void *, float *, int64_t) =
        f == NB_WF_Q4_K     ? nb_dequant_row_q4_k_ref
        : f == NB_WF_Q5_K   ? nb_dequant_row_q5_k_ref
        : f == NB_WF_Q6_K   ? nb_dequant_row_q6_k_ref
        : f == NB_WF_Q4_0   ? nb_dequant_row_q4_0_ref
        : f == NB_WF_IQ4_NL ? nb_dequant_row_iq4_nl_ref
        : f == NB_WF_IQ4_XS ? nb_dequant_row_iq4_xs_ref
                            : nb_dequant_row_q8_0_ref;
    dq(row, y, n_in);
    return 1;
}
