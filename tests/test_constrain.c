/* test_constrain — constrained decoding (runtime/constrain.c): the JSON recogniser on
 * accepted and refused byte strings, grammars of literals, choices and objects, the token
 * mask over a small vocabulary, and forced decodes from random logits within a budget of
 * tokens that always end in valid JSON (a small vocabulary and kjv-7m's). */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "tokenizer/tokenizer.h"

static int accepts(const struct nb_gram *g, const char *s, int want_complete)
{
    struct nb_cons c;
    nb_cons_start(g, &c);
    if (!nb_cons_feed(g, &c, s, strlen(s))) return 0;
    return !want_complete || nb_cons_complete(g, &c);
}

static void test_json(void **state)
{
    (void)state;
    struct nb_gram g = {0};
    assert_int_equal(nb_gram_object(&g), 0);
    static const char *const good[] = {
        "{}",
        "{ \n\t}",
        "{\"a\":1}",
        "{\"a\": [1, -2.5e+3, 0, 0.25, 1E9, true, false, null, \"x\", {}, []]}",
        "{\"k\":{\"n\":{\"m\":[[[]]]}}}",
        "{\"s\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
        "{\"e\": \"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00\"}",
        "{\"a\":-0}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!accepts(&g, good[i], 1)) fail_msg("refused: %s", good[i]);
    /* JSON mode's answer starts with its '{': no whitespace before it (issue 35) */
    assert_int_equal(accepts(&g, " {}", 0), 0);
    assert_int_equal(accepts(&g, "\n", 0), 0);
    /* no prefix that no bytes complete (fuzz_schema found \ude0 taken, then nothing) */
    assert_int_equal(accepts(&g, "{\"a\":\"\\ud", 0), 1);
    assert_int_equal(accepts(&g, "{\"a\":\"\\udc", 0), 0);
    assert_int_equal(accepts(&g, "{\"a\":\"\\uDF", 0), 0);
    assert_int_equal(accepts(&g, "{\"a\":\"\\ud83d\\u0", 0), 0);
    assert_int_equal(accepts(&g, "{\"a\":\"\\ud83d\\ud8", 0), 0);
    assert_int_equal(accepts(&g, "{\"a\":\"\\ud83d\\udE", 0), 1);
    { /* a number at its limit of 64 bytes takes no 'e' it could not finish */
        char n62[128] = "{\"a\":", buf[160];
        for (int i = 0; i < 62; i++)
            strcat(n62, "8");
        snprintf(buf, sizeof buf, "%se5}", n62); /* 64 bytes */
        assert_int_equal(accepts(&g, buf, 1), 1);
        snprintf(buf, sizeof buf, "%s8e", n62); /* the 64th byte an 'e': no room for a digit */
        assert_int_equal(accepts(&g, buf, 0), 0);
        snprintf(buf, sizeof buf, "%s88}", n62); /* 64 digits */
        assert_int_equal(accepts(&g, buf, 1), 1);
        snprintf(buf, sizeof buf, "%s888", n62); /* 65 */
        assert_int_equal(accepts(&g, buf, 0), 0);
    }
    /* prefixes of a good one are taken but not complete */
    assert_int_equal(accepts(&g, "{\"a\": [1, 2", 0), 1);
    assert_int_equal(accepts(&g, "{\"a\": [1, 2", 1), 0);
    static const char *const bad[] = {
        "[]",                   /* the top value is an object */
        "\"x\"",                /* ... */
        "{a:1}",                /* keys are strings */
        "{\"a\" 1}",            /* no colon */
        "{\"a\":1,}",           /* trailing comma */
        "{\"a\":[1,]}",         /* ... */
        "{\"a\":01}",           /* leading zero */
        "{\"a\":1.}",           /* no fraction digits */
        "{\"a\":.5}",           /* ... */
        "{\"a\":1e}",           /* no exponent digits */
        "{\"a\":+1}",           /* no plus */
        "{\"a\":tru}",          /* broken literal */
        "{\"a\":nul1}",         /* ... */
        "{\"a\":\"\x01\"}",     /* control character in a string */
        "{\"a\":\"\\x\"}",      /* unknown escape */
        "{\"a\":\"\\u12g4\"}",  /* bad hex */
        "{\"a\":\"\\u0000\"}",  /* NUL */
        "{\"a\":\"\\udc00\"}",  /* lone low surrogate */
        "{\"a\":\"\\ud800x\"}", /* high surrogate without its low half */
        "{\"a\":\"\\ud800\\u0041\"}",
        "{\"a\":\"\xff\"}",             /* invalid UTF-8 */
        "{\"a\":\"\xc0\xaf\"}",         /* overlong */
        "{\"a\":\"\xed\xa0\x80\"}",     /* surrogate in UTF-8 */
        "{\"a\":\"\xf4\x90\x80\x80\"}", /* past U+10FFFF */
        "{\"a\":\"\xc3x\"}",            /* cut character */
        "{\"a\":[}",                    /* mismatched brackets */
        "{\"a\":1]}",
        "{} x", /* nothing after the object */
        "{}{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (accepts(&g, bad[i], 0)) fail_msg("accepted: %s", bad[i]);
    /* whitespace is bounded (inside the object: none comes before it) */
    char ws[200];
    memset(ws, ' ', sizeof ws);
    ws[0] = '{';
    ws[NB_JSON_MAX_WS + 1] = '}';
    ws[NB_JSON_MAX_WS + 2] = '\0';
    assert_int_equal(accepts(&g, ws, 0), 1);
    memset(ws, ' ', sizeof ws);
    ws[0] = '{';
    ws[NB_JSON_MAX_WS + 2] = '}';
    ws[NB_JSON_MAX_WS + 3] = '\0';
    assert_int_equal(accepts(&g, ws, 0), 0);
    /* so is nesting */
    char deep[200] = "{\"a\":";
    size_t n = strlen(deep);
    for (int i = 0; i < NB_JSON_MAX_DEPTH - 1; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    assert_int_equal(accepts(&g, deep, 0), 1);
    deep[n++] = '[';
    deep[n] = '\0';
    assert_int_equal(accepts(&g, deep, 0), 0);
    /* and numbers */
    char num[200] = "{\"a\":";
    n = strlen(num);
    for (int i = 0; i < NB_JSON_MAX_NUM; i++)
        num[n++] = '7';
    num[n] = '\0';
    assert_int_equal(accepts(&g, num, 0), 1);
    num[n++] = '7';
    num[n] = '\0';
    assert_int_equal(accepts(&g, num, 0), 0);
    nb_gram_free(&g);
}

static void test_sequence(void **state)
{
    (void)state;
    struct nb_gram g = {0};
    char *names[] = {"get_weather", "get", "search"};
    assert_int_equal(srv_tool_grammar(&g, SRV_FMT_HERMES, names, 3), 0);
    assert_int_equal(g.n, 5);
    const char *ok =
        "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    assert_int_equal(accepts(&g, ok, 1), 1);
    assert_int_equal(
        accepts(&g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", 1),
        1);
    assert_int_equal(accepts(&g, "<tool_call>\n{\"name\": \"get_", 0), 1);
    assert_int_equal(accepts(&g, "<tool_call>\n{\"name\": \"ge\"", 0), 0); /* not a name */
    assert_int_equal(accepts(&g, "<tool_call>\n{\"name\": \"other", 0), 0);
    assert_int_equal(accepts(&g, "<tool_call> {", 0), 0); /* the literal */
    assert_int_equal(accepts(&g, "<tool_call>\n{\"name\": \"get\", \"arguments\": []", 0), 0);
    char more[200];
    snprintf(more, sizeof more, "%s ", ok); /* nothing after the call */
    assert_int_equal(accepts(&g, more, 0), 0);
    nb_gram_free(&g);
    assert_int_equal(srv_tool_grammar(&g, SRV_FMT_LLAMA3, names, 1), 0);
    assert_int_equal(accepts(&g, "{\"name\": \"get_weather\", \"parameters\": {\"a\": 1}}", 1), 1);
    assert_int_equal(accepts(&g, "{\"name\": \"get\"", 0), 0); /* only the first name */
    nb_gram_free(&g);
    /* tool_choice "required" with parallel calls: the sequence again after a '\n', up to
     * `rounds` calls; once closing, or at the last round, only the end */
    assert_int_equal(srv_tool_grammar(&g, SRV_FMT_HERMES, names, 3), 0);
    const char *two = "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>";
    assert_int_equal(accepts(&g, two, 0), 0); /* rounds 0: one call */
    g.rounds = 2;
    assert_int_equal(accepts(&g, two, 1), 1);
    assert_int_equal(accepts(&g, "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>\n", 1),
                     0); /* a '\n' begins a call that must come */
    snprintf(more, sizeof more, "%s\n<", two);
    assert_int_equal(accepts(&g, more, 0), 0); /* no third round */
    struct nb_cons c;
    nb_cons_start(&g, &c);
    int fresh = nb_cons_cost(&g, &c);
    assert_int_equal(nb_cons_feed(&g, &c, ok, strlen(ok)), 1);
    assert_true(nb_cons_complete(&g, &c));
    assert_int_equal(nb_cons_cost(&g, &c), fresh + 1); /* the next token may open another */
    c.closing = 1;
    assert_int_equal(nb_cons_cost(&g, &c), 0);
    assert_int_equal(nb_cons_feed(&g, &c, "\n", 1), 0);
    nb_gram_free(&g);
    /* a choice refuses alternatives that are prefixes of others, and empty texts */
    const char *pre[] = {"ab", "abc"};
    assert_int_equal(nb_gram_choice(&g, pre, 2), -1);
    const char *empty[] = {""};
    assert_int_equal(nb_gram_literal(&g, empty[0]), -1);
    assert_int_equal(g.n, 0);
}

/* ---------------------------------------------------------------- schemas */

/* The schema the tests below hold outputs to: every keyword of the subset. */
static const char k_schema[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\"},"
    "\"age\": {\"type\": \"integer\"},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"bc\", \"d\"]}, "
    "\"minItems\": 1, \"maxItems\": 3},"
    "\"kind\": {\"anyOf\": [{\"type\": \"null\"}, {\"$ref\": \"#/$defs/pt\"}]},"
    "\"ok\": {\"type\": \"boolean\"},"
    "\"n\": {\"enum\": [1, 12, -3.5]},"
    "\"any\": {\"description\": \"anything\"}},"
    "\"required\": [\"name\", \"tags\", \"kind\"], \"additionalProperties\": false,"
    "\"$defs\": {\"pt\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}, "
    "\"next\": {\"anyOf\": [{\"$ref\": \"#/$defs/pt\"}, {\"type\": \"null\"}]}}, "
    "\"required\": [\"x\", \"next\"]}}}";

static struct nb_schema *schema_of(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    struct nb_schema *s = NULL;
    enum nb_status st = nb_schema_compile(o, &s);
    cJSON_Delete(o);
    if (st != NB_OK) fail_msg("schema refused: %s: %s", nb_last_error(), text);
    return s;
}

static void schema_grammar(struct nb_gram *g, const struct nb_schema *s)
{
    memset(g, 0, sizeof *g);
    assert_int_equal(nb_gram_schema(g, &s, 1), 0);
}

/* Does a pt ({x: number, next: pt or null}, nothing else) hold? */
static int valid_pt(const cJSON *o)
{
    if (!cJSON_IsObject(o) || cJSON_GetArraySize(o) != 2) return 0;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "x");
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(o, "next");
    return cJSON_IsNumber(x) && next && (cJSON_IsNull(next) || valid_pt(next));
}

/* An independent check of k_schema over cJSON's parse (the npm test uses ajv). */
static int valid_k_schema(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    int ok = cJSON_IsObject(o);
    static const char *const keys[] = {"name", "age", "tags", "kind", "ok", "n", "any", NULL};
    for (const cJSON *m = ok ? o->child : NULL; m && ok; m = m->next) {
        int known = 0;
        for (int i = 0; keys[i]; i++)
            known |= !strcmp(m->string, keys[i]);
        ok = known;
    }
    const cJSON *v;
    if (ok) ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "name"));
    if (ok && (v = cJSON_GetObjectItemCaseSensitive(o, "age")))
        ok = cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (ok) {
        v = cJSON_GetObjectItemCaseSensitive(o, "tags");
        int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
        ok = n >= 1 && n <= 3;
        for (const cJSON *t = ok ? v->child : NULL; t && ok; t = t->next)
            ok = cJSON_IsString(t) &&
                 (!strcmp(t->valuestring, "a") || !strcmp(t->valuestring, "bc") ||
                  !strcmp(t->valuestring, "d"));
    }
    if (ok) {
        v = cJSON_GetObjectItemCaseSensitive(o, "kind");
        ok = v && (cJSON_IsNull(v) || valid_pt(v));
    }
    if (ok && (v = cJSON_GetObjectItemCaseSensitive(o, "ok"))) ok = cJSON_IsBool(v);
    if (ok && (v = cJSON_GetObjectItemCaseSensitive(o, "n")))
        ok = cJSON_IsNumber(v) &&
             (v->valuedouble == 1 || v->valuedouble == 12 || v->valuedouble == -3.5);
    cJSON_Delete(o);
    return ok;
}

/* The schema-guided recogniser on byte strings: what k_schema takes and where it refuses. */
static void test_schema_accepts(void **state)
{
    (void)state;
    struct nb_schema *s = schema_of(k_schema);
    struct nb_gram g;
    schema_grammar(&g, s);
    static const char *const good[] = {
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null}",
        ("{\"name\": \"x\", \"age\": -12, \"tags\": [\"bc\", \"d\", \"a\"], \"kind\": {\"x\": "
         "1.5e3, \"next\": {\"x\": 0, \"next\": null}}, \"ok\": true, \"n\": 12}"),
        "{\"name\":\"\\u00e9\",\"tags\":[\"d\"],\"kind\":null,\"n\":-3.5,\"any\":[{\"z\":1}]}",
        "{\"name\":\"\",\"tags\":[\"d\"],\"kind\":null,\"n\":1}",
        "{ \"name\" : \"x\" , \"tags\" : [ \"a\" ] , \"kind\" : null , \"ok\" : false }",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!accepts(&g, good[i], 1)) fail_msg("refused: %s", good[i]);
        assert_true(valid_k_schema(good[i]));
    }
    /* each refused at its last byte: the prefix before it is taken */
    static const char *const bad[] = {
        "{\"t",                                         /* name comes first (required) */
        "{}",                                           /* ... */
        "{\"name\":1",                                  /* a string */
        "{\"name\":\"x\",\"age\":1.",                   /* an integer */
        "{\"name\":\"x\",\"age\":1e",                   /* ... */
        "{\"name\":\"x\",\"age\":1,\"n",                /* properties in order: name is past */
        "{\"name\":\"x\",\"e",                          /* no other keys */
        "{\"name\":\"x\",\"tags\":[]",                  /* minItems 1 */
        "{\"name\":\"x\",\"tags\":[\"a\",\"a\",\"a\",", /* maxItems 3 */
        "{\"name\":\"x\",\"tags\":[\"e",                /* not in the enum */
        "{\"name\":\"x\",\"tags\":[\"b\"",              /* a prefix of one is not one */
        "{\"name\":\"x\",\"tags\":[\"a\"]}",            /* kind is required */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"o",         /* ... before ok */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":\"", /* neither null nor an object */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":{\"x\":1}",       /* next is required */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":{\"x\":t",        /* a number */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":2",    /* 1, 12 or -3.5 */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":123",  /* ... */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":-3.4", /* ... */
        "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"ok\":n",   /* a boolean */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char pre[256];
        size_t n = strlen(bad[i]);
        memcpy(pre, bad[i], n - 1);
        pre[n - 1] = '\0';
        if (!accepts(&g, pre, 0)) fail_msg("prefix refused: %s", pre);
        if (accepts(&g, bad[i], 0)) fail_msg("taken: %s", bad[i]);
    }
    /* -3.5 then the object's end; 12 then a comma; 1 then '}' */
    assert_int_equal(accepts(&g, "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":-3.5}", 1),
                     1);
    assert_int_equal(
        accepts(&g, "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":12,\"any\":{}}", 1), 1);
    assert_int_equal(accepts(&g, "{\"name\":\"x\",\"tags\":[\"a\"],\"kind\":null,\"n\":1}", 1), 1);
    nb_gram_free(&g);
    nb_schema_free(s);

    /* a tool call: each function's arguments kept to its own schema */
    struct nb_schema *sa = schema_of("{\"type\": \"object\", \"properties\": {\"city\": "
                                      "{\"type\": \"string\"}}, \"required\": [\"city\"]}");
    struct nb_schema *sb = schema_of("{\"properties\": {\"n\": {\"type\": \"integer\"}}, "
                                      "\"required\": [\"n\"]}");
    char *names[] = {"weather", "count", "free"};
    const struct nb_schema *ss[] = {sa, sb, NULL};
    memset(&g, 0, sizeof g);
    assert_int_equal(srv_tool_grammar_schema(&g, SRV_FMT_HERMES, names, ss, 3), 0);
    const char *pre = "<tool_call>\n{\"name\": \"";
    char buf[256];
    snprintf(buf, sizeof buf, "%sweather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
             pre);
    assert_int_equal(accepts(&g, buf, 1), 1);
    snprintf(buf, sizeof buf, "%scount\", \"arguments\": {\"n\": 3}}\n</tool_call>", pre);
    assert_int_equal(accepts(&g, buf, 1), 1);
    snprintf(buf, sizeof buf, "%sfree\", \"arguments\": {\"q\": [1]}}\n</tool_call>", pre);
    assert_int_equal(accepts(&g, buf, 1), 1);
    snprintf(buf, sizeof buf, "%scount\", \"arguments\": {\"c", pre);
    assert_int_equal(accepts(&g, buf, 0), 0);
    snprintf(buf, sizeof buf, "%sweather\", \"arguments\": {\"n", pre);
    assert_int_equal(accepts(&g, buf, 0), 0);
    snprintf(buf, sizeof buf, "%sweather\", \"arguments\": {}", pre);
    assert_int_equal(accepts(&g, buf, 0), 0);
    nb_gram_free(&g);
    nb_schema_free(sa);
    nb_schema_free(sb);
}

