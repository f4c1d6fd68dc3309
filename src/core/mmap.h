/* core/mmap.h — read-only file mappings. */
#ifndef NB_CORE_MMAP_H
#define NB_CORE_MMAP_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

struct nb_mapped_file {
    const void *data; /* NULL for an empty file */
    size_t size;
    char *path;       /* owned copy, for error messages */
};

/* Map `path` read-only (MAP_PRIVATE). Only a regular file is opened for reading (a
 * FIFO or a device is refused by type, never waited on). Errors name the file. */
enum nb_status nb_file_map(struct nb_mapped_file *f, const char *path);
/* Map an open descriptor (not closed here); `name` is for messages. */
enum nb_status nb_file_map_fd(struct nb_mapped_file *f, int fd, const char *name);
void nb_file_unmap(struct nb_mapped_file *f);

/* Anonymous memory for large weight buffers written once at load: 2 MiB aligned and
 * asked for as transparent huge pages (madvise), so the first touch of a gigabyte
 * faults ~500 times instead of ~260,000 (model/repack.c measured 1.51 s -> see there).
 * Zero-filled. NULL on failure; free with nb_huge_free(p, size). */
void *nb_huge_alloc(size_t size);
void nb_huge_free(void *p, size_t size);

/* Read a whole (small) regular file into a NUL-terminated malloc'd buffer, refusing
 * files larger than max_size. */
enum nb_status nb_file_read_all(const char *path, size_t max_size, char **out, size_t *out_size);
/* The same from an open stream (standard input, say), read to its end and not closed;
 * `name` is for messages. */
enum nb_status nb_stream_read_all(FILE *fp, const char *name, size_t max_size, char **out,
                                  size_t *out_size);

#endif
