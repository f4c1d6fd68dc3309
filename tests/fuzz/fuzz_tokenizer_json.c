/* tests/fuzz/fuzz_tokenizer_json.c — libFuzzer entry: load arbitrary bytes as a
 * tokenizer.json and, when that succeeds, tokenize fixed texts and the input itself
 * (with and without special tokens), decode the ids again, and run the chat-template
 * detector on the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const struct nb_tokenizer *t, const char *s, size_t n, int special)
{
    int32_t *ids = NULL;
    int n_ids = 0;
    if (nb_tokenize(t, s, n, 1, special, &ids, &n_ids) != NB_OK) return;
    char *out = NULL;
    size_t len;
    if (nb_detokenize(t, ids, n_ids, special ? NB_DETOK_SPECIAL : 0, &out, &len) == NB_OK)
        free(out);
    for (int i = 0; i < n_ids && i < 16; i++)
        (void)nb_token_piece(t, ids[i]);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_tokenizer *t = NULL;
    if (nb_tokenizer_load_hf_json(&t, (const char *)data, size, NULL, 0, "fuzz") == NB_OK) {
        static const char *texts[] = {"",
                                      " ",
                                      "Hello world",
                                      "a  b\n\n\tc",
                                      "\xff\xc3",
                                      "<s>x</s>",
                                      "\xe6\x97\xa5\xe6\x9c\xac 123"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            for (int sp = 0; sp < 2; sp++)
                roundtrip(t, texts[i], strlen(texts[i]), sp);
        roundtrip(t, (const char *)data, size < 512 ? size : 512, 1);
        (void)nb_tokenizer_is_eog(t, 0);
        nb_tokenizer_free(t);
    }
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
        struct nb_chat_template tpl;
        (void)nb_chat_template_detect(s, &tpl);
        free(s);
    }
    return 0;
}
