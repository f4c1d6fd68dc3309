/* nibble tokenize / nibble detokenize — the tokenizer from the command line.
 *
 * Contract used by scripts:
 *   nibble tokenize (-m MODEL | --tokenizer PATH) [--no-special] [--pieces] [--] TEXT
 * prints the ids the model would see (BOS first when the tokenizer's own config adds
 * it), separated by spaces, on one line of stdout. Errors go to stderr with a
 * non-zero exit status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/text.h"
#include "nibble.h"

/* 1 when s is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
static int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0) return 0;
        unsigned cp = n ? *p & (0x3Fu >> n) : *p;
        for (int k = 1; k <= n; k++) {
            if ((p[k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (p[k] & 0x3Fu);
        }
        static const unsigned min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        p += n + 1;
    }
    return 1;
}

static void usage_tokenize(FILE *f)
{
    fprintf(f,
            "usage: nibble tokenize (-m MODEL | --tokenizer PATH) [options] [--] TEXT\n"
            "\n"
            "Prints the token ids of TEXT as the model sees them (BOS first when the\n"
            "tokenizer's config adds it), separated by spaces, on one line.\n"
            "\n"
            "  -m, --model PATH      a GGUF file, a llama2.c .bin (its .tok.bin beside it), a\n"
            "                        model directory or a .nib (default: $NIBBLE_MODEL)\n"
            "      --tokenizer PATH  a tokenizer.json, tokenizer.model, llama2.c tokenizer .bin,\n"
            "                        a .nib, or a directory with tokenizer.json /\n"
            "                        tokenizer.model (and tokenizer_config.json)\n"
            "      --no-special      special tokens written in TEXT are plain text\n"
            "      --no-add-special  no BOS/EOS around the text\n"
            "      --pieces          print the vocabulary pieces instead of ids\n"
            "      --json            [{\"id\": N, \"piece\": \"...\"}] (\"piece_bytes\" for a piece\n"
            "                        that is not UTF-8)\n"
            "  -p, --prompt TEXT     the text as an option (\"-\": read it from standard input)\n"
            "  -f, --file FILE       tokenize the contents of FILE instead of TEXT\n"
            "      --bench FILE      time tokenizing FILE (best of 5), report MB/s on stderr\n");
}

static void usage_detokenize(FILE *f)
{
    fprintf(f, "usage: nibble detokenize (-m MODEL | --tokenizer PATH) [--special] [--] IDS...\n"
               "\n"
               "Prints the text of token ids (given as arguments, separated by spaces or\n"
               "commas) exactly, without a newline. Special tokens (BOS, <|im_end|>, ...) are\n"
               "left out unless --special.\n");
}

static struct nb_tokenizer *load(const char *cmd, const char *model, const char *tokpath)
{
    struct nb_tokenizer *tok = NULL;
    const char *p = tokpath ? tokpath : model;
    if (!p) {
        fprintf(stderr, "nibble %s: give -m MODEL or --tokenizer PATH\n", cmd);
        return NULL;
    }
    /* a model (a .nib holds its tokenizer) or a tokenizer file, a llama2.c .bin too */
    enum nb_status st = nb_tokenizer_load(&tok, p);
    if (st) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        return NULL;
    }
    return tok;
}

/* A piece, with \ and control bytes escaped so that each piece stays one word. */
static void print_piece(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') {
            fputs("\\\\", stdout);
        } else if (*p == '\n') {
            fputs("\\n", stdout);
        } else if (*p == '\t') {
            fputs("\\t", stdout);
        } else if (*p == '\r') {
            fputs("\\r", stdout);
        } else if (*p < 0x20 || *p == ' ' || *p == 0x7f) {
            printf("\\x%02x", *p);
        } else {
            putchar(*p);
        }
    }
}

