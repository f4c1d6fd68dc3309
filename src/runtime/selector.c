/* runtime/selector.c — weight-path selector and measurement records. */
#include "runtime/selector.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/log.h"
#include "quant/quant.h"
#include "runtime/measurements.h"

/* The shape bits per weight are quoted at: a typical 1-2 B model's square projection. */
#define BPW_N    2048
#define BPW_G    128
#define MAX_FILE (1 << 20)

const char *nb_priority_name(enum nb_priority p)
{
    switch (p) {
    case NB_PRIORITY_SPEED: return "speed";
    case NB_PRIORITY_FIDELITY: return "fidelity";
    case NB_PRIORITY_MEMORY: return "memory";
    case NB_PRIORITY_BALANCED: return "balanced";
    }
    return "?";
}

int nb_priority_from_name(const char *name, enum nb_priority *out)
{
    for (int p = 0; p <= NB_PRIORITY_BALANCED; p++)
        if (name && !strcmp(name, nb_priority_name((enum nb_priority)p))) {
            *out = (enum nb_priority)p;
            return 1;
        }
    return 0;
}

const char *nb_target_name(enum nb_target t)
{
    return t == NB_TARGET_PHONE ? "phone" : t == NB_TARGET_ARM ? "arm" : "host";
}

int nb_target_from_name(const char *name, enum nb_target *out)
{
    if (name && !strcmp(name, "host"))
        *out = NB_TARGET_HOST;
    else if (name && !strcmp(name, "phone"))
        *out = NB_TARGET_PHONE;
    else if (name && !strcmp(name, "arm"))
        *out = NB_TARGET_ARM;
    else
        return 0;
    return 1;
}

const char *nb_build_commit(void)
{
    return nb_builtin_commit[0] ? nb_builtin_commit : "unknown";
}

