/* runtime/open.c — nb_model_open: a model opened as `nibble run` opens it. The weight
 * path is resolved ("auto": the selector), a float source is quantized once into the
 * warm-start cache (or into memory) and the verified mapping is loaded; a .nib runs as
 * it is. Nothing is printed: what happened goes to the caller's report, which the CLI
 * turns into its stderr lines. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/timer.h"
#include "formats/gguf.h"
#include "formats/hfquant.h"
#include "formats/json.h"
#include "formats/source.h"
#include "model/model.h"
#include "runtime/api.h"
#include "runtime/cache.h"
#include "runtime/quantize.h"
#include "runtime/recipe.h"

/* ---------------------------------------------------------------- defaults
 * What `nibble run` opens a model with unless told otherwise, found here once per
 * process so that every program of the library gets the same: the warm-start cache
 * folder (nb_cache_default_dir over $XDG_CACHE_HOME and $HOME) and the calibration text
 * installed with nibble. */

static pthread_once_t g_defaults_once = PTHREAD_ONCE_INIT;
static char g_cache_dir[3072]; /* "" when neither variable is set */
static char g_calib[4096];     /* "" when no text is installed */

/* The folder of the file this code runs from, resolved: libnibble.so's, or that of the
 * program the static library is linked into (the main program's link map has no name).
 * 0 when it cannot be told. */
static int code_dir(char *out, size_t size)
{
    Dl_info info;
    struct link_map *lm = NULL;
    char exe[4096];
    const char *file = NULL;
    if (dladdr1(g_calib, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && lm->l_name &&
        lm->l_name[0])
        file = lm->l_name;
    if (!file) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return 0;
        exe[n] = '\0';
        file = exe;
    }
    char *real = realpath(file, NULL);
    char *slash = real ? strrchr(real, '/') : NULL;
    int ok = slash && (size_t)(slash - real) < size;
    if (ok) {
        *slash = '\0';
        snprintf(out, size, "%s", real);
    }
    free(real);
    return ok;
}

static void find_defaults(void)
{
    if (nb_cache_default_dir(getenv("XDG_CACHE_HOME"), getenv("HOME"), g_cache_dir,
                             sizeof g_cache_dir) != NB_OK)
        g_cache_dir[0] = '\0';
    /* share/nibble/calib.txt of the tree the code is in: a build folder (CMake copies it
     * there, beside the program and the library), or the prefix of an installed lib/,
     * lib/<multiarch>/ or bin/ */
    static const char *const rel[] = {"/share/nibble/calib.txt", "/../share/nibble/calib.txt",
                                      "/../../share/nibble/calib.txt"};
    char dir[4096], path[4200];
    if (!code_dir(dir, sizeof dir)) return;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, rel[i]);
        char *real = access(path, R_OK) == 0 ? realpath(path, NULL) : NULL;
        if (real && strlen(real) < sizeof g_calib) {
            /* one spelling, whoever finds it: the path is recorded in the .nib it builds */
            memcpy(g_calib, real, strlen(real) + 1);
            free(real);
            return;
        }
        free(real);
    }
}

const char *nb_calib_default_path(void)
{
    pthread_once(&g_defaults_once, find_defaults);
    return g_calib[0] ? g_calib : NULL;
}

struct nb_open_params nb_open_default_params(void)
{
    struct nb_open_params p = {.size = sizeof p, .use_cache = 1};
    pthread_once(&g_defaults_once, find_defaults);
    p.cache_dir = g_cache_dir[0] ? g_cache_dir : NULL;
    p.calib_path = g_calib[0] ? g_calib : NULL;
    p.select = nb_select_default_params();
    return p;
}

/* The state of one open, handed to the quantizer's progress callback. */
struct opening {
    struct nb_open_report r;       /* the library's full report */
    struct nb_open_report *caller; /* published to on the first progress call and at the end */
    nb_progress_fn progress;
    void *user;
    int started;
    double t0;
};

static void on_progress(int64_t done, int64_t total, void *user)
{
    struct opening *o = user;
    if (!o->started) { /* the choice is in the report before the caller's first call */
        o->started = 1;
        o->t0 = nb_time_s();
        nb_api_out(o->caller, &o->r, sizeof o->r);
    }
    if (o->progress) o->progress(done, total, o->user);
}