/* Schemas outside the subset are refused with a message that names what is outside. */
static void test_schema_refused(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *says;
    } cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"pattern\": "
         "\"x\"}}}",
         "'pattern' is not supported"},
        {"{\"type\": \"object\", \"minProperties\": 1}", "'minProperties' is not supported"},
        {"{\"type\": \"string\"}", "the top level must be an object"},
        {"{\"anyOf\": [{\"type\": \"object\"}, {\"type\": \"object\", \"properties\": {}}]}",
         "'anyOf': two alternatives take an object value"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"oneOf\": [{\"type\": \"integer\"}, "
         "{\"type\": \"number\"}]}}}",
         "'oneOf': two alternatives take a number value"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"http://x/s.json\"}}}",
         "'$ref' 'http://x/s.json' is not"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/b\"}}}",
         "'$ref' '#/$defs/b' is not"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#\"}}, \"required\": "
         "[\"a\"]}",
         "no finite object"},
        {"{\"type\": \"object\", \"properties\": {}, \"required\": [\"a\"]}",
         "'required' names 'a', which 'properties' does not list"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [[1]]}}}",
         "'enum' of arrays or objects"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"date\"}}}",
         "'type' 'date' is not a JSON Schema type"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"items\": [{}]}}}", "'items' as a list"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"minItems\": 100}}}",
         "'minItems' over 64"},
        /* out of int's range: refused before any conversion (a fuzzer's find, UBSan) */
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"minItems\": 7.7e15}}}",
         "must be counts"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"maxItems\": -1e300}}}",
         "must be counts"},
        {"{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/a\"}}, \"type\": \"object\", \"properties\": "
         "{\"x\": {\"$ref\": \"#/$defs/a\"}}}",
         "$ref loop"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *o = cJSON_Parse(cases[i].schema);
        assert_non_null(o);
        struct nb_schema *s = NULL;
        enum nb_status st = nb_schema_compile(o, &s);
        cJSON_Delete(o);
        if (st != NB_ERR_UNSUPPORTED || s) fail_msg("case %zu compiled: %s", i, cases[i].schema);
        if (!strstr(nb_last_error(), cases[i].says))
            fail_msg("case %zu says '%s', not '%s'", i, nb_last_error(), cases[i].says);
    }
    /* what is inside: an empty schema (any object), annotations, a recursive $ref */
    nb_schema_free(schema_of("{}"));
    nb_schema_free(schema_of("{\"title\": \"t\", \"type\": \"object\", \"description\": \"d\"}"));
    nb_schema_free(
        schema_of("{\"type\": \"object\", \"properties\": {\"kids\": {\"type\": "
                  "\"array\", \"items\": {\"$ref\": \"#\"}}}, \"required\": [\"kids\"]}"));
}

