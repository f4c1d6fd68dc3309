/* server/toolcall.c — tool calls in the model's own format: the grammar that forces one
 * (tool_choice required or named), the parser that finds them in generated text, and how
 * much of a stream can go out as content before a call may begin.
 *
 *   Hermes (Qwen2.5, Qwen3, ChatML):  <tool_call>\n{"name": "F", "arguments": {...}}\n</tool_call>
 *   Llama 3.1:                        {"name": "F", "parameters": {...}}  (the whole answer,
 *                                     optionally after <|python_tag|>)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/server.h"

static const char k_open[] = "<tool_call>", k_close[] = "</tool_call>";
static const char k_python_tag[] = "<|python_tag|>";

enum srv_tool_format srv_tool_format_of(const struct srv_model *m)
{
    if (m->jinja) {
        const char *src = nb_tokenizer_chat_template(m->tok);
        if (src && strstr(src, k_open)) return SRV_FMT_HERMES;
        if (src && strstr(src, "<|start_header_id|>")) return SRV_FMT_LLAMA3;
        return SRV_FMT_HERMES;
    }
    return m->tpl.kind == NB_CHAT_LLAMA3 ? SRV_FMT_LLAMA3 : SRV_FMT_HERMES;
}

int srv_tool_grammar(struct nb_gram *g, enum srv_tool_format f, char *const *names, int n)
{
    return srv_tool_grammar_schema(g, f, names, NULL, n);
}

/* The arguments: an object of each function's schema when one has a schema, else any. */
static int arguments(struct nb_gram *g, const struct nb_schema *const *schemas, int n)
{
    for (int i = 0; schemas && i < n; i++)
        if (schemas[i]) return nb_gram_schema(g, schemas, n);
    return nb_gram_object(g);
}

int srv_tool_grammar_schema(struct nb_gram *g, enum srv_tool_format f, char *const *names,
                            const struct nb_schema *const *schemas, int n)
{
    char **alts = calloc((size_t)(n > 0 ? n : 1), sizeof *alts);
    int rc = -1;
    if (!alts) return -1;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(names[i]);
        if (!(alts[i] = malloc(k + 2))) goto done;
        memcpy(alts[i], names[i], k);
        memcpy(alts[i] + k, "\"", 2); /* names have no quote: the choice is prefix-free */
    }
    if (f == SRV_FMT_LLAMA3)
        rc = nb_gram_literal(g, "{\"name\": \"") ||
             nb_gram_choice(g, (const char *const *)alts, n) ||
             nb_gram_literal(g, ", \"parameters\": ") || arguments(g, schemas, n) ||
             nb_gram_literal(g, "}");
    else
        rc = nb_gram_literal(g, "<tool_call>\n{\"name\": \"") ||
             nb_gram_choice(g, (const char *const *)alts, n) ||
             nb_gram_literal(g, ", \"arguments\": ") || arguments(g, schemas, n) ||
             nb_gram_literal(g, "}\n</tool_call>");
    rc = rc ? -1 : 0;
done:
    for (int i = 0; i < n; i++)
        free(alts[i]);
    free(alts);
    return rc;
}

void srv_tool_calls_free(struct srv_tool_call *calls, int n)
{
    for (int i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A call's JSON (s[0..n), trimmed): {"name": one of names, "arguments" or "parameters": an
 * object (absent: {})}. 1 and *out filled, 0 when not well formed, -1 out of memory. */
static int parse_one(const char *s, size_t n, char *const *names, int n_names,
                     struct srv_tool_call *out)
{
    while (n && is_space(*s))
        s++, n--;
    while (n && is_space(s[n - 1]))
        n--;
    if (!n || *s != '{') return 0;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    int rc = 0;
    if (!o || !end || end != s + n || !cJSON_IsObject(o)) goto done;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsString(name) || (args && !cJSON_IsObject(args))) goto done;
    int known = 0;
    for (int i = 0; i < n_names && !known; i++)
        known = !strcmp(names[i], name->valuestring);
    if (!known) goto done;
    out->name = strdup(name->valuestring);
    out->arguments = args ? cJSON_PrintUnformatted(args) : strdup("{}");
    rc = out->name && out->arguments ? 1 : -1;
    if (rc < 0) {
        free(out->name);
        free(out->arguments);
        memset(out, 0, sizeof *out);
    }
done:
    cJSON_Delete(o);
    return rc;
}

