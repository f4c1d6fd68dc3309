/* runtime/gbnf.c — GBNF grammars (gbnf.h): the text compiled into flat alternatives of
 * character classes and rule references, and the stack-set recogniser that constrained
 * decoding runs over them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/constrain.h"
#include "runtime/gbnf.h"

/* ---------------------------------------------------------------- the compiled grammar */

enum { GB_END, GB_CHAR, GB_REF };

/* One position: a character class (ranges rng[a .. a + 2n), lo/hi pairs; neg: every code
 * point but those), a reference to rule a, or the end of an alternative. */
struct gel {
    uint8_t type, neg;
    uint32_t a, n;
};

struct nb_gbnf {
    int n_el;
    struct gel *el;
    uint32_t *rng;
    int n_rules;
    uint32_t *alt_off; /* [n_rules + 1]: rule r's alternatives are alt[alt_off[r] ..) */
    uint32_t *alt;     /* each alternative's first position */
    int *rest;         /* [n_el] the fewest bytes from a position to its alternative's end */
    int root;
};

void nb_gbnf_free(struct nb_gbnf *g)
{
    if (!g) return;
    free(g->el);
    free(g->rng);
    free(g->alt_off);
    free(g->alt);
    free(g->rest);
    free(g);
}

/* ---------------------------------------------------------------- the parser */

struct seq {
    struct gel *e;
    int n, cap;
};

struct brule {
    char *name;    /* NULL: made for a group or a repetition */
    int defined;   /* line of its definition (0: not yet) */
    int used_line; /* where it was first referenced */
    int owner;     /* made for a group or repetition: the named rule it is written in */
    struct seq *alts;
    int n_alts, cap_alts;
};

#define GB_HASH 16384 /* > 2 x NB_GB_MAX_RULES */

struct builder {
    const char *text, *p, *end;
    struct brule *rules;
    int n_rules, cap_rules;
    uint32_t *rng;
    size_t n_rng, cap_rng; /* uint32 values, two per range */
    size_t n_elems;
    int cur; /* the rule being defined */
    int hash[GB_HASH];
    enum nb_status st; /* the first error (NB_OK: none) */
};

static void where(const struct builder *b, const char *at, int *line, int *col)
{
    *line = 1, *col = 1;
    for (const char *q = b->text; q < at && q < b->end; q++) {
        if (*q == '\n')
            ++*line, *col = 1;
        else
            ++*col;
    }
}

/* The first error wins: "grammar: line L, column C: ...". */
static void fail(struct builder *b, enum nb_status st, const char *fmt, ...)
{
    if (b->st) return;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    if (st == NB_ERR_FORMAT && b->p) {
        where(b, b->p, &line, &col);
        b->st = nb_set_error(st, "grammar: line %d, column %d: %s", line, col, msg);
    } else
        b->st = nb_set_error(st, "grammar: %s", msg);
}

static void oom(struct builder *b) { fail(b, NB_ERR_NOMEM, "out of memory"); }

static int grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap) return 1;
    int c = *cap ? *cap * 2 : 8;
    while (c < need) c *= 2;
    void *q = realloc(*p, size * (size_t)c);
    if (!q) return 0;
    *p = q, *cap = c;
    return 1;
}

static void push(struct builder *b, struct seq *s, struct gel e)
{
    if (b->st) return;
    if (++b->n_elems > NB_GB_MAX_ELEMS) {
        fail(b, NB_ERR_UNSUPPORTED, "larger than %d positions once its repetitions are "
             "written out", NB_GB_MAX_ELEMS);
        return;
    }
    if (!grow((void **)&s->e, &s->cap, s->n + 1, sizeof *s->e)) return oom(b);
    s->e[s->n++] = e;
}

static struct gel char_range(struct builder *b, uint32_t lo, uint32_t hi, int neg, int add)
{
    struct gel e = {GB_CHAR, (uint8_t)neg, (uint32_t)b->n_rng, 0};
    if (!add) return e;
    if (b->n_rng + 2 > b->cap_rng) {
        size_t c = b->cap_rng ? b->cap_rng * 2 : 64;
        uint32_t *q = realloc(b->rng, sizeof *q * c);
        if (!q) {
            oom(b);
            return e;
        }
        b->rng = q, b->cap_rng = c;
    }
    b->rng[b->n_rng++] = lo;
    b->rng[b->n_rng++] = hi;
    e.n = 1;
    return e;
}