static const char *event_name(enum nb_cache_event e)
{
    switch (e) {
    case NB_CACHE_HIT: return "hit";
    case NB_CACHE_MISS: return "miss";
    case NB_CACHE_STALE: return "stale";
    case NB_CACHE_CORRUPT: return "corrupt";
    default: return "memory";
    }
}

/* Does the model carry 4-bit codes that w4a16 keeps and w4a8 cannot: a GGUF file whose
 * layer matrices are mostly Q4_K (docs/interop.md: kjv-7m Q4_K_M, KL 0.000540 on w4a16
 * against 0.000942 on w4a8), or an asymmetric GPTQ / AWQ checkpoint? Then a short reason
 * for the report, else NULL. Reads headers only; anything unreadable says no (the load
 * that follows reports it). */
static const char *codes_want_w4a16(struct nb_source *model)
{
    if (model->kind == NB_FILE_GGUF) {
        const struct nb_gguf *g = model->gguf;
        int64_t n_q4k = 0, n_mat = 0;
        for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
            const struct nb_tensor *t = nb_gguf_tensor(g, i);
            if (t->n_dims != 2 || strncmp(t->name, "blk.", 4) != 0) continue;
            n_mat++;
            n_q4k += t->dtype == NB_DTYPE_Q4_K;
        }
        return n_mat && 2 * n_q4k >= n_mat ? "the model file (its Q4_K codes are kept on "
                                             "w4a16; w4a8's symmetric grid would round them "
                                             "again)"
                                           : NULL;
    }
    if (model->kind != NB_FILE_DIR) return NULL;
    char path[4096];
    const cJSON *cfg = NULL;
    struct nb_hfq_config hq = {0};
    snprintf(path, sizeof path, "%s/config.json", model->path);
    if (nb_source_config(model, &cfg) != NB_OK) return NULL;
    enum nb_status st = nb_hfq_parse_config(cfg, NULL, path, &hq);
    if (st || hq.bits != 4 || !(hq.method == NB_HFQ_AWQ || !hq.sym)) return NULL;
    return "the checkpoint (its asymmetric 4-bit codes are kept on w4a16; w4a8's symmetric "
           "grid would round them again)";
}

/* A GGUF file whose matrices are all in block formats nibble has integer kernels for
 * (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, IQ4_NL, IQ4_XS): "auto" runs it as stored, its blocks repacked
 * losslessly (the file's fidelity, exactly, at the kernels' speed; docs/interop.md).
 * Every 2-D tensor of the layers and the head (the token embedding when there is no
 * output.weight) must be one of them, each with a SIMD kernel on this machine (AVX-512
 * VNNI, AVX-VNNI, AVX2, Arm dotprod; without one the older routes stay:
 * nb_model_block_fast). Returns the type list for the report ("Q4_K, Q6_K"), or NULL.
 * Reads headers only. */
static const char *blocks_run_fast(const struct nb_source *model, char *types, size_t cap)
{
    if (model->kind != NB_FILE_GGUF) return NULL;
    const struct nb_gguf *g = model->gguf;
    int ok = 1, n_mat = 0, has_output = 0, seen[NB_DTYPE_COUNT] = {0};
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++)
        has_output |= !strcmp(nb_gguf_tensor(g, i)->name, "output.weight");
    for (int64_t i = 0; i < nb_gguf_n_tensors(g) && ok; i++) {
        const struct nb_tensor *t = nb_gguf_tensor(g, i);
        int is_embd = !strcmp(t->name, "token_embd.weight");
        if (t->n_dims != 2 || (is_embd && has_output)) continue;
        if (strncmp(t->name, "blk.", 4) != 0 && strcmp(t->name, "output.weight") != 0 && !is_embd)
            continue;
        n_mat++;
        struct nb_block_info bi; /* the block formats' one table (core/wformat.c) */
        if (!nb_wformat_block_named(nb_dtype_name(t->dtype), &bi) || !nb_model_block_fast(bi.x16))
            ok = 0;
        else
            seen[t->dtype] = 1;
    }
    if (!ok || !n_mat) return NULL;
    size_t len = 0;
    types[0] = '\0';
    for (int k = 0; k < NB_DTYPE_COUNT; k++)
        if (seen[k] && len < cap)
            len += (size_t)snprintf(types + len, cap - len, "%s%s", len ? ", " : "",
                                    nb_dtype_name((enum nb_dtype)k));
    return types;
}

