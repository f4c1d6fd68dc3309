/* nibble eval — fidelity of a test build against a reference build of the same model:
 * greedy reproductions and first divergence, teacher-forced top-1 agreement and mean
 * KL(ref || test), perplexity of each on a text file (nibble.h's evaluation calls). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/text.h"
#include "nibble.h"
#include "nibble_eval.h"

#define MAX_PROMPTS 4096

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble eval --ref MODEL --test MODEL --prompts FILE [-n N] [--text FILE]\n"
               "                   [-c N] [-t N] [-b N] [--path P] [-o table|json]\n"
               "\n"
               "  --path P        open the test model as run would: source (default: the\n"
               "                  weights as stored), auto, w4a8, ... (--priority, --no-cache)\n"
               "  -c, --ctx-size N, -t, --threads N, -b, --batch-size N   as for run\n"
               "  --kv-type T     the test's KV cache type (f16 default; the reference: f32)\n"
               "  --prompts FILE  one prompt per line: text (tokenized with the reference's\n"
               "                  tokenizer, BOS as its config says) or 'ids: 1,2,3'\n"
               "  -n N            greedy tokens per prompt (default 32)\n"
               "  --text FILE     also report the perplexity of both builds on this text\n"
               "  --ppl-chunks N  and KL(ref || test) on it as llama-perplexity\n"
               "                  --kl-divergence measures it: chunks of N tokens, BOS first,\n"
               "                  the second half of each scored (mean, median, p99, max KL,\n"
               "                  same top-1, the perplexity of both on those tokens)\n"
               "\n"
               "Where a greedy continuation leaves the reference's, the report gives how near a\n"
               "tie the reference was there: its log-probability gap (nats) between its token\n"
               "and the test's (-o json: \"cases\", each prompt's first_divergence and ref_gap).\n");
}

/* A context of cp->n_ctx tokens (0: what the prompts need, at least min(512, the model's
 * trained context)). */
static int context(struct nb_model *m, const struct nb_ctx_params *cp, int need, int is_ref,
                   struct nb_ctx **c)
{
    struct nb_ctx_params p = *cp;
    if (is_ref) p.kv_type = NB_KV_TYPE_F32; /* --kv-type is the test's: the reference is exact */
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    if (!p.n_ctx) {
        p.n_ctx = info.n_ctx_train < 512 ? info.n_ctx_train : 512;
        if (need > p.n_ctx) p.n_ctx = need;
    }
    return nb_ctx_init(c, m, &p) == NB_OK;
}

/* What the command line asks for. */
struct eval_args {
    const char *ref_path, *test_path, *prompts_path, *text_path, *fmt, *path_name, *priority;
    int n_gen, no_cache, chunk_ctx;
    struct nb_ctx_params cp;
};

/* The prompts and the text, tokenized, and the two builds: what eval holds. */
struct eval_data {
    int32_t *prompts[MAX_PROMPTS];
    int lens[MAX_PROMPTS];
    int n_prompts, max_len, n_text;
    char *file, *text;
    int32_t *text_ids;
    struct nb_tokenizer *tok;
    struct nb_model *rm, *tm;
    struct nb_ctx *rc_, *tc;
};

/* What eval measured. */
struct eval_result {
    struct nb_fidelity f;
    int first_div[MAX_PROMPTS]; /* per prompt: nb_eval_fidelity_cases */
    float ref_gap[MAX_PROMPTS];
    double ppl_ref, ppl_test;
    struct nb_chunk_eval ch;
};

/* Parse argv into a: 1 to go on, 0 when done (help printed: *rc 0), -1 on an error. */
static int parse_args(int argc, char **argv, struct eval_args *a, int *rc)
{
    const struct arg_opt opts[] = {
        OPT_STR("--ref", &a->ref_path),
        OPT_STR("--test", &a->test_path),
        OPT_STR("--prompts", &a->prompts_path),
        OPT_STR("--text", &a->text_path),
        OPT_INT("--ppl-chunks", &a->chunk_ctx, 4, 1 << 20),
        OPT_INT("-n|--predict|--n-predict", &a->n_gen, 1, 4096),
        OPTS_WEIGHTS(&a->path_name, &a->priority, &a->no_cache),
        OPTS_CONTEXT(&a->cp, 16),
        OPT_CHOICE("-o", &a->fmt, "table|json"),
        OPT_END};
    int parsed = arg_parse("eval", opts, argc, argv, usage);
    if (parsed == 0) *rc = 0;
    if (parsed <= 0) return parsed < 0 ? -1 : 0;
    if (!a->ref_path || !a->test_path || !a->prompts_path) {
        fprintf(stderr, "nibble eval: --ref, --test and --prompts are required\n");
        return -1;
    }
    return 1;
}

/* The --prompts file, one prompt a line, into d: 1 on success, 0 on an error reported,
 * -1 on a library error (nb_last_error). */
