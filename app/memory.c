/* app/memory.c — RssAnon, MemAvailable, and the context-size check (memory.h). */
#include "app/memory.h"

#include <stdio.h>
#include <string.h>

/* The value in kB of `key` ("RssAnon:") in a /proc file, as bytes; -1 if absent. */
static int64_t proc_kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        long long kb;
        if (!strncmp(line, key, n) && sscanf(line + n, "%lld", &kb) == 1) {
            v = (int64_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

int64_t app_rss_anon(void) { return proc_kb("/proc/self/status", "RssAnon:"); }

int64_t app_mem_available(void) { return proc_kb("/proc/meminfo", "MemAvailable:"); }

int app_context_fits(const char *cmd, const struct nb_model *m, const struct nb_ctx_params *cp)
{
    struct nb_ctx_memory mem;
    if (nb_ctx_memory(m, cp, &mem) != NB_OK) return 1; /* nb_ctx_init says what is wrong */
    int64_t avail = app_mem_available();
    if (avail < 0 || mem.total_bytes <= avail) return 1;
    double gib = 1024.0 * 1024.0 * 1024.0;
    int64_t fit = mem.kv_bytes_per_token > 0
                      ? (avail - mem.work_bytes) / mem.kv_bytes_per_token / (cp->n_seq > 0 ? cp->n_seq : 1)
                      : 0;
    fprintf(stderr,
            "nibble %s: a context of %d tokens needs %.2f GiB (KV cache %.2f GiB as %s, scratch "
            "%.2f GiB) and %.2f GiB of memory is available: about %lld tokens fit; use a "
            "smaller -c or --kv-type q8_0 (nibble kv-budget shows the sizes)\n",
            cmd, cp->n_ctx, (double)mem.total_bytes / gib, (double)mem.kv_bytes / gib,
            nb_kv_type_name(cp->kv_type),
            (double)mem.work_bytes / gib, (double)avail / gib, (long long)(fit > 0 ? fit : 0));
    return 0;
}
