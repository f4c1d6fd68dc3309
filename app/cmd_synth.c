/* nibble synth — write a random-weight model at a real shape as GGUF (benchmarks, tests),
 * through nibble.h's synthetic-model calls. */
#include <stdio.h>
#include <string.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/text.h"
#include "nibble.h"
#include "nibble_synth.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble synth --shape NAME [--dtype f16|bf16|f32] [--seed N] [-t N] "
               "-o FILE.gguf\n"
               "       nibble synth --list\n"
               "\n"
               "Writes a GGUF model with random weights (matrices and embedding ~ N(0, 0.02^2),\n"
               "norms ~ 1 + N(0, 0.02^2); the same bytes for the same shape, dtype and seed on\n"
               "every machine) and a minimal byte-level BPE vocabulary, loadable by nibble and,\n"
               "for the llama and qwen3 shapes, by llama.cpp.\n"
               "\n"
               "  --shape NAME     model shape (see --list)\n"
               "  --dtype T        f16 (default), bf16 or f32 for matrices and embedding\n"
               "  --seed N         generator seed (default 1)\n"
               "  -t, --threads N  generation threads (default: all cores)\n"
               "  -o, --output F   output file\n"
               "  --list           print the shapes\n");
}

static void list_shapes(void)
{
    printf("%-12s %-6s %6s %6s %7s %5s %6s %7s %9s  %s\n", "shape", "arch", "layers", "hidden",
           "heads", "hdim", "ffn", "vocab", "params", "notes");
    for (int i = 0; i < nb_synth_shape_count(); i++) {
        struct nb_synth_shape_info s = {.size = sizeof s};
        if (nb_synth_shape_get(i, &s) != NB_OK) continue;
        char heads[16];
        snprintf(heads, sizeof heads, "%d/%d", s.n_heads, s.n_kv_heads);
        printf("%-12s %-6s %6d %6d %7s %5d %6d %7d %9lld  %s\n", s.name, s.arch, s.n_layers,
               s.n_embd, heads, s.head_dim, s.n_ff, s.n_vocab, (long long)s.n_params, s.desc);
    }
}

int cmd_synth(int argc, char **argv)
{
    const char *cmd = "synth", *shape_name = NULL, *out = NULL;
    struct nb_synth_params p = nb_synth_default_params();
    const char *dtype = NULL;
    int list = 0;
    const struct arg_opt opts[] = {
        OPT_FLAG("--list", &list),
        OPT_STR("--shape", &shape_name),
        OPT_CHOICE("--dtype", &dtype, "f16|bf16|f32"),
        OPT_U64("--seed", &p.seed),
        OPT_INT("-t|--threads", &p.n_threads, 1, 1024),
        OPT_STR("-o|--output", &out),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 2 : 0;
    if (list) {
        list_shapes();
        return 0;
    }
    if (dtype) p.dtype = dtype;
    if (!shape_name || !out) {
        usage(stderr);
        return 2;
    }
    struct nb_synth_shape_info s = {.size = sizeof s};
    if (nb_synth_shape_find(shape_name, &s) != NB_OK) {
        fprintf(stderr, "nibble synth: unknown shape '%s'; the shapes are:\n", shape_name);
        for (int i = 0; i < nb_synth_shape_count(); i++) {
            struct nb_synth_shape_info e = {.size = sizeof e};
            if (nb_synth_shape_get(i, &e) == NB_OK) fprintf(stderr, "  %s\n", e.name);
        }
        return 2;
    }
    double t0 = app_time_s();
    if (nb_synth_write_file(shape_name, &p, out) != NB_OK) {
        fprintf(stderr, "nibble synth: %s\n", nb_last_error());
        return 1;
    }
    fprintf(stderr, "nibble synth: wrote %s: %s, %lld parameters, seed %llu, %.1f s\n", out,
            s.name, (long long)s.n_params, (unsigned long long)p.seed, app_time_s() - t0);
    return 0;
}
