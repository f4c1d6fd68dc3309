/* runtime/api_tokenizer.c — nibble.h's tokenizer, streaming detokenizer, stop strings
 * and chat templates: the caller-buffer contracts (llama.cpp's: the count, or the size
 * needed) over tokenizer/tokenizer.h, whose calls allocate. */
#include <stdlib.h>
#include <string.h>

#include "formats/source.h"
#include "model/model.h"
#include "runtime/api.h"
#include "runtime/model_tokenizer.h"
#include "tokenizer/tokenizer.h"

enum nb_status nb_tokenizer_load(struct nb_tokenizer **out, const char *path)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "nb_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_tokenizer_load: no path given");
    struct nb_source *src = NULL;
    enum nb_status st = nb_source_open(&src, path);
    if (!st) st = nb_tokenizer_for_source(out, src);
    nb_source_free(src);
    if (st == NB_OK) return NB_OK;
    /* X.bin is a llama2.c checkpoint (its tokenizer beside it) or, failing that, a
     * llama2.c tokenizer file itself; the checkpoint's error is the one to report */
    size_t n = strlen(path);
    if (n >= 4 && !strcmp(path + n - 4, ".bin")) {
        char first[1024];
        nb_api_str(first, sizeof first, nb_last_error());
        if (nb_tokenizer_load_llama2c(out, path, 0) == NB_OK) return NB_OK;
        return nb_set_error(st, "%s", first);
    }
    return st;
}

enum nb_status nb_tokenizer_from_model(struct nb_tokenizer **out, const struct nb_model *model)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "nb_tokenizer_from_model: out is NULL");
    *out = NULL;
    if (!model) return nb_set_error(NB_ERR_INVALID_ARG, "nb_tokenizer_from_model: no model");
    return nb_tokenizer_for_source(out, nb_model_source(model));
}

void nb_tokenizer_get_info(const struct nb_tokenizer *tok, struct nb_tokenizer_info *info)
{
    struct nb_tokenizer_info r = {
        .size = sizeof r,
        .n_vocab = nb_tokenizer_n_vocab(tok),
        .bos_id = nb_tokenizer_bos(tok),
        .eos_id = nb_tokenizer_eos(tok),
        .eot_id = nb_tokenizer_eot(tok),
        .adds_bos = nb_tokenizer_adds_bos(tok),
        .desc = nb_tokenizer_desc(tok),
        .chat_template = nb_tokenizer_chat_template(tok),
    };
    nb_api_out(info, &r, sizeof r);
}

enum nb_status nb_tokenize_text(const struct nb_tokenizer *tok, const char *text, size_t len,
                                int add_special, int parse_special, int32_t *ids, int n_max,
                                int *n_ids)
{
    int32_t *all = NULL;
    int n = 0;
    if (!tok || !n_ids || (!text && len) || n_max < 0 || (!ids && n_max > 0))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_tokenize_text: tok, n_ids, text (for len > 0) and ids (for "
                            "n_max > 0) must be given, n_max >= 0");
    enum nb_status st = nb_tokenize(tok, text ? text : "", len, add_special, parse_special, &all,
                                    &n);
    if (st) return st;
    *n_ids = n;
    if (n > n_max) {
        free(all);
        return nb_set_error(NB_ERR_RANGE, "tokenize: %d ids do not fit the %d given", n, n_max);
    }
    if (n) memcpy(ids, all, sizeof *ids * (size_t)n);
    free(all);
    return NB_OK;
}

/* `n` bytes of `s` into buf[0..size) with a NUL, or NB_ERR_RANGE with *len = n. */
static enum nb_status to_buf(const char *what, const char *s, size_t n, char *buf, size_t size,
                             size_t *len)
{
    if (len) *len = n;
    if (n + 1 > size || !buf)
        return nb_set_error(NB_ERR_RANGE, "%s: %zu bytes and a NUL do not fit the %zu given",
                            what, n, size);
    memcpy(buf, s, n);
    buf[n] = '\0';
    return NB_OK;
}

enum nb_status nb_detokenize_text(const struct nb_tokenizer *tok, const int32_t *ids, int n_ids,
                                  int special, char *buf, size_t size, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    if (!tok || n_ids < 0 || (!ids && n_ids))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_detokenize_text: tok and ids (for n_ids > 0) must be given");
    enum nb_status st = nb_detokenize(tok, ids, n_ids, special ? NB_DETOK_SPECIAL : 0, &text, &n);
    if (st == NB_OK) st = to_buf("detokenize", text, n, buf, size, len);
    free(text);
    return st;
}

