/* nibble run — load a model, prefill a prompt, stream generated tokens.
 * Statistics and logs go to stderr; stdout carries only the generated output. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/ctxshift.h"
#include "app/log.h"
#include "app/memory.h"
#include "app/text.h"
#include "nibble.h"

#define DEFAULT_MODEL "../shared/models/kjv-7m/kjv-7m-f32.gguf"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble run -m MODEL (-p TEXT | --ids 1,2,3) [options]\n"
            "\n"
            "MODEL is a GGUF file, a llama2.c .bin, or a Hugging Face model directory\n"
            "(config.json + *.safetensors). Default: $NIBBLE_MODEL, else " DEFAULT_MODEL ".\n"
            "\n"
            "  -m, --model PATH        model to load\n"
            "  -p, --prompt TEXT       prompt text (\"-\": read it from standard input)\n"
            "  -f, --file FILE         the prompt from a file\n"
            "      --ids LIST          prompt as token ids, used exactly as given (no BOS)\n"
            "      --path P            weight path: auto (default: the selector's choice for\n"
            "                          this CPU, --priority balanced|speed|fidelity|memory), w4a8, w4a16,\n"
            "                          w8a16, bf16, f32 (a float MODEL is quantized on first use\n"
            "                          and cached), or source (run the weights as stored)\n"
            "      --no-cache          quantize into memory; never read or write the cache\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1: until end of\n"
            "                          generation, past the context by shifting it)\n"
            "  -c, --ctx-size N        context length in tokens (default: min(model, 4096));\n"
            "                          more than the model was trained for is warned about\n"
            "  --kv-type T, -ctk T     KV cache type: f16 (default), f32, bf16, q8_0\n"
            "      --keep N            when the context is full, keep the first N prompt tokens\n"
            "                          after BOS (BOS is always kept; -1: the whole prompt;\n"
            "                          default 0), drop the oldest half of the rest, go on\n"
            "      --no-shift          when the context is full, stop (exit status 0)\n"
            "                          (--no-context-shift; --context-shift: the default)\n"
            "  -t, --threads N         threads (default: all cores)\n"
            "  -b, --batch-size N      prompt tokens per forward chunk (default 512)\n"
            "      --temp T            temperature; 0 = greedy (default 0)\n"
            "      --top-k N           (default 40)   --top-p P (default 0.95)\n"
            "      --min-p P           (default 0.05) -s, --seed N  (default 24301)\n"
            "      --repeat-penalty R  (default 1.0 = off)  --repeat-last-n N (default 64)\n"
            "      --presence-penalty P, --frequency-penalty F  OpenAI's, -2..2, over the\n"
            "                          same window (default 0 = off)\n"
            "      --ignore-eos        keep generating past end-of-sequence / end-of-turn\n"
            "  -l, --logit-bias ID+B   add B to token ID's logit (ID-B subtracts; ID-inf bans it;\n"
            "                          repeatable, as llama.cpp's)\n"
            "      --stop STR          stop when the output contains STR (repeatable;\n"
            "                          -r, --reverse-prompt STR: the same)\n"
            "  -sys, --system-prompt T the prompt is rendered with the chat template as a\n"
            "                          user turn after the system message T, the assistant's\n"
            "                          header appended (the model's template, or NAME:)\n"
            "      --chat-template N   chatml, qwen3, llama3, llama2, gemma (with -sys; alone:\n"
            "                          the prompt as a user turn without a system message)\n"
            "  -cnv, -i                a conversation: nibble chat with these options (-sys, or\n"
            "                          else -p, is its system message; --conversation,\n"
            "                          --interactive, -if the same)\n"
            "  -j, --json-schema S     the output is one JSON object that keeps to the JSON\n"
            "                          Schema S: its text, or a file that holds it ('{}': any\n"
            "                          object; the subset of docs/serve.md); it ends\n"
            "                          complete within -n tokens\n"
            "      --grammar G         the output keeps to the GBNF grammar G (llama.cpp's\n"
            "                          notation, from rule root; docs/grammar.md)\n"
            "      --grammar-file F    the same, from file F\n"
            "      --no-special        treat special-token text in the prompt as plain text\n"
            "      --print-ids         stdout: only the generated ids, separated by spaces\n"
            "      --lookup N          prompt-lookup speculative decoding: up to N draft tokens\n"
            "                          a step copied from the text so far, verified in one\n"
            "                          batched step; the same output, context shifts\n"
            "                          included (default 0: off)\n"
            "Every --option VALUE may also be written --option=VALUE.\n"
            "\n"
            "llama.cpp's options: -ngl, --n-gpu-layers, -ngld, -mg, -sm, -ts, -dev, -ot, -nkvo\n"
            "(nibble runs on the CPU), --no-mmap, --mlock and -fa, --flash-attn [on|off|auto]\n"
            "are accepted and ignored, with one note each on stderr; -ctv, --cache-type-v sets\n"
            "the KV type as -ctk does (K and V share one); -no-cnv is what run does anyway.\n"
            "-q, --quiet: nothing on stderr but warnings and errors; -v, --verbose: the\n"
            "weight-path choice and its reasons at every start; --log-format json.\n");
}

#define MAX_STOPS 16
#define MAX_BIAS 256

struct out_state {
    int print_ids, ignore_eos;
    int n;
    const struct nb_tokenizer *tok; /* NULL: print ids */
    struct nb_text_out *text;       /* the token -> text step (with a tokenizer) */
    int stopped;                    /* 1: end-of-generation token, 2: stop string */
};

