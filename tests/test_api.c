/* tests/test_api.c — nibble.h's calls as a program linking libnibble sees them: the
 * tokenizer (caller buffers, the size needed when they are short), streaming decode and
 * stop strings, chat templates, the probe and selector, nb_model_open into a temporary
 * cache (progress called, then a hit), nb_model_quantize and loading its output, the
 * cache calls, the error codes of bad names and missing files, and the developer calls:
 * evaluation (a model against itself), benchmark statistics and timing, measurement
 * records, synthetic models and inspect. On kjv-7m (label model; skipped when
 * ../shared/models is not there). Only nibble.h (and cJSON) is included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <sys/stat.h>

#include "helpers/testutil.h"
#include "nibble.h"
#include "nibble_eval.h"
#include "nibble_synth.h"

#define KJV "kjv-7m/kjv-7m-f32.gguf"
static const char *k_text = "In the beginning";
static const int32_t k_ids[] = {1, 1046, 261, 2074}; /* BOS ▁In ▁the ▁beginning */

static struct nb_tokenizer *kjv_tokenizer(void)
{
    const char *path = tu_model_path(KJV);
    struct nb_tokenizer *tok = NULL;
    if (!path) return NULL;
    assert_int_equal(nb_tokenizer_load(&tok, path), NB_OK);
    return tok;
}

