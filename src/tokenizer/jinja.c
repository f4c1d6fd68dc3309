/* tokenizer/jinja.c — the Jinja subset of jinja.h: a lexer, a parser to an AST and a
 * tree-walking evaluator over a small value type.
 *
 * The reference is @huggingface/jinja (what transformers.js renders chat templates
 * with), so where Python's Jinja and it differ this follows it: the template is
 * preprocessed with trim_blocks and lstrip_blocks and loses one trailing newline;
 * strip()/lstrip()/rstrip() ignore their argument and trim JavaScript whitespace;
 * true/false/none print as "true"/"false"/""; lists and dicts print as JSON; `==`
 * compares as JavaScript's loose equality; the output of a loop iteration that ends
 * in {% break %} / {% continue %} is dropped; macros see their caller's variables.
 *
 *   source --preprocess--> bytes + line per byte --lex--> tokens --parse--> nodes
 *   nodes + context (cJSON) --eval--> output bytes + a mark per byte
 *
 * Memory: a parsed template owns one arena (its nodes and literal strings); a render
 * owns another, capped at MEM_LIMIT, for every value it makes, freed at the end.
 * Errors inside the lexer, parser and evaluator jump (longjmp) back to the public
 * entry, which frees its arena: nothing is freed piecemeal, so nothing leaks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "tokenizer/jinja.h"

#define MEM_LIMIT   ((size_t)4 * NB_JINJA_MAX_OUT) /* bytes a render may allocate */
#define PARSE_DEPTH 256                            /* nested expressions in the source */
#define EVAL_DEPTH  1024                           /* nested evaluation frames */
#define JSON_DEPTH  1024                           /* nested context / tojson values */

/* ---------------------------------------------------------------- errors, arena */

struct jerr {
    jmp_buf jb;
    enum nb_status st;
    char msg[512];
};

/* Record the error (status and message) and jump back to the public entry that set e->jb. */
static _Noreturn void die(struct jerr *e, enum nb_status st, const char *fmt, ...) NB_PRINTF(3, 4);
static _Noreturn void die(struct jerr *e, enum nb_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->st = st;
    longjmp(e->jb, 1);
}

struct ablock {
    struct ablock *next;
    size_t used, cap;
    max_align_t data[];
};

struct arena {
    struct ablock *head;
    size_t total, limit;
    struct jerr *err;
};

