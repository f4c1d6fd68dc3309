/* eval/record.c — write a measurement record (docs/measurements format; the fields are
 * listed in docs/selector.md), the selector's own input: `nibble bench --record DIR`
 * through nb_record_write. The library finds what the caller cannot see through
 * nibble.h: this CPU's probe and record key (runtime/probe.h), the kernel the running
 * table dispatches for the weight path, the head's bits from a .nib header and the build
 * commit. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/outfile.h"
#include "formats/nib.h"
#include "kernels/kernels.h"
#include "runtime/api.h"
#include "runtime/probe.h"
#include "runtime/selector.h"
#include "nibble_eval.h"

/* Letters, digits, '.' and '_' kept; anything else becomes '-'. */
static void sanitise(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++)
        dst[i] = isalnum((unsigned char)src[i]) || src[i] == '.' || src[i] == '_' ? src[i] : '-';
    dst[i] = 0;
}

/* "dir/kjv-7m-f32.gguf" -> "kjv-7m-f32"; a folder (HF model) -> its name. */
static void model_base(char *dst, size_t size, const char *arg)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", arg);
    size_t l = strlen(tmp);
    while (l > 1 && tmp[l - 1] == '/')
        tmp[--l] = 0;
    const char *b = strrchr(tmp, '/');
    b = b ? b + 1 : tmp;
    char *dot = strrchr(b, '.');
    if (dot && dot != b) *dot = 0;
    sanitise(dst, size, b);
}

/* Bits of the output head from a .nib header's "head" path; 0: unknown (not a .nib). */
static int head_bits_of(const char *file)
{
    struct nb_nib *n = NULL;
    int bits = 0;
    if (!file || nb_nib_open(&n, file) != NB_OK) {
        nb_clear_error();
        return 0;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(nb_nib_header(n), "head");
    enum nb_wpath p;
    if (cJSON_IsString(h) && nb_wpath_from_name(h->valuestring, &p))
        bits = nb_wpath_is_int4(p) ? 4
               : p == NB_WPATH_W8A16                     ? 8
               : p == NB_WPATH_BF16                      ? 16
                                                         : 32;
    nb_nib_free(n);
    return bits;
}

static cJSON *figs(const char *count_key, int count, const double *x, int n)
{
    struct nb_stats s = {.size = sizeof s};
    nb_stats_of(x, n, &s);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, count_key, count);
    cJSON_AddNumberToObject(o, "best_ts", s.best);
    cJSON_AddNumberToObject(o, "median_ts", s.median);
    cJSON_AddNumberToObject(o, "mean_ts", s.mean);
    cJSON_AddNumberToObject(o, "stddev_ts", s.stddev);
    cJSON_AddNumberToObject(o, "spread_pct", s.spread_pct);
    cJSON *a = cJSON_AddArrayToObject(o, "samples");
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(x[i]));
    return o;
}

struct nb_record_params nb_record_default_params(void)
{
    return (struct nb_record_params){.size = sizeof(struct nb_record_params)};
}

