/*
 * tensor_test.c: dtypes (sizes, names, f16/bf16 conversions against an
 * independent nearest-value reference, load/store rounding and saturation)
 * and views (extent, nbytes, slice, density, overlap, checked overflow near
 * SIZE_MAX, the dims limit, and tensor_for_each_run against a byte map).
 */
#include <math.h>
#include <stdint.h>

#include "tensor/tensor.h"
#include "testlib.h"

static uint32_t rng_state = 12345;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

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
static float sample_float(uint32_t keep_bits)
{
    uint32_t x = rnd();
    if (rnd() % 4 == 0) /* a tie: only the bit below the kept mantissa set */
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
    for (int i = 0; i < 200000; i++) {
        float f = sample_float(13);
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
    for (int i = 0; i < 200000; i++) {
        float f = sample_float(16);
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

/* ------------------------------------------------------------------ views */

static hg_hostbuf *buf_a, *buf_b;

static void make_bufs(void)
{
    if (buf_a == NULL) {
        hg_hostbuf_create(0, &buf_a);
        hg_hostbuf_create(0, &buf_b);
    }
}

TEST(dense_host_view_extent_and_nbytes)
{
    make_bufs();
    hg_tensor t;
    size_t shape[3] = {2, 3, 4}, lo = 99, hi = 99, n = 0;
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 3, shape));
    ASSERT(t.host == buf_a && t.device == 0 && t.offset == 0);
    ASSERT_UEQ(t.strides[0], 12);
    ASSERT_UEQ(t.strides[1], 4);
    ASSERT_UEQ(t.strides[2], 1);
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(lo, 0);
    ASSERT_UEQ(hi, 96);
    ASSERT_OK(hg_tensor_nbytes(&t, &n));
    ASSERT_UEQ(n, 96);
    ASSERT_OK(tensor_numel(&t, &n));
    ASSERT_UEQ(n, 24);
    ASSERT(hg_tensor_is_dense(&t));
    /* ndims 0 is one element. */
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F64, 0, NULL));
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi - lo, 8);
    ASSERT_OK(hg_tensor_nbytes(&t, &n));
    ASSERT_UEQ(n, 8);
    ASSERT(hg_tensor_is_dense(&t));
}

TEST(empty_view_is_empty)
{
    make_bufs();
    hg_tensor t;
    size_t shape[3] = {3, 0, SIZE_MAX}, lo = 1, hi = 1, n = 1;
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 3, shape));
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(lo, 0);
    ASSERT_UEQ(hi, 0);
    ASSERT_OK(hg_tensor_nbytes(&t, &n));
    ASSERT_UEQ(n, 0);
    ASSERT(!hg_tensor_overlap(&t, &t));
    t.offset = 1000;
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi, 0);
    hg_tensor d;
    ASSERT_OK(hg_tensor_device(&d, 0, HG_F32, 3, shape)); /* empty: no address needed */
    ASSERT_OK(tensor_validate(&d, "empty", NULL));
}

TEST(view_errors_and_limits)
{
    make_bufs();
    hg_tensor t;
    size_t shape[6] = {1, 1, 1, 1, 1, 1};
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F32, 6, shape), HG_ELIMIT);
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_DTYPE_COUNT, 1, shape), HG_EINVAL);
    ASSERT_EQ(hg_tensor_host(&t, buf_a, (hg_dtype)-1, 1, shape), HG_EINVAL);
    ASSERT_EQ(hg_tensor_host(&t, NULL, HG_F32, 1, shape), HG_EINVAL);
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F32, 1, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&t, 0, HG_F32, 1, shape), HG_EINVAL); /* non-empty, no addr */
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 5, shape));
    t.ndims = 6;
    hg_err e;
    err_clear(&e);
    ASSERT_EQ(tensor_validate(&t, "arg 'x'", &e), HG_ELIMIT);
    ASSERT_STR_CONTAINS(e.msg, "arg 'x'");
    t.ndims = 1;
    t.dtype = HG_DTYPE_COUNT;
    ASSERT_EQ(tensor_validate(&t, "arg 'y'", &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "arg 'y'");
    size_t lo, hi;
    ASSERT_EQ(hg_tensor_extent(&t, &lo, &hi), HG_EINVAL);
    ASSERT(!hg_tensor_is_dense(&t));
}

