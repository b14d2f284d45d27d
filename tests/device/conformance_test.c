/*
 * conformance_test.c: one device suite over every backend (IREE's hal/cts):
 * allocation and its counters, copies and their ranges, batches, fills,
 * fault injection (at submit and at completion), capacity and address ranges, each run against
 * every spec in test_backends.  A backend this machine lacks prints "skipped: no OpenCL platform"
 * (HG_REQUIRE_OPENCL=1 makes that a failure).  What only one backend does is in a test named after
 * it (sim_test.c, opencl_*).
 */
#include <string.h>

#include "device/device.h"
#include "test_device.h"
#include "testlib.h"

/* BACKEND_TEST(name, keys) { body }: a test whose body runs once per
 * backend, with `dev` open on backend[:keys] (closed after the body, also
 * when an ASSERT returns from it).  A skipped backend runs nothing. */
typedef void (*backend_body)(hg_device *dev, const char *backend);

static void run_on_backends(const char *keys, backend_body body)
{
    for (size_t b = 0; b < TEST_NBACKENDS && !test_failed_now; b++) {
        bool skipped;
        hg_device *dev = test_backend_open(test_backends[b], keys, &skipped);
        if (skipped)
            continue;
        printf("     backend %s\n", test_backends[b]);
        if (dev == NULL)
            TEST_FAIL_("%s: cannot open", test_backends[b]);
        body(dev, test_backends[b]);
        hg_device_close(dev);
    }
}

#define BACKEND_TEST(name, keys)                                                                   \
    static void name##_on(hg_device *dev, const char *backend);                                    \
    TEST(name)                                                                                     \
    {                                                                                              \
        run_on_backends(keys, name##_on);                                                          \
    }                                                                                              \
    static void name##_on(hg_device *dev, const char *backend)

static hg_device_counters counters(const hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c;
}

BACKEND_TEST(alloc_free_count_and_align, "mem=64M")
{
    hg_devaddr a = 0, b = 0;
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 1, &b));
    ASSERT(a != 0 && b != 0 && a != b);
    ASSERT_UEQ(a % HG_DEVICE_ALIGN, 0);
    ASSERT_UEQ(b % HG_DEVICE_ALIGN, 0);
    hg_device_counters c = counters(dev);
    ASSERT_UEQ(c.allocs, 2);
    ASSERT_UEQ(c.live_bytes, 2 * HG_DEVICE_ALIGN);
    ASSERT_EQ(hg_devbuf_free(dev, a + 1), HG_ENOTFOUND);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_EQ(hg_devbuf_free(dev, a), HG_ENOTFOUND);
    ASSERT_OK(hg_devbuf_free(dev, b));
    c = counters(dev);
    ASSERT_UEQ(c.frees, 2);
    ASSERT_UEQ(c.live_bytes, 0);
    ASSERT_UEQ(c.peak_bytes, 2 * HG_DEVICE_ALIGN);
    ASSERT_EQ(hg_devbuf_malloc(dev, 0, &a), HG_EINVAL);
}

BACKEND_TEST(copies_round_trip_at_offsets_and_check_ranges, "mem=64M")
{
    hg_devaddr a;
    unsigned char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    ASSERT_OK(hg_devbuf_malloc(dev, sizeof in, &a));
    ASSERT_OK(hg_devbuf_copy_to(dev, a, in, sizeof in));
    ASSERT_OK(hg_devbuf_copy_to(dev, a + 100, in, 50)); /* an offset inside */
    memset(out, 0, sizeof out);
    ASSERT_OK(hg_devbuf_copy_from(dev, out, a, sizeof out));
    ASSERT(memcmp(out, in, 100) == 0);
    ASSERT(memcmp(out + 100, in, 50) == 0);
    ASSERT(memcmp(out + 150, in + 150, sizeof in - 150) == 0);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a + 1, in, sizeof in), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(dev, out, a - 1, 1), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, NULL, 1), HG_EINVAL);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, in, 0)); /* moves nothing, counts nothing */
    hg_device_counters c = counters(dev);
    ASSERT_UEQ(c.h2d_copies, 2);
    ASSERT_UEQ(c.h2d_bytes, sizeof in + 50);
    ASSERT_UEQ(c.d2h_copies, 1);
    ASSERT_UEQ(c.d2h_bytes, sizeof out);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_EQ(hg_devbuf_copy_to(dev, a, in, 1), HG_ERANGE); /* freed */
}