static void test_tokenize(void **state)
{
    (void)state;
    struct nb_tokenizer *tok = kjv_tokenizer();
    if (!tok) skip();
    struct nb_tokenizer_info ti = {.size = sizeof ti};
    nb_tokenizer_get_info(tok, &ti);
    assert_int_equal(ti.n_vocab, 4096);
    assert_int_equal(ti.bos_id, 1);
    assert_int_equal(ti.eos_id, 2);
    assert_true(ti.adds_bos);
    assert_non_null(ti.desc);

    int32_t ids[16];
    int n = -1;
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 1, 1, ids, 16, &n), NB_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(ids, k_ids, sizeof k_ids);
    /* without BOS */
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 0, 1, ids, 16, &n), NB_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 1046);
    /* a short buffer: the size needed, nothing written */
    int32_t two[2] = {-7, -7};
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 1, 1, two, 2, &n),
                     NB_ERR_RANGE);
    assert_int_equal(n, 4);
    assert_int_equal(two[0], -7);
    /* counting only */
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 1, 1, NULL, 0, &n),
                     NB_ERR_RANGE);
    assert_int_equal(n, 4);

    /* round trip; BOS is special and left out */
    char buf[64];
    size_t len = 0;
    assert_int_equal(nb_detokenize_text(tok, k_ids, 4, 0, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, k_text);
    assert_int_equal(len, strlen(k_text));
    assert_int_equal(nb_detokenize_text(tok, k_ids, 4, 1, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, "<s>In the beginning"); /* the dummy-prefix space goes */
    assert_int_equal(nb_detokenize_text(tok, k_ids, 4, 0, buf, 5, &len), NB_ERR_RANGE);
    assert_int_equal(len, strlen(k_text));
    int32_t bad = 4096;
    assert_int_equal(nb_detokenize_text(tok, &bad, 1, 0, buf, sizeof buf, &len),
                     NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "4096"));

    /* pieces: the decoded bytes and the stored vocabulary entry */
    assert_int_equal(nb_token_to_piece(tok, 1046, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, " In");
    assert_int_equal(len, 3);
    assert_int_equal(nb_token_to_piece(tok, 1046, buf, 3, &len), NB_ERR_RANGE);
    assert_int_equal(len, 3);
    assert_string_equal(nb_token_vocab_entry(tok, 1046), "\xe2\x96\x81In");
    assert_null(nb_token_vocab_entry(tok, -1));
    assert_int_equal(nb_token_to_piece(tok, 99999, buf, sizeof buf, &len), NB_ERR_INVALID_ARG);
    assert_true(nb_tokenizer_is_eog(tok, 2));
    assert_false(nb_tokenizer_is_eog(tok, 1046));
    assert_true(nb_tokenizer_is_special(tok, 1));
    assert_false(nb_tokenizer_is_special(tok, 261));

    /* streaming, one id at a time, gives the same text */
    struct nb_detokenizer *d = NULL;
    assert_int_equal(nb_detokenizer_init(&d, tok, 0), NB_OK);
    char acc[64] = "";
    size_t alen = 0;
    for (int i = 0; i <= 4; i++) {
        const char *t;
        size_t tl;
        assert_int_equal(i < 4 ? nb_detokenizer_feed(d, k_ids[i], &t, &tl)
                               : nb_detokenizer_flush(d, &t, &tl),
                         NB_OK);
        assert_true(alen + tl < sizeof acc);
        memcpy(acc + alen, t, tl);
        alen += tl;
    }
    acc[alen] = '\0';
    assert_string_equal(acc, k_text);
    nb_detokenizer_free(d);
    nb_tokenizer_free(tok);
}

static void test_stop_matcher(void **state)
{
    (void)state;
    const char *stops[] = {"END", ""};
    struct nb_stop_matcher *m = NULL;
    const char *e;
    size_t ne;
    assert_int_equal(nb_stop_matcher_init(&m, stops, 2), NB_OK);
    assert_int_equal(nb_stop_matcher_feed(m, "abc E", 5, &e, &ne), 0);
    assert_int_equal(ne, 4); /* "E" is held: it may start END */
    assert_memory_equal(e, "abc ", 4);
    assert_int_equal(nb_stop_matcher_feed(m, "NDxyz", 5, &e, &ne), 1);
    assert_int_equal(ne, 0);
    nb_stop_matcher_free(m);
    assert_int_equal(nb_stop_matcher_init(&m, stops, 1), NB_OK);
    assert_int_equal(nb_stop_matcher_feed(m, "EN", 2, &e, &ne), 0);
    nb_stop_matcher_flush(m, &e, &ne);
    assert_int_equal(ne, 2); /* no stop came: the held text is released */
    nb_stop_matcher_free(m);
}

/* The token -> text step: ids of "In the beginning" with the stop string "begin" release
 * " In the" and stop; without stops the text comes whole and an end-of-generation id ends
 * it (with ignore_eog it is text); nothing after a stop, not even from flush. */
static void test_text_out(void **state)
{
    (void)state;
    struct nb_tokenizer *tok = kjv_tokenizer();
    if (!tok) skip();
    const char *stops[] = {"begin"}, *t;
    size_t n;
    char got[64] = "";
    struct nb_text_out *o = NULL;
    struct nb_text_out_params p = {sizeof p, 0, 0, stops, 1};
    assert_int_equal(nb_text_out_init(&o, tok, &p), NB_OK);
    assert_int_equal(nb_text_out_feed(o, k_ids[1], &t, &n), NB_TEXT_MORE);
    strncat(got, t, n);
    assert_int_equal(nb_text_out_feed(o, k_ids[2], &t, &n), NB_TEXT_MORE);
    strncat(got, t, n);
    assert_int_equal(nb_text_out_feed(o, k_ids[3], &t, &n), NB_TEXT_STOP);
    strncat(got, t, n);
    assert_string_equal(got, " In the "); /* no BOS before: its space stays */
    nb_text_out_flush(o, &t, &n);
    assert_int_equal(n, 0);
    assert_int_equal(nb_text_out_feed(o, k_ids[1], &t, &n), NB_TEXT_STOP);
    nb_text_out_free(o);

    got[0] = '\0';
    assert_int_equal(nb_text_out_init(&o, tok, NULL), NB_OK);
    for (int i = 1; i < 4; i++) {
        assert_int_equal(nb_text_out_feed(o, k_ids[i], &t, &n), NB_TEXT_MORE);
        strncat(got, t, n);
    }
    assert_int_equal(nb_text_out_feed(o, 2, &t, &n), NB_TEXT_EOG); /* EOS */
    assert_int_equal(n, 0);
    nb_text_out_flush(o, &t, &n);
    strncat(got, t, n);
    assert_string_equal(got, " In the beginning");
    nb_text_out_free(o);

    p = nb_text_out_default_params();
    p.ignore_eog = 1;
    assert_int_equal(nb_text_out_init(&o, tok, &p), NB_OK);
    assert_int_equal(nb_text_out_feed(o, 2, &t, &n), NB_TEXT_MORE);
    nb_text_out_free(o);
    p.size = offsetof(struct nb_text_out_params, ignore_eog); /* an older, shorter struct */
    assert_int_equal(nb_text_out_init(&o, tok, &p), NB_OK);   /* ignore_eog: the default */
    assert_int_equal(nb_text_out_feed(o, 2, &t, &n), NB_TEXT_EOG);
    nb_text_out_free(o);
    p.size = 1; /* smaller than the size field: not from nb_text_out_default_params() */
    assert_int_equal(nb_text_out_init(&o, tok, &p), NB_ERR_INVALID_ARG);
    assert_null(o);
    nb_tokenizer_free(tok);
}

static void test_chat(void **state)
{
    (void)state;
    const struct nb_chat_msg msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
    char buf[256];
    size_t len;
    const char *kind = NULL;
    /* a named template needs no tokenizer */
    assert_int_equal(nb_chat_apply(NULL, "chatml", msgs, 2, 1, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                             "<|im_end|>\n<|im_start|>assistant\n");
    assert_int_equal(len, strlen(buf));
    assert_int_equal(nb_chat_apply(NULL, "chatml", msgs + 1, 1, 0, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, "<|im_start|>user\nHi<|im_end|>\n");
    assert_int_equal(nb_chat_apply(NULL, "chatml", msgs, 2, 1, buf, 10, &len), NB_ERR_RANGE);
    assert_int_equal(len, strlen("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                                 "<|im_end|>\n<|im_start|>assistant\n"));
    assert_int_equal(nb_chat_template_resolve(NULL, "llama3", &kind), NB_OK);
    assert_string_equal(kind, "llama3");
    assert_int_equal(nb_chat_template_resolve(NULL, "nosuch", &kind), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_chat_apply(NULL, NULL, msgs, 2, 1, buf, sizeof buf, &len),
                     NB_ERR_INVALID_ARG);
    struct nb_tokenizer *tok = kjv_tokenizer();
    if (!tok) skip();
    /* kjv-7m has no template of its own; llama2's bos_token is the tokenizer's "<s>" */
    assert_int_equal(nb_chat_template_resolve(tok, NULL, &kind), NB_ERR_NOT_FOUND);
    /* chat's and serve's rule: no template falls back to ChatML, said; a name is taken */
    const char *note = NULL;
    assert_int_equal(nb_chat_template_choose(tok, NULL, &kind, &note), NB_OK);
    assert_string_equal(kind, "chatml");
    assert_non_null(note);
    assert_non_null(strstr(note, "--chat-template NAME"));
    assert_int_equal(nb_chat_template_choose(tok, "gemma", &kind, &note), NB_OK);
    assert_string_equal(kind, "gemma");
    assert_null(note);
    assert_int_equal(nb_chat_template_choose(tok, "nosuch", &kind, &note), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_chat_apply(tok, "llama2", msgs, 2, 1, buf, sizeof buf, &len), NB_OK);
    assert_string_equal(buf, "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
    nb_tokenizer_free(tok);
}

static void test_select(void **state)
{
    (void)state;
    struct nb_select_params sp = nb_select_default_params();
    struct nb_probe_info p = {.size = sizeof p};
    struct nb_selection s = {.size = sizeof s};
    sp.priority = "fidelity";
    assert_int_equal(nb_select_weight_path(&sp, &p, &s), NB_OK);
    assert_string_equal(s.weight_path, "w4a16");
    assert_int_equal(s.head_bits, 8);
    assert_true(s.priority_given);
    assert_string_equal(s.priority, "fidelity");
    assert_true(s.n_reasons > 0 && s.n_records >= 0);
    assert_true(p.n_logical >= 1 && p.arch[0] && p.family_key[0]);
    assert_true(p.read_bw_gbs == 0); /* not asked to measure */
    cJSON *j = cJSON_Parse(p.json);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "family_key")->valuestring, p.family_key);
    /* the record key: the CPU's key (vendor, family, model), the path, kernel, features */
    if (p.cpu_key[0]) {
        assert_string_equal(cJSON_GetObjectItem(j, "cpu_key")->valuestring, p.cpu_key);
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s/w4a16/", p.cpu_key);
        assert_ptr_equal(strstr(s.record_key, prefix), s.record_key);
    }
    cJSON_Delete(j);

    sp = nb_select_default_params();
    sp.target = "phone";
    assert_int_equal(nb_select_weight_path(&sp, NULL, &s), NB_OK);
    assert_string_equal(s.weight_path, "w8a16");
    assert_false(s.runs_locally);
    assert_false(s.priority_given);

    sp = nb_select_default_params();
    sp.path = "w4a16";
    sp.path_from = "the test";
    assert_int_equal(nb_select_weight_path(&sp, NULL, &s), NB_OK);
    assert_string_equal(s.weight_path, "w4a16");

    sp.path = "w7";
    assert_int_equal(nb_select_weight_path(&sp, NULL, &s), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "w7"));
    sp = nb_select_default_params();
    sp.priority = "fast";
    assert_int_equal(nb_select_weight_path(&sp, NULL, &s), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "'fast'"));
    sp.priority = NULL;
    sp.size = 0; /* not from nb_select_default_params */
    assert_int_equal(nb_select_weight_path(&sp, NULL, &s), NB_ERR_INVALID_ARG);

    /* the kernel level: chosen once; a bad name is refused */
    assert_int_equal(nb_set_isa("sse9", 1), NB_ERR_INVALID_ARG);
    assert_true(strlen(nb_isa()) > 0);
}

struct progress {
    int calls;
    int64_t last_done, last_total;
    char path_seen[16]; /* the report's weight path when the first call came */
    struct nb_open_report *rep;
};

static void on_progress(int64_t done, int64_t total, void *user)
{
    struct progress *p = user;
    if (!p->calls++ && p->rep)
        snprintf(p->path_seen, sizeof p->path_seen, "%s", p->rep->weight_path);
    p->last_done = done;
    p->last_total = total;
}

struct listed {
    int n;
    char wp[16], source[4096];
};

static void list_cb(const char *file, uint64_t bytes, const char *wp, const char *source,
                    void *user)
{
    struct listed *l = user;
    assert_true(bytes > 0 && file);
    l->n++;
    snprintf(l->wp, sizeof l->wp, "%s", wp ? wp : "");
    snprintf(l->source, sizeof l->source, "%s", source ? source : "");
}

static void test_open(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/cache", tu_dir);
    static struct nb_open_report r;
    struct progress pr = {.rep = &r};
    struct nb_open_params p = nb_open_default_params();
    struct nb_model *m = NULL;
    struct nb_model_info info;

    /* source: the weights as stored */
    r = (struct nb_open_report){.size = sizeof r};
    p.path = "source";
    assert_int_equal(nb_model_open(&m, src, &p, &r), NB_OK);
    nb_model_get_info(m, &info);
    assert_string_equal(info.weight_path, "f32");
    assert_true(r.as_stored);
    assert_string_equal(r.loaded, src);
    assert_string_equal(r.cache_event, "");
    nb_model_free(m);

    /* w4a8 into an empty cache: quantized, progress called to the end */
    r = (struct nb_open_report){.size = sizeof r};
    p.path = "w4a8";
    p.cache_dir = cache;
    p.n_threads = 2;
    p.progress = on_progress;
    p.user = &pr;
    assert_int_equal(nb_model_open(&m, src, &p, &r), NB_OK);
    assert_true(pr.calls > 0);
    assert_int_equal(pr.last_done, pr.last_total);
    assert_string_equal(pr.path_seen, "w4a8"); /* the report was filled before the bar */
    assert_string_equal(r.cache_event, "miss");
    assert_true(r.quantized);
    assert_true(r.quantize_s > 0);
    assert_string_equal(r.weight_path, "w4a8");
    assert_false(r.selected);
    assert_int_equal(strncmp(r.loaded, cache, strlen(cache)), 0);
    nb_model_get_info(m, &info);
    assert_string_equal(info.weight_path, "w4a8");
    /* it runs: greedy ids from the prompt */
    struct nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 2;
    struct nb_ctx *c = NULL;
    struct nb_sampler *smp = NULL;
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct tu_collect col = {0};
    /* a versioned struct: only cp.size bytes are read (an older, shorter one gets the
     * defaults for the rest); one without a size is refused */
    struct nb_ctx_memory mem_all, mem_old;
    struct nb_ctx_params old = cp;
    old.kv_type = NB_KV_TYPE_F32;
    assert_int_equal(nb_ctx_memory(m, &cp, &mem_all), NB_OK);
    old.size = offsetof(struct nb_ctx_params, kv_type);
    assert_int_equal(nb_ctx_memory(m, &old, &mem_old), NB_OK);
    assert_true(mem_old.kv_bytes == mem_all.kv_bytes); /* f32 not read: the default, f16 */
    old.size = 0;
    assert_int_equal(nb_ctx_init(&c, m, &old), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_ctx_init(&c, m, &cp), NB_OK);
    assert_int_equal(nb_sampler_init(&smp, &sp, info.n_vocab), NB_OK);
    assert_int_equal(nb_generate(c, 0, smp, k_ids, 4, 4, 0, tu_collect_cb, &col, NULL), NB_OK);
    assert_int_equal(col.n, 4);
    nb_sampler_free(smp);
    nb_ctx_free(c);
    /* the tokenizer of the model that runs (the cache entry's embedded copy, read from
     * the entry's mapping, the source not opened again) encodes as the source's does */
    struct nb_tokenizer *tok = NULL;
    int32_t ids[16];
    int n = -1;
    assert_int_equal(nb_tokenizer_from_model(&tok, m), NB_OK);
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 1, 1, ids, 16, &n), NB_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(ids, k_ids, sizeof k_ids);
    nb_tokenizer_free(tok);
    assert_int_equal(nb_tokenizer_from_model(&tok, NULL), NB_ERR_INVALID_ARG);
    nb_model_free(m);

    /* the second open maps the cached file: no quantization, no progress */
    char first[4096];
    snprintf(first, sizeof first, "%s", r.loaded);
    pr.calls = 0;
    r = (struct nb_open_report){.size = sizeof r};
    assert_int_equal(nb_model_open(&m, src, &p, &r), NB_OK);
    assert_string_equal(r.cache_event, "hit");
    assert_false(r.quantized);
    assert_int_equal(pr.calls, 0);
    assert_string_equal(r.loaded, first);
    nb_model_free(m);

    /* the cache lists that entry */
    static struct listed l;
    assert_int_equal(nb_cache_entries(cache, (nb_cache_entry_cb)NULL, NULL), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_cache_entries(cache, list_cb, &l), NB_OK);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.wp, "w4a8");
    assert_non_null(strstr(l.source, "kjv-7m-f32.gguf"));

    /* no cache folder: into memory */
    r = (struct nb_open_report){.size = sizeof r};
    p.use_cache = 0;
    assert_int_equal(nb_model_open(&m, src, &p, &r), NB_OK);
    assert_string_equal(r.cache_event, "memory");
    assert_true(r.cache_off);
    assert_string_equal(r.loaded, "(in memory)");
    nb_model_free(m);

    /* auto: the selector decides, its decision in the report */
    r = (struct nb_open_report){.size = sizeof r};
    p = nb_open_default_params();
    p.cache_dir = cache;
    p.calib_path = NULL; /* the choice, not GPTQ's minute on the installed text, is checked */
    p.select.priority = "fidelity";
    assert_int_equal(nb_model_open(&m, src, &p, &r), NB_OK);
    assert_true(r.selected);
    assert_string_equal(r.selection.weight_path, "w4a16");
    assert_string_equal(r.weight_path, "w4a16");
    nb_model_free(m);

    /* an older, shorter report: only its bytes are written */
    struct {
        struct nb_open_report head; /* written up to `size` */
    } small;
    memset(&small, 0x5a, sizeof small);
    small.head.size = offsetof(struct nb_open_report, weight_path);
    p.select.priority = NULL;
    p.path = "w4a8";
    assert_int_equal(nb_model_open(&m, src, &p, &small.head), NB_OK);
    assert_int_equal(small.head.weight_path[0], 0x5a);
    assert_non_null(strstr(small.head.loaded, cache));
    nb_model_free(m);

    int removed, busy;
    uint64_t freed;
    assert_int_equal(nb_cache_clear(cache, &removed, &busy, &freed), NB_OK);
    assert_int_equal(removed, 2); /* w4a8 and w4a16 */
    assert_true(freed > 0);
}

