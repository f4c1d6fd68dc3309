/* app/auto_path.c — resolve `--path auto` through the weight-path selector. */
#include "app/auto_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/env.h"
#include "app/progress.h"
#include "formats/sniff.h"
#include "model/model.h"
#include "runtime/cache.h"
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
                "nibble %s: --path '%s' is not one of auto, source, w4a8, w4a16, w8a16, "
                "bf16, f32\n",
                cmd, name);
        return 0;
    }
    struct nb_select_overrides ov;
    app_env_select(&ov);
    if (nb_select_resolve(name, prio, priority != NULL, &ov, out, head_bits, &c) != NB_OK) {
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

static int load_as_stored(const char *cmd, const char *model, struct nb_model **out)
{
    if (nb_model_load(out, model) == NB_OK) return 1;
    fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
    return 0;
}

static int is_packed(const char *path)
{
    enum nb_file_kind kind;
    return nb_sniff_path(path, &kind) == NB_OK && kind == NB_FILE_NIB;
}

int app_open_model(const char *cmd, const char *model, const char *path_name,
                   const char *priority, int n_threads, int use_cache, struct nb_model **out,
                   char *loaded, size_t loaded_size)
{
    *out = NULL;
    snprintf(loaded, loaded_size, "%s", model);
    int is_auto = !path_name || !strcmp(path_name, "auto");
    if ((path_name && !strcmp(path_name, "source")) || is_packed(model)) {
        if (path_name && !is_auto && strcmp(path_name, "source") != 0)
            fprintf(stderr, "nibble %s: %s is already packed: --path %s ignored\n", cmd, model,
                    path_name);
        return load_as_stored(cmd, model, out);
    }
    struct nb_quantize_opts qo;
    nb_quantize_default_opts(&qo);
    app_env_quantize(&qo);
    qo.n_threads = n_threads;
    if (!app_weight_path(cmd, is_auto ? "auto" : path_name, priority, &qo.path, &qo.head_bits))
        return 0;
    char what[4400];
    snprintf(what, sizeof what, "quantizing %s as %s (first use: %s)", model,
             nb_wpath_name(qo.path),
             use_cache ? "the next start maps the cached file" : "--no-cache");
    struct app_progress bar;
    app_progress_init(&bar, cmd, what);
    qo.progress = app_progress_cb;
    qo.user = &bar;
    struct nb_cache_entry *e = calloc(1, sizeof *e);
    if (!e) {
        fprintf(stderr, "nibble %s: out of memory\n", cmd);
        return 0;
    }
    char dir[3072];
    const char *off = "--no-cache"; /* why there is no cache folder */
    int have_dir = use_cache && app_env_cache_dir(dir, sizeof dir, &off);
    enum nb_status st = nb_cache_get(model, &qo, have_dir ? dir : NULL, e);
    if (st != NB_OK) {
        free(e);
        if (is_auto && st == NB_ERR_INVALID_ARG) {
            fprintf(stderr, "nibble %s: %s does not fit %s (%s): running it as stored\n", cmd,
                    model, nb_wpath_name(qo.path), nb_last_error());
            return load_as_stored(cmd, model, out);
        }
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        return 0;
    }
    int rebuilt = e->event == NB_CACHE_STALE || e->event == NB_CACHE_CORRUPT;
    if (e->event == NB_CACHE_MEMORY) /* without a folder, e->why is "the cache is turned off" */
        fprintf(stderr, "nibble %s: %s as %s: quantized into memory, not cached: %s%s%s%s\n", cmd,
                model, nb_wpath_name(qo.path), e->why, have_dir ? "" : ": ", have_dir ? "" : off,
                use_cache ? " (--no-cache skips the cache quietly)" : "");
    else
        fprintf(stderr, "nibble %s: %s as %s: cache %s%s: %s%s%s%s\n", cmd, model,
                nb_wpath_name(qo.path), nb_cache_event_name(e->event),
                e->waited ? " (after waiting for another nibble writing it)" : "", e->path,
                rebuilt ? " (rebuilt: " : "", rebuilt ? e->why : "", rebuilt ? ")" : "");
    if (bar.started)
        fprintf(stderr, "nibble %s: quantized in %.1f s\n", cmd, app_progress_seconds(&bar));
    snprintf(loaded, loaded_size, "%s", e->path);
    st = nb_model_load_nib(out, e->nib); /* the mapping nb_cache_get verified */
    free(e);
    if (st != NB_OK) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        return 0;
    }
    return 1;
}
