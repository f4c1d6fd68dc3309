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
    for (int i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
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
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tools");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
        return srv_fail(e, 400, "tools", "unsupported_parameter",
                        "'tools' is not supported yet by nibble serve");
    v = cJSON_GetObjectItemCaseSensitive(o, "functions");
    if (v && !cJSON_IsNull(v))
        return srv_fail(e, 400, "functions", "unsupported_parameter",
                        "'functions' is not supported by nibble serve");
    v = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (v && !cJSON_IsNull(v)) {
        const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
        if (!cJSON_IsString(t))
            return srv_fail(e, 400, "response_format", "invalid_type",
                            "'response_format' must be an object with a string 'type'");
        if (strcmp(t->valuestring, "text"))
            return srv_fail(e, 400, "response_format", "unsupported_parameter",
                            "'response_format' type '%.64s' is not supported yet (only 'text')",
                            t->valuestring);
    }
    /* accepted at their neutral values (clients send them by default), refused else */
    static const char *const zero[] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(o, zero[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
            return srv_fail(e, 400, zero[i], "unsupported_parameter",
                            "'%s' is not supported yet by nibble serve (only 0)", zero[i]);
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "logit_bias");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsObject(v) && !v->child))
        return srv_fail(e, 400, "logit_bias", "unsupported_parameter",
                        "'logit_bias' is not supported yet by nibble serve (only {})");
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

/* The sampling and length fields both endpoints share. */
static int parse_common(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                        struct srv_error *e)
{
    double x;
    int given = 0;
    if (check_unsupported(o, e) || parse_logprobs(o, r, e)) return -1;
    x = 1;
    if (get_int(o, "n", 1, 1e9, &x, NULL, e)) return -1;
    if (x != 1)
        return srv_fail(e, 400, "n", "unsupported_value",
                        "'n' must be 1 (one choice per "
                        "request)");
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

/* messages -> the template's text, its message bytes marked -> ids. */
static int chat_prompt(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                       struct srv_error *e)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!msgs)
        return srv_fail(e, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (!cJSON_IsArray(msgs))
        return srv_fail(e, 400, "messages", "invalid_type", "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs), rc = -1;
    if (n == 0) return srv_fail(e, 400, "messages", "invalid_value", "'messages' is empty");
    if (n > 4096)
        return srv_fail(e, 400, "messages", "invalid_value", "'messages' has more than 4096");
    struct nb_chat_msg *cm = calloc((size_t)n, sizeof *cm);
    char **texts = calloc((size_t)n, sizeof *texts);
    char *text = NULL;
    uint8_t *mark = NULL;
    if (!cm || !texts) {
        srv_fail(e, 500, NULL, NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *msg = cJSON_GetArrayItem(msgs, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(msg)) {
            srv_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
            goto done;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) {
            srv_fail(e, 400, param, "invalid_type", "'%s' must be a string", param);
            goto done;
        }
        const char *rn = role->valuestring;
        if (!strcmp(rn, "developer")) rn = "system"; /* OpenAI's newer name for it */
        if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant")) {
            srv_fail(e, 400, param, "invalid_value",
                     "'%s' is '%.32s': nibble serve takes system, developer, user and "
                     "assistant messages",
                     param, role->valuestring);
            goto done;
        }
        if (message_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), i, &texts[i], e))
            goto done;
        cm[i] = (struct nb_chat_msg){rn, texts[i]};
    }
    if (nb_chat_render_marked(&m->tpl, cm, n, 1, m->bos_text, m->eos_text, &text, &mark) != NB_OK) {
        srv_fail(e, 400, "messages", "invalid_value", "%s", nb_last_error());
        goto done;
    }
    if (nb_tokenize_marked(m->tok, text, strlen(text), 0, mark, &r->prompt, &r->n_prompt) !=
        NB_OK) {
        srv_fail(e, 400, "messages", "invalid_value", "%s", nb_last_error());
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    free(cm);
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
        if (nb_tokenize(m->tok, p->valuestring, strlen(p->valuestring), 1, 1, &r->prompt,
                        &r->n_prompt) != NB_OK)
            return srv_fail(e, 400, "prompt", "invalid_value", "%s", nb_last_error());
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

int srv_parse_request(const struct srv_model *m, enum srv_kind kind, const char *body, size_t len,
                      struct srv_request *r, struct srv_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    if (!srv_utf8_valid(body, len))
        return srv_fail(e, 400, NULL, "invalid_encoding", "the request body is not valid UTF-8");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    int rc = -1;
    if (!o) {
        srv_fail(e, 400, NULL, "invalid_json", "the request body is not valid JSON (near byte %zu)",
                 end && end >= body ? (size_t)(end - body) : (size_t)0);
        goto done;
    }
    if (!cJSON_IsObject(o)) {
        srv_fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
        goto done;
    }
    if (parse_common(m, o, r, e)) goto done;
    if (kind == SRV_CHAT ? chat_prompt(m, o, r, e) : completion_prompt(m, o, r, e)) goto done;
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

static void add_usage(cJSON *o, const struct srv_job *j)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->req.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt + j->n_gen);
    /* as OpenAI's: the prompt tokens whose KV was reused (prefix sharing) */
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", j->n_cached);
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

char *srv_json_result(const struct nb_server *s, const struct srv_job *j)
{
    int chat = j->req.kind == SRV_CHAT;
    cJSON *o = head(s, j, chat ? "chat.completion" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddItemToObject(msg, "content", text_json(j->text ? j->text : "", j->text_len));
    } else {
        cJSON_AddItemToObject(c, "text", text_json(j->text ? j->text : "", j->text_len));
    }
    cJSON_AddItemToObject(c, "logprobs", logprobs_json(s, j, 0, j->n_lps));
    cJSON_AddStringToObject(c, "finish_reason", j->finish ? j->finish : "stop");
    add_usage(o, j);
    return print_free(o);
}

char *srv_json_chunk(const struct nb_server *s, const struct srv_job *j, const char *delta,
                     size_t n_delta, int first, const char *finish, int usage, int lp_from,
                     int lp_to)
{
    int chat = j->req.kind == SRV_CHAT;
    cJSON *o = head(s, j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    if (!usage) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToArray(cs, c);
        cJSON_AddNumberToObject(c, "index", 0);
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
            cJSON_AddStringToObject(c, "finish_reason", finish);
        else
            cJSON_AddNullToObject(c, "finish_reason");
    }
    if (usage)
        add_usage(o, j);
    else if (j->req.include_usage)
        cJSON_AddNullToObject(o, "usage");
    return print_free(o);
}

/* The model object of /v1/models. */
static cJSON *model_json(const struct nb_server *s)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "nibble");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", s->n_ctx);
    cJSON_AddNumberToObject(meta, "n_slots", s->p.n_slots);
    cJSON_AddNumberToObject(meta, "n_vocab", s->m.n_vocab);
    cJSON_AddStringToObject(meta, "chat_template", nb_chat_kind_name(s->m.tpl.kind));
    return m;
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
