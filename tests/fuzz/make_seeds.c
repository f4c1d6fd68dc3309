/* tests/fuzz/make_seeds.c — writes the seed inputs of the fuzz targets that need
 * well-formed files which are tedious to write by hand:
 *
 *   CORPUS/nib/NAME.nib                   for fuzz_nib (one mode byte + a .nib file,
 *                                         see tests/fuzz/fuzz_nib.c)
 *   CORPUS/gguf_tokenizer/NAME.gguf       for fuzz_gguf_tokenizer: GGUF files holding
 *                                         only tokenizer.* keys
 *   CORPUS/gguf/quants*.gguf              for fuzz_gguf: a tensor of every block type
 *                                         (Q4_1 ... IQ4_XS), the same file cut short,
 *                                         and k-quant rows of half a block
 *
 *   cmake --build build/fuzz --target fuzz_make_seeds
 *   build/fuzz/fuzz_make_seeds tests/fuzz/corpus [../shared/models/kjv-7m/kjv-7m-f32.gguf]
 *
 * With a model GGUF it also writes gguf_tokenizer/kjv-7m.gguf: that model's
 * tokenizer.* keys, values and types as stored, without tensors or other keys.
 * Everything is deterministic, so a rerun rewrites the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/nib.h"
#include "core/wformat.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        if ((expr) != NB_OK) {                                                                     \
            fprintf(stderr, "make_seeds: %s:%d: %s: %s\n", __FILE__, __LINE__, #expr,              \
                    nb_last_error());                                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char *g_dir;

static char *path_of(const char *sub, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s/%s", g_dir, sub, name);
    return buf;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

static void write_file(const char *path, const void *pre, size_t n_pre, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(pre, 1, n_pre, f) != n_pre || fwrite(p, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
    printf("%8zu  %s\n", n_pre + n, path);
}

/* ---------------------------------------------------------------- GGUF tokenizers */

/* GPT-2's byte-to-code-point map (as tokenizer/tokenizer.c's tok_byte_to_cp). */
static unsigned byte_cp(unsigned b)
{
    if (b <= 32) return 256 + b;
    if (b >= 127 && b <= 160) return 289 + (b - 127);
    if (b == 173) return 323;
    return b;
}

static int utf8_put(unsigned cp, char *s)
{
    if (cp < 0x80) {
        s[0] = (char)cp;
        return 1;
    }
    s[0] = (char)(0xC0 | cp >> 6);
    s[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

#define MAX_VOCAB 1024

struct vocab {
    int n, n_merges;
    char *tok[MAX_VOCAB];
    float score[MAX_VOCAB];
    int32_t type[MAX_VOCAB];
    char *merge[MAX_VOCAB];
};

static int find_tok(const struct vocab *v, const char *s)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], s)) return i;
    return -1;
}

static int add_tok(struct vocab *v, const char *s, float score, int type)
{
    if (v->n == MAX_VOCAB) {
        fprintf(stderr, "make_seeds: vocabulary full\n");
        exit(1);
    }
    v->tok[v->n] = strdup(s);
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

/* Merge "a b": both must be pieces already; a+b becomes one (normal, score by rank). */
static void add_merge(struct vocab *v, const char *a, const char *b)
{
    char buf[256];
    if (find_tok(v, a) < 0 || find_tok(v, b) < 0) {
        fprintf(stderr, "make_seeds: merge '%s' '%s' of unknown pieces\n", a, b);
        exit(1);
    }
    snprintf(buf, sizeof buf, "%s%s", a, b);
    if (find_tok(v, buf) < 0) add_tok(v, buf, -(float)v->n_merges, 1);
    snprintf(buf, sizeof buf, "%s %s", a, b);
    v->merge[v->n_merges++] = strdup(buf);
}

static void vocab_free(struct vocab *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++)
        free(v->merge[i]);
    v->n = v->n_merges = 0;
}