/* A vocabulary written out by hand: bytes and kinds. */
struct small_vocab {
    struct nb_vocab_bytes v;
    char bytes[512];
    uint32_t off[64];
    uint8_t kind[64];
};

static void small_vocab(struct small_vocab *s, const char *const *toks, const uint8_t *kinds, int n)
{
    uint32_t at = 0;
    for (int i = 0; i < n; i++) {
        s->off[i] = at;
        size_t k = strlen(toks[i]);
        memcpy(s->bytes + at, toks[i], k);
        at += (uint32_t)k;
        s->kind[i] = kinds[i];
    }
    s->off[n] = at;
    s->v = (struct nb_vocab_bytes){n, s->off, s->bytes, s->kind, NULL, NULL};
    assert_int_equal(nb_vocab_bytes_classify(&s->v), NB_OK);
}

/* What nb_vocab_bytes_classify allocated for a small_vocab (the rest is its own). */
static void small_vocab_free(struct small_vocab *s)
{
    free(s->v.plain);
    free(s->v.by_bytes);
    s->v.plain = NULL;
    s->v.by_bytes = NULL;
}

static const char *const k_toks[] = {
    "{", "}", "\"", "a",  " ",      "{\"",         "\"}", "x",    "</s>", ":",
    "1", "[", "]",  ",",  "\"a\":", "<tool_call>", "",    "\xc3", "\xa9", "true",
    "-", ".", "e",  "\\", "n",      "\n",          "u",   "l", /* null can be spelled: every state
                                                                  has a token */
};
static const uint8_t k_kinds[] = {
    NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT,    NB_VTOK_TEXT,  NB_VTOK_TEXT,
    NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_EOG,  NB_VTOK_TEXT,    NB_VTOK_TEXT,  NB_VTOK_TEXT,
    NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_SPECIAL, NB_VTOK_EMPTY, NB_VTOK_TEXT,
    NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT,    NB_VTOK_TEXT,  NB_VTOK_TEXT,
    NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT, NB_VTOK_TEXT,
};
#define N_SMALL ((int)(sizeof k_toks / sizeof k_toks[0]))