/* Every block of the arena; it can be used again (empty). */
static void arena_free(struct arena *a)
{
    struct ablock *b = a->head;
    while (b) {
        struct ablock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

/* n bytes, aligned for any type; past the arena's limit: NB_ERR_RANGE. */
static void *aalloc(struct arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    struct ablock *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 / 2 ? n : 65536;
        if (n > a->limit || a->total + cap > a->limit)
            die(a->err, NB_ERR_RANGE, "chat template: the render needs more than %zu MiB of memory",
                a->limit >> 20);
        b = malloc(sizeof *b + cap);
        if (!b) die(a->err, NB_ERR_NOMEM, "chat template: out of memory");
        b->cap = cap;
        b->used = 0;
        a->total += cap;
        if (a->head && cap == n) { /* a big one-off: keep filling the current block */
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

static void *acalloc(struct arena *a, size_t n)
{
    void *p = aalloc(a, n);
    memset(p, 0, n);
    return p;
}

/* ---------------------------------------------------------------- strings, UTF-8 */

/* Bytes and a mark per byte (m NULL: all 0); `any`: some mark is 1. */
struct jstr {
    size_t n;
    char *s; /* NUL-terminated */
    uint8_t *m;
    int any;
};

static uint8_t mark_at(const struct jstr *s, size_t i)
{
    return s->m ? s->m[i] : 0;
}

/* A string of n bytes copied from s, each marked m[i] (m NULL: all marked m0). */
static struct jstr *str_make(struct arena *a, const char *s, size_t n, const uint8_t *m, uint8_t m0)
{
    struct jstr *r = aalloc(a, sizeof *r);
    r->n = n;
    r->s = aalloc(a, n + 1);
    if (n) memcpy(r->s, s, n);
    r->s[n] = '\0';
    r->m = NULL;
    r->any = 0;
    if (m) {
        for (size_t i = 0; i < n && !r->any; i++)
            r->any = m[i];
    } else {
        r->any = m0 && n;
    }
    if (r->any) {
        r->m = aalloc(a, n);
        if (m)
            memcpy(r->m, m, n);
        else
            memset(r->m, m0, n);
    }
    return r;
}

/* Decode one UTF-8 character at s[0..n): its code point (0xFFFD for a bad byte) and
 * length (at least 1). */
static uint32_t utf8_next(const char *s, size_t n, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    *len = 1;
    if (u[0] < 0x80) return u[0];
    int k = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 0;
    if (!k || (size_t)k > n || u[0] > 0xF4) return 0xFFFD;
    uint32_t c = u[0] & (0x7F >> k);
    for (int i = 1; i < k; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0xFFFD;
        c = c << 6 | (u[i] & 0x3F);
    }
    *len = (size_t)k;
    return c;
}

static size_t utf8_put(uint32_t c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12);
        o[1] = (char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18);
    o[1] = (char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* JavaScript's whitespace (\s, trim()): the ASCII set, NBSP, the Unicode spaces, the
 * line/paragraph separators and BOM. */
static int js_space(uint32_t c)
{
    return c == ' ' || (c >= 9 && c <= 13) || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

/* Length of the whitespace character at s[0..n), 0 if none. */
static size_t space_at(const char *s, size_t n)
{
    if (!n) return 0;
    size_t len;
    uint32_t c = utf8_next(s, n, &len);
    return js_space(c) ? len : 0;
}

/* Length of the whitespace character ending at s[n-1], 0 if none. */
static size_t space_before(const char *s, size_t n)
{
    if (!n) return 0;
    size_t k = 1;
    while (k < n && k < 4 && ((unsigned char)s[n - k] & 0xC0) == 0x80)
        k++;
    size_t len;
    uint32_t c = utf8_next(s + n - k, k, &len);
    if (len != k) return js_space((unsigned char)s[n - 1]) ? 1 : 0;
    return js_space(c) ? k : 0;
}

static int is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The number as JavaScript's Number#toString prints it (shortest round trip). */
static void js_num(double d, char *o, size_t size)
{
    if (isnan(d)) {
        snprintf(o, size, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(o, size, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (d == 0) {
        snprintf(o, size, "0");
        return;
    }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e: [-]D[.DDD]e[+-]XX */
    char digits[24];
    int k = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (is_digit(*p)) digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';
    int n = atoi(p + 1) + 1; /* the decimal point after n digits */
    char *q = o;
    size_t left = size;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(q, left, __VA_ARGS__);                                                   \
        if (w_ > 0 && (size_t)w_ < left) {                                                         \
            q += w_;                                                                               \
            left -= (size_t)w_;                                                                    \
        }                                                                                          \
    } while (0)
    if (neg) PUT("-");
    if (k <= n && n <= 21) {
        PUT("%s", digits);
        for (int i = k; i < n; i++)
            PUT("0");
    } else if (0 < n && n <= 21) {
        PUT("%.*s.%s", n, digits, digits + n);
    } else if (-6 < n && n <= 0) {
        PUT("0.");
        for (int i = n; i < 0; i++)
            PUT("0");
        PUT("%s", digits);
    } else {
        PUT("%c", digits[0]);
        if (k > 1) PUT(".%s", digits + 1);
        PUT("e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
#undef PUT
}

/* ---------------------------------------------------------------- lexer */

enum tk {
    T_TEXT,
    T_NUM,
    T_STR,
    T_IDENT,
    T_EQUALS,
    T_LP,
    T_RP,
    T_OS,
    T_CS,
    T_OE,
    T_CE,
    T_LB,
    T_RB,
    T_LC,
    T_RC,
    T_COMMA,
    T_DOT,
    T_COLON,
    T_PIPE,
    T_ADD,
    T_MUL,
    T_POW,
    T_CMP,
    T_UNARY,
    T_COMMENT,
    T_END
};

static const char *const k_tk_name[] = {"text",       "number",
                                        "string",     "name",
                                        "'='",        "'('",
                                        "')'",        "'{%'",
                                        "'%}'",       "'{{'",
                                        "'}}'",       "'['",
                                        "']'",        "'{'",
                                        "'}'",        "','",
                                        "'.'",        "':'",
                                        "'|'",        "operator",
                                        "operator",   "'**'",
                                        "comparison", "sign",
                                        "comment",    "end of template"};

struct tok {
    enum tk t;
    int line;
    size_t n;
    char *s; /* NUL-terminated: text, unescaped string literal, name, number, operator */
};

struct lexer {
    struct jerr *err;
    struct arena *ar; /* the template's: token texts live as long as the nodes */
    char *src;        /* preprocessed (malloc'd) */
    int *line;        /* line in the original source of each byte of src (malloc'd) */
    size_t n, pos;
    struct tok *v;
    size_t nt, cap;
    char *tmp; /* a string literal being unescaped (freed on an error) */
};

static int lex_line(const struct lexer *L, size_t pos)
{
    return pos < L->n ? L->line[pos] : L->n ? L->line[L->n - 1] : 1;
}

static struct tok *push_tok(struct lexer *L, enum tk t, const char *s, size_t n, int line)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        struct tok *v = realloc(L->v, cap * sizeof *v);
        if (!v) die(L->err, NB_ERR_NOMEM, "chat template: out of memory");
        L->v = v;
        L->cap = cap;
    }
    struct tok *k = &L->v[L->nt++];
    k->t = t;
    k->line = line;
    k->n = n;
    k->s = aalloc(L->ar, n + 1);
    if (n) memcpy(k->s, s, n);
    k->s[n] = '\0';
    return k;
}

/* {%- / {{- / {#-: the whitespace at the end of the text token before, and that token if
 * nothing is left. */
static void strip_trailing(struct lexer *L)
{
    if (!L->nt || L->v[L->nt - 1].t != T_TEXT) return;
    struct tok *k = &L->v[L->nt - 1];
    size_t w;
    while ((w = space_before(k->s, k->n)) > 0)
        k->n -= w;
    k->s[k->n] = '\0';
    if (!k->n) L->nt--;
}

static void skip_space(struct lexer *L)
{
    size_t w;
    while ((w = space_at(L->src + L->pos, L->n - L->pos)) > 0)
        L->pos += w;
}

static int at(const struct lexer *L, const char *s)
{
    size_t n = strlen(s);
    return L->n - L->pos >= n && !memcmp(L->src + L->pos, s, n);
}

/* A quoted string's body, escapes resolved; L->pos is past the opening quote. */
static void lex_string(struct lexer *L, char q, int line)
{
    size_t cap = 64, n = 0;
    char *b = L->tmp = malloc(cap);
    if (!b) die(L->err, NB_ERR_NOMEM, "chat template: out of memory");
    for (;;) {
        if (L->pos >= L->n) {
            die(L->err, NB_ERR_FORMAT, "chat template: line %d: a string is not closed", line);
        }
        char c = L->src[L->pos];
        if (c == q) break;
        if (n + 8 > cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) die(L->err, NB_ERR_NOMEM, "chat template: out of memory");
            b = L->tmp = nb;
        }
        if (c != '\\') {
            b[n++] = c;
            L->pos++;
            continue;
        }
        if (++L->pos >= L->n) continue; /* reported as not closed */
        char e = L->src[L->pos++];
        const char *map = "n\nt\tr\rb\bf\fv\v''\"\"\\\\";
        const char *hit = NULL;
        for (const char *m = map; *m; m += 2)
            if (*m == e) hit = m;
        if (hit) {
            b[n++] = hit[1];
        } else if (e == 'x' || e == 'u') {
            size_t len = e == 'x' ? 2 : 4;
            unsigned v = 0;
            for (size_t i = 0; i < len; i++) {
                char h = L->pos + i < L->n ? L->src[L->pos + i] : 0;
                int d = is_digit(h)                          ? h - '0'
                        : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10
                                                             : -1;
                if (d < 0) {
                    die(L->err, NB_ERR_FORMAT,
                        "chat template: line %d: invalid \\%c escape in a string", line, e);
                }
                v = v * 16 + (unsigned)d;
            }
            L->pos += len;
            n += utf8_put(v, b + n);
        } else {
            die(L->err, NB_ERR_FORMAT, "chat template: line %d: unknown escape \\%c in a string",
                line, e);
        }
    }
    L->pos++; /* the closing quote */
    push_tok(L, T_STR, b, n, line);
    free(b);
    L->tmp = NULL;
}

/* Tokens of L->src, as @huggingface/jinja cuts them: text between tags; inside a tag
 * names, numbers ("-1" is one token after an operator or an opening bracket), strings,
 * operators; "}}" does not close an expression while a "{" of a dict literal is open. */
static void lex(struct lexer *L)
{
    static const struct {
        const char *s;
        enum tk t;
    } table[] = {{"{%", T_OS},   {"%}", T_CS},  {"{{", T_OE},   {"}}", T_CE},   {"(", T_LP},
                 {")", T_RP},    {"{", T_LC},   {"}", T_RC},    {"[", T_LB},    {"]", T_RB},
                 {",", T_COMMA}, {".", T_DOT},  {":", T_COLON}, {"|", T_PIPE},  {"<=", T_CMP},
                 {">=", T_CMP},  {"==", T_CMP}, {"!=", T_CMP},  {"<", T_CMP},   {">", T_CMP},
                 {"+", T_ADD},   {"-", T_ADD},  {"~", T_ADD},   {"**", T_POW},  {"*", T_MUL},
                 {"//", T_MUL},  {"/", T_MUL},  {"%", T_MUL},   {"=", T_EQUALS}};
    int curly = 0;
    while (L->pos < L->n) {
        enum tk last = L->nt ? L->v[L->nt - 1].t : T_END;
        int line = lex_line(L, L->pos);
        if (last == T_END || last == T_CS || last == T_CE || last == T_COMMENT) {
            size_t start = L->pos;
            while (L->pos < L->n && !(L->src[L->pos] == '{' && L->pos + 1 < L->n &&
                                      (L->src[L->pos + 1] == '%' || L->src[L->pos + 1] == '{' ||
                                       L->src[L->pos + 1] == '#')))
                L->pos++;
            if (L->pos > start) {
                push_tok(L, T_TEXT, L->src + start, L->pos - start, line);
                continue;
            }
        }
        if (at(L, "{#")) {
            L->pos += 2;
            int strip_before = L->pos < L->n && L->src[L->pos] == '-';
            if (strip_before) L->pos++;
            size_t start = L->pos;
            while (!(L->pos + 1 < L->n && L->src[L->pos] == '#' && L->src[L->pos + 1] == '}')) {
                if (L->pos + 2 >= L->n)
                    die(L->err, NB_ERR_FORMAT, "chat template: line %d: a comment is not closed",
                        line);
                L->pos++;
            }
            int strip_after = L->pos > start && L->src[L->pos - 1] == '-';
            if (strip_before) strip_trailing(L);
            push_tok(L, T_COMMENT, "", 0, line);
            L->pos += 2;
            if (strip_after) skip_space(L);
            continue;
        }
        if (at(L, "{%-") || at(L, "{{-")) {
            int stmt = L->src[L->pos + 1] == '%';
            strip_trailing(L);
            push_tok(L, stmt ? T_OS : T_OE, stmt ? "{%" : "{{", 2, line);
            if (!stmt) curly = 0;
            L->pos += 3;
            continue;
        }
        size_t w;
        while ((w = space_at(L->src + L->pos, L->n - L->pos)) > 0) {
            L->pos += w;
            if (L->pos >= L->n)
                die(L->err, NB_ERR_FORMAT, "chat template: line %d: the template ends inside a tag",
                    line);
        }
        line = lex_line(L, L->pos);
        if (at(L, "-%}") || at(L, "-}}")) {
            int stmt = L->src[L->pos + 1] == '%';
            push_tok(L, stmt ? T_CS : T_CE, stmt ? "%}" : "}}", 2, line);
            L->pos += 3;
            skip_space(L);
            continue;
        }
        char c = L->src[L->pos];
        if (c == '-' || c == '+') {
            if (last == T_TEXT || last == T_END)
                die(L->err, NB_ERR_FORMAT, "chat template: line %d: unexpected '%c'", line, c);
            if (!(last == T_IDENT || last == T_NUM || last == T_STR || last == T_RP ||
                  last == T_RB)) {
                size_t start = L->pos++;
                while (L->pos < L->n && is_digit(L->src[L->pos]))
                    L->pos++;
                size_t nd = L->pos - start - 1;
                if (nd && L->pos + 1 < L->n && L->src[L->pos] == '.' &&
                    is_digit(L->src[L->pos + 1])) {
                    L->pos++;
                    while (L->pos < L->n && is_digit(L->src[L->pos]))
                        L->pos++;
                }
                push_tok(L, nd ? T_NUM : T_UNARY, L->src + start, L->pos - start, line);
                continue;
            }
        }
        int hit = 0;
        for (size_t i = 0; i < sizeof table / sizeof table[0] && !hit; i++) {
            if (table[i].t == T_CE && !strcmp(table[i].s, "}}") && curly > 0) continue;
            if (!at(L, table[i].s)) continue;
            size_t n = strlen(table[i].s);
            push_tok(L, table[i].t, table[i].s, n, line);
            if (table[i].t == T_OE)
                curly = 0;
            else if (table[i].t == T_LC)
                curly++;
            else if (table[i].t == T_RC)
                curly--;
            L->pos += n;
            hit = 1;
        }
        if (hit) continue;
        if (c == '\'' || c == '"') {
            L->pos++;
            lex_string(L, c, line);
            continue;
        }
        if (is_digit(c)) {
            size_t start = L->pos;
            while (L->pos < L->n && is_digit(L->src[L->pos]))
                L->pos++;
            if (last != T_DOT && L->pos + 1 < L->n && L->src[L->pos] == '.' &&
                is_digit(L->src[L->pos + 1])) {
                L->pos++;
                while (L->pos < L->n && is_digit(L->src[L->pos]))
                    L->pos++;
            }
            push_tok(L, T_NUM, L->src + start, L->pos - start, line);
            continue;
        }
        if (is_word(c)) {
            size_t start = L->pos;
            while (L->pos < L->n && is_word(L->src[L->pos]))
                L->pos++;
            push_tok(L, T_IDENT, L->src + start, L->pos - start, line);
            continue;
        }
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
            die(L->err, NB_ERR_FORMAT, "chat template: line %d: unexpected character '%c'", line,
                c);
        die(L->err, NB_ERR_FORMAT, "chat template: line %d: unexpected byte 0x%02x", line,
            (unsigned char)c);
    }
    push_tok(L, T_END, "", 0, lex_line(L, L->n));
}

/* @huggingface/jinja's preprocessing: one trailing "\n" dropped, lstrip_blocks (spaces
 * and tabs before "{%", "{#" or "{-" at a line's start), trim_blocks (the "\n" after
 * "%}", "#}" or "-}"). *line gets the source line of each byte kept. */
static void preprocess(struct jerr *err, const char *src, size_t n, char **out, int **line,
                       size_t *out_n)
{
    if (n && src[n - 1] == '\n') n--;
    char *a = malloc(n + 1), *b = malloc(n + 1);
    int *la = malloc((n + 1) * sizeof *la), *lb = malloc((n + 1) * sizeof *lb);
    if (!a || !b || !la || !lb) {
        free(a), free(b), free(la), free(lb);
        die(err, NB_ERR_NOMEM, "chat template: out of memory");
    }
    size_t k = 0;
    int ln = 1;
    for (size_t i = 0; i < n;) {
        int line_start = i == 0 || src[i - 1] == '\n' || src[i - 1] == '\r';
        if (line_start) {
            size_t j = i;
            while (j < n && (src[j] == ' ' || src[j] == '\t'))
                j++;
            if (j + 1 < n && src[j] == '{' &&
                (src[j + 1] == '#' || src[j + 1] == '%' || src[j + 1] == '-')) {
                i = j;
            }
        }
        /* copy up to and including the next line break */
        do {
            a[k] = src[i];
            la[k++] = ln;
            if (src[i] == '\n') ln++;
            i++;
        } while (i < n && src[i - 1] != '\n' && src[i - 1] != '\r');
    }
    size_t m = 0;
    for (size_t i = 0; i < k;) {
        if (i + 2 < k && (a[i] == '#' || a[i] == '%' || a[i] == '-') && a[i + 1] == '}' &&
            a[i + 2] == '\n') {
            b[m] = a[i], lb[m++] = la[i];
            b[m] = a[i + 1], lb[m++] = la[i + 1];
            i += 3;
            continue;
        }
        b[m] = a[i], lb[m++] = la[i];
        i++;
    }
    free(a);
    free(la);
    b[m] = '\0';
    *out = b;
    *line = lb;
    *out_n = m;
}

/* ---------------------------------------------------------------- AST */

enum nk {
    /* statements */
    S_TEXT,
    S_OUT,
    S_IF,
    S_FOR,
    S_SET,
    S_MACRO,
    S_BREAK,
    S_CONTINUE,
    S_FILTER,
    S_NOOP,
    /* expressions */
    E_STR,
    E_INT,
    E_FLOAT,
    E_LIST,
    E_TUPLE,
    E_DICT,
    E_IDENT,
    E_CALL,
    E_MEMBER,
    E_SLICE,
    E_UNARY,
    E_BIN,
    E_FILTER,
    E_TEST,
    E_SELECT,
    E_TERNARY,
    E_KWARG
};

enum op {
    OP_ADD,
    OP_SUB,
    OP_CAT,
    OP_MUL,
    OP_DIV,
    OP_FDIV,
    OP_MOD,
    OP_POW,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_IN,
    OP_NOTIN,
    OP_AND,
    OP_OR,
    OP_NOT,
    OP_NEG,
    OP_POS
};

static const char *const k_op_name[] = {
    "+", "-",  "~",  "*",  "/",      "//",  "%",  "**",  "==", "!=", "<",
    ">", "<=", ">=", "in", "not in", "and", "or", "not", "-",  "+"};

struct node {
    enum nk k;
    int line;
    int op; /* enum op; E_MEMBER: computed; E_TEST: negated; E_FILTER: called; S_MACRO: uses
               kwargs (1) / varargs (2) */
    double num;
    struct jstr *str;       /* E_STR, S_TEXT, E_IDENT, E_FILTER/E_TEST name, E_KWARG, S_MACRO */
    struct node *a, *b, *c; /* operands, test, target, value ... */
    struct node **v, **w;   /* body / items / args / keys;  alternate / values / else */
    int nv, nw;
};

struct jinja_parser {
    struct jerr *err;
    struct arena *ar;
    struct tok *t;
    size_t pos, nt;
    int depth, blocks;
    const char *open_name[NB_JINJA_MAX_DEPTH + 2]; /* the statements open, innermost last */
    int open_line[NB_JINJA_MAX_DEPTH + 2];
    int saw_kwargs, saw_varargs; /* inside the macro being parsed */
};

struct nb_jinja {
    struct arena ar;
    struct jerr err; /* the arena's error target while parsing */
    struct node **body;
    int n;
};

typedef struct jinja_parser P;

static struct tok *cur(P *p)
{
    return &p->t[p->pos];
}
static int is(P *p, enum tk t)
{
    return p->t[p->pos].t == t;
}
static int is_ident(P *p, const char *name)
{
    return is(p, T_IDENT) && !strcmp(cur(p)->s, name);
}
static int is_ident2(P *p, const char *a, const char *b)
{
    return is_ident(p, a) && p->pos + 1 < p->nt && p->t[p->pos + 1].t == T_IDENT &&
           !strcmp(p->t[p->pos + 1].s, b);
}

static _Noreturn void perr(P *p, const char *what)
{
    struct tok *k = cur(p);
    if (k->t == T_END)
        die(p->err, NB_ERR_FORMAT, "chat template: line %d: %s, found the end of the template",
            k->line, what);
    die(p->err, NB_ERR_FORMAT, "chat template: line %d: %s, found %s%s%.40s%s", k->line, what,
        k_tk_name[k->t], k->n ? " '" : "", k->s, k->n ? "'" : "");
}

static struct tok *expect(P *p, enum tk t, const char *what)
{
    if (!is(p, t)) perr(p, what);
    return &p->t[p->pos++];
}

static void expect_ident(P *p, const char *name)
{
    if (!is_ident(p, name)) {
        char what[64];
        snprintf(what, sizeof what, "expected '%s'", name);
        perr(p, what);
    }
    p->pos++;
}

static struct node *mk(P *p, enum nk k, int line)
{
    struct node *n = acalloc(p->ar, sizeof *n);
    n->k = k;
    n->line = line;
    return n;
}

struct nvec {
    struct node **v;
    int n, cap;
};

static void nv_push(P *p, struct nvec *v, struct node *n)
{
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 4;
        struct node **nvv = aalloc(p->ar, (size_t)cap * sizeof *nvv);
        if (v->n) memcpy(nvv, v->v, (size_t)v->n * sizeof *nvv);
        v->v = nvv;
        v->cap = cap;
    }
    v->v[v->n++] = n;
}

static struct jstr *tok_str(P *p, struct tok *k)
{
    return str_make(p->ar, k->s, k->n, NULL, 0);
}

static struct node *parse_expr(P *p);
static struct node *parse_primary(P *p);
static struct node *parse_any(P *p);

/* The grammar, loosest first (as @huggingface/jinja's parser):
 *   expr    := or ("if" or ("else" expr)?)?        (no else: undefined when false)
 *   or      := and ("or" and)*          and := not ("and" not)*
 *   not     := "not" not | cmp          cmp := add (("==" ... | "in" | "not in") add)*
 *   add     := mul (("+" | "-" | "~") mul)*        mul := pow (("*" | "/" | "//" | "%") pow)*
 *   pow     := test ("**" test)*        test := filter ("is" "not"? NAME)*
 *   filter  := unary ("|" NAME ("(" args ")")?)*   unary := ("-" | "+") unary | member
 *   member  := primary ("." NAME | "[" expr-or-slice "]" | "(" args ")")*
 * A filter binds tighter than "+": 'a' + x | trim is 'a' + (x | trim).
 * enter(): one more level of nesting, refused past PARSE_DEPTH (NB_ERR_RANGE). */
static void enter(P *p)
{
    if (++p->depth > PARSE_DEPTH)
        die(p->err, NB_ERR_RANGE, "chat template: line %d: expressions nested deeper than %d",
            cur(p)->line, PARSE_DEPTH);
}

/* expr (, expr)*: a tuple when there is a comma */
static struct node *parse_seq(P *p, int primary)
{
    int line = cur(p)->line;
    struct node *first = primary ? parse_primary(p) : parse_expr(p);
    if (!is(p, T_COMMA)) return first;
    struct nvec v = {0};
    nv_push(p, &v, first);
    while (is(p, T_COMMA)) {
        p->pos++;
        nv_push(p, &v, primary ? parse_primary(p) : parse_expr(p));
    }
    struct node *t = mk(p, E_TUPLE, line);
    t->v = v.v;
    t->nv = v.n;
    return t;
}

/* ( args ): positional, then name=value; mode 1: a macro's parameters */
static void parse_args(P *p, struct nvec *out, int params)
{
    expect(p, T_LP, "expected '('");
    int saw_kw = 0;
    while (!is(p, T_RP)) {
        int line = cur(p)->line;
        if (is(p, T_POW) || (is(p, T_MUL) && !strcmp(cur(p)->s, "*")))
            die(p->err, NB_ERR_UNSUPPORTED,
                "chat template: line %d: argument unpacking (* / **) "
                "is not supported",
                line);
        struct node *a = parse_expr(p);
        if (is(p, T_EQUALS)) {
            p->pos++;
            if (a->k != E_IDENT)
                die(p->err, NB_ERR_FORMAT, "chat template: line %d: expected a name before '='",
                    line);
            struct node *kw = mk(p, E_KWARG, line);
            kw->str = a->str;
            kw->a = parse_expr(p);
            a = kw;
            saw_kw = 1;
        } else if (saw_kw) {
            die(p->err, NB_ERR_FORMAT, "chat template: line %d: %s", line,
                params ? "a parameter without default follows one with a default"
                       : "a positional argument follows a keyword argument");
        }
        if (params && a->k != E_IDENT && a->k != E_KWARG)
            die(p->err, NB_ERR_FORMAT, "chat template: line %d: expected a parameter name", line);
        if (params)
            for (int i = 0; i < out->n; i++)
                if (!strcmp(out->v[i]->str->s, a->str->s))
                    die(p->err, NB_ERR_FORMAT, "chat template: line %d: parameter '%s' twice", line,
                        a->str->s);
        nv_push(p, out, a);
        if (is(p, T_COMMA))
            p->pos++;
        else if (!is(p, T_RP))
            perr(p, "expected ',' or ')' in an argument list");
    }
    p->pos++;
}

static struct node *parse_member(P *p, struct node *obj);

static struct node *parse_call(P *p, struct node *callee)
{
    struct node *c = mk(p, E_CALL, cur(p)->line);
    struct nvec v = {0};
    parse_args(p, &v, 0);
    c->a = callee;
    c->v = v.v;
    c->nv = v.n;
    c = parse_member(p, c);
    if (is(p, T_LP)) c = parse_call(p, c);
    return c;
}

static struct node *parse_member(P *p, struct node *obj)
{
    while (is(p, T_DOT) || is(p, T_LB)) {
        int line = cur(p)->line;
        int computed = is(p, T_LB);
        p->pos++;
        struct node *m = mk(p, E_MEMBER, line);
        m->a = obj;
        m->op = computed;
        if (computed) {
            struct node *parts[3] = {0};
            int n = 0, slice = 0;
            while (!is(p, T_RB)) {
                if (is(p, T_END)) perr(p, "expected ']'");
                if (n >= 3)
                    die(p->err, NB_ERR_FORMAT,
                        "chat template: line %d: a slice has at "
                        "most 3 parts",
                        line);
                if (is(p, T_COLON)) {
                    parts[n++] = NULL;
                    p->pos++;
                    slice = 1;
                } else {
                    parts[n++] = parse_expr(p);
                    if (is(p, T_COLON)) {
                        p->pos++;
                        slice = 1;
                    }
                }
            }
            if (!n) die(p->err, NB_ERR_FORMAT, "chat template: line %d: empty []", line);
            expect(p, T_RB, "expected ']'");
            if (slice) {
                struct node *s = mk(p, E_SLICE, line);
                s->a = parts[0];
                s->b = parts[1];
                s->c = parts[2];
                m->b = s;
            } else {
                m->b = parts[0];
            }
        } else {
            struct node *prop = parse_primary(p);
            if (prop->k != E_IDENT && prop->k != E_INT)
                die(p->err, NB_ERR_FORMAT, "chat template: line %d: expected a name after '.'",
                    line);
            m->b = prop;
        }
        obj = m;
    }
    return obj;
}

static struct node *parse_unary(P *p)
{
    enter(p);
    struct node *r;
    struct tok *k = cur(p);
    if ((k->t == T_UNARY || k->t == T_ADD) && (!strcmp(k->s, "-") || !strcmp(k->s, "+"))) {
        p->pos++;
        r = mk(p, E_UNARY, k->line);
        r->op = k->s[0] == '-' ? OP_NEG : OP_POS;
        r->a = parse_unary(p);
    } else {
        r = parse_member(p, parse_primary(p));
        if (is(p, T_LP)) r = parse_call(p, r);
    }
    p->depth--;
    return r;
}

static struct node *parse_filter(P *p)
{
    struct node *operand = parse_unary(p);
    while (is(p, T_PIPE)) {
        int line = cur(p)->line;
        p->pos++;
        struct tok *name = expect(p, T_IDENT, "expected a filter name after '|'");
        struct node *f = mk(p, E_FILTER, line);
        f->a = operand;
        f->str = tok_str(p, name);
        if (is(p, T_LP)) {
            struct nvec v = {0};
            parse_args(p, &v, 0);
            f->v = v.v;
            f->nv = v.n;
            f->op = 1;
        }
        operand = f;
    }
    return operand;
}

static struct node *parse_test(P *p)
{
    struct node *operand = parse_filter(p);
    while (is_ident(p, "is")) {
        int line = cur(p)->line;
        p->pos++;
        int neg = is_ident(p, "not");
        if (neg) p->pos++;
        struct tok *name = expect(p, T_IDENT, "expected a test name after 'is'");
        struct node *t = mk(p, E_TEST, line);
        t->a = operand;
        t->op = neg;
        t->str = tok_str(p, name);
        operand = t;
    }
    return operand;
}

static int tok_op(struct tok *k)
{
    static const char *const names[] = {"+",  "-",  "~",  "*", "/", "//", "%",
                                        "**", "==", "!=", "<", ">", "<=", ">="};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(k->s, names[i])) return i;
    return -1;
}

static struct node *bin(P *p, int op, int line, struct node *a, struct node *b)
{
    struct node *n = mk(p, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct node *parse_pow(P *p)
{
    struct node *l = parse_test(p);
    while (is(p, T_POW)) {
        int line = cur(p)->line;
        p->pos++;
        l = bin(p, OP_POW, line, l, parse_test(p));
    }
    return l;
}

static struct node *parse_mul(P *p)
{
    struct node *l = parse_pow(p);
    while (is(p, T_MUL)) {
        struct tok *k = &p->t[p->pos++];
        l = bin(p, tok_op(k), k->line, l, parse_pow(p));
    }
    return l;
}

static struct node *parse_add(P *p)
{
    struct node *l = parse_mul(p);
    while (is(p, T_ADD)) {
        struct tok *k = &p->t[p->pos++];
        l = bin(p, tok_op(k), k->line, l, parse_mul(p));
    }
    return l;
}

static struct node *parse_cmp(P *p)
{
    struct node *l = parse_add(p);
    for (;;) {
        int line = cur(p)->line, op;
        if (is_ident2(p, "not", "in")) {
            op = OP_NOTIN;
            p->pos += 2;
        } else if (is_ident(p, "in")) {
            op = OP_IN;
            p->pos++;
        } else if (is(p, T_CMP)) {
            op = tok_op(cur(p));
            p->pos++;
        } else {
            break;
        }
        l = bin(p, op, line, l, parse_add(p));
    }
    return l;
}

static struct node *parse_not(P *p)
{
    if (is_ident(p, "not")) {
        enter(p);
        int line = cur(p)->line;
        p->pos++;
        struct node *n = mk(p, E_UNARY, line);
        n->op = OP_NOT;
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_cmp(p);
}

static struct node *parse_and(P *p)
{
    struct node *l = parse_not(p);
    while (is_ident(p, "and")) {
        int line = cur(p)->line;
        p->pos++;
        l = bin(p, OP_AND, line, l, parse_not(p));
    }
    return l;
}

static struct node *parse_or(P *p)
{
    struct node *l = parse_and(p);
    while (is_ident(p, "or")) {
        int line = cur(p)->line;
        p->pos++;
        l = bin(p, OP_OR, line, l, parse_and(p));
    }
    return l;
}

static struct node *parse_expr(P *p)
{
    enter(p);
    struct node *a = parse_or(p);
    if (is_ident(p, "if")) {
        int line = cur(p)->line;
        p->pos++;
        struct node *test = parse_or(p);
        if (is_ident(p, "else")) {
            p->pos++;
            struct node *t = mk(p, E_TERNARY, line);
            t->a = test;
            t->b = a;
            t->c = parse_expr(p);
            a = t;
        } else {
            struct node *s = mk(p, E_SELECT, line);
            s->a = a;
            s->b = test;
            a = s;
        }
    }
    p->depth--;
    return a;
}

static struct node *parse_primary(P *p)
{
    struct tok *k = cur(p);
    if (k->t == T_END) perr(p, "expected an expression");
    p->pos++;
    switch (k->t) {
    case T_NUM: {
        struct node *n = mk(p, strchr(k->s, '.') ? E_FLOAT : E_INT, k->line);
        n->num = strtod(k->s, NULL);
        return n;
    }
    case T_STR: {
        /* adjacent literals join: 'a' "b" */
        size_t total = k->n, i = p->pos;
        while (p->t[i].t == T_STR)
            total += p->t[i++].n;
        char *b = aalloc(p->ar, total + 1);
        size_t o = 0;
        memcpy(b, k->s, k->n);
        o = k->n;
        while (is(p, T_STR)) {
            memcpy(b + o, cur(p)->s, cur(p)->n);
            o += cur(p)->n;
            p->pos++;
        }
        struct node *n = mk(p, E_STR, k->line);
        n->str = str_make(p->ar, b, o, NULL, 0);
        return n;
    }
    case T_IDENT: {
        struct node *n = mk(p, E_IDENT, k->line);
        n->str = tok_str(p, k);
        if (!strcmp(k->s, "kwargs")) p->saw_kwargs = 1;
        if (!strcmp(k->s, "varargs")) p->saw_varargs = 1;
        return n;
    }
    case T_LP: {
        enter(p);
        struct node *e = parse_seq(p, 0);
        expect(p, T_RP, "expected ')'");
        p->depth--;
        return e;
    }
    case T_LB: {
        enter(p);
        struct node *n = mk(p, E_LIST, k->line);
        struct nvec v = {0};
        while (!is(p, T_RB)) {
            nv_push(p, &v, parse_expr(p));
            if (is(p, T_COMMA))
                p->pos++;
            else if (!is(p, T_RB))
                perr(p, "expected ',' or ']' in a list");
        }
        p->pos++;
        n->v = v.v;
        n->nv = v.n;
        p->depth--;
        return n;
    }
    case T_LC: {
        enter(p);
        struct node *n = mk(p, E_DICT, k->line);
        struct nvec keys = {0}, vals = {0};
        while (!is(p, T_RC)) {
            nv_push(p, &keys, parse_expr(p));
            expect(p, T_COLON, "expected ':' in a dict");
            nv_push(p, &vals, parse_expr(p));
            if (is(p, T_COMMA))
                p->pos++;
            else if (!is(p, T_RC))
                perr(p, "expected ',' or '}' in a dict");
        }
        p->pos++;
        n->v = keys.v;
        n->nv = keys.n;
        n->w = vals.v;
        n->nw = vals.n;
        p->depth--;
        return n;
    }
    default: p->pos--; perr(p, "expected an expression");
    }
}

/* Is the next tag {% name %} for one of the names? */
static int is_stmt(P *p, const char *a, const char *b, const char *c)
{
    if (!is(p, T_OS) || p->pos + 1 >= p->nt || p->t[p->pos + 1].t != T_IDENT) return 0;
    const char *s = p->t[p->pos + 1].s;
    return (a && !strcmp(s, a)) || (b && !strcmp(s, b)) || (c && !strcmp(s, c));
}

/* Statements up to one of the closing tags (not consumed). */
static void parse_body(P *p, struct nvec *v, const char *open, const char *a, const char *b,
                       const char *c)
{
    while (!is_stmt(p, a, b, c)) {
        if (is(p, T_END)) {
            char what[128];
            snprintf(what, sizeof what, "expected {%% %s %%} to close the {%% %s %%} of line %d", a,
                     open, p->open_line[p->blocks]);
            perr(p, what);
        }
        nv_push(p, v, parse_any(p));
    }
}

static void end_tag(P *p, const char *name)
{
    expect(p, T_OS, "expected '{%'");
    expect_ident(p, name);
    expect(p, T_CS, "expected '%}'");
}

static struct node *parse_if(P *p, int line)
{
    struct node *n = mk(p, S_IF, line);
    n->a = parse_expr(p);
    expect(p, T_CS, "expected '%}'");
    struct nvec body = {0}, alt = {0};
    parse_body(p, &body, "if", "endif", "elif", "else");
    if (is_stmt(p, "elif", NULL, NULL)) {
        int l2 = cur(p)->line;
        p->pos += 2;
        nv_push(p, &alt, parse_if(p, l2));
    } else if (is_stmt(p, "else", NULL, NULL)) {
        p->pos += 2;
        expect(p, T_CS, "expected '%}'");
        parse_body(p, &alt, "if", "endif", NULL, NULL);
    }
    n->v = body.v;
    n->nv = body.n;
    n->w = alt.v;
    n->nw = alt.n;
    return n;
}

/* {% NAME ... %} and, for a block, its body up to the closing tag. */
static struct node *parse_stmt(P *p)
{
    int line = cur(p)->line;
    expect(p, T_OS, "expected '{%'");
    struct tok *name = expect(p, T_IDENT, "expected a statement name after '{%'");
    const char *s = name->s;
    struct node *n;
    if (++p->blocks > NB_JINJA_MAX_DEPTH)
        die(p->err, NB_ERR_RANGE, "chat template: line %d: blocks nested deeper than %d", line,
            NB_JINJA_MAX_DEPTH);
    p->open_name[p->blocks] = s;
    p->open_line[p->blocks] = line;
    if (!strcmp(s, "set")) {
        n = mk(p, S_SET, line);
        n->a = parse_seq(p, 0);
        if (is(p, T_EQUALS)) {
            p->pos++;
            n->b = parse_seq(p, 0);
        } else {
            expect(p, T_CS, "expected '=' or '%}'");
            struct nvec body = {0};
            parse_body(p, &body, "set", "endset", NULL, NULL);
            n->v = body.v;
            n->nv = body.n;
            expect(p, T_OS, "expected '{%'");
            expect_ident(p, "endset");
        }
        expect(p, T_CS, "expected '%}'");
    } else if (!strcmp(s, "if")) {
        n = parse_if(p, line);
        end_tag(p, "endif");
    } else if (!strcmp(s, "for")) {
        n = mk(p, S_FOR, line);
        n->a = parse_seq(p, 1);
        if (n->a->k != E_IDENT && n->a->k != E_TUPLE)
            die(p->err, NB_ERR_FORMAT,
                "chat template: line %d: expected a name or names after "
                "'for'",
                line);
        for (int i = 0; n->a->k == E_TUPLE && i < n->a->nv; i++)
            if (n->a->v[i]->k != E_IDENT)
                die(p->err, NB_ERR_FORMAT, "chat template: line %d: expected names after 'for'",
                    line);
        expect_ident(p, "in");
        struct node *it = parse_expr(p);
        if (it->k == E_SELECT) {
            n->b = it->a;
            n->c = it->b;
        } else {
            n->b = it;
        }
        expect(p, T_CS, "expected '%}'");
        struct nvec body = {0}, alt = {0};
        parse_body(p, &body, "for", "endfor", "else", NULL);
        if (is_stmt(p, "else", NULL, NULL)) {
            p->pos += 2;
            expect(p, T_CS, "expected '%}'");
            parse_body(p, &alt, "for", "endfor", NULL, NULL);
        }
        end_tag(p, "endfor");
        n->v = body.v;
        n->nv = body.n;
        n->w = alt.v;
        n->nw = alt.n;
    } else if (!strcmp(s, "macro")) {
        n = mk(p, S_MACRO, line);
        struct tok *mname = expect(p, T_IDENT, "expected the macro's name");
        n->str = tok_str(p, mname);
        struct nvec params = {0}, body = {0};
        int kw = p->saw_kwargs, va = p->saw_varargs;
        p->saw_kwargs = p->saw_varargs = 0;
        parse_args(p, &params, 1);
        int declared_kw = 0, declared_va = 0;
        for (int i = 0; i < params.n; i++) {
            declared_kw |= !strcmp(params.v[i]->str->s, "kwargs");
            declared_va |= !strcmp(params.v[i]->str->s, "varargs");
        }
        p->saw_kwargs = p->saw_varargs = 0;
        expect(p, T_CS, "expected '%}'");
        parse_body(p, &body, "macro", "endmacro", NULL, NULL);
        end_tag(p, "endmacro");
        n->op = (p->saw_kwargs && !declared_kw ? 1 : 0) | (p->saw_varargs && !declared_va ? 2 : 0);
        p->saw_kwargs = kw;
        p->saw_varargs = va;
        n->v = params.v;
        n->nv = params.n;
        n->w = body.v;
        n->nw = body.n;
    } else if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        n = mk(p, s[0] == 'b' ? S_BREAK : S_CONTINUE, line);
        expect(p, T_CS, "expected '%}'");
    } else if (!strcmp(s, "filter")) {
        n = mk(p, S_FILTER, line);
        struct tok *fname = expect(p, T_IDENT, "expected a filter name");
        struct node *f = mk(p, E_FILTER, line);
        f->str = tok_str(p, fname);
        if (is(p, T_LP)) {
            struct nvec v = {0};
            parse_args(p, &v, 0);
            f->v = v.v;
            f->nv = v.n;
            f->op = 1;
        }
        n->a = f;
        expect(p, T_CS, "expected '%}'");
        struct nvec body = {0};
        parse_body(p, &body, "filter", "endfilter", NULL, NULL);
        end_tag(p, "endfilter");
        n->v = body.v;
        n->nv = body.n;
    } else if (!strcmp(s, "generation") || !strcmp(s, "endgeneration")) {
        n = mk(p, S_NOOP, line);
        expect(p, T_CS, "expected '%}'");
    } else if (!strcmp(s, "call") || !strcmp(s, "block") || !strcmp(s, "extends") ||
               !strcmp(s, "include") || !strcmp(s, "import") || !strcmp(s, "from") ||
               !strcmp(s, "with") || !strcmp(s, "raw")) {
        die(p->err, NB_ERR_UNSUPPORTED, "chat template: line %d: {%% %s %%} is not supported", line,
            s);
    } else if (p->blocks > 1 &&
               (!strncmp(s, "end", 3) || !strcmp(s, "elif") || !strcmp(s, "else"))) {
        die(p->err, NB_ERR_FORMAT,
            "chat template: line %d: {%% %.40s %%} inside the {%% %s %%} of line %d (expected "
            "its {%% end%s %%})",
            line, s, p->open_name[p->blocks - 1], p->open_line[p->blocks - 1],
            p->open_name[p->blocks - 1]);
    } else if (!strncmp(s, "end", 3) || !strcmp(s, "elif") || !strcmp(s, "else")) {
        die(p->err, NB_ERR_FORMAT, "chat template: line %d: {%% %.40s %%} closes nothing", line, s);
    } else {
        die(p->err, NB_ERR_FORMAT, "chat template: line %d: unknown statement '%.40s'", line, s);
    }
    p->blocks--;
    return n;
}

static struct node *parse_any(P *p)
{
    struct tok *k = cur(p);
    switch (k->t) {
    case T_TEXT: {
        p->pos++;
        struct node *n = mk(p, S_TEXT, k->line);
        n->str = tok_str(p, k);
        return n;
    }
    case T_COMMENT: {
        p->pos++;
        return mk(p, S_NOOP, k->line);
    }
    case T_OS: return parse_stmt(p);
    case T_OE: {
        p->pos++;
        struct node *n = mk(p, S_OUT, k->line);
        n->a = parse_expr(p);
        expect(p, T_CE, "expected '}}'");
        return n;
    }
    default: perr(p, "unexpected token");
    }
}

enum nb_status nb_jinja_parse(const char *src, size_t len, struct nb_jinja **out)
{
    /* what the error path frees lives on the heap, not in locals (which longjmp may
     * leave indeterminate) */
    struct nb_jinja *t = calloc(1, sizeof *t);
    struct lexer *L = calloc(1, sizeof *L);
    *out = NULL;
    if (!t || !L || (!src && len)) {
        free(t);
        free(L);
        return nb_set_error(t && L ? NB_ERR_INVALID_ARG : NB_ERR_NOMEM, "chat template: %s",
                            t && L ? "no source" : "out of memory");
    }
    t->ar.limit = MEM_LIMIT;
    t->ar.err = &t->err;
    if (setjmp(t->err.jb)) {
        free(L->src);
        free(L->line);
        free(L->v);
        free(L->tmp);
        free(L);
        arena_free(&t->ar);
        enum nb_status st = t->err.st;
        nb_set_error(st, "%s", t->err.msg);
        free(t);
        return st;
    }
    L->err = &t->err;
    L->ar = &t->ar;
    preprocess(&t->err, src ? src : "", len, &L->src, &L->line, &L->n);
    lex(L);
    P p = {.err = &t->err, .ar = &t->ar, .t = L->v, .nt = L->nt};
    struct nvec body = {0};
    while (!is(&p, T_END))
        nv_push(&p, &body, parse_any(&p));
    t->body = body.v;
    t->n = body.n;
    free(L->src);
    free(L->line);
    free(L->v);
    free(L);
    *out = t;
    return NB_OK;
}

void nb_jinja_free(struct nb_jinja *t)
{
    if (!t) return;
    arena_free(&t->ar);
    free(t);
}

/* ---------------------------------------------------------------- values */

enum vt { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC };

static const char *const k_vt_name[] = {"undefined", "none", "boolean", "integer",   "float",
                                        "string",    "list", "dict",    "namespace", "function"};

struct jlist;
struct jdict;
struct jfunc;

/* m: the value came from the context (1) or was made by the template (0) — the mark of
 * the bytes that print it (a string's own bytes carry their marks) */
struct val {
    uint8_t t, m;
    union {
        int b;
        double d; /* V_INT holds an integral double, as JavaScript numbers */
        struct jstr *s;
        struct jlist *l;
        struct jdict *o;
        struct jfunc *f;
    } u;
};

struct jlist {
    size_t n;
    struct val *v;
    int tuple; /* (a, b): as a list, except that @huggingface/jinja has no JSON for it */
};

struct jdict {
    size_t n, cap;
    struct jstr **k;
    struct val *v;
};

enum fkind { F_MACRO, F_METHOD, F_GLOBAL };
enum fid {
    G_NAMESPACE,
    G_RANGE,
    G_RAISE,
    G_STRFTIME,
    M_UPPER,
    M_LOWER,
    M_STRIP,
    M_TITLE,
    M_CAPITALIZE,
    M_RSTRIP,
    M_LSTRIP,
    M_STARTSWITH,
    M_ENDSWITH,
    M_SPLIT,
    M_REPLACE,
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_DICTSORT
};

struct jfunc {
    enum fkind kind;
    enum fid id;
    struct val self;
    const struct node *macro;
};

struct scope {
    struct scope *up;
    struct jdict vars;
};

struct buf {
    char *s;
    uint8_t *m;
    size_t n, cap;
};

struct R {
    struct jerr err;
    struct arena ar;
    long long steps;
    int depth, calls;
    int line; /* of the node being evaluated, for messages */
};

static const struct val k_undef = {V_UNDEF, 0, {0}};
static const struct val k_none = {V_NONE, 0, {0}};

/* A run-time error of the template (NB_ERR_INVALID_ARG), naming the line being evaluated. */
static _Noreturn void rerr(struct R *r, const char *fmt, ...) NB_PRINTF(2, 3);
static _Noreturn void rerr(struct R *r, const char *fmt, ...)
{
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    die(&r->err, NB_ERR_INVALID_ARG, "chat template: line %d: %s", r->line, m);
}

/* Count `units` evaluation steps; past NB_JINJA_MAX_STEPS: NB_ERR_RANGE. */
static void charge(struct R *r, size_t units)
{
    r->steps += (long long)units;
    if (r->steps > NB_JINJA_MAX_STEPS)
        die(&r->err, NB_ERR_RANGE, "chat template: more than %d evaluation steps",
            NB_JINJA_MAX_STEPS);
}

static struct val mkb(int b)
{
    struct val v = {V_BOOL, 0, {0}};
    v.u.b = !!b;
    return v;
}
static struct val mkn(int t, double d)
{
    struct val v = {(uint8_t)t, 0, {0}};
    v.u.d = d;
    return v;
}
static struct val mks(struct jstr *s)
{
    struct val v = {V_STR, 0, {0}};
    v.u.s = s;
    v.m = (uint8_t)s->any;
    return v;
}
static struct val mkl(struct R *r, size_t n)
{
    struct val v = {V_LIST, 0, {0}};
    v.u.l = aalloc(&r->ar, sizeof *v.u.l);
    v.u.l->n = n;
    v.u.l->tuple = 0;
    if (n > MEM_LIMIT / sizeof(struct val))
        die(&r->err, NB_ERR_RANGE, "chat template: a list of %zu items is too long", n);
    v.u.l->v = n ? aalloc(&r->ar, n * sizeof(struct val)) : NULL;
    return v;
}
static struct val mkd(struct R *r, int t)
{
    struct val v = {(uint8_t)t, 0, {0}};
    v.u.o = acalloc(&r->ar, sizeof *v.u.o);
    return v;
}
static struct val mkf(struct R *r, enum fkind kind, enum fid id, struct val self)
{
    struct val v = {V_FUNC, 0, {0}};
    v.u.f = acalloc(&r->ar, sizeof *v.u.f);
    v.u.f->kind = kind;
    v.u.f->id = id;
    v.u.f->self = self;
    return v;
}
static struct val mklit(struct R *r, const char *s)
{
    return mks(str_make(&r->ar, s, strlen(s), NULL, 0));
}

/* The value under key k[0..n) of d, or NULL (a linear search, charged as steps). */
static struct val *dict_find(struct R *r, const struct jdict *d, const char *k, size_t n)
{
    charge(r, 1 + d->n / 8);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i]->n == n && !memcmp(d->k[i]->s, k, n)) return &d->v[i];
    return NULL;
}

/* Set key k of d (in its place when there, else at the end: insertion order). */
static void dict_set(struct R *r, struct jdict *d, struct jstr *k, struct val v)
{
    struct val *old = dict_find(r, d, k->s, k->n);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        struct jstr **nk = aalloc(&r->ar, cap * sizeof *nk);
        struct val *nv = aalloc(&r->ar, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

/* Jinja truth (@huggingface/jinja's __bool__): empty strings, lists and dicts are false;
 * a namespace is always true. */
static int truthy(struct val v)
{
    switch (v.t) {
    case V_UNDEF:
    case V_NONE: return 0;
    case V_BOOL: return v.u.b;
    case V_INT:
    case V_FLOAT: return v.u.d != 0 && !isnan(v.u.d);
    case V_STR: return v.u.s->n > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.o->n > 0;
    default: return 1;
    }
}

/* ---------------------------------------------------------------- output buffers */

/* Append n bytes of s to b, marked m[i] (m NULL: m0); past NB_JINJA_MAX_OUT: NB_ERR_RANGE. */
static void bput(struct R *r, struct buf *b, const char *s, const uint8_t *m, uint8_t m0, size_t n)
{
    if (!n) return;
    if (n > NB_JINJA_MAX_OUT || b->n > NB_JINJA_MAX_OUT - n)
        die(&r->err, NB_ERR_RANGE, "chat template: the output passed %u MiB",
            (unsigned)(NB_JINJA_MAX_OUT >> 20));
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        char *ns = aalloc(&r->ar, cap + 1);
        uint8_t *nm = aalloc(&r->ar, cap);
        if (b->n) {
            memcpy(ns, b->s, b->n);
            memcpy(nm, b->m, b->n);
        }
        b->s = ns;
        b->m = nm;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    if (m)
        memcpy(b->m + b->n, m, n);
    else
        memset(b->m + b->n, m0, n);
    b->n += n;
    charge(r, n / 256);
}

static void bstr(struct R *r, struct buf *b, const struct jstr *s)
{
    bput(r, b, s->s, s->m, 0, s->n);
}

static void bcstr(struct R *r, struct buf *b, const char *s, uint8_t m)
{
    bput(r, b, s, NULL, m, strlen(s));
}

/* The bytes of b as a string. */
static struct jstr *bdone(struct R *r, struct buf *b)
{
    return str_make(&r->ar, b->s ? b->s : "", b->n, b->m, 0);
}

/* ---------------------------------------------------------------- printing */

/* The number as @huggingface/jinja prints a value of that type. */
static void num_text(struct val v, char *o, size_t size)
{
    double d = v.u.d;
    if (v.t == V_FLOAT && !isnan(d) && !isinf(d) && d == floor(d)) {
        if (d == 0 && signbit(d))
            snprintf(o, size, "-0.0");
        else if (fabs(d) < 1e21)
            snprintf(o, size, "%.1f", d);
        else
            js_num(d, o, size);
        return;
    }
    js_num(d, o, size);
}

struct json_opts {
    int indent; /* 0: none */
    int ascii, sort;
    const struct jstr *item_sep, *key_sep; /* NULL: the defaults */
    int undef_null;
};

/* s as JSON.stringify writes it (then, with ascii, every code unit >= 0x7F as \\uXXXX). */
static void json_string(struct R *r, struct buf *b, const struct jstr *s, int ascii)
{
    uint8_t q = (uint8_t)s->any;
    bput(r, b, "\"", NULL, q, 1);
    size_t run = 0; /* bytes copied as they are, flushed in one go */
    for (size_t i = 0; i < s->n;) {
        unsigned char c = (unsigned char)s->s[i];
        char e[16];
        size_t elen = 0, clen = 1;
        if (c == '"' || c == '\\')
            elen = (size_t)snprintf(e, sizeof e, "\\%c", c);
        else if (c == '\n')
            elen = (size_t)snprintf(e, sizeof e, "\\n");
        else if (c == '\r')
            elen = (size_t)snprintf(e, sizeof e, "\\r");
        else if (c == '\t')
            elen = (size_t)snprintf(e, sizeof e, "\\t");
        else if (c == '\b')
            elen = (size_t)snprintf(e, sizeof e, "\\b");
        else if (c == '\f')
            elen = (size_t)snprintf(e, sizeof e, "\\f");
        else if (c < 0x20)
            elen = (size_t)snprintf(e, sizeof e, "\\u%04x", c);
        else if (ascii && c >= 0x7F) {
            uint32_t cp = utf8_next(s->s + i, s->n - i, &clen);
            if (cp > 0xFFFF) {
                cp -= 0x10000;
                elen = (size_t)snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                                        0xDC00 + (cp & 0x3FF));
            } else {
                elen = (size_t)snprintf(e, sizeof e, "\\u%04x", cp);
            }
        }
        if (!elen) {
            run++;
            i++;
            continue;
        }
        if (run) bput(r, b, s->s + i - run, s->m ? s->m + i - run : NULL, 0, run);
        run = 0;
        bput(r, b, e, NULL, mark_at(s, i), elen);
        i += clen;
    }
    if (run) bput(r, b, s->s + s->n - run, s->m ? s->m + s->n - run : NULL, 0, run);
    bput(r, b, "\"", NULL, q, 1);
}

static int key_cmp(const void *a, const void *b)
{
    const struct jstr *x = *(const struct jstr *const *)a, *y = *(const struct jstr *const *)b;
    /* JavaScript's localeCompare on the keys; plain byte order here (ASCII keys agree) */
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* v as @huggingface/jinja's toJSON: ", " and ": " between items and keys (or the
 * separators given), with indent: one item per line, "," then newline; keys in their
 * order (sorted with sort_keys); undefined as null (undef_null) or "undefined". */
static void tojson(struct R *r, struct buf *b, struct val v, const struct json_opts *o, int depth)
{
    char num[40];
    if (depth > JSON_DEPTH)
        die(&r->err, NB_ERR_RANGE, "chat template: a value nested deeper than %d (a cycle?)",
            JSON_DEPTH);
    charge(r, 1);
    switch (v.t) {
    case V_NONE: bcstr(r, b, "null", v.m); return;
    case V_UNDEF: bcstr(r, b, o->undef_null ? "null" : "undefined", v.m); return;
    case V_BOOL: bcstr(r, b, v.u.b ? "true" : "false", v.m); return;
    case V_INT:
    case V_FLOAT:
        if (isnan(v.u.d) || isinf(v.u.d))
            snprintf(num, sizeof num, "null");
        else
            js_num(v.u.d, num, sizeof num);
        bcstr(r, b, num, v.m);
        return;
    case V_STR: json_string(r, b, v.u.s, o->ascii); return;
    case V_FUNC: rerr(r, "tojson: a function has no JSON form");
    case V_LIST:
        if (v.u.l->tuple) rerr(r, "a tuple has no JSON form");
        break;
    default: break;
    }
    uint8_t m = v.m;
    const char *isep = o->indent ? "," : ", ";
    size_t n = v.t == V_LIST ? v.u.l->n : v.u.o->n;
    int list = v.t == V_LIST;
    bput(r, b, list ? "[" : "{", NULL, m, 1);
    struct jstr **keys = NULL;
    if (!list && o->sort && n) {
        keys = aalloc(&r->ar, n * sizeof *keys);
        memcpy(keys, v.u.o->k, n * sizeof *keys);
        qsort(keys, n, sizeof *keys, key_cmp);
    }
    for (size_t i = 0; i < n; i++) {
        if (i) {
            if (o->item_sep)
                bstr(r, b, o->item_sep);
            else
                bcstr(r, b, isep, m);
        }
        if (o->indent) {
            bput(r, b, "\n", NULL, m, 1);
            for (int k = 0; k < o->indent * (depth + 1); k++)
                bput(r, b, " ", NULL, m, 1);
        }
        if (list) {
            tojson(r, b, v.u.l->v[i], o, depth + 1);
        } else {
            struct jstr *k = keys ? keys[i] : v.u.o->k[i];
            struct val *item = keys ? dict_find(r, v.u.o, k->s, k->n) : &v.u.o->v[i];
            json_string(r, b, k, o->ascii);
            if (o->key_sep)
                bstr(r, b, o->key_sep);
            else
                bcstr(r, b, ": ", m);
            tojson(r, b, *item, o, depth + 1);
        }
    }
    if (o->indent && n) {
        bput(r, b, "\n", NULL, m, 1);
        for (int k = 0; k < o->indent * depth; k++)
            bput(r, b, " ", NULL, m, 1);
    }
    bput(r, b, list ? "]" : "}", NULL, m, 1);
}

/* A value as {{ }} prints it (RuntimeValue#toString). */
static void print_val(struct R *r, struct buf *b, struct val v)
{
    char num[40];
    switch (v.t) {
    case V_UNDEF:
    case V_NONE: return;
    case V_BOOL: bcstr(r, b, v.u.b ? "true" : "false", v.m); return;
    case V_INT:
    case V_FLOAT:
        num_text(v, num, sizeof num);
        bcstr(r, b, num, v.m);
        return;
    case V_STR: bstr(r, b, v.u.s); return;
    case V_FUNC: rerr(r, "a function cannot be printed");
    default: {
        struct json_opts o = {0};
        tojson(r, b, v, &o, 0);
    }
    }
}

/* A value as JavaScript's String(value.value) gives it, for `+` with a string and `~`. */
static void js_text(struct R *r, struct buf *b, struct val v, int depth)
{
    char num[40];
    if (depth > JSON_DEPTH) die(&r->err, NB_ERR_RANGE, "chat template: a value nested too deep");
    switch (v.t) {
    case V_UNDEF: bcstr(r, b, "undefined", v.m); return;
    case V_NONE: bcstr(r, b, "null", v.m); return;
    case V_BOOL: bcstr(r, b, v.u.b ? "true" : "false", v.m); return;
    case V_INT:
    case V_FLOAT:
        js_num(v.u.d, num, sizeof num);
        bcstr(r, b, num, v.m);
        return;
    case V_STR: bstr(r, b, v.u.s); return;
    case V_LIST:
        /* Array#toString: the items' own toString joined by "," */
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) bcstr(r, b, ",", v.m);
            struct val it = v.u.l->v[i];
            if (it.t == V_UNDEF)
                bcstr(r, b, "undefined", it.m);
            else if (it.t == V_NONE)
                bcstr(r, b, "null", it.m);
            else
                print_val(r, b, it);
        }
        return;
    case V_DICT:
    case V_NS: bcstr(r, b, "[object Map]", v.m); return;
    default: rerr(r, "a function cannot be joined to a string");
    }
}

static struct jstr *to_text(struct R *r, struct val v)
{
    if (v.t == V_STR) return v.u.s;
    struct buf b = {0};
    js_text(r, &b, v, 0);
    return bdone(r, &b);
}

/* ---------------------------------------------------------------- context */

static int index_key(const char *s, double *out)
{
    /* a canonical array index ("0", "17"; not "01", "-1"): JavaScript puts these first */
    size_t n = strlen(s);
    if (!n || n > 10 || (n > 1 && s[0] == '0')) return 0;
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i])) return 0;
        d = d * 10 + (s[i] - '0');
    }
    if (d >= 4294967295.0) return 0;
    *out = d;
    return 1;
}