static void add_vocab(struct nb_gguf_writer *w, const struct vocab *v, int with_scores,
                      enum nb_gguf_type type_type)
{
    CHECK(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok,
                                     (uint64_t)v->n));
    if (with_scores)
        CHECK(nb_gguf_writer_add_arr(w, "tokenizer.ggml.scores", NB_GGUF_F32, v->score,
                                     (uint64_t)v->n));
    if (type_type == NB_GGUF_I32) {
        CHECK(nb_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", NB_GGUF_I32, v->type,
                                     (uint64_t)v->n));
    } else { /* the same values as u8, which the loader converts */
        uint8_t t8[1024];
        for (int i = 0; i < v->n; i++)
            t8[i] = (uint8_t)v->type[i];
        CHECK(
            nb_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", NB_GGUF_U8, t8, (uint64_t)v->n));
    }
}

static const char k_chatml[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char k_llama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] "
    "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content "
    "%}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* SentencePiece ("llama"): <unk> <s> </s>, optionally the 256 byte tokens, pieces that
 * make "Hello world" and "the cat sat", control, user-defined and unused tokens.
 * variant 0: everything present, i32 token types, ChatML template;
 * variant 1: no byte tokens, u8 token types, no dummy prefix, no unknown_token_id
 *            (type UNKNOWN of token 0 stands for it), an EOT id, add_eos. */
static void seed_spm(const char *file, int variant)
{
    struct vocab v = {0};
    add_tok(&v, "<unk>", 0, 2);
    add_tok(&v, "<s>", 0, 3);
    add_tok(&v, "</s>", 0, 3);
    if (variant == 0)
        for (int b = 0; b < 256; b++) {
            char s[8];
            snprintf(s, sizeof s, "<0x%02X>", b);
            add_tok(&v, s, 0, 6);
        }
    static const char *pieces[] = {
        SP,     SP "t",   SP "th", SP "the",   "h",    "e",      "l",
        "o",    "w",      "r",     "d",        "c",    "a",      "t",
        "s",    "H",      "ll",    "llo",      SP "H", SP "He",  SP "Hello",
        SP "w", SP "wor", "or",    SP "world", SP "c", SP "cat", "at",
        SP "s", SP "sat", "1",     "2",        "3",    "12",     "\xe6\x97\xa5",
        SP SP,  "\n",     "<",     ">",        "|"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        add_tok(&v, pieces[i], -(float)i - 1, 1);
    add_tok(&v, "<|im_start|>", 0, 3);
    int im_end = add_tok(&v, "<|im_end|>", 0, 3);
    add_tok(&v, "<user_tok>", 0, 4);
    add_tok(&v, "<unused0>", 0, 5);

    struct nb_gguf_writer *w;
    CHECK(nb_gguf_writer_init(&w, 3, 0));
    CHECK(nb_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama"));
    add_vocab(w, &v, 1, variant == 0 ? NB_GGUF_I32 : NB_GGUF_U8);
    CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1));
    CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2));
    if (variant == 0) {
        CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0));
        CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1));
        CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", 0));
        CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", 1));
        CHECK(nb_gguf_writer_add_str(w, "tokenizer.chat_template", k_chatml));
    } else {
        CHECK(nb_gguf_writer_add_i32(w, "tokenizer.ggml.eot_token_id", im_end));
        CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", 1));
        CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", 0));
    }
    CHECK(nb_gguf_writer_write(w, path_of("gguf_tokenizer", file)));
    nb_gguf_writer_free(w);
    vocab_free(&v);
    printf("          %s\n", path_of("gguf_tokenizer", file));
}

/* The byte-level piece of the bytes of `s` (GPT-2's printable mapping). */
static const char *bl(const char *s)
{
    static char buf[8][64];
    static int k;
    char *o = buf[k++ % 8];
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += utf8_put(byte_cp(*p), o + n);
    o[n] = 0;
    return o;
}

/* Byte-level BPE ("gpt2"): the 256 byte pieces, merges that build "Hello world",
 * "the cat sat", "12", a Japanese character and runs of spaces and newlines, then
 * special tokens. `pre` is tokenizer.ggml.pre (NULL: absent, i.e. "default").
 * variant 0: GPT-2 style, <|endoftext|> as BOS and EOS, no scores, i32 types;
 * variant 1: Qwen2 style ChatML tokens, EOT <|im_end|>, add_bos false, template;
 * variant 2: Llama 3 style, scores present, u8 types, add_bos, llama3 template. */
