/* test_synth — `nibble synth`'s random-weight models: the tiny shapes load with the
 * configuration they claim and run a finite forward step in every dtype; the bytes
 * depend on the seed only (not on the run or the thread count) and match pinned
 * values, so they are the same on every machine; weights have the documented
 * statistics; the vocabulary is what llama.cpp's byte-level BPE loader needs; and the
 * GGUF writer's streamed (fill) tensors equal tensors given by pointer. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "eval/synth.h"
#include "formats/gguf.h"
#include "nibble.h"
#include "runtime/source_hash.h"

/* qwen3-tiny, F32, seed 1: blk.0.attn_q.weight (see test_pinned_values) */
#define PIN_X0   0.0193754286f
#define PIN_X1   0.00586568704f
#define PIN_X2   -0.0312576704f
#define PIN_HASH 0x09c0a8abf0da9ee1ull

static const char *tmp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", tu_dir, name);
    return path;
}

static void synth(const char *shape, enum nb_dtype dt, uint64_t seed, int n_threads,
                  const char *path)
{
    const struct nb_synth_shape *s = nb_synth_find_shape(shape);
    assert_non_null(s);
    struct nb_synth_config p = {.dtype = dt, .seed = seed, .n_threads = n_threads};
    if (nb_synth_write(s, &p, path) != NB_OK) fail_msg("synth %s: %s", shape, nb_last_error());
}

static uint64_t file_hash(const char *path)
{
    uint64_t h = 0;
    if (tu_source_hash(path, &h) != NB_OK) fail_msg("%s", nb_last_error());
    return h;
}

/* ---------------------------------------------------------------- shapes */

static void test_shapes(void **state)
{
    assert_true(nb_synth_n_shapes() >= 5);
    assert_null(nb_synth_find_shape("no-such-shape"));
    assert_null(nb_synth_shape_at(-1));
    assert_null(nb_synth_shape_at(nb_synth_n_shapes()));
    const struct nb_synth_shape *q = nb_synth_find_shape("qwen3-1.7b");
    assert_non_null(q);
    assert_string_equal(q->arch, "qwen3");
    assert_int_equal(q->n_layers, 28);
    assert_int_equal(q->n_embd, 2048);
    assert_int_equal(q->n_heads, 16);
    assert_int_equal(q->n_kv_heads, 8);
    assert_int_equal(q->head_dim, 128);
    assert_int_equal(q->n_ff, 6144);
    assert_int_equal(q->n_vocab, 151936);
    assert_int_equal(q->n_ctx, 40960);
    assert_true(q->tied_head && q->qk_norm);
    /* Qwen3-1.7B: 1.41 B non-embedding + 0.31 B embedding parameters: per layer
     * q, k, v, o = 2048 x (2048 + 1024 + 1024 + 2048), FFN 3 x 2048 x 6144, norms
     * 2 x 2048 + 2 x 128; plus the final norm */
    int64_t emb = (int64_t)151936 * 2048;
    int64_t layer = 2048LL * 6144 + 3LL * 2048 * 6144 + 2 * 2048 + 2 * 128;
    assert_int_equal(nb_synth_n_params(q) - emb, 28 * layer + 2048);
    assert_int_equal(nb_synth_n_params(q) - emb, 1409410048);
    const struct nb_synth_shape *sp = nb_synth_find_shape("spark-1.7b");
    assert_non_null(sp);
    assert_string_equal(sp->arch, "spark");
    assert_true(sp->geglu && sp->head_gate && sp->sliding_window == 512);
    assert_int_equal(nb_synth_n_params(sp) - nb_synth_n_params(q),
                     28 * (16 * 2048 - 2 * 128)); /* head gates instead of q/k norms */
}

/* ---------------------------------------------------------------- load + forward */