struct ikey {
    double i;
    const cJSON *item;
};

static int ikey_cmp(const void *a, const void *b)
{
    double x = ((const struct ikey *)a)->i, y = ((const struct ikey *)b)->i;
    return (x > y) - (x < y);
}

/* A JSON value of the context as a template value, every string and every container
 * marked m. Object keys in JavaScript's order (integer-like keys first, ascending): the
 * order the reference sees after JSON.parse. */
static struct val from_json(struct R *r, const cJSON *j, uint8_t m, int depth)
{
    if (depth > JSON_DEPTH)
        die(&r->err, NB_ERR_RANGE, "chat template: the context nests deeper than %d", JSON_DEPTH);
    charge(r, 1);
    struct val v = k_none;
    if (cJSON_IsFalse(j) || cJSON_IsTrue(j)) {
        v = mkb(cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        v = mkn(isfinite(d) && d == floor(d) ? V_INT : V_FLOAT, d);
    } else if (cJSON_IsString(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        v = mks(str_make(&r->ar, s, strlen(s), NULL, m));
    } else if (cJSON_IsArray(j)) {
        size_t n = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            n++;
        v = mkl(r, n);
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            v.u.l->v[i++] = from_json(r, c, m, depth + 1);
    } else if (cJSON_IsObject(j)) {
        v = mkd(r, V_DICT);
        size_t n = 0, ni = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            n++;
        struct ikey *ik = n ? aalloc(&r->ar, n * sizeof *ik) : NULL;
        for (const cJSON *c = j->child; c; c = c->next) {
            double d;
            if (c->string && index_key(c->string, &d)) ik[ni++] = (struct ikey){d, c};
        }
        if (ni) qsort(ik, ni, sizeof *ik, ikey_cmp);
        for (size_t i = 0; i < ni; i++) {
            const char *k = ik[i].item->string;
            dict_set(r, v.u.o, str_make(&r->ar, k, strlen(k), NULL, m),
                     from_json(r, ik[i].item, m, depth + 1));
        }
        for (const cJSON *c = j->child; c; c = c->next) {
            double d;
            const char *k = c->string ? c->string : "";
            if (c->string && index_key(c->string, &d)) continue;
            dict_set(r, v.u.o, str_make(&r->ar, k, strlen(k), NULL, m),
                     from_json(r, c, m, depth + 1));
        }
    } else if (!cJSON_IsNull(j)) {
        die(&r->err, NB_ERR_INVALID_ARG,
            "chat template: the context holds a value JSON has no "
            "type for");
    }
    v.m = v.t == V_STR ? v.m : m;
    return v;
}

/* ---------------------------------------------------------------- scopes */

/* A variable: the innermost scope that has it, else undefined. */
static struct val lookup(struct R *r, struct scope *s, const struct jstr *name)
{
    for (; s; s = s->up) {
        struct val *v = dict_find(r, &s->vars, name->s, name->n);
        if (v) return *v;
    }
    return k_undef;
}

static void set_var(struct R *r, struct scope *s, struct jstr *name, struct val v)
{
    dict_set(r, &s->vars, name, v);
}

static struct scope *new_scope(struct R *r, struct scope *up)
{
    struct scope *s = acalloc(&r->ar, sizeof *s);
    s->up = up;
    return s;
}

/* ---------------------------------------------------------------- evaluation */

static struct val eval(struct R *r, struct scope *s, const struct node *n);
static int exec_body(struct R *r, struct scope *s, struct node *const *v, int nv, struct buf *out);

struct args {
    int n;
    struct val *pos;
    struct jdict kw;
};

/* A call's arguments: positional ones in order, then name=value ones (each name once). */
static void eval_args(struct R *r, struct scope *s, struct node *const *v, int nv, struct args *a)
{
    memset(a, 0, sizeof *a);
    a->pos = nv ? aalloc(&r->ar, (size_t)nv * sizeof *a->pos) : NULL;
    for (int i = 0; i < nv; i++)
        if (v[i]->k != E_KWARG) a->pos[a->n++] = eval(r, s, v[i]);
    for (int i = 0; i < nv; i++) {
        if (v[i]->k != E_KWARG) continue;
        if (dict_find(r, &a->kw, v[i]->str->s, v[i]->str->n))
            rerr(r, "keyword argument '%s' given twice", v[i]->str->s);
        dict_set(r, &a->kw, v[i]->str, eval(r, s, v[i]->a));
    }
}

static struct val kwarg(struct R *r, const struct args *a, const char *name)
{
    struct val *v = dict_find(r, &a->kw, name, strlen(name));
    return v ? *v : k_undef;
}

/* positional i, else keyword `name`, else undefined */
static struct val arg(struct R *r, const struct args *a, int i, const char *name)
{
    if (i >= 0 && i < a->n) return a->pos[i];
    return name ? kwarg(r, a, name) : k_undef;
}

static int is_num(struct val v)
{
    return v.t == V_INT || v.t == V_FLOAT;
}
static int is_numlike(struct val v)
{
    return is_num(v) || v.t == V_BOOL;
}
static double numval(struct val v)
{
    return v.t == V_BOOL ? v.u.b : v.u.d;
}

/* JavaScript's Number(string) */
static double str_number(const struct jstr *s)
{
    size_t a = 0, b = s->n, w;
    while ((w = space_at(s->s + a, b - a)) > 0)
        a += w;
    while (b > a && (w = space_before(s->s + a, b - a)) > 0)
        b -= w;
    if (a == b) return 0;
    char tmp[64];
    if (b - a >= sizeof tmp) return NAN;
    memcpy(tmp, s->s + a, b - a);
    tmp[b - a] = '\0';
    if (!strcmp(tmp, "Infinity") || !strcmp(tmp, "+Infinity")) return INFINITY;
    if (!strcmp(tmp, "-Infinity")) return -INFINITY;
    for (char *c = tmp; *c; c++)
        if (!(is_digit(*c) || *c == '.' || *c == 'e' || *c == 'E' || *c == '+' || *c == '-' ||
              ((*c | 32) >= 'a' && (*c | 32) <= 'f') || (*c | 32) == 'x'))
            return NAN;
    char *end;
    double d = strtod(tmp, &end);
    return *end ? NAN : d;
}

static int same_str(const struct jstr *a, const struct jstr *b)
{
    return a->n == b->n && !memcmp(a->s, b->s, a->n);
}

/* JavaScript's a.value == b.value */
static int loose_eq(struct val a, struct val b)
{
    int an = a.t == V_UNDEF || a.t == V_NONE, bn = b.t == V_UNDEF || b.t == V_NONE;
    if (an || bn) return an && bn;
    if (a.t == V_STR && b.t == V_STR) return same_str(a.u.s, b.u.s);
    if (is_numlike(a) && is_numlike(b)) return numval(a) == numval(b);
    if (a.t == V_STR && is_numlike(b)) return str_number(a.u.s) == numval(b);
    if (b.t == V_STR && is_numlike(a)) return str_number(b.u.s) == numval(a);
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_LIST: return a.u.l == b.u.l;
    case V_DICT:
    case V_NS: return a.u.o == b.u.o;
    case V_FUNC: return a.u.f == b.u.f;
    default: return 0;
    }
}

/* JavaScript's a.value === b.value */
static int strict_eq(struct val a, struct val b)
{
    if (is_num(a) && is_num(b)) return a.u.d == b.u.d;
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF:
    case V_NONE: return 1;
    case V_BOOL: return a.u.b == b.u.b;
    case V_STR: return same_str(a.u.s, b.u.s);
    case V_LIST: return a.u.l == b.u.l;
    case V_DICT:
    case V_NS: return a.u.o == b.u.o;
    default: return a.u.f == b.u.f;
    }
}

