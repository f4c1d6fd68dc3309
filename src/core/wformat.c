/* core/wformat.c — the weight formats: names, traits and the sizes of their packed layouts. */
#include "core/wformat.h"

#include <stdint.h>
#include <string.h>

static const char *const k_names[NB_WPATH_COUNT] = {"f32", "bf16", "w8a16", "w4a16", "w4a8"};

const char *nb_wpath_name(enum nb_wpath p)
{
    return (unsigned)p < NB_WPATH_COUNT ? k_names[p] : "?";
}

int nb_wpath_from_name(const char *name, enum nb_wpath *out)
{
    for (int i = 0; i < NB_WPATH_COUNT; i++)
        if (!strcmp(name, k_names[i])) {
            *out = (enum nb_wpath)i;
            return 1;
        }
    return 0;
}

static int64_t up64(int64_t x) { return (x + NB_LAYOUT_ALIGN - 1) & ~(int64_t)(NB_LAYOUT_ALIGN - 1); }

int nb_layout_planes(enum nb_wpath p, int group, int64_t n_out, int64_t n_in,
                     struct nb_layout_planes *o)
{
    memset(o, 0, sizeof *o);
    if (n_out <= 0 || n_in <= 0 || n_out > ((int64_t)1 << 31) || n_in > ((int64_t)1 << 31))
        return 0;
    int64_t n = n_out * n_in; /* < 2^62: no overflow below */
    switch (p) {
    case NB_WPATH_F32:
        o->n_planes = 1;
        o->size[0] = 4 * n;
        break;
    case NB_WPATH_BF16:
        o->n_planes = 1;
        o->size[0] = 2 * n;
        break;
    case NB_WPATH_W8A16:
        o->n_planes = 2;
        o->size[0] = n;
        o->size[1] = 4 * n_out;
        break;
    case NB_WPATH_W4A16:
    case NB_WPATH_W4A8:
        if (group != 32 && group != 64 && group != 128) return 0;
        if (n_in % group) return 0;
        o->n_planes = p == NB_WPATH_W4A16 ? 3 : 2;
        o->size[0] = n / 2;
        o->size[1] = 2 * n_out * (n_in / group);
        o->size[2] = p == NB_WPATH_W4A16 ? o->size[1] : 0;
        break;
    default: return 0;
    }
    int64_t off = 0;
    for (int i = 0; i < o->n_planes; i++) {
        o->offset[i] = off;
        off = up64(off + o->size[i]);
    }
    o->total = off;
    return 1;
}

int nb_layout_planes_x(enum nb_wpath p, enum nb_layout layout, int group, int64_t n_out,
                       int64_t n_in, struct nb_layout_planes *o)
{
    if (layout == NB_LAYOUT_ROWS) return nb_layout_planes(p, group, n_out, n_in, o);
    memset(o, 0, sizeof *o);
    if (layout != NB_LAYOUT_X16) return 0;
    if (!nb_wpath_is_int4(p)) return 0;
    if (n_out % 16 || n_in % 8) return 0;
    return nb_layout_planes(p, group, n_out, n_in, o);
}

double nb_layout_bpw(enum nb_wpath path, int group, int64_t n_out, int64_t n_in)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes(path, group, n_out, n_in, &pl)) return 0.0;
    return 8.0 * (double)pl.total / ((double)n_out * (double)n_in);
}

/* ---------------------------------------------------------------- formats */

