/*
 * tensor_test.c: views: extent, nbytes, slice, density, overlap, checked
 * overflow near SIZE_MAX, the dims limit, NULL arguments, constructors that
 * refuse a view larger than its buffer, and tensor_for_each_run on strided,
 * transposed, padded and overlapping views against a byte map.
 * (dtypes are in dtype_test.c.)
 */
#include <stdint.h>

#include "tensor/tensor.h"
#include "testlib.h"

/* ------------------------------------------------------------------ views */

/* Large enough for every view the constructors build below; views larger
 * than a buffer are built by hand (by_hand), as the arithmetic must still
 * handle them. */
#define BUF_BYTES 65536

static hg_hostbuf *buf_a, *buf_b;

static void make_bufs(void)
{
    if (buf_a == NULL) {
        hg_hostbuf_create(BUF_BYTES, &buf_a);
        hg_hostbuf_create(BUF_BYTES, &buf_b);
    }
}

/* A dense row-major view of hb filled in field by field, past the
 * constructors' checks (ndims 0, or larger than the buffer). */
static hg_tensor by_hand(hg_hostbuf *hb, hg_dtype dtype, uint32_t ndims, const size_t *shape)
{
    hg_tensor t;
    memset(&t, 0, sizeof t);
    t.host = hb;
    t.dtype = dtype;
    t.ndims = ndims;
    size_t stride = 1;
    for (uint32_t i = ndims; i-- > 0;) {
        t.shape[i] = shape[i];
        t.strides[i] = stride;
        stride *= shape[i];
    }
    return t;
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
    /* A view built by hand with ndims 0 is one element (the constructors
     * refuse ndims 0: see constructors_refuse_ndims_0_and_bad_args). */
    t = by_hand(buf_a, HG_F64, 0, NULL);
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
    /* SIZE_MAX bytes: the size fits, the buffer does not. */
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_U8, 1, big), HG_ERANGE);
    t = by_hand(buf_a, HG_U8, 1, big);
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

TEST(broadcast_counts_elements_not_extent)
{
    make_bufs();
    hg_tensor t;
    size_t shape[2] = {1000, 4}, lo, hi, n;
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, shape));
    t.strides[0] = 0; /* every row is row 0 */
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi - lo, 16);
    ASSERT_OK(hg_tensor_nbytes(&t, &n));
    ASSERT_UEQ(n, 16000);
    ASSERT_OK(tensor_numel(&t, &n));
    ASSERT_UEQ(n, 4000);
    /* Elements that fit as an extent but not as a count. */
    t.shape[0] = SIZE_MAX;
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_EQ(hg_tensor_nbytes(&t, &n), HG_EOVERFLOW);
    hg_err e;
    err_clear(&e);
    ASSERT_EQ(tensor_validate(&t, "arg 'w'", &e), HG_EOVERFLOW);
    ASSERT_STR_CONTAINS(e.msg, "arg 'w'");
    /* Counting elements of an empty view never overflows. */
    t.shape[1] = 0;
    t.shape[0] = SIZE_MAX;
    t.ndims = 3;
    t.shape[2] = SIZE_MAX;
    t.strides[2] = 1;
    ASSERT_OK(tensor_numel(&t, &n));
    ASSERT_UEQ(n, 0);
}

TEST(device_view_address_overflow_is_named)
{
    hg_tensor t;
    size_t shape[1] = {64};
    ASSERT_OK(hg_tensor_device(&t, UINT64_MAX - 64, HG_U8, 1, shape));
    t.offset = 8;
    hg_err e;
    err_clear(&e);
    ASSERT_EQ(tensor_validate(&t, "arg 'kv'", &e), HG_EOVERFLOW);
    ASSERT_STR_CONTAINS(e.msg, "arg 'kv'");
    ASSERT_STR_CONTAINS(e.msg, "0xffffffffffffffbf");
    ASSERT(!hg_tensor_overlap(&t, &t)); /* not computable: no claim of overlap */
}

