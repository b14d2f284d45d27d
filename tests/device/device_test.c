/*
 * device_test.c: the generic device layer as users and the stages above rely
 * on it: spec parsing and its messages, exact counters (also under threads),
 * fault injection, argument and range checks of the hg_devbuf_* calls.
 * The sim backend's own behaviour is in sim_test.c.
 */
#include <pthread.h>
#include <unistd.h>

#include "device/device.h"
#include "test_device.h"
#include "testlib.h"
static int counters_equal(const hg_device_counters *a, const hg_device_counters *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* ------------------------------------------------------------------- specs */

TEST(spec_default_is_four_any_cores)
{
    hg_device *dev = test_device_open("sim");
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "sim:cores=4");
    ASSERT_EQ(hg_device_num_cores(dev), 4);
    for (uint32_t i = 0; i < 4; i++)
        ASSERT_EQ(hg_device_core_type(dev, i), HG_CORE_ANY);
    ASSERT(device_has_core_type(dev, HG_CORE_CUBE));
    ASSERT(device_has_core_type(dev, HG_CORE_VECTOR));
    hg_device_close(dev);
}

TEST(spec_normalized_strings)
{
    static const struct {
        const char *spec, *normalized;
    } cases[] = {
        {"sim:cores=7", "sim:cores=7"},
        {"sim:vector=2,cube=1", "sim:cube=1,vector=2"},
        {"sim:cube=3", "sim:cube=3,vector=0"},
        {"sim:cores=2,link_gbps=16", "sim:cores=2,link_gbps=16"},
        {"sim:cube=1,vector=2,link_gbps=12.5", "sim:cube=1,vector=2,link_gbps=12.5"},
        {"sim:fail_alloc=3,fail_copy=2,cores=1", "sim:cores=1"},
        {"sim:fail_complete=3,cores=1", "sim:cores=1"},
        {"sim:mem=64M", "sim:cores=4,mem=64M"},
        {"sim:mem=1536k", "sim:cores=4,mem=1536K"},
        {"sim:mem=1000", "sim:cores=4,mem=1000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hg_device *dev = test_device_open(cases[i].spec);
        ASSERT(dev != NULL);
        ASSERT_STR_EQ(hg_device_spec(dev), cases[i].normalized);
        hg_device_close(dev);
    }
}

/* The default capacity is half the host's physical memory (whole MiB), so
 * the sim reports "device memory full" before the host runs out; asking for
 * exactly the default leaves mem= out of the normalized spec. */
TEST(default_capacity_is_half_of_physical_memory)
{
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    hg_device *dev = test_device_open("sim");
    ASSERT(dev != NULL);
    uint64_t cap = hg_device_capacity(dev);
    hg_device_close(dev);
    ASSERT(cap <= phys / 2 && cap > phys / 2 - (1u << 20));
    char spec[64];
    snprintf(spec, sizeof spec, "sim:mem=%lluK", (unsigned long long)(cap >> 10));
    dev = test_device_open(spec);
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "sim:cores=4");
    hg_device_close(dev);
    dev = test_device_open("sim:mem=3M");
    ASSERT(dev != NULL);
    ASSERT_UEQ(hg_device_capacity(dev), 3u << 20);
    hg_device_close(dev);
    ASSERT_UEQ(hg_device_capacity(NULL), 0);
}

/* A capacity beyond this host's memory is address space only until touched:
 * the device opens and serves allocations. */
TEST(capacity_beyond_host_memory_opens)
{
    hg_device *dev = test_device_open("sim:cores=1,mem=64G");
    ASSERT(dev != NULL);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 1 << 20, &a));
    ASSERT_OK(hg_devbuf_free(dev, a));
    hg_device_close(dev);
}

TEST(spec_errors_are_one_line_whatever_the_spec_holds)
{
    hg_device *dev = NULL;
    char err[256];
    ASSERT_EQ(hg_device_open("sim:cores=2\nmem=\t1", &dev, err, sizeof err), HG_EINVAL);
    ASSERT(strchr(err, '\n') == NULL && strchr(err, '\t') == NULL);
    ASSERT_STR_CONTAINS(err, "device spec 'sim:cores=2?mem=?1'");
}

