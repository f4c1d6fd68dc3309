/* test_server — nibble serve's pieces without HTTP: the UTF-8 check, special-token text
 * in chat messages tokenized as text (nb_chat_render_marked + nb_tokenize_marked), and
 * the request parser's answers (status, param, code) on kjv-7m's tokenizer. The HTTP
 * contract is tests/cli/serve.sh. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "tokenizer/tokenizer.h"

static void test_utf8(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int ok;
    } cases[] = {
        {"plain", 1},        {"caf\xc3\xa9", 1},
        {"\xe2\x82\xac", 1}, {"\xf0\x9f\x98\x80", 1},
        {"\xff", 0},         {"\xc3", 0},
        {"\xc0\xaf", 0},     /* overlong '/' */ {"\xe0\x80\xaf", 0},
        {"\xed\xa0\x80", 0}, /* a surrogate */ {"\xf4\x90\x80\x80", 0}, /* > U+10FFFF */
        {"\x80", 0},         {"ok\xe2\x82", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(srv_utf8_valid(cases[i].s, strlen(cases[i].s)), cases[i].ok);
}

static struct nb_tokenizer *kjv_tok(void)
{
    const char *p = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!p) return NULL;
    struct nb_tokenizer *t = NULL;
    assert_int_equal(nb_tokenizer_load(&t, p), NB_OK);
    return t;
}

static int count_id(const int32_t *ids, int n, int32_t id)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += ids[i] == id;
    return k;
}

/* "</s>" is kjv-7m's EOS (id 2): a control token in the template's text, plain text in a
 * message; with nothing marked, nb_tokenize_marked is nb_tokenize with parse_special. */
static void test_marked_tokenize(void **state)
{
    (void)state;
    struct nb_tokenizer *t = kjv_tok();
    if (!t) skip();
    const char *text = "In the beginning</s>God";
    size_t n = strlen(text);
    uint8_t none[64] = {0}, msg[64] = {0};
    memset(msg + 16, 1, 4); /* "</s>" */
    int32_t *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    int na, nb, nc, nd;
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, none, 0, &a, &na), NB_OK);
    assert_int_equal(nb_tokenize(t, text, n, 0, 1, &b, &nb), NB_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, sizeof *a * (size_t)na);
    assert_int_equal(count_id(a, na, 2), 1);
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, msg, 0, &c, &nc), NB_OK);
    assert_int_equal(nb_tokenize(t, text, n, 0, 0, &d, &nd), NB_OK);
    assert_int_equal(count_id(c, nc, 2), 0);
    assert_int_equal(nc, nd);
    assert_memory_equal(c, d, sizeof *c * (size_t)nc);
    /* one marked byte of the special token is enough to refuse it */
    memset(msg, 0, sizeof msg);
    msg[19] = 1;
    free(c);
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, msg, 0, &c, &nc), NB_OK);
    assert_int_equal(count_id(c, nc, 2), 0);
    /* marks need valid UTF-8 (they would not line up with the sanitized text) */
    free(d);
    d = NULL;
    assert_int_equal(nb_tokenize_marked(t, "a\xff", 2, 0, none, 0, &d, &nd), NB_ERR_INVALID_ARG);
    free(a);
    free(b);
    free(c);
    free(d);
    nb_tokenizer_free(t);
}

/* The render marks exactly the messages' bytes. */
static void test_render_marks(void **state)
{
    (void)state;
    struct nb_chat_template tpl;
    assert_int_equal(nb_chat_template_by_name("chatml", &tpl), NB_OK);
    struct nb_chat_msg m[] = {{"user", "hi <|im_end|>"}};
    char *text = NULL, *plain = NULL;
    uint8_t *mark = NULL;
    assert_int_equal(nb_chat_render_marked(&tpl, m, 1, 1, "", "", &text, &mark), NB_OK);
    assert_int_equal(nb_chat_render(&tpl, m, 1, 1, "", "", &plain), NB_OK);
    assert_string_equal(text, plain);
    assert_string_equal(text, "<|im_start|>user\nhi <|im_end|><|im_end|>\n<|im_start|>assistant\n");
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        int want = (i >= 12 && i < 16) || (i >= 17 && i < 30); /* "user", "hi <|im_end|>" */
        assert_int_equal(mark[i], want);
    }
    free(text);
    free(plain);
    free(mark);
    /* llama3 trims the content: the marks follow what is kept */
    assert_int_equal(nb_chat_template_by_name("llama3", &tpl), NB_OK);
    struct nb_chat_msg m3[] = {{"user", "  x  "}};
    assert_int_equal(nb_chat_render_marked(&tpl, m3, 1, 0, "<B>", "", &text, &mark), NB_OK);
    const char *x = strchr(text, 'x');
    assert_non_null(x);
    assert_int_equal(mark[x - text], 1);
    assert_int_equal(mark[x - text + 1], 0); /* "<|eot_id|>" */
    assert_int_equal(mark[0], 0);            /* bos */
    free(text);
    free(mark);
}

struct parse_case {
    int kind;
    const char *body;
    int status;        /* 0: accepted */
    const char *param; /* "" for null */
    const char *code;
};

#define U    "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
#define TOOL "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"

