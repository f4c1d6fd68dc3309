/* tokenizer/tok_load.c — tokenizers from GGUF metadata, llama2.c tokenizer.bin and
 * SentencePiece tokenizer.model, and picking the right source for a model path.
 * (Hugging Face tokenizer.json is in tok_load_hf.c.) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mmap.h"
#include "formats/gguf.h"
#include "formats/source.h"
#include "formats/json.h"
#include "tokenizer/tok_internal.h"

/* ---------------------------------------------------------------- pre-tokenizer regexes */

/* GPT-2's split (also ByteLevel's default when use_regex is on). */
const char *const tok_regex_gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *const k_regex_llama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const k_regex_qwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum nb_status tok_add_regex_op(struct nb_tokenizer *t, const char *pattern,
                                enum split_behavior behavior, int invert, const char *name);
enum nb_status tok_add_regex_op(struct nb_tokenizer *t, const char *pattern,
                                enum split_behavior behavior, int invert, const char *name)
{
    if (t->n_pre == TOK_MAX_OPS)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", name,
                            TOK_MAX_OPS);
    struct pre_op *op = &t->pre[t->n_pre];
    enum nb_status st = tok_compile_regex(&op->re, pattern, name);
    if (st) return st;
    op->kind = PRE_SPLIT_REGEX;
    op->behavior = behavior;
    op->invert = invert;
    t->n_pre++;
    return NB_OK;
}

/* ---------------------------------------------------------------- GGUF */

static enum nb_status gguf_opt_id(const struct nb_gguf *g, const char *key, int32_t *out)
{
    int64_t v;
    enum nb_status st = nb_gguf_get_i64(g, key, &v);
    if (st == NB_ERR_NOT_FOUND) {
        nb_clear_error();
        return NB_OK;
    }
    if (st) return st;
    *out = v < 0 || v > INT32_MAX ? (int32_t)-1 : (int32_t)v;
    if (v < -1 || v > INT32_MAX)
        return nb_set_error(NB_ERR_FORMAT, "%s: %s = %lld out of range", nb_gguf_path(g), key,
                            (long long)v);
    return NB_OK;
}

static enum nb_status gguf_opt_bool(const struct nb_gguf *g, const char *key, int *out)
{
    enum nb_status st = nb_gguf_get_bool(g, key, out);
    if (st == NB_ERR_NOT_FOUND) {
        nb_clear_error();
        return NB_OK;
    }
    return st;
}

