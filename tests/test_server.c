/* test_server — nibble serve's pieces without HTTP: the UTF-8 check, special-token text
 * in chat messages tokenized as text (nb_chat_render_marked + nb_tokenize_marked), and
 * the request parser's answers (status, param, code) on kjv-7m's tokenizer. The HTTP
 * contract is tests/cli/serve.sh. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

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
    assert_int_equal(nb_tokenizer_load_for_model(&t, p), NB_OK);
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
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, none, &a, &na), NB_OK);
    assert_int_equal(nb_tokenize(t, text, n, 0, 1, &b, &nb), NB_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, sizeof *a * (size_t)na);
    assert_int_equal(count_id(a, na, 2), 1);
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, msg, &c, &nc), NB_OK);
    assert_int_equal(nb_tokenize(t, text, n, 0, 0, &d, &nd), NB_OK);
    assert_int_equal(count_id(c, nc, 2), 0);
    assert_int_equal(nc, nd);
    assert_memory_equal(c, d, sizeof *c * (size_t)nc);
    /* one marked byte of the special token is enough to refuse it */
    memset(msg, 0, sizeof msg);
    msg[19] = 1;
    free(c);
    assert_int_equal(nb_tokenize_marked(t, text, n, 0, msg, &c, &nc), NB_OK);
    assert_int_equal(count_id(c, nc, 2), 0);
    /* marks need valid UTF-8 (they would not line up with the sanitized text) */
    free(d);
    d = NULL;
    assert_int_equal(nb_tokenize_marked(t, "a\xff", 2, 0, none, &d, &nd), NB_ERR_INVALID_ARG);
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
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"n\": 3}", 400, "n", "unsupported_value"},
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
         400, "response_format", "unsupported_parameter"},
        {SRV_COMPLETION,
         "{\"prompt\": \"x\", \"presence_penalty\": 0, \"frequency_penalty\": 0, "
         "\"logit_bias\": {}, \"echo\": false, \"suffix\": \"\"}",
         0, "", NULL},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"frequency_penalty\": 0.5}", 400,
         "frequency_penalty", "unsupported_parameter"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": -100}}", 400, "logit_bias",
         "unsupported_parameter"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"echo\": true}", 400, "echo",
         "unsupported_parameter"},
        {SRV_CHAT, "{\"messages\": []}", 400, "messages", "invalid_value"},
        {SRV_CHAT, "{\"messages\": [1]}", 400, "messages[0]", "invalid_type"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", 400,
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
    nb_tokenizer_free(t);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),         cmocka_unit_test(test_marked_tokenize),
        cmocka_unit_test(test_render_marks), cmocka_unit_test(test_parse),
        cmocka_unit_test(test_logprob_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