TEST(spec_errors_name_key_and_value)
{
    static const struct {
        const char *spec, *want1, *want2;
    } cases[] = {
        {"sim:cores=x", "'cores'", "'x'"},
        {"sim:cores=-1", "'cores'", "'-1'"},
        {"sim:cores= 2", "'cores'", "' 2'"},
        {"sim:cores=", "'cores'", "''"},
        {"sim:cores=0", "cores=0", "at least one core"},
        {"sim:cores=100000", "cores=100000", "at most"},
        {"sim:cores=99999999999999999999999", "'cores'", "99999999999999999999999"},
        {"sim:cores=2,cube=1", "cores=2", "cannot be combined"},
        {"sim:vector=1,cores=2", "cores=2", "cannot be combined"},
        {"sim:cube=0,vector=0", "cube=0,vector=0", "at least one core"},
        {"sim:cube=1000,vector=1000", "cube=1000,vector=1000", "at most"},
        {"sim:foo=1", "unknown key 'foo'", "'1'"},
        {"sim:cores", "'cores'", "no value"},
        {"sim:cores=4,cores=5", "'cores'", "twice"},
        {"sim:cores=4,", "empty key", "sim:cores=4,"},
        {"sim:mem=12Q", "'mem'", "'12Q'"},
        {"sim:mem=0", "'mem'", "'0'"},
        {"sim:mem=G", "'mem'", "'G'"},
        {"sim:mem=99999999999999G", "'mem'", "'99999999999999G'"},
        {"sim:link_gbps=abc", "'link_gbps'", "'abc'"},
        {"sim:link_gbps=0", "'link_gbps'", "'0'"},
        {"sim:link_gbps=-3", "'link_gbps'", "'-3'"},
        {"sim:link_gbps=inf", "'link_gbps'", "'inf'"},
        {"sim:link_gbps=16x", "'link_gbps'", "'16x'"},
        {"sim:fail_copy=1.5", "'fail_copy'", "'1.5'"},
        {"sim:fail_alloc=k", "'fail_alloc'", "'k'"},
        {"sim:fail_alloc=0", "fail_alloc=0", "K >= 1"},
        {"sim:fail_copy=0", "fail_copy=0", "K >= 1"},
        {"sim:fail_complete=0", "fail_complete=0", "K >= 1"},
        {"sim:fail_complete=x", "'fail_complete'", "'x'"},
        {"sim:cores=04", "'cores'", "leading zero"},
        {"sim:cube=01,vector=1", "'cube'", "'01'"},
        {"sim:fail_copy=007", "'fail_copy'", "'007'"},
        {"sim:mem=0100M", "'mem'", "'0100M'"},
        {"cuda", "unknown device 'cuda'", "sim"},
        {"", "unknown device ''", "sim"},
        {"simulator:cores=2", "unknown device 'simulator'", "sim"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hg_device *dev = (hg_device *)&dev; /* must be reset to NULL */
        char err[256] = "untouched";
        ASSERT_EQ(hg_device_open(cases[i].spec, &dev, err, sizeof err), HG_EINVAL);
        ASSERT(dev == NULL);
        ASSERT_STR_CONTAINS(err, "device spec");
        ASSERT_STR_CONTAINS(err, cases[i].want1);
        ASSERT_STR_CONTAINS(err, cases[i].want2);
        ASSERT(strchr(err, '\n') == NULL);
        /* errbuf is optional. */
        ASSERT_EQ(hg_device_open(cases[i].spec, &dev, NULL, 0), HG_EINVAL);
    }
}

TEST(spec_null_arguments)
{
    hg_device *dev;
    char err[128];
    ASSERT_EQ(hg_device_open(NULL, &dev, err, sizeof err), HG_EINVAL);
    ASSERT(dev == NULL);
    ASSERT_STR_CONTAINS(err, "no spec");
    ASSERT_EQ(hg_device_open("sim", NULL, err, sizeof err), HG_EINVAL);
    char tiny[8];
    ASSERT_EQ(hg_device_open("sim:bogus=1", &dev, tiny, sizeof tiny), HG_EINVAL);
    ASSERT_EQ(strlen(tiny), 7); /* truncated, terminated */
    hg_device_close(NULL);
    ASSERT_STR_EQ(hg_device_spec(NULL), "");
    ASSERT_EQ(hg_device_num_cores(NULL), 0);
}

TEST(spec_long_is_rejected)
{
    char spec[400];
    memset(spec, 'x', sizeof spec - 1);
    spec[sizeof spec - 1] = '\0';
    memcpy(spec, "sim:", 4);
    hg_device *dev;
    char err[512];
    ASSERT_EQ(hg_device_open(spec, &dev, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "longer than");
}

/* ---------------------------------------------------------------- counters */

TEST(counters_exact_after_sequence)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.allocs + c.frees + c.live_bytes + c.peak_bytes, 0);

    hg_devaddr a, b, d;
    unsigned char buf[1000];
    memset(buf, 7, sizeof buf);
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 300, &b));
    ASSERT_OK(hg_devbuf_copy_to(dev, a, buf, 1000));
    ASSERT_OK(hg_devbuf_copy_to(dev, b + 10, buf, 200));
    ASSERT_OK(hg_devbuf_copy_from(dev, buf, a + 1, 999));
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_OK(hg_devbuf_malloc(dev, 50, &d));
    ASSERT_OK(hg_devbuf_copy_to(dev, d, buf, 0)); /* zero bytes: not a copy */
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.h2d_bytes, 1200);
    ASSERT_UEQ(c.h2d_copies, 2);
    ASSERT_UEQ(c.d2h_bytes, 999);
    ASSERT_UEQ(c.d2h_copies, 1);
    ASSERT_UEQ(c.allocs, 3);
    ASSERT_UEQ(c.frees, 1);
    /* Held bytes count whole HG_DEVICE_ALIGN units, as a device's allocator
     * rounds: 300 and 50 bytes hold 1024 each. */
    ASSERT_UEQ(c.live_bytes, 2 * HG_DEVICE_ALIGN);
    ASSERT_UEQ(c.peak_bytes, 2 * HG_DEVICE_ALIGN);

    ASSERT_OK(hg_devbuf_free(dev, b));
    ASSERT_OK(hg_devbuf_free(dev, d));
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.frees, 3);
    ASSERT_UEQ(c.live_bytes, 0);
    ASSERT_UEQ(c.peak_bytes, 2 * HG_DEVICE_ALIGN);
    hg_device_close(dev);
}