/* The allowed set as a string of '1'/'0' per token. */
static void mask_str(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                     const struct nb_cons *c, int special, char *out)
{
    float logits[64], slow[64];
    struct nb_vocab_bytes unclassified = *v; /* every token through the automaton */
    unclassified.plain = NULL;
    for (int i = 0; i < v->n_vocab; i++)
        logits[i] = slow[i] = 0;
    int n = nb_cons_mask(g, v, c, special, logits), k = 0;
    assert_int_equal(nb_cons_mask(g, &unclassified, c, special, slow), n);
    for (int i = 0; i < v->n_vocab; i++) {
        out[i] = logits[i] == 0 ? '1' : '0';
        k += out[i] == '1';
        assert_int_equal(out[i] == '1', nb_cons_allows(g, v, c, i, special));
        assert_int_equal(logits[i] == 0, slow[i] == 0);
    }
    out[v->n_vocab] = '\0';
    assert_int_equal(n, k);
}

static void test_classify(void **state)
{
    (void)state;
    static struct small_vocab sv;
    small_vocab(&sv, k_toks, k_kinds, N_SMALL);
    char got[64];
    for (int i = 0; i < N_SMALL; i++)
        got[i] = (char)('0' + sv.v.plain[i]);
    got[N_SMALL] = '\0';
    /* not plain: quotes, the backslash, the newline, a lone lead or continuation byte, the
     * special, empty and EOG tokens */
    assert_string_equal(got, "1101100101111100000111101011");
    small_vocab_free(&sv);
}

