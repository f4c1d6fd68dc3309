/* app/args.c — parsing command-line values with clear errors. */
#include "app/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
