/* app/auto_path.c — resolve `--path auto` through the weight-path selector. */
#include "app/auto_path.h"

#include <stdio.h>
#include <string.h>

#include "runtime/selector.h"

int app_weight_path(const char *cmd, const char *name, const char *priority, enum nb_wpath *out,
                    int *head_bits)
{
    enum nb_priority prio = NB_PRIORITY_SPEED;
    static struct nb_choice c;
    if (priority && !nb_priority_from_name(priority, &prio)) {
        fprintf(stderr, "nibble %s: --priority '%s' is not one of speed, fidelity, memory\n", cmd,
                priority);
        return 0;
    }
    if (strcmp(name, "auto") != 0) {
        if (nb_wpath_from_name(name, out)) return 1;
        fprintf(stderr,
                "nibble %s: --path '%s' is not one of auto, w4a8, w4a16, w8a16, bf16, "
                "f32\n",
                cmd, name);
        return 0;
    }
    if (nb_select_resolve(name, prio, priority != NULL, out, head_bits, &c) != NB_OK) {
        fprintf(stderr, "nibble %s: --path auto: %s\n", cmd, nb_last_error());
        return 0;
    }
    fprintf(stderr, "nibble %s: --path auto: %s (kernel %s, %d-bit head, %s) for %s\n", cmd,
            nb_wpath_name(c.path), c.kernel, c.head_bits, c.verified ? "verified" : "unverified",
            nb_priority_name(prio));
    for (int i = 0; i < c.n_reasons; i++)
        if (!strncmp(c.reasons[i], "verified", 8) || !strncmp(c.reasons[i], "unverified", 10) ||
            !strncmp(c.reasons[i], "no --priority", 13) || !strncmp(c.reasons[i], "NIBBLE_", 7))
            fprintf(stderr, "nibble %s:   %s\n", cmd, c.reasons[i]);
    return 1;
}