enum nb_status nb_auto_quantize_opts(struct nb_source *model,
                                     const struct nb_select_params *params,
                                     const char *calib_path, struct nb_quantize_opts *qo,
                                     struct nb_selection *sel)
{
    static _Thread_local struct nb_probe probe; /* large: off the stack */
    static _Thread_local struct nb_choice c;
    struct nb_select_params sp = *params;
    sp.measure_bw = 0; /* a second of measuring is not worth it at every start */
    const char *keep = NULL;
    if ((!sp.path || !strcmp(sp.path, "auto")) &&
        !(sp.priority && !strcmp(sp.priority, "speed")) && (keep = codes_want_w4a16(model))) {
        sp.path = "w4a16"; /* fidelity first for a quantized file: its maker's codes */
        sp.path_from = keep;
    }
    enum nb_status st = nb_api_select(&sp, &probe, &c, sel);
    if (st) return st;
    qo->path = c.path;
    /* the caller's recipe or budget stays; recipes are for the int4 paths */
    const int own_bits = qo->recipe || qo->bpw > 0;
    if (!own_bits && nb_wpath_is_int4(c.path) && c.recipe[0])
        qo->recipe = c.recipe; /* it gives the head its width */
    if (!own_bits && !qo->recipe && qo->head_bits == 0) qo->head_bits = c.head_bits;
    /* a recipe's 6-bit head and embeddings run on the Q6_K block kernel: a device without a
     * SIMD one (this host's table has none, or another target, whose is not known here)
     * gets 4-bit ones rather than a scalar head GEMM */
    struct nb_recipe rc;
    const int host = !sp.target || !strcmp(sp.target, "host");
    if (qo->recipe && !qo->head_bits && !qo->embd_bits &&
        nb_recipe_named(qo->recipe, 1, &rc) == NB_OK && (rc.head_bits == 6 || rc.embd_bits == 6) &&
        !(host && nb_model_block_fast(NB_WF_Q6_K_X16))) {
        qo->head_bits = qo->embd_bits = 4;
        if (sel->n_reasons < NB_SELECTION_MAX_REASONS)
            snprintf(sel->reasons[sel->n_reasons++], sizeof sel->reasons[0],
                     "recipe %s: no Q6_K kernel for %s, so the head and the embeddings are "
                     "4-bit", qo->recipe, host ? "this CPU" : "that target");
    }
    if (c.gptq && calib_path) { /* without a text the recipe goes without GPTQ */
        qo->calib_path = calib_path;
        qo->gptq = qo->act_order = 1;
    }
    return NB_OK;
}

/* The selector's weight path for "auto" (its decision into the report). */
static enum nb_status choose(struct opening *o, struct nb_source *model,
                             const struct nb_open_params *p,
                             struct nb_quantize_opts *qo)
{
    if (p->select.target && strcmp(p->select.target, "host") != 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "opening a model for target '%s': a model runs "
                            "on this host (target host)", p->select.target);
    enum nb_status st = nb_auto_quantize_opts(model, &p->select, p->calib_path, qo,
                                              &o->r.selection);
    if (st) return st;
    o->r.selected = 1;
    return NB_OK;
}

