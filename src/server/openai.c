/* server/openai.c — the OpenAI API's bodies: a request's JSON checked field by field and
 * its prompt tokenized (a chat rendered with the model's template, the messages' text
 * never read as control tokens), and the JSON of results, stream chunks and errors.
 * Every error names the field (OpenAI's "param") and says what is wrong with it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/log.h"
#include "server/server.h"

int srv_fail(struct srv_error *e, int status, const char *param, const char *code, const char *fmt,
             ...)
{
    va_list ap;
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

void srv_request_free(struct srv_request *r)
{
    if (!r) return;
    free(r->prompt);
    free(r->bias_id);
    free(r->bias);
    for (int i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    for (int i = 0; i < r->n_tools; i++)
        free(r->tools[i]);
    free(r->tools);
    nb_gram_free(r->grammar); /* before the schemas it borrows */
    free(r->grammar);
    nb_gbnf_free(r->gbnf);
    nb_schema_free(r->schema);
    for (int i = 0; r->tool_schemas && i < r->n_tools; i++)
        nb_schema_free(r->tool_schemas[i]);
    free(r->tool_schemas);
    free(r->emb_off);
    memset(r, 0, sizeof *r);
}

int srv_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int n;
        unsigned cp, min;
        if ((c & 0xe0) == 0xc0)
            n = 1, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0)
            n = 2, cp = c & 0x0f, min = 0x800;
        else if ((c & 0xf8) == 0xf0)
            n = 3, cp = c & 0x07, min = 0x10000;
        else
            return 0;
        if (len - i <= (size_t)n) return 0;
        for (int k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += (size_t)n + 1;
    }
    return 1;
}

/* ---------------------------------------------------------------- fields */

/* A number field in [lo, hi] (absent or null: *out unchanged). 0 or -1 with *e. */
static int get_number(const cJSON *o, const char *key, double lo, double hi, double *out,
                      struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return srv_fail(e, 400, key, "invalid_type", "'%s' must be a number", key);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return srv_fail(e, 400, key, "invalid_value", "'%s' is %g: it must be in [%g, %g]", key,
                        v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return 0;
}

/* A whole number in [lo, hi]; *given (may be NULL) set to 1 when present. */
static int get_int(const cJSON *o, const char *key, double lo, double hi, double *out, int *given,
                   struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
        return srv_fail(e, 400, key, "invalid_type", "'%s' must be an integer", key);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return srv_fail(e, 400, key, "invalid_value", "'%s' is %.0f: it must be in [%.0f, %.0f]",
                        key, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    if (given) *given = 1;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, int *out, struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v))
        return srv_fail(e, 400, key, "invalid_type", "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int add_stop(struct srv_request *r, const char *s, struct srv_error *e)
{
    if (r->n_stops == SRV_MAX_STOPS)
        return srv_fail(e, 400, "stop", "invalid_value", "'stop' has more than %d strings",
                        SRV_MAX_STOPS);
    if (!s[0]) return 0;
    if (strlen(s) > 256)
        return srv_fail(e, 400, "stop", "invalid_value",
                        "a 'stop' string is longer than 256 "
                        "bytes");
    if (!(r->stops[r->n_stops] = strdup(s))) return srv_fail(e, 500, NULL, NULL, "out of memory");
    r->n_stops++;
    return 0;
}

/* Fields that select what nibble does not do yet: refused, so that a client never gets
 * an answer that silently ignored what it asked for. */
static int check_unsupported(const cJSON *o, struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "functions");
    if (v && !cJSON_IsNull(v))
        return srv_fail(e, 400, "functions", "unsupported_parameter",
                        "'functions' is not supported by nibble serve (use 'tools')");
    v = cJSON_GetObjectItemCaseSensitive(o, "function_call");
    if (v && !cJSON_IsNull(v))
        return srv_fail(e, 400, "function_call", "unsupported_parameter",
                        "'function_call' is not supported by nibble serve (use 'tool_choice')");
    v = cJSON_GetObjectItemCaseSensitive(o, "echo");
    if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v))
        return srv_fail(e, 400, "echo", "unsupported_parameter",
                        "'echo' is not supported by nibble serve");
    v = cJSON_GetObjectItemCaseSensitive(o, "suffix");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return srv_fail(e, 400, "suffix", "unsupported_parameter",
                        "'suffix' is not supported by nibble serve");
    return 0;
}

/* Chat: logprobs true/false and top_logprobs 0..20; completions: logprobs 0..20 (the
 * number of alternatives; OpenAI's legacy field). */
static int parse_logprobs(const cJSON *o, struct srv_request *r, struct srv_error *e)
{
    double x = 0;
    int given = 0;
    if (r->kind == SRV_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e)) return -1;
        if (get_int(o, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, &given, e)) return -1;
        if (given && !r->logprobs && x > 0)
            return srv_fail(e, 400, "top_logprobs", "invalid_value",
                            "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int)x;
        return 0;
    }
    if (get_int(o, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, &given, e)) return -1;
    r->logprobs = given;
    r->top_logprobs = (int)x;
    return 0;
}

/* A schema enforced (param names it): *out compiled, or NULL when it is outside the
 * subset (constrain.h) and not strict — then the output is only JSON, which the log says;
 * strict, that is a 400 naming what is outside. */
static int compile_schema(const cJSON *schema, int strict, const char *param,
                          struct nb_schema **out, struct srv_error *e)
{
    *out = NULL;
    enum nb_status st = nb_schema_compile(schema, out);
    if (st == NB_OK) return 0;
    if (st == NB_ERR_NOMEM) return srv_fail(e, 500, NULL, NULL, "out of memory");
    if (strict)
        return srv_fail(e, 400, param, "unsupported_value",
                        "'%s' cannot be enforced with 'strict': true: %s", param, nb_last_error());
    NB_LOGW("serve: '%s' is not enforced, only JSON syntax is (%s)", param, nb_last_error());
    return 0;
}

/* response_format: text, json_object, or json_schema (the output constrained to a JSON
 * object that keeps to the schema when it is inside the subset of constrain.h). */
static int parse_response_format(const cJSON *o, struct srv_request *r, struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (!v || cJSON_IsNull(v)) return 0;
    const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
    if (!cJSON_IsString(t))
        return srv_fail(e, 400, "response_format", "invalid_type",
                        "'response_format' must be an object with a string 'type'");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) {
        r->json_format = 1;
        return 0;
    }
    if (strcmp(t->valuestring, "json_schema"))
        return srv_fail(e, 400, "response_format.type", "invalid_value",
                        "'response_format.type' is '%.64s': it must be 'text', 'json_object' or "
                        "'json_schema'",
                        t->valuestring);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(v, "json_schema");
    if (!cJSON_IsObject(js))
        return srv_fail(e, 400, "response_format.json_schema", "invalid_type",
                        "'response_format.json_schema' must be an object");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (sc && !cJSON_IsNull(sc) && !cJSON_IsObject(sc))
        return srv_fail(e, 400, "response_format.json_schema.schema", "invalid_type",
                        "'response_format.json_schema.schema' must be an object");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(js, "strict");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st))
        return srv_fail(e, 400, "response_format.json_schema.strict", "invalid_type",
                        "'response_format.json_schema.strict' must be true or false");
    r->json_format = 1;
    if (!cJSON_IsObject(sc)) return 0;
    return compile_schema(sc, cJSON_IsTrue(st), "response_format.json_schema.schema", &r->schema,
                          e);
}

