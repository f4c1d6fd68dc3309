/* nibble bench — speed in llama-bench's language: -m (repeatable) -p -n -d -r -t -o, and
 * llama-bench's JSON field names, plus nibble's own (weight_path, kernel,
 * bits_per_weight, best_ts, median_ts, spread_pct, test). Models run in interleaved passes
 * (A B A B ...) with pinned threads; -d N runs each test on top of N context tokens,
 * filled once per model and pass, untimed; the read bandwidth is measured in the same run
 * and decode is reported as a fraction of its roofline. --profile prints per-op
 * milliseconds per token and flags float-precision weight GEMMs and fan-out-bound ops.
 * --record DIR writes a measurement record per model and depth (nb_record_write). The timing runs,
 * statistics, pass order and bandwidth are nibble.h's benchmarking calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "nibble.h"
#include "nibble_eval.h"

#define MAX_MODELS 16
#define MAX_REPS 100
#define MAX_DEPTHS 16

enum { T_PP = 0, T_TG = 1 };

struct bmodel {
    const char *arg;   /* as given */
    char path[4096];   /* what was loaded (a cached .nib for --path) */
    struct nb_model *model;
    struct nb_ctx *ctx;
    struct nb_model_info info;
    double samples[MAX_DEPTHS][2][MAX_REPS]; /* tok/s, by depth and test */
    int n_samples[MAX_DEPTHS][2];
};

struct bench {
    struct bmodel m[MAX_MODELS];
    int depth[MAX_DEPTHS]; /* -d: context tokens under the tests, in the order given */
    int n_depths, n_models, n_prompt, n_gen, reps, n_threads, n_ctx, n_batch;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble bench -m MODEL [-m MODEL ...] [-p N] [-n N] [-d N[,N...]] [-r N]\n"
               "                    [-t N] [-o md|json|jsonl|csv] [--path P] [--priority P]\n"
               "                    [--profile] [--record [DIR]] [--no-cache]\n"
               "\n"
               "  -p N        prompt tokens for the pp test (default 512; 0: skip)\n"
               "  -n N        generated tokens for the tg test (default 128; 0: skip)\n"
               "  -d N[,N...] depth, llama-bench's -d / --n-depth (default 0): the tests run on\n"
               "              top of N random context tokens, so they show how speed falls as\n"
               "              attention reads more cached keys (\"pp512 @ d4096\"). The context\n"
               "              is filled once per model and pass, untimed, in batches as the pp\n"
               "              test; each depth of a list (or repeated -d) is a test of its own\n"
               "  -r N        passes (default 5); models alternate within each pass\n"
               "  -t N        threads (default: all cores), pinned\n"
               "  -c N, -b N  context (default: largest -d + -p + -n + 16; at least the\n"
               "              largest -d + the larger of -p and -n) and batch size, as for run\n"
               "  --kv-type T KV cache type: f16 (default), f32, bf16, q8_0\n"
               "  --path P    quantize float models to path P first (cached); auto: the\n"
               "              selector's choice for this CPU (nibble probe --explain)\n"
               "  --priority P  balanced | speed | fidelity | memory, for --path auto\n"
               "              (default balanced)\n"
               "  --no-cache  quantize into memory; never read or write the cache\n"
               "  --record [DIR]  write one measurement record per model and depth into DIR\n"
               "              (default docs/measurements): the selector's evidence (depth 0\n"
               "              only; a depth's record is named ...-d<N>.json)\n"
               "  --profile   per-op ms per token of a decode run, after the timed runs\n"
               "              (on top of the largest -d)\n"
               "  --plot F    a bar chart of the results as a PNG (needs gnuplot)\n");
}

/* llama-bench's name of a test: "pp512", "tg128 @ d4096". */
static const char *test_name(char *buf, size_t size, int test, int n, int depth)
{
    int len = snprintf(buf, size, "%s%d", test == T_PP ? "pp" : "tg", n);
    if (depth > 0 && len > 0 && (size_t)len < size)
        snprintf(buf + len, size - (size_t)len, " @ d%d", depth);
    return buf;
}

