/* tokenizer/tok_load_hf.c — Hugging Face tokenizer.json (+ tokenizer_config.json), and
 * a directory holding either it or a SentencePiece tokenizer.model.
 *
 * Supported tokenizer.json parts (anything else is NB_ERR_UNSUPPORTED, naming it):
 *   model           BPE: vocab, merges ("a b" strings or [a, b] pairs), byte_fallback,
 *                   ignore_merges, fuse_unk, unk_token
 *   added_tokens    id, content, special (lstrip/rstrip/single_word are not applied)
 *   normalizer      null, NFC, Replace (String pattern), Prepend, Sequence of these
 *   pre_tokenizer   null, Split (Regex or String; Isolated, Removed, MergedWithPrevious,
 *                   MergedWithNext; invert), ByteLevel (use_regex, no add_prefix_space),
 *                   Digits, Metaspace, Sequence of these
 *   post_processor  null, ByteLevel, TemplateProcessing (single), Sequence
 *   decoder         read for the leading-space strip of Metaspace / Strip decoders
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mmap.h"
#include "formats/json.h"
#include "tokenizer/tok_internal.h"

extern const char *const tok_regex_gpt2;
enum nb_status tok_add_regex_op(struct nb_tokenizer *t, const char *pattern,
                                enum split_behavior behavior, int invert, const char *name);

static const char *type_of(const cJSON *o)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

static char *arena_str(struct nb_tokenizer *t, const char *s)
{
    return nb_arena_strdup(&t->arena, s);
}

/* ---- normalizer ---- */
static enum nb_status add_normalizer(struct nb_tokenizer *t, const cJSON *n, const char *name)
{
    if (!n || cJSON_IsNull(n)) return NB_OK;
    const char *ty = type_of(n);
    if (!ty) return nb_set_error(NB_ERR_FORMAT, "%s: normalizer without a type", name);
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        if (!cJSON_IsArray(list))
            return nb_set_error(NB_ERR_FORMAT, "%s: normalizer Sequence without normalizers", name);
        for (const cJSON *e = list->child; e; e = e->next) {
            enum nb_status st = add_normalizer(t, e, name);
            if (st) return st;
        }
        return NB_OK;
    }
    if (t->n_norm == TOK_MAX_OPS)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: too many normalizers", name);
    struct norm_op *op = &t->norm[t->n_norm];
    if (!strcmp(ty, "NFC")) {
        op->kind = NORM_NFC;
    } else if (!strcmp(ty, "Replace")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (!cJSON_IsString(str) || !cJSON_IsString(content))
            return nb_set_error(NB_ERR_UNSUPPORTED,
                                "%s: normalizer Replace: only a String pattern is supported", name);
        op->kind = NORM_REPLACE;
        op->from = arena_str(t, str->valuestring);
        op->to = arena_str(t, content->valuestring);
        if (!op->from || !op->to) return nb_set_error(NB_ERR_NOMEM, "out of memory");
        op->from_len = strlen(op->from);
        op->to_len = strlen(op->to);
    } else if (!strcmp(ty, "Prepend")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "prepend");
        if (!cJSON_IsString(p))
            return nb_set_error(NB_ERR_FORMAT, "%s: normalizer Prepend without prepend", name);
        op->kind = NORM_PREPEND;
        op->to = arena_str(t, p->valuestring);
        if (!op->to) return nb_set_error(NB_ERR_NOMEM, "out of memory");
        op->to_len = strlen(op->to);
    } else {
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported", name, ty);
    }
    t->n_norm++;
    return NB_OK;
}

