/* core/outfile.c — unique temporary, fsync, rename (see outfile.h). */
#include "core/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WRITE_CHUNK (1u << 20)
#define MAX_TRIES   16

static uint64_t random_suffix(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    struct timespec ts; /* no entropy yet (early boot): still unique with O_EXCL retries */
    clock_gettime(CLOCK_REALTIME, &ts);
    static unsigned counter;
    return ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_nsec << 8) ^ (uint64_t)ts.tv_sec ^
           __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED);
}

static void reset(struct nb_outfile *f)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

enum nb_status nb_outfile_open(struct nb_outfile *f, const char *path)
{
    reset(f);
    size_t len = strlen(path) + 32;
    f->path = strdup(path);
    f->tmp = malloc(len);
    if (!f->path || !f->tmp) {
        nb_outfile_abort(f);
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < MAX_TRIES; i++) {
        snprintf(f->tmp, len, "%s.%016llx.tmp", path, (unsigned long long)random_suffix());
        /* O_EXCL: fails on any existing name, a symlink (dangling or not) included */
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (f->fd >= 0) return NB_OK;
        if (errno != EEXIST) break;
    }
    int e = errno;
    enum nb_status st = nb_set_error(NB_ERR_IO, "%s: cannot create a temporary file beside it: %s",
                                     path, strerror(e));
    free(f->tmp); /* nothing was created: nothing to unlink */
    f->tmp = NULL;
    nb_outfile_abort(f);
    return st;
}

enum nb_status nb_outfile_open_memory(struct nb_outfile *f, const char *name)
{
    reset(f);
    f->path = strdup(name);
    if (!f->path) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    f->fd = memfd_create("nibble", MFD_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        nb_outfile_abort(f);
        return nb_set_error(NB_ERR_IO, "%s: cannot create a file in memory: %s", name,
                            strerror(e));
    }
    return NB_OK;
}

static const char *tmp_name(const struct nb_outfile *f)
{
    return f->tmp ? f->tmp : f->path;
}

enum nb_status nb_outfile_write(struct nb_outfile *f, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        size_t k = n < WRITE_CHUNK ? n : WRITE_CHUNK;
        ssize_t w = write(f->fd, c, k);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return nb_set_error(NB_ERR_IO, "%s: write failed after %llu bytes: %s", tmp_name(f),
                                (unsigned long long)f->n_written,
                                w < 0 ? strerror(errno) : "no progress");
        c += w;
        n -= (size_t)w;
        f->n_written += (uint64_t)w;
    }
    return NB_OK;
}

enum nb_status nb_outfile_zeros(struct nb_outfile *f, uint64_t n)
{
    static const unsigned char z[4096];
    while (n) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        enum nb_status st = nb_outfile_write(f, z, k);
        if (st) return st;
        n -= k;
    }
    return NB_OK;
}

static void sync_dir(const char *path)
{
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: the rename is already atomic for readers */
        close(fd);
    }
    free(dir);
}

enum nb_status nb_outfile_commit(struct nb_outfile *f, int *fd_out)
{
    enum nb_status st = NB_OK;
    if (!f->tmp) { /* memory */
        if (!fd_out) return nb_set_error(NB_ERR_INVALID_ARG, "%s: nowhere to keep", f->path);
        if (lseek(f->fd, 0, SEEK_SET) != 0) {
            st = nb_set_error(NB_ERR_IO, "%s: cannot rewind: %s", f->path, strerror(errno));
            nb_outfile_abort(f);
            return st;
        }
        *fd_out = f->fd;
        f->fd = -1;
        nb_outfile_abort(f);
        return NB_OK;
    }
    if (fsync(f->fd) != 0) {
        st = nb_set_error(NB_ERR_IO, "%s: fsync failed: %s", f->tmp, strerror(errno));
        goto fail;
    }
    /* Drop the written (now clean) pages from the page cache. Pages that write(2) put
     * there are small; the same bytes read back later by readahead (the first map of the
     * file) come in large folios, mapped as file huge pages. Decode on a 1.7 B .nib mapped
     * right after writing it ran at 15-21 t/s against 37-47 t/s after the drop (TLB
     * misses in every GEMM; docs/benchmarks.md). One re-read from disk is far cheaper. */
    (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0) {
        st = nb_set_error(NB_ERR_IO, "%s: close failed: %s", f->tmp, strerror(errno));
        goto fail;
    }
    if (rename(f->tmp, f->path) != 0) {
        st = nb_set_error(NB_ERR_IO, "%s: cannot rename to %s: %s", f->tmp, f->path,
                          strerror(errno));
        goto fail;
    }
    sync_dir(f->path);
    free(f->tmp);
    f->tmp = NULL;
    nb_outfile_abort(f);
    if (fd_out) *fd_out = -1;
    return NB_OK;
fail:
    nb_outfile_abort(f);
    return st;
}

void nb_outfile_abort(struct nb_outfile *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    reset(f);
}

int nb_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