static void test_mask(void **state)
{
    (void)state;
    static struct small_vocab sv;
    small_vocab(&sv, k_toks, k_kinds, N_SMALL);
    struct nb_gram g = {0};
    struct nb_cons c;
    char m[80];
    assert_int_equal(nb_gram_object(&g), 0);
    nb_cons_start(&g, &c);
    mask_str(&g, &sv.v, &c, 0, m);
    assert_string_equal(m, "1000010000000000000000000000"); /* '{', '{"': no whitespace first */
    assert_int_equal(nb_cons_feed(&g, &c, "{\"a\":", 5), 1);
    mask_str(&g, &sv.v, &c, 0, m);
    /* a value: '{', '"', ' ', '{"', '"}' (a string holding '}'), '1', '[', "true", '-',
     * 'n' (null), '\n' */
    assert_string_equal(m, "1010111000110000000110001100");
    assert_int_equal(nb_cons_feed(&g, &c, "\"", 1), 1);
    mask_str(&g, &sv.v, &c, 0, m);
    /* in a string: any text but a lone continuation byte or a raw newline; the special
     * token only when allowed; never the empty one or EOG */
    assert_string_equal(m, "1111111101111100010111111011");
    mask_str(&g, &sv.v, &c, 1, m);
    assert_string_equal(m, "1111111101111101010111111011");
    assert_int_equal(nb_cons_feed(&g, &c, "\xc3", 1), 1);
    mask_str(&g, &sv.v, &c, 0, m);
    assert_string_equal(m, "0000000000000000001000000000"); /* only the continuation */
    assert_int_equal(nb_cons_feed(&g, &c, "\xa9\"}", 3), 1);
    assert_int_equal(nb_cons_complete(&g, &c), 1);
    mask_str(&g, &sv.v, &c, 1, m);
    assert_string_equal(m, "0000000010000000000000000000"); /* only EOG */
    nb_gram_free(&g);
    small_vocab_free(&sv);
}