/* A context of kjv-7m on 2 threads. */
static struct nb_ctx *kjv_ctx(const struct nb_model *m, int n_ctx)
{
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_ctx *c = NULL;
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    assert_int_equal(nb_ctx_init(&c, m, &cp), NB_OK);
    return c;
}

/* nb_grammar: a JSON Schema kept to by the sampler's constraint stage through a sequence,
 * greedy and sampled, within a budget; and its errors. */
static void test_grammar(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, src), NB_OK);
    struct nb_ctx *c = kjv_ctx(m, 128);
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_tokenizer_from_model(&tok, m), NB_OK);
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
                                 "\"integer\"}, \"b\": {\"enum\": [\"x\", \"yz\"]}}, "
                                 "\"required\": [\"a\", \"b\"]}";
    struct nb_grammar *g = NULL;
    assert_int_equal(nb_grammar_from_json_schema(&g, tok, 4096, schema, strlen(schema)), NB_OK);
    for (int run = 0; run < 3; run++) {
        struct nb_sampler_params sp = nb_sampler_default_params();
        sp.temperature = run ? 1.0f : 0.0f;
        sp.seed = (uint64_t)run;
        struct nb_sampler *smp = NULL;
        assert_int_equal(nb_sampler_init(&smp, &sp, 4096), NB_OK);
        assert_int_equal(nb_sampler_set_grammar(smp, g), NB_OK);
        assert_false(nb_sampler_grammar_complete(smp));
        nb_ctx_clear_seq(c, 0);
        struct tu_collect got = {0};
        struct nb_gen_stats gs;
        /* 40 tokens at most: the object closes within them */
        assert_int_equal(nb_generate(c, 0, smp, k_ids, 4, 40, 1, tu_collect_cb, &got, &gs), NB_OK);
        assert_true(got.n <= 40);
        assert_true(nb_sampler_grammar_complete(smp));
        char text[1024];
        size_t len = 0;
        assert_int_equal(nb_detokenize_text(tok, got.ids, got.n, 0, text, sizeof text, &len), NB_OK);
        cJSON *js = cJSON_Parse(text);
        assert_non_null(js);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(js, "a");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(js, "b");
        assert_true(cJSON_IsNumber(a) && a->valuedouble == (double)(long long)a->valuedouble);
        assert_true(cJSON_IsString(b) &&
                    (!strcmp(b->valuestring, "x") || !strcmp(b->valuestring, "yz")));
        cJSON_Delete(js);
        /* free again: the same as a sampler that never had one */
        assert_int_equal(nb_sampler_set_grammar(smp, NULL), NB_OK);
        assert_false(nb_sampler_grammar_complete(smp));
        nb_sampler_free(smp);
    }
    /* errors */
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_sampler *small = NULL;
    assert_int_equal(nb_sampler_init(&small, &sp, 100), NB_OK);
    assert_int_equal(nb_sampler_set_grammar(small, g), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "4096"));
    nb_sampler_free(small);
    struct nb_grammar *bad = NULL;
    assert_int_equal(nb_grammar_from_json_schema(&bad, tok, 4096, "{\"type\": ", 9), NB_ERR_FORMAT);
    assert_null(bad);
    static const char pat[] = "{\"properties\": {\"a\": {\"pattern\": \"x\"}}}";
    assert_int_equal(nb_grammar_from_json_schema(&bad, tok, 4096, pat, strlen(pat)),
                     NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_last_error(), "pattern"));
    assert_int_equal(nb_grammar_from_json_schema(&bad, tok, 4096, "[1]", 3), NB_ERR_UNSUPPORTED);
    assert_int_equal(nb_grammar_from_json_schema(&bad, NULL, 4096, "{}", 2), NB_ERR_INVALID_ARG);
    nb_grammar_free(g);
    nb_ctx_free(c);
    nb_tokenizer_free(tok);
    nb_model_free(m);
}