enum nb_status nb_record_write(const struct nb_record_params *params,
                               struct nb_record_result *result)
{
    struct nb_record_params r = nb_record_default_params();
    enum nb_status st = nb_params_in(&r, sizeof r, params, "nb_record_write");
    if (st) return st;
    if (!params || !r.dir || !r.model_arg || !r.info || (r.n_pp && !r.pp) || (r.n_tg && !r.tg) ||
        r.n_depth < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "record: %s",
                            !params || !r.dir ? "no folder given"
                            : !r.model_arg    ? "no model given"
                            : !r.info         ? "no model info given"
                            : r.n_depth < 0   ? "negative depth"
                                              : "samples counted but not given");
    enum nb_wpath path;
    if (!r.info->weight_path || !nb_wpath_from_name(r.info->weight_path, &path))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s is a float (%s) model, not a weight path: give --path to "
                            "record it",
                            r.model_arg, r.info->weight_path ? r.info->weight_path : "?");
    struct nb_probe *p = calloc(1, sizeof *p);
    if (!p) return nb_set_error(NB_ERR_NOMEM, "record: out of memory");
    char flags[512], key[80], base[160], date[32], cpu_key[NB_CPU_KEY_LEN];
    char rec_key[NB_RECORD_KEY_LEN];
    struct nb_record_result out = {.size = sizeof out};
    char *text = NULL;
    nb_probe_host(p, 0);
    nb_probe_flags_str(p, flags, sizeof flags);
    const struct nb_kernels *table = nb_kernels_get();
    const char *kernel = nb_select_kernel_of_table(table, path);
    /* the key of what ran: this table's kernel at this table's level (NIBBLE_ISA and the
     * AMX self-check included); "" (JSON null) when this CPU cannot be keyed */
    nb_probe_cpu_key(p, cpu_key, sizeof cpu_key, NULL);
    nb_record_key(p, path, kernel, table->level, rec_key, sizeof rec_key, NULL);
    int head = head_bits_of(r.model_file);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "schema", "nibble-measurement-1");
    cJSON *cpu = cJSON_AddObjectToObject(o, "cpu");
    cJSON_AddStringToObject(cpu, "vendor", p->vendor);
    cJSON_AddNumberToObject(cpu, "family", p->family);
    cJSON_AddNumberToObject(cpu, "model", p->model);
    cJSON_AddStringToObject(cpu, "name", p->model_name);
    cJSON_AddStringToObject(cpu, "flags", flags);
    cJSON_AddStringToObject(cpu, "family_key", p->family_key); /* for people; not matched */
    if (cpu_key[0])
        cJSON_AddStringToObject(cpu, "cpu_key", cpu_key);
    else
        cJSON_AddNullToObject(cpu, "cpu_key");
    cJSON_AddNumberToObject(o, "threads", r.threads);
    cJSON_AddStringToObject(o, "commit", r.commit ? r.commit : nb_build_commit());
    cJSON_AddStringToObject(o, "date", date);
    const char *slash = strrchr(r.model_arg, '/');
    cJSON_AddStringToObject(o, "model_file", slash && slash[1] ? slash + 1 : r.model_arg);
    cJSON *shape = cJSON_AddObjectToObject(o, "model_shape");
    cJSON_AddStringToObject(shape, "arch", r.info->arch);
    cJSON_AddNumberToObject(shape, "n_layers", r.info->n_layers);
    cJSON_AddNumberToObject(shape, "n_embd", r.info->n_embd);
    cJSON_AddNumberToObject(shape, "n_vocab", r.info->n_vocab);
    cJSON_AddNumberToObject(shape, "n_params", (double)r.info->n_params);
    cJSON_AddStringToObject(o, "weight_path", nb_wpath_name(path));
    cJSON_AddStringToObject(o, "kernel", kernel);
    if (rec_key[0])
        cJSON_AddStringToObject(o, "record_key", rec_key);
    else
        cJSON_AddNullToObject(o, "record_key");
    if (head)
        cJSON_AddNumberToObject(o, "head_bits", head);
    else
        cJSON_AddNullToObject(o, "head_bits");
    cJSON_AddNumberToObject(o, "bits_per_weight",
                            r.info->linear_params
                                ? 8.0 * (double)r.info->linear_bytes / (double)r.info->linear_params
                                : 0);
    /* always written: a reader that finds 0 (or, in older records, nothing) knows the
     * tests ran from an empty cache, and the selector weighs only those */
    cJSON_AddNumberToObject(o, "n_depth", r.n_depth);
    if (r.n_pp) cJSON_AddItemToObject(o, "pp", figs("n_prompt", r.n_prompt, r.pp, r.n_pp));
    if (r.n_tg) cJSON_AddItemToObject(o, "tg", figs("n_gen", r.n_gen, r.tg, r.n_tg));
    cJSON_AddNumberToObject(o, "read_bw_gbs", r.read_bw_gbs);
    cJSON_AddNumberToObject(o, "roofline_fraction", r.roofline_fraction);
    cJSON_AddStringToObject(o, "command", r.command ? r.command : "");
    if (!(text = cJSON_Print(o))) {
        st = nb_set_error(NB_ERR_NOMEM, "record: out of memory");
        goto done;
    }

    if (mkdir(r.dir, 0777) != 0 && errno != EEXIST) {
        st = nb_set_error(NB_ERR_IO, "cannot create %s: %s", r.dir, strerror(errno));
        goto done;
    }
    sanitise(key, sizeof key, cpu_key[0] ? cpu_key : p->family_key);
    model_base(base, sizeof base, r.model_arg);
    char depth[24] = ""; /* a depth run beside, not over, the same model's depth-0 record */
    if (r.n_depth > 0) snprintf(depth, sizeof depth, "-d%d", r.n_depth);
    int len = snprintf(out.file, sizeof out.file, "%s/%s-%s-%s-t%d%s.json", r.dir, key, base,
                       nb_wpath_name(path), r.threads, depth);
    if (len < 0 || (size_t)len >= sizeof out.file) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "record: folder name too long: %s", r.dir);
        goto done;
    }
    struct nb_outfile f; /* a new temporary, renamed over the record */
    if ((st = nb_outfile_open(&f, out.file)) != NB_OK) goto done;
    if ((st = nb_outfile_write(&f, text, strlen(text))) != NB_OK ||
        (st = nb_outfile_write(&f, "\n", 1)) != NB_OK ||
        (st = nb_outfile_commit(&f, NULL)) != NB_OK) {
        nb_outfile_abort(&f);
        goto done;
    }
    nb_api_str(out.weight_path, sizeof out.weight_path, nb_wpath_name(path));
    nb_api_str(out.kernel, sizeof out.kernel, kernel);
    nb_api_out(result, &out, sizeof out);
done:
    free(text);
    cJSON_Delete(o);
    free(p);
    return st;
}