static void seed_bpe(const char *file, const char *pre, int variant)
{
    struct vocab v = {0};
    for (unsigned b = 0; b < 256; b++) {
        char s[2] = {(char)b, 0};
        if (b == 0) {
            char z[4];
            z[utf8_put(byte_cp(0), z)] = 0;
            add_tok(&v, z, 0, 1);
        } else {
            add_tok(&v, bl(s), 0, 1);
        }
    }
    static const char *merges[][2] = {
        {" ", "t"},       {"h", "e"},           {" t", "he"}, {"l", "l"},   {"H", "e"},
        {"He", "ll"},     {"Hell", "o"},        {" ", "w"},   {"o", "r"},   {" w", "or"},
        {"l", "d"},       {" wor", "ld"},       {" ", "c"},   {"a", "t"},   {" c", "at"},
        {" ", "s"},       {" s", "at"},         {"1", "2"},   {"\n", "\n"}, {" ", " "},
        {"\xe6", "\x97"}, {"\xe6\x97", "\xa5"}, {"<", "|"},   {"i", "m"}};
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "%s", bl(merges[i][0]));
        snprintf(b, sizeof b, "%s", bl(merges[i][1]));
        add_merge(&v, a, b);
    }
    int bos, eos, eot = -1;
    const char *tpl = NULL;
    if (variant == 0) {
        bos = eos = add_tok(&v, "<|endoftext|>", 0, 3);
    } else if (variant == 1) {
        bos = eos = add_tok(&v, "<|endoftext|>", 0, 3);
        add_tok(&v, "<|im_start|>", 0, 3);
        eot = add_tok(&v, "<|im_end|>", 0, 3);
        add_tok(&v, "<tool_call>", 0, 4);
        tpl = k_chatml;
    } else {
        bos = add_tok(&v, "<|begin_of_text|>", 0, 3);
        eos = add_tok(&v, "<|end_of_text|>", 0, 3);
        add_tok(&v, "<|start_header_id|>", 0, 3);
        add_tok(&v, "<|end_header_id|>", 0, 3);
        eot = add_tok(&v, "<|eot_id|>", 0, 3);
        add_tok(&v, "<|reserved_special_token_0|>", 0, 5);
        tpl = k_llama3;
    }

    struct nb_gguf_writer *w;
    CHECK(nb_gguf_writer_init(&w, 3, 0));
    CHECK(nb_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2"));
    if (pre) CHECK(nb_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre));
    add_vocab(w, &v, variant == 2, variant == 2 ? NB_GGUF_U8 : NB_GGUF_I32);
    CHECK(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge,
                                     (uint64_t)v.n_merges));
    CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos));
    CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos));
    if (eot >= 0) CHECK(nb_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot));
    if (variant) CHECK(nb_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", variant == 2));
    if (tpl) CHECK(nb_gguf_writer_add_str(w, "tokenizer.chat_template", tpl));
    CHECK(nb_gguf_writer_write(w, path_of("gguf_tokenizer", file)));
    nb_gguf_writer_free(w);
    vocab_free(&v);
    printf("          %s\n", path_of("gguf_tokenizer", file));
}

