/* formats/nib.h — nibble's packed model file (.nib): weights in exactly the layout
 * the chosen kernels read, mapped read-only and used in place.
 *
 *   offset  size  field
 *        0     8  magic "NIBBLE\r\n"   (\r\n: a text-mode copy breaks the magic)
 *        8     4  u32 format version (NB_NIB_VERSION)
 *       12     4  u32 flags (0; must be 0)
 *       16     8  u64 header_size: bytes of JSON at offset 64
 *       24     8  u64 data_offset: 64-aligned, >= 64 + header_size + table_size
 *       32     8  u64 data_size: the file is exactly data_offset + data_size bytes
 *       40     8  u64 XXH3-64 of the JSON header and the tensor table (one run of bytes)
 *       48     8  u64 table_size: bytes of the tensor table, right after the JSON
 *       56     8  zero
 *       64     …  JSON header (UTF-8), the tensor table, zero padding up to data_offset
 *   data_offset …  tensors in table order, each at the 64-aligned end of the one before
 *                  (the first at data_offset), zero padding between them and after the last
 * Every byte is covered by a checksum or must be zero: nb_nib_parse checks the flags, the
 * reserved word and the header padding, nb_nib_verify the tensors and the data padding,
 * so a change anywhere in the file is seen.
 *
 * The JSON header is an object with, at least, "nibble_version", "weight_path", "layout"
 * and "config" {…}; everything else (recipe, source, bits per weight) is free-form and
 * read by the layers that need it.
 *
 * The tensor table (version 2; version 1 had it in the JSON, 3x the bytes) is binary,
 * integers as LEB128 varints (7 bits a byte, low first) unless sized:
 *   varint n_tensors, then per tensor
 *   varint shared    bytes of the previous tensor's name this one starts with (0 first)
 *   varint rest      then that many bytes: the rest of the name (1..255 bytes, no NUL)
 *   u8     kind      0 blob, 1 f32, 2 bf16, 3 w8a16, 4 w4a16, 5 w4a8, 6 q4_k, 7 q5_k,
 *                    8 q6_k, 9 q4_0, 10 q8_0, 11 iq4_nl, 12 iq4_xs (GGUF block types:
 *                    core/wformat.h's block formats); codes are only ever appended
 *   u8     n_dims    0 (blobs), 1 (vectors) or 2 ([n_out, n_in])
 *   u8     layout    packed kinds only: 1 rows, 2 x16 (core/wformat.h; block kinds: the
 *                    GGUF rows or their X16 records, kernels/qblock.h)
 *   varint group     int4 kinds only
 *   varint shape[n_dims]
 *   varint size      blobs only: a packed tensor's size is its layout's
 *                    (nb_layout_planes / nb_wformat_planes), never stored
 *   u64    xxh3      XXH3-64 of the tensor's bytes */
#ifndef NB_FORMATS_NIB_H
#define NB_FORMATS_NIB_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/wformat.h"

#define NB_NIB_VERSION 2
#define NB_NIB_NAME_MAX 255          /* bytes of a tensor's name */
#define NB_NIB_MAX_TENSORS (1 << 20) /* entries of a table */
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
 * see nb_nib_verify). A file of another format version (1: before 2026-12-05) is
 * NB_ERR_UNSUPPORTED, "quantize the model again". */
enum nb_status nb_nib_open(struct nb_nib **out, const char *path);
/* The same from an open descriptor (mapped; the caller may close it afterwards). */
enum nb_status nb_nib_open_fd(struct nb_nib **out, int fd, const char *name);
/* nb_nib_open / _fd for a file that will run: its bytes read into huge pages where
 * nb_file_load_weights does so (core/mmap.h: the decode's TLB misses), else mapped. */
enum nb_status nb_nib_open_run(struct nb_nib **out, const char *path);
enum nb_status nb_nib_open_run_fd(struct nb_nib **out, int fd, const char *name);
/* Whether the file's bytes are a copy in huge pages (nb_nib_open_run did read them). */
int nb_nib_in_memory(const struct nb_nib *n);
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
 * twice, a name over NB_NIB_NAME_MAX bytes or a packed tensor whose size is not its
 * layout's fails the write (NB_ERR_INVALID_ARG) before anything is written. The header
 * object (a "tensors" item in it is dropped) is given at write time and is consumed. The file is
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