/* Sequence 0 holding `depth` random tokens: the context the tests of that depth run on. */
static enum nb_status fill(struct bmodel *m, int depth, int pass)
{
    fprintf(stderr, "nibble bench: pass %d %s: filling the context with %d tokens (untimed)\n",
            pass + 1, m->arg, depth);
    return nb_bench_fill(m->ctx, depth, 4321 + (uint64_t)pass);
}

/* Test `test` of the interleave is depth test / 2, pp (even) or tg (odd). A depth's
 * context is filled before its pp test, also when -p 0 skips that: once per model and
 * pass; the tg test cuts the pp tokens off again. */
static enum nb_status run_one(int mi, int test, int pass, void *user)
{
    struct bench *b = user;
    struct bmodel *m = &b->m[mi];
    int d = test / 2, t = test % 2, depth = b->depth[d];
    int n = t == T_PP ? b->n_prompt : b->n_gen;
    double s = 0;
    enum nb_status st;
    if (t == T_PP && depth > 0 && (st = fill(m, depth, pass)) != NB_OK) return st;
    if (n <= 0) return NB_OK;
    if (t == T_PP) {
        st = nb_bench_pp_at(m->ctx, depth, n, 1234 + (uint64_t)pass, &s);
    } else {
        st = nb_bench_tg_at(m->ctx, depth, n, 99 + (uint64_t)pass, &s);
        /* a sliding-window layer's ring no longer holds the keys at the depth (a pp test
         * longer than the batch size ran over them): the same fill again, untimed */
        if (st == NB_ERR_RANGE && depth > 0 && (st = fill(m, depth, pass)) == NB_OK)
            st = nb_bench_tg_at(m->ctx, depth, n, 99 + (uint64_t)pass, &s);
    }
    if (st == NB_OK) m->samples[d][t][m->n_samples[d][t]++] = n / s;
    char name[48];
    fprintf(stderr, "nibble bench: pass %d %s %s: %.2f tok/s\n", pass + 1, m->arg,
            test_name(name, sizeof name, t, n, depth), n / (s > 0 ? s : 1));
    return st;
}

/* One profiled run (pp when n_prompt > 0, else tg) on top of `depth` context tokens
 * (filled first, outside the profile) and its per-op table. */
static void print_profile(struct bmodel *m, int n_prompt, int n_gen, int depth)
{
    struct nb_profile_entry e[32];
    int64_t ntok = 0;
    double s;
    if (nb_bench_fill(m->ctx, depth, 7) != NB_OK) return;
    nb_ctx_profile(m->ctx, 1);
    enum nb_status st = n_prompt > 0 ? nb_bench_pp_at(m->ctx, depth, n_prompt, 7, &s)
                                     : nb_bench_tg_at(m->ctx, depth, n_gen, 7, &s);
    int n = nb_ctx_profile_get(m->ctx, e, 32, &ntok);
    nb_ctx_profile(m->ctx, 0);
    if (st != NB_OK || ntok <= 0) return;
    double total = 0;
    for (int i = 0; i < n; i++) total += e[i].ms;
    char at[32] = "";
    if (depth > 0) snprintf(at, sizeof at, " at depth %d", depth);
    printf("\nprofile of %s, %s%s: %lld tokens, %.3f ms per token in ops (%.3f ms per token "
           "wall)\n", m->arg, n_prompt > 0 ? "prompt processing" : "decode", at, (long long)ntok,
           total / ntok, s * 1e3 / ntok);
    printf("| %-18s | %9s | %11s | %7s | %8s | %s\n", "op", "ms/token", "calls/token", "threads",
           "fan-out%", "flags");
    printf("|%s|%s|%s|%s|%s|------\n", "--------------------", "-----------", "-------------",
           "---------", "----------");
    for (int i = 0; i < n; i++) {
        double fan = e[i].ms > 0 ? 100.0 * e[i].fanout_ms / e[i].ms : 0;
        char flags[160] = "";
        if (e[i].float_weights && !strstr(m->info.weight_path, "f"))
            strcat(flags, "FLOAT WEIGHTS in a quantized model (unquantized GEMM per token) ");
        if (e[i].threads > 1 && fan > 50)
            strcat(flags, "mostly fan-out: run it on one thread?");
        printf("| %-18s | %9.4f | %11.2f | %7d | %8.1f | %s\n", e[i].op, e[i].ms / ntok,
               (double)e[i].calls / ntok, e[i].threads, fan, flags);
    }
}

