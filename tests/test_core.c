/* test_core — errors, fp16/bf16 conversion, arena, thread pool, file helpers. */
#include "helpers/testutil.h"

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/fp.h"
#include "core/mmap.h"
#include "core/outfile.h"
#include "core/threadpool.h"

static void test_error_message(void **state)
{
    assert_int_equal(nb_set_error(NB_ERR_FORMAT, "tensor '%s' bad", "x"), NB_ERR_FORMAT);
    assert_string_equal(nb_last_error(), "tensor 'x' bad");
    nb_wrap_error(NB_ERR_FORMAT, "%s: ", "file.gguf");
    assert_string_equal(nb_last_error(), "file.gguf: tensor 'x' bad");
    assert_string_equal(nb_status_str(NB_ERR_IO), "i/o error");
}

static void test_f16_round_trip(void **state)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = nb_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            assert_true(isnan(nb_f16_to_f32(nb_f32_to_f16(f))));
            continue;
        }
        assert_int_equal(nb_f32_to_f16(f), h);
    }
    assert_true(nb_f16_to_f32(0x3c00) == 1.0f);
    assert_true(nb_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_int_equal(nb_f32_to_f16(1e6f), 0x7c00);           /* overflow -> inf */
    assert_int_equal(nb_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie -> even */
    assert_int_equal(nb_f32_to_f16(ldexpf(1.0f, -26)), 0x0000);     /* underflow */
}

static void test_bf16(void **state)
{
    assert_true(nb_bf16_to_f32(nb_f32_to_bf16(1.0f)) == 1.0f);
    assert_int_equal(nb_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80); /* tie -> even */
    assert_int_equal(nb_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -12)), 0x3f81);
    assert_true(isnan(nb_bf16_to_f32(nb_f32_to_bf16(NAN))));
}

static void test_checked(void **state)
{
    uint64_t r;
    assert_int_equal(nb_mul_u64(UINT64_MAX / 2, 3, &r), 1);
    assert_int_equal(nb_add_u64(UINT64_MAX, 1, &r), 1);
    assert_int_equal(nb_align_u64(33, 32, &r), 0);
    assert_int_equal(r, 64);
    assert_int_equal(nb_align_u64(UINT64_MAX - 3, 32, &r), 1);
}

static void test_arena(void **state)
{
    struct nb_arena a;
    nb_arena_init(&a, 256);
    for (int i = 1; i < 100; i++) {
        unsigned char *p = nb_arena_alloc(&a, (size_t)i * 7);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (int k = 0; k < i * 7; k++) assert_int_equal(p[k], 0);
        memset(p, 0xab, (size_t)i * 7);
    }
    assert_null(nb_arena_alloc(&a, SIZE_MAX - 10));
    assert_string_equal(nb_arena_strdup(&a, "hello"), "hello");
    nb_arena_free(&a);
}

struct sum_job {
    atomic_long total;
    atomic_int calls;
    long n;
};

static void sum_worker(void *arg, int ith, int nth)
{
    struct sum_job *j = arg;
    long lo, hi, s = 0;
    nb_split_range(j->n, ith, nth, 16, &lo, &hi);
    for (long i = lo; i < hi; i++) s += i;
    atomic_fetch_add(&j->total, s);
    atomic_fetch_add(&j->calls, 1);
}

static void test_threadpool(void **state)
{
    for (int nt = 1; nt <= 4; nt++) {
        struct nb_pool *p = NULL;
        assert_int_equal(nb_pool_init(&p, nt, 0), NB_OK);
        assert_int_equal(nb_pool_size(p), nt);
        for (int rep = 0; rep < 2000; rep++) {
            struct sum_job j = {.n = 1000 + rep};
            nb_pool_run(p, sum_worker, &j);
            assert_int_equal(atomic_load(&j.total), j.n * (j.n - 1) / 2);
            assert_int_equal(atomic_load(&j.calls), nt);
        }
        struct sum_job j1 = {.n = 100};
        nb_pool_run_n(p, sum_worker, &j1, 1);
        assert_int_equal(atomic_load(&j1.calls), 1);
        assert_int_equal(atomic_load(&j1.total), 4950);
        nb_pool_free(p);
    }
}