static int read_prompts(const struct eval_args *a, struct eval_data *d)
{
    const char *cmd = "eval";
    size_t size;
    if (!app_read_all(cmd, "--prompts", a->prompts_path, 64u << 20, &d->file, &size)) return 0;
    for (char *line = d->file, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = '\0';
        if (!n) continue;
        if (d->n_prompts == MAX_PROMPTS) {
            fprintf(stderr, "nibble eval: at most %d prompts\n", MAX_PROMPTS);
            return 0;
        }
        int k = 0;
        if (!strncmp(line, "ids:", 4)) {
            if (!arg_ids(cmd, "--prompts", line + 4, &d->prompts[d->n_prompts], &k)) return 0;
        } else {
            if (!d->tok && nb_tokenizer_load(&d->tok, a->ref_path) != NB_OK) return -1;
            if (app_tokenize(d->tok, line, n, 1, 0, &d->prompts[d->n_prompts], &k) != NB_OK)
                return -1;
        }
        d->lens[d->n_prompts++] = k;
        if (k > d->max_len) d->max_len = k;
    }
    return 1;
}

/* The prompts, then the --text file, into d: as read_prompts. */
static int read_inputs(const struct eval_args *a, struct eval_data *d)
{
    int r = read_prompts(a, d);
    if (r <= 0) return r;
    if (a->chunk_ctx && !a->text_path) {
        fprintf(stderr, "nibble eval: --ppl-chunks needs --text FILE\n");
        return 0;
    }
    if (!d->n_prompts) {
        fprintf(stderr, "nibble eval: %s holds no prompts\n", a->prompts_path);
        return 0;
    }
    if (a->text_path) {
        size_t size;
        if (!app_read_all("eval", "--text", a->text_path, 256u << 20, &d->text, &size)) return 0;
        if (!d->tok && nb_tokenizer_load(&d->tok, a->ref_path) != NB_OK) return -1;
        if (app_tokenize(d->tok, d->text, size, 1, 0, &d->text_ids, &d->n_text) != NB_OK)
            return -1;
    }
    return 1;
}

/* Open the reference and the test build and measure them into r: as read_prompts. */
static int measure(const struct eval_args *a, struct eval_data *d, struct eval_result *r)
{
    char loaded[4096];
    /* the contexts hold the longest prompt and its continuation, and a --ppl-chunks chunk */
    int need = d->max_len + a->n_gen > a->chunk_ctx ? d->max_len + a->n_gen : a->chunk_ctx;
    if (nb_model_load(&d->rm, a->ref_path) != NB_OK || !context(d->rm, &a->cp, need, 1, &d->rc_))
        return -1;
    if (!app_open_model("eval", a->test_path, a->path_name, a->priority, a->cp.n_threads,
                        !a->no_cache, &d->tm, loaded, sizeof loaded))
        return 0;
    if (!context(d->tm, &a->cp, need, 0, &d->tc)) return -1;
    struct nb_model_info ri;
    nb_model_get_info(d->rm, &ri);
    int window = a->cp.n_ctx ? a->cp.n_ctx : (ri.n_ctx_train < 512 ? ri.n_ctx_train : 512);
    if (nb_eval_fidelity_cases(d->rc_, d->tc, d->prompts, d->lens, d->n_prompts, a->n_gen, &r->f,
                               r->first_div, r->ref_gap) != NB_OK)
        return -1;
    if (d->text_ids && (nb_eval_ppl(d->rc_, d->text_ids, d->n_text, window, &r->ppl_ref) != NB_OK ||
                        nb_eval_ppl(d->tc, d->text_ids, d->n_text, window, &r->ppl_test) != NB_OK))
        return -1;
    if (a->chunk_ctx && nb_eval_chunks(d->rc_, d->tc, d->text_ids, d->n_text, a->chunk_ctx,
                                       ri.bos_id, &r->ch) != NB_OK)
        return -1;
    return 1;
}

