/* formats/llama2c.c — llama2.c checkpoints: legacy, v1 (f32) and v2 (int8 Q8_0-like).
 *
 *   legacy  | 7 x i32 config | f32 tensors ... | freq_cis_real | freq_cis_imag | [output]
 *   v1, v2  | 256-byte header: "ak42" | version | 7 x i32 | u8 shared | [i32 group] | 0... |
 *           | tensors ...
 *
 * The expected size is computed from the header (with overflow checks) before any
 * tensor is placed, so every tensor view lies inside the buffer.
 */
#include "formats/llama2c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/checked.h"
#include "core/mmap.h"

#define L2C_MAGIC      0x616b3432u
#define L2C_HEADER_V   256
#define L2C_HEADER_LEG 28

struct nb_llama2c {
    struct nb_llama2c_config cfg;
    struct nb_mapped_file map; /* empty for nb_llama2c_parse */
    struct nb_tensor *tensors; /* [n_tensors] */
    int64_t n_tensors;
    struct nb_arena arena; /* names */
};

static int32_t load_i32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, 4);
    return r;
}

/* Read the header into *c (no validation beyond the version). */
static enum nb_status read_header(const unsigned char *p, size_t size, const char *name,
                                  struct nb_llama2c_config *c, size_t *hdr)
{
    memset(c, 0, sizeof *c);
    if (size >= 8 && (uint32_t)load_i32(p) == L2C_MAGIC) {
        if (size < L2C_HEADER_V)
            return nb_set_error(NB_ERR_FORMAT, "%s: %zu bytes is too short for a v1/v2 header",
                                name, size);
        c->version = load_i32(p + 4);
        if (c->version != 1 && c->version != 2)
            return nb_set_error(NB_ERR_UNSUPPORTED, "%s: llama2.c version %d (1 and 2 are known)",
                                name, c->version);
        int32_t v[7];
        for (int i = 0; i < 7; i++)
            v[i] = load_i32(p + 8 + 4 * i);
        c->dim = v[0], c->hidden_dim = v[1], c->n_layers = v[2], c->n_heads = v[3];
        c->n_kv_heads = v[4], c->vocab_size = v[5], c->seq_len = v[6];
        if (p[36] > 1)
            return nb_set_error(NB_ERR_FORMAT, "%s: shared_classifier flag is %u, not 0 or 1", name,
                                p[36]);
        c->shared_classifier = p[36];
        if (c->version == 2) c->group_size = load_i32(p + 37);
        *hdr = L2C_HEADER_V;
        return NB_OK;
    }
    if (size < L2C_HEADER_LEG)
        return nb_set_error(NB_ERR_FORMAT, "%s: %zu bytes is too short for a llama2.c header", name,
                            size);
    int32_t v[7];
    for (int i = 0; i < 7; i++)
        v[i] = load_i32(p + 4 * i);
    c->version = 0;
    c->dim = v[0], c->hidden_dim = v[1], c->n_layers = v[2], c->n_heads = v[3];
    c->n_kv_heads = v[4], c->seq_len = v[6];
    c->shared_classifier = v[5] > 0;
    /* INT32_MIN has no positive twin: leave it negative for validate() to reject. */
    c->vocab_size = v[5] < 0 && v[5] != INT32_MIN ? -v[5] : v[5];
    *hdr = L2C_HEADER_LEG;
    return NB_OK;
}

/* The seven header ints: names (as llama2.c's Config calls them) and the largest
 * value any llama2.c-sized model has. */
static const struct {
    const char *name;
    int max;
} k_field[7] = {{"dim", 1 << 16},    {"hidden_dim", 1 << 18}, {"n_layers", 1024},
                {"n_heads", 1024},   {"n_kv_heads", 1024},    {"vocab_size", 1 << 22},
                {"seq_len", 1 << 22}};

static void header_fields(const struct nb_llama2c_config *c, int v[7])
{
    v[0] = c->dim, v[1] = c->hidden_dim, v[2] = c->n_layers, v[3] = c->n_heads;
    v[4] = c->n_kv_heads, v[5] = c->vocab_size, v[6] = c->seq_len;
}