static void check_loads(const char *shape, enum nb_dtype dt)
{
    char name[128];
    snprintf(name, sizeof name, "%s-%s.gguf", shape, nb_dtype_name(dt));
    const char *path = tmp_path(name);
    synth(shape, dt, 7, 0, path);
    const struct nb_synth_shape *s = nb_synth_find_shape(shape);

    struct nb_model *m = NULL;
    if (nb_model_load(&m, path) != NB_OK) fail_msg("%s: %s", name, nb_last_error());
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    assert_string_equal(info.arch, s->arch);
    assert_string_equal(info.source_kind, "gguf");
    assert_int_equal(info.n_layers, s->n_layers);
    assert_int_equal(info.n_embd, s->n_embd);
    assert_int_equal(info.n_heads, s->n_heads);
    assert_int_equal(info.n_kv_heads, s->n_kv_heads);
    assert_int_equal(info.head_dim, s->head_dim);
    assert_int_equal(info.n_ff, s->n_ff);
    assert_int_equal(info.n_vocab, s->n_vocab);
    assert_int_equal(info.n_ctx_train, s->n_ctx);
    assert_int_equal(info.bos_id, s->n_vocab - 3); /* <|endoftext|> */
    assert_int_equal(info.eos_id, s->n_vocab - 1); /* <|im_end|> */
    assert_int_equal(info.n_params, nb_synth_n_params(s));

    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    struct nb_ctx *ctx = NULL;
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK) fail_msg("%s", nb_last_error());
    int32_t tok[5] = {1, 2, 3, 300, 4}, pos[5] = {0, 1, 2, 3, 4};
    struct nb_batch b = {.n_tokens = 5, .token = tok, .pos = pos};
    float *logits = malloc(sizeof(float) * (size_t)info.n_vocab);
    if (nb_decode(ctx, &b, logits) != NB_OK) fail_msg("%s", nb_last_error());
    double ss = 0;
    for (int i = 0; i < info.n_vocab; i++) {
        assert_true(isfinite(logits[i]));
        ss += (double)logits[i] * logits[i];
    }
    /* random weights at scale 0.02: logits of order one, neither zero nor huge */
    double rms = sqrt(ss / info.n_vocab);
    if (!(rms > 0.05 && rms < 50)) fail_msg("%s: logit rms %g", name, rms);
    free(logits);
    nb_ctx_free(ctx);
    nb_model_free(m);
    unlink(path);
}

static void test_load_qwen3_tiny(void **state)
{
    check_loads("qwen3-tiny", NB_DTYPE_F16);
    check_loads("qwen3-tiny", NB_DTYPE_BF16);
    check_loads("qwen3-tiny", NB_DTYPE_F32);
}

static void test_load_llama_tiny(void **state)
{
    check_loads("llama-tiny", NB_DTYPE_F16);
    check_loads("llama-tiny", NB_DTYPE_F32);
}

static void test_load_spark_tiny(void **state)
{
    check_loads("spark-tiny", NB_DTYPE_BF16);
    check_loads("spark-tiny", NB_DTYPE_F32);
}

/* ---------------------------------------------------------------- determinism */

static void test_deterministic(void **state)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s", tmp_path("a.gguf"));
    snprintf(b, sizeof b, "%s", tmp_path("b.gguf"));
    synth("qwen3-tiny", NB_DTYPE_F16, 42, 1, a);
    synth("qwen3-tiny", NB_DTYPE_F16, 42, 2, b); /* other thread count: same bytes */
    uint64_t ha = file_hash(a);
    assert_true(ha == file_hash(b));
    synth("qwen3-tiny", NB_DTYPE_F16, 42, 3, b); /* and again */
    assert_true(ha == file_hash(b));
    synth("qwen3-tiny", NB_DTYPE_F16, 43, 2, b);
    assert_true(ha != file_hash(b));
    synth("qwen3-tiny", NB_DTYPE_BF16, 42, 2, b);
    assert_true(ha != file_hash(b));
    unlink(a);
    unlink(b);
}