static int new_rule(struct builder *b, const char *name, size_t len)
{
    if (b->n_rules >= NB_GB_MAX_RULES) {
        fail(b, NB_ERR_UNSUPPORTED, "more than %d rules (groups and repetitions count)",
             NB_GB_MAX_RULES);
        return -1;
    }
    if (!grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
        oom(b);
        return -1;
    }
    struct brule *r = &b->rules[b->n_rules];
    memset(r, 0, sizeof *r);
    r->owner = b->cur;
    if (name) {
        if (!(r->name = malloc(len + 1))) {
            oom(b);
            return -1;
        }
        memcpy(r->name, name, len);
        r->name[len] = 0;
    }
    return b->n_rules++;
}

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The rule named s[0..n): found, or made (not yet defined). -1 on error. */
static int rule_named(struct builder *b, const char *s, size_t n)
{
    uint32_t h = name_hash(s, n) % GB_HASH;
    for (;; h = (h + 1) % GB_HASH) {
        int r = b->hash[h];
        if (r < 0) break;
        if (strlen(b->rules[r].name) == n && !memcmp(b->rules[r].name, s, n)) return r;
    }
    int r = new_rule(b, s, n);
    if (r >= 0) b->hash[h] = r;
    return r;
}

static void add_alt(struct builder *b, int rule, struct seq s)
{
    struct brule *r = &b->rules[rule];
    if (b->st || !grow((void **)&r->alts, &r->cap_alts, r->n_alts + 1, sizeof *r->alts)) {
        free(s.e);
        if (!b->st) oom(b);
        return;
    }
    r->alts[r->n_alts++] = s;
}