TEST(null_view_and_null_out_params_are_einval)
{
    make_bufs();
    hg_tensor t, s;
    size_t shape[2] = {2, 3}, lo = 7, hi = 7, n = 7;
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F32, 2, shape));
    ASSERT_EQ(hg_tensor_nbytes(NULL, &n), HG_EINVAL);
    ASSERT_EQ(hg_tensor_nbytes(&t, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_extent(NULL, &lo, &hi), HG_EINVAL);
    ASSERT_EQ(hg_tensor_extent(&t, NULL, &hi), HG_EINVAL);
    ASSERT_EQ(hg_tensor_extent(&t, &lo, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_extent(&t, NULL, NULL), HG_EINVAL);
    ASSERT_UEQ(lo, 7); /* a refused call writes nothing */
    ASSERT_UEQ(hi, 7);
    ASSERT_UEQ(n, 7);
    ASSERT_EQ(hg_tensor_slice(NULL, 0, 0, 1, &s), HG_EINVAL);
    ASSERT_EQ(hg_tensor_slice(&t, 0, 0, 1, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_host(NULL, buf_a, HG_F32, 2, shape), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(NULL, 0x1000, HG_F32, 2, shape), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&s, 0x1000, HG_F32, 2, NULL), HG_EINVAL);
    ASSERT(!hg_tensor_is_dense(NULL));
    ASSERT(!hg_tensor_overlap(NULL, &t));
    ASSERT(!hg_tensor_overlap(&t, NULL));
    ASSERT(!hg_tensor_overlap(NULL, NULL));
    /* The same view through both out-params is fine. */
    ASSERT_OK(hg_tensor_slice(&t, 1, 1, 2, &t));
    ASSERT_UEQ(t.offset, 1);
}

TEST(host_view_must_fit_its_buffer)
{
    hg_hostbuf *hb = NULL, *none = NULL;
    ASSERT_OK(hg_hostbuf_create(96, &hb));
    ASSERT_OK(hg_hostbuf_wrap(NULL, 0, &none));
    hg_tensor t, keep;
    size_t exact[3] = {2, 3, 4}, over[3] = {2, 3, 5}, flat[1] = {25}, empty[2] = {0, 1000};
    size_t big[1] = {SIZE_MAX}, lo, hi;
    ASSERT_OK(hg_tensor_host(&t, hb, HG_F32, 3, exact)); /* 96 of 96 bytes */
    keep = t;
    ASSERT_EQ(hg_tensor_host(&t, hb, HG_F32, 3, over), HG_ERANGE); /* 120 bytes */
    ASSERT_EQ(hg_tensor_host(&t, hb, HG_F32, 1, flat), HG_ERANGE); /* 100 bytes */
    ASSERT_EQ(hg_tensor_host(&t, hb, HG_U8, 1, big), HG_ERANGE);
    ASSERT_EQ(hg_tensor_host(&t, hb, HG_F16, 1, big), HG_EOVERFLOW); /* overflow comes first */
    ASSERT(memcmp(&t, &keep, sizeof t) == 0);                        /* untouched on error */
    ASSERT_OK(hg_tensor_host(&t, hb, HG_U8, 1, (size_t[]){96}));
    ASSERT_OK(hg_tensor_host(&t, none, HG_F64, 2, empty)); /* empty fits anything */
    ASSERT_OK(hg_tensor_extent(&t, &lo, &hi));
    ASSERT_UEQ(hi, 0);
    ASSERT_EQ(hg_tensor_host(&t, none, HG_U8, 1, (size_t[]){1}), HG_ERANGE);
    hg_hostbuf_destroy(hb);
    hg_hostbuf_destroy(none);
}

TEST(constructors_refuse_ndims_0_and_bad_args)
{
    make_bufs();
    hg_tensor t;
    size_t one[1] = {1};
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F64, 0, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_host(&t, buf_a, HG_F64, 0, one), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&t, 0x1000, HG_F64, 0, NULL), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&t, 0x1000, HG_F64, 0, one), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&t, 0x1000, HG_DTYPE_COUNT, 1, one), HG_EINVAL);
    ASSERT_EQ(hg_tensor_device(&t, 0x1000, HG_F32, HG_MAX_DIMS + 1, one), HG_ELIMIT);
    /* One element is ndims 1, shape {1}. */
    ASSERT_OK(hg_tensor_host(&t, buf_a, HG_F64, 1, one));
    ASSERT_OK(hg_tensor_device(&t, 0x1000, HG_F64, 1, one));
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

