/* eval/synth.c — random-weight GGUF models at real shapes (see synth.h). */
#include "eval/synth.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "core/threadpool.h"
#include "formats/gguf.h"
#include "runtime/api.h"
#include "nibble_synth.h"

/* The generator must give the same bits everywhere: no fused multiply-add. (GCC in
 * ISO C mode, which the build uses, does not contract; clang needs the pragma.) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---------------------------------------------------------------- shapes */

static const struct nb_synth_shape k_shapes[] = {
    {.name = "qwen3-1.7b",
     .arch = "qwen3",
     .desc = "Qwen3-1.7B sizes (tied head, q/k norms)",
     .n_layers = 28,
     .n_embd = 2048,
     .n_heads = 16,
     .n_kv_heads = 8,
     .head_dim = 128,
     .n_ff = 6144,
     .n_vocab = 151936,
     .n_ctx = 40960,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .tied_head = 1,
     .qk_norm = 1},
    {.name = "spark-1.7b",
     .arch = "spark",
     .desc = "Qwen3-1.7B sizes with nibble's Spark options (GEGLU, head gate, window 512 on "
             "even layers)",
     .n_layers = 28,
     .n_embd = 2048,
     .n_heads = 16,
     .n_kv_heads = 8,
     .head_dim = 128,
     .n_ff = 6144,
     .n_vocab = 151936,
     .n_ctx = 40960,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .tied_head = 1,
     .geglu = 1,
     .head_gate = 1,
     .sliding_window = 512},
    {.name = "qwen3-tiny",
     .arch = "qwen3",
     .desc = "test shape: 2 layers, hidden 128",
     .n_layers = 2,
     .n_embd = 128,
     .n_heads = 4,
     .n_kv_heads = 2,
     .head_dim = 32,
     .n_ff = 256,
     .n_vocab = 512,
     .n_ctx = 4096,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .tied_head = 1,
     .qk_norm = 1},
    {.name = "llama-tiny",
     .arch = "llama",
     .desc = "test shape: 2 layers, hidden 128, untied head",
     .n_layers = 2,
     .n_embd = 128,
     .n_heads = 4,
     .n_kv_heads = 2,
     .head_dim = 32,
     .n_ff = 256,
     .n_vocab = 512,
     .n_ctx = 2048,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-5f},
    {.name = "spark-tiny",
     .arch = "spark",
     .desc = "test shape: 4 layers, hidden 128, window 16",
     .n_layers = 4,
     .n_embd = 128,
     .n_heads = 4,
     .n_kv_heads = 2,
     .head_dim = 32,
     .n_ff = 256,
     .n_vocab = 512,
     .n_ctx = 2048,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-6f,
     .tied_head = 1,
     .geglu = 1,
     .head_gate = 1,
     .sliding_window = 16},
};
#define N_SHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

int nb_synth_n_shapes(void)
{
    return N_SHAPES;
}

const struct nb_synth_shape *nb_synth_shape_at(int i)
{
    return i >= 0 && i < N_SHAPES ? &k_shapes[i] : NULL;
}

const struct nb_synth_shape *nb_synth_find_shape(const char *name)
{
    for (int i = 0; name && i < N_SHAPES; i++)
        if (!strcmp(k_shapes[i].name, name)) return &k_shapes[i];
    return NULL;
}

int64_t nb_synth_n_params(const struct nb_synth_shape *s)
{
    int64_t E = s->n_embd, q = (int64_t)s->n_heads * s->head_dim;
    int64_t kv = (int64_t)s->n_kv_heads * s->head_dim;
    int64_t layer = 2 * E + q * E + 2 * kv * E + E * q + 3 * E * s->n_ff;
    if (s->qk_norm) layer += 2 * s->head_dim;
    if (s->head_gate) layer += s->n_heads * E;
    return (int64_t)s->n_vocab * E * (s->tied_head ? 1 : 2) + E + s->n_layers * layer;
}

/* ---------------------------------------------------------------- generator */