static int is_word(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* Spaces, tabs and comments; line ends too with newlines. */
static void skip(struct builder *b, int newlines)
{
    while (b->p < b->end) {
        char c = *b->p;
        if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines))
            b->p++;
        else if (c == '#')
            while (b->p < b->end && *b->p != '\n') b->p++;
        else
            break;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the text at b->p: its code point, or -1 (error set). */
static int32_t utf8_char(struct builder *b)
{
    const unsigned char *q = (const unsigned char *)b->p;
    size_t left = (size_t)(b->end - b->p);
    int n = q[0] < 0x80 ? 1 : q[0] >= 0xc2 && q[0] <= 0xdf ? 2 : q[0] >= 0xe0 && q[0] <= 0xef ? 3
            : q[0] >= 0xf0 && q[0] <= 0xf4                 ? 4
                                                           : 0;
    if (!n || (size_t)n > left) goto bad;
    uint32_t cp = n == 1 ? q[0] : q[0] & (0x7f >> n);
    for (int k = 1; k < n; k++) {
        if ((q[k] & 0xc0) != 0x80) goto bad;
        cp = cp << 6 | (q[k] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad;
    if (cp == 0) {
        fail(b, NB_ERR_FORMAT, "a NUL byte in the grammar");
        return -1;
    }
    b->p += n;
    return (int32_t)cp;
bad:
    fail(b, NB_ERR_FORMAT, "not valid UTF-8");
    return -1;
}

/* A character of a string or class: an escape or one UTF-8 character. -1 on error. */
static int32_t char_at(struct builder *b)
{
    if (b->p >= b->end) {
        fail(b, NB_ERR_FORMAT, "the grammar ends inside a string or class");
        return -1;
    }
    if (*b->p != '\\') return utf8_char(b);
    if (b->p + 1 >= b->end) {
        fail(b, NB_ERR_FORMAT, "the grammar ends inside an escape");
        return -1;
    }
    char c = b->p[1];
    b->p += 2;
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
        return (unsigned char)c;
    case 'x': case 'u': case 'U': {
        int n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < n; k++) {
            int h = b->p < b->end ? hexval((unsigned char)*b->p) : -1;
            if (h < 0) {
                fail(b, NB_ERR_FORMAT, "\\%c needs %d hexadecimal digits", c, n);
                return -1;
            }
            cp = cp << 4 | (uint32_t)h;
            b->p++;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { /* \x00: a class's bound */
            fail(b, NB_ERR_FORMAT, "\\%c%0*X is not a character the output can hold", c, n, cp);
            return -1;
        }
        return (int32_t)cp;
    }
    default:
        b->p--;
        fail(b, NB_ERR_FORMAT, "unknown escape '\\%c'", c);
        return -1;
    }
}

static void parse_literal(struct builder *b, struct seq *s)
{
    b->p++; /* '"' */
    while (!b->st) {
        if (b->p >= b->end || *b->p == '\n') {
            fail(b, NB_ERR_FORMAT, "a string without its closing '\"'");
            return;
        }
        if (*b->p == '"') {
            b->p++;
            return;
        }
        int32_t cp = char_at(b);
        if (cp >= 0) push(b, s, char_range(b, (uint32_t)cp, (uint32_t)cp, 0, 1));
    }
}

static void parse_class(struct builder *b, struct seq *s)
{
    b->p++; /* '[' */
    int neg = b->p < b->end && *b->p == '^';
    if (neg) b->p++;
    struct gel e = char_range(b, 0, 0, neg, 0);
    while (!b->st) {
        if (b->p >= b->end || *b->p == '\n') {
            fail(b, NB_ERR_FORMAT, "a class without its closing ']'");
            return;
        }
        if (*b->p == ']') break;
        int32_t lo = char_at(b), hi = lo;
        if (lo < 0) return;
        if (b->p + 1 < b->end && *b->p == '-' && b->p[1] != ']') {
            b->p++;
            if ((hi = char_at(b)) < 0) return;
            if (hi < lo) {
                fail(b, NB_ERR_FORMAT, "a range from U+%04X down to U+%04X", lo, hi);
                return;
            }
        }
        char_range(b, (uint32_t)lo, (uint32_t)hi, neg, 1);
        e.n++;
    }
    if (b->st) return;
    b->p++; /* ']' */
    if (!e.n && !neg) {
        fail(b, NB_ERR_FORMAT, "an empty class '[]' matches nothing");
        return;
    }
    push(b, s, e);
}

/* A number of a {m,n} bound, or -1 when none is written. */
static long bound(struct builder *b)
{
    if (b->p >= b->end || *b->p < '0' || *b->p > '9') return -1;
    long v = 0;
    while (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
        v = v * 10 + (*b->p++ - '0');
        if (v > 100000) v = 100000;
    }
    return v;
}

/* Append the rule's reference. */
static void push_ref(struct builder *b, struct seq *s, int rule)
{
    push(b, s, (struct gel){GB_REF, 0, (uint32_t)rule, 0});
}

/* Copy src[0..n) onto s (src may not be s's own array). */
static void push_all(struct builder *b, struct seq *s, const struct gel *src, int n)
{
    for (int i = 0; i < n && !b->st; i++) push(b, s, src[i]);
}

/* s[start..) repeated min to max (-1: any) times: min copies, then rules that take the
 * rest (R ::= x R | "" for any; R1 ::= x | "", Rk ::= x Rk-1 | "" for up to k more). */
static void repeat(struct builder *b, struct seq *s, int start, long min, long max)
{
    int n = s->n - start;
    if (!n) return; /* "" repeated is "" */
    struct gel *x = malloc(sizeof *x * (size_t)n);
    if (!x) return oom(b);
    memcpy(x, s->e + start, sizeof *x * (size_t)n);
    s->n = start;
    b->n_elems -= (size_t)n;
    for (long i = 0; i < min && !b->st; i++) push_all(b, s, x, n);
    int last = -1;
    for (long k = 0; (max < 0 ? k < 1 : k < max - min) && !b->st; k++) {
        int r = new_rule(b, NULL, 0);
        if (r < 0) break;
        struct seq a = {0}, empty = {0};
        push_all(b, &a, x, n);
        if (max < 0) push_ref(b, &a, r);
        else if (last >= 0) push_ref(b, &a, last);
        add_alt(b, r, a);
        add_alt(b, r, empty);
        last = r;
    }
    if (last >= 0) push_ref(b, s, last);
    free(x);
}

/* A repetition after the item that begins at s[start], if one is written. */
static void postfix(struct builder *b, struct seq *s, int start)
{
    if (b->p >= b->end) return;
    char c = *b->p;
    long min, max;
    if (c == '*' || c == '+' || c == '?') {
        b->p++;
        min = c == '+', max = c == '?' ? 1 : -1;
    } else if (c == '{') {
        b->p++;
        skip(b, 0);
        min = bound(b);
        skip(b, 0);
        max = min;
        if (b->p < b->end && *b->p == ',') {
            b->p++;
            skip(b, 0);
            max = bound(b);
            skip(b, 0);
        }
        if (min < 0) min = 0;
        if (b->p >= b->end || *b->p != '}') return fail(b, NB_ERR_FORMAT, "expected '}'");
        b->p++;
        if (max >= 0 && max < min)
            return fail(b, NB_ERR_FORMAT, "a repetition {%ld,%ld} with its most below its least",
                        min, max);
        if (min > 10000 || max > 10000)
            return fail(b, NB_ERR_UNSUPPORTED, "a repetition bound over 10000");
    } else {
        return;
    }
    repeat(b, s, start, min, max);
}

static void parse_alternates(struct builder *b, int rule, int nested);

static void parse_sequence(struct builder *b, struct seq *s, int nested)
{
    while (!b->st && b->p < b->end) {
        int start = s->n;
        char c = *b->p;
        if (c == '"') {
            parse_literal(b, s);
        } else if (c == '[') {
            parse_class(b, s);
        } else if (c == '.') {
            b->p++;
            push(b, s, char_range(b, 0, 0, 1, 0)); /* every character */
        } else if (c == '(') {
            b->p++;
            int r = new_rule(b, NULL, 0);
            if (r < 0) return;
            skip(b, 1);
            parse_alternates(b, r, 1);
            if (b->st) return;
            if (b->p >= b->end || *b->p != ')') return fail(b, NB_ERR_FORMAT, "expected ')'");
            b->p++;
            push_ref(b, s, r);
        } else if (is_word((unsigned char)c)) {
            const char *w = b->p;
            while (b->p < b->end && is_word((unsigned char)*b->p)) b->p++;
            int r = rule_named(b, w, (size_t)(b->p - w));
            if (r < 0) return;
            if (!b->rules[r].used_line) {
                int col;
                where(b, w, &b->rules[r].used_line, &col);
            }
            push_ref(b, s, r);
        } else {
            return; /* '|', ')', a line's end, or what the caller refuses */
        }
        postfix(b, s, start);
        skip(b, nested);
    }
}

/* Alternatives separated by '|' into the rule; nested (in a group) they may span lines,
 * and at the top a line that begins with '|' goes on with the rule. */
static void parse_alternates(struct builder *b, int rule, int nested)
{
    for (;;) {
        struct seq s = {0};
        parse_sequence(b, &s, nested);
        add_alt(b, rule, s);
        if (b->st) return;
        const char *at = b->p;
        skip(b, 1);
        if (b->p < b->end && *b->p == '|') {
            b->p++;
            skip(b, 1);
            continue;
        }
        if (!nested) b->p = at;
        return;
    }
}

static void parse_rules(struct builder *b)
{
    for (;;) {
        skip(b, 1);
        if (b->st || b->p >= b->end) return;
        const char *w = b->p;
        while (b->p < b->end && is_word((unsigned char)*b->p)) b->p++;
        if (b->p == w) return fail(b, NB_ERR_FORMAT, "expected a rule name");
        int r = rule_named(b, w, (size_t)(b->p - w));
        if (r < 0) return;
        int line, col;
        where(b, w, &line, &col);
        if (b->rules[r].defined) {
            b->p = w;
            return fail(b, NB_ERR_FORMAT, "rule '%s' is defined twice (first on line %d)",
                        b->rules[r].name, b->rules[r].defined);
        }
        b->rules[r].defined = line;
        b->cur = r;
        skip(b, 0);
        if (b->end - b->p < 3 || memcmp(b->p, "::=", 3))
            return fail(b, NB_ERR_FORMAT, "expected '::=' after the rule name");
        b->p += 3;
        skip(b, 1);
        parse_alternates(b, r, 0);
        skip(b, 0);
        if (!b->st && b->p < b->end && *b->p != '\n' && *b->p != '\r')
            return fail(b, NB_ERR_FORMAT, "unexpected '%c'", *b->p);
    }
}

/* ---------------------------------------------------------------- the analysis */

static int add_cost(int a, int b) { return a >= NB_GB_INF - b ? NB_GB_INF : a + b; }


/* Does the union of the class's ranges cover every code point of [lo, hi]? */
static int covered(const uint32_t *r, uint32_t n, uint32_t lo, uint32_t hi)
{
    for (uint32_t pass = 0; pass <= n; pass++) {
        uint32_t i = 0;
        while (i < n && !(r[2 * i] <= lo && lo <= r[2 * i + 1])) i++;
        if (i == n) return 0;
        if (r[2 * i + 1] >= hi) return 1;
        lo = r[2 * i + 1] + 1;
    }
    return 0;
}

/* The fewest bytes of a character the class takes (NB_GB_INF: none; U+0000 never comes,
 * nor a surrogate). */
static int class_min(const struct nb_gbnf *g, const struct gel *e)
{
    static const uint32_t band[4][2] = {{1, 0x7f}, {0x80, 0x7ff}, {0x800, 0xffff}, {0x10000, 0x10ffff}};
    const uint32_t *r = g->rng + e->a;
    for (int k = 0; k < 4; k++) {
        if (e->neg) {
            if (!covered(r, e->n, band[k][0], k == 2 ? 0xd7ff : band[k][1]) ||
                (k == 2 && !covered(r, e->n, 0xe000, 0xffff)))
                return k + 1;
            continue;
        }
        for (uint32_t i = 0; i < e->n; i++) {
            uint32_t lo = r[2 * i] > band[k][0] ? r[2 * i] : band[k][0];
            uint32_t hi = r[2 * i + 1] < band[k][1] ? r[2 * i + 1] : band[k][1];
            if (lo <= hi && !(k == 2 && lo >= 0xd800 && hi <= 0xdfff)) return k + 1;
        }
    }
    return NB_GB_INF;
}

static int elem_min(const struct nb_gbnf *g, const int *rmin, int p)
{
    const struct gel *e = &g->el[p];
    return e->type == GB_CHAR ? class_min(g, e) : e->type == GB_REF ? rmin[e->a] : 0;
}

/* rmin: each rule's fewest bytes (passes from the last rule made, until none changes). */
static void rule_mins(const struct nb_gbnf *g, int *rmin)
{
    for (int r = 0; r < g->n_rules; r++) rmin[r] = NB_GB_INF;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = g->n_rules - 1; r >= 0; r--) {
            for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
                int c = 0;
                for (uint32_t p = g->alt[a]; g->el[p].type != GB_END && c < NB_GB_INF; p++)
                    c = add_cost(c, elem_min(g, rmin, (int)p));
                if (c < rmin[r]) rmin[r] = c, changed = 1;
            }
        }
    }
}