static struct jstr *str_lower_ascii(struct R *r, const struct jstr *s, int upper)
{
    struct jstr *o = str_make(&r->ar, s->s, s->n, s->m, 0);
    for (size_t i = 0; i < o->n; i++) {
        char c = o->s[i];
        if (upper && c >= 'a' && c <= 'z') o->s[i] = (char)(c - 32);
        if (!upper && c >= 'A' && c <= 'Z') o->s[i] = (char)(c + 32);
    }
    return o;
}

/* compareRuntimeValues: numbers (and booleans), or strings (lowercased unless
 * case-sensitive); anything else cannot be ordered */
static int compare(struct R *r, struct val a, struct val b, int case_sensitive)
{
    if (a.t == V_NONE && b.t == V_NONE) return 0;
    if (a.t == V_UNDEF && b.t == V_UNDEF) return 0;
    if (is_numlike(a) && is_numlike(b)) {
        double x = numval(a), y = numval(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == V_STR && b.t == V_STR) {
        const struct jstr *x = a.u.s, *y = b.u.s;
        if (!case_sensitive) {
            x = str_lower_ascii(r, x, 0);
            y = str_lower_ascii(r, y, 0);
        }
        int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
        return c ? (c < 0 ? -1 : 1) : (x->n > y->n) - (x->n < y->n);
    }
    rerr(r, "cannot compare %s with %s", k_vt_name[a.t], k_vt_name[b.t]);
}

struct sort_ctx {
    struct R *r;
    int reverse, case_sensitive;
};

/* a stable merge sort (Array#sort is stable) calling compare() */
static void sort_vals(struct R *r, struct val *v, size_t n, struct val *tmp,
                      int (*cmp)(struct sort_ctx *, struct val, struct val), struct sort_ctx *c)
{
    if (n < 2) return;
    size_t h = n / 2;
    sort_vals(r, v, h, tmp, cmp, c);
    sort_vals(r, v + h, n - h, tmp, cmp, c);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp(c, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
    charge(r, n);
}

static int cmp_plain(struct sort_ctx *c, struct val a, struct val b)
{
    int x = compare(c->r, a, b, c->case_sensitive);
    return c->reverse ? -x : x;
}

/* a.b.c on dicts / namespaces / lists, for sort(attribute=) and map(attribute=) */
static struct val attr_path(struct R *r, struct val v, const struct jstr *path)
{
    size_t a = 0;
    while (a <= path->n) {
        size_t b = a;
        while (b < path->n && path->s[b] != '.')
            b++;
        if (v.t == V_DICT || v.t == V_NS) {
            struct val *f = dict_find(r, v.u.o, path->s + a, b - a);
            v = f ? *f : k_undef;
        } else if (v.t == V_LIST) {
            size_t idx = 0, i = a;
            if (i == b) return k_undef;
            for (; i < b && is_digit(path->s[i]); i++)
                idx = idx * 10 + (size_t)(path->s[i] - '0');
            if (i == a || idx >= v.u.l->n) return k_undef;
            v = v.u.l->v[idx];
        } else {
            return k_undef;
        }
        a = b + 1;
    }
    return v;
}

struct attr_sort {
    struct sort_ctx base;
    const struct jstr *attr;
};

static int cmp_attr(struct sort_ctx *c, struct val a, struct val b)
{
    const struct attr_sort *s = (const struct attr_sort *)c;
    int x =
        compare(c->r, attr_path(c->r, a, s->attr), attr_path(c->r, b, s->attr), c->case_sensitive);
    return c->reverse ? -x : x;
}

struct item_sort {
    struct sort_ctx base;
    int by_value;
};

static int cmp_item(struct sort_ctx *c, struct val a, struct val b)
{
    int i = ((const struct item_sort *)c)->by_value;
    int x = compare(c->r, a.u.l->v[i], b.u.l->v[i], c->case_sensitive);
    return c->reverse ? -x : x;
}

static struct val list_copy(struct R *r, const struct jlist *l)
{
    struct val v = mkl(r, l->n);
    if (l->n) memcpy(v.u.l->v, l->v, l->n * sizeof *l->v);
    return v;
}

static struct val dict_items(struct R *r, const struct jdict *d,
                             int what /* 0 items 1 keys 2 values */)
{
    struct val v = mkl(r, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (what == 1) {
            v.u.l->v[i] = mks(d->k[i]);
        } else if (what == 2) {
            v.u.l->v[i] = d->v[i];
        } else {
            struct val pair = mkl(r, 2);
            pair.u.l->v[0] = mks(d->k[i]);
            pair.u.l->v[1] = d->v[i];
            v.u.l->v[i] = pair;
        }
    }
    charge(r, d->n);
    return v;
}

static struct val need_bool(struct R *r, struct val v, int dflt, const char *what)
{
    if (v.t == V_UNDEF) return mkb(dflt);
    if (v.t != V_BOOL) rerr(r, "%s must be a boolean", what);
    return v;
}

/* ------------------------------------------- string methods */

static size_t utf16_len(const struct jstr *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->s[i];
        if ((c & 0xC0) != 0x80) n += c >= 0xF0 ? 2 : 1;
    }
    return n;
}

static struct jstr *substr(struct R *r, const struct jstr *s, size_t a, size_t b)
{
    return str_make(&r->ar, s->s + a, b - a, s->m ? s->m + a : NULL, 0);
}

static struct jstr *trim(struct R *r, const struct jstr *s, int left, int right)
{
    size_t a = 0, b = s->n, w;
    if (left)
        while ((w = space_at(s->s + a, b - a)) > 0)
            a += w;
    if (right)
        while (b > a && (w = space_before(s->s + a, b - a)) > 0)
            b -= w;
    return substr(r, s, a, b);
}

static int starts(const struct jstr *s, const struct jstr *p)
{
    return p->n <= s->n && !memcmp(s->s, p->s, p->n);
}
static int ends(const struct jstr *s, const struct jstr *p)
{
    return p->n <= s->n && !memcmp(s->s + s->n - p->n, p->s, p->n);
}

/* The first p in s at or after `from`, or NULL (memmem: linear time, whatever the bytes). */
static const char *find(const struct jstr *s, size_t from, const struct jstr *p)
{
    if (p->n == 0) return s->s + from;
    if (from > s->n) return NULL;
    return memmem(s->s + from, s->n - from, p->s, p->n);
}

static struct val affix_test(struct R *r, const struct jstr *s, struct args *a, int end,
                             const char *name)
{
    if (a->n == 0) rerr(r, "%s() needs an argument", name);
    struct val p = a->pos[0];
    if (p.t == V_STR) return mkb(end ? ends(s, p.u.s) : starts(s, p.u.s));
    if (p.t == V_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++) {
            struct val it = p.u.l->v[i];
            if (it.t != V_STR) rerr(r, "%s(): the tuple holds a %s", name, k_vt_name[it.t]);
            if (end ? ends(s, it.u.s) : starts(s, it.u.s)) return mkb(1);
        }
        return mkb(0);
    }
    rerr(r, "%s() takes a string or a tuple of strings", name);
}