BACKEND_TEST(batches_move_every_range_and_count_one_call, "mem=64M")
{
    hg_devaddr a, b;
    ASSERT_OK(hg_devbuf_malloc(dev, 3000, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 3000, &b));
    char x[3000], y[3000], back[3][1000];
    memset(x, 'x', sizeof x);
    memset(y, 'y', sizeof y);
    device_copy up[3] = {{x, a, 1000}, {y, b + 2000, 1000}, {x, b, 0}};
    size_t done = 99;
    ASSERT_OK(device_copy_batch(dev, true, up, 3, NULL, &done));
    ASSERT_UEQ(done, 3);
    device_copy down[3] = {{back[0], a, 1000}, {back[1], b + 2000, 1000}, {back[2], a, 1000}};
    ASSERT_OK(device_copy_batch(dev, false, down, 3, NULL, &done));
    ASSERT(memcmp(back[0], x, 1000) == 0 && memcmp(back[1], y, 1000) == 0);
    ASSERT(memcmp(back[2], x, 1000) == 0);
    hg_device_counters c = counters(dev);
    ASSERT_UEQ(c.h2d_batches, 1);
    ASSERT_UEQ(c.h2d_copies, 2);
    ASSERT_UEQ(c.d2h_batches, 1);
    ASSERT_UEQ(c.d2h_copies, 3);
    /* One bad range: nothing moves, nothing counts. */
    device_copy bad[2] = {{x, a, 10}, {x, a + 2999, 2}};
    ASSERT_EQ(device_copy_batch(dev, true, bad, 2, NULL, &done), HG_ERANGE);
    ASSERT_UEQ(done, 0);
    ASSERT_UEQ(counters(dev).h2d_copies, 2);
    hg_devbuf_free(dev, a);
    hg_devbuf_free(dev, b);
}

/* All-or-nothing batches are the sim's promise only: a queue device says
 * it cannot make it, and its whole-batch call moves nothing and spends no
 * fault. */
BACKEND_TEST(whole_batches_are_promised_by_the_sim_only, "mem=64M")
{
    const bool sim = strcmp(backend, "sim") == 0;
    ASSERT(device_batch_whole(dev) == sim);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 2048, &a));
    char x[2048], back[2048];
    memset(x, 'x', sizeof x);
    memset(back, 0, sizeof back);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, x, sizeof x));
    device_copy down[2] = {{back, a, 1000}, {back + 1000, a + 1000, 1048}};
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 2));
    ASSERT_EQ(device_copy_batch_whole(dev, false, down, 2, NULL, NULL),
              sim ? HG_ECOPY : HG_EUNSUPPORTED);
    ASSERT_UEQ(back[0], 0);
    ASSERT_UEQ(counters(dev).d2h_copies, 0);
    if (!sim) /* the fault is still armed: the 2nd copy from here fails */
        ASSERT_EQ(device_copy_batch(dev, false, down, 2, NULL, NULL), HG_ECOPY);
    hg_devbuf_free(dev, a);
}

