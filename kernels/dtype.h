/* dtype.h — storage types and exact bit conversions shared by every kernel.
 *
 * Contract: activations and low-precision weights are stored as f32, bf16 or
 * f16; all arithmetic happens in float. Conversions round to nearest even,
 * keep NaN/Inf, and are identical on the CPU and (by construction) the GPU,
 * so CPU twins can be compared with CUDA kernels element by element. */
#ifndef MS_DTYPE_H
#define MS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { MS_F32 = 0, MS_BF16 = 1, MS_F16 = 2 } ms_dtype;

static inline size_t ms_dtype_size(ms_dtype dt) { return dt == MS_F32 ? 4 : 2; }
static inline const char *ms_dtype_name(ms_dtype dt)
{
    return dt == MS_F32 ? "f32" : dt == MS_BF16 ? "bf16" : "f16";
}

static inline uint32_t ms__f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ms__u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline uint16_t ms_f32_to_bf16(float f)
{
    uint32_t u = ms__f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}
static inline float ms_bf16_to_f32(uint16_t h) { return ms__u2f((uint32_t)h << 16); }

static inline uint16_t ms_f32_to_f16(float f)
{
    uint32_t u = ms__f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         /* overflow -> Inf */
    if (a < 0x38800000u) {                                            /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;                   /* rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                                     /* 14 + (112 - e) + ... */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}
static inline float ms_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return ms__u2f(sign);
        float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -f : f;
    }
    if (e == 31) return ms__u2f(sign | 0x7f800000u | (m << 13));
    return ms__u2f(sign | ((e + 112) << 23) | (m << 13));
}

/* Element i of a buffer of type dt, as float. */
static inline float ms_ld(const void *p, ms_dtype dt, size_t i)
{
    if (dt == MS_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == MS_BF16 ? ms_bf16_to_f32(h) : ms_f16_to_f32(h);
}
/* Store v (rounded to dt) as element i. */
static inline void ms_st(void *p, ms_dtype dt, size_t i, float v)
{
    if (dt == MS_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = dt == MS_BF16 ? ms_f32_to_bf16(v) : ms_f32_to_f16(v);
}
/* v rounded through dt and back: what a store then a load yields. */
static inline float ms_round(ms_dtype dt, float v)
{
    if (dt == MS_F32) return v;
    return dt == MS_BF16 ? ms_bf16_to_f32(ms_f32_to_bf16(v)) : ms_f16_to_f32(ms_f32_to_f16(v));
}

#endif