/* ---------------------------------------------------------------- records */

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static void copy_str(char *dst, size_t size, const cJSON *v)
{
    snprintf(dst, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static double num(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void parse_figs(const cJSON *o, int pp, struct nb_record_figs *f)
{
    memset(f, 0, sizeof *f);
    if (!cJSON_IsObject(o)) return;
    f->present = 1;
    f->n_tokens = (int)num(get(o, pp ? "n_prompt" : "n_gen"));
    f->best_ts = num(get(o, "best_ts"));
    f->median_ts = num(get(o, "median_ts"));
    f->mean_ts = num(get(o, "mean_ts"));
    f->stddev_ts = num(get(o, "stddev_ts"));
    f->spread_pct = num(get(o, "spread_pct"));
    const cJSON *s = get(o, "samples");
    f->samples = cJSON_IsArray(s) ? cJSON_GetArraySize(s) : (int)num(s);
}

/* s's first word is w ("amx" in "amx (if its self-check passes, ...)"). */
static int starts_with_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    return !strncmp(s, w, n) && (s[n] == 0 || s[n] == ' ');
}

/* The ISA level an older record's run used, read off its kernel name and its CPU's
 * flags (table.c's rules): AVX-512 kernels ran at the AVX-512 level; an AVX2 w4a8
 * kernel at AVX-512 only where the CPU has that level but no AVX-512 VNNI (else the
 * level was capped); a "ref" GEMM at the best level for w8a16 (ref at every level),
 * below AVX-512 for the other paths (which get an AVX-512 kernel there; their ref
 * GEMM runs with ref ops at the AVX2 level too), at ref for w4a8 (every SIMD level has
 * a w4a8 kernel). */
static enum nb_isa_level record_level(const struct nb_probe *q, enum nb_wpath path,
                                      const char *kernel)
{
    enum nb_isa_level best = nb_cpu_isa_level(&q->x86);
    if (starts_with_word(kernel, "amx") || starts_with_word(kernel, "avx512vnni") ||
        starts_with_word(kernel, "avx512"))
        return NB_LEVEL_AVX512;
    if (starts_with_word(kernel, "avx2") || starts_with_word(kernel, "avxvnni"))
        return best == NB_LEVEL_AVX512 && !q->x86.avx512_vnni ? NB_LEVEL_AVX512 : NB_LEVEL_AVX2;
    if (path == NB_WPATH_W8A16) return best;
    if (path == NB_WPATH_W4A8) return NB_LEVEL_REF;
    return best > NB_LEVEL_AVX2 ? NB_LEVEL_AVX2 : best;
}

/* out->cpu_key, out->key (or key_note) of a parsed record (nb_record_parse's comment). */
static void record_keys(const cJSON *root, struct nb_record *out)
{
    const cJSON *cpu = get(root, "cpu"), *rk = get(root, "record_key");
    const cJSON *ck = cJSON_IsObject(cpu) ? get(cpu, "cpu_key") : NULL;
    const cJSON *vendor = cJSON_IsObject(cpu) ? get(cpu, "vendor") : NULL;
    const cJSON *family = cJSON_IsObject(cpu) ? get(cpu, "family") : NULL;
    const cJSON *model = cJSON_IsObject(cpu) ? get(cpu, "model") : NULL;
    const cJSON *flags = cJSON_IsObject(cpu) ? get(cpu, "flags") : NULL;
    struct nb_probe q = {0};
    const char *why = NULL;
    int have_cpu = cJSON_IsString(vendor) && vendor->valuestring[0] && cJSON_IsNumber(family) &&
                   cJSON_IsNumber(model) && cJSON_IsString(flags);
    if (have_cpu) {
        /* Arm records say "arm:..." in their family key and a hex implementer */
        int arm = !strncmp(out->family_key, "arm:", 4) || !strncmp(vendor->valuestring, "0x", 2);
        snprintf(q.arch, sizeof q.arch, "%s", arm ? "aarch64" : "x86_64");
        snprintf(q.vendor, sizeof q.vendor, "%s", vendor->valuestring);
        q.family = (int)family->valuedouble;
        q.model = (int)model->valuedouble;
        nb_probe_set_flags(&q, flags->valuestring);
        q.amx_permitted = -1;
        if (!nb_probe_cpu_key(&q, out->cpu_key, sizeof out->cpu_key, &why)) have_cpu = 0;
    }
    if (cJSON_IsString(ck) && ck->valuestring[0]) copy_str(out->cpu_key, sizeof out->cpu_key, ck);
    if (cJSON_IsString(rk) && rk->valuestring[0]) {
        copy_str(out->key, sizeof out->key, rk);
        return;
    }
    out->key_derived = 1;
    if (!have_cpu) {
        snprintf(out->key_note, sizeof out->key_note,
                 "no record_key, and no usable cpu.vendor, cpu.family, cpu.model and "
                 "cpu.flags to derive it from%s%s",
                 why ? ": " : "", why ? why : "");
        return;
    }
    if (!nb_record_key(&q, out->path, out->kernel, record_level(&q, out->path, out->kernel),
                       out->key, sizeof out->key, &why))
        snprintf(out->key_note, sizeof out->key_note,
                 "no record_key, and none can be derived from its cpu fields: %s", why);
}

enum nb_status nb_record_parse(const char *json, size_t len, const char *source,
                               struct nb_record *out)
{
    enum nb_status st = NB_OK;
    const char *src = source ? source : "(record)";
    memset(out, 0, sizeof *out);
    cJSON *root = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!cJSON_IsObject(root)) {
        st = nb_set_error(NB_ERR_FORMAT, "record %s: not a JSON object", src);
        goto fail;
    }
    const cJSON *cpu = get(root, "cpu"), *shape = get(root, "model_shape");
    const cJSON *fk = cJSON_IsObject(cpu) ? get(cpu, "family_key") : NULL;
    const cJSON *kernel = get(root, "kernel"), *path = get(root, "weight_path");
    const cJSON *threads = get(root, "threads");
    if (!cJSON_IsString(kernel) || !kernel->valuestring[0]) {
        st = nb_set_error(NB_ERR_FORMAT, "record %s: missing string kernel", src);
        goto fail;
    }
    if (!cJSON_IsString(path) || !nb_wpath_from_name(path->valuestring, &out->path)) {
        st = nb_set_error(NB_ERR_FORMAT,
                          "record %s: weight_path must be one of w4a8, w4a16, w8a16, bf16, f32",
                          src);
        goto fail;
    }
    if (!cJSON_IsNumber(threads) || threads->valuedouble < 1 || threads->valuedouble > 4096) {
        st = nb_set_error(NB_ERR_FORMAT, "record %s: threads must be a number >= 1", src);
        goto fail;
    }
    /* a depth run read as depth 0 would pass slower figures off as the empty-cache speed */
    const cJSON *depth = get(root, "n_depth");
    double dv = cJSON_IsNumber(depth) ? depth->valuedouble : -1;
    if (depth && (dv < 0 || dv > (1 << 24) || dv != (int)dv)) {
        st = nb_set_error(NB_ERR_FORMAT, "record %s: n_depth must be a whole number >= 0", src);
        goto fail;
    }
    out->n_depth = depth ? (int)dv : 0;
    parse_figs(get(root, "pp"), 1, &out->pp);
    parse_figs(get(root, "tg"), 0, &out->tg);
    if (!(out->tg.present && out->tg.best_ts > 0) && !(out->pp.present && out->pp.best_ts > 0)) {
        st = nb_set_error(NB_ERR_FORMAT, "record %s: no tg or pp figures with a positive best_ts",
                          src);
        goto fail;
    }
    snprintf(out->source, sizeof out->source, "%s", src);
    copy_str(out->family_key, sizeof out->family_key, fk);
    copy_str(out->cpu_name, sizeof out->cpu_name, cJSON_IsObject(cpu) ? get(cpu, "name") : NULL);
    copy_str(out->kernel, sizeof out->kernel, kernel);
    out->threads = (int)threads->valuedouble;
    out->head_bits = (int)num(get(root, "head_bits"));
    out->bits_per_weight = num(get(root, "bits_per_weight"));
    copy_str(out->commit, sizeof out->commit, get(root, "commit"));
    copy_str(out->date, sizeof out->date, get(root, "date"));
    copy_str(out->model_file, sizeof out->model_file, get(root, "model_file"));
    if (cJSON_IsObject(shape)) {
        copy_str(out->arch, sizeof out->arch, get(shape, "arch"));
        out->n_layers = (int)num(get(shape, "n_layers"));
        out->n_embd = (int)num(get(shape, "n_embd"));
        out->n_vocab = (int)num(get(shape, "n_vocab"));
    }
    out->read_bw_gbs = num(get(root, "read_bw_gbs"));
    out->roofline_fraction = num(get(root, "roofline_fraction"));
    record_keys(root, out);
fail:
    cJSON_Delete(root);
    return st;
}

static enum nb_status push(struct nb_record **recs, int *n, const char *json, size_t len,
                           const char *name)
{
    struct nb_record r;
    if (nb_record_parse(json, len, name, &r) != NB_OK) {
        NB_LOGW("measurement %s skipped: %s", name, nb_last_error());
        nb_clear_error();
        return NB_OK;
    }
    if (!r.key[0]) NB_LOGW("measurement %s: ignored by the selector: %s", name, r.key_note);
    struct nb_record *grown = realloc(*recs, sizeof **recs * (size_t)(*n + 1));
    if (!grown) return nb_set_error(NB_ERR_NOMEM, "measurement records: out of memory");
    *recs = grown;
    grown[(*n)++] = r;
    return NB_OK;
}

enum nb_status nb_records_load_builtin(struct nb_record **out, int *n)
{
    enum nb_status st = NB_OK;
    *out = NULL;
    *n = 0;
    for (int i = 0; i < nb_n_builtin_records; i++) {
        const struct nb_builtin_record *b = &nb_builtin_records[i];
        if ((st = push(out, n, b->json, b->size, b->name)) != NB_OK) goto fail;
    }
    return NB_OK;
fail:
    free(*out);
    *out = NULL;
    *n = 0;
    return st;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

enum nb_status nb_records_load_dir(const char *dir, struct nb_record **recs, int *n)
{
    enum nb_status st = NB_OK;
    char **names = NULL, *buf = NULL;
    int n_names = 0;
    DIR *d = opendir(dir);
    if (!d) {
        st = nb_set_error(NB_ERR_IO, "measurements folder %s: %s", dir, strerror(errno));
        goto fail;
    }
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
        char **grown = realloc(names, sizeof *names * (size_t)(n_names + 1));
        if (!grown || !(grown[n_names] = strdup(e->d_name))) {
            if (grown) names = grown;
            st = nb_set_error(NB_ERR_NOMEM, "measurements folder %s: out of memory", dir);
            goto fail;
        }
        names = grown;
        n_names++;
    }
    if (n_names) qsort(names, (size_t)n_names, sizeof *names, by_name);
    if (!(buf = malloc(MAX_FILE + 1))) {
        st = nb_set_error(NB_ERR_NOMEM, "measurements folder %s: out of memory", dir);
        goto fail;
    }
    for (int i = 0; i < n_names; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f) {
            NB_LOGW("measurement %s skipped: %s", path, strerror(errno));
            continue;
        }
        size_t len = fread(buf, 1, MAX_FILE + 1, f);
        fclose(f);
        if (len > MAX_FILE) {
            NB_LOGW("measurement %s skipped: larger than %d bytes", path, MAX_FILE);
            continue;
        }
        buf[len] = 0;
        if ((st = push(recs, n, buf, len, names[i])) != NB_OK) goto fail;
    }
fail:
    if (d) closedir(d);
    for (int i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    free(buf);
    return st;
}

enum nb_status nb_records_load(const char *dir, struct nb_record **out, int *n)
{
    enum nb_status st = nb_records_load_builtin(out, n);
    if (st != NB_OK) goto fail;
    if (dir && *dir && (st = nb_records_load_dir(dir, out, n)) != NB_OK) goto fail;
    return NB_OK;
fail:
    free(*out);
    *out = NULL;
    *n = 0;
    return st;
}

/* ---------------------------------------------------------------- kernels */

static int is_arm(const struct nb_probe *p)
{
    return !strcmp(p->arch, "aarch64");
}

static int is_x86(const struct nb_probe *p)
{
    return !strcmp(p->arch, "x86_64");
}

/* The format quantize writes a path's matrices in (int4: the X16 layout). */
static enum nb_wformat path_format(enum nb_wpath path)
{
    enum nb_wformat f = NB_WF_F32;
    if (!nb_wformat_of(path, NB_LAYOUT_X16, &f)) nb_wformat_of(path, NB_LAYOUT_ROWS, &f);
    return f;
}

/* The probe's usable features as the kernel table reads them (core/cpu.h): the x86
 * flags, or the Arm HWCAP flags; none for another architecture. */
static struct nb_cpu probe_cpu(const struct nb_probe *p)
{
    struct nb_cpu c = {0};
    if (is_x86(p)) {
        c = p->x86;
    } else if (is_arm(p)) {
        c.asimd = p->arm.asimd;
        c.asimddp = p->arm.asimd && p->arm.asimddp;
        c.i8mm = p->arm.asimd && p->arm.i8mm;
        c.bf16 = p->arm.asimd && p->arm.bf16;
        c.sve = p->arm.sve;
    }
    return c;
}

/* The table the dispatcher would fill on the probed CPU (kernels/table.c decides for
 * both: a CPU of the other architecture than this build's gets the ref table), with the
 * AMX kernel when amx and the OS granted tile data. */
static const struct nb_kernels *table_for(const struct nb_probe *p, int amx, struct nb_kernels *k)
{
    const struct nb_cpu cpu = probe_cpu(p);
    int use_amx = amx && is_x86(p) && p->amx_permitted == 1 && cpu.amx_tile && cpu.amx_int8;
    nb_kernels_fill(k, &cpu, nb_kernels_best_level(&cpu), use_amx);
    return k;
}

/* AMX counts as the kernel that runs where Linux grants tile data: the dispatcher
 * installs it then, unless its first-use self-check fails (not predictable from a
 * probe) or NIBBLE_AMX=0. */
const char *nb_select_kernel_for(const struct nb_probe *p, enum nb_wpath path)
{
    struct nb_kernels k;
    return nb_select_kernel_of_table(table_for(p, 1, &k), path);
}

int nb_select_record_key(const struct nb_probe *p, enum nb_wpath path, char *buf, size_t size,
                         const char **why)
{
    struct nb_kernels k;
    table_for(p, 1, &k);
    return nb_record_key(p, path, nb_select_kernel_of_table(&k, path), k.level, buf, size, why);
}

const char *nb_select_kernel_of_table(const struct nb_kernels *k, enum nb_wpath path)
{
    return k->gemm[path_format(path)].name;
}

/* The kernel a CPU would want for `path` when this build lacks it: "" if none. */
static const char *wanted_kernel(const struct nb_probe *p, enum nb_wpath path)
{
    if (is_x86(p) && path == NB_WPATH_W4A8 && p->x86.amx_tile && p->x86.amx_int8) return "amx";
    if (is_x86(p) && path == NB_WPATH_W4A16 && p->x86.amx_tile && p->x86.amx_int8 &&
        p->x86.amx_bf16 && p->x86.avx512_bf16)
        return "amx";
    if (is_arm(p) && path == NB_WPATH_W4A8) {
        if (p->arm.i8mm) return "neon-i8mm";
        if (p->arm.asimddp) return "neon-dotprod";
        if (p->arm.asimd) return "neon";
    }
    if (is_arm(p) && path == NB_WPATH_W4A16 && p->arm.asimd)
        return p->arm.bf16 ? "neon-bf16" : "neon";
    return "";
}

/* ---------------------------------------------------------------- selection */

NB_PRINTF(2, 3) static void reason(struct nb_choice *c, const char *fmt, ...)
{
    if (c->n_reasons >= NB_SELECT_MAX_REASONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reasons[c->n_reasons++], NB_SELECT_REASON_LEN, fmt, ap);
    va_end(ap);
}

static double bpw(enum nb_wpath path)
{
    return nb_layout_bpw(path, BPW_G, BPW_N, BPW_N);
}

/* Records the rules weigh: tests from an empty cache. A run on a filled context (bench
 * -d) is slower by the attention over its keys, so it would neither pair fairly with a
 * depth-0 record nor stand for the path's speed. */
static int is_evidence(const struct nb_record *r)
{
    return r->n_depth == 0;
}

/* A record with this key; prefers one with tg figures. */
static const struct nb_record *find_record(const struct nb_record *r, int n, const char *key)
{
    const struct nb_record *hit = NULL;
    for (int i = 0; key[0] && i < n; i++)
        if (is_evidence(&r[i]) && r[i].key[0] && !strcmp(r[i].key, key) &&
            (!hit || (!hit->tg.present && r[i].tg.present)))
            hit = &r[i];
    return hit;
}

static int same_run_shape(const struct nb_record *a, const struct nb_record *b)
{
    return a->threads == b->threads && !strcmp(a->arch, b->arch) && a->n_layers == b->n_layers &&
           a->n_embd == b->n_embd && a->n_vocab == b->n_vocab;
}

/* A w4a8 and a w4a16 record with this CPU's keys for those paths (the kernels this
 * build runs for them, the features they use), same model shape and threads, both
 * with tg figures. 1 and the pair, or 0. */
static int find_speed_pair(const struct nb_probe *p, const struct nb_record *r, int n,
                           const struct nb_record **a8, const struct nb_record **a16)
{
    char k8[NB_RECORD_KEY_LEN], k16[NB_RECORD_KEY_LEN];
    if (!nb_select_record_key(p, NB_WPATH_W4A8, k8, sizeof k8, NULL) ||
        !nb_select_record_key(p, NB_WPATH_W4A16, k16, sizeof k16, NULL))
        return 0;
    for (int i = 0; i < n; i++) {
        if (!is_evidence(&r[i]) || strcmp(r[i].key, k8) || !r[i].tg.present || r[i].tg.best_ts <= 0)
            continue;
        for (int j = 0; j < n; j++)
            if (is_evidence(&r[j]) && !strcmp(r[j].key, k16) && r[j].tg.present &&
                r[j].tg.best_ts > 0 && same_run_shape(&r[i], &r[j])) {
                *a8 = &r[i];
                *a16 = &r[j];
                return 1;
            }
    }
    return 0;
}

static const char *model_label(const struct nb_record *r)
{
    const char *s = strrchr(r->model_file, '/');
    return s ? s + 1 : r->model_file[0] ? r->model_file : r->arch;
}

/* The CPU key in reasons. */
static const char *cpu_label(const struct nb_choice *c)
{
    return c->cpu_key[0] ? c->cpu_key : "this CPU (no cpu key)";
}

/* The default speed path when no record pair decides: the int8 path where the CPU
 * has a dot-product kernel for it (built or not), else w4a16. */
static enum nb_wpath speed_default(const struct nb_probe *p, int had_pair, struct nb_choice *c)
{
    const char *none = had_pair ? "no conclusive" : "no";
    if (is_arm(p)) {
        if (p->arm.asimddp || p->arm.i8mm) {
            reason(c,
                   "speed: %s w4a8/w4a16 record pair for %s: default w4a8, the int8 path "
                   "the Arm dot-product instructions (asimddp%s) are for",
                   none, cpu_label(c), p->arm.i8mm ? ", i8mm" : "");
            return NB_WPATH_W4A8;
        }
        reason(c,
               "speed: this Arm CPU has no dot-product instructions (asimddp), so w4a8 "
               "gains nothing from int8 activations: w4a16 (%s record pair for %s)",
               none, cpu_label(c));
        return NB_WPATH_W4A16;
    }
    const char *k8 = nb_select_kernel_for(p, NB_WPATH_W4A8);
    /* an AVX2 CPU has a w4a8 kernel, if not in this build (an aarch64 one): ref here */
    if (strcmp(k8, "ref") != 0 || !is_x86(p) || nb_cpu_isa_level(&p->x86) != NB_LEVEL_REF) {
        reason(c,
               "speed: %s w4a8/w4a16 record pair for %s: default w4a8 (int8 dot products, "
               "kernel %s here); not a measurement — run nibble bench --record with both "
               "paths to decide it",
               none, cpu_label(c), k8);
        return NB_WPATH_W4A8;
    }
    reason(c,
           "speed: this CPU has no AVX2 (no SIMD kernel in this build): default w4a8, the "
           "fewest bytes per weight; %s record pair for %s",
           none, cpu_label(c));
    return NB_WPATH_W4A8;
}

/* Below this relative difference two builds are measured as equally fast: a shared
 * 2-core VM swings by more between runs (docs/benchmarks.md). */
#define NOISE_PCT 8.0

/* The faster of a / b by one figure (tg or pp): the winner, or NULL when the
 * difference is inside the noise (NOISE_PCT or the larger spread). */
static const struct nb_record *faster(const struct nb_record *a, const struct nb_record *b,
                                      int pp, double *gain, double *thr)
{
    const struct nb_record_figs *fa = pp ? &a->pp : &a->tg, *fb = pp ? &b->pp : &b->tg;
    *gain = 0;
    *thr = NOISE_PCT;
    if (!fa->present || !fb->present || fa->best_ts <= 0 || fb->best_ts <= 0) return NULL;
    int b_wins = fb->best_ts > fa->best_ts;
    const struct nb_record_figs *w = b_wins ? fb : fa, *l = b_wins ? fa : fb;
    *gain = 100.0 * (w->best_ts / l->best_ts - 1);
    if (w->spread_pct > *thr) *thr = w->spread_pct;
    if (l->spread_pct > *thr) *thr = l->spread_pct;
    return *gain > *thr ? (b_wins ? b : a) : NULL;
}

static enum nb_wpath speed_choice(const struct nb_probe *p, const struct nb_record *r, int n,
                                  struct nb_choice *c)
{
    const struct nb_record *a8, *a16;
    if (!find_speed_pair(p, r, n, &a8, &a16)) return speed_default(p, 0, c);
    double gain, thr, pgain, pthr;
    const struct nb_record *win = faster(a8, a16, 0, &gain, &thr);
    if (win) {
        const struct nb_record *lose = win == a8 ? a16 : a8;
        reason(c,
               "speed: %s decoded faster than %s on %s: tg %.2f vs %.2f t/s best (+%.1f%%; "
               "spread %.1f%% / %.1f%%), %s, %d threads (%s, %s)",
               nb_wpath_name(win->path), nb_wpath_name(lose->path), cpu_label(c),
               win->tg.best_ts, lose->tg.best_ts, gain, win->tg.spread_pct, lose->tg.spread_pct,
               model_label(win), win->threads, win->source, lose->source);
        return win->path;
    }
    const struct nb_record *pwin = faster(a8, a16, 1, &pgain, &pthr);
    if (pwin) {
        const struct nb_record *plose = pwin == a8 ? a16 : a8;
        reason(c,
               "speed: w4a8 and w4a16 decode equally fast on %s (tg %.2f vs %.2f t/s best, "
               "%.1f%% apart, within the %.0f%% noise); %s prefilled faster: pp %.2f vs %.2f "
               "t/s best (+%.1f%%), %s, %d threads (%s, %s)",
               cpu_label(c), a8->tg.best_ts, a16->tg.best_ts, gain, thr,
               nb_wpath_name(pwin->path), pwin->pp.best_ts, plose->pp.best_ts, pgain,
               model_label(pwin), pwin->threads, a8->source, a16->source);
        return pwin->path;
    }
    reason(c,
           "speed: record pair inconclusive on %s: w4a8 tg %.2f vs w4a16 %.2f t/s best "
           "(%.1f%% apart) is inside the noise (%.0f%%), prefill too, %s, %d threads (%s, %s)",
           cpu_label(c), a8->tg.best_ts, a16->tg.best_ts, gain, thr, model_label(a8),
           a8->threads, a8->source, a16->source);
    return speed_default(p, 1, c);
}

static void fill_kernel(const struct nb_probe *p, struct nb_choice *c)
{
    const char *run = nb_select_kernel_for(p, c->path);
    const char *want = wanted_kernel(p, c->path);
    snprintf(c->kernel_run, sizeof c->kernel_run, "%s", run);
    if (starts_with_word(run, "amx")) {
        /* installed only if its first-use self-check passes (dispatch.c) */
        struct nb_kernels k;
        snprintf(c->kernel, sizeof c->kernel, "amx (if its self-check passes, else %s)",
                 nb_select_kernel_of_table(table_for(p, 0, &k), c->path));
    } else if (want[0] && !starts_with_word(run, want) &&
               !(!strcmp(want, "amx") && strcmp(run, "ref") != 0)) {
        snprintf(c->kernel, sizeof c->kernel, "%s (not built: %s)", want,
                 strcmp(run, "ref") ? run : "scalar ref");
    } else {
        snprintf(c->kernel, sizeof c->kernel, "%s", run);
    }
}

/* Every Arm choice: why it cannot be verified yet. */
static void arm_unverified(struct nb_choice *c)
{
    reason(c, "unverified on Arm: no NEON kernel has been measured on Arm hardware (no "
              "record from one exists); they were tested for correctness under "
              "qemu-aarch64 only, whose times are not speed (docs/arm.md)");
}

/* The probe `--target arm` chooses for on a host that is not an Arm CPU: a generic
 * armv8.2-a core with dotprod (no implementer or part: no cpu key). */
static void generic_arm_probe(struct nb_probe *q)
{
    memset(q, 0, sizeof *q);
    snprintf(q->arch, sizeof q->arch, "aarch64");
    snprintf(q->model_name, sizeof q->model_name, "a generic armv8.2-a CPU with dotprod");
    q->family = -1;
    q->amx_permitted = -1;
    q->arm.asimd = q->arm.asimddp = 1;
}

/* `--target arm` from another host: the kernel the aarch64 build runs for the path on
 * such a CPU, and why; nothing runs or is measured here. */
static void explain_arm_elsewhere(const struct nb_probe *host, const struct nb_probe *q,
                                  struct nb_choice *c)
{
    const char *k = wanted_kernel(q, c->path);
    snprintf(c->kernel, sizeof c->kernel, "%s (aarch64 build)", k[0] ? k : "neon");
    snprintf(c->kernel_run, sizeof c->kernel_run, "none");
    c->runs_locally = 0;
    c->verified = 0;
    reason(c,
           "target arm from this %s host: chosen for %s (armv8.2-a and later: Cortex-A55, "
           "A76, X1, Neoverse, Apple M); the aarch64 build runs it with kernel %s, "
           "neon-i8mm for w4a8 where i8mm is present (the same file); an armv8.0 core "
           "without dotprod (Cortex-A53, A72) runs w4a8 with the plain NEON kernel, and "
           "its speed choice would be w4a16 (--path w4a16)",
           host->arch[0] ? host->arch : "non-Arm", q->model_name, k[0] ? k : "neon");
    arm_unverified(c);
}

static void explain_kernel(const struct nb_probe *p, struct nb_choice *c)
{
    if (is_x86(p) && c->path == NB_WPATH_W4A8 && p->x86.amx_tile && p->x86.amx_int8) {
        if (starts_with_word(c->kernel_run, "amx"))
            reason(c,
                   "AMX-INT8 present and Linux grants tile data: the AMX w4a8 kernel runs "
                   "once its first-use self-check passes (if it fails, or NIBBLE_AMX=0, "
                   "AVX-512 VNNI runs and records for kernel amx do not apply)");
        else if (p->amx_permitted != 1)
            reason(c,
                   "AMX-INT8 present but Linux tile data %s: kernel %s runs, and only its "
                   "records apply",
                   p->amx_permitted < 0 ? "was not asked for" : "was refused", c->kernel_run);
    } else if (is_x86(p) && c->path == NB_WPATH_W4A16 && starts_with_word(c->kernel_run, "amx")) {
        reason(c, "AMX-BF16 present and Linux grants tile data: the AMX-BF16 w4a16 kernel runs "
                  "prefill (16 tokens and more) once the first-use self-checks pass (if one fails, "
                  "or NIBBLE_AMX=0, kernel avx512vnni runs and records for kernel amx do not "
                  "apply); decode runs on int16 activations (avx512vnni's) either way");
    } else if (is_x86(p) && p->x86_cpuid.avx512f && !p->x86.avx512f) {
        reason(c,
               "the CPU has AVX-512 but the OS does not save its registers (XCR0 0x%llx): "
               "not used",
               (unsigned long long)p->xcr0);
    }
    if (!strcmp(c->kernel_run, "ref"))
        reason(c, "kernel: %s — the scalar reference kernel runs here, correct but slow",
               c->kernel);
    if (is_arm(p)) arm_unverified(c);
}

static void explain_verified(const struct nb_probe *p, const struct nb_record *r, int n,
                             struct nb_choice *c)
{
    const char *why = "";
    if (!nb_select_record_key(p, c->path, c->record_key, sizeof c->record_key, &why)) {
        reason(c, "unverified: this CPU has no record key (%s), so no record applies", why);
        return;
    }
    c->record = find_record(r, n, c->record_key);
    c->verified = c->record != NULL;
    if (!c->record) {
        /* a record of this CPU model with another kernel or feature set says why not */
        const struct nb_record *near = NULL;
        for (int i = 0; i < n && !near; i++)
            if (is_evidence(&r[i]) && r[i].key[0] && r[i].path == c->path &&
                !strcmp(r[i].cpu_key, c->cpu_key))
                near = &r[i];
        char also[NB_SELECT_REASON_LEN] = "";
        if (near)
            snprintf(also, sizeof also, "; %s is for this CPU model but key %s", near->source,
                     near->key);
        reason(c,
               "unverified: no measurement record with key %s (vendor, family, model, path, "
               "kernel and the features it uses)%s — nibble bench -m MODEL --path %s --record "
               "adds one",
               c->record_key, also, nb_wpath_name(c->path));
        return;
    }
    const struct nb_record *v = c->record;
    char figs[160] = "";
    if (v->tg.present)
        snprintf(figs, sizeof figs, "tg%d %.2f t/s best (median %.2f, spread %.1f%%)",
                 v->tg.n_tokens, v->tg.best_ts, v->tg.median_ts, v->tg.spread_pct);
    else
        snprintf(figs, sizeof figs, "pp%d %.2f t/s best (median %.2f, spread %.1f%%)",
                 v->pp.n_tokens, v->pp.best_ts, v->pp.median_ts, v->pp.spread_pct);
    reason(c, "verified: %s (key %s%s) — %s, %s, %d threads, %s, commit %s: %s", v->source,
           v->key, v->key_derived ? ", derived from its cpu fields" : "", v->cpu_name,
           model_label(v), v->threads, nb_wpath_name(v->path), v->commit, figs);
}

/* One reason naming the records that cannot be keyed (nb_record_parse): ignored. */
static void explain_unkeyed(const struct nb_record *r, int n, struct nb_choice *c)
{
    char list[NB_SELECT_REASON_LEN];
    size_t used = 0;
    int count = 0;
    list[0] = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].key[0]) continue;
        int w = count++ ? snprintf(list + used, sizeof list - used, ", %s", r[i].source)
                        : snprintf(list, sizeof list, "%s (%s)", r[i].source, r[i].key_note);
        used = w < 0 || (size_t)w >= sizeof list - used ? sizeof list - 1 : used + (size_t)w;
    }
    if (count)
        reason(c, "ignored: %d measurement record%s that cannot be keyed to a CPU: %s", count,
               count == 1 ? "" : "s", list);
}

