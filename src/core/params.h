/* core/params.h — reading a caller's versioned params struct (nibble.h: each starts with
 * `size`; the library reads only that many bytes of the caller's copy). In core so that
 * every layer that takes one (model's nb_ctx_params, runtime's, server's) reads it the
 * same way. */
#ifndef NB_CORE_PARAMS_H
#define NB_CORE_PARAMS_H

#include <stddef.h>
#include <string.h>

#include "core/error.h"

/* The caller's params over the defaults: *dst holds the defaults (size = sizeof *dst);
 * the first min(src->size, sizeof) bytes of src replace them. NB_ERR_INVALID_ARG when
 * src->size is smaller than the size field itself (a struct not from *_default_params). */
static inline enum nb_status nb_params_in(void *dst, size_t dst_size, const void *src,
                                          const char *what)
{
    if (!src) return NB_OK;
    size_t n;
    memcpy(&n, src, sizeof n);
    if (n < sizeof(size_t))
        return nb_set_error(NB_ERR_INVALID_ARG,
                            "%s: size is %zu: take the struct from its *_default_params()", what,
                            n);
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           (n < dst_size ? n : dst_size) - sizeof(size_t));
    return NB_OK;
}

#endif