static int on_token(int32_t id, void *user)
{
    struct out_state *o = user;
    if (o->print_ids || !o->tok) { /* ids: end-of-generation checked here, text: by text_out */
        if (o->tok && !o->ignore_eos && nb_tokenizer_is_eog(o->tok, id)) {
            o->stopped = 1;
            return 1;
        }
        printf(o->n++ ? " %d" : "%d", id);
        fflush(stdout);
        return 0;
    }
    const char *text;
    size_t len;
    enum nb_text_event ev = nb_text_out_feed(o->text, id, &text, &len);
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (ev == NB_TEXT_EOG) o->stopped = 1;
    if (ev == NB_TEXT_STOP) o->stopped = 2;
    return ev != NB_TEXT_MORE;
}

/* A whole prompt from a file, or from standard input for "-" (at most 64 MiB). */
static char *read_prompt(const char *path)
{
    char *buf = NULL;
    size_t n;
    return app_read_all("run", "the prompt", path, 64u << 20, &buf, &n) ? buf : NULL;
}

/* What the command line asks for. */
struct run_args {
    const char *model_path, *prompt_text, *prompt_file, *path_name, *priority;
    const char *system, *chat_template; /* -sys, --chat-template: the prompt as a chat turn */
    struct app_grammar_opts gram; /* -j, --grammar, --grammar-file */
    int32_t *ids; /* --ids (owned) */
    int n_ids, n_predict, ignore_eos, no_special, no_cache, lookup, print_ids, no_cnv;
    struct app_shift_opts so;
    const char *stops[MAX_STOPS];
    int n_stops;
    int32_t bias_id[MAX_BIAS];
    float bias[MAX_BIAS];
    int n_bias;
    struct nb_ctx_params cp;
    struct nb_sampler_params sp;
};

/* -l ID+B, ID-B, ID-inf: one logit bias into a. 0 after saying why. */
static int parse_bias(struct run_args *a, const char *v)
{
    char *end = NULL;
    long id = strtol(v, &end, 10);
    float b = 0;
    int ok = end != v && id >= 0 && id <= INT32_MAX && (*end == '+' || *end == '-');
    if (ok && !strcmp(end, "-inf"))
        b = -INFINITY;
    else if (ok) {
        char *e2 = NULL;
        b = strtof(end, &e2);
        ok = e2 != end + 1 && !*e2 && isfinite(b);
    }
    if (!ok) {
        fprintf(stderr, "nibble run: --logit-bias '%s': give TOKEN_ID+BIAS, TOKEN_ID-BIAS or "
                        "TOKEN_ID-inf (e.g. 15043+1.5)\n", v);
        return 0;
    }
    if (a->n_bias == MAX_BIAS) {
        fprintf(stderr, "nibble run: at most %d --logit-bias\n", MAX_BIAS);
        return 0;
    }
    a->bias_id[a->n_bias] = (int32_t)id;
    a->bias[a->n_bias++] = b;
    return 1;
}

