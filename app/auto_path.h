/* app/auto_path.h — `--path auto|P` and `--priority P` for run, quantize and bench. */
#ifndef NB_APP_AUTO_PATH_H
#define NB_APP_AUTO_PATH_H

#include "kernels/layout.h"

/* name: "auto" or a weight path; priority: "speed" | "fidelity" | "memory" or NULL (not
 * given: speed, with the agentic-use warning on stderr). For auto, the selector decides
 * (runtime/selector.h) and the choice, "verified"/"unverified" and its record go to
 * stderr; *head_bits (may be NULL) is set when it is still 0. Prints
 * "nibble CMD: ..." and returns 0 on a bad value, 1 on success. */
int app_weight_path(const char *cmd, const char *name, const char *priority, enum nb_wpath *out,
                    int *head_bits);

#endif
