/* Fuzz target: nb_json_parse on arbitrary bytes, then the typed getters on the
 * members of a top-level object. */
#include <stdint.h>

#include "formats/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *root = NULL;
    if (nb_json_parse((const char *)data, size, "fuzz", &root) != NB_OK) return 0;
    if (cJSON_IsObject(root)) {
        for (const cJSON *e = root->child; e; e = e->next) {
            if (!e->string) continue;
            int64_t i;
            double d;
            int b;
            const char *s;
            (void)nb_json_get_int(root, e->string, 0, &i, "fuzz");
            (void)nb_json_get_num(root, e->string, 0, &d, "fuzz");
            (void)nb_json_get_bool(root, e->string, 0, &b, "fuzz");
            (void)nb_json_get_str(root, e->string, "", &s, "fuzz");
        }
    }
    cJSON_Delete(root);
    return 0;
}
