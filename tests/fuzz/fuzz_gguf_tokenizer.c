/* tests/fuzz/fuzz_gguf_tokenizer.c — libFuzzer entry: arbitrary bytes as a GGUF
 * (nb_gguf_parse) whose tokenizer.* metadata is loaded as a tokenizer
 * (nb_tokenizer_load_gguf, as runtime/model_tokenizer.c does for a model). When that
 * succeeds: tokenize a few fixed texts (with and without special tokens), decode the
 * ids again in one go and streamed, and ask the id-taking getters about ids at and
 * past the ends of the vocabulary.
 *
 * This is where llama.cpp had its vocabulary CVEs: token arrays and score / type /
 * merge arrays of mismatched lengths, unknown token types, merges naming missing
 * pieces, huge or negative BOS / EOS / EOT / UNK ids. The seeds in
 * tests/fuzz/corpus/gguf_tokenizer/ (written by tests/fuzz/make_seeds.c) hold only
 * tokenizer.* keys: a small SentencePiece ("llama") vocabulary, small byte-level BPE
 * ("gpt2") vocabularies with several tokenizer.ggml.pre values, and the tokenizer of
 * ../shared/models/kjv-7m. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink;

static void decode_stream(const struct nb_tokenizer *t, const int32_t *ids, int n_ids, int flags)
{
    struct nb_detok d;
    const char *s;
    size_t n;
    nb_detok_init(&d, t, flags);
    for (int i = 0; i < n_ids; i++)
        if (nb_detok_feed(&d, ids[i], &s, &n) == NB_OK) g_sink += n;
    if (nb_detok_flush(&d, &s, &n) == NB_OK) g_sink += n;
    nb_detok_free(&d);
}

static void roundtrip(const struct nb_tokenizer *t, const char *text, int special)
{
    int32_t *ids = NULL;
    int n_ids = 0;
    if (nb_tokenize(t, text, strlen(text), 1, special, &ids, &n_ids) != NB_OK) return;
    int n_vocab = nb_tokenizer_n_vocab(t);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) abort(); /* the tokenizer's own ids are valid */
    char *out = NULL;
    size_t len;
    if (nb_detokenize(t, ids, n_ids, special ? NB_DETOK_SPECIAL : 0, &out, &len) == NB_OK) {
        /* terminated; NUL bytes inside are fine (a <0x00> byte token decodes to one) */
        if (out[len] != '\0') abort();
        free(out);
    }
    decode_stream(t, ids, n_ids, NB_DETOK_SPECIAL);
    free(ids);
}

static void use(const struct nb_tokenizer *t)
{
    static const char *texts[] = {"Hello world", " the  cat\n\n\tsat 123",
                                  "<s>x</s><|im_start|>user\nhi<|im_end|>",
                                  "\xff\xc3 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", ""};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int sp = 0; sp < 2; sp++)
            roundtrip(t, texts[i], sp);
    int n_vocab = nb_tokenizer_n_vocab(t);
    int32_t probe[] = {0,
                       1,
                       n_vocab - 1,
                       n_vocab,
                       -1,
                       INT32_MAX,
                       INT32_MIN,
                       nb_tokenizer_bos(t),
                       nb_tokenizer_eos(t),
                       nb_tokenizer_eot(t)};
    int n_probe = (int)(sizeof probe / sizeof probe[0]);
    for (int i = 0; i < n_probe; i++) {
        const char *p = nb_token_piece(t, probe[i]);
        if (p) g_sink += nb_token_lookup(t, p, strlen(p)) >= 0;
        g_sink += nb_tokenizer_is_eog(t, probe[i]) + nb_tokenizer_is_special(t, probe[i]);
    }
    /* ids of every kind, including out of range: an error, never a crash */
    decode_stream(t, probe, n_probe, 0);
    decode_stream(t, probe, n_probe, NB_DETOK_SPECIAL);
    for (int n = 3; n <= 4; n++) { /* probe[3] is n_vocab: out of range */
        char *out = NULL;
        if (nb_detokenize(t, probe, n, 0, &out, NULL) == NB_OK) free(out);
    }
    g_sink += (uint64_t)nb_tokenizer_algo(t) + (uint64_t)nb_tokenizer_adds_bos(t) +
              strlen(nb_tokenizer_desc(t));
    const char *tpl = nb_tokenizer_chat_template(t);
    struct nb_chat_template ct;
    if (tpl) g_sink += nb_chat_template_detect(tpl, &ct) == NB_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_gguf *g = NULL;
    if (nb_gguf_parse(&g, data, size, "fuzz.gguf") != NB_OK) return 0;
    struct nb_tokenizer *t = NULL;
    if (nb_tokenizer_load_gguf(&t, g) == NB_OK) {
        use(t);
        nb_tokenizer_free(t);
    }
    nb_gguf_free(g);
    return 0;
}