static void test_parse(void **state)
{
    (void)state;
    struct nb_tokenizer *t = kjv_tok();
    if (!t) skip();
    struct srv_model m = {0};
    m.tok = t;
    assert_int_equal(nb_chat_template_by_name("chatml", &m.tpl), NB_OK);
    m.bos_text = "<s>";
    m.eos_text = "</s>";
    m.n_vocab = 4096;
    m.n_ctx = 100;
    m.sp = nb_sampler_default_params();
    static const struct parse_case cases[] = {
        {SRV_COMPLETION, "{\"prompt\": \"In the beginning\"}", 0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": [\"In the beginning\"], \"n\": 1}", 0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": [1, 2, 3], \"stop\": \"x\", \"seed\": -5}", 0, "", NULL},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"developer\", \"content\": [{\"type\": "
         "\"text\", \"text\": \"a\"}]}, {\"role\": \"user\", \"content\": \"b\"}]}",
         0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\"", 400, "", "invalid_json"},
        {SRV_COMPLETION, "\"x\"", 400, "", "invalid_json"},
        {SRV_COMPLETION, "{\"prompt\": \"\\u00ff\xff\"}", 400, "", "invalid_encoding"},
        /* a NUL (escaped; raw below) would end the text where C strings end: refused */
        {SRV_COMPLETION, "{\"prompt\": \"a\\u0000b\"}", 400, "", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"a\\\\u0000b\"}", 0, "", NULL}, /* "\\u0000": text */
        /* bytes after the JSON value: refused; whitespace is not */
        {SRV_COMPLETION, "{\"prompt\": \"x\"} {}", 400, "", "invalid_json"},
        {SRV_COMPLETION, "{\"prompt\": \"x\"}x", 400, "", "invalid_json"},
        {SRV_COMPLETION, "{\"prompt\": \"x\"} \r\n", 0, "", NULL},
        {SRV_COMPLETION, "{}", 400, "prompt", "missing_required_parameter"},
        {SRV_COMPLETION, "{\"prompt\": [\"a\", \"b\"]}", 400, "prompt", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": [4096]}", 400, "prompt", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": [1.5]}", 400, "prompt", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": []}", 400, "prompt", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 0}", 400, "max_tokens",
         "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 2.5}", 400, "max_tokens",
         "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"max_completion_tokens\": true}", 400,
         "max_completion_tokens", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"top_p\": 1.5}", 400, "top_p", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"top_k\": -1}", 400, "top_k", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 3}", 0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 8}", 0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 0}", 400, "n", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 9}", 400, "n", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 1.5}", 400, "n", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": \"2\"}", 400, "n", "invalid_type"},
        {SRV_CHAT, U "\"n\": 9}", 400, "n", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"stream\": 1}", 400, "stream", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": 1}}", 400,
         "stream_options.include_usage", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"stop\": {}}", 400, "stop", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": 21}", 400, "logprobs", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": true}", 400, "logprobs",
         "invalid_type"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
         "\"top_logprobs\": 3}",
         400, "top_logprobs", "invalid_value"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
         "\"logprobs\": 1}",
         400, "logprobs", "invalid_type"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
         "\"response_format\": {\"type\": \"json_object\"}}",
         0, "", NULL},
        {SRV_CHAT, U "\"response_format\": {\"type\": \"xml\"}}", 400, "response_format.type",
         "invalid_value"},
        {SRV_CHAT, U "\"response_format\": \"json\"}", 400, "response_format", "invalid_type"},
        {SRV_CHAT, U "\"response_format\": {\"type\": \"json_schema\"}}", 400,
         "response_format.json_schema", "invalid_type"},
        {SRV_CHAT,
         U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"x\", \"schema\": {\"type\": \"object\"}}}}",
         0, "", NULL},
        {SRV_CHAT,
         U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"x\", \"schema\": {}, \"strict\": true}}}",
         0, "", NULL},
        /* strict: a keyword outside the subset is a 400 that names it; not strict, JSON */
        {SRV_CHAT,
         U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": "
           "{\"type\": \"string\", \"pattern\": \"^a\"}}}, \"strict\": true}}}",
         400, "response_format.json_schema.schema", "unsupported_value"},
        {SRV_CHAT,
         U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": "
           "{\"type\": \"string\", \"pattern\": \"^a\"}}}}}}",
         0, "", NULL},
        {SRV_CHAT,
         U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"x\", \"schema\": {\"type\": \"string\"}, \"strict\": true}}}",
         400, "response_format.json_schema.schema", "unsupported_value"},
        {SRV_CHAT,
         U "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
           "\"strict\": true, \"parameters\": {\"type\": \"object\", \"properties\": "
           "{\"n\": {\"type\": \"integer\", \"minimum\": 0}}}}}]}",
         400, "tools[0].function.parameters", "unsupported_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_object\"}}", 0,
         "", NULL},
        /* tools */
        {SRV_CHAT,
         U "\"tools\": [" TOOL "], \"tool_choice\": \"required\", "
           "\"parallel_tool_calls\": false}",
         0, "", NULL},
        {SRV_CHAT,
         U "\"tools\": [" TOOL "], \"tool_choice\": {\"type\": \"function\", \"function\": "
           "{\"name\": \"f\"}}}",
         0, "", NULL},
        {SRV_CHAT, U "\"tools\": [], \"tool_choice\": \"auto\"}", 0, "", NULL},
        {SRV_CHAT, U "\"tools\": {}}", 400, "tools", "invalid_type"},
        {SRV_CHAT, U "\"tools\": [1]}", 400, "tools[0]", "invalid_type"},
        {SRV_CHAT, U "\"tools\": [{\"type\": \"code\"}]}", 400, "tools[0].type", "invalid_value"},
        {SRV_CHAT, U "\"tools\": [{\"type\": \"function\"}]}", 400, "tools[0].function",
         "invalid_type"},
        {SRV_CHAT, U "\"tools\": [" TOOL ", {\"type\": \"function\", \"function\": {}}]}", 400,
         "tools[1].function.name", "missing_required_parameter"},
        {SRV_CHAT, U "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}",
         400, "tools[0].function.name", "invalid_value"},
        {SRV_CHAT, U "\"tools\": [" TOOL ", " TOOL "]}", 400, "tools[1].function.name",
         "invalid_value"},
        {SRV_CHAT,
         U "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", "
           "\"parameters\": []}}]}",
         400, "tools[0].function.parameters", "invalid_type"},
        {SRV_CHAT,
         U "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", "
           "\"description\": 5}}]}",
         400, "tools[0].function.description", "invalid_type"},
        {SRV_CHAT, U "\"tool_choice\": \"required\"}", 400, "tool_choice", "invalid_value"},
        {SRV_CHAT, U "\"tools\": [" TOOL "], \"tool_choice\": \"any\"}", 400, "tool_choice",
         "invalid_value"},
        {SRV_CHAT, U "\"tools\": [" TOOL "], \"tool_choice\": 1}", 400, "tool_choice",
         "invalid_type"},
        {SRV_CHAT,
         U "\"tools\": [" TOOL "], \"tool_choice\": {\"type\": \"function\", \"function\": "
           "{\"name\": \"g\"}}}",
         400, "tool_choice.function.name", "invalid_value"},
        {SRV_CHAT, U "\"tools\": [" TOOL "], \"parallel_tool_calls\": 1}", 400,
         "parallel_tool_calls", "invalid_type"},
        {SRV_CHAT, U "\"functions\": []}", 400, "functions", "unsupported_parameter"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"tools\": [" TOOL "]}", 400, "tools",
         "unsupported_parameter"},
        /* tool messages */
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", "
         "\"content\": null, \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}]}, {\"role\": "
         "\"tool\", \"tool_call_id\": \"c\", \"content\": \"2\"}], \"tools\": [" TOOL "]}",
         0, "", NULL},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": \"not json\"}}]}]}",
         0, "", NULL},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"arguments\": \"{}\"}}]}]}",
         400, "messages[0].tool_calls[0].function.name", "invalid_type"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": 5}}]}]}",
         400, "messages[0].tool_calls[0].function.arguments", "invalid_type"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": 3}]}", 400,
         "messages[0].tool_calls", "invalid_type"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}",
         400, "messages[0].tool_calls", "invalid_value"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\", \"tool_call_id\": 5}]}", 400,
         "messages[0].tool_call_id", "invalid_type"},
        {SRV_COMPLETION,
         "{\"prompt\": \"x\", \"presence_penalty\": 0, \"frequency_penalty\": 0, "
         "\"logit_bias\": {}, \"echo\": false, \"suffix\": \"\"}",
         0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"frequency_penalty\": 0.5, "
         "\"presence_penalty\": -1.5}", 0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"frequency_penalty\": 2.5}", 400,
         "frequency_penalty", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"presence_penalty\": \"high\"}", 400,
         "presence_penalty", "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": {\"4096\": -100}}", 400, "logit_bias",
         "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": {\"5x\": 1}}", 400, "logit_bias",
         "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": 101}}", 400, "logit_bias",
         "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": \"ban\"}}", 400,
         "logit_bias", "invalid_value"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": [1]}", 400, "logit_bias",
         "invalid_type"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"echo\": true}", 400, "echo",
         "unsupported_parameter"},
        {SRV_CHAT, "{\"messages\": []}", 400, "messages", "invalid_value"},
        {SRV_CHAT, "{\"messages\": [1]}", 400, "messages[0]", "invalid_type"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"function\", \"content\": \"x\"}]}", 400,
         "messages[0].role", "invalid_value"},
        {SRV_CHAT,
         "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
         "\"image_url\"}]}]}",
         400, "messages[0].content", "invalid_value"},
        {SRV_COMPLETION,
         "{\"prompt\": \"And God said, Let there be light: and there was light. "
         "And God saw the light, that it was good: and God divided the light "
         "from the darkness. And God called the light Day, and the darkness he "
         "called Night. And God said, Let there be light: and there was light. And God "
         "saw the light, that it was good: and God divided the light from the "
         "darkness. And God called the light Day, and the darkness he called "
         "Night. And the evening and the morning were the first day.\"}",
         400, "prompt", "context_length_exceeded"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct parse_case *c = &cases[i];
        struct srv_request r;
        struct srv_error e = {0};
        /* the tools' system block is longer than the small context of the other cases */
        m.n_ctx = strstr(c->body, "\"tools\": [{") ? 4096 : 100;
        int rc = srv_parse_request(&m, (enum srv_kind)c->kind, c->body, strlen(c->body), &r, &e);
        if (c->status == 0) {
            if (rc) fail_msg("case %zu: refused: %s", i, e.message);
            assert_true(r.n_prompt > 0);
            srv_request_free(&r);
            continue;
        }
        if (rc == 0) fail_msg("case %zu (%s): accepted", i, c->body);
        if (e.status != c->status || strcmp(e.param, c->param) ||
            strcmp(e.code ? e.code : "", c->code))
            fail_msg("case %zu: %d '%s' '%s' (%s), want %d '%s' '%s'", i, e.status, e.param,
                     e.code ? e.code : "", e.message, c->status, c->param, c->code);
        assert_true(e.message[0] != '\0');
        char *json = srv_json_error(&e);
        cJSON *o = cJSON_Parse(json);
        assert_non_null(o);
        cJSON *er = cJSON_GetObjectItem(o, "error");
        assert_true(cJSON_IsString(cJSON_GetObjectItem(er, "message")));
        assert_string_equal(cJSON_GetObjectItem(er, "type")->valuestring, "invalid_request_error");
        assert_true(c->param[0] ? cJSON_IsString(cJSON_GetObjectItem(er, "param"))
                                : cJSON_IsNull(cJSON_GetObjectItem(er, "param")));
        cJSON_Delete(o);
        free(json);
    }
    /* the fields reach the request */
    struct srv_request r;
    struct srv_error e;
    static const char raw_nul[] = "{\"prompt\": \"a\0b\"}";
    assert_int_not_equal(srv_parse_request(&m, SRV_COMPLETION, raw_nul, sizeof raw_nul - 1, &r, &e),
                         0);
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "NUL character (byte 13)"));
    const char *b = "{\"prompt\": \"x\", \"max_tokens\": 7, \"temperature\": 0.5, \"top_k\": 3, "
                    "\"top_p\": 0.5, \"min_p\": 0.25, \"seed\": 9, \"stop\": [\"a\", \"\", \"b\"], "
                    "\"stream\": true, \"stream_options\": {\"include_usage\": true}}";
    assert_int_equal(srv_parse_request(&m, SRV_COMPLETION, b, strlen(b), &r, &e), 0);
    assert_int_equal(r.max_tokens, 7);
    assert_true(r.sp.temperature == 0.5f && r.sp.top_k == 3 && r.sp.top_p == 0.5f &&
                r.sp.min_p == 0.25f);
    assert_int_equal(r.sp.seed, 9);
    assert_int_equal(r.seed_given, 1);
    assert_int_equal(r.n_stops, 2); /* the empty one dropped */
    assert_string_equal(r.stops[1], "b");
    assert_true(r.stream && r.include_usage);
    assert_int_equal(r.prompt[0], 1); /* BOS, as nibble run */
    srv_request_free(&r);
    /* tools: the grammar of the output */
    m.n_ctx = 4096;
    static const struct {
        const char *body;
        enum srv_tool_choice tc;
        int n_tools, grammar_elems, json;
    } g_cases[] = {
        {U "\"tools\": [" TOOL "]}", SRV_TC_AUTO, 1, 0, 0},
        {U "\"tools\": [" TOOL "], \"tool_choice\": \"none\"}", SRV_TC_NONE, 1, 0, 0},
        {U "\"tools\": [" TOOL "], \"tool_choice\": \"required\"}", SRV_TC_REQUIRED, 1, 5, 0},
        {U "\"response_format\": {\"type\": \"json_object\"}}", SRV_TC_NONE, 0, 1, 1},
        {U "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", "
           "\"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"a\": "
           "{\"enum\": [1, 2]}}, \"required\": [\"a\"]}}}}",
         SRV_TC_NONE, 0, 1, 1},
        {U "\"tools\": [" TOOL ", {\"type\": \"function\", \"function\": {\"name\": \"g\"}}], "
           "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}",
         SRV_TC_NAMED, 2, 5, 0},
    };
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
        if (srv_parse_request(&m, SRV_CHAT, g_cases[i].body, strlen(g_cases[i].body), &r, &e))
            fail_msg("grammar case %zu: %s", i, e.message);
        assert_int_equal(r.tool_choice, g_cases[i].tc);
        assert_int_equal(r.n_tools, g_cases[i].n_tools);
        assert_int_equal(r.json_format, g_cases[i].json);
        assert_int_equal(r.grammar ? r.grammar->n : 0, g_cases[i].grammar_elems);
        assert_int_equal(r.tool_format, SRV_FMT_HERMES);
        /* a json_schema's schema is enforced: the grammar's object keeps to it */
        assert_int_equal(r.schema != NULL, strstr(g_cases[i].body, "\"enum\"") != NULL);
        if (r.schema) {
            assert_int_equal(r.grammar->el[0].n_schemas, 1);
            assert_ptr_equal(r.grammar->el[0].schemas[0], r.schema);
        }
        if (r.tool_choice == SRV_TC_NAMED) { /* only the named function */
            assert_string_equal(r.tools[0], "g");
            assert_int_equal(r.grammar->el[1].n_alts, 1);
            assert_string_equal(r.grammar->el[1].alts[0], "g\"");
        }
        srv_request_free(&r);
    }
    nb_tokenizer_free(t);
}

