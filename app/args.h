/* app/args.h — small helpers for parsing command-line values with clear errors. */
#ifndef NB_APP_ARGS_H
#define NB_APP_ARGS_H

#include <stdint.h>
#include <stdio.h>

/* Each prints "nibble CMD: OPTION: what is wrong" to stderr and returns 0 on a bad
 * value, 1 on success. */
int arg_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out);
int arg_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out);
int arg_u64(const char *cmd, const char *opt, const char *val, uint64_t *out);
/* Comma- or space-separated token ids; *out is malloc'd. */
int arg_ids(const char *cmd, const char *opt, const char *val, int32_t **out, int *n);
/* The value of an option that takes one: argv[++*i], or an error if missing. */
const char *arg_value(const char *cmd, int argc, char **argv, int *i);

/* A command's options as a table, so each command writes only its special cases:
 *
 *   const struct arg_opt opts[] = {
 *       OPT_STR("-m|--model", &model),
 *       OPT_INT("-t|--threads", &n_threads, 1, 1024),
 *       OPT_FLAG("--ignore-eos", &ignore_eos),
 *       OPT_END};
 *   for (int i = 1; i < argc; i++) {
 *       int r = arg_table(cmd, opts, argc, argv, &i);
 *       if (r < 0) return 1;
 *       if (r > 0) continue;
 *       ... the command's own options, then arg_unknown(cmd, argv[i]) ...
 *   }
 */
enum arg_kind {
    ARG_STR,    /* const char **: the value as given */
    ARG_INT,    /* int *: a whole number in [lo, hi] */
    ARG_FLOAT,  /* float *: a number in [lo, hi] */
    ARG_U64,    /* uint64_t *: a non-negative whole number */
    ARG_FLAG,   /* int *: set to 1, no value */
    ARG_CHOICE, /* const char **: one of the '|'-separated words in `choices` */
    ARG_ENUM,   /* int *: the index of the word given among `choices` (0 for the first) */
    ARG_INTS,   /* struct arg_ints *: comma-separated whole numbers in [lo, hi], appended
                   (llama-bench's lists: "-d 0,512,4096"; a repeated option adds more) */
    ARG_NOTE    /* no dst: accepted and ignored, `choices` the note printed the first time
                   (llama.cpp's options that mean nothing here); lo: 0 no value, 1 a value,
                   2 an optional value (the next word when it does not start with '-') */
};

/* The values of an ARG_INTS option, in the caller's storage: v[0..n), at most cap. */
struct arg_ints {
    int *v;
    int n, cap;
};

struct arg_opt {
    const char *names; /* the spellings, '|'-separated: "-t|--threads"; NULL ends a table */
    enum arg_kind kind;
    void *dst;
    double lo, hi;       /* ARG_INT, ARG_FLOAT */
    const char *choices; /* ARG_CHOICE */
};

#define OPT_STR(names, dst)            {(names), ARG_STR, (dst), 0, 0, NULL}
#define OPT_INT(names, dst, lo, hi)    {(names), ARG_INT, (dst), (lo), (hi), NULL}
#define OPT_FLOAT(names, dst, lo, hi)  {(names), ARG_FLOAT, (dst), (lo), (hi), NULL}
#define OPT_U64(names, dst)            {(names), ARG_U64, (dst), 0, 0, NULL}
#define OPT_FLAG(names, dst)           {(names), ARG_FLAG, (dst), 0, 0, NULL}
#define OPT_CHOICE(names, dst, words)  {(names), ARG_CHOICE, (dst), 0, 0, (words)}
#define OPT_ENUM(names, dst, words)    {(names), ARG_ENUM, (dst), 0, 0, (words)}
#define OPT_INTS(names, dst, lo, hi)   {(names), ARG_INTS, (dst), (lo), (hi), NULL}
#define OPT_NOTE(names, val, note)    {(names), ARG_NOTE, NULL, (val), 0, (note)}
#define OPT_END                        {NULL, ARG_STR, NULL, 0, 0, NULL}

/* The options every command that opens and runs a model shares, with llama.cpp's
 * spellings as aliases (one place, so run, chat, bench and eval cannot drift apart).
 * OPTS_WEIGHTS is how a model is opened (app_open_model); OPTS_MODEL adds one -m. */
#define OPTS_WEIGHTS(path, priority, no_cache)                                             \
    OPT_STR("--path", (path)), OPT_STR("--priority", (priority)),                           \
        OPT_FLAG("--no-cache", (no_cache)), OPTS_LLAMA_LOAD
/* llama.cpp's loading and GPU options, accepted so its command lines run unchanged: each
 * says once on stderr that it changes nothing here (docs: README "llama.cpp options"). */
