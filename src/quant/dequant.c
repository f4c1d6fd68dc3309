/* quant/dequant.c — reference conversion of stored weight types to f32. */
#include "quant/dequant.h"

#include <string.h>

#include "core/fp.h"

static uint16_t rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

enum nb_status nb_dequant(enum nb_dtype dtype, const void *src, float *dst, int64_t n)
{
    const unsigned char *s = src;
    switch (dtype) {
    case NB_DTYPE_F32: memcpy(dst, src, (size_t)n * 4); return NB_OK;
    case NB_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = nb_f16_to_f32(rd16(s + 2 * i));
        return NB_OK;
    case NB_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = nb_bf16_to_f32(rd16(s + 2 * i));
        return NB_OK;
    case NB_DTYPE_I8:
        for (int64_t i = 0; i < n; i++) dst[i] = (float)(int8_t)s[i];
        return NB_OK;
    case NB_DTYPE_Q8_0:
        if (n % 32) break;
        for (int64_t b = 0; b < n / 32; b++, s += 34) {
            float d = nb_f16_to_f32(rd16(s));
            for (int j = 0; j < 32; j++) dst[b * 32 + j] = d * (float)(int8_t)s[2 + j];
        }
        return NB_OK;
    case NB_DTYPE_Q4_0:
        if (n % 32) break;
        for (int64_t b = 0; b < n / 32; b++, s += 18) {
            float d = nb_f16_to_f32(rd16(s));
            for (int j = 0; j < 16; j++) {
                dst[b * 32 + j] = d * (float)((s[2 + j] & 0x0f) - 8);
                dst[b * 32 + j + 16] = d * (float)((s[2 + j] >> 4) - 8);
            }
        }
        return NB_OK;
    default:
        if (nb_dequant_is_block_type(dtype)) return nb_dequant_blocks(dtype, src, dst, n);
        break;
    }
    return nb_set_error(NB_ERR_UNSUPPORTED, "cannot convert %lld elements of type %s to f32",
                        (long long)n, nb_dtype_name(dtype));
}