/* Left recursion: a rule that can begin with itself through references that may match
 * nothing before them. color: 0 new, 1 on the path, 2 done. The rule that closes a
 * cycle, or -1. */
static int left_cycle(const struct nb_gbnf *g, const int *rmin, uint8_t *color, int r, int depth)
{
    if (color[r] == 1) return r;
    if (color[r] == 2) return -1;
    if (depth > NB_GB_MAX_RULES) return r;
    color[r] = 1;
    for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
        for (uint32_t p = g->alt[a]; g->el[p].type == GB_REF; p++) {
            int c = left_cycle(g, rmin, color, (int)g->el[p].a, depth + 1);
            if (c >= 0) return c;
            if (rmin[g->el[p].a] != 0) break;
        }
    }
    color[r] = 2;
    return -1;
}

/* The rules of b laid out flat into g. */
static void flatten(struct builder *b, struct nb_gbnf *g)
{
    size_t n_alts = 0;
    for (int r = 0; r < b->n_rules; r++) n_alts += (size_t)b->rules[r].n_alts;
    g->n_rules = b->n_rules;
    if (b->n_elems + n_alts > UINT16_MAX) /* positions are 16-bit on the stacks */
        return fail(b, NB_ERR_UNSUPPORTED, "more than %d positions with its alternatives' "
                    "ends", UINT16_MAX);
    g->n_el = (int)(b->n_elems + n_alts);
    g->el = malloc(sizeof *g->el * (size_t)(g->n_el ? g->n_el : 1));
    g->alt = malloc(sizeof *g->alt * (n_alts ? n_alts : 1));
    g->alt_off = malloc(sizeof *g->alt_off * (size_t)(b->n_rules + 1));
    g->rest = malloc(sizeof *g->rest * (size_t)(g->n_el ? g->n_el : 1));
    g->rng = b->rng, b->rng = NULL;
    if (!g->rng) g->rng = malloc(sizeof *g->rng * 2); /* no ranges ('.' only): not NULL */
    if (!g->rng || !g->el || !g->alt || !g->alt_off || !g->rest) return oom(b);
    uint32_t p = 0, a = 0;
    for (int r = 0; r < b->n_rules; r++) {
        g->alt_off[r] = a;
        for (int k = 0; k < b->rules[r].n_alts; k++) {
            const struct seq *s = &b->rules[r].alts[k];
            g->alt[a++] = p;
            if (s->n) memcpy(g->el + p, s->e, sizeof *s->e * (size_t)s->n);
            p += (uint32_t)s->n;
            g->el[p++] = (struct gel){GB_END, 0, 0, 0};
        }
    }
    g->alt_off[b->n_rules] = a;
}

