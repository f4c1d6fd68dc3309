/* app/env.c — nibble's environment variables, read here and nowhere else (env.h). */
#include "app/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    int allow_amx = 1;
    if (amx && *amx) {
        if (!strcmp(amx, "0")) allow_amx = 0;
        else if (!strcmp(amx, "all")) allow_amx = 2;
        else if (strcmp(amx, "1"))
            fprintf(stderr, "nibble: NIBBLE_AMX=%s is not one of 0, 1, all: ignored\n", amx);
    }
    const char *mm = getenv("NIBBLE_MMAP");
    if (mm && *mm) {
        if (!strcmp(mm, "1")) nb_set_weight_copy(0);
        else if (strcmp(mm, "0"))
            fprintf(stderr, "nibble: NIBBLE_MMAP=%s is not one of 0, 1: ignored\n", mm);
    }
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
    const char *env = getenv("NIBBLE_CALIB");
    if (env) return *env ? env : NULL; /* NIBBLE_CALIB= : none */
    return nb_calib_default_path();    /* the library's lookup, so it finds the same text */
}

void app_env_select(struct nb_select_params *sp)
{
    sp->path = getenv("NIBBLE_WEIGHT_PATH");
    sp->path_from = "NIBBLE_WEIGHT_PATH";
    sp->records_dir = getenv("NIBBLE_MEASUREMENTS");
    if (sp->records_dir && !*sp->records_dir) sp->records_dir = NULL;
}

int app_env_chat_history(char *out, size_t size)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n = -1;
    if (state && state[0] == '/') n = snprintf(out, size, "%s/nibble/chat_history", state);
    else if (home && *home) n = snprintf(out, size, "%s/.local/state/nibble/chat_history", home);
    if (n < 0 || (size_t)n >= size) return 0;
    /* each folder of the path in turn (mkdir -p), the file's name left out */
    for (char *p = out + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        int ok = mkdir(out, 0700) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return 0;
    }
    return 1;
}
