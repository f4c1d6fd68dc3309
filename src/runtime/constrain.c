/* runtime/constrain.c — the grammar recogniser of constrained decoding (constrain.h): a
 * byte-at-a-time pushdown automaton for JSON, literals and choices in sequence, and the
 * token checks built on it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/constrain.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- the vocabulary */

/* b[0..len) one UTF-8 character: no overlong form, surrogate or code point past U+10FFFF. */
static int srv_utf8_char_ok(const unsigned char *b, size_t len)
{
    unsigned cp = b[0] & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < len; k++) {
        if ((b[k] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (b[k] & 0x3f);
    }
    unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    return cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
}

enum nb_status nb_vocab_bytes_init(struct nb_vocab_bytes *v, const struct nb_tokenizer *tok,
                                    int n_vocab)
{
    memset(v, 0, sizeof *v);
    int n_tok = nb_tokenizer_n_vocab(tok);
    size_t total = 0;
    for (int i = 0; i < n_tok && i < n_vocab; i++) {
        const char *b;
        size_t n;
        if (nb_token_bytes(tok, i, &b, &n) == NB_OK) total += n;
    }
    v->off = malloc(sizeof *v->off * ((size_t)n_vocab + 1));
    v->bytes = malloc(total ? total : 1);
    v->kind = malloc(n_vocab > 0 ? (size_t)n_vocab : 1);
    if (!v->off || !v->bytes || !v->kind || total > UINT32_MAX) {
        nb_vocab_bytes_free(v);
        return nb_set_error(NB_ERR_NOMEM, "serve: out of memory (the vocabulary's bytes)");
    }
    v->n_vocab = n_vocab;
    uint32_t at = 0;
    for (int i = 0; i < n_vocab; i++) {
        const char *b = NULL;
        size_t n = 0;
        v->off[i] = at;
        if (i >= n_tok || nb_token_bytes(tok, i, &b, &n) != NB_OK) n = 0;
        if (n) memcpy(v->bytes + at, b, n);
        at += (uint32_t)n;
        if (i < n_tok && nb_tokenizer_is_eog(tok, i))
            v->kind[i] = NB_VTOK_EOG;
        else if (!n)
            v->kind[i] = NB_VTOK_EMPTY;
        else
            v->kind[i] = nb_tokenizer_is_special(tok, i) ? NB_VTOK_SPECIAL : NB_VTOK_TEXT;
    }
    v->off[n_vocab] = at;
    return nb_vocab_bytes_classify(v);
}

/* A token in the order of v->by_bytes: its bytes, then its id. */
struct tok_key {
    const unsigned char *b;
    uint32_t len, id;
};

static int cmp_tok(const void *pa, const void *pb)
{
    const struct tok_key *x = pa, *y = pb;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int d = memcmp(x->b, y->b, n);
    if (d) return d;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* v->by_bytes: the text and special tokens in the order of their bytes, and where each
 * first byte's run starts. */
static enum nb_status index_by_bytes(struct nb_vocab_bytes *v)
{
    size_t n = v->n_vocab > 0 ? (size_t)v->n_vocab : 0;
    free(v->by_bytes);
    v->by_bytes = malloc(sizeof *v->by_bytes * (n + 257));
    struct tok_key *k = malloc(sizeof *k * (n ? n : 1));
    if (!v->by_bytes || !k) {
        free(k);
        free(v->by_bytes);
        v->by_bytes = NULL;
        return nb_set_error(NB_ERR_NOMEM, "serve: out of memory (the vocabulary's index)");
    }
    uint32_t m = 0, *at = v->by_bytes + n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = v->off[i + 1] - v->off[i];
        if ((v->kind[i] == NB_VTOK_TEXT || v->kind[i] == NB_VTOK_SPECIAL) && len)
            k[m++] = (struct tok_key){(const unsigned char *)v->bytes + v->off[i], len, i};
    }
    qsort(k, m, sizeof *k, cmp_tok);
    for (uint32_t i = 0, b = 0; b <= 256; b++) {
        while (i < m && k[i].b[0] < b)
            i++;
        at[b] = i;
    }
    for (uint32_t i = 0; i < m; i++)
        v->by_bytes[i] = k[i].id;
    free(k);
    return NB_OK;
}

enum nb_status nb_vocab_bytes_classify(struct nb_vocab_bytes *v)
{
    free(v->plain);
    v->plain = NULL;
    if (index_by_bytes(v) != NB_OK) return NB_ERR_NOMEM;
    if (!(v->plain = malloc(v->n_vocab > 0 ? (size_t)v->n_vocab : 1)))
        return nb_set_error(NB_ERR_NOMEM, "serve: out of memory (the vocabulary's classes)");
    for (int i = 0; i < v->n_vocab; i++) {
        const unsigned char *b = (const unsigned char *)v->bytes + v->off[i];
        size_t n = v->off[i + 1] - v->off[i], k = 0;
        int ok = v->kind[i] == NB_VTOK_TEXT && n > 0;
        while (ok && k < n) {
            if (b[k] < 0x80) {
                ok = b[k] >= 0x20 && b[k] != '"' && b[k] != '\\';
                k++;
                continue;
            }
            /* a whole, valid character (the checks of the string state) */
            size_t len = b[k] >= 0xc2 && b[k] <= 0xdf   ? 2
                         : b[k] >= 0xe0 && b[k] <= 0xef ? 3
                         : b[k] >= 0xf0 && b[k] <= 0xf4 ? 4
                                                        : 0;
            ok = len && k + len <= n && srv_utf8_char_ok(b + k, len);
            k += len;
        }
        v->plain[i] = (uint8_t)ok;
    }
    return NB_OK;
}

void nb_vocab_bytes_free(struct nb_vocab_bytes *v)
{
    if (!v) return;
    free(v->off);
    free(v->bytes);
    free(v->kind);
    free(v->plain);
    free(v->by_bytes);
    memset(v, 0, sizeof *v);
}

/* ---------------------------------------------------------------- grammars */

struct alt {
    const char *text;
    int orig;
};

static int cmp_alt(const void *a, const void *b)
{
    return strcmp(((const struct alt *)a)->text, ((const struct alt *)b)->text);
}

static int add_elem(struct nb_gram *g, enum nb_gelem_kind kind, const char *const *alts, int n)
{
    if (g->n == NB_GRAM_MAX || n < 0 || (kind != NB_GEL_OBJECT && n < 1)) return -1;
    struct nb_gelem *e = &g->el[g->n];
    struct alt *sorted = NULL;
    memset(e, 0, sizeof *e);
    e->kind = kind;
    if (n) {
        if (!(e->alts = calloc((size_t)n, sizeof *e->alts)) ||
            !(e->orig = calloc((size_t)n, sizeof *e->orig)) ||
            !(sorted = calloc((size_t)n, sizeof *sorted)))
            goto fail;
        for (int i = 0; i < n; i++)
            sorted[i] = (struct alt){alts[i], i};
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_alt);
        for (int i = 0; i < n; i++) {
            if (!sorted[i].text[0] || !(e->alts[i] = strdup(sorted[i].text))) goto fail;
            e->orig[i] = sorted[i].orig;
            e->n_alts++;
        }
        /* sorted: a prefix of another sits right before one it prefixes (or equals it) */
        for (int i = 0; i + 1 < n; i++)
            if (!strncmp(e->alts[i], e->alts[i + 1], strlen(e->alts[i]))) goto fail;
    }
    free(sorted);
    g->n++;
    return 0;
fail:
    free(sorted);
    for (int i = 0; i < e->n_alts; i++)
        free(e->alts[i]);
    free(e->alts);
    free(e->orig);
    memset(e, 0, sizeof *e);
    return -1;
}