TEST(counters_null_safe)
{
    hg_device_counters c;
    memset(&c, 0xff, sizeof c);
    hg_device_counters_get(NULL, &c);
    ASSERT_UEQ(c.allocs, 0);
    hg_device_counters_get(NULL, NULL);
}

/* Several host threads share one device: every successful call is counted
 * exactly once and live bytes return to zero. */
enum { SHARE_THREADS = 4, SHARE_ROUNDS = 200 };

static void *share_device(void *arg)
{
    hg_device *dev = arg;
    unsigned char buf[96];
    memset(buf, 1, sizeof buf);
    for (int i = 0; i < SHARE_ROUNDS; i++) {
        hg_devaddr a;
        if (hg_devbuf_malloc(dev, sizeof buf, &a) != 0 ||
            hg_devbuf_copy_to(dev, a, buf, sizeof buf) != 0 ||
            hg_devbuf_copy_from(dev, buf, a, sizeof buf) != 0 || hg_devbuf_free(dev, a) != 0)
            return arg; /* non-NULL: failed */
    }
    return NULL;
}

TEST(counters_exact_under_threads)
{
    hg_device *dev = test_device_open("sim:cores=2");
    ASSERT(dev != NULL);
    pthread_t threads[SHARE_THREADS];
    for (int i = 0; i < SHARE_THREADS; i++)
        ASSERT_OK(pthread_create(&threads[i], NULL, share_device, dev));
    int failed = 0;
    for (int i = 0; i < SHARE_THREADS; i++) {
        void *res;
        pthread_join(threads[i], &res);
        failed += res != NULL;
    }
    ASSERT_EQ(failed, 0);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    uint64_t ops = SHARE_THREADS * SHARE_ROUNDS;
    ASSERT_UEQ(c.allocs, ops);
    ASSERT_UEQ(c.frees, ops);
    ASSERT_UEQ(c.h2d_copies, ops);
    ASSERT_UEQ(c.d2h_bytes, ops * 96);
    ASSERT_UEQ(c.live_bytes, 0);
    ASSERT(c.peak_bytes >= HG_DEVICE_ALIGN && c.peak_bytes <= SHARE_THREADS * HG_DEVICE_ALIGN);
    hg_device_close(dev);
}

