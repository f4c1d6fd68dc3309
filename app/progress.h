/* app/progress.h — the progress of a long quantization, on stderr: a bar on a terminal,
 * one line at the start and one at the end otherwise (quantize, and the first use of a
 * float model by run and bench). */
#ifndef NB_APP_PROGRESS_H
#define NB_APP_PROGRESS_H

#include <stdint.h>

struct app_progress {
    const char *cmd;  /* "nibble CMD: ..." */
    const char *what; /* printed when the work starts, e.g. "quantizing m.gguf as w4a8" */
    int tty;          /* stderr is a terminal: draw the bar */
    int started;      /* the callback has run */
    double t0;        /* when it started */
    int64_t total;    /* the current phase's total */
    double t_phase;   /* when the current phase started */
};

void app_progress_init(struct app_progress *p, const char *cmd, const char *what);
/* An nb_progress_fn; `user` points to a struct app_progress. */
void app_progress_cb(int64_t done, int64_t total, void *user);
/* Seconds since the first callback (0 when it never ran). */
double app_progress_seconds(const struct app_progress *p);

#endif