BACKEND_TEST(new_memory_is_poisoned_and_fill_sets_bytes, "mem=64M")
{
    hg_devaddr a;
    unsigned char out[2048];
    ASSERT_OK(hg_devbuf_malloc(dev, sizeof out, &a));
    ASSERT_OK(hg_devbuf_copy_from(dev, out, a, sizeof out));
    for (size_t i = 0; i < sizeof out; i++)
        ASSERT_UEQ(out[i], 0xA5);
    ASSERT_OK(device_fill(dev, a + 10, 0x3C, 100));
    ASSERT_EQ(device_fill(dev, a + 2000, 1, 100), HG_ERANGE);
    ASSERT_OK(hg_devbuf_copy_from(dev, out, a, sizeof out));
    ASSERT_UEQ(out[9], 0xA5);
    ASSERT_UEQ(out[10], 0x3C);
    ASSERT_UEQ(out[109], 0x3C);
    ASSERT_UEQ(out[110], 0xA5);
    ASSERT_UEQ(counters(dev).h2d_copies, 0); /* a fill crosses no link */
    hg_devbuf_free(dev, a);
}

BACKEND_TEST(injected_faults_fail_once_and_count_nothing, "mem=64M,fail_alloc=2,fail_copy=2")
{
    hg_devaddr a, b;
    char buf[64] = {0};
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a));
    ASSERT_EQ(hg_devbuf_malloc(dev, 64, &b), HG_EDEVMEM);
    ASSERT_UEQ(counters(dev).allocs, 1);
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &b)); /* disarmed */
    ASSERT_OK(hg_devbuf_copy_to(dev, a, buf, 64));
    device_copy list[3] = {{buf, a, 8}, {buf, b, 8}, {buf, a, 8}};
    size_t done = 0;
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 2));
    ASSERT_EQ(device_copy_batch(dev, true, list, 3, NULL, &done), HG_ECOPY);
    ASSERT_UEQ(done, 1); /* the fault landed inside the batch */
    ASSERT_UEQ(counters(dev).h2d_copies, 2);
    hg_devbuf_free(dev, a);
    hg_devbuf_free(dev, b);
}

/* fail_complete=K: the K-th copied range, fill or new memory's poisoning
 * is accepted and completes with an error: the call fails, that range's
 * bytes did not move, the ranges before it did and are counted, and a
 * failed poisoning undoes its allocation.  Then the fault is spent. */
BACKEND_TEST(a_command_that_fails_at_completion_fails_its_call, "mem=64M,fail_complete=1")
{
    hg_devaddr a, b;
    unsigned char ones[64], twos[64], back[64];
    memset(ones, 1, sizeof ones);
    memset(twos, 2, sizeof twos);
    ASSERT_EQ(hg_devbuf_malloc(dev, 64, &a), HG_EDEVMEM); /* its poisoning failed */
    ASSERT_UEQ(counters(dev).allocs, 0);
    ASSERT_UEQ(counters(dev).live_bytes, 0);
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &b));
    ASSERT_OK(hg_devbuf_copy_to(dev, a, ones, 64));
    ASSERT_OK(hg_devbuf_copy_to(dev, b, ones, 64));
    device_copy list[2] = {{twos, a, 64}, {twos, b, 64}};
    size_t done = 9;
    const uint64_t before = counters(dev).h2d_copies;
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COMPLETE, 2));
    ASSERT_EQ(device_copy_batch(dev, true, list, 2, NULL, &done), HG_ECOPY);
    ASSERT_UEQ(done, 1);
    ASSERT_UEQ(counters(dev).h2d_copies, before + 1);
    ASSERT_OK(hg_devbuf_copy_from(dev, back, b, 64));
    ASSERT_UEQ(back[0], 1); /* stale: the failed command moved nothing */
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, 64));
    ASSERT_UEQ(back[63], 2);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COMPLETE, 1));
    ASSERT_EQ(device_fill(dev, b, 7, 64), HG_ECOPY);
    ASSERT_OK(hg_devbuf_copy_from(dev, back, b, 64));
    ASSERT_UEQ(back[10], 1);
    ASSERT_OK(device_fill(dev, b, 7, 64)); /* spent */
    ASSERT_OK(hg_devbuf_copy_from(dev, back, b, 64));
    ASSERT_UEQ(back[10], 7);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COMPLETE, 1));
    ASSERT_EQ(hg_devbuf_copy_from(dev, back, a, 64), HG_ECOPY);
    hg_devbuf_free(dev, a);
    hg_devbuf_free(dev, b);
    ASSERT_UEQ(counters(dev).live_bytes, 0);
}