TEST(overflow_near_size_max)
{
    make_bufs();
    hg_tensor t;
    size_t n, lo, hi;
    size_t big[1] = {SIZE_MAX};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_U8, 1, big)); /* SIZE_MAX bytes: fits */
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi, SIZE_MAX);
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F16, 1, big), HG_EOVERFLOW);
    size_t half[1] = {SIZE_MAX / 2 + 1};
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F32, 1, half), HG_EOVERFLOW);
    size_t two[2] = {SIZE_MAX / 4, 8};
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_U8, 2, two), HG_EOVERFLOW);
    size_t strides_overflow[3] = {2, SIZE_MAX / 2, 4};
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_U8, 3, strides_overflow), HG_EOVERFLOW);
    /* A hand-made view: the last element lands past SIZE_MAX. */
    size_t one[1] = {1};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_U8, 1, one));
    t.offset = SIZE_MAX;
    ASSERT_EQ(hg_tensor_extent(&t, &lo, &hi), HG_EOVERFLOW);
    ASSERT_EQ(hg_tensor_nbytes(&t, &n), HG_EOVERFLOW);
    ASSERT_EQ(tensor_validate(&t, "v", NULL), HG_EOVERFLOW);
    ASSERT(!hg_tensor_is_dense(&t) && !hg_tensor_overlap(&t, &t));
    t.offset = SIZE_MAX - 1; /* now the one byte fits */
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi, SIZE_MAX);
    size_t two_dims[2] = {3, 3};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, two_dims));
    t.strides[0] = SIZE_MAX / 2;
    ASSERT_EQ(hg_tensor_extent(&t, &lo, &hi), HG_EOVERFLOW);
    ASSERT_EQ(tensor_for_each_run(&t, NULL, NULL), HG_EOVERFLOW);
    /* Device views must also fit the device address space. */
    size_t sixteen[1] = {16};
    ASSERT_EQ(hg_tensor_device(&t, UINT64_MAX - 10, HG_U8, 1, sixteen), HG_EOVERFLOW);
    ASSERT_OK(hg_tensor_device(&t, UINT64_MAX - 16, HG_U8, 1, sixteen));
    t.offset = 1;
    ASSERT_EQ(tensor_validate(&t, "dev", NULL), HG_EOVERFLOW);
}

TEST(slice_narrows_and_checks)
{
    make_bufs();
    hg_tensor t, s;
    size_t shape[2] = {4, 6}, lo, hi;
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, shape));
    ASSERT_OK(hg_tensor_slice(&t, 1, 2, 3, &s));
    ASSERT_UEQ(s.offset, 2);
    ASSERT_UEQ(s.shape[1], 3);
    ASSERT_UEQ(s.strides[0], 6);
    ASSERT(!hg_tensor_is_dense(&s));
    ASSERT_OK(hg_tensor_extent(&s, &lo, &hi));
    ASSERT_UEQ(lo, 8);
    ASSERT_UEQ(hi, (2 + 3 * 6 + 2 + 1) * 4);
    ASSERT_OK(hg_tensor_slice(&t, 0, 1, 2, &s));
    ASSERT(hg_tensor_is_dense(&s));
    ASSERT_OK(hg_tensor_extent(&s, &lo, &hi));
    ASSERT_UEQ(lo, 24);
    ASSERT_UEQ(hi, 72);
    ASSERT_OK(hg_tensor_slice(&t, 0, 4, 0, &s)); /* empty at the end is fine */
    ASSERT_OK(hg_tensor_extent(&s, &lo, &hi));
    ASSERT_UEQ(hi, 0);
    ASSERT_EQ(hg_tensor_slice(&t, 0, 3, 2, &s), HG_ERANGE);
    ASSERT_EQ(hg_tensor_slice(&t, 0, SIZE_MAX, 2, &s), HG_ERANGE);
    ASSERT_EQ(hg_tensor_slice(&t, 2, 0, 1, &s), HG_EINVAL);
    /* An empty slice past the end whose offset would overflow. */
    size_t two[1] = {2};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_U8, 1, two));
    t.strides[0] = SIZE_MAX / 2;
    t.offset = 2;
    ASSERT_OK(hg_tensor_slice(&t, 0, 1, 1, &s));
    ASSERT_UEQ(s.offset, 2 + SIZE_MAX / 2);
    ASSERT_EQ(hg_tensor_slice(&t, 0, 2, 0, &s), HG_EOVERFLOW);
}