/* ---- pre-tokenizer ---- */
static enum nb_status add_pretokenizer(struct nb_tokenizer *t, const cJSON *p, const char *name)
{
    enum nb_status st;
    if (!p || cJSON_IsNull(p)) return NB_OK;
    const char *ty = type_of(p);
    if (!ty) return nb_set_error(NB_ERR_FORMAT, "%s: pre_tokenizer without a type", name);
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        if (!cJSON_IsArray(list))
            return nb_set_error(NB_ERR_FORMAT, "%s: pre_tokenizer Sequence without pretokenizers",
                                name);
        for (const cJSON *e = list->child; e; e = e->next)
            if ((st = add_pretokenizer(t, e, name))) return st;
        return NB_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        int prefix = 0, use_regex = 1;
        if ((st = nb_json_get_bool(p, "add_prefix_space", 0, &prefix, name))) return st;
        if ((st = nb_json_get_bool(p, "use_regex", 1, &use_regex, name))) return st;
        if (prefix)
            return nb_set_error(
                NB_ERR_UNSUPPORTED,
                "%s: ByteLevel pre_tokenizer with add_prefix_space is not supported", name);
        t->byte_level = 1;
        return use_regex ? tok_add_regex_op(t, tok_regex_gpt2, SPLIT_ISOLATED, 0, name) : NB_OK;
    }
    if (!strcmp(ty, "Digits")) {
        int single = 0;
        if ((st = nb_json_get_bool(p, "individual_digits", 0, &single, name))) return st;
        return tok_add_regex_op(t, single ? "\\p{N}" : "\\p{N}+", SPLIT_ISOLATED, 0, name);
    }
    if (!strcmp(ty, "Metaspace")) {
        /* ' ' -> '▁' and a '▁' prefix, like SentencePiece; split=true cuts before each '▁'. */
        const char *scheme = "always";
        int split = 1, prefix = 1;
        if ((st = nb_json_get_str(p, "prepend_scheme", "always", &scheme, name))) return st;
        if ((st = nb_json_get_bool(p, "split", 1, &split, name))) return st;
        if ((st = nb_json_get_bool(p, "add_prefix_space", 1, &prefix, name))) return st;
        if (t->n_norm == TOK_MAX_OPS)
            return nb_set_error(NB_ERR_UNSUPPORTED, "%s: too many steps", name);
        t->norm[t->n_norm++] = (struct norm_op){.kind = NORM_SPM_PREFIX};
        t->spm_dummy_prefix = prefix && strcmp(scheme, "never");
        return split ? tok_add_regex_op(t, "\xe2\x96\x81", SPLIT_MERGED_NEXT, 0, name) : NB_OK;
    }
    if (strcmp(ty, "Split"))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: pre_tokenizer '%s' is not supported", name,
                            ty);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const char *beh = NULL;
    int invert = 0;
    if ((st = nb_json_get_str(p, "behavior", NULL, &beh, name))) return st;
    if ((st = nb_json_get_bool(p, "invert", 0, &invert, name))) return st;
    enum split_behavior b;
    if (!beh) {
        return nb_set_error(NB_ERR_FORMAT, "%s: Split pre_tokenizer without behavior", name);
    } else if (!strcmp(beh, "Isolated")) {
        b = SPLIT_ISOLATED;
    } else if (!strcmp(beh, "Removed")) {
        b = SPLIT_REMOVED;
    } else if (!strcmp(beh, "MergedWithPrevious")) {
        b = SPLIT_MERGED_PREV;
    } else if (!strcmp(beh, "MergedWithNext")) {
        b = SPLIT_MERGED_NEXT;
    } else {
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: Split behavior '%s' is not supported", name,
                            beh);
    }
    if (cJSON_IsString(re)) return tok_add_regex_op(t, re->valuestring, b, invert, name);
    if (!cJSON_IsString(str) || !str->valuestring[0])
        return nb_set_error(NB_ERR_FORMAT, "%s: Split pre_tokenizer without a pattern", name);
    if (t->n_pre == TOK_MAX_OPS)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: too many steps", name);
    struct pre_op *op = &t->pre[t->n_pre];
    op->kind = PRE_SPLIT_STRING;
    op->behavior = b;
    op->invert = invert;
    op->str = arena_str(t, str->valuestring);
    if (!op->str) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    op->str_len = strlen(op->str);
    t->n_pre++;
    return NB_OK;
}

