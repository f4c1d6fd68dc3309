/* nibble export — a model out of nibble for other engines: a Hugging Face GPTQ checkpoint
 * (config.json with quantization_config, model.safetensors, tokenizer files) that vLLM
 * serves (docs/interop.md, "GPTQ out: moving a model to vLLM"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "app/commands.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble export --format gptq -m MODEL -o DIR [--dtype f16|bf16|f32] [--force]\n"
            "                     [--group N] [--head 4|16] [--calib FILE [--calib-tokens N]\n"
            "                     [--gptq]] [-t N]\n"
            "\n"
            "  --format gptq  a GPTQ checkpoint (4-bit, one group size, checkpoint_format gptq)\n"
            "                 in the folder DIR: config.json, quantize_config.json,\n"
            "                 model.safetensors and the model's tokenizer files\n"
            "  -m MODEL       a .nib: its w4a8 matrices go out exactly (symmetric GPTQ);\n"
            "                 w4a16 matrices only when their minimums sit on GPTQ's grid;\n"
            "                 matrices at another width or group, and the embeddings, go out\n"
            "                 as float. A float model (GGUF, safetensors folder, llama2.c) is\n"
            "                 quantized first, in memory, on the w4a8 grid (recipe speed)\n"
            "  -o DIR         written beside DIR under a temporary name, then renamed\n"
            "  --force        replace DIR when it exists and is not empty\n"
            "  --dtype T      float tensors (embeddings, norms, biases, float matrices): f16\n"
            "                 (default, as GPTQ checkpoints carry them), bf16, or f32 (keeps\n"
            "                 nibble's values exactly)\n"
            "  float models only:\n"
            "  --group N      32, 64 or 128 (default 128)\n"
            "  --head B       the output head: 4 (default, out as GPTQ with lm_head true) or\n"
            "                 16 (float)\n"
            "  --calib FILE   weight the scale search by this text's activations\n"
            "  --calib-tokens N  use the first N tokens of it\n"
            "  --gptq         GPTQ on the calibration text (needs --calib)\n"
            "  -t N           threads for quantizing (default all cores)\n"
            "\n"
            "Then, for example: vllm serve DIR --dtype float16\n");
}

int cmd_export(int argc, char **argv)
{
    const char *cmd = "export", *format = NULL, *model = NULL, *out = NULL;
    const char *group = NULL, *head = NULL;
    struct nb_export_params p = nb_export_default_params();
    const struct arg_opt opts[] = {
        OPT_STR("--format", &format),
        OPT_STR("-m|--model", &model),
        OPT_STR("-o|--output", &out),
        OPT_CHOICE("--dtype", &p.dtype, "f16|bf16|f32"),
        OPT_FLAG("--force", &p.force),
        OPT_CHOICE("--group", &group, "32|64|128"),
        OPT_CHOICE("--head", &head, "4|16"),
        OPT_STR("--calib", &p.calib_path),
        OPT_INT("--calib-tokens", &p.calib_tokens, 1, 1 << 30),
        OPT_FLAG("--gptq", &p.gptq),
        OPT_INT("-t|--threads", &p.n_threads, 1, 1024),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (!format || !model || !out) {
        fprintf(stderr, "nibble export: --format, -m MODEL and -o DIR are required (see nibble "
                        "export --help)\n");
        return 1;
    }
    if (strcmp(format, "gptq") != 0) {
        fprintf(stderr, "nibble export: --format: '%s' is not a format nibble writes (gptq)\n",
                format);
        return 1;
    }
    if (group) p.group = atoi(group);
    if (head) p.head_bits = atoi(head);
    struct nb_export_stats s = {.size = sizeof s};
    if (nb_export_gptq(model, out, &p, &s) != NB_OK) {
        fprintf(stderr, "nibble export: %s\n", nb_last_error());
        return 1;
    }
    printf("%s: GPTQ %d-bit, group %d, %s, lm_head %s: %d linear layers as GPTQ, %d as float; "
           "model.safetensors %llu bytes; %d tokenizer file%s\n",
           out, 4, s.group, s.sym ? "sym" : "asym", s.lm_head ? "quantized" : "float", s.n_gptq,
           s.n_float, (unsigned long long)s.model_bytes, s.n_tokenizer_files,
           s.n_tokenizer_files == 1 ? "" : "s");
    if (s.notes[0]) printf("%s", s.notes);
    return 0;
}
