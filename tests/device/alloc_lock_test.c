/*
 * alloc_lock_test.c: an allocation's poisoning holds no lock, so copies and
 * allocations of other threads go on meanwhile (hostgraph.h: "their copies
 * and allocations proceed concurrently"), and a failed allocation gives back
 * the capacity it reserved.
 *
 * No timing: the device's debug hook stops the allocating thread at the
 * start of its poisoning phase; there it checks that it holds no device lock
 * and lets another thread copy and allocate, and waits (a condition
 * variable, no timeout) until that thread is done.  A device that poisoned
 * under a lock is caught by the count of locks held, before any wait, so the
 * test fails instead of hanging.
 */
#include <pthread.h>
#include <string.h>

#include "device/backend.h"
#include "device/device.h"
#include "test_device.h"
#include "testlib.h"

enum { BIG = 4 << 20, SMALL = 4096 };

typedef struct handshake {
    hg_device *dev;
    hg_devaddr other; /* a live allocation the second thread copies into */
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool go;            /* the big allocation is poisoning (or it was refused) */
    bool copied;        /* the second thread's copy and allocation are done */
    bool copied_inside; /* ... while the big allocation was poisoning */
    unsigned locks_in_hook;
    int copy_rc, alloc_rc;
} handshake;

static void on_alloc(void *ctx, hg_devaddr addr, size_t bytes)
{
    handshake *h = ctx;
    (void)addr;
    if (bytes != BIG)
        return; /* the second thread's own allocation */
    h->locks_in_hook = device_locks_held();
    pthread_mutex_lock(&h->m);
    h->go = true;
    pthread_cond_broadcast(&h->cv);
    /* Waiting with a lock held would deadlock the other thread: don't. */
    while (h->locks_in_hook == 0 && !h->copied)
        pthread_cond_wait(&h->cv, &h->m);
    h->copied_inside = h->copied;
    pthread_mutex_unlock(&h->m);
}

static void *copier(void *arg)
{
    handshake *h = arg;
    pthread_mutex_lock(&h->m);
    while (!h->go)
        pthread_cond_wait(&h->cv, &h->m);
    pthread_mutex_unlock(&h->m);
    unsigned char bytes[SMALL];
    memset(bytes, 0x3c, sizeof bytes);
    h->copy_rc = hg_devbuf_copy_to(h->dev, h->other, bytes, sizeof bytes);
    hg_devaddr small = 0;
    h->alloc_rc = hg_devbuf_malloc(h->dev, SMALL, &small);
    if (h->alloc_rc == 0)
        h->alloc_rc = hg_devbuf_free(h->dev, small);
    pthread_mutex_lock(&h->m);
    h->copied = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->m);
    return NULL;
}

TEST(copy_and_allocation_complete_while_another_allocation_poisons)
{
    handshake h = {.dev = test_device_open("sim:cores=1")};
    ASSERT(h.dev != NULL);
    pthread_mutex_init(&h.m, NULL);
    pthread_cond_init(&h.cv, NULL);
    ASSERT_OK(hg_devbuf_malloc(h.dev, SMALL, &h.other));
    device_debug_set_alloc_hook(h.dev, on_alloc, &h);
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, copier, &h));
    hg_devaddr big;
    int rc = hg_devbuf_malloc(h.dev, BIG, &big);
    pthread_mutex_lock(&h.m);
    h.go = true; /* in case the hook never let it go */
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.m);
    pthread_join(t, NULL);
    device_debug_set_alloc_hook(h.dev, NULL, NULL);
    ASSERT_OK(rc);
    ASSERT_UEQ(h.locks_in_hook, 0);
    ASSERT(h.copied_inside);
    ASSERT_OK(h.copy_rc);
    ASSERT_OK(h.alloc_rc);
    ASSERT_UEQ(device_debug_locked_prepare_bytes(h.dev), 0);
    unsigned char back[SMALL];
    ASSERT_OK(hg_devbuf_copy_from(h.dev, back, big, sizeof back));
    ASSERT_UEQ(back[0], 0xA5); /* poisoned all the same */
    ASSERT_UEQ(back[SMALL - 1], 0xA5);
    hg_device_counters c;
    hg_device_counters_get(h.dev, &c);
    ASSERT_UEQ(c.allocs, 3);
    ASSERT_UEQ(c.frees, 1);
    ASSERT_UEQ(c.live_bytes, BIG + SMALL);
    hg_device_close(h.dev);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.m);
}

