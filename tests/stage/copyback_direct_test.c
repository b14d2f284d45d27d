/*
 * copyback_direct_test.c: copy-back straight into the host buffers.
 *
 * On a device whose batches are all or nothing (device_batch_whole: the
 * sim), copy-back fetches every range of every arg straight into the host
 * buffers in one batch when each arg's ranges are exactly what its tasks
 * wrote, and skips the commit's memcpy; an injected copy fault anywhere in
 * that batch still changes no host byte and no generation.  A range with a
 * gap no task wrote, verify mode, and a queue device (OpenCL) keep host
 * staging.  Every test runs once per backend (test_device.h) and counts:
 * direct fetches, staging bytes, copies, committed bytes, generations.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "test_device.h"
#include "testlib.h"

enum { A_BYTES = 256 << 10, B_BYTES = 16 << 10, TILE = 4 << 10 };

/* Two host buffers, three staged INOUT args: a0 and a1 the two halves of
 * buffer A, b the whole of buffer B.  The device holds the pattern dev_byte,
 * the host host_byte, so every byte tells where it came from. */
typedef struct fixture {
    hg_device *dev;
    hg_hostbuf *a, *b;
    hg_arg args[3];
    stage_plan p;
    stage_retained r;
    hg_err e;
} fixture;

static unsigned char host_byte(int buf, size_t i)
{
    return (unsigned char)(i * 3 + (size_t)buf);
}

static unsigned char dev_byte(int buf, size_t i)
{
    return (unsigned char)(i * 7 + 1 + (size_t)buf);
}