/* What each priority quantizes with (runtime/recipe.h), and what that cost in fidelity
 * when it was measured: `nibble eval` against the f32 model on kjv-7m (8 reference
 * prompts x 48 greedy tokens; held-out text, llama-perplexity's KL method, chunks of
 * 256), beside llama.cpp's own builds run by llama.cpp (docs/quantization.md, "Recipes",
 * has the commands). */
struct fidelity_record {
    enum nb_priority priority;
    const char *build;
    int greedy;      /* of 8 */
    double kl;       /* mean */
    long long bytes; /* the .nib */
};
static const struct fidelity_record k_fidelity[] = {
    /* 2026-12-03/04, docs/quantization.md "The ladder against llama.cpp" (bench/pareto.sh);
     * balanced with its Q6_K head and embeddings (a device with a SIMD Q6_K kernel) */
    {NB_PRIORITY_BALANCED, "w4a8, recipe balanced (Q6_K head and embeddings), GPTQ", 5, 0.000345,
     4235008},
    {NB_PRIORITY_SPEED, "w4a8, recipe speed, no GPTQ", 2, 0.003491, 3907072},
    {NB_PRIORITY_FIDELITY, "w4a16, recipe fidelity (Q8_0 v, down, head), GPTQ", 6, 0.000145,
     5553728},
    {NB_PRIORITY_MEMORY, "w4a8, recipe speed, GPTQ", 3, 0.001274, 3907264},
};