/* The generator's output is pinned: these values come from the IEEE-exact generator
 * and must not change between machines, compilers or releases (a deliberate change
 * of the generator updates them and says so in the commit). */
static void test_pinned_values(void **state)
{
    const char *path = tmp_path("pinned.gguf");
    synth("qwen3-tiny", NB_DTYPE_F32, 1, 2, path);
    struct nb_gguf *g = NULL;
    if (nb_gguf_open(&g, path) != NB_OK) fail_msg("%s", nb_last_error());
    const struct nb_tensor *t = nb_gguf_find_tensor(g, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, NB_DTYPE_F32);
    const float *x = t->data;
    uint64_t h = XXH3_64bits(t->data, (size_t)t->n_bytes);
    printf("pinned: blk.0.attn_q.weight x[0..2] = %.9g %.9g %.9g, XXH3 %016llx\n", x[0], x[1], x[2],
           (unsigned long long)h);
    assert_true(x[0] == PIN_X0);
    assert_true(x[1] == PIN_X1);
    assert_true(x[2] == PIN_X2);
    assert_true(h == PIN_HASH);
    nb_gguf_free(g);
    unlink(path);
}

/* ---------------------------------------------------------------- weights + vocabulary */

static void stats(const struct nb_tensor *t, double *mean, double *sd, double *maxabs)
{
    int64_t n = nb_tensor_nelems(t);
    double s = 0, s2 = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, (const char *)t->data + 4 * i, 4);
        s += v;
        s2 += (double)v * v;
        if (fabs(v) > mx) mx = fabs(v);
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
    *maxabs = mx;
}