BACKEND_TEST(capacity_is_a_routine_failure, "mem=1M")
{
    hg_devaddr a, b;
    ASSERT_UEQ(hg_device_capacity(dev), 1u << 20);
    ASSERT_EQ(hg_devbuf_malloc(dev, (1u << 20) + 1, &a), HG_EDEVMEM);
    ASSERT_OK(hg_devbuf_malloc(dev, 1u << 19, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 1u << 19, &b));
    ASSERT_EQ(hg_devbuf_malloc(dev, 1, &a), HG_EDEVMEM);
    hg_devbuf_free(dev, b);
    ASSERT_OK(hg_devbuf_malloc(dev, 1u << 19, &b));
    ASSERT_UEQ(counters(dev).allocs, 3);
}

/* No address of one device is valid on another: a copy with another
 * device's address is out of range, never another's bytes (two devices of
 * the same backend included). */
TEST(address_ranges_are_distinct_across_devices)
{
    hg_device *devs[2 * TEST_NBACKENDS];
    hg_devaddr addrs[2 * TEST_NBACKENDS];
    size_t n = 0;
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        for (int twice = 0; twice < 2; twice++) {
            bool skipped;
            hg_device *dev = test_backend_open(test_backends[b], "mem=16M", &skipped);
            if (skipped)
                continue;
            ASSERT(dev != NULL);
            ASSERT_OK(hg_devbuf_malloc(dev, 4096, &addrs[n]));
            devs[n++] = dev;
        }
    }
    char byte = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j)
                ASSERT_EQ(hg_devbuf_copy_to(devs[i], addrs[j], &byte, 1), HG_ERANGE);
    for (size_t i = 0; i < n; i++)
        hg_device_close(devs[i]);
}

/* ------------------------------------------------------- opencl's own */

TEST(opencl_specs_normalize_and_refuse_sim_keys)
{
    bool skipped;
    hg_device *dev = test_backend_open("opencl", NULL, &skipped);
    if (skipped)
        return;
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "opencl:platform=0,device=0");
    uint64_t global = hg_device_capacity(dev);
    ASSERT_UGT(global, 0);
    ASSERT_UGT(hg_device_num_cores(dev), 0);
    hg_device_close(dev);
    dev = test_backend_open("opencl", "mem=64M,fail_copy=3", &skipped);
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "opencl:platform=0,device=0,mem=64M");
    hg_device_close(dev);
    /* mem= is capped by the device's global memory. */
    char keys[64];
    snprintf(keys, sizeof keys, "mem=%lluK", (unsigned long long)(global >> 10) * 2);
    dev = test_backend_open("opencl", keys, &skipped);
    ASSERT(dev != NULL);
    ASSERT_UEQ(hg_device_capacity(dev), global);
    hg_device_close(dev);
    /* Refused specs: another backend's keys, a missing platform, and
     * max_alloc= (at least one HG_DEVICE_ALIGN) and queues= (1 or more). */
    static const struct {
        const char *spec;
        int code;
        const char *says;
    } bad[] = {
        {"opencl:cores=2", HG_EINVAL, "key 'cores' is not a key of device 'opencl'"},
        {"sim:device=0", HG_EINVAL, "key 'device' is not a key of device 'sim'"},
        {"opencl:platform=99", HG_ENOTFOUND, "platform=99"},
        {"opencl:max_alloc=512", HG_EINVAL, "bad value '512' for key 'max_alloc'"},
        {"sim:max_alloc=1M", HG_EINVAL, "key 'max_alloc' is not a key of device 'sim'"},
        {"opencl:queues=0", HG_EINVAL, "queues=0: want 1 to 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char msg[256];
        ASSERT_EQ(hg_device_open(bad[i].spec, &dev, msg, sizeof msg), bad[i].code);
        ASSERT_STR_CONTAINS(msg, bad[i].says);
    }
    dev = test_backend_open("opencl", "queues=3", &skipped);
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "opencl:platform=0,device=0,queues=3");
    hg_device_close(dev);
}

