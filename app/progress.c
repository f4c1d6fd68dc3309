/* app/progress.c — a progress bar for long quantizations (see progress.h). */
#include "app/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void app_progress_init(struct app_progress *p, const char *cmd, const char *what)
{
    *p = (struct app_progress){.cmd = cmd, .what = what, .tty = isatty(2)};
}

void app_progress_cb(int64_t done, int64_t total, void *user)
{
    struct app_progress *p = user;
    if (!p->started) {
        p->started = 1;
        p->t0 = now_s();
        if (p->what) fprintf(stderr, "nibble %s: %s ...\n", p->cmd, p->what);
    }
    if (!p->tty) return;
    /* a new total starts a new phase (quantize: GPTQ's layers, then writing the file) */
    if (total != p->total) {
        p->total = total;
        p->t_phase = now_s();
    }
    double t = now_s() - p->t_phase;
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