static struct val str_split(struct R *r, const struct jstr *s, struct args *a)
{
    struct val sep = arg(r, a, 0, NULL), maxv = arg(r, a, 1, NULL);
    if (sep.t == V_UNDEF) sep = k_none;
    if (sep.t != V_STR && sep.t != V_NONE)
        rerr(r, "split(): the separator must be a string or none");
    if (maxv.t == V_UNDEF) maxv = mkn(V_INT, -1);
    if (maxv.t != V_INT) rerr(r, "split(): maxsplit must be an integer");
    double maxsplit = maxv.u.d;
    struct val parts[64];
    size_t np = 0, cap = 64;
    struct val *pv = parts;
#define ADD(js)                                                                                    \
    do {                                                                                           \
        if (np == cap) {                                                                           \
            struct val *nv_ = aalloc(&r->ar, 2 * cap * sizeof *nv_);                               \
            memcpy(nv_, pv, np * sizeof *nv_);                                                     \
            pv = nv_;                                                                              \
            cap *= 2;                                                                              \
        }                                                                                          \
        pv[np++] = mks(js);                                                                        \
    } while (0)
    if (sep.t == V_NONE) {
        struct jstr *t = trim(r, s, 1, 0);
        size_t i = 0, w;
        while (i < t->n) {
            size_t st = i;
            while (i < t->n && !space_at(t->s + i, t->n - i))
                i += 1;
            if (maxsplit != -1 && (double)np >= maxsplit) {
                ADD(substr(r, t, st, t->n));
                break;
            }
            ADD(substr(r, t, st, i));
            while (i < t->n && (w = space_at(t->s + i, t->n - i)) > 0)
                i += w;
        }
    } else {
        const struct jstr *p = sep.u.s;
        if (!p->n) rerr(r, "split(): empty separator");
        size_t i = 0;
        const char *hit;
        while ((hit = find(s, i, p)) != NULL) {
            size_t at = (size_t)(hit - s->s);
            if (maxsplit != -1 && (double)np >= maxsplit) break;
            ADD(substr(r, s, i, at));
            i = at + p->n;
        }
        ADD(substr(r, s, i, s->n));
    }
#undef ADD
    charge(r, np);
    struct val v = mkl(r, np);
    if (np) memcpy(v.u.l->v, pv, np * sizeof *pv);
    return v;
}

static struct val str_replace(struct R *r, const struct jstr *s, struct args *a)
{
    if (a->n < 2) rerr(r, "replace() needs two arguments");
    struct val o = a->pos[0], nw = a->pos[1], cnt = a->n > 2 ? a->pos[2] : kwarg(r, a, "count");
    if (o.t != V_STR || nw.t != V_STR) rerr(r, "replace(): the arguments must be strings");
    if (cnt.t == V_UNDEF) cnt = k_none;
    if (cnt.t != V_INT && cnt.t != V_NONE) rerr(r, "replace(): count must be an integer or none");
    double left = cnt.t == V_NONE || cnt.u.d < 0 ? INFINITY : cnt.u.d;
    if (left == 0) return mks((struct jstr *)s);
    struct buf b = {0};
    const struct jstr *old = o.u.s, *rep = nw.u.s;
    size_t i = 0;
    if (!old->n) {
        /* an empty pattern matches before every character and at the end */
        while (i <= s->n) {
            if (left > 0) {
                bstr(r, &b, rep);
                left--;
            }
            if (i == s->n) break;
            size_t len;
            utf8_next(s->s + i, s->n - i, &len);
            bput(r, &b, s->s + i, s->m ? s->m + i : NULL, 0, len);
            i += len;
        }
        return mks(bdone(r, &b));
    }
    const char *hit;
    while (left > 0 && (hit = find(s, i, old)) != NULL) {
        size_t at = (size_t)(hit - s->s);
        bput(r, &b, s->s + i, s->m ? s->m + i : NULL, 0, at - i);
        bstr(r, &b, rep);
        i = at + old->n;
        left--;
    }
    bput(r, &b, s->s + i, s->m ? s->m + i : NULL, 0, s->n - i);
    return mks(bdone(r, &b));
}