/* Parse argv into a: 1 to go on, 0 when done (help printed: *rc 0), -1 on an error. */
static int parse_args(int argc, char **argv, struct run_args *a, int *rc)
{
    const char *cmd = "run";
    const struct arg_opt opts[] = {
        OPTS_MODEL(&a->model_path, &a->path_name, &a->priority, &a->no_cache),
        OPT_STR("-p|--prompt", &a->prompt_text),
        OPT_STR("-f|--file", &a->prompt_file),
        OPT_INT("-n|--predict|--n-predict", &a->n_predict, -1, 1 << 24),
        OPTS_CONTEXT(&a->cp, 1),
        OPTS_SHIFT(&a->so),
        OPTS_SAMPLER(&a->sp),
        OPT_FLAG("--no-special", &a->no_special),
        OPT_FLAG("--ignore-eos", &a->ignore_eos),
        OPT_FLAG("--print-ids", &a->print_ids),
        OPT_INT("--lookup", &a->lookup, 0, 64),
        OPTS_GRAMMAR(&a->gram),
        OPT_STR("-sys|--system-prompt", &a->system),
        OPT_STR("--chat-template", &a->chat_template),
        OPT_FLAG("-no-cnv|--no-conversation", &a->no_cnv),
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
        } else if (!strcmp(arg, "--ids")) {
            free(a->ids);
            a->ids = NULL;
            if (!(v = arg_value(cmd, argc, argv, &i)) ||
                !arg_ids(cmd, arg, v, &a->ids, &a->n_ids))
                return -1;
        } else if (!strcmp(arg, "-l") || !strcmp(arg, "--logit-bias")) {
            if (!(v = arg_value(cmd, argc, argv, &i)) || !parse_bias(a, v)) return -1;
        } else if (!strcmp(arg, "--stop") || !strcmp(arg, "-r") ||
                   !strcmp(arg, "--reverse-prompt")) {
            if (!(v = arg_value(cmd, argc, argv, &i))) return -1;
            if (a->n_stops == MAX_STOPS) {
                fprintf(stderr, "nibble run: at most %d --stop strings\n", MAX_STOPS);
                return -1;
            }
            a->stops[a->n_stops++] = v;
        } else {
            arg_unknown_among(cmd, arg, "--ids|-l|--logit-bias|--stop|-r|--reverse-prompt");
            return -1;
        }
    }
    if (!a->model_path) {
        if (access(DEFAULT_MODEL, R_OK) != 0) {
            fprintf(stderr, "nibble run: no model given and the default model " DEFAULT_MODEL
                            " is not here.\nPoint it at a model: nibble run -m FILE.gguf "
                            "--ids 1,2,3 (or set NIBBLE_MODEL)\n");
            return -1;
        }
        a->model_path = DEFAULT_MODEL;
    }
    if ((a->system || a->chat_template) && a->ids) {
        fprintf(stderr, "nibble run: %s renders a text prompt: not with --ids\n",
                a->system ? "-sys" : "--chat-template");
        return -1;
    }
    if (app_grammar_flag(&a->gram) && a->ignore_eos) {
        fprintf(stderr, "nibble run: %s ends the output at its end-of-generation "
                        "token: drop --ignore-eos\n", app_grammar_flag(&a->gram));
        return -1;
    }
    return 1;
}

/* -sys, --chat-template: the prompt as a user turn after the system message, rendered with
 * the chat template, the assistant's header appended, into *text (malloc'd): 1; 0 after
 * saying why. */
