/* core/mmap.c — read-only file mappings. */
#include "core/mmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open `path` for reading only if it is a regular file. O_NONBLOCK: opening a FIFO
 * (or a device) must not wait for a writer before the type check refuses it. */
static enum nb_status open_regular(const char *path, int *fd_out, struct stat *sb)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return nb_set_error(NB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, sb) != 0) {
        int e = errno;
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: not a regular file (%s)", path,
                            S_ISDIR(sb->st_mode)    ? "a directory"
                            : S_ISFIFO(sb->st_mode) ? "a FIFO"
                            : S_ISSOCK(sb->st_mode) ? "a socket"
                            : S_ISCHR(sb->st_mode)  ? "a character device"
                            : S_ISBLK(sb->st_mode)  ? "a block device"
                                                    : "another file type");
    }
    *fd_out = fd;
    return NB_OK;
}

enum nb_status nb_file_open(const char *path, int *fd)
{
    struct stat sb;
    return open_regular(path, fd, &sb);
}

/* fd_fn on `path` opened as a regular file (closed afterwards). */
static enum nb_status by_path(struct nb_mapped_file *f, const char *path,
                              enum nb_status (*fd_fn)(struct nb_mapped_file *, int, const char *))
{
    memset(f, 0, sizeof *f);
    int fd = -1;
    struct stat sb;
    enum nb_status st = open_regular(path, &fd, &sb);
    if (st) return st;
    st = fd_fn(f, fd, path);
    close(fd);
    return st;
}

enum nb_status nb_file_map(struct nb_mapped_file *f, const char *path)
{
    return by_path(f, path, nb_file_map_fd);
}

enum nb_status nb_file_map_fd(struct nb_mapped_file *f, int fd, const char *name)
{
    memset(f, 0, sizeof *f);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return nb_set_error(NB_ERR_IO, "%s: cannot stat: %s", name, strerror(errno));
    if (!S_ISREG(st.st_mode)) return nb_set_error(NB_ERR_IO, "%s: not a regular file", name);
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            return nb_set_error(NB_ERR_IO, "%s: cannot mmap %zu bytes: %s", name, f->size,
                                strerror(errno));
        f->data = p;
    }
    f->path = strdup(name);
    if (!f->path) {
        nb_file_unmap(f);
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    }
    return NB_OK;
}

void nb_file_unmap(struct nb_mapped_file *f)
{
    if (!f) return;
    if (f->data && f->anon)
        nb_huge_free((void *)f->data, f->size);
    else if (f->data)
        munmap((void *)f->data, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

enum nb_status nb_stream_read_all(FILE *fp, const char *name, size_t max_size, char **out,
                                  size_t *out_size)
{
    *out = NULL;
    if (out_size) *out_size = 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    enum nb_status st = NB_OK;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            if (ncap > max_size + 1) ncap = max_size + 1;
            if (ncap <= n) {
                st = nb_set_error(NB_ERR_FORMAT, "%s: larger than the limit of %zu bytes", name,
                                  max_size);
                goto fail;
            }
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, fp);
        n += r;
        if (r == 0) break;
    }
    if (ferror(fp)) {
        st = nb_set_error(NB_ERR_IO, "%s: read error", name);
        goto fail;
    }
    if (n > max_size) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: larger than the limit of %zu bytes", name, max_size);
        goto fail;
    }
    buf[n] = '\0';
    *out = buf;
    if (out_size) *out_size = n;
    return NB_OK;
fail:
    free(buf);
    return st;
}

enum nb_status nb_file_read_all(const char *path, size_t max_size, char **out, size_t *out_size)
{
    *out = NULL;
    if (out_size) *out_size = 0;
    int fd = -1;
    struct stat sb;
    enum nb_status st = open_regular(path, &fd, &sb);
    if (st) return st;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        int e = errno;
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    st = nb_stream_read_all(fp, path, max_size, out, out_size);
    fclose(fp);
    return st;
}

