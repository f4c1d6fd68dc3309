/* tests/test_tokenizer.c — the tokenizer on small hand-made tokenizer.json files:
 * BPE merges, byte-level mapping, added/special tokens, errors for malformed files,
 * UTF-8 handling in and out, NFC, stop strings and chat-template detection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/testutil.h"

#include "core/mmap.h"
#include "formats/gguf.h"
#include "formats/source.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

/* A character-level BPE: a b c ab abc, ' ' mapped to '▁' by the normalizer, byte
 * fallback, <s> BOS through TemplateProcessing, <|end|> special. */
static const char *k_tiny =
    "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\",\n"
    " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"a\": 2, \"b\": 3, \"c\": 4, \"ab\": 5, \"abc\": 6,\n"
    "   \"\\u2581\": 7, \"<0xC3>\": 8, \"<0xA9>\": 9, \"\\u2581a\": 10},\n"
    " \"merges\": [\"a b\", [\"ab\", \"c\"], \"\\u2581 a\"]},\n"
    " \"added_tokens\": [{\"id\": 11, \"content\": \"<|end|>\", \"special\": true},\n"
    "                   {\"id\": 1, \"content\": \"<s>\", \"special\": true}],\n"
    " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": "
    "\"\\u2581\"},\n"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
    "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],\n"
    "   \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}\n"
    "}";

static struct nb_tokenizer *load_json(const char *json)
{
    struct nb_tokenizer *t = NULL;
    if (nb_tokenizer_load_hf_json(&t, json, strlen(json), NULL, 0, "tiny.json") != NB_OK)
        fail_msg("%s", nb_last_error());
    return t;
}

static void expect_ids(struct nb_tokenizer *t, const char *text, int add, int special,
                       const int32_t *want, int n_want)
{
    int32_t *ids;
    int n;
    assert_int_equal(nb_tokenize(t, text, strlen(text), add, special, &ids, &n), NB_OK);
    if (n != n_want || memcmp(ids, want, (size_t)n * sizeof *ids)) {
        fprintf(stderr, "\"%s\": got", text);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
        fail();
    }
    free(ids);
}

static void test_bpe_merges(void **state)
{
    (void)state;
    struct nb_tokenizer *t = load_json(k_tiny);
    expect_ids(t, "abc", 1, 1, (int32_t[]){1, 6}, 2);
    expect_ids(t, "abc", 0, 1, (int32_t[]){6}, 1);
    expect_ids(t, "cab a", 0, 1, (int32_t[]){4, 5, 10}, 3);
    /* Unknown characters: <0xNN> when all bytes exist, else <unk>. */
    expect_ids(t, "\xc3\xa9", 0, 1, (int32_t[]){8, 9}, 2);
    expect_ids(t, "x", 0, 1, (int32_t[]){0}, 1);
    /* Special tokens: whole with parse_special, plain text without. */
    expect_ids(t, "a<|end|>", 0, 1, (int32_t[]){2, 11}, 2);
    expect_ids(t, "<s>", 0, 0, (int32_t[]){0, 0, 0}, 3);
    assert_true(nb_tokenizer_adds_bos(t));
    assert_int_equal(nb_tokenizer_bos(t), 1);
    assert_string_equal(nb_token_piece(t, 10), "\xe2\x96\x81"
                                               "a");
    assert_null(nb_token_piece(t, 99));
    /* Decoding: '▁' -> ' ', <0xNN> bytes joined, specials skipped unless asked. */
    char *s;
    size_t n;
    assert_int_equal(nb_detokenize(t, (int32_t[]){1, 6, 10, 8, 9, 11}, 6, 0, &s, &n), NB_OK);
    assert_string_equal(s, "abc a\xc3\xa9");
    free(s);
    assert_int_equal(nb_detokenize(t, (int32_t[]){1, 6, 11}, 3, NB_DETOK_SPECIAL, &s, &n), NB_OK);
    assert_string_equal(s, "<s>abc<|end|>");
    free(s);
    assert_int_equal(nb_detokenize(t, (int32_t[]){1, 500}, 2, 0, &s, &n), NB_ERR_INVALID_ARG);
    nb_tokenizer_free(t);
}