/* nb_sequence: the one generation loop. Its ids, cache and pending token after a call;
 * a second call continues; rewind; a shift keeps generating in a small context; lookup
 * gives the same ids through shifts; bad parameters are refused. */
static void test_sequence(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, src), NB_OK);
    struct nb_ctx *c = kjv_ctx(m, 64);
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_sampler *smp = NULL;
    assert_int_equal(nb_sampler_init(&smp, &sp, 4096), NB_OK);

    /* one-call form and the sequence agree */
    struct tu_collect want = {0}, got = {0};
    assert_int_equal(nb_generate(c, 0, smp, k_ids, 4, 8, 0, tu_collect_cb, &want, NULL), NB_OK);
    nb_ctx_clear_seq(c, 0);
    struct nb_sequence *q = NULL;
    struct nb_sequence_params qp = nb_sequence_default_params();
    assert_int_equal(nb_sequence_init(&q, c, &qp), NB_OK);
    struct nb_gen_stats gs;
    assert_int_equal(nb_sequence_generate(q, smp, k_ids, 4, 8, 0, tu_collect_cb, &got, &gs), NB_OK);
    assert_int_equal(got.n, 8);
    assert_memory_equal(got.ids, want.ids, sizeof(int32_t) * 8);
    assert_int_equal(gs.n_gen, 8);
    assert_int_equal(gs.n_decode, 7); /* the 8th is sampled, not run */
    int n = 0;
    const int32_t *ids = nb_sequence_ids(q, &n);
    assert_int_equal(n, 12);
    assert_memory_equal(ids, k_ids, sizeof k_ids);
    assert_int_equal(nb_sequence_pending(q), 1);
    assert_int_equal(nb_sequence_cached(q), 11);
    /* a second call runs the pending token first, then its prompt */
    int32_t more = k_ids[1];
    assert_int_equal(nb_sequence_generate(q, smp, &more, 1, 2, 0, NULL, NULL, &gs), NB_OK);
    ids = nb_sequence_ids(q, &n);
    assert_int_equal(n, 15);
    assert_int_equal(nb_sequence_cached(q), 14);
    assert_int_equal(nb_sequence_rewind(q, 16), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_sequence_rewind(q, 4), NB_OK);
    assert_int_equal(nb_sequence_cached(q), 4);
    assert_int_equal(nb_sequence_pending(q), 0);
    nb_sequence_free(q);

    /* a context of 24 shifts: 60 tokens come out, kept start and all */
    qp.n_ctx = 24;
    qp.shift = 1;
    qp.n_keep = 1;
    struct tu_collect a = {0}, b = {0};
    for (int lk = 0; lk <= 8; lk += 8) {
        qp.max_draft = lk;
        assert_int_equal(nb_sequence_init(&q, c, &qp), NB_OK);
        assert_int_equal(nb_sequence_generate(q, smp, k_ids, 4, 60, 0, tu_collect_cb,
                                              lk ? &b : &a, &gs), NB_OK);
        assert_int_equal(gs.n_gen, 60);
        assert_true(gs.n_shifts >= 2);
        assert_true(nb_sequence_cached(q) <= 24);
        struct nb_sequence_shifts sh;
        nb_sequence_shifts(q, &sh);
        assert_int_equal(sh.n_shifts, gs.n_shifts);
        nb_sequence_free(q);
    }
    assert_int_equal(a.n, b.n); /* tu_collect keeps the first 64 */
    assert_memory_equal(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n);
    /* a prompt that cannot fit beside the kept start: NB_ERR_RANGE, with the numbers */
    int32_t longp[30];
    for (int i = 0; i < 30; i++) longp[i] = k_ids[i % 4];
    qp.max_draft = 0;
    assert_int_equal(nb_sequence_init(&q, c, &qp), NB_OK);
    assert_int_equal(nb_sequence_generate(q, smp, longp, 30, 4, 0, NULL, NULL, NULL),
                     NB_ERR_RANGE);
    assert_non_null(strstr(nb_last_error(), "30 new tokens do not fit"));
    nb_sequence_free(q);

    qp.n_ctx = 0; /* a shift needs n_ctx */
    assert_int_equal(nb_sequence_init(&q, c, &qp), NB_ERR_INVALID_ARG);
    assert_null(q);
    qp.size = 3;
    assert_int_equal(nb_sequence_init(&q, c, &qp), NB_ERR_INVALID_ARG);
    nb_sampler_free(smp);
    nb_ctx_free(c);
    nb_model_free(m);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct nb_model *m = (struct nb_model *)&m;
    struct nb_open_params p = nb_open_default_params();
    struct nb_open_report r = {.size = sizeof r};
    /* the defaults are nibble run's: the cache folder of $XDG_CACHE_HOME or $HOME, and the
     * calibration text installed beside the program (this build folder's share/nibble) */
    const char *calib = nb_calib_default_path();
    char cache[4096];
    assert_non_null(calib);
    assert_ptr_equal(p.calib_path, calib);
    assert_non_null(strstr(calib, "/share/nibble/calib.txt"));
    if (nb_cache_default_dir(getenv("XDG_CACHE_HOME"), getenv("HOME"), cache, sizeof cache) ==
        NB_OK)
        assert_string_equal(p.cache_dir, cache);
    else
        assert_null(p.cache_dir);
    /* names are checked before the model is looked at */
    p.path = "w5";
    assert_int_equal(nb_model_open(&m, "/nonexistent.gguf", &p, &r), NB_ERR_INVALID_ARG);
    assert_null(m);
    assert_non_null(strstr(nb_last_error(), "'w5'"));
    assert_non_null(strstr(nb_last_error(), "not one of auto, source"));
    p.path = "w4a8";
    p.select.priority = "fastest";
    assert_int_equal(nb_model_open(&m, "/nonexistent.gguf", &p, &r), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "'fastest'"));
    p.select.priority = NULL;
    assert_int_not_equal(nb_model_open(&m, "/nonexistent.gguf", &p, &r), NB_OK);
    assert_null(m);
    assert_non_null(strstr(nb_last_error(), "/nonexistent.gguf"));
    p.path = "source";
    assert_int_not_equal(nb_model_open(&m, "/nonexistent.gguf", &p, &r), NB_OK);
    assert_non_null(strstr(nb_last_error(), "/nonexistent.gguf"));
    r.size = 0;
    assert_int_equal(nb_model_open(&m, "/nonexistent.gguf", &p, &r), NB_ERR_INVALID_ARG);
    struct nb_tokenizer *tok = (struct nb_tokenizer *)&tok;
    assert_int_not_equal(nb_tokenizer_load(&tok, "/nonexistent/model.gguf"), NB_OK);
    assert_null(tok);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/model.gguf"));

    char dir[256];
    assert_int_equal(nb_cache_default_dir(NULL, "/home/u", dir, sizeof dir), NB_OK);
    assert_string_equal(dir, "/home/u/.cache/nibble");
    assert_int_equal(nb_cache_default_dir("/x/cache", "/home/u", dir, sizeof dir), NB_OK);
    assert_string_equal(dir, "/x/cache/nibble");
    assert_int_equal(nb_cache_default_dir(NULL, NULL, dir, sizeof dir), NB_ERR_NOT_FOUND);
}

