/* formats/safetensors.h — a validating safetensors reader (single file or sharded).
 *
 * File layout: u64 header_len (little-endian) | header_len bytes of JSON | data.
 * The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data section) plus an optional "__metadata__" object of
 * string values. A sharded checkpoint has model.safetensors.index.json whose
 * "weight_map" maps each tensor name to its shard file.
 *
 * Every offset is checked against the data section, data_offsets must match
 * dtype x shape exactly, tensors may not overlap, and names must be unique
 * across shards. Errors name the file, the tensor and what is wrong.
 */
#ifndef NB_FORMATS_SAFETENSORS_H
#define NB_FORMATS_SAFETENSORS_H

#include <stddef.h>

#include "core/error.h"
#include "formats/tensor.h"

struct nb_safetensors;

/* `path`: a .safetensors file, a *.safetensors.index.json, or a directory holding
 * model.safetensors or model.safetensors.index.json. All shards are mapped.
 * Shard names in an index must be plain file names beside it (no '/', no "..");
 * every tensor of "weight_map" must be in the shard it names (NB_ERR_FORMAT); a
 * missing shard is NB_ERR_NOT_FOUND; dtypes other than F32, F16, BF16, I8, I32
 * are NB_ERR_UNSUPPORTED. Tensor data is not necessarily aligned beyond 1 byte
 * (writers usually pad the header to 8). */
enum nb_status nb_safetensors_open(struct nb_safetensors **out, const char *path);
/* Parse one in-memory file (kept alive by the caller); for fuzzing and tests. */
enum nb_status nb_safetensors_parse(struct nb_safetensors **out, const void *data, size_t size,
                                    const char *name);
void nb_safetensors_free(struct nb_safetensors *st);

int64_t nb_safetensors_n_tensors(const struct nb_safetensors *st);
const struct nb_tensor *nb_safetensors_tensor(const struct nb_safetensors *st, int64_t i);
const struct nb_tensor *nb_safetensors_find(const struct nb_safetensors *st, const char *name);
/* A string from "__metadata__" of the first shard, or NULL. */
const char *nb_safetensors_metadata(const struct nb_safetensors *st, const char *key);

/* Write a single-file safetensors (tests and converters): tensors laid out in the
 * given order, header padded with spaces to a multiple of 8, written to PATH.tmp
 * and renamed over PATH. Dtypes F32, F16, BF16, I8, I32; n_bytes must match
 * dtype x shape. */
enum nb_status nb_safetensors_write(const char *path, const struct nb_tensor *tensors,
                                    int n_tensors);
/* As nb_safetensors_write, with a "__metadata__" object of n_meta string pairs. */
enum nb_status nb_safetensors_write_meta(const char *path, const struct nb_tensor *tensors,
                                         int n_tensors, const char *const *meta_keys,
                                         const char *const *meta_vals, int n_meta);

#endif
