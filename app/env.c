/* app/env.c — nibble's environment variables, read here and nowhere else (env.h). */
#include "app/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void app_env_init(void)
{
    const char *log = getenv("NIBBLE_LOG");
    if (log && *log) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        int found = 0;
        for (int i = 0; i < 4; i++)
            if (!strcmp(log, names[i])) {
                nb_log_set_level((enum nb_log_level)i);
                found = 1;
            }
        if (!found)
            fprintf(stderr, "nibble: NIBBLE_LOG=%s is not one of error, warn, info, debug: "
                            "ignored\n", log);
    }
    const char *isa = getenv("NIBBLE_ISA"), *amx = getenv("NIBBLE_AMX");
    int allow_amx = amx && !strcmp(amx, "0") ? 0 : amx && !strcmp(amx, "all") ? 2 : 1;
    if (nb_set_isa(isa, allow_amx) != NB_OK) {
        fprintf(stderr, "nibble: NIBBLE_ISA=%s: %s: using the best this CPU has\n", isa,
                nb_last_error());
        nb_set_isa(NULL, allow_amx);
    }
}

const char *app_env_api_key(void)
{
    const char *k = getenv("NIBBLE_API_KEY");
    return k && *k ? k : NULL;
}

void app_env_layout(int *layout_rows, int64_t *repack_rows)
{
    const char *layout = getenv("NIBBLE_LAYOUT"), *rows = getenv("NIBBLE_REPACK_ROWS");
    *layout_rows = layout && !strcmp(layout, "rows");
    *repack_rows = rows ? strtoll(rows, NULL, 10) : 0;
}

int app_env_cache_dir(char *out, size_t size, const char **why)
{
    if (nb_cache_default_dir(getenv("XDG_CACHE_HOME"), getenv("HOME"), out, size) == NB_OK)
        return 1;
    *why = "neither XDG_CACHE_HOME nor HOME is set"; /* a literal: it outlives later errors */
    return 0;
}

const char *app_env_calib(void)
{
    static char found[4096];
    const char *env = getenv("NIBBLE_CALIB");
    if (env) return *env ? env : NULL; /* NIBBLE_CALIB= : none */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = '\0';
    /* the build tree (CMake copies it beside the binary), then an installed prefix */
    static const char *const rel[] = {"/share/nibble/calib.txt", "/../share/nibble/calib.txt"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        size_t a = strlen(exe), b = strlen(rel[i]);
        if (a + b >= sizeof found) continue;
        memcpy(found, exe, a);
        memcpy(found + a, rel[i], b + 1);
        if (access(found, R_OK) == 0) return found;
    }
    return NULL;
}

void app_env_select(struct nb_select_params *sp)
{
    sp->path = getenv("NIBBLE_WEIGHT_PATH");
    sp->path_from = "NIBBLE_WEIGHT_PATH";
    sp->records_dir = getenv("NIBBLE_MEASUREMENTS");
    if (sp->records_dir && !*sp->records_dir) sp->records_dir = NULL;
}