static int chat_prompt(const struct run_args *a, const struct nb_tokenizer *tok,
                       const char *user, char **text)
{
    struct nb_chat_msg msgs[2];
    int n = 0;
    if (a->system) msgs[n++] = (struct nb_chat_msg){"system", a->system};
    msgs[n++] = (struct nb_chat_msg){"user", user};
    if (app_chat_apply(tok, a->chat_template, msgs, n, 1, text) == NB_OK) return 1;
    const char *kind, *note = NULL; /* chat's and serve's rule: a built-in family, said once */
    if (!a->chat_template && nb_chat_template_choose(tok, NULL, &kind, &note) == NB_OK &&
        app_chat_apply(tok, kind, msgs, n, 1, text) == NB_OK) {
        if (note) fprintf(stderr, "nibble run: %s\n", note);
        return 1;
    }
    fprintf(stderr, "nibble run: %s: %s%s\n",
            a->chat_template ? "--chat-template" : "-sys renders the model's chat template",
            nb_last_error(), a->chat_template ? "" : " (name one with --chat-template NAME)");
    return 0;
}

/* The tokenizer (the source's: a cache entry embeds the same one) when a text prompt, text
 * output or a schema needs it, and the prompt's ids in a->ids: 1; 0 when said; -1 on a
 * library failure. */
static int prompt_ids(struct run_args *a, const struct nb_model *model, const char *text,
                      struct nb_tokenizer **tok)
{
    const int constrained = app_grammar_flag(&a->gram) != NULL;
    if (!a->ids || !a->print_ids || constrained) {
        if (nb_tokenizer_from_model(tok, model) != NB_OK) {
            if (!a->ids || constrained) return -1;
            fprintf(stderr, "nibble run: no tokenizer (%s): printing ids\n", nb_last_error());
        }
    }
    char *chat = NULL; /* a rendered template holds its special tokens as text */
    if (!a->ids && (a->system || a->chat_template) && !chat_prompt(a, *tok, text, &chat)) return 0;
    if (!a->ids && app_tokenize(*tok, chat ? chat : text, strlen(chat ? chat : text), !chat,
                                chat || !a->no_special, &a->ids, &a->n_ids) != NB_OK) {
        free(chat);
        return -1;
    }
    free(chat);
    if (a->n_ids == 0) {
        fprintf(stderr, "nibble run: the prompt is empty after tokenization\n");
        return 0;
    }
    return 1;
}

/* The statistics of a run, on stderr. */
static void report(const struct run_args *a, const struct nb_gen_stats *gs,
                   const struct out_state *out, int n_keep, double t_start, double t_loaded,
                   double t_ready)
{
    app_note("run", "start to first token %.3f s (load %.3f s, context %.3f s, "
                    "prefill %.3f s)", t_ready - t_start + gs->t_prompt_s, t_loaded - t_start,
            t_ready - t_loaded, gs->t_prompt_s);
    app_note("run", "prompt %d tokens in %.3f s (%.1f tok/s); generated %d tokens, "
                    "%d decode steps in %.3f s (%.1f tok/s)%s",
            gs->n_prompt, gs->t_prompt_s, gs->t_prompt_s > 0 ? gs->n_prompt / gs->t_prompt_s : 0.0,
            gs->n_gen, gs->n_decode, gs->t_gen_s, gs->t_gen_s > 0 ? gs->n_decode / gs->t_gen_s : 0.0,
            gs->stopped_by == NB_STOPPED_EOG || out->stopped == 1 ? ", stopped at end-of-generation token"
            : out->stopped == 2                     ? ", stopped at a stop string"
                                                    : "");
    if (a->lookup > 0)
        app_note("run", "prompt lookup: %d draft tokens verified, %d accepted (%.1f "
                        "tokens a decode step)", gs->n_drafted, gs->n_accepted,
                gs->n_decode > 0 ? (double)gs->n_gen / (gs->n_decode + 1) : 0.0);
    if (gs->n_shifts)
        app_note("run", "the context of %d tokens was full %d times: kept the first "
                        "%d, dropped %d tokens in all, ran %d again in %.3f s", a->cp.n_ctx,
                gs->n_shifts, n_keep, gs->n_dropped, gs->n_rerun, gs->t_shift_s);
    /* the user asked for it: the text so far is the answer, not an error */
    if (gs->stopped_by == NB_STOPPED_CONTEXT)
        fprintf(stderr, "[context of %d tokens full: stopped; a larger -c, or context shift "
                        "(no --no-shift), goes on]\n", a->cp.n_ctx);
}