/* The context a Jinja template gets (when the interpreter runs: tokenizer/jinja.c; with
 * the placeholder that refuses every template, skipped): roles normalised, parts joined,
 * a call's arguments parsed into an object, tool_call_id, the tools offered (none with
 * tool_choice "none"), add_generation_prompt, and bos_token read as the control token. */
static void test_jinja_context(void **state)
{
    (void)state;
    static const char tpl[] =
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{% if m.content %}{{ m.content }}"
        "{% endif %}{% if m.tool_calls %} call {{ m.tool_calls[0].function.name }} "
        "{{ m.tool_calls[0].function.arguments.city }}{% endif %}{% if m.tool_call_id %} id "
        "{{ m.tool_call_id }}{% endif %}]{% endfor %}{% if tools %} tools {{ tools | length }} "
        "{{ tools[0].function.name }}{% endif %}{% if add_generation_prompt %} go{% endif %}";
    struct nb_jinja *j = NULL;
    if (nb_jinja_parse(tpl, strlen(tpl), &j) != NB_OK) skip();
    struct nb_tokenizer *t = kjv_tok();
    if (!t) {
        nb_jinja_free(j);
        skip();
    }
    struct srv_model m = {0};
    m.tok = t;
    m.jinja = j;
    assert_int_equal(nb_chat_template_by_name("chatml", &m.tpl), NB_OK);
    m.bos_text = "<s>";
    m.eos_text = "</s>";
    m.n_vocab = 4096;
    m.n_ctx = 4096;
    m.sp = nb_sampler_default_params();
    static const char *const body[2] = {
        "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": "
        "\"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", "
        "\"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
        "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
        "\"arguments\": \"{\\\"city\\\": \\\"Ur\\\"}\"}}]}, {\"role\": \"tool\", "
        "\"tool_call_id\": \"c1\", \"content\": \"hot\"}], \"tools\": [" TOOL "]",
        ", \"tool_choice\": \"none\""};
    static const char *const want[2] = {
        "<s>[system:Be brief.][user:ab][assistant: call f Ur][tool:hot id c1] tools 1 f go",
        "<s>[system:Be brief.][user:ab][assistant: call f Ur][tool:hot id c1] go"};
    for (int k = 0; k < 2; k++) {
        char b[2048];
        snprintf(b, sizeof b, "%s%s}", body[0], k ? body[1] : "");
        struct srv_request r;
        struct srv_error e;
        if (srv_parse_request(&m, SRV_CHAT, b, strlen(b), &r, &e)) fail_msg("%s", e.message);
        int32_t *ids = NULL;
        int n = 0;
        assert_int_equal(nb_tokenize(t, want[k], strlen(want[k]), 0, 1, &ids, &n), NB_OK);
        assert_int_equal(r.n_prompt, n);
        assert_memory_equal(r.prompt, ids, sizeof *ids * (size_t)n);
        assert_int_equal(r.prompt[0], 1); /* <s>: the control token */
        free(ids);
        srv_request_free(&r);
    }
    nb_jinja_free(j);
    nb_tokenizer_free(t);
}