static const struct nb_wformat_info k_formats[NB_WF_COUNT] = {
    [NB_WF_F32] = {"f32", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 1, 1},
    [NB_WF_F16] = {"f16", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 1, 1},
    [NB_WF_BF16] = {"bf16", NB_WPATH_BF16, NB_LAYOUT_ROWS, NB_INPUT_F32, 1, 1},
    [NB_WF_W8A16] = {"w8a16", NB_WPATH_W8A16, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_W4A16] = {"w4a16", NB_WPATH_W4A16, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_W4A16_X16] = {"w4a16-x16", NB_WPATH_W4A16, NB_LAYOUT_X16, NB_INPUT_F32, 0, 16},
    [NB_WF_W4A8] = {"w4a8", NB_WPATH_W4A8, NB_LAYOUT_ROWS, NB_INPUT_Q8, 0, 1},
    [NB_WF_W4A8_X16] = {"w4a8-x16", NB_WPATH_W4A8, NB_LAYOUT_X16, NB_INPUT_Q8, 0, 16},
    /* a GGUF source's k-quant rows, run as stored: f32 activations, not one of nibble's
     * packed paths (they count as the source's own weights, like f16) */
    [NB_WF_Q4_K] = {"q4_k", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_Q6_K] = {"q6_k", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    /* the same blocks shuffled into 16-row records at load (lossless): int8 activations */
    [NB_WF_Q4_K_X16] = {"q4_k-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8K, 0, 16},
    [NB_WF_Q6_K_X16] = {"q6_k-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8K, 0, 16},
    [NB_WF_Q5_K] = {"q5_k", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_Q4_0] = {"q4_0", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_Q8_0] = {"q8_0", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_Q5_K_X16] = {"q5_k-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8K, 0, 16},
    /* int8 activations per 32, as w4a8 with group 32 */
    [NB_WF_Q4_0_X16] = {"q4_0-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8, 0, 16},
    [NB_WF_Q8_0_X16] = {"q8_0-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8, 0, 16},
    [NB_WF_IQ4_NL] = {"iq4_nl", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_IQ4_XS] = {"iq4_xs", NB_WPATH_F32, NB_LAYOUT_ROWS, NB_INPUT_F32, 0, 1},
    [NB_WF_IQ4_NL_X16] = {"iq4_nl-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8, 0, 16},
    [NB_WF_IQ4_XS_X16] = {"iq4_xs-x16", NB_WPATH_F32, NB_LAYOUT_X16, NB_INPUT_Q8K, 0, 16},
};

static const struct nb_block_info k_blocks[] = {
    {"Q4_K", 256, 144, 256, NB_Q4_K_X16_BYTES, NB_WF_Q4_K, NB_WF_Q4_K_X16},
    {"Q5_K", 256, 176, 256, NB_Q5_K_X16_BYTES, NB_WF_Q5_K, NB_WF_Q5_K_X16},
    {"Q6_K", 256, 210, 256, NB_Q6_K_X16_BYTES, NB_WF_Q6_K, NB_WF_Q6_K_X16},
    {"Q4_0", 32, 18, 64, NB_Q4_0_X16_BYTES, NB_WF_Q4_0, NB_WF_Q4_0_X16},
    {"Q8_0", 32, 34, 64, NB_Q8_0_X16_BYTES, NB_WF_Q8_0, NB_WF_Q8_0_X16},
    {"IQ4_NL", 32, 18, 64, NB_IQ4_NL_X16_BYTES, NB_WF_IQ4_NL, NB_WF_IQ4_NL_X16},
    {"IQ4_XS", 256, 136, 256, NB_IQ4_XS_X16_BYTES, NB_WF_IQ4_XS, NB_WF_IQ4_XS_X16},
};

int nb_wformat_block_named(const char *dtype, struct nb_block_info *out)
{
    for (size_t i = 0; dtype && i < sizeof k_blocks / sizeof *k_blocks; i++)
        if (!strcmp(k_blocks[i].dtype, dtype)) {
            if (out) *out = k_blocks[i];
            return 1;
        }
    return 0;
}

int nb_wformat_block(enum nb_wformat f, struct nb_block_info *out)
{
    for (size_t i = 0; i < sizeof k_blocks / sizeof *k_blocks; i++)
        if (k_blocks[i].rows == f || k_blocks[i].x16 == f) {
            if (out) *out = k_blocks[i];
            return 1;
        }
    return 0;
}

int nb_wformat_act_group(enum nb_wformat f, int group)
{
    struct nb_block_info bi;
    if (nb_wformat_block(f, &bi) && k_formats[f].input == NB_INPUT_Q8) return bi.elems;
    return group;
}

const struct nb_wformat_info *nb_wformat_info(enum nb_wformat f)
{
    return (unsigned)f < NB_WF_COUNT ? &k_formats[f] : NULL;
}

int nb_wformat_of(enum nb_wpath path, enum nb_layout layout, enum nb_wformat *out)
{
    if (layout == 0) layout = NB_LAYOUT_ROWS;
    for (int f = 0; f < NB_WF_COUNT; f++)
        if (f != NB_WF_F16 && !nb_wformat_is_kquant((enum nb_wformat)f) &&
            k_formats[f].path == path && k_formats[f].layout == layout) {
            *out = (enum nb_wformat)f;
            return 1;
        }
    return 0;
}

int nb_wformat_planes(enum nb_wformat f, int group, int64_t n_out, int64_t n_in,
                      struct nb_layout_planes *out)
{
    const struct nb_wformat_info *i = nb_wformat_info(f);
    if (!i) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    struct nb_block_info bi;
    if (nb_wformat_block(f, &bi)) { /* one plane: rows of blocks, or records */
        int x16 = f == bi.x16;
        int64_t unit = x16 ? bi.rec_k : bi.elems, ub = x16 ? bi.rec_bytes : bi.bytes;
        int64_t rows = x16 ? n_out / 16 : n_out;
        memset(out, 0, sizeof *out);
        if (n_in <= 0 || n_out <= 0 || n_in % unit || (x16 && n_out % 16) ||
            n_in > ((int64_t)1 << 31) || rows > INT64_MAX / (n_in / unit * ub))
            return 0;
        out->n_planes = 1;
        out->size[0] = out->total = rows * (n_in / unit) * ub;
        return 1;
    }
    /* f16 rows have bf16's size */
    enum nb_wpath p = f == NB_WF_F16 ? NB_WPATH_BF16 : i->path;
    return nb_layout_planes_x(p, i->layout, group, n_out, n_in, out);
}