/* A function name as OpenAI allows it: [A-Za-z0-9_-]{1,64}. */
static int valid_tool_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* tools[i]: a function's name (kept in r->tools[i]) and its parameters' schema. */
static int parse_tool(const cJSON *t, int i, struct srv_request *r, struct srv_error *e)
{
    char param[96];
    snprintf(param, sizeof param, "tools[%d]", i);
    if (!cJSON_IsObject(t))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
    snprintf(param, sizeof param, "tools[%d].type", i);
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function"))
        return srv_fail(e, 400, param, "invalid_value", "'%s' must be \"function\"", param);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    snprintf(param, sizeof param, "tools[%d].function", i);
    if (!cJSON_IsObject(f))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    snprintf(param, sizeof param, "tools[%d].function.name", i);
    if (!cJSON_IsString(name))
        return srv_fail(e, 400, param, name ? "invalid_type" : "missing_required_parameter",
                        "'%s' must be a string", param);
    if (!valid_tool_name(name->valuestring))
        return srv_fail(e, 400, param, "invalid_value",
                        "'%s' must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'", param);
    for (int k = 0; k < i; k++)
        if (!strcmp(r->tools[k], name->valuestring))
            return srv_fail(e, 400, param, "invalid_value",
                            "'%s': the function '%s' is listed twice", param, name->valuestring);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(f, "description");
    snprintf(param, sizeof param, "tools[%d].function.description", i);
    if (d && !cJSON_IsNull(d) && !cJSON_IsString(d))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be a string", param);
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    snprintf(param, sizeof param, "tools[%d].function.parameters", i);
    if (pa && !cJSON_IsNull(pa) && !cJSON_IsObject(pa))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(f, "strict");
    snprintf(param, sizeof param, "tools[%d].function.strict", i);
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be true or false", param);
    if (!(r->tools[i] = strdup(name->valuestring)))
        return srv_fail(e, 500, NULL, NULL, "out of memory");
    r->n_tools = i + 1;
    snprintf(param, sizeof param, "tools[%d].function.parameters", i);
    if (cJSON_IsObject(pa) && compile_schema(pa, cJSON_IsTrue(st), param, &r->tool_schemas[i], e))
        return -1;
    return 0;
}

/* tool_choice: none, auto, required or one function named (then that function is
 * r->tools[0], the only one the call may name). */
static int parse_tool_choice(const cJSON *tc, struct srv_request *r, struct srv_error *e)
{
    const char *named = NULL;
    if (cJSON_IsString(tc)) {
        if (!strcmp(tc->valuestring, "none"))
            r->tool_choice = SRV_TC_NONE;
        else if (!strcmp(tc->valuestring, "auto"))
            r->tool_choice = r->n_tools ? SRV_TC_AUTO : SRV_TC_NONE;
        else if (!strcmp(tc->valuestring, "required"))
            r->tool_choice = SRV_TC_REQUIRED;
        else
            return srv_fail(e, 400, "tool_choice", "invalid_value",
                            "'tool_choice' is '%.64s': it must be 'none', 'auto', 'required' "
                            "or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                            tc->valuestring);
    } else if (cJSON_IsObject(tc)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(tc, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(name))
            return srv_fail(e, 400, "tool_choice", "invalid_value",
                            "'tool_choice' as an object must be {\"type\": \"function\", "
                            "\"function\": {\"name\": ...}}");
        named = name->valuestring;
        r->tool_choice = SRV_TC_NAMED;
    } else {
        return srv_fail(e, 400, "tool_choice", "invalid_type",
                        "'tool_choice' must be a string or an object");
    }
    if (r->tool_choice >= SRV_TC_REQUIRED && !r->n_tools)
        return srv_fail(e, 400, "tool_choice", "invalid_value",
                        "'tool_choice' asks for a call but 'tools' lists no function");
    if (!named) return 0;
    int k = 0; /* the one function forced: the only name kept */
    while (k < r->n_tools && strcmp(r->tools[k], named))
        k++;
    if (k == r->n_tools)
        return srv_fail(e, 400, "tool_choice.function.name", "invalid_value",
                        "'tool_choice' names the function '%.64s', which 'tools' does not list",
                        named);
    char *keep = r->tools[k];
    r->tools[k] = r->tools[0];
    r->tools[0] = keep;
    struct nb_schema *keep_s = r->tool_schemas[k];
    r->tool_schemas[k] = r->tool_schemas[0];
    r->tool_schemas[0] = keep_s;
    return 0;
}

/* tools, tool_choice, parallel_tool_calls (chat). *rendered: the tools to show the
 * template (NULL when none are offered or tool_choice is "none"). */
static int parse_tools(const cJSON *o, struct srv_request *r, const cJSON **rendered,
                       struct srv_error *e)
{
    int parallel = 1;
    *rendered = NULL;
    if (get_bool(o, "parallel_tool_calls", &parallel, e)) return -1;
    r->parallel_calls = parallel;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools))
            return srv_fail(e, 400, "tools", "invalid_type", "'tools' must be an array");
        int n = cJSON_GetArraySize(tools);
        if (n > SRV_MAX_TOOLS)
            return srv_fail(e, 400, "tools", "invalid_value", "'tools' has more than %d entries",
                            SRV_MAX_TOOLS);
        if (n && (!(r->tools = calloc((size_t)n, sizeof *r->tools)) ||
                  !(r->tool_schemas = calloc((size_t)n, sizeof *r->tool_schemas))))
            return srv_fail(e, 500, NULL, NULL, "out of memory");
        const cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools)
        {
            if (parse_tool(t, i++, r, e)) return -1;
        }
    }
    r->tool_choice = r->n_tools ? SRV_TC_AUTO : SRV_TC_NONE;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_choice");
    if (tc && !cJSON_IsNull(tc) && parse_tool_choice(tc, r, e)) return -1;
    if (r->tool_choice != SRV_TC_NONE) *rendered = tools;
    return 0;
}

/* logit_bias: {"TOKEN_ID": BIAS, ...}, each id in the vocabulary, each bias in [-100, 100]
 * (OpenAI's; added to the logit before the sampler's chain: -100 all but bans). */
