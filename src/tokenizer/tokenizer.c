/* tokenizer/tokenizer.c — the tokenizer object: vocabulary index, added-token trie,
 * normalizer and pre-tokenizer steps, and nb_tokenize. Loaders (tok_load_*.c) fill
 * it; tok_model.c does the merging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "tokenizer/tok_internal.h"

/* ---------------------------------------------------------------- building */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

enum nb_status tok_new(struct nb_tokenizer **out, enum nb_tok_algo algo, int32_t n_vocab)
{
    *out = NULL;
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return nb_set_error(NB_ERR_FORMAT, "tokenizer: vocabulary of %d tokens", (int)n_vocab);
    struct nb_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
    nb_arena_init(&t->arena, 1 << 20);
    t->algo = algo;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->eot = t->unk = -1;
    size_t n = (size_t)n_vocab;
    t->piece = nb_arena_alloc(&t->arena, n * sizeof *t->piece);
    t->piece_len = nb_arena_alloc(&t->arena, n * sizeof *t->piece_len);
    t->score = nb_arena_alloc(&t->arena, n * sizeof *t->score);
    t->type = nb_arena_alloc(&t->arena, n);
    t->flags = nb_arena_alloc(&t->arena, n);
    t->text = nb_arena_alloc(&t->arena, n * sizeof *t->text);
    t->text_len = nb_arena_alloc(&t->arena, n * sizeof *t->text_len);
    if (!t->piece || !t->piece_len || !t->score || !t->type || !t->flags || !t->text ||
        !t->text_len) {
        nb_tokenizer_free(t);
        return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
    }
    memset(t->type, NB_TOKTYPE_NORMAL, n);
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    *out = t;
    return NB_OK;
}

enum nb_status tok_set_piece(struct nb_tokenizer *t, int32_t id, const char *s, size_t len)
{
    if (id < 0 || id >= t->n_vocab)
        return nb_set_error(NB_ERR_FORMAT, "token id %d out of range [0, %d)", (int)id,
                            (int)t->n_vocab);
    if (len > (1u << 20)) return nb_set_error(NB_ERR_FORMAT, "token %d: piece too long", (int)id);
    char *p = nb_arena_alloc(&t->arena, len + 1);
    if (!p) return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(p, s, len);
    p[len] = '\0';
    t->piece[id] = p;
    t->piece_len[id] = (uint32_t)len;
    if ((uint32_t)len > t->max_piece_len) t->max_piece_len = (uint32_t)len;
    return NB_OK;
}

int32_t tok_lookup(const struct nb_tokenizer *t, const char *s, size_t len)
{
    if (!t->hash) return -1;
    uint32_t h = hash_bytes(s, len) & t->hash_mask;
    for (;;) {
        uint32_t v = t->hash[h];
        if (!v) return -1;
        int32_t id = (int32_t)(v - 1);
        if (t->piece_len[id] == len && !memcmp(t->piece[id], s, len)) return id;
        h = (h + 1) & t->hash_mask;
    }
}

enum nb_status tok_build_index(struct nb_tokenizer *t, const char *name)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab * 2u)
        cap <<= 1;
    t->hash = nb_arena_alloc(&t->arena, (size_t)cap * sizeof *t->hash);
    if (!t->hash) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    t->hash_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!t->piece[id])
            return nb_set_error(NB_ERR_FORMAT, "%s: no token has id %d (vocabulary of %d)", name,
                                (int)id, (int)t->n_vocab);
        if (!t->piece_len[id]) continue;                                  /* a hole in the ids */
        if (tok_lookup(t, t->piece[id], t->piece_len[id]) >= 0) continue; /* first id wins */
        uint32_t h = hash_bytes(t->piece[id], t->piece_len[id]) & t->hash_mask;
        while (t->hash[h])
            h = (h + 1) & t->hash_mask;
        t->hash[h] = (uint32_t)id + 1;
    }
    return NB_OK;
}

enum nb_status tok_alloc_merges(struct nb_tokenizer *t, size_t n_merges)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n_merges * 2)
        cap <<= 1;
    if (cap > (1ull << 28)) return nb_set_error(NB_ERR_FORMAT, "too many merges (%zu)", n_merges);
    t->merges = nb_arena_alloc(&t->arena, cap * sizeof *t->merges);
    if (!t->merges) return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
    t->merge_mask = cap - 1;
    return NB_OK;
}

static uint64_t mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

