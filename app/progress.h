/* app/progress.h — the progress of a long quantization, on stderr: a bar on a terminal,
 * otherwise (a log) a line at the start and one every APP_PROGRESS_LOG_S seconds
 * ("quantizing: 37% (21 of 56), 1m12s left") (quantize, and the first use of a float
 * model by run, chat and bench). -q: none of it. */
#ifndef NB_APP_PROGRESS_H
#define NB_APP_PROGRESS_H

#include <stdint.h>

#define APP_PROGRESS_LOG_S 5.0

struct app_progress {
    const char *cmd;  /* "nibble CMD: ..." */
    const char *what; /* printed when the work starts, e.g. "quantizing m.gguf as w4a8" */
    const char *verb; /* the log lines' first word: "quantizing" */
    int tty;          /* stderr is a terminal: draw the bar */
    int started;      /* the callback has run */
    double t0;        /* when it started */
    int64_t total;    /* the current phase's total */
    double t_phase;   /* when the current phase started */
    double t_line;    /* when the last log line was printed */
};

void app_progress_init(struct app_progress *p, const char *cmd, const char *what);
/* An nb_progress_fn; `user` points to a struct app_progress. */
void app_progress_cb(int64_t done, int64_t total, void *user);
/* Seconds since the first callback (0 when it never ran). */
double app_progress_seconds(const struct app_progress *p);

#endif