/* A character of several bytes split over tokens comes out whole, once complete. */
static void test_detok_streaming(void **state)
{
    (void)state;
    struct nb_tokenizer *t = load_json(k_tiny);
    struct nb_detok d;
    const char *s;
    size_t n;
    nb_detok_init(&d, t, 0);
    assert_int_equal(nb_detok_feed(&d, 8, &s, &n), NB_OK); /* 0xC3 */
    assert_int_equal(n, 0);
    assert_int_equal(nb_detok_feed(&d, 9, &s, &n), NB_OK); /* 0xA9 */
    assert_int_equal(n, 2);
    assert_memory_equal(s, "\xc3\xa9", 2);
    /* An incomplete character followed by ASCII: U+FFFD, then the ASCII. */
    assert_int_equal(nb_detok_feed(&d, 8, &s, &n), NB_OK);
    assert_int_equal(n, 0);
    assert_int_equal(nb_detok_feed(&d, 2, &s, &n), NB_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(s,
                        "\xef\xbf\xbd"
                        "a",
                        4);
    /* Held at the end: flushed as U+FFFD. */
    assert_int_equal(nb_detok_feed(&d, 8, &s, &n), NB_OK);
    assert_int_equal(n, 0);
    assert_int_equal(nb_detok_flush(&d, &s, &n), NB_OK);
    assert_int_equal(n, 3);
    /* A lone continuation byte is invalid at once. */
    assert_int_equal(nb_detok_feed(&d, 9, &s, &n), NB_OK);
    assert_int_equal(n, 3);
    nb_detok_free(&d);
    nb_tokenizer_free(t);
}

static void expect_error(const char *json, enum nb_status want, const char *needle)
{
    struct nb_tokenizer *t = (struct nb_tokenizer *)1;
    enum nb_status st = nb_tokenizer_load_hf_json(&t, json, strlen(json), NULL, 0, "bad.json");
    if (st != want || !strstr(nb_last_error(), needle))
        fail_msg("status %d, message \"%s\" (wanted %d with \"%s\")", st, nb_last_error(), want,
                 needle);
    assert_null(t);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_error("{\"model\": ", NB_ERR_FORMAT, "bad.json:1:");
    expect_error("[]", NB_ERR_FORMAT, "not a JSON object");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", NB_ERR_FORMAT,
                 "model.merges missing");
    expect_error("{\"model\": {\"type\": \"BPE\", \"merges\": []}}", NB_ERR_FORMAT,
                 "model.vocab missing");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}",
                 NB_ERR_FORMAT, "'a': id out of range");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}, \"merges\": []}}",
                 NB_ERR_FORMAT, "out of range");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0.5}, \"merges\": []}}",
                 NB_ERR_FORMAT, "out of range");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                 " \"added_tokens\": [{\"id\": 1e9, \"content\": \"x\"}]}",
                 NB_ERR_FORMAT, "added_tokens 'x'");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
                 "\"merges\": [\"a b\"]}}",
                 NB_ERR_FORMAT, "merges[0]: 'a' + 'b' -> 'ab': merged piece not in the vocabulary");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}",
                 NB_ERR_FORMAT, "merges[0] is not");
    /* A hole in the ids is an unused, unreachable token. */
    const char *holes = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2}, "
                        "\"merges\": []}}";
    struct nb_tokenizer *h = load_json(holes);
    assert_string_equal(nb_token_piece(h, 1), "");
    expect_ids(h, "ab", 0, 1, (int32_t[]){0, 2}, 2);
    nb_tokenizer_free(h);
    expect_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", NB_ERR_UNSUPPORTED,
                 "model type 'WordPiece'");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                 " \"normalizer\": {\"type\": \"NFKC\"}}",
                 NB_ERR_UNSUPPORTED, "normalizer 'NFKC'");
    expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                 " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"},"
                 " \"behavior\": \"Isolated\"}}",
                 NB_ERR_FORMAT, "pre-tokenizer regex");
    /* A tokenizer_config.json whose BOS is not a token. */
    const char *ok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
    const char *cfg = "{\"bos_token\": \"<nope>\"}";
    struct nb_tokenizer *t = NULL;
    assert_int_equal(nb_tokenizer_load_hf_json(&t, ok, strlen(ok), cfg, strlen(cfg), "c.json"),
                     NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "bos_token '<nope>'"));
    /* A tokenizer_config.json that is not JSON: the error names it, not tokenizer.json. */
    const char *bad_cfg = "{\"bos_token\": ";
    assert_int_equal(nb_tokenizer_load_hf_json_cfg(&t, ok, strlen(ok), "t.json", bad_cfg,
                                                   strlen(bad_cfg), "tc.json"),
                     NB_ERR_FORMAT);
    if (!strstr(nb_last_error(), "tc.json:1:") || strstr(nb_last_error(), "t.json"))
        fail_msg("'%s' should name tc.json", nb_last_error());
    const uint8_t one_piece[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x02};
    assert_int_equal(nb_tokenizer_load_spm_model_cfg(&t, one_piece, sizeof one_piece, "t.model",
                                                     bad_cfg, strlen(bad_cfg), "tc.json"),
                     NB_ERR_FORMAT);
    if (!strstr(nb_last_error(), "tc.json:1:"))
        fail_msg("'%s' should name tc.json", nb_last_error());
    /* Missing files. */
    assert_int_equal(nb_tokenizer_load_hf(&t, "/nonexistent/dir"), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/dir: no such file"));
    assert_int_equal(tu_tokenizer_load_source(&t, "/nonexistent/m.gguf"), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/m.gguf: no such file"));
    /* tokenizer/ does not read .nib files: it says where that is done */
    struct nb_source nib = {.path = "m.nib", .kind = NB_FILE_NIB};
    assert_int_equal(nb_tokenizer_load_source(&t, &nib), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "nb_tokenizer_for_source"));
    /* SentencePiece protobuf: truncated, and a unigram model. */
    const uint8_t trunc[] = {0x0a, 0x10, 0x0a};
    assert_int_equal(nb_tokenizer_load_spm_model(&t, trunc, sizeof trunc, "t.model"),
                     NB_ERR_FORMAT);
    const uint8_t unigram[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x01};
    assert_int_equal(nb_tokenizer_load_spm_model(&t, unigram, sizeof unigram, "u.model"),
                     NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "model type 1"));
}