static int parse_logit_bias(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                            struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "logit_bias");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsObject(v))
        return srv_fail(e, 400, "logit_bias", "invalid_type", "'logit_bias' must be an object");
    int n = cJSON_GetArraySize(v);
    if (n > SRV_MAX_BIAS)
        return srv_fail(e, 400, "logit_bias", "invalid_value",
                        "'logit_bias' has more than %d entries", SRV_MAX_BIAS);
    if (n == 0) return 0;
    if (!(r->bias_id = malloc(sizeof *r->bias_id * (size_t)n)) ||
        !(r->bias = malloc(sizeof *r->bias * (size_t)n)))
        return srv_fail(e, 500, NULL, NULL, "out of memory");
    const cJSON *b;
    cJSON_ArrayForEach(b, v)
    {
        char *end = NULL;
        long id = strtol(b->string, &end, 10);
        if (!b->string[0] || *end || id < 0 || id >= m->n_vocab)
            return srv_fail(e, 400, "logit_bias", "invalid_value",
                            "'logit_bias' key '%.32s' is not a token id of the vocabulary "
                            "(0 to %d)", b->string, m->n_vocab - 1);
        if (!cJSON_IsNumber(b) || !(fabs(b->valuedouble) <= 100))
            return srv_fail(e, 400, "logit_bias", "invalid_value",
                            "'logit_bias' of token %ld must be a number in [-100, 100]", id);
        r->bias_id[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)b->valuedouble;
    }
    return 0;
}

/* grammar: GBNF text the output keeps to (llama-server's field; docs/grammar.md). */
static int parse_gbnf(const cJSON *o, struct srv_request *r, struct srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "grammar");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v))
        return srv_fail(e, 400, "grammar", "invalid_type",
                        "'grammar' must be a string of GBNF rules");
    enum nb_status st = nb_gbnf_compile(v->valuestring, strlen(v->valuestring), &r->gbnf);
    if (st == NB_ERR_NOMEM) return srv_fail(e, 500, NULL, NULL, "out of memory");
    if (st) return srv_fail(e, 400, "grammar", "invalid_value", "'grammar': %s", nb_last_error());
    return 0;
}

/* The sampling and length fields both endpoints share. */
static int parse_common(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                        struct srv_error *e)
{
    double x;
    int given = 0;
    if (check_unsupported(o, e) || parse_logprobs(o, r, e) || parse_response_format(o, r, e) ||
        parse_gbnf(o, r, e) || parse_logit_bias(m, o, r, e))
        return -1;
    x = 1; /* choices: a job each (http.c), sampled apart */
    if (get_int(o, "n", 1, SRV_MAX_CHOICES, &x, NULL, e)) return -1;
    r->n_choices = (int)x;
    x = 1;
    if (get_int(o, "best_of", 1, 1e9, &x, NULL, e)) return -1;
    if (x != 1) return srv_fail(e, 400, "best_of", "unsupported_value", "'best_of' must be 1");
    r->max_tokens = -1;
    x = -1;
    if (get_int(o, "max_tokens", 1, 1e9, &x, &given, e)) return -1;
    if (get_int(o, "max_completion_tokens", 1, 1e9, &x, &given, e)) return -1;
    if (given) r->max_tokens = (int)x;
    r->sp = m->sp;
    x = r->sp.temperature;
    if (get_number(o, "temperature", 0, 2, &x, e)) return -1;
    r->sp.temperature = (float)x;
    x = r->sp.top_p;
    if (get_number(o, "top_p", 0, 1, &x, e)) return -1;
    r->sp.top_p = (float)x;
    x = r->sp.min_p;
    if (get_number(o, "min_p", 0, 1, &x, e)) return -1;
    r->sp.min_p = (float)x;
    x = r->sp.top_k;
    if (get_int(o, "top_k", 0, 1 << 24, &x, NULL, e)) return -1;
    r->sp.top_k = (int)x;
    x = r->sp.repeat_penalty;
    if (get_number(o, "repeat_penalty", 0.01, 100, &x, e)) return -1;
    r->sp.repeat_penalty = (float)x;
    x = r->sp.presence_penalty; /* OpenAI's, over the penalty window (repeat_last_n) */
    if (get_number(o, "presence_penalty", -2, 2, &x, e)) return -1;
    r->sp.presence_penalty = (float)x;
    x = r->sp.frequency_penalty;
    if (get_number(o, "frequency_penalty", -2, 2, &x, e)) return -1;
    r->sp.frequency_penalty = (float)x;
    /* seed: OpenAI's is a 64-bit integer, negative ones included */
    x = 0;
    given = 0;
    if (get_int(o, "seed", -9.2e18, 1.8e19, &x, &given, e)) return -1;
    if (given) r->sp.seed = x < 0 ? (uint64_t)(int64_t)x : (uint64_t)x;
    r->seed_given = given; /* else srv_job_new gives each request its own */
    if (get_bool(o, "stream", &r->stream, e)) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so))
            return srv_fail(e, 400, "stream_options", "invalid_type",
                            "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return -1;
        }
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (st && !cJSON_IsNull(st)) {
        if (cJSON_IsString(st)) {
            if (add_stop(r, st->valuestring, e)) return -1;
        } else if (cJSON_IsArray(st)) {
            const cJSON *it;
            cJSON_ArrayForEach(it, st)
            {
                if (!cJSON_IsString(it))
                    return srv_fail(e, 400, "stop", "invalid_type",
                                    "'stop' must be a string or an array of strings");
                if (add_stop(r, it->valuestring, e)) return -1;
            }
        } else {
            return srv_fail(e, 400, "stop", "invalid_type",
                            "'stop' must be a string or an array of strings");
        }
    }
    return 0;
}

/* The message contents: a string, or an array of {"type":"text","text":...} parts (their
 * texts joined). *out malloc'd. */
static int message_text(const cJSON *c, int i, char **out, struct srv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        return *out ? 0 : srv_fail(e, 500, NULL, NULL, "out of memory");
    }
    if (cJSON_IsNull(c)) {
        *out = strdup("");
        return *out ? 0 : srv_fail(e, 500, NULL, NULL, "out of memory");
    }
    if (!cJSON_IsArray(c))
        return srv_fail(e, 400, param, "invalid_type",
                        "'%s' must be a string or an array of text parts", param);
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(t) || strcmp(t->valuestring, "text") ||
            !cJSON_IsString(x))
            return srv_fail(e, 400, param, "invalid_value",
                            "'%s': only parts {\"type\": \"text\", \"text\": ...} are supported",
                            param);
        n += strlen(x->valuestring);
    }
    char *s = malloc(n + 1);
    if (!s) return srv_fail(e, 500, NULL, NULL, "out of memory");
    n = 0;
    cJSON_ArrayForEach(p, c)
    {
        const char *x = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t k = strlen(x);
        memcpy(s + n, x, k);
        n += k;
    }
    s[n] = '\0';
    *out = s;
    return 0;
}

/* An assistant message's tool_calls: *out (calls[0..n)) with each call's arguments as the
 * templates see them (the client's JSON text parsed, kept in `hold`; a text that is not
 * JSON stays a string). */