/* The samples as tok/s, or as ns per run (ns = 1). */
static cJSON *samples(const double *x, int n, int ns, int per_run)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(ns ? 1e9 * per_run / x[i] : x[i]));
    return a;
}

/* A CSV field in quotes, quotes doubled (RFC 4180). */
static void csv_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* A bar chart of best tok/s per model and test, drawn by gnuplot into a PNG. */
static int plot(const struct bench *b, const char *png)
{
    char dat[] = "/tmp/nibble-plot-XXXXXX";
    int fd = mkstemp(dat);
    if (fd < 0) {
        fprintf(stderr, "nibble bench: --plot: cannot create a temporary file\n");
        return 0;
    }
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < b->n_models; i++)
        for (int d = 0; d < b->n_depths; d++) {
            const char *base = strrchr(b->m[i].arg, '/');
            base = base ? base + 1 : b->m[i].arg;
            double best[2] = {0, 0};
            for (int t = 0; t < 2; t++) {
                struct nb_stats s = {.size = sizeof s};
                nb_stats_of(b->m[i].samples[d][t], b->m[i].n_samples[d][t], &s);
                best[t] = s.best;
            }
            char at[32] = "";
            if (b->depth[d] > 0) snprintf(at, sizeof at, " @ d%d", b->depth[d]);
            fprintf(f, "\"%s (%s)%s\" %.4f %.4f\n", base, b->m[i].info.weight_path, at, best[0],
                    best[1]);
        }
    fclose(f);
    FILE *g = popen("gnuplot 2>&1", "w");
    int ok = g != NULL;
    if (g) {
        fprintf(g, "set terminal pngcairo size 900,500 noenhanced\nset output '%s'\n"
                   "set style data histograms\nset style histogram clustered gap 1\n"
                   "set style fill solid 0.8\nset ylabel 'tokens per second (best of %d)'\n"
                   "set title 'nibble bench: pp%d and tg%d, %d threads'\nset key top right\n"
                   "set xtics rotate by -15\nset grid ytics\nset yrange [0:*]\n"
                   "plot '%s' using 2:xtic(1) title 'pp%d', '' using 3 title 'tg%d'\n",
                png, b->reps, b->n_prompt, b->n_gen, b->n_threads, dat, b->n_prompt, b->n_gen);
        ok = pclose(g) == 0;
    }
    unlink(dat);
    if (!ok)
        fprintf(stderr, "nibble bench: --plot: gnuplot failed or is not installed "
                        "(apt-get install gnuplot-nox)\n");
    return ok;
}