static void test_split_range(void **state)
{
    for (long n = 0; n < 300; n += 7)
        for (int nth = 1; nth <= 5; nth++) {
            long covered = 0, prev_hi = 0;
            for (int i = 0; i < nth; i++) {
                long lo, hi;
                nb_split_range(n, i, nth, 16, &lo, &hi);
                assert_true(lo == prev_hi || lo == hi);
                if (hi > lo) prev_hi = hi;
                covered += hi - lo;
            }
            assert_int_equal(covered, n);
        }
}

static void test_files(void **state)
{
    struct nb_mapped_file f;
    assert_int_equal(nb_file_map(&f, "/nonexistent/x.gguf"), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/x.gguf"));
    char *dir = tu_mkdtemp();
    char path[4200];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    FILE *fp = fopen(path, "w");
    fputs("hello world", fp);
    fclose(fp);
    assert_int_equal(nb_file_map(&f, path), NB_OK);
    assert_int_equal(f.size, 11);
    assert_memory_equal(f.data, "hello", 5);
    nb_file_unmap(&f);
    char *buf;
    size_t n;
    assert_int_equal(nb_file_read_all(path, 100, &buf, &n), NB_OK);
    assert_string_equal(buf, "hello world");
    free(buf);
    assert_int_equal(nb_file_read_all(path, 5, &buf, &n), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "limit"));
    assert_int_equal(nb_file_map(&f, dir), NB_ERR_IO); /* a directory */
    /* a FIFO is refused by type: opening it must not wait for a writer */
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(nb_file_map(&f, fifo), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "not a regular file (a FIFO)"));
    assert_int_equal(nb_file_read_all(fifo, 100, &buf, &n), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "a FIFO"));
    tu_rmtree(dir);
    free(dir);
}

/* core/mmap: weights read into huge pages (nb_file_load_weights), or mapped. */
static void test_weights_in_memory(void **state)
{
    assert_true(nb_thp_mode_allows("always [madvise] never"));
    assert_true(nb_thp_mode_allows("[always] madvise never\n"));
    assert_false(nb_thp_mode_allows("always madvise [never]"));
    assert_false(nb_thp_mode_allows(""));
    assert_false(nb_thp_mode_allows(NULL));
    assert_int_equal(nb_meminfo_available("MemTotal:       24683544 kB\nMemFree:        "
                                          "20221872 kB\nMemAvailable:   23861232 kB\n"),
                     (int64_t)23861232 * 1024);
    assert_int_equal(nb_meminfo_available("MemTotal: 1 kB\n"), -1);
    assert_int_equal(nb_meminfo_available(NULL), -1);
    char *dir = tu_mkdtemp();
    char path[4200];
    snprintf(path, sizeof path, "%s/w.nib", dir);
    FILE *fp = fopen(path, "w");
    for (int i = 0; i < 5000; i++) fputc(i * 7 & 0xff, fp);
    fclose(fp);
    struct nb_mapped_file f;
    for (int mode = 0; mode <= 2; mode++) {
        nb_file_set_copy(mode);
        assert_int_equal(nb_file_load_weights(&f, path), NB_OK);
        /* under 64 MiB: mapped unless every file is copied (2) */
        assert_int_equal(f.anon, mode == 2);
        assert_int_equal(f.size, 5000);
        const unsigned char *d = f.data;
        for (int i = 0; i < 5000; i++) assert_int_equal(d[i], i * 7 & 0xff);
        nb_file_unmap(&f);
        assert_null(f.data);
    }
    assert_int_equal(nb_file_load_weights(&f, dir), NB_ERR_IO); /* a directory */
    assert_int_equal(nb_file_load_weights(&f, "/nonexistent/w.nib"), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/w.nib"));
    nb_file_set_copy(1);
    tu_rmtree(dir);
    free(dir);
}

static void read_back(const char *path, char *buf, size_t size)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    memset(buf, 0, size);
    if (!fgets(buf, (int)size, fp)) buf[0] = '\0';
    fclose(fp);
}