static struct jstr *str_title(struct R *r, const struct jstr *s, int only_first)
{
    struct jstr *o = str_make(&r->ar, s->s, s->n, s->m, 0);
    for (size_t i = 0; i < o->n; i++) {
        char c = o->s[i];
        int boundary = only_first ? i == 0 : (i == 0 || !is_word(o->s[i - 1]));
        if (boundary && c >= 'a' && c <= 'z') o->s[i] = (char)(c - 32);
        if (only_first) break;
    }
    return o;
}

/* ------------------------------------------- calls */

/* Call macro m: a scope under the caller's (macros see the caller's variables, as in
 * @huggingface/jinja), parameters bound from positional then keyword arguments, defaults
 * evaluated last; the body's output is the value. */
static struct val call_macro(struct R *r, struct scope *caller, const struct node *m,
                             struct args *a)
{
    if (++r->calls > NB_JINJA_MAX_DEPTH)
        die(&r->err, NB_ERR_RANGE, "chat template: macro calls nested deeper than %d",
            NB_JINJA_MAX_DEPTH);
    struct scope *s = new_scope(r, caller);
    struct jdict kw = a->kw;
    struct jdict left = {0};
    int pending[256], np = 0;
    if (m->nv > 256) rerr(r, "macro '%s' has too many parameters", m->str->s);
    for (int i = 0; i < m->nv; i++) {
        const struct node *p = m->v[i];
        struct val v = k_undef;
        int have = 0;
        if (i < a->n) {
            v = a->pos[i];
            have = 1;
        } else {
            struct val *k = dict_find(r, &kw, p->str->s, p->str->n);
            if (k) {
                v = *k;
                have = 1;
            }
        }
        if (!have && p->k == E_KWARG) pending[np++] = i;
        set_var(r, s, p->str, v);
    }
    for (size_t i = 0; i < kw.n; i++) {
        int named = 0;
        for (int j = 0; j < m->nv && !named; j++)
            named = j >= a->n && same_str(m->v[j]->str, kw.k[i]);
        if (!named) dict_set(r, &left, kw.k[i], kw.v[i]);
    }
    if (m->op & 1) {
        struct val d = mkd(r, V_DICT);
        *d.u.o = left;
        set_var(r, s, str_make(&r->ar, "kwargs", 6, NULL, 0), d);
    } else if (left.n) {
        rerr(r, "macro '%s' takes no keyword argument '%s'", m->str->s, left.k[0]->s);
    }
    if (m->op & 2) {
        size_t extra = a->n > m->nv ? (size_t)(a->n - m->nv) : 0;
        struct val l = mkl(r, extra);
        for (size_t i = 0; i < extra; i++)
            l.u.l->v[i] = a->pos[m->nv + (int)i];
        set_var(r, s, str_make(&r->ar, "varargs", 7, NULL, 0), l);
    } else if (a->n > m->nv) {
        rerr(r, "macro '%s' takes at most %d argument(s)", m->str->s, m->nv);
    }
    for (int i = 0; i < np; i++)
        set_var(r, s, m->v[pending[i]]->str, eval(r, s, m->v[pending[i]]->a));
    struct buf b = {0};
    exec_body(r, s, m->w, m->nw, &b);
    r->calls--;
    return mks(bdone(r, &b));
}

static void strftime_js(struct R *r, struct buf *b, const struct jstr *fmt)
{
    static const char *const mon[] = {"January",   "February", "March",    "April",
                                      "May",       "June",     "July",     "August",
                                      "September", "October",  "November", "December"};
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char t[32];
    for (size_t i = 0; i < fmt->n; i++) {
        char c = fmt->s[i];
        if (c != '%' || i + 1 >= fmt->n || !strchr("YmdbBHM%", fmt->s[i + 1])) {
            bput(r, b, fmt->s + i, fmt->m ? fmt->m + i : NULL, 0, 1);
            continue;
        }
        switch (fmt->s[++i]) {
        case 'Y': snprintf(t, sizeof t, "%d", tm.tm_year + 1900); break;
        case 'm': snprintf(t, sizeof t, "%02d", tm.tm_mon + 1); break;
        case 'd': snprintf(t, sizeof t, "%02d", tm.tm_mday); break;
        case 'b': snprintf(t, sizeof t, "%.3s", mon[tm.tm_mon]); break;
        case 'B': snprintf(t, sizeof t, "%s", mon[tm.tm_mon]); break;
        case 'H': snprintf(t, sizeof t, "%02d", tm.tm_hour); break;
        case 'M': snprintf(t, sizeof t, "%02d", tm.tm_min); break;
        default: snprintf(t, sizeof t, "%%"); break;
        }
        bcstr(r, b, t, 0);
    }
}

static struct val call(struct R *r, struct scope *s, struct val fn, struct args *a)
{
    if (fn.t != V_FUNC) rerr(r, "a value of type %s is not callable", k_vt_name[fn.t]);
    struct jfunc *f = fn.u.f;
    if (f->kind == F_MACRO) return call_macro(r, s, f->macro, a);
    struct val self = f->self;
    switch (f->id) {
    case G_NAMESPACE: {
        struct val ns = mkd(r, V_NS);
        if (a->n > 1) rerr(r, "namespace() takes at most 1 positional argument");
        if (a->n == 1) {
            struct val src = a->pos[0];
            if (src.t == V_DICT) {
                for (size_t i = 0; i < src.u.o->n; i++)
                    dict_set(r, ns.u.o, src.u.o->k[i], src.u.o->v[i]);
            } else if (src.t == V_LIST) {
                for (size_t i = 0; i < src.u.l->n; i++) {
                    struct val pr = src.u.l->v[i];
                    if (pr.t != V_LIST || pr.u.l->n != 2 || pr.u.l->v[0].t != V_STR)
                        rerr(r, "namespace() takes a dict or [key, value] pairs");
                    dict_set(r, ns.u.o, pr.u.l->v[0].u.s, pr.u.l->v[1]);
                }
            } else {
                rerr(r, "namespace(): a %s is not iterable", k_vt_name[src.t]);
            }
        }
        for (size_t i = 0; i < a->kw.n; i++)
            dict_set(r, ns.u.o, a->kw.k[i], a->kw.v[i]);
        return ns;
    }
    case G_RANGE: {
        double v[3] = {0, 0, 1};
        if (a->n < 1 || a->n > 3 || a->kw.n) rerr(r, "range() takes 1 to 3 numbers");
        for (int i = 0; i < a->n; i++) {
            if (!is_num(a->pos[i])) rerr(r, "range() takes numbers");
            v[i] = a->pos[i].u.d;
        }
        double start = a->n == 1 ? 0 : v[0], stop = a->n == 1 ? v[0] : v[1], step = v[2];
        if (step == 0) rerr(r, "range() step must not be zero");
        double cnt = step > 0 ? ceil((stop - start) / step) : ceil((start - stop) / -step);
        if (!(cnt > 0)) cnt = 0;
        if (cnt > (double)(MEM_LIMIT / sizeof(struct val)))
            die(&r->err, NB_ERR_RANGE, "chat template: range() of %.0f items is too long", cnt);
        charge(r, (size_t)cnt);
        struct val l = mkl(r, (size_t)cnt);
        for (size_t i = 0; i < (size_t)cnt; i++) {
            double x = start + (double)i * step;
            l.u.l->v[i] = mkn(x == floor(x) ? V_INT : V_FLOAT, x);
        }
        return l;
    }
    case G_RAISE: {
        struct jstr *msg = a->n ? to_text(r, a->pos[0]) : str_make(&r->ar, "", 0, NULL, 0);
        if (!msg->n || !msg->s[0]) /* the error must still say something (fuzz_jinja) */
            die(&r->err, NB_ERR_INVALID_ARG, "chat template: line %d: raise_exception() with an empty message",
                r->line);
        die(&r->err, NB_ERR_INVALID_ARG, "%.*s", (int)(msg->n < 480 ? msg->n : 480), msg->s);
    }
    case G_STRFTIME: {
        struct val fmt = arg(r, a, 0, NULL);
        if (fmt.t != V_STR) rerr(r, "strftime_now() takes a format string");
        struct buf b = {0};
        strftime_js(r, &b, fmt.u.s);
        return mks(bdone(r, &b));
    }
    case M_UPPER:
    case M_LOWER: return mks(str_lower_ascii(r, self.u.s, f->id == M_UPPER));
    case M_STRIP: return mks(trim(r, self.u.s, 1, 1));
    case M_LSTRIP: return mks(trim(r, self.u.s, 1, 0));
    case M_RSTRIP: return mks(trim(r, self.u.s, 0, 1));
    case M_TITLE: return mks(str_title(r, self.u.s, 0));
    case M_CAPITALIZE: return mks(str_title(r, self.u.s, 1));
    case M_STARTSWITH: return affix_test(r, self.u.s, a, 0, "startswith");
    case M_ENDSWITH: return affix_test(r, self.u.s, a, 1, "endswith");
    case M_SPLIT: return str_split(r, self.u.s, a);
    case M_REPLACE: return str_replace(r, self.u.s, a);
    case M_GET: {
        struct val k = arg(r, a, 0, NULL);
        if (k.t != V_STR) rerr(r, "get(): the key must be a string, not %s", k_vt_name[k.t]);
        struct val *v = dict_find(r, self.u.o, k.u.s->s, k.u.s->n);
        if (v) return *v;
        return a->n > 1 ? a->pos[1] : k_none;
    }
    case M_ITEMS: return dict_items(r, self.u.o, 0);
    case M_KEYS: return dict_items(r, self.u.o, 1);
    case M_VALUES: return dict_items(r, self.u.o, 2);
    case M_DICTSORT: {
        struct val cs = need_bool(r, arg(r, a, 0, "case_sensitive"), 0, "case_sensitive");
        struct val by = arg(r, a, 1, "by"),
                   rev = need_bool(r, arg(r, a, 2, "reverse"), 0, "reverse");
        if (by.t == V_UNDEF) by = mklit(r, "key");
        if (by.t != V_STR || (strcmp(by.u.s->s, "key") && strcmp(by.u.s->s, "value")))
            rerr(r, "dictsort(): by must be 'key' or 'value'");
        struct val items = dict_items(r, self.u.o, 0);
        struct item_sort c = {{r, rev.u.b, cs.u.b}, by.u.s->s[0] == 'v'};
        struct val *tmp = aalloc(&r->ar, (items.u.l->n + 1) * sizeof *tmp);
        sort_vals(r, items.u.l->v, items.u.l->n, tmp, cmp_item, &c.base);
        return items;
    }
    }
    rerr(r, "unknown function");
}

/* ------------------------------------------- members, slices */

static const struct {
    const char *name;
    enum fid id;
} k_str_methods[] = {{"upper", M_UPPER},   {"lower", M_LOWER},           {"strip", M_STRIP},
                     {"title", M_TITLE},   {"capitalize", M_CAPITALIZE}, {"rstrip", M_RSTRIP},
                     {"lstrip", M_LSTRIP}, {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH},
                     {"split", M_SPLIT},   {"replace", M_REPLACE}},
  k_dict_methods[] = {{"get", M_GET},
                      {"items", M_ITEMS},
                      {"keys", M_KEYS},
                      {"values", M_VALUES},
                      {"dictsort", M_DICTSORT}};

/* Code point i (negative: from the end) of s, or NULL. */
static struct jstr *char_at(struct R *r, const struct jstr *s, double idx)
{
    charge(r, s->n / 64);
    size_t n = 0, len;
    for (size_t i = 0; i < s->n; i += len, n++)
        utf8_next(s->s + i, s->n - i, &len);
    if (idx < 0) idx += (double)n;
    if (idx < 0 || idx >= (double)n) return NULL;
    size_t want = (size_t)idx, i = 0;
    for (size_t k = 0; k < want; k++) {
        utf8_next(s->s + i, s->n - i, &len);
        i += len;
    }
    utf8_next(s->s + i, s->n - i, &len);
    return substr(r, s, i, i + len);
}

/* obj.prop / obj[prop]: a dict's or namespace's member (else a dict method), a list's or
 * string's item (negative: from the end), a string method, .length; else undefined. */
static struct val member(struct R *r, struct val obj, struct val prop)
{
    if (obj.t == V_DICT || obj.t == V_NS) {
        if (prop.t != V_STR)
            rerr(r, "a %s key must be a string, not a value of type %s", k_vt_name[obj.t],
                 k_vt_name[prop.t]);
        struct val *v = dict_find(r, obj.u.o, prop.u.s->s, prop.u.s->n);
        if (v) return *v;
        if (obj.t == V_DICT)
            for (size_t i = 0; i < sizeof k_dict_methods / sizeof k_dict_methods[0]; i++)
                if (!strcmp(prop.u.s->s, k_dict_methods[i].name))
                    return mkf(r, F_METHOD, k_dict_methods[i].id, obj);
        return k_undef;
    }
    if (obj.t == V_LIST || obj.t == V_STR) {
        if (prop.t == V_INT) {
            if (obj.t == V_STR) {
                struct jstr *c = char_at(r, obj.u.s, prop.u.d);
                return c ? mks(c) : k_undef;
            }
            double i = prop.u.d < 0 ? prop.u.d + (double)obj.u.l->n : prop.u.d;
            if (i < 0 || i >= (double)obj.u.l->n) return k_undef;
            return obj.u.l->v[(size_t)i];
        }
        if (prop.t != V_STR)
            rerr(r, "cannot index a %s with a %s", k_vt_name[obj.t], k_vt_name[prop.t]);
        if (!strcmp(prop.u.s->s, "length")) {
            if (obj.t == V_STR) charge(r, obj.u.s->n / 64);
            return mkn(V_INT, (double)(obj.t == V_STR ? utf16_len(obj.u.s) : obj.u.l->n));
        }
        if (obj.t == V_STR)
            for (size_t i = 0; i < sizeof k_str_methods / sizeof k_str_methods[0]; i++)
                if (!strcmp(prop.u.s->s, k_str_methods[i].name))
                    return mkf(r, F_METHOD, k_str_methods[i].id, obj);
        return k_undef;
    }
    if (prop.t != V_STR)
        rerr(r, "cannot index a %s with a %s", k_vt_name[obj.t], k_vt_name[prop.t]);
    return k_undef;
}

/* obj[a:b:c] of a list or a string (by code points), as Python's slices. */
static struct val slice(struct R *r, struct scope *s, struct val obj, const struct node *sl)
{
    if (obj.t != V_LIST && obj.t != V_STR)
        rerr(r, "only a list or a string can be sliced, not a %s", k_vt_name[obj.t]);
    struct val part[3];
    const struct node *pn[3] = {sl->a, sl->b, sl->c};
    for (int i = 0; i < 3; i++) {
        part[i] = pn[i] ? eval(r, s, pn[i]) : k_undef;
        if (part[i].t != V_INT && part[i].t != V_UNDEF) rerr(r, "a slice bound must be an integer");
    }
    /* the string's characters (code points) as offsets */
    size_t len = obj.t == V_LIST ? obj.u.l->n : 0, *off = NULL;
    if (obj.t == V_STR) {
        const struct jstr *str = obj.u.s;
        off = aalloc(&r->ar, (str->n + 1) * sizeof *off);
        size_t cl;
        for (size_t i = 0; i < str->n; i += cl) {
            off[len++] = i;
            utf8_next(str->s + i, str->n - i, &cl);
        }
        off[len] = str->n;
    }
    double n = (double)len, step = part[2].t == V_INT ? part[2].u.d : 1;
    double start, stop;
    int dir = step > 0 ? 1 : step < 0 ? -1 : 0;
    if (dir >= 0) {
        start = part[0].t == V_UNDEF ? 0 : part[0].u.d;
        stop = part[1].t == V_UNDEF ? n : part[1].u.d;
        start = start < 0 ? fmax(n + start, 0) : fmin(start, n);
        stop = stop < 0 ? fmax(n + stop, 0) : fmin(stop, n);
    } else {
        start = part[0].t == V_UNDEF ? n - 1 : part[0].u.d;
        stop = part[1].t == V_UNDEF ? -1 : part[1].u.d;
        start = start < 0 ? fmax(n + start, -1) : fmin(start, n - 1);
        stop = stop < -1 ? fmax(n + stop, -1) : fmin(stop, n - 1);
    }
    size_t cnt = 0;
    if (dir != 0)
        for (double i = start; dir * i < dir * stop; i += step)
            cnt++;
    charge(r, cnt);
    if (obj.t == V_LIST) {
        struct val l = mkl(r, cnt);
        size_t k = 0;
        for (double i = start; dir != 0 && dir * i < dir * stop; i += step)
            l.u.l->v[k++] = obj.u.l->v[(size_t)i];
        return l;
    }
    struct buf b = {0};
    const struct jstr *str = obj.u.s;
    for (double i = start; dir != 0 && dir * i < dir * stop; i += step) {
        size_t a = off[(size_t)i], e = off[(size_t)i + 1];
        bput(r, &b, str->s + a, str->m ? str->m + a : NULL, 0, e - a);
    }
    return mks(bdone(r, &b));
}

