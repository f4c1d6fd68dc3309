/* core/outfile.h — writing a file so that nobody ever sees half of it.
 *
 * Every file nibble writes (a .nib, a GGUF, safetensors, a warm-start cache entry, a
 * measurement record) goes through here:
 *   1. a new temporary file beside the target, "TARGET.XXXXXXXX.tmp" with a random
 *      suffix, created with O_CREAT|O_EXCL|O_NOFOLLOW: it is never an existing file and
 *      never a symlink planted there, and two writers of the same target never share it;
 *   2. the bytes, with write(2) in chunks (a test shim can slow them down);
 *   3. fsync, close, rename over the target (atomic), fsync of the directory.
 * A reader therefore sees the old file or the complete new one. On any failure the
 * temporary is removed and the target is untouched.
 *
 * nb_outfile_open_memory gives the same interface over an anonymous in-memory file
 * (memfd): the warm-start cache falls back to it when its folder cannot be written. */
#ifndef NB_CORE_OUTFILE_H
#define NB_CORE_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct nb_outfile {
    int fd;      /* -1 when closed */
    char *path;  /* the target (or the memory file's name) */
    char *tmp;   /* the temporary beside it; NULL for a memory file */
    uint64_t n_written;
};

/* Create a unique temporary beside `path`. Errors name the file and the reason. */
enum nb_status nb_outfile_open(struct nb_outfile *f, const char *path);
/* An anonymous file in memory named `name` (for messages); commit keeps it open. */
enum nb_status nb_outfile_open_memory(struct nb_outfile *f, const char *name);
enum nb_status nb_outfile_write(struct nb_outfile *f, const void *p, size_t n);
enum nb_status nb_outfile_zeros(struct nb_outfile *f, uint64_t n);
/* Sync and rename the temporary over the target (the file is closed). For a memory
 * file: *fd_out (required then, else may be NULL) takes the open descriptor, which the
 * caller closes. */
enum nb_status nb_outfile_commit(struct nb_outfile *f, int *fd_out);
/* Drop a file that was not committed (safe to call after commit: does nothing). */
void nb_outfile_abort(struct nb_outfile *f);

/* 1 when `a` and `b` name the same existing file (same device and inode). */
int nb_same_file(const char *a, const char *b);

#endif