static void check_rules(struct builder *b)
{
    for (int r = 0; r < b->n_rules && !b->st; r++)
        if (b->rules[r].name && !b->rules[r].defined)
            fail(b, NB_ERR_FORMAT, "rule '%s' is used (line %d) but never defined",
                 b->rules[r].name, b->rules[r].used_line);
}

/* rest[], and the checks that need the rules' sizes. */
static void analyse(struct builder *b, struct nb_gbnf *g)
{
    int *rmin = malloc(sizeof *rmin * (size_t)g->n_rules);
    uint8_t *color = calloc((size_t)g->n_rules, 1);
    if (!rmin || !color) {
        oom(b);
        goto done;
    }
    rule_mins(g, rmin);
    for (int r = 0; r < g->n_rules && !b->st; r++) {
        if (rmin[r] >= NB_GB_INF) {
            if (b->rules[r].name)
                fail(b, NB_ERR_FORMAT, "rule '%s' can never end (each alternative needs the "
                     "rule again, or a class that matches nothing)", b->rules[r].name);
            else
                fail(b, NB_ERR_FORMAT, "a group or repetition in rule '%s' can never end",
                     b->rules[b->rules[r].owner].name);
        }
        int c = left_cycle(g, rmin, color, r, 0);
        if (c >= 0 && !b->st) {
            int k = b->rules[c].name ? c : b->rules[c].owner; /* a group: its rule */
            fail(b, NB_ERR_FORMAT, "rule '%s' is left-recursive (it can begin with itself): "
                 "write it with a repetition instead, as x (\"+\" x)*", b->rules[k].name);
        }
    }
    for (int r = 0; r < g->n_rules; r++)
        for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
            uint32_t e = g->alt[a];
            while (g->el[e].type != GB_END) e++;
            g->rest[e] = 0;
            for (uint32_t p = e; p-- > g->alt[a];)
                g->rest[p] = add_cost(elem_min(g, rmin, (int)p), g->rest[p + 1]);
        }
done:
    free(rmin);
    free(color);
}

