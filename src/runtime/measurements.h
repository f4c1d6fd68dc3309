/* runtime/measurements.h — the measurement records compiled into this build.
 * Defined in ${CMAKE_BINARY_DIR}/generated/measurements.c, which CMake writes at
 * configure time from docs/measurements/<name>.json (each file's bytes, NUL-terminated),
 * in file-name order. Read them through nb_records_load_builtin (runtime/selector.h). */
#ifndef NB_RUNTIME_MEASUREMENTS_H
#define NB_RUNTIME_MEASUREMENTS_H

#include <stddef.h>

struct nb_builtin_record {
    const char *name; /* file name, e.g. "x86-AuthenticAMD-26-kjv-7m-w4a8-t2.json" */
    const char *json; /* its text, NUL-terminated */
    size_t size;      /* bytes, without the NUL */
};

extern const struct nb_builtin_record nb_builtin_records[]; /* nb_n_builtin_records entries */
extern const int nb_n_builtin_records;
extern const char nb_builtin_commit[]; /* NIBBLE_GIT_COMMIT at configure time */

#endif
