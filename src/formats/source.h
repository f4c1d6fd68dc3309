/* formats/source.h — a model given by path, opened and classified once.
 *
 * A model file or folder is looked at once: its first bytes say what it is (not its
 * name), a file is mapped once, and a GGUF header, a .nib table or a llama2.c header is
 * parsed once on that mapping. Everything that reads a model — model load, tokenizer
 * load, the cache's hash, quantize, export, inspect — takes the source instead of the
 * path, so nothing opens or sniffs the file again (docs/architecture.md).
 *
 * Lifetime: the parsed views (gguf, nib, l2c) and their tensors point into the mapping,
 * which lives as long as the source. A model keeps a reference to its source. References
 * are counted without atomics: take and drop them on one thread (opening a model is
 * single-threaded; the source is then read-only and may be read from any thread). */
#ifndef NB_FORMATS_SOURCE_H
#define NB_FORMATS_SOURCE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/mmap.h"

struct nb_gguf;
struct nb_nib;
struct nb_llama2c;

enum nb_file_kind {
    NB_FILE_UNKNOWN = 0, /* a file of no model format (a tokenizer file, text, ...) */
    NB_FILE_DIR,         /* a directory (Hugging Face layout) */
    NB_FILE_GGUF,
    NB_FILE_NIB,
    NB_FILE_LLAMA2C, /* a plausible llama2.c checkpoint header */
};

struct nb_source {
    char *path;                 /* as given (a .nib handed over: its name) */
    enum nb_file_kind kind;
    struct nb_mapped_file file; /* a file's one mapping (empty for a directory, or when
                                   the .nib was handed over with its own) */
    struct nb_gguf *gguf;       /* NB_FILE_GGUF: the header, parsed */
    struct nb_nib *nib;         /* NB_FILE_NIB: header and table, parsed (see verified) */
    struct nb_llama2c *l2c;     /* NB_FILE_LLAMA2C: header and tensor table */
    int verified;               /* NB_FILE_NIB: every checksum checked (nb_source_verify) */
    cJSON *config;              /* NB_FILE_DIR: config.json, once read (nb_source_config) */
    int refs;
};

/* Open `path`: a directory, or a regular file mapped and classified by its first bytes,
 * its header parsed for the kinds above. A file of no known kind opens as
 * NB_FILE_UNKNOWN (the caller says what it expected). Errors name the path: missing
 * (NB_ERR_NOT_FOUND), unreadable or not a regular file (NB_ERR_IO), a malformed header
 * (NB_ERR_FORMAT). */
enum nb_status nb_source_open(struct nb_source **out, const char *path);
/* A source around a .nib opened elsewhere (a cache entry, an in-memory build): owns `nib`
 * from here on, even on failure; `verified` says its checksums were checked. */
enum nb_status nb_source_from_nib(struct nb_source **out, struct nb_nib *nib, int verified);
/* One more reference; returns s. */
struct nb_source *nb_source_ref(struct nb_source *s);
/* Drops a reference; the last one unmaps. NULL is allowed. */
void nb_source_free(struct nb_source *s);

/* NB_FILE_NIB: check every tensor's checksum, once per source. NB_OK for other kinds. */
enum nb_status nb_source_verify(struct nb_source *s);
/* NB_FILE_DIR: config.json, parsed on the first call and kept (the source owns it). */
enum nb_status nb_source_config(struct nb_source *s, const cJSON **out);
/* Short name of a kind ("gguf", "nib", "llama2c", "directory", "unknown"). */
const char *nb_file_kind_name(enum nb_file_kind k);

#endif
