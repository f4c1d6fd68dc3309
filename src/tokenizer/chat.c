/* tokenizer/chat.c — recognising and rendering the chat templates nibble knows.
 *
 * Not a Jinja interpreter: each known template family is written out by hand from
 * its Jinja source (the sources are in tests/fixtures/tokenizer-corpus.json and the
 * models' tokenizer_config.json), and tests compare the renders with
 * @huggingface/jinja's on the same messages.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "tokenizer/tokenizer.h"

static const char *const k_qwen_default_system =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

const char *nb_chat_kind_name(enum nb_chat_kind kind)
{
    switch (kind) {
    case NB_CHAT_CHATML: return "chatml";
    case NB_CHAT_QWEN3: return "qwen3";
    case NB_CHAT_LLAMA3: return "llama3";
    case NB_CHAT_LLAMA2: return "llama2";
    case NB_CHAT_GEMMA: return "gemma";
    default: return "unknown";
    }
}

enum nb_status nb_chat_template_by_name(const char *name, struct nb_chat_template *out)
{
    memset(out, 0, sizeof *out);
    for (int k = NB_CHAT_CHATML; k <= NB_CHAT_GEMMA; k++) {
        if (!strcmp(name, nb_chat_kind_name((enum nb_chat_kind)k))) {
            out->kind = (enum nb_chat_kind)k;
            return NB_OK;
        }
    }
    return nb_set_error(NB_ERR_INVALID_ARG,
                        "chat template '%s' is unknown (chatml, qwen3, llama3, llama2, gemma)",
                        name);
}

enum nb_status nb_chat_template_detect(const char *j, struct nb_chat_template *out)
{
    memset(out, 0, sizeof *out);
    if (!j || !j[0])
        return nb_set_error(NB_ERR_NOT_FOUND, "the model has no chat template; choose one with "
                                              "--chat-template chatml|qwen3|llama3|llama2|gemma");
    if (strstr(j, "<|im_start|>")) {
        out->kind = strstr(j, "</think>") ? NB_CHAT_QWEN3 : NB_CHAT_CHATML;
        if (strstr(j, k_qwen_default_system)) out->default_system = k_qwen_default_system;
        return NB_OK;
    }
    if (strstr(j, "<|start_header_id|>")) {
        if (strstr(j, "Cutting Knowledge Date") || strstr(j, "ipython"))
            return nb_set_error(NB_ERR_UNSUPPORTED,
                                "chat template: Llama 3.1+ style (tools, date header) is not "
                                "supported; use --chat-template llama3 for plain turns");
        out->kind = NB_CHAT_LLAMA3;
        out->gen_prompt_always = !strstr(j, "add_generation_prompt");
        return NB_OK;
    }
    if (strstr(j, "<start_of_turn>")) {
        out->kind = NB_CHAT_GEMMA;
        return NB_OK;
    }
    if (strstr(j, "[INST]") && strstr(j, "<<SYS>>")) {
        out->kind = NB_CHAT_LLAMA2;
        return NB_OK;
    }
    char head[61];
    size_t k = 0;
    for (const char *p = j; *p && k < sizeof head - 1; p++)
        head[k++] = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
    head[k] = '\0';
    return nb_set_error(NB_ERR_UNSUPPORTED,
                        "chat template not recognised (\"%s%s\"); choose one with --chat-template "
                        "chatml|qwen3|llama3|llama2|gemma",
                        head, strlen(j) > k ? "..." : "");
}

/* Said once when the rule below falls back (literals: they outlive later errors). */
static const char k_no_template[] =
    "no chat template in the model: using ChatML; --chat-template NAME picks another";
static const char k_unknown_template[] =
    "the model's chat template is not one nibble knows: using ChatML; --chat-template NAME "
    "picks another";

enum nb_status nb_chat_template_pick(const char *name, const char *jinja,
                                     struct nb_chat_template *out, const char **note)
{
    if (note) *note = NULL;
    if (name) return nb_chat_template_by_name(name, out);
    if (nb_chat_template_detect(jinja, out) == NB_OK) return NB_OK;
    if (note) *note = jinja && jinja[0] ? k_unknown_template : k_no_template;
    return nb_chat_template_by_name("chatml", out);
}