static int message_calls(const cJSON *tc, int i, cJSON *hold, struct nb_chat_call **out, int *n,
                         struct srv_error *e)
{
    char param[96];
    *out = NULL;
    *n = 0;
    if (!tc || cJSON_IsNull(tc)) return 0;
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(tc))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be an array", param);
    int k = cJSON_GetArraySize(tc);
    if (k > SRV_MAX_TOOLS)
        return srv_fail(e, 400, param, "invalid_value", "'%s' has more than %d calls", param,
                        SRV_MAX_TOOLS);
    if (!k) return 0;
    struct nb_chat_call *c = calloc((size_t)k, sizeof *c);
    if (!c) return srv_fail(e, 500, NULL, NULL, "out of memory");
    *out = c;
    const cJSON *x;
    int j = 0;
    cJSON_ArrayForEach(x, tc)
    {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(x, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "function");
        const cJSON *name = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        const cJSON *args =
            cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, j);
        if (!cJSON_IsObject(x) || (ty && !cJSON_IsNull(ty) &&
                                   !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "function"))))
            return srv_fail(e, 400, param, "invalid_value",
                            "'%s' must be {\"id\": ..., \"type\": \"function\", \"function\": "
                            "{\"name\": ..., \"arguments\": ...}}",
                            param);
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.name", i, j);
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return srv_fail(e, 400, param, "invalid_type", "'%s' must be a non-empty string",
                            param);
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, j);
        if (args && !cJSON_IsNull(args) && !cJSON_IsString(args) && !cJSON_IsObject(args))
            return srv_fail(e, 400, param, "invalid_type",
                            "'%s' must be a string (JSON text of an object)", param);
        c[j].name = name->valuestring;
        c[j].arguments = cJSON_IsNull(args) ? NULL : args;
        if (cJSON_IsString(args)) {
            cJSON *p = cJSON_Parse(args->valuestring);
            if (p && cJSON_IsObject(p)) {
                cJSON_AddItemToArray(hold, p);
                c[j].arguments = p;
            } else {
                cJSON_Delete(p);
            }
        }
        *n = ++j;
    }
    return 0;
}

/* The Jinja template's context: the messages as the client sent them, normalised
 * (developer -> system, content parts joined and null content as "", a call's arguments
 * parsed), the tools offered, add_generation_prompt, bos_token, eos_token. */
static cJSON *jinja_context(const struct srv_model *m, const cJSON *msgs,
                            const struct nb_chat_tmsg *tm, int n, const cJSON *tools)
{
    cJSON *ctx = cJSON_CreateObject(), *ms = cJSON_AddArrayToObject(ctx, "messages");
    for (int i = 0; i < n && ms; i++) {
        const cJSON *msg = cJSON_GetArrayItem(msgs, i);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToArray(ms, x);
        cJSON_AddStringToObject(x, "role", tm[i].role);
        /* null content (a call's message) as "": Qwen3's template tests '</think>' in it */
        cJSON_AddStringToObject(x, "content", tm[i].content);
        if (tm[i].n_calls) {
            cJSON *calls = cJSON_AddArrayToObject(x, "tool_calls");
            const cJSON *src = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
            for (int k = 0; k < tm[i].n_calls; k++) {
                cJSON *call = cJSON_CreateObject(), *f;
                const cJSON *id =
                    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(src, k), "id");
                cJSON_AddItemToArray(calls, call);
                if (cJSON_IsString(id)) cJSON_AddStringToObject(call, "id", id->valuestring);
                cJSON_AddStringToObject(call, "type", "function");
                f = cJSON_AddObjectToObject(call, "function");
                cJSON_AddStringToObject(f, "name", tm[i].calls[k].name);
                if (tm[i].calls[k].arguments)
                    cJSON_AddItemToObject(f, "arguments",
                                          cJSON_Duplicate(tm[i].calls[k].arguments, 1));
                else
                    cJSON_AddItemToObject(f, "arguments", cJSON_CreateObject());
            }
        }
        static const char *const keep[] = {"tool_call_id", "name"};
        for (int k = 0; k < 2; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, keep[k]);
            if (cJSON_IsString(v)) cJSON_AddStringToObject(x, keep[k], v->valuestring);
        }
    }
    if (tools) cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddTrueToObject(ctx, "add_generation_prompt");
    cJSON_AddStringToObject(ctx, "bos_token", m->bos_text ? m->bos_text : "");
    cJSON_AddStringToObject(ctx, "eos_token", m->eos_text ? m->eos_text : "");
    return ctx;
}

/* messages[i]: its role (developer read as system), its text, its calls (assistant) into
 * *tm, *calls and *text (owned by the caller, also on an error). */
static int parse_message(const cJSON *msg, int i, cJSON *hold, struct nb_chat_tmsg *tm,
                         struct nb_chat_call **calls, char **text, struct srv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(msg))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    snprintf(param, sizeof param, "messages[%d].role", i);
    if (!cJSON_IsString(role))
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be a string", param);
    const char *rn = role->valuestring;
    if (!strcmp(rn, "developer")) rn = "system"; /* OpenAI's newer name for it */
    if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant") &&
        strcmp(rn, "tool"))
        return srv_fail(e, 400, param, "invalid_value",
                        "'%s' is '%.32s': nibble serve takes system, developer, user, assistant "
                        "and tool messages",
                        param, role->valuestring);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (tc && !cJSON_IsNull(tc) && strcmp(rn, "assistant")) {
        snprintf(param, sizeof param, "messages[%d].tool_calls", i);
        return srv_fail(e, 400, param, "invalid_value",
                        "'%s': only assistant messages make calls", param);
    }
    if (message_calls(tc, i, hold, calls, &tm->n_calls, e)) return -1;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (!c && tm->n_calls) { /* a call without content: the content is null */
        if (!(*text = strdup(""))) return srv_fail(e, 500, NULL, NULL, "out of memory");
    } else if (message_text(c, i, text, e)) {
        return -1;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
    if (id && !cJSON_IsNull(id) && !cJSON_IsString(id)) {
        snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
        return srv_fail(e, 400, param, "invalid_type", "'%s' must be a string", param);
    }
    tm->role = rn;
    tm->content = *text;
    tm->calls = *calls;
    return 0;
}

/* messages (and the tools offered) -> the template's text, its message bytes marked ->
 * ids. The model's Jinja template when it has one, else the built-in family. */