/* GPT-2 byte-level BPE with a regex pre-tokenizer. */
static void test_byte_level(void **state)
{
    (void)state;
    /* Pieces: every byte as its mapped character is not needed for this text; we give
     * the ones used: 'h' 'i' 'Ġ' (space) and merges. */
    const char *json =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"h\": 0, \"i\": 1, \"\\u0120\": 2, "
        "\"hi\": 3, \"\\u0120hi\": 4, \"\\u00c3\": 5, \"\\u00a9\": 6, \"\\u00c3\\u00a9\": 7},"
        " \"merges\": [\"h i\", \"\\u0120 hi\", \"\\u00c3 \\u00a9\"]},"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},"
        " \"decoder\": {\"type\": \"ByteLevel\"}}";
    struct nb_tokenizer *t = load_json(json);
    expect_ids(t, "hi hi \xc3\xa9", 1, 1, (int32_t[]){3, 4, 2, 7}, 4);
    char *s;
    size_t n;
    assert_int_equal(nb_detokenize(t, (int32_t[]){3, 4, 2, 7}, 4, 0, &s, &n), NB_OK);
    assert_string_equal(s, "hi hi \xc3\xa9");
    free(s);
    assert_false(nb_tokenizer_adds_bos(t));
    nb_tokenizer_free(t);
}

/* A byte-level vocabulary piece that is not valid UTF-8 (possible in GGUF, whose strings
 * are bytes): the invalid byte is copied as it is, never decoded through a stale
 * code point ("A\xff" once came out as "AA"). */