static void test_quantize(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    char out[4096];
    snprintf(out, sizeof out, "%s/k.nib", tu_dir);
    struct nb_quantize_params q = nb_quantize_default_params();
    struct nb_quantize_stats s = {.size = sizeof s};
    struct progress pr = {0};
    q.path = "w4a8";
    q.head_bits = 4;
    q.n_threads = 2;
    q.progress = on_progress;
    q.user = &pr;
    assert_int_equal(nb_model_quantize(src, out, &q, &s), NB_OK);
    assert_true(pr.calls > 0);
    /* int4, group 128, bf16 scale: 4 + 16/128 bits per weight, head included */
    assert_true(s.bpw_linear > 4.124 && s.bpw_linear < 4.126);
    assert_true(s.file_bytes > s.linear_bytes && s.linear_params > 0);

    struct nb_model *m = NULL;
    struct nb_model_info info;
    assert_int_equal(nb_model_load(&m, out), NB_OK);
    nb_model_get_info(m, &info);
    assert_string_equal(info.weight_path, "w4a8");
    assert_int_equal(info.n_vocab, 4096);
    nb_model_free(m);
    /* the .nib carries its tokenizer */
    struct nb_tokenizer *tok = NULL;
    int32_t ids[8];
    int n;
    assert_int_equal(nb_tokenizer_load(&tok, out), NB_OK);
    assert_int_equal(nb_tokenize_text(tok, k_text, strlen(k_text), 1, 1, ids, 8, &n), NB_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(ids, k_ids, sizeof k_ids);
    nb_tokenizer_free(tok);

    /* auto: the selector's choice, its recipe and head (tests/cli/quantize.sh compares the
     * bytes with nb_model_open's cache entry for the default priority) */
    q.path = "auto";
    q.head_bits = 0;
    q.select.priority = "speed";
    assert_int_equal(nb_model_quantize(src, out, &q, &s), NB_OK);
    assert_int_equal(s.selected, 1);
    assert_string_equal(s.weight_path, s.selection.weight_path);
    assert_string_equal(s.recipe, s.selection.recipe);
    assert_string_equal(s.selection.priority, "speed");
    q.select.priority = "fastest";
    assert_int_equal(nb_model_quantize(src, out, &q, &s), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "fastest"));
    q.select.priority = NULL;
    q.path = "w5";
    assert_int_equal(nb_model_quantize(src, out, &q, &s), NB_ERR_INVALID_ARG);
    q.path = "w4a8";
    q.group = 48;
    assert_int_equal(nb_model_quantize(src, out, &q, &s), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "48"));
    q.group = 128;
    assert_int_not_equal(nb_model_quantize("/nonexistent.gguf", out, &q, NULL), NB_OK);
    assert_non_null(strstr(nb_last_error(), "/nonexistent.gguf"));
}