int nb_gram_literal(struct nb_gram *g, const char *text)
{
    return add_elem(g, NB_GEL_LITERAL, &text, 1);
}

int nb_gram_choice(struct nb_gram *g, const char *const *alts, int n)
{
    return add_elem(g, NB_GEL_CHOICE, alts, n);
}

int nb_gram_object(struct nb_gram *g)
{
    return add_elem(g, NB_GEL_OBJECT, NULL, 0);
}

int nb_gram_schema(struct nb_gram *g, const struct nb_schema *const *schemas, int n)
{
    if (n < 1) return -1;
    const struct nb_schema **copy = calloc((size_t)n, sizeof *copy);
    if (!copy || add_elem(g, NB_GEL_OBJECT, NULL, 0)) {
        free(copy);
        return -1;
    }
    memcpy(copy, schemas, sizeof *copy * (size_t)n);
    g->el[g->n - 1].schemas = copy;
    g->el[g->n - 1].n_schemas = n;
    return 0;
}

void nb_gram_free(struct nb_gram *g)
{
    if (!g) return;
    for (int k = 0; k < g->n; k++) {
        for (int i = 0; i < g->el[k].n_alts; i++)
            free(g->el[k].alts[i]);
        free(g->el[k].alts);
        free(g->el[k].orig);
        free(g->el[k].schemas);
    }
    memset(g, 0, sizeof *g);
}

/* ---------------------------------------------------------------- JSON */

enum {
    J_TOP,       /* before the object: '{' */
    J_VALUE,     /* a value: after ':', or after ',' in an array */
    J_ARR_FIRST, /* after '[': a value or ']' */
    J_OBJ_FIRST, /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after ',' in an object: a key */
    J_COLON,     /* after a key */
    J_AFTER,     /* after a value in a container: ',' or its closing bracket */
    J_STR,       /* in a string */
    J_ESC,       /* after '\' */
    J_HEX,       /* the digits of \uXXXX (sub: seen, hex: value) */
    J_LOW_BS,    /* after a high surrogate: the '\' of its low half */
    J_LOW_U,     /* its 'u' */
    J_LOW_HEX,   /* its digits */
    J_UTF8,      /* continuation bytes of a character (sub: left, pos: the first's range) */
    J_NUM,       /* a number (sub: its part) */
    J_LIT,       /* true / false / null (sub: which, pos: bytes matched) */
    J_KEY,       /* a listed key of a schema's object (cand, epos) */
    J_ENUM,      /* one of an enum's values (cur, cand, epos) */
    J_DONE,      /* the object is closed */
};
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const k_lits[3] = {"true", "false", "null"};