static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t splitmix_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return splitmix_mix(*s);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ln(q) for 0 < q < 1 from IEEE-exact operations only: q = m * 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh(t), t = (m-1)/(m+1), |t| < 0.172 (series to t^21,
 * relative error < 1e-15). */
static double det_log(double q)
{
    int e;
    double m = frexp(q, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t;
    double p = 1.0 / 21;
    for (int k = 19; k >= 1; k -= 2)
        p = p * t2 + 1.0 / k;
    return (double)e * 0.69314718055994530942 + 2.0 * t * p;
}

/* Block b of a tensor: n standard normals from the block's own stream. */
static void normal_block(uint64_t tensor_seed, uint64_t b, float *out, int n)
{
    uint64_t s = splitmix_mix(tensor_seed + (b + 1) * 0xd1b54a32d192ed03ull);
    for (int i = 0; i < n; i += 2) {
        double u, v, q;
        do {
            u = (double)(splitmix_next(&s) >> 11) * 0x1.0p-52 - 1.0;
            v = (double)(splitmix_next(&s) >> 11) * 0x1.0p-52 - 1.0;
            q = u * u + v * v;
        } while (q >= 1.0 || q == 0.0);
        double f = sqrt(-2.0 * det_log(q) / q);
        out[i] = (float)(u * f);
        if (i + 1 < n) out[i + 1] = (float)(v * f);
    }
}

/* ---------------------------------------------------------------- tensors */

struct gen_tensor {
    char name[64];
    enum nb_dtype dtype;
    int n_dims;
    int64_t shape[2];
    int64_t n_elems;
    float mean, std;
    uint64_t seed;
    struct nb_pool *pool;
};

/* One fill() range, split by blocks over the pool's threads. */
struct fill_job {
    const struct gen_tensor *t;
    void *dst;
    int64_t e0, e1; /* element range of dst */
};

static void fill_worker(void *ctx, int ith, int nth)
{
    const struct fill_job *j = ctx;
    const struct gen_tensor *t = j->t;
    float buf[NB_SYNTH_BLOCK];
    int64_t b_first = j->e0 / NB_SYNTH_BLOCK, b_last = (j->e1 - 1) / NB_SYNTH_BLOCK;
    long lo, hi;
    nb_split_range((long)(b_last - b_first + 1), ith, nth, 1, &lo, &hi);
    for (int64_t b = b_first + lo; b < b_first + hi; b++) {
        int64_t start = b * NB_SYNTH_BLOCK;
        int64_t n = t->n_elems - start < NB_SYNTH_BLOCK ? t->n_elems - start : NB_SYNTH_BLOCK;
        normal_block(t->seed, (uint64_t)b, buf, (int)n);
        int64_t from = start > j->e0 ? start : j->e0;
        int64_t to = start + n < j->e1 ? start + n : j->e1;
        for (int64_t e = from; e < to; e++) {
            float x = t->mean + t->std * buf[e - start];
            int64_t o = e - j->e0;
            switch (t->dtype) {
            case NB_DTYPE_F16: ((uint16_t *)j->dst)[o] = nb_f32_to_f16(x); break;
            case NB_DTYPE_BF16: ((uint16_t *)j->dst)[o] = nb_f32_to_bf16(x); break;
            default: ((float *)j->dst)[o] = x; break;
            }
        }
    }
}

static enum nb_status fill_tensor(void *user, void *dst, uint64_t offset, size_t n)
{
    const struct gen_tensor *t = user;
    size_t esz = t->dtype == NB_DTYPE_F32 ? 4 : 2;
    struct fill_job j = {.t = t, .dst = dst, .e0 = (int64_t)(offset / esz)};
    j.e1 = j.e0 + (int64_t)(n / esz);
    if (j.e1 > j.e0) nb_pool_run(t->pool, fill_worker, &j);
    return NB_OK;
}

/* A matrix (d1 > 0) ~ N(0, 0.02^2) in the requested dtype, or a norm vector
 * ~ 1 + N(0, 0.02^2) in F32. The stream depends on the seed and the name only. */
static void add_gen(struct gen_tensor *t, const char *name, int64_t d0, int64_t d1, int is_norm,
                    const struct nb_synth_config *p, struct nb_pool *pool)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 1;
    t->n_elems = t->shape[0] * t->shape[1];
    t->dtype = is_norm ? NB_DTYPE_F32 : p->dtype;
    t->mean = is_norm ? 1.0f : 0.0f;
    t->std = 0.02f;
    t->seed = splitmix_mix(p->seed ^ fnv1a(t->name));
    t->pool = pool;
}

