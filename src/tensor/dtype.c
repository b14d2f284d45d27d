/*
 * dtype.c: element types: sizes, names, half/bfloat16 conversions, loading
 * and storing one element of any dtype as a double, and scalar bit casts.
 *
 * Invariants: every conversion rounds to nearest, ties to even; NaN stays NaN
 * (quiet) and infinities stay infinite; integer stores saturate and map NaN to
 * 0.  Values outside the dtype enum are answered (size 0, name "?", load 0,
 * store ignored), never trusted as an index.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"

static const struct {
    size_t size;
    const char *name;
} dtype_info[HG_DTYPE_COUNT] = {
    [HG_F32] = {4, "f32"}, [HG_F16] = {2, "f16"}, [HG_BF16] = {2, "bf16"}, [HG_F64] = {8, "f64"},
    [HG_I8] = {1, "i8"},   [HG_U8] = {1, "u8"},   [HG_I16] = {2, "i16"},   [HG_I32] = {4, "i32"},
    [HG_I64] = {8, "i64"}, [HG_U64] = {8, "u64"}, [HG_BOOL] = {1, "bool"},
};

/* The cast goes through unsigned so a negative enum value is rejected too. */
static int dtype_known(hg_dtype dtype)
{
    return (unsigned)dtype < (unsigned)HG_DTYPE_COUNT;
}

size_t hg_dtype_size(hg_dtype dtype)
{
    return dtype_known(dtype) ? dtype_info[dtype].size : 0;
}

const char *hg_dtype_name(hg_dtype dtype)
{
    return dtype_known(dtype) ? dtype_info[dtype].name : "?";
}

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

float hg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: the payload keeps a NaN non-zero */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return f32_from_bits(sign);
        /* Subnormal half: every one is a normal float; shift the leading
         * one into the implicit bit. */
        int e = 1;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            e--;
        }
        return f32_from_bits(sign | ((uint32_t)(e + 112) << 23) | ((mant & 0x3ffu) << 13));
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

/* A float below the smallest normal half, as a half subnormal (or zero). */
static uint16_t f16_subnormal(uint32_t x)
{
    if (x <= 0x33000000u) /* <= 2^-25: half of the smallest subnormal ties to 0 */
        return 0;
    uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (x >> 23); /* 14..24 for exponents 102..112 */
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
        h++; /* may carry into the smallest normal, whose encoding is 0x400 */
    return (uint16_t)h;
}

uint16_t hg_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) /* >= 65520 rounds to inf (65504 is odd, ties go up) */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) /* below 2^-14, the smallest normal half */
        return (uint16_t)(sign | f16_subnormal(x));
    /* Rounding adds half an ulp (minus one on even ties); a carry rolls into
     * the exponent, which is exactly the right answer. */
    uint32_t r = x + 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
}

float hg_bf16_to_f32(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

uint16_t hg_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncation could make it inf */
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u); /* overflow past max rounds to inf, as IEEE says */
    return (uint16_t)(x >> 16);
}

double hg_dtype_load(hg_dtype dtype, const void *base, size_t i)
{
    const unsigned char *p = (const unsigned char *)base + i * hg_dtype_size(dtype);
    union {
        float f32;
        double f64;
        uint16_t u16;
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint64_t u64;
    } v;
    if (!dtype_known(dtype) || base == NULL)
        return 0.0;
    memcpy(&v, p, hg_dtype_size(dtype)); /* no alignment assumed */
    switch (dtype) {
    case HG_F32:
        return v.f32;
    case HG_F16:
        return hg_f16_to_f32(v.u16);
    case HG_BF16:
        return hg_bf16_to_f32(v.u16);
    case HG_F64:
        return v.f64;
    case HG_I8:
        return v.i8;
    case HG_U8:
        return v.u8;
    case HG_I16:
        return v.i16;
    case HG_I32:
        return v.i32;
    case HG_I64:
        return (double)v.i64;
    case HG_U64:
        return (double)v.u64;
    case HG_BOOL:
        return v.u8 != 0;
    default:
        return 0.0;
    }
}