static void test_eval(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    const char *root = getenv("NIBBLE_SOURCE_DIR");
    if (!src || !root) skip();
    struct nb_model *m = NULL;
    assert_int_equal(nb_model_load(&m, src), NB_OK);
    struct nb_ctx *a = kjv_ctx(m, 256), *b = kjv_ctx(m, 256);
    struct nb_tokenizer *tok = kjv_tokenizer();

    /* greedy and teacher-forced: a model against itself reproduces every prompt */
    const char *texts[2] = {k_text, "And God said"};
    int32_t ids[2][16], *prompts[2] = {ids[0], ids[1]};
    int lens[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(nb_tokenize_text(tok, texts[i], strlen(texts[i]), 1, 0, ids[i], 16,
                                          &lens[i]),
                         NB_OK);
    struct nb_fidelity f = {.size = sizeof f};
    assert_int_equal(nb_eval_fidelity(a, b, prompts, lens, 2, 8, &f), NB_OK);
    assert_int_equal(f.prompts, 2);
    assert_int_equal(f.reproduced, f.prompts);
    assert_true(f.mean_kl == 0);
    assert_true(f.top1_agreement == 1);
    assert_true(f.mean_first_divergence == 8);
    assert_true(f.n_tokens > 0);
    /* an older caller's shorter struct: only its fields are written */
    struct nb_fidelity old;
    memset(&old, 0x5a, sizeof old);
    old.size = offsetof(struct nb_fidelity, reproduced);
    assert_int_equal(nb_eval_fidelity(a, b, prompts, lens, 1, 2, &old), NB_OK);
    assert_int_equal(old.prompts, 1);
    int sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    assert_int_equal(old.reproduced, sentinel);
    assert_int_equal(nb_eval_fidelity(NULL, b, prompts, lens, 1, 2, &f), NB_ERR_INVALID_ARG);
    /* per prompt: no divergence (n_gen) and no gap (NAN); either array may be NULL */
    int first_div[2] = {-1, -1};
    float gap[2] = {0, 0};
    assert_int_equal(nb_eval_fidelity_cases(a, b, prompts, lens, 2, 8, &f, first_div, gap), NB_OK);
    assert_int_equal(f.reproduced, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(first_div[i], 8);
        assert_true(isnan(gap[i]));
    }
    first_div[0] = -1;
    assert_int_equal(nb_eval_fidelity_cases(a, b, prompts, lens, 1, 8, &f, first_div, NULL), NB_OK);
    assert_int_equal(first_div[0], 8);

    /* the held-out text, llama-perplexity's way: KL 0 and equal perplexities */
    char path[4096];
    snprintf(path, sizeof path, "%s/data/calib/kjv-7m-heldout.txt", root);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    assert_true(len > 1000);
    static int32_t tids[1 << 15];
    int n = 0;
    assert_int_equal(nb_tokenize_text(tok, text, len, 1, 0, tids, 1 << 15, &n), NB_OK);
    assert_true(n >= 512);
    n = 512; /* 4 chunks of 128 keep the sanitizer build quick */
    struct nb_chunk_eval ch = {.size = sizeof ch};
    struct nb_model_info info;
    nb_model_get_info(m, &info);
    assert_int_equal(nb_eval_chunks(a, b, tids, n, 128, info.bos_id, &ch), NB_OK);
    assert_int_equal(ch.chunks, 4);
    assert_int_equal(ch.n_scored, 4 * (128 - 1 - 64));
    assert_true(ch.mean_kl == 0 && ch.max_kl == 0);
    assert_true(ch.ppl_ref == ch.ppl_test);
    assert_true(ch.ppl_ref > 1 && ch.ppl_ref < info.n_vocab);
    assert_true(ch.top1_agreement == 1);
    assert_int_equal(nb_eval_chunks(a, b, tids, 100, 128, info.bos_id, &ch), NB_ERR_INVALID_ARG);
    double ppl = 0;
    assert_int_equal(nb_eval_ppl(a, tids, 256, 128, &ppl), NB_OK);
    assert_true(ppl > 1 && ppl < info.n_vocab);

    /* timing runs on the same context */
    double sec = 0;
    assert_int_equal(nb_bench_pp(a, 16, 1, &sec), NB_OK);
    assert_true(sec > 0);
    sec = 0;
    assert_int_equal(nb_bench_tg(a, 4, 1, &sec), NB_OK);
    assert_true(sec > 0);

    /* on top of a filled context (bench -d): the fill stays under each test, the test's
     * own tokens go before the next one */
    assert_int_equal(nb_bench_fill(a, 32, 5), NB_OK);
    assert_int_equal(nb_ctx_seq_len(a, 0), 32);
    sec = 0;
    assert_int_equal(nb_bench_pp_at(a, 32, 16, 1, &sec), NB_OK);
    assert_true(sec > 0);
    assert_int_equal(nb_ctx_seq_len(a, 0), 48);
    sec = 0;
    assert_int_equal(nb_bench_tg_at(a, 32, 4, 1, &sec), NB_OK);
    assert_true(sec > 0);
    assert_int_equal(nb_ctx_seq_len(a, 0), 36);
    assert_int_equal(nb_bench_pp_at(a, 40, 4, 1, &sec), NB_ERR_INVALID_ARG); /* 36 held */
    assert_non_null(strstr(nb_last_error(), "holds 36 tokens, fewer than the depth 40"));
    assert_int_equal(nb_bench_fill(a, -1, 5), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_bench_tg_at(a, -1, 4, 1, &sec), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_bench_pp_at(a, 0, 8, 1, &sec), NB_OK); /* depth 0: from empty */
    assert_int_equal(nb_ctx_seq_len(a, 0), 8);
    /* the filled tokens are what the next token attends to: the same seed gives the same
     * logits after them, another seed other logits */
    float *l1 = malloc(sizeof *l1 * (size_t)info.n_vocab);
    float *l2 = malloc(sizeof *l2 * (size_t)info.n_vocab);
    assert_true(l1 && l2);
    int32_t next = 7, at = 32;
    struct nb_batch one = {.n_tokens = 1, .token = &next, .pos = &at};
    assert_int_equal(nb_bench_fill(a, 32, 5), NB_OK);
    assert_int_equal(nb_decode(a, &one, l1), NB_OK);
    assert_int_equal(nb_bench_fill(a, 32, 5), NB_OK);
    assert_int_equal(nb_decode(a, &one, l2), NB_OK);
    assert_memory_equal(l1, l2, sizeof *l1 * (size_t)info.n_vocab);
    assert_int_equal(nb_bench_fill(a, 32, 6), NB_OK);
    assert_int_equal(nb_decode(a, &one, l2), NB_OK);
    assert_memory_not_equal(l1, l2, sizeof *l1 * (size_t)info.n_vocab);
    free(l1);
    free(l2);

    nb_tokenizer_free(tok);
    nb_ctx_free(a);
    nb_ctx_free(b);
    nb_model_free(m);
}

static enum nb_status count_run(int model, int test, int pass, void *user)
{
    int *order = user;
    order[order[0] + 1] = pass * 100 + model * 10 + test;
    order[0]++;
    return NB_OK;
}

static void test_bench_stats(void **state)
{
    (void)state;
    const double x[5] = {10, 12, 11, 9, 13};
    struct nb_stats s = {.size = sizeof s};
    nb_stats_of(x, 5, &s);
    assert_true(fabs(s.mean - 11) < 1e-12 && fabs(s.median - 11) < 1e-12);
    assert_true(s.best == 13 && s.worst == 9);
    assert_true(fabs(s.stddev - sqrt(2.5)) < 1e-12);
    assert_true(fabs(s.spread_pct - 100.0 * 4 / 13) < 1e-9);
    nb_stats_of(x, 0, &s);
    assert_true(s.mean == 0 && s.best == 0);
    /* a shorter struct keeps its tail */
    struct nb_stats old = {.size = offsetof(struct nb_stats, stddev), .stddev = -1};
    nb_stats_of(x, 5, &old);
    assert_true(fabs(old.mean - 11) < 1e-12 && old.stddev == -1);

    int order[1 + 12] = {0};
    assert_int_equal(nb_bench_interleave(2, 2, 3, count_run, order), NB_OK);
    assert_int_equal(order[0], 12);
    assert_int_equal(order[1], 0);  /* pass 0 model 0 test 0 */
    assert_int_equal(order[3], 10); /* pass 0 model 1 test 0 */
    assert_int_equal(order[5], 100);
    assert_true(nb_measure_read_bandwidth(1, (size_t)16 << 20, 1) > 0);
}

static void test_record(void **state)
{
    (void)state;
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    struct nb_open_params op = nb_open_default_params();
    op.path = "w4a8";
    op.cache_dir = NULL; /* quantized in memory */
    op.n_threads = 2;
    struct nb_model *m = NULL;
    struct nb_model_info info;
    assert_int_equal(nb_model_open(&m, src, &op, NULL), NB_OK);
    nb_model_get_info(m, &info);
    assert_string_equal(info.weight_path, "w4a8");

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/records", tu_dir);
    const double pp[2] = {100, 110}, tg[3] = {50, 52, 51};
    struct nb_record_params rp = nb_record_default_params();
    rp.dir = dir;
    rp.model_arg = "models/kjv-7m-f32.gguf";
    rp.model_file = src;
    rp.info = &info;
    rp.threads = 2;
    rp.n_prompt = 64;
    rp.n_gen = 16;
    rp.pp = pp;
    rp.n_pp = 2;
    rp.tg = tg;
    rp.n_tg = 3;
    rp.read_bw_gbs = 10;
    rp.command = "nibble bench -m kjv-7m-f32.gguf";
    rp.commit = "abc1234";
    struct nb_record_result rr = {.size = sizeof rr};
    assert_int_equal(nb_record_write(&rp, &rr), NB_OK);
    assert_string_equal(rr.weight_path, "w4a8");
    assert_true(rr.kernel[0] != 0);
    assert_non_null(strstr(rr.file, "-kjv-7m-f32-w4a8-t2.json"));
    FILE *fp = fopen(rr.file, "rb");
    assert_non_null(fp);
    static char text[1 << 16];
    text[fread(text, 1, sizeof text - 1, fp)] = 0;
    fclose(fp);
    cJSON *d = cJSON_Parse(text);
    assert_non_null(d);
    assert_string_equal(cJSON_GetObjectItem(d, "schema")->valuestring, "nibble-measurement-1");
    assert_string_equal(cJSON_GetObjectItem(d, "weight_path")->valuestring, "w4a8");
    assert_string_equal(cJSON_GetObjectItem(d, "kernel")->valuestring, rr.kernel);
    assert_string_equal(cJSON_GetObjectItem(d, "commit")->valuestring, "abc1234");
    assert_string_equal(cJSON_GetObjectItem(d, "model_file")->valuestring, "kjv-7m-f32.gguf");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "head_bits"))); /* not a .nib */
    const cJSON *t = cJSON_GetObjectItem(d, "tg");
    assert_true(cJSON_GetObjectItem(t, "best_ts")->valuedouble == 52);
    assert_true(cJSON_GetObjectItem(t, "median_ts")->valuedouble == 51);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "samples")), 3);
    /* the record carries its key, and it is the key the selector asks of a record for
     * w4a8 on this CPU (the kernel that ran, at the level it ran) */
    struct nb_select_params sp = nb_select_default_params();
    struct nb_probe_info pi = {.size = sizeof pi};
    struct nb_selection sel = {.size = sizeof sel};
    sp.path = "w4a8";
    assert_int_equal(nb_select_weight_path(&sp, &pi, &sel), NB_OK);
    const cJSON *rk = cJSON_GetObjectItem(d, "record_key");
    const cJSON *ck = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "cpu"), "cpu_key");
    if (pi.cpu_key[0]) {
        assert_true(cJSON_IsString(rk) && cJSON_IsString(ck));
        assert_string_equal(ck->valuestring, pi.cpu_key);
        const char *isa = getenv("NIBBLE_ISA");
        if (!isa || !*isa || !strcmp(isa, "auto")) /* the selector assumes no cap */
            assert_string_equal(rk->valuestring, sel.record_key);
    }
    cJSON_Delete(d);

    /* a float model has no weight path to record */
    struct nb_model_info fi = info;
    fi.weight_path = "f16"; /* "f32" is a weight path too; an f16 source is not */
    rp.info = &fi;
    assert_int_equal(nb_record_write(&rp, NULL), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "float"));
    nb_model_free(m);
}

