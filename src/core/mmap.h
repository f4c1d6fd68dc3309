/* core/mmap.h — read-only file mappings. */
#ifndef NB_CORE_MMAP_H
#define NB_CORE_MMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

struct nb_mapped_file {
    const void *data; /* NULL for an empty file */
    size_t size;
    char *path;       /* owned copy, for error messages */
    int anon;         /* data is a copy in nb_huge_alloc memory (nb_file_load_weights) */
};

/* Map `path` read-only (MAP_PRIVATE). Only a regular file is opened for reading (a
 * FIFO or a device is refused by type, never waited on). Errors name the file. */
enum nb_status nb_file_map(struct nb_mapped_file *f, const char *path);
/* Map an open descriptor (not closed here); `name` is for messages. */
enum nb_status nb_file_map_fd(struct nb_mapped_file *f, int fd, const char *name);
void nb_file_unmap(struct nb_mapped_file *f);

/* A file of weights that run in place (a .nib): read into nb_huge_alloc memory when
 * Linux backs it with transparent huge pages (THP "always" or "madvise"), the file is at
 * least 64 MiB and at most half of MemAvailable, else mapped as nb_file_map does (also
 * when the copy finds no memory).
 * Decode streams every weight once a token; on 4 KiB pages of the file's mapping that is
 * a TLB miss every 4 KiB, on 2 MiB pages 512 times fewer. Measured (model-167 Xeon VM,
 * Qwen3-1.7B balanced w4a8, tg64, bench/ab.sh, two interleaved passes): 11.0-11.1 ->
 * 14.6-14.8 tok/s at 1 thread, 21.1-21.2 -> 28.4 at 2, with the file's page cache as it had
 * been for hours; re-read into the page cache, mapped ran 14.3 against 14.5: the copy takes
 * away how much a page's placement in the VM costs. The copy is anonymous memory
 * (RssAnon grows by the file's size; the page cache keeps its own, reclaimable copy).
 * nb_file_set_copy(0) (the CLI: NIBBLE_MMAP=1) always maps; 2 always copies, any size,
 * with or without THP (tests). */
enum nb_status nb_file_load_weights(struct nb_mapped_file *f, const char *path);
enum nb_status nb_file_load_weights_fd(struct nb_mapped_file *f, int fd, const char *name);
/* The second half of nb_file_load_weights_fd: f, a mapping of fd, becomes the copy when the
 * rules above want one (else it stays as it is). A failed read leaves f mapped. */
enum nb_status nb_file_copy_fd(struct nb_mapped_file *f, int fd);
/* Open `path` for reading if it is a regular file (nb_file_map's checks and errors). */
enum nb_status nb_file_open(const char *path, int *fd);
void nb_file_set_copy(int on);
/* Whether a THP mode line (/sys/kernel/mm/transparent_hugepage/enabled, e.g. "always
 * [madvise] never") lets nb_huge_alloc's madvise get huge pages. */
int nb_thp_mode_allows(const char *mode);
/* MemAvailable in bytes from the text of /proc/meminfo; -1 when it is not there. */
int64_t nb_meminfo_available(const char *meminfo);

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
