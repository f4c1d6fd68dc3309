/* nibble kv-budget — what a context costs in memory before it is made: the weights
 * (mapped from the file, not anonymous), the KV cache (hybrid accounting beside flat),
 * the scratch, and the anonymous total; --measure makes the context, fills it and reads
 * RssAnon before and after (docs/kv-cache.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/memory.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble kv-budget -m MODEL [-c N] [--n-seq S] [--kv-type T] [--measure]\n"
            "                        [--path P] [-t N] [-b N]\n"
            "\n"
            "Prints what a context of N tokens per sequence costs in memory: the weights\n"
            "(mapped from the model file: page cache, not the process's anonymous memory),\n"
            "the KV cache (full-attention layers hold every token, sliding-window layers\n"
            "their window; beside it the flat size if every layer held every token), the\n"
            "scratch, and the total anonymous memory (what RssAnon grows by).\n"
            "\n"
            "  -c N            tokens per sequence (default: min(model's, 4096))\n"
            "  --n-seq S       sequences (default 1)\n"
            "  --kv-type T     f32, f16, bf16 or q8_0 (default %s)\n"
            "  --measure       make the context, fill every sequence with N random tokens and\n"
            "                  print the RssAnon it took beside the prediction\n"
            "  --fill F        with --measure: fill F tokens a sequence, not N (the pool takes\n"
            "                  only the blocks it uses: its RssAnon beside its accounting)\n"
            "  --path P, -t N, -b N   as for nibble run\n",
            nb_kv_type_name(NB_KV_TYPE_DEFAULT));
}

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Fill every sequence with n_fill random tokens: n_fill - 1 as prompt chunks, the last
 * one as a decode step (so the decode buffers are touched too, as in a real run). */
static int fill(struct nb_ctx *ctx, const struct nb_model *m, const struct nb_ctx_params *cp,
                int n_fill)
{
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    int chunk = cp->n_batch > 0 ? cp->n_batch : 512;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)chunk), *pos = malloc(sizeof(int32_t) * (size_t)chunk);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)chunk);
    float *logits = malloc(sizeof(float) * (size_t)info.n_vocab);
    uint64_t r = 88172645463325252ull;
    int ok = tok && pos && seq && logits;
    for (int s = 0; ok && s < cp->n_seq; s++)
        for (int p0 = 0, n; ok && p0 < n_fill; p0 += n) {
            n = n_fill - 1 - p0 < chunk ? n_fill - 1 - p0 : chunk;
            if (n <= 0) n = 1; /* the last token: a decode step */
            for (int i = 0; i < n; i++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                tok[i] = (int32_t)(r % (uint64_t)info.n_vocab);
                pos[i] = p0 + i;
                seq[i] = s;
            }
            struct nb_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq = seq};
            if (nb_decode(ctx, &b, logits) != NB_OK) {
                fprintf(stderr, "nibble kv-budget: %s\n", nb_last_error());
                ok = 0;
            }
        }
    free(tok);
    free(pos);
    free(seq);
    free(logits);
    return ok;
}