enum nb_status nb_token_to_piece(const struct nb_tokenizer *tok, int32_t id, char *buf,
                                 size_t size, size_t *len)
{
    const char *b;
    size_t n;
    if (!tok) return nb_set_error(NB_ERR_INVALID_ARG, "nb_token_to_piece: no tokenizer");
    enum nb_status st = nb_token_bytes(tok, id, &b, &n);
    return st ? st : to_buf("token piece", b, n, buf, size, len);
}

const char *nb_token_vocab_entry(const struct nb_tokenizer *tok, int32_t id)
{
    return tok ? nb_token_piece(tok, id) : NULL;
}

/* ---------------------------------------------------------------- streaming */

struct nb_detokenizer {
    struct nb_detok d;
};

enum nb_status nb_detokenizer_init(struct nb_detokenizer **out, const struct nb_tokenizer *tok,
                                   int special)
{
    if (!out || !tok)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_detokenizer_init: out and tok must be given");
    if (!(*out = calloc(1, sizeof **out))) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    nb_detok_init(&(*out)->d, tok, special ? NB_DETOK_SPECIAL : 0);
    return NB_OK;
}

enum nb_status nb_detokenizer_feed(struct nb_detokenizer *d, int32_t id, const char **text,
                                   size_t *len)
{
    return nb_detok_feed(&d->d, id, text, len);
}

enum nb_status nb_detokenizer_flush(struct nb_detokenizer *d, const char **text, size_t *len)
{
    return nb_detok_flush(&d->d, text, len);
}

void nb_detokenizer_free(struct nb_detokenizer *d)
{
    if (!d) return;
    nb_detok_free(&d->d);
    free(d);
}

struct nb_stop_matcher {
    struct nb_stop s;
};

enum nb_status nb_stop_matcher_init(struct nb_stop_matcher **out, const char *const *stops,
                                    int n_stops)
{
    if (!out || n_stops < 0 || (n_stops && !stops))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_stop_matcher_init: out must be given, and stops for n_stops > 0");
    if (!(*out = calloc(1, sizeof **out))) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    enum nb_status st = nb_stop_init(&(*out)->s, stops, n_stops);
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

int nb_stop_matcher_feed(struct nb_stop_matcher *m, const char *text, size_t len,
                         const char **emit, size_t *n_emit)
{
    return nb_stop_feed(&m->s, text, len, emit, n_emit);
}

void nb_stop_matcher_flush(struct nb_stop_matcher *m, const char **emit, size_t *n_emit)
{
    nb_stop_flush(&m->s, emit, n_emit);
}

void nb_stop_matcher_free(struct nb_stop_matcher *m)
{
    if (!m) return;
    nb_stop_free(&m->s);
    free(m);
}

struct nb_text_out {
    const struct nb_tokenizer *tok;
    struct nb_detok d;
    struct nb_stop s;
    int ignore_eog, stopped;
    char *buf; /* flush: the detokenizer's rest and the matcher's held text together */
    size_t cap;
};

struct nb_text_out_params nb_text_out_default_params(void)
{
    return (struct nb_text_out_params){.size = sizeof(struct nb_text_out_params)};
}

enum nb_status nb_text_out_init(struct nb_text_out **out, const struct nb_tokenizer *tok,
                                const struct nb_text_out_params *params)
{
    struct nb_text_out_params pv = nb_text_out_default_params(), *p = &pv;
    if (out) *out = NULL;
    enum nb_status st = nb_params_in(p, sizeof *p, params, "nb_text_out_params");
    if (st) return st;
    if (!out || !tok || p->n_stops < 0 || (p->n_stops && !p->stops))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "nb_text_out_init: out and tok must be given (and stops for "
                            "n_stops > 0)");
    struct nb_text_out *o = calloc(1, sizeof *o);
    if (!o) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    st = nb_stop_init(&o->s, p->stops, p->n_stops);
    if (st) {
        free(o);
        return st;
    }
    nb_detok_init(&o->d, tok, p->special ? NB_DETOK_SPECIAL : 0);
    o->tok = tok;
    o->ignore_eog = p->ignore_eog;
    *out = o;
    return NB_OK;
}

