/* core/checked.h — overflow-checked size arithmetic for values read from files.
 * Each returns 0 on success and 1 on overflow (result untouched then). */
#ifndef NB_CORE_CHECKED_H
#define NB_CORE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int nb_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}
static inline int nb_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}
/* Round `x` up to a multiple of `align` (a power of two or any positive value). */
static inline int nb_align_u64(uint64_t x, uint64_t align, uint64_t *out)
{
    if (align == 0) return 1;
    uint64_t r = x % align;
    if (r == 0) {
        *out = x;
        return 0;
    }
    return nb_add_u64(x, align - r, out);
}

#endif
