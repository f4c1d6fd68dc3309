/* formats/safetensors_write.h — a streaming safetensors writer: tensors are declared
 * first (name, dtype, shape), the header goes out, then each tensor's bytes are handed
 * over in pieces, in the order the writer asks for, so a large export never holds more
 * than the piece it is producing.
 *
 * The file (the format as published with the safetensors library, docs "safetensors"
 * and its README "Format"):
 *
 *   u64 N (little-endian) | N bytes of JSON header | data
 *
 * The header is one JSON object: "__metadata__" (string values) and one entry per
 * tensor {"dtype": "F16", "shape": [...], "data_offsets": [begin, end]}, offsets
 * relative to the data section. Readers require the data to be indexed entirely, with
 * no holes and no overlap. Here:
 *   - keys are written in byte order (cJSON, unformatted), so the same tensors give
 *     the same header;
 *   - the header is padded with spaces to a multiple of 8 bytes;
 *   - the data lies in the order: tensors whose size is a multiple of 8 bytes (name
 *     order), then the others (name order), so every tensor of the first kind starts
 *     at an 8-byte aligned offset of the file without leaving holes.
 * The file is written through core/outfile.h (unique temporary, fsync, rename). */
#ifndef NB_FORMATS_SAFETENSORS_WRITE_H
#define NB_FORMATS_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "formats/tensor.h"

struct nb_st_writer;

/* A writer for `path` (nothing is created before nb_st_writer_begin). */
enum nb_status nb_st_writer_init(struct nb_st_writer **out, const char *path);
/* Drops a file not finished (its temporary is removed). NULL is fine. */
void nb_st_writer_free(struct nb_st_writer *w);
/* Declare a tensor (before begin): dtype F32, F16, BF16, I8 or I32, 0..4 dims, each
 * >= 0. *index (may be NULL) gets its index, the number nb_st_writer_next returns for
 * it. A name given twice fails at begin (NB_ERR_INVALID_ARG). */
enum nb_status nb_st_writer_add(struct nb_st_writer *w, const char *name, enum nb_dtype dtype,
                                int n_dims, const int64_t *shape, int64_t *index);
/* A "__metadata__" pair (before begin); both strings are copied. */
enum nb_status nb_st_writer_meta(struct nb_st_writer *w, const char *key, const char *value);
/* Lay the data out, create the temporary and write the header. */
enum nb_status nb_st_writer_begin(struct nb_st_writer *w);
/* After begin: the index of the tensor whose bytes come next, or -1 when every byte
 * was given. */
int64_t nb_st_writer_next(const struct nb_st_writer *w);
/* The next n bytes of that tensor (a tensor may come in any number of pieces; a piece
 * never runs into the next tensor: NB_ERR_INVALID_ARG). */
enum nb_status nb_st_writer_data(struct nb_st_writer *w, const void *p, size_t n);
/* Every byte given: sync and rename over the path. *file_bytes (may be NULL) gets the
 * file's size. NB_ERR_INVALID_ARG when bytes are missing. */
enum nb_status nb_st_writer_finish(struct nb_st_writer *w, uint64_t *file_bytes);

#endif
