/* app/args.c — parsing command-line values with clear errors. */
#include "app/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/log.h"

int arg_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "nibble %s: %s: '%s' is not a whole number in %ld..%ld\n", cmd, opt, val,
                lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int arg_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "nibble %s: %s: '%s' is not a number in %g..%g\n", cmd, opt, val, lo, hi);
        return 0;
    }
    *out = (float)v;
    return 1;
}

int arg_u64(const char *cmd, const char *opt, const char *val, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end || val[0] == '-') {
        fprintf(stderr, "nibble %s: %s: '%s' is not a non-negative whole number\n", cmd, opt, val);
        return 0;
    }
    *out = v;
    return 1;
}

int arg_ids(const char *cmd, const char *opt, const char *val, int32_t **out, int *n)
{
    size_t cap = 16, cnt = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = val;
    if (!ids) return 0;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
            fprintf(stderr, "nibble %s: %s: '%s' is not a list of token ids (e.g. 1,2,3)\n", cmd,
                    opt, val);
            free(ids);
            return 0;
        }
        if (cnt == cap) {
            int32_t *nids = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!nids) {
                free(ids);
                return 0;
            }
            ids = nids;
        }
        ids[cnt++] = (int32_t)v;
        p = end;
    }
    if (cnt == 0) {
        fprintf(stderr, "nibble %s: %s: no token ids given\n", cmd, opt);
        free(ids);
        return 0;
    }
    *out = ids;
    *n = (int)cnt;
    return 1;
}

const char *arg_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "nibble %s: option %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* "0,512,4096" appended to *out, each a whole number in [lo, hi]; an empty item
 * ("1,,2", "5,") is an error like a bad number, so a typo is never read as a 0. */
static int arg_int_list(const char *cmd, const char *opt, const char *val, long lo, long hi,
                        struct arg_ints *out)
{
    for (const char *p = val;;) {
        size_t len = strcspn(p, ",");
        char item[32];
        if (!len || len >= sizeof item) {
            fprintf(stderr, "nibble %s: %s: '%s' is not a comma-separated list of whole numbers "
                            "in %ld..%ld\n", cmd, opt, val, lo, hi);
            return 0;
        }
        if (out->n == out->cap) {
            fprintf(stderr, "nibble %s: %s: more than %d values\n", cmd, opt, out->cap);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!arg_int(cmd, opt, item, lo, hi, &out->v[out->n])) return 0;
        out->n++;
        if (!p[len]) return 1;
        p += len + 1;
    }
}

#define one_of arg_one_of

int arg_one_of(const char *list, const char *a)
{
    size_t n = strlen(a);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, "|");
        if (len == n && !strncmp(p, a, n)) return 1;
        p += len + (p[len] == '|');
    }
    return 0;
}

/* An ARG_NOTE option: its value skipped, its note said the first time. */
static int note_option(const char *cmd, const struct arg_opt *o, const char *a, const char *v,
                       int argc, char **argv, int *i)
{
    static const char *said[16];
    int n_said = 0;
    if (o->lo == 0 && v) {
        fprintf(stderr, "nibble %s: %s takes no value\n", cmd, a);
        return -1;
    }
    if (o->lo == 1 && !v && !arg_value(cmd, argc, argv, i)) return -1;
    if (o->lo == 2 && !v && *i + 1 < argc && argv[*i + 1][0] != '-') ++*i;
    while (n_said < 16 && said[n_said] && strcmp(said[n_said], o->choices)) n_said++;
    if (n_said < 16 && !said[n_said]) {
        said[n_said] = o->choices;
        app_note(cmd, "%s: %s", a, o->choices);
    }
    return 1;
}

static const struct arg_opt *g_last_opts; /* for arg_unknown's suggestion */

