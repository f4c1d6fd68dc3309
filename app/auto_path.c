/* app/auto_path.c — the CLI's lines about `--path auto` and first-use quantization,
 * from the library's decision and report (auto_path.h). */
#include "app/auto_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/env.h"
#include "app/log.h"
#include "app/progress.h"

/* The decision, and the reasons a user should see when a model is quantized by it (the
 * record that verifies it or the lack of one, a missing --priority, an environment
 * override): once per model, not at every start (a cache hit says only which entry). */
static void print_choice(const char *cmd, const struct nb_selection *c)
{
    int host = !strcmp(c->target, "host");
    app_note(cmd, "--path auto: %s, recipe %s%s (kernel %s, %s) for %s%s%s", c->weight_path,
             c->recipe, c->gptq ? " + GPTQ" : "", c->kernel,
             c->verified ? "verified" : "unverified", c->priority, host ? "" : ", target ",
             host ? "" : c->target);
    for (int i = 0; i < c->n_reasons; i++)
        if (!strncmp(c->reasons[i], "verified", 8) || !strncmp(c->reasons[i], "unverified", 10) ||
            !strncmp(c->reasons[i], "target", 6) ||
            !strncmp(c->reasons[i], "no --priority", 13) || !strncmp(c->reasons[i], "NIBBLE_", 7))
            app_note(cmd, "  %s", c->reasons[i]);
}

int app_weight_path(const char *cmd, const char *name, const char *priority, const char *target,
                    const char **path, int *head_bits)
{
    static struct nb_selection c;
    static char chosen[sizeof c.weight_path];
    struct nb_select_params sp = nb_select_default_params();
    sp.priority = priority;
    sp.target = target;
    app_env_select(&sp);
    if (strcmp(name, "auto") != 0) {
        /* a fixed path: only the names are checked (the selector is not asked) */
        static const char *const names[] = {"w4a8", "w4a16", "w8a16", "bf16", "f32"};
        if (priority && strcmp(priority, "balanced") && strcmp(priority, "speed") &&
            strcmp(priority, "fidelity") && strcmp(priority, "memory")) {
            fprintf(stderr, "nibble %s: --priority '%s' is not one of balanced, speed, fidelity, memory\n",
                    cmd, priority);
            return 0;
        }
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(name, names[i])) {
                *path = names[i];
                return 1;
            }
        fprintf(stderr, "nibble %s: --path '%s' is not one of auto, w4a8, w4a16, w8a16, bf16, "
                        "f32\n", cmd, name);
        return 0;
    }
    c.size = sizeof c;
    if (nb_select_weight_path(&sp, NULL, &c) != NB_OK) {
        fprintf(stderr, "nibble %s: --path auto: %s\n", cmd, nb_last_error());
        return 0;
    }
    print_choice(cmd, &c);
    snprintf(chosen, sizeof chosen, "%s", c.weight_path);
    *path = chosen;
    if (head_bits && *head_bits == 0) *head_bits = c.head_bits;
    return 1;
}

/* What the progress callback needs: the report is filled with the choice before the
 * first call, so the choice is printed before the bar. */
struct opening {
    const char *cmd, *model;
    int use_cache, choice_printed;
    struct nb_open_report *rep;
    struct app_progress bar;
    char what[4400];
};

/* The choice, when the model is quantized now (or with -v): once. */
static void show_choice(struct opening *o, int quantizing)
{
    if (o->rep->selected && !o->choice_printed &&
        (quantizing || o->rep->quantized || app_log_verbose()))
        print_choice(o->cmd, &o->rep->selection);
    o->choice_printed = 1;
}

static void on_progress(int64_t done, int64_t total, void *user)
{
    struct opening *o = user;
    if (!o->bar.started) {
        show_choice(o, 1);
        snprintf(o->what, sizeof o->what, "quantizing %s as %s (first use: %s)", o->model,
                 o->rep->weight_path,
                 o->use_cache ? "the next start maps the cached file" : "--no-cache");
    }
    app_progress_cb(done, total, &o->bar);
}

int app_open_model(const char *cmd, const char *model, const char *path_name,
                   const char *priority, int n_threads, int use_cache, struct nb_model **out,
                   char *loaded, size_t loaded_size)
{
    struct nb_open_params p = nb_open_default_params();
    struct nb_open_report *r = calloc(1, sizeof *r);
    struct opening o = {cmd, model, use_cache, 0, r, {0}, ""};
    char dir[3072];
    const char *off = "--no-cache"; /* why there is no cache folder */
    if (!r) {
        fprintf(stderr, "nibble %s: out of memory\n", cmd);
        return 0;
    }
    r->size = sizeof *r;
    app_progress_init(&o.bar, cmd, o.what);
    p.path = path_name;
    p.select.priority = priority;
    app_env_select(&p.select);
    app_env_layout(&p.layout_rows, &p.repack_rows);
    p.n_threads = n_threads;
    p.use_cache = use_cache;
    int have_dir = use_cache && app_env_cache_dir(dir, sizeof dir, &off);
    p.cache_dir = have_dir ? dir : NULL;
    p.progress = on_progress;
    p.user = &o;
    p.calib_path = app_env_calib();
    enum nb_status st = nb_model_open(out, model, &p, r);
    if (st == NB_OK) show_choice(&o, 0); /* an error is its own message */
    if (r->path_ignored)
        fprintf(stderr, "nibble %s: %s is already packed: --path %s ignored\n", cmd, model,
                path_name);
    if (r->fell_back)
        fprintf(stderr, "nibble %s: %s does not fit %s (%s): running it as stored\n", cmd, model,
                r->selection.weight_path, r->why);
    if (!strcmp(r->cache_event, "memory")) /* without a folder, why is "the cache is turned off" */
        fprintf(stderr, "nibble %s: %s as %s: quantized into memory, not cached: %s%s%s%s\n", cmd,
                model, r->weight_path, r->why, have_dir ? "" : ": ", have_dir ? "" : off,
                use_cache ? " (--no-cache skips the cache quietly)" : "");
    else if (r->cache_event[0]) {
        int rebuilt = !strcmp(r->cache_event, "stale") || !strcmp(r->cache_event, "corrupt");
        app_note(cmd, "%s as %s: cache %s%s: %s%s%s%s", model, r->weight_path, r->cache_event,
                r->cache_waited ? " (after waiting for another nibble writing it)" : "",
                r->loaded, rebuilt ? " (rebuilt: " : "", rebuilt ? r->why : "", rebuilt ? ")" : "");
    }
    if (r->quantized) app_note(cmd, "quantized in %.1f s", r->quantize_s);
    if (r->route[0]) app_note(cmd, "%s: %s", model, r->route);
    if (r->repacked)
        app_note(cmd, "k-quant blocks repacked for the integer kernels in %.2f s (lossless)",
                 r->repack_s);
    snprintf(loaded, loaded_size, "%s", r->loaded);
    free(r);
    if (st != NB_OK) {
        app_error(cmd, "%s", nb_last_error());
        return 0;
    }
    return 1;
}
