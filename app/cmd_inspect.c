/* nibble inspect / nibble verify — look inside a model file (a .nib: header, tensors,
 * bits per weight; a GGUF: metadata and tensors, like gguf-dump; safetensors: tensors)
 * and check every tensor checksum of a .nib. `inspect --json` prints one JSON object
 * through cJSON, so any file name or key gives valid JSON. The library describes the file
 * (nb_inspect_json); the table is printed from that JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/commands.h"
#include "nibble.h"

static void usage(FILE *f, const char *cmd)
{
    if (!strcmp(cmd, "verify")) fprintf(f, "usage: nibble verify FILE.nib\n");
    else fprintf(f, "usage: nibble inspect [--json] MODEL   (a .nib, a GGUF file, a safetensors "
                    "file or a model folder)\n"
                    "       nibble inspect --dump TENSOR -o FILE MODEL.nib   (one tensor decoded "
                    "to raw little-endian f32,\n"
                    "       [n_out][n_in], as nibble's reference kernels see it)\n");
}

static void shape_str(char *out, size_t size, const int64_t *shape, int n_dims)
{
    size_t k = 0;
    out[0] = '\0';
    for (int d = 0; d < n_dims && k < size; d++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", d ? " x " : "", (long long)shape[d]);
    if (!n_dims) snprintf(out, size, "-");
}

/* The human form: a few header lines, then one line per tensor. */
static void print_doc(const char *path, const cJSON *doc)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(doc, "tensors");
    int nib = !strcmp(fmt->valuestring, "nib");
    printf("file        %s (%s", path, fmt->valuestring);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (v) printf(" version %d", v->valueint);
    printf(", %d tensors)\n", cJSON_GetArraySize(ts));
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, nib ? "header" : "metadata");
    const cJSON *e;
    cJSON_ArrayForEach(e, meta)
    {
        char *s = cJSON_PrintUnformatted(e);
        printf("%-11s %s\n", e->string, s ? s : "?");
        cJSON_free(s);
    }
    printf("\n%-36s %-6s %-16s %5s %6s %12s %8s\n", "tensor", nib ? "kind" : "dtype", "shape",
           "group", "layout", "bytes", "bpw");
    cJSON_ArrayForEach(e, ts)
    {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, nib ? "kind" : "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "group");
        const cJSON *lay = cJSON_GetObjectItemCaseSensitive(e, "layout");
        const cJSON *bpw = cJSON_GetObjectItemCaseSensitive(e, "bits_per_weight");
        int64_t shape[4] = {0};
        int nd = 0;
        const cJSON *d;
        cJSON_ArrayForEach(d, sh) if (nd < 4) shape[nd++] = (int64_t)d->valuedouble;
        char shs[64];
        shape_str(shs, sizeof shs, shape, nd);
        printf("%-36s %-6s %-16s %5d %6s %12.0f ", cJSON_GetObjectItem(e, "name")->valuestring,
               k->valuestring, shs, g ? g->valueint : 0, lay ? lay->valuestring : "-",
               cJSON_GetObjectItem(e, "bytes")->valuedouble);
        if (bpw) printf("%8.3f\n", bpw->valuedouble);
        else printf("%8s\n", "-");
    }
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *dump = NULL, *dump_out = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, "inspect");
            return 0;
        }
        if (!strcmp(argv[i], "--json")) json = 1;
        else if ((!strcmp(argv[i], "--dump") || !strcmp(argv[i], "-o")) && i + 1 < argc)
            *(!strcmp(argv[i], "--dump") ? &dump : &dump_out) = argv[i + 1], i++;
        else if (argv[i][0] == '-' || path) {
            usage(stderr, "inspect");
            return 1;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr, "inspect");
        return 1;
    }
    if (dump || dump_out) {
        int64_t shape[2];
        if (!dump || !dump_out || json) {
            usage(stderr, "inspect");
            return 1;
        }
        if (nb_nib_dump_f32(path, dump, dump_out, shape) != NB_OK) {
            fprintf(stderr, "nibble inspect: %s\n", nb_last_error());
            return 1;
        }
        printf("%s: %s [%lld, %lld] f32\n", dump_out, dump, (long long)shape[0],
               (long long)shape[1]);
        return 0;
    }
    char *text = NULL;
    if (nb_inspect_json(path, &text) != NB_OK) {
        fprintf(stderr, "nibble inspect: %s\n", nb_last_error());
        return 1;
    }
    int rc = 0;
    if (json) {
        printf("%s\n", text);
    } else {
        cJSON *doc = cJSON_Parse(text);
        if (doc) print_doc(path, doc);
        else rc = 1, fprintf(stderr, "nibble inspect: out of memory\n");
        cJSON_Delete(doc);
    }
    nb_free(text);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        int help = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
        usage(help ? stdout : stderr, "verify");
        return help ? 0 : 1;
    }
    int64_t n = 0;
    if (nb_nib_verify_file(argv[1], &n) != NB_OK) {
        fprintf(stderr, "nibble verify: %s\n", nb_last_error());
        return 1;
    }
    printf("%s: ok: %lld tensors, every checksum matches\n", argv[1], (long long)n);
    return 0;
}