/* ---------------------------------------------------------------- vocabulary */

/* GPT-2's byte-level alphabet: printable bytes stand for themselves, the others map
 * to U+0100 upwards in byte order. */
static int byte_symbol(int b, char out[4])
{
    static const int printable[][2] = {{33, 126}, {161, 172}, {174, 255}};
    int cp = -1, extra = 0;
    for (int x = 0; x < 256 && cp < 0; x++) {
        int p = 0;
        for (int r = 0; r < 3; r++)
            p |= x >= printable[r][0] && x <= printable[r][1];
        if (x == b) cp = p ? x : 256 + extra;
        if (!p) extra++;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    out[2] = 0;
    return 2;
}

/* A few merges of byte symbols ("Ġ" is the space byte); each result is a token. */
static const char *const k_merges[][2] = {
    {"Ġ", "t"}, {"h", "e"},   {"Ġ", "a"}, {"i", "n"}, {"r", "e"},
    {"o", "n"}, {"Ġt", "he"}, {"e", "r"}, {"Ġ", "s"}, {"a", "t"},
};
#define N_MERGES ((int)(sizeof k_merges / sizeof k_merges[0]))
static const char *const k_specials[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
#define QWEN_ENDOFTEXT 151643 /* Qwen2/3's ids for the three specials */

struct vocab {
    char **tokens;
    int32_t *types;
    char *text;
    char **merges;
    int special0; /* id of <|endoftext|>; <|im_start|>, <|im_end|> follow */
};

static void vocab_free(struct vocab *v)
{
    free(v->tokens);
    free(v->types);
    free(v->text);
    if (v->merges)
        for (int i = 0; i < N_MERGES; i++)
            free(v->merges[i]);
    free(v->merges);
}

static enum nb_status vocab_build(struct vocab *v, int n_vocab)
{
    memset(v, 0, sizeof *v);
    if (n_vocab < 256 + N_MERGES + 3)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "synth: vocabulary %d is below the %d tokens "
                            "of the byte-level alphabet, merges and specials",
                            n_vocab, 256 + N_MERGES + 3);
    v->special0 = n_vocab >= QWEN_ENDOFTEXT + 3 ? QWEN_ENDOFTEXT : n_vocab - 3;
    size_t cap = (size_t)n_vocab * 16 + 256;
    v->tokens = calloc((size_t)n_vocab, sizeof *v->tokens);
    v->types = calloc((size_t)n_vocab, sizeof *v->types);
    v->text = malloc(cap);
    v->merges = calloc(N_MERGES, sizeof *v->merges);
    if (!v->tokens || !v->types || !v->text || !v->merges) goto nomem;
    size_t at = 0;
    for (int id = 0; id < n_vocab; id++) {
        char *p = v->text + at;
        v->types[id] = 1; /* normal */
        if (id < 256) {
            byte_symbol(id, p);
        } else if (id < 256 + N_MERGES) {
            snprintf(p, 16, "%s%s", k_merges[id - 256][0], k_merges[id - 256][1]);
        } else if (id >= v->special0 && id < v->special0 + 3) {
            snprintf(p, 16, "%s", k_specials[id - v->special0]);
            v->types[id] = 3; /* control */
        } else {
            snprintf(p, 16, "tok%d", id);
        }
        at += strlen(p) + 1;
    }
    /* pointers after the text stopped moving */
    at = 0;
    for (int id = 0; id < n_vocab; id++) {
        v->tokens[id] = v->text + at;
        at += strlen(v->text + at) + 1;
    }
    for (int i = 0; i < N_MERGES; i++) {
        size_t n = strlen(k_merges[i][0]) + strlen(k_merges[i][1]) + 2;
        if (!(v->merges[i] = malloc(n))) goto nomem;
        snprintf(v->merges[i], n, "%s %s", k_merges[i][0], k_merges[i][1]);
    }
    return NB_OK;
nomem:
    vocab_free(v);
    return nb_set_error(NB_ERR_NOMEM, "synth: out of memory building the vocabulary");
}

/* ---------------------------------------------------------------- writer */

#define NEED(x)                                                                                    \
    do {                                                                                           \
        if ((st = (x)) != NB_OK) goto fail;                                                        \
    } while (0)

static uint32_t file_type(enum nb_dtype dt)
{
    return dt == NB_DTYPE_F16 ? 1 : dt == NB_DTYPE_BF16 ? 32 : 0; /* llama_ftype */
}

enum nb_status nb_synth_write(const struct nb_synth_shape *s, const struct nb_synth_config *p,
                              const char *path)
{
    enum nb_status st = NB_OK;
    struct nb_gguf_writer *w = NULL;
    struct nb_pool *pool = NULL;
    struct gen_tensor *ts = NULL;
    const char **layer_types = NULL;
    struct vocab voc = {0};
    char key[160];
    if (!s || !p || !path) return nb_set_error(NB_ERR_INVALID_ARG, "synth: NULL argument");
    if (p->dtype != NB_DTYPE_F16 && p->dtype != NB_DTYPE_BF16 && p->dtype != NB_DTYPE_F32)
        return nb_set_error(NB_ERR_INVALID_ARG, "synth: dtype %s (f16, bf16, f32)",
                            nb_dtype_name(p->dtype));

    NEED(vocab_build(&voc, s->n_vocab));
    NEED(nb_pool_init(&pool, p->n_threads, 0));
    NEED(nb_gguf_writer_init(&w, 3, 32));

    /* ---- metadata */
    char name[128];
    snprintf(name, sizeof name, "nibble synth %s seed %" PRIu64, s->name, p->seed);
    NEED(nb_gguf_writer_add_str(w, "general.architecture", s->arch));
    NEED(nb_gguf_writer_add_str(w, "general.name", name));
    NEED(nb_gguf_writer_add_u32(w, "general.file_type", file_type(p->dtype)));
#define ARCH_U32(suffix, v)                                                                        \
    snprintf(key, sizeof key, "%s.%s", s->arch, suffix);                                           \
    NEED(nb_gguf_writer_add_u32(w, key, (uint32_t)(v)))
#define ARCH_F32(suffix, v)                                                                        \
    snprintf(key, sizeof key, "%s.%s", s->arch, suffix);                                           \
    NEED(nb_gguf_writer_add_f32(w, key, (v)))
    ARCH_U32("block_count", s->n_layers);
    ARCH_U32("context_length", s->n_ctx);
    ARCH_U32("embedding_length", s->n_embd);
    ARCH_U32("feed_forward_length", s->n_ff);
    ARCH_U32("attention.head_count", s->n_heads);
    ARCH_U32("attention.head_count_kv", s->n_kv_heads);
    ARCH_U32("attention.key_length", s->head_dim);
    ARCH_U32("attention.value_length", s->head_dim);
    ARCH_F32("rope.freq_base", s->rope_theta);
    ARCH_F32("attention.layer_norm_rms_epsilon", s->norm_eps);
    if (!strcmp(s->arch, "llama")) {
        ARCH_U32("rope.dimension_count", s->head_dim);
        ARCH_U32("vocab_size", s->n_vocab);
    }
    if (!strcmp(s->arch, "spark")) {
        snprintf(key, sizeof key, "%s.hidden_act", s->arch);
        NEED(nb_gguf_writer_add_str(w, key, s->geglu ? "gelu_pytorch_tanh" : "silu"));
        snprintf(key, sizeof key, "%s.attention.head_gate", s->arch);
        NEED(nb_gguf_writer_add_bool(w, key, s->head_gate));
        if (s->sliding_window > 0) {
            ARCH_U32("attention.sliding_window", s->sliding_window);
            if (!(layer_types = malloc(sizeof *layer_types * (size_t)s->n_layers))) {
                st = nb_set_error(NB_ERR_NOMEM, "synth: out of memory");
                goto fail;
            }
            for (int l = 0; l < s->n_layers; l++)
                layer_types[l] = l % 2 == 0 ? "sliding_attention" : "full_attention";
            snprintf(key, sizeof key, "%s.attention.layer_types", s->arch);
            NEED(nb_gguf_writer_add_arr_str(w, key, layer_types, (uint64_t)s->n_layers));
        }
    }
#undef ARCH_U32
#undef ARCH_F32
    NEED(nb_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2"));
    NEED(nb_gguf_writer_add_str(w, "tokenizer.ggml.pre", "qwen2"));
    NEED(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)voc.tokens,
                                    (uint64_t)s->n_vocab));
    NEED(nb_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", NB_GGUF_I32, voc.types,
                                (uint64_t)s->n_vocab));
    NEED(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)voc.merges,
                                    N_MERGES));
    NEED(nb_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)voc.special0));
    NEED(nb_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)voc.special0 + 2));
    NEED(nb_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)voc.special0));
    NEED(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 0));

    /* ---- tensors, in llama.cpp's order */
    int per_layer = 9 + 2 * !!s->qk_norm + !!s->head_gate;
    int n_t = 3 + s->n_layers * per_layer, k = 0;
    if (!(ts = calloc((size_t)n_t, sizeof *ts))) {
        st = nb_set_error(NB_ERR_NOMEM, "synth: out of memory");
        goto fail;
    }
    int64_t E = s->n_embd, Q = (int64_t)s->n_heads * s->head_dim;
    int64_t KV = (int64_t)s->n_kv_heads * s->head_dim;
    char nm[64];
