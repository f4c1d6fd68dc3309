/* core/log.c — levelled logging to stderr. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int g_level = -1; /* -1: not yet read from NIBBLE_LOG */

static int level_from_env(void)
{
    const char *e = getenv("NIBBLE_LOG");
    if (!e) return NB_LOG_WARN;
    if (!strcmp(e, "error")) return NB_LOG_ERROR;
    if (!strcmp(e, "warn")) return NB_LOG_WARN;
    if (!strcmp(e, "info")) return NB_LOG_INFO;
    if (!strcmp(e, "debug")) return NB_LOG_DEBUG;
    return NB_LOG_WARN;
}

void nb_log_set_level(enum nb_log_level level) { atomic_store(&g_level, (int)level); }

int nb_log_enabled(enum nb_log_level level)
{
    int l = atomic_load(&g_level);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&g_level, l);
    }
    return (int)level <= l;
}

void nb_log(enum nb_log_level level, const char *fmt, ...)
{
    static const char *tag[] = {"error", "warn", "info", "debug"};
    if (!nb_log_enabled(level)) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nibble %s: %s\n", tag[level], buf);
}