static int is_ws(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int hex_digit(unsigned c)
{
    if (c >= '0' && c <= '9') return (int)c - '0';
    if (c >= 'a' && c <= 'f') return (int)c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return (int)c - 'A' + 10;
    return -1;
}

int nb_json_class(unsigned c)
{
    switch (c) {
    case '{': return NB_JC_OBJ;
    case '[': return NB_JC_ARR;
    case '"': return NB_JC_STR;
    case 't': return NB_JC_TRUE;
    case 'f': return NB_JC_FALSE;
    case 'n': return NB_JC_NULL;
    default: return c == '-' || (c >= '0' && c <= '9') ? NB_JC_NUM : -1;
    }
}

/* The top level's schema node, or NULL (no schema, or a level of any JSON). */
static const struct nb_snode *top_node(const struct nb_schema *S, const struct nb_jstate *j)
{
    if (!S || !j->depth) return NULL;
    unsigned n = j->node[j->depth - 1];
    return n < (unsigned)S->n ? &S->nodes[n] : NULL;
}

/* The node of the value that starts next: the root's, a property's, an element's. */
static unsigned child_node(const struct nb_schema *S, const struct nb_jstate *j)
{
    if (!S) return NB_SCHEMA_FREE;
    if (!j->depth) return 0;
    const struct nb_snode *f = top_node(S, j);
    if (!f) return NB_SCHEMA_FREE;
    return j->stack[j->depth - 1] == '{' ? f->pnode[j->prop] : f->items;
}

/* The first required property of object node f from index `from` on (f->n_props: none). */
static int next_required(const struct nb_snode *f, int from)
{
    while (from < f->n_props && !f->req[from])
        from++;
    return from;
}

static int value_end(struct nb_jstate *j)
{
    j->mode = j->depth ? J_AFTER : J_DONE;
    j->ws = 0;
    return 1;
}

static int value_start(const struct nb_schema *S, struct nb_jstate *j, unsigned c, int closing)
{
    int k = nb_json_class(c);
    if (k < 0) return 0;
    unsigned n = child_node(S, j), t = NB_SCHEMA_FREE;
    if (n != NB_SCHEMA_FREE) {
        const struct nb_snode *N = &S->nodes[n];
        t = N->target[k];
        if (t == NB_SCHEMA_NONE) return 0;
        /* a reader with no finite value never; closing, only the cheapest class */
        int ck = t == NB_SCHEMA_FREE ? 0 : S->nodes[t].cost[k];
        if (ck >= NB_SCHEMA_INF || (closing && j->depth && t != NB_SCHEMA_FREE && ck > N->close))
            return 0;
    }
    if ((c == '{' || c == '[') && j->depth == NB_JSON_MAX_DEPTH) return 0;
    const struct nb_snode *f = top_node(S, j);
    if (f && j->stack[j->depth - 1] == '[') { /* an element begins */
        if (f->max_items >= 0 && j->cnt[j->depth - 1] >= f->max_items) return 0;
        j->cnt[j->depth - 1]++;
    }
    const struct nb_snode *T = t == NB_SCHEMA_FREE ? NULL : &S->nodes[t];
    if (T && T->n_enum) {
        uint64_t cand = 0;
        for (int i = 0; i < T->n_enum; i++)
            if ((unsigned char)T->enums[i][0] == c) cand |= 1ull << i;
        if (!cand) return 0;
        j->mode = J_ENUM;
        j->cur = (uint16_t)t;
        j->cand = cand;
        j->epos = 1;
        return 1;
    }
    switch (c) {
    case '{':
    case '[':
        j->stack[j->depth] = (char)c;
        j->node[j->depth] = (uint16_t)((T && (T->obj || T->arr)) ? t : NB_SCHEMA_FREE);
        j->cnt[j->depth] = 0;
        j->depth++;
        j->mode = c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
        return 1;
    case '"':
        j->mode = J_STR;
        j->key = 0;
        return 1;
    case 't':
    case 'f':
    case 'n':
        j->mode = J_LIT;
        j->sub = c == 't' ? 0 : c == 'f' ? 1 : 2;
        j->pos = 1;
        return 1;
    case '-':
        j->mode = J_NUM;
        j->sub = N_MINUS;
        j->num = 1;
        j->int_only = (uint8_t)(T && T->int_only);
        return 1;
    default:
        j->mode = J_NUM;
        j->sub = c == '0' ? N_ZERO : N_INT;
        j->num = 1;
        j->int_only = (uint8_t)(T && T->int_only);
        return 1;
    }
}

/* '}' or ']' closing the top level, when its schema lets it close here. */
static int close_container(const struct nb_schema *S, struct nb_jstate *j, unsigned c)
{
    if (!j->depth || j->stack[j->depth - 1] != (c == '}' ? '{' : '[')) return 0;
    const struct nb_snode *f = top_node(S, j);
    if (f && c == '}' && next_required(f, j->cnt[j->depth - 1]) < f->n_props) return 0;
    if (f && c == ']' && j->cnt[j->depth - 1] < f->min_items) return 0;
    j->depth--;
    return value_end(j);
}

/* Is a key left that object node f may take from property `from` on (closing: a
 * required one)? Not one whose schema has no finite value. */
static int key_left(const struct nb_schema *S, const struct nb_snode *f, int from, int closing)
{
    if (closing) return next_required(f, from) < f->n_props;
    for (int i = from; i < f->n_props; i++)
        if (f->pnode[i] == NB_SCHEMA_FREE || S->nodes[f->pnode[i]].close < NB_SCHEMA_INF)
            return 1;
    return 0;
}

/* A key begins ('"' read) in the top level, an object: its listed keys when it has a
 * schema (those up to the next required one; closing, that one only). */
static int key_start(const struct nb_schema *S, struct nb_jstate *j, int closing)
{
    const struct nb_snode *f = top_node(S, j);
    if (!f) {
        j->mode = J_STR;
        j->key = 1;
        return 1;
    }
    int from = j->cnt[j->depth - 1], req = next_required(f, from);
    uint64_t cand = 0;
    /* not a property whose schema no finite value keeps to (an optional one: a required
     * one would make this object's schema refused) */
    for (int i = closing ? req : from; i <= req && i < f->n_props; i++)
        if (f->pnode[i] == NB_SCHEMA_FREE || S->nodes[f->pnode[i]].close < NB_SCHEMA_INF)
            cand |= 1ull << i;
    if (!cand) return 0;
    j->mode = J_KEY;
    j->cand = cand;
    j->epos = 1;
    return 1;
}

/* A string's byte >= 0x80 that starts a character: how many continuation bytes follow and
 * the range of the first (no overlong forms, surrogates or code points past U+10FFFF). */
static int utf8_lead(struct nb_jstate *j, unsigned c)
{
    if (c >= 0xc2 && c <= 0xdf) {
        j->sub = 1;
        j->pos = 0;
    } else if (c >= 0xe0 && c <= 0xef) {
        j->sub = 2;
        j->pos = c == 0xe0 ? 1 : c == 0xed ? 2 : 0;
    } else if (c >= 0xf0 && c <= 0xf4) {
        j->sub = 3;
        j->pos = c == 0xf0 ? 3 : c == 0xf4 ? 4 : 0;
    } else {
        return 0;
    }
    j->mode = J_UTF8;
    return 1;
}

static int json_step(const struct nb_schema *S, struct nb_jstate *j, unsigned c, int closing);

/* A digit of \uXXXX (J_HEX) or of a surrogate pair's low half (J_LOW_HEX). */
static int hex_step(struct nb_jstate *j, unsigned c)
{
    int d = hex_digit(c);
    if (d < 0) return 0;
    j->hex = (uint16_t)(j->hex << 4 | d);
    ++j->sub;
    /* refuse a prefix no digits complete (a dead end): \uDC.. to \uDF.. is a lone low
     * surrogate, and a low half must be one */
    if (j->mode == J_HEX && j->sub == 2 && j->hex >= 0xdc && j->hex <= 0xdf) return 0;
    if (j->mode == J_LOW_HEX && ((j->sub == 1 && j->hex != 0xd) || (j->sub == 2 && j->hex < 0xdc)))
        return 0;
    if (j->sub < 4) return 1;
    unsigned h = j->hex;
    if (j->mode == J_LOW_HEX) {
        if (h < 0xdc00 || h > 0xdfff) return 0;
        j->mode = J_STR;
        return 1;
    }
    /* \u0000 would cut a C string short; a lone low surrogate is no character */
    if (h == 0 || (h >= 0xdc00 && h <= 0xdfff)) return 0;
    j->mode = (h >= 0xd800 && h <= 0xdbff) ? J_LOW_BS : J_STR;
    return 1;
}

static int num_step(const struct nb_schema *S, struct nb_jstate *j, unsigned c, int closing)
{
    int digit = c >= '0' && c <= '9', e = (c == 'e' || c == 'E') && !j->int_only, next = -1;
    int dot = c == '.' && !j->int_only;
    switch (j->sub) {
    case N_MINUS: next = digit ? (c == '0' ? N_ZERO : N_INT) : -1; break;
    case N_ZERO: next = dot ? N_DOT : e ? N_E : -1; break;
    case N_INT: next = digit ? N_INT : dot ? N_DOT : e ? N_E : -1; break;
    case N_DOT: next = digit ? N_FRAC : -1; break;
    case N_FRAC: next = digit ? N_FRAC : e ? N_E : -1; break;
    case N_E: next = digit ? N_EXP : (c == '+' || c == '-') ? N_ESIGN : -1; break;
    default: next = digit ? N_EXP : -1; break; /* N_ESIGN, N_EXP */
    }
    /* closing: only the digit a number cannot end without */
    int must = j->sub == N_MINUS || j->sub == N_DOT || j->sub == N_E || j->sub == N_ESIGN;
    if (next >= 0 && closing && (!must || !digit)) next = -1;
    if (next >= 0) {
        /* within NB_JSON_MAX_NUM bytes, and with room for the digit a '-', '.', 'e' or
         * exponent sign needs (else a dead end at the limit) */
        int needs = next == N_MINUS || next == N_DOT || next == N_E || next == N_ESIGN;
        if (j->num >= NB_JSON_MAX_NUM || (needs && j->num + 1 >= NB_JSON_MAX_NUM)) return 0;
        j->num++;
        j->sub = (uint8_t)next;
        return 1;
    }
    /* the number ends where it may: the byte is then the container's (a number is never
     * the top value, so there is one) */
    if (j->sub != N_ZERO && j->sub != N_INT && j->sub != N_FRAC && j->sub != N_EXP) return 0;
    value_end(j);
    return json_step(S, j, c, closing);
}

/* The next byte of a listed key (J_KEY) or an enum value (J_ENUM): the candidates whose
 * text has it next. A key is written when its closing quote is; an enum string too; an
 * enum number or literal ends where no candidate goes on and one is whole (the byte is
 * then the container's). */
static int match_step(const struct nb_schema *S, struct nb_jstate *j, unsigned c, int closing)
{
    const struct nb_snode *f = j->mode == J_KEY ? top_node(S, j) : &S->nodes[j->cur];
    char *const *texts = j->mode == J_KEY ? f->keys : f->enums;
    int n = j->mode == J_KEY ? f->n_props : f->n_enum;
    uint64_t next = 0;
    int whole = -1;
    for (int i = 0; i < n; i++) {
        if (!(j->cand >> i & 1)) continue;
        unsigned char at = (unsigned char)texts[i][j->epos];
        if (!at)
            whole = i;
        else if (at == c)
            next |= 1ull << i;
    }
    if (!next) {
        if (j->mode != J_ENUM || whole < 0) return 0;
        value_end(j);
        return json_step(S, j, c, closing);
    }
    j->cand = next;
    j->epos++;
    for (int i = 0; i < n; i++) {
        if (!(next >> i & 1) || texts[i][j->epos] || texts[i][0] != '"') continue;
        /* a string whole (its closing quote: no other candidate goes on) */
        if (j->mode == J_ENUM) return value_end(j);
        j->prop = (uint8_t)i;
        j->cnt[j->depth - 1] = (uint16_t)(i + 1);
        j->mode = J_COLON;
        j->ws = 0;
        return 1;
    }
    return 1;
}

/* One byte: 1 taken, 0 refused (closing: nb_cons_cost). */
static int json_step(const struct nb_schema *S, struct nb_jstate *j, unsigned c, int closing)
{
    switch (j->mode) {
    case J_TOP:
    case J_VALUE:
    case J_ARR_FIRST:
    case J_OBJ_FIRST:
    case J_OBJ_KEY:
    case J_COLON:
    case J_AFTER:
        if (is_ws(c)) {
            /* none before the object (JSON mode's answer starts with '{', as llama.cpp's
             * json grammar and OpenAI's do: a model that pads would fill its budget) */
            if (closing || j->ws >= NB_JSON_MAX_WS || j->mode == J_TOP) return 0;
            j->ws++;
            return 1;
        }
        j->ws = 0;
        switch (j->mode) {
        case J_TOP: return c == '{' ? value_start(S, j, c, closing) : 0;
        case J_VALUE: return value_start(S, j, c, closing);
        case J_ARR_FIRST: {
            if (c == ']') return close_container(S, j, c);
            const struct nb_snode *f = top_node(S, j);
            if (closing && (!f || j->cnt[j->depth - 1] >= f->min_items)) return 0;
            return value_start(S, j, c, closing);
        }
        case J_OBJ_FIRST:
            if (c == '}') return close_container(S, j, c);
            if (closing && !top_node(S, j)) return 0;
            /* fall through */
        case J_OBJ_KEY: return c == '"' ? key_start(S, j, closing) : 0;
        case J_COLON:
            if (c != ':') return 0;
            j->mode = J_VALUE;
            return 1;
        default: { /* J_AFTER */
            if (c == '}' || c == ']') return close_container(S, j, c);
            if (c != ',') return 0;
            const struct nb_snode *f = top_node(S, j);
            int obj = j->stack[j->depth - 1] == '{', at = j->cnt[j->depth - 1];
            if (!f) {
                if (closing) return 0;
            } else if (obj) {
                /* a key left to write (closing: a required one) */
                if (!key_left(S, f, at, closing)) return 0;
            } else if ((f->max_items >= 0 && at >= f->max_items) ||
                       (closing && at >= f->min_items)) {
                return 0;
            }
            j->mode = obj ? J_OBJ_KEY : J_VALUE;
            return 1;
        }
        }
    case J_STR:
        if (c == '"') {
            if (!j->key) return value_end(j);
            j->mode = J_COLON;
            j->ws = 0;
            return 1;
        }
        if (closing) return 0;
        if (c == '\\') {
            j->mode = J_ESC;
            return 1;
        }
        if (c < 0x20) return 0;
        return c < 0x80 ? 1 : utf8_lead(j, c);
    case J_UTF8: {
        static const uint8_t lo[5] = {0x80, 0xa0, 0x80, 0x90, 0x80};
        static const uint8_t hi[5] = {0xbf, 0xbf, 0x9f, 0xbf, 0x8f};
        if (c < lo[j->pos] || c > hi[j->pos]) return 0;
        j->pos = 0;
        if (--j->sub == 0) j->mode = J_STR;
        return 1;
    }
    case J_ESC:
        if (c == 'u') {
            j->mode = J_HEX;
            j->sub = 0;
            j->hex = 0;
            return 1;
        }
        if (c && strchr("\"\\/bfnrt", (int)c)) {
            j->mode = J_STR;
            return 1;
        }
        return 0;
    case J_HEX:
    case J_LOW_HEX: return hex_step(j, c);
    case J_LOW_BS:
        if (c != '\\') return 0;
        j->mode = J_LOW_U;
        return 1;
    case J_LOW_U:
        if (c != 'u') return 0;
        j->mode = J_LOW_HEX;
        j->sub = 0;
        j->hex = 0;
        return 1;
    case J_NUM: return num_step(S, j, c, closing);
    case J_LIT:
        if (c != (unsigned char)k_lits[j->sub][j->pos]) return 0;
        if (!k_lits[j->sub][++j->pos]) return value_end(j);
        return 1;
    case J_KEY:
    case J_ENUM: return match_step(S, j, c, closing);
    default: return 0; /* J_DONE */
    }
}

/* ---------------------------------------------------------------- costs */

static int add_cost(int a, int b)
{
    return a + b >= NB_SCHEMA_INF ? NB_SCHEMA_INF : a + b;
}

/* Bytes to finish a value of node n once closing (any JSON: 2, "" or a digit or {}). */
static int node_close(const struct nb_schema *S, unsigned n)
{
    return n == NB_SCHEMA_FREE ? 5 : S->nodes[n].close;
}

/* The most a value of node n may cost to finish when it starts before closing is set: the
 * dearest class it may take. */
static int node_open(const struct nb_schema *S, unsigned n)
{
    if (n == NB_SCHEMA_FREE) return 5;
    const struct nb_snode *N = &S->nodes[n];
    int most = 0;
    for (int k = 0; k < NB_JC_N; k++) {
        unsigned t = N->target[k];
        int ck = t == NB_SCHEMA_NONE ? 0 : t == NB_SCHEMA_FREE ? 5 : S->nodes[t].cost[k];
        if (ck < NB_SCHEMA_INF && ck > most) most = ck;
    }
    return most;
}

/* Bytes that finish the object from state j at most (see nb_cons_cost): the value or
 * key in progress, then per open level its closing bracket, the required keys left with
 * their cheapest values, and one more optional member or element the next token may open. */
static int json_cost(const struct nb_schema *S, const struct nb_jstate *j)
{
    if (!S) return 32 + j->depth; /* a pending escape or character, a key and a value */
    /* a string's escape and surrogate pair and its quote (13), in a level of any JSON the
     * key's colon and the dearest value (6), a bracket per level */
    int cost = 19 + j->depth;
    if (j->mode == J_TOP) return add_cost(cost, node_open(S, 0));
    if (j->mode == J_VALUE || j->mode == J_COLON || j->mode == J_ARR_FIRST)
        cost = add_cost(cost, node_open(S, child_node(S, j)));
    if (j->mode == J_ENUM || j->mode == J_KEY) {
        const struct nb_snode *f = j->mode == J_KEY ? top_node(S, j) : &S->nodes[j->cur];
        int most = 0;
        for (int i = 0; i < NB_SCHEMA_MAX_PROPS; i++) {
            if (!(j->cand >> i & 1)) continue;
            int k = (int)strlen(j->mode == J_KEY ? f->keys[i] : f->enums[i]);
            if (j->mode == J_KEY) k = add_cost(k + 1, node_open(S, f->pnode[i]));
            most = k > most ? k : most;
        }
        cost = add_cost(cost, most);
    }
    for (int d = j->depth - 1; d >= 0; d--) {
        unsigned n = j->node[d];
        if (n == NB_SCHEMA_FREE) continue;
        const struct nb_snode *f = &S->nodes[n];
        if (j->stack[d] == '{') {
            int opt = 0;
            for (int i = j->cnt[d]; i < f->n_props; i++) {
                int m = add_cost((int)strlen(f->keys[i]) + 2, node_close(S, f->pnode[i]));
                if (f->req[i])
                    cost = add_cost(cost, m);
                else if (m > opt && m < NB_SCHEMA_INF) /* never opened: key_start */
                    opt = m;
            }
            cost = add_cost(cost, opt);
        } else {
            int m = node_close(S, f->items) + 1, left = f->min_items - j->cnt[d];
            for (int i = 0; i < left; i++)
                cost = add_cost(cost, m);
            cost = add_cost(cost, node_open(S, f->items) + 1);
        }
    }
    return cost;
}

/* A required or optional member i of object node f written whole, closing: its key (JSON
 * text with quotes), ':' and ',' and the cheapest value. */
static int member_close(const struct nb_schema *S, const struct nb_snode *f, int i)
{
    return add_cost((int)strlen(f->keys[i]) + 2, node_close(S, f->pnode[i]));
}

/* Bytes that finish the object from state j at most once closing is set now (for
 * nb_cons_close_cost; json_cost counts what the next token may open besides): what the
 * mode has pending (a string's escape and its quote 13, a number's digit 2, a literal's
 * letters 5), the value to come after ':' by its cheapest class (closing takes it, below
 * the top), the key in progress with the required keys after it, per open level its
 * bracket and the required members left, after ',' in an object the dearest optional
 * member, and 6 where a level is any JSON (a key's colon and a value). */
static int json_close_cost(const struct nb_schema *S, const struct nb_jstate *j)
{
    if (!S) return 32 + j->depth;
    if (j->mode == J_TOP) return add_cost(19, node_open(S, 0));
    int cost = j->depth, in_key = j->mode == J_KEY;
    switch (j->mode) {
    case J_STR: cost += 1; break;
    case J_ESC:
    case J_HEX:
    case J_LOW_BS:
    case J_LOW_U:
    case J_LOW_HEX:
    case J_UTF8: cost += 13; break;
    case J_NUM: cost += 2; break;
    case J_LIT: cost += 5; break;
    case J_COLON: cost += 1; /* fall through */
    case J_VALUE:
    case J_ARR_FIRST: cost = add_cost(cost, node_close(S, child_node(S, j))); break;
    case J_ENUM: {
        const struct nb_snode *f = &S->nodes[j->cur];
        for (int i = 0, most = 0; i < f->n_enum && i < NB_SCHEMA_MAX_PROPS; i++)
            if (j->cand >> i & 1 && (int)strlen(f->enums[i]) > most) {
                cost += (int)strlen(f->enums[i]) - most;
                most = (int)strlen(f->enums[i]);
            }
        break;
    }
    default: break;
    }
    for (int d = j->depth - 1; d >= 0; d--) {
        unsigned n = j->node[d];
        if (n == NB_SCHEMA_FREE) {
            cost = add_cost(cost, d == j->depth - 1 ? 6 : 0);
            continue;
        }
        const struct nb_snode *f = &S->nodes[n];
        if (j->stack[d] == '{') {
            int top = d == j->depth - 1, most = 0;
            for (int i = j->cnt[d]; i < f->n_props; i++) {
                int m = member_close(S, f, i);
                if (top && in_key && (j->cand >> i & 1)) { /* this key, then the required after it */
                    int k = add_cost((int)strlen(f->keys[i]) + 1, node_close(S, f->pnode[i]));
                    for (int r = i + 1; r < f->n_props; r++)
                        if (f->req[r]) k = add_cost(k, member_close(S, f, r));
                    most = k > most ? k : most;
                } else if (!(top && in_key) && f->req[i]) {
                    cost = add_cost(cost, m);
                } else if (top && j->mode == J_OBJ_KEY && !f->req[i] && m < NB_SCHEMA_INF) {
                    most = m > most ? m : most;
                }
            }
            cost = add_cost(cost, most);
        } else {
            int m = node_close(S, f->items) + 1, left = f->min_items - j->cnt[d];
            for (int i = 0; i < left; i++)
                cost = add_cost(cost, m);
        }
    }
    return cost;
}

/* ---------------------------------------------------------------- sequences */

static void enter(const struct nb_gram *g, struct nb_cons *c, int e)
{
    int closing = c->closing, choice = c->choice, round = c->round, budget = c->budget;
    memset(c, 0, sizeof *c);
    c->budget = budget;
    c->closing = closing;
    c->choice = choice;
    c->round = round;
    c->elem = e;
    c->hi = e < g->n ? g->el[e].n_alts : 0;
    c->js.mode = J_TOP;
}

void nb_cons_start(const struct nb_gram *g, struct nb_cons *c)
{
    c->budget = -1;
    c->closing = 0;
    c->choice = 0;
    c->round = 0;
    enter(g, c, 0);
}

/* Complete, and the sequence may begin again (a '\n' next). */
static int another_round(const struct nb_gram *g, const struct nb_cons *c)
{
    return c->elem >= g->n && !c->closing && c->round + 1 < g->rounds;
}

/* The schema an object element keeps to in state c (NULL: any object). */
static const struct nb_schema *elem_schema(const struct nb_gelem *el, const struct nb_cons *c)
{
    if (el->n_schemas == 1) return el->schemas[0];
    return c->choice < el->n_schemas ? el->schemas[c->choice] : NULL;
}

int nb_cons_cost(const struct nb_gram *g, const struct nb_cons *c)
{
    if (another_round(g, c)) { /* the next token may open another round: '\n' and all of it */
        struct nb_cons fresh;
        nb_cons_start(g, &fresh);
        return add_cost(1, nb_cons_cost(g, &fresh));
    }
    int cost = 0;
    for (int e = c->elem; e < g->n; e++) {
        const struct nb_gelem *el = &g->el[e];
        if (el->kind == NB_GEL_OBJECT) {
            /* an escape and a surrogate pair (12), the closing quote of a key, ':', the
             * longest closing value ("false"), a key begun after ',' (2 + ':' + value),
             * and a bracket per level; with a schema, what it still requires */
            if (e == c->elem) {
                cost = add_cost(cost, json_cost(elem_schema(el, c), &c->js));
                continue;
            }
            int most = 2; /* the choice may not be made yet: the dearest schema */
            for (int i = 0; i < el->n_schemas; i++) {
                int k = el->schemas[i] ? node_open(el->schemas[i], 0) : 2;
                most = k > most ? k : most;
            }
            cost = add_cost(cost, most + 32);
            continue;
        }
        int longest = 0;
        for (int i = 0; i < el->n_alts; i++) {
            int k = (int)strlen(el->alts[i]);
            longest = k > longest ? k : longest;
        }
        cost = add_cost(cost, longest - (e == c->elem ? c->pos : 0));
    }
    return cost;
}

int nb_cons_complete(const struct nb_gram *g, const struct nb_cons *c)
{
    return c->elem >= g->n;
}

/* Bytes that finish the output in closing mode from the start of element e on, when the
 * last choice before it took alternative `choice` (as given): literals as they are, a
 * choice by its shortest alternative, an object by the fewest bytes its schema allows. */
static int rest_cost(const struct nb_gram *g, int e, int choice)
{
    int cost = 0;
    for (; e < g->n; e++) {
        const struct nb_gelem *el = &g->el[e];
        if (el->kind == NB_GEL_OBJECT) {
            const struct nb_schema *S =
                el->n_schemas == 1 ? el->schemas[0]
                                   : choice < el->n_schemas ? el->schemas[choice] : NULL;
            cost = add_cost(cost, S ? node_close(S, 0) : 2);
            continue;
        }
        int least = NB_SCHEMA_INF;
        for (int i = 0; i < el->n_alts; i++) {
            int k = (int)strlen(el->alts[i]);
            least = k < least ? k : least;
        }
        cost = add_cost(cost, least);
    }
    return cost;
}

/* Closing at the start of choice e: only the alternatives that finish the output in the
 * fewest bytes stay in [*lo, *hi), so a budget that cannot hold the call the model began
 * (a tool whose required arguments are long) still ends in a complete one: of equals the
 * first in sorted order. */
static void cheapest_run(const struct nb_gram *g, int e, int *lo, int *hi)
{
    const struct nb_gelem *el = &g->el[e];
    int best = NB_SCHEMA_INF, at = *lo;
    for (int i = *lo; i < *hi; i++) {
        int k = add_cost((int)strlen(el->alts[i]), rest_cost(g, e + 1, el->orig[i]));
        if (k < best) best = k, at = i;
    }
    *lo = at;
    *hi = at + 1;
}

int nb_cons_close_cost(const struct nb_gram *g, const struct nb_cons *c)
{
    if (c->elem >= g->n) return 0;
    const struct nb_gelem *el = &g->el[c->elem];
    int rest = rest_cost(g, c->elem + 1, c->choice);
    if (el->kind == NB_GEL_OBJECT) return add_cost(json_close_cost(elem_schema(el, c), &c->js), rest);
    if (el->kind == NB_GEL_LITERAL) return add_cost((int)strlen(el->alts[0]) - c->pos, rest);
    int lo = c->lo, hi = c->hi, most = 0;
    if (c->pos == 0) cheapest_run(g, c->elem, &lo, &hi); /* closing would take it */
    for (int i = lo; i < hi; i++) {
        int k = add_cost((int)strlen(el->alts[i]) - c->pos, rest_cost(g, c->elem + 1, el->orig[i]));
        most = k > most ? k : most;
    }
    return most;
}

static int feed_byte(const struct nb_gram *g, struct nb_cons *c, unsigned ch)
{
    if (c->elem >= g->n) {
        if (ch != '\n' || !another_round(g, c)) return 0;
        c->round++;
        c->choice = 0;
        enter(g, c, 0);
        return 1;
    }
    const struct nb_gelem *el = &g->el[c->elem];
    if (el->kind == NB_GEL_OBJECT) {
        if (!json_step(elem_schema(el, c), &c->js, ch, c->closing)) return 0;
        if (c->js.mode == J_DONE) enter(g, c, c->elem + 1);
        return 1;
    }
    /* the alternatives still possible share their first pos bytes and are sorted: those
     * with ch next are a run of them */
    int lo = c->lo, hi = c->hi;
    if (c->closing && el->kind == NB_GEL_CHOICE && c->pos == 0)
        cheapest_run(g, c->elem, &lo, &hi);
    while (lo < hi && (unsigned char)el->alts[lo][c->pos] != ch)
        lo++;
    int h = lo;
    while (h < hi && (unsigned char)el->alts[h][c->pos] == ch)
        h++;
    if (lo == h || ch == 0) return 0;
    c->lo = lo;
    c->hi = h;
    c->pos++;
    if (h - lo == 1 && !el->alts[lo][c->pos]) {
        if (el->kind == NB_GEL_CHOICE) c->choice = el->orig[lo];
        enter(g, c, c->elem + 1);
    }
    return 1;
}

int nb_cons_feed(const struct nb_gram *g, struct nb_cons *c, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(g, c, (unsigned char)b[i])) return 0;
    return 1;
}

