/* runtime/constrain.h — constrained decoding: which tokens keep the output inside a small
 * grammar (the server's response_format and forced tool calls; nb_grammar and the
 * sampler's constraint stage: `nibble run --json-schema`).
 *
 * A grammar is a sequence of elements matched one after the other over the generated
 * bytes:
 *   literal   exact text ("<tool_call>\n{\"name\": \"")
 *   choice    one of a few texts, none a prefix of another (a tool's name and its quote)
 *   object    one JSON object (RFC 8259: objects, arrays, strings with escapes and valid
 *             UTF-8, numbers, true/false/null), at most NB_JSON_MAX_DEPTH containers
 *             deep, at most NB_JSON_MAX_WS whitespace bytes in a row, numbers of at most
 *             NB_JSON_MAX_NUM bytes (the model cannot pad or nest forever)
 *   schema    one JSON object that also keeps to a JSON Schema (struct nb_schema, the
 *             subset below); per alternative of the choice before it, or one for all
 * After the last element only an end-of-generation token is allowed.
 *
 * The schema subset (runtime/schema.c compiles it): `type` (a name or a list), `properties`
 * (written in the schema's order: a required one must come, an optional one may, so the
 * keys an object may take next are the ones up to its next required key),
 * `required`, `additionalProperties` (only the listed keys are ever written, so false and
 * true give the same outputs), `items`, `minItems`, `maxItems`, `enum` / `const` of scalars,
 * `anyOf` / `oneOf` whose alternatives differ in their JSON type (told apart by a value's
 * first byte), `$ref` to `#`, `#/$defs/NAME` or `#/definitions/NAME` (recursion allowed), and
 * annotations (title, description, ...). A value of a schema without constraints, and an
 * object without `properties`, are any JSON.
 *
 * The recogniser is a pushdown automaton over bytes whose whole state is a small struct
 * (struct nb_cons): a token is allowed when all of its bytes advance a copy of it. Tokens
 * are tried as the text they add to the output (struct nb_vocab_bytes: a special token
 * by its text). nb_cons_allows checks one token (the sampler's choice, the cheap path);
 * nb_cons_mask sets every disallowed logit to -inf (the fallback), skipping at once the
 * tokens whose first byte cannot come next.
 */
#ifndef NB_RUNTIME_CONSTRAIN_H
#define NB_RUNTIME_CONSTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

#define NB_JSON_MAX_DEPTH 32
#define NB_JSON_MAX_WS    48
#define NB_JSON_MAX_NUM   64
#define NB_GRAM_MAX    8

/* ---------------------------------------------------------------- schemas */

#define NB_SCHEMA_MAX_NODES 256
#define NB_SCHEMA_MAX_PROPS 64     /* properties of one object; enum values of one node */
#define NB_SCHEMA_FREE      0x7fff /* a node id: any JSON value */
#define NB_SCHEMA_NONE      0xffff /* a node id: no value (a class the schema refuses) */
#define NB_SCHEMA_INF       (1 << 24)

/* A JSON value's class, known from its first byte. */
enum nb_jclass {
    NB_JC_OBJ,
    NB_JC_ARR,
    NB_JC_STR,
    NB_JC_NUM,
    NB_JC_TRUE,
    NB_JC_FALSE,
    NB_JC_NULL,
    NB_JC_N
};

/* One schema node. A value starts in a node; its first byte's class picks the node that
 * reads it (target: the node itself, an anyOf alternative, NB_SCHEMA_FREE or
 * NB_SCHEMA_NONE). The reader is an enum (the value is one of enums), an object with
 * listed keys (obj), an array (arr), an integer (int_only) or any value of its class. */
struct nb_snode {
    uint16_t target[NB_JC_N];
    int cost[NB_JC_N]; /* bytes that finish a value of this reader and class, closing */
    int close;          /* the fewest over the classes of target: NB_SCHEMA_INF if none */
    uint8_t int_only, obj, arr;
    int n_props;
    char **keys;              /* [n_props] each key as JSON text with its quotes */
    uint16_t *pnode;          /* [n_props] each property's node */
    uint8_t *req;             /* [n_props] required */
    uint16_t items;           /* arr: the elements' node */
    int min_items, max_items; /* max -1: any */
    int n_enum;
    char **enums; /* [n_enum] each value as JSON text */
};

struct nb_schema {
    int n;
    struct nb_snode *nodes; /* [n], the root first */
};
/* Compile a JSON Schema (a cJSON object). NB_OK and *out; NB_ERR_UNSUPPORTED with a
 * message that names the keyword outside the subset (or the construct: anyOf alternatives
 * of one type, a $ref that is not local, a schema with no finite value); NB_ERR_NOMEM. */
struct cJSON;
enum nb_status nb_schema_compile(const struct cJSON *schema, struct nb_schema **out);
void nb_schema_free(struct nb_schema *s);

/* ---------------------------------------------------------------- the vocabulary */

enum nb_vtok_kind { NB_VTOK_TEXT, NB_VTOK_SPECIAL, NB_VTOK_EOG, NB_VTOK_EMPTY };