/* Copy one metadata value with its stored type. */
static void copy_kv(const struct nb_gguf *g, int64_t i, struct nb_gguf_writer *w)
{
    const char *key = nb_gguf_kv_key(g, i);
    enum nb_gguf_type t = nb_gguf_kv_type(g, i), et;
    uint64_t n;
    if (t == NB_GGUF_STRING) {
        const char *s;
        CHECK(nb_gguf_get_str(g, key, &s));
        CHECK(nb_gguf_writer_add_str(w, key, s));
    } else if (t == NB_GGUF_ARRAY) {
        CHECK(nb_gguf_get_arr(g, key, &et, &n));
        if (et == NB_GGUF_STRING) {
            const char **v = malloc(sizeof *v * (size_t)(n ? n : 1));
            for (uint64_t k = 0; k < n; k++)
                CHECK(nb_gguf_get_arr_str(g, key, k, &v[k]));
            CHECK(nb_gguf_writer_add_arr_str(w, key, v, n));
            free(v);
        } else {
            const void *data;
            CHECK(nb_gguf_get_arr_data(g, key, et, &data, &n));
            CHECK(nb_gguf_writer_add_arr(w, key, et, data, n));
        }
    } else if (t == NB_GGUF_F32) {
        float f;
        CHECK(nb_gguf_get_f32(g, key, &f));
        CHECK(nb_gguf_writer_add_f32(w, key, f));
    } else if (t == NB_GGUF_BOOL) {
        int b;
        CHECK(nb_gguf_get_bool(g, key, &b));
        CHECK(nb_gguf_writer_add_bool(w, key, b));
    } else if (t == NB_GGUF_F64) {
        fprintf(stderr, "make_seeds: %s: f64 key '%s' not copied\n", nb_gguf_path(g), key);
    } else { /* integers: the i64 value back in the stored width */
        int64_t x;
        CHECK(nb_gguf_get_i64(g, key, &x));
        union {
            uint8_t u8;
            uint16_t u16;
            uint32_t u32;
            uint64_t u64;
        } u;
        if (t == NB_GGUF_U8 || t == NB_GGUF_I8)
            u.u8 = (uint8_t)x;
        else if (t == NB_GGUF_U16 || t == NB_GGUF_I16)
            u.u16 = (uint16_t)x;
        else if (t == NB_GGUF_U32 || t == NB_GGUF_I32)
            u.u32 = (uint32_t)x;
        else
            u.u64 = (uint64_t)x;
        CHECK(nb_gguf_writer_add_scalar(w, key, t, &u));
    }
}

/* The tokenizer.* keys of a model GGUF. */
static void seed_from_model(const char *file, const char *model)
{
    struct nb_gguf *g;
    struct nb_gguf_writer *w;
    CHECK(nb_gguf_open(&g, model));
    CHECK(nb_gguf_writer_init(&w, 3, 0));
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++)
        if (!strncmp(nb_gguf_kv_key(g, i), "tokenizer.", 10)) copy_kv(g, i, w);
    CHECK(nb_gguf_writer_write(w, path_of("gguf_tokenizer", file)));
    nb_gguf_writer_free(w);
    nb_gguf_free(g);
    printf("          %s\n", path_of("gguf_tokenizer", file));
}

/* ---------------------------------------------------------------- .nib */

static unsigned char g_bytes[1 << 16];

/* Deterministic filler bytes (an LCG), so every tensor has its own checksum. */
static void fill_bytes(void)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof g_bytes; i++) {
        x = x * 1103515245u + 12345u;
        g_bytes[i] = (unsigned char)(x >> 16);
    }
}

static void add_packed(struct nb_nib_writer *w, const char *name, enum nb_wpath p, int group,
                       int layout, int n_dims, int64_t n_out, int64_t n_in, size_t at)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(p, layout ? (enum nb_layout)layout : NB_LAYOUT_ROWS, group, n_out, n_in,
                            &pl) ||
        at + (size_t)pl.total > sizeof g_bytes) {
        fprintf(stderr, "make_seeds: tensor '%s' does not fit\n", name);
        exit(1);
    }
    int64_t shape[2] = {n_out, n_in};
    if (n_dims == 1) shape[0] = n_in;
    CHECK(nb_nib_writer_add(w, name, NB_NIB_PACKED, p, group, layout, n_dims, shape, g_bytes + at,
                            (uint64_t)pl.total));
}

/* Write the .nib to a temporary file, then CORPUS/nib/FILE = mode byte + its bytes. */
static void write_nib(struct nb_nib_writer *w, cJSON *header, const char *file, unsigned char mode,
                      int corrupt)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/nib/.tmp-%s", g_dir, file);
    CHECK(nb_nib_writer_write(w, header, tmp));
    size_t n;
    unsigned char *p = read_file(tmp, &n);
    remove(tmp);
    if (corrupt) p[64 + 2] ^= 0x20; /* the JSON changes, the checksum does not */
    write_file(path_of("nib", file), &mode, 1, p, n);
    free(p);
}