TEST(density_of_layouts)
{
    make_bufs();
    hg_tensor t;
    size_t shape[2] = {4, 3};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, shape));
    t.strides[0] = 1; /* transposed: still exactly its extent */
    t.strides[1] = 4;
    ASSERT(hg_tensor_is_dense(&t));
    t.strides[1] = 0; /* broadcast: elements repeat */
    ASSERT(!hg_tensor_is_dense(&t));
    t.strides[0] = 8; /* padded rows */
    t.strides[1] = 1;
    ASSERT(!hg_tensor_is_dense(&t));
    t.shape[0] = 2; /* rows overlap */
    t.strides[0] = 2;
    ASSERT(!hg_tensor_is_dense(&t));
    t.shape[0] = 1; /* a single row: the odd stride does not matter */
    t.strides[0] = 12345;
    ASSERT(hg_tensor_is_dense(&t));
}

TEST(overlap_same_buffer_only)
{
    make_bufs();
    hg_tensor a, b;
    size_t shape[1] = {10};
    ASSERT_OK(hg_tensor_host(&a, buf_a, HG_F32, 1, shape));
    b = a;
    b.offset = 9;
    ASSERT(hg_tensor_overlap(&a, &b)); /* shares element 9 */
    b.offset = 10;
    ASSERT(!hg_tensor_overlap(&a, &b)); /* adjacent */
    b.offset = 0;
    b.host = buf_b;
    ASSERT(!hg_tensor_overlap(&a, &b)); /* another host buffer */
    ASSERT_OK(hg_tensor_device(&b, 0x1000, HG_F32, 1, shape));
    ASSERT(!hg_tensor_overlap(&a, &b)); /* host vs device */
    hg_tensor c;
    ASSERT_OK(hg_tensor_device(&c, 0x1000 + 36, HG_F32, 1, shape));
    ASSERT(hg_tensor_overlap(&b, &c)); /* device space: [0x1000,+40) vs [0x1024,+40) */
    ASSERT_OK(hg_tensor_device(&c, 0x1000 + 40, HG_F32, 1, shape));
    ASSERT(!hg_tensor_overlap(&b, &c));
    c.device = 0x1000 + 16;
    c.offset = 5; /* starts at 0x1000 + 36, through a different base and offset */
    ASSERT(hg_tensor_overlap(&b, &c));
    c.shape[0] = 0;
    ASSERT(!hg_tensor_overlap(&b, &c)); /* empty overlaps nothing */
}

/* ------------------------------------------------------------- byte runs */

typedef struct run_log {
    size_t lo[4096], len[4096];
    size_t n;
    int stop_at; /* return non-zero at this call, -1 never */
} run_log;

static int log_run(void *ctx, size_t offset, size_t len)
{
    run_log *l = ctx;
    if (l->n < 4096) {
        l->lo[l->n] = offset;
        l->len[l->n] = len;
    }
    l->n++;
    return (int)l->n == l->stop_at ? 77 : 0;
}

#define MAP_BYTES 65536

/* Marks every byte of every element of t (odometer over the raw dims). */
static void brute_force_map(const hg_tensor *t, unsigned char *map)
{
    size_t numel = 1, esize = hg_dtype_size(t->dtype);
    for (uint32_t i = 0; i < t->ndims; i++)
        numel *= t->shape[i];
    for (size_t k = 0; k < numel; k++) {
        size_t rest = k, elem = t->offset;
        for (uint32_t i = t->ndims; i-- > 0;) {
            elem += (rest % t->shape[i]) * t->strides[i];
            rest /= t->shape[i];
        }
        memset(map + elem * esize, 1, esize);
    }
}