enum nb_status nb_tokenizer_load_gguf(struct nb_tokenizer **out, const struct nb_gguf *g)
{
    enum nb_status st;
    struct nb_tokenizer *t = NULL;
    const char *name = nb_gguf_path(g), *model = NULL, *pre = NULL;
    enum nb_gguf_type et;
    uint64_t n = 0;
    *out = NULL;
    if ((st = nb_gguf_get_str(g, "tokenizer.ggml.model", &model))) goto fail;
    enum nb_tok_algo algo;
    if (!strcmp(model, "llama")) {
        algo = NB_TOK_SPM;
    } else if (!strcmp(model, "gpt2")) {
        algo = NB_TOK_BPE;
    } else {
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "%s: tokenizer.ggml.model '%s' is not supported (llama, gpt2 are)", name,
                          model);
        goto fail;
    }
    if ((st = nb_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n))) goto fail;
    if (et != NB_GGUF_STRING || n == 0 || n > (1u << 24)) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: tokenizer.ggml.tokens: need 1..2^24 strings", name);
        goto fail;
    }
    if ((st = tok_new(&t, algo, (int32_t)n))) goto fail;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        if ((st = nb_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s))) goto fail;
        if ((st = tok_set_piece(t, (int32_t)i, s, strlen(s)))) goto fail;
    }
    const void *data;
    uint64_t cnt;
    st = nb_gguf_get_arr_data(g, "tokenizer.ggml.scores", NB_GGUF_F32, &data, &cnt);
    if (st == NB_OK) {
        if (cnt != n) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: %llu scores for %llu tokens", name,
                              (unsigned long long)cnt, (unsigned long long)n);
            goto fail;
        }
        memcpy(t->score, data, n * sizeof(float));
    } else if (st != NB_ERR_NOT_FOUND || algo == NB_TOK_SPM) {
        goto fail;
    }
    nb_clear_error();
    st = nb_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &cnt);
    if (st == NB_OK) {
        if (cnt != n) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: %llu token types for %llu tokens", name,
                              (unsigned long long)cnt, (unsigned long long)n);
            goto fail;
        }
        for (uint64_t i = 0; i < n; i++) {
            int64_t v;
            if ((st = nb_gguf_get_arr_i64(g, "tokenizer.ggml.token_type", i, &v))) goto fail;
            if (v < NB_TOKTYPE_NORMAL || v > NB_TOKTYPE_BYTE) {
                st = nb_set_error(NB_ERR_FORMAT, "%s: token %llu has type %lld", name,
                                  (unsigned long long)i, (long long)v);
                goto fail;
            }
            t->type[i] = (uint8_t)v;
        }
    } else if (st != NB_ERR_NOT_FOUND) {
        goto fail;
    }
    nb_clear_error();
    if ((st = tok_build_index(t, name))) goto fail;
    t->add_bos = algo == NB_TOK_SPM;
    t->spm_dummy_prefix = 1;
    if ((st = gguf_opt_id(g, "tokenizer.ggml.bos_token_id", &t->bos))) goto fail;
    if ((st = gguf_opt_id(g, "tokenizer.ggml.eos_token_id", &t->eos))) goto fail;
    if ((st = gguf_opt_id(g, "tokenizer.ggml.eot_token_id", &t->eot))) goto fail;
    if ((st = gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", &t->unk))) goto fail;
    if ((st = gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos))) goto fail;
    if ((st = gguf_opt_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos))) goto fail;
    if ((st = gguf_opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->spm_dummy_prefix))) goto fail;
    if (algo == NB_TOK_SPM) {
        t->byte_fallback = 1;
        t->strip_after_bos = t->spm_dummy_prefix;
        if (t->unk < 0 && n > 0 && t->type[0] == NB_TOKTYPE_UNKNOWN) t->unk = 0;
        t->norm[t->n_norm++] = (struct norm_op){.kind = NORM_SPM_PREFIX};
    } else {
        t->byte_level = 1;
        t->spm_dummy_prefix = 0;
        st = nb_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &cnt);
        if (st || et != NB_GGUF_STRING) {
            if (!st)
                st = nb_set_error(NB_ERR_FORMAT, "%s: tokenizer.ggml.merges: not strings", name);
            goto fail;
        }
        if ((st = tok_alloc_merges(t, cnt))) goto fail;
        for (uint64_t i = 0; i < cnt; i++) {
            const char *s;
            if ((st = nb_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &s))) goto fail;
            const char *sp = strchr(s + (s[0] != 0), ' ');
            int32_t a = sp ? tok_lookup(t, s, (size_t)(sp - s)) : -1;
            int32_t b = sp ? tok_lookup(t, sp + 1, strlen(sp + 1)) : -1;
            char buf[512];
            int32_t r = -1;
            if (sp && strlen(s) < sizeof buf) {
                size_t la = (size_t)(sp - s);
                memcpy(buf, s, la);
                strcpy(buf + la, sp + 1);
                r = tok_lookup(t, buf, strlen(buf));
            }
            if (a < 0 || b < 0 || r < 0) {
                st = nb_set_error(NB_ERR_FORMAT,
                                  "%s: tokenizer.ggml.merges[%llu] '%s' names pieces not in the "
                                  "vocabulary",
                                  name, (unsigned long long)i, s);
                goto fail;
            }
            if ((st = tok_add_merge(t, a, b, r, (int32_t)i))) goto fail;
        }
        st = nb_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        if (st == NB_ERR_NOT_FOUND) {
            nb_clear_error();
            pre = "default";
        } else if (st) {
            goto fail;
        }
        if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "dbrx") ||
            !strcmp(pre, "smaug-bpe")) {
            st = tok_add_regex_op(t, k_regex_llama3, SPLIT_ISOLATED, 0, name);
        } else if (!strcmp(pre, "qwen2") || !strcmp(pre, "deepseek-r1-qwen")) {
            t->norm[t->n_norm++] = (struct norm_op){.kind = NORM_NFC};
            st = tok_add_regex_op(t, k_regex_qwen2, SPLIT_ISOLATED, 0, name);
        } else if (!strcmp(pre, "gpt2") || !strcmp(pre, "default")) {
            st = tok_add_regex_op(t, tok_regex_gpt2, SPLIT_ISOLATED, 0, name);
        } else if (!strcmp(pre, "smollm") || !strcmp(pre, "starcoder") || !strcmp(pre, "refact")) {
            st = tok_add_regex_op(t, "\\p{N}", SPLIT_ISOLATED, 0, name);
            if (!st) st = tok_add_regex_op(t, tok_regex_gpt2, SPLIT_ISOLATED, 0, name);
        } else {
            st = nb_set_error(NB_ERR_UNSUPPORTED,
                              "%s: tokenizer.ggml.pre '%s' is not supported (llama-bpe, qwen2, "
                              "gpt2, smollm are); load the model's tokenizer.json instead",
                              name, pre);
        }
        if (st) goto fail;
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->type[id] == NB_TOKTYPE_CONTROL || t->type[id] == NB_TOKTYPE_USER_DEFINED)
            if ((st = tok_add_added(t, id))) goto fail;
    const char *tpl;
    st = nb_gguf_get_str(g, "tokenizer.chat_template", &tpl);
    if (st == NB_OK) {
        if (!(t->chat_template = strdup(tpl))) {
            st = nb_set_error(NB_ERR_NOMEM, "out of memory");
            goto fail;
        }
    } else if (st != NB_ERR_NOT_FOUND) {
        goto fail;
    }
    nb_clear_error();
    if ((st = tok_finalize(t, name))) goto fail;
    snprintf(t->desc, sizeof t->desc, "%s (GGUF %s%s%s)",
             algo == NB_TOK_SPM ? "spm" : "bpe-byte-level", model, pre ? ", pre " : "",
             pre ? pre : "");
    *out = t;
    return NB_OK;
