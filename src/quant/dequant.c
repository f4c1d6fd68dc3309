/* quant/dequant.c — reference conversion of stored weight types to f32. */
#include "quant/dequant.h"

#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"

static uint16_t rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DEQUANT_F16C 1
/* f16 -> f32 with vcvtph2ps: exact, the same values as the scalar conversion (but for a
 * signalling NaN, which comes out quiet; the quantizer refuses NaN weights anyway). */
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const unsigned char *s,
                                                                  float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
    for (; i < n; i++) dst[i] = nb_f16_to_f32(rd16(s + 2 * i));
}
#endif

enum nb_status nb_dequant(enum nb_dtype dtype, const void *src, float *dst, int64_t n)
{
    const unsigned char *s = src;
    switch (dtype) {
    case NB_DTYPE_F32: memcpy(dst, src, (size_t)n * 4); return NB_OK;
    case NB_DTYPE_F16:
#ifdef DEQUANT_F16C
        if (strcmp(nb_kernels_get()->isa, "ref")) { /* avx2 and up: F16C is there */
            f16_to_f32_f16c(s, dst, n);
            return NB_OK;
        }
#endif
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
