/* tests/fuzz/fuzz_nib.c — libFuzzer entry: the .nib header and tensor-table parser
 * (nb_nib_parse), then nb_nib_verify and the lookups on what it accepted.
 *
 * Input = one mode byte + the .nib file bytes. A .nib header carries the XXH3-64 of
 * its JSON, so random mutations of the JSON almost never get past the checksum; the
 * mode byte lets the harness repair the file first (on a 64-byte aligned copy, as a
 * mapping would be) so the fuzzer reaches the JSON and tensor-table validation:
 *
 *   bit 0  patch the checksum: u64 at offset 40 := XXH3-64 of the header_size (u64 at
 *          16) + table_size (u64 at 48) bytes at offset 64, when they lie inside the file.
 *   bit 1  patch the sizes first: table_size := the bytes after the JSON up to the last
 *          non-zero byte before data_offset (the writer pads the table with zeros), and
 *          data_size := file size - data_offset, when data_offset (u64 at 24) lies inside
 *          the file. This lets inserted or deleted bytes keep the file consistent.
 *
 * Mode 0 passes the file unchanged, so the magic, version, size and checksum checks
 * themselves stay reachable (and a real .nib file prefixed with a 0 byte is a valid
 * input). The seeds in tests/fuzz/corpus/nib/ are written by tests/fuzz/make_seeds.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "formats/nib.h"

#define FIXED_HEADER 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void wr64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static void patch(unsigned char *p, size_t size, unsigned mode)
{
    if (size < FIXED_HEADER) return;
    if (mode & 2) {
        uint64_t doff = rd64(p + 24), hsize = rd64(p + 16);
        size_t lim = doff > FIXED_HEADER && doff <= size ? (size_t)doff : size;
        while (lim > FIXED_HEADER && !p[lim - 1]) lim--;
        if (hsize < lim - FIXED_HEADER) wr64(p + 48, lim - FIXED_HEADER - hsize);
        if (doff <= size) wr64(p + 32, size - doff);
    }
    if (mode & 1) {
        uint64_t hsize = rd64(p + 16), tsize = rd64(p + 48);
        if (hsize <= size - FIXED_HEADER && tsize <= size - FIXED_HEADER - hsize)
            wr64(p + 40, XXH3_64bits(p + FIXED_HEADER, hsize + tsize));
    }
}

static volatile uint64_t g_sink;

static void check(const struct nb_nib *n, const unsigned char *buf, size_t size)
{
    g_sink += nb_nib_version(n) + nb_nib_file_size(n) + strlen(nb_nib_path(n));
    g_sink += (uint64_t)(nb_nib_header(n) != NULL);
    int64_t nt = nb_nib_n_tensors(n);
    if (nb_nib_tensor(n, -1) || nb_nib_tensor(n, nt)) abort();
    for (int64_t i = 0; i < nt; i++) {
        const struct nb_nib_tensor *t = nb_nib_tensor(n, i);
        const unsigned char *d = t->data;
        /* the parser's promises: inside the file, 64-byte aligned, the name unique */
        if (d < buf + FIXED_HEADER || t->size > size || d + t->size > buf + size ||
            ((uintptr_t)d & (NB_LAYOUT_ALIGN - 1)) || t->n_dims < 0 || t->n_dims > 2)
            abort();
        if (nb_nib_find(n, t->name) != t) abort();
        if (t->size) g_sink += d[0] + d[t->size - 1];
    }
    (void)nb_nib_verify(n);
    static const char *names[] = {"tok_embd.weight", "tokenizer/gguf", "", "no such tensor"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct nb_nib_tensor *t = nb_nib_find(n, names[i]);
        if (t && strcmp(t->name, names[i])) abort();
        g_sink += (uint64_t)(t != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned mode = data[0];
    data++;
    size--;
    /* a 64-byte aligned copy, as a mapping would be */
    void *buf = NULL;
    if (posix_memalign(&buf, 64, size ? size : 1) != 0) return 0;
    memcpy(buf, data, size);
    patch(buf, size, mode);
    struct nb_nib *n = NULL;
    if (nb_nib_parse(&n, buf, size, "fuzz.nib") == NB_OK) {
        check(n, buf, size);
        nb_nib_free(n);
    }
    free(buf);
    return 0;
}