static cJSON *nib_header(const char *wpath)
{
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "nibble_version", "0.1.0");
    cJSON_AddStringToObject(h, "weight_path", wpath);
    cJSON_AddNumberToObject(h, "layout", NB_LAYOUT_X16);
    cJSON_AddNumberToObject(h, "group", 32);
    cJSON *c = cJSON_AddObjectToObject(h, "config");
    cJSON_AddStringToObject(c, "arch", "llama");
    cJSON_AddNumberToObject(c, "n_layers", 1);
    cJSON_AddNumberToObject(c, "n_embd", 64);
    cJSON_AddNumberToObject(c, "n_vocab", 16);
    return h;
}

static void seeds_nib(const char *spm_gguf)
{
    struct nb_nib_writer *w;
    fill_bytes();

    /* every kind and layout, mode 3 (patch sizes and checksum) */
    CHECK(nb_nib_writer_init(&w));
    add_packed(w, "tok_embd.weight", NB_WPATH_BF16, 0, 0, 2, 2, 16, 0);
    add_packed(w, "blk.0.attn_q.weight", NB_WPATH_W4A8, 32, NB_LAYOUT_X16, 2, 16, 32, 64);
    add_packed(w, "blk.0.attn_k.weight", NB_WPATH_W4A8, 64, NB_LAYOUT_ROWS, 2, 1, 64, 448);
    add_packed(w, "blk.0.ffn_up.weight", NB_WPATH_W4A16, 32, NB_LAYOUT_X16, 2, 16, 32, 576);
    add_packed(w, "blk.0.ffn_down.weight", NB_WPATH_W4A16, 128, NB_LAYOUT_ROWS, 2, 1, 128, 1024);
    add_packed(w, "blk.0.ffn_gate.weight", NB_WPATH_W8A16, 0, 0, 2, 2, 8, 1280);
    add_packed(w, "blk.0.attn_norm.weight", NB_WPATH_F32, 0, 0, 1, 1, 4, 1408);
    add_packed(w, "output.weight", NB_WPATH_F32, 0, 0, 2, 2, 2, 1472);
    CHECK(nb_nib_writer_add(w, "empty", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, g_bytes, 0));
    CHECK(nb_nib_writer_add(w, "blob", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, g_bytes + 3, 5));
    write_nib(w, nib_header("w4a8"), "all_kinds.nib", 3, 0);
    nb_nib_writer_free(w);

    /* a small file as nibble quantize writes it, with a tokenizer: mode 1 */
    size_t n_tok;
    unsigned char *tok = read_file(spm_gguf, &n_tok);
    static const char cfg[] = "{\"add_bos_token\": true, \"bos_token\": \"<s>\"}";
    CHECK(nb_nib_writer_init(&w));
    add_packed(w, "tok_embd.weight", NB_WPATH_W4A8, 32, NB_LAYOUT_ROWS, 2, 2, 64, 0);
    add_packed(w, "output_norm.weight", NB_WPATH_F32, 0, 0, 1, 1, 8, 512);
    CHECK(nb_nib_writer_add(w, "tokenizer/gguf", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, tok,
                            n_tok));
    CHECK(nb_nib_writer_add(w, "tokenizer/tokenizer_config.json", NB_NIB_BLOB, NB_WPATH_F32, 0, 0,
                            0, NULL, cfg, sizeof cfg - 1));
    write_nib(w, nib_header("w4a8"), "tokenizer.nib", 1, 0);
    nb_nib_writer_free(w);
    free(tok);

    /* valid as it is, mode 0 (no patching), and the same with a corrupt header */
    for (int corrupt = 0; corrupt < 2; corrupt++) {
        CHECK(nb_nib_writer_init(&w));
        add_packed(w, "a", NB_WPATH_W4A16, 32, NB_LAYOUT_ROWS, 2, 2, 64, 100);
        add_packed(w, "v", NB_WPATH_BF16, 0, 0, 1, 1, 4, 300);
        CHECK(nb_nib_writer_add(w, "b", NB_NIB_BLOB, NB_WPATH_F32, 0, 0, 0, NULL, "xyz", 3));
        cJSON *h = cJSON_CreateObject();
        cJSON_AddStringToObject(h, "weight_path", "w4a16");
        write_nib(w, h, corrupt ? "bad_checksum.nib" : "raw.nib", 0, corrupt);
        nb_nib_writer_free(w);
    }

    /* no tensors at all, mode 2 (patch the sizes only: the checksum still holds) */
    CHECK(nb_nib_writer_init(&w));
    write_nib(w, cJSON_CreateObject(), "no_tensors.nib", 2, 0);
    nb_nib_writer_free(w);
}

