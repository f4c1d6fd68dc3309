/* tokenizer/chat.c — recognising and rendering the chat templates nibble knows.
 *
 * Not a Jinja interpreter: each known template family is written out by hand from
 * its Jinja source (the sources are in tests/fixtures/tokenizer-corpus.json and the
 * models' tokenizer_config.json), and tests compare the renders with
 * @huggingface/jinja's on the same messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Qwen3: assistant content after </think>, and the reasoning between <think> and it. */
static void qwen3_assistant(struct sb *b, const char *c, int think_block)
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
    sb_put(b, "<|im_start|>assistant\n");
    if (think_block) {
        sb_put(b, "<think>\n");
        put_trimmed(b, reason, (size_t)(reason_end - reason), 1, 1, "\n");
        sb_put(b, "\n</think>\n\n");
        while (*content == '\n')
            content++;
    }
    sb_msg(b, content);
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
