/* core/error.c — status strings and the thread-local error message. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NB_ERR_MSG_MAX 1024

static _Thread_local char g_msg[NB_ERR_MSG_MAX];

const char *nb_status_str(enum nb_status s)
{
    switch (s) {
    case NB_OK: return "ok";
    case NB_ERR_IO: return "i/o error";
    case NB_ERR_FORMAT: return "format error";
    case NB_ERR_UNSUPPORTED: return "unsupported";
    case NB_ERR_INVALID_ARG: return "invalid argument";
    case NB_ERR_NOMEM: return "out of memory";
    case NB_ERR_NOT_FOUND: return "not found";
    case NB_ERR_RANGE: return "out of range";
    case NB_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *nb_last_error(void) { return g_msg; }

const char *nb_version(void) { return NIBBLE_VERSION_STRING; }

void nb_clear_error(void) { g_msg[0] = '\0'; }

enum nb_status nb_set_error(enum nb_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return s;
}

enum nb_status nb_wrap_error(enum nb_status s, const char *fmt, ...)
{
    char prefix[NB_ERR_MSG_MAX];
    char old[NB_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    /* prefix + old message, cut to the buffer (explicit, so no truncation warning) */
    size_t np = strnlen(prefix, sizeof prefix - 1);
    size_t no = strnlen(old, sizeof old - 1);
    if (no > sizeof g_msg - 1 - np) no = sizeof g_msg - 1 - np;
    memcpy(g_msg, prefix, np);
    memcpy(g_msg + np, old, no);
    g_msg[np + no] = '\0';
    return s;
}
