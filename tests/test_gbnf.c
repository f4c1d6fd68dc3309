/* test_gbnf — GBNF grammars (runtime/gbnf.c): the compiler's errors, accepted and refused
 * byte strings (repetitions, classes, UTF-8, a JSON grammar), the token mask against
 * token-by-token checks, and decodes from random logits within a budget of tokens that
 * always end complete (a small vocabulary and kjv-7m's, through nibble.h's sampler). */
#include "helpers/testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/constrain.h"
#include "runtime/gbnf.h"
#include "tokenizer/tokenizer.h"

static struct nb_gbnf *compile(const char *text)
{
    struct nb_gbnf *g = NULL;
    enum nb_status st = nb_gbnf_compile(text, strlen(text), &g);
    if (st) fail_msg("refused %s: %s", text, nb_last_error());
    return g;
}

static int accepts(const struct nb_gbnf *g, const char *s, int want_complete)
{
    struct nb_gbstate *c = malloc(sizeof *c);
    assert_non_null(c);
    nb_gb_start(g, c);
    int ok = nb_gb_feed(g, c, s, strlen(s)) && (!want_complete || nb_gb_complete(g, c));
    free(c);
    return ok;
}

struct bad {
    const char *text;
    enum nb_status st;
    const char *msg;
};

static void test_errors(void **state)
{
    (void)state;
    static const struct bad bad[] = {
        {"", NB_ERR_FORMAT, "no rule named 'root'"},
        {"root ::= x", NB_ERR_FORMAT, "rule 'x' is used (line 1) but never defined"},
        {"root ::= \"a\"\nroot ::= \"b\"", NB_ERR_FORMAT, "line 2, column 1: rule 'root' is defined twice"},
        {"root = \"a\"", NB_ERR_FORMAT, "expected '::='"},
        {"root ::= \"abc", NB_ERR_FORMAT, "without its closing '\"'"},
        {"root ::= [a-", NB_ERR_FORMAT, "line 1"},
        {"root ::= [z-a]", NB_ERR_FORMAT, "a range from U+007A down to U+0061"},
        {"root ::= []", NB_ERR_FORMAT, "matches nothing"},
        {"root ::= \"\\q\"", NB_ERR_FORMAT, "unknown escape '\\q'"},
        {"root ::= \"\\x4\"", NB_ERR_FORMAT, "\\x needs 2 hexadecimal digits"},
        {"root ::= \"\\uD800\"", NB_ERR_FORMAT, "not a character"},
        {"root ::= (\"a\"", NB_ERR_FORMAT, "expected ')'"},
        {"root ::= \"a\")", NB_ERR_FORMAT, "unexpected ')'"},
        {"root ::= \"a\"**", NB_ERR_FORMAT, "unexpected '*'"},
        {"root ::= \"a\"{3,2}", NB_ERR_FORMAT, "its most below its least"},
        {"root ::= \"a\"{2", NB_ERR_FORMAT, "expected '}'"},
        {"root ::= \"a\"{100001}", NB_ERR_UNSUPPORTED, "bound over 10000"},
        {"root ::= \"abcdefgh\"{9000}", NB_ERR_UNSUPPORTED, "positions"},
        {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", NB_ERR_FORMAT,
         "rule 'expr' is left-recursive"},
        {"root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", NB_ERR_FORMAT, "rule 'a' is left-recursive"},
        {"root ::= (root \"x\")?", NB_ERR_FORMAT, "rule 'root' is left-recursive"},
        {"root ::= \"x\" root", NB_ERR_FORMAT, "rule 'root' can never end"},
        {"root ::= \"\xff\"", NB_ERR_FORMAT, "not valid UTF-8"},
        {"9 ::= \"a\"\nroot ::= + ", NB_ERR_FORMAT, "line 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nb_gbnf *g = (struct nb_gbnf *)1;
        enum nb_status st = nb_gbnf_compile(bad[i].text, strlen(bad[i].text), &g);
        if (st != bad[i].st) fail_msg("%s: status %d, not %d", bad[i].text, st, bad[i].st);
        assert_null(g);
        if (!strstr(nb_last_error(), bad[i].msg))
            fail_msg("%s: '%s' does not say '%s'", bad[i].text, nb_last_error(), bad[i].msg);
    }
    char nul[] = "root ::= \"a\"\0";
    struct nb_gbnf *g = NULL;
    assert_int_equal(nb_gbnf_compile(nul, sizeof nul - 1, &g), NB_ERR_FORMAT);
    assert_int_equal(nb_gbnf_compile(NULL, 0, &g), NB_ERR_INVALID_ARG);
}

struct cases {
    const char *grammar;
    const char *const *good; /* whole outputs */
    const char *const *part; /* prefixes taken, not complete */
    const char *const *bad;  /* refused somewhere */
};

static void check_cases(const struct cases *k)
{
    struct nb_gbnf *g = compile(k->grammar);
    for (int i = 0; k->good[i]; i++)
        if (!accepts(g, k->good[i], 1)) fail_msg("%s: refused %s", k->grammar, k->good[i]);
    for (int i = 0; k->part[i]; i++) {
        if (!accepts(g, k->part[i], 0)) fail_msg("%s: refused the prefix %s", k->grammar, k->part[i]);
        if (accepts(g, k->part[i], 1)) fail_msg("%s: %s is not complete", k->grammar, k->part[i]);
    }
    for (int i = 0; k->bad[i]; i++)
        if (accepts(g, k->bad[i], 0)) fail_msg("%s: took %s", k->grammar, k->bad[i]);
    nb_gbnf_free(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

/* JSON in GBNF, as a user writes it (any value, bounded whitespace). */
static const char k_json[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}   # bounded, as llama.cpp's\n";

static void test_accepts(void **state)
{
    (void)state;
    const struct cases k[] = {
        {"root ::= (\"yes\" | \"no\") (\", \" [a-z ]+)? \".\"",
         L("yes.", "no, because it is.", "yes, a."), L("y", "no, b", "yes"), L("maybe.", "yes,.", "no. ")},
        {"root ::= [0-9]{2,3} \"-\" [0-9]{,2} x{2,}\nx ::= \"x\"",
         L("12-xx", "123-4xx", "12-34xxxxx"), L("12", "123-", "12-3x"), L("1-", "1234", "12-345", "12-xy")},
        {"# a comment\nroot ::= a+ b* c?   # trailing\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"",
         L("a", "aaab", "abbbc", "ac"), L(""), L("b", "ca", "abca")},
        {"root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"", L("\"\"", "\"caf\xc3\xa9\"", "\"\xf0\x9f\x98\x80\""),
         L("\"a", "\"\xc3"), L("a", "\"\\", "\"a\"b", "\"\xc3\x28\"")},
        {"root ::= [\xce\xb1-\xcf\x89]+ \" \" .", L("\xce\xb1\xce\xb2 x", "\xcf\x89 \xe2\x82\xac"),
         L("\xce", "\xce\xb1"), L("a", "\xce\xb1\xd0", "\xd0\x90", "\xce\x91")},
        {"root ::= \"a\"\n     | \"b\"\n     | \"\"", L("a", "b", ""), L(NULL), L("c", "ab")},
        {"root ::= (\"\\x41\" \"\\u00e9\" [\\U0001F600])", L("A\xc3\xa9\xf0\x9f\x98\x80"), L("A\xc3\xa9"), L("a")},
        {k_json,
         L("{}", "{\"a\": 1}", "{\"a\":[1,-2.5e+3,true,null,\"x\\u00e9\",{}]}", "{ \"k\" : {\"n\": []} }"),
         L("{", "{\"a\"", "{\"a\":[1,"), L("[]", "{a}", "{\"a\":01}", "{\"a\" 1}", "{}}")},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) check_cases(&k[i]);
    struct nb_gbnf *g = compile("root ::= \"ab\" [0-9]{3}");
    struct nb_gbstate *c = malloc(sizeof *c);
    assert_non_null(c);
    nb_gb_start(g, c);
    assert_int_equal(nb_gb_cost(g, c), 5);
    assert_int_equal(nb_gb_feed(g, c, "ab1", 3), 1);
    assert_int_equal(nb_gb_cost(g, c), 2);
    nb_gbnf_free(g);
    g = compile("root ::= [\xe2\x82\xac]");
    nb_gb_start(g, c);
    assert_int_equal(nb_gb_cost(g, c), 3);
    assert_int_equal(nb_gb_feed(g, c, "\xe2", 1), 1);
    assert_int_equal(nb_gb_cost(g, c), 2);
    free(c);
    nb_gbnf_free(g);
}

/* A vocabulary of every byte but NUL (so every completion has a token), some words, an
 * end-of-generation and a special token. */
struct vocab {
    struct nb_vocab_bytes v;
    char bytes[4096];
    uint32_t off[512];
    uint8_t kind[512];
};

static const char *const k_words[] = {"yes", "no", ", ", "\": ", "{\"", "\"}", "true", "null",
                                      "12", "the", " is", "\xc3\xa9t\xc3\xa9", "\xce\xb1\xce"};

static void make_vocab(struct vocab *s)
{
    uint32_t at = 0;
    int n = 0;
    for (int b = 1; b < 256; b++, n++) {
        s->off[n] = at;
        s->bytes[at++] = (char)b;
        s->kind[n] = NB_VTOK_TEXT;
    }
    for (size_t w = 0; w < sizeof k_words / sizeof k_words[0]; w++, n++) {
        s->off[n] = at;
        memcpy(s->bytes + at, k_words[w], strlen(k_words[w]));
        at += (uint32_t)strlen(k_words[w]);
        s->kind[n] = NB_VTOK_TEXT;
    }
    static const char *const tail[] = {"</s>", "<|tool|>", ""};
    static const uint8_t kinds[] = {NB_VTOK_EOG, NB_VTOK_SPECIAL, NB_VTOK_EMPTY};
    for (int t = 0; t < 3; t++, n++) {
        s->off[n] = at;
        memcpy(s->bytes + at, tail[t], strlen(tail[t]));
        at += (uint32_t)strlen(tail[t]);
        s->kind[n] = kinds[t];
    }
    s->off[n] = at;
    s->v = (struct nb_vocab_bytes){n, s->off, s->bytes, s->kind, NULL, NULL};
    assert_int_equal(nb_vocab_bytes_classify(&s->v), NB_OK);
}

static void free_vocab(struct vocab *s)
{
    free(s->v.plain);
    free(s->v.by_bytes);
}

/* The mask equals the token-by-token answers along every prefix of `text`. */
static void check_mask(const struct nb_gbnf *g, const struct nb_vocab_bytes *v, const char *text,
                       int budget, int closing)
{
    struct nb_gbstate *c = malloc(sizeof *c);
    float *logits = malloc(sizeof *logits * (size_t)v->n_vocab);
    assert_non_null(c);
    assert_non_null(logits);
    nb_gb_start(g, c);
    for (size_t k = 0;; k++) {
        c->budget = budget, c->closing = closing;
        for (int i = 0; i < v->n_vocab; i++) logits[i] = 0;
        int n = nb_gb_mask(g, v, c, 0, logits), m = 0;
        for (int i = 0; i < v->n_vocab; i++) {
            int ok = nb_gb_allows(g, v, c, i, 0);
            m += ok;
            if (ok != !isinf(logits[i]))
                fail_msg("after %zu bytes of %s token %d: mask %d, check %d", k, text, i,
                         !isinf(logits[i]), ok);
        }
        assert_int_equal(n, m);
        if (!text[k]) break;
        c->budget = -1, c->closing = 0;
        assert_int_equal(nb_gb_feed(g, c, text + k, 1), 1);
    }
    free(c);
    free(logits);
}

static void test_mask(void **state)
{
    (void)state;
    static struct vocab sv;
    make_vocab(&sv);
    struct nb_gbnf *g = compile("root ::= (\"yes\" | \"no\") (\", \" [a-z \xc3\xa9]+)? \".\"");
    check_mask(g, &sv.v, "no, \xc3\xa9t\xc3\xa9 is.", -1, 0);
    check_mask(g, &sv.v, "yes, the.", 6, 0);
    check_mask(g, &sv.v, "yes, the.", 30, 1);
    nb_gbnf_free(g);
    g = compile(k_json);
    check_mask(g, &sv.v, "{\"a\": [12, true], \"b\": null}", -1, 0);
    check_mask(g, &sv.v, "{\"a\": [12, true], \"b\": null}", 9, 0);
    /* complete: the end of generation allowed, and more where the grammar goes on */
    struct nb_gbstate *c = malloc(sizeof *c);
    assert_non_null(c);
    nb_gbnf_free(g);
    g = compile("root ::= [a-z]+");
    nb_gb_start(g, c);
    int eog = sv.v.n_vocab - 3;
    assert_int_equal(nb_gb_allows(g, &sv.v, c, eog, 0), 0);
    assert_int_equal(nb_gb_feed(g, c, "ab", 2), 1);
    assert_int_equal(nb_gb_allows(g, &sv.v, c, eog, 0), 1);
    assert_int_equal(nb_gb_allows(g, &sv.v, c, 'c' - 1, 0), 1);
    assert_int_equal(nb_gb_allows(g, &sv.v, c, eog + 1, 0), 0); /* special */
    assert_int_equal(nb_gb_allows(g, &sv.v, c, eog + 2, 0), 0); /* empty */
    c->closing = 1, c->budget = 5;                               /* closing: only the end */
    assert_int_equal(nb_gb_allows(g, &sv.v, c, 'c' - 1, 0), 0);
    assert_int_equal(nb_gb_allows(g, &sv.v, c, eog, 0), 1);
    free(c);
    nb_gbnf_free(g);
    free_vocab(&sv);
}

/* Decode through a sampler with grammar g from random logits (EOG favoured once allowed)
 * within `budget` tokens: the output, complete. */
static void decode(struct nb_grammar *gr, int n_vocab, uint64_t seed, int budget, char *out,
                   size_t cap, const struct nb_vocab_bytes *v)
{
    struct nb_sampler_params sp = nb_sampler_default_params();
    sp.temperature = 1.0f;
    sp.seed = seed;
    struct nb_sampler *s = NULL;
    assert_int_equal(nb_sampler_init(&s, &sp, n_vocab), NB_OK);
    assert_int_equal(nb_sampler_set_grammar(s, gr), NB_OK);
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    assert_non_null(logits);
    uint64_t rng = seed;
    size_t n = 0;
    int ended = 0;
    for (int step = 0; step < budget && !ended; step++) {
        for (int i = 0; i < n_vocab; i++)
            logits[i] = 4.0f * (float)tu_rand_unit(&rng) + (v->kind[i] == NB_VTOK_EOG ? 3.0f : 0);
        nb_sampler_set_budget(s, budget - step - 1);
        int32_t t = nb_sampler_sample(s, logits);
        assert_true(t >= 0);
        if (v->kind[t] == NB_VTOK_EOG) {
            ended = 1;
            break;
        }
        size_t k = v->off[t + 1] - v->off[t];
        assert_true(n + k < cap);
        memcpy(out + n, v->bytes + v->off[t], k);
        n += k;
    }
    out[n] = 0;
    if (!nb_sampler_grammar_complete(s)) fail_msg("seed %llu budget %d: cut: %s",
                                                   (unsigned long long)seed, budget, out);
    nb_sampler_free(s);
    free(logits);
}

static void test_forced(void **state)
{
    (void)state;
    const char *p = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!p) skip();
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_tokenizer_load(&tok, p), NB_OK);
    int n_vocab = nb_tokenizer_n_vocab(tok);
    struct nb_grammar *gr = NULL;
    assert_int_equal(nb_grammar_from_gbnf(&gr, tok, n_vocab, k_json, strlen(k_json)), NB_OK);
    struct nb_vocab_bytes v;
    assert_int_equal(nb_vocab_bytes_init(&v, tok, n_vocab), NB_OK);
    static char out[1 << 16];
    for (int r = 0; r < 24; r++) {
        int budget = 12 + (r * 37) % 200;
        decode(gr, n_vocab, 0x77 + (uint64_t)r, budget, out, sizeof out, &v);
        cJSON *o = cJSON_Parse(out);
        if (!o || !cJSON_IsObject(o)) fail_msg("run %d: not a JSON object: %s", r, out);
        cJSON_Delete(o);
    }
    nb_grammar_free(gr);
    /* a grammar whose shortest output is longer than the budget in bytes: closing keeps
     * the model's choices where they lie on a shortest completion */
    static const char words[] = "root ::= \"In the beginning \" (\"God\" | \"the\") \" \" [a-z]+ \".\"";
    assert_int_equal(nb_grammar_from_gbnf(&gr, tok, n_vocab, words, strlen(words)), NB_OK);
    for (int r = 0; r < 8; r++) {
        decode(gr, n_vocab, 0x99 + (uint64_t)r, 40 + r, out, sizeof out, &v);
        assert_true(!strncmp(out, "In the beginning ", 17));
    }
    nb_grammar_free(gr);
    nb_vocab_bytes_free(&v);
    nb_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_accepts),
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_forced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