/* Check the config and compute the byte size the file needs (header included). */
static enum nb_status validate(const struct nb_llama2c_config *c, size_t hdr, const char *name,
                               uint64_t *need)
{
    int v[7];
    header_fields(c, v);
    for (int i = 0; i < 7; i++) {
        if (v[i] <= 0)
            return nb_set_error(NB_ERR_FORMAT, "%s: llama2.c header: %s = %d is not positive", name,
                                k_field[i].name, v[i]);
        if (v[i] > k_field[i].max)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: llama2.c header: %s = %d is out of range (1..%d)", name,
                                k_field[i].name, v[i], k_field[i].max);
    }
    if (c->dim % c->n_heads != 0)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: llama2.c header: dim = %d is not a multiple of n_heads = %d", name,
                            c->dim, c->n_heads);
    if (c->n_heads % c->n_kv_heads != 0)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: llama2.c header: n_heads = %d is not a multiple of n_kv_heads "
                            "= %d",
                            name, c->n_heads, c->n_kv_heads);
    int head = c->dim / c->n_heads;
    if (head % 2 != 0)
        return nb_set_error(NB_ERR_FORMAT,
                            "%s: llama2.c header: head size dim / n_heads = %d / %d = %d is odd "
                            "(RoPE needs pairs)",
                            name, c->dim, c->n_heads, head);
    if (c->version == 2 && c->group_size <= 0)
        return nb_set_error(NB_ERR_FORMAT, "%s: llama2.c header: group_size = %d is not positive",
                            name, c->group_size);

    uint64_t L = (uint64_t)c->n_layers, D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim;
    uint64_t V = (uint64_t)c->vocab_size;
    uint64_t KV = D / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads;
    /* Element counts: per-layer matrices, per-layer norms, embeddings. */
    uint64_t per_layer = 0, t1, t2, mats, norms, emb, total;
    int ovf = nb_mul_u64(D, D, &t1) || nb_mul_u64(t1, 2, &t1);     /* wq, wo */
    ovf = ovf || nb_mul_u64(KV, D, &t2) || nb_mul_u64(t2, 2, &t2); /* wk, wv */
    ovf = ovf || nb_add_u64(t1, t2, &per_layer);
    ovf = ovf || nb_mul_u64(H, D, &t1) || nb_mul_u64(t1, 3, &t1); /* w1, w2, w3 */
    ovf = ovf || nb_add_u64(per_layer, t1, &per_layer);
    ovf = ovf || nb_mul_u64(per_layer, L, &mats);
    ovf = ovf || nb_mul_u64(L, 2 * D, &norms) || nb_add_u64(norms, D, &norms);
    ovf = ovf || nb_mul_u64(V, D, &emb);
    uint64_t quant = 0; /* elements stored as int8 + scales in v2 */
    ovf = ovf || nb_add_u64(mats, emb, &quant);
    if (!c->shared_classifier) ovf = ovf || nb_add_u64(quant, emb, &quant);
    if (ovf) goto overflow;
    if (c->version == 2) {
        uint64_t G = (uint64_t)c->group_size;
        if (D % G != 0)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: llama2.c header: group_size = %d does not divide dim = %d",
                                name, c->group_size, c->dim);
        /* Every quantized tensor has `dim` as a factor, so groups never straddle. */
        uint64_t scales = quant / G, qb;
        ovf = nb_mul_u64(scales, 4, &qb) || nb_add_u64(qb, quant, &qb) ||
              nb_mul_u64(norms, 4, &total) || nb_add_u64(total, qb, &total);
    } else {
        ovf = nb_add_u64(quant, norms, &total);
        if (c->version == 0) {
            uint64_t fc; /* freq_cis_real and _imag: seq_len * head / 2 floats each */
            ovf = ovf || nb_mul_u64((uint64_t)c->seq_len, (uint64_t)head, &fc) ||
                  nb_add_u64(total, fc, &total);
        }
        ovf = ovf || nb_mul_u64(total, 4, &total);
    }
    ovf = ovf || nb_add_u64(total, hdr, &total);
    if (ovf) goto overflow;
    *need = total;
    return NB_OK;
overflow:
    return nb_set_error(NB_ERR_FORMAT,
                        "%s: tensor sizes overflow (dim %d, hidden_dim %d, "
                        "n_layers %d, vocab_size %d)",
                        name, c->dim, c->hidden_dim, c->n_layers, c->vocab_size);
}

/* A legacy header (no magic) is recognised when it is valid and the file is long
 * enough for it; or, so that a checkpoint with a damaged field reaches the parser that
 * names the field, when the file is header + whole floats and at least 5 of the 7
 * header ints are in their range (text, JSON and other binary formats start with
 * bytes that make far larger ints). */
