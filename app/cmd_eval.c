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
               "                  same top-1, the perplexity of both on those tokens)\n");
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

int cmd_eval(int argc, char **argv)
{
    const char *cmd = "eval", *ref_path = NULL, *test_path = NULL, *prompts_path = NULL;
    const char *text_path = NULL, *fmt = "table";
    const char *path_name = "source", *priority = NULL;
    char loaded[4096];
    int n_gen = 32, rc = 1, n_prompts = 0, no_cache = 0, chunk_ctx = 0;
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_model *rm = NULL, *tm = NULL;
    struct nb_ctx *rc_ = NULL, *tc = NULL;
    struct nb_tokenizer *tok = NULL;
    int32_t *prompts[MAX_PROMPTS];
    int lens[MAX_PROMPTS];
    char *file = NULL, *text = NULL;
    int32_t *text_ids = NULL;
    const struct arg_opt opts[] = {
        OPT_STR("--ref", &ref_path),
        OPT_STR("--test", &test_path),
        OPT_STR("--prompts", &prompts_path),
        OPT_STR("--text", &text_path),
        OPT_INT("--ppl-chunks", &chunk_ctx, 4, 1 << 20),
        OPT_INT("-n|--predict|--n-predict", &n_gen, 1, 4096),
        OPTS_WEIGHTS(&path_name, &priority, &no_cache),
        OPTS_CONTEXT(&cp, 16),
        OPT_CHOICE("-o", &fmt, "table|json"),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (!ref_path || !test_path || !prompts_path) {
        fprintf(stderr, "nibble eval: --ref, --test and --prompts are required\n");
        return 1;
    }
    size_t size;
    if (!app_read_all(cmd, "--prompts", prompts_path, 64u << 20, &file, &size)) goto done;
    int max_len = 0;
    for (char *line = file, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = '\0';
        if (!n) continue;
        if (n_prompts == MAX_PROMPTS) {
            fprintf(stderr, "nibble eval: at most %d prompts\n", MAX_PROMPTS);
            goto done;
        }
        int k = 0;
        if (!strncmp(line, "ids:", 4)) {
            if (!arg_ids(cmd, "--prompts", line + 4, &prompts[n_prompts], &k)) goto done;
        } else {
            if (!tok && nb_tokenizer_load(&tok, ref_path) != NB_OK) goto fail;
            if (app_tokenize(tok, line, n, 1, 0, &prompts[n_prompts], &k) != NB_OK) goto fail;
        }
        lens[n_prompts++] = k;
        if (k > max_len) max_len = k;
    }
    if (chunk_ctx && !text_path) {
        fprintf(stderr, "nibble eval: --ppl-chunks needs --text FILE\n");
        goto done;
    }
    if (!n_prompts) {
        fprintf(stderr, "nibble eval: %s holds no prompts\n", prompts_path);
        goto done;
    }
    int n_text = 0;
    if (text_path) {
        if (!app_read_all(cmd, "--text", text_path, 256u << 20, &text, &size)) goto done;
        if (!tok && nb_tokenizer_load(&tok, ref_path) != NB_OK) goto fail;
        if (app_tokenize(tok, text, size, 1, 0, &text_ids, &n_text) != NB_OK) goto fail;
    }
    /* the contexts hold the longest prompt and its continuation, and a --ppl-chunks chunk */
    int need = max_len + n_gen > chunk_ctx ? max_len + n_gen : chunk_ctx;
    if (nb_model_load(&rm, ref_path) != NB_OK || !context(rm, &cp, need, 1, &rc_))
        goto fail;
    if (!app_open_model(cmd, test_path, path_name, priority, cp.n_threads, !no_cache, &tm, loaded,
                        sizeof loaded))
        goto done;
    if (!context(tm, &cp, need, 0, &tc)) goto fail;
    struct nb_model_info ri;
    nb_model_get_info(rm, &ri);
    int window = cp.n_ctx ? cp.n_ctx : (ri.n_ctx_train < 512 ? ri.n_ctx_train : 512);
    struct nb_fidelity f = {.size = sizeof f};
    if (nb_eval_fidelity(rc_, tc, prompts, lens, n_prompts, n_gen, &f) != NB_OK) goto fail;
    double ppl_ref = 0, ppl_test = 0;
    if (text_ids && (nb_eval_ppl(rc_, text_ids, n_text, window, &ppl_ref) != NB_OK ||
                     nb_eval_ppl(tc, text_ids, n_text, window, &ppl_test) != NB_OK))
        goto fail;
    struct nb_chunk_eval ch = {.size = sizeof ch};
    if (chunk_ctx && nb_eval_chunks(rc_, tc, text_ids, n_text, chunk_ctx, ri.bos_id, &ch) != NB_OK)
        goto fail;
    if (!strcmp(fmt, "json")) { /* cJSON: any file name gives valid JSON */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "ref", ref_path);
        cJSON_AddStringToObject(o, "test", test_path);
        cJSON_AddNumberToObject(o, "prompts", f.prompts);
        cJSON_AddNumberToObject(o, "n_gen", n_gen);
        cJSON_AddNumberToObject(o, "reproduced", f.reproduced);
        cJSON_AddNumberToObject(o, "mean_first_divergence", f.mean_first_divergence);
        cJSON_AddNumberToObject(o, "top1_agreement", f.top1_agreement);
        cJSON_AddNumberToObject(o, "mean_kl", f.mean_kl);
        if (text_ids) {
            cJSON_AddNumberToObject(o, "ppl_ref", ppl_ref);
            cJSON_AddNumberToObject(o, "ppl_test", ppl_test);
            cJSON_AddNumberToObject(o, "ppl_tokens", n_text);
        } else {
            cJSON_AddNullToObject(o, "ppl_ref");
            cJSON_AddNullToObject(o, "ppl_test");
        }
        if (chunk_ctx) {
            cJSON *k = cJSON_AddObjectToObject(o, "ppl_chunks");
            cJSON_AddNumberToObject(k, "n_ctx", chunk_ctx);
            cJSON_AddNumberToObject(k, "chunks", ch.chunks);
            cJSON_AddNumberToObject(k, "scored", (double)ch.n_scored);
            cJSON_AddNumberToObject(k, "ppl_ref", ch.ppl_ref);
            cJSON_AddNumberToObject(k, "ppl_test", ch.ppl_test);
            cJSON_AddNumberToObject(k, "mean_kl", ch.mean_kl);
            cJSON_AddNumberToObject(k, "median_kl", ch.median_kl);
            cJSON_AddNumberToObject(k, "p99_kl", ch.p99_kl);
            cJSON_AddNumberToObject(k, "max_kl", ch.max_kl);
            cJSON_AddNumberToObject(k, "same_top1", ch.top1_agreement);
        }
        char *js = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!js) {
            fprintf(stderr, "nibble eval: out of memory\n");
            goto done;
        }
        printf("%s\n", js);
        free(js);
    } else {
        printf("| ref | test | prompts | reproduced | mean first divergence | top-1 agreement | "
               "mean KL | ppl ref | ppl test |\n|---|---|---|---|---|---|---|---|---|\n");
        printf("| %s | %s | %d | %d/%d | %.1f of %d | %.2f%% | %.5f |", ref_path, test_path,
               f.prompts, f.reproduced, f.prompts, f.mean_first_divergence, n_gen,
               100 * f.top1_agreement, f.mean_kl);
        if (text_ids) printf(" %.3f | %.3f |\n", ppl_ref, ppl_test);
        else printf(" - | - |\n");
        if (chunk_ctx)
            printf("\n| chunks of %d | scored | ppl ref | ppl test | mean KL | median KL | p99 KL "
                   "| max KL | same top-1 |\n|---|---|---|---|---|---|---|---|---|\n"
                   "| %d | %lld | %.4f | %.4f | %.6f | %.6f | %.5f | %.4f | %.2f%% |\n",
                   chunk_ctx, ch.chunks, (long long)ch.n_scored, ch.ppl_ref, ch.ppl_test,
                   ch.mean_kl, ch.median_kl, ch.p99_kl, ch.max_kl, 100 * ch.top1_agreement);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble eval: %s\n", nb_last_error());
done:
    for (int i = 0; i < n_prompts; i++) free(prompts[i]);
    free(file);
    free(text);
    free(text_ids);
    nb_tokenizer_free(tok);
    nb_ctx_free(rc_);
    nb_ctx_free(tc);
    nb_model_free(rm);
    nb_model_free(tm);
    return rc;
}
