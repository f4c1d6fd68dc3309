/* app/log.h — how much the CLI says on stderr, and in which form: -q/--quiet and
 * --log-disable (only warnings and errors), -v/--verbose (the selector's reasons at every
 * start, the library's info lines), --log-format json (one JSON object per line).
 * Accepted before the command (nibble -q run ...) and among any command's options that
 * go through arg_table (args.h). */
#ifndef NB_APP_LOG_H
#define NB_APP_LOG_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define APP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define APP_PRINTF(f, a)
#endif

/* argv[*i] when it is one of the options above: 1 (applied, *i past its value), 0 when it
 * is not, -1 after printing what is wrong with its value. */
int app_log_option(const char *cmd, int argc, char **argv, int *i);
/* The option names above, '|'-separated (for "did you mean"). */
extern const char app_log_option_names[];

int app_log_quiet(void);   /* -q or --log-disable */
int app_log_verbose(void); /* -v */

/* "nibble CMD: ..." on stderr: app_note for what a user may want to know (not with -q),
 * app_info for what only -v shows, app_warn and app_error always. With --log-format json
 * each becomes {"level":..., "cmd":..., "msg":...}; so does every other line on stderr
 * (level "info", or the library's own "nibble warn: ..." tag). */
void app_note(const char *cmd, const char *fmt, ...) APP_PRINTF(2, 3);
void app_info(const char *cmd, const char *fmt, ...) APP_PRINTF(2, 3);
void app_warn(const char *cmd, const char *fmt, ...) APP_PRINTF(2, 3);
/* A line with fields for machines (whatever -q says: the caller decides): with --log-format json, `fields` (JSON object
 * members, each with a leading comma: ",\"status\":200") follow "msg" in the object;
 * in text only the message is printed. */
void app_log_fields(const char *cmd, const char *fields, const char *fmt, ...) APP_PRINTF(3, 4);
int app_log_json(void); /* --log-format json is on */
/* s[0..n) as the body of a JSON string into out (room for 6 bytes a byte of s); its length. */
size_t app_json_escape(char *out, const char *s, size_t n);
void app_error(const char *cmd, const char *fmt, ...) APP_PRINTF(2, 3);

#endif