static int chat_prompt(const struct srv_model *m, const cJSON *o, const cJSON *tools,
                       struct srv_request *r, struct srv_error *e)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!msgs)
        return srv_fail(e, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (!cJSON_IsArray(msgs))
        return srv_fail(e, 400, "messages", "invalid_type", "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs), rc = -1, any_tool = 0;
    if (n == 0) return srv_fail(e, 400, "messages", "invalid_value", "'messages' is empty");
    if (n > 4096)
        return srv_fail(e, 400, "messages", "invalid_value", "'messages' has more than 4096");
    struct nb_chat_msg *cm = calloc((size_t)n, sizeof *cm);
    struct nb_chat_tmsg *tm = calloc((size_t)n, sizeof *tm);
    struct nb_chat_call **calls = calloc((size_t)n, sizeof *calls);
    char **texts = calloc((size_t)n, sizeof *texts);
    cJSON *hold = cJSON_CreateArray(), *ctx = NULL;
    char *text = NULL;
    uint8_t *mark = NULL;
    size_t len = 0;
    if (!cm || !tm || !calls || !texts || !hold) {
        srv_fail(e, 500, NULL, NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (parse_message(cJSON_GetArrayItem(msgs, i), i, hold, &tm[i], &calls[i], &texts[i], e))
            goto done;
        cm[i] = (struct nb_chat_msg){tm[i].role, texts[i]};
        any_tool |= tm[i].n_calls > 0 || !strcmp(tm[i].role, "tool");
    }
    if (m->jinja) {
        if (!(ctx = jinja_context(m, msgs, tm, n, tools))) {
            srv_fail(e, 500, NULL, NULL, "out of memory");
            goto done;
        }
        if (nb_jinja_render(m->jinja, ctx, &text, &len, &mark) != NB_OK) {
            srv_fail(e, 400, "messages", "invalid_value", "the chat template: %s", nb_last_error());
            goto done;
        }
    } else if (tools || any_tool) {
        if (nb_chat_render_tools(&m->tpl, tm, n, tools, 1, m->bos_text, m->eos_text, &text,
                                 &mark) != NB_OK) {
            srv_fail(e, 400, tools ? "tools" : "messages", "invalid_value", "%s", nb_last_error());
            goto done;
        }
        len = strlen(text);
    } else {
        if (nb_chat_render_marked(&m->tpl, cm, n, 1, m->bos_text, m->eos_text, &text, &mark) !=
            NB_OK) {
            srv_fail(e, 400, "messages", "invalid_value", "%s", nb_last_error());
            goto done;
        }
        len = strlen(text);
    }
    /* at most n_ctx tokens: a longer prompt is refused without tokenizing all of it */
    enum nb_status ts = nb_tokenize_marked(m->tok, text, len, 0, mark, m->n_ctx, &r->prompt,
                                           &r->n_prompt);
    if (ts == NB_ERR_RANGE) {
        srv_fail(e, 400, "messages", "context_length_exceeded", "the prompt is more than %d "
                 "tokens: this server's context is %d tokens per request, and at least one "
                 "must be left to generate", m->n_ctx, m->n_ctx);
        goto done;
    }
    if (ts != NB_OK) {
        srv_fail(e, 400, "messages", "invalid_value", "%s", nb_last_error());
        goto done;
    }
    /* a template that opens the answer's reasoning itself (DeepSeek-R1's, Qwen3's with
     * thinking forced): the answer begins inside <think> */
    size_t end = len;
    while (end && (text[end - 1] == '\n' || text[end - 1] == ' ' || text[end - 1] == '\r'))
        end--;
    r->think_open = m->reasoning && end >= 7 && !memcmp(text + end - 7, "<think>", 7);
    r->reasoning = m->reasoning;
    rc = 0;
done:
    for (int i = 0; i < n; i++) {
        if (texts) free(texts[i]);
        if (calls) free(calls[i]);
    }
    free(texts);
    free(calls);
    free(cm);
    free(tm);
    cJSON_Delete(hold);
    cJSON_Delete(ctx);
    free(text);
    free(mark);
    return rc;
}

/* prompt: a string, an array of one string, or an array of token ids. */
static int completion_prompt(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                             struct srv_error *e)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (!p) return srv_fail(e, 400, "prompt", "missing_required_parameter", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        /* as nibble run reads -p: BOS as the tokenizer adds it, special-token text parsed
         * (the whole prompt is the client's) */
        enum nb_status ts = nb_tokenize_max(m->tok, p->valuestring, strlen(p->valuestring), 1,
                                            1, m->n_ctx, &r->prompt, &r->n_prompt);
        if (ts == NB_ERR_RANGE)
            return srv_fail(e, 400, "prompt", "context_length_exceeded",
                            "the prompt is more than %d tokens: this server's context is %d "
                            "tokens per request, and at least one must be left to generate",
                            m->n_ctx, m->n_ctx);
        if (ts != NB_OK) return srv_fail(e, 400, "prompt", "invalid_value", "%s", nb_last_error());
        return 0;
    }
    if (!cJSON_IsArray(p))
        return srv_fail(e, 400, "prompt", "invalid_type",
                        "'prompt' must be a string or an array of token ids");
    int n = cJSON_GetArraySize(p);
    if (n > (1 << 24))
        return srv_fail(e, 400, "prompt", "invalid_value", "'prompt' has too many tokens");
    if (!(r->prompt = malloc(sizeof *r->prompt * (size_t)(n ? n : 1))))
        return srv_fail(e, 500, NULL, NULL, "out of memory");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, p)
    {
        if (!cJSON_IsNumber(it) || floor(it->valuedouble) != it->valuedouble ||
            it->valuedouble < 0 || it->valuedouble >= m->n_vocab)
            return srv_fail(e, 400, "prompt", "invalid_value",
                            "'prompt' must be one string or an array of token ids in [0, %d)",
                            m->n_vocab);
        r->prompt[i++] = (int32_t)it->valuedouble;
    }
    r->n_prompt = n;
    return 0;
}

/* The output's constraint: a call for tool_choice required or named (the named function
 * is tools[0]; its arguments kept to the function's schema) — "required" with
 * parallel_tool_calls (the default) in the Hermes format one call or more (SRV_MAX_CALLS),
 * each on a line of its own — else a JSON object for response_format
 * json_object/json_schema (kept to the schema). */
static int make_grammar(const struct srv_model *m, struct srv_request *r, struct srv_error *e)
{
    r->tool_format = srv_tool_format_of(m);
    int call = r->tool_choice == SRV_TC_REQUIRED || r->tool_choice == SRV_TC_NAMED;
    if (r->gbnf && (r->json_format || srv_request_parses_tools(r)))
        return srv_fail(e, 400, "grammar", "invalid_value",
                        "'grammar' cannot be combined with a JSON response_format or with tools");
    if (!call && !r->json_format) return 0;
    if (!(r->grammar = calloc(1, sizeof *r->grammar)))
        return srv_fail(e, 500, NULL, NULL, "out of memory");
    const struct nb_schema *const *schemas = (const struct nb_schema *const *)r->tool_schemas;
    const struct nb_schema *one = r->schema;
    int rc = call  ? srv_tool_grammar_schema(r->grammar, r->tool_format, r->tools, schemas,
                                            r->tool_choice == SRV_TC_NAMED ? 1 : r->n_tools)
             : one ? nb_gram_schema(r->grammar, &one, 1)
                   : nb_gram_object(r->grammar);
    if (rc) return srv_fail(e, 500, NULL, NULL, "out of memory");
    if (r->tool_choice == SRV_TC_REQUIRED && r->parallel_calls && r->tool_format == SRV_FMT_HERMES)
        r->grammar->rounds = SRV_MAX_CALLS;
    return 0;
}

