/* Replays every file of a seed folder through LLVMFuzzerTestOneInput, for
 * compilers without libFuzzer (the fuzz-smoke test then still runs the parsers
 * over the seeds and their truncations). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "%s: cannot open seed folder\n", argv[1]);
        return 2;
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
            fclose(f);
            free(buf);
            continue;
        }
        fclose(f);
        for (long cut = sz; cut >= 0; cut -= (sz / 64 + 1)) LLVMFuzzerTestOneInput(buf, (size_t)cut);
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d seeds\n", n);
    return 0;
}