/* core/outfile: a unique temporary, never a planted symlink, nothing left behind. */
static void test_outfile(void **state)
{
    char *dir = tu_mkdtemp();
    char path[4200], victim[4200], planted[4300], buf[64];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(planted, sizeof planted, "%s.tmp", path);
    FILE *fp = fopen(victim, "w");
    fputs("victim", fp);
    fclose(fp);
    assert_int_equal(symlink(victim, planted), 0);
    struct nb_outfile a, b;
    assert_int_equal(nb_outfile_open(&a, path), NB_OK);
    assert_int_equal(nb_outfile_open(&b, path), NB_OK); /* two writers: two files */
    assert_string_not_equal(a.tmp, b.tmp);
    assert_int_equal(nb_outfile_write(&a, "first", 5), NB_OK);
    assert_int_equal(nb_outfile_write(&b, "second", 6), NB_OK);
    assert_int_equal(access(path, F_OK), -1); /* nothing visible before commit */
    assert_int_equal(nb_outfile_commit(&a, NULL), NB_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "first");
    assert_int_equal(nb_outfile_commit(&b, NULL), NB_OK);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "second");
    read_back(victim, buf, sizeof buf);
    assert_string_equal(buf, "victim");
    assert_int_equal(nb_outfile_open(&a, path), NB_OK); /* abort: the old file stays */
    assert_int_equal(nb_outfile_zeros(&a, 10000), NB_OK);
    nb_outfile_abort(&a);
    read_back(path, buf, sizeof buf);
    assert_string_equal(buf, "second");
    /* committed bytes leave the page cache (the first map reads them back in large
     * folios); tmpfs keeps its pages by nature */
    enum { BIG = 4 << 20 };
    char *big = malloc(BIG);
    memset(big, 0xab, BIG);
    assert_int_equal(nb_outfile_open(&a, path), NB_OK);
    assert_int_equal(nb_outfile_write(&a, big, BIG), NB_OK);
    assert_int_equal(nb_outfile_commit(&a, NULL), NB_OK);
    free(big);
    struct statfs sfs;
    assert_int_equal(statfs(path, &sfs), 0);
    if (sfs.f_type != 0x01021994 /* TMPFS_MAGIC */) {
        int fd = open(path, O_RDONLY);
        void *p = mmap(NULL, BIG, PROT_READ, MAP_SHARED, fd, 0);
        assert_true(p != MAP_FAILED);
        long page = sysconf(_SC_PAGESIZE);
        unsigned char vec[BIG / 4096];
        assert_int_equal(mincore(p, BIG, vec), 0);
        int resident = 0;
        for (long i = 0; i < BIG / page; i++) resident += vec[i] & 1;
        assert_true(resident < BIG / page / 8);
        munmap(p, BIG);
        close(fd);
    }
    assert_int_equal(unlink(planted), 0);
    assert_int_equal(tu_count_files(dir, ".tmp"), 0);
    snprintf(path, sizeof path, "%s/no/such/dir/x", dir);
    assert_int_equal(nb_outfile_open(&a, path), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "No such file or directory"));
    /* in memory: the descriptor holds the bytes */
    int fd = -1;
    assert_int_equal(nb_outfile_open_memory(&a, "mem"), NB_OK);
    assert_int_equal(nb_outfile_write(&a, "memory", 6), NB_OK);
    assert_int_equal(nb_outfile_commit(&a, &fd), NB_OK);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof buf), 6);
    assert_memory_equal(buf, "memory", 6);
    close(fd);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message), cmocka_unit_test(test_f16_round_trip),
        cmocka_unit_test(test_bf16),          cmocka_unit_test(test_checked),
        cmocka_unit_test(test_arena),         cmocka_unit_test(test_threadpool),
        cmocka_unit_test(test_split_range),   cmocka_unit_test(test_files),
        cmocka_unit_test(test_weights_in_memory),
        cmocka_unit_test(test_outfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
