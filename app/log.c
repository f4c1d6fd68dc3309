/* app/log.c — the CLI's verbosity and log format (log.h).
 *
 * --log-format json turns fd 2 into a pipe read by one thread, which writes each line it
 * gets to the real stderr as a JSON object: every line, whoever prints it (app/, the
 * library's log, a child process), comes out as JSON. app_note and friends mark their
 * lines with a level ("\036" + a letter) that the thread reads and drops. */
#include "app/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"

const char app_log_option_names[] =
    "-q|--quiet|--log-disable|-v|--verbose|--log-verbose|--log-format";

static int g_verbosity; /* -1: -q, 0, 1: -v */
static int g_json;      /* --log-format json: fd 2 is the pipe */
static int g_real_fd = -1;
static pthread_t g_pump;

int app_log_quiet(void) { return g_verbosity < 0; }
int app_log_verbose(void) { return g_verbosity > 0; }

/* ---------------------------------------------------------------- JSON lines */

/* s[0..n) as a JSON string body into out (at most 6 bytes a byte of s). */
size_t app_json_escape(char *out, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)sprintf(out + k, "\\u%04x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    return k;
}

/* One line (no '\n') as {"level","cmd","msg"} on the real stderr; app_log_fields's
 * with its fields after "msg". */
static void emit_line(const char *line, size_t n)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    const char *level = "info", *fields = "";
    size_t n_fields = 0;
    if (n >= 2 && line[0] == '\036') { /* app_note / app_info / app_warn / app_error */
        level = line[1] == 'w' ? "warn" : line[1] == 'e' ? "error" : "info";
        const char *sep = line[1] == 'f' ? memchr(line, '\037', n) : NULL;
        if (sep) { /* app_log_fields: "msg\037,\"key\":value..." */
            fields = sep + 1;
            n_fields = (size_t)(line + n - fields);
            n = (size_t)(sep - line);
        }
        line += 2, n -= 2;
    }
    const char *cmd = NULL;
    size_t cmd_len = 0;
    if (n > 7 && !memcmp(line, "nibble ", 7)) { /* "nibble CMD: msg" */
        const char *colon = memchr(line + 7, ':', n - 7);
        if (colon && colon + 1 < line + n && colon[1] == ' ' &&
            !memchr(line + 7, ' ', (size_t)(colon - line - 7))) {
            cmd = line + 7;
            cmd_len = (size_t)(colon - cmd);
            n -= (size_t)(colon + 2 - line);
            line = colon + 2;
            for (int t = 0; cmd && t < 4; t++) /* the library's log: "nibble warn: ..." */
                if (strlen(tags[t]) == cmd_len && !memcmp(cmd, tags[t], cmd_len))
                    level = tags[t], cmd = NULL;
        }
    }
    char *out = malloc(64 + 6 * (n + cmd_len) + n_fields);
    if (!out) return;
    size_t k = (size_t)sprintf(out, "{\"level\":\"%s\"", level);
    if (cmd) {
        k += (size_t)sprintf(out + k, ",\"cmd\":\"");
        k += app_json_escape(out + k, cmd, cmd_len);
        out[k++] = '"';
    }
    k += (size_t)sprintf(out + k, ",\"msg\":\"");
    k += app_json_escape(out + k, line, n);
    out[k++] = '"';
    memcpy(out + k, fields, n_fields);
    k += n_fields;
    k += (size_t)sprintf(out + k, "}\n");
    for (size_t w = 0; w < k;) {
        ssize_t r = write(g_real_fd, out + w, k - w);
        if (r <= 0) break;
        w += (size_t)r;
    }
    free(out);
}

/* The thread: lines from the pipe until every writer has closed it. */
static void *pump(void *arg)
{
    int fd = *(int *)arg;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    for (ssize_t r; buf;) {
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
        if ((r = read(fd, buf + len, cap - len)) <= 0) break;
        len += (size_t)r;
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
            emit_line(start, (size_t)(nl - start));
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
    }
    if (buf && len) emit_line(buf, len); /* a last line without '\n' */
    free(buf);
    close(fd);
    return NULL;
}

static void json_stop(void)
{
    fflush(stderr);
    dup2(g_real_fd, 2); /* closes the pipe's last write end: the thread sees its end */
    pthread_join(g_pump, NULL);
}

static int json_start(void)
{
    static int rd;
    int p[2];
    if (g_json) return 1;
    fflush(stderr);
    if (pipe(p) != 0) return 0;
    if ((g_real_fd = dup(2)) < 0 || dup2(p[1], 2) < 0) {
        close(p[0]), close(p[1]);
        return 0;
    }
    close(p[1]);
    rd = p[0];
    if (pthread_create(&g_pump, NULL, pump, &rd) != 0) {
        dup2(g_real_fd, 2);
        close(rd);
        return 0;
    }
    g_json = 1;
    atexit(json_stop);
    return 1;
}

/* ---------------------------------------------------------------- options */

int app_log_option(const char *cmd, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet") || !strcmp(a, "--log-disable")) {
        g_verbosity = -1;
        nb_log_set_level(NB_LOG_ERROR);
        return 1;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose") || !strcmp(a, "--log-verbose")) {
        g_verbosity = 1;
        nb_log_set_level(NB_LOG_INFO);
        return 1;
    }
    const char *v = NULL;
    if (!strncmp(a, "--log-format=", 13))
        v = a + 13;
    else if (!strcmp(a, "--log-format")) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "nibble%s%s: option %s needs a value\n", *cmd ? " " : "", cmd, a);
            return -1;
        }
        v = argv[++*i];
    } else
        return 0;
    if (!strcmp(v, "text")) return 1;
    if (strcmp(v, "json") != 0) {
        fprintf(stderr, "nibble%s%s: --log-format: '%s' is not one of text or json\n",
                *cmd ? " " : "", cmd, v);
        return -1;
    }
    if (!json_start())
        fprintf(stderr, "nibble%s%s: --log-format json: no pipe or thread: text it is\n",
                *cmd ? " " : "", cmd);
    return 1;
}

/* ---------------------------------------------------------------- lines */

static void say(char mark, const char *cmd, const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (g_json)
        fprintf(stderr, "\036%cnibble %s: %s\n", mark, cmd, msg);
    else
        fprintf(stderr, "nibble %s: %s\n", cmd, msg);
}

void app_note(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    if (g_verbosity < 0) return;
    va_start(ap, fmt);
    say('n', cmd, fmt, ap);
    va_end(ap);
}

void app_info(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    if (g_verbosity <= 0) return;
    va_start(ap, fmt);
    say('i', cmd, fmt, ap);
    va_end(ap);
}

int app_log_json(void) { return g_json; }

void app_log_fields(const char *cmd, const char *fields, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_json)
        fprintf(stderr, "\036fnibble %s: %s\037%s\n", cmd, msg, fields);
    else
        fprintf(stderr, "nibble %s: %s\n", cmd, msg);
}

void app_warn(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say('w', cmd, fmt, ap);
    va_end(ap);
}

void app_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say('e', cmd, fmt, ap);
    va_end(ap);
}