/* The report as one JSON object on stdout: 0 (reported) when out of memory. */
static int report_json(const struct eval_args *a, const struct eval_data *d,
                       const struct eval_result *r)
{
    const struct nb_fidelity *f = &r->f;
    const struct nb_chunk_eval *ch = &r->ch;
    cJSON *o = cJSON_CreateObject(); /* cJSON: any file name gives valid JSON */
    cJSON_AddStringToObject(o, "ref", a->ref_path);
    cJSON_AddStringToObject(o, "test", a->test_path);
    cJSON_AddNumberToObject(o, "prompts", f->prompts);
    cJSON_AddNumberToObject(o, "n_gen", a->n_gen);
    cJSON_AddNumberToObject(o, "reproduced", f->reproduced);
    cJSON_AddNumberToObject(o, "mean_first_divergence", f->mean_first_divergence);
    cJSON_AddNumberToObject(o, "top1_agreement", f->top1_agreement);
    cJSON_AddNumberToObject(o, "mean_kl", f->mean_kl);
    cJSON *cases = cJSON_AddArrayToObject(o, "cases");
    for (int p = 0; cases && p < f->prompts; p++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToArray(cases, c);
        cJSON_AddNumberToObject(c, "first_divergence", r->first_div[p]);
        if (r->first_div[p] < a->n_gen) cJSON_AddNumberToObject(c, "ref_gap", r->ref_gap[p]);
        else cJSON_AddNullToObject(c, "ref_gap");
    }
    if (d->text_ids) {
        cJSON_AddNumberToObject(o, "ppl_ref", r->ppl_ref);
        cJSON_AddNumberToObject(o, "ppl_test", r->ppl_test);
        cJSON_AddNumberToObject(o, "ppl_tokens", d->n_text);
    } else {
        cJSON_AddNullToObject(o, "ppl_ref");
        cJSON_AddNullToObject(o, "ppl_test");
    }
    if (a->chunk_ctx) {
        cJSON *k = cJSON_AddObjectToObject(o, "ppl_chunks");
        cJSON_AddNumberToObject(k, "n_ctx", a->chunk_ctx);
        cJSON_AddNumberToObject(k, "chunks", ch->chunks);
        cJSON_AddNumberToObject(k, "scored", (double)ch->n_scored);
        cJSON_AddNumberToObject(k, "ppl_ref", ch->ppl_ref);
        cJSON_AddNumberToObject(k, "ppl_test", ch->ppl_test);
        cJSON_AddNumberToObject(k, "mean_kl", ch->mean_kl);
        cJSON_AddNumberToObject(k, "median_kl", ch->median_kl);
        cJSON_AddNumberToObject(k, "p99_kl", ch->p99_kl);
        cJSON_AddNumberToObject(k, "max_kl", ch->max_kl);
        cJSON_AddNumberToObject(k, "same_top1", ch->top1_agreement);
    }
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!js) {
        fprintf(stderr, "nibble eval: out of memory\n");
        return 0;
    }
    printf("%s\n", js);
    free(js);
    return 1;
}

static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return a < b ? -1 : a > b;
}

/* How near a tie the reference was where each diverging continuation left it, smallest
 * first: a gap of 0.001 nats is a coin flipped the other way, one of 1 a real error. */
static void report_gaps(const struct eval_args *a, const struct eval_result *r)
{
    float g[MAX_PROMPTS];
    int n = 0;
    for (int p = 0; p < r->f.prompts; p++)
        if (r->first_div[p] < a->n_gen) g[n++] = r->ref_gap[p];
    if (!n) return;
    qsort(g, (size_t)n, sizeof *g, cmp_float);
    printf("\nthe reference's log-probability gap where the %d diverging continuations left it "
           "(nats, smallest first):", n);
    for (int i = 0; i < n; i++) printf("%s %.4f", i ? "," : "", g[i]);
    printf("\n");
}

/* The report as Markdown tables on stdout. */
static void report_table(const struct eval_args *a, const struct eval_data *d,
                         const struct eval_result *r)
{
    const struct nb_fidelity *f = &r->f;
    const struct nb_chunk_eval *ch = &r->ch;
    printf("| ref | test | prompts | reproduced | mean first divergence | top-1 agreement | "
           "mean KL | ppl ref | ppl test |\n|---|---|---|---|---|---|---|---|---|\n");
    printf("| %s | %s | %d | %d/%d | %.1f of %d | %.2f%% | %.5f |", a->ref_path, a->test_path,
           f->prompts, f->reproduced, f->prompts, f->mean_first_divergence, a->n_gen,
           100 * f->top1_agreement, f->mean_kl);
    if (d->text_ids) printf(" %.3f | %.3f |\n", r->ppl_ref, r->ppl_test);
    else printf(" - | - |\n");
    report_gaps(a, r);
    if (a->chunk_ctx)
        printf("\n| chunks of %d | scored | ppl ref | ppl test | mean KL | median KL | p99 KL "
               "| max KL | same top-1 |\n|---|---|---|---|---|---|---|---|---|\n"
               "| %d | %lld | %.4f | %.4f | %.6f | %.6f | %.5f | %.4f | %.2f%% |\n",
               a->chunk_ctx, ch->chunks, (long long)ch->n_scored, ch->ppl_ref, ch->ppl_test,
               ch->mean_kl, ch->median_kl, ch->p99_kl, ch->max_kl, 100 * ch->top1_agreement);
}

int cmd_eval(int argc, char **argv)
{
    int rc = 1;
    struct eval_args a = {.fmt = "table", .path_name = "source", .n_gen = 32,
                          .cp = nb_ctx_default_params()};
    struct eval_data d = {0};
    struct eval_result r = {.f = {.size = sizeof r.f}, .ch = {.size = sizeof r.ch}};
    if (parse_args(argc, argv, &a, &rc) <= 0) return rc;
    int st = read_inputs(&a, &d);
    if (st > 0) st = measure(&a, &d, &r);
    if (st < 0) goto fail;
    if (st == 0) goto done;
    if (!strcmp(a.fmt, "json")) {
        if (!report_json(&a, &d, &r)) goto done;
    } else {
        report_table(&a, &d, &r);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble eval: %s\n", nb_last_error());
done:
    for (int i = 0; i < d.n_prompts; i++) free(d.prompts[i]);
    free(d.file);
    free(d.text);
    free(d.text_ids);
    nb_tokenizer_free(d.tok);
    nb_ctx_free(d.rc_);
    nb_ctx_free(d.tc);
    nb_model_free(d.rm);
    nb_model_free(d.tm);
    return rc;
}