/* Byte d of token id's text (v). */
static unsigned tok_byte(const struct nb_vocab_bytes *v, uint32_t id, uint32_t d)
{
    return (unsigned char)v->bytes[v->off[id] + d];
}

/* The longest token of v->by_bytes[lo, hi) (a run sharing its first d bytes, which u has
 * taken) whose bytes after them u takes too: its id, or -1 (*len its length). The run is
 * walked as a trie: per distinct next byte, one step of a copy of u. */
static int32_t longest_from(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                            const struct nb_cons *u, uint32_t lo, uint32_t hi, uint32_t d,
                            int allow_special, uint32_t *len)
{
    const uint32_t *ids = v->by_bytes;
    int32_t best = -1;
    for (; lo < hi && v->off[ids[lo] + 1] - v->off[ids[lo]] == d; lo++) /* those that end here */
        if (best < 0 && (allow_special || v->kind[ids[lo]] != NB_VTOK_SPECIAL))
            best = (int32_t)ids[lo];
    *len = best >= 0 ? d : 0;
    while (lo < hi) {
        unsigned x = tok_byte(v, ids[lo], d);
        uint32_t a = lo + 1, b = hi; /* the run of x: the first past it, by bisection */
        while (a < b) {
            uint32_t mid = a + (b - a) / 2;
            if (tok_byte(v, ids[mid], d) == x)
                a = mid + 1;
            else
                b = mid;
        }
        struct nb_cons t = *u;
        uint32_t n = 0;
        int32_t k =
            feed_byte(g, &t, x) ? longest_from(g, v, &t, lo, a, d + 1, allow_special, &n) : -1;
        if (k >= 0 && n > *len) best = k, *len = n;
        lo = a;
    }
    return best;
}

