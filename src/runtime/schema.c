/* runtime/schema.c — a JSON Schema (the subset of constrain.h) compiled to the nodes the
 * schema-guided JSON recogniser walks, and the bytes each node needs to finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "runtime/constrain.h"

/* Keywords that say nothing about which values are valid. */
static const char *const k_annotations[] = {
    "title",      "description", "default",   "examples", "$schema",     "$id", "$comment",
    "deprecated", "readOnly",    "writeOnly", "$defs",    "definitions", NULL,
};
/* Keywords compiled. */
static const char *const k_known[] = {
    "type",  "properties", "required", "additionalProperties",
    "items", "minItems",   "maxItems", "enum",
    "const", "anyOf",      "oneOf",    "$ref",
    NULL,
};
static const char *const k_class_names[NB_JC_N] = {"object", "array", "string", "number",
                                                    "true",   "false", "null"};
/* Bytes that finish a value of each class, closing, when nothing more is required of it. */
static const int k_base_cost[NB_JC_N] = {2, 2, 2, 2, 4, 5, 4};
#define FREE_CLOSE 5 /* any value: the dearest class ("false"), as constrain.c counts it */

/* Nodes with more elements than this in minItems are refused (each is written out). */
#define MAX_MIN_ITEMS 64
#define MAX_NESTING   64

struct compiler {
    const cJSON *root;
    struct nb_schema *s;
    int cap;
    const cJSON **src; /* [cap] the schema object each node was made from */
    uint8_t *done;     /* [cap] the node's targets are final */
};

static int in_list(const char *const *list, const char *key)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], key)) return 1;
    return 0;
}

static enum nb_status unsupported(const char *what)
{
    return nb_set_error(NB_ERR_UNSUPPORTED, "json schema: %s", what);
}

/* A new node made from src (all targets NONE): *out its id. */
static enum nb_status new_node(struct compiler *C, const cJSON *src, int *out)
{
    struct nb_schema *s = C->s;
    if (s->n == NB_SCHEMA_MAX_NODES) return unsupported("more than 256 subschemas");
    if (s->n == C->cap) {
        int cap = C->cap ? 2 * C->cap : 16;
        struct nb_snode *nodes = realloc(s->nodes, sizeof *nodes * (size_t)cap);
        if (nodes) s->nodes = nodes;
        const cJSON **src2 = realloc(C->src, sizeof *src2 * (size_t)cap);
        if (src2) C->src = src2;
        uint8_t *done = realloc(C->done, (size_t)cap);
        if (done) C->done = done;
        if (!nodes || !src2 || !done)
            return nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        C->cap = cap;
    }
    int n = s->n++;
    struct nb_snode *N = &s->nodes[n];
    memset(N, 0, sizeof *N);
    for (int k = 0; k < NB_JC_N; k++) {
        N->target[k] = NB_SCHEMA_NONE;
        N->cost[k] = NB_SCHEMA_INF;
    }
    N->close = NB_SCHEMA_INF;
    N->items = NB_SCHEMA_FREE;
    N->max_items = -1;
    C->src[n] = src;
    C->done[n] = 0;
    *out = n;
    return NB_OK;
}

/* The schema a local $ref names: "#", "#/$defs/NAME", "#/definitions/NAME". */
static const cJSON *resolve(const struct compiler *C, const char *ref)
{
    if (!strcmp(ref, "#")) return C->root;
    const char *name = NULL, *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) defs = "$defs", name = ref + 8;
    if (!strncmp(ref, "#/definitions/", 14)) defs = "definitions", name = ref + 14;
    if (!name || !*name || strchr(name, '/') || strchr(name, '~')) return NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(C->root, defs);
    return cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, name) : NULL;
}

/* JSON text of a value (malloc'd). */
static char *json_text(const cJSON *v)
{
    return cJSON_PrintUnformatted(v);
}

static int class_of_text(const char *t)
{
    int k = nb_json_class((unsigned char)t[0]);
    return k < 0 ? NB_JC_NUM : k;
}

/* The classes a `type` allows (a bit per class), *int_only for "integer" without
 * "number". 0 and the error when a name is unknown or the type not a string or list. */