#define ADD(d0, d1, is_norm) add_gen(&ts[k++], nm, d0, d1, is_norm, p, pool)
#define LAYER(fmt)           snprintf(nm, sizeof nm, fmt, l)
    snprintf(nm, sizeof nm, "token_embd.weight");
    ADD(s->n_vocab, E, 0);
    if (!s->tied_head) {
        snprintf(nm, sizeof nm, "output.weight");
        ADD(s->n_vocab, E, 0);
    }
    snprintf(nm, sizeof nm, "output_norm.weight");
    ADD(E, 0, 1);
    for (int l = 0; l < s->n_layers; l++) {
        LAYER("blk.%d.attn_norm.weight");
        ADD(E, 0, 1);
        LAYER("blk.%d.attn_q.weight");
        ADD(Q, E, 0);
        LAYER("blk.%d.attn_k.weight");
        ADD(KV, E, 0);
        LAYER("blk.%d.attn_v.weight");
        ADD(KV, E, 0);
        LAYER("blk.%d.attn_output.weight");
        ADD(E, Q, 0);
        if (s->qk_norm) {
            LAYER("blk.%d.attn_q_norm.weight");
            ADD(s->head_dim, 0, 1);
            LAYER("blk.%d.attn_k_norm.weight");
            ADD(s->head_dim, 0, 1);
        }
        if (s->head_gate) {
            LAYER("blk.%d.attn_gate.weight");
            ADD(s->n_heads, E, 0);
        }
        LAYER("blk.%d.ffn_norm.weight");
        ADD(E, 0, 1);
        LAYER("blk.%d.ffn_gate.weight");
        ADD(s->n_ff, E, 0);
        LAYER("blk.%d.ffn_up.weight");
        ADD(s->n_ff, E, 0);
        LAYER("blk.%d.ffn_down.weight");
        ADD(E, s->n_ff, 0);
    }
