/*
 * orphan_test.c: resident copies of destroyed host buffers, and eviction,
 * counted.
 *
 * Destroying a host buffer frees its copies in every runner that holds one
 * (the device memory at once, the record at that runner's next bind or
 * query), so a loop that wraps a fresh buffer every step never fills the
 * device, other runners and hg_devbuf_malloc never see HG_EDEVMEM for dead
 * copies, and a bind's cost stays flat: counted in records and index slots
 * touched, not timed.  Eviction frees what a request needs in one pass.
 * Every test runs once per backend (test_device.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "run/run.h"
#include "test_device.h"
#include "testlib.h"

static int k_touch(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}
static const hg_kernel K_TOUCH = {"touch", k_touch, HG_CORE_VECTOR,
                                  "__kernel void touch(HG_STATUS_ARGS, HG_TENSOR(uchar, x)) {}",
                                  "touch"};

/* One task reading arg 0 (when it is not empty). */
static int orch_read(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta = {0, HG_IN, a->tensor};
    hg_task_desc d = {&K_TOUCH, &ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}
static const hg_callable READ = {"read", orch_read, NULL};

static int run_over(hg_runner *r, hg_hostbuf *hb, size_t bytes, hg_run_stats *s)
{
    hg_arg a = {"w", HG_IN, {0}, 0, HG_RESIDENT};
    int rc = hg_tensor_host(&a.tensor, hb, HG_U8, 1, &bytes);
    return rc ? rc : hg_runner_run(r, &READ, &a, 1, s);
}

enum { STEP = 64 << 10, MEM = 1 << 20 };

/* 10^4 wrap/run/destroy cycles on a 1 MiB device with 64 KiB buffers: the
 * device never fills, the records stay bounded and each bind touches a
 * bounded number of records, whatever the step. */
TEST_EACH_BACKEND(wrapping_a_fresh_buffer_every_step_stays_flat)
{
    hg_device *dev = test_device_on(backend, "cores=1,mem=1M");
    hg_runner *r, *other;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_runner_open(dev, &other));
    static unsigned char mem[STEP];
    uint64_t most_touched = 0;
    for (int step = 0; step < 10000; step++) {
        hg_hostbuf *hb;
        ASSERT_OK(hg_hostbuf_wrap(mem, STEP, &hb));
        hg_run_stats s;
        uint64_t before = r->cache.touched;
        ASSERT_OK(run_over(r, hb, STEP, &s));
        uint64_t touched = r->cache.touched - before;
        most_touched = touched > most_touched ? touched : most_touched;
        ASSERT_UEQ(s.evictions, 0);
        hg_hostbuf_destroy(hb);
        hg_device_counters c;
        hg_device_counters_get(dev, &c);
        ASSERT_ULE(c.live_bytes, 2 * STEP); /* the retained buffer; the copy is gone */
        ASSERT_ULE(r->cache.nslots, 1);
    }
    ASSERT_ULE(most_touched, 16);
    ASSERT_UEQ(hg_runner_resident_copies(r), 0);
    ASSERT_UEQ(hg_runner_resident_bytes(r), 0);
    /* The other runner's copies are freed too, while it is idle. */
    hg_hostbuf *x;
    ASSERT_OK(hg_hostbuf_create(MEM / 2, &x));
    hg_run_stats s;
    ASSERT_OK(run_over(other, x, MEM / 2, &s));
    hg_hostbuf_destroy(x);
    hg_devaddr big;
    ASSERT_OK(hg_devbuf_malloc(dev, MEM - 2 * STEP - 16384, &big)); /* room: the dead copy went */
    ASSERT_OK(hg_devbuf_free(dev, big));
    ASSERT_UEQ(hg_runner_resident_copies(other), 0);
    ASSERT_UEQ(hg_runner_device_bytes(other), hg_runner_retained_capacity(other));
    hg_runner_close(other);
    hg_runner_close(r);
    hg_device_close(dev);
}

/* A device full of 256 small resident copies (live buffers) and one run
 * whose resident arg needs most of the device: the copies it needs are
 * evicted in one pass, touching each record a bounded number of times. */