struct buf {
    char *p;
    size_t n, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static const char *find(const char *s, size_t n, const char *pat)
{
    size_t k = strlen(pat);
    for (size_t i = 0; i + k <= n; i++)
        if (s[i] == pat[0] && !memcmp(s + i, pat, k)) return s + i;
    return NULL;
}

int srv_tool_calls_parse(const char *text, size_t len, enum srv_tool_format f, char *const *names,
                         int n_names, struct srv_tool_call **calls, int *n_calls, char **content)
{
    struct buf c = {0};
    struct srv_tool_call *v = NULL, one = {0};
    int n = 0, cap = 0, r;
    *calls = NULL;
    *n_calls = 0;
    *content = NULL;
    if (f == SRV_FMT_LLAMA3) {
        const char *s = text;
        size_t k = len;
        while (k && is_space(*s))
            s++, k--;
        if (k >= sizeof k_python_tag - 1 && !memcmp(s, k_python_tag, sizeof k_python_tag - 1))
            s += sizeof k_python_tag - 1, k -= sizeof k_python_tag - 1;
        if ((r = parse_one(s, k, names, n_names, &one)) < 0) goto oom;
        if (r == 1) {
            if (!(v = malloc(sizeof *v))) goto oom;
            v[n++] = one;
            memset(&one, 0, sizeof one);
        } else if (buf_add(&c, text, len)) {
            goto oom;
        }
    } else {
        size_t pos = 0;
        for (;;) {
            const char *a = find(text + pos, len - pos, k_open);
            const char *body = a ? a + sizeof k_open - 1 : NULL;
            const char *z = a ? find(body, (size_t)(text + len - body), k_close) : NULL;
            if (!z) {
                if (buf_add(&c, text + pos, len - pos)) goto oom;
                break;
            }
            size_t after = (size_t)(z - text) + sizeof k_close - 1;
            if ((r = parse_one(body, (size_t)(z - body), names, n_names, &one)) < 0) goto oom;
            if (r == 1) {
                if (n == cap) {
                    int nc = cap ? 2 * cap : 4;
                    struct srv_tool_call *p = realloc(v, sizeof *p * (size_t)nc);
                    if (!p) goto oom;
                    v = p;
                    cap = nc;
                }
                v[n++] = one;
                memset(&one, 0, sizeof one);
                if (buf_add(&c, text + pos, (size_t)(a - text) - pos)) goto oom;
            } else if (buf_add(&c, text + pos, after - pos)) {
                goto oom;
            }
            pos = after;
        }
    }
    int blank = 1;
    for (size_t i = 0; i < c.n && blank; i++)
        blank = is_space(c.p[i]);
    if (blank) {
        free(c.p);
        c.p = NULL;
    }
    *calls = v;
    *n_calls = n;
    *content = c.p;
    return 0;
oom:
    srv_tool_calls_free(v, n);
    free(c.p);
    return -1;
}

size_t srv_tool_text_safe(const char *text, size_t len, enum srv_tool_format f)
{
    size_t i = 0, limit = len;
    if (f == SRV_FMT_LLAMA3) {
        /* a call is the whole answer: held while it may be one */
        while (i < len && is_space(text[i]))
            i++;
        size_t k = len - i, t = sizeof k_python_tag - 1;
        if (i == len || text[i] == '{' || !memcmp(text + i, k_python_tag, k < t ? k : t)) return 0;
        return len;
    }
    const char *a = find(text, len, k_open);
    if (a) {
        limit = (size_t)(a - text);
    } else { /* held: the longest end of the text that may be the start of "<tool_call>" */
        for (size_t k = sizeof k_open - 2; k > 0; k--)
            if (k <= len && !memcmp(text + len - k, k_open, k)) {
                limit = len - k;
                break;
            }
    }
    /* content that is only whitespace is no content (null): held until more comes */
    while (i < limit && is_space(text[i]))
        i++;
    return i == limit ? 0 : limit;
}

long srv_tool_call_start(const char *buf, size_t n, enum srv_tool_format f, int at_start)
{
    if (f == SRV_FMT_LLAMA3) {
        size_t i = 0;
        if (!at_start) return -1;
        while (i < n && is_space(buf[i]))
            i++;
        return i < n && buf[i] == '{' ? (long)i : -1;
    }
    const char *a = find(buf, n, k_open);
    return a ? (long)(a - buf) : -1;
}
