/*
 * regions_test.c: every open sim device owns its own region of device
 * addresses (hostgraph.h: "no two open devices hand out the same one"), all
 * non-canonical on x86-64; a closed device's region comes back only after
 * every other; at most 4096 devices are open at once, and the next open
 * fails with HG_ENOMEM until one closes.  The same for OpenCL's address
 * windows: however many devices open and close while one stays open, none
 * hands out its addresses, and its address is refused by every other.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device/device.h"
#include "test_device.h"
#include "testlib.h"

enum { MAX_OPEN = 4096 };

/* Under ThreadSanitizer (UNDER_TSAN, testlib.h) 4096 devices' core threads
 * take minutes to start: the limit is checked by the other builds. */

static uint64_t region_of(hg_devaddr a)
{
    return a >> 48;
}

TEST(devices_hand_out_disjoint_non_canonical_addresses)
{
    hg_device *d[3];
    hg_devaddr a[3];
    for (int i = 0; i < 3; i++) {
        d[i] = test_device_open("sim:cores=1,mem=1M");
        ASSERT(d[i] != NULL);
        ASSERT_OK(hg_devbuf_malloc(d[i], 1000, &a[i]));
        ASSERT(region_of(a[i]) != 0 && region_of(a[i]) != 0xFFFF); /* non-canonical */
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            hg_devaddr base;
            size_t size;
            device_addr_owner want = i == j ? DEVICE_ADDR_USER : DEVICE_ADDR_FOREIGN;
            ASSERT_EQ(device_addr_lookup(d[i], a[j], &base, &size), want);
            if (i != j)
                ASSERT(region_of(a[i]) != region_of(a[j]));
        }
        ASSERT_EQ(device_addr_lookup(d[i], a[i] + 1024, &(hg_devaddr){0}, &(size_t){0}),
                  DEVICE_ADDR_NONE);
    }
    /* A device opened after one closed does not get its region back. */
    uint64_t closed = region_of(a[1]);
    hg_device_close(d[1]);
    d[1] = test_device_open("sim:cores=1,mem=1M");
    ASSERT(d[1] != NULL);
    ASSERT_OK(hg_devbuf_malloc(d[1], 1000, &a[1]));
    ASSERT(region_of(a[1]) != closed);
    for (int i = 0; i < 3; i++)
        hg_device_close(d[i]);
}

/* Opens devices of `spec` until one is refused, which must be HG_ENOMEM
 * (its message into msg) at exactly MAX_OPEN (other tests' devices are
 * closed); once one closes, the next open succeeds. */
static void open_to_the_limit(const char *spec, char *msg, size_t len)
{
    hg_device **d = calloc(MAX_OPEN + 1, sizeof *d);
    ASSERT(d != NULL);
    int opened = 0, rc = 0;
    while (opened <= MAX_OPEN && rc == 0)
        if ((rc = hg_device_open(spec, &d[opened], msg, len)) == 0)
            opened++;
    int reopened = -1;
    if (opened > 0) {
        hg_device_close(d[0]);
        reopened = hg_device_open(spec, &d[0], NULL, 0);
    }
    for (int i = reopened == 0 ? 0 : 1; i < opened; i++)
        hg_device_close(d[i]);
    free(d);
    ASSERT_EQ(rc, HG_ENOMEM);
    ASSERT_EQ(opened, MAX_OPEN);
    ASSERT_OK(reopened);
}

TEST(at_most_4096_devices_are_open_at_once)
{
#ifdef UNDER_TSAN
    printf("     skipped under ThreadSanitizer (4096 core threads take minutes)\n");
    return;
#endif
    char msg[256];
    open_to_the_limit("sim:cores=1,mem=4K", msg, sizeof msg);
}

/* While A stays open, 4095 devices open and close (the repro was
 * 255: windows wrapped at 256), then B opens: none shares A's window, B's
 * addresses differ from A's and B refuses A's address. */
TEST(opencl_windows_are_never_shared_while_a_device_is_open)
{
    if (!test_backend_available(1))
        return;
    hg_device *a = test_device_open("opencl:mem=1M");
    ASSERT(a != NULL);
    hg_devaddr at_a, at_b;
    ASSERT_OK(hg_devbuf_malloc(a, 1000, &at_a));
    for (int i = 0; i < MAX_OPEN - 1; i++) {
        hg_device *d = test_device_open("opencl:mem=1M");
        ASSERT(d != NULL);
        hg_devaddr x;
        ASSERT_OK(hg_devbuf_malloc(d, 1000, &x));
        if (x == at_a ||
            device_addr_lookup(d, at_a, &(hg_devaddr){0}, &(size_t){0}) != DEVICE_ADDR_FOREIGN)
            TEST_FAIL_("device %d opened after A hands out A's address 0x%llx", i + 1,
                       (unsigned long long)at_a);
        hg_device_close(d);
    }
    hg_device *b = test_device_open("opencl:mem=1M");
    ASSERT(b != NULL);
    ASSERT_OK(hg_devbuf_malloc(b, 1000, &at_b));
    ASSERT(at_b != at_a);
    const char bytes[16] = "from B";
    ASSERT_EQ(hg_devbuf_copy_to(b, at_a, bytes, sizeof bytes), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(b, (char[16]){0}, at_a, 16), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_free(b, at_a), HG_ENOTFOUND);
    ASSERT_OK(hg_devbuf_copy_to(a, at_a, bytes, sizeof bytes));
    ASSERT_OK(hg_devbuf_copy_to(b, at_b, bytes, sizeof bytes));
    hg_device_close(b);
    hg_device_close(a);
}

/* With every window held, the next open fails naming the limit, and
 * succeeds again once one device closes. */
TEST(at_most_4096_opencl_devices_are_open_at_once)
{
    if (!test_backend_available(1))
        return;
    char msg[256] = "";
    open_to_the_limit("opencl:mem=4K", msg, sizeof msg);
    ASSERT_STR_CONTAINS(msg, "all 4096 address windows are held");
    ASSERT_STR_CONTAINS(msg, "at most 4096 open OpenCL devices");
}

int main(void)
{
    return RUN_TESTS();
}