int cmd_kvbudget(int argc, char **argv)
{
    const char *cmd = "kv-budget", *model_path = NULL, *path_name = NULL, *priority = NULL;
    int measure = 0, no_cache = 0, rc = 1, n_fill = 0;
    char loaded[4096];
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_model *m = NULL;
    struct nb_ctx *ctx = NULL;
    const struct arg_opt opts[] = {
        OPTS_MODEL(&model_path, &path_name, &priority, &no_cache),
        OPTS_CONTEXT(&cp, 1),
        OPT_INT("--n-seq|-np|--parallel", &cp.n_seq, 1, 4096),
        OPT_FLAG("--measure", &measure),
        OPT_INT("--fill", &n_fill, 1, 1 << 24),
        OPT_END};
    int r = arg_parse(cmd, opts, argc, argv, usage);
    if (r <= 0) return r < 0;
    if (!model_path) {
        fprintf(stderr, "nibble %s: -m MODEL is required\n", cmd);
        return 1;
    }
    int64_t anon0 = app_rss_anon();
    if (!app_open_model(cmd, model_path, path_name, priority, cp.n_threads, !no_cache, &m, loaded,
                        sizeof loaded))
        return 1;
    int64_t anon_model = app_rss_anon();
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    if (cp.n_ctx <= 0) cp.n_ctx = info.n_ctx_train > 0 && info.n_ctx_train < 4096 ? info.n_ctx_train : 4096;
    struct nb_ctx_memory mem;
    if (nb_ctx_memory(m, &cp, &mem) != NB_OK) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    struct stat sb;
    int64_t file = stat(loaded, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
    const char *kvt = nb_kv_type_name(cp.kv_type);
    printf("model       %s (%s, %d layers, %d kv heads x %d)\n", loaded, info.weight_path,
           info.n_layers, info.n_kv_heads, info.head_dim);
    if (file >= 0)
        printf("weights     %10.1f MiB in the file (read into huge pages: in model anon below; "
               "mapped, NIBBLE_MMAP=1: page cache, not RssAnon)\n", mib(file));
    if (anon0 >= 0 && anon_model >= 0)
        printf("model anon  %10.1f MiB (measured: what loading added to RssAnon)\n",
               mib(anon_model - anon0));
    printf("KV cache    %10.1f MiB  %s, %d tokens x %d sequence%s (%.1f KiB a token in every "
           "layer)\n", mib(mem.kv_bytes), kvt, cp.n_ctx, cp.n_seq, cp.n_seq == 1 ? "" : "s",
           (double)mem.kv_bytes_per_token / 1024.0);
    printf("KV flat     %10.1f MiB  if every layer held every token%s\n", mib(mem.kv_flat_bytes),
           mem.kv_flat_bytes != mem.kv_bytes ? " (sliding-window layers hold their window)" : "");
    char th[32] = "all cores'";
    if (cp.n_threads > 0) snprintf(th, sizeof th, "%d threads'", cp.n_threads);
    printf("scratch     %10.1f MiB  activations of a %d-token chunk, %s scratch\n",
           mib(mem.work_bytes), cp.n_batch > cp.n_ctx ? cp.n_ctx : cp.n_batch, th);
    printf("total anon  %10.1f MiB  KV + scratch: what the context adds to RssAnon\n",
           mib(mem.total_bytes));
    if (!measure) {
        rc = 0;
        goto done;
    }
    int64_t before = app_rss_anon();
    if (before < 0) {
        fprintf(stderr, "nibble %s: --measure needs RssAnon in /proc/self/status\n", cmd);
        goto done;
    }
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    if (n_fill <= 0 || n_fill > cp.n_ctx) n_fill = cp.n_ctx;
    double t0 = now_s();
    if (!fill(ctx, m, &cp, n_fill)) goto done;
    double secs = now_s() - t0;
    int64_t after = app_rss_anon();
    if (n_fill < cp.n_ctx) { /* a partly filled pool: its own accounting is the prediction */
        struct nb_kv_usage u;
        nb_ctx_kv_usage(ctx, &u);
        int64_t pred = u.bytes_used + mem.work_bytes;
        printf("filled      %d x %d tokens: %lld of %lld KV blocks in use (%.1f of %.1f MiB)\n",
               cp.n_seq, n_fill, (long long)u.blocks_used, (long long)u.blocks_total,
               mib(u.bytes_used), mib(u.bytes_reserved));
        printf("predicted   %10.1f MiB  RssAnon growth (KV blocks in use + scratch)\n", mib(pred));
        printf("measured    %10.1f MiB  RssAnon growth (%+.1f%%; filled in %.1f s)\n",
               mib(after - before), 100.0 * ((double)(after - before) - (double)pred) / (double)pred,
               secs);
        rc = 0;
        goto done;
    }
    double diff = 100.0 * ((double)(after - before) - (double)mem.total_bytes) /
                  (double)(mem.total_bytes > 0 ? mem.total_bytes : 1);
    printf("predicted   %10.1f MiB  RssAnon growth for %d x %d tokens\n", mib(mem.total_bytes),
           cp.n_seq, cp.n_ctx);
    printf("measured    %10.1f MiB  RssAnon growth (%+.1f%%; filled in %.1f s)\n",
           mib(after - before), diff, secs);
    rc = 0;
done:
    nb_ctx_free(ctx);
    nb_model_free(m);
    return rc;
}
