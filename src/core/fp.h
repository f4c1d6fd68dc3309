/* core/fp.h — f16 / bf16 <-> f32 conversions (scalar, exact). */
#ifndef NB_CORE_FP_H
#define NB_CORE_FP_H

#include <stdint.h>
#include <string.h>

static inline float nb_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t nb_bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float nb_bf16_to_f32(uint16_t h) { return nb_f32_from_bits((uint32_t)h << 16); }

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t nb_f32_to_bf16(float f)
{
    uint32_t u = nb_bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float nb_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return nb_f32_from_bits(u);
}

/* Round to nearest even, with overflow to inf and gradual underflow. */
static inline uint16_t nb_f32_to_f16(float f)
{
    uint32_t u = nb_bits_from_f32(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520 */
    if (a < 0x38800000u) {                                     /* below f16 min normal */
        if (a < 0x33000000u) return (uint16_t)sign;            /* < half the smallest subnormal */
        uint32_t man = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14 + (113 - exp) */
        uint32_t r = man >> shift;
        /* value = man * 2^(exp-150), f16 subnormal unit 2^-24: r = man >> (126-exp) */
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

#endif
