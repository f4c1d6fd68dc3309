/* tokenizer/detok.c — streaming detokenizer and stop strings. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static enum nb_status out_reserve(struct nb_detok *d, size_t extra)
{
    if (d->out_len + extra + 1 <= d->out_cap) return NB_OK;
    size_t cap = d->out_cap ? d->out_cap : 64;
    while (cap < d->out_len + extra + 1)
        cap *= 2;
    char *p = realloc(d->out, cap);
    if (!p) return nb_set_error(NB_ERR_NOMEM, "detokenize: out of memory");
    d->out = p;
    d->out_cap = cap;
    return NB_OK;
}

static void put_fffd(struct nb_detok *d)
{
    memcpy(d->out + d->out_len, "\xef\xbf\xbd", 3);
    d->out_len += 3;
}

void nb_detok_init(struct nb_detok *d, const struct nb_tokenizer *tok, int flags)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->flags = flags;
    d->prev = -1;
}

void nb_detok_free(struct nb_detok *d)
{
    free(d->out);
    memset(d, 0, sizeof *d);
}

/* Held bytes of an incomplete character become one U+FFFD. */
static enum nb_status flush_pending(struct nb_detok *d)
{
    if (!d->n_pend) return NB_OK;
    enum nb_status st = out_reserve(d, 3);
    if (st) return st;
    put_fffd(d);
    d->n_pend = 0;
    return NB_OK;
}

/* Append bytes, emitting complete valid characters and U+FFFD for invalid ones;
 * an incomplete character at the end is held. */
static enum nb_status push_bytes(struct nb_detok *d, const uint8_t *s, size_t n)
{
    enum nb_status st;
    /* Worst case every byte becomes U+FFFD. */
    if ((st = out_reserve(d, (n + 4) * 3))) return st;
    uint8_t tmp[8];
    size_t i = 0;
    /* Complete a held character first, byte by byte. */
    while (d->n_pend && i < n) {
        memcpy(tmp, d->pend, (size_t)d->n_pend);
        tmp[d->n_pend] = s[i];
        size_t m = (size_t)d->n_pend + 1;
        uint32_t cp;
        int bad, l = tok_utf8_next(tmp, m, &cp, &bad);
        if (l) {
            memcpy(d->out + d->out_len, tmp, m);
            d->out_len += m;
            d->n_pend = 0;
            i++;
        } else if ((size_t)bad >= m) { /* still incomplete */
            d->pend[d->n_pend++] = s[i++];
        } else { /* invalid: one U+FFFD for the held bytes, reprocess s[i] */
            put_fffd(d);
            d->n_pend = 0;
        }
    }
    while (i < n) {
        if (s[i] < 0x80) {
            d->out[d->out_len++] = (char)s[i++];
            continue;
        }
        uint32_t cp;
        int bad, l = tok_utf8_next(s + i, n - i, &cp, &bad);
        if (l) {
            memcpy(d->out + d->out_len, s + i, (size_t)l);
            d->out_len += (size_t)l;
            i += (size_t)l;
        } else if (i + (size_t)bad >= n && s[i] >= 0xC2 && s[i] <= 0xF4) {
            memcpy(d->pend, s + i, n - i); /* incomplete at the end: hold */
            d->n_pend = (int)(n - i);
            i = n;
        } else {
            put_fffd(d);
            i += (size_t)bad;
        }
    }
    d->out[d->out_len] = '\0';
    return NB_OK;
}

enum nb_status nb_detok_feed(struct nb_detok *d, int32_t id, const char **text, size_t *len)
{
    enum nb_status st = NB_OK;
    const struct nb_tokenizer *t = d->tok;
    d->out_len = 0;
    *text = "";
    *len = 0;
    if (id < 0 || id >= t->n_vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "detokenize: token id %d out of range [0, %d)",
                            (int)id, (int)t->n_vocab);
    int32_t prev = d->prev;
    d->prev = id;
    if ((t->flags[id] & TF_SPECIAL) && !(d->flags & NB_DETOK_SPECIAL)) return NB_OK;
    const uint8_t *s = (const uint8_t *)t->text[id];
    size_t n = t->text_len[id];
    if (t->strip_after_bos && prev >= 0 && prev == t->bos && n && s[0] == ' ') {
        s++;
        n--;
    }
    /* An added token ends a run of bytes (as the reference decoders do). */
    if ((t->flags[id] & TF_ADDED) && (st = flush_pending(d))) return st;
    if ((st = push_bytes(d, s, n))) return st;
    *text = d->out ? d->out : "";
    *len = d->out_len;
    return NB_OK;
}