/* ------------------------------------------- filters and tests */

static struct val json_filter(struct R *r, struct val v, struct args *a)
{
    struct json_opts o = {0};
    o.undef_null = 1;
    if (a) {
        struct val ind = kwarg(r, a, "indent"), asc = kwarg(r, a, "ensure_ascii"),
                   srt = kwarg(r, a, "sort_keys"), sep = kwarg(r, a, "separators");
        if (ind.t != V_UNDEF && ind.t != V_NONE && ind.t != V_INT)
            rerr(r, "tojson: indent must be a number");
        if (ind.t == V_INT) {
            if (ind.u.d > 64) rerr(r, "tojson: indent above 64");
            o.indent = ind.u.d > 0 ? (int)ind.u.d : 0;
        }
        o.ascii = need_bool(r, asc, 0, "tojson: ensure_ascii").u.b;
        o.sort = need_bool(r, srt, 0, "tojson: sort_keys").u.b;
        if (sep.t == V_LIST) {
            if (sep.u.l->n != 2 || sep.u.l->v[0].t != V_STR || sep.u.l->v[1].t != V_STR)
                rerr(r, "tojson: separators must be two strings");
            o.item_sep = sep.u.l->v[0].u.s;
            o.key_sep = sep.u.l->v[1].u.s;
        } else if (sep.t != V_UNDEF && sep.t != V_NONE) {
            rerr(r, "tojson: separators must be two strings");
        }
    }
    struct buf b = {0};
    tojson(r, &b, v, &o, 0);
    return mks(bdone(r, &b));
}

static struct val join_vals(struct R *r, const struct jlist *l, const struct jstr *sep)
{
    struct buf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i && sep) bstr(r, &b, sep);
        struct val it = l->v[i];
        if (it.t == V_UNDEF || it.t == V_NONE) continue; /* Array#join: null/undefined -> "" */
        js_text(r, &b, it, 0);
    }
    return mks(bdone(r, &b));
}

static struct val indent_str(struct R *r, const struct jstr *s, int width, int first, int blank)
{
    struct buf b = {0};
    size_t i = 0, line = 0;
    if (width < 0) width = 0;
    if (width > 4096) rerr(r, "indent: width above 4096");
    for (;;) {
        size_t e = i;
        while (e < s->n && s->s[e] != '\n')
            e++;
        if (!((!first && line == 0) || (!blank && e == i)))
            for (int k = 0; k < width; k++)
                bput(r, &b, " ", NULL, 0, 1);
        bput(r, &b, s->s + i, s->m ? s->m + i : NULL, 0, e - i);
        if (e >= s->n) break;
        bput(r, &b, "\n", s->m ? s->m + e : NULL, 0, 1);
        i = e + 1;
        line++;
    }
    return mks(bdone(r, &b));
}

static int run_test(struct R *r, const char *name, struct val v, struct val arg2, int has_arg)
{
    if (!strcmp(name, "boolean")) return v.t == V_BOOL;
    if (!strcmp(name, "callable")) return v.t == V_FUNC;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != V_INT) rerr(r, "cannot test '%s' on a %s", name, k_vt_name[v.t]);
        int odd = fmod(v.u.d, 2) != 0;
        return name[0] == 'o' ? odd : !odd;
    }
    if (!strcmp(name, "false")) return v.t == V_BOOL && !v.u.b;
    if (!strcmp(name, "true")) return v.t == V_BOOL && v.u.b;
    if (!strcmp(name, "none")) return v.t == V_NONE;
    if (!strcmp(name, "string")) return v.t == V_STR;
    if (!strcmp(name, "number")) return is_num(v);
    if (!strcmp(name, "integer")) return v.t == V_INT;
    if (!strcmp(name, "iterable")) return (v.t == V_LIST && !v.u.l->tuple) || v.t == V_STR;
    if (!strcmp(name, "mapping")) return v.t == V_DICT;
    if (!strcmp(name, "sequence")) return v.t == V_LIST || v.t == V_DICT || v.t == V_STR;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != V_STR) return 0;
        struct jstr *c = str_lower_ascii(r, v.u.s, name[0] == 'u');
        return same_str(c, v.u.s);
    }
    if (!strcmp(name, "defined")) return v.t != V_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == V_UNDEF;
    if (!strcmp(name, "equalto") || !strcmp(name, "eq")) return has_arg && strict_eq(v, arg2);
    rerr(r, "unknown test '%s'", name);
}

/* Apply filter f (a name, or a name with arguments) to v, as @huggingface/jinja's
 * applyFilter dispatches on the value's type. */
static struct val filter(struct R *r, struct scope *s, struct val v, const struct node *f)
{
    const char *name = f->str->s;
    struct args a = {0};
    if (!f->op) {
        if (!strcmp(name, "safe")) return v;
        if (!strcmp(name, "tojson")) return json_filter(r, v, NULL);
        char num[40];
        switch (v.t) {
        case V_LIST: {
            const struct jlist *l = v.u.l;
            if (!strcmp(name, "list")) return v;
            if (!strcmp(name, "first")) return l->n ? l->v[0] : k_undef;
            if (!strcmp(name, "last")) return l->n ? l->v[l->n - 1] : k_undef;
            if (!strcmp(name, "length")) return mkn(V_INT, (double)l->n);
            if (!strcmp(name, "reverse")) {
                struct val o = mkl(r, l->n);
                for (size_t i = 0; i < l->n; i++)
                    o.u.l->v[i] = l->v[l->n - 1 - i];
                charge(r, l->n);
                return o;
            }
            if (!strcmp(name, "sort")) {
                struct val o = list_copy(r, l);
                struct sort_ctx c = {r, 0, 0};
                struct val *tmp = aalloc(&r->ar, (l->n + 1) * sizeof *tmp);
                sort_vals(r, o.u.l->v, l->n, tmp, cmp_plain, &c);
                return o;
            }
            if (!strcmp(name, "join")) return join_vals(r, l, NULL);
            if (!strcmp(name, "string")) {
                struct json_opts o = {0};
                struct buf b = {0};
                tojson(r, &b, v, &o, 0);
                return mks(bdone(r, &b));
            }
            if (!strcmp(name, "unique")) {
                struct val o = mkl(r, l->n);
                size_t k = 0;
                for (size_t i = 0; i < l->n; i++) {
                    int seen = 0;
                    for (size_t j = 0; j < k && !seen; j++)
                        seen = strict_eq(o.u.l->v[j], l->v[i]) ||
                               (is_num(l->v[i]) && is_num(o.u.l->v[j]) && isnan(l->v[i].u.d) &&
                                isnan(o.u.l->v[j].u.d));
                    charge(r, k);
                    if (!seen) o.u.l->v[k++] = l->v[i];
                }
                o.u.l->n = k;
                return o;
            }
            break;
        }
        case V_STR: {
            const struct jstr *str = v.u.s;
            if (!strcmp(name, "length")) {
                charge(r, str->n / 64);
                return mkn(V_INT, (double)utf16_len(str));
            }
            if (!strcmp(name, "upper") || !strcmp(name, "lower"))
                return mks(str_lower_ascii(r, str, name[0] == 'u'));
            if (!strcmp(name, "title")) return mks(str_title(r, str, 0));
            if (!strcmp(name, "capitalize")) return mks(str_title(r, str, 1));
            if (!strcmp(name, "trim")) return mks(trim(r, str, 1, 1));
            if (!strcmp(name, "indent")) return indent_str(r, str, 4, 0, 0);
            if (!strcmp(name, "join") || !strcmp(name, "string")) return v;
            if (!strcmp(name, "int")) {
                char *end;
                const char *p = str->s;
                while (*p == ' ' || (*p >= 9 && *p <= 13))
                    p++;
                long long x = strtoll(p, &end, 10);
                return mkn(V_INT, end == p ? 0 : (double)x);
            }
            if (!strcmp(name, "float")) {
                double d = str_number(str);
                return mkn(V_FLOAT, isnan(d) ? 0 : d);
            }
            break;
        }
        case V_INT:
        case V_FLOAT:
            if (!strcmp(name, "abs")) return mkn(v.t, fabs(v.u.d));
            if (!strcmp(name, "int")) return mkn(V_INT, floor(v.u.d));
            if (!strcmp(name, "float")) return mkn(V_FLOAT, v.u.d);
            if (!strcmp(name, "string")) {
                num_text(v, num, sizeof num);
                return mks(str_make(&r->ar, num, strlen(num), NULL, v.m));
            }
            break;
        case V_DICT:
            if (!strcmp(name, "items")) return dict_items(r, v.u.o, 0);
            if (!strcmp(name, "length")) return mkn(V_INT, (double)v.u.o->n);
            for (size_t i = 0; i < sizeof k_dict_methods / sizeof k_dict_methods[0]; i++)
                if (!strcmp(name, k_dict_methods[i].name))
                    return call(r, s, mkf(r, F_METHOD, k_dict_methods[i].id, v), &a);
            break;
        case V_BOOL:
            if (!strcmp(name, "bool")) return mkb(v.u.b);
            if (!strcmp(name, "int")) return mkn(V_INT, v.u.b);
            if (!strcmp(name, "float")) return mkn(V_FLOAT, v.u.b);
            if (!strcmp(name, "string")) return mklit(r, v.u.b ? "true" : "false");
            break;
        default: break;
        }
        rerr(r, "no filter '%s' for a %s", name, k_vt_name[v.t]);
    }
    eval_args(r, s, f->v, f->nv, &a);
    if (!strcmp(name, "tojson")) return json_filter(r, v, &a);
    if (!strcmp(name, "join")) {
        struct val sep = arg(r, &a, 0, "separator");
        if (sep.t == V_UNDEF) sep = mklit(r, "");
        if (sep.t != V_STR) rerr(r, "join: the separator must be a string");
        if (v.t == V_STR) {
            struct buf b = {0};
            size_t len;
            for (size_t i = 0; i < v.u.s->n; i += len) {
                if (i) bstr(r, &b, sep.u.s);
                utf8_next(v.u.s->s + i, v.u.s->n - i, &len);
                bput(r, &b, v.u.s->s + i, v.u.s->m ? v.u.s->m + i : NULL, 0, len);
            }
            return mks(bdone(r, &b));
        }
        if (v.t == V_LIST) return join_vals(r, v.u.l, sep.u.s);
        rerr(r, "no filter 'join' for a %s", k_vt_name[v.t]);
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        int is_int = name[0] == 'i';
        struct val dflt = arg(r, &a, 0, "default");
        if (dflt.t == V_UNDEF) dflt = mkn(is_int ? V_INT : V_FLOAT, 0);
        if (v.t == V_STR) {
            if (is_int) {
                char *end;
                const char *p = v.u.s->s;
                while (*p == ' ' || (*p >= 9 && *p <= 13))
                    p++;
                long long x = strtoll(p, &end, 10);
                return end == p ? dflt : mkn(V_INT, (double)x);
            }
            double d = str_number(v.u.s);
            return isnan(d) ? dflt : mkn(V_FLOAT, d);
        }
        if (is_num(v)) return v;
        if (v.t == V_BOOL) return mkn(is_int ? V_INT : V_FLOAT, v.u.b);
        rerr(r, "no filter '%s' for a %s", name, k_vt_name[v.t]);
    }
    if (!strcmp(name, "default")) {
        struct val dflt = a.n > 0 ? a.pos[0] : mklit(r, "");
        struct val boolean = need_bool(r, arg(r, &a, 1, "boolean"), 0, "default: boolean");
        if (v.t == V_UNDEF || (boolean.u.b && !truthy(v))) return dflt;
        return v;
    }
    if (v.t == V_LIST) {
        const struct jlist *l = v.u.l;
        if (!strcmp(name, "sort")) {
            struct val rev = need_bool(r, arg(r, &a, 0, "reverse"), 0, "sort: reverse");
            struct val cs =
                need_bool(r, arg(r, &a, 1, "case_sensitive"), 0, "sort: case_sensitive");
            struct val at = arg(r, &a, 2, "attribute");
            struct val o = list_copy(r, l);
            struct val *tmp = aalloc(&r->ar, (l->n + 1) * sizeof *tmp);
            if (at.t == V_UNDEF || at.t == V_NONE) {
                struct sort_ctx c = {r, rev.u.b, cs.u.b};
                sort_vals(r, o.u.l->v, l->n, tmp, cmp_plain, &c);
            } else {
                char num[40];
                if (at.t == V_INT) {
                    js_num(at.u.d, num, sizeof num);
                    at = mklit(r, num);
                }
                if (at.t != V_STR) rerr(r, "sort: attribute must be a string or an integer");
                struct attr_sort c = {{r, rev.u.b, cs.u.b}, at.u.s};
                sort_vals(r, o.u.l->v, l->n, tmp, cmp_attr, &c.base);
            }
            return o;
        }
        if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
            int sel = name[0] == 's';
            for (size_t i = 0; i < l->n; i++)
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS)
                    rerr(r, "%s: the list holds a %s", name, k_vt_name[l->v[i].t]);
            for (int i = 0; i < f->nv; i++)
                if (f->v[i]->k != E_STR) rerr(r, "%s: the arguments must be string literals", name);
            if (a.n < 1) rerr(r, "%s: name an attribute", name);
            struct val o = mkl(r, l->n);
            size_t k = 0;
            for (size_t i = 0; i < l->n; i++) {
                struct val *at = dict_find(r, l->v[i].u.o, a.pos[0].u.s->s, a.pos[0].u.s->n);
                int res = 0;
                if (at)
                    res = a.n > 1 ? run_test(r, a.pos[1].u.s->s, *at, arg(r, &a, 2, NULL), a.n > 2)
                                  : truthy(*at);
                if (res == sel) o.u.l->v[k++] = l->v[i];
            }
            o.u.l->n = k;
            return o;
        }
        if (!strcmp(name, "map")) {
            struct val at = kwarg(r, &a, "attribute");
            if (at.t == V_UNDEF)
                die(&r->err, NB_ERR_UNSUPPORTED,
                    "chat template: line %d: map() without attribute= is not supported", r->line);
            if (at.t != V_STR) rerr(r, "map: attribute must be a string");
            struct val dflt = kwarg(r, &a, "default");
            struct val o = mkl(r, l->n);
            for (size_t i = 0; i < l->n; i++) {
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS)
                    rerr(r, "map: the list holds a %s", k_vt_name[l->v[i].t]);
                struct val x = attr_path(r, l->v[i], at.u.s);
                o.u.l->v[i] = x.t == V_UNDEF ? dflt : x;
            }
            return o;
        }
    } else if (v.t == V_STR) {
        if (!strcmp(name, "indent")) {
            struct val w = arg(r, &a, 0, "width");
            if (w.t == V_UNDEF) w = mkn(V_INT, 4);
            if (w.t != V_INT) rerr(r, "indent: width must be a number");
            struct val first = arg(r, &a, 1, "first"), blank = arg(r, &a, 2, "blank");
            return indent_str(r, v.u.s, (int)fmax(fmin(w.u.d, 1e6), -1), truthy(first),
                              truthy(blank));
        }
        if (!strcmp(name, "replace")) return str_replace(r, v.u.s, &a);
    } else if (v.t == V_DICT) {
        for (size_t i = 0; i < sizeof k_dict_methods / sizeof k_dict_methods[0]; i++)
            if (!strcmp(name, k_dict_methods[i].name))
                return call(r, s, mkf(r, F_METHOD, k_dict_methods[i].id, v), &a);
    }
    rerr(r, "no filter '%s' for a %s", name, k_vt_name[v.t]);
}

/* ------------------------------------------- operators */

/* A binary operator with @huggingface/jinja's rules (and / or short-circuit and return
 * an operand; == / != compare as JavaScript's ==; + joins strings, lists or numbers). */
