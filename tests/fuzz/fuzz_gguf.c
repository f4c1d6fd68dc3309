/* tests/fuzz/fuzz_gguf.c — libFuzzer entry: parse arbitrary bytes as GGUF and, on
 * success, read every key and tensor through the public getters, and convert the first
 * whole blocks (up to 4096 values) of every tensor to f32 as the loader does, so that
 * a block type whose sizes disagree with the parser's would read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "quant/dequant.h"

static volatile uint64_t g_sink;

/* Reads elements of array `key` through every element getter (first and last few). */
static void touch_array(const struct nb_gguf *g, const char *key)
{
    enum nb_gguf_type et;
    uint64_t n;
    if (nb_gguf_get_arr(g, key, &et, &n) != NB_OK) return;
    const void *data;
    uint64_t n2;
    if (nb_gguf_get_arr_data(g, key, et, &data, &n2) == NB_OK && n2) {
        const uint8_t *p = data;
        g_sink += p[0];
    }
    for (uint64_t k = 0; k < n && k < 8; k++) {
        uint64_t i = k < 4 ? k : n - 1 - (k - 4);
        const char *s;
        double d;
        int64_t v;
        if (nb_gguf_get_arr_str(g, key, i, &s) == NB_OK) g_sink += strlen(s);
        if (nb_gguf_get_arr_f64(g, key, i, &d) == NB_OK) g_sink += (uint64_t)(d == d);
        if (nb_gguf_get_arr_i64(g, key, i, &v) == NB_OK) g_sink += (uint64_t)v;
    }
    const char *s;
    (void)nb_gguf_get_arr_str(g, key, n, &s); /* out of range */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_gguf *g;
    if (nb_gguf_parse(&g, data, size, "fuzz.gguf") != NB_OK) return 0;
    g_sink += nb_gguf_version(g) + nb_gguf_alignment(g) + strlen(nb_gguf_path(g));
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++) {
        const char *key = nb_gguf_kv_key(g, i);
        g_sink +=
            (uint64_t)nb_gguf_find_kv(g, key) + strlen(nb_gguf_type_name(nb_gguf_kv_type(g, i)));
        uint32_t u;
        int64_t v;
        float f;
        int b;
        const char *s;
        if (nb_gguf_get_u32(g, key, &u) == NB_OK) g_sink += u;
        if (nb_gguf_get_i64(g, key, &v) == NB_OK) g_sink += (uint64_t)v;
        if (nb_gguf_get_f32(g, key, &f) == NB_OK) g_sink += (uint64_t)(f == f);
        if (nb_gguf_get_bool(g, key, &b) == NB_OK) g_sink += (uint64_t)b;
        if (nb_gguf_get_str(g, key, &s) == NB_OK) g_sink += strlen(s);
        touch_array(g, key);
    }
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        const struct nb_tensor *t = nb_gguf_tensor(g, i);
        if (nb_gguf_find_tensor(g, t->name) != t) abort();
        uint64_t want;
        if (!nb_dtype_row_bytes(t->dtype, (uint64_t)nb_tensor_nelems(t), &want) ||
            want != t->n_bytes)
            abort();
        if (t->n_bytes) {
            const uint8_t *p = t->data;
            g_sink += p[0] + p[t->n_bytes - 1];
        }
        static float buf[4096];
        int64_t n = nb_tensor_nelems(t), be = nb_dtype_block_elems(t->dtype);
        if (n > 4096) n = 4096;
        n -= n % be; /* whole blocks, so n values lie inside the tensor's bytes */
        if (n > 0 && t->dtype != NB_DTYPE_I32 && nb_dequant(t->dtype, t->data, buf, n) == NB_OK)
            g_sink += (uint64_t)(buf[n - 1] == buf[n - 1]);
    }
    nb_gguf_free(g);
    return 0;
}
