/* Fuzz target: nb_safetensors_parse on arbitrary bytes; on success touch every
 * tensor's bytes so an out-of-bounds view is caught by ASan. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_safetensors *st = NULL;
    if (nb_safetensors_parse(&st, data, size, "fuzz") != NB_OK) return 0;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < nb_safetensors_n_tensors(st); i++) {
        const struct nb_tensor *t = nb_safetensors_tensor(st, i);
        if (nb_safetensors_find(st, t->name) != t) abort();
        if (t->n_bytes)
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
    }
    (void)nb_safetensors_metadata(st, "format");
    (void)sink;
    nb_safetensors_free(st);
    return 0;
}