void *nb_huge_alloc(size_t size)
{
    const size_t huge = (size_t)2 << 20;
    if (size == 0 || size > SIZE_MAX - huge) return NULL;
    /* over-allocate by one huge page and trim, so the buffer starts 2 MiB aligned */
    size_t len = (size + huge - 1) / huge * huge;
    char *raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + len + huge > p + len) munmap(p + len, (size_t)(raw + len + huge - (p + len)));
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* advice only: without it, ordinary pages */
#endif
    return p;
}

void nb_huge_free(void *p, size_t size)
{
    const size_t huge = (size_t)2 << 20;
    if (p) munmap(p, (size + huge - 1) / huge * huge);
}

/* ---------------------------------------------------------------- weights in memory */

#define COPY_MIN ((size_t)64 << 20)

static int g_copy = 1;

void nb_file_set_copy(int on) { g_copy = on; }

int nb_thp_mode_allows(const char *mode)
{
    return mode && (strstr(mode, "[always]") || strstr(mode, "[madvise]"));
}

static int thp_enabled(void)
{
    static int known = -1; /* read once; the same answer if two threads race here */
    if (known < 0) {
        char line[128] = "";
        FILE *fp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        if (fp) {
            if (!fgets(line, sizeof line, fp)) line[0] = 0;
            fclose(fp);
        }
        known = nb_thp_mode_allows(line);
    }
    return known;
}

int64_t nb_meminfo_available(const char *meminfo)
{
    const char *at = meminfo ? strstr(meminfo, "MemAvailable:") : NULL;
    long long kb;
    return at && sscanf(at + 13, "%lld", &kb) == 1 && kb >= 0 ? (int64_t)kb * 1024 : -1;
}

/* Whether a copy of `size` bytes leaves at least as much again of the memory Linux says is
 * available: a model near the RAM's size runs from the page cache (mapped), never into the
 * OOM killer. Unknown (no /proc): no copy. */
static int copy_fits(size_t size)
{
    char buf[4096];
    FILE *fp = fopen("/proc/meminfo", "r");
    if (!fp) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    int64_t avail = nb_meminfo_available(buf);
    return avail >= 0 && (uint64_t)size <= (uint64_t)avail / 2;
}

enum nb_status nb_file_copy_fd(struct nb_mapped_file *f, int fd)
{
    const size_t size = f->size;
    if (f->anon || !f->data) return NB_OK;
    const int copy =
        g_copy >= 2 || (g_copy == 1 && size >= COPY_MIN && thp_enabled() && copy_fits(size));
    char *buf = copy ? nb_huge_alloc(size) : NULL;
    if (!buf) return NB_OK; /* not wanted, or no memory for it: the mapping stays */
    for (size_t at = 0; at < size;) {
        ssize_t n = pread(fd, buf + at, size - at > ((size_t)1 << 30) ? (size_t)1 << 30 : size - at,
                          (off_t)at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            nb_huge_free(buf, size);
            return n < 0 ? nb_set_error(NB_ERR_IO, "%s: cannot read: %s", f->path, strerror(e))
                         : nb_set_error(NB_ERR_IO, "%s: ended at byte %zu of %zu while read "
                                        "(truncated meanwhile?)", f->path, at, size);
        }
        at += (size_t)n;
    }
    munmap((void *)f->data, size);
    f->data = buf;
    f->anon = 1;
    return NB_OK;
}

enum nb_status nb_file_load_weights_fd(struct nb_mapped_file *f, int fd, const char *name)
{
    enum nb_status st = nb_file_map_fd(f, fd, name);
    if (!st && (st = nb_file_copy_fd(f, fd))) nb_file_unmap(f);
    return st;
}

enum nb_status nb_file_load_weights(struct nb_mapped_file *f, const char *path)
{
    return by_path(f, path, nb_file_load_weights_fd);
}