/* ---------------------------------------------------------------- tools */

#define TOOLS_JSON                                                                                 \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "        \
    "\"Get the weather \\\"now\\\"\\n\", \"parameters\": {\"type\": \"object\", \"properties\": "  \
    "{\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": "        \
    "[\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": "  \
    "{\"type\": \"object\", \"properties\": {}}}}]"

/* The renders of @huggingface/jinja 0.5.11 with the models' own templates (Qwen2.5,
 * Qwen3, Llama 3.2) on the same conversations; @DATE@ is today's date. */
/* qwen25/a */
static const char k_render_qwen25_a[] =
    "<|im_start|>system\n"
    "Be brief.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
    "weather \\\"now\\\"\\n\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "22 C\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "It is 22 C.<|im_end|>\n"
    "<|im_start|>user\n"
    "And Rome?<|im_end|>\n"
    "<|im_start|>assistant\n";

/* qwen25/b */
static const char k_render_qwen25_b[] =
    "<|im_start|>system\n"
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
    "weather \\\"now\\\"\\n\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Checking.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"noop\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "1\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "2\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

/* qwen3/a */
static const char k_render_qwen3_a[] =
    "<|im_start|>system\n"
    "Be brief.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
    "weather \\\"now\\\"\\n\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "22 C\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "It is 22 C.<|im_end|>\n"
    "<|im_start|>user\n"
    "And Rome?<|im_end|>\n"
    "<|im_start|>assistant\n";

/* qwen3/b */
static const char k_render_qwen3_b[] =
    "<|im_start|>system\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
    "weather \\\"now\\\"\\n\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Checking.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"noop\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "1\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "2\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

/* llama32/a */
static const char k_render_llama32_a[] =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Environment: ipython\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: @DATE@\n"
    "\n"
    "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n"
    "\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name "
    "and its value}.Do not use variables.\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_weather\",\n"
    "        \"description\": \"Get the weather \\\"now\\\"\\n\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {\n"
    "                \"city\": {\n"
    "                    \"type\": \"string\"\n"
    "                },\n"
    "                \"days\": {\n"
    "                    \"type\": \"integer\"\n"
    "                }\n"
    "            },\n"
    "            \"required\": [\n"
    "                \"city\"\n"
    "            ]\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"noop\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {}\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": "
    "2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n"
    "\n"
    "\"22 C\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "It is 22 C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "And Rome?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n";

static char *with_date(const char *s)
{
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    const char *at = strstr(s, "@DATE@");
    size_t n = strlen(s) + strlen(date) + 1;
    char *o = malloc(n);
    assert_non_null(o);
    if (!at) {
        strcpy(o, s);
        return o;
    }
    snprintf(o, n, "%.*s%s%s", (int)(at - s), s, date, at + 6);
    return o;
}

static void check_render(const char *family, int qwen_default, const struct nb_chat_tmsg *msgs,
                         int n, const cJSON *tools, const char *want)
{
    struct nb_chat_template tpl;
    assert_int_equal(nb_chat_template_by_name(family, &tpl), NB_OK);
    if (qwen_default)
        tpl.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    char *text = NULL, *w = with_date(want);
    uint8_t *mark = NULL;
    assert_int_equal(nb_chat_render_tools(&tpl, msgs, n, tools, 1, "<|begin_of_text|>",
                                          "<|eot_id|>", &text, &mark),
                     NB_OK);
    if (strcmp(text, w)) fail_msg("%s: rendered\n%s\nwant\n%s", family, text, w);
    /* a tool's name and description are data; the wrappers are the template's */
    const char *p = strstr(text, "get_weather");
    assert_non_null(p);
    assert_int_equal(mark[p - text], 1);
    p = strstr(text, "\"now\\\"");
    if (p) assert_int_equal(mark[p - text], 1);
    p = strstr(text, "<tool_call>\n{\"name\": \"get_weather");
    if (p) {
        assert_int_equal(mark[p - text], 0);
        assert_int_equal(mark[p - text + 22], 1); /* the name */
    }
    assert_int_equal(mark[0], 0);
    free(text);
    free(mark);
    free(w);
}

static void test_render_tools(void **state)
{
    (void)state;
    cJSON *tools = cJSON_Parse(TOOLS_JSON);
    cJSON *a1 = cJSON_Parse("{\"city\": \"Paris\", \"days\": 2}");
    cJSON *a2 = cJSON_Parse("{\"city\": \"Rome\"}"), *a3 = cJSON_Parse("{}");
    assert_non_null(tools);
    struct nb_chat_call c1[] = {{"get_weather", a1}}, c2[] = {{"get_weather", a2}, {"noop", a3}};
    struct nb_chat_tmsg a[] = {
        {"system", "Be brief.", NULL, 0},
        {"user", "Weather in Paris?", NULL, 0},
        {"assistant", "", c1, 1},
        {"tool", "22 C", NULL, 0},
        {"assistant", "It is 22 C.", NULL, 0},
        {"user", "And Rome?", NULL, 0},
    };
    struct nb_chat_tmsg b[] = {
        {"user", "Hi", NULL, 0},
        {"assistant", "Checking.", c2, 2},
        {"tool", "1", NULL, 0},
        {"tool", "2", NULL, 0},
    };
    check_render("chatml", 1, a, 6, tools, k_render_qwen25_a);
    check_render("chatml", 1, b, 4, tools, k_render_qwen25_b);
    check_render("qwen3", 0, a, 6, tools, k_render_qwen3_a);
    check_render("qwen3", 0, b, 4, tools, k_render_qwen3_b);
    check_render("llama3", 0, a, 6, tools, k_render_llama32_a);
    /* llama3 takes one call per message; gemma has no tool format */
    struct nb_chat_template tpl;
    char *text = NULL;
    assert_int_equal(nb_chat_template_by_name("llama3", &tpl), NB_OK);
    assert_int_equal(nb_chat_render_tools(&tpl, b, 4, tools, 1, "", "", &text, NULL),
                     NB_ERR_INVALID_ARG);
    assert_int_equal(nb_chat_template_by_name("gemma", &tpl), NB_OK);
    assert_int_equal(nb_chat_render_tools(&tpl, a, 6, tools, 1, "", "", &text, NULL),
                     NB_ERR_UNSUPPORTED);
    assert_null(text);
    cJSON_Delete(tools);
    cJSON_Delete(a1);
    cJSON_Delete(a2);
    cJSON_Delete(a3);
}

static void check_calls(const char *text, enum srv_tool_format f, int want_n,
                        const char *const *want, const char *want_content)
{
    char *names[] = {"get_weather", "noop"};
    struct srv_tool_call *calls = NULL;
    char *content = NULL;
    int n = -1;
    assert_int_equal(srv_tool_calls_parse(text, strlen(text), f, names, 2, &calls, &n, &content),
                     0);
    if (n != want_n) fail_msg("%s: %d calls, want %d", text, n, want_n);
    for (int i = 0; i < n; i++) {
        assert_string_equal(calls[i].name, want[2 * i]);
        assert_string_equal(calls[i].arguments, want[2 * i + 1]);
    }
    if (want_content)
        assert_string_equal(content ? content : "(null)", want_content);
    else if (content)
        fail_msg("%s: content '%s', want null", text, content);
    srv_tool_calls_free(calls, n);
    free(content);
}

static void test_tool_calls(void **state)
{
    (void)state;
    const enum srv_tool_format H = SRV_FMT_HERMES, L = SRV_FMT_LLAMA3;
    const char *w1[] = {"get_weather", "{\"city\":\"Paris\"}"};
    const char *w2[] = {"get_weather", "{\"city\":\"Paris\"}", "noop", "{}"};
    check_calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                "</tool_call>",
                H, 1, w1, NULL);
    check_calls("Let me look.\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":"
                "\"Paris\"}}</tool_call>\n<tool_call>\n{\"name\": \"noop\"}\n</tool_call>",
                H, 2, w2, "Let me look.\n\n");
    /* malformed calls stay in the content: not JSON, an unknown name, arguments not an
     * object, unterminated */
    check_calls("<tool_call>{\"name\": \"get_weather\", </tool_call>", H, 0, NULL,
                "<tool_call>{\"name\": \"get_weather\", </tool_call>");
    check_calls("<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call> ok", H, 0, NULL,
                "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call> ok");
    check_calls("<tool_call>{\"name\": \"noop\", \"arguments\": [1]}</tool_call>", H, 0, NULL,
                "<tool_call>{\"name\": \"noop\", \"arguments\": [1]}</tool_call>");
    check_calls("a <tool_call>{\"name\": \"noop\"}", H, 0, NULL,
                "a <tool_call>{\"name\": \"noop\"}");
    check_calls("<tool_call>{\"name\": \"noop\"} x</tool_call><tool_call>{\"name\": "
                "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
                H, 1, w1, "<tool_call>{\"name\": \"noop\"} x</tool_call>");
    check_calls("Just text.", H, 0, NULL, "Just text.");
    check_calls(" \n", H, 0, NULL, NULL);
    /* Llama 3.1: the whole answer is the call */
    check_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", L, 1, w1,
                NULL);
    check_calls("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
                "\"Paris\"}}\n",
                L, 1, w1, NULL);
    check_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}} and more", L, 0,
                NULL,
                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}} and more");
    check_calls("The weather is fine.", L, 0, NULL, "The weather is fine.");
    /* where a call begins (tool_choice auto turns the call's grammar on there) */
    assert_int_equal(srv_tool_call_start("Sure. <tool_call>\n{", 19, H, 0), 6);
    assert_int_equal(srv_tool_call_start("Sure. <tool_ca", 14, H, 0), -1);
    assert_int_equal(srv_tool_call_start(" \n{\"name\"", 9, L, 1), 2);
    assert_int_equal(srv_tool_call_start(" \n{\"name\"", 9, L, 0), -1);
    assert_int_equal(srv_tool_call_start("Sure {", 6, L, 1), -1);
    /* what a stream may send before the end */
    static const struct {
        const char *text;
        enum srv_tool_format f;
        size_t safe;
    } s[] = {
        {"Hello", SRV_FMT_HERMES, 5},
        {"Hello <tool", SRV_FMT_HERMES, 6},
        {"Hello <tool_call>{", SRV_FMT_HERMES, 6},
        {"Hello <b>", SRV_FMT_HERMES, 9},
        {"\n <tool_call>", SRV_FMT_HERMES, 0},
        {"  ", SRV_FMT_HERMES, 0},
        {"<", SRV_FMT_HERMES, 0},
        {" {\"name", SRV_FMT_LLAMA3, 0},
        {"<|python", SRV_FMT_LLAMA3, 0},
        {"Sure", SRV_FMT_LLAMA3, 4},
        {" ", SRV_FMT_LLAMA3, 0},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (srv_tool_text_safe(s[i].text, strlen(s[i].text), s[i].f) != s[i].safe)
            fail_msg("'%s': %zu safe, want %zu", s[i].text,
                     srv_tool_text_safe(s[i].text, strlen(s[i].text), s[i].f), s[i].safe);
}