int nb_llama2c_sniff(const void *data, size_t size)
{
    const unsigned char *p = data;
    if (!p || size < 4) return 0;
    if ((uint32_t)load_i32(p) == L2C_MAGIC) return 1;
    struct nb_llama2c_config c;
    size_t hdr;
    uint64_t need = 0;
    int ok = 0;
    char saved[1024]; /* a predicate: keep the caller's error message */
    snprintf(saved, sizeof saved, "%s", nb_last_error());
    if (read_header(p, size, "", &c, &hdr) != NB_OK) goto done;
    if (validate(&c, hdr, "", &need) == NB_OK && need <= size) {
        ok = 1;
    } else if (size > L2C_HEADER_LEG && size % 4 == 0) {
        int v[7], n_plausible = 0;
        header_fields(&c, v);
        for (int i = 0; i < 7; i++)
            n_plausible += v[i] > 0 && v[i] <= k_field[i].max;
        ok = n_plausible >= 5;
    }
done:
    nb_set_error(NB_OK, "%s", saved);
    return ok;
}

/* Cursor over the tensor bytes; views are appended to m->tensors. */
struct cursor {
    struct nb_llama2c *m;
    const unsigned char *base;
    uint64_t off, size;
    const char *file;
};

/* Add tensor `name` (printf-like "%s" or "layers.%d.%s" built by the caller) of
 * `dtype` and shape {d0[, d1]} at the cursor, and advance. */
static enum nb_status take(struct cursor *cu, const char *name, enum nb_dtype dtype, int n_dims,
                           int64_t d0, int64_t d1)
{
    struct nb_tensor *t = &cu->m->tensors[cu->m->n_tensors];
    uint64_t ne = (uint64_t)d0 * (uint64_t)(n_dims > 1 ? d1 : 1), nb, end;
    if (!nb_dtype_row_bytes(dtype, ne, &nb) || nb_add_u64(cu->off, nb, &end) || end > cu->size)
        return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s' runs past the end of the file",
                            cu->file, name);
    t->name = nb_arena_strdup(&cu->m->arena, name);
    if (!t->name) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", cu->file);
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int i = 0; i < NB_MAX_DIMS; i++)
        t->shape[i] = 1;
    t->shape[0] = d0;
    if (n_dims > 1) t->shape[1] = d1;
    t->data = cu->base + cu->off;
    t->n_bytes = nb;
    cu->off = end;
    cu->m->n_tensors++;
    return NB_OK;
}

/* A weight matrix: f32 for legacy/v1, int8 + "<name>.scale" f32 for v2. */
static enum nb_status take_mat(struct cursor *cu, const char *name, int64_t rows, int64_t cols)
{
    const struct nb_llama2c_config *c = &cu->m->cfg;
    if (c->version != 2) return take(cu, name, NB_DTYPE_F32, 2, rows, cols);
    enum nb_status s = take(cu, name, NB_DTYPE_I8, 2, rows, cols);
    if (s != NB_OK) return s;
    char sname[96];
    snprintf(sname, sizeof sname, "%s.scale", name);
    return take(cu, sname, NB_DTYPE_F32, 1, rows * cols / c->group_size, 1);
}

enum { W_ATT_NORM, W_FFN_NORM, W_Q, W_K, W_V, W_O, W_1, W_2, W_3, W_KINDS };
static const char *const k_kind[W_KINDS] = {
    "attention_norm", "ffn_norm", "wq", "wk", "wv", "wo", "w1", "w2", "w3"};

/* All layers' tensor of one kind, in layer order. */
static enum nb_status take_layers(struct cursor *cu, int kind)
{
    const struct nb_llama2c_config *c = &cu->m->cfg;
    int64_t D = c->dim, H = c->hidden_dim, KV = (int64_t)c->dim / c->n_heads * c->n_kv_heads;
    for (int l = 0; l < c->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.%s", l, k_kind[kind]);
        enum nb_status s;
        switch (kind) {
        case W_ATT_NORM:
        case W_FFN_NORM: s = take(cu, name, NB_DTYPE_F32, 1, D, 1); break;
        case W_Q:
        case W_O: s = take_mat(cu, name, D, D); break;
        case W_K:
        case W_V: s = take_mat(cu, name, KV, D); break;
        case W_1:
        case W_3: s = take_mat(cu, name, H, D); break;
        default: s = take_mat(cu, name, D, H); break;
        }
        if (s != NB_OK) return s;
    }
    return NB_OK;
}