static hg_arg slice_arg(const char *name, hg_hostbuf *hb, size_t bytes, size_t lo, size_t n)
{
    hg_arg a = {name, HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {bytes};
    hg_tensor whole;
    hg_tensor_host(&whole, hb, HG_U8, 1, shape);
    hg_tensor_slice(&whole, 0, lo, n, &a.tensor);
    return a;
}

/* Opens, binds and uploads; then the device's copy of every arg gets the
 * device pattern.  0 or the failing call's code. */
static int fixture_open(fixture *f, const char *backend)
{
    memset(f, 0, sizeof *f);
    f->dev = test_device_on(backend, "cores=1");
    if (f->dev == NULL || hg_hostbuf_create(A_BYTES, &f->a) != 0 ||
        hg_hostbuf_create(B_BYTES, &f->b) != 0)
        return HG_ENOMEM;
    unsigned char *ha = hg_hostbuf_data(f->a), *hb = hg_hostbuf_data(f->b);
    for (size_t i = 0; i < A_BYTES; i++)
        ha[i] = host_byte(0, i);
    for (size_t i = 0; i < B_BYTES; i++)
        hb[i] = host_byte(1, i);
    f->args[0] = slice_arg("a0", f->a, A_BYTES, 0, A_BYTES / 2);
    f->args[1] = slice_arg("a1", f->a, A_BYTES, A_BYTES / 2, A_BYTES / 2);
    f->args[2] = slice_arg("b", f->b, B_BYTES, 0, B_BYTES);
    stage_plan_init(&f->p, NULL);
    int rc = stage_plan_build(&f->p, f->dev, f->args, 3, &f->e);
    rc = rc ? rc : stage_plan_layout(&f->p, &f->e);
    rc = rc ? rc : stage_retained_reserve(&f->r, f->dev, NULL, f->p.required, &f->e);
    rc = rc ? rc : stage_upload(&f->p, f->dev, &f->r, &f->e);
    unsigned char *d = malloc(A_BYTES);
    if (d == NULL)
        return HG_ENOMEM;
    for (uint32_t k = 0; k < 3 && rc == 0; k++) {
        const stage_arg *sa = &f->p.args[k];
        int buf = k == 2;
        for (size_t i = sa->lo; i < sa->hi; i++)
            d[i - sa->lo] = dev_byte(buf, i);
        rc = device_copy_to(f->dev, sa->dev_region, d, sa->hi - sa->lo, NULL);
    }
    free(d);
    return rc;
}

static void fixture_close(fixture *f)
{
    stage_release(&f->p, f->dev);
    stage_retained_free(&f->r, f->dev, NULL);
    stage_plan_free(&f->p);
    hg_hostbuf_destroy(f->a);
    hg_hostbuf_destroy(f->b);
    hg_device_close(f->dev);
}

/* Notes a dense write of [lo, lo+n) (buffer bytes) by a task of arg k. */
static int note_dense(fixture *f, uint32_t k, size_t lo, size_t n)
{
    hg_tensor v;
    size_t arg_lo = f->p.args[k].lo;
    int rc = hg_tensor_slice(&f->args[k].tensor, 0, lo - arg_lo, n, &v);
    return rc ? rc : stage_note_written(&f->p, k, &v, &f->e);
}

/* The writes of the "several ranges" case: a0 two ranges apart, a1 one
 * range, b four adjacent tiles (one range): 4 fetched ranges, 3 args. */
static int note_several(fixture *f)
{
    int rc = note_dense(f, 0, 0, TILE);
    rc = rc ? rc : note_dense(f, 0, 64 << 10, TILE);
    rc = rc ? rc : note_dense(f, 1, A_BYTES / 2 + 1000, 8000);
    for (size_t t = 0; t < B_BYTES / TILE && rc == 0; t++)
        rc = note_dense(f, 2, t * TILE, TILE);
    return rc;
}

static bool written_several(int buf, size_t i)
{
    if (buf == 1)
        return true;
    return i < TILE || (i >= 64 << 10 && i < (64 << 10) + TILE) ||
           (i >= A_BYTES / 2 + 1000 && i < A_BYTES / 2 + 9000);
}
#define SEVERAL_BYTES (2 * TILE + 8000 + B_BYTES)

static hg_device_counters counters(const hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c;
}

TEST_EACH_BACKEND(several_args_and_ranges_come_back_straight)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend));
    const bool whole = device_batch_whole(f.dev);
    ASSERT(whole == test_backend_is_sim(backend)); /* OpenCL makes no such promise */
    const uint64_t gen_a = hg_hostbuf_generation(f.a), gen_b = hg_hostbuf_generation(f.b);
    const hg_device_counters before = counters(f.dev);
    ASSERT_OK(note_several(&f));
    ASSERT_OK(stage_copy_back(&f.p, f.dev, &f.e));
    ASSERT_UEQ(f.p.direct_fetches, (whole ? 1 : 0));
    ASSERT_UEQ(f.p.staging_cap, (whole ? 0 : SEVERAL_BYTES)); /* no staging at all */
    ASSERT_UEQ(f.p.rstats.committed_bytes, SEVERAL_BYTES);
    const hg_device_counters c = counters(f.dev);
    ASSERT_UEQ(c.d2h_copies - before.d2h_copies, 4);
    ASSERT_UEQ(c.d2h_batches - before.d2h_batches, 1);
    ASSERT_UEQ(c.d2h_bytes - before.d2h_bytes, SEVERAL_BYTES);
    const unsigned char *ha = hg_hostbuf_data(f.a), *hb = hg_hostbuf_data(f.b);
    for (size_t i = 0; i < A_BYTES; i++)
        ASSERT_UEQ(ha[i], written_several(0, i) ? dev_byte(0, i) : host_byte(0, i));
    for (size_t i = 0; i < B_BYTES; i++)
        ASSERT_UEQ(hb[i], dev_byte(1, i));
    /* One write step per buffer, as through staging. */
    ASSERT_UEQ(hg_hostbuf_generation(f.a), gen_a + 1);
    ASSERT_UEQ(hg_hostbuf_generation(f.b), gen_b + 1);
    ASSERT_UEQ(f.p.args[0].back_gen, gen_a + 1);
    ASSERT_UEQ(f.p.args[1].back_gen, gen_a + 1);
    ASSERT_UEQ(f.p.args[2].back_gen, gen_b + 1);
    fixture_close(&f);
    /* Verify mode shadows what lands in staging: it never fetches straight. */
    ASSERT_OK(fixture_open(&f, backend));
    f.p.verify = true;
    ASSERT_OK(note_several(&f));
    ASSERT_OK(stage_copy_back(&f.p, f.dev, &f.e));
    ASSERT_UEQ(f.p.direct_fetches, 0);
    ASSERT_UEQ(f.p.staging_cap, SEVERAL_BYTES);
    for (size_t i = 0; i < B_BYTES; i++)
        ASSERT_UEQ(((const unsigned char *)hg_hostbuf_data(f.b))[i], dev_byte(1, i));
    fixture_close(&f);
}

/* The k-th copy fails, for every k inside the batch: no host byte and no
 * generation changes, no copy is counted, and the message names the arg of
 * the range the fault fired on.  Through the direct batch on the sim (no
 * staging reserved), through staging on OpenCL. */