/* The next token as the engine picks it (sched.c sample_constrained), greedy: the model's
 * top token when allowed within the `left` tokens; closing when only the budget refuses
 * it (nb_cons_refused); else the best of the mask (nb_cons_next). */
static int pick(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons *c,
                int left, const float *logits, float *work)
{
    int best = 0;
    for (int i = 1; i < v->n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    c->budget = left;
    if (nb_cons_allows(g, v, c, best, 0) ||
        (nb_cons_refused(g, v, c, best, 0) && nb_cons_allows(g, v, c, best, 0)))
        return best;
    assert_true(nb_cons_next(g, v, c, left, 0, logits, work) > 0);
    best = 0;
    for (int i = 1; i < v->n_vocab; i++)
        if (work[i] > work[best]) best = i;
    assert_true(nb_cons_allows(g, v, c, best, 0));
    return best;
}

/* The longest token of v that `text` (n bytes) begins with, -1 if none. */
static int longest_prefix(const struct nb_vocab_bytes *v, const char *text, size_t n)
{
    int best = -1;
    size_t best_k = 0;
    for (int i = 0; i < v->n_vocab; i++) {
        size_t k = v->off[i + 1] - v->off[i];
        if (v->kind[i] == NB_VTOK_TEXT && k > best_k && k <= n &&
            !memcmp(v->bytes + v->off[i], text, k))
            best = i, best_k = k;
    }
    return best;
}

/* Decode as the engine does (pick) within max_steps tokens: with random logits (rng; EOG
 * favoured once allowed, closing brackets and quotes a little likelier, so walks end), or,
 * with `want`, as a model that wants that text byte by byte (the single-byte token of its
 * next byte highest; with `whole`, in its own tokens: the longest token the rest begins
 * with), EOG once it is written, and a taste for `back` when its own token is refused. The
 * steps taken before the end of generation, or -1 when cut. */
static int decode(const struct nb_gram *g, const struct nb_vocab_bytes *v, uint64_t *rng,
                  const char *want, int whole, char *out, size_t cap, int max_steps)
{
    struct nb_cons c;
    size_t n = 0, wn = want ? strlen(want) : 0;
    float *logits = malloc(sizeof *logits * (size_t)v->n_vocab);
    float *work = malloc(sizeof *work * (size_t)v->n_vocab);
    assert_non_null(logits);
    assert_non_null(work);
    nb_cons_start(g, &c);
    int steps = -1;
    for (int step = 0; step < max_steps; step++) {
        const int own = whole && n < wn ? longest_prefix(v, want + n, wn - n) : -1;
        for (int i = 0; i < v->n_vocab; i++) {
            size_t k = v->off[i + 1] - v->off[i];
            const char *b = v->bytes + v->off[i];
            if (!want) {
                logits[i] = (float)tu_rand_unit(rng) + (v->kind[i] == NB_VTOK_EOG ? 10.0f : 0.0f);
                if (k && (*b == '}' || *b == ']' || *b == '"')) logits[i] += 0.5f;
                continue;
            }
            logits[i] = (float)(i % 7) * 0.01f;
            if (v->kind[i] == NB_VTOK_EOG && n >= wn) logits[i] = 20.0f;
            if (n < wn && (whole ? i == own : k == 1 && *b == want[n])) logits[i] = 10.0f;
            if (k && n < wn && !strncmp(b, "back", k < 4 ? k : 4)) logits[i] += 5.0f;
        }
        /* as the engine: every token leaves the output closable before max_steps, one
         * token kept for the end of generation */
        int best = pick(g, v, &c, max_steps - step - 1, logits, work);
        if (v->kind[best] == NB_VTOK_EOG) {
            steps = step;
            break;
        }
        size_t k = v->off[best + 1] - v->off[best];
        assert_true(n + k < cap);
        memcpy(out + n, v->bytes + v->off[best], k);
        n += k;
        assert_int_equal(nb_cons_feed(g, &c, v->bytes + v->off[best], k), 1);
    }
    free(logits);
    free(work);
    out[n] = '\0';
    return steps;
}

/* Forced decodes within budgets of 4 to 400 tokens: every one ends, as a JSON object. */
static void check_forced(const struct nb_vocab_bytes *v, int runs, const char *what)
{
    struct nb_gram g = {0};
    assert_int_equal(nb_gram_object(&g), 0);
    static char out[1 << 16];
    int ended = 0, closed_early = 0;
    for (int r = 0; r < runs; r++) {
        uint64_t rng = 0x1234 + (uint64_t)r;
        int budget = 4 + (r * 37) % 397;
        int steps = decode(&g, v, &rng, NULL, 0, out, sizeof out, budget);
        if (steps < 0) fail_msg("%s run %d: no end within %d tokens: %s", what, r, budget, out);
        ended++;
        closed_early += steps < budget - 1;
        cJSON *o = cJSON_Parse(out);
        if (!o || !cJSON_IsObject(o)) fail_msg("%s run %d: not a JSON object: %s", what, r, out);
        cJSON_Delete(o);
    }
    printf("# %s: %d of %d forced decodes ended as JSON objects (%d before their budget)\n", what,
           ended, runs, closed_early);
    assert_int_equal(ended, runs);
    nb_gram_free(&g);
}

static void test_forced_small(void **state)
{
    (void)state;
    static struct small_vocab sv;
    small_vocab(&sv, k_toks, k_kinds, N_SMALL);
    check_forced(&sv.v, 200, "small vocabulary");
    small_vocab_free(&sv);
}

static struct nb_tokenizer *kjv_tok(void)
{
    const char *p = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!p) return NULL;
    struct nb_tokenizer *t = NULL;
    assert_int_equal(nb_tokenizer_load(&t, p), NB_OK);
    return t;
}