enum nb_text_event nb_text_out_feed(struct nb_text_out *o, int32_t id, const char **text,
                                    size_t *len)
{
    *text = "";
    *len = 0;
    if (o->stopped) return NB_TEXT_STOP;
    if (!o->ignore_eog && nb_tokenizer_is_eog(o->tok, id)) return NB_TEXT_EOG;
    const char *t;
    size_t n;
    if (nb_detok_feed(&o->d, id, &t, &n) != NB_OK) return NB_TEXT_ERROR;
    o->stopped = nb_stop_feed(&o->s, t, n, text, len);
    return o->stopped ? NB_TEXT_STOP : NB_TEXT_MORE;
}

/* Append n bytes to o->buf at *at (grown as needed; on failure the text is cut). */
static void out_put(struct nb_text_out *o, size_t *at, const char *t, size_t n)
{
    if (*at + n + 1 > o->cap) {
        size_t cap = (*at + n + 1) * 2;
        char *b = realloc(o->buf, cap);
        if (!b) return;
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + *at, t, n);
    *at += n;
    o->buf[*at] = '\0';
}

void nb_text_out_flush(struct nb_text_out *o, const char **text, size_t *len)
{
    size_t at = 0;
    const char *t, *emit;
    size_t n, n_emit;
    if (!o->stopped && nb_detok_flush(&o->d, &t, &n) == NB_OK) {
        o->stopped = nb_stop_feed(&o->s, t, n, &emit, &n_emit);
        out_put(o, &at, emit, n_emit);
    }
    if (!o->stopped) {
        nb_stop_flush(&o->s, &emit, &n_emit);
        out_put(o, &at, emit, n_emit);
        o->stopped = 1; /* nothing more */
    }
    *text = o->buf ? o->buf : "";
    *len = at;
}

void nb_text_out_free(struct nb_text_out *o)
{
    if (!o) return;
    nb_detok_free(&o->d);
    nb_stop_free(&o->s);
    free(o->buf);
    free(o);
}

/* ---------------------------------------------------------------- chat */

static enum nb_status resolve(const struct nb_tokenizer *tok, const char *name,
                              struct nb_chat_template *tpl)
{
    if (name) return nb_chat_template_by_name(name, tpl);
    if (!tok)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "chat template: give a template name or a tokenizer");
    const char *jinja = nb_tokenizer_chat_template(tok);
    if (!jinja)
        return nb_set_error(NB_ERR_NOT_FOUND,
                            "the tokenizer (%s) has no chat template: name one (chatml, qwen3, "
                            "llama3, llama2, gemma)",
                            nb_tokenizer_desc(tok));
    return nb_chat_template_detect(jinja, tpl);
}

enum nb_status nb_chat_template_resolve(const struct nb_tokenizer *tok, const char *name,
                                        const char **kind)
{
    struct nb_chat_template tpl;
    enum nb_status st = resolve(tok, name, &tpl);
    if (st == NB_OK && kind) *kind = nb_chat_kind_name(tpl.kind);
    return st;
}

enum nb_status nb_chat_template_choose(const struct nb_tokenizer *tok, const char *name,
                                       const char **kind, const char **note)
{
    struct nb_chat_template tpl;
    if (!name && !tok)
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "chat template: give a template name or a tokenizer");
    enum nb_status st =
        nb_chat_template_pick(name, name ? NULL : nb_tokenizer_chat_template(tok), &tpl, note);
    if (st == NB_OK && kind) *kind = nb_chat_kind_name(tpl.kind);
    return st;
}

enum nb_status nb_chat_apply(const struct nb_tokenizer *tok, const char *name,
                             const struct nb_chat_msg *msgs, int n_msgs, int add_assistant,
                             char *buf, size_t size, size_t *len)
{
    struct nb_chat_template tpl;
    char *text = NULL;
    if (n_msgs < 0 || (n_msgs && !msgs))
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_chat_apply: msgs must be given for n_msgs > 0");
    for (int i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return nb_set_error(NB_ERR_INVALID_ARG, "nb_chat_apply: message %d has no %s", i,
                                msgs[i].role ? "content" : "role");
    enum nb_status st = resolve(tok, name, &tpl);
    if (st) return st;
    /* the templates' bos_token / eos_token: the texts of the tokenizer's own */
    int bos = tok ? nb_tokenizer_bos(tok) : -1, eos = tok ? nb_tokenizer_eos(tok) : -1;
    const char *bos_text = bos >= 0 ? nb_token_piece(tok, bos) : "";
    const char *eos_text = eos >= 0 ? nb_token_piece(tok, eos) : "";
    st = nb_chat_render(&tpl, msgs, n_msgs, add_assistant, bos_text, eos_text, &text);
    if (st == NB_OK) st = to_buf("chat template", text, strlen(text), buf, size, len);
    free(text);
    return st;
}