fail:
    nb_tokenizer_free(t);
    return nb_wrap_error(st, "%s: tokenizer: ", name);
}

/* ---------------------------------------------------------------- llama2.c */

/* Common setup of the SentencePiece-family loaders once pieces and types are set. */
static enum nb_status spm_setup(struct nb_tokenizer *t, const char *name)
{
    t->byte_fallback = 1;
    t->strip_after_bos = t->spm_dummy_prefix;
    t->norm[t->n_norm++] = (struct norm_op){.kind = NORM_SPM_PREFIX};
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->type[id] == NB_TOKTYPE_CONTROL || t->type[id] == NB_TOKTYPE_USER_DEFINED) {
            enum nb_status st = tok_add_added(t, id);
            if (st) return st;
        }
    return tok_finalize(t, name);
}

enum nb_status nb_tokenizer_load_llama2c_mem(struct nb_tokenizer **out, const void *data,
                                             size_t size, const char *path, int n_vocab)
{
    enum nb_status st;
    struct nb_tokenizer *t = NULL;
    char *tmp = NULL;
    *out = NULL;
    const uint8_t *p = data;
    size_t pos = 4;
    if (size < 4) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: too short for a llama2.c tokenizer", path);
        goto fail;
    }
    /* Count the tokens first when the caller does not know. */
    int32_t count = 0;
    for (size_t q = 4; q < size; count++) {
        int32_t len;
        if (size - q < 8) break;
        memcpy(&len, p + q + 4, 4);
        if (len < 0 || (size_t)len > size - q - 8) break;
        q += 8 + (size_t)len;
        if (n_vocab > 0 && count + 1 == n_vocab) {
            count++;
            break;
        }
    }
    if (n_vocab > 0 && count < n_vocab) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: holds %d tokens, the model needs %d", path, count,
                          n_vocab);
        goto fail;
    }
    if (count < 3) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: only %d tokens", path, count);
        goto fail;
    }
    if ((st = tok_new(&t, NB_TOK_SPM, count))) goto fail;
    tmp = malloc(size * 3 + 1);
    if (!tmp) {
        st = nb_set_error(NB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t id = 0; id < count; id++) {
        float score;
        int32_t len;
        memcpy(&score, p + pos, 4);
        memcpy(&len, p + pos + 4, 4);
        const char *s = (const char *)p + pos + 8;
        pos += 8 + (size_t)len;
        /* llama2.c's export writes '▁' as ' ' and BOS/EOS as "\n<s>\n", "\n</s>\n". */
        if (len >= 2 && s[0] == '\n' && s[len - 1] == '\n') {
            s++;
            len -= 2;
        }
        size_t k = 0;
        for (int32_t i = 0; i < len; i++) {
            if (s[i] == ' ') {
                memcpy(tmp + k, "\xe2\x96\x81", 3);
                k += 3;
            } else {
                tmp[k++] = s[i];
            }
        }
        if ((st = tok_set_piece(t, id, tmp, k))) goto fail;
        t->score[id] = score;
        unsigned v;
        char c;
        if (k == 6 && sscanf(tmp, "<0x%2x%c", &v, &c) == 2 && c == '>')
            t->type[id] = NB_TOKTYPE_BYTE;
    }
    t->type[0] = NB_TOKTYPE_UNKNOWN;
    t->type[1] = t->type[2] = NB_TOKTYPE_CONTROL;
    t->unk = 0;
    t->bos = 1;
    t->eos = 2;
    t->add_bos = 1;
    t->spm_dummy_prefix = 1;
    if ((st = tok_build_index(t, path))) goto fail;
    if ((st = spm_setup(t, path))) goto fail;
    snprintf(t->desc, sizeof t->desc, "spm (llama2.c tokenizer.bin)");
    free(tmp);
    *out = t;
    return NB_OK;
fail:
    free(tmp);
    nb_tokenizer_free(t);
    return st;
}

