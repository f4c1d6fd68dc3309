/* formats/gguf.h — a validating GGUF (v2, v3) reader.
 *
 * File layout (little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 type | value }         string = u64 len + bytes
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to `general.alignment` (default 32)
 *   tensor data; each tensor at data_start + offset (offset aligned)
 * Arrays are { u32 elem_type | u64 count | elems }, and may nest.
 *
 * Every count, length and offset is checked against the file size before use;
 * errors name the file, the key or tensor, and what is wrong.
 */
#ifndef NB_FORMATS_GGUF_H
#define NB_FORMATS_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "formats/tensor.h"

enum nb_gguf_type {
    NB_GGUF_U8 = 0,
    NB_GGUF_I8 = 1,
    NB_GGUF_U16 = 2,
    NB_GGUF_I16 = 3,
    NB_GGUF_U32 = 4,
    NB_GGUF_I32 = 5,
    NB_GGUF_F32 = 6,
    NB_GGUF_BOOL = 7,
    NB_GGUF_STRING = 8,
    NB_GGUF_ARRAY = 9,
    NB_GGUF_U64 = 10,
    NB_GGUF_I64 = 11,
    NB_GGUF_F64 = 12,
    NB_GGUF_TYPE_COUNT
};

struct nb_gguf;

/* Open and map a file. */
enum nb_status nb_gguf_open(struct nb_gguf **out, const char *path);
/* Parse a buffer that stays alive as long as the result (for fuzzing and tests);
 * `name` is used in error messages. */
enum nb_status nb_gguf_parse(struct nb_gguf **out, const void *data, size_t size, const char *name);
void nb_gguf_free(struct nb_gguf *g);

uint32_t nb_gguf_version(const struct nb_gguf *g);
const char *nb_gguf_path(const struct nb_gguf *g);
uint64_t nb_gguf_alignment(const struct nb_gguf *g);

/* ---- metadata ----
 * Keys are looked up by exact name. Scalar getters convert between integer types
 * when the value fits, and integers to float; anything else is NB_ERR_FORMAT with a
 * message naming the key and both types. A missing key is NB_ERR_NOT_FOUND. */
int64_t nb_gguf_n_kv(const struct nb_gguf *g);
const char *nb_gguf_kv_key(const struct nb_gguf *g, int64_t i);
enum nb_gguf_type nb_gguf_kv_type(const struct nb_gguf *g, int64_t i);
int64_t nb_gguf_find_kv(const struct nb_gguf *g, const char *key); /* -1 if absent */
const char *nb_gguf_type_name(enum nb_gguf_type t);

enum nb_status nb_gguf_get_u32(const struct nb_gguf *g, const char *key, uint32_t *out);
enum nb_status nb_gguf_get_i64(const struct nb_gguf *g, const char *key, int64_t *out);
enum nb_status nb_gguf_get_f32(const struct nb_gguf *g, const char *key, float *out);
enum nb_status nb_gguf_get_bool(const struct nb_gguf *g, const char *key, int *out);
/* Points into the file; not NUL-terminated in the file, so the reader keeps a
 * NUL-terminated copy: valid until nb_gguf_free. */
enum nb_status nb_gguf_get_str(const struct nb_gguf *g, const char *key, const char **out);

/* Arrays: element type and count; nested arrays report NB_GGUF_ARRAY. */
enum nb_status nb_gguf_get_arr(const struct nb_gguf *g, const char *key,
                               enum nb_gguf_type *elem_type, uint64_t *count);
/* Pointer to the packed elements of an array of fixed-size scalars (little-endian,
 * possibly unaligned: read with memcpy). */
enum nb_status nb_gguf_get_arr_data(const struct nb_gguf *g, const char *key,
                                    enum nb_gguf_type elem_type, const void **data,
                                    uint64_t *count);
/* Element i of an array of strings (NUL-terminated copy, valid until free). */
enum nb_status nb_gguf_get_arr_str(const struct nb_gguf *g, const char *key, uint64_t i,
                                   const char **out);
/* Element i of an array of numbers converted to f64 / i64. */
enum nb_status nb_gguf_get_arr_f64(const struct nb_gguf *g, const char *key, uint64_t i,
                                   double *out);
enum nb_status nb_gguf_get_arr_i64(const struct nb_gguf *g, const char *key, uint64_t i,
                                   int64_t *out);

