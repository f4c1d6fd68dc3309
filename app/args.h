/* app/args.h — small helpers for parsing command-line values with clear errors. */
#ifndef NB_APP_ARGS_H
#define NB_APP_ARGS_H

#include <stdint.h>

/* Each prints "nibble CMD: OPTION: what is wrong" to stderr and returns 0 on a bad
 * value, 1 on success. */
int arg_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out);
int arg_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out);
int arg_u64(const char *cmd, const char *opt, const char *val, uint64_t *out);
/* Comma- or space-separated token ids; *out is malloc'd. */
int arg_ids(const char *cmd, const char *opt, const char *val, int32_t **out, int *n);
/* The value of an option that takes one: argv[++*i], or an error if missing. */
const char *arg_value(const char *cmd, int argc, char **argv, int *i);

#endif
