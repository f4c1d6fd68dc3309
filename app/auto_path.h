/* app/auto_path.h — `--path auto|P` and `--priority P` for run, quantize and bench. */
#ifndef NB_APP_AUTO_PATH_H
#define NB_APP_AUTO_PATH_H

#include <stddef.h>

#include "core/wformat.h"
#include "nibble.h"

/* name: "auto" or a weight path; priority: "speed" | "fidelity" | "memory" or NULL (not
 * given: speed, with the agentic-use warning on stderr). For auto, the selector decides
 * (runtime/selector.h) and the choice, "verified"/"unverified" and its record go to
 * stderr; *head_bits (may be NULL) is set when it is still 0. Prints
 * "nibble CMD: ..." and returns 0 on a bad value, 1 on success. */
int app_weight_path(const char *cmd, const char *name, const char *priority, enum nb_wpath *out,
                    int *head_bits);

/* Load `model` as weight path `path_name` ("auto" when NULL; "source": the weights as
 * stored, no quantization). A float source is quantized on first use into the
 * warm-start cache (runtime/cache.h; the event goes to stderr), or into memory when
 * use_cache is 0 (--no-cache) or the cache cannot be written; a .nib is used as it is.
 * Under auto, a source whose shapes do not fit the chosen path runs as stored, with a
 * warning. `loaded` receives what was loaded (the model, the cache entry or
 * "(in memory)"). Returns 0 (message printed) on failure. */
struct nb_model;
int app_open_model(const char *cmd, const char *model, const char *path_name,
                   const char *priority, int n_threads, int use_cache, struct nb_model **out,
                   char *loaded, size_t loaded_size);

#endif
