/* nibble template — a chat template's own Jinja source rendered from the command line.
 *
 * Contract used by scripts (tests/cli/jinja_ref.sh):
 *   nibble template (-m MODEL | --tokenizer PATH | --template-file F) [--context CTX.json]
 * prints the rendered prompt exactly (no newline added) on stdout. The template is F's,
 * else the model's own; the context is a JSON object of the template's variables
 * (messages, tools, add_generation_prompt, ...) in which bos_token / eos_token default to
 * the model's and add_generation_prompt to true. Errors go to stderr, exit status 1
 * (2 for bad usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/text.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble template (-m MODEL | --tokenizer PATH | --template-file F)\n"
               "                       [--context CTX.json]\n"
               "\n"
               "Renders a chat template (the model's own Jinja source, or F's) over a JSON\n"
               "context and prints the prompt exactly as the model would see it as text.\n"
               "\n"
               "  -m, --model PATH         the model whose template and bos/eos tokens to use\n"
               "                           (default: $NIBBLE_MODEL)\n"
               "      --tokenizer PATH     a tokenizer file or directory instead of a model\n"
               "      --template-file F    the template's Jinja source from F (\"-\": stdin)\n"
               "  -c, --context CTX.json   a JSON object: messages, tools, add_generation_prompt,\n"
               "                           ... (\"-\": stdin; default: {\"messages\": []});\n"
               "                           bos_token / eos_token default to the model's,\n"
               "                           add_generation_prompt to true\n");
}

int cmd_template(int argc, char **argv)
{
    const char *cmd = "template", *model = NULL, *tokpath = NULL, *tfile = NULL, *cfile = NULL;
    char *tsrc = NULL, *ctx = NULL, *out = NULL;
    size_t n = 0, len = 0;
    struct nb_tokenizer *tok = NULL;
    int rc = 1;
    const struct arg_opt opts[] = {
        OPT_STR("-m|--model", &model),
        OPT_STR("--tokenizer", &tokpath),
        OPT_STR("--template-file", &tfile),
        OPT_STR("-c|--context", &cfile),
        OPT_END};
    for (int i = 1; i < argc; i++) {
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (arg_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        arg_unknown(cmd, argv[i]);
        return 2;
    }
    if (!model && !tokpath) model = getenv("NIBBLE_MODEL");
    if (model && tokpath) {
        fprintf(stderr, "nibble %s: give -m MODEL or --tokenizer PATH, not both\n", cmd);
        return 2;
    }
    if (!model && !tokpath && !tfile) {
        fprintf(stderr, "nibble %s: give -m MODEL, --tokenizer PATH or --template-file F\n", cmd);
        usage(stderr);
        return 2;
    }
    if (tfile && cfile && !strcmp(tfile, "-") && !strcmp(cfile, "-")) {
        fprintf(stderr, "nibble %s: only one of --template-file and --context can be stdin\n", cmd);
        return 2;
    }
    if (tfile && !app_read_all(cmd, "--template-file", tfile, (size_t)16 << 20, &tsrc, &n))
        goto done;
    if (cfile && !app_read_all(cmd, "--context", cfile, (size_t)256 << 20, &ctx, &n)) goto done;
    if ((model || tokpath) && nb_tokenizer_load(&tok, model ? model : tokpath)) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    const char *context = ctx ? ctx : "{\"messages\": []}";
    enum nb_status st = nb_chat_template_render_json(tok, tsrc, context, NULL, 0, &len);
    if (st == NB_ERR_RANGE) {
        if (!(out = malloc(len + 1))) {
            fprintf(stderr, "nibble %s: out of memory\n", cmd);
            goto done;
        }
        st = nb_chat_template_render_json(tok, tsrc, context, out, len + 1, &len);
    }
    if (st) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout)) {
        fprintf(stderr, "nibble %s: writing the output failed\n", cmd);
        goto done;
    }
    rc = 0;
done:
    free(out);
    free(ctx);
    free(tsrc);
    nb_tokenizer_free(tok);
    return rc;
}