/* ---- tensors ---- (data pointers are inside the mapping, bounds-checked) */
int64_t nb_gguf_n_tensors(const struct nb_gguf *g);
const struct nb_tensor *nb_gguf_tensor(const struct nb_gguf *g, int64_t i);
const struct nb_tensor *nb_gguf_find_tensor(const struct nb_gguf *g, const char *name);

/* ---- writing (tests, `nibble synth`, converters) ----
 * A small builder: add metadata and tensors, then write the file. version 0 means 3,
 * alignment 0 means 32 (any other value must be a power of two and is recorded as
 * `general.alignment`, so do not add that key yourself). Duplicate keys or tensor
 * names are NB_ERR_INVALID_ARG. The file is written to PATH.tmp and renamed. Data pointers
 * given to add_tensor must stay valid until write. Shapes are outermost first, as
 * in struct nb_tensor; the writer reverses them into GGUF order. */
struct nb_gguf_writer;
enum nb_status nb_gguf_writer_init(struct nb_gguf_writer **out, uint32_t version,
                                   uint32_t alignment);
void nb_gguf_writer_free(struct nb_gguf_writer *w);
enum nb_status nb_gguf_writer_add_u32(struct nb_gguf_writer *w, const char *key, uint32_t v);
enum nb_status nb_gguf_writer_add_i32(struct nb_gguf_writer *w, const char *key, int32_t v);
enum nb_status nb_gguf_writer_add_u64(struct nb_gguf_writer *w, const char *key, uint64_t v);
enum nb_status nb_gguf_writer_add_f32(struct nb_gguf_writer *w, const char *key, float v);
enum nb_status nb_gguf_writer_add_bool(struct nb_gguf_writer *w, const char *key, int v);
enum nb_status nb_gguf_writer_add_str(struct nb_gguf_writer *w, const char *key, const char *v);
/* Any fixed-size scalar type (not STRING/ARRAY); `value` points to it in host
 * (little-endian) representation, e.g. an int16_t for NB_GGUF_I16, a uint8_t for BOOL. */
enum nb_status nb_gguf_writer_add_scalar(struct nb_gguf_writer *w, const char *key,
                                         enum nb_gguf_type type, const void *value);
/* Array of fixed-size scalars (elem_type not STRING/ARRAY), `count` elements packed. */
enum nb_status nb_gguf_writer_add_arr(struct nb_gguf_writer *w, const char *key,
                                      enum nb_gguf_type elem_type, const void *data,
                                      uint64_t count);
enum nb_status nb_gguf_writer_add_arr_str(struct nb_gguf_writer *w, const char *key,
                                          const char *const *strs, uint64_t count);
enum nb_status nb_gguf_writer_add_tensor(struct nb_gguf_writer *w, const char *name,
                                         enum nb_dtype dtype, int n_dims, const int64_t *shape,
                                         const void *data);
/* A tensor whose bytes are produced while the file is written, for files larger than
 * one wants to hold in memory (`nibble synth`): write() calls fill(user, dst, offset, n)
 * for consecutive ranges [offset, offset + n) of the tensor's bytes, in order, from
 * offset 0 to its size; offsets are multiples of NB_GGUF_FILL_CHUNK and n is
 * NB_GGUF_FILL_CHUNK except for the last range. fill returns NB_OK or a status whose
 * message it has set; write() then fails with that status. `user` must stay valid
 * until write. */
#define NB_GGUF_FILL_CHUNK ((size_t)4 << 20)
typedef enum nb_status (*nb_gguf_fill_fn)(void *user, void *dst, uint64_t offset, size_t n);
enum nb_status nb_gguf_writer_add_tensor_fill(struct nb_gguf_writer *w, const char *name,
                                              enum nb_dtype dtype, int n_dims, const int64_t *shape,
                                              nb_gguf_fill_fn fill, void *user);
/* Write the file: a new unique temporary beside `path` (never following a symlink),
 * synced and renamed over it (core/outfile.h). The writer may be written again. */
enum nb_status nb_gguf_writer_write(struct nb_gguf_writer *w, const char *path);
/* The same bytes into an anonymous in-memory file: *fd_out is its descriptor, at
 * offset 0 (the caller closes it); `name` is for messages. */
enum nb_status nb_gguf_writer_write_memory(struct nb_gguf_writer *w, const char *name,
                                           int *fd_out);

#endif
