/* Fuzz target: the .nib header and tensor table parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/nib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a 64-byte aligned copy, as a mapping would be */
    void *buf = NULL;
    if (posix_memalign(&buf, 64, size ? size : 1) != 0) return 0;
    memcpy(buf, data, size);
    struct nb_nib *n = NULL;
    if (nb_nib_parse(&n, buf, size, "fuzz.nib") == NB_OK) {
        for (int64_t i = 0; i < nb_nib_n_tensors(n); i++) (void)nb_nib_tensor(n, i)->size;
        nb_nib_verify(n);
        nb_nib_free(n);
    }
    free(buf);
    return 0;
}