/* ---------------------------------------------------------- fault injection */

TEST(fault_kth_alloc_fails_once)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a[4];
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_ALLOC, 3));
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a[0]));
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a[1]));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    hg_devaddr failed = 123;
    ASSERT_EQ(hg_devbuf_malloc(dev, 64, &failed), HG_EDEVMEM);
    ASSERT_UEQ(failed, 0);
    hg_device_counters_get(dev, &after);
    ASSERT(counters_equal(&before, &after));
    /* Once only: the next allocations succeed. */
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a[2]));
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a[3]));
    hg_device_counters_get(dev, &after);
    ASSERT_UEQ(after.allocs, 4);
    ASSERT_UEQ(after.live_bytes, 4 * HG_DEVICE_ALIGN);
    hg_device_close(dev);
}

TEST(fault_from_spec)
{
    hg_device *dev = test_device_open("sim:cores=1,fail_alloc=2,fail_copy=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char x = 5;
    ASSERT_OK(hg_devbuf_malloc(dev, 8, &a));
    ASSERT_EQ(hg_devbuf_malloc(dev, 8, &a), HG_EDEVMEM);
    ASSERT_OK(hg_devbuf_malloc(dev, 8, &a));
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, &x, 1), HG_ECOPY);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, &x, 1));
    hg_device_close(dev);
}

TEST(fault_kth_copy_fails_once_and_moves_nothing)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char old[64], fresh[64], back[64];
    memset(old, 1, sizeof old);
    memset(fresh, 2, sizeof fresh);
    ASSERT_OK(hg_devbuf_malloc(dev, sizeof old, &a));
    ASSERT_OK(hg_devbuf_copy_to(dev, a, old, sizeof old));

    /* Copies of both directions count: the 2nd next one is the H2D. */
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 2));
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, sizeof back));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, fresh, sizeof fresh), HG_ECOPY);
    hg_device_counters_get(dev, &after);
    ASSERT(counters_equal(&before, &after));
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, sizeof back));
    ASSERT(memcmp(back, old, sizeof old) == 0);

    /* A failed D2H leaves the host side untouched. */
    memset(back, 9, sizeof back);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 1));
    ASSERT_EQ(hg_devbuf_copy_from(dev, back, a, sizeof back), HG_ECOPY);
    for (size_t i = 0; i < sizeof back; i++)
        ASSERT_EQ(back[i], 9);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, fresh, sizeof fresh));
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, sizeof back));
    ASSERT(memcmp(back, fresh, sizeof fresh) == 0);
    hg_device_close(dev);
}

TEST(fault_disarm_with_zero)
{
    hg_device *dev = test_device_open("sim:cores=1,fail_copy=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char x = 1;
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_ALLOC, 1));
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_ALLOC, 0));
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 0));
    ASSERT_OK(hg_devbuf_malloc(dev, 1, &a));
    ASSERT_OK(hg_devbuf_copy_to(dev, a, &x, 1));
    ASSERT_EQ(hg_device_inject_fault(NULL, HG_FAULT_COPY, 1), HG_EINVAL);
    ASSERT_EQ(hg_device_inject_fault(dev, (hg_fault)7, 1), HG_EINVAL);
    hg_device_close(dev);
}

/* A call rejected for its arguments is not an operation: it does not use up
 * an armed fault. */
TEST(fault_counts_only_valid_operations)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char x[4] = {0};
    ASSERT_OK(hg_devbuf_malloc(dev, 4, &a));
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 1));
    ASSERT_EQ(hg_devbuf_copy_to(dev, a + 1, x, 4), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, NULL, 4), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, x, 4), HG_ECOPY);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_ALLOC, 1));
    ASSERT_EQ(hg_devbuf_malloc(dev, 0, &a), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_malloc(dev, 4, &a), HG_EDEVMEM);
    hg_device_close(dev);
}

