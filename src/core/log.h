/* core/log.h — levelled logging to stderr (never stdout). */
#ifndef NB_CORE_LOG_H
#define NB_CORE_LOG_H

#include "core/error.h"

void nb_log(enum nb_log_level level, const char *fmt, ...) NB_PRINTF(2, 3);
int nb_log_enabled(enum nb_log_level level);

#define NB_LOGE(...) nb_log(NB_LOG_ERROR, __VA_ARGS__)
#define NB_LOGW(...) nb_log(NB_LOG_WARN, __VA_ARGS__)
#define NB_LOGI(...) nb_log(NB_LOG_INFO, __VA_ARGS__)
#define NB_LOGD(...) nb_log(NB_LOG_DEBUG, __VA_ARGS__)

#endif
