/* runtime/source_hash.h — a content hash of a model source (file or directory). */
#ifndef NB_RUNTIME_SOURCE_HASH_H
#define NB_RUNTIME_SOURCE_HASH_H

#include <stdint.h>

#include "core/error.h"

/* XXH3-64 over the bytes of `path` — for a directory, over the names and bytes of
 * its regular files in name order (config, weights, tokenizer files). A directory
 * without regular files, or without config.json, is not a model source:
 * NB_ERR_NOT_FOUND, with a message saying which. */
enum nb_status nb_source_hash(const char *path, uint64_t *out);

#endif