enum nb_status nb_tokenizer_load_llama2c(struct nb_tokenizer **out, const char *path, int n_vocab)
{
    struct nb_mapped_file f = {0};
    *out = NULL;
    enum nb_status st = nb_file_map(&f, path);
    if (st) return st;
    st = nb_tokenizer_load_llama2c_mem(out, f.data, f.size, path, n_vocab);
    nb_file_unmap(&f);
    return st;
}

/* ---------------------------------------------------------------- SentencePiece protobuf */

struct pb {
    const uint8_t *p, *end;
};

static int pb_varint(struct pb *b, uint64_t *v)
{
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (b->p >= b->end) return 0;
        uint8_t c = *b->p++;
        r |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

/* Next field: number, wire type, and for type 2 the bytes, for 0 the value, for 5 the
 * raw 4 bytes in *v. Returns 0 at the end, -1 on a malformed message. */
static int pb_field(struct pb *b, uint32_t *field, int *wt, uint64_t *v, struct pb *sub)
{
    uint64_t key;
    if (b->p >= b->end) return 0;
    if (!pb_varint(b, &key)) return -1;
    *field = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, v) ? 1 : -1;
    case 1:
        if (b->end - b->p < 8) return -1;
        b->p += 8;
        return 1;
    case 2:
        if (!pb_varint(b, v) || *v > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + *v;
        b->p += *v;
        return 1;
    case 5:
        if (b->end - b->p < 4) return -1;
        uint32_t u;
        memcpy(&u, b->p, 4);
        *v = u;
        b->p += 4;
        return 1;
    default: return -1;
    }
}

