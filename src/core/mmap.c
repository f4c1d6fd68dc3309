/* core/mmap.c — read-only file mappings. */
#include "core/mmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum nb_status nb_file_map(struct nb_mapped_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nb_set_error(NB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return nb_set_error(NB_ERR_IO, "%s: not a regular file", path);
    }
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return nb_set_error(NB_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, f->size,
                                strerror(e));
        }
        f->data = p;
    }
    close(fd);
    f->path = strdup(path);
    if (!f->path) {
        nb_file_unmap(f);
        return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
    }
    return NB_OK;
}

void nb_file_unmap(struct nb_mapped_file *f)
{
    if (!f) return;
    if (f->data) munmap((void *)f->data, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

enum nb_status nb_file_read_all(const char *path, size_t max_size, char **out, size_t *out_size)
{
    *out = NULL;
    if (out_size) *out_size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return nb_set_error(NB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    enum nb_status st = NB_OK;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            if (ncap > max_size + 1) ncap = max_size + 1;
            if (ncap <= n) {
                st = nb_set_error(NB_ERR_FORMAT, "%s: larger than the limit of %zu bytes", path,
                                  max_size);
                goto fail;
            }
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                st = nb_set_error(NB_ERR_NOMEM, "%s: out of memory", path);
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
        st = nb_set_error(NB_ERR_IO, "%s: read error", path);
        goto fail;
    }
    if (n > max_size) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: larger than the limit of %zu bytes", path, max_size);
        goto fail;
    }
    fclose(fp);
    buf[n] = '\0';
    *out = buf;
    if (out_size) *out_size = n;
    return NB_OK;
fail:
    fclose(fp);
    free(buf);
    return st;
}
