/* app/auto_path.h — `--path auto|P` and `--priority P` for run, chat, quantize and bench:
 * the library decides (nb_select_weight_path, nb_model_open); these print what it
 * decided on stderr, as "nibble CMD: ..." lines. */
#ifndef NB_APP_AUTO_PATH_H
#define NB_APP_AUTO_PATH_H

#include <stddef.h>

#include "nibble.h"

/* name: "auto" or a weight path; priority: "speed" | "fidelity" | "memory" or NULL (not
 * given: speed, with the agentic-use warning on stderr); target: "host" | "phone" | "arm"
 * or NULL (host): whom auto chooses for. For auto, the selector decides
 * and the choice, "verified"/"unverified" and its record go to stderr; *head_bits (may
 * be NULL) is set when it is still 0. *path receives the weight path's name (static
 * storage). Prints "nibble CMD: ..." and returns 0 on a bad value, 1 on success. */
int app_weight_path(const char *cmd, const char *name, const char *priority, const char *target,
                    const char **path, int *head_bits);

/* Load `model` as weight path `path_name` ("auto" when NULL; "source": the weights as
 * stored) through nb_model_open, with the environment's cache folder, selector records
 * and layout (app/env.h) and a progress bar (app/progress.h) while a float source is
 * quantized on first use; --no-cache is use_cache 0. What happened (the choice, the
 * cache event, a fallback to the stored weights) goes to stderr. `loaded` receives what
 * was loaded (the model, the cache entry or "(in memory)"). Returns 0 (message printed)
 * on failure. */
int app_open_model(const char *cmd, const char *model, const char *path_name,
                   const char *priority, int n_threads, int use_cache, struct nb_model **out,
                   char *loaded, size_t loaded_size);

#endif