enum nb_status nb_gbnf_compile(const char *text, size_t len, struct nb_gbnf **out)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "grammar: out is NULL");
    *out = NULL;
    if (!text) return nb_set_error(NB_ERR_INVALID_ARG, "grammar: no text");
    if (len > NB_GB_MAX_TEXT)
        return nb_set_error(NB_ERR_UNSUPPORTED, "grammar: %zu bytes, more than the %u allowed",
                            len, NB_GB_MAX_TEXT);
    struct builder *b = calloc(1, sizeof *b);
    struct nb_gbnf *g = calloc(1, sizeof *g);
    enum nb_status st;
    if (!b || !g) {
        st = nb_set_error(NB_ERR_NOMEM, "grammar: out of memory");
        goto done;
    }
    b->text = b->p = text;
    b->end = text + len;
    memset(b->hash, 0xff, sizeof b->hash);
    parse_rules(b);
    b->p = NULL; /* later errors name no place in the text */
    if (!b->st) check_rules(b);
    int root = -1;
    for (int r = 0; r < b->n_rules && !b->st; r++)
        if (b->rules[r].name && !strcmp(b->rules[r].name, "root")) root = r;
    if (!b->st && root < 0) fail(b, NB_ERR_FORMAT, "no rule named 'root' (the output starts there)");
    if (!b->st) flatten(b, g);
    if (!b->st) analyse(b, g);
    g->root = root;
    st = b->st;
done:
    if (b) {
        for (int r = 0; r < b->n_rules; r++) {
            for (int k = 0; k < b->rules[r].n_alts; k++) free(b->rules[r].alts[k].e);
            free(b->rules[r].alts);
            free(b->rules[r].name);
        }
        free(b->rules);
        free(b->rng);
        free(b);
    }
    if (st) {
        nb_gbnf_free(g);
        return st;
    }
    *out = g;
    return NB_OK;
}

/* ---------------------------------------------------------------- the recogniser */

/* Expansions of one step (each rule reference on a stack's top, into its alternatives) at
 * most: a grammar of many nested rules that match nothing could otherwise branch
 * exponentially. Past it the ways not yet expanded are dropped. */
#define GB_WORK  4096
#define GB_NEST  256

struct xp {
    const struct nb_gbnf *g;
    struct nb_gbstate *out;
    int work;
};

static void emit(struct xp *x, const uint16_t *st, int len)
{
    struct nb_gbstate *o = x->out;
    for (int i = 0; i < o->n; i++)
        if (o->len[i] == len && !memcmp(o->s[i], st, sizeof *st * (size_t)len)) return;
    if (o->n == NB_GB_STACKS) return;
    o->len[o->n] = (uint8_t)len;
    memcpy(o->s[o->n], st, sizeof *st * (size_t)len);
    o->n++;
}

/* Bring the stack st[0..len) to a character class on top (or empty: complete) in every
 * way its references allow, each into x->out. */
static void expand(struct xp *x, uint16_t *st, int len, int nest)
{
    const struct nb_gbnf *g = x->g;
    while (len > 0) {
        uint16_t p = st[len - 1];
        const struct gel *e = &g->el[p];
        if (e->type == GB_CHAR) break;
        len--;
        if (e->type == GB_END) continue;
        if (++x->work > GB_WORK || nest > GB_NEST) return;
        if (g->el[p + 1].type != GB_END) st[len++] = (uint16_t)(p + 1); /* where it returns */
        uint32_t a0 = g->alt_off[e->a], a1 = g->alt_off[e->a + 1];
        for (uint32_t a = a0; a + 1 < a1; a++) { /* all but the last on a copy */
            uint16_t t[NB_GB_DEPTH];
            uint32_t f = g->alt[a];
            int tl = len;
            memcpy(t, st, sizeof *t * (size_t)len);
            if (g->el[f].type != GB_END) {
                if (tl == NB_GB_DEPTH) continue;
                t[tl++] = (uint16_t)f;
            }
            expand(x, t, tl, nest + 1);
        }
        uint32_t f = g->alt[a1 - 1];
        if (g->el[f].type != GB_END) {
            if (len == NB_GB_DEPTH) return;
            st[len++] = (uint16_t)f;
        }
    }
    emit(x, st, len);
}

static int class_has(const struct nb_gbnf *g, const struct gel *e, uint32_t lo, uint32_t hi)
{
    const uint32_t *r = g->rng + e->a;
    if (!e->neg) {
        for (uint32_t i = 0; i < e->n; i++)
            if (r[2 * i] <= hi && lo <= r[2 * i + 1]) return 1;
        return 0;
    }
    return !covered(r, e->n, lo, hi);
}

static void header(struct nb_gbstate *o, const struct nb_gbstate *c)
{
    o->n = 0;
    o->budget = c->budget;
    o->closing = c->closing;
    o->need = 0;
    o->clen = 0;
    o->cp = 0;
}

