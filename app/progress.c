/* app/progress.c — a progress bar for long quantizations (see progress.h). */
#include "app/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "app/log.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void app_progress_init(struct app_progress *p, const char *cmd, const char *what)
{
    *p = (struct app_progress){.cmd = cmd, .what = what, .verb = "quantizing", .tty = isatty(2)};
}

/* "1m12s" */
static void print_secs(char *buf, size_t size, double s)
{
    if (s >= 60)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, size, "%.0fs", s);
}

/* Not a terminal (a log): a plain line every few seconds instead of the bar. */
static void log_line(struct app_progress *p, int64_t done, int64_t total, double t)
{
    double now = now_s();
    if (done <= 0 || done >= total || now - p->t_line < APP_PROGRESS_LOG_S) return;
    char left[32];
    p->t_line = now;
    print_secs(left, sizeof left, t * (double)(total - done) / (double)done);
    app_note(p->cmd, "%s: %.0f%% (%lld of %lld), %s left", p->verb,
             100.0 * (double)done / (double)total, (long long)done, (long long)total, left);
}

void app_progress_cb(int64_t done, int64_t total, void *user)
{
    struct app_progress *p = user;
    if (!p->started) {
        p->started = 1;
        p->t0 = p->t_line = now_s();
        if (p->what) app_note(p->cmd, "%s ...", p->what);
    }
    /* a new total starts a new phase (quantize: GPTQ's layers, then writing the file) */
    if (total != p->total) {
        p->total = total;
        p->t_phase = now_s();
    }
    double t = now_s() - p->t_phase;
    if (!p->tty || app_log_quiet()) {
        if (!p->tty) log_line(p, done, total, t);
        return;
    }
    int w = 40, fill = total ? (int)(w * done / total) : w;
    fprintf(stderr, "\r[%.*s%*s] %lld/%lld %5.0f s", fill, "========================================",
            w - fill, "", (long long)done, (long long)total, t);
    if (done > 0 && done < total)
        fprintf(stderr, ", ~%.0f s left ", t * (double)(total - done) / (double)done);
    else
        fprintf(stderr, "%*s", 16, "");
    if (done == total) fprintf(stderr, "\n");
}

double app_progress_seconds(const struct app_progress *p)
{
    return p->started ? now_s() - p->t0 : 0;
}