static void test_synth(void **state)
{
    (void)state;
    int n = nb_synth_shape_count();
    assert_true(n > 0);
    struct nb_synth_shape_info si = {.size = sizeof si};
    assert_int_equal(nb_synth_shape_get(0, &si), NB_OK);
    assert_non_null(si.name);
    assert_int_equal(nb_synth_shape_get(n, &si), NB_ERR_INVALID_ARG);
    assert_int_equal(nb_synth_shape_find("qwen3-tiny", &si), NB_OK);
    assert_string_equal(si.arch, "qwen3");
    assert_int_equal(si.n_layers, 2);
    assert_true(si.n_params > 0);
    assert_int_equal(nb_synth_shape_find("no-such-shape", &si), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_last_error(), "no-such-shape"));
    assert_non_null(strstr(nb_last_error(), "qwen3-tiny")); /* the message lists the shapes */

    char out[4096];
    snprintf(out, sizeof out, "%s/synth.gguf", tu_dir);
    struct nb_synth_params sp = nb_synth_default_params();
    assert_string_equal(sp.dtype, "f16");
    sp.dtype = "f8";
    assert_int_equal(nb_synth_write_file("qwen3-tiny", &sp, out), NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "f8"));
    assert_int_equal(nb_synth_write_file("no-such-shape", NULL, out), NB_ERR_NOT_FOUND);
    sp.dtype = "bf16";
    sp.n_threads = 2;
    assert_int_equal(nb_synth_write_file("qwen3-tiny", &sp, out), NB_OK);
    struct nb_model *m = NULL;
    struct nb_model_info info;
    assert_int_equal(nb_model_load(&m, out), NB_OK);
    nb_model_get_info(m, &info);
    assert_int_equal(info.n_layers, 2);
    assert_int_equal(info.n_params, si.n_params);
    nb_model_free(m);
}