/* ---- post-processor: ids put around the text by add_special ---- */
static enum nb_status post_processor(struct nb_tokenizer *t, const cJSON *p, const char *name)
{
    if (!p || cJSON_IsNull(p)) return NB_OK;
    const char *ty = type_of(p);
    if (!ty) return nb_set_error(NB_ERR_FORMAT, "%s: post_processor without a type", name);
    if (!strcmp(ty, "ByteLevel")) return NB_OK;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next) {
            enum nb_status st = post_processor(t, e, name);
            if (st) return st;
        }
        return NB_OK;
    }
    if (strcmp(ty, "TemplateProcessing"))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: post_processor '%s' is not supported", name,
                            ty);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    if (!cJSON_IsArray(single))
        return nb_set_error(NB_ERR_FORMAT, "%s: TemplateProcessing without 'single'", name);
    int seen_a = 0;
    t->n_prefix = t->n_suffix = 0;
    for (const cJSON *e = single->child; e; e = e->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
            seen_a = 1;
            continue;
        }
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(sp, "id");
        if (!cJSON_IsString(idv))
            return nb_set_error(NB_ERR_FORMAT, "%s: TemplateProcessing: bad item", name);
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(specials, idv->valuestring);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
        int32_t id = -1;
        if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 1 && cJSON_IsNumber(ids->child)) {
            double v = ids->child->valuedouble;
            id = v >= 0 && v < (double)t->n_vocab ? (int32_t)v : -1;
        } else
            id = tok_lookup(t, idv->valuestring, strlen(idv->valuestring));
        if (id < 0 || id >= t->n_vocab)
            return nb_set_error(NB_ERR_FORMAT,
                                "%s: TemplateProcessing: special token '%s' has no valid id", name,
                                idv->valuestring);
        int *n = seen_a ? &t->n_suffix : &t->n_prefix;
        int32_t *arr = seen_a ? t->suffix_ids : t->prefix_ids;
        if (*n == 4) return nb_set_error(NB_ERR_UNSUPPORTED, "%s: too many template tokens", name);
        arr[(*n)++] = id;
    }
    return NB_OK;
}

static void decoder_flags(struct nb_tokenizer *t, const cJSON *d)
{
    const char *ty = type_of(d);
    if (!ty) return;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            decoder_flags(t, e);
    } else if (!strcmp(ty, "Strip")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(d, "start");
        if (cJSON_IsString(c) && !strcmp(c->valuestring, " ") && cJSON_IsNumber(s) &&
            s->valuedouble >= 1)
            t->strip_after_bos = 1;
    } else if (!strcmp(ty, "Metaspace")) {
        t->strip_after_bos = t->spm_dummy_prefix;
    }
}

/* A token given in tokenizer_config.json as a string or {"content": ...}. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* What tokenizer_config.json adds: BOS/EOS, special tokens, the chat template. */
static enum nb_status apply_config(struct nb_tokenizer *t, const cJSON *cfg, const char *name)
{
    enum nb_status st;
    if (!cfg) return NB_OK;
    if (!cJSON_IsObject(cfg))
        return nb_set_error(NB_ERR_FORMAT, "%s: tokenizer_config.json is not an object", name);
    const char *keys[3] = {"bos_token", "eos_token", "unk_token"};
    int32_t *dst[3] = {&t->bos, &t->eos, &t->unk};
    for (int i = 0; i < 3; i++) {
        const char *s = config_token(cfg, keys[i]);
        if (!s) continue;
        int32_t id = tok_lookup(t, s, strlen(s));
        if (id < 0 && i < 2)
            return nb_set_error(NB_ERR_FORMAT, "%s: tokenizer_config.json: %s '%s' is not a token",
                                name, keys[i], s);
        if (id >= 0) *dst[i] = id;
    }
    if (t->algo == NB_TOK_SPM) {
        if ((st = nb_json_get_bool(cfg, "add_bos_token", t->add_bos, &t->add_bos, name))) return st;
        if ((st = nb_json_get_bool(cfg, "add_eos_token", t->add_eos, &t->add_eos, name))) return st;
    }
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens");
    for (const cJSON *e = cJSON_IsArray(extra) ? extra->child : NULL; e; e = e->next) {
        const char *s = cJSON_IsString(e) ? e->valuestring : config_token(e, "content");
        int32_t id = s ? tok_lookup(t, s, strlen(s)) : -1;
        if (id >= 0) t->flags[id] |= TF_SPECIAL;
    }
    if (t->eos >= 0) t->flags[t->eos] |= TF_EOG;
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *tpl_s = cJSON_IsString(tpl) ? tpl->valuestring : NULL;
    for (const cJSON *e = cJSON_IsArray(tpl) ? tpl->child : NULL; e; e = e->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(nm) && cJSON_IsString(tx) && !strcmp(nm->valuestring, "default"))
            tpl_s = tx->valuestring;
    }
    if (tpl_s) {
        free(t->chat_template);
        if (!(t->chat_template = strdup(tpl_s))) return nb_set_error(NB_ERR_NOMEM, "out of memory");
    }
    return NB_OK;
}