static unsigned type_mask(const cJSON *type, int *int_only, enum nb_status *st)
{
    unsigned mask = 0;
    int integer = 0, number = 0;
    const cJSON *t = type;
    int list = cJSON_IsArray(type);
    if (list) t = type->child;
    if (!list && !cJSON_IsString(type)) {
        *st = unsupported("'type' must be a string or a list of strings");
        return 0;
    }
    for (; t; t = list ? t->next : NULL) {
        const char *n = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(n, "object"))
            mask |= 1u << NB_JC_OBJ;
        else if (!strcmp(n, "array"))
            mask |= 1u << NB_JC_ARR;
        else if (!strcmp(n, "string"))
            mask |= 1u << NB_JC_STR;
        else if (!strcmp(n, "number"))
            mask |= 1u << NB_JC_NUM, number = 1;
        else if (!strcmp(n, "integer"))
            mask |= 1u << NB_JC_NUM, integer = 1;
        else if (!strcmp(n, "boolean"))
            mask |= 1u << NB_JC_TRUE | 1u << NB_JC_FALSE;
        else if (!strcmp(n, "null"))
            mask |= 1u << NB_JC_NULL;
        else {
            char msg[128];
            snprintf(msg, sizeof msg, "'type' '%.40s' is not a JSON Schema type", n);
            *st = unsupported(msg);
            return 0;
        }
    }
    if (!mask) *st = unsupported("'type' lists no type");
    *int_only = integer && !number;
    return mask;
}

static enum nb_status compile(struct compiler *C, const cJSON *sch, int depth, unsigned *out);

/* The name of the k-th member of object o. */
static const char *props_key(const cJSON *o, int k)
{
    const cJSON *p = o->child;
    while (k-- && p)
        p = p->next;
    return p ? p->string : "";
}

/* The object part of node n: properties (in order), required, additionalProperties. */
static enum nb_status compile_object(struct compiler *C, int n, const cJSON *sch, int depth)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(sch, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(sch, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return unsupported("'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return unsupported("'required' must be a list of names");
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
        return unsupported("'additionalProperties' must be a boolean or a schema");
    int np = props ? cJSON_GetArraySize(props) : 0;
    if (C->s->nodes[n].target[NB_JC_OBJ] == NB_SCHEMA_FREE) {
        /* no listed keys and any others allowed: any object (a required key would have to
         * be written without a schema of its own) */
        if (req && cJSON_GetArraySize(req)) return unsupported("'required' without 'properties'");
        return NB_OK;
    }
    /* only the listed keys are written: that keeps to additionalProperties whatever it says
     * (none listed: {}) */
    if (np > NB_SCHEMA_MAX_PROPS) return unsupported("an object with more than 64 properties");
    struct nb_snode *N = &C->s->nodes[n];
    N->obj = 1;
    if (np) {
        N->keys = calloc((size_t)np, sizeof *N->keys);
        N->pnode = calloc((size_t)np, sizeof *N->pnode);
        N->req = calloc((size_t)np, sizeof *N->req);
        if (!N->keys || !N->pnode || !N->req)
            return nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
    }
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        cJSON *key = cJSON_CreateString(p->string);
        char *text = key ? json_text(key) : NULL;
        cJSON_Delete(key);
        if (!text) return nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        C->s->nodes[n].keys[i] = text;
        C->s->nodes[n].n_props = i + 1;
        for (int k = 0; k < i; k++)
            if (!strcmp(C->s->nodes[n].keys[k], text))
                return unsupported("'properties' lists a key twice");
    }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        int k = 0;
        while (k < np && !(cJSON_IsString(r) && !strcmp(props_key(props, k), r->valuestring)))
            k++;
        if (k == np) {
            char msg[160];
            snprintf(msg, sizeof msg, "'required' names '%.64s', which 'properties' does not list",
                     cJSON_IsString(r) ? r->valuestring : "(not a string)");
            return unsupported(msg);
        }
        C->s->nodes[n].req[k] = 1;
    }
    i = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        unsigned child;
        enum nb_status st = compile(C, p, depth + 1, &child);
        if (st != NB_OK) return st;
        C->s->nodes[n].pnode[i] = (uint16_t)child; /* the nodes may have moved */
    }
    return NB_OK;
}

/* A whole number from 0 to max (checked before any conversion: a double out of int's
 * range converted is undefined). */
static int is_count(const cJSON *v, double max)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= max &&
           v->valuedouble == (double)(int)v->valuedouble;
}