/* The offset of the first NUL in a JSON text, raw or escaped as \u0000 (every backslash
 * starts an escape: in valid JSON only strings hold one), or len. */
static size_t nul_at(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') return i;
        if (s[i] != '\\' || i + 1 >= len) continue;
        if (s[i + 1] == 'u' && i + 5 < len && !memcmp(s + i + 2, "0000", 4)) return i;
        i++; /* the escaped character */
    }
    return len;
}

cJSON *srv_parse_body(const char *body, size_t len, struct srv_error *e)
{
    if (!srv_utf8_valid(body, len)) {
        srv_fail(e, 400, NULL, "invalid_encoding", "the request body is not valid UTF-8");
        return NULL;
    }
    size_t nul = nul_at(body, len);
    if (nul < len) { /* C strings end there: the text after it would be lost without a word */
        srv_fail(e, 400, NULL, "invalid_value", "the request body has a NUL character "
                 "(byte %zu): text with NUL is not supported", nul);
        return NULL;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!o) {
        srv_fail(e, 400, NULL, "invalid_json", "the request body is not valid JSON (near byte %zu)",
                 end && end >= body ? (size_t)(end - body) : (size_t)0);
        return NULL;
    }
    while (end < body + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end < body + len) {
        srv_fail(e, 400, NULL, "invalid_json", "the request body has bytes after its JSON value "
                 "(from byte %zu)", (size_t)(end - body));
    } else if (!cJSON_IsObject(o)) {
        srv_fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
    } else {
        return o;
    }
    cJSON_Delete(o);
    return NULL;
}

int srv_parse_request(const struct srv_model *m, enum srv_kind kind, const char *body, size_t len,
                      struct srv_request *r, struct srv_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    cJSON *o = srv_parse_body(body, len, e);
    if (!o) return -1;
    int rc = -1;
    if (parse_common(m, o, r, e)) goto done;
    const cJSON *tools = NULL;
    if (kind == SRV_CHAT) {
        if (parse_tools(o, r, &tools, e) || chat_prompt(m, o, tools, r, e)) goto done;
    } else {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tools");
        if (t && !cJSON_IsNull(t)) {
            srv_fail(e, 400, "tools", "unsupported_parameter",
                     "'tools' is for /v1/chat/completions");
            goto done;
        }
        if (completion_prompt(m, o, r, e)) goto done;
    }
    if (make_grammar(m, r, e)) goto done;
    if (r->n_prompt == 0) {
        srv_fail(e, 400, kind == SRV_CHAT ? "messages" : "prompt", "invalid_value",
                 "the prompt is empty");
        goto done;
    }
    if (r->n_prompt >= m->n_ctx) {
        srv_fail(e, 400, kind == SRV_CHAT ? "messages" : "prompt", "context_length_exceeded",
                 "the prompt is %d tokens: this server's context is %d tokens per request, "
                 "and at least one must be left to generate",
                 r->n_prompt, m->n_ctx);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(o);
    if (rc) srv_request_free(r);
    return rc;
}

/* ---------------------------------------------------------------- responses */

static char *print_free(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_json_error(const struct srv_error *e)
{
    cJSON *o = cJSON_CreateObject(), *x = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(x, "message", e->message);
    cJSON_AddStringToObject(x, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0])
        cJSON_AddStringToObject(x, "param", e->param);
    else
        cJSON_AddNullToObject(x, "param");
    if (e->code)
        cJSON_AddStringToObject(x, "code", e->code);
    else
        cJSON_AddNullToObject(x, "code");
    return print_free(o);
}

/* The usage of a request whose choices are jobs[0..n): the prompt counted once, the
 * completions summed; cached_tokens the longest prefix a choice found cached (its KV
 * reused: prefix sharing, and the prompt of a choice prefilled once for all); the timings'
 * prompt_n the prompt tokens the choices prefilled in all. */
static void add_usage(cJSON *o, struct srv_job *const *jobs, int n)
{
    const struct srv_job *j = jobs[0];
    int gen = 0, cached = 0, prefilled = 0;
    for (int i = 0; i < n; i++) {
        gen += jobs[i]->n_gen;
        if (jobs[i]->n_cached > cached) cached = jobs[i]->n_cached;
        prefilled += jobs[i]->req.n_prompt - jobs[i]->n_cached;
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->req.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + gen);
    /* as OpenAI's: the prompt tokens whose KV was reused (prefix sharing) */
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", cached);
    /* llama-server's timings (a client such as nibble agent reads decode speed from them):
     * the prompt from submission (queueing included) to the first token; the tokens after
     * the first over the decode steps that made them (choice 0's) */
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    int decoded = j->n_gen > 1 ? j->n_gen - 1 : 0;
    double gen_ms = decoded && j->t_first > 0 ? (j->t_prev - j->t_first) * 1e3 : 0;
    cJSON_AddNumberToObject(t, "prompt_n", prefilled);
    cJSON_AddNumberToObject(t, "prompt_ms", j->t_first > 0 ? (j->t_first - j->t_submit) * 1e3 : 0);
    cJSON_AddNumberToObject(t, "predicted_n", decoded);
    cJSON_AddNumberToObject(t, "predicted_ms", gen_ms);
    if (gen_ms > 0) cJSON_AddNumberToObject(t, "predicted_per_second", decoded / gen_ms * 1e3);
}

static cJSON *head(const struct nb_server *s, const struct srv_job *j, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", "nibble-" NIBBLE_VERSION_STRING);
    return o;
}

/* cJSON strings end at a NUL: text from the model never holds one (the detokenizer's
 * output is UTF-8 text; a NUL byte token would cut the string short, not overrun). */
static cJSON *text_json(const char *t, size_t n)
{
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, t, n);
    c[n] = '\0';
    cJSON *s = cJSON_CreateString(c);
    free(c);
    return s;
}

/* A token's text for "token": its bytes when they are UTF-8, else "bytes:\xNN..." (as
 * OpenAI writes a token that is part of a character); its bytes as numbers. */
static void token_fields(const struct nb_server *s, int32_t tok, cJSON *o, const char *key)
{
    char piece[256], name[1100];
    size_t n = 0;
    if (nb_token_to_piece(s->m.tok, tok, piece, sizeof piece, &n) != NB_OK) n = 0;
    piece[n] = '\0';
    if (srv_utf8_valid(piece, n) && strlen(piece) == n) {
        cJSON_AddStringToObject(o, key, piece);
    } else {
        size_t k = (size_t)snprintf(name, sizeof name, "bytes:");
        for (size_t i = 0; i < n && k + 5 < sizeof name; i++)
            k += (size_t)snprintf(name + k, sizeof name - k, "\\x%02x", (unsigned char)piece[i]);
        cJSON_AddStringToObject(o, key, name);
    }
    if (strcmp(key, "token") == 0) {
        cJSON *b = cJSON_AddArrayToObject(o, "bytes");
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[i]));
    }
}

