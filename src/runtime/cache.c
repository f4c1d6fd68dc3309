/* runtime/cache.c — the warm-start cache of packed models. */
#include "runtime/cache.h"
#include "runtime/recipe.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/log.h"
#include "formats/nib.h"
#include "formats/source.h"
#include "model/model.h"
#include "runtime/source_hash.h"

const char *nb_cache_event_name(enum nb_cache_event e)
{
    switch (e) {
    case NB_CACHE_HIT: return "hit";
    case NB_CACHE_MISS: return "miss";
    case NB_CACHE_STALE: return "stale";
    case NB_CACHE_CORRUPT: return "corrupt";
    case NB_CACHE_MEMORY: return "not used (in memory)";
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
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

enum nb_status nb_cache_default_dir(const char *xdg_cache_home, const char *home, char *out,
                                    size_t size)
{
    if (xdg_cache_home && xdg_cache_home[0] == '/')
        snprintf(out, size, "%s/nibble", xdg_cache_home);
    else if (home && home[0]) snprintf(out, size, "%s/.cache/nibble", home);
    else return nb_set_error(NB_ERR_NOT_FOUND, "cache: neither XDG_CACHE_HOME nor HOME is set");
    return NB_OK;
}

/* Create the folder (and its parents) if needed. */
static enum nb_status make_dir(const char *dir)
{
    char path[3072];
    snprintf(path, sizeof path, "%s", dir);
    if (mkdir_p(path) != 0)
        return nb_set_error(NB_ERR_IO, "cache: cannot create %s: %s", dir, strerror(errno));
    return NB_OK;
}

/* Why an opened entry cannot be used (0: it can; every checksum was read). */
static int entry_problem(const struct nb_nib *n, uint64_t src_hash,
                         const struct nb_quantize_opts *o, char *why, size_t why_size)
{
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
    return problem;
}

/* The existing entry at path, opened and checked; NULL with its problem (STALE or
 * CORRUPT, why set). */
static struct nb_nib *try_entry(const char *path, uint64_t src_hash,
                                const struct nb_quantize_opts *o, int *problem, char *why,
                                size_t why_size)
{
    struct nb_nib *n = NULL;
    *problem = 0;
    if (nb_nib_open_run(&n, path) != NB_OK) {
        snprintf(why, why_size, "%s", nb_last_error());
        *problem = NB_CACHE_CORRUPT;
        return NULL;
    }
    if ((*problem = entry_problem(n, src_hash, o, why, why_size))) {
        nb_nib_free(n);
        return NULL;
    }
    return n;
}

/* Quantize into memory because the cache cannot be used: `why` (printf-style) goes to
 * e->why, which the caller reports with the NB_CACHE_MEMORY event. */
static enum nb_status build_in_memory(struct nb_source *src, const struct nb_quantize_opts *o,
                                      struct nb_cache_entry *e, const char *why)
{
    snprintf(e->why, sizeof e->why, "%s", why);
    struct nb_quantize_result r;
    int fd = -1;
    enum nb_status st = nb_quantize_memory(src, o, &fd, &r);
    if (st) return st;
    st = nb_nib_open_run_fd(&e->nib, fd, "(in memory)");
    close(fd);
    if (!st && (st = nb_nib_verify(e->nib))) {
        nb_nib_free(e->nib);
        e->nib = NULL;
    }
    snprintf(e->path, sizeof e->path, "(in memory)");
    e->event = NB_CACHE_MEMORY;
    return st;
}

/* The writer lock of the entry whose name is entry[0, len): "ENTRY.lock". */
static int open_lock(const char *entry, size_t len, int flags, char *lock, size_t lock_size)
{
    snprintf(lock, lock_size, "%.*s.lock", (int)len, entry);
    return open(lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC | flags, 0666);
}

/* Take the entry's writer lock (waiting for another writer); -1 when the lock file
 * cannot be made (why set). */
static int lock_entry(const char *path, int *waited, char *why, size_t why_size)
{
    char lock[4200];
    int fd = open_lock(path, strlen(path), O_CREAT, lock, sizeof lock);
    if (fd < 0) {
        snprintf(why, why_size, "cannot create %s: %s", lock, strerror(errno));
        return -1;
    }
    *waited = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            snprintf(why, why_size, "cannot lock %s: %s", lock, strerror(errno));
            close(fd);
            return -1;
        }
        NB_LOGW("cache: another nibble is writing %s: waiting for it", path);
        *waited = 1;
        int rc;
        while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
        if (rc != 0) {
            snprintf(why, why_size, "cannot lock %s: %s", lock, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

enum nb_status nb_cache_get(struct nb_source *src, const struct nb_quantize_opts *o,
                            const char *dir, struct nb_cache_entry *e)
{
    const char *src_path = src->path;
    enum nb_status st;
    uint64_t src_hash;
    memset(e, 0, sizeof *e);
    if ((st = nb_source_hash(src, &src_hash))) return st;
    struct nb_quantize_opts with_hash = *o; /* the source was hashed here: not twice */
    with_hash.have_source_hash = 1;
    with_hash.source_hash = src_hash;
    if (!dir) return build_in_memory(src, &with_hash, e, "the cache is turned off");
    if (make_dir(dir) != NB_OK) return build_in_memory(src, &with_hash, e, nb_last_error());
    /* the key: source bytes, weight path and recipe, calibration (text bytes and how
     * it is used), layout, version, .nib format version */
    uint64_t calib_hash = 0;
    if (o->calib_path && (st = nb_file_hash(o->calib_path, &calib_hash)))
        return nb_wrap_error(st, "calibration text: ");
    char recipe[512];
    snprintf(recipe, sizeof recipe,
             "%016llx|%s|g%d|h%d|e%d|s%d|layout%d|%s|r%s.v%d|bpw%.4f|c%016llx|ct%d|gptq%d|ao%d|"
             "damp%.6g|nib%d",
             (unsigned long long)src_hash, nb_wpath_name(o->path), o->group, o->head_bits,
             o->embd_bits, o->search, nb_quantize_opts_layout(o), NIBBLE_VERSION_STRING,
             o->recipe ? o->recipe : "", NB_RECIPE_VERSION, o->bpw, (unsigned long long)calib_hash,
             o->calib_tokens, o->gptq, o->act_order, o->gptq_damp, NB_NIB_VERSION);
    uint64_t key = XXH3_64bits(recipe, strlen(recipe));
    const char *base = strrchr(src_path, '/');
    base = base && base[1] ? base + 1 : src_path;
    char stem[128];
    snprintf(stem, sizeof stem, "%s", base);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    snprintf(e->path, sizeof e->path, "%s/%s-%s-%016llx.nib", dir, stem, nb_wpath_name(o->path),
             (unsigned long long)key);

    int problem;
    struct stat before, after;
    int had = stat(e->path, &before) == 0;
    problem = 0;
    if (had && (e->nib = try_entry(e->path, src_hash, o, &problem, e->why, sizeof e->why))) {
        e->event = NB_CACHE_HIT;
        return NB_OK;
    }
    /* one writer per entry: the others wait here, then find its entry */
    char why[sizeof e->why];
    int lock = lock_entry(e->path, &e->waited, why, sizeof why);
    if (lock < 0) return build_in_memory(src, &with_hash, e, why);
    int has = stat(e->path, &after) == 0;
    if (has && (!had || after.st_ino != before.st_ino || after.st_dev != before.st_dev)) {
        /* another writer finished in the meantime (we may not even have waited) */
        if ((e->nib = try_entry(e->path, src_hash, o, &problem, e->why, sizeof e->why))) {
            e->event = NB_CACHE_HIT;
            close(lock);
            return NB_OK;
        }
    }
    e->event = problem ? (enum nb_cache_event)problem : NB_CACHE_MISS;
    if (problem)
        NB_LOGW("cache: %s entry %s (%s): rebuilding", nb_cache_event_name(e->event), e->path,
                e->why);
    struct nb_quantize_result r;
    st = nb_quantize_file(src, &with_hash, e->path, &r);
    if (st == NB_OK) {
        /* check what was written, on the mapping that will run */
        if ((st = nb_nib_open_run(&e->nib, e->path)) == NB_OK && (st = nb_nib_verify(e->nib))) {
            nb_nib_free(e->nib);
            e->nib = NULL;
        }
    } else if (st == NB_ERR_IO) { /* the folder cannot take it (read-only, full, ...) */
        close(lock);
        return build_in_memory(src, &with_hash, e, nb_last_error());
    }
    close(lock);
    return st;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t l = strlen(s), ls = strlen(suffix);
    return l >= ls && !strcmp(s + l - ls, suffix);
}

enum nb_status nb_cache_list(const char *dir, nb_cache_entry_fn fn, void *user)
{
    char path[4200];
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) return NB_OK; /* nothing cached yet */
    if (!d) return nb_set_error(NB_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!has_suffix(de->d_name, ".nib")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        struct nb_nib *n = NULL;
        nb_nib_open(&n, path); /* a broken entry is listed without a header */
        fn(path, (uint64_t)sb.st_size, n ? nb_nib_header(n) : NULL, user);
        nb_nib_free(n);
    }
    closedir(d);
    return NB_OK;
}

enum nb_status nb_cache_clear(const char *dir, int *n_removed, int *n_busy,
                              uint64_t *bytes_freed)
{
    char path[4200], lock[4300], failed[4400] = "";
    int n_failed = 0;
    *n_removed = *n_busy = 0;
    *bytes_freed = 0;
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) return NB_OK;
    if (!d) return nb_set_error(NB_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        /* an entry "X.nib", its lock "X.nib.lock", a writer's "X.nib.<hex>.tmp" */
        const char *nib = strstr(de->d_name, ".nib");
        if (!nib || (nib[4] && nib[4] != '.')) continue;
        if (!has_suffix(de->d_name, ".nib") && !has_suffix(de->d_name, ".tmp")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int fd = open_lock(path, strlen(dir) + 1 + (size_t)(nib + 4 - de->d_name), 0, lock,
                           sizeof lock);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) { /* a writer holds it */
            close(fd);
            (*n_busy)++;
            continue;
        }
        struct stat sb;
        if (lstat(path, &sb) == 0 && unlink(path) == 0) {
            (*n_removed)++;
            *bytes_freed += (uint64_t)sb.st_size;
        } else if (errno != ENOENT && n_failed++ == 0) { /* gone meanwhile: fine */
            snprintf(failed, sizeof failed, "%s: %s", path, strerror(errno));
        }
        if (fd >= 0) close(fd); /* the lock file stays: a writer may open it next */
    }
    closedir(d);
    if (n_failed)
        return nb_set_error(NB_ERR_IO, "cannot remove %d cache file%s (first: %s)", n_failed,
                            n_failed > 1 ? "s" : "", failed);
    return NB_OK;
}