enum nb_status nb_model_open(struct nb_model **out, const char *model,
                             const struct nb_open_params *params, struct nb_open_report *report)
{
    struct nb_open_params p = nb_open_default_params();
    struct opening *o = NULL;
    struct nb_cache_entry *e = NULL;
    struct nb_source *src = NULL;
    enum nb_status st;
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "nb_model_open: out is NULL");
    *out = NULL;
    if (!model || !*model) return nb_set_error(NB_ERR_INVALID_ARG, "nb_model_open: no model");
    if (report && report->size < sizeof(size_t))
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_model_open: report->size is %zu: set it to "
                            "sizeof(struct nb_open_report)", report->size);
    if ((st = nb_params_in(&p, sizeof p, params, "nb_open_params"))) return st;
    if (p.select.size < sizeof(size_t)) p.select = nb_select_default_params();
    if (!(o = calloc(1, sizeof *o)) || !(e = calloc(1, sizeof *e))) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto done;
    }
    o->r.size = sizeof o->r;
    o->caller = report;
    o->progress = p.progress;
    o->user = p.user;
    nb_api_str(o->r.loaded, sizeof o->r.loaded, model);
    int is_auto = !p.path || !strcmp(p.path, "auto");
    int as_stored = p.path && !strcmp(p.path, "source");
    struct nb_quantize_opts qo;
    nb_quantize_default_opts(&qo);
    enum nb_priority prio;
    /* bad names are errors before the model is looked at */
    if ((st = nb_api_priority(p.select.priority, &prio))) goto done;
    if (!is_auto && !as_stored && !nb_wpath_from_name(p.path, &qo.path)) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "weight path '%s' is not one of auto, source, "
                          "w4a8, w4a16, w8a16, bf16, f32", p.path);
        goto done;
    }
    if ((st = nb_source_open(&src, model))) goto done;
    const int packed = src->kind == NB_FILE_NIB;
    char types[64];
    const char *blocks = is_auto && !packed ? blocks_run_fast(src, types, sizeof types) : NULL;
    if (blocks)
        snprintf(o->r.route, sizeof o->r.route, "its %s blocks run as stored (the file's own "
                 "weights, its fidelity exactly) on the integer kernels; --path w4a8 or w4a16 "
                 "re-quantizes", blocks);
    if (as_stored || blocks || packed) {
        o->r.path_ignored = !as_stored && !is_auto;
        o->r.as_stored = 1;
        st = nb_model_load_source(out, src);
        if (st == NB_OK && !p.layout_rows && !packed) {
            /* lossless: the kernels read the same codes and scales in another order */
            int before = (*out)->repacked != NULL;
            st = nb_model_repack_kquants(*out, p.n_threads, &o->r.repack_s);
            o->r.repacked = !before && (*out)->repacked != NULL;
            if (st) {
                nb_model_free(*out);
                *out = NULL;
            }
        }
        goto done;
    }
    if (is_auto && (st = choose(o, src, &p, &qo))) goto done;
    nb_api_str(o->r.weight_path, sizeof o->r.weight_path, nb_wpath_name(qo.path));
    qo.n_threads = p.n_threads;
    qo.layout = p.layout_rows ? NB_LAYOUT_ROWS : NB_LAYOUT_X16;
    qo.repack_rows = p.repack_rows;
    qo.progress = on_progress;
    qo.user = o;
    const char *dir = p.use_cache ? p.cache_dir : NULL;
    o->r.cache_off = !dir;
    st = nb_cache_get(src, &qo, dir, e);
    if (st != NB_OK) {
        if (is_auto && st == NB_ERR_INVALID_ARG) { /* the shapes do not fit the chosen path */
            nb_api_str(o->r.why, sizeof o->r.why, nb_last_error());
            o->r.weight_path[0] = '\0';
            o->r.fell_back = o->r.as_stored = 1;
            st = nb_model_load_source(out, src);
        }
        goto done;
    }
    nb_api_str(o->r.cache_event, sizeof o->r.cache_event, event_name(e->event));
    o->r.cache_waited = e->waited;
    if (e->event != NB_CACHE_HIT) nb_api_str(o->r.why, sizeof o->r.why, e->why);
    o->r.quantized = o->started;
    o->r.quantize_s = o->started ? nb_time_s() - o->t0 : 0;
    nb_api_str(o->r.loaded, sizeof o->r.loaded, e->path);
    /* the entry nb_cache_get verified: its mapping is the one that runs */
    struct nb_source *entry = NULL;
    if (!(st = nb_source_from_nib(&entry, e->nib, 1))) st = nb_model_load_source(out, entry);
    nb_source_free(entry);
done:
    if (o) nb_api_out(report, &o->r, sizeof o->r);
    nb_source_free(src);
    free(e);
    free(o);
    return st;
}