/* log-softmax and the top alternatives, ties to the lower id */
static void test_logprob_of(void **state)
{
    (void)state;
    float x[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    struct srv_logprob l;
    srv_logprob_of(x, 6, 2, 3, &l);
    double lse = 0;
    for (int i = 0; i < 6; i++)
        lse += exp(x[i]);
    lse = log(lse);
    assert_int_equal(l.tok, 2);
    assert_true(fabs(l.lp - (2.0 - lse)) < 1e-6);
    assert_int_equal(l.n_top, 3);
    assert_int_equal(l.top_tok[0], 1);
    assert_int_equal(l.top_tok[1], 3);
    assert_int_equal(l.top_tok[2], 2);
    assert_true(fabs(l.top_lp[0] - (3.0 - lse)) < 1e-6);
    srv_logprob_of(x, 6, 4, 0, &l);
    assert_int_equal(l.n_top, 0);
    srv_logprob_of(x, 6, 0, 20, &l); /* more than the vocabulary: all of it */
    assert_int_equal(l.n_top, 6);
    assert_int_equal(l.top_tok[5], 4);
}

/* The <think> split: where the reasoning and the content are, for whole answers and for
 * a stream's text so far (what is settled). */
static void test_think_split(void **state)
{
    (void)state;
    struct srv_think t;
    const char *a = "<think>\nLet me see.\n</think>\n\nThe answer.";
    srv_think_split(a, strlen(a), 0, 1, &t);
    assert_int_equal(t.found, 1);
    assert_int_equal(t.r_from, 7);
    assert_int_equal(t.r_to, 20); /* "\nLet me see.\n" */
    assert_int_equal(t.c_from, 30);
    assert_string_equal(a + t.c_from, "The answer.");
    /* leading whitespace, then the tag */
    srv_think_split("\n <think>x</think>y", 19, 0, 1, &t);
    assert_true(t.found && t.r_from == 9 && t.r_to == 10 && t.c_from == 18);
    /* no tag: all content, at once */
    srv_think_split("Hello <think>", 13, 0, 0, &t);
    assert_true(!t.found && t.c_from == 0 && t.safe == 13);
    /* a stream: the start of "<think>" is not settled, nor whitespace before it */
    srv_think_split("  <th", 5, 0, 0, &t);
    assert_true(!t.found && t.safe == 0);
    srv_think_split("  <th", 5, 0, 1, &t); /* done: it was content */
    assert_true(!t.found && t.safe == 5 && t.c_from == 0);
    /* inside the reasoning: the start of "</think>" held back */
    srv_think_split("<think>abc</th", 14, 0, 0, &t);
    assert_true(t.found && t.r_from == 7 && t.r_to == 10 && t.safe == 10 && t.c_from == 14);
    srv_think_split("<think>abc<", 11, 0, 0, &t);
    assert_true(t.r_to == 10 && t.safe == 10);
    srv_think_split("<think>abc<", 11, 0, 1, &t); /* cut by length: all reasoning */
    assert_true(t.r_to == 11 && t.c_from == 11);
    /* the prompt ended with <think>: reasoning from the first byte */
    srv_think_split("plan</think>\n\nok", 16, 1, 1, &t);
    assert_true(t.found && t.r_from == 0 && t.r_to == 4 && t.c_from == 14);
    srv_think_split("plan", 4, 1, 0, &t);
    assert_true(t.found && t.r_to == 4 && t.safe == 4);
}

/* A thinking answer served: message.reasoning_content and content, and a stream whose
 * deltas, fed a token at a time (Qwen3's pieces), add up to the same two texts. */
static void test_reasoning_answer(void **state)
{
    (void)state;
    static struct nb_server s;
    static struct srv_job j;
    struct srv_job *jp = &j;
    memset(&j, 0, sizeof j);
    snprintf(s.model_name, sizeof s.model_name, "m");
    snprintf(j.id, sizeof j.id, "chatcmpl-x");
    j.req.kind = SRV_CHAT;
    j.req.reasoning = 1;
    static const char *const toks[] = {"<think>", "\n",     "Okay", ", the", " user",
                                       " asks",   ".\n",    "</",   "think", ">\n\n",
                                       "Hello",   " there", "!"};
    static char text[256];
    char reasoning[256] = "", content[256] = "";
    size_t sent = 0;
    j.text = text;
    j.state = JOB_RUNNING;
    for (size_t i = 0; i <= sizeof toks / sizeof toks[0]; i++) {
        if (i < sizeof toks / sizeof toks[0]) {
            strcat(text, toks[i]);
        } else {
            j.state = JOB_DONE;
        }
        j.text_len = strlen(text);
        size_t upto = srv_stream_sendable(&j);
        assert_true(upto >= sent && upto <= j.text_len);
        if (upto == sent) continue;
        char *chunk = srv_json_text_chunk(&s, &j, sent, upto, 0, 0);
        cJSON *o = cJSON_Parse(chunk);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0), "delta");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
        if (r) strcat(reasoning, r->valuestring);
        if (c) strcat(content, c->valuestring);
        /* "</" and "think" are held until they turn out to be the tag */
        if (i == 7 || i == 8) fail_msg("token %zu sent while it may begin </think>", i);
        cJSON_Delete(o);
        free(chunk);
        sent = upto;
    }
    assert_string_equal(reasoning, "\nOkay, the user asks.\n");
    assert_string_equal(content, "Hello there!");
    j.finish = "stop";
    char *res = srv_json_result(&s, &jp, 1);
    cJSON *o = cJSON_Parse(res);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0), "message");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content")->valuestring,
                        reasoning);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring, content);
    cJSON_Delete(o);
    free(res);
    /* --reasoning-format none (reasoning off): the text as written, no reasoning_content */
    j.req.reasoning = 0;
    res = srv_json_result(&s, &jp, 1);
    o = cJSON_Parse(res);
    m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0), "message");
    assert_null(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring, text);
    cJSON_Delete(o);
    free(res);
    /* a Hermes call after the reasoning: parsed from the content */
    char *names[] = {"f"};
    j.req.reasoning = 1;
    j.req.tools = names;
    j.req.n_tools = 1;
    j.req.tool_choice = SRV_TC_AUTO;
    snprintf(text, sizeof text,
             "<think>call f</think>\n\n<tool_call>\n{\"name\": \"f\", "
             "\"arguments\": {}}\n</tool_call>");
    j.text_len = strlen(text);
    res = srv_json_result(&s, &jp, 1);
    o = cJSON_Parse(res);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
    m = cJSON_GetObjectItemCaseSensitive(ch, "message");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content")->valuestring,
                        "call f");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m, "content")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls")), 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(ch, "finish_reason")->valuestring,
                        "tool_calls");
    cJSON_Delete(o);
    free(res);
    j.req.tools = NULL;
    j.req.n_tools = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),         cmocka_unit_test(test_marked_tokenize),
        cmocka_unit_test(test_render_marks), cmocka_unit_test(test_parse),
        cmocka_unit_test(test_logprob_of),   cmocka_unit_test(test_render_tools),
        cmocka_unit_test(test_tool_calls),   cmocka_unit_test(test_jinja_context),
        cmocka_unit_test(test_think_split),  cmocka_unit_test(test_reasoning_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
