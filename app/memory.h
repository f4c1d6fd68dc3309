/* app/memory.h — what the process's memory is (RssAnon, MemAvailable), and the check that
 * refuses a context that will not fit before anything is allocated. */
#ifndef NB_APP_MEMORY_H
#define NB_APP_MEMORY_H

#include <stdint.h>

#include "nibble.h"

/* Anonymous resident memory of this process (RssAnon of /proc/self/status): what the KV
 * cache, scratch and heap cost, without the mapped model file (VmRSS counts it). Bytes,
 * or -1 where the kernel does not say. */
int64_t app_rss_anon(void);
/* MemAvailable of /proc/meminfo in bytes, or -1. */
int64_t app_mem_available(void);
/* 1 when a context with params `cp` fits in the memory available now; else prints why
 * (the sizes, and what would fit) and returns 0. */
int app_context_fits(const char *cmd, const struct nb_model *m, const struct nb_ctx_params *cp);

#endif
