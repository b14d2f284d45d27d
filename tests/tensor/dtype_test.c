/*
 * dtype_test.c: dtypes: sizes and names, f16/bf16 conversions (every code
 * round-trips; random and tie inputs against an independent nearest-value
 * reference), load/store rounding and saturation, scalar bit casts.
 */
#include <math.h>
#include <stdint.h>

#include "hostgraph.h"
#include "testlib.h"

static float float_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

/* ----------------------------------------------------------------- dtypes */

TEST(dtype_sizes_and_names)
{
    static const size_t sizes[HG_DTYPE_COUNT] = {4, 2, 2, 8, 1, 1, 2, 4, 8, 8, 1};
    static const char *names[HG_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i8",  "u8",
                                                "i16", "i32", "i64",  "u64", "bool"};
    for (int d = 0; d < HG_DTYPE_COUNT; d++) {
        ASSERT_UEQ(hg_dtype_size((hg_dtype)d), sizes[d]);
        ASSERT_STR_EQ(hg_dtype_name((hg_dtype)d), names[d]);
    }
    ASSERT_UEQ(hg_dtype_size(HG_DTYPE_COUNT), 0);
    ASSERT_UEQ(hg_dtype_size((hg_dtype)-1), 0);
    ASSERT_STR_EQ(hg_dtype_name(HG_DTYPE_COUNT), "?");
    ASSERT_STR_EQ(hg_dtype_name((hg_dtype)-1), "?");
}

/* The nearest of the monotone codes [0, top] (positive values of a 16-bit
 * format) to |f|, ties to the even code; `inf_at` is the first magnitude
 * that rounds to infinity.  Independent of the bit tricks under test. */
static uint16_t nearest_code(float (*decode)(uint16_t), uint16_t top, double inf_at, float f)
{
    double v = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (v >= inf_at)
        return sign | (uint16_t)(top + 1); /* the infinity code follows the max */
    uint32_t lo = 0, hi = top;             /* largest code with value <= v */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if ((double)decode((uint16_t)mid) <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == top)
        return sign | (uint16_t)lo;
    double below = v - decode((uint16_t)lo), above = decode((uint16_t)(lo + 1)) - v;
    uint16_t pick =
        (below < above || (below == above && (lo & 1) == 0)) ? (uint16_t)lo : (uint16_t)(lo + 1);
    return sign | pick;
}

/* Floats spread over every exponent, plus exact ties of the 16-bit formats. */
static float sample_float(test_rng *rng, uint32_t keep_bits)
{
    uint32_t x = test_rand(rng);
    if (test_rand(rng) % 4 == 0) /* a tie: only the bit below the kept mantissa set */
        x = (x & ~((1u << keep_bits) - 1u)) | (1u << (keep_bits - 1));
    return float_of(x);
}