/* -cnv, -i (llama-cli's conversation mode): nibble chat with run's options, -sys (else -p,
 * as llama-cli reads it there) its --system; -r means nothing there (a turn ends at its
 * end-of-turn token). Chat's exit status, or -1 when no such option was given. */
static int conversation(int argc, char **argv)
{
    static const char conv[] = "-cnv|--conversation|-i|--interactive|-if|--interactive-first";
    int found = 0, has_sys = 0, rc = 1;
    for (int i = 1; i < argc; i++) {
        found |= arg_one_of(conv, argv[i]);
        has_sys |= arg_one_of("-sys|--system-prompt", argv[i]);
    }
    char **v = found ? malloc((size_t)(argc + 1) * sizeof *v) : NULL;
    if (!v) return found ? 1 : -1;
    int n = 0;
    v[n++] = "chat";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int sys = arg_one_of("-sys|--system-prompt", a), p = arg_one_of("-p|--prompt", a);
        if (arg_one_of(conv, a)) continue;
        if ((sys || p) && i + 1 < argc) {
            if (p && has_sys) {
                fprintf(stderr, "nibble run: -cnv with -sys: the messages come from standard "
                                "input (nibble chat), not -p\n");
                goto done;
            }
            v[n++] = "--system";
            v[n++] = argv[++i];
        } else if (arg_one_of("-r|--reverse-prompt|--stop", a) && i + 1 < argc) {
            app_note("run", "%s %s: ignored in a conversation (a turn ends at its end-of-turn "
                            "token)", a, argv[++i]);
        } else {
            v[n++] = argv[i];
        }
    }
    v[n] = NULL;
    app_note("run", "-cnv, -i: a conversation: nibble chat");
    rc = cmd_chat(n, v);
