/* runtime/source_hash.h — a content hash of a model source (file or directory). */
#ifndef NB_RUNTIME_SOURCE_HASH_H
#define NB_RUNTIME_SOURCE_HASH_H

#include <stdint.h>

#include "core/error.h"

/* XXH3-64 over the bytes of an opened model source (its one mapping) — for a directory,
 * over the names and bytes of its regular files in name order (config, weights,
 * tokenizer files). A directory without regular files, or without config.json, is not a
 * model source: NB_ERR_NOT_FOUND, with a message saying which. */
struct nb_source;
enum nb_status nb_source_hash(const struct nb_source *src, uint64_t *out);
/* The same over one regular file (a calibration text). */
enum nb_status nb_file_hash(const char *path, uint64_t *out);

#endif