static void emit(const struct bench *b, const char *fmt, double bw)
{
    const char *isa = nb_isa();
    int md = !strcmp(fmt, "md"), csv = !strcmp(fmt, "csv"), jsonl = !strcmp(fmt, "jsonl");
    int json = !strcmp(fmt, "json");
    cJSON *all = json ? cJSON_CreateArray() : NULL;
    if (md)
        printf("| model | path | bpw | size | params | threads | test | t/s (mean ± sd) | best | "
               "median | spread | roofline |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (csv)
        printf("model_filename,weight_path,kernel,bits_per_weight,model_size,model_n_params,"
               "n_threads,n_prompt,n_gen,n_depth,test,avg_ts,stddev_ts,best_ts,median_ts,"
               "spread_pct\n");
    for (int i = 0; i < b->n_models; i++) {
        const struct bmodel *m = &b->m[i];
        double bpw = m->info.linear_params ? 8.0 * m->info.linear_bytes / m->info.linear_params : 0;
        for (int k = 0; k < 2 * b->n_depths; k++) { /* in the order they ran: by depth, pp tg */
            int d = k / 2, t = k % 2, depth = b->depth[d];
            if (!m->n_samples[d][t]) continue;
            struct nb_stats s = {.size = sizeof s};
            nb_stats_of(m->samples[d][t], m->n_samples[d][t], &s);
            int np = t == T_PP ? b->n_prompt : 0, ng = t == T_TG ? b->n_gen : 0;
            char name[48];
            test_name(name, sizeof name, t, np + ng, depth);
            double roof = t == T_TG && bw > 0 ? s.best * (double)m->info.weight_bytes / (bw * 1e9)
                                              : 0;
            if (md) {
                char rf[16] = "-";
                if (roof > 0) snprintf(rf, sizeof rf, "%.0f%%", roof * 100);
                printf("| %s | %s | %.3f | %.1f MiB | %.2f M | %d | %s | %.2f ± %.2f | %.2f | "
                       "%.2f | %.1f%% | %s |\n", m->arg, m->info.weight_path, bpw,
                       (double)m->info.linear_bytes / (1 << 20), m->info.n_params / 1e6,
                       b->n_threads, name, s.mean, s.stddev, s.best, s.median, s.spread_pct, rf);
            } else if (csv) {
                csv_str(m->arg);
                printf(",%s,%s,%.4f,%lld,%lld,%d,%d,%d,%d,\"%s\",%.4f,%.4f,%.4f,%.4f,%.2f\n",
                       m->info.weight_path, isa, bpw, (long long)m->info.linear_bytes,
                       (long long)m->info.n_params, b->n_threads, np, ng, depth, name, s.mean,
                       s.stddev, s.best, s.median, s.spread_pct);
            } else { /* json, jsonl: through cJSON, so any file name gives valid JSON */
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "model_filename", m->arg);
                cJSON_AddStringToObject(o, "model_type", m->info.arch);
                cJSON_AddNumberToObject(o, "model_size", (double)m->info.linear_bytes);
                cJSON_AddNumberToObject(o, "model_n_params", (double)m->info.n_params);
                cJSON_AddNumberToObject(o, "n_threads", b->n_threads);
                cJSON_AddNumberToObject(o, "n_prompt", np);
                cJSON_AddNumberToObject(o, "n_gen", ng);
                cJSON_AddNumberToObject(o, "n_depth", depth);
                cJSON_AddStringToObject(o, "test", name);
                cJSON_AddNumberToObject(o, "avg_ts", s.mean);
                cJSON_AddNumberToObject(o, "stddev_ts", s.stddev);
                cJSON_AddNumberToObject(o, "avg_ns", 1e9 * (np + ng) / (s.mean > 0 ? s.mean : 1));
                cJSON_AddItemToObject(o, "samples_ts",
                                      samples(m->samples[d][t], m->n_samples[d][t], 0, np + ng));
                cJSON_AddItemToObject(o, "samples_ns",
                                      samples(m->samples[d][t], m->n_samples[d][t], 1, np + ng));
                cJSON_AddStringToObject(o, "weight_path", m->info.weight_path);
                cJSON_AddStringToObject(o, "kernel", isa);
                cJSON_AddBoolToObject(o, "weights_huge_pages", nb_model_weights_copied(m->model));
                cJSON_AddNumberToObject(o, "bits_per_weight", bpw);
                cJSON_AddNumberToObject(o, "best_ts", s.best);
                cJSON_AddNumberToObject(o, "median_ts", s.median);
                cJSON_AddNumberToObject(o, "spread_pct", s.spread_pct);
                cJSON_AddNumberToObject(o, "read_bw_gbs", bw);
                cJSON_AddNumberToObject(o, "roofline_fraction", roof);
                if (jsonl) {
                    char *js = cJSON_PrintUnformatted(o);
                    if (js) printf("%s\n", js);
                    free(js);
                    cJSON_Delete(o);
                } else {
                    cJSON_AddItemToArray(all, o);
                }
            }
        }
    }
    if (json) {
        char *js = cJSON_Print(all);
        if (js) printf("%s\n", js);
        free(js);
    }
    cJSON_Delete(all);
    if (md && bw > 0) {
        int copied = 0;
        for (int i = 0; i < b->n_models; i++) copied += nb_model_weights_copied(b->m[i].model);
        printf("\nread bandwidth %.1f GB/s (%d threads); roofline = best tg t/s x bytes per token "
               "/ bandwidth; kernels: %s; .nib weights in huge pages: %d of %d models "
               "(NIBBLE_MMAP)\n", bw, b->n_threads, isa, copied, b->n_models);
    }
}

/* What the command line asks for beyond struct bench. */
struct bench_args {
    const char *fmt, *path_name, *priority, *record_dir, *plot_path;
    int profile, no_cache;
    struct nb_ctx_params cp;
};

