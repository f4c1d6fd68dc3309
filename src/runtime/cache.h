/* runtime/cache.h — the warm-start cache of packed models.
 *
 * `nibble run -m model.gguf --path w4a8` quantizes on first use and writes the .nib
 * to $XDG_CACHE_HOME/nibble (default ~/.cache/nibble), under a name keyed by the
 * source's content hash, the weight path and recipe, the layout and the nibble
 * version. The next start maps the cached file. An entry whose source hash, version
 * or checksums do not match is never trusted: it is rebuilt, and the caller is told
 * which of these happened. */
#ifndef NB_RUNTIME_CACHE_H
#define NB_RUNTIME_CACHE_H

#include <stddef.h>

#include "nibble.h"
#include "runtime/quantize.h"

enum nb_cache_event {
    NB_CACHE_HIT = 0,     /* a valid entry was found */
    NB_CACHE_MISS,        /* none: built */
    NB_CACHE_STALE,       /* one for other source bytes / version: rebuilt */
    NB_CACHE_CORRUPT,     /* one that failed its checksums or parse: rebuilt */
};

const char *nb_cache_event_name(enum nb_cache_event e);

/* The cache folder (created if needed). */
enum nb_status nb_cache_dir(char *out, size_t size);

/* Find or build the packed file for `src_path` quantized with `opts`; its path goes
 * to out_path. `why` (may be NULL) receives a sentence on a stale/corrupt entry. */
enum nb_status nb_cache_get(const char *src_path, const struct nb_quantize_opts *opts,
                            char *out_path, size_t out_size, enum nb_cache_event *event,
                            char *why, size_t why_size);

/* Load the file nb_cache_get has just returned. nb_cache_get read every checksum of a
 * hit (and wrote those of a miss), so the loader does not read them a second time
 * (~0.1 s per GB). For any other file use nb_model_load. */
enum nb_status nb_cache_load(struct nb_model **out, const char *cache_path);

#endif
