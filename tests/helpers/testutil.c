/* tests/helpers/testutil.c — shared helpers for the cmocka tests. */
#include "helpers/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/json.h"

const char *tu_model_path(const char *rel)
{
    static _Thread_local char buf[4096];
    const char *dir = getenv("NIBBLE_MODELS_DIR");
    if (!dir) return NULL;
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

cJSON *tu_load_json(const char *path)
{
    cJSON *root = NULL;
    if (nb_json_load(path, &root) != NB_OK) fail_msg("%s", nb_last_error());
    return root;
}

int32_t *tu_json_ids(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (int32_t)cJSON_GetArrayItem(arr, i)->valuedouble;
    return v;
}

float *tu_json_floats(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    float *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (float)cJSON_GetArrayItem(arr, i)->valuedouble;
    return v;
}

double tu_max_abs_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/nibble-test-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(p)) fail_msg("mkdtemp failed");
    return p;
}

void tu_rmtree(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

int tu_collect_cb(int32_t tok, void *user)
{
    struct tu_collect *g = user;
    if (g->n < 64) g->ids[g->n++] = tok;
    return 0;
}

void tu_copy_file(const char *from, const char *to)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod u+w '%s'", from, to, to);
    if (system(cmd) != 0) fail_msg("cannot copy %s to %s", from, to);
}

void tu_flip_byte(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+b");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, -from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
}
