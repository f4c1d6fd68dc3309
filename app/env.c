/* app/env.c — nibble's environment variables, read here and nowhere else (env.h). */
#include "app/env.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/cache.h"

void app_env_quantize(struct nb_quantize_opts *o)
{
    const char *layout = getenv("NIBBLE_LAYOUT"), *rows = getenv("NIBBLE_REPACK_ROWS");
    o->layout = layout && !strcmp(layout, "rows") ? NB_LAYOUT_ROWS : NB_LAYOUT_X16;
    o->repack_rows = rows ? strtoll(rows, NULL, 10) : 0;
}

int app_env_cache_dir(char *out, size_t size, const char **why)
{
    *why = NULL;
    if (nb_cache_default_dir(getenv("XDG_CACHE_HOME"), getenv("HOME"), out, size) == NB_OK)
        return 1;
    *why = "neither XDG_CACHE_HOME nor HOME is set";
    return 0;
}