TEST(f16_known_values)
{
    ASSERT_UEQ(hg_f32_to_f16(1.0f), 0x3c00);
    ASSERT_UEQ(hg_f32_to_f16(-2.0f), 0xc000);
    ASSERT_UEQ(hg_f32_to_f16(-0.0f), 0x8000);
    ASSERT_UEQ(hg_f32_to_f16(65504.0f), 0x7bff);
    ASSERT_UEQ(hg_f32_to_f16(65519.99f), 0x7bff);
    ASSERT_UEQ(hg_f32_to_f16(65520.0f), 0x7c00); /* tie above max: to even = inf */
    ASSERT_UEQ(hg_f32_to_f16(1e10f), 0x7c00);
    ASSERT_UEQ(hg_f32_to_f16(-INFINITY), 0xfc00);
    ASSERT_UEQ(hg_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie: stays even */
    ASSERT_UEQ(hg_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie: up to even */
    ASSERT_UEQ(hg_f32_to_f16(0x1p-24f), 0x0001);            /* smallest subnormal */
    ASSERT_UEQ(hg_f32_to_f16(0x1p-25f), 0x0000);            /* tie to even zero */
    ASSERT_UEQ(hg_f32_to_f16(0x1.000002p-25f), 0x0001);
    ASSERT_UEQ(hg_f32_to_f16(3 * 0x1p-25f), 0x0002);        /* tie to even */
    ASSERT_UEQ(hg_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* carries into normal */
    ASSERT_UEQ(hg_f32_to_f16(1e-30f), 0x0000);
    uint16_t nan = hg_f32_to_f16(NAN);
    ASSERT((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
    ASSERT(hg_f16_to_f32(0x0001) == 0x1p-24f);
    ASSERT(hg_f16_to_f32(0x03ff) == 0x3ffp-24f);
    ASSERT(hg_f16_to_f32(0x3555) == 0.333251953125f);
    ASSERT(hg_f16_to_f32(0xc000) == -2.0f);
    ASSERT(isinf(hg_f16_to_f32(0x7c00)) && hg_f16_to_f32(0xfc00) < 0);
    ASSERT(isnan(hg_f16_to_f32(0x7e00)) && isnan(hg_f16_to_f32(0x7c01)));
    ASSERT(signbit(hg_f16_to_f32(0x8000)));
}

TEST(f16_round_trips_every_code)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = hg_f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
            ASSERT(isnan(f));
            uint16_t back = hg_f32_to_f16(f);
            ASSERT((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
            continue;
        }
        ASSERT_UEQ(hg_f32_to_f16(f), h);
    }
}

TEST(f16_rounds_to_nearest_even)
{
    test_rng rng = test_seed(16);
    for (int i = 0; i < 200000; i++) {
        float f = sample_float(&rng, 13);
        if (isnan(f))
            continue;
        uint16_t want = nearest_code(hg_f16_to_f32, 0x7bff, 65520.0, f);
        uint16_t got = hg_f32_to_f16(f);
        if (got != want)
            TEST_FAIL_("f16(%a) = 0x%04x, want 0x%04x", (double)f, got, want);
    }
}

TEST(bf16_known_values_and_round_trips)
{
    ASSERT_UEQ(hg_f32_to_bf16(1.0f), 0x3f80);
    ASSERT_UEQ(hg_f32_to_bf16(-2.0f), 0xc000);
    ASSERT_UEQ(hg_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);       /* tie: stays even */
    ASSERT_UEQ(hg_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   /* tie: up to even */
    ASSERT_UEQ(hg_f32_to_bf16(float_of(0x7f7fffff)), 0x7f80); /* max float rounds to inf */
    ASSERT_UEQ(hg_f32_to_bf16(float_of(0x00000001)), 0x0000); /* tiny subnormal */
    ASSERT_UEQ(hg_f32_to_bf16(float_of(0x00008001)), 0x0001); /* subnormal, rounds up */
    uint16_t nan = hg_f32_to_bf16(float_of(0x7f800001));      /* truncation would give inf */
    ASSERT((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
    for (uint32_t b = 0; b <= 0xffff; b++) {
        float f = hg_bf16_to_f32((uint16_t)b);
        ASSERT_UEQ(bits_of(f), b << 16);
        if (!isnan(f))
            ASSERT_UEQ(hg_f32_to_bf16(f), b);
    }
}

TEST(bf16_rounds_to_nearest_even)
{
    /* Halfway between the max bf16 (0x7f7f) and 2^128. */
    double inf_at = (double)hg_bf16_to_f32(0x7f7f) + ldexp(1.0, 127 - 8);
    test_rng rng = test_seed(32);
    for (int i = 0; i < 200000; i++) {
        float f = sample_float(&rng, 16);
        if (isnan(f))
            continue;
        uint16_t want = nearest_code(hg_bf16_to_f32, 0x7f7f, inf_at, f);
        uint16_t got = hg_f32_to_bf16(f);
        if (got != want)
            TEST_FAIL_("bf16(%a) = 0x%04x, want 0x%04x", (double)f, got, want);
    }
}

TEST(dtype_load_store_round_and_saturate)
{
    unsigned char buf[64];
    static const struct {
        hg_dtype d;
        double in, out;
    } cases[] = {
        {HG_I8, 2.5, 2},
        {HG_I8, 3.5, 4},
        {HG_I8, -2.5, -2},
        {HG_I8, 1000, 127},
        {HG_I8, -1000, -128},
        {HG_I8, NAN, 0},
        {HG_U8, -3, 0},
        {HG_U8, 255.4, 255},
        {HG_U8, 300, 255},
        {HG_I16, 40000, 32767},
        {HG_I16, -40000, -32768},
        {HG_I32, 1e12, 2147483647.0},
        {HG_I32, -1e12, -2147483648.0},
        {HG_I64, 1e30, 9223372036854775807.0},
        {HG_I64, -1e30, -9223372036854775808.0},
        {HG_U64, 1e30, 18446744073709551615.0},
        {HG_U64, -1, 0},
        {HG_BOOL, 0.5, 1},
        {HG_BOOL, 0, 0},
        {HG_F32, 0.1, (double)0.1f},
        {HG_F64, 0.1, 0.1},
        {HG_F16, 65504, 65504},
        {HG_F16, 1e6, INFINITY},
        {HG_BF16, 3.0, 3.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(buf, 0xa5, sizeof buf);
        hg_dtype_store(cases[i].d, buf, 3, cases[i].in);
        double got = hg_dtype_load(cases[i].d, buf, 3);
        if (got != cases[i].out)
            TEST_FAIL_("%s: store %g loads %.17g, want %.17g", hg_dtype_name(cases[i].d),
                       cases[i].in, got, cases[i].out);
        /* Element 3 only: its neighbours keep their bytes. */
        size_t sz = hg_dtype_size(cases[i].d);
        ASSERT_EQ(buf[3 * sz - 1], 0xa5);
        ASSERT_EQ(buf[4 * sz], 0xa5);
    }
    /* A double just above an f16 tie must not round as the tie (no double
     * rounding through float). */
    uint16_t h;
    hg_dtype_store(HG_F16, &h, 0, 1.0 + 0x1p-11 + 0x1p-40);
    ASSERT_UEQ(h, 0x3c01);
    hg_dtype_store(HG_BF16, &h, 0, 1.0 + 0x1p-8 + 0x1p-40);
    ASSERT_UEQ(h, 0x3f81);
    ASSERT(hg_dtype_load(HG_DTYPE_COUNT, buf, 0) == 0.0);
}

TEST(scalar_bits_round_trip)
{
    double vals[] = {0.0, -0.0, 1.5, -1e300, INFINITY};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint64_t bits = hg_scalar_f64(vals[i]);
        double back = hg_scalar_as_f64(bits);
        ASSERT(memcmp(&back, &vals[i], sizeof back) == 0);
    }
    ASSERT_UEQ(hg_scalar_f64(1.0), 0x3ff0000000000000ull);
    ASSERT(isnan(hg_scalar_as_f64(hg_scalar_f64(NAN))));
}

int main(void)
{
    return RUN_TESTS();
}