/* The "logprobs" of a choice for tokens [from, to) of j: chat's {"content": [...]} or the
 * completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static cJSON *logprobs_json(const struct nb_server *s, const struct srv_job *j, int from, int to)
{
    if (!j->req.logprobs) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (j->req.kind == SRV_CHAT) {
        cJSON *c = cJSON_AddArrayToObject(o, "content");
        for (int i = from; i < to; i++) {
            const struct srv_logprob *l = &j->lps[i];
            cJSON *t = cJSON_CreateObject();
            token_fields(s, l->tok, t, "token");
            cJSON_AddNumberToObject(t, "logprob", l->lp);
            cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
            for (int k = 0; k < l->n_top; k++) {
                cJSON *a = cJSON_CreateObject();
                token_fields(s, l->top_tok[k], a, "token");
                cJSON_AddNumberToObject(a, "logprob", l->top_lp[k]);
                cJSON_AddItemToArray(top, a);
            }
            cJSON_AddItemToArray(c, t);
        }
        return o;
    }
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = 0;
    for (int i = 0; i < to; i++) {
        const struct srv_logprob *l = &j->lps[i];
        char piece[256];
        size_t n = 0;
        if (nb_token_to_piece(s->m.tok, l->tok, piece, sizeof piece, &n) != NB_OK) n = 0;
        if (i >= from) {
            cJSON *t = cJSON_CreateObject();
            token_fields(s, l->tok, t, "t");
            cJSON_AddItemToArray(toks, cJSON_DetachItemFromObject(t, "t"));
            cJSON_Delete(t);
            cJSON_AddItemToArray(lps, cJSON_CreateNumber(l->lp));
            cJSON *top = cJSON_CreateObject();
            for (int k = 0; k < l->n_top; k++) {
                cJSON *a = cJSON_CreateObject();
                token_fields(s, l->top_tok[k], a, "t");
                const cJSON *name = cJSON_GetObjectItem(a, "t");
                if (!cJSON_GetObjectItem(top, name->valuestring))
                    cJSON_AddNumberToObject(top, name->valuestring, l->top_lp[k]);
                cJSON_Delete(a);
            }
            cJSON_AddItemToArray(tops, top);
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        }
        off += n;
    }
    return o;
}

int srv_request_parses_tools(const struct srv_request *r)
{
    return r->kind == SRV_CHAT && r->n_tools > 0 && r->tool_choice != SRV_TC_NONE;
}

static int parses_tools(const struct srv_job *j)
{
    return srv_request_parses_tools(&j->req);
}

/* A call's id: "call_" and 24 letters and digits from the job's id and the call's index. */
static void call_id(const struct srv_job *j, int k, char *out, size_t size)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = j->id; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    /* the choice's index too: the choices of a request share its id */
    h ^= (uint64_t)j->created * 0x9e3779b97f4a7c15ull + (uint64_t)k + ((uint64_t)j->index << 32);
    size_t n = snprintf(out, size, "call_");
    for (int i = 0; i < 24 && n + 1 < size; i++) {
        h += 0x9e3779b97f4a7c15ull; /* splitmix64 */
        uint64_t z = h;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[n++] = digits[z % 62];
    }
    out[n] = '\0';
}

/* The "tool_calls" array of calls[0..n) (stream: with "index"). */
static cJSON *calls_json(const struct srv_job *j, const struct srv_tool_call *calls, int n,
                         int stream)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < n; k++) {
        char id[40];
        cJSON *c = cJSON_CreateObject(), *f;
        call_id(j, k, id, sizeof id);
        if (stream) cJSON_AddNumberToObject(c, "index", k);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", calls[k].name);
        cJSON_AddStringToObject(f, "arguments", calls[k].arguments);
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

/* The reasoning and content of a job's text so far (all content without reasoning). */
static void think_of(const struct srv_job *j, struct srv_think *t)
{
    if (j->req.reasoning) {
        srv_think_split(j->text ? j->text : "", j->text_len, j->req.think_open,
                        j->state == JOB_DONE, t);
        return;
    }
    memset(t, 0, sizeof *t);
    t->safe = j->text_len;
}

/* The job's calls and content (parses_tools), read after its reasoning. 0, or -1 out of
 * memory. */
static int job_calls(const struct srv_job *j, struct srv_tool_call **calls, int *n, char **content)
{
    struct srv_think t;
    think_of(j, &t);
    return srv_tool_calls_parse(j->text ? j->text + t.c_from : "", j->text_len - t.c_from,
                                j->req.tool_format, j->req.tools, j->req.n_tools, calls, n,
                                content);
}

/* "tool_calls" when the generation ended by itself with calls in it. */
static const char *finish_of(const struct srv_job *j, const char *finish)
{
    if (!finish || strcmp(finish, "stop") || !parses_tools(j)) return finish;
    struct srv_tool_call *calls;
    char *content;
    int n = 0;
    if (job_calls(j, &calls, &n, &content)) return finish;
    srv_tool_calls_free(calls, n);
    free(content);
    return n ? "tool_calls" : finish;
}

/* Choice j->index of a plain answer; NULL when out of memory. */
static cJSON *choice_json(const struct nb_server *s, const struct srv_job *j)
{
    int chat = j->req.kind == SRV_CHAT;
    const char *finish = j->finish ? j->finish : "stop";
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", j->index);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        struct srv_tool_call *calls = NULL;
        char *content = NULL;
        int n = 0;
        struct srv_think t;
        think_of(j, &t);
        if (t.found)
            cJSON_AddItemToObject(msg, "reasoning_content",
                                  text_json(j->text + t.r_from, t.r_to - t.r_from));
        if (!parses_tools(j)) {
            cJSON_AddItemToObject(
                msg, "content",
                text_json(j->text ? j->text + t.c_from : "", j->text_len - t.c_from));
        } else if (job_calls(j, &calls, &n, &content)) {
            cJSON_Delete(c);
            return NULL;
        } else {
            if (content)
                cJSON_AddStringToObject(msg, "content", content);
            else
                cJSON_AddNullToObject(msg, "content");
            if (n) cJSON_AddItemToObject(msg, "tool_calls", calls_json(j, calls, n, 0));
            if (n && !strcmp(finish, "stop")) finish = "tool_calls";
            srv_tool_calls_free(calls, n);
            free(content);
        }
    } else {
        cJSON_AddItemToObject(c, "text", text_json(j->text ? j->text : "", j->text_len));
    }
    cJSON_AddItemToObject(c, "logprobs", logprobs_json(s, j, 0, j->n_lps));
    cJSON_AddStringToObject(c, "finish_reason", finish);
    return c;
}