/* Piece text of a merge item, as two strings. */
static int merge_parts(const cJSON *m, const char **a, size_t *la, const char **b, size_t *lb)
{
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
        cJSON_IsString(m->child->next)) {
        *a = m->child->valuestring;
        *la = strlen(*a);
        *b = m->child->next->valuestring;
        *lb = strlen(*b);
        return 1;
    }
    if (!cJSON_IsString(m)) return 0;
    const char *s = m->valuestring, *sp = strchr(s, ' ');
    if (!sp) return 0;
    *a = s;
    *la = (size_t)(sp - s);
    *b = sp + 1;
    const char *sp2 = strchr(*b, ' '); /* JS split(" ", 2) ignores what follows */
    *lb = sp2 ? (size_t)(sp2 - *b) : strlen(*b);
    return 1;
}

static enum nb_status load_json_tree(struct nb_tokenizer **out, const cJSON *root, const cJSON *cfg,
                                     const char *name)
{
    enum nb_status st = NB_OK;
    struct nb_tokenizer *t = NULL;
    char *buf = NULL;
    *out = NULL;
    if (!cJSON_IsObject(root)) return nb_set_error(NB_ERR_FORMAT, "%s: not a JSON object", name);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mty = type_of(model);
    if (!cJSON_IsObject(model)) return nb_set_error(NB_ERR_FORMAT, "%s: no \"model\" object", name);
    if (mty && strcmp(mty, "BPE"))
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: model type '%s' is not supported (BPE is)",
                            name, mty);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab))
        return nb_set_error(NB_ERR_FORMAT, "%s: model.vocab missing or not an object", name);
    if (!cJSON_IsArray(merges))
        return nb_set_error(NB_ERR_FORMAT, "%s: model.merges missing or not an array", name);
    if (added && !cJSON_IsArray(added))
        return nb_set_error(NB_ERR_FORMAT, "%s: added_tokens is not an array", name);
    /* Vocabulary size: the largest id + 1, ids checked. */
    double max_id = -1;
    const cJSON *lists[2] = {vocab, added};
    for (int li = 0; li < 2; li++) {
        for (const cJSON *e = lists[li] ? lists[li]->child : NULL; e; e = e->next) {
            const cJSON *idv = li ? cJSON_GetObjectItemCaseSensitive(e, "id") : e;
            const cJSON *cv = li ? cJSON_GetObjectItemCaseSensitive(e, "content") : NULL;
            double v = cJSON_IsNumber(idv) ? idv->valuedouble : -1;
            if (!cJSON_IsNumber(idv) || v < 0 || v >= (1 << 24) || v != (double)(int32_t)v ||
                (li && !cJSON_IsString(cv))) {
                return nb_set_error(NB_ERR_FORMAT, "%s: %s '%s': id out of range [0, 2^24)", name,
                                    li ? "added_tokens" : "model.vocab",
                                    li ? (cJSON_IsString(cv) ? cv->valuestring : "?") : e->string);
            }
            if (v > max_id) max_id = v;
        }
    }
    if (max_id < 0) return nb_set_error(NB_ERR_FORMAT, "%s: empty vocabulary", name);
    if ((st = tok_new(&t, NB_TOK_BPE, (int32_t)max_id + 1))) goto fail;
    for (const cJSON *e = vocab->child; e; e = e->next)
        if ((st = tok_set_piece(t, (int32_t)e->valuedouble, e->string, strlen(e->string))))
            goto fail;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *c = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        if ((st = tok_set_piece(t, id, c, strlen(c)))) goto fail;
    }
    for (int32_t id = 0; id < t->n_vocab; id++) { /* holes: unused, unreachable */
        if (t->piece[id]) continue;
        if ((st = tok_set_piece(t, id, "", 0))) goto fail;
        t->type[id] = NB_TOKTYPE_UNUSED;
    }
    if ((st = tok_build_index(t, name))) goto fail;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        int special = 0;
        if ((st = nb_json_get_bool(e, "special", 0, &special, name))) goto fail;
        if (special) {
            t->flags[id] |= TF_SPECIAL;
            t->type[id] = NB_TOKTYPE_CONTROL;
        } else {
            t->type[id] = NB_TOKTYPE_USER_DEFINED;
        }
        if ((st = tok_add_added(t, id))) goto fail;
    }
    /* BPE options. */
    const char *unk = NULL, *cont = NULL, *eow = NULL;
    if ((st = nb_json_get_bool(model, "byte_fallback", 0, &t->byte_fallback, name))) goto fail;
    if ((st = nb_json_get_bool(model, "ignore_merges", 0, &t->ignore_merges, name))) goto fail;
    if ((st = nb_json_get_bool(model, "fuse_unk", 0, &t->fuse_unk, name))) goto fail;
    const cJSON *uv = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(uv)) unk = uv->valuestring;
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if (cJSON_IsString(cv)) cont = cv->valuestring;
    if (cJSON_IsString(ev)) eow = ev->valuestring;
    if ((cont && cont[0]) || (eow && eow[0])) {
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "%s: BPE continuing_subword_prefix / end_of_word_suffix not supported",
                          name);
        goto fail;
    }
    if (unk) t->unk = tok_lookup(t, unk, strlen(unk));
    /* Merges. */
    if ((st = tok_alloc_merges(t, (size_t)cJSON_GetArraySize(merges)))) goto fail;
    size_t cap = 0;
    int32_t rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        const char *a, *b;
        size_t la, lb;
        if (!merge_parts(m, &a, &la, &b, &lb)) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: model.merges[%d] is not \"a b\" or [a, b]", name,
                              (int)rank);
            goto fail;
        }
        if (la + lb + 1 > cap) {
            cap = (la + lb + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                st = nb_set_error(NB_ERR_NOMEM, "out of memory");
                goto fail;
            }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int32_t ia = tok_lookup(t, a, la), ib = tok_lookup(t, b, lb);
        int32_t ir = tok_lookup(t, buf, la + lb);
        if (ia < 0 || ib < 0 || ir < 0) {
            buf[la + lb] = '\0';
            st = nb_set_error(NB_ERR_FORMAT,
                              "%s: model.merges[%d]: '%.*s' + '%.*s' -> '%s': %s not in the "
                              "vocabulary",
                              name, (int)rank, (int)la, a, (int)lb, b, buf,
                              ia < 0   ? "left piece"
                              : ib < 0 ? "right piece"
                                       : "merged piece");
            goto fail;
        }
        if ((st = tok_add_merge(t, ia, ib, ir, rank))) goto fail;
    }
    if ((st = add_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name)))
        goto fail;
    if ((st = add_pretokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), name)))
        goto fail;
    if ((st = post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), name)))
        goto fail;
    decoder_flags(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
    if ((st = apply_config(t, cfg, name))) goto fail;
    if (t->n_prefix && t->bos < 0) t->bos = t->prefix_ids[0];
    t->add_bos = t->n_prefix > 0;
    if ((st = tok_finalize(t, name))) goto fail;
    snprintf(t->desc, sizeof t->desc, "%s (tokenizer.json)",
             t->byte_level ? "bpe-byte-level" : "bpe-byte-fallback");
    free(buf);
    *out = t;
    return NB_OK;
fail:
    free(buf);
    nb_tokenizer_free(t);
    return st;
}