TEST(no_allocation_poisons_under_a_lock)
{
    hg_device *dev = test_device_open("sim:cores=2");
    ASSERT(dev != NULL);
    hg_devaddr a[8];
    for (int i = 0; i < 8; i++)
        ASSERT_OK(hg_devbuf_malloc(dev, (size_t)(i + 1) * 10000, &a[i]));
    for (int i = 0; i < 8; i += 2)
        ASSERT_OK(hg_devbuf_free(dev, a[i]));
    for (int i = 0; i < 8; i += 2)
        ASSERT_OK(hg_devbuf_malloc(dev, 5000, &a[i]));
    ASSERT_UEQ(device_debug_locked_prepare_bytes(dev), 0);
    hg_device_close(dev);
}

/* The backend refuses after device.c reserved capacity (the arena is
 * fragmented): the reservation comes back, and nothing is counted. */
TEST(allocation_the_backend_refuses_gives_its_reservation_back)
{
    hg_device *dev = test_device_open("sim:cores=1,mem=4K");
    ASSERT(dev != NULL);
    hg_devaddr a[4];
    for (int i = 0; i < 4; i++)
        ASSERT_OK(hg_devbuf_malloc(dev, HG_DEVICE_ALIGN, &a[i]));
    ASSERT_OK(hg_devbuf_free(dev, a[0]));
    ASSERT_OK(hg_devbuf_free(dev, a[2]));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    hg_devaddr two;
    ASSERT_EQ(hg_devbuf_malloc(dev, 2 * HG_DEVICE_ALIGN, &two), HG_EDEVMEM); /* no 2K gap */
    hg_device_counters_get(dev, &after);
    ASSERT(memcmp(&before, &after, sizeof before) == 0);
    ASSERT_OK(hg_devbuf_malloc(dev, HG_DEVICE_ALIGN, &a[0])); /* both 1K holes still count */
    ASSERT_OK(hg_devbuf_malloc(dev, HG_DEVICE_ALIGN, &a[2]));
    ASSERT_EQ(hg_devbuf_malloc(dev, 1, &two), HG_EDEVMEM); /* full */
    hg_device_close(dev);
}

typedef struct churn {
    hg_device *dev;
    hg_devaddr target;
    int rc;
} churn;

static void *copy_loop(void *arg)
{
    churn *c = arg;
    unsigned char bytes[SMALL] = {0};
    for (int i = 0; i < 500 && c->rc == 0; i++) {
        bytes[0] = (unsigned char)i;
        c->rc = hg_devbuf_copy_to(c->dev, c->target, bytes, sizeof bytes);
        if (c->rc == 0)
            c->rc = hg_devbuf_copy_from(c->dev, bytes, c->target, sizeof bytes);
        if (c->rc == 0 && bytes[0] != (unsigned char)i)
            c->rc = -100;
    }
    return NULL;
}

/* Allocations and copies on two threads at once (TSan's case). */
TEST(allocations_and_copies_on_two_threads)
{
    churn c = {.dev = test_device_open("sim:cores=1")};
    ASSERT(c.dev != NULL);
    ASSERT_OK(hg_devbuf_malloc(c.dev, SMALL, &c.target));
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, copy_loop, &c));
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++) {
        hg_devaddr a;
        rc = hg_devbuf_malloc(c.dev, (size_t)(i % 7 + 1) * 3000, &a);
        if (rc == 0)
            rc = hg_devbuf_free(c.dev, a);
    }
    pthread_join(t, NULL);
    ASSERT_OK(rc);
    ASSERT_OK(c.rc);
    ASSERT_UEQ(device_debug_locked_prepare_bytes(c.dev), 0);
    hg_device_counters k;
    hg_device_counters_get(c.dev, &k);
    ASSERT_UEQ(k.allocs, 201);
    ASSERT_UEQ(k.live_bytes, SMALL);
    hg_device_close(c.dev);
}

int main(void)
{
    return RUN_TESTS();
}