TEST_EACH_BACKEND(eviction_frees_what_a_request_needs_in_one_pass)
{
    enum { SMALL = 1024, NSMALL = 256 };
    hg_device *dev = test_device_on(backend, "cores=1,mem=512K");
    hg_runner *r;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    static hg_hostbuf *small[NSMALL];
    hg_run_stats s;
    for (int i = 0; i < NSMALL; i++) {
        ASSERT_OK(hg_hostbuf_create(SMALL, &small[i]));
        ASSERT_OK(run_over(r, small[i], SMALL, &s));
    }
    ASSERT_UEQ(hg_runner_resident_copies(r), NSMALL);
    hg_hostbuf *big;
    ASSERT_OK(hg_hostbuf_create(400 << 10, &big));
    uint64_t before = r->cache.touched;
    ASSERT_OK(run_over(r, big, 400 << 10, &s));
    ASSERT_UGE(s.evictions, 144);
    ASSERT_ULE(r->cache.touched - before, 16 * (s.evictions + 4));
    ASSERT_UEQ(hg_runner_resident_copies(r), NSMALL - s.evictions + 1);
    for (int i = 0; i < NSMALL; i++)
        hg_hostbuf_destroy(small[i]);
    hg_hostbuf_destroy(big);
    hg_runner_close(r);
    hg_device_close(dev);
}

/* A buffer destroyed while its copies sit in two runners: both forget it,
 * and a later buffer (new id) never matches the old records. */
TEST_EACH_BACKEND(destroy_frees_the_copies_of_every_runner)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    hg_runner *a, *b;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &a));
    ASSERT_OK(hg_runner_open(dev, &b));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(4096, &hb));
    hg_run_stats s;
    ASSERT_OK(run_over(a, hb, 4096, &s));
    ASSERT_OK(run_over(b, hb, 4096, &s));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    hg_hostbuf_destroy(hb);
    hg_device_counters_get(dev, &after);
    ASSERT_UEQ(before.live_bytes - after.live_bytes, 2 * 4096); /* at once */
    ASSERT_UEQ(after.frees - before.frees, 2);
    ASSERT_UEQ(hg_runner_resident_copies(a), 0);
    ASSERT_UEQ(hg_runner_resident_copies(b), 0);
    ASSERT_OK(hg_hostbuf_create(4096, &hb));
    ASSERT_OK(run_over(a, hb, 4096, &s));
    ASSERT_UEQ(s.resident_hits, 0);
    ASSERT_OK(run_over(a, hb, 4096, &s));
    ASSERT_UEQ(s.resident_hits, 1);
    hg_runner_close(a); /* a's copy goes with a; b never had this one */
    hg_hostbuf_destroy(hb);
    hg_runner_close(b);
    hg_device_counters_get(dev, &after);
    ASSERT_UEQ(after.live_bytes, 0);
    hg_device_close(dev);
}

/* Buffers destroyed on one thread while the runner holding their copies
 * runs on another (over a buffer of its own): TSan sees the watch lock
 * order, and the runner ends with only its own copy. */
typedef struct busy {
    hg_runner *r;
    hg_hostbuf *keep;
    int runs, failed;
} busy;

static void *run_busy(void *arg)
{
    busy *b = arg;
    for (int i = 0; i < b->runs; i++) {
        hg_run_stats s;
        if (run_over(b->r, b->keep, 4096, &s) != 0)
            b->failed++;
    }
    return NULL;
}

TEST_EACH_BACKEND(destroying_on_another_thread_while_the_runner_runs)
{
    enum { NBUF = 64 };
    hg_device *dev = test_device_on(backend, "cores=2");
    hg_runner *r;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    static hg_hostbuf *bufs[NBUF];
    hg_run_stats s;
    for (int i = 0; i < NBUF; i++) {
        ASSERT_OK(hg_hostbuf_create(4096, &bufs[i]));
        ASSERT_OK(run_over(r, bufs[i], 4096, &s));
    }
    busy b = {r, NULL, 200, 0};
    ASSERT_OK(hg_hostbuf_create(4096, &b.keep));
    pthread_t t;
    ASSERT_OK(pthread_create(&t, NULL, run_busy, &b));
    for (int i = 0; i < NBUF; i++)
        hg_hostbuf_destroy(bufs[i]);
    pthread_join(t, NULL);
    ASSERT_EQ(b.failed, 0);
    ASSERT_UEQ(hg_runner_resident_copies(r), 1);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.live_bytes, hg_runner_device_bytes(r));
    hg_runner_close(r);
    hg_hostbuf_destroy(b.keep);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