/* The longest token closing mode takes next from state u (u->closing set), -1 if none. */
static int32_t closing_token(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                             const struct nb_cons *u, int allow_special)
{
    const uint32_t *at = v->by_bytes + v->n_vocab;
    int32_t best = -1;
    uint32_t best_len = 0;
    for (unsigned b = 0; b < 256; b++) {
        if (at[b] == at[b + 1]) continue;
        struct nb_cons t = *u;
        uint32_t n = 0;
        int32_t k = feed_byte(g, &t, b)
                        ? longest_from(g, v, &t, at[b], at[b + 1], 1, allow_special, &n)
                        : -1;
        if (k >= 0 && n > best_len) best = k, best_len = n;
    }
    return best;
}

/* The closing walks of one mask (nb_cons_mask): the states they went through, each with
 * the tokens from there to the end (t >= 0) or, where a walk gave up at its cap, -1 - the
 * fewest it may take. The candidates of a mask mostly lead to a few states (a string's
 * tokens all to the same one), and their walks soon join. */
#define WALK_MEMO 256
struct walk_memo {
    int n;
    struct walk_state {
        uint32_t hash;
        int t;
        struct nb_cons s;
    } e[WALK_MEMO];
};

static uint32_t state_hash(const struct nb_cons *u)
{
    const unsigned char *b = (const unsigned char *)u;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *u; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static const struct walk_state *memo_find(const struct walk_memo *m, const struct nb_cons *u,
                                          uint32_t h)
{
    for (int i = 0; m && i < m->n; i++)
        if (m->e[i].hash == h && !memcmp(&m->e[i].s, u, sizeof *u)) return &m->e[i];
    return NULL;
}

/* Tokens of the closing walk from u (closing set) at most cap, else NB_SCHEMA_INF; the
 * states it takes recorded in m (when not NULL and not full). */
static int walk(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons u,
                int allow_special, int cap, struct walk_memo *m)
{
    int from = m ? m->n : 0, n = 0, t = NB_SCHEMA_INF;
    for (;; n++) {
        uint32_t h = m ? state_hash(&u) : 0;
        const struct walk_state *e = memo_find(m, &u, h);
        if (e && (e->t >= 0 || n + -1 - e->t > cap)) {
            t = e->t >= 0 && n + e->t <= cap ? n + e->t : NB_SCHEMA_INF;
            break;
        }
        if (m && m->n < WALK_MEMO) m->e[m->n++] = (struct walk_state){h, -1, u};
        if (nb_cons_complete(g, &u)) {
            t = n;
            break;
        }
        int32_t k = n < cap ? closing_token(g, v, &u, allow_special) : -1;
        if (k < 0) break;
        nb_cons_feed(g, &u, v->bytes + v->off[k], v->off[k + 1] - v->off[k]);
    }
    /* the i-th state recorded: t - i tokens from there, or (given up) more than cap - i */
    for (int i = from; m && i < m->n; i++)
        m->e[i].t = t < NB_SCHEMA_INF ? t - (i - from) : -1 - (cap - (i - from) + 1);
    return t;
}

int nb_cons_close_tokens(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                          const struct nb_cons *c, int allow_special, int cap)
{
    if (!v->by_bytes) return NB_SCHEMA_INF;
    struct nb_cons u = *c;
    u.closing = 1;
    u.budget = -1;
    return walk(g, v, u, allow_special, cap, NULL);
}

/* Can the output close from state t within `left` tokens: in bytes (nb_cons_close_cost,
 * a token at least one), else by the closing walk's tokens (only then: it costs a walk;
 * m: the mask's walks so far, or NULL)? */
static int fits(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                const struct nb_cons *t, int allow_special, int left, struct walk_memo *m)
{
    if (nb_cons_close_cost(g, t) <= left) return 1;
    if (left < 0 || !v->by_bytes) return 0;
    struct nb_cons u = *t;
    u.closing = 1;
    u.budget = -1;
    return walk(g, v, u, allow_special, left, m) <= left;
}

/* Inside a JSON string, nothing pending (escape, character), not closing: a plain token
 * (nb_vocab_bytes.plain) is taken as it is and leaves the state where it was. */
static int in_plain_string(const struct nb_gram *g, const struct nb_cons *c)
{
    return c->elem < g->n && g->el[c->elem].kind == NB_GEL_OBJECT && c->js.mode == J_STR &&
           !c->closing;
}

/* Does a token that leaves state c where it was (a plain string token) fit c's budget? */
static int stay_fits(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                     const struct nb_cons *c, int allow_special, struct walk_memo *m)
{
    return c->budget < 0 || fits(g, v, c, allow_special, c->budget - 1, m);
}

/* May tok follow state c (complete: c is complete; stays: stay_fits(g, c))? */
static int token_ok(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                    const struct nb_cons *c, int32_t tok, int allow_special, int complete,
                    int stays, struct walk_memo *m)
{
    switch (v->kind[tok]) {
    case NB_VTOK_EOG: return complete;
    case NB_VTOK_EMPTY: return 0;
    case NB_VTOK_SPECIAL:
        if (!allow_special) return 0;
        break;
    default: break;
    }
    if (complete && !another_round(g, c)) return 0;
    if (v->plain && v->plain[tok] && in_plain_string(g, c)) return stays;
    struct nb_cons t = *c;
    if (!nb_cons_feed(g, &t, v->bytes + v->off[tok], v->off[tok + 1] - v->off[tok])) return 0;
    /* closing too: what a token leaves must close in the rest, so closing mode keeps to a
     * budget that only its walk's tokens fit (nb_cons_close_tokens) */
    return c->budget < 0 || fits(g, v, &t, allow_special, c->budget - 1, m);
}

int nb_cons_allows(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                    const struct nb_cons *c, int32_t tok, int allow_special)
{
    if (tok < 0 || tok >= v->n_vocab) return 0;
    return token_ok(g, v, c, tok, allow_special, nb_cons_complete(g, c),
                    in_plain_string(g, c) && stay_fits(g, v, c, allow_special, NULL), NULL);
}

int nb_cons_mask(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                  const struct nb_cons *c, int allow_special, float *logits)
{
    int complete = nb_cons_complete(g, c), n = 0;
    struct walk_memo *m = c->budget >= 0 ? malloc(sizeof *m) : NULL; /* NULL: walks unshared */
    if (m) m->n = 0;
    /* once, not per token */
    const int stays = in_plain_string(g, c) && stay_fits(g, v, c, allow_special, m);
    uint8_t first[256];
    for (int b = 0; b < 256; b++) {
        struct nb_cons t = *c;
        first[b] = (uint8_t)feed_byte(g, &t, (unsigned)b);
    }
    for (int i = 0; i < v->n_vocab; i++) {
        int ok;
        if (v->kind[i] == NB_VTOK_EOG)
            ok = complete;
        else if (v->off[i + 1] == v->off[i] || !first[(unsigned char)v->bytes[v->off[i]]])
            ok = 0;
        else
            ok = token_ok(g, v, c, i, allow_special, complete, stays, m);
        if (ok)
            n++;
        else
            logits[i] = -INFINITY;
    }
    free(m);
    return n;
}

int nb_cons_next(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons *c,
                  int left, int allow_special, const float *logits, float *work)
{
    c->budget = left;
    memcpy(work, logits, sizeof *work * (size_t)v->n_vocab);
    int n = nb_cons_mask(g, v, c, allow_special, work);
    if (n) return n;
    if (!c->closing) {
        c->closing = 1;
        memcpy(work, logits, sizeof *work * (size_t)v->n_vocab);
        if ((n = nb_cons_mask(g, v, c, allow_special, work))) return n;
    }
    c->budget = -1; /* no closing fits either: the cheapest, to be cut at max_tokens */
    memcpy(work, logits, sizeof *work * (size_t)v->n_vocab);
    return nb_cons_mask(g, v, c, allow_special, work);
}

int nb_cons_refused(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons *c,
                     int32_t tok, int allow_special)
{
    if (c->closing || c->budget < 0) return 0;
    struct nb_cons t = *c;
    t.budget = -1;
    if (!nb_cons_allows(g, v, &t, tok, allow_special)) return 0;
    c->closing = 1;
    return 1;
}