enum nb_status tok_add_merge(struct nb_tokenizer *t, int32_t left, int32_t right, int32_t result,
                             int32_t rank)
{
    uint64_t key = ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)(right + 1);
    uint64_t h = mix64(key) & t->merge_mask;
    for (uint64_t probes = 0; t->merges[h].key; probes++) {
        if (t->merges[h].key == key) return NB_OK;
        if (probes > t->merge_mask) return nb_set_error(NB_ERR_INTERNAL, "merge table full");
        h = (h + 1) & t->merge_mask;
    }
    t->merges[h].key = key;
    t->merges[h].rank = rank;
    t->merges[h].result = result;
    return NB_OK;
}

/* Rank and result of merging (left, right); 0 if there is no such merge. */
int tok_find_merge(const struct nb_tokenizer *t, int32_t left, int32_t right, int32_t *rank,
                   int32_t *result);
int tok_find_merge(const struct nb_tokenizer *t, int32_t left, int32_t right, int32_t *rank,
                   int32_t *result)
{
    uint64_t key = ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)(right + 1);
    uint64_t h = mix64(key) & t->merge_mask;
    for (;;) {
        const struct merge_slot *m = &t->merges[h];
        if (!m->key) return 0;
        if (m->key == key) {
            *rank = m->rank;
            *result = m->result;
            return 1;
        }
        h = (h + 1) & t->merge_mask;
    }
}

static int32_t trie_new_node(struct nb_tokenizer *t, uint8_t byte)
{
    if (t->n_trie == t->cap_trie) {
        int32_t cap = t->cap_trie ? t->cap_trie * 2 : 256;
        struct trie_node *n = realloc(t->trie, (size_t)cap * sizeof *n);
        if (!n) return -1;
        t->trie = n;
        t->cap_trie = cap;
    }
    struct trie_node *n = &t->trie[t->n_trie];
    n->child = n->sibling = n->id = -1;
    n->byte = byte;
    return t->n_trie++;
}

enum nb_status tok_add_added(struct nb_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab || !t->piece[id] || !t->piece_len[id]) return NB_OK;
    if (!t->n_trie && trie_new_node(t, 0) < 0) goto oom;
    int32_t node = 0;
    const uint8_t *s = (const uint8_t *)t->piece[id];
    for (uint32_t i = 0; i < t->piece_len[id]; i++) {
        int32_t c = t->trie[node].child;
        while (c >= 0 && t->trie[c].byte != s[i])
            c = t->trie[c].sibling;
        if (c < 0) {
            c = trie_new_node(t, s[i]);
            if (c < 0) goto oom;
            t->trie[c].sibling = t->trie[node].child;
            t->trie[node].child = c;
        }
        node = c;
    }
    if (t->trie[node].id < 0) t->trie[node].id = id;
    t->flags[id] |= TF_ADDED;
    return NB_OK;
oom:
    return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
}

enum nb_status tok_compile_regex(pcre2_code **out, const char *pattern, const char *name)
{
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                         &off, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return nb_set_error(NB_ERR_FORMAT, "%s: pre-tokenizer regex at offset %zu: %s", name,
                            (size_t)off, (const char *)msg);
    }
    (void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    return NB_OK;
}

uint32_t tok_byte_to_cp(uint8_t b)
{
    /* Printable bytes stand for themselves; the 68 others, in byte order, become
     * U+0100.. : 0-32 -> 256-288, 127-160 -> 289-322, 173 -> 323. */
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 289u + (uint32_t)(b - 127);
    if (b == 173) return 323;
    return b;
}

static const char *const k_eog_pieces[] = {
    "<|im_end|>",
    "<|eot_id|>",
    "<end_of_turn>",
    "<|end|>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<|END_OF_TURN_TOKEN|>",
    "<|return|>",
    "<|call|>",
    "<｜end▁of▁sentence｜>",
};