static void test_byte_level_invalid_piece(void **state)
{
    (void)state;
    struct nb_gguf_writer *w = NULL;
    assert_int_equal(nb_gguf_writer_init(&w, 3, 0), NB_OK);
    const char *toks[] = {"A", "\xc4\xa0", "A\xff", "\xc4\xa0\xff"};
    assert_int_equal(nb_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2"), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 4), NB_OK);
    assert_int_equal(nb_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", NULL, 0), NB_OK);
    int fd = -1;
    assert_int_equal(nb_gguf_writer_write_memory(w, "bad-piece.gguf", &fd), NB_OK);
    nb_gguf_writer_free(w);
    struct nb_mapped_file f;
    assert_int_equal(nb_file_map_fd(&f, fd, "bad-piece.gguf"), NB_OK);
    close(fd);
    struct nb_gguf *g = NULL;
    assert_int_equal(nb_gguf_parse(&g, f.data, f.size, "bad-piece.gguf"), NB_OK);
    struct nb_tokenizer *t = NULL;
    if (nb_tokenizer_load_gguf(&t, g) != NB_OK) fail_msg("%s", nb_last_error());
    const char *want[2] = {"A\xff", " \xff"};
    for (int id = 2; id < 4; id++) {
        char *o;
        size_t n;
        assert_int_equal(nb_detokenize(t, (int32_t[]){id}, 1, 0, &o, &n), NB_OK);
        /* the invalid byte stays one byte (or becomes U+FFFD), never a repeat of the
         * character before it */
        assert_true(n >= 2);
        assert_memory_equal(o, want[id - 2], 1);
        assert_true((unsigned char)o[1] == 0xff || !memcmp(o + 1, "\xef\xbf\xbd", 3));
        free(o);
    }
    nb_tokenizer_free(t);
    nb_gguf_free(g);
    nb_file_unmap(&f);
}

static void test_utf8_and_nfc(void **state)
{
    (void)state;
    char *o;
    size_t n;
    /* WHATWG: one U+FFFD per maximal invalid subpart. */
    assert_int_equal(tok_utf8_sanitize("a\xe2\x82"
                                       "b\xff\xed\xa0\x80",
                                       8, &o, &n),
                     NB_OK);
    assert_string_equal(o, "a\xef\xbf\xbd"
                           "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(o);
    /* e + combining acute -> é; Hangul jamo -> syllable; order of marks fixed. */
    const char *in = "e\xcc\x81 \xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 a\xcc\xa3\xcc\x87";
    assert_int_equal(tok_nfc(in, strlen(in), &o, &n), NB_OK);
    assert_string_equal(o, "\xc3\xa9 \xea\xb0\x81 \xe1\xba\xa1\xcc\x87");
    free(o);
    assert_int_equal(tok_nfc("plain", 5, &o, &n), NB_OK);
    assert_string_equal(o, "plain");
    free(o);
}

static void test_stop_strings(void **state)
{
    (void)state;
    struct nb_stop s;
    const char *stops[] = {"\nUser:", "###", ""};
    const char *e;
    size_t n;
    assert_int_equal(nb_stop_init(&s, stops, 3), NB_OK);
    assert_int_equal(nb_stop_feed(&s, "Hello", 5, &e, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(nb_stop_feed(&s, " world\nUs", 9, &e, &n), 0);
    assert_int_equal(n, 6); /* "\nUs" held back */
    assert_memory_equal(e, " world", 6);
    assert_int_equal(nb_stop_feed(&s, "e", 1, &e, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(nb_stop_feed(&s, "ful", 3, &e, &n), 0); /* not a stop after all */
    assert_int_equal(n, 7);
    assert_memory_equal(e, "\nUseful", 7);
    assert_int_equal(nb_stop_feed(&s, " a#", 3, &e, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(nb_stop_feed(&s, "## tail", 7, &e, &n), 1);
    assert_int_equal(n, 0); /* " a" went out before; the held "#" was the stop's start */
    nb_stop_free(&s);
    assert_int_equal(nb_stop_init(&s, stops, 3), NB_OK);
    assert_int_equal(nb_stop_feed(&s, "x#", 2, &e, &n), 0);
    assert_int_equal(n, 1);
    nb_stop_flush(&s, &e, &n);
    assert_int_equal(n, 1);
    assert_memory_equal(e, "#", 1);
    nb_stop_free(&s);
}

static void test_chat_detect(void **state)
{
    (void)state;
    struct nb_chat_template tpl;
    assert_int_equal(
        nb_chat_template_detect("{% for m in messages %}<|im_start|>{% endfor %}", &tpl), NB_OK);
    assert_int_equal(tpl.kind, NB_CHAT_CHATML);
    assert_int_equal(nb_chat_template_detect("{{ bos_token }}{% for m in messages %}###\n{{ "
                                             "m.content }}{% endfor %}",
                                             &tpl),
                     NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "{{ bos_token }}"));
    assert_non_null(strstr(nb_last_error(), "--chat-template"));
    assert_int_equal(nb_chat_template_detect(NULL, &tpl), NB_ERR_NOT_FOUND);
    assert_int_equal(nb_chat_template_by_name("gemma", &tpl), NB_OK);
    assert_int_equal(tpl.kind, NB_CHAT_GEMMA);
    assert_int_equal(nb_chat_template_by_name("vicuna", &tpl), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_chat_template_by_name("gemma", &tpl), NB_OK);
    /* Gemma requires alternating roles, as its template's raise_exception does. */
    struct nb_chat_msg m[2] = {{"user", "a"}, {"user", "b"}};
    char *out = NULL;
    assert_int_equal(nb_chat_render(&tpl, m, 2, 1, "<bos>", "<eos>", &out), NB_ERR_INVALID_ARG);
    assert_null(out);
    assert_int_equal(nb_chat_render(&tpl, m, 1, 1, "<bos>", "<eos>", &out), NB_OK);
    assert_string_equal(out, "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merges),   cmocka_unit_test(test_detok_streaming),
        cmocka_unit_test(test_malformed),    cmocka_unit_test(test_byte_level),
        cmocka_unit_test(test_utf8_and_nfc), cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_chat_detect), cmocka_unit_test(test_byte_level_invalid_piece),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