static int bench(struct nb_tokenizer *tok, const char *file)
{
    char *buf = NULL;
    size_t n = 0;
    if (!app_read_all("tokenize", "--bench", file, (size_t)1 << 30, &buf, &n)) return 1;
    double best = 1e30;
    int n_ids = 0;
    for (int rep = 0; rep < 5; rep++) {
        int32_t *ids;
        double t0 = app_time_s();
        if (app_tokenize(tok, buf, n, 1, 1, &ids, &n_ids)) {
            fprintf(stderr, "nibble tokenize: %s\n", nb_last_error());
            free(buf);
            return 1;
        }
        double dt = app_time_s() - t0;
        free(ids);
        if (dt < best) best = dt;
    }
    struct nb_tokenizer_info ti = {.size = sizeof ti};
    nb_tokenizer_get_info(tok, &ti);
    fprintf(stderr, "tokenize %s: %zu bytes -> %d tokens, best of 5: %.3f s, %.1f MB/s (%s)\n",
            file, n, n_ids, best, (double)n / 1e6 / best, ti.desc);
    free(buf);
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *cmd = "tokenize", *model = getenv("NIBBLE_MODEL"), *tokpath = NULL;
    const char *text = NULL, *file = NULL, *bench_file = NULL, *prompt = NULL;
    int parse_special = 1, add_special = 1, pieces = 0, rc = 1, n_ids = 0;
    int32_t *ids = NULL;
    char *fbuf = NULL;
    size_t len = 0;
    struct nb_tokenizer *tok = NULL;
    int no_special = 0, no_add_special = 0, json = 0;
    const struct arg_opt opts[] = {
        OPT_STR("-m|--model", &model),
        OPT_STR("--tokenizer", &tokpath),
        OPT_STR("-f|--file", &file),
        OPT_STR("-p|--prompt", &prompt),
        OPT_STR("--bench", &bench_file),
        OPT_FLAG("--no-special", &no_special),
        OPT_FLAG("--no-add-special", &no_add_special),
        OPT_FLAG("--pieces", &pieces),
        OPT_FLAG("--json", &json),
        OPT_END};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (arg_is_help(a)) {
            usage_tokenize(stdout);
            return 0;
        } else if (!strcmp(a, "--") || a[0] != '-' || !a[1]) {
            int j = strcmp(a, "--") ? i : i + 1;
            if (j != argc - 1 || text) {
                fprintf(stderr, "nibble %s: give TEXT as one argument (quote it)\n", cmd);
                return 2;
            }
            text = argv[j];
            break;
        } else {
            arg_unknown(cmd, a);
            return 2;
        }
    }
    parse_special = !no_special;
    add_special = !no_add_special;
    if (prompt && (text || file)) {
        fprintf(stderr, "nibble %s: give the text once: -p TEXT, -f FILE or TEXT\n", cmd);
        return 2;
    }
    if (prompt && strcmp(prompt, "-")) text = prompt;
    if (!text && !file && !prompt && !bench_file) {
        fprintf(stderr, "nibble %s: no TEXT\n", cmd);
        usage_tokenize(stderr);
        return 2;
    }
    if (!(tok = load(cmd, model, tokpath))) goto done;
    if (bench_file) {
        rc = bench(tok, bench_file);
        goto done;
    }
    if (file || (prompt && !strcmp(prompt, "-"))) { /* -f FILE, and -p -: standard input */
        if (!app_read_all(cmd, file ? "-f" : "-p", file ? file : "-", (size_t)1 << 30, &fbuf,
                          &len))
            goto done;
        text = fbuf;
    } else {
        len = strlen(text);
    }
    if (app_tokenize(tok, text, len, add_special, parse_special, &ids, &n_ids)) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    if (json) { /* [{"id": N, "piece": "..."}] through cJSON: any piece is valid JSON */
        cJSON *a = cJSON_CreateArray();
        for (int i = 0; i < n_ids; i++) {
            cJSON *e = cJSON_CreateObject();
            const char *p = nb_token_vocab_entry(tok, ids[i]);
            cJSON_AddNumberToObject(e, "id", ids[i]);
            if (utf8_valid(p ? p : "")) {
                cJSON_AddStringToObject(e, "piece", p ? p : "");
            } else { /* a piece of raw bytes: JSON strings must be UTF-8 */
                cJSON *b = cJSON_AddArrayToObject(e, "piece_bytes");
                for (const unsigned char *q = (const unsigned char *)p; *q; q++)
                    cJSON_AddItemToArray(b, cJSON_CreateNumber(*q));
            }
            cJSON_AddItemToArray(a, e);
        }
        char *js = cJSON_PrintUnformatted(a);
        cJSON_Delete(a);
        if (js) printf("%s\n", js);
        free(js);
        rc = js && !fflush(stdout) ? 0 : 1;
        goto done;
    }
    for (int i = 0; i < n_ids; i++) {
        if (i) putchar(' ');
        if (pieces) {
            print_piece(nb_token_vocab_entry(tok, ids[i]));
        } else {
            printf("%d", ids[i]);
        }
    }
    putchar('\n');
    rc = fflush(stdout) ? 1 : 0;
done:
    free(ids);
    free(fbuf);
    nb_tokenizer_free(tok);
    return rc;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *cmd = "detokenize", *model = getenv("NIBBLE_MODEL"), *tokpath = NULL;
    int rc = 1, n_ids = 0;
    int32_t *ids = NULL;
    char *text = NULL;
    size_t len = 0;
    struct nb_tokenizer *tok = NULL;
    int i = 1;
    int special = 0;
    const struct arg_opt opts[] = {
        OPT_STR("-m|--model", &model),
        OPT_STR("--tokenizer", &tokpath),
        OPT_FLAG("--special", &special),
        OPT_END};
    for (; i < argc; i++) {
        const char *a = argv[i];
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (arg_is_help(a)) {
            usage_detokenize(stdout);
            return 0;
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (a[0] == '-') {
            arg_unknown(cmd, a);
            return 2;
        } else {
            break;
        }
    }
    for (; i < argc; i++) {
        int32_t *more = NULL;
        int n_more = 0;
        if (!arg_ids(cmd, "IDS", argv[i], &more, &n_more)) goto done;
        int32_t *all = realloc(ids, (size_t)(n_ids + n_more) * sizeof *ids);
        if (!all) {
            free(more);
            fprintf(stderr, "nibble %s: out of memory\n", cmd);
            goto done;
        }
        ids = all;
        memcpy(ids + n_ids, more, (size_t)n_more * sizeof *ids);
        n_ids += n_more;
        free(more);
    }
    if (!(tok = load(cmd, model, tokpath))) goto done;
    if (app_detokenize(tok, ids, n_ids, special, &text, &len)) {
        fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        goto done;
    }
    fwrite(text, 1, len, stdout);
    rc = fflush(stdout) ? 1 : 0;
done:
    free(ids);
    free(text);
    nb_tokenizer_free(tok);
    return rc;
}