/* Decoded bytes of token id. */
static enum nb_status make_text(struct nb_tokenizer *t, int32_t id, int16_t *unbyte)
{
    const char *p = t->piece[id];
    uint32_t n = t->piece_len[id];
    char *o = nb_arena_alloc(&t->arena, (size_t)n + 1);
    if (!o) return nb_set_error(NB_ERR_NOMEM, "tokenizer: out of memory");
    uint32_t k = 0;
    if (t->byte_level && (t->flags[id] & TF_ADDED || t->type[id] == NB_TOKTYPE_CONTROL)) {
        /* byte-level decoders leave added tokens as written */
        memcpy(o, p, n);
        k = n;
    } else if (t->type[id] == NB_TOKTYPE_BYTE && n == 6 && !memcmp(p, "<0x", 3) && p[5] == '>') {
        unsigned v;
        if (sscanf(p + 3, "%2x", &v) == 1) {
            o[k++] = (char)v;
        } else {
            memcpy(o, p, n);
            k = n;
        }
    } else if (t->byte_level) {
        for (uint32_t i = 0; i < n;) {
            uint32_t cp = 0x110000; /* left as is for invalid UTF-8: its bytes are copied */
            int bad, l = tok_utf8_next((const uint8_t *)p + i, n - i, &cp, &bad);
            if (!l) l = bad;
            if (cp < 324 && unbyte[cp] >= 0) {
                o[k++] = (char)unbyte[cp];
            } else {
                memcpy(o + k, p + i, (size_t)l);
                k += (uint32_t)l;
            }
            i += (uint32_t)l;
        }
    } else {
        for (uint32_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(p + i, "\xe2\x96\x81", 3)) {
                o[k++] = ' ';
                i += 3;
            } else {
                o[k++] = p[i++];
            }
        }
    }
    o[k] = '\0';
    t->text[id] = o;
    t->text_len[id] = k;
    return NB_OK;
}

enum nb_status tok_finalize(struct nb_tokenizer *t, const char *name)
{
    enum nb_status st;
    int16_t unbyte[324];
    for (int i = 0; i < 324; i++)
        unbyte[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tok_byte_to_cp((uint8_t)b);
        unbyte[cp] = (int16_t)b;
        char buf[8];
        if (t->byte_level) {
            int l = tok_utf8_put(cp, buf);
            t->byte_id[b] = tok_lookup(t, buf, (size_t)l);
        } else {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            int32_t id = tok_lookup(t, buf, 6);
            t->byte_id[b] = id;
            if (id >= 0 && t->algo == NB_TOK_BPE) t->type[id] = NB_TOKTYPE_BYTE;
        }
    }
    int ids[3] = {t->bos, t->eos, t->eot};
    const char *what[3] = {"BOS", "EOS", "EOT"};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= t->n_vocab)
            return nb_set_error(NB_ERR_FORMAT, "%s: %s id %d out of range [0, %d)", name, what[i],
                                ids[i], (int)t->n_vocab);
    if (t->unk >= t->n_vocab) t->unk = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if ((st = make_text(t, id, unbyte))) return st;
        if (t->type[id] == NB_TOKTYPE_CONTROL) t->flags[id] |= TF_SPECIAL;
    }
    for (size_t i = 0; i < sizeof k_eog_pieces / sizeof k_eog_pieces[0]; i++) {
        int32_t id = tok_lookup(t, k_eog_pieces[i], strlen(k_eog_pieces[i]));
        if (id >= 0 && (t->flags[id] & (TF_SPECIAL | TF_ADDED))) t->flags[id] |= TF_EOG;
    }
    if (t->eos >= 0) t->flags[t->eos] |= TF_EOG;
    if (t->eot >= 0) t->flags[t->eot] |= TF_EOG;
    if (t->eot < 0) {
        const char *eot_names[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"};
        for (int i = 0; i < 4 && t->eot < 0; i++) {
            int32_t id = tok_lookup(t, eot_names[i], strlen(eot_names[i]));
            if (id >= 0 && (t->flags[id] & TF_EOG)) t->eot = id;
        }
    }
    return NB_OK;
}

void nb_tokenizer_free(struct nb_tokenizer *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_pre; i++)
        pcre2_code_free(t->pre[i].re);
    free(t->trie);
    free(t->chat_template);
    nb_arena_free(&t->arena);
    free(t);
}

/* ---------------------------------------------------------------- properties */

enum nb_tok_algo nb_tokenizer_algo(const struct nb_tokenizer *t)
{
    return t->algo;
}
int nb_tokenizer_n_vocab(const struct nb_tokenizer *t)
{
    return t->n_vocab;
}
int nb_tokenizer_bos(const struct nb_tokenizer *t)
{
    return t->bos;
}
int nb_tokenizer_eos(const struct nb_tokenizer *t)
{
    return t->eos;
}
int nb_tokenizer_eot(const struct nb_tokenizer *t)
{
    return t->eot;
}
const char *nb_tokenizer_chat_template(const struct nb_tokenizer *t)
{
    return t->chat_template;
}
const char *nb_tokenizer_desc(const struct nb_tokenizer *t)
{
    return t->desc;
}

