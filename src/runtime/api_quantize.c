/* runtime/api_quantize.c — nibble.h's quantize and cache calls over runtime/quantize.h
 * and runtime/cache.h (weight paths as names, versioned structs). */
#include <string.h>

#include "formats/source.h"
#include "runtime/api.h"
#include "runtime/cache.h"
#include "runtime/quantize.h"

struct nb_quantize_params nb_quantize_default_params(void)
{
    return (struct nb_quantize_params){.size = sizeof(struct nb_quantize_params),
                                       .path = "auto", .group = 128, .search = 1,
                                       .select = nb_select_default_params()};
}

enum nb_status nb_model_quantize(const char *src, const char *dst,
                                 const struct nb_quantize_params *params,
                                 struct nb_quantize_stats *stats)
{
    struct nb_quantize_params p = nb_quantize_default_params();
    struct nb_quantize_opts o;
    struct nb_quantize_result r;
    enum nb_status st = nb_params_in(&p, sizeof p, params, "nb_quantize_params");
    if (st) return st;
    if (!src || !*src || !dst || !*dst)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_model_quantize: give a source and an output");
    if (stats && stats->size < sizeof(size_t))
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_model_quantize: stats->size is %zu: set it "
                            "to sizeof(struct nb_quantize_stats)", stats->size);
    nb_quantize_default_opts(&o);
    const int is_auto = !p.path || !strcmp(p.path, "auto");
    if (!is_auto && !nb_wpath_from_name(p.path, &o.path))
        return nb_set_error(NB_ERR_INVALID_ARG, "weight path '%s' is not one of auto, w4a8, "
                            "w4a16, w8a16, bf16, f32", p.path);
    if (p.select.size < sizeof(size_t)) p.select = nb_select_default_params();
    if (p.group != 32 && p.group != 64 && p.group != 128)
        return nb_set_error(NB_ERR_INVALID_ARG, "group %d is not one of 32, 64, 128", p.group);
    if (p.head_bits != 0 && p.head_bits != 4 && p.head_bits != 6 && p.head_bits != 8 &&
        p.head_bits != 16)
        return nb_set_error(NB_ERR_INVALID_ARG, "head bits %d are not one of 4, 6, 8, 16",
                            p.head_bits);
    if (p.embd_bits != 0 && p.embd_bits != 4 && p.embd_bits != 6 && p.embd_bits != 8 &&
        p.embd_bits != 16)
        return nb_set_error(NB_ERR_INVALID_ARG, "embedding bits %d are not one of 4, 6, 8, 16",
                            p.embd_bits);
    if (!(p.bpw == 0 || (p.bpw >= 4 && p.bpw <= 16)))
        return nb_set_error(NB_ERR_INVALID_ARG, "bpw %g is not 0 (no budget) or 4 to 16", p.bpw);
    if (p.n_threads < 0 || p.repack_rows < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "n_threads %d and repack_rows %lld must not be "
                            "negative", p.n_threads, (long long)p.repack_rows);
    o.group = p.group;
    o.head_bits = p.head_bits;
    o.embd_bits = p.embd_bits;
    o.search = p.search;
    o.calib_path = p.calib_path;
    o.n_threads = p.n_threads;
    o.layout = p.layout_rows ? NB_LAYOUT_ROWS : NB_LAYOUT_X16;
    o.repack_rows = p.repack_rows;
    o.progress = p.progress;
    o.report = p.report;
    o.user = p.user;
    if (p.calib_tokens < 0 || p.gptq_damp < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "calib_tokens %d and gptq_damp %g must not be "
                            "negative", p.calib_tokens, p.gptq_damp);
    o.calib_tokens = p.calib_tokens;
    o.gptq = p.gptq;
    o.act_order = p.act_order;
    o.gptq_damp = p.gptq_damp;
    o.recipe = p.recipe;
    o.bpw = p.bpw;
    o.bits = p.bits;
    static _Thread_local struct nb_quantize_stats s; /* large: off the stack */
    memset(&s, 0, sizeof s);
    struct nb_source *source = NULL;
    if ((st = nb_quantize_check_opts(&o))) return st; /* before the model is opened */
    if (!(st = nb_source_open(&source, src)) &&
        !(is_auto && (st = nb_auto_quantize_opts(source, &p.select, p.calib_path, &o,
                                                 &s.selection))))
        st = nb_quantize_file(source, &o, dst, &r);
    nb_source_free(source);
    if (st) return st;
    s.size = sizeof s;
    s.linear_bytes = r.linear_bytes;
    s.linear_params = r.linear_params;
    s.file_bytes = r.file_bytes;
    s.file_params = r.file_params;
    s.bpw_linear = r.bpw_linear;
    s.bpw_file = r.bpw_file;
    s.seconds = r.seconds;
    s.selected = is_auto;
    nb_api_str(s.weight_path, sizeof s.weight_path, nb_wpath_name(o.path));
    memcpy(s.recipe, r.recipe, sizeof s.recipe);
    memcpy(s.recipe_table, r.recipe_table, sizeof s.recipe_table);
    nb_api_out(stats, &s, sizeof s);
    return NB_OK;
}

struct entries {
    nb_cache_entry_cb fn;
    void *user;
};

static void on_entry(const char *path, uint64_t bytes, const cJSON *h, void *user)
{
    struct entries *e = user;
    const cJSON *wp = cJSON_GetObjectItemCaseSensitive(h, "weight_path");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(h, "source");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(src, "path");
    e->fn(path, bytes, cJSON_IsString(wp) ? wp->valuestring : NULL,
          cJSON_IsString(sp) ? sp->valuestring : NULL, e->user);
}

enum nb_status nb_cache_entries(const char *dir, nb_cache_entry_cb fn, void *user)
{
    if (!dir || !fn)
        return nb_set_error(NB_ERR_INVALID_ARG, "nb_cache_entries: dir and fn must be given");
    struct entries e = {fn, user};
    return nb_cache_list(dir, on_entry, &e);
}