#undef ADD
#undef LAYER
    for (int i = 0; i < k; i++)
        NEED(nb_gguf_writer_add_tensor_fill(w, ts[i].name, ts[i].dtype, ts[i].n_dims, ts[i].shape,
                                            fill_tensor, &ts[i]));
    NEED(nb_gguf_writer_write(w, path));

fail:
    nb_gguf_writer_free(w);
    nb_pool_free(pool);
    free(ts);
    free(layer_types);
    vocab_free(&voc);
    return st;
}

/* ---- the public calls (nibble.h, "synthetic models"): names and strings over the table
 * and the writer above. */

static void shape_info(const struct nb_synth_shape *s, struct nb_synth_shape_info *out)
{
    struct nb_synth_shape_info i = {
        .size = sizeof i,
        .name = s->name,
        .arch = s->arch,
        .desc = s->desc,
        .n_layers = s->n_layers,
        .n_embd = s->n_embd,
        .n_heads = s->n_heads,
        .n_kv_heads = s->n_kv_heads,
        .head_dim = s->head_dim,
        .n_ff = s->n_ff,
        .n_vocab = s->n_vocab,
        .n_ctx = s->n_ctx,
        .n_params = nb_synth_n_params(s),
    };
    nb_api_out(out, &i, sizeof i);
}