static void test_inspect(void **state)
{
    (void)state;
    char *json = NULL;
    assert_int_not_equal(nb_inspect_json("/nonexistent.gguf", &json), NB_OK);
    assert_null(json);
    assert_non_null(strstr(nb_last_error(), "/nonexistent.gguf"));
    nb_free(NULL);
    const char *src = tu_model_path(KJV);
    if (!src) skip();
    assert_int_equal(nb_inspect_json(src, &json), NB_OK);
    cJSON *d = cJSON_Parse(json);
    nb_free(json);
    assert_non_null(d);
    assert_string_equal(cJSON_GetObjectItem(d, "format")->valuestring, "gguf");
    assert_string_equal(cJSON_GetObjectItem(d, "file")->valuestring, src);
    const cJSON *meta = cJSON_GetObjectItem(d, "metadata");
    assert_string_equal(cJSON_GetObjectItem(meta, "general.architecture")->valuestring, "llama");
    const cJSON *t;
    int found = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(d, "tensors"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "token_embd.weight")) continue;
        found = 1;
        assert_string_equal(cJSON_GetObjectItem(t, "dtype")->valuestring, "F32");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "shape")), 2);
    }
    assert_true(found);
    cJSON_Delete(d);

    /* a llama2.c checkpoint has nothing to show beyond its header */
    const char *bin = tu_model_path("kjv-7m/kjv-7m.bin");
    if (bin) {
        assert_int_equal(nb_inspect_json(bin, &json), NB_ERR_UNSUPPORTED);
        assert_non_null(strstr(nb_last_error(), "llama2.c"));
    }
    /* verify: a GGUF is not a .nib */
    assert_int_not_equal(nb_nib_verify_file(src, NULL), NB_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize),   cmocka_unit_test(test_stop_matcher),
        cmocka_unit_test(test_text_out),
        cmocka_unit_test(test_chat),       cmocka_unit_test(test_select),
        cmocka_unit_test(test_open),       cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_sequence),   cmocka_unit_test(test_grammar),
        cmocka_unit_test(test_quantize),   cmocka_unit_test(test_eval),
        cmocka_unit_test(test_bench_stats), cmocka_unit_test(test_record),
        cmocka_unit_test(test_synth),      cmocka_unit_test(test_inspect),
    };
    return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
