/* server/constrain.h — constrained decoding: which tokens keep the output inside a small
 * grammar (response_format json_object, forced tool calls).
 *
 * A grammar is a sequence of elements matched one after the other over the generated
 * bytes:
 *   literal   exact text ("<tool_call>\n{\"name\": \"")
 *   choice    one of a few texts, none a prefix of another (a tool's name and its quote)
 *   object    one JSON object (RFC 8259: objects, arrays, strings with escapes and valid
 *             UTF-8, numbers, true/false/null), at most SRV_JSON_MAX_DEPTH containers
 *             deep, at most SRV_JSON_MAX_WS whitespace bytes in a row, numbers of at most
 *             SRV_JSON_MAX_NUM bytes (the model cannot pad or nest forever)
 *   schema    one JSON object that also keeps to a JSON Schema (struct srv_schema, the
 *             subset below); per alternative of the choice before it, or one for all
 * After the last element only an end-of-generation token is allowed.
 *
 * The schema subset (server/schema.c compiles it): `type` (a name or a list), `properties`
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
 * (struct srv_cons): a token is allowed when all of its bytes advance a copy of it. Tokens
 * are tried as the text they add to the output (struct srv_vocab_bytes: a special token
 * by its text). srv_cons_allows checks one token (the sampler's choice, the cheap path);
 * srv_cons_mask sets every disallowed logit to -inf (the fallback), skipping at once the
 * tokens whose first byte cannot come next.
 */
#ifndef NB_SERVER_CONSTRAIN_H
#define NB_SERVER_CONSTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

#define SRV_JSON_MAX_DEPTH 32
#define SRV_JSON_MAX_WS    48
#define SRV_JSON_MAX_NUM   64
#define SRV_GRAMMAR_MAX    8

/* ---------------------------------------------------------------- schemas */

#define SRV_SCHEMA_MAX_NODES 256
#define SRV_SCHEMA_MAX_PROPS 64     /* properties of one object; enum values of one node */
#define SRV_SCHEMA_FREE      0x7fff /* a node id: any JSON value */
#define SRV_SCHEMA_NONE      0xffff /* a node id: no value (a class the schema refuses) */
#define SRV_SCHEMA_INF       (1 << 24)

/* A JSON value's class, known from its first byte. */
enum srv_jclass {
    SRV_JC_OBJ,
    SRV_JC_ARR,
    SRV_JC_STR,
    SRV_JC_NUM,
    SRV_JC_TRUE,
    SRV_JC_FALSE,
    SRV_JC_NULL,
    SRV_JC_N
};

/* One schema node. A value starts in a node; its first byte's class picks the node that
 * reads it (target: the node itself, an anyOf alternative, SRV_SCHEMA_FREE or
 * SRV_SCHEMA_NONE). The reader is an enum (the value is one of enums), an object with
 * listed keys (obj), an array (arr), an integer (int_only) or any value of its class. */