static void set_recipe(struct nb_choice *c, enum nb_priority priority)
{
    const char *r = priority == NB_PRIORITY_FIDELITY   ? "fidelity"
                    : priority == NB_PRIORITY_BALANCED ? "balanced"
                                                       : "speed";
    snprintf(c->recipe, sizeof c->recipe, "%s", r);
    c->gptq = priority != NB_PRIORITY_SPEED;
}

static void explain_fidelity(struct nb_choice *c, enum nb_priority priority)
{
    for (size_t i = 0; i < sizeof k_fidelity / sizeof k_fidelity[0]; i++) {
        const struct fidelity_record *f = &k_fidelity[i];
        if (f->priority != priority || !f->bytes) continue;
        reason(c, "fidelity, measured on kjv-7m against its f32 model: %s: %d/8 greedy "
                  "continuations reproduced, mean KL %.6f, %lld B; llama.cpp Q4_K_M: 2/8, "
                  "0.000585, 4751424 B; nibble's default until 2026-11 (w4a8, 4-bit head, "
                  "int8 embeddings, no GPTQ): 3/8, 0.003066, 4972032 B",
               f->build, f->greedy, f->kl, f->bytes);
    }
    reason(c, "recipe %s%s", c->recipe,
           c->gptq ? ", GPTQ (act-order) on the calibration text shipped with nibble when "
                     "a float model is first quantized"
                   : ", round-to-nearest (no calibration: the quickest first start)");
}