char *srv_json_result(const struct nb_server *s, struct srv_job *const *jobs, int n)
{
    cJSON *o = head(s, jobs[0], jobs[0]->req.kind == SRV_CHAT ? "chat.completion"
                                                              : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < n; i++) {
        cJSON *c = choice_json(s, jobs[i]);
        if (!c) {
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddItemToArray(cs, c);
    }
    add_usage(o, jobs, n);
    return print_free(o);
}

size_t srv_stream_sendable(const struct srv_job *j)
{
    struct srv_think t;
    think_of(j, &t);
    if (!parses_tools(j) || t.safe < j->text_len || t.c_from == j->text_len) return t.safe;
    /* the content: up to what may begin a call */
    return t.c_from +
           srv_tool_text_safe(j->text + t.c_from, j->text_len - t.c_from, j->req.tool_format);
}

int srv_json_tool_chunks(const struct nb_server *s, const struct srv_job *j, size_t sent,
                         char ***events, int *n_events)
{
    struct srv_tool_call *calls = NULL;
    char *content = NULL;
    int n = 0, k = 0;
    *events = NULL;
    *n_events = 0;
    if (!parses_tools(j)) return 0;
    if (job_calls(j, &calls, &n, &content)) return -1;
    struct srv_think t;
    think_of(j, &t);
    sent = sent > t.c_from ? sent - t.c_from : 0; /* of the content */
    char **ev = calloc((size_t)(2 * n + 1), sizeof *ev);
    if (!ev) goto fail;
    size_t nc = content ? strlen(content) : 0;
    if (nc > sent) { /* the content not sent yet (what was sent is its start) */
        cJSON *o = head(s, j, "chat.completion.chunk");
        cJSON *c = cJSON_CreateObject(), *d;
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
        cJSON_AddNumberToObject(c, "index", j->index);
        d = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddStringToObject(d, "content", content + sent);
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddNullToObject(c, "finish_reason");
        if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
        if (!(ev[k++] = print_free(o))) goto fail;
    }
    for (int i = 0; i < n; i++) {
        /* as OpenAI streams a call: its id, type and name with empty arguments, then the
         * arguments */
        for (int part = 0; part < 2; part++) {
            cJSON *o = head(s, j, "chat.completion.chunk");
            cJSON *c = cJSON_CreateObject(), *d, *a = cJSON_CreateArray(),
                  *x = cJSON_CreateObject();
            cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
            cJSON_AddNumberToObject(c, "index", j->index);
            d = cJSON_AddObjectToObject(c, "delta");
            cJSON_AddItemToObject(d, "tool_calls", a);
            cJSON_AddItemToArray(a, x);
            cJSON_AddNumberToObject(x, "index", i);
            if (part == 0) {
                char id[40];
                call_id(j, i, id, sizeof id);
                cJSON_AddStringToObject(x, "id", id);
                cJSON_AddStringToObject(x, "type", "function");
            }
            cJSON *f = cJSON_AddObjectToObject(x, "function");
            if (part == 0) cJSON_AddStringToObject(f, "name", calls[i].name);
            cJSON_AddStringToObject(f, "arguments", part == 0 ? "" : calls[i].arguments);
            cJSON_AddNullToObject(c, "logprobs");
            cJSON_AddNullToObject(c, "finish_reason");
            if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
            if (!(ev[k++] = print_free(o))) goto fail;
        }
    }
    srv_tool_calls_free(calls, n);
    free(content);
    *events = ev;
    *n_events = k;
    return 0;
fail:
    for (int i = 0; ev && i < k; i++)
        free(ev[i]);
    free(ev);
    srv_tool_calls_free(calls, n);
    free(content);
    return -1;
}

char *srv_json_chunk(const struct nb_server *s, const struct srv_job *j, const char *delta,
                     size_t n_delta, int first, const char *finish, int lp_from, int lp_to)
{
    int chat = j->req.kind == SRV_CHAT;
    cJSON *o = head(s, j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", j->index);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (delta) cJSON_AddItemToObject(d, "content", text_json(delta, n_delta));
    } else {
        cJSON_AddItemToObject(c, "text", text_json(delta ? delta : "", delta ? n_delta : 0));
    }
    if (lp_to > lp_from)
        cJSON_AddItemToObject(c, "logprobs", logprobs_json(s, j, lp_from, lp_to));
    else
        cJSON_AddNullToObject(c, "logprobs");
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish_of(j, finish));
    else
        cJSON_AddNullToObject(c, "finish_reason");
    if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
    return print_free(o);
}

char *srv_json_usage_chunk(const struct nb_server *s, struct srv_job *const *jobs, int n)
{
    cJSON *o = head(s, jobs[0], jobs[0]->req.kind == SRV_CHAT ? "chat.completion.chunk"
                                                              : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    add_usage(o, jobs, n);
    return print_free(o);
}

/* The model object of /v1/models. */
static cJSON *model_json(const struct nb_server *s)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created); /* when the server started */
    cJSON_AddStringToObject(m, "owned_by", "nibble");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", s->n_ctx);
    cJSON_AddNumberToObject(meta, "n_slots", s->p.n_slots);
    cJSON_AddNumberToObject(meta, "n_vocab", s->m.n_vocab);
    cJSON_AddStringToObject(meta, "chat_template", nb_chat_kind_name(s->m.tpl.kind));
    return m;
}

char *srv_json_text_chunk(const struct nb_server *s, const struct srv_job *j, size_t from,
                          size_t to, int lp_from, int lp_to)
{
    struct srv_think t;
    think_of(j, &t);
    if (!t.found || j->req.kind != SRV_CHAT)
        return srv_json_chunk(s, j, j->text + from, to - from, 0, NULL, lp_from, lp_to);
    /* the parts of [from, to) in the reasoning and in the content */
    size_t r0 = from > t.r_from ? from : t.r_from, r1 = to < t.r_to ? to : t.r_to;
    size_t c0 = from > t.c_from ? from : t.c_from;
    cJSON *o = head(s, j, "chat.completion.chunk");
    cJSON *c = cJSON_CreateObject(), *d;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    cJSON_AddNumberToObject(c, "index", j->index);
    d = cJSON_AddObjectToObject(c, "delta");
    if (r1 > r0) cJSON_AddItemToObject(d, "reasoning_content", text_json(j->text + r0, r1 - r0));
    if (to > c0) cJSON_AddItemToObject(d, "content", text_json(j->text + c0, to - c0));
    if (lp_to > lp_from)
        cJSON_AddItemToObject(c, "logprobs", logprobs_json(s, j, lp_from, lp_to));
    else
        cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
    return print_free(o);
}

char *srv_json_models(const struct nb_server *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data");
    cJSON_AddItemToArray(d, model_json(s));
    return print_free(o);
}

char *srv_json_model(const struct nb_server *s)
{
    return print_free(model_json(s));
}
