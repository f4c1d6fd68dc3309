/* tokenizer/tok_internal.h — the tokenizer's internals, shared by its .c files only.
 *
 * Encoding pipeline (nb_tokenize):
 *   1. invalid UTF-8 -> U+FFFD (WHATWG)
 *   2. added tokens are cut out of the raw text (longest match, leftmost first)
 *   3. each remaining section: normalizer ops (NFC, Replace, Prepend, SPM escaping)
 *   4. pre-tokenizer ops split it into words (regex splits through PCRE2)
 *   5. the model merges each word (SPM: by score; BPE: by rank) into ids
 *   6. BOS/EOS (post-processor or config)
 */
#ifndef NB_TOKENIZER_TOK_INTERNAL_H
#define NB_TOKENIZER_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/arena.h"
#include "tokenizer/tokenizer.h"

#define TOK_MAX_OPS 8

enum norm_op_kind { NORM_NFC = 1, NORM_REPLACE, NORM_PREPEND, NORM_SPM_PREFIX };
struct norm_op {
    enum norm_op_kind kind;
    const char *from, *to; /* REPLACE: literal from -> to; PREPEND: to */
    size_t from_len, to_len;
};

enum split_behavior { SPLIT_ISOLATED = 1, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT };
enum pre_op_kind { PRE_SPLIT_REGEX = 1, PRE_SPLIT_STRING };
struct pre_op {
    enum pre_op_kind kind;
    enum split_behavior behavior;
    int invert; /* the matches are the words (everything else dropped) */
    pcre2_code *re;
    const char *str; /* PRE_SPLIT_STRING */
    size_t str_len;
};

/* Node of the added-token trie: children in a sibling list. */
struct trie_node {
    int32_t child, sibling; /* node indices, -1 = none */
    int32_t id;             /* token ending here, -1 = none */
    uint8_t byte;
};

struct merge_slot {
    uint64_t key; /* (left id + 1) << 32 | (right id + 1); 0 = empty */
    int32_t rank, result;
};

struct nb_tokenizer {
    struct nb_arena arena;
    enum nb_tok_algo algo;
    char desc[96];
    int byte_level;       /* BPE pieces are byte-mapped (GPT-2 bytes_to_unicode) */
    int byte_fallback;    /* unknown characters become <0xNN> pieces */
    int ignore_merges;    /* BPE: a word that is a piece is taken whole */
    int fuse_unk;         /* consecutive unknowns become one <unk> */
    int spm_dummy_prefix; /* SPM: '▁' before the first section of text */
    int spm_remove_extra_ws;
    int strip_after_bos; /* decoding: drop one leading space after BOS */
    int add_bos, add_eos;
    int32_t bos, eos, eot, unk;
    int32_t prefix_ids[4], suffix_ids[4]; /* post-processor: added with add_special */
    int n_prefix, n_suffix;

    int32_t n_vocab;
    char **piece;        /* [n_vocab] NUL-terminated, arena */
    uint32_t *piece_len; /* [n_vocab] */
    uint32_t max_piece_len; /* the longest piece: no token covers more normalized bytes */
    float *score;        /* [n_vocab] SPM merge score */
    uint8_t *type;       /* [n_vocab] enum nb_tok_type */
    uint8_t *flags;      /* [n_vocab] TF_* */
    char **text;         /* [n_vocab] bytes the token decodes to */
    uint32_t *text_len;  /* [n_vocab] */

    uint32_t *hash; /* piece -> id + 1 (0 empty), open addressing */
    uint32_t hash_mask;
    struct merge_slot *merges; /* BPE (left, right) -> rank, result */
    uint64_t merge_mask;
    int32_t byte_id[256]; /* byte-level: id of the mapped byte; else id of <0xNN>; -1 */

    struct trie_node *trie; /* added tokens, matched in raw text */
    int32_t n_trie, cap_trie;

    struct norm_op norm[TOK_MAX_OPS];
    int n_norm;
    struct pre_op pre[TOK_MAX_OPS];
    int n_pre;

    char *chat_template;
};

enum {
    TF_SPECIAL = 1, /* skipped when decoding, matched only with parse_special */
    TF_EOG = 2,
    TF_ADDED = 4, /* matched in raw text as a whole */
};

/* ---- tokenizer.c: building a tokenizer (loaders call these in this order) ---- */
/* Allocate an empty tokenizer with room for n_vocab pieces. */
enum nb_status tok_new(struct nb_tokenizer **out, enum nb_tok_algo algo, int32_t n_vocab);
/* Set piece `id` (copied). Duplicates are allowed (the first id wins in lookups). */
enum nb_status tok_set_piece(struct nb_tokenizer *t, int32_t id, const char *s, size_t len);
/* After all pieces are set: build the lookup hash; a NULL piece is an error. */
enum nb_status tok_build_index(struct nb_tokenizer *t, const char *name);
/* Register merge (left, right) -> result with `rank`; a repeated pair keeps its first rank. */
enum nb_status tok_add_merge(struct nb_tokenizer *t, int32_t left, int32_t right, int32_t result,
                             int32_t rank);
enum nb_status tok_alloc_merges(struct nb_tokenizer *t, size_t n_merges);
/* Add an added token (matched as a whole in raw text). */
enum nb_status tok_add_added(struct nb_tokenizer *t, int32_t id);
/* Compile a split regex for the pre-tokenizer (PCRE2, UTF + UCP, JIT). */
enum nb_status tok_compile_regex(pcre2_code **out, const char *pattern, const char *name);
/* Finish: decoded texts, byte ids, EOG flags, description. */
enum nb_status tok_finalize(struct nb_tokenizer *t, const char *name);
int32_t tok_lookup(const struct nb_tokenizer *t, const char *s, size_t len);
/* GPT-2 bytes_to_unicode: the code point byte b is written as. */
uint32_t tok_byte_to_cp(uint8_t b);

/* ---- tok_model.c: the merge loops ---- */
struct tok_buf {
    int32_t *v;
    size_t n, cap;
};
enum nb_status tok_buf_push(struct tok_buf *b, int32_t v);
struct tok_scratch;
enum nb_status tok_scratch_new(struct tok_scratch **out);
void tok_scratch_free(struct tok_scratch *s);
/* Encode one word (after normalization and pre-tokenization) and append its ids. */
enum nb_status tok_model_encode(const struct nb_tokenizer *t, struct tok_scratch *s, const char *w,
                                size_t len, struct tok_buf *out);

/* ---- tok_unicode.c ---- */
/* Decode one code point at s[0..n): returns its length (1..4), or 0 for an invalid
 * sequence with *bad set to the length of the maximal invalid subpart (WHATWG). */
int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, int *bad);
int tok_utf8_put(uint32_t cp, char *out); /* returns bytes written (1..4) */
/* Copy with invalid sequences replaced by U+FFFD; *out malloc'd. */
enum nb_status tok_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len);
/* Unicode NFC of valid UTF-8; *out malloc'd. */
enum nb_status tok_nfc(const char *s, size_t n, char **out, size_t *out_len);

#endif