/* Every stack of c whose top takes code point cp, advanced past it, into o. */
static int step(const struct nb_gbnf *g, const struct nb_gbstate *c, uint32_t cp,
                struct nb_gbstate *o)
{
    header(o, c);
    struct xp x = {g, o, 0};
    for (int i = 0; i < c->n; i++) {
        int len = c->len[i];
        if (!len || !class_has(g, &g->el[c->s[i][len - 1]], cp, cp)) continue;
        uint16_t t[NB_GB_DEPTH];
        memcpy(t, c->s[i], sizeof *t * (size_t)len);
        t[len - 1]++;
        expand(&x, t, len, 0);
    }
    return o->n > 0;
}

/* The stacks of c whose top may take a code point in [lo, hi] (a character begun), into o. */
static int keep(const struct nb_gbnf *g, const struct nb_gbstate *c, uint32_t lo, uint32_t hi,
                struct nb_gbstate *o)
{
    header(o, c);
    for (int i = 0; i < c->n; i++) {
        int len = c->len[i];
        if (!len || !class_has(g, &g->el[c->s[i][len - 1]], lo, hi)) continue;
        o->len[o->n] = (uint8_t)len;
        memcpy(o->s[o->n], c->s[i], sizeof *c->s[i] * (size_t)len);
        o->n++;
    }
    return o->n > 0;
}

/* c advanced by byte u into o (o != c): 1, or 0 when refused. */
static int gb_byte(const struct nb_gbnf *g, const struct nb_gbstate *c, unsigned u,
                   struct nb_gbstate *o)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t cp;
    int need, clen;
    if (!c->need) {
        if (u < 0x80) return u ? step(g, c, u, o) : 0;
        clen = u >= 0xc2 && u <= 0xdf ? 2 : u >= 0xe0 && u <= 0xef ? 3 : u >= 0xf0 && u <= 0xf4 ? 4 : 0;
        if (!clen) return 0;
        cp = u & (0x7fu >> clen);
        need = clen - 1;
    } else {
        if ((u & 0xc0) != 0x80) return 0;
        clen = c->clen;
        need = c->need - 1;
        cp = c->cp << 6 | (u & 0x3f);
    }
    uint32_t lo = cp << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (lo < min[clen]) lo = min[clen];
    if (hi > 0x10ffff) hi = 0x10ffff;
    if (lo > hi) return 0;
    if (!need) {
        if (cp >= 0xd800 && cp <= 0xdfff) return 0;
        return step(g, c, cp, o);
    }
    if (!keep(g, c, lo, hi, o)) return 0;
    o->need = (uint8_t)need;
    o->clen = (uint8_t)clen;
    o->cp = cp;
    return 1;
}

static void copy_state(struct nb_gbstate *d, const struct nb_gbstate *c)
{
    header(d, c);
    d->need = c->need, d->clen = c->clen, d->cp = c->cp;
    d->n = c->n;
    for (int i = 0; i < c->n; i++) {
        d->len[i] = c->len[i];
        memcpy(d->s[i], c->s[i], sizeof *c->s[i] * c->len[i]);
    }
}

void nb_gb_start(const struct nb_gbnf *g, struct nb_gbstate *c)
{
    memset(c, 0, offsetof(struct nb_gbstate, len));
    c->budget = -1;
    uint16_t t[NB_GB_DEPTH];
    t[0] = 0;
    struct xp x = {g, c, 0};
    for (uint32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1]; a++) {
        uint32_t f = g->alt[a];
        int len = 0;
        if (g->el[f].type != GB_END) t[len++] = (uint16_t)f;
        expand(&x, t, len, 0);
    }
}

int nb_gb_feed(const struct nb_gbnf *g, struct nb_gbstate *c, const char *b, size_t n)
{
    struct nb_gbstate t;
    for (size_t i = 0; i < n; i++) {
        if (!gb_byte(g, c, (unsigned char)b[i], &t)) return 0;
        copy_state(c, &t);
    }
    return 1;
}

int nb_gb_complete(const struct nb_gbnf *g, const struct nb_gbstate *c)
{
    (void)g;
    if (c->need) return 0;
    for (int i = 0; i < c->n; i++)
        if (!c->len[i]) return 1;
    return 0;
}

int nb_gb_cost(const struct nb_gbnf *g, const struct nb_gbstate *c)
{
    int best = NB_GB_INF;
    for (int i = 0; i < c->n; i++) {
        int len = c->len[i];
        if (!len) return 0;
        const uint16_t *st = c->s[i];
        int k = c->need ? add_cost(c->need, g->rest[st[len - 1] + 1]) : g->rest[st[len - 1]];
        for (int j = 0; j < len - 1 && k < best; j++) k = add_cost(k, g->rest[st[j]]);
        if (k < best) best = k;
    }
    return best;
}

/* t (c advanced by a token of len bytes) within c's budget: on a shortest completion when
 * closing, else completable at a byte a token in the tokens left. */
static int within(const struct nb_gbnf *g, const struct nb_gbstate *c, int before,
                  const struct nb_gbstate *t, uint32_t len)
{
    if (c->closing) return add_cost(nb_gb_cost(g, t), (int)len) == before;
    return c->budget < 0 || nb_gb_cost(g, t) <= c->budget - 1;
}

