/*
 * regions_test.c: every open sim device owns its own region of device
 * addresses (hostgraph.h: "no two open devices hand out the same one"), all
 * non-canonical on x86-64; a closed device's region comes back only after
 * every other; at most 4096 devices are open at once, and the next open
 * fails with HG_ENOMEM until one closes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device/device.h"
#include "test_device.h"
#include "testlib.h"

enum { MAX_OPEN = 4096 };

/* Under ThreadSanitizer 4096 devices' core threads take minutes to start:
 * the limit is checked by the other builds. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

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

TEST(at_most_4096_devices_are_open_at_once)
{
#ifdef UNDER_TSAN
    printf("     skipped under ThreadSanitizer (4096 core threads take minutes)\n");
    return;
#endif
    hg_device **d = calloc(MAX_OPEN + 1, sizeof *d);
    ASSERT(d != NULL);
    int opened = 0, rc = 0;
    while (opened <= MAX_OPEN && rc == 0)
        if ((rc = hg_device_open("sim:cores=1,mem=4K", &d[opened], NULL, 0)) == 0)
            opened++;
    ASSERT_EQ(rc, HG_ENOMEM);
    ASSERT_LE(opened, MAX_OPEN); /* other tests' devices are closed: exactly the limit */
    ASSERT_EQ(opened, MAX_OPEN);
    hg_device_close(d[0]);
    ASSERT_OK(hg_device_open("sim:cores=1,mem=4K", &d[0], NULL, 0));
    for (int i = 0; i < opened; i++)
        hg_device_close(d[i]);
    free(d);
}

int main(void)
{
    return RUN_TESTS();
}