/* ------------------------------------------------------------ device memory */

TEST(copy_range_checks)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, b;
    unsigned char buf[2 * HG_DEVICE_ALIGN] = {0};
    ASSERT_OK(hg_devbuf_malloc(dev, 256, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 256, &b));
    ASSERT(b >= a + HG_DEVICE_ALIGN); /* the next unit: a copy must still not span both */
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, buf, (size_t)(b - a) + 1), HG_ERANGE);
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, buf, 512), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a + 255, buf, 2), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, buf, a + 200, 57), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, buf, a - 1, 1), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, buf, 0, 1), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, buf, a + 10, SIZE_MAX), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, buf, (hg_devaddr)(uintptr_t)buf, 1), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_to(NULL, a, buf, 1), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_copy_from(dev, NULL, a, 1), HG_EINVAL);
    hg_device_counters_get(dev, &after);
    ASSERT(counters_equal(&before, &after));
    ASSERT_OK(hg_devbuf_copy_to(dev, a + 200, buf, 56));
    ASSERT_OK(hg_devbuf_copy_from(dev, buf, b, 256));
    /* A freed allocation is no longer a copy target. */
    ASSERT_OK(hg_devbuf_free(dev, b));
    ASSERT_EQ(hg_devbuf_copy_to(dev, b, buf, 1), HG_ERANGE);
    hg_device_close(dev);
}

/* A batch: one call, a copy per non-empty range; a fault can land inside it
 * (the ranges before it are done and counted, the rest are not); a bad
 * range refuses the whole batch before anything moves. */
TEST(batched_copies_count_ranges_and_fault_inside)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 4096, &a));
    unsigned char src[4096], back[4096];
    for (int i = 0; i < 4096; i++)
        src[i] = (unsigned char)i;
    device_copy list[4] = {{src, a, 100},
                           {src + 1000, a + 1000, 0},
                           {src + 2000, a + 2000, 300},
                           {src + 3000, a + 3000, 50}};
    ASSERT_OK(device_copy_batch(dev, true, list, 4, NULL, NULL));
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.h2d_copies, 3); /* the empty range is no copy */
    ASSERT_UEQ(c.h2d_batches, 1);
    ASSERT_UEQ(c.h2d_bytes, 450);
    /* Fault on the 2nd non-empty range: the 1st lands, the rest do not. */
    device_copy out[3] = {
        {back, a, 100}, {back + 2000, a + 2000, 300}, {back + 3000, a + 3000, 50}};
    memset(back, 0, sizeof back);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 2));
    size_t done = 99;
    ASSERT_EQ(device_copy_batch(dev, false, out, 3, NULL, &done), HG_ECOPY);
    ASSERT_UEQ(done, 1);
    ASSERT_EQ(back[99], 99);
    ASSERT_EQ(back[2000], 0);
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.d2h_copies, 1);
    ASSERT_UEQ(c.d2h_bytes, 100);
    ASSERT_UEQ(c.d2h_batches, 1);
    /* A range outside the allocation refuses the batch: nothing moves. */
    device_copy bad[2] = {{back, a, 10}, {back, a + 4090, 10}};
    hg_device_counters before;
    hg_device_counters_get(dev, &before);
    ASSERT_EQ(device_copy_batch(dev, false, bad, 2, NULL, NULL), HG_ERANGE);
    hg_device_counters_get(dev, &c);
    ASSERT(counters_equal(&before, &c));
    ASSERT_OK(device_copy_batch(dev, false, out, 3, NULL, NULL));
    ASSERT_EQ(back[2299], (unsigned char)2299);
    ASSERT_EQ(back[3049], (unsigned char)3049);
    ASSERT_OK(device_copy_batch(dev, false, NULL, 0, NULL, NULL));
    ASSERT_EQ(device_copy_batch(NULL, false, out, 3, NULL, NULL), HG_EINVAL);
    hg_device_close(dev);
}

/* An all-or-nothing batch (device_copy_batch_whole): the k-th copy set to
 * fail, for every k inside the batch, fails all of it: no destination byte
 * changes, no copy counts, the fault is spent and blamed on its range; a
 * bad range is blamed too; then the same batch moves every range. */
