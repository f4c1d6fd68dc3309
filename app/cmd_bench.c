/* nibble bench — speed in llama-bench's language: -m (repeatable) -p -n -r -t -o, and
 * llama-bench's JSON field names, plus nibble's own (weight_path, kernel,
 * bits_per_weight, best_ts, median_ts, spread_pct). Models run in interleaved passes
 * (A B A B ...) with pinned threads; the read bandwidth is measured in the same run
 * and decode is reported as a fraction of its roofline. --profile prints per-op
 * milliseconds per token and flags float-precision weight GEMMs and fan-out-bound ops.
 * --record DIR writes a measurement record per model (nb_record_write). The timing runs,
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

#define MAX_MODELS 16
#define MAX_REPS 100

enum { T_PP = 0, T_TG = 1 };

struct bmodel {
    const char *arg;   /* as given */
    char path[4096];   /* what was loaded (a cached .nib for --path) */
    struct nb_model *model;
    struct nb_ctx *ctx;
    struct nb_model_info info;
    double samples[2][MAX_REPS]; /* tok/s */
    int n_samples[2];
};

struct bench {
    struct bmodel m[MAX_MODELS];
    int n_models, n_prompt, n_gen, reps, n_threads, n_ctx, n_batch;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble bench -m MODEL [-m MODEL ...] [-p N] [-n N] [-r N] [-t N]\n"
               "                    [-o md|json|jsonl|csv] [--path P] [--priority P] [--profile]\n"
               "                    [--record [DIR]] [--no-cache]\n"
               "\n"
               "  -p N        prompt tokens for the pp test (default 512; 0: skip)\n"
               "  -n N        generated tokens for the tg test (default 128; 0: skip)\n"
               "  -r N        passes (default 5); models alternate within each pass\n"
               "  -t N        threads (default: all cores), pinned\n"
               "  -c N, -b N  context (default: -p + -n + 16) and batch size, as for run\n"
               "  --path P    quantize float models to path P first (cached); auto: the\n"
               "              selector's choice for this CPU (nibble probe --explain)\n"
               "  --priority P  balanced | speed | fidelity | memory, for --path auto\n"
               "              (default balanced)\n"
               "  --no-cache  quantize into memory; never read or write the cache\n"
               "  --record [DIR]  write one measurement record per model into DIR\n"
               "              (default docs/measurements): the selector's evidence\n"
               "  --profile   per-op ms per token of a decode run, after the timed runs\n"
               "  --plot F    a bar chart of the results as a PNG (needs gnuplot)\n");
}

static enum nb_status run_one(int mi, int test, int pass, void *user)
{
    struct bench *b = user;
    struct bmodel *m = &b->m[mi];
    double s = 0;
    enum nb_status st;
    if (test == T_PP) {
        if (b->n_prompt <= 0) return NB_OK;
        st = nb_bench_pp(m->ctx, b->n_prompt, 1234 + (uint64_t)pass, &s);
        if (st == NB_OK) m->samples[T_PP][m->n_samples[T_PP]++] = b->n_prompt / s;
    } else {
        if (b->n_gen <= 0) return NB_OK;
        st = nb_bench_tg(m->ctx, b->n_gen, 99 + (uint64_t)pass, &s);
        if (st == NB_OK) m->samples[T_TG][m->n_samples[T_TG]++] = b->n_gen / s;
    }
    fprintf(stderr, "nibble bench: pass %d %s %s%d: %.2f tok/s\n", pass + 1, m->arg,
            test == T_PP ? "pp" : "tg", test == T_PP ? b->n_prompt : b->n_gen,
            (test == T_PP ? b->n_prompt : b->n_gen) / (s > 0 ? s : 1));
    return st;
}