enum nb_status nb_select(const struct nb_probe *p, enum nb_priority priority, int priority_given,
                         enum nb_target target, const struct nb_record *records, int n_records,
                         const struct nb_select_overrides *ov, struct nb_choice *c)
{
    enum nb_status st = NB_OK;
    const char *env = ov ? ov->path : NULL;
    const char *by = ov && ov->path_source ? ov->path_source : "the caller";
    enum nb_wpath forced = NB_WPATH_W4A8;
    int is_forced = env && *env && strcmp(env, "auto") != 0;
    const struct nb_probe *host = p;
    struct nb_probe arm_probe;
    int arm_elsewhere = target == NB_TARGET_ARM && !is_arm(p);
    memset(c, 0, sizeof *c);
    if (arm_elsewhere) {
        generic_arm_probe(&arm_probe);
        p = &arm_probe;
    }
    nb_probe_cpu_key(p, c->cpu_key, sizeof c->cpu_key, NULL);
    if (is_forced && !nb_wpath_from_name(env, &forced)) {
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "%s=%s is not one of auto, w4a8, w4a16, w8a16, bf16, f32", by, env);
        goto fail;
    }
    c->head_bits = priority == NB_PRIORITY_FIDELITY ? 8 : 4;
    set_recipe(c, priority);
    if (target == NB_TARGET_ARM && !arm_elsewhere)
        reason(c, "target arm: this host is an Arm CPU: its own choice");
    if (is_forced) {
        c->path = forced;
        reason(c, "%s=%s overrides the selector", by, env);
    } else if (target == NB_TARGET_PHONE) {
        c->path = NB_WPATH_W8A16;
        c->head_bits = 8;
        reason(c, "target phone: w8a16 export only (int8 per output channel, for the phone's "
                  "own runtime); nibble does not run on the phone, so nothing is measured or "
                  "verified there");
    } else if (priority == NB_PRIORITY_FIDELITY) {
        c->path = NB_WPATH_W4A16;
        reason(c, "fidelity: w4a16 (asymmetric int4 weights, 16-bit activations: bf16, or "
                  "int16 per group in decode, not int8) with an 8-bit output head");
    } else if (priority == NB_PRIORITY_MEMORY) {
        double b8 = bpw(NB_WPATH_W4A8), b16 = bpw(NB_WPATH_W4A16);
        c->path = b8 <= b16 ? NB_WPATH_W4A8 : NB_WPATH_W4A16;
        reason(c,
               "memory: %s stores %.3f bits per weight vs %.3f for %s (computed from the "
               "layouts at %dx%d, G=%d), with a 4-bit head",
               nb_wpath_name(c->path), b8 <= b16 ? b8 : b16, b8 <= b16 ? b16 : b8,
               b8 <= b16 ? "w4a16" : "w4a8", BPW_N, BPW_N, BPW_G);
    } else {
        c->path = speed_choice(p, records, n_records, c);
    }
    if (target != NB_TARGET_PHONE) explain_fidelity(c, priority);
    c->bits_per_weight = bpw(c->path);
    if (target == NB_TARGET_PHONE) {
        snprintf(c->kernel, sizeof c->kernel, "none (export only)");
        snprintf(c->kernel_run, sizeof c->kernel_run, "none");
        c->runs_locally = 0;
        c->verified = 0;
    } else if (arm_elsewhere) {
        explain_arm_elsewhere(host, p, c);
    } else {
        fill_kernel(p, c);
        c->runs_locally = 1;
        explain_kernel(p, c);
        explain_verified(p, records, n_records, c);
    }
    explain_unkeyed(records, n_records, c);
    if (!priority_given)
        reason(c, "no --priority given: balanced, the fastest build that reproduces at least "
                  "as many greedy continuations as llama.cpp's Q4_K_M in no more bytes. "
                  "Agentic use: tool-calling agents need fidelity (a W4A8 build flipped a "
                  "setting back in an agent task in a published 1.7 B study) — pass "
                  "--priority fidelity for agents");