TEST(whole_batches_move_every_range_or_none)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    ASSERT(device_batch_whole(dev));
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 4096, &a));
    unsigned char src[4096], back[4096];
    for (int i = 0; i < 4096; i++)
        src[i] = (unsigned char)(i * 5 + 1);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, src, sizeof src));
    device_copy out[4] = {{back, a, 100},
                          {back + 1000, a + 1000, 0}, /* empty: no copy, no fault */
                          {back + 2000, a + 2000, 300},
                          {back + 3000, a + 3000, 50}};
    static const size_t range_of_copy[3] = {0, 2, 3};
    hg_device_counters before, c;
    for (uint64_t k = 1; k <= 3; k++) {
        memset(back, 0xEE, sizeof back);
        hg_device_counters_get(dev, &before);
        ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, k));
        size_t at = 99;
        ASSERT_EQ(device_copy_batch_whole(dev, false, out, 4, NULL, &at), HG_ECOPY);
        ASSERT_UEQ(at, range_of_copy[k - 1]);
        for (size_t i = 0; i < sizeof back; i++)
            ASSERT_UEQ(back[i], 0xEE);
        hg_device_counters_get(dev, &c);
        ASSERT(counters_equal(&before, &c));
    }
    size_t at = 99;
    device_copy bad[2] = {{back, a, 10}, {back + 10, a + 4090, 10}};
    ASSERT_EQ(device_copy_batch_whole(dev, false, bad, 2, NULL, &at), HG_ERANGE);
    ASSERT_UEQ(at, 1);
    ASSERT_UEQ(back[0], 0xEE);
    hg_device_counters tally = {0};
    ASSERT_OK(device_copy_batch_whole(dev, false, out, 4, &tally, &at)); /* the fault is spent */
    for (size_t r = 0; r < 4; r++)
        ASSERT(memcmp(out[r].host, src + (out[r].dev - a), out[r].bytes) == 0);
    ASSERT_UEQ(back[1000], 0xEE);
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.d2h_copies - before.d2h_copies, 3);
    ASSERT_UEQ(c.d2h_batches - before.d2h_batches, 1);
    ASSERT_UEQ(c.d2h_bytes - before.d2h_bytes, 450);
    ASSERT_UEQ(tally.d2h_copies, 3);
    ASSERT_OK(device_copy_batch_whole(dev, true, out, 4, NULL, NULL)); /* either way */
    ASSERT_EQ(device_copy_batch_whole(NULL, false, out, 4, NULL, NULL), HG_EINVAL);
    hg_device_close(dev);
}

TEST(malloc_errors_and_capacity)
{
    hg_device *dev = test_device_open("sim:cores=1,mem=2K");
    ASSERT(dev != NULL);
    hg_devaddr a, b;
    ASSERT_EQ(hg_devbuf_malloc(dev, 0, &a), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_malloc(dev, 8, NULL), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_malloc(NULL, 8, &a), HG_EINVAL);
    ASSERT_EQ(hg_devbuf_malloc(dev, 2049, &a), HG_EDEVMEM);
    ASSERT_EQ(hg_devbuf_malloc(dev, SIZE_MAX, &a), HG_EDEVMEM);
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 24, &b)); /* 24 bytes hold a whole unit */
    ASSERT_EQ(hg_devbuf_malloc(dev, 1, &b), HG_EDEVMEM);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.allocs, 2);
    ASSERT_UEQ(c.live_bytes, 2048);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    hg_device_close(dev);
}

TEST(free_errors)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 100, &a));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    ASSERT_EQ(hg_devbuf_free(dev, a + 1), HG_ENOTFOUND);
    ASSERT_EQ(hg_devbuf_free(dev, a + 100), HG_ENOTFOUND);
    ASSERT_EQ(hg_devbuf_free(dev, 0), HG_ENOTFOUND);
    ASSERT_EQ(hg_devbuf_free(dev, a - 256), HG_ENOTFOUND);
    ASSERT_EQ(hg_devbuf_free(NULL, a), HG_EINVAL);
    hg_device_counters_get(dev, &after);
    ASSERT(counters_equal(&before, &after));
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_EQ(hg_devbuf_free(dev, a), HG_ENOTFOUND); /* double free */
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