/* ---------------------------------------------------------------- output buffer */

/* The rendered text, and with `track` which of its bytes came from the messages
 * (m[i] = 1: a role or content byte, never read as a special token). */
struct sb {
    char *p;
    uint8_t *m; /* [cap] when track */
    size_t n, cap;
    int oom, track;
};

static void sb_putn_as(struct sb *b, const char *s, size_t n, uint8_t from_msg)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p) b->p = p;
        uint8_t *m = p && b->track ? realloc(b->m, cap) : NULL;
        if (m) b->m = m;
        if (!p || (b->track && !m)) {
            b->oom = 1;
            return;
        }
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    if (b->track) memset(b->m + b->n, from_msg, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void sb_putn(struct sb *b, const char *s, size_t n)
{
    sb_putn_as(b, s, n, 0);
}
static void sb_put(struct sb *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}
/* Text of a message (role or content): marked when tracking. */
static void sb_msg(struct sb *b, const char *s)
{
    sb_putn_as(b, s, strlen(s), 1);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* s[0..n) (message text) without leading/trailing characters of `set` (NULL: whitespace). */
static void put_trimmed(struct sb *b, const char *s, size_t n, int left, int right, const char *set)
{
    size_t i = 0;
#define STRIPPED(c) (set ? strchr(set, (c)) != NULL : is_ws(c))
    while (left && i < n && STRIPPED(s[i]))
        i++;
    while (right && n > i && STRIPPED(s[n - 1]))
        n--;
#undef STRIPPED
    sb_putn_as(b, s + i, n - i, 1);
}

static int role_is(const struct nb_chat_msg *m, const char *r)
{
    return !strcmp(m->role, r);
}

/* Roles must alternate user/assistant (after an optional first system turn). */
static enum nb_status check_alternating(const struct nb_chat_msg *m, int n, int from)
{
    for (int i = from; i < n; i++)
        if (role_is(&m[i], "user") != ((i - from) % 2 == 0))
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "chat: conversation roles must alternate "
                                "user/assistant/user/assistant/... (message %d is '%s')",
                                i, m[i].role);
    return NB_OK;
}

/* Qwen3: assistant content after </think>, and the reasoning between <think> and it.
 * Whether the content (the template's `content`) is not empty. */
static int qwen3_assistant(struct sb *b, const char *c, int think_block)
{
    const char *content = c, *reason = "", *reason_end = reason;
    const char *last = NULL;
    for (const char *p = strstr(c, "</think>"); p; p = strstr(p + 1, "</think>"))
        last = p;
    if (last) {
        content = last + 8;
        while (*content == '\n')
            content++;
        const char *first = strstr(c, "</think>");
        /* split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        const char *r0 = c, *r1 = first;
        while (r1 > r0 && r1[-1] == '\n')
            r1--;
        for (const char *p = r0; (p = strstr(p, "<think>")) && p < r1; p++)
            r0 = p + 7;
        while (r0 < r1 && *r0 == '\n')
            r0++;
        reason = r0;
        reason_end = r1;
    }
    int has_content = content[0] != '\0';
    sb_put(b, "<|im_start|>assistant\n");
    if (think_block) {
        sb_put(b, "<think>\n");
        put_trimmed(b, reason, (size_t)(reason_end - reason), 1, 1, "\n");
        sb_put(b, "\n</think>\n\n");
        while (*content == '\n')
            content++;
    }
    sb_msg(b, content);
    return has_content;
}

static int qwen3_has_reasoning(const char *c)
{
    const char *first = strstr(c, "</think>");
    if (!first) return 0;
    const char *r0 = c, *r1 = first;
    while (r1 > r0 && r1[-1] == '\n')
        r1--;
    for (const char *p = r0; (p = strstr(p, "<think>")) && p < r1; p++)
        r0 = p + 7;
    while (r0 < r1 && *r0 == '\n')
        r0++;
    return r1 > r0;
}

enum nb_status nb_chat_render(const struct nb_chat_template *tpl, const struct nb_chat_msg *m,
                              int n, int add_gen, const char *bos, const char *eos, char **out)
{
    return nb_chat_render_marked(tpl, m, n, add_gen, bos, eos, out, NULL);
}

enum nb_status nb_chat_render_marked(const struct nb_chat_template *tpl,
                                     const struct nb_chat_msg *m, int n, int add_gen,
                                     const char *bos, const char *eos, char **out,
                                     uint8_t **from_msg)
{
    enum nb_status st = NB_OK;
    struct sb b = {.track = from_msg != NULL};
    *out = NULL;
    if (from_msg) *from_msg = NULL;
    if (!bos) bos = "";
    if (!eos) eos = "";
    if (n < 0 || (n && !m)) return nb_set_error(NB_ERR_INVALID_ARG, "chat: no messages");
    for (int i = 0; i < n; i++)
        if (!m[i].role || !m[i].content)
            return nb_set_error(NB_ERR_INVALID_ARG, "chat: message %d without role or content", i);
    int has_sys = n > 0 && role_is(&m[0], "system");
    sb_put(&b, "");
    switch (tpl->kind) {
    case NB_CHAT_CHATML:
        if (tpl->default_system && !has_sys) {
            sb_put(&b, "<|im_start|>system\n");
            sb_put(&b, tpl->default_system);
            sb_put(&b, "<|im_end|>\n");
        }
        for (int i = 0; i < n; i++) {
            sb_put(&b, "<|im_start|>");
            sb_msg(&b, m[i].role);
            sb_put(&b, "\n");
            sb_msg(&b, m[i].content);
            sb_put(&b, "<|im_end|>\n");
        }
        if (add_gen) sb_put(&b, "<|im_start|>assistant\n");
        break;
    case NB_CHAT_QWEN3: {
        if (has_sys) {
            sb_put(&b, "<|im_start|>system\n");
            sb_msg(&b, m[0].content);
            sb_put(&b, "<|im_end|>\n");
        }
        int last_query = n - 1;
        for (int i = n - 1; i >= 0; i--) {
            const char *c = m[i].content;
            size_t cl = strlen(c);
            int tool_resp = !strncmp(c, "<tool_response>", 15) && cl >= 16 &&
                            !strcmp(c + cl - 16, "</tool_response>");
            if (role_is(&m[i], "user") && !tool_resp) {
                last_query = i;
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0)) {
                sb_put(&b, "<|im_start|>");
                sb_msg(&b, m[i].role);
                sb_put(&b, "\n");
                sb_msg(&b, m[i].content);
                sb_put(&b, "<|im_end|>\n");
            } else if (role_is(&m[i], "assistant")) {
                int think = i > last_query && (i == n - 1 || qwen3_has_reasoning(m[i].content));
                qwen3_assistant(&b, m[i].content, think);
                sb_put(&b, "<|im_end|>\n");
            }
        }
        if (add_gen) sb_put(&b, "<|im_start|>assistant\n");
        break;
    }
    case NB_CHAT_LLAMA3:
        for (int i = 0; i < n; i++) {
            if (i == 0) sb_put(&b, bos);
            sb_put(&b, "<|start_header_id|>");
            sb_msg(&b, m[i].role);
            sb_put(&b, "<|end_header_id|>\n\n");
            put_trimmed(&b, m[i].content, strlen(m[i].content), 1, 1, NULL);
            sb_put(&b, "<|eot_id|>");
        }
        if (add_gen || tpl->gen_prompt_always)
            sb_put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case NB_CHAT_GEMMA: {
        sb_put(&b, bos);
        int from = has_sys ? 1 : 0;
        if ((st = check_alternating(m, n, from))) goto fail;
        for (int i = from; i < n; i++) {
            sb_put(&b, "<start_of_turn>");
            sb_msg(&b, role_is(&m[i], "assistant") ? "model" : m[i].role);
            sb_put(&b, "\n");
            if (i == from && has_sys) {
                sb_msg(&b, m[0].content);
                sb_put(&b, "\n\n");
            }
            put_trimmed(&b, m[i].content, strlen(m[i].content), 1, 1, NULL);
            sb_put(&b, "<end_of_turn>\n");
        }
        if (add_gen) sb_put(&b, "<start_of_turn>model\n");
        break;
    }
    case NB_CHAT_LLAMA2: {
        int from = has_sys ? 1 : 0;
        if ((st = check_alternating(m, n, from))) goto fail;
        for (int i = from; i < n; i++) {
            struct sb c = {0};
            if (i == from && has_sys) {
                sb_put(&c, "<<SYS>>\n");
                sb_msg(&c, m[0].content);
                sb_put(&c, "\n<</SYS>>\n\n");
            }
            sb_msg(&c, m[i].content);
            if (c.oom) {
                free(c.p);
                b.oom = 1;
                break;
            }
            if (role_is(&m[i], "user")) {
                sb_put(&b, bos);
                sb_put(&b, "[INST] ");
                put_trimmed(&b, c.p, c.n, 1, 1, NULL);
                sb_put(&b, " [/INST]");
            } else {
                sb_put(&b, " ");
                put_trimmed(&b, c.p, c.n, 1, 1, NULL);
                sb_put(&b, " ");
                sb_put(&b, eos);
            }
            free(c.p);
        }
        break;
    }
    default: st = nb_set_error(NB_ERR_INVALID_ARG, "chat: no template"); goto fail;
    }
    if (b.oom) {
        st = nb_set_error(NB_ERR_NOMEM, "chat: out of memory");
        goto fail;
    }
    *out = b.p;
    if (from_msg) *from_msg = b.m;
    return NB_OK;
fail:
    free(b.p);
    free(b.m);
    return st;
}

/* ---------------------------------------------------------------- tools */

/* A JSON value as the templates' `tojson` writes it (Python's json.dumps: ", " and ": "
 * between items, or with indent > 0 one item a line and "," / ": "; non-ASCII as is),
 * every byte marked as message data. */
static void put_json(struct sb *b, const cJSON *v, int indent, int level)
{
    char num[64];
    if (cJSON_IsString(v)) {
        sb_msg(b, "\"");
        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++) {
            const char *esc = NULL;
            switch (*p) {
            case '"': esc = "\\\""; break;
            case '\\': esc = "\\\\"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            default:
                if (*p < 0x20) {
                    snprintf(num, sizeof num, "\\u%04x", *p);
                    esc = num;
                }
            }
            if (esc)
                sb_msg(b, esc);
            else
                sb_putn_as(b, (const char *)p, 1, 1);
        }
        sb_msg(b, "\"");
    } else if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        if (!isfinite(x))
            snprintf(num, sizeof num, "null");
        else if (x == floor(x) && fabs(x) < 1e16)
            snprintf(num, sizeof num, "%.0f", x);
        else
            for (int prec = 15; prec <= 17; prec++) { /* the shortest that reads back */
                snprintf(num, sizeof num, "%.*g", prec, x);
                if (strtod(num, NULL) == x) break;
            }
        sb_msg(b, num);
    } else if (cJSON_IsBool(v)) {
        sb_msg(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int obj = cJSON_IsObject(v);
        sb_msg(b, obj ? "{" : "[");
        const cJSON *it;
        int first = 1;
        cJSON_ArrayForEach(it, v)
        {
            if (!first) sb_msg(b, indent ? "," : ", ");
            first = 0;
            if (indent) {
                sb_msg(b, "\n");
                for (int k = 0; k < (level + 1) * indent; k++)
                    sb_msg(b, " ");
            }
            if (obj) {
                cJSON key = {.type = cJSON_String, .valuestring = it->string};
                put_json(b, &key, 0, 0);
                sb_msg(b, ": ");
            }
            put_json(b, it, indent, level + 1);
        }
        if (indent && !first) {
            sb_msg(b, "\n");
            for (int k = 0; k < level * indent; k++)
                sb_msg(b, " ");
        }
        sb_msg(b, obj ? "}" : "]");
    } else {
        sb_msg(b, "null");
    }
}

static const char *const k_hermes_tools_head =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char *const k_hermes_tools_tail =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

/* ChatML (Qwen2.5's template) and Qwen3 with tools. */
static enum nb_status render_hermes(struct sb *b, const struct nb_chat_template *tpl,
                                    const struct nb_chat_tmsg *m, int n, const cJSON *tools,
                                    int add_gen)
{
    int qwen3 = tpl->kind == NB_CHAT_QWEN3;
    int has_sys = n > 0 && !strcmp(m[0].role, "system");
    if (tools) {
        sb_put(b, "<|im_start|>system\n");
        const char *pre = has_sys ? m[0].content : qwen3 ? NULL : tpl->default_system;
        if (pre) {
            if (has_sys)
                sb_msg(b, pre);
            else
                sb_put(b, pre);
            sb_put(b, "\n\n");
        }
        sb_put(b, k_hermes_tools_head);
        const cJSON *t;
        cJSON_ArrayForEach(t, tools)
        {
            sb_put(b, "\n");
            put_json(b, t, 0, 0);
        }
        sb_put(b, k_hermes_tools_tail);
    } else if (has_sys || (!qwen3 && tpl->default_system)) {
        sb_put(b, "<|im_start|>system\n");
        if (has_sys)
            sb_msg(b, m[0].content);
        else
            sb_put(b, tpl->default_system);
        sb_put(b, "<|im_end|>\n");
    }
    int last_query = n - 1;
    for (int i = n - 1; qwen3 && i >= 0; i--) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        int tool_resp = !strncmp(c, "<tool_response>", 15) && cl >= 16 &&
                        !strcmp(c + cl - 16, "</tool_response>");
        if (!strcmp(m[i].role, "user") && !tool_resp) {
            last_query = i;
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        const struct nb_chat_tmsg *x = &m[i];
        if (!strcmp(x->role, "user") || (!strcmp(x->role, "system") && i > 0) ||
            (!qwen3 && !strcmp(x->role, "assistant") && !x->n_calls)) {
            sb_put(b, "<|im_start|>");
            sb_msg(b, x->role);
            sb_put(b, "\n");
            sb_msg(b, x->content);
            sb_put(b, "<|im_end|>\n");
        } else if (!strcmp(x->role, "assistant")) {
            int content;
            if (qwen3) {
                int think = i > last_query && (i == n - 1 || qwen3_has_reasoning(x->content));
                content = qwen3_assistant(b, x->content, think);
            } else {
                sb_put(b, "<|im_start|>assistant");
                if (x->content[0]) {
                    sb_put(b, "\n");
                    sb_msg(b, x->content);
                }
                content = 1; /* Qwen2.5 puts a newline before every call */
            }
            for (int k = 0; k < x->n_calls; k++) {
                if (k > 0 || content) sb_put(b, "\n");
                sb_put(b, "<tool_call>\n{\"name\": \"");
                sb_msg(b, x->calls[k].name);
                sb_put(b, "\", \"arguments\": ");
                const cJSON *a = x->calls[k].arguments;
                if (qwen3 && cJSON_IsString(a))
                    sb_msg(b, a->valuestring);
                else if (a)
                    put_json(b, a, 0, 0);
                else
                    sb_msg(b, "{}");
                sb_put(b, "}\n</tool_call>");
            }
            sb_put(b, "<|im_end|>\n");
        } else if (!strcmp(x->role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) sb_put(b, "<|im_start|>user");
            sb_put(b, "\n<tool_response>\n");
            sb_msg(b, x->content);
            sb_put(b, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool")) sb_put(b, "<|im_end|>\n");
        }
    }
    if (add_gen) sb_put(b, "<|im_start|>assistant\n");
    return NB_OK;
}

/* Llama 3.1's template (tools in the first user message, its default). */
static enum nb_status render_llama31(struct sb *b, const struct nb_chat_tmsg *m, int n,
                                     const cJSON *tools, int add_gen, const char *bos)
{
    sb_put(b, bos);
    int from = 0;
    sb_put(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (tools) sb_put(b, "Environment: ipython\n");
    /* strftime_now("%d %b %Y"), as the template asks of its host */
    char date[64] = "26 Jul 2024";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%d %b %Y", &tm);
    sb_put(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    sb_put(b, date);
    sb_put(b, "\n\n");
    if (n > 0 && !strcmp(m[0].role, "system")) {
        put_trimmed(b, m[0].content, strlen(m[0].content), 1, 1, NULL);
        from = 1;
    }
    sb_put(b, "<|eot_id|>");
    if (tools) {
        if (from >= n)
            return nb_set_error(NB_ERR_INVALID_ARG, "chat: Cannot put tools in the first user "
                                                    "message when there's no first user message!");
        sb_put(b, "<|start_header_id|>user<|end_header_id|>\n\n");
        sb_put(b, "Given the following functions, please respond with a JSON for a function call "
                  "with its proper arguments that best answers the given prompt.\n\n");
        sb_put(b, "Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                  "argument name and its value}.Do not use variables.\n\n");
        const cJSON *t;
        cJSON_ArrayForEach(t, tools)
        {
            put_json(b, t, 4, 0);
            sb_put(b, "\n\n");
        }
        put_trimmed(b, m[from].content, strlen(m[from].content), 1, 1, NULL);
        sb_put(b, "<|eot_id|>");
        from++;
    }
    for (int i = from; i < n; i++) {
        const struct nb_chat_tmsg *x = &m[i];
        if (x->n_calls) {
            if (x->n_calls != 1)
                return nb_set_error(NB_ERR_INVALID_ARG,
                                    "chat: This model only supports single tool-calls at once!");
            sb_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            sb_msg(b, x->calls[0].name);
            sb_put(b, "\", \"parameters\": ");
            if (x->calls[0].arguments)
                put_json(b, x->calls[0].arguments, 0, 0);
            else
                sb_msg(b, "{}");
            sb_put(b, "}<|eot_id|>");
        } else if (!strcmp(x->role, "tool") || !strcmp(x->role, "ipython")) {
            /* the template's `content is iterable` holds for a string: it is written as
             * JSON */
            sb_put(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            cJSON s = {.type = cJSON_String, .valuestring = (char *)x->content};
            put_json(b, &s, 0, 0);
            sb_put(b, "<|eot_id|>");
        } else {
            sb_put(b, "<|start_header_id|>");
            sb_msg(b, x->role);
            sb_put(b, "<|end_header_id|>\n\n");
            put_trimmed(b, x->content, strlen(x->content), 1, 1, NULL);
            sb_put(b, "<|eot_id|>");
        }
    }
    if (add_gen) sb_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return NB_OK;
}

enum nb_status nb_chat_render_tools(const struct nb_chat_template *tpl,
                                    const struct nb_chat_tmsg *m, int n, const cJSON *tools,
                                    int add_gen, const char *bos, const char *eos, char **out,
                                    uint8_t **from_msg)
{
    enum nb_status st = NB_OK;
    struct sb b = {.track = from_msg != NULL};
    (void)eos;
    *out = NULL;
    if (from_msg) *from_msg = NULL;
    if (n < 0 || (n && !m)) return nb_set_error(NB_ERR_INVALID_ARG, "chat: no messages");
    for (int i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return nb_set_error(NB_ERR_INVALID_ARG, "chat: message %d without role or content", i);
        for (int k = 0; k < m[i].n_calls; k++)
            if (!m[i].calls || !m[i].calls[k].name)
                return nb_set_error(NB_ERR_INVALID_ARG, "chat: message %d: a call without name", i);
    }
    if (tools && !cJSON_IsArray(tools))
        return nb_set_error(NB_ERR_INVALID_ARG, "chat: tools must be an array");
    sb_put(&b, "");
    switch (tpl->kind) {
    case NB_CHAT_CHATML:
    case NB_CHAT_QWEN3: st = render_hermes(&b, tpl, m, n, tools, add_gen); break;
    case NB_CHAT_LLAMA3: st = render_llama31(&b, m, n, tools, add_gen, bos ? bos : ""); break;
    default:
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "chat template '%s' has no tool-call format (chatml, qwen3 and llama3 "
                          "have one)",
                          nb_chat_kind_name(tpl->kind));
    }
    if (st) goto fail;
    if (b.oom) {
        st = nb_set_error(NB_ERR_NOMEM, "chat: out of memory");
        goto fail;
    }
    *out = b.p;
    if (from_msg) *from_msg = b.m;
    return NB_OK;
fail:
    free(b.p);
    free(b.m);
    return st;
}