struct srv_snode {
    uint16_t target[SRV_JC_N];
    int cost[SRV_JC_N]; /* bytes that finish a value of this reader and class, closing */
    int close;          /* the fewest over the classes of target: SRV_SCHEMA_INF if none */
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

struct srv_schema {
    int n;
    struct srv_snode *nodes; /* [n], the root first */
};
/* Compile a JSON Schema (a cJSON object). NB_OK and *out; NB_ERR_UNSUPPORTED with a
 * message that names the keyword outside the subset (or the construct: anyOf alternatives
 * of one type, a $ref that is not local, a schema with no finite value); NB_ERR_NOMEM. */
struct cJSON;
enum nb_status srv_schema_compile(const struct cJSON *schema, struct srv_schema **out);
void srv_schema_free(struct srv_schema *s);

/* ---------------------------------------------------------------- the vocabulary */

enum srv_tok_kind { SRV_TOK_TEXT, SRV_TOK_SPECIAL, SRV_TOK_EOG, SRV_TOK_EMPTY };

/* Each token's bytes as generated text: bytes[off[i] .. off[i+1]). */
struct srv_vocab_bytes {
    int n_vocab;
    uint32_t *off;      /* [n_vocab + 1] */
    char *bytes;        /* [off[n_vocab]] */
    uint8_t *kind;      /* [n_vocab] enum srv_tok_kind */
    uint8_t *plain;     /* [n_vocab] 1: text a JSON string takes as it is (whole UTF-8
                         * characters, none a control character, '"' or '\\') */
    uint32_t *by_bytes; /* [n_vocab + 257] the text and special tokens in the order of
                         * their bytes, then (at n_vocab) where each first byte's run
                         * starts, and the end: a trie for the closing walk
                         * (srv_cons_close_tokens) */
};
/* From the tokenizer: ids past the tokenizer's vocabulary (a model's padding rows) are
 * SRV_TOK_EMPTY. NB_ERR_NOMEM. */
enum nb_status srv_vocab_bytes_init(struct srv_vocab_bytes *v, const struct nb_tokenizer *tok,
                                    int n_vocab);
void srv_vocab_bytes_free(struct srv_vocab_bytes *v);
/* Compute v->plain and v->by_bytes (malloc'd) from the bytes and kinds:
 * srv_vocab_bytes_init does; a vocabulary made by hand calls it (and frees both).
 * NB_ERR_NOMEM. */
enum nb_status srv_vocab_bytes_classify(struct srv_vocab_bytes *v);

/* ---------------------------------------------------------------- grammars */

enum srv_elem_kind { SRV_EL_LITERAL, SRV_EL_CHOICE, SRV_EL_OBJECT };

struct srv_elem {
    enum srv_elem_kind kind;
    char **alts; /* literal: one; choice: n_alts, sorted; object: none (owned) */
    int *orig;   /* choice: each sorted alternative's index as given (owned) */
    int n_alts;
    /* object: the schemas (borrowed; NULL entries: any object): none, one for all, or one
     * per alternative of the last choice before it, in the order given (owned array) */
    const struct srv_schema **schemas;
    int n_schemas;
};

struct srv_grammar {
    struct srv_elem el[SRV_GRAMMAR_MAX];
    int n;
    /* the whole sequence may come again, after a '\n', until `rounds` in all (0 or 1:
     * once): tool_choice "required" with parallel calls */
    int rounds;
};

/* Append an element (texts copied). -1 when full, out of memory, an empty text, or (a
 * choice) one alternative a prefix of another; else 0. */
int srv_grammar_literal(struct srv_grammar *g, const char *text);
int srv_grammar_choice(struct srv_grammar *g, const char *const *alts, int n);
int srv_grammar_object(struct srv_grammar *g);
/* An object that keeps to schemas[0] (n 1) or to schemas[k] when the last choice before it
 * took its k-th alternative as given (n > 1). The schemas are borrowed: they must outlive
 * the grammar. */
int srv_grammar_schema(struct srv_grammar *g, const struct srv_schema *const *schemas, int n);
void srv_grammar_free(struct srv_grammar *g);

/* ---------------------------------------------------------------- the state */

/* Where the JSON recogniser is. */
struct srv_json {
    uint8_t mode;                   /* enum in constrain.c */
    uint8_t depth;                  /* open containers */
    uint8_t ws;                     /* whitespace bytes in a row */
    uint8_t sub;                    /* number part, literal id, UTF-8 bytes left, \u digits seen */
    uint8_t pos;                    /* literal position; the UTF-8 first continuation's range */
    uint8_t key;                    /* the string is an object key */
    uint16_t num;                   /* bytes of the number so far */
    uint16_t hex;                   /* the \u value so far */
    char stack[SRV_JSON_MAX_DEPTH]; /* '{' or '[' per level */
    /* with a schema */
    uint16_t node[SRV_JSON_MAX_DEPTH]; /* each level's node (SRV_SCHEMA_FREE: any JSON) */
    uint16_t cnt[SRV_JSON_MAX_DEPTH];  /* object: its next property; array: elements begun */
    uint16_t cur;                      /* the enum being matched */
    uint16_t epos;                     /* bytes of the key or enum value matched */
    uint8_t prop;                      /* the property whose key was written */
    uint8_t int_only;                  /* the number is an integer */
    uint64_t cand;                     /* keys or enum values still possible */
};

struct srv_cons {
    int elem;    /* the element being matched; g->n: complete */
    int pos;     /* bytes of the literal or choice matched */
    int lo, hi;  /* choice: alternatives [lo, hi) still possible */
    int closing; /* finish as soon as possible (srv_cons_cost) */
    int budget;  /* tokens left, this one included, the end of generation not: a token
                  * is allowed only if the output can still close in the rest (in bytes,
                  * srv_cons_close_cost, or else in tokens, srv_cons_close_tokens);
                  * -1 (srv_cons_start): no budget */
    int choice;  /* the last choice's alternative taken, as given */
    int round;   /* rounds of the sequence begun before this one (srv_grammar.rounds) */
    struct srv_json js;
};

/* The class (SRV_JC_*) of a JSON value that starts with byte c, or -1. */
int srv_json_class(unsigned c);

/* The state before any output. */
void srv_cons_start(const struct srv_grammar *g, struct srv_cons *c);
/* Advance by n bytes: 1, or 0 when a byte is refused (*c is then undefined: feed a copy). */
int srv_cons_feed(const struct srv_grammar *g, struct srv_cons *c, const char *b, size_t n);
/* Every element matched: the end of generation may follow (or, with rounds left and not
 * closing, a '\n' and the sequence again). */
int srv_cons_complete(const struct srv_grammar *g, const struct srv_cons *c);
/* Bytes that finish the output from here at most, once `closing` is set: in closing mode
 * the JSON takes no more whitespace, no ',' (no new member or element), no string byte but
 * its closing quote, no digit a number can do without, and an empty container closes at
 * once; literals and choices run out as they are. A caller with a budget of tokens sets
 * c->closing when what is left (less one for the end of generation) is not more than this
 * (a token is at least one byte), so the output ends complete rather than cut. */
int srv_cons_cost(const struct srv_grammar *g, const struct srv_cons *c);
/* Bytes that finish the output at most if closing were set now: the element in progress
 * as srv_cons_cost counts it, a choice not begun by its cheapest alternative (closing
 * takes it), one begun by its dearest alternative left, later elements by the fewest
 * bytes they allow. With c->budget >= 0, srv_cons_allows and srv_cons_mask refuse a
 * token after which the output can close neither in budget - 1 bytes (this) nor in
 * budget - 1 tokens (srv_cons_close_tokens), so the model keeps its own choices (a tool,
 * its arguments) while they still fit and closing is needed only when no token does
 * (srv_cons_next). */
int srv_cons_close_cost(const struct srv_grammar *g, const struct srv_cons *c);
/* Tokens that finish the output if closing were set now, taking each step the longest
 * token closing mode allows (v->by_bytes; special tokens with allow_special): a token is
 * most often several bytes, so this is well under srv_cons_close_cost where the rest is
 * literal text (a tool's wrapper, keys). Closing mode keeps to the budget the same way,
 * and its own walk's token always does (one fewer from there). More than `cap` (or no
 * v->by_bytes, or no closing token): SRV_SCHEMA_INF. */
int srv_cons_close_tokens(const struct srv_grammar *g, const struct srv_vocab_bytes *v,
                          const struct srv_cons *c, int allow_special, int cap);
/* May token `tok` come next? End-of-generation tokens only when complete; special tokens
 * only with allow_special (their text must advance the state as any token's); empty
 * tokens never. */
int srv_cons_allows(const struct srv_grammar *g, const struct srv_vocab_bytes *v,
                    const struct srv_cons *c, int32_t tok, int allow_special);
/* Set logits[i] = -inf for every token that may not come next; the number allowed. */
int srv_cons_mask(const struct srv_grammar *g, const struct srv_vocab_bytes *v,
                  const struct srv_cons *c, int allow_special, float *logits);
/* The mask for the next token of a budget of `left` tokens (the end of generation not
 * counted): c->budget = left; when no token keeps the output closable within it, c is
 * set closing (the cheapest completions from here on) and masked again (and when even
 * then none does, a budget too small from the start, without the budget: c->budget -1,
 * the output is cut at max_tokens as before closing kept a budget). logits are the
 * raw row, work room for n_vocab floats: the masked row is left in work. The number of
 * tokens allowed (0: none continues the output). */
int srv_cons_next(const struct srv_grammar *g, const struct srv_vocab_bytes *v, struct srv_cons *c,
                  int left, int allow_special, const float *logits, float *work);
/* The model's own choice tok was refused (srv_cons_allows 0): when the grammar takes it
 * and only the budget refuses it, c is set closing and 1 returned — the output finishes
 * the cheapest way from here, rather than wander through tokens that fit (whitespace)
 * while the ones the model wants do not. 0 otherwise (c unchanged). */
int srv_cons_refused(const struct srv_grammar *g, const struct srv_vocab_bytes *v, struct srv_cons *c,
                     int32_t tok, int allow_special);

#endif