static struct val binop(struct R *r, struct scope *s, const struct node *n)
{
    struct val a = eval(r, s, n->a);
    int op = n->op;
    if (op == OP_AND) return truthy(a) ? eval(r, s, n->b) : a;
    if (op == OP_OR) return truthy(a) ? a : eval(r, s, n->b);
    struct val b = eval(r, s, n->b);
    r->line = n->line;
    if (a.t == V_STR && b.t == V_STR) charge(r, a.u.s->n / 64);
    if (op == OP_EQ) return mkb(loose_eq(a, b));
    if (op == OP_NE) return mkb(!loose_eq(a, b));
    if (a.t == V_UNDEF || b.t == V_UNDEF) {
        if (b.t == V_UNDEF && (op == OP_IN || op == OP_NOTIN)) return mkb(op == OP_NOTIN);
        rerr(r, "'%s' on an undefined value", k_op_name[op]);
    }
    if (a.t == V_NONE || b.t == V_NONE) rerr(r, "'%s' on none", k_op_name[op]);
    if (op == OP_CAT) {
        struct buf bb = {0};
        js_text(r, &bb, a, 0);
        js_text(r, &bb, b, 0);
        return mks(bdone(r, &bb));
    }
    if (op == OP_POW && is_numlike(a) && is_numlike(b)) {
        double x = numval(a), y = numval(b);
        if (x == 0 && y < 0) rerr(r, "0.0 cannot be raised to a negative power");
        double z = pow(x, y);
        if (!isfinite(z)) rerr(r, "'**' result is not finite");
        return mkn(a.t == V_FLOAT || b.t == V_FLOAT || y < 0 ? V_FLOAT : V_INT, z);
    }
    if (is_num(a) && is_num(b)) {
        double x = a.u.d, y = b.u.d;
        int fl = a.t == V_FLOAT || b.t == V_FLOAT;
        switch (op) {
        case OP_ADD: return mkn(fl ? V_FLOAT : V_INT, x + y);
        case OP_SUB: return mkn(fl ? V_FLOAT : V_INT, x - y);
        case OP_MUL: return mkn(fl ? V_FLOAT : V_INT, x * y);
        case OP_DIV: return mkn(V_FLOAT, x / y);
        case OP_FDIV: return mkn(fl ? V_FLOAT : V_INT, floor(x / y));
        case OP_MOD: return mkn(fl ? V_FLOAT : V_INT, fmod(x, y));
        case OP_LT: return mkb(x < y);
        case OP_GT: return mkb(x > y);
        case OP_LE: return mkb(x <= y);
        case OP_GE: return mkb(x >= y);
        default: break;
        }
    } else if (a.t == V_LIST && b.t == V_LIST) {
        if (op == OP_ADD) {
            struct val o = mkl(r, a.u.l->n + b.u.l->n);
            if (a.u.l->n) memcpy(o.u.l->v, a.u.l->v, a.u.l->n * sizeof(struct val));
            if (b.u.l->n) memcpy(o.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(struct val));
            charge(r, o.u.l->n);
            return o;
        }
    } else if (b.t == V_LIST) {
        if (op == OP_IN || op == OP_NOTIN) {
            int hit = 0;
            for (size_t i = 0; i < b.u.l->n && !hit; i++)
                hit = strict_eq(b.u.l->v[i], a);
            if (a.t == V_STR) charge(r, b.u.l->n * (a.u.s->n / 64));
            charge(r, b.u.l->n);
            return mkb(op == OP_IN ? hit : !hit);
        }
    }
    if ((a.t == V_STR || b.t == V_STR) && op == OP_ADD) {
        struct buf bb = {0};
        js_text(r, &bb, a, 0);
        js_text(r, &bb, b, 0);
        return mks(bdone(r, &bb));
    }
    if (a.t == V_STR && b.t == V_STR && (op == OP_IN || op == OP_NOTIN)) {
        int hit = find(b.u.s, 0, a.u.s) != NULL;
        charge(r, b.u.s->n / 64);
        return mkb(op == OP_IN ? hit : !hit);
    }
    if (a.t == V_STR && b.t == V_DICT && (op == OP_IN || op == OP_NOTIN)) {
        int hit = dict_find(r, b.u.o, a.u.s->s, a.u.s->n) != NULL;
        return mkb(op == OP_IN ? hit : !hit);
    }
    rerr(r, "no operator '%s' between a %s and a %s", k_op_name[op], k_vt_name[a.t],
         k_vt_name[b.t]);
}

/* The value of an expression node. */
static struct val eval(struct R *r, struct scope *s, const struct node *n)
{
    charge(r, 1);
    if (++r->depth > EVAL_DEPTH)
        die(&r->err, NB_ERR_RANGE, "chat template: evaluation nested deeper than %d", EVAL_DEPTH);
    r->line = n->line;
    struct val v = k_undef;
    switch (n->k) {
    case E_STR: v = mks(n->str); break;
    case E_INT: v = mkn(V_INT, n->num); break;
    case E_FLOAT: v = mkn(V_FLOAT, n->num); break;
    case E_LIST:
    case E_TUPLE:
        v = mkl(r, (size_t)n->nv);
        for (int i = 0; i < n->nv; i++)
            v.u.l->v[i] = eval(r, s, n->v[i]);
        v.u.l->tuple = n->k == E_TUPLE;
        break;
    case E_DICT:
        v = mkd(r, V_DICT);
        for (int i = 0; i < n->nv; i++) {
            struct val k = eval(r, s, n->v[i]);
            r->line = n->line;
            if (k.t != V_STR) rerr(r, "a dict key must be a string, not a %s", k_vt_name[k.t]);
            dict_set(r, v.u.o, k.u.s, eval(r, s, n->w[i]));
        }
        break;
    case E_IDENT: v = lookup(r, s, n->str); break;
    case E_CALL: {
        struct args a;
        eval_args(r, s, n->v, n->nv, &a);
        struct val fn = eval(r, s, n->a);
        r->line = n->line;
        v = call(r, s, fn, &a);
        break;
    }
    case E_MEMBER: {
        struct val obj = eval(r, s, n->a);
        if (n->op && n->b->k == E_SLICE) {
            v = slice(r, s, obj, n->b);
            break;
        }
        struct val prop;
        if (n->op)
            prop = eval(r, s, n->b);
        else if (n->b->k == E_INT)
            prop = mkn(V_INT, n->b->num);
        else
            prop = mks(n->b->str);
        r->line = n->line;
        v = member(r, obj, prop);
        break;
    }
    case E_UNARY: {
        struct val a = eval(r, s, n->a);
        r->line = n->line;
        if (n->op == OP_NOT) {
            v = mkb(!truthy(a));
        } else {
            if (!is_numlike(a)) rerr(r, "unary '%s' on a %s", k_op_name[n->op], k_vt_name[a.t]);
            double d = (n->op == OP_NEG ? -1 : 1) * numval(a);
            v = mkn(a.t == V_FLOAT ? V_FLOAT : V_INT, d);
        }
        break;
    }
    case E_BIN: v = binop(r, s, n); break;
    case E_FILTER: {
        struct val a = eval(r, s, n->a);
        r->line = n->line;
        v = filter(r, s, a, n);
        break;
    }
    case E_TEST: {
        struct val a = eval(r, s, n->a);
        r->line = n->line;
        int t = run_test(r, n->str->s, a, k_undef, 0);
        v = mkb(n->op ? !t : t);
        break;
    }
    case E_SELECT: v = truthy(eval(r, s, n->b)) ? eval(r, s, n->a) : k_undef; break;
    case E_TERNARY: v = truthy(eval(r, s, n->a)) ? eval(r, s, n->b) : eval(r, s, n->c); break;
    case E_SLICE:
    case E_KWARG:
    default: rerr(r, "this expression cannot stand here");
    }
    r->depth--;
    return v;
}

/* ------------------------------------------- statements */

static void assign(struct R *r, struct scope *s, const struct node *target, struct val v)
{
    if (target->k == E_IDENT) {
        set_var(r, s, target->str, v);
    } else if (target->k == E_TUPLE) {
        if (v.t != V_LIST) rerr(r, "cannot unpack a %s", k_vt_name[v.t]);
        if (v.u.l->n != (size_t)target->nv)
            rerr(r, "too %s items to unpack", (size_t)target->nv > v.u.l->n ? "few" : "many");
        for (int i = 0; i < target->nv; i++) {
            if (target->v[i]->k != E_IDENT) rerr(r, "can only unpack into names");
            set_var(r, s, target->v[i]->str, v.u.l->v[i]);
        }
    } else if (target->k == E_MEMBER) {
        struct val obj = eval(r, s, target->a);
        r->line = target->line;
        if (obj.t != V_NS)
            rerr(r, "cannot set an attribute of a %s (only of a namespace)", k_vt_name[obj.t]);
        if (target->op || target->b->k != E_IDENT) rerr(r, "set: expected a name after '.'");
        dict_set(r, obj.u.o, target->b->str, v);
    } else {
        rerr(r, "cannot assign to this expression");
    }
}

enum { C_NONE, C_BREAK, C_CONTINUE };

/* {% for %}: the items (a dict loops over its keys; the `if` filter picks them first),
 * then the body once per item with `loop` set, in a scope of its own; else when no
 * iteration completed. */
static int exec_for(struct R *r, struct scope *outer, const struct node *n, struct buf *out)
{
    struct scope *s = new_scope(r, outer);
    struct val it = eval(r, s, n->b);
    r->line = n->line;
    if (it.t == V_DICT) it = dict_items(r, it.u.o, 1);
    if (it.t != V_LIST) rerr(r, "for: cannot loop over a %s", k_vt_name[it.t]);
    const struct jlist *l = it.u.l;
    struct val *items = l->n ? aalloc(&r->ar, l->n * sizeof *items) : NULL;
    size_t ni = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (n->c) {
            struct scope *t = new_scope(r, s);
            assign(r, t, n->a, l->v[i]);
            if (!truthy(eval(r, t, n->c))) continue;
        } else if (n->a->k == E_TUPLE) {
            r->line = n->line;
            assign(r, new_scope(r, s), n->a, l->v[i]); /* the unpacking errors come first */
        }
        items[ni++] = l->v[i];
    }
    struct jstr *loop_name = str_make(&r->ar, "loop", 4, NULL, 0);
    static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first",
                                       "last",  "length", "previtem", "nextitem"};
    struct jstr *kstr[9];
    for (int k = 0; k < 9; k++)
        kstr[k] = str_make(&r->ar, keys[k], strlen(keys[k]), NULL, 0);
    int ran = 0;
    for (size_t i = 0; i < ni; i++) {
        charge(r, 1);
        struct val loop = mkd(r, V_DICT);
        struct jdict *d = loop.u.o;
        d->cap = 9;
        d->k = aalloc(&r->ar, 9 * sizeof *d->k);
        d->v = aalloc(&r->ar, 9 * sizeof *d->v);
        struct val vals[9] = {mkn(V_INT, (double)i + 1),
                              mkn(V_INT, (double)i),
                              mkn(V_INT, (double)(ni - i)),
                              mkn(V_INT, (double)(ni - i - 1)),
                              mkb(i == 0),
                              mkb(i == ni - 1),
                              mkn(V_INT, (double)ni),
                              i > 0 ? items[i - 1] : k_undef,
                              i + 1 < ni ? items[i + 1] : k_undef};
        for (int k = 0; k < 9; k++) {
            d->k[k] = kstr[k];
            d->v[k] = vals[k];
        }
        d->n = 9;
        set_var(r, s, loop_name, loop);
        assign(r, s, n->a, items[i]);
        size_t mark = out->n;
        int c = exec_body(r, s, n->v, n->nv, out);
        if (c != C_NONE) {
            out->n = mark; /* @huggingface/jinja drops the iteration's output */
            if (c == C_BREAK) break;
            continue;
        }
        ran = 1;
    }
    if (!ran) exec_body(r, s, n->w, n->nw, out);
    return C_NONE;
}

/* Run a statement, writing to out: C_NONE, or C_BREAK / C_CONTINUE for the loop around. */
static int exec_stmt(struct R *r, struct scope *s, const struct node *n, struct buf *out)
{
    charge(r, 1);
    if (++r->depth > EVAL_DEPTH)
        die(&r->err, NB_ERR_RANGE, "chat template: evaluation nested deeper than %d", EVAL_DEPTH);
    r->line = n->line;
    int c = C_NONE;
    switch (n->k) {
    case S_TEXT: bstr(r, out, n->str); break;
    case S_OUT: print_val(r, out, eval(r, s, n->a)); break;
    case S_IF:
        if (truthy(eval(r, s, n->a)))
            c = exec_body(r, s, n->v, n->nv, out);
        else
            c = exec_body(r, s, n->w, n->nw, out);
        break;
    case S_FOR: c = exec_for(r, s, n, out); break;
    case S_SET: {
        struct val v;
        if (n->b) {
            v = eval(r, s, n->b);
        } else {
            struct buf b = {0};
            exec_body(r, s, n->v, n->nv, &b);
            v = mks(bdone(r, &b));
        }
        r->line = n->line;
        assign(r, s, n->a, v);
        break;
    }
    case S_MACRO: {
        struct val f = mkf(r, F_MACRO, G_NAMESPACE, k_undef);
        f.u.f->macro = n;
        set_var(r, s, n->str, f);
        break;
    }
    case S_BREAK: c = C_BREAK; break;
    case S_CONTINUE: c = C_CONTINUE; break;
    case S_FILTER: {
        struct buf b = {0};
        exec_body(r, s, n->v, n->nv, &b);
        r->line = n->line;
        print_val(r, out, filter(r, s, mks(bdone(r, &b)), n->a));
        break;
    }
    default: break;
    }
    r->depth--;
    return c;
}

static int exec_body(struct R *r, struct scope *s, struct node *const *v, int nv, struct buf *out)
{
    for (int i = 0; i < nv; i++) {
        int c = exec_stmt(r, s, v[i], out);
        if (c != C_NONE) return c;
    }
    return C_NONE;
}

/* ---------------------------------------------------------------- render */

static int trusted_key(const char *k)
{
    /* bos_token, eos_token, ...: the tokenizer's own special tokens, set by the caller */
    size_t n = strlen(k);
    return n >= 6 && !strcmp(k + n - 6, "_token");
}

enum nb_status nb_jinja_render(const struct nb_jinja *t, const cJSON *ctx, char **out,
                               size_t *out_len, uint8_t **marks)
{
    struct R *r = calloc(1, sizeof *r);
    *out = NULL;
    *out_len = 0;
    if (marks) *marks = NULL;
    if (!r) return nb_set_error(NB_ERR_NOMEM, "chat template: out of memory");
    if (!t || (ctx && !cJSON_IsObject(ctx))) {
        free(r);
        return nb_set_error(NB_ERR_INVALID_ARG, "chat template: %s",
                            t ? "the context must be a JSON object" : "no template");
    }
    r->ar.limit = MEM_LIMIT;
    r->ar.err = &r->err;
    if (setjmp(r->err.jb)) { /* everything made since lives in the arena */
        enum nb_status st = r->err.st;
        arena_free(&r->ar);
        nb_set_error(st, "%s", r->err.msg);
        free(r);
        return st;
    }
    struct scope *g = new_scope(r, NULL);
    static const struct {
        const char *name;
        int kind; /* 0 bool false, 1 bool true, 2 none, 3.. function */
        enum fid id;
    } globals[] = {{"false", 0, 0},
                   {"true", 1, 0},
                   {"none", 2, 0},
                   {"False", 0, 0},
                   {"True", 1, 0},
                   {"None", 2, 0},
                   {"namespace", 3, G_NAMESPACE},
                   {"range", 3, G_RANGE},
                   {"raise_exception", 3, G_RAISE},
                   {"strftime_now", 3, G_STRFTIME}};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        struct val v = globals[i].kind == 2  ? k_none
                       : globals[i].kind < 2 ? mkb(globals[i].kind)
                                             : mkf(r, F_GLOBAL, globals[i].id, k_undef);
        set_var(r, g, str_make(&r->ar, globals[i].name, strlen(globals[i].name), NULL, 0), v);
    }
    if (ctx)
        for (const cJSON *c = ctx->child; c; c = c->next) {
            const char *k = c->string ? c->string : "";
            uint8_t mk = trusted_key(k) ? 0 : 1;
            set_var(r, g, str_make(&r->ar, k, strlen(k), NULL, 0), from_json(r, c, mk, 0));
        }
    struct buf b = {0};
    exec_body(r, g, t->body, t->n, &b);
    char *text = malloc(b.n + 1);
    uint8_t *m = malloc(b.n + 1);
    if (!text || !m) {
        free(text);
        free(m);
        arena_free(&r->ar);
        free(r);
        return nb_set_error(NB_ERR_NOMEM, "chat template: out of memory");
    }
    if (b.n) {
        memcpy(text, b.s, b.n);
        memcpy(m, b.m, b.n);
    }
    text[b.n] = '\0';
    *out = text;
    *out_len = b.n;
    if (marks)
        *marks = m;
    else
        free(m);
    arena_free(&r->ar);
    free(r);
    return NB_OK;
}
