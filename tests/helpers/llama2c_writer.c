/* tests/helpers/llama2c_writer.c — build llama2.c checkpoints in memory. */
#include "helpers/llama2c_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_kinds[] = {
    "attention_norm", "ffn_norm", "wq", "wk", "wv", "wo", "w1", "w2", "w3"};

int nbt_l2c_tag(const char *name)
{
    if (strcmp(name, "tok_embeddings") == 0) return 1;
    if (strcmp(name, "norm") == 0) return 2;
    if (strcmp(name, "output") == 0) return 3;
    int layer, used = 0;
    if (sscanf(name, "layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
    for (int k = 0; k < 9; k++)
        if (strcmp(name + used, k_kinds[k]) == 0) return 10 + layer * 10 + k;
    return -1;
}

float nbt_l2c_value(int tag, int64_t i)
{
    return (float)tag + (float)(i % 1000) / 1024.0f;
}
int8_t nbt_l2c_q(int tag, int64_t i)
{
    return (int8_t)((tag * 7 + i) % 255 - 127);
}
float nbt_l2c_scale(int tag, int64_t group)
{
    return (float)tag / 8.0f + (float)group;
}

struct out {
    uint8_t *p;
    size_t n, cap;
    int oom;
};

static void put(struct out *o, const void *src, size_t n)
{
    if (o->oom) return;
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n)
            cap *= 2;
        uint8_t *np = realloc(o->p, cap);
        if (!np) {
            o->oom = 1;
            return;
        }
        o->p = np;
        o->cap = cap;
    }
    memcpy(o->p + o->n, src, n);
    o->n += n;
}

static void put_i32(struct out *o, int32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(o, b, 4);
}

static void put_f32(struct out *o, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_i32(o, (int32_t)u);
}

static void put_f32_tensor(struct out *o, const char *name, int64_t n)
{
    int tag = nbt_l2c_tag(name);
    for (int64_t i = 0; i < n; i++)
        put_f32(o, nbt_l2c_value(tag, i));
}

/* f32 (legacy, v1) or int8 + scales (v2). */
static void put_mat(struct out *o, const struct nb_llama2c_config *c, const char *name, int64_t n)
{
    if (c->version != 2) {
        put_f32_tensor(o, name, n);
        return;
    }
    int tag = nbt_l2c_tag(name);
    for (int64_t i = 0; i < n; i++) {
        int8_t q = nbt_l2c_q(tag, i);
        put(o, &q, 1);
    }
    for (int64_t g = 0; g < n / c->group_size; g++)
        put_f32(o, nbt_l2c_scale(tag, g));
}

static void put_layers(struct out *o, const struct nb_llama2c_config *c, int kind)
{
    int64_t D = c->dim, H = c->hidden_dim, KV = (int64_t)c->dim / c->n_heads * c->n_kv_heads;
    int64_t sizes[9] = {D, D, D * D, KV * D, KV * D, D * D, H * D, D * H, H * D};
    for (int l = 0; l < c->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.%s", l, k_kinds[kind]);
        if (kind < 2)
            put_f32_tensor(o, name, sizes[kind]);
        else
            put_mat(o, c, name, sizes[kind]);
    }
}

uint8_t *nbt_l2c_build(const struct nb_llama2c_config *c, size_t *size)
{
    struct out o = {0};
    int64_t D = c->dim, V = c->vocab_size;
    if (c->version == 0) {
        put_i32(&o, c->dim);
        put_i32(&o, c->hidden_dim);
        put_i32(&o, c->n_layers);
        put_i32(&o, c->n_heads);
        put_i32(&o, c->n_kv_heads);
        put_i32(&o, c->shared_classifier ? c->vocab_size : -c->vocab_size);
        put_i32(&o, c->seq_len);
        put_f32_tensor(&o, "tok_embeddings", V * D);
        put_layers(&o, c, 0);
        for (int k = 2; k <= 5; k++)
            put_layers(&o, c, k);
        put_layers(&o, c, 1);
        for (int k = 6; k <= 8; k++)
            put_layers(&o, c, k);
        put_f32_tensor(&o, "norm", D);
        int64_t fc = (int64_t)c->seq_len * (c->dim / c->n_heads) / 2;
        for (int64_t i = 0; i < 2 * fc; i++)
            put_f32(&o, -1.0f);
    } else {
        uint8_t hdr[256] = {0};
        int32_t v[] = {0x616b3432, c->version,    c->dim,        c->hidden_dim, c->n_layers,
                       c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len};
        for (int i = 0; i < 9; i++)
            for (int b = 0; b < 4; b++)
                hdr[4 * i + b] = (uint8_t)((uint32_t)v[i] >> (8 * b));
        hdr[36] = (uint8_t)c->shared_classifier;
        if (c->version == 2)
            for (int b = 0; b < 4; b++)
                hdr[37 + b] = (uint8_t)((uint32_t)c->group_size >> (8 * b));
        put(&o, hdr, sizeof hdr);
        put_layers(&o, c, 0);
        put_layers(&o, c, 1);
        put_f32_tensor(&o, "norm", D);
        put_mat(&o, c, "tok_embeddings", V * D);
        for (int k = 2; k <= 8; k++)
            put_layers(&o, c, k);
    }
    if (!c->shared_classifier) put_mat(&o, c, "output", V * D);
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    *size = o.n;
    return o.p;
}

struct nb_llama2c_config nbt_l2c_tiny(int version, int shared_classifier)
{
    struct nb_llama2c_config c = {.version = version,
                                  .dim = 8,
                                  .hidden_dim = 12,
                                  .n_layers = 2,
                                  .n_heads = 2,
                                  .n_kv_heads = 1,
                                  .vocab_size = 5,
                                  .seq_len = 6,
                                  .shared_classifier = shared_classifier,
                                  .group_size = version == 2 ? 4 : 0};
    return c;
}