static void random_view(hg_tensor *t, test_rng *rng)
{
    static const hg_dtype dts[] = {HG_U8, HG_F16, HG_F32, HG_F64};
    memset(t, 0, sizeof *t);
    t->host = buf_a;
    t->dtype = dts[test_rand(rng) % 4];
    t->ndims = test_rand(rng) % 6;
    t->offset = test_rand(rng) % 12;
    for (uint32_t i = 0; i < t->ndims; i++) {
        t->shape[i] = test_rand(rng) % 5 == 0 ? 1 + test_rand(rng) % 2 : test_rand(rng) % 5;
        if (test_rand(rng) % 10 == 0)
            t->shape[i] = 4; /* keep most views non-empty */
        t->strides[i] = test_rand(rng) % 7 == 0 ? 0 : test_rand(rng) % 24;
    }
    /* Half the time: a dense layout, permuted (transposed) or padded. */
    if (test_rand(rng) % 2 && t->ndims > 0) {
        size_t s = 1 + (test_rand(rng) % 3 == 0);
        for (uint32_t i = t->ndims; i-- > 0;) {
            t->strides[i] = s;
            s *= t->shape[i] + (test_rand(rng) % 4 == 0);
        }
        uint32_t a = test_rand(rng) % t->ndims, b = test_rand(rng) % t->ndims;
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
    test_rng rng = test_seed(20000);
    for (int iter = 0; iter < 20000; iter++) {
        hg_tensor t;
        random_view(&t, &rng);
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

/* Both views' bytes must be exactly the joined view's. */
static bool join_is_exact(const hg_tensor *x, const hg_tensor *y, const hg_tensor *j)
{
    static unsigned char want[MAP_BYTES], got[MAP_BYTES];
    size_t lo, hi;
    if (hg_tensor_extent(j, &lo, &hi) != 0 || hi >= MAP_BYTES)
        return false;
    memset(want, 0, hi + 1);
    memset(got, 0, hi + 1);
    brute_force_map(x, want);
    brute_force_map(y, want);
    brute_force_map(j, got);
    return memcmp(want, got, hi + 1) == 0;
}

/* tensor_join: a view split in two along a dim joins back into one with
 * the same bytes, and any join that succeeds (of a view and a near miss of
 * its continuation) covers exactly the bytes of its two parts: copy-back's
 * planning relies on both. */
TEST(join_covers_exactly_its_parts)
{
    make_bufs();
    test_rng rng = test_seed(20001);
    int splits = 0, joins = 0;
    for (int iter = 0; iter < 20000; iter++) {
        hg_tensor a, b, j;
        random_view(&a, &rng);
        if (a.ndims == 0)
            continue;
        uint32_t d = test_rand(&rng) % a.ndims;
        if (a.shape[d] > 1) { /* split a along d; the halves join back */
            size_t k = 1 + test_rand(&rng) % (a.shape[d] - 1);
            hg_tensor x = a, y = a;
            x.shape[d] = k;
            y.shape[d] -= k;
            y.offset += k * a.strides[d];
            ASSERT(tensor_join(&x, &y, &j));
            if (!join_is_exact(&x, &y, &j))
                TEST_FAIL_("iteration %d: a split joined back covers other bytes", iter);
            splits++;
        }
        b = a; /* a continuation of a along d, perturbed now and then */
        b.shape[d] = test_rand(&rng) % 5;
        b.offset = a.offset + a.shape[d] * a.strides[d];
        if (test_rand(&rng) % 3 == 0)
            b.offset += test_rand(&rng) % 3;
        if (test_rand(&rng) % 4 == 0)
            b.shape[test_rand(&rng) % a.ndims] = test_rand(&rng) % 5;
        if (test_rand(&rng) % 4 == 0)
            b.strides[test_rand(&rng) % a.ndims] = test_rand(&rng) % 24;
        if (!tensor_join(&a, &b, &j))
            continue;
        joins++;
        if (!join_is_exact(&a, &b, &j))
            TEST_FAIL_("iteration %d: a join covers other bytes than its parts", iter);
    }
    ASSERT(splits > 1000 && joins > 1000);
    printf("     %d splits joined back, %d other joins\n", splits, joins);
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
    t = by_hand(buf_a, HG_U8, 4, shape);
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