enum nb_status nb_token_bytes(const struct nb_tokenizer *tok, int32_t id, const char **bytes,
                              size_t *len)
{
    if (id < 0 || id >= tok->n_vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "token id %d out of range [0, %d)", (int)id,
                            (int)tok->n_vocab);
    *bytes = tok->text[id];
    *len = tok->text_len[id];
    return NB_OK;
}

enum nb_status nb_detok_flush(struct nb_detok *d, const char **text, size_t *len)
{
    d->out_len = 0;
    enum nb_status st = flush_pending(d);
    if (!st) st = out_reserve(d, 0);
    if (st) return st;
    d->out[d->out_len] = '\0';
    *text = d->out;
    *len = d->out_len;
    return NB_OK;
}

enum nb_status nb_detokenize(const struct nb_tokenizer *tok, const int32_t *ids, int n_ids,
                             int flags, char **out, size_t *out_len)
{
    enum nb_status st = NB_OK;
    struct nb_detok d;
    char *res = NULL;
    size_t len = 0, cap = 64;
    *out = NULL;
    nb_detok_init(&d, tok, flags);
    res = malloc(cap);
    if (!res) {
        st = nb_set_error(NB_ERR_NOMEM, "detokenize: out of memory");
        goto fail;
    }
    for (int i = 0; i <= n_ids; i++) {
        const char *s;
        size_t n;
        st = i < n_ids ? nb_detok_feed(&d, ids[i], &s, &n) : nb_detok_flush(&d, &s, &n);
        if (st) goto fail;
        if (len + n + 1 > cap) {
            while (len + n + 1 > cap)
                cap *= 2;
            char *p = realloc(res, cap);
            if (!p) {
                st = nb_set_error(NB_ERR_NOMEM, "detokenize: out of memory");
                goto fail;
            }
            res = p;
        }
        memcpy(res + len, s, n);
        len += n;
    }
    res[len] = '\0';
    *out = res;
    if (out_len) *out_len = len;
    res = NULL;
fail:
    free(res);
    nb_detok_free(&d);
    return st;
}

/* ---------------------------------------------------------------- stop strings */

enum nb_status nb_stop_init(struct nb_stop *s, const char *const *stops, int n_stops)
{
    memset(s, 0, sizeof *s);
    if (n_stops <= 0) return NB_OK;
    s->stops = calloc((size_t)n_stops, sizeof *s->stops);
    if (!s->stops) return nb_set_error(NB_ERR_NOMEM, "stop strings: out of memory");
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        if (!(s->stops[s->n_stops] = strdup(stops[i]))) {
            nb_stop_free(s);
            return nb_set_error(NB_ERR_NOMEM, "stop strings: out of memory");
        }
        size_t l = strlen(stops[i]);
        if (l > s->max_len) s->max_len = l;
        s->n_stops++;
    }
    return NB_OK;
}

void nb_stop_free(struct nb_stop *s)
{
    for (int i = 0; i < s->n_stops; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

int nb_stop_feed(struct nb_stop *s, const char *text, size_t len, const char **emit, size_t *n_emit)
{
    if (!s->n_stops) {
        *emit = text;
        *n_emit = len;
        return 0;
    }
    /* Drop what the last call released; the held tail moves to the front. */
    if (s->buf) memmove(s->buf, s->buf + s->off, s->len);
    s->off = 0;
    if (s->len + len + 1 > s->cap) {
        size_t cap = (s->len + len + 1) * 2;
        char *p = realloc(s->buf, cap);
        if (!p) { /* out of memory: stop holding back */
            *emit = text;
            *n_emit = len;
            return 0;
        }
        s->buf = p;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, text, len);
    s->len += len;
    /* The earliest complete stop string ends generation. */
    size_t best = (size_t)-1;
    for (int i = 0; i < s->n_stops; i++) {
        const char *hit = memmem(s->buf, s->len, s->stops[i], strlen(s->stops[i]));
        if (hit && (size_t)(hit - s->buf) < best) best = (size_t)(hit - s->buf);
    }
    if (best != (size_t)-1) {
        *emit = s->buf;
        *n_emit = best;
        s->off = 0;
        s->len = 0;
        return 1;
    }
    /* Hold back the longest tail that is a proper prefix of a stop string. */
    size_t hold = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t sl = strlen(s->stops[i]);
        for (size_t k = sl - 1 < s->len ? sl - 1 : s->len; k > hold; k--)
            if (!memcmp(s->buf + s->len - k, s->stops[i], k)) {
                hold = k;
                break;
            }
    }
    *emit = s->buf;
    *n_emit = s->len - hold;
    s->off = s->len - hold;
    s->len = hold;
    return 0;
}

void nb_stop_flush(struct nb_stop *s, const char **emit, size_t *n_emit)
{
    *emit = s->buf ? s->buf + s->off : "";
    *n_emit = s->len;
    s->off += s->len;
    s->len = 0;
}