int nb_gb_allows(const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
                 const struct nb_gbstate *c, int32_t tok, int allow_special)
{
    if (tok < 0 || tok >= v->n_vocab) return 0;
    switch (v->kind[tok]) {
    case NB_VTOK_EOG: return nb_gb_complete(g, c);
    case NB_VTOK_EMPTY: return 0;
    case NB_VTOK_SPECIAL:
        if (!allow_special) return 0;
        break;
    default: break;
    }
    uint32_t len = v->off[tok + 1] - v->off[tok];
    if (!len) return 0;
    struct nb_gbstate buf[2]; /* the token's bytes stepped between two states, c untouched */
    const struct nb_gbstate *at = c;
    const unsigned char *b = (const unsigned char *)v->bytes + v->off[tok];
    for (uint32_t i = 0; i < len; i++) {
        if (!gb_byte(g, at, b[i], &buf[i & 1])) return 0;
        at = &buf[i & 1];
    }
    return within(g, c, c->closing ? nb_gb_cost(g, c) : 0, at, len);
}

/* The tokens in the order of their bytes (v->by_bytes), each advanced from the state of
 * the bytes it shares with the one before: lv[k] is the state after k bytes of the last
 * token walked; a byte refused at `dead` refuses every token that shares it. */
static void walk_sorted(const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
                        const struct nb_gbstate *c, int allow_special, struct nb_gbstate *lv,
                        uint8_t *ok)
{
    const uint32_t *ids = v->by_bytes;
    uint32_t m = ids[v->n_vocab + 256];
    int before = nb_gb_cost(g, c);
    copy_state(&lv[0], c);
    const unsigned char *prev = NULL;
    uint32_t prev_len = 0, have = 1; /* lv[0 .. have) hold prev's first bytes' states */
    long dead = -1;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t id = ids[i];
        if (v->kind[id] == NB_VTOK_SPECIAL && !allow_special) continue;
        const unsigned char *b = (const unsigned char *)v->bytes + v->off[id];
        uint32_t len = v->off[id + 1] - v->off[id], l = 0;
        while (prev && l < len && l < prev_len && b[l] == prev[l]) l++;
        if (dead >= 0 && (long)l > dead) continue; /* the same refused byte */
        uint32_t k = l < have - 1 ? l : have - 1;
        dead = -1;
        for (; k < len; k++)
            if (!gb_byte(g, &lv[k], b[k], &lv[k + 1])) {
                dead = k;
                break;
            }
        have = dead >= 0 ? (uint32_t)dead + 1 : len + 1;
        prev = b, prev_len = len;
        if (dead < 0) ok[id] = (uint8_t)within(g, c, before, &lv[len], len);
    }
}

int nb_gb_mask(const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
               const struct nb_gbstate *c, int allow_special, float *logits)
{
    uint32_t longest = 0;
    for (int i = 0; i < v->n_vocab; i++)
        if (v->off[i + 1] - v->off[i] > longest) longest = v->off[i + 1] - v->off[i];
    uint8_t *ok = calloc(v->n_vocab > 0 ? (size_t)v->n_vocab : 1, 1);
    struct nb_gbstate *lv = malloc(sizeof *lv * (longest + 1));
    int n = 0;
    if (ok && lv && v->by_bytes) {
        walk_sorted(g, v, c, allow_special, lv, ok);
        int complete = nb_gb_complete(g, c);
        for (int i = 0; i < v->n_vocab; i++)
            if (v->kind[i] == NB_VTOK_EOG) ok[i] = (uint8_t)complete;
    }
    for (int i = 0; i < v->n_vocab; i++) {
        if (ok && ok[i])
            n++;
        else
            logits[i] = -INFINITY;
    }
    free(ok);
    free(lv);
    return n;
}

int nb_gb_next(const struct nb_gbnf *g, const struct nb_vocab_bytes *v, struct nb_gbstate *c,
               int left, int allow_special, const float *logits, float *work)
{
    size_t row = sizeof *work * (size_t)v->n_vocab;
    c->budget = left;
    memcpy(work, logits, row);
    int n = nb_gb_mask(g, v, c, allow_special, work);
    if (n) return n;
    if (!c->closing && left >= 0) {
        c->closing = 1;
        memcpy(work, logits, row);
        if ((n = nb_gb_mask(g, v, c, allow_special, work))) return n;
    }
    c->closing = 0; /* no shortest completion fits either: the output is cut at the limit */
    c->budget = -1;
    memcpy(work, logits, row);
    return nb_gb_mask(g, v, c, allow_special, work);
}

int nb_gb_refused(const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
                  struct nb_gbstate *c, int32_t tok, int allow_special)
{
    if (c->closing || c->budget < 0) return 0;
    int budget = c->budget;
    c->budget = -1;
    int free_ok = nb_gb_allows(g, v, c, tok, allow_special);
    c->budget = budget;
    if (!free_ok) return 0;
    c->closing = 1;
    return 1;
}