int nb_tokenizer_adds_bos(const struct nb_tokenizer *t)
{
    if (t->n_prefix) return t->prefix_ids[0] == t->bos;
    return t->add_bos && t->bos >= 0;
}

int nb_tokenizer_is_eog(const struct nb_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->flags[id] & TF_EOG);
}

int nb_tokenizer_is_special(const struct nb_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->flags[id] & TF_SPECIAL);
}

const char *nb_token_piece(const struct nb_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->piece[id] : NULL;
}

int32_t nb_token_lookup(const struct nb_tokenizer *t, const char *piece, size_t len)
{
    return tok_lookup(t, piece, len);
}

/* ---------------------------------------------------------------- encoding */

enum nb_status tok_buf_push(struct tok_buf *b, int32_t v)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *p = realloc(b->v, cap * sizeof *p);
        if (!p) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
        b->v = p;
        b->cap = cap;
    }
    b->v[b->n++] = v;
    return NB_OK;
}

struct span {
    size_t off, len;
};
struct spans {
    struct span *v;
    size_t n, cap;
};

static enum nb_status spans_push(struct spans *s, size_t off, size_t len)
{
    if (!len) return NB_OK;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct span *p = realloc(s->v, cap * sizeof *p);
        if (!p) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = (struct span){off, len};
    return NB_OK;
}

/* Apply one split op to every span of `in`, appending to `out`. */
static enum nb_status split_spans(const struct pre_op *op, const char *text, const struct spans *in,
                                  struct spans *out, pcre2_match_data *md)
{
    enum nb_status st;
    for (size_t k = 0; k < in->n; k++) {
        size_t off = in->v[k].off, len = in->v[k].len, pos = 0, prev = 0;
        const char *s = text + off;
        while (pos <= len) {
            size_t ms, me;
            if (op->kind == PRE_SPLIT_REGEX) {
                int rc = pcre2_match(op->re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0)
                    return nb_set_error(NB_ERR_INTERNAL, "pre-tokenizer regex error %d", rc);
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                ms = ov[0];
                me = ov[1];
            } else {
                const char *hit =
                    pos < len ? memmem(s + pos, len - pos, op->str, op->str_len) : NULL;
                if (!hit) break;
                ms = (size_t)(hit - s);
                me = ms + op->str_len;
            }
            if (op->invert) {
                if ((st = spans_push(out, off + ms, me - ms))) return st;
            } else {
                switch (op->behavior) {
                case SPLIT_ISOLATED:
                    if ((st = spans_push(out, off + prev, ms - prev))) return st;
                    if ((st = spans_push(out, off + ms, me - ms))) return st;
                    prev = me;
                    break;
                case SPLIT_REMOVED:
                    if ((st = spans_push(out, off + prev, ms - prev))) return st;
                    prev = me;
                    break;
                case SPLIT_MERGED_PREV:
                    if ((st = spans_push(out, off + prev, me - prev))) return st;
                    prev = me;
                    break;
                case SPLIT_MERGED_NEXT:
                    if ((st = spans_push(out, off + prev, ms - prev))) return st;
                    prev = ms;
                    break;
                }
            }
            if (me > ms) {
                pos = me;
            } else { /* empty match: step one character */
                pos = me + 1;
                while (pos < len && ((uint8_t)s[pos] & 0xC0) == 0x80)
                    pos++;
            }
        }
        if (!op->invert && (st = spans_push(out, off + prev, len - prev))) return st;
    }
    return NB_OK;
}

/* Replace every `from` by `to` in s[0..n); *out malloc'd. */
static enum nb_status replace_all(const char *s, size_t n, const char *from, size_t from_len,
                                  const char *to, size_t to_len, char **out, size_t *out_len)
{
    size_t count = 0;
    for (const char *p = s; from_len && (p = memmem(p, (size_t)(s + n - p), from, from_len));
         p += from_len)
        count++;
    size_t cap = n + count * to_len + 1;
    char *o = malloc(cap);
    if (!o) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (from_len && i + from_len <= n && !memcmp(s + i, from, from_len)) {
            memcpy(o + k, to, to_len);
            k += to_len;
            i += from_len;
        } else {
            o[k++] = s[i++];
        }
    }
    o[k] = '\0';
    *out = o;
    *out_len = k;
    return NB_OK;
}

