/* nibble — command line entry: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/env.h"
#include "app/log.h"
#include "nibble.h"

static const struct nb_command k_commands[] = {
    {"run", "generate text or ids from a prompt", cmd_run},
    {"chat", "interactive multi-turn chat (keeps the KV cache between turns)", cmd_chat},
    {"serve", "OpenAI-compatible HTTP server with continuous batching", cmd_serve},
    {"quantize", "turn a float checkpoint into a packed .nib of one weight path", cmd_quantize},
    {"inspect", "print a .nib file's header, tensors and bits per weight", cmd_inspect},
    {"verify", "check every tensor checksum of a .nib file", cmd_verify},
    {"export", "write a model as a Hugging Face GPTQ checkpoint (for vLLM)", cmd_export},
    {"bench", "measure prompt and generation speed (llama-bench compatible)", cmd_bench},
    {"probe", "CPU features, OS permissions, caches, bandwidth and the chosen weight path", cmd_probe},
    {"eval", "fidelity of a test build against a reference build", cmd_eval},
    {"agent", "task outcomes on a simulated phone, per build (OpenAI-compatible servers)", cmd_agent},
    {"tokenize", "text -> token ids (debugging, scripts)", cmd_tokenize},
    {"detokenize", "token ids -> text", cmd_detokenize},
    {"template", "render a chat template (the model's Jinja source) over a JSON context", cmd_template},
    {"synth", "write a random-weight model at a real shape as GGUF", cmd_synth},
    {"cache", "list or clear the warm-start cache of quantized models", cmd_cache},
    {"kv-budget", "what a context costs in memory (KV, scratch), predicted or measured", cmd_kvbudget},
};

static void usage(FILE *f)
{
    fprintf(f, "nibble %s — small LLMs, fast, on edge CPUs\n\nusage: nibble COMMAND [options]\n\n",
            nb_version());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].help);
    fprintf(f, "\n'nibble COMMAND --help' (or 'nibble help COMMAND') for the options of a "
               "command.\nBefore the command or among its options: -q, --quiet (no notes on "
               "stderr,\nonly warnings and errors), -v, --verbose (more), --log-disable (as -q),\n"
               "--log-format json (each stderr line as a JSON object).\n");
}

#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static const struct nb_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, k_commands[i].name)) return &k_commands[i];
    return NULL;
}

/* "nibble: unknown command 'X'", with the nearest command's name when one is near. */
static int unknown_command(const char *name)
{
    char list[512] = "help|version";
    const char *names[] = {list, NULL};
    int len = 0;
    for (size_t i = 0; i < N_COMMANDS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "|%s", k_commands[i].name);
    const char *near = arg_nearest(name, names, &len);
    if (near)
        fprintf(stderr, "nibble: unknown command '%s': did you mean '%.*s'?\n", name, len, near);
    else
        fprintf(stderr, "nibble: unknown command '%s'\n\n", name);
    if (!near) usage(stderr);
    return 2;
}

/* nibble help [COMMAND]: the general help, or COMMAND --help. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const struct nb_command *c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    char *args[] = {argv[2], "--help", NULL};
    return c->fn(2, args);
}

int main(int argc, char **argv)
{
    app_env_init(); /* the environment is read here, in app/, and nowhere in the library */
    int i = 1;
    for (int r; i < argc && (r = app_log_option("", argc, argv, &i)) != 0; i++) /* nibble -q CMD */
        if (r < 0) return 2;
    argc -= i - 1; /* argv[1]: the command */
    argv += i - 1;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) return help(argc, argv);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("nibble %s\n", nb_version());
        return 0;
    }
    const struct nb_command *c = find_command(argv[1]);
    return c ? c->fn(argc - 1, argv + 1) : unknown_command(argv[1]);
}