int arg_table(const char *cmd, const struct arg_opt *opts, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = NULL;
    char name[64];
    g_last_opts = opts;
    if (!strncmp(a, "--", 2)) {
        /* --name=value; --ctx_size for --ctx-size, as llama.cpp's parser reads it */
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)n, a);
            for (char *c = name + 2; *c; c++)
                if (*c == '_') *c = '-';
            a = name;
            v = eq ? eq + 1 : NULL;
        }
    }
    const struct arg_opt *o = opts;
    while (o->names && !one_of(o->names, a)) o++;
    if (!o->names) return app_log_option(cmd, argc, argv, i); /* -q, -v, --log-format */
    if (o->kind == ARG_NOTE) return note_option(cmd, o, a, v, argc, argv, i);
    if (o->kind == ARG_FLAG) {
        if (v) {
            fprintf(stderr, "nibble %s: %s takes no value\n", cmd, a);
            return -1;
        }
        *(int *)o->dst = 1;
        return 1;
    }
    if (!v && !(v = arg_value(cmd, argc, argv, i))) return -1;
    switch (o->kind) {
    case ARG_STR: *(const char **)o->dst = v; return 1;
    case ARG_INT: return arg_int(cmd, a, v, (long)o->lo, (long)o->hi, o->dst) ? 1 : -1;
    case ARG_FLOAT: return arg_float(cmd, a, v, o->lo, o->hi, o->dst) ? 1 : -1;
    case ARG_U64: return arg_u64(cmd, a, v, o->dst) ? 1 : -1;
    case ARG_INTS: return arg_int_list(cmd, a, v, (long)o->lo, (long)o->hi, o->dst) ? 1 : -1;
    case ARG_CHOICE:
    case ARG_ENUM:
        if (one_of(o->choices, v)) {
            if (o->kind == ARG_CHOICE) {
                *(const char **)o->dst = v;
                return 1;
            }
            int k = 0; /* the word's index */
            for (const char *p = o->choices; strncmp(p, v, strcspn(p, "|")) ||
                                             strlen(v) != strcspn(p, "|");
                 p += strcspn(p, "|") + 1)
                k++;
            *(int *)o->dst = k;
            return 1;
        }
        fprintf(stderr, "nibble %s: %s: '%s' is not one of ", cmd, a, v);
        for (const char *p = o->choices; *p;) { /* "a|b|c" as "a, b or c" */
            size_t len = strcspn(p, "|");
            const char *next = p + len + (p[len] == '|');
            fprintf(stderr, "%s%.*s", p == o->choices ? "" : p[len] ? ", " : " or ", (int)len, p);
            p = next;
        }
        fputc('\n', stderr);
        return -1;
    default: return -1;
    }
}

int arg_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

/* Edits from a[0..n) to b[0..m): insert, delete, replace, or swap two neighbours. */
static int distance(const char *a, int n, const char *b, int m)
{
    int d[48][48];
    if (n >= 48 || m >= 48) return 99;
    for (int x = 0; x <= n; x++)
        for (int y = 0; y <= m; y++) {
            if (!x || !y) {
                d[x][y] = x + y;
                continue;
            }
            int best = d[x - 1][y - 1] + (a[x - 1] != b[y - 1]);
            if (d[x - 1][y] + 1 < best) best = d[x - 1][y] + 1;
            if (d[x][y - 1] + 1 < best) best = d[x][y - 1] + 1;
            if (x > 1 && y > 1 && a[x - 1] == b[y - 2] && a[x - 2] == b[y - 1] &&
                d[x - 2][y - 2] + 1 < best)
                best = d[x - 2][y - 2] + 1;
            d[x][y] = best;
        }
    return d[n][m];
}

const char *arg_nearest(const char *a, const char *const *names, int *len)
{
    int n = (int)strcspn(a, "="), best = 99, core = n - (int)strspn(a, "-");
    const char *found = NULL;
    int limit = core <= 1 ? 0 : core <= 3 ? 1 : 2; /* "-x" is near too much to say */
    for (; *names; names++)
        for (const char *p = *names; *p;) {
            int m = (int)strcspn(p, "|");
            int d = distance(a, n, p, m);
            if (n >= 4 && n < m && !strncmp(a, p, (size_t)n)) d = limit; /* a prefix */
            if (d && d <= limit && d < best && d < m) {
                best = d;
                found = p;
                *len = m;
            }
            p += m + (p[m] == '|');
        }
    return found;
}

int arg_unknown_among(const char *cmd, const char *a, const char *more)
{
    const char *names[66];
    int k = 0, len = 0;
    for (const struct arg_opt *o = g_last_opts; o && o->names && k < 62; o++) names[k++] = o->names;
    names[k++] = app_log_option_names;
    names[k++] = "-h|--help";
    if (more) names[k++] = more;
    names[k] = NULL;
    const char *near = a[0] == '-' ? arg_nearest(a, names, &len) : NULL;
    if (near)
        fprintf(stderr, "nibble %s: unknown option '%s': did you mean '%.*s'? (see nibble %s "
                        "--help)\n", cmd, a, len, near, cmd);
    else
        fprintf(stderr, "nibble %s: unknown option '%s' (see nibble %s --help)\n", cmd, a, cmd);
    return 0;
}

int arg_unknown(const char *cmd, const char *a) { return arg_unknown_among(cmd, a, NULL); }

int arg_parse(const char *cmd, const struct arg_opt *opts, int argc, char **argv,
              void (*usage)(FILE *))
{
    for (int i = 1; i < argc; i++) {
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (arg_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        return arg_unknown(cmd, argv[i]) - 1;
    }
    return 1;
}