/* No single cl_mem may exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE (max_alloc=
 * lowers it for tests): a larger allocation is pieces, and copies, batches,
 * fills and the poison of new memory cross their boundaries unseen. */
TEST(opencl_allocations_past_max_alloc_are_split_into_pieces)
{
    if (test_backend_skipped("opencl"))
        return;
    bool skipped;
    hg_device *dev = test_backend_open("opencl", "mem=64M,max_alloc=4K", &skipped);
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "opencl:platform=0,device=0,mem=64M,max_alloc=4K");
    enum { BYTES = 3 * 4096 + 1808 }; /* four pieces, the last one short */
    static unsigned char model[BYTES], out[BYTES];
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, BYTES, &a));
    ASSERT_OK(hg_devbuf_copy_from(dev, out, a, BYTES));
    for (size_t i = 0; i < BYTES; i++)
        ASSERT_UEQ(out[i], 0xA5); /* poisoned, every piece */
    for (size_t i = 0; i < BYTES; i++)
        model[i] = (unsigned char)(i * 131 + i / 4096);
    ASSERT_OK(hg_devbuf_copy_to(dev, a, model, BYTES));
    /* Ranges across one and across two boundaries, and one inside a piece. */
    static const size_t at[][2] = {{4000, 200}, {100, 9000}, {8192, 4096}, {12000, 2096}};
    device_copy batch[4];
    static unsigned char parts[4][9000];
    for (int i = 0; i < 4; i++)
        batch[i] = (device_copy){parts[i], a + at[i][0], at[i][1]};
    size_t done = 0;
    ASSERT_OK(device_copy_batch(dev, false, batch, 4, NULL, &done));
    ASSERT_UEQ(done, 4);
    for (int i = 0; i < 4; i++)
        ASSERT(memcmp(parts[i], model + at[i][0], at[i][1]) == 0);
    /* A write across a boundary, then a fill across two. */
    memset(parts[0], 0x3C, 300);
    ASSERT_OK(hg_devbuf_copy_to(dev, a + 4000, parts[0], 300));
    memset(model + 4000, 0x3C, 300);
    ASSERT_OK(device_fill(dev, a + 4090, 0x11, 8300));
    memset(model + 4090, 0x11, 8300);
    ASSERT_OK(hg_devbuf_copy_from(dev, out, a, BYTES));
    ASSERT(memcmp(out, model, BYTES) == 0);
    ASSERT_EQ(hg_devbuf_copy_from(dev, out, a + 100, BYTES), HG_ERANGE);
    ASSERT_UEQ(counters(dev).live_bytes, 14 * HG_DEVICE_ALIGN);
    ASSERT_OK(hg_devbuf_free(dev, a));
    hg_device_close(dev);
}

/* Run by ctest as device/opencl_missing_library with HG_OPENCL_LIB naming
 * a file that does not exist: opening says which library it could not load. */
TEST(opencl_missing_library_is_named)
{
    const char *lib = getenv("HG_OPENCL_LIB");
    if (lib == NULL || strstr(lib, "missing") == NULL) {
        printf("     skipped: needs HG_OPENCL_LIB=/missing/... (ctest's "
               "device/opencl_missing_library)\n");
        return;
    }
    hg_device *dev = NULL;
    char msg[256] = "";
    int rc = hg_device_open("opencl", &dev, msg, sizeof msg);
    ASSERT(dev == NULL);
    if (strstr(msg, "unknown device 'opencl'") != NULL) {
        printf("     skipped: this build has no OpenCL backend\n");
        return;
    }
    ASSERT_EQ(rc, HG_EUNSUPPORTED);
    ASSERT_STR_CONTAINS(msg, lib);
}

int main(void)
{
    return RUN_TESTS();
}