TEST_EACH_BACKEND(a_fault_in_the_batch_changes_no_host_byte)
{
    static const char *const arg_of_range[4] = {"a0", "a0", "a1", "b"};
    for (uint64_t k = 1; k <= 4; k++) {
        fixture f;
        ASSERT_OK(fixture_open(&f, backend));
        const bool whole = device_batch_whole(f.dev);
        unsigned char *ha = hg_hostbuf_data(f.a), *hb = hg_hostbuf_data(f.b);
        const uint64_t gen_a = hg_hostbuf_generation(f.a), gen_b = hg_hostbuf_generation(f.b);
        const hg_device_counters before = counters(f.dev);
        ASSERT_OK(note_several(&f));
        ASSERT_OK(hg_device_inject_fault(f.dev, HG_FAULT_COPY, k));
        ASSERT_EQ(stage_copy_back(&f.p, f.dev, &f.e), HG_ECOPY);
        char want[64];
        snprintf(want, sizeof want, "arg '%s'", arg_of_range[k - 1]);
        ASSERT(strstr(f.e.msg, want) != NULL);
        ASSERT_UEQ(f.p.direct_fetches, 0);
        if (whole) { /* the batch went straight for the host, and moved nothing */
            ASSERT_UEQ(f.p.staging_cap, 0);
            ASSERT_UEQ(counters(f.dev).d2h_copies, before.d2h_copies);
            ASSERT_UEQ(counters(f.dev).d2h_batches, before.d2h_batches);
        }
        for (size_t i = 0; i < A_BYTES; i++)
            ASSERT_UEQ(ha[i], host_byte(0, i));
        for (size_t i = 0; i < B_BYTES; i++)
            ASSERT_UEQ(hb[i], host_byte(1, i));
        ASSERT_UEQ(hg_hostbuf_generation(f.a), gen_a);
        ASSERT_UEQ(hg_hostbuf_generation(f.b), gen_b);
        ASSERT_UEQ(f.p.rstats.committed_bytes, 0);
        fixture_close(&f);
    }
}

/* Notes a0's first KiB written as every other byte, from byte `first`
 * (0 or 1): a view fetched as its extent (one range, cheaper than 512
 * copies), whose gaps it does not write. */
static int note_every_other(fixture *f, size_t first)
{
    hg_tensor v = f->args[0].tensor;
    v.offset = first;
    v.shape[0] = 512;
    v.strides[0] = 2;
    return stage_note_written(&f->p, 0, &v, &f->e);
}

/* a0's even bytes alone leave gaps inside their fetched range: the commit
 * skips them, so that copy-back goes through staging, and b with it (all
 * args come back one way).  With the odd bytes written too the range is
 * covered, and the same args come back straight. */
TEST_EACH_BACKEND(a_gap_inside_a_fetched_range_goes_through_staging)
{
    for (int odd_too = 0; odd_too < 2; odd_too++) {
        fixture f;
        ASSERT_OK(fixture_open(&f, backend));
        const bool whole = device_batch_whole(f.dev);
        ASSERT_OK(note_every_other(&f, 0));
        if (odd_too)
            ASSERT_OK(note_every_other(&f, 1));
        ASSERT_OK(note_dense(&f, 2, 0, B_BYTES));
        ASSERT_OK(stage_copy_back(&f.p, f.dev, &f.e));
        const size_t fetched = (odd_too ? 1024 : 1023) + B_BYTES;
        ASSERT_UEQ(f.p.direct_fetches, (whole && odd_too ? 1 : 0));
        ASSERT_UEQ(f.p.staging_cap, (whole && odd_too ? 0 : fetched));
        ASSERT_UEQ(f.p.rstats.committed_bytes, (odd_too ? 1024u : 512u) + B_BYTES);
        const unsigned char *ha = hg_hostbuf_data(f.a), *hb = hg_hostbuf_data(f.b);
        for (size_t i = 0; i < 2048; i++) {
            bool written = i < 1024 && (odd_too || i % 2 == 0);
            ASSERT_UEQ(ha[i], written ? dev_byte(0, i) : host_byte(0, i));
        }
        for (size_t i = 0; i < B_BYTES; i++)
            ASSERT_UEQ(hb[i], dev_byte(1, i));
        fixture_close(&f);
    }
}

int main(void)
{
    return RUN_TESTS();
}
