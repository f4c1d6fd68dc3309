/* core/log.c — levelled logging to stderr. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int g_level = NB_LOG_WARN; /* nb_log_set_level (the CLI: NIBBLE_LOG) */

void nb_log_set_level(enum nb_log_level level) { atomic_store(&g_level, (int)level); }

int nb_log_enabled(enum nb_log_level level)
{
    return (int)level <= atomic_load(&g_level);
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
