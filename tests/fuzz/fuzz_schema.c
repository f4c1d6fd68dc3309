/* Fuzz target: a JSON Schema compiled for constrained decoding (runtime/schema.c) and the
 * schema-guided recogniser (runtime/constrain.c) walked over bytes. Input: the schema's
 * JSON, a NUL, then bytes fed one at a time (those refused are skipped; 0xff sets closing).
 * Checked: a schema is compiled or refused with a message; the recogniser never dead-ends
 * (some byte always goes on until the object is complete); and once closing, it completes
 * within nb_cons_cost bytes, the bound the server's budget relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/constrain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Does some byte go on from c? */
static int can_go_on(const struct nb_gram *g, const struct nb_cons *c)
{
    for (unsigned b = 0; b < 256; b++) {
        struct nb_cons t = *c;
        char ch = (char)b;
        if (nb_cons_feed(g, &t, &ch, 1)) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    cJSON *o = cJSON_ParseWithLength((const char *)data, (size_t)(nul - data));
    if (!o) return 0;
    struct nb_schema *s = NULL;
    enum nb_status st = nb_schema_compile(o, &s);
    cJSON_Delete(o);
    if (st != NB_OK) {
        if (s || !nb_last_error()[0]) abort(); /* refused: nothing made, and a message */
        return 0;
    }
    struct nb_gram g = {0};
    const struct nb_schema *one = s;
    if (nb_gram_schema(&g, &one, 1)) abort();
    struct nb_cons c;
    nb_cons_start(&g, &c);
    long budget = -1; /* once closing: the bytes it may still take */
    for (const uint8_t *b = nul + 1; b < data + size && !nb_cons_complete(&g, &c); b++) {
        if (*b == 0xff) {
            if (!c.closing) budget = nb_cons_cost(&g, &c);
            c.closing = 1;
            continue;
        }
        struct nb_cons t = c;
        if (!nb_cons_feed(&g, &t, (const char *)b, 1)) continue;
        c = t;
        if (budget >= 0 && --budget < 0 && !nb_cons_complete(&g, &c)) abort();
        if (!nb_cons_complete(&g, &c) && !can_go_on(&g, &c)) abort();
    }
    nb_gram_free(&g);
    nb_schema_free(s);
    return 0;
}