done:
    free(v);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    const char *cmd = "run";
    char *prompt_owned = NULL;
    char loaded[4096];
    int rc = 1;
    struct run_args a = {.n_predict = 128, .so = {.keep = 0}, .cp = nb_ctx_default_params(),
                         .sp = nb_sampler_default_params(), .model_path = getenv("NIBBLE_MODEL")};
    struct nb_sequence *seq = NULL;
    struct nb_tokenizer *tok = NULL;
    struct out_state out = {0};
    struct nb_model *model = NULL;
    struct nb_ctx *ctx = NULL;
    struct nb_sampler *sampler = NULL;
    struct nb_grammar *grammar = NULL;
    int conv = conversation(argc, argv);
    if (conv >= 0) return conv;
    if (parse_args(argc, argv, &a, &rc) <= 0) goto done;
    struct nb_ctx_params cp = a.cp;
    int32_t *ids = a.ids;
    int n_ids = a.n_ids;
    const char *prompt_text = a.prompt_text;
    out.print_ids = a.print_ids;
    /* -f FILE, and "-" (for -p or -f): the prompt from a file or standard input */
    if (a.prompt_file || (prompt_text && !strcmp(prompt_text, "-"))) {
        const char *from = a.prompt_file ? a.prompt_file : "-";
        if (!(prompt_owned = read_prompt(from))) goto done;
        prompt_text = prompt_owned;
    }
    if (!ids && !prompt_text) {
        fprintf(stderr, "nibble run: give a prompt with -p TEXT or --ids 1,2,3\n");
        goto done;
    }

    double t_start = app_time_s();
    if (!app_open_model(cmd, a.model_path, a.path_name, a.priority, cp.n_threads, !a.no_cache,
                        &model, loaded, sizeof loaded))
        goto done;
    int got = prompt_ids(&a, model, prompt_text, &tok);
    if (got <= 0) {
        if (got < 0) goto fail;
        goto done;
    }
    ids = a.ids;
    n_ids = a.n_ids;
    out.tok = tok;
    out.ignore_eos = a.ignore_eos;
    struct nb_text_out_params tp = {sizeof tp, 0, a.ignore_eos, a.stops, a.n_stops};
    if (tok && nb_text_out_init(&out.text, tok, &tp) != NB_OK) goto fail;
    double t_loaded = app_time_s();
    struct nb_model_info info;
    nb_model_get_info(model, &info);
    /* The context is fixed here (the library's default when -c is not given) so that the
     * prompt and --keep can be checked against it and shifts planned. */
    cp.n_ctx = a.cp.n_ctx = app_ctx_size(&info, cp.n_ctx);
    if (!app_context_fits(cmd, model, &cp)) goto done;
    if (n_ids > cp.n_ctx) {
        fprintf(stderr, "nibble run: the prompt is %d tokens, longer than the context of %d "
                        "(-c): give a larger -c or a shorter prompt\n", n_ids, cp.n_ctx);
        goto done;
    }
    int n_keep;
    if (!app_keep_resolve(cmd, &a.so, "the prompt", ids, n_ids, info.bos_id, cp.n_ctx, &n_keep))
        goto done;
    if (nb_ctx_init(&ctx, model, &cp) != NB_OK) goto fail;
    struct nb_sequence_params qp = nb_sequence_default_params();
    qp.n_ctx = cp.n_ctx;
    qp.shift = !a.so.no_shift;
    qp.n_keep = n_keep;
    qp.max_draft = a.lookup; /* drafts verified: the same text, shifts included */
    if (nb_sequence_init(&seq, ctx, &qp) != NB_OK) goto fail;
    if (nb_sampler_init(&sampler, &a.sp, info.n_vocab) != NB_OK) goto fail;
    if (nb_sampler_set_logit_bias(sampler, a.bias_id, a.bias, a.n_bias) != NB_OK) goto fail;
    if (!app_grammar_open(cmd, &a.gram, tok, info.n_vocab, &grammar)) goto done;
    if (nb_sampler_set_grammar(sampler, grammar) != NB_OK) goto fail;
    app_note(cmd, "%s: %s (%s), %.2f M params, %d layers, vocab %d",
            a.model_path, info.arch, info.source_kind, (double)info.n_params / 1e6,
            info.n_layers, info.n_vocab);

    double t_ready = app_time_s();
    struct nb_gen_stats gs;
    if (nb_sequence_generate(seq, sampler, ids, n_ids, a.n_predict, !a.ignore_eos, on_token,
                             &out, &gs) != NB_OK)
        goto fail;
    if (tok && !out.print_ids) { /* what the detokenizer and the stop matcher still hold */
        const char *text;
        size_t len;
        nb_text_out_flush(out.text, &text, &len);
        fwrite(text, 1, len, stdout);
    }
    printf("\n");
    fflush(stdout);
    report(&a, &gs, &out, n_keep, t_start, t_loaded, t_ready);
    if (grammar && !nb_sampler_grammar_complete(sampler))
        fprintf(stderr, "nibble run: the output ended before it completed the %s "
                        "(%s): it is cut\n", a.gram.schema ? "--json-schema object" : "grammar",
                out.stopped == 2 ? "a --stop string"
                        : gs.stopped_by == NB_STOPPED_CONTEXT ? "the context is full"
                                                              : "-n is too small for it");
    rc = 0;
    goto done;
fail:
    app_error(cmd, "%s", nb_last_error());
    rc = 1;
done:
    nb_text_out_free(out.text);
    nb_tokenizer_free(tok);
    nb_sampler_free(sampler);
    nb_grammar_free(grammar);
    nb_sequence_free(seq);
    nb_ctx_free(ctx);
    nb_model_free(model);
    free(a.ids);
    free(prompt_owned);
    return rc;
}