/* Forced decodes of k_schema through kjv-7m's vocabulary from random logits, within
 * budgets of 40 to 400 tokens (the fewest it takes is 37): every output ends, parses and keeps to the schema. */
static void check_schema_forced(const struct nb_vocab_bytes *v, int runs)
{
    struct nb_schema *s = schema_of(k_schema);
    struct nb_gram g;
    schema_grammar(&g, s);
    static char out[1 << 16];
    int valid = 0, with_kind = 0;
    for (int r = 0; r < runs; r++) {
        uint64_t rng = 0x5eed + (uint64_t)r;
        int budget = 40 + (r * 53) % 361;
        if (decode(&g, v, &rng, NULL, 0, out, sizeof out, budget) < 0)
            fail_msg("run %d: no end within %d tokens: %s", r, budget, out);
        if (!valid_k_schema(out)) fail_msg("run %d: does not keep to the schema: %s", r, out);
        valid++;
        with_kind += strstr(out, "\"x\"") != NULL;
    }
    printf("# k_schema: %d of %d forced decodes valid (%d with a kind object)\n", valid, runs,
           with_kind);
    nb_gram_free(&g);
    nb_schema_free(s);
}


/* Decode `want` (whole: in its own tokens) at every budget from lo to hi: each output
 * complete and accepted, and once it is `want` it stays so. The first budget that keeps
 * it (-1: none). */
static int kept_from_budget(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                            const char *want, int whole, int lo, int hi, char *out, size_t cap)
{
    int kept_from = -1;
    for (int budget = lo; budget <= hi; budget++) {
        if (decode(g, v, NULL, want, whole, out, cap, budget) < 0)
            fail_msg("budget %d: cut: %s", budget, out);
        assert_int_equal(accepts(g, out, 1), 1);
        if (getenv("NIBBLE_TEST_VERBOSE")) printf("# %d: %s\n", budget, out);
        if (!strcmp(out, want) && kept_from < 0) kept_from = budget;
        if (strcmp(out, want) && kept_from >= 0)
            fail_msg("budget %d: the call changed (kept from %d): %s", budget, kept_from, out);
    }
    return kept_from;
}

