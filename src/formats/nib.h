/* formats/nib.h — nibble's packed model file (.nib): weights in exactly the layout
 * the chosen kernels read, mapped read-only and used in place.
 *
 *   offset  size  field
 *        0     8  magic "NIBBLE\r\n"   (\r\n: a text-mode copy breaks the magic)
 *        8     4  u32 format version (NB_NIB_VERSION)
 *       12     4  u32 flags (0; must be 0)
 *       16     8  u64 header_size: bytes of JSON at offset 64
 *       24     8  u64 data_offset: 64-aligned, >= 64 + header_size
 *       32     8  u64 data_size: the file is exactly data_offset + data_size bytes
 *       40     8  u64 XXH3-64 of the JSON header bytes
 *       48    16  zero
 *       64     …  JSON header (UTF-8), zero padding up to data_offset
 *   data_offset …  tensors, each at data_offset + its "offset" (64-aligned), zero padding
 *                  between them and after the last
 * Every byte is covered by a checksum or must be zero: nb_nib_parse checks the flags, the
 * reserved words and the header padding, nb_nib_verify the tensors and the data padding,
 * so a change anywhere in the file is seen.
 *
 * The JSON header is an object with, at least:
 *   "nibble_version", "weight_path", "layout", "config" {…}, and "tensors": an array of
 *   {"name", "kind" ("f32","bf16","w8a16","w4a16","w4a8", a GGUF block type in lower case
 *    ("q6_k", "q8_0", ...: core/wformat.h's block formats) or "blob"), "shape" [n_out, n_in]
 *    (vectors [n]; blobs []), "group" and "layout" (int4 kinds; layout 1 = rows,
 *    2 = x16, see core/wformat.h; block kinds: "layout" 1 = the GGUF rows, 2 = their X16
 *    records, kernels/qblock.h), "offset", "size",
 *    "xxh3" (16 hex digits: XXH3-64 of the tensor's bytes)}.
 * Everything else (recipe, source, bits per weight, tokenizer) is free-form and read by
 * the layers that need it. Sizes of packed kinds must equal nb_layout_planes().total. */
#ifndef NB_FORMATS_NIB_H
#define NB_FORMATS_NIB_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/wformat.h"

#define NB_NIB_VERSION 1
#define NB_NIB_MAGIC "NIBBLE\r\n"

enum nb_nib_kind { NB_NIB_PACKED = 0, NB_NIB_BLOB };

struct nb_nib_tensor {
    const char *name;
    enum nb_nib_kind kind;
    enum nb_wpath path; /* for NB_NIB_PACKED (NB_WPATH_COUNT: a block kind, no path) */
    enum nb_wformat format; /* for NB_NIB_PACKED: how the bytes are read */
    int group;          /* int4 paths */
    int layout;         /* NB_LAYOUT_ROWS or NB_LAYOUT_X16 (int4 paths) */
    int n_dims;         /* 0 (blob), 1 or 2 */
    int64_t shape[2];
    const void *data; /* inside the mapping, 64-byte aligned */
    uint64_t size;
    uint64_t xxh3;
};

struct nb_nib;

/* Open, map and validate the header and the tensor table (not the tensor bytes:
 * see nb_nib_verify). A file of another format version is NB_ERR_UNSUPPORTED. */
enum nb_status nb_nib_open(struct nb_nib **out, const char *path);
/* The same from an open descriptor (mapped; the caller may close it afterwards). */
enum nb_status nb_nib_open_fd(struct nb_nib **out, int fd, const char *name);
enum nb_status nb_nib_parse(struct nb_nib **out, const void *data, size_t size, const char *name);
void nb_nib_free(struct nb_nib *n);
/* Check every tensor's XXH3 checksum; the first mismatch is NB_ERR_FORMAT naming it. */
enum nb_status nb_nib_verify(const struct nb_nib *n);

const char *nb_nib_path(const struct nb_nib *n);
uint32_t nb_nib_version(const struct nb_nib *n);
const cJSON *nb_nib_header(const struct nb_nib *n); /* the whole JSON header */
size_t nb_nib_file_size(const struct nb_nib *n);
int64_t nb_nib_n_tensors(const struct nb_nib *n);
const struct nb_nib_tensor *nb_nib_tensor(const struct nb_nib *n, int64_t i);
const struct nb_nib_tensor *nb_nib_find(const struct nb_nib *n, const char *name);

/* ---- writing ----
 * Tensors are added with their bytes (kept by the caller until write); a name added
 * twice fails the write (NB_ERR_INVALID_ARG) before anything is written. The header
 * object (without "tensors") is given at write time and is consumed. The file is
 * written to a new unique temporary beside PATH (never following a symlink), synced and
 * renamed over it, so a reader never sees a half-written file (core/outfile.h). */
struct nb_nib_writer;
enum nb_status nb_nib_writer_init(struct nb_nib_writer **out);
void nb_nib_writer_free(struct nb_nib_writer *w);
enum nb_status nb_nib_writer_add(struct nb_nib_writer *w, const char *name, enum nb_nib_kind kind,
                                 enum nb_wpath path, int group, int layout, int n_dims,
                                 const int64_t *shape, const void *data, uint64_t size);
/* A matrix in a GGUF block format (its rows or X16 records: nb_wformat_block). */
enum nb_status nb_nib_writer_add_block(struct nb_nib_writer *w, const char *name,
                                       enum nb_wformat format, int64_t n_out, int64_t n_in,
                                       const void *data, uint64_t size);
/* The "kind" of a packed tensor: its path's name, or its block type in lower case. */
const char *nb_nib_kind_name(enum nb_wpath path, enum nb_wformat format);
enum nb_status nb_nib_writer_write(struct nb_nib_writer *w, cJSON *header, const char *path);
/* Tensors added so far, and tensor i's checksum computed now (callers may checksum
 * distinct tensors on several threads before the write, which then reuses them). */
int64_t nb_nib_writer_count(const struct nb_nib_writer *w);
void nb_nib_writer_checksum(struct nb_nib_writer *w, int64_t i);
/* The same bytes into an anonymous in-memory file: *fd_out is its descriptor, at offset
 * 0 (the caller closes it). For a warm-start cache that cannot be written. */
enum nb_status nb_nib_writer_write_memory(struct nb_nib_writer *w, cJSON *header,
                                          const char *name, int *fd_out);

#endif