/* Each token's bytes as generated text: bytes[off[i] .. off[i+1]). */
struct nb_vocab_bytes {
    int n_vocab;
    uint32_t *off;      /* [n_vocab + 1] */
    char *bytes;        /* [off[n_vocab]] */
    uint8_t *kind;      /* [n_vocab] enum nb_vtok_kind */
    uint8_t *plain;     /* [n_vocab] 1: text a JSON string takes as it is (whole UTF-8
                         * characters, none a control character, '"' or '\\') */
    uint32_t *by_bytes; /* [n_vocab + 257] the text and special tokens in the order of
                         * their bytes, then (at n_vocab) where each first byte's run
                         * starts, and the end: a trie for the closing walk
                         * (nb_cons_close_tokens) */
};
/* From the tokenizer: ids past the tokenizer's vocabulary (a model's padding rows) are
 * NB_VTOK_EMPTY. NB_ERR_NOMEM. */
enum nb_status nb_vocab_bytes_init(struct nb_vocab_bytes *v, const struct nb_tokenizer *tok,
                                    int n_vocab);
void nb_vocab_bytes_free(struct nb_vocab_bytes *v);
/* Compute v->plain and v->by_bytes (malloc'd) from the bytes and kinds:
 * nb_vocab_bytes_init does; a vocabulary made by hand calls it (and frees both).
 * NB_ERR_NOMEM. */
enum nb_status nb_vocab_bytes_classify(struct nb_vocab_bytes *v);

/* ---------------------------------------------------------------- grammars */

enum nb_gelem_kind { NB_GEL_LITERAL, NB_GEL_CHOICE, NB_GEL_OBJECT };

struct nb_gelem {
    enum nb_gelem_kind kind;
    char **alts; /* literal: one; choice: n_alts, sorted; object: none (owned) */
    int *orig;   /* choice: each sorted alternative's index as given (owned) */
    int n_alts;
    /* object: the schemas (borrowed; NULL entries: any object): none, one for all, or one
     * per alternative of the last choice before it, in the order given (owned array) */
    const struct nb_schema **schemas;
    int n_schemas;
};

struct nb_gram {
    struct nb_gelem el[NB_GRAM_MAX];
    int n;
    /* the whole sequence may come again, after a '\n', until `rounds` in all (0 or 1:
     * once): tool_choice "required" with parallel calls */
    int rounds;
};

/* Append an element (texts copied). -1 when full, out of memory, an empty text, or (a
 * choice) one alternative a prefix of another; else 0. */
int nb_gram_literal(struct nb_gram *g, const char *text);
int nb_gram_choice(struct nb_gram *g, const char *const *alts, int n);
int nb_gram_object(struct nb_gram *g);
/* An object that keeps to schemas[0] (n 1) or to schemas[k] when the last choice before it
 * took its k-th alternative as given (n > 1). The schemas are borrowed: they must outlive
 * the grammar. */
int nb_gram_schema(struct nb_gram *g, const struct nb_schema *const *schemas, int n);
void nb_gram_free(struct nb_gram *g);

/* ---------------------------------------------------------------- the state */

/* Where the JSON recogniser is. */
struct nb_jstate {
    uint8_t mode;                   /* enum in constrain.c */
    uint8_t depth;                  /* open containers */
    uint8_t ws;                     /* whitespace bytes in a row */
    uint8_t sub;                    /* number part, literal id, UTF-8 bytes left, \u digits seen */
    uint8_t pos;                    /* literal position; the UTF-8 first continuation's range */
    uint8_t key;                    /* the string is an object key */
    uint16_t num;                   /* bytes of the number so far */
    uint16_t hex;                   /* the \u value so far */
    char stack[NB_JSON_MAX_DEPTH]; /* '{' or '[' per level */
    /* with a schema */
    uint16_t node[NB_JSON_MAX_DEPTH]; /* each level's node (NB_SCHEMA_FREE: any JSON) */
    uint16_t cnt[NB_JSON_MAX_DEPTH];  /* object: its next property; array: elements begun */
    uint16_t cur;                      /* the enum being matched */
    uint16_t epos;                     /* bytes of the key or enum value matched */
    uint8_t prop;                      /* the property whose key was written */
    uint8_t int_only;                  /* the number is an integer */
    uint64_t cand;                     /* keys or enum values still possible */
};

struct nb_cons {
    int elem;    /* the element being matched; g->n: complete */
    int pos;     /* bytes of the literal or choice matched */
    int lo, hi;  /* choice: alternatives [lo, hi) still possible */
    int closing; /* finish as soon as possible (nb_cons_cost) */
    int budget;  /* tokens left, this one included, the end of generation not: a token
                  * is allowed only if the output can still close in the rest (in bytes,
                  * nb_cons_close_cost, or else in tokens, nb_cons_close_tokens);
                  * -1 (nb_cons_start): no budget */
    int choice;  /* the last choice's alternative taken, as given */
    int round;   /* rounds of the sequence begun before this one (nb_gram.rounds) */
    struct nb_jstate js;
};

/* The class (NB_JC_*) of a JSON value that starts with byte c, or -1. */
int nb_json_class(unsigned c);

