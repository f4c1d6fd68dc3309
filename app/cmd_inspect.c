/* nibble inspect / nibble verify — look inside a .nib (header, tensors, bpw) and
 * check every tensor's checksum. */
#include <stdio.h>
#include <string.h>

#include "app/commands.h"
#include "formats/nib.h"
#include "nibble.h"

static int open_nib(const char *cmd, int argc, char **argv, struct nb_nib **n)
{
    if (argc != 2 || argv[1][0] == '-') {
        if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            printf("usage: nibble %s FILE.nib\n", cmd);
            return 0;
        }
        fprintf(stderr, "usage: nibble %s FILE.nib\n", cmd);
        return -1;
    }
    if (nb_nib_open(n, argv[1]) != NB_OK) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        return -1;
    }
    return 1;
}

int cmd_inspect(int argc, char **argv)
{
    struct nb_nib *n = NULL;
    int r = open_nib("inspect", argc, argv, &n);
    if (r <= 0) return r < 0 ? 1 : 0;
    const cJSON *h = nb_nib_header(n);
    printf("file        %s (%zu bytes, .nib format %u)\n", argv[1], nb_nib_file_size(n),
           nb_nib_version(n));
    static const char *const keys[] = {"nibble_version", "weight_path", "layout", "group",
                                       "head", "embeddings", "source", "recipe",
                                       "bits_per_weight", "config"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, keys[i]);
        if (!v) continue;
        char *s = cJSON_PrintUnformatted(v);
        printf("%-11s %s\n", keys[i], s ? s : "?");
        cJSON_free(s);
    }
    printf("\n%-28s %-6s %-16s %5s %6s %12s %8s\n", "tensor", "kind", "shape", "group", "layout",
           "bytes", "bpw");
    for (int64_t i = 0; i < nb_nib_n_tensors(n); i++) {
        const struct nb_nib_tensor *t = nb_nib_tensor(n, i);
        char shape[48];
        double elems = 1;
        if (t->n_dims == 2) snprintf(shape, sizeof shape, "%lld x %lld", (long long)t->shape[0],
                                     (long long)t->shape[1]);
        else if (t->n_dims == 1) snprintf(shape, sizeof shape, "%lld", (long long)t->shape[0]);
        else snprintf(shape, sizeof shape, "-");
        for (int d = 0; d < t->n_dims; d++) elems *= (double)t->shape[d];
        const char *lay = t->kind == NB_NIB_BLOB || (t->path != NB_WPATH_W4A8 &&
                                                     t->path != NB_WPATH_W4A16)
                              ? "-"
                          : t->layout == NB_LAYOUT_X16 ? "x16"
                                                       : "rows";
        printf("%-28s %-6s %-16s %5d %6s %12llu %8.3f\n", t->name,
               t->kind == NB_NIB_BLOB ? "blob" : nb_wpath_name(t->path), shape, t->group, lay,
               (unsigned long long)t->size, t->n_dims ? 8.0 * (double)t->size / elems : 0.0);
    }
    nb_nib_free(n);
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    struct nb_nib *n = NULL;
    int r = open_nib("verify", argc, argv, &n);
    if (r <= 0) return r < 0 ? 1 : 0;
    int rc = 0;
    if (nb_nib_verify(n) != NB_OK) {
        fprintf(stderr, "nibble verify: %s\n", nb_last_error());
        rc = 1;
    } else {
        printf("%s: ok: %lld tensors, every checksum matches\n", argv[1],
               (long long)nb_nib_n_tensors(n));
    }
    nb_nib_free(n);
    return rc;
}