int nb_synth_shape_count(void) { return nb_synth_n_shapes(); }

enum nb_status nb_synth_shape_get(int i, struct nb_synth_shape_info *out)
{
    if (i < 0 || i >= nb_synth_n_shapes())
        return nb_set_error(NB_ERR_INVALID_ARG, "synth: shape index %d (there are %d)", i,
                            nb_synth_n_shapes());
    shape_info(nb_synth_shape_at(i), out);
    return NB_OK;
}

/* "unknown shape 'x' (the shapes: a, b, c)": the message lists what there is. */
static enum nb_status unknown_shape(const char *name)
{
    char list[512] = "";
    size_t k = 0;
    for (int i = 0; i < nb_synth_n_shapes() && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "",
                              nb_synth_shape_at(i)->name);
    return nb_set_error(NB_ERR_NOT_FOUND, "synth: unknown shape '%s' (the shapes: %s)",
                        name ? name : "(null)", list);
}

enum nb_status nb_synth_shape_find(const char *name, struct nb_synth_shape_info *out)
{
    const struct nb_synth_shape *s = name ? nb_synth_find_shape(name) : NULL;
    if (!s) return unknown_shape(name);
    shape_info(s, out);
    return NB_OK;
}

struct nb_synth_params nb_synth_default_params(void)
{
    return (struct nb_synth_params){.size = sizeof(struct nb_synth_params), .dtype = "f16",
                                    .seed = 1};
}

enum nb_status nb_synth_write_file(const char *shape, const struct nb_synth_params *params,
                                   const char *path)
{
    struct nb_synth_params p = nb_synth_default_params();
    enum nb_status st = nb_params_in(&p, sizeof p, params, "nb_synth_write_file");
    if (st) return st;
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "synth: no output path");
    const struct nb_synth_shape *s = shape ? nb_synth_find_shape(shape) : NULL;
    if (!s) return unknown_shape(shape);
    struct nb_synth_config c = {.seed = p.seed, .n_threads = p.n_threads};
    const char *dt = p.dtype ? p.dtype : "f16";
    if (!strcmp(dt, "f16")) c.dtype = NB_DTYPE_F16;
    else if (!strcmp(dt, "bf16")) c.dtype = NB_DTYPE_BF16;
    else if (!strcmp(dt, "f32")) c.dtype = NB_DTYPE_F32;
    else
        return nb_set_error(NB_ERR_INVALID_ARG, "synth: dtype '%s' (f16, bf16 or f32)", dt);
    return nb_synth_write(s, &c, path);
}