/* Rounds to nearest even and clamps to [lo, hi]; NaN becomes 0.  The bounds
 * are exact doubles; `hi_excl` is the first value past the type's max (for
 * 64-bit types the max itself is not a double). */
static double round_clamp(double v, double lo, double hi_excl, int *saturated_hi)
{
    *saturated_hi = 0;
    if (isnan(v))
        return 0.0;
    double r = nearbyint(v);
    if (r >= hi_excl) {
        *saturated_hi = 1;
        return 0.0;
    }
    return r < lo ? lo : r;
}

static void store_int(hg_dtype dtype, unsigned char *p, double v)
{
    int sat = 0;
    switch (dtype) {
    case HG_I8: {
        int8_t x = (int8_t)round_clamp(v, INT8_MIN, 128.0, &sat);
        *(int8_t *)p = sat ? INT8_MAX : x;
        return;
    }
    case HG_U8: {
        uint8_t x = (uint8_t)round_clamp(v, 0.0, 256.0, &sat);
        *p = sat ? UINT8_MAX : x;
        return;
    }
    case HG_I16: {
        int16_t x = (int16_t)round_clamp(v, INT16_MIN, 32768.0, &sat);
        x = sat ? INT16_MAX : x;
        memcpy(p, &x, sizeof x);
        return;
    }
    case HG_I32: {
        int32_t x = (int32_t)round_clamp(v, INT32_MIN, 2147483648.0, &sat);
        x = sat ? INT32_MAX : x;
        memcpy(p, &x, sizeof x);
        return;
    }
    case HG_I64: {
        int64_t x = (int64_t)round_clamp(v, -9223372036854775808.0, 9223372036854775808.0, &sat);
        x = sat ? INT64_MAX : x;
        memcpy(p, &x, sizeof x);
        return;
    }
    case HG_U64: {
        uint64_t x = (uint64_t)round_clamp(v, 0.0, 18446744073709551616.0, &sat);
        x = sat ? UINT64_MAX : x;
        memcpy(p, &x, sizeof x);
        return;
    }
    default:
        return;
    }
}

/* double -> float rounding to odd: a later float -> f16/bf16 rounding to
 * nearest even then equals a direct double -> f16/bf16 rounding (the odd bit
 * remembers that the value was not exactly on a half-way point). */
static float f32_round_odd(double v)
{
    float f = (float)v;
    if (isinf(f) || isnan(f) || (double)f == v)
        return f;
    uint32_t x = f32_bits(f);
    if ((x & 1u) == 0) /* step one ulp back toward v, which lies strictly between */
        x = (fabs((double)f) > fabs(v)) ? x - 1u : x + 1u;
    return f32_from_bits(x);
}

void hg_dtype_store(hg_dtype dtype, void *base, size_t i, double v)
{
    if (!dtype_known(dtype) || base == NULL)
        return;
    unsigned char *p = (unsigned char *)base + i * hg_dtype_size(dtype);
    uint16_t h;
    float f = (float)v;
    switch (dtype) {
    case HG_F32:
        memcpy(p, &f, sizeof f);
        return;
    case HG_F64:
        memcpy(p, &v, sizeof v);
        return;
    case HG_F16:
        h = hg_f32_to_f16(f32_round_odd(v));
        memcpy(p, &h, sizeof h);
        return;
    case HG_BF16:
        h = hg_f32_to_bf16(f32_round_odd(v));
        memcpy(p, &h, sizeof h);
        return;
    case HG_BOOL:
        *p = (v != 0.0);
        return; /* NaN != 0: true, as in C */
    default:
        store_int(dtype, p, v);
        return;
    }
}

uint64_t hg_scalar_f64(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

double hg_scalar_as_f64(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}