fail:
    return st;
}

enum nb_status nb_select_resolve(const char *name, enum nb_priority priority, int priority_given,
                                 const struct nb_select_overrides *ov, enum nb_wpath *path,
                                 int *head_bits, struct nb_choice *choice)
{
    enum nb_status st = NB_OK;
    struct nb_record *recs = NULL;
    struct nb_choice local;
    struct nb_probe probe;
    int n = 0;
    struct nb_choice *c = choice ? choice : &local;
    if (name && strcmp(name, "auto") != 0) {
        if (!nb_wpath_from_name(name, path))
            st =
                nb_set_error(NB_ERR_INVALID_ARG,
                             "--path '%s' is not one of auto, w4a8, w4a16, w8a16, bf16, f32", name);
        goto fail;
    }
    nb_probe_host(&probe, 0);
    if ((st = nb_records_load(ov ? ov->records_dir : NULL, &recs, &n)) != NB_OK) goto fail;
    if ((st = nb_select(&probe, priority, priority_given, NB_TARGET_HOST, recs, n, ov, c)) !=
        NB_OK)
        goto fail;
    c->record = NULL; /* points into recs, freed below */
    *path = c->path;
    if (head_bits && *head_bits == 0) *head_bits = c->head_bits;
fail:
    free(recs);
    return st;
}