static void test_weights_and_vocab(void **state)
{
    const char *path = tmp_path("stats.gguf");
    synth("spark-tiny", NB_DTYPE_F32, 5, 0, path);
    struct nb_gguf *g = NULL;
    if (nb_gguf_open(&g, path) != NB_OK) fail_msg("%s", nb_last_error());
    double mean, sd, mx;
    /* 65536 values: the sample mean is within 4 sigma = 4 * 0.02 / 256 */
    stats(nb_gguf_find_tensor(g, "token_embd.weight"), &mean, &sd, &mx);
    assert_true(fabs(mean) < 4 * 0.02 / 256);
    assert_true(fabs(sd - 0.02) < 0.0005);
    assert_true(mx > 0.02 * 3.5 && mx < 0.02 * 6);
    stats(nb_gguf_find_tensor(g, "blk.3.ffn_down.weight"), &mean, &sd, &mx);
    assert_true(fabs(mean) < 0.001);
    assert_true(fabs(sd - 0.02) < 0.001);
    const struct nb_tensor *nt = nb_gguf_find_tensor(g, "blk.1.attn_norm.weight");
    assert_int_equal(nt->dtype, NB_DTYPE_F32);
    stats(nt, &mean, &sd, &mx);
    assert_true(fabs(mean - 1) < 0.01);
    assert_true(sd > 0.01 && sd < 0.03);
    const struct nb_tensor *gate = nb_gguf_find_tensor(g, "blk.0.attn_gate.weight");
    assert_non_null(gate);
    assert_int_equal(gate->shape[0], 4);
    assert_int_equal(gate->shape[1], 128);
    assert_null(nb_gguf_find_tensor(g, "output.weight"));
    assert_null(nb_gguf_find_tensor(g, "blk.0.attn_q_norm.weight"));

    const char *str;
    int b;
    uint32_t u;
    assert_int_equal(nb_gguf_get_str(g, "general.architecture", &str), NB_OK);
    assert_string_equal(str, "spark");
    assert_int_equal(nb_gguf_get_str(g, "spark.hidden_act", &str), NB_OK);
    assert_string_equal(str, "gelu_pytorch_tanh");
    assert_int_equal(nb_gguf_get_bool(g, "spark.attention.head_gate", &b), NB_OK);
    assert_true(b);
    assert_int_equal(nb_gguf_get_u32(g, "spark.attention.sliding_window", &u), NB_OK);
    assert_int_equal(u, 16);
    assert_int_equal(nb_gguf_get_arr_str(g, "spark.attention.layer_types", 0, &str), NB_OK);
    assert_string_equal(str, "sliding_attention");
    assert_int_equal(nb_gguf_get_arr_str(g, "spark.attention.layer_types", 3, &str), NB_OK);
    assert_string_equal(str, "full_attention");

    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.model", &str), NB_OK);
    assert_string_equal(str, "gpt2");
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.pre", &str), NB_OK);
    assert_string_equal(str, "qwen2");
    enum nb_gguf_type et;
    uint64_t n;
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), NB_OK);
    assert_int_equal(et, NB_GGUF_STRING);
    assert_int_equal(n, 512);
    /* the byte-level alphabet first ('!' for byte 33, U+0120 'Ġ' for the space byte) */
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 33, &str), NB_OK);
    assert_string_equal(str, "!");
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 32, &str), NB_OK);
    assert_string_equal(str, "\xc4\xa0");
    assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 0, &str), NB_OK);
    assert_string_equal(str, "\xc4\x80");
    static const char *const specials[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++) {
        int64_t ty;
        assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 509 + i, &str), NB_OK);
        assert_string_equal(str, specials[i]);
        assert_int_equal(nb_gguf_get_arr_i64(g, "tokenizer.ggml.token_type", 509 + i, &ty), NB_OK);
        assert_int_equal(ty, 3);
    }
    /* all tokens distinct (llama.cpp maps text -> id) */
    const char **all = malloc(sizeof *all * 512);
    for (uint64_t i = 0; i < 512; i++)
        assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &all[i]), NB_OK);
    for (int i = 0; i < 512; i++)
        for (int j = i + 1; j < 512; j++)
            if (!strcmp(all[i], all[j])) fail_msg("tokens %d and %d are both '%s'", i, j, all[i]);
    /* every merge "A B" joins two tokens into a third */
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n), NB_OK);
    assert_true(n > 0);
    for (uint64_t i = 0; i < n; i++) {
        char buf[64];
        assert_int_equal(nb_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &str), NB_OK);
        const char *sp = strchr(str, ' ');
        assert_non_null(sp);
        int found = 0;
        snprintf(buf, sizeof buf, "%.*s", (int)(sp - str), str);
        for (int k = 0; k < 512; k++)
            found |= !strcmp(all[k], buf);
        for (int k = 0; k < 512; k++)
            found |= (!strcmp(all[k], sp + 1)) << 1;
        snprintf(buf, sizeof buf, "%.*s%s", (int)(sp - str), str, sp + 1);
        for (int k = 0; k < 512; k++)
            found |= (!strcmp(all[k], buf)) << 2;
        if (found != 7) fail_msg("merge '%s': parts/result missing (%d)", str, found);
    }
    free(all);
    nb_gguf_free(g);
    unlink(path);
}

static void test_bad_args(void **state)
{
    const struct nb_synth_shape *s = nb_synth_find_shape("qwen3-tiny");
    struct nb_synth_config p = {.dtype = NB_DTYPE_Q8_0, .seed = 1};
    assert_int_equal(nb_synth_write(s, &p, tmp_path("x.gguf")), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "dtype"));
    p.dtype = NB_DTYPE_F16;
    assert_int_equal(nb_synth_write(s, &p, "/nonexistent-dir/x.gguf"), NB_ERR_IO);
}

/* ---------------------------------------------------------------- writer fill */

static enum nb_status pattern_fill(void *user, void *dst, uint64_t offset, size_t n)
{
    int *calls = user;
    (*calls)++;
    if (offset % NB_GGUF_FILL_CHUNK) return nb_set_error(NB_ERR_INTERNAL, "unaligned offset");
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)dst)[i] = (unsigned char)((offset + i) * 2654435761u >> 13);
    return NB_OK;
}