/* Parse argv into b and a: 1 to go on, 0 when done (help printed: *rc 0), -1 on an error. */
static int parse_args(int argc, char **argv, struct bench *b, struct bench_args *a, int *rc)
{
    const char *cmd = "bench";
    struct arg_ints depths = {b->depth, 0, MAX_DEPTHS};
    const struct arg_opt opts[] = {
        OPT_INT("-p|--n-prompt", &b->n_prompt, 0, 1 << 16),
        OPT_INT("-n|--n-gen", &b->n_gen, 0, 1 << 16),
        OPT_INTS("-d|--depth|--n-depth", &depths, 0, 1 << 23),
        OPT_INT("-r|--repetitions", &b->reps, 1, MAX_REPS),
        OPTS_WEIGHTS(&a->path_name, &a->priority, &a->no_cache),
        OPTS_CONTEXT(&a->cp, 16),
        OPT_CHOICE("-o|--output", &a->fmt, "md|json|jsonl|csv"),
        OPT_STR("--plot", &a->plot_path),
        OPT_FLAG("--profile", &a->profile),
        OPT_END};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v = NULL;
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (arg_is_help(arg)) {
            usage(stdout);
            *rc = 0;
            return 0;
        } else if (!strcmp(arg, "-m") || !strcmp(arg, "--model") || !strncmp(arg, "--model=", 8)) {
            /* repeatable, so not in the table: each -m adds a model to compare */
            if (!strncmp(arg, "--model=", 8)) v = arg + 8;
            else if (!(v = arg_value(cmd, argc, argv, &i))) return -1;
            if (b->n_models == MAX_MODELS) {
                fprintf(stderr, "nibble bench: at most %d models\n", MAX_MODELS);
                return -1;
            }
            b->m[b->n_models++].arg = v;
        } else if (!strcmp(arg, "--record")) { /* an optional value */
            a->record_dir =
                i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "docs/measurements";
        } else {
            arg_unknown(cmd, arg);
            return -1;
        }
    }
    if (!b->n_models) {
        fprintf(stderr, "nibble bench: give at least one model with -m\n");
        return -1;
    }
    b->n_depths = depths.n ? depths.n : 1; /* none given: depth 0, b->depth[0] */
    return 1;
}

/* The largest -d. */
static int max_depth_of(const struct bench *b)
{
    int max_depth = 0;
    for (int d = 0; d < b->n_depths; d++)
        if (b->depth[d] > max_depth) max_depth = b->depth[d];
    return max_depth;
}

/* Threads, batch and context of the runs into b: 0 (reported) when -c is too small. */
static int plan_context(struct bench *b, const struct nb_ctx_params *cp, int max_depth)
{
    b->n_threads = cp->n_threads;
    b->n_batch = cp->n_batch;
    b->n_ctx = cp->n_ctx > 0 ? cp->n_ctx : max_depth + b->n_prompt + b->n_gen + 16;
    /* pp and tg each run on top of the depth (tg after the pp tokens are cut off again) */
    int need = max_depth + (b->n_prompt > b->n_gen ? b->n_prompt : b->n_gen);
    if (b->n_ctx < need) {
        fprintf(stderr, "nibble bench: a context of %d tokens (-c) is too small: depth %d + %d "
                        "%s tokens need %d (leave out -c for depth + p + n + 16 = %d)\n",
                b->n_ctx, max_depth, need - max_depth,
                b->n_prompt >= b->n_gen ? "prompt" : "generated", need,
                max_depth + b->n_prompt + b->n_gen + 16);
        return 0;
    }
    return 1;
}

/* Each model, opened with its pinned context and warmed up: 1 on success, 0 on an error
 * reported, -1 on a library error (nb_last_error). */
static int open_models(struct bench *b, const struct bench_args *a)
{
    for (int i = 0; i < b->n_models; i++) {
        struct bmodel *m = &b->m[i];
        if (!app_open_model("bench", m->arg, a->path_name, a->priority, b->n_threads,
                            !a->no_cache, &m->model, m->path, sizeof m->path))
            return 0;
        nb_model_get_info(m->model, &m->info);
        struct nb_ctx_params mp = nb_ctx_default_params();
        mp.n_threads = b->n_threads;
        mp.pin = 1;
        mp.n_ctx = b->n_ctx;
        mp.n_batch = b->n_batch;
        mp.kv_type = a->cp.kv_type;
        if (nb_ctx_init(&m->ctx, m->model, &mp) != NB_OK) return -1;
        double s; /* warm-up: page in the weights, settle the threads */
        if (nb_bench_tg(m->ctx, 2, 1, &s) != NB_OK) return -1;
    }
    return 1;
}

