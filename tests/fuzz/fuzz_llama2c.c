/* Fuzz target: nb_llama2c_sniff and nb_llama2c_parse on arbitrary bytes; on
 * success touch the first and last byte of every tensor. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/llama2c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)nb_llama2c_sniff(data, size);
    struct nb_llama2c *m = NULL;
    if (nb_llama2c_parse(&m, data, size, "fuzz") != NB_OK) return 0;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < nb_llama2c_n_tensors(m); i++) {
        const struct nb_tensor *t = nb_llama2c_tensor(m, i);
        if (nb_llama2c_find(m, t->name) != t) abort();
        if (t->n_bytes)
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
    }
    (void)sink;
    nb_llama2c_free(m);
    return 0;
}