/* The array part of node n: items, minItems, maxItems. */
static enum nb_status compile_array(struct compiler *C, int n, const cJSON *sch, int depth)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(sch, "items");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(sch, "minItems");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(sch, "maxItems");
    if (items && cJSON_IsArray(items)) return unsupported("'items' as a list (tuples)");
    if ((mn && !is_count(mn, 1e9)) || (mx && !is_count(mx, 65535)))
        return unsupported("'minItems' and 'maxItems' must be counts (maxItems up to 65535)");
    if (mn && mn->valuedouble > MAX_MIN_ITEMS) return unsupported("'minItems' over 64");
    if (C->s->nodes[n].target[NB_JC_ARR] == NB_SCHEMA_FREE) return NB_OK;
    struct nb_snode *N = &C->s->nodes[n];
    N->arr = 1;
    N->min_items = mn ? (int)mn->valuedouble : 0;
    N->max_items = mx ? (int)mx->valuedouble : -1;
    if (N->max_items >= 0 && N->max_items < N->min_items)
        return unsupported("'maxItems' below 'minItems'");
    if (!items) return NB_OK;
    unsigned child;
    enum nb_status st = compile(C, items, depth + 1, &child);
    if (st == NB_OK) C->s->nodes[n].items = (uint16_t)child;
    return st;
}

/* anyOf / oneOf: the alternatives' readers merged by class (no two of one class: told
 * apart by the first byte, a oneOf is then an anyOf). */
static enum nb_status compile_union(struct compiler *C, int n, const cJSON *alts, const char *kw,
                                    int depth)
{
    char msg[160];
    if (!cJSON_IsArray(alts) || !cJSON_GetArraySize(alts)) {
        snprintf(msg, sizeof msg, "'%s' must be a list of schemas", kw);
        return unsupported(msg);
    }
    for (const cJSON *a = alts->child; a; a = a->next) {
        unsigned t;
        enum nb_status st = compile(C, a, depth + 1, &t);
        if (st != NB_OK) return st;
        if (t != NB_SCHEMA_FREE && !C->done[t]) {
            snprintf(msg, sizeof msg, "a $ref loop through '%s'", kw);
            return unsupported(msg);
        }
        for (int k = 0; k < NB_JC_N; k++) {
            unsigned r = t == NB_SCHEMA_FREE ? NB_SCHEMA_FREE : C->s->nodes[t].target[k];
            if (r == NB_SCHEMA_NONE) continue;
            if (C->s->nodes[n].target[k] != NB_SCHEMA_NONE) {
                snprintf(msg, sizeof msg,
                         "'%s': two alternatives take a%s %s value (they must differ in type)", kw,
                         k == NB_JC_OBJ || k == NB_JC_ARR ? "n" : "", k_class_names[k]);
                return unsupported(msg);
            }
            C->s->nodes[n].target[k] = (uint16_t)r;
        }
    }
    return NB_OK;
}

/* enum / const: the values (scalars) as JSON text, kept when `type` allows them. */
static enum nb_status compile_enum(struct compiler *C, int n, const cJSON *en, const cJSON *cn,
                                   unsigned mask)
{
    cJSON *one = NULL;
    const cJSON *vals = en;
    if (cn) {
        if (en) return unsupported("'enum' and 'const' together");
        if (!(one = cJSON_CreateArray()) || !cJSON_AddItemReferenceToArray(one, (cJSON *)cn)) {
            cJSON_Delete(one);
            return nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        }
        vals = one;
    }
    enum nb_status st = NB_OK;
    int nv = cJSON_IsArray(vals) ? cJSON_GetArraySize(vals) : -1;
    if (nv < 1 || nv > NB_SCHEMA_MAX_PROPS) {
        st = unsupported("'enum' must list 1 to 64 values");
        goto done;
    }
    struct nb_snode *N = &C->s->nodes[n];
    if (!(N->enums = calloc((size_t)nv, sizeof *N->enums))) {
        st = nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        goto done;
    }
    for (const cJSON *v = vals->child; v; v = v->next) {
        if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
            st = unsupported(cn ? "'const' of an array or object" : "'enum' of arrays or objects");
            goto done;
        }
        char *text = json_text(v);
        if (!text) {
            st = nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
            goto done;
        }
        int k = class_of_text(text);
        if (!(mask >> k & 1)) {
            free(text);
            continue;
        }
        N->enums[N->n_enum++] = text;
        N->target[k] = (uint16_t)n;
    }
    if (!N->n_enum) st = unsupported("no value of 'enum' or 'const' has the schema's 'type'");
done:
    cJSON_Delete(one);
    return st;
}

/* A node for schema sch (a memo of those made: a $ref's target is made once, so recursion
 * ends). *out: its id, or NB_SCHEMA_FREE for a schema without constraints. */