/* SentencePiece normalization: optional whitespace squeeze, ' ' -> '▁', dummy prefix. */
static enum nb_status spm_escape(const struct nb_tokenizer *t, const char *s, size_t n, char **out,
                                 size_t *out_len)
{
    char *o = malloc(n * 3 + 4);
    if (!o) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
    size_t k = 0, i = 0, end = n;
    if (t->spm_remove_extra_ws) {
        while (i < end && s[i] == ' ')
            i++;
        while (end > i && s[end - 1] == ' ')
            end--;
    }
    if (t->spm_dummy_prefix && i < end) {
        memcpy(o, "\xe2\x96\x81", 3);
        k = 3;
    }
    for (; i < end; i++) {
        if (s[i] == ' ') {
            if (t->spm_remove_extra_ws && i > 0 && s[i - 1] == ' ') continue;
            memcpy(o + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = '\0';
    *out = o;
    *out_len = k;
    return NB_OK;
}

struct enc_state {
    struct tok_scratch *scratch;
    pcre2_match_data *md;
    struct spans a, b;
    size_t max_tokens; /* 0: any number; else more is NB_ERR_RANGE, found early */
};

/* More than es->max_tokens already, or certainly once `n` more normalized bytes are
 * encoded (no token covers more than the longest piece): a text far over the limit is
 * refused before the merges, whose memory grows with the text. */
static enum nb_status over_limit(const struct nb_tokenizer *t, const struct enc_state *es,
                                 const struct tok_buf *out, size_t n)
{
    if (!es->max_tokens) return NB_OK;
    size_t at_least = out->n + (t->max_piece_len ? (n + t->max_piece_len - 1) / t->max_piece_len : n);
    if (at_least <= es->max_tokens) return NB_OK;
    return nb_set_error(NB_ERR_RANGE, "tokenize: more than %zu tokens", es->max_tokens);
}

/* Normalize, pre-tokenize and encode one section of text (no added tokens in it). */
static enum nb_status encode_section(const struct nb_tokenizer *t, struct enc_state *es,
                                     const char *s, size_t n, struct tok_buf *out)
{
    enum nb_status st = NB_OK;
    char *cur = NULL;
    size_t cur_len = n;
    if (!n) return NB_OK;
    for (int i = 0; i < t->n_norm; i++) {
        const struct norm_op *op = &t->norm[i];
        const char *src = cur ? cur : s;
        char *next = NULL;
        size_t next_len = 0;
        switch (op->kind) {
        case NORM_NFC: st = tok_nfc(src, cur_len, &next, &next_len); break;
        case NORM_REPLACE:
            st = replace_all(src, cur_len, op->from, op->from_len, op->to, op->to_len, &next,
                             &next_len);
            break;
        case NORM_PREPEND:
            next = malloc(cur_len + op->to_len + 1);
            if (!next) {
                st = nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
                break;
            }
            memcpy(next, op->to, op->to_len);
            memcpy(next + op->to_len, src, cur_len);
            next_len = cur_len + op->to_len;
            next[next_len] = '\0';
            break;
        case NORM_SPM_PREFIX: st = spm_escape(t, src, cur_len, &next, &next_len); break;
        }
        if (st) goto fail;
        free(cur);
        cur = next;
        cur_len = next_len;
    }
    const char *txt = cur ? cur : s;
    if ((st = over_limit(t, es, out, cur_len))) goto fail;
    es->a.n = 0;
    if ((st = spans_push(&es->a, 0, cur_len))) goto fail;
    for (int i = 0; i < t->n_pre; i++) {
        es->b.n = 0;
        if ((st = split_spans(&t->pre[i], txt, &es->a, &es->b, es->md))) goto fail;
        struct spans tmp = es->a;
        es->a = es->b;
        es->b = tmp;
    }
    for (size_t k = 0; k < es->a.n; k++) {
        st = tok_model_encode(t, es->scratch, txt + es->a.v[k].off, es->a.v[k].len, out);
        if (st || (st = over_limit(t, es, out, 0))) goto fail;
    }
fail:
    free(cur);
    return st;
}

/* nb_tokenize and nb_tokenize_marked: special tokens match where parse_special says,
 * and with `untrusted`, only over bytes it does not mark. */
static enum nb_status tokenize(const struct nb_tokenizer *t, const char *text, size_t len,
                               int add_special, int parse_special, const uint8_t *untrusted,
                               size_t max_tokens, int32_t **ids, int *n_ids)
{
    enum nb_status st = NB_OK;
    struct tok_buf out = {0};
    struct enc_state es = {.max_tokens = max_tokens};
    char *buf = NULL;
    size_t n = 0;
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return nb_set_error(NB_ERR_INVALID_ARG, "tokenize: NULL text");
    if (len > (size_t)1 << 30) return nb_set_error(NB_ERR_INVALID_ARG, "tokenize: text > 1 GiB");
    if ((st = tok_utf8_sanitize(text ? text : "", len, &buf, &n))) goto fail;
    if (untrusted && (n != len || memcmp(buf, text, n))) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "tokenize: marked text is not valid UTF-8");
        goto fail;
    }
    if ((st = tok_scratch_new(&es.scratch))) goto fail;
    es.md = pcre2_match_data_create(4, NULL);
    if (!es.md) {
        st = nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
        goto fail;
    }
    if (add_special) {
        if (t->n_prefix) {
            for (int i = 0; i < t->n_prefix; i++)
                if ((st = tok_buf_push(&out, t->prefix_ids[i]))) goto fail;
        } else if (t->add_bos && t->bos >= 0) {
            if ((st = tok_buf_push(&out, t->bos))) goto fail;
        }
    }
    size_t sec = 0;
    for (size_t i = 0; i < n && t->n_trie;) {
        /* Longest added token starting at i. */
        int32_t node = 0, best = -1;
        size_t best_len = 0;
        int marked = 0; /* a byte of buf[i..j] is untrusted */
        for (size_t j = i; j < n; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != (uint8_t)buf[j])
                c = t->trie[c].sibling;
            if (c < 0) break;
            node = c;
            marked |= untrusted && untrusted[j];
            int32_t id = t->trie[c].id;
            if (id >= 0 && ((parse_special && !marked) || !(t->flags[id] & TF_SPECIAL))) {
                best = id;
                best_len = j + 1 - i;
            }
        }
        if (best < 0) {
            i++;
            continue;
        }
        if ((st = encode_section(t, &es, buf + sec, i - sec, &out))) goto fail;
        if ((st = tok_buf_push(&out, best)) || (st = over_limit(t, &es, &out, 0))) goto fail;
        i += best_len;
        sec = i;
    }
    if ((st = encode_section(t, &es, buf + sec, n - sec, &out))) goto fail;
    if (add_special) {
        if (t->n_prefix || t->n_suffix) {
            for (int i = 0; i < t->n_suffix; i++)
                if ((st = tok_buf_push(&out, t->suffix_ids[i]))) goto fail;
        } else if (t->add_eos && t->eos >= 0) {
            if ((st = tok_buf_push(&out, t->eos))) goto fail;
        }
    }
    if ((st = over_limit(t, &es, &out, 0))) goto fail;
    if (out.n > (size_t)INT32_MAX) {
        st = nb_set_error(NB_ERR_RANGE, "tokenize: too many tokens");
        goto fail;
    }
    if (!out.v) { /* never return NULL */
        if ((st = tok_buf_push(&out, 0))) goto fail;
        out.n = 0;
    }
    *ids = out.v;
    *n_ids = (int)out.n;
    out.v = NULL;
fail:
    free(out.v);
    free(buf);
    free(es.a.v);
    free(es.b.v);
    pcre2_match_data_free(es.md);
    tok_scratch_free(es.scratch);
    return st;
}

enum nb_status nb_tokenize(const struct nb_tokenizer *t, const char *text, size_t len,
                           int add_special, int parse_special, int32_t **ids, int *n_ids)
{
    return tokenize(t, text, len, add_special, parse_special, NULL, 0, ids, n_ids);
}

enum nb_status nb_tokenize_max(const struct nb_tokenizer *t, const char *text, size_t len,
                               int add_special, int parse_special, int max_tokens, int32_t **ids,
                               int *n_ids)
{
    return tokenize(t, text, len, add_special, parse_special, NULL,
                    max_tokens > 0 ? (size_t)max_tokens : 0, ids, n_ids);
}

enum nb_status nb_tokenize_marked(const struct nb_tokenizer *t, const char *text, size_t len,
                                  int add_special, const uint8_t *untrusted, int max_tokens,
                                  int32_t **ids, int *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    if (!untrusted) return nb_set_error(NB_ERR_INVALID_ARG, "tokenize: no marks");
    return tokenize(t, text, len, add_special, 1, untrusted,
                    max_tokens > 0 ? (size_t)max_tokens : 0, ids, n_ids);
}