/* ---------------------------------------------------------------- GGUF block types */

/* quants.gguf: one tensor of every block type nibble reads after Q8_0/Q4_0, two rows
 * of one or two blocks each, random bytes (any bytes are a valid block); quants_cut.gguf:
 * the same file without its last 100 bytes; quants_halfrow.gguf: a Q4_K tensor whose
 * rows (128) are half a block, written by hand (the writer refuses it). */
static void seeds_gguf_quants(void)
{
    static const enum nb_dtype types[] = {
        NB_DTYPE_Q4_1, NB_DTYPE_Q5_0, NB_DTYPE_Q5_1, NB_DTYPE_Q2_K, NB_DTYPE_Q3_K, NB_DTYPE_Q4_K,
        NB_DTYPE_Q5_K, NB_DTYPE_Q6_K, NB_DTYPE_Q8_K, NB_DTYPE_IQ4_NL, NB_DTYPE_IQ4_XS,
    };
    fill_bytes();
    struct nb_gguf_writer *w;
    CHECK(nb_gguf_writer_init(&w, 3, 0));
    CHECK(nb_gguf_writer_add_str(w, "general.architecture", "llama"));
    size_t off = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int be = nb_dtype_block_elems(types[i]);
        int64_t shape[2] = {2, be == 32 ? 64 : 256};
        CHECK(nb_gguf_writer_add_tensor(w, nb_dtype_name(types[i]), types[i], 2, shape,
                                        g_bytes + off));
        off += 1024;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s", path_of("gguf", "quants.gguf"));
    CHECK(nb_gguf_writer_write(w, path));
    nb_gguf_writer_free(w);
    size_t n;
    unsigned char *p = read_file(path, &n);
    printf("%8zu  %s\n", n, path);
    write_file(path_of("gguf", "quants_cut.gguf"), "", 0, p, n - 100);
    free(p);

    unsigned char raw[512] = {0};
    size_t k = 0;
#define PUT(v, size)                                                                               \
    do {                                                                                           \
        uint64_t v_ = (v);                                                                         \
        memcpy(raw + k, &v_, size); /* little-endian host */                                       \
        k += size;                                                                                 \
    } while (0)
    memcpy(raw, "GGUF", 4);
    k = 4;
    PUT(3, 4);     /* version */
    PUT(1, 8);     /* tensors */
    PUT(0, 8);     /* keys */
    PUT(1, 8);     /* name length */
    raw[k++] = 'w';
    PUT(2, 4);     /* n_dims */
    PUT(128, 8);   /* ne0: half a 256-block */
    PUT(2, 8);     /* ne1 */
    PUT(12, 4);    /* Q4_K */
    PUT(0, 8);     /* offset */
#undef PUT
    k = (k + 31) / 32 * 32 + 144; /* one block of data */
    write_file(path_of("gguf", "quants_halfrow.gguf"), "", 0, raw, k);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s CORPUS_DIR [MODEL.gguf]\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    seed_spm("spm.gguf", 0);
    seed_spm("spm_nobytes.gguf", 1);
    seed_bpe("bpe_gpt2.gguf", NULL, 0);
    seed_bpe("bpe_qwen2.gguf", "qwen2", 1);
    seed_bpe("bpe_llama3.gguf", "llama-bpe", 2);
    seed_bpe("bpe_smollm.gguf", "smollm", 0);
    if (argc == 3) seed_from_model("kjv-7m.gguf", argv[2]);
    char spm[4200];
    snprintf(spm, sizeof spm, "%s", path_of("gguf_tokenizer", "spm_nobytes.gguf"));
    seeds_nib(spm);
    seeds_gguf_quants();
    return 0;
}
