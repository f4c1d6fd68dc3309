/* quant/unpack.c — unpack GPTQ / AWQ codes, dequantize them, re-pack them (unpack.h). */
#include "quant/unpack.h"

#include <stdlib.h>
#include <string.h>

#include "core/fp.h"

/* AWQ's packing order: output 8u + k sits in nibble k_awq_pos[k] of word u. */
static const int k_awq_pos[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static inline uint32_t word_at(const uint8_t *p, int64_t idx)
{
    uint32_t w;
    memcpy(&w, p + 4 * idx, 4);
    return w;
}

static inline float scale_at(const struct nb_hfq_matrix *m, int64_t g, int64_t o)
{
    int64_t idx = g * m->n_out + o;
    if (m->scale_type == NB_DTYPE_F32) {
        float f;
        memcpy(&f, m->scales + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, m->scales + 2 * idx, 2);
    return m->scale_type == NB_DTYPE_BF16 ? nb_bf16_to_f32(h) : nb_f16_to_f32(h);
}

/* The zero of group g, output o, with the format's offset (GPTQ v1: stored + 1). */
static inline int32_t zero_at(const struct nb_hfq_matrix *m, int64_t g, int64_t o)
{
    int b = m->bits, per = 32 / b;
    uint32_t mask = (1u << b) - 1;
    if (m->method == NB_HFQ_AWQ)
        return (int32_t)((word_at(m->qzeros, g * (m->n_out / 8) + o / 8) >>
                          (4 * k_awq_pos[o % 8])) & 15u);
    uint32_t w = word_at(m->qzeros, g * (m->n_out / per) + o / per);
    return (int32_t)((w >> ((o % per) * b)) & mask) + m->zero_offset;
}

static inline int32_t code_at(const struct nb_hfq_matrix *m, int64_t o, int64_t i)
{
    int b = m->bits, per = 32 / b;
    uint32_t mask = (1u << b) - 1;
    if (m->method == NB_HFQ_AWQ)
        return (int32_t)((word_at(m->qweight, i * (m->n_out / 8) + o / 8) >>
                          (4 * k_awq_pos[o % 8])) & 15u);
    return (int32_t)((word_at(m->qweight, (i / per) * m->n_out + o) >> ((i % per) * b)) & mask);
}

static inline int64_t group_of(const struct nb_hfq_matrix *m, int64_t i)
{
    if (!m->g_idx) return i / m->group;
    int32_t g;
    memcpy(&g, m->g_idx + 4 * i, 4);
    return g; /* in range: nb_hfq_check */
}

void nb_src_codes_from_hfq(struct nb_src_codes *c, const struct nb_hfq_matrix *m)
{
    memset(c, 0, sizeof *c);
    c->kind = NB_SRC_CODES_HFQ;
    c->bits = m->bits;
    c->n_out = m->n_out;
    c->n_in = m->n_in;
    c->group = m->group;
    c->plain_order = m->plain_order;
    c->hfq = *m;
}

void nb_hfq_dequant_rows(const struct nb_hfq_matrix *m, int64_t r0, int64_t r1, float *out)
{
    for (int64_t r = r0; r < r1; r++) {
        float *row = out + (r - r0) * m->n_in;
        int64_t g_prev = -1;
        float s = 0;
        int32_t z = 0;
        for (int64_t i = 0; i < m->n_in; i++) {
            int64_t g = group_of(m, i);
            if (g != g_prev) {
                s = scale_at(m, g, r);
                z = zero_at(m, g, r);
                g_prev = g;
            }
            row[i] = s * (float)(code_at(m, r, i) - z);
        }
    }
}

void nb_src_codes_row(const struct nb_src_codes *c, int64_t r, uint8_t *q, float *d, float *m)
{
    const struct nb_hfq_matrix *h = &c->hfq;
    for (int64_t i = 0; i < c->n_in; i++) q[i] = (uint8_t)code_at(h, r, i);
    for (int64_t g = 0; g < h->n_groups; g++) {
        d[g] = scale_at(h, g, r);
        m[g] = -(d[g] * (float)zero_at(h, g, r));
    }
}

int nb_src_codes_fit(const struct nb_src_codes *c, enum nb_wpath path, const char **why)
{
    static const char *const reasons[] = {"not an int4 path", "8-bit codes", "act order (g_idx)",
                                          "a group size nibble has not (32, 64, 128)",
                                          "an asymmetric grid (w4a8 needs every zero at 8)"};
    int r = -1;
    if (!nb_wpath_is_int4(path)) {
        r = 0;
    } else if (c->bits != 4) {
        r = 1;
    } else if (!c->plain_order) {
        r = 2;
    } else if ((c->group != 32 && c->group != 64 && c->group != 128) || c->n_in % c->group) {
        r = 3;
    } else if (path == NB_WPATH_W4A8) {
        const struct nb_hfq_matrix *h = &c->hfq;
        for (int64_t g = 0; g < h->n_groups && r < 0; g++)
            for (int64_t o = 0; o < h->n_out; o++)
                if (zero_at(h, g, o) != 8 && scale_at(h, g, o) != 0) {
                    r = 4;
                    break;
                }
    }
    if (why) *why = r < 0 ? NULL : reasons[r];
    return r < 0;
}

static inline void store_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

enum nb_status nb_src_codes_pack(const struct nb_src_codes *c, enum nb_wpath path, void *blob)
{
    const char *why;
    struct nb_layout_planes pl;
    if (!nb_src_codes_fit(c, path, &why))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s cannot keep these codes: %s",
                            nb_wpath_name(path), why);
    if (!nb_layout_planes(path, (int)c->group, c->n_out, c->n_in, &pl))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: shape [%lld, %lld] with group %lld does not "
                            "fit", nb_wpath_name(path), (long long)c->n_out, (long long)c->n_in,
                            (long long)c->group);
    int64_t ng = c->n_in / c->group;
    uint8_t *q = malloc((size_t)c->n_in);
    float *d = malloc(sizeof(float) * (size_t)ng), *m = malloc(sizeof(float) * (size_t)ng);
    if (!q || !d || !m) {
        free(q);
        free(d);
        free(m);
        return nb_set_error(NB_ERR_NOMEM, "out of memory");
    }
    uint8_t *b = blob;
    memset(b, 0, (size_t)pl.total);
    for (int64_t r = 0; r < c->n_out; r++) {
        nb_src_codes_row(c, r, q, d, m);
        uint8_t *row = b + pl.offset[0] + r * (c->n_in / 2);
        for (int64_t k = 0; k < c->n_in; k += 2) row[k / 2] = (uint8_t)(q[k] | (q[k + 1] << 4));
        for (int64_t g = 0; g < ng; g++) {
            store_u16(b + pl.offset[1] + 2 * (r * ng + g), nb_f32_to_bf16(d[g]));
            if (path == NB_WPATH_W4A16)
                store_u16(b + pl.offset[2] + 2 * (r * ng + g), nb_f32_to_bf16(m[g]));
        }
    }
    free(q);
    free(d);
    free(m);
    return NB_OK;
}
