/* core/error.h — status codes and the thread-local error message.
 *
 * Every failing library call sets a message with nb_set_error() and returns the
 * status it passes through, so a failure site reads:
 *     return nb_set_error(NB_ERR_FORMAT, "%s: tensor '%s': offset %llu past end", ...);
 */
#ifndef NB_CORE_ERROR_H
#define NB_CORE_ERROR_H

#include "nibble.h"

#if defined(__GNUC__)
#define NB_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NB_PRINTF(a, b)
#endif

/* Set this thread's error message; returns `s` so it can be returned directly. */
enum nb_status nb_set_error(enum nb_status s, const char *fmt, ...) NB_PRINTF(2, 3);
/* Prepend context ("loading X: ") to the current message; returns `s`. */
enum nb_status nb_wrap_error(enum nb_status s, const char *fmt, ...) NB_PRINTF(2, 3);
void nb_clear_error(void);

#endif
