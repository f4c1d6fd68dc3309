/* nibble quantize — float checkpoint -> .nib of one weight path, with a per-tensor
 * table and the honest bits per weight (from the bytes actually stored). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/env.h"
#include "app/progress.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble quantize -m MODEL [--path P] [--target T] [--group N]\n"
            "                       [--recipe R [--bits SPEC] | --bpw B]\n"
            "                       [--head 4|6|8|16] [--embd 4|6|8|16] [--calib FILE\n"
            "                       [--calib-tokens N] [--gptq [--act-order] [--damp X]]]\n"
            "                       [--absmax] [-t N] [-q] -o OUT.nib\n"
            "\n"
            "  --path P      w4a8 | w4a16 | w8a16 | bf16 | f32 | auto (the default: the\n"
            "                selector's choice for this CPU, --priority balanced|speed|\n"
            "                fidelity|memory, default balanced: its path, recipe, head and\n"
            "                GPTQ on the calibration text installed with nibble, the same\n"
            "                bytes `nibble run` caches; options given here stay over it)\n"
            "  --target T    whom auto chooses for: host (default), arm (an Arm CPU: this one\n"
            "                when it is, else one with dotprod; docs/arm.md) or phone (w8a16)\n"
            "  --group N     int4 group size along K: 32, 64 or 128 (default 128)\n"
            "  --recipe R    bits per matrix on the int4 paths: speed (every matrix 4-bit,\n"
            "                head and embeddings too), balanced (the layers 4-bit, head\n"
            "                and embeddings 6-bit Q6_K, one copy when the head is tied),\n"
            "                fidelity (attn_v, ffn_down, head and embeddings at 8), uniform\n"
            "                (the default: the layers at 4, head and embeddings at 8); the\n"
            "                ladder, each no larger and closer to the float model than\n"
            "                llama.cpp's rung of that name (docs/quantization.md): q3 (=\n"
            "                speed: Q3_K_M), q4 (= balanced: Q4_0, Q4_K_M), q5 (balanced +\n"
            "                k, v, down at 8: Q5_K_M), q6 (q5 + up at 6: Q6_K), q8 (every\n"
            "                matrix at 8: Q8_0)\n"
            "  --bits SPEC   widths per matrix class over the recipe, as llama-quantize's\n"
            "                --tensor-type: CLASS=WIDTH,... with classes q, k, v, o, gate,\n"
            "                up, down, head, embd and widths 4, 6 (Q6_K), 8 (Q8_0 blocks on\n"
            "                the integer kernels; embeddings: int8 rows) or 16 (bf16),\n"
            "                e.g. --recipe balanced --bits v=8,down=8\n"
            "  --bpw B       a budget instead, in bits per weight over the model's tensors:\n"
            "                the largest of q3..q8 within it, then 6- and 8-bit steps for\n"
            "                the matrices whose measured error drops most per byte, while\n"
            "                the file's tensors stay within B (below q3: refused)\n"
            "  --head B      output head: 4 (the path's int4 grid), 6 (GGUF Q6_K blocks on\n"
            "                their integer kernels), 8 (Q8_0 blocks on the int4 paths, int8\n"
            "                per row on w8a16) or 16 (bf16); default\n"
            "                the recipe's. A tied head gets its own copy.\n"
            "  --embd B      embeddings (a row gather): 4 (int4 rows), 6 (Q6_K rows), 8 (int8\n"
            "                rows) or 16 (bf16); default the recipe's\n"
            "  --calib FILE  weight the error by each input channel's mean squared activation\n"
            "  --calib-tokens N  use the first N tokens of the calibration text (default all;\n"
            "                with --gptq at most 2^37 / (weights of one layer), e.g. 2,560 on a\n"
            "                1.7 B model)\n"
            "  --gptq        GPTQ on every int4, Q6_K and Q8_0 matrix (needs --calib): each\n"
            "                column's rounding error compensated in the columns after it,\n"
            "                layer by layer, on the outputs of the layers before it as\n"
            "                quantized\n"
            "  --act-order   GPTQ sweeps columns by descending activation energy\n"
            "  --damp X      GPTQ dampening, a fraction of the Hessian's mean diagonal (0.01;\n"
            "                the q8 recipe: 0.02)\n"
            "  --absmax      plain absmax scales instead of the weighted MSE search\n"
            "  -q            no per-tensor table\n");
}

struct qui {
    struct app_progress bar; /* first: the progress callback's user */
    int quiet;
};

