/* runtime/cache.h — the warm-start cache of packed models.
 *
 * `nibble run -m model.gguf --path w4a8` quantizes on first use and writes the .nib
 * to the cache folder (the CLI's: $XDG_CACHE_HOME/nibble, else ~/.cache/nibble,
 * nb_cache_default_dir), under a name keyed by the
 * source's content hash, the weight path and recipe, the layout and the nibble
 * version. The next start maps the cached file.
 *
 * What holds, whatever else runs at the same time:
 * - An entry is used only after its header matched the key and every checksum was
 *   read, on the very mapping the model then runs from (a file replaced afterwards
 *   cannot change what was checked). A stale or corrupt entry is rebuilt and the caller
 *   is told which and why.
 * - One writer per entry: a process that finds no valid entry takes an advisory lock
 *   (flock on ENTRY.lock); others wait for it, then find its entry. The entry is written
 *   under a unique temporary name and renamed (core/outfile.h).
 * - A cache that cannot be used (no HOME, a read-only or full disk, a file where the
 *   folder should be) is not an error: the model is quantized into memory and runs;
 *   the event says so and `why` names the folder and the reason. */
#ifndef NB_RUNTIME_CACHE_H
#define NB_RUNTIME_CACHE_H

#include <stddef.h>

#include "formats/nib.h"
#include "nibble.h"
#include "runtime/quantize.h"

enum nb_cache_event {
    NB_CACHE_HIT = 0, /* a valid entry was found */
    NB_CACHE_MISS,    /* none: built */
    NB_CACHE_STALE,   /* one for other source bytes / version: rebuilt */
    NB_CACHE_CORRUPT, /* one that failed its checksums or parse: rebuilt */
    NB_CACHE_MEMORY,  /* the cache could not be used (or was turned off): built in memory */
};

const char *nb_cache_event_name(enum nb_cache_event e);

/* The usual folder: XDG_CACHE_HOME/nibble when that is an absolute path, else
 * HOME/.cache/nibble (the caller passes the two values: the library reads no
 * environment). NB_ERR_NOT_FOUND when neither is set. */
enum nb_status nb_cache_default_dir(const char *xdg_cache_home, const char *home, char *out,
                                    size_t size);

struct nb_cache_entry {
    struct nb_nib *nib; /* mapped and verified: nb_source_from_nib(.., 1), then load */
    char path[4096];    /* the cache file, or "(in memory)" */
    enum nb_cache_event event;
    int waited;         /* another process was writing this entry: we waited for it */
    char why[8192];     /* stale / corrupt / memory: why, in a sentence */
};

/* Find or build the packed form of the opened source quantized with `opts` in the folder
 * `dir` (created if needed). dir NULL (`--no-cache`) builds it in memory without
 * touching any folder. Errors are those of reading or quantizing the source; a cache
 * that cannot be written is not one. */
struct nb_source;
enum nb_status nb_cache_get(struct nb_source *src, const struct nb_quantize_opts *opts,
                            const char *dir, struct nb_cache_entry *e);

/* The entries in the cache folder: fn(path, bytes, header, user) for each readable
 * .nib (header is its JSON header: weight_path, source, ...; NULL when the file does
 * not parse — it would be rebuilt). */
typedef void (*nb_cache_entry_fn)(const char *path, uint64_t bytes, const cJSON *header,
                                  void *user);
enum nb_status nb_cache_list(const char *dir, nb_cache_entry_fn fn, void *user);

/* Remove every entry (and stale temporaries) no writer holds; entries being written
 * are left alone and counted in *n_busy. Readers that mapped an entry keep running.
 * NB_ERR_IO naming the first file that could not be removed (a read-only cache) and how
 * many, after removing what it could (*n_removed and *bytes_freed count those). */
enum nb_status nb_cache_clear(const char *dir, int *n_removed, int *n_busy,
                              uint64_t *bytes_freed);

#endif
