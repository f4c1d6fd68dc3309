/* app/bench_record.h — `nibble bench --record DIR`: one measurement record per (model,
 * weight path), the files the selector (runtime/selector.h) reads. */
#ifndef NB_APP_BENCH_RECORD_H
#define NB_APP_BENCH_RECORD_H

#include "eval/bench.h"
#include "nibble.h"

struct bench_record {
    const char *model_arg;  /* as given to -m */
    const char *model_file; /* what was loaded (a .nib: its header gives the head) */
    const struct nb_model_info *info;
    int threads;
    int n_prompt, n_gen;
    const double *pp, *tg; /* samples, tok/s */
    int n_pp, n_tg;
    double read_bw_gbs, roofline_fraction;
    int argc; /* the bench command line, stored in the record ("how to re-run it") */
    char **argv;
};

/* Write DIR/<family-key>-<model>-<path>-t<threads>.json (DIR is created if missing)
 * and print its name to stderr. 0 (with a message on stderr) on failure or for a
 * float model (no weight path to record). */
int bench_record_write(const char *dir, const struct bench_record *r);

#endif