static void random_view(hg_tensor *t)
{
    static const hg_dtype dts[] = {HG_U8, HG_F16, HG_F32, HG_F64};
    memset(t, 0, sizeof *t);
    t->host = buf_a;
    t->dtype = dts[rnd() % 4];
    t->ndims = rnd() % 6;
    t->offset = rnd() % 12;
    for (uint32_t i = 0; i < t->ndims; i++) {
        t->shape[i] = rnd() % 5 == 0 ? 1 + rnd() % 2 : rnd() % 5;
        if (rnd() % 10 == 0)
            t->shape[i] = 4; /* keep most views non-empty */
        t->strides[i] = rnd() % 7 == 0 ? 0 : rnd() % 24;
    }
    /* Half the time: a dense layout, permuted (transposed) or padded. */
    if (rnd() % 2 && t->ndims > 0) {
        size_t s = 1 + (rnd() % 3 == 0);
        for (uint32_t i = t->ndims; i-- > 0;) {
            t->strides[i] = s;
            s *= t->shape[i] + (rnd() % 4 == 0);
        }
        uint32_t a = rnd() % t->ndims, b = rnd() % t->ndims;
        size_t sh = t->shape[a], st = t->strides[a];
        t->shape[a] = t->shape[b];
        t->strides[a] = t->strides[b];
        t->shape[b] = sh;
        t->strides[b] = st;
    }
}

/* The maximal runs of the byte map must be exactly what was reported. */
static int check_runs(const unsigned char *map, size_t end, const run_log *log)
{
    size_t k = 0, i = 0;
    while (i < end) {
        if (!map[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < end && map[j])
            j++;
        if (k >= log->n || log->lo[k] != i || log->len[k] != j - i)
            return 0;
        k++;
        i = j;
    }
    return k == log->n;
}

TEST(for_each_run_matches_byte_map)
{
    make_bufs();
    static unsigned char map[MAP_BYTES];
    static run_log log;
    for (int iter = 0; iter < 20000; iter++) {
        hg_tensor t;
        random_view(&t);
        size_t lo, hi;
        ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
        ASSERT(hi < MAP_BYTES);
        memset(map, 0, hi + 1);
        brute_force_map(&t, map);
        log.n = 0;
        log.stop_at = -1;
        ASSERT_OK(tensor_for_each_run(&t, log_run, &log));
        if (!check_runs(map, hi + 1, &log))
            TEST_FAIL_("iteration %d: runs differ (ndims %u, %zu runs)", iter, t.ndims, log.n);
        /* Dense views are one run: the extent. */
        if (hg_tensor_is_dense(&t) && hi > lo) {
            ASSERT_UEQ(log.n, 1);
            ASSERT_UEQ(log.lo[0], lo);
            ASSERT_UEQ(log.len[0], hi - lo);
        }
    }
}

TEST(for_each_run_stops_early)
{
    make_bufs();
    hg_tensor t;
    size_t shape[2] = {8, 4};
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, shape));
    t.strides[0] = 10; /* padded: 8 runs */
    static run_log log;
    log.n = 0;
    log.stop_at = 3;
    ASSERT_EQ(tensor_for_each_run(&t, log_run, &log), 77);
    ASSERT_UEQ(log.n, 3);
    ASSERT_UEQ(log.lo[2], 2 * 10 * 4);
    ASSERT_UEQ(log.len[2], 16);
}

TEST(for_each_run_huge_dense_view_is_one_call)
{
    make_bufs();
    hg_tensor t;
    size_t shape[4] = {1u << 12, 1u << 12, 1u << 12, 1u << 8}; /* 2^44 bytes */
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_U8, 4, shape));
    static run_log log;
    log.n = 0;
    log.stop_at = -1;
    ASSERT_OK(tensor_for_each_run(&t, log_run, &log));
    ASSERT_UEQ(log.n, 1);
    ASSERT_UEQ(log.len[0], (size_t)1 << 44);
    /* Transposed: still one run. */
    size_t sh = t.shape[0], st = t.strides[0];
    t.shape[0] = t.shape[3];
    t.strides[0] = t.strides[3];
    t.shape[3] = sh;
    t.strides[3] = st;
    log.n = 0;
    ASSERT_OK(tensor_for_each_run(&t, log_run, &log));
    ASSERT_UEQ(log.n, 1);
    ASSERT_UEQ(log.len[0], (size_t)1 << 44);
}

int main(void)
{
    int rc = RUN_TESTS();
    hg_hostbuf_destroy(buf_a);
    hg_hostbuf_destroy(buf_b);
    return rc;
}