/* The state before any output. */
void nb_cons_start(const struct nb_gram *g, struct nb_cons *c);
/* Advance by n bytes: 1, or 0 when a byte is refused (*c is then undefined: feed a copy). */
int nb_cons_feed(const struct nb_gram *g, struct nb_cons *c, const char *b, size_t n);
/* Every element matched: the end of generation may follow (or, with rounds left and not
 * closing, a '\n' and the sequence again). */
int nb_cons_complete(const struct nb_gram *g, const struct nb_cons *c);
/* Bytes that finish the output from here at most, once `closing` is set: in closing mode
 * the JSON takes no more whitespace, no ',' (no new member or element), no string byte but
 * its closing quote, no digit a number can do without, and an empty container closes at
 * once; literals and choices run out as they are. A caller with a budget of tokens sets
 * c->closing when what is left (less one for the end of generation) is not more than this
 * (a token is at least one byte), so the output ends complete rather than cut. */
int nb_cons_cost(const struct nb_gram *g, const struct nb_cons *c);
/* Bytes that finish the output at most if closing were set now: the element in progress
 * as nb_cons_cost counts it, a choice not begun by its cheapest alternative (closing
 * takes it), one begun by its dearest alternative left, later elements by the fewest
 * bytes they allow. With c->budget >= 0, nb_cons_allows and nb_cons_mask refuse a
 * token after which the output can close neither in budget - 1 bytes (this) nor in
 * budget - 1 tokens (nb_cons_close_tokens), so the model keeps its own choices (a tool,
 * its arguments) while they still fit and closing is needed only when no token does
 * (nb_cons_next). */
int nb_cons_close_cost(const struct nb_gram *g, const struct nb_cons *c);
/* Tokens that finish the output if closing were set now, taking each step the longest
 * token closing mode allows (v->by_bytes; special tokens with allow_special): a token is
 * most often several bytes, so this is well under nb_cons_close_cost where the rest is
 * literal text (a tool's wrapper, keys). Closing mode keeps to the budget the same way,
 * and its own walk's token always does (one fewer from there). More than `cap` (or no
 * v->by_bytes, or no closing token): NB_SCHEMA_INF. */
int nb_cons_close_tokens(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                          const struct nb_cons *c, int allow_special, int cap);
/* May token `tok` come next? End-of-generation tokens only when complete; special tokens
 * only with allow_special (their text must advance the state as any token's); empty
 * tokens never. */
int nb_cons_allows(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                    const struct nb_cons *c, int32_t tok, int allow_special);
/* Set logits[i] = -inf for every token that may not come next; the number allowed. */
int nb_cons_mask(const struct nb_gram *g, const struct nb_vocab_bytes *v,
                  const struct nb_cons *c, int allow_special, float *logits);
/* The mask for the next token of a budget of `left` tokens (the end of generation not
 * counted): c->budget = left; when no token keeps the output closable within it, c is
 * set closing (the cheapest completions from here on) and masked again (and when even
 * then none does, a budget too small from the start, without the budget: c->budget -1,
 * the output is cut at max_tokens as before closing kept a budget). logits are the
 * raw row, work room for n_vocab floats: the masked row is left in work. The number of
 * tokens allowed (0: none continues the output). */
int nb_cons_next(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons *c,
                  int left, int allow_special, const float *logits, float *work);
/* The model's own choice tok was refused (nb_cons_allows 0): when the grammar takes it
 * and only the budget refuses it, c is set closing and 1 returned — the output finishes
 * the cheapest way from here, rather than wander through tokens that fit (whitespace)
 * while the ones the model wants do not. 0 otherwise (c unchanged). */
int nb_cons_refused(const struct nb_gram *g, const struct nb_vocab_bytes *v, struct nb_cons *c,
                     int32_t tok, int allow_special);

/* ---------------------------------------------------------------- the sampler's stage */

/* nibble.h's grammar: the element sequence and the schema it owns (a JSON Schema), or a
 * compiled GBNF grammar (runtime/gbnf.h), and the bytes of the vocabulary it was made for. */
struct nb_gbnf;
struct nb_grammar {
    struct nb_gram gram;
    struct nb_schema *schema;
    struct nb_gbnf *gbnf; /* not NULL: a GBNF grammar (gram unused) */
    struct nb_vocab_bytes vb;
};

struct nb_sampler;
/* The next token under grammar g from state c (not advanced): the sampler's choice when g
 * allows it (one token's bytes checked: the usual case); for greedy sampling without
 * penalties the next candidates by logit (16 at most); else the sampler again over the
 * row with every token g refuses masked (nb_cons_next: closing once no token fits
 * c->budget). Special tokens only with allow_special. `row` is the raw logits (modified),
 * `work` room for n_vocab floats. -1: no token of the vocabulary continues the output.
 * (runtime/sampler.c: nb_sampler_sample's stage, and the server's per-job grammars.) */
int32_t nb_cons_sample(struct nb_sampler *s, const struct nb_gram *g,
                       const struct nb_vocab_bytes *v, struct nb_cons *c, int allow_special,
                       float *row, float *work);

#endif
