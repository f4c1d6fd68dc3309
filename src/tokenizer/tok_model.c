/* tokenizer/tok_model.c — the merge loop shared by both algorithms.
 *
 * A word starts as one symbol per character (byte-level BPE: per byte). Candidate
 * merges of adjacent symbols sit in a binary heap ordered by key, then by the
 * position of the left symbol (leftmost first):
 *   SPM  key = -score of the merged piece (the piece must be in the vocabulary)
 *   BPE  key = rank of the pair in the merges list
 * Popped candidates are checked against the current symbols (both still there,
 * lengths unchanged) so stale entries are skipped. Each merge adds the two new
 * neighbour pairs. O(n log n) in the word length.
 *
 * Characters that end up as no piece: <0xNN> pieces when byte fallback is on (all
 * bytes of the character must exist), else the unknown token.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_find_merge(const struct nb_tokenizer *t, int32_t left, int32_t right, int32_t *rank,
                   int32_t *result);

struct sym {
    uint32_t off, len; /* bytes of the word; len 0 = merged away */
    int32_t id;        /* -1: not a piece */
    int32_t prev, next;
};

struct cand {
    float key;
    uint32_t left, right, llen, rlen, loff;
    int32_t result;
};

struct tok_scratch {
    struct sym *sym;
    size_t cap_sym;
    struct cand *heap;
    size_t n_heap, cap_heap;
    char *tmp;
    size_t cap_tmp;
};

enum nb_status tok_scratch_new(struct tok_scratch **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? NB_OK : nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
}

void tok_scratch_free(struct tok_scratch *s)
{
    if (!s) return;
    free(s->sym);
    free(s->heap);
    free(s->tmp);
    free(s);
}

static int cand_less(const struct cand *a, const struct cand *b)
{
    return a->key < b->key || (a->key == b->key && a->loff < b->loff);
}

static enum nb_status heap_push(struct tok_scratch *s, struct cand c)
{
    if (s->n_heap == s->cap_heap) {
        size_t cap = s->cap_heap ? s->cap_heap * 2 : 256;
        struct cand *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
        s->heap = h;
        s->cap_heap = cap;
    }
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return NB_OK;
}

static struct cand heap_pop(struct tok_scratch *s)
{
    struct cand top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!cand_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static int spm_usable(const struct nb_tokenizer *t, int32_t id)
{
    return id >= 0 && (t->type[id] == NB_TOKTYPE_NORMAL || t->type[id] == NB_TOKTYPE_USER_DEFINED);
}

/* Push the candidate merge of symbols l and r (if any). */
static enum nb_status try_pair(const struct nb_tokenizer *t, struct tok_scratch *s, const char *w,
                               int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return NB_OK;
    const struct sym *a = &s->sym[l], *b = &s->sym[r];
    struct cand c = {0};
    if (t->algo == NB_TOK_BPE) {
        int32_t rank, result;
        if (a->id < 0 || b->id < 0 || !tok_find_merge(t, a->id, b->id, &rank, &result))
            return NB_OK;
        c.key = (float)rank;
        c.result = result;
    } else {
        int32_t id = tok_lookup(t, w + a->off, a->len + b->len);
        if (!spm_usable(t, id)) return NB_OK;
        c.key = -t->score[id];
        c.result = id;
    }
    c.left = (uint32_t)l;
    c.right = (uint32_t)r;
    c.llen = a->len;
    c.rlen = b->len;
    c.loff = a->off;
    return heap_push(s, c);
}

static enum nb_status emit_unknown(const struct nb_tokenizer *t, const char *w, const struct sym *y,
                                   struct tok_buf *out, int *last_unk)
{
    enum nb_status st;
    if (t->byte_fallback) {
        int ok = 1;
        for (uint32_t i = 0; i < y->len; i++)
            if (t->byte_id[(uint8_t)w[y->off + i]] < 0) ok = 0;
        if (ok) {
            for (uint32_t i = 0; i < y->len; i++)
                if ((st = tok_buf_push(out, t->byte_id[(uint8_t)w[y->off + i]]))) return st;
            *last_unk = 0;
            return NB_OK;
        }
    }
    if (t->unk < 0) return NB_OK; /* nothing to stand for it: dropped */
    if (t->fuse_unk && *last_unk) return NB_OK;
    *last_unk = 1;
    return tok_buf_push(out, t->unk);
}

enum nb_status tok_model_encode(const struct nb_tokenizer *t, struct tok_scratch *s, const char *w,
                                size_t len, struct tok_buf *out)
{
    enum nb_status st;
    if (!len) return NB_OK;
    if (len > UINT32_MAX / 2) return nb_set_error(NB_ERR_INVALID_ARG, "tokenize: word too long");
    if (t->algo == NB_TOK_BPE && t->ignore_merges) {
        int32_t id;
        if (t->byte_level) {
            if (s->cap_tmp < len * 2 + 1) {
                char *p = realloc(s->tmp, len * 2 + 1);
                if (!p) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
                s->tmp = p;
                s->cap_tmp = len * 2 + 1;
            }
            size_t k = 0;
            for (size_t i = 0; i < len; i++)
                k += (size_t)tok_utf8_put(tok_byte_to_cp((uint8_t)w[i]), s->tmp + k);
            id = tok_lookup(t, s->tmp, k);
        } else {
            id = tok_lookup(t, w, len);
        }
        if (id >= 0) return tok_buf_push(out, id);
    }
    if (s->cap_sym < len) {
        struct sym *p = realloc(s->sym, len * sizeof *p);
        if (!p) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
        s->sym = p;
        s->cap_sym = len;
    }
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t l = 1;
        struct sym *y = &s->sym[n];
        if (t->byte_level) {
            y->id = t->byte_id[(uint8_t)w[i]];
        } else {
            while (i + l < len && ((uint8_t)w[i + l] & 0xC0) == 0x80)
                l++;
            y->id = tok_lookup(t, w + i, l);
            if (t->algo == NB_TOK_SPM && !spm_usable(t, y->id)) y->id = -1;
        }
        y->off = (uint32_t)i;
        y->len = (uint32_t)l;
        y->prev = n - 1;
        y->next = i + l < len ? n + 1 : -1;
        n++;
        i += l;
    }
    s->n_heap = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        if ((st = try_pair(t, s, w, i, i + 1))) return st;
    while (s->n_heap) {
        struct cand c = heap_pop(s);
        struct sym *a = &s->sym[c.left], *b = &s->sym[c.right];
        if (a->len != c.llen || b->len != c.rlen || a->next != (int32_t)c.right) continue;
        a->len += b->len;
        a->id = c.result;
        a->next = b->next;
        if (b->next >= 0) s->sym[b->next].prev = (int32_t)c.left;
        b->len = 0;
        if ((st = try_pair(t, s, w, a->prev, (int32_t)c.left))) return st;
        if ((st = try_pair(t, s, w, (int32_t)c.left, a->next))) return st;
    }
    int last_unk = 0;
    for (int32_t i = 0; i >= 0; i = s->sym[i].next) {
        const struct sym *y = &s->sym[i];
        if (y->id >= 0) {
            if ((st = tok_buf_push(out, y->id))) return st;
            last_unk = y->id == t->unk;
        } else if ((st = emit_unknown(t, w, y, out, &last_unk))) {
            return st;
        }
    }
    return NB_OK;
}
