/* tests/shim/slow_write.c — an LD_PRELOAD shim for the cache tests (never linked into
 * nibble). It wraps write(2) for files whose name ends in ".tmp" (nibble's temporaries,
 * core/outfile.h) and writes of at least 4 KiB (the tensor bytes):
 *   NIBBLE_TEST_WRITE_DELAY_US=N   sleep N microseconds before each such write, so the
 *                                  window in which a cache entry is being written is
 *                                  seconds long and concurrent starts really overlap;
 *   NIBBLE_TEST_WRITE_FAIL=ENOSPC  fail each such write with that errno (ENOSPC, EROFS
 *                                  or EIO): a full or read-only disk;
 *   NIBBLE_TEST_UNLINK_FAIL=EROFS  fail unlink(2) of a ".nib" file with that errno (EROFS,
 *                                  EACCES; else EPERM): a read-only cache, even as root. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_temporary(int fd)
{
    char link[64], name[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, name, sizeof name - 1);
    if (n < 4) return 0;
    name[n] = '\0';
    return strcmp(name + n - 4, ".tmp") == 0;
}

static int fail_errno(void)
{
    const char *f = getenv("NIBBLE_TEST_WRITE_FAIL");
    if (!f) return 0;
    if (!strcmp(f, "ENOSPC")) return ENOSPC;
    if (!strcmp(f, "EROFS")) return EROFS;
    return EIO;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (n >= 4096 && is_temporary(fd)) {
        const char *d = getenv("NIBBLE_TEST_WRITE_DELAY_US");
        if (d) usleep((useconds_t)atoi(d));
        int e = fail_errno();
        if (e) {
            errno = e;
            return -1;
        }
    }
    return real(fd, buf, n);
}

int unlink(const char *path)
{
    static int (*real)(const char *);
    if (!real) real = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
    const char *f = getenv("NIBBLE_TEST_UNLINK_FAIL");
    size_t n = strlen(path);
    if (f && n >= 4 && !strcmp(path + n - 4, ".nib")) {
        errno = !strcmp(f, "EROFS") ? EROFS : !strcmp(f, "EACCES") ? EACCES : EPERM;
        return -1;
    }
    return real(path);
}
