/* runtime/cache.c — the warm-start cache of packed models. */
#include "runtime/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "core/log.h"
#include "formats/nib.h"
#include "model/model.h"
#include "runtime/source_hash.h"

const char *nb_cache_event_name(enum nb_cache_event e)
{
    switch (e) {
    case NB_CACHE_HIT: return "hit";
    case NB_CACHE_MISS: return "miss";
    case NB_CACHE_STALE: return "stale";
    case NB_CACHE_CORRUPT: return "corrupt";
    }
    return "?";
}

static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

enum nb_status nb_cache_dir(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(out, size, "%s/nibble", xdg);
    else if (home && home[0]) snprintf(out, size, "%s/.cache/nibble", home);
    else return nb_set_error(NB_ERR_IO, "cache: neither XDG_CACHE_HOME nor HOME is set");
    if (mkdir_p(out) != 0)
        return nb_set_error(NB_ERR_IO, "cache: cannot create %s: %s", out, strerror(errno));
    return NB_OK;
}

/* Why a cached entry cannot be used (0: it can). */
static int entry_problem(const char *path, uint64_t src_hash, const struct nb_quantize_opts *o,
                         char *why, size_t why_size)
{
    struct nb_nib *n = NULL;
    if (nb_nib_open(&n, path) != NB_OK) {
        snprintf(why, why_size, "%s", nb_last_error());
        return NB_CACHE_CORRUPT;
    }
    int problem = 0;
    const cJSON *h = nb_nib_header(n);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(h, "source");
    const cJSON *hx = cJSON_GetObjectItemCaseSensitive(src, "xxh3");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(h, "nibble_version");
    const cJSON *wp = cJSON_GetObjectItemCaseSensitive(h, "weight_path");
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)src_hash);
    if (!cJSON_IsString(hx) || strcmp(hx->valuestring, want) != 0) {
        snprintf(why, why_size, "it was made from other source bytes");
        problem = NB_CACHE_STALE;
    } else if (!cJSON_IsString(ver) || strcmp(ver->valuestring, NIBBLE_VERSION_STRING) != 0) {
        snprintf(why, why_size, "it was made by another nibble version");
        problem = NB_CACHE_STALE;
    } else if (!cJSON_IsString(wp) || strcmp(wp->valuestring, nb_wpath_name(o->path)) != 0) {
        snprintf(why, why_size, "it holds another weight path");
        problem = NB_CACHE_STALE;
    } else if (nb_nib_verify(n) != NB_OK) {
        snprintf(why, why_size, "%s", nb_last_error());
        problem = NB_CACHE_CORRUPT;
    }
    nb_nib_free(n);
    return problem;
}

enum nb_status nb_cache_get(const char *src_path, const struct nb_quantize_opts *o,
                            char *out_path, size_t out_size, enum nb_cache_event *event,
                            char *why, size_t why_size)
{
    char dir[3072], why_local[512];
    enum nb_status st;
    uint64_t src_hash;
    if (!why) {
        why = why_local;
        why_size = sizeof why_local;
    }
    why[0] = '\0';
    if ((st = nb_cache_dir(dir, sizeof dir))) return st;
    if ((st = nb_source_hash(src_path, &src_hash))) return st;
    /* the key: source bytes, weight path and recipe, layout, version */
    char recipe[256];
    snprintf(recipe, sizeof recipe, "%016llx|%s|g%d|h%d|e%d|s%d|layout%d|%s",
             (unsigned long long)src_hash, nb_wpath_name(o->path), o->group, o->head_bits,
             o->embd_bits, o->search, nb_quantize_layout(), NIBBLE_VERSION_STRING);
    uint64_t key = XXH3_64bits(recipe, strlen(recipe));
    const char *base = strrchr(src_path, '/');
    base = base && base[1] ? base + 1 : src_path;
    char stem[128];
    snprintf(stem, sizeof stem, "%s", base);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    snprintf(out_path, out_size, "%s/%s-%s-%016llx.nib", dir, stem, nb_wpath_name(o->path),
             (unsigned long long)key);
    struct stat sb;
    if (stat(out_path, &sb) == 0) {
        int problem = entry_problem(out_path, src_hash, o, why, why_size);
        if (!problem) {
            *event = NB_CACHE_HIT;
            return NB_OK;
        }
        *event = (enum nb_cache_event)problem;
        NB_LOGW("cache: %s entry %s (%s): rebuilding", nb_cache_event_name(*event), out_path, why);
    } else {
        *event = NB_CACHE_MISS;
    }
    struct nb_quantize_result r;
    struct nb_quantize_opts with_hash = *o; /* the source was hashed above: not twice */
    with_hash.have_source_hash = 1;
    with_hash.source_hash = src_hash;
    return nb_quantize_file(src_path, &with_hash, out_path, &r);
}

enum nb_status nb_cache_load(struct nb_model **out, const char *cache_path)
{
    return nb_model_load_ex(out, cache_path, 1);
}