static enum nb_status compile(struct compiler *C, const cJSON *sch, int depth, unsigned *out)
{
    char msg[160];
    if (depth > MAX_NESTING) return unsupported("nested more than 64 deep (or a $ref loop)");
    if (cJSON_IsTrue(sch)) {
        *out = NB_SCHEMA_FREE;
        return NB_OK;
    }
    if (!cJSON_IsObject(sch)) return unsupported("a schema must be an object or true");
    for (int i = 0; i < C->s->n; i++)
        if (C->src[i] == sch) {
            *out = (unsigned)i;
            return NB_OK;
        }
    int constrained = 0;
    for (const cJSON *k = sch->child; k; k = k->next) {
        if (in_list(k_annotations, k->string)) continue;
        if (!in_list(k_known, k->string)) {
            snprintf(msg, sizeof msg, "'%.64s' is not supported", k->string);
            return unsupported(msg);
        }
        constrained = 1;
    }
    if (!constrained) {
        *out = NB_SCHEMA_FREE;
        return NB_OK;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(sch, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(sch, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(sch, "oneOf");
    int others = 0;
    for (const cJSON *k = sch->child; k; k = k->next)
        others += in_list(k_known, k->string);
    if (ref) {
        if (others > 1) return unsupported("'$ref' beside other keywords");
        const cJSON *t = cJSON_IsString(ref) ? resolve(C, ref->valuestring) : NULL;
        if (!t) {
            snprintf(msg, sizeof msg,
                     "'$ref' '%.64s' is not '#', '#/$defs/NAME' or '#/definitions/NAME' of "
                     "this schema",
                     cJSON_IsString(ref) ? ref->valuestring : "(not a string)");
            return unsupported(msg);
        }
        return compile(C, t, depth + 1, out);
    }
    int n;
    enum nb_status st = new_node(C, sch, &n);
    if (st != NB_OK) return st;
    *out = (unsigned)n;
    if (any || one) {
        if (others > 1) {
            snprintf(msg, sizeof msg, "'%s' beside other keywords", any ? "anyOf" : "oneOf");
            return unsupported(msg);
        }
        st = compile_union(C, n, any ? any : one, any ? "anyOf" : "oneOf", depth);
        C->done[n] = 1;
        return st;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(sch, "type");
    unsigned mask = 0;
    int int_only = 0;
    if (type) {
        if (!(mask = type_mask(type, &int_only, &st))) return st;
    } else {
        /* untyped: the type its keywords are about, else any */
        if (cJSON_GetObjectItemCaseSensitive(sch, "properties") ||
            cJSON_GetObjectItemCaseSensitive(sch, "required") ||
            cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties"))
            mask |= 1u << NB_JC_OBJ;
        if (cJSON_GetObjectItemCaseSensitive(sch, "items") ||
            cJSON_GetObjectItemCaseSensitive(sch, "minItems") ||
            cJSON_GetObjectItemCaseSensitive(sch, "maxItems"))
            mask |= 1u << NB_JC_ARR;
        if (!mask) mask = (1u << NB_JC_N) - 1;
    }
    C->s->nodes[n].int_only = (uint8_t)int_only;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(sch, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(sch, "const");
    if (en || cn) {
        st = compile_enum(C, n, en, cn, mask);
        C->done[n] = 1;
        return st;
    }
    /* the readers first (a $ref back to this node from below may need them): an object
     * without listed keys that takes any is any object; an array without constraints, any */
    for (int k = 0; k < NB_JC_N; k++)
        if (mask >> k & 1) C->s->nodes[n].target[k] = (uint16_t)n;
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(sch, "items");
    if ((mask >> NB_JC_OBJ & 1) && !cJSON_GetObjectItemCaseSensitive(sch, "properties") &&
        !cJSON_IsFalse(add) && !cJSON_IsObject(add))
        C->s->nodes[n].target[NB_JC_OBJ] = NB_SCHEMA_FREE;
    if ((mask >> NB_JC_ARR & 1) && !cJSON_GetObjectItemCaseSensitive(sch, "minItems") &&
        !cJSON_GetObjectItemCaseSensitive(sch, "maxItems") && (!items || cJSON_IsTrue(items)))
        C->s->nodes[n].target[NB_JC_ARR] = NB_SCHEMA_FREE;
    C->done[n] = 1;
    if (mask >> NB_JC_OBJ & 1) st = compile_object(C, n, sch, depth);
    if (st == NB_OK && (mask >> NB_JC_ARR & 1)) st = compile_array(C, n, sch, depth);
    return st;
}

/* The cost of finishing a value of reader t in class k (t FREE: the class's base). */
static int reader_cost(const struct nb_schema *s, unsigned t, int k)
{
    return t == NB_SCHEMA_FREE ? k_base_cost[k] : s->nodes[t].cost[k];
}

static int add(int a, int b)
{
    return a + b >= NB_SCHEMA_INF ? NB_SCHEMA_INF : a + b;
}

static int node_close(const struct nb_schema *s, unsigned n)
{
    return n == NB_SCHEMA_FREE ? FREE_CLOSE : s->nodes[n].close;
}

/* Each reader's cost per class and each node's close, to the least fixed point (costs
 * only fall; a recursion with no way out stays NB_SCHEMA_INF). */
static void compute_costs(struct nb_schema *s)
{
    for (int changed = 1, round = 0; changed && round < 4 * s->n + 8; round++) {
        changed = 0;
        for (int i = 0; i < s->n; i++) {
            struct nb_snode *N = &s->nodes[i];
            for (int k = 0; k < NB_JC_N; k++) {
                if (N->target[k] != (uint16_t)i) continue;
                int c = k_base_cost[k];
                if (N->n_enum) {
                    c = 0;
                    for (int e = 0; e < N->n_enum; e++) {
                        int len = (int)strlen(N->enums[e]);
                        if (class_of_text(N->enums[e]) == k && len > c) c = len;
                    }
                } else if (k == NB_JC_OBJ && N->obj) {
                    int nreq = 0;
                    for (int p = 0; p < N->n_props; p++) {
                        if (!N->req[p]) continue;
                        c = add(c, add((int)strlen(N->keys[p]) + 1, node_close(s, N->pnode[p])));
                        c = add(c, nreq++ ? 1 : 0);
                    }
                } else if (k == NB_JC_ARR && N->arr) {
                    for (int e = 0; e < N->min_items; e++)
                        c = add(c, add(node_close(s, N->items), e ? 1 : 0));
                }
                if (c < N->cost[k]) N->cost[k] = c, changed = 1;
            }
        }
        for (int i = 0; i < s->n; i++) {
            struct nb_snode *N = &s->nodes[i];
            int best = NB_SCHEMA_INF;
            for (int k = 0; k < NB_JC_N; k++) {
                unsigned t = N->target[k];
                if (t == NB_SCHEMA_NONE) continue;
                int c = reader_cost(s, t, k);
                best = c < best ? c : best;
            }
            if (best < N->close) N->close = best, changed = 1;
        }
    }
}

enum nb_status nb_schema_compile(const cJSON *schema, struct nb_schema **out)
{
    struct compiler C = {0};
    enum nb_status st;
    unsigned root;
    *out = NULL;
    C.root = schema;
    if (!(C.s = calloc(1, sizeof *C.s)))
        return nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
    if ((st = compile(&C, schema, 0, &root)) != NB_OK) goto fail;
    if (root == NB_SCHEMA_FREE || C.s->nodes[root].target[NB_JC_OBJ] == NB_SCHEMA_FREE) {
        /* any object: kept as a node so that the grammar's root is node 0 */
        if (root == NB_SCHEMA_FREE) {
            int n;
            if ((st = new_node(&C, NULL, &n)) != NB_OK) goto fail;
            C.s->nodes[n].target[NB_JC_OBJ] = NB_SCHEMA_FREE;
            root = (unsigned)n;
        }
    }
    if (C.s->nodes[root].target[NB_JC_OBJ] == NB_SCHEMA_NONE) {
        st = unsupported("the top level must be an object ('type': 'object')");
        goto fail;
    }
    if (root != 0) {
        st = nb_set_error(NB_ERR_INTERNAL, "json schema: the root is not the first node");
        goto fail;
    }
    compute_costs(C.s);
    if (reader_cost(C.s, C.s->nodes[0].target[NB_JC_OBJ], NB_JC_OBJ) >= NB_SCHEMA_INF) {
        st = unsupported("no finite object keeps to it (a $ref loop through required members)");
        goto fail;
    }
    free(C.src);
    free(C.done);
    *out = C.s;
    return NB_OK;
fail:
    free(C.src);
    free(C.done);
    nb_schema_free(C.s);
    return st;
}

void nb_schema_free(struct nb_schema *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        struct nb_snode *N = &s->nodes[i];
        for (int k = 0; k < N->n_props; k++)
            free(N->keys[k]);
        for (int k = 0; k < N->n_enum; k++)
            free(N->enums[k]);
        free(N->keys);
        free(N->pnode);
        free(N->req);
        free(N->enums);
    }
    free(s->nodes);
    free(s);
}