static enum nb_status failing_fill(void *user, void *dst, uint64_t offset, size_t n)
{
    return offset ? nb_set_error(NB_ERR_IO, "source went away") : pattern_fill(user, dst, 0, n);
}

static void test_writer_fill(void **state)
{
    /* 5 MiB + 6 bytes of F16: more than one chunk, a short last one */
    const int64_t shape[2] = {5, (1 << 19) + 3};
    size_t bytes = 2 * 5 * ((1 << 19) + 3);
    unsigned char *ref = malloc(bytes);
    int calls = 0;
    for (size_t off = 0; off < bytes; off += NB_GGUF_FILL_CHUNK)
        pattern_fill(&calls, ref + off, off,
                     bytes - off < NB_GGUF_FILL_CHUNK ? bytes - off : NB_GGUF_FILL_CHUNK);
    const float small[3] = {1, 2, 3};
    const int64_t small_shape[1] = {3};
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s", tmp_path("fill.gguf"));
    snprintf(b, sizeof b, "%s", tmp_path("ptr.gguf"));
    for (int k = 0; k < 2; k++) {
        struct nb_gguf_writer *w = NULL;
        assert_int_equal(nb_gguf_writer_init(&w, 3, 64), NB_OK);
        assert_int_equal(nb_gguf_writer_add_tensor(w, "small", NB_DTYPE_F32, 1, small_shape, small),
                         NB_OK);
        calls = 0;
        if (k == 0)
            assert_int_equal(nb_gguf_writer_add_tensor_fill(w, "big", NB_DTYPE_F16, 2, shape,
                                                            pattern_fill, &calls),
                             NB_OK);
        else
            assert_int_equal(nb_gguf_writer_add_tensor(w, "big", NB_DTYPE_F16, 2, shape, ref),
                             NB_OK);
        assert_int_equal(nb_gguf_writer_add_tensor(w, "after", NB_DTYPE_F32, 1, small_shape, small),
                         NB_OK);
        assert_int_equal(nb_gguf_writer_write(w, k == 0 ? a : b), NB_OK);
        assert_int_equal(calls, k == 0 ? 2 : 0);
        nb_gguf_writer_free(w);
    }
    assert_true(file_hash(a) == file_hash(b));
    struct nb_gguf *g = NULL;
    assert_int_equal(nb_gguf_open(&g, a), NB_OK);
    const struct nb_tensor *t = nb_gguf_find_tensor(g, "big");
    assert_int_equal(t->n_bytes, bytes);
    assert_memory_equal(t->data, ref, bytes);
    nb_gguf_free(g);

    /* a failing fill fails the write, names the tensor, and leaves no file */
    struct nb_gguf_writer *w = NULL;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    assert_int_equal(nb_gguf_writer_add_tensor_fill(w, "big", NB_DTYPE_F16, 2, shape, NULL, NULL),
                     NB_ERR_INVALID_ARG);
    assert_int_equal(
        nb_gguf_writer_add_tensor_fill(w, "big", NB_DTYPE_F16, 2, shape, failing_fill, &calls),
        NB_OK);
    const char *c = tmp_path("fail.gguf");
    assert_int_equal(nb_gguf_writer_write(w, c), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "'big'"));
    assert_non_null(strstr(nb_last_error(), "source went away"));
    struct stat sb;
    assert_int_equal(stat(c, &sb), -1);
    assert_int_equal(tu_count_files(tu_dir, ".tmp"), 0); /* the partial file is gone */
    nb_gguf_writer_free(w);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_load_qwen3_tiny),
        cmocka_unit_test(test_load_llama_tiny),
        cmocka_unit_test(test_load_spark_tiny),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_pinned_values),
        cmocka_unit_test(test_weights_and_vocab),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_writer_fill),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