/* One profiled run (pp when n_prompt > 0, else tg) and its per-op table. */
static void print_profile(struct bmodel *m, int n_prompt, int n_gen)
{
    struct nb_profile_entry e[32];
    int64_t ntok = 0;
    double s;
    nb_ctx_profile(m->ctx, 1);
    enum nb_status st = n_prompt > 0 ? nb_bench_pp(m->ctx, n_prompt, 7, &s)
                                     : nb_bench_tg(m->ctx, n_gen, 7, &s);
    int n = nb_ctx_profile_get(m->ctx, e, 32, &ntok);
    nb_ctx_profile(m->ctx, 0);
    if (st != NB_OK || ntok <= 0) return;
    double total = 0;
    for (int i = 0; i < n; i++) total += e[i].ms;
    printf("\nprofile of %s, %s: %lld tokens, %.3f ms per token in ops (%.3f ms per token "
           "wall)\n", m->arg, n_prompt > 0 ? "prompt processing" : "decode", (long long)ntok,
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
    for (int i = 0; i < b->n_models; i++) {
        const char *base = strrchr(b->m[i].arg, '/');
        base = base ? base + 1 : b->m[i].arg;
        double best[2] = {0, 0};
        for (int t = 0; t < 2; t++) {
            struct nb_stats s = {.size = sizeof s};
            nb_stats_of(b->m[i].samples[t], b->m[i].n_samples[t], &s);
            best[t] = s.best;
        }
        fprintf(f, "\"%s (%s)\" %.4f %.4f\n", base, b->m[i].info.weight_path, best[0], best[1]);
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
               "n_threads,n_prompt,n_gen,avg_ts,stddev_ts,best_ts,median_ts,spread_pct\n");
    for (int i = 0; i < b->n_models; i++) {
        const struct bmodel *m = &b->m[i];
        double bpw = m->info.linear_params ? 8.0 * m->info.linear_bytes / m->info.linear_params : 0;
        for (int t = 0; t < 2; t++) {
            if (!m->n_samples[t]) continue;
            struct nb_stats s = {.size = sizeof s};
            nb_stats_of(m->samples[t], m->n_samples[t], &s);
            int np = t == T_PP ? b->n_prompt : 0, ng = t == T_TG ? b->n_gen : 0;
            double roof = t == T_TG && bw > 0 ? s.best * (double)m->info.weight_bytes / (bw * 1e9)
                                              : 0;
            if (md) {
                char rf[16] = "-";
                if (roof > 0) snprintf(rf, sizeof rf, "%.0f%%", roof * 100);
                printf("| %s | %s | %.3f | %.1f MiB | %.2f M | %d | %s%d | %.2f ± %.2f | %.2f | "
                       "%.2f | %.1f%% | %s |\n", m->arg, m->info.weight_path, bpw,
                       (double)m->info.linear_bytes / (1 << 20), m->info.n_params / 1e6,
                       b->n_threads, t == T_PP ? "pp" : "tg", t == T_PP ? np : ng, s.mean,
                       s.stddev, s.best, s.median, s.spread_pct, rf);
            } else if (csv) {
                csv_str(m->arg);
                printf(",%s,%s,%.4f,%lld,%lld,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.2f\n",
                       m->info.weight_path, isa, bpw, (long long)m->info.linear_bytes,
                       (long long)m->info.n_params, b->n_threads, np, ng, s.mean, s.stddev,
                       s.best, s.median, s.spread_pct);
            } else { /* json, jsonl: through cJSON, so any file name gives valid JSON */
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "model_filename", m->arg);
                cJSON_AddStringToObject(o, "model_type", m->info.arch);
                cJSON_AddNumberToObject(o, "model_size", (double)m->info.linear_bytes);
                cJSON_AddNumberToObject(o, "model_n_params", (double)m->info.n_params);
                cJSON_AddNumberToObject(o, "n_threads", b->n_threads);
                cJSON_AddNumberToObject(o, "n_prompt", np);
                cJSON_AddNumberToObject(o, "n_gen", ng);
                cJSON_AddNumberToObject(o, "avg_ts", s.mean);
                cJSON_AddNumberToObject(o, "stddev_ts", s.stddev);
                cJSON_AddNumberToObject(o, "avg_ns", 1e9 * (np + ng) / (s.mean > 0 ? s.mean : 1));
                cJSON_AddItemToObject(o, "samples_ts",
                                      samples(m->samples[t], m->n_samples[t], 0, np + ng));
                cJSON_AddItemToObject(o, "samples_ns",
                                      samples(m->samples[t], m->n_samples[t], 1, np + ng));
                cJSON_AddStringToObject(o, "weight_path", m->info.weight_path);
                cJSON_AddStringToObject(o, "kernel", isa);
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
    if (md && bw > 0)
        printf("\nread bandwidth %.1f GB/s (%d threads); roofline = best tg t/s x bytes per token "
               "/ bandwidth; kernels: %s\n", bw, b->n_threads, isa);
}

int cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench", *fmt = "md", *path_name = NULL, *priority = NULL;
    const char *record_dir = NULL;
    static struct bench b;
    const char *plot_path = NULL;
    int profile = 0, rc = 1, record_failed = 0, no_cache = 0;
    memset(&b, 0, sizeof b);
    b.n_prompt = 512;
    b.n_gen = 128;
    b.reps = 5;
    struct nb_ctx_params cp = nb_ctx_default_params();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cp.n_threads = cores > 0 ? (int)cores : 1;
    const struct arg_opt opts[] = {
        OPT_INT("-p|--n-prompt", &b.n_prompt, 0, 1 << 16),
        OPT_INT("-n|--n-gen", &b.n_gen, 0, 1 << 16),
        OPT_INT("-r|--repetitions", &b.reps, 1, MAX_REPS),
        OPTS_WEIGHTS(&path_name, &priority, &no_cache),
        OPTS_CONTEXT(&cp, 16),
        OPT_CHOICE("-o|--output", &fmt, "md|json|jsonl|csv"),
        OPT_STR("--plot", &plot_path),
        OPT_FLAG("--profile", &profile),
        OPT_END};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return 1;
        if (r > 0) continue;
        if (arg_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strncmp(a, "--model=", 8)) {
            /* repeatable, so not in the table: each -m adds a model to compare */
            if (!strncmp(a, "--model=", 8)) v = a + 8;
            else if (!(v = arg_value(cmd, argc, argv, &i))) return 1;
            if (b.n_models == MAX_MODELS) {
                fprintf(stderr, "nibble bench: at most %d models\n", MAX_MODELS);
                return 1;
            }
            b.m[b.n_models++].arg = v;
        } else if (!strcmp(a, "--record")) { /* an optional value */
            record_dir = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "docs/measurements";
        } else {
            arg_unknown(cmd, a);
            return 1;
        }
    }
    if (!b.n_models) {
        fprintf(stderr, "nibble bench: give at least one model with -m\n");
        return 1;
    }
    b.n_threads = cp.n_threads;
    b.n_batch = cp.n_batch;
    b.n_ctx = cp.n_ctx > 0 ? cp.n_ctx : b.n_prompt + b.n_gen + 16;
    for (int i = 0; i < b.n_models; i++) {
        struct bmodel *m = &b.m[i];
        if (!app_open_model(cmd, m->arg, path_name, priority, b.n_threads, !no_cache, &m->model,
                            m->path, sizeof m->path))
            goto done;
        nb_model_get_info(m->model, &m->info);
        struct nb_ctx_params mp = nb_ctx_default_params();
        mp.n_threads = b.n_threads;
        mp.pin = 1;
        mp.n_ctx = b.n_ctx;
        mp.n_batch = b.n_batch;
        if (nb_ctx_init(&m->ctx, m->model, &mp) != NB_OK) goto fail;
        double s; /* warm-up: page in the weights, settle the threads */
        if (nb_bench_tg(m->ctx, 2, 1, &s) != NB_OK) goto fail;
    }
    double bw = nb_measure_read_bandwidth(b.n_threads, (size_t)1 << 30, 5);
    if (nb_bench_interleave(b.n_models, 2, b.reps, run_one, &b) != NB_OK) goto fail;
    emit(&b, fmt, bw);
    if (plot_path && !plot(&b, plot_path)) goto done;
    for (int i = 0; record_dir && i < b.n_models; i++) {
        const struct bmodel *m = &b.m[i];
        struct nb_stats s = {.size = sizeof s};
        nb_stats_of(m->samples[T_TG], m->n_samples[T_TG], &s);
        char cmdline[2048] = "nibble"; /* stored in the record: how to re-run it */
        for (int a = 0; a < argc; a++) {
            size_t l = strlen(cmdline);
            snprintf(cmdline + l, sizeof cmdline - l, " %s", argv[a]);
        }
        struct nb_record_params rp = nb_record_default_params();
        rp.dir = record_dir;
        rp.model_arg = m->arg;
        rp.model_file = m->path;
        rp.info = &m->info;
        rp.threads = b.n_threads;
        rp.n_prompt = b.n_prompt;
        rp.n_gen = b.n_gen;
        rp.pp = m->samples[T_PP];
        rp.tg = m->samples[T_TG];
        rp.n_pp = m->n_samples[T_PP];
        rp.n_tg = m->n_samples[T_TG];
        rp.read_bw_gbs = bw;
        rp.roofline_fraction = bw > 0 ? s.best * (double)m->info.weight_bytes / (bw * 1e9) : 0;
        rp.command = cmdline;
        struct nb_record_result rr = {.size = sizeof rr};
        if (nb_record_write(&rp, &rr) != NB_OK) {
            fprintf(stderr, "nibble bench: --record: %s\n", nb_last_error());
            record_failed = 1;
        } else {
            fprintf(stderr, "nibble bench: recorded %s (%s, kernel %s)\n", rr.file,
                    rr.weight_path, rr.kernel);
        }
    }
    if (profile)
        for (int i = 0; i < b.n_models; i++) {
            if (b.n_prompt > 0) print_profile(&b.m[i], b.n_prompt, 0);
            print_profile(&b.m[i], 0, b.n_gen > 0 ? b.n_gen : 32);
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