enum nb_status nb_tokenizer_load_spm_model(struct nb_tokenizer **out, const void *data, size_t size,
                                           const char *name)
{
    enum nb_status st = NB_OK;
    struct nb_tokenizer *t = NULL;
    struct pb b = {data, (const uint8_t *)data + size}, sub;
    uint32_t field;
    int wt, r;
    uint64_t v;
    int32_t n = 0;
    int model_type = 1, byte_fallback = 0, dummy = 1, extra_ws = 1;
    int64_t unk = 0, bos = 1, eos = 2;
    char norm_name[64] = "";
    size_t charsmap = 0;
    *out = NULL;
    /* Pass 1: count pieces, read the specs. */
    while ((r = pb_field(&b, &field, &wt, &v, &sub)) > 0) {
        if (field == 1 && wt == 2) {
            n++;
        } else if (field == 2 && wt == 2) { /* TrainerSpec */
            struct pb s2 = sub, x;
            while ((r = pb_field(&s2, &field, &wt, &v, &x)) > 0) {
                if (wt != 0) continue;
                if (field == 3) model_type = (int)v;
                if (field == 35) byte_fallback = v != 0;
                if (field == 40) unk = (int32_t)v;
                if (field == 41) bos = (int32_t)v;
                if (field == 42) eos = (int32_t)v;
            }
            if (r < 0) break;
        } else if (field == 3 && wt == 2) { /* NormalizerSpec */
            struct pb s2 = sub, x;
            while ((r = pb_field(&s2, &field, &wt, &v, &x)) > 0) {
                if (field == 1 && wt == 2 && v < sizeof norm_name) {
                    memcpy(norm_name, x.p, v);
                    norm_name[v] = '\0';
                }
                if (field == 2 && wt == 2) charsmap = v;
                if (field == 3 && wt == 0) dummy = v != 0;
                if (field == 4 && wt == 0) extra_ws = v != 0;
            }
            if (r < 0) break;
        }
    }
    if (r < 0) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: malformed SentencePiece model (protobuf)", name);
        goto fail;
    }
    if (n == 0) {
        st = nb_set_error(NB_ERR_FORMAT, "%s: SentencePiece model without pieces", name);
        goto fail;
    }
    if (model_type != 2) {
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "%s: SentencePiece model type %d is not supported (only BPE = 2)", name,
                          model_type);
        goto fail;
    }
    if (charsmap && strcmp(norm_name, "identity")) {
        st = nb_set_error(NB_ERR_UNSUPPORTED,
                          "%s: SentencePiece normalizer '%s' (precompiled charsmap) is not "
                          "supported",
                          name, norm_name);
        goto fail;
    }
    if ((st = tok_new(&t, NB_TOK_SPM, n))) goto fail;
    b = (struct pb){data, (const uint8_t *)data + size};
    int32_t id = 0;
    while ((r = pb_field(&b, &field, &wt, &v, &sub)) > 0) {
        if (field != 1 || wt != 2) continue;
        struct pb x;
        const uint8_t *ps = NULL;
        size_t pl = 0;
        float score = 0;
        int type = NB_TOKTYPE_NORMAL;
        while ((r = pb_field(&sub, &field, &wt, &v, &x)) > 0) {
            if (field == 1 && wt == 2) {
                ps = x.p;
                pl = (size_t)v;
            } else if (field == 2 && wt == 5) {
                uint32_t u = (uint32_t)v;
                memcpy(&score, &u, 4);
            } else if (field == 3 && wt == 0) {
                type = (int)v;
            }
        }
        if (r < 0 || !ps) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: piece %d: malformed or without text", name,
                              (int)id);
            goto fail;
        }
        if (type < NB_TOKTYPE_NORMAL || type > NB_TOKTYPE_BYTE) {
            st = nb_set_error(NB_ERR_FORMAT, "%s: piece %d has type %d", name, (int)id, type);
            goto fail;
        }
        if ((st = tok_set_piece(t, id, (const char *)ps, pl))) goto fail;
        t->score[id] = score;
        t->type[id] = (uint8_t)type;
        id++;
    }
    if ((st = tok_build_index(t, name))) goto fail;
    t->unk = unk >= 0 && unk < n ? (int32_t)unk : -1;
    t->bos = bos >= 0 && bos < n ? (int32_t)bos : -1;
    t->eos = eos >= 0 && eos < n ? (int32_t)eos : -1;
    t->add_bos = 1;
    t->spm_dummy_prefix = dummy;
    t->spm_remove_extra_ws = extra_ws;
    (void)byte_fallback; /* <0xNN> pieces are used whenever the model has them */
    if ((st = spm_setup(t, name))) goto fail;
    snprintf(t->desc, sizeof t->desc, "spm (SentencePiece model)");
    *out = t;
    return NB_OK;
fail:
    nb_tokenizer_free(t);
    return st;
}

/* ---------------------------------------------------------------- by path */

static int is_file(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISREG(s.st_mode);
}
static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

enum nb_status nb_tokenizer_load_source(struct nb_tokenizer **out, const struct nb_source *src)
{
    enum nb_status st;
    const char *path = src->path;
    *out = NULL;
    if (src->kind == NB_FILE_DIR || ends_with(path, ".json") || ends_with(path, ".model"))
        return nb_tokenizer_load_hf(out, path);
    if (src->kind == NB_FILE_NIB) /* tokenizer/ knows no .nib: runtime/model_tokenizer.h does */
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s: a packed .nib: its embedded tokenizer is read by "
                            "nb_tokenizer_for_source",
                            path);
    if (src->kind == NB_FILE_GGUF) return nb_tokenizer_load_gguf(out, src->gguf);
    char p[4096];
    if ((st = nb_tokenizer_llama2c_path(path, p, sizeof p))) return st;
    return nb_tokenizer_load_llama2c(out, p, 0);
}

enum nb_status nb_tokenizer_llama2c_path(const char *model_path, char *out, size_t size)
{
    size_t n = strlen(model_path);
    if (n + 16 > size) return nb_set_error(NB_ERR_INVALID_ARG, "%s: path too long", model_path);
    memcpy(out, model_path, n + 1);
    if (ends_with(out, ".tok.bin")) return NB_OK; /* given the tokenizer itself */
    if (ends_with(out, ".bin")) out[n - 4] = '\0';
    strcat(out, ".tok.bin");
    if (is_file(out)) return NB_OK;
    memcpy(out, model_path, n + 1);
    char *slash = strrchr(out, '/');
    strcpy(slash ? slash + 1 : out, "tokenizer.bin");
    if (is_file(out)) return NB_OK;
    return nb_set_error(NB_ERR_NOT_FOUND,
                        "%s: no tokenizer found for this model (looked for %s.tok.bin-style "
                        "and tokenizer.bin beside it)",
                        model_path, model_path);
}