/* --record DIR (NULL: none): one measurement record per model and depth. Returns 1 when
 * one could not be written (reported), else 0. */
static int write_records(const struct bench *b, const char *dir, int argc, char **argv,
                         double bw)
{
    int failed = 0;
    for (int k = 0; dir && k < b->n_models * b->n_depths; k++) { /* one per model, depth */
        const struct bmodel *m = &b->m[k / b->n_depths];
        int d = k % b->n_depths;
        struct nb_stats s = {.size = sizeof s};
        nb_stats_of(m->samples[d][T_TG], m->n_samples[d][T_TG], &s);
        char cmdline[2048] = "nibble"; /* stored in the record: how to re-run it */
        for (int i = 0; i < argc; i++) {
            size_t l = strlen(cmdline);
            snprintf(cmdline + l, sizeof cmdline - l, " %s", argv[i]);
        }
        struct nb_record_params rp = nb_record_default_params();
        rp.dir = dir;
        rp.model_arg = m->arg;
        rp.model_file = m->path;
        rp.info = &m->info;
        rp.threads = b->n_threads;
        rp.n_prompt = b->n_prompt;
        rp.n_gen = b->n_gen;
        rp.n_depth = b->depth[d];
        rp.pp = m->samples[d][T_PP];
        rp.tg = m->samples[d][T_TG];
        rp.n_pp = m->n_samples[d][T_PP];
        rp.n_tg = m->n_samples[d][T_TG];
        rp.read_bw_gbs = bw;
        rp.roofline_fraction = bw > 0 ? s.best * (double)m->info.weight_bytes / (bw * 1e9) : 0;
        rp.command = cmdline;
        struct nb_record_result rr = {.size = sizeof rr};
        if (nb_record_write(&rp, &rr) != NB_OK) {
            fprintf(stderr, "nibble bench: --record: %s\n", nb_last_error());
            failed = 1;
        } else {
            fprintf(stderr, "nibble bench: recorded %s (%s, kernel %s)\n", rr.file,
                    rr.weight_path, rr.kernel);
        }
    }
    return failed;
}

int cmd_bench(int argc, char **argv)
{
    static struct bench b;
    int rc = 1;
    memset(&b, 0, sizeof b);
    b.n_prompt = 512;
    b.n_gen = 128;
    b.reps = 5;
    struct bench_args a = {.fmt = "md", .cp = nb_ctx_default_params()};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    a.cp.n_threads = cores > 0 ? (int)cores : 1;
    if (parse_args(argc, argv, &b, &a, &rc) <= 0) return rc;
    int max_depth = max_depth_of(&b);
    if (!plan_context(&b, &a.cp, max_depth)) return 1;
    int st = open_models(&b, &a);
    if (st < 0) goto fail;
    if (st == 0) goto done;
    double bw = nb_measure_read_bandwidth(b.n_threads, (size_t)1 << 30, 5);
    if (nb_bench_interleave(b.n_models, 2 * b.n_depths, b.reps, run_one, &b) != NB_OK) goto fail;
    emit(&b, a.fmt, bw);
    if (a.plot_path && !plot(&b, a.plot_path)) goto done;
    int record_failed = write_records(&b, a.record_dir, argc, argv, bw);
    if (a.profile) /* at the largest depth, where attention weighs most */
        for (int i = 0; i < b.n_models; i++) {
            if (b.n_prompt > 0) print_profile(&b.m[i], b.n_prompt, 0, max_depth);
            print_profile(&b.m[i], 0, b.n_gen > 0 ? b.n_gen : 32, max_depth);
        }
    rc = record_failed;
    goto done;
fail:
    fprintf(stderr, "nibble bench: %s\n", nb_last_error());
done:
    for (int i = 0; i < b.n_models; i++) {
        nb_ctx_free(b.m[i].ctx);
        nb_model_free(b.m[i].model);
    }
    return rc;
}