static void on_report(const char *name, const char *kind, int64_t n_out, int64_t n_in,
                      uint64_t bytes, double rel_rms, void *user)
{
    struct qui *u = user;
    if (u->quiet) return;
    if (u->bar.tty) fprintf(stderr, "\r%*s\r", 60, "");
    fprintf(stderr, "%-28s %-6s %7lld x %-6lld %11llu B %6.3f bpw", name, kind, (long long)n_out,
            (long long)n_in, (unsigned long long)bytes, 8.0 * (double)bytes / (double)(n_out * n_in));
    if (rel_rms > 0) fprintf(stderr, "  rel-rms %.4f", rel_rms);
    fprintf(stderr, "\n");
}

int cmd_quantize(int argc, char **argv)
{
    const char *cmd = "quantize", *model = NULL, *out = NULL, *path_name = NULL;
    const char *priority = NULL, *target = NULL;
    struct nb_quantize_params o = nb_quantize_default_params();
    struct qui ui = {0};
    app_progress_init(&ui.bar, cmd, NULL);
    app_env_layout(&o.layout_rows, &o.repack_rows);
    const char *group = NULL, *head = NULL, *embd = NULL;
    float bpw = 0;
    int absmax = 0;
    float damp = 0;
    const struct arg_opt opts[] = {
        OPT_STR("-m|--model", &model),
        OPT_STR("-o|--output", &out),
        OPT_STR("--path", &path_name),
        OPT_STR("--priority", &priority),
        OPT_CHOICE("--target", &target, "host|arm|phone"),
        OPT_CHOICE("--group", &group, "32|64|128"),
        OPT_CHOICE("--head", &head, "4|6|8|16"),
        OPT_CHOICE("--embd", &embd, "4|6|8|16"),
        OPT_CHOICE("--recipe", &o.recipe, "speed|balanced|fidelity|uniform|q3|q4|q5|q6|q8"),
        OPT_STR("--bits", &o.bits),
        OPT_FLOAT("--bpw", &bpw, 4, 16),
        OPT_STR("--calib", &o.calib_path),
        OPT_INT("--calib-tokens", &o.calib_tokens, 1, 1 << 30),
        OPT_FLAG("--gptq", &o.gptq),
        OPT_FLAG("--act-order", &o.act_order),
        OPT_FLOAT("--damp", &damp, 1e-6, 10),
        OPT_FLAG("--absmax", &absmax),
        OPT_INT("-t|--threads", &o.n_threads, 1, 1024),
        OPT_FLAG("-q|--quiet", &ui.quiet),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (group) o.group = atoi(group);
    if (head) o.head_bits = atoi(head);
    if (embd) o.embd_bits = atoi(embd);
    if (absmax) o.search = 0;
    o.gptq_damp = damp;
    o.bpw = bpw;
    if (!path_name) path_name = "auto";
    if (!model || !out) {
        fprintf(stderr, "nibble quantize: -m MODEL and -o OUT.nib are required\n");
        return 1;
    }
    /* auto: the choice is printed here and made again, the same, by the library (path,
     * recipe, head, GPTQ on the installed calibration text: nb_model_open's build) */
    if (!app_weight_path(cmd, path_name, priority, target, &o.path, NULL)) return 1;
    const int is_auto = !strcmp(path_name, "auto");
    if (is_auto) {
        o.path = "auto";
        o.select.priority = priority;
        o.select.target = target;
        app_env_select(&o.select);
        if (!o.calib_path) o.calib_path = app_env_calib();
    }
    o.progress = app_progress_cb;
    o.report = on_report;
    o.user = &ui;
    struct nb_quantize_stats r = {.size = sizeof r};
    if (nb_model_quantize(model, out, &o, &r) != NB_OK) {
        fprintf(stderr, "nibble quantize: %s\n", nb_last_error());
        return 1;
    }
    if (r.selected && r.selection.gptq && !o.calib_path)
        fprintf(stderr, "nibble %s: no calibration text (NIBBLE_CALIB, share/nibble/calib.txt): "
                "quantized without GPTQ\n", cmd);
    printf("%s: %s, %.3f bits per weight in linear layers (%lld params, %llu bytes), %.3f over "
           "the whole file (%lld params, %llu bytes), %.1f s\n",
           out, r.weight_path, r.bpw_linear, (long long)r.linear_params,
           (unsigned long long)r.linear_bytes, r.bpw_file, (long long)r.file_params,
           (unsigned long long)r.file_bytes, r.seconds);
    if (r.recipe[0]) printf("recipe %s, bits per matrix:\n%s", r.recipe, r.recipe_table);
    return 0;
}
