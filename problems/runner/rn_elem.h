/* Elements of every argument dtype, read and written the same way on the host and on the GPU:
 * one software definition of each conversion (bf16, f16 and fp8 e4m3 round to nearest even),
 * so the host backend, the GPU backend and the checkers agree bit for bit. */
#ifndef RN_ELEM_H
#define RN_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pk_problem_module.h"
#include "pk_splitmix.h"

static inline PK_HD uint32_t rn_f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static inline PK_HD float rn_bits_f32(uint32_t x) {
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline PK_HD uint16_t rn_f32_to_bf16(float f) {
    uint32_t x = rn_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0; /* NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline PK_HD uint16_t rn_f32_to_f16(float f) {
    uint32_t x = rn_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, or 0 */
        if (ax < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        q += rem > half || (rem == half && (q & 1u));
        return (uint16_t)(sign | q);
    }
    uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffffu) >> 13), rem = ax & 0x1fffu;
    h += rem > 0x1000u || (rem == 0x1000u && (h & 1u)); /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

static inline PK_HD double rn_f16_to_f64(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0    ? ldexp((double)m, -24)
               : e == 31 ? (m ? NAN : INFINITY)
                         : ldexp((double)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* fp8 e4m3fn (no infinities; 0x7f and 0xff are NaN; largest 448). Saturates at +-448, as
 * __NV_SATFINITE does, so a generated input is never NaN. */
static inline PK_HD uint8_t rn_f64_to_fp8(double v) {
    if (v != v)
        return 0x7f;
    uint8_t sign = v < 0 ? 0x80 : 0;
    double a = fabs(v);
    if (a >= 464.0) /* the midpoint between 448 and the next step */
        return (uint8_t)(sign | 0x7e);
    if (a < 0.015625) /* below 2^-6: subnormal, in steps of 2^-9 (8 steps reach 2^-6) */
        return (uint8_t)(sign | (uint8_t)rint(a * 512.0));
    int ex;
    double fr = frexp(a, &ex); /* a = fr 2^ex, fr in [0.5, 1) */
    int e = ex - 1, q = (int)rint((2.0 * fr - 1.0) * 8.0);
    if (q == 8) {
        q = 0;
        e++;
    }
    int code = ((e + 7) << 3) | q;
    return (uint8_t)(sign | (code > 0x7e ? 0x7e : code));
}

static inline PK_HD double rn_fp8_to_f64(uint8_t b) {
    int e = (b >> 3) & 0xf, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp((double)(8 + m), e - 10);
    return (b & 0x80) ? -v : v;
}

static inline PK_HD double rn_load(const void *p, int t, size_t i) {
    switch (t) {
    case PK_DTYPE_BF16:
        return rn_bits_f32((uint32_t)((const uint16_t *)p)[i] << 16);
    case PK_DTYPE_F16:
        return rn_f16_to_f64(((const uint16_t *)p)[i]);
    case PK_DTYPE_F32:
        return ((const float *)p)[i];
    case PK_DTYPE_F64:
        return ((const double *)p)[i];
    case PK_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case PK_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case PK_DTYPE_F8E4M3:
        return rn_fp8_to_f64(((const uint8_t *)p)[i]);
    case PK_DTYPE_I8:
        return ((const int8_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i];
    }
}

static inline PK_HD void rn_store(void *p, int t, size_t i, double v) {
    switch (t) {
    case PK_DTYPE_BF16:
        ((uint16_t *)p)[i] = rn_f32_to_bf16((float)v);
        break;
    case PK_DTYPE_F16:
        ((uint16_t *)p)[i] = rn_f32_to_f16((float)v);
        break;
    case PK_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case PK_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case PK_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case PK_DTYPE_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case PK_DTYPE_F8E4M3:
        ((uint8_t *)p)[i] = rn_f64_to_fp8(v);
        break;
    case PK_DTYPE_I8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    default:
        ((uint8_t *)p)[i] = (uint8_t)v;
    }
}

/* Writes the harness's poison: NaN for floating types, 0x7f... bytes for integers. */
static inline PK_HD void rn_poison(void *p, int t, size_t i) {
    switch (t) {
    case PK_DTYPE_I32:
        ((int32_t *)p)[i] = 0x7f7f7f7f;
        break;
    case PK_DTYPE_I64:
        ((int64_t *)p)[i] = 0x7f7f7f7f7f7f7f7fLL;
        break;
    case PK_DTYPE_I8:
    case PK_DTYPE_U8:
        ((uint8_t *)p)[i] = 0x7f;
        break;
    default:
        rn_store(p, t, i, NAN);
    }
}

/* Distance in representable values between two elements (integers: their difference), for
 * the budget checker's "at most max_ulp steps away". */
static inline PK_HD uint64_t rn_ulp_distance(const void *a, const void *b, int t, size_t i) {
    int64_t x, y;
    switch (t) {
    case PK_DTYPE_BF16:
    case PK_DTYPE_F16: {
        uint16_t u = ((const uint16_t *)a)[i], v = ((const uint16_t *)b)[i];
        x = (u & 0x8000) ? -(int64_t)(u & 0x7fff) : u;
        y = (v & 0x8000) ? -(int64_t)(v & 0x7fff) : v;
        break;
    }
    case PK_DTYPE_F32: {
        uint32_t u = ((const uint32_t *)a)[i], v = ((const uint32_t *)b)[i];
        x = (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
        y = (v & 0x80000000u) ? -(int64_t)(v & 0x7fffffffu) : (int64_t)v;
        break;
    }
    case PK_DTYPE_F64: {
        uint64_t u = ((const uint64_t *)a)[i], v = ((const uint64_t *)b)[i];
        x = (u >> 63) ? -(int64_t)(u & 0x7fffffffffffffffull) : (int64_t)u;
        y = (v >> 63) ? -(int64_t)(v & 0x7fffffffffffffffull) : (int64_t)v;
        break;
    }
    case PK_DTYPE_F8E4M3: {
        uint8_t u = ((const uint8_t *)a)[i], v = ((const uint8_t *)b)[i];
        x = (u & 0x80) ? -(int64_t)(u & 0x7f) : u;
        y = (v & 0x80) ? -(int64_t)(v & 0x7f) : v;
        break;
    }
    default:
        x = (int64_t)rn_load(a, t, i);
        y = (int64_t)rn_load(b, t, i);
    }
    return x > y ? (uint64_t)(x - y) : (uint64_t)(y - x);
}

#endif