enum nb_status nb_llama2c_parse(struct nb_llama2c **out, const void *data, size_t size,
                                const char *name)
{
    enum nb_status s = NB_OK;
    struct nb_llama2c *m = NULL;
    *out = NULL;
    if (!name) name = "<llama2.c>";
    if (!data && size) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL buffer", name);
    struct nb_llama2c_config c;
    size_t hdr = 0;
    uint64_t need = 0;
    s = read_header(data, size, name, &c, &hdr);
    if (s != NB_OK) goto fail;
    s = validate(&c, hdr, name, &need);
    if (s != NB_OK) goto fail;
    if (need > size) {
        s = nb_set_error(NB_ERR_FORMAT,
                         "%s: truncated: the llama2.c header (dim %d, hidden_dim %d, n_layers %d, "
                         "n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d) implies %llu "
                         "bytes, the file has %zu",
                         name, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                         c.vocab_size, c.seq_len, (unsigned long long)need, size);
        goto fail;
    }
    if (c.version != 0 && need != size) {
        s = nb_set_error(NB_ERR_FORMAT, "%s: %llu trailing bytes after the last tensor", name,
                         (unsigned long long)(size - need));
        goto fail;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    nb_arena_init(&m->arena, 16u << 10);
    m->cfg = c;
    /* The layer count is bounded by the file size checked above. */
    int64_t n = 9 * (int64_t)c.n_layers + 3;
    if (c.version == 2) n *= 2;
    m->tensors = calloc((size_t)n, sizeof *m->tensors);
    if (!m->tensors) {
        s = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    struct cursor cu = {m, data, hdr, size, name};
    int64_t D = c.dim, V = c.vocab_size;
    if (c.version == 0) {
        s = take(&cu, "tok_embeddings", NB_DTYPE_F32, 2, V, D);
        if (s == NB_OK) s = take_layers(&cu, W_ATT_NORM);
        for (int k = W_Q; s == NB_OK && k <= W_O; k++)
            s = take_layers(&cu, k);
        if (s == NB_OK) s = take_layers(&cu, W_FFN_NORM);
        for (int k = W_1; s == NB_OK && k <= W_3; k++)
            s = take_layers(&cu, k);
        if (s == NB_OK) s = take(&cu, "norm", NB_DTYPE_F32, 1, D, 1);
        /* freq_cis_real and freq_cis_imag are recomputed by the model; skip them. */
        cu.off += 2 * ((uint64_t)c.seq_len * (uint64_t)(c.dim / c.n_heads) / 2) * 4;
    } else {
        s = take_layers(&cu, W_ATT_NORM);
        if (s == NB_OK) s = take_layers(&cu, W_FFN_NORM);
        if (s == NB_OK) s = take(&cu, "norm", NB_DTYPE_F32, 1, D, 1);
        if (s == NB_OK) s = take_mat(&cu, "tok_embeddings", V, D);
        for (int k = W_Q; s == NB_OK && k <= W_3; k++)
            s = take_layers(&cu, k);
    }
    if (s == NB_OK && !c.shared_classifier) s = take_mat(&cu, "output", V, D);
    if (s != NB_OK) goto fail;
    *out = m;
    return NB_OK;
fail:
    nb_llama2c_free(m);
    return s;
}

enum nb_status nb_llama2c_open(struct nb_llama2c **out, const char *path)
{
    struct nb_mapped_file f;
    *out = NULL;
    enum nb_status s = nb_file_map(&f, path);
    if (s != NB_OK) return s;
    s = nb_llama2c_parse(out, f.data, f.size, path);
    if (s != NB_OK) goto fail;
    (*out)->map = f;
    return NB_OK;
fail:
    nb_file_unmap(&f);
    return s;
}

void nb_llama2c_free(struct nb_llama2c *m)
{
    if (!m) return;
    nb_file_unmap(&m->map);
    free(m->tensors);
    nb_arena_free(&m->arena);
    free(m);
}

const struct nb_llama2c_config *nb_llama2c_config(const struct nb_llama2c *m)
{
    return &m->cfg;
}

int64_t nb_llama2c_n_tensors(const struct nb_llama2c *m)
{
    return m->n_tensors;
}

const struct nb_tensor *nb_llama2c_tensor(const struct nb_llama2c *m, int64_t i)
{
    return (i >= 0 && i < m->n_tensors) ? &m->tensors[i] : NULL;
}

const struct nb_tensor *nb_llama2c_find(const struct nb_llama2c *m, const char *name)
{
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}