#define APP_NOTE_GPU "ignored: nibble runs on the CPU"
#define OPTS_LLAMA_LOAD                                                                     \
    OPT_NOTE("-ngl|--n-gpu-layers|--gpu-layers|-ngld|--n-gpu-layers-draft|-mg|--main-gpu|"  \
             "-sm|--split-mode|-ts|--tensor-split|-dev|--device|-ot|--override-tensor",     \
             1, APP_NOTE_GPU),                                                              \
        OPT_NOTE("-nkvo|--no-kv-offload|--no-op-offload", 0, APP_NOTE_GPU),                 \
        OPT_NOTE("--no-mmap|--mlock", 0,                                                    \
                 "ignored: nibble maps model files read-only (pages it never touches cost "  \
                 "no memory) and cannot read them otherwise"),                              \
        OPT_NOTE("-fa|--flash-attn", 2,                                                     \
                 "ignored: nibble's attention kernel is fused already (one pass over the "   \
                 "KV cache, nothing to switch)")
#define OPTS_MODEL(model, path, priority, no_cache)                                        \
    OPT_STR("-m|--model", (model)), OPTS_WEIGHTS(path, priority, no_cache)
/* What the output keeps to (app_grammar_open): a JSON Schema, or a GBNF grammar as text or
 * in a file; one at most. */
struct app_grammar_opts {
    const char *schema, *gbnf, *gbnf_file;
};
#define OPTS_GRAMMAR(g)                                                                     \
    OPT_STR("-j|--json-schema|-jf|--json-schema-file", &(g)->schema),                       \
        OPT_STR("--grammar", &(g)->gbnf), OPT_STR("--grammar-file", &(g)->gbnf_file)
#define OPTS_SAMPLER(sp)                                                                    \
    OPT_FLOAT("--temp|--temperature", &(sp)->temperature, 0, 100), OPT_INT("--top-k", &(sp)->top_k, 0, 1 << 24), \
        OPT_FLOAT("--top-p", &(sp)->top_p, 0, 1), OPT_FLOAT("--min-p", &(sp)->min_p, 0, 1),   \
        OPT_FLOAT("--repeat-penalty", &(sp)->repeat_penalty, 0.01, 100),                      \
        OPT_INT("--repeat-last-n", &(sp)->repeat_last_n, 0, 1 << 20),                         \
        OPT_FLOAT("--presence-penalty", &(sp)->presence_penalty, -2, 2),                      \
        OPT_FLOAT("--frequency-penalty", &(sp)->frequency_penalty, -2, 2),                    \
        OPT_U64("-s|--seed", &(sp)->seed)
#define OPTS_CONTEXT(cp, min_ctx)                                                           \
    OPT_INT("-c|--ctx|--ctx-size", &(cp)->n_ctx, (min_ctx), 1 << 24),                        \
        OPT_INT("-t|--threads", &(cp)->n_threads, 1, 1024),                                   \
        OPT_INT("-b|--batch|--batch-size", &(cp)->n_batch, 1, 65536),                        \
        OPT_ENUM("--kv-type|-ctk|--cache-type-k|-ctv|--cache-type-v", &(cp)->kv_type,        \
                 "default|f32|f16|bf16|q8_0") /* K and V share one type: the last given */

/* argv[*i] against the table: 1 when it is one of its options (the value parsed into
 * dst and *i moved past it; "--name=value" works too, and '_' for '-' in a long name,
 * "--ctx_size", as llama.cpp takes it; a short option and its number are two words,
 * "-n 16": llama.cpp's parser takes no "-n16" either), 0 when it is none of them, -1
 * after printing what is wrong with a missing or bad value. */
int arg_table(const char *cmd, const struct arg_opt *opts, int argc, char **argv, int *i);
/* The whole loop for a command whose options are all in the table (and -h/--help):
 * 1 to go on, 0 when the usage was printed to stdout, -1 after an error (printed). */
int arg_parse(const char *cmd, const struct arg_opt *opts, int argc, char **argv,
              void (*usage)(FILE *));
/* 1 if `a` is one of the '|'-separated words of `list`. */
int arg_one_of(const char *list, const char *a);
/* 1 for "-h" and "--help". */
int arg_is_help(const char *a);
/* Prints "nibble CMD: unknown option 'A' (see nibble CMD --help)", with "did you mean
 * 'B'?" when an option of the table last given to arg_table (or the log options, log.h)
 * is near it; returns 0. arg_unknown_among also looks at `more`: the '|'-separated names
 * a command parses itself. */
int arg_unknown(const char *cmd, const char *a);
int arg_unknown_among(const char *cmd, const char *a, const char *more);
/* The name in `names` ('|'-separated lists, NULL-ended) nearest to `a`: at most 1 edit
 * away for a short word, 2 for a longer one (a swap of two letters is one), or one that
 * starts with `a` (4 characters at least); NULL when none is. len: the chars of the
 * name (not '\0'-ended). */
const char *arg_nearest(const char *a, const char *const *names, int *len);

#endif