static void test_forced_kjv(void **state)
{
    (void)state;
    struct nb_tokenizer *t = kjv_tok();
    if (!t) skip();
    struct nb_vocab_bytes v;
    assert_int_equal(nb_vocab_bytes_init(&v, t, 4096 + 8), NB_OK); /* with padding rows */
    assert_int_equal(v.kind[2], NB_VTOK_EOG);
    assert_int_equal(v.kind[4096 + 3], NB_VTOK_EMPTY);
    check_forced(&v, 40, "kjv-7m vocabulary");
    check_schema_forced(&v, 60);
    /* a forced tool call through the real vocabulary parses back into one call */
    struct nb_gram g = {0};
    char *names[] = {"lookup_verse", "count_words"};
    assert_int_equal(srv_tool_grammar(&g, SRV_FMT_HERMES, names, 2), 0);
    static char out[1 << 16];
    for (int r = 0; r < 10; r++) {
        uint64_t rng = 99 + (uint64_t)r;
        if (decode(&g, &v, &rng, NULL, 0, out, sizeof out, 100 + 20 * r) < 0)
            fail_msg("tool call run %d: no end: %s", r, out);
        struct srv_tool_call *calls;
        int n;
        char *content;
        assert_int_equal(
            srv_tool_calls_parse(out, strlen(out), SRV_FMT_HERMES, names, 2, &calls, &n, &content),
            0);
        if (n != 1) fail_msg("run %d: %d calls in %s", r, n, out);
        assert_null(content);
        cJSON *a = cJSON_Parse(calls[0].arguments);
        assert_true(cJSON_IsObject(a));
        cJSON_Delete(a);
        srv_tool_calls_free(calls, n);
    }
    nb_gram_free(&g);
    /* a budget that holds the cheapest call but not the dearest (scroll's required enum
     * argument): closing takes the cheapest function, so every call still completes (a call
     * cut inside its </tool_call> at 64 tokens, before) */
    struct nb_schema *sc[2] = {
        schema_of("{\"type\": \"object\", \"properties\": {\"direction\": {\"enum\": "
                  "[\"up\", \"down\"]}}, \"required\": [\"direction\"]}"),
        schema_of("{\"type\": \"object\", \"properties\": {}}")};
    char *tools[] = {"scroll", "back"};
    assert_int_equal(srv_tool_grammar_schema(&g, SRV_FMT_HERMES, tools,
                                             (const struct nb_schema *const *)sc, 2),
                     0);
    const char *least = "<tool_call>\n{\"name\": \"back\", \"arguments\": {}}\n</tool_call>";
    assert_int_equal(accepts(&g, least, 1), 1);
    int budget = (int)strlen(least) + 1, backs = 0;
    for (int r = 0; r < 20; r++) {
        uint64_t rng = 7 + (uint64_t)r;
        if (decode(&g, &v, &rng, NULL, 0, out, sizeof out, budget) < 0)
            fail_msg("tight call run %d: cut at %d tokens: %s", r, budget, out);
        assert_int_equal(accepts(&g, out, 1), 1);
        backs += strstr(out, "\"back\"") != NULL;
    }
    printf("# tight tool-call budget (%d tokens): 20 of 20 calls complete, %d of them back\n",
           budget, backs);
    /* a budget that holds the call the model wants but not the worst case of the first
     * token (nb_cons_cost: the dearest tool and schema): the model's tool and argument
     * are kept. Before, closing was set from the first token whenever the budget was not
     * above that worst case, and the cheapest tool was forced: the phone agent's calls
     * through the server all came out `back` at max_tokens 64 (issue 34). */
    const char *want = "<tool_call>\n{\"name\": \"scroll\", \"arguments\": {\"direction\": "
                       "\"down\"}}\n</tool_call>";
    assert_int_equal(accepts(&g, want, 1), 1);
    struct nb_cons c0;
    nb_cons_start(&g, &c0);
    const int worst = nb_cons_cost(&g, &c0), len = (int)strlen(want);
    int kept_from = kept_from_budget(&g, &v, want, 0, len + 1, worst + 1, out, sizeof out);
    printf("# wanted call of %d bytes: kept from a budget of %d tokens (worst case %d)\n", len,
           kept_from, worst);
    assert_true(kept_from > 0 && kept_from <= worst - 8);
    /* the same call written as a model writes it, in its own tokens: kept while the budget
     * holds those tokens and, from wherever the call is, the closing walk's tokens
     * (nb_cons_close_tokens), far below its bytes. Before, the budget was counted in
     * bytes (a token at least one) and nothing under len + 1 kept the call: the phone
     * agent's calls (26 tokens, 77 bytes) came out `back` at max_tokens 64 (issue 34) */
    const int n_tok = decode(&g, &v, NULL, want, 1, out, sizeof out, 1000);
    assert_string_equal(out, want);
    kept_from = kept_from_budget(&g, &v, want, 1, n_tok + 1, len + 1, out, sizeof out);
    printf("# the call in its own %d tokens: kept from a budget of %d tokens (%d bytes)\n", n_tok,
           kept_from, len);
    assert_true(kept_from > 0 && kept_from <= n_tok + 8);
    /* along that call at the tightest budget that keeps it, closing or not: the mask (its
     * closing walks shared, nb_cons_mask) allows what nb_cons_allows does, token for token */
    struct nb_cons c = c0;
    float *row = malloc(sizeof *row * (size_t)v.n_vocab);
    assert_non_null(row);
    int agreed = 0;
    for (int step = 0, at = 0; at < len; step++) {
        int k = longest_prefix(&v, want + at, (size_t)(len - at));
        assert_true(k >= 0);
        for (int closing = 0; closing < 2 && step % 5 == 0; closing++) {
            struct nb_cons u = c;
            u.closing = closing;
            u.budget = kept_from - step - 1;
            for (int i = 0; i < v.n_vocab; i++)
                row[i] = 0;
            int n = nb_cons_mask(&g, &v, &u, 0, row), allowed = 0;
            for (int i = 0; i < v.n_vocab; i++) {
                if ((row[i] == 0) != nb_cons_allows(&g, &v, &u, i, 0))
                    fail_msg("step %d (closing %d): token %d: the mask and the check differ", step,
                             closing, i);
                allowed += row[i] == 0;
            }
            assert_int_equal(n, allowed);
            assert_true(n > 0);
            agreed++;
        }
        int kn = (int)(v.off[k + 1] - v.off[k]);
        assert_int_equal(nb_cons_feed(&g, &c, want + at, (size_t)kn), 1);
        at += kn;
    }
    printf("# the mask and the check agree at %d budgeted states\n", agreed);
    free(row);
    nb_gram_free(&g);
    nb_schema_free(sc[0]);
    nb_schema_free(sc[1]);
    nb_vocab_bytes_free(&v);
    nb_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),           cmocka_unit_test(test_sequence),
        cmocka_unit_test(test_classify),       cmocka_unit_test(test_mask),
        cmocka_unit_test(test_forced_small),   cmocka_unit_test(test_forced_kjv),
        cmocka_unit_test(test_schema_accepts), cmocka_unit_test(test_schema_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