enum nb_status nb_tokenizer_load_hf_json_cfg(struct nb_tokenizer **out, const char *json,
                                             size_t len, const char *name, const char *config_json,
                                             size_t config_len, const char *config_name)
{
    enum nb_status st;
    cJSON *root = NULL, *cfg = NULL;
    *out = NULL;
    if ((st = nb_json_parse(json, len, name, &root))) goto fail;
    if (config_json && (st = nb_json_parse(config_json, config_len, config_name, &cfg))) goto fail;
    st = load_json_tree(out, root, cfg, name);
fail:
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return st;
}

enum nb_status nb_tokenizer_load_hf_json(struct nb_tokenizer **out, const char *json, size_t len,
                                         const char *config_json, size_t config_len,
                                         const char *name)
{
    return nb_tokenizer_load_hf_json_cfg(out, json, len, name, config_json, config_len, name);
}

static int file_exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISREG(s.st_mode);
}

enum nb_status nb_tokenizer_load_hf(struct nb_tokenizer **out, const char *path)
{
    enum nb_status st;
    cJSON *root = NULL, *cfg = NULL;
    struct nb_mapped_file mf = {0};
    char *dir = NULL, *tj = NULL, *tc = NULL, *tm = NULL;
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return nb_set_error(NB_ERR_NOT_FOUND, "%s: no such file", path);
        return nb_set_error(NB_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    size_t n = strlen(path);
    dir = malloc(n + 2);
    tj = malloc(n + 40);
    tc = malloc(n + 40);
    tm = malloc(n + 40);
    if (!dir || !tj || !tc || !tm) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(dir, path, n + 1);
    if (S_ISDIR(sb.st_mode)) {
        snprintf(tj, n + 40, "%s/tokenizer.json", dir);
        snprintf(tm, n + 40, "%s/tokenizer.model", dir);
    } else {
        char *slash = strrchr(dir, '/');
        if (slash) {
            slash[0] = '\0';
        } else {
            strcpy(dir, ".");
        }
        size_t pl = strlen(path);
        int is_model = pl >= 6 && !strcmp(path + pl - 6, ".model");
        snprintf(tj, n + 40, "%s", is_model ? "" : path);
        snprintf(tm, n + 40, "%s", is_model ? path : "");
    }
    snprintf(tc, n + 40, "%s/tokenizer_config.json", dir);
    if (file_exists(tc) && (st = nb_json_load(tc, &cfg))) goto fail;
    if (tj[0] && file_exists(tj)) {
        if ((st = nb_json_load(tj, &root))) goto fail;
        st = load_json_tree(out, root, cfg, tj);
    } else if (tm[0] && file_exists(tm)) {
        if ((st = nb_file_map(&mf, tm))) goto fail;
        if ((st = nb_tokenizer_load_spm_model(out, mf.data, mf.size, tm))) goto fail;
        if ((st = apply_config(*out, cfg, tc))) {
            nb_tokenizer_free(*out);
            *out = NULL;
        }
    } else {
        st = nb_set_error(NB_ERR_NOT_FOUND, "%s: no tokenizer.json or tokenizer.model", path);
    }
fail:
    nb_file_unmap(&mf);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    free(dir);
    free(tj);
    free(tc);
    free(tm);
    return st;
}

enum nb_status nb_tokenizer_load_spm_model_cfg(struct nb_tokenizer **out, const void *data,
                                               size_t size, const char *name,
                                               const char *config_json, size_t config_len,
                                               const char *config_name)
{
    cJSON *cfg = NULL;
    enum nb_status st;
    *out = NULL;
    if (config_json && (st = nb_json_parse(config_json, config_len, config_name, &cfg))) return st;
    if ((st = nb_tokenizer_load_spm_model(out, data, size, name)) == NB_OK &&
        (st = apply_config(*out, cfg, config_name))) {
        nb_tokenizer_free(*out);
        *out = NULL;
    }
    cJSON_Delete(cfg);
    return st;
}
