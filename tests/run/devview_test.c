/*
 * devview_test.c: every device owns its addresses, and a non-empty device
 * view (a run arg over device memory) is valid only inside one of its own
 * device's user allocations (hg_devbuf_malloc).  Refused at bind, HG_ERANGE
 * naming the arg and why: another device's address (every sim device once
 * handed out the same addresses, so a view of device A's memory resolved
 * into device B's resident copy and the kernel overwrote it), runtime-owned
 * memory (a resident copy, the retained buffer, pooled scratch), a freed
 * allocation.  A zero-byte view stays valid at any address.  Every test runs
 * once per backend (test_device.h).
 */
#include <string.h>

#include "device/device.h"
#include "hostgraph.h"
#include "test_device.h"
#include "test_orch.h"
#include "testlib.h"

enum { BYTES = 4096 };

/* out = in, byte for byte; args: in, out. */
static int k_copy(const hg_kernel_ctx *ctx)
{
    memcpy(ctx->args[1].data, ctx->args[0].data, ctx->args[0].shape[0]);
    return 0;
}

/* out = 0x77 everywhere; args: in (unused), out. */
static int k_fill77(const hg_kernel_ctx *ctx)
{
    if (ctx->args[1].data != NULL)
        memset(ctx->args[1].data, 0x77, ctx->args[1].shape[0]);
    return 0;
}

/* On OpenCL one work item per byte of out; an empty out launches nothing. */
static const hg_kernel K_COPY = {
    "copy", k_copy, HG_CORE_VECTOR,
    "__kernel void copy(HG_STATUS_ARGS, HG_TENSOR(uchar, in), HG_TENSOR(uchar, out))\n"
    "{ size_t i = get_global_id(0); HG_PTR(out)[i] = HG_PTR(in)[i]; }",
    "copy"};
static const hg_kernel K_FILL77 = {
    "fill77", k_fill77, HG_CORE_VECTOR,
    "__kernel void fill77(HG_STATUS_ARGS, HG_TENSOR(uchar, in), HG_TENSOR(uchar, out))\n"
    "{ HG_PTR(out)[get_global_id(0)] = 0x77; }",
    "fill77"};

/* Submits `user` (a kernel) over args 0 (IN) and 1 (OUT); with a third arg,
 * also takes scratch, so the runner pools some. */
static int orch_pair(hg_orch *o, void *user)
{
    return test_submit_pair(o, user);
}

static int orch_with_scratch(hg_orch *o, void *user)
{
    uint32_t arg;
    hg_tensor view;
    size_t shape[1] = {BYTES};
    int rc = hg_orch_scratch(o, "tmp", HG_U8, 1, shape, &arg, &view);
    if (rc != 0)
        return rc;
    const hg_arg *in;
    hg_orch_arg(o, 0, &in);
    hg_task_arg ta[2] = {{0, HG_IN, in->tensor}, {arg, HG_OUT, view}};
    hg_task_desc d = {user, ta, 2, NULL, 0, NULL, 0};
    rc = hg_task_submit(o, &d, NULL);
    if (rc != 0)
        return rc;
    return orch_pair(o, user);
}

static hg_arg dev_arg(const char *name, hg_dir dir, hg_devaddr addr, size_t bytes)
{
    hg_arg a = {name, dir, {0}, 0, HG_STAGED};
    size_t shape[1] = {bytes};
    hg_tensor_device(&a.tensor, addr, HG_U8, 1, shape);
    return a;
}

static hg_arg host_arg(const char *name, hg_dir dir, hg_hostbuf *hb, hg_residency res)
{
    hg_arg a = {name, dir, {0}, 0, res};
    size_t shape[1] = {hg_hostbuf_size(hb)};
    hg_tensor_host(&a.tensor, hb, HG_U8, 1, shape);
    return a;
}

/* The runtime's allocations on dev (everything live that is not in
 * `users`), found by walking dev's addresses from `from` in allocation
 * units: up to max into out.  device_find_alloc sees every owner. */
static size_t runtime_allocs(hg_device *dev, hg_devaddr from, const hg_devaddr *users,
                             size_t nusers, hg_devaddr *out, size_t max)
{
    size_t n = 0;
    for (hg_devaddr a = from; a < from + 256u * HG_DEVICE_ALIGN && n < max; a += HG_DEVICE_ALIGN) {
        hg_devaddr base;
        size_t size;
        if (device_find_alloc(dev, a, &base, &size) != 0 || base != a)
            continue;
        bool user = false;
        for (size_t i = 0; i < nusers; i++)
            user |= users[i] == a;
        if (!user)
            out[n++] = a;
    }
    return n;
}

/* A user buffer of BYTES on dev at address `target` (a multiple of
 * HG_DEVICE_ALIGN past the start of dev's empty region), after a padding
 * allocation (*pad, 0 if none) of whatever size lands it there: the
 * device's allocator may add a redzone to each allocation (ASan builds). */
static int place_at(hg_device *dev, hg_devaddr target, hg_devaddr *pad, hg_devaddr *view)
{
    hg_devaddr first;
    int rc = hg_devbuf_malloc(dev, 1, &first);
    if (rc == 0)
        rc = hg_devbuf_free(dev, first);
    *pad = 0;
    for (uint64_t p = target - first; rc == 0; p -= HG_DEVICE_ALIGN) {
        if (p > 0 && (rc = hg_devbuf_malloc(dev, (size_t)p, pad)) != 0)
            return rc;
        if ((rc = hg_devbuf_malloc(dev, BYTES, view)) != 0 || *view == target)
            return rc;
        hg_devbuf_free(dev, *view);
        if (p == 0)
            return HG_ENOTFOUND;
        hg_devbuf_free(dev, *pad);
        *pad = 0;
    }
    return rc;
}

static hg_hostbuf *pattern_buffer(void)
{
    hg_hostbuf *hb = NULL;
    if (hg_hostbuf_create(BYTES, &hb) != 0)
        return NULL;
    unsigned char *p = hg_hostbuf_data(hb);
    for (size_t i = 0; i < BYTES; i++)
        p[i] = (unsigned char)(i * 7 + 1);
    return hb;
}

/* Two devices, a runner on `dev`, and host buffers w and out (a pattern). */
typedef struct fixture {
    hg_device *dev, *other;
    hg_runner *r;
    hg_hostbuf *w, *out;
} fixture;

static bool fixture_open(fixture *f, const char *backend)
{
    memset(f, 0, sizeof *f);
    f->dev = test_device_on(backend, "cores=1");
    f->other = test_device_on(backend, "cores=1");
    return f->dev != NULL && f->other != NULL && hg_runner_open(f->dev, &f->r) == 0 &&
           (f->w = pattern_buffer()) != NULL && (f->out = pattern_buffer()) != NULL;
}

static void fixture_close(fixture *f)
{
    hg_runner_close(f->r);
    hg_hostbuf_destroy(f->w);
    hg_hostbuf_destroy(f->out);
    hg_device_close(f->other);
    hg_device_close(f->dev);
}

TEST_EACH_BACKEND(another_devices_view_is_refused_and_leaves_the_resident_copy_alone)
{
    fixture f;
    ASSERT(fixture_open(&f, backend));
    hg_device *a = f.other, *b = f.dev;
    hg_runner *r = f.r;
    hg_hostbuf *w = f.w;
    hg_devaddr u; /* b's user buffer, the first allocation on b */
    ASSERT_OK(hg_devbuf_malloc(b, BYTES, &u));
    hg_callable copy = {"copy", orch_pair, (void *)&K_COPY};
    hg_arg args[2] = {host_arg("w", HG_IN, w, HG_RESIDENT), dev_arg("u", HG_OUT, u, BYTES)};
    ASSERT_OK(hg_runner_run(r, &copy, args, 2, NULL));
    ASSERT_UEQ(hg_runner_resident_copies(r), 1);
    hg_devaddr copy_addr;
    ASSERT_UEQ(runtime_allocs(b, u, &u, 1, &copy_addr, 1), 1); /* the resident copy */

    /* On a: a user buffer at the resident copy's offset from the first
     * allocation of its device (the same address, when every device handed
     * out the same ones). */
    hg_devaddr a_first, pad = 0, view;
    ASSERT_OK(hg_devbuf_malloc(a, 1, &a_first));
    ASSERT_OK(hg_devbuf_free(a, a_first));
    ASSERT_OK(place_at(a, a_first + (copy_addr - u), &pad, &view));
    hg_arg bad[2] = {host_arg("w", HG_IN, w, HG_RESIDENT), dev_arg("dv", HG_OUT, view, BYTES)};
    hg_callable fill = {"fill", orch_pair, (void *)&K_FILL77};
    ASSERT_EQ(hg_runner_run(r, &fill, bad, 2, NULL), HG_ERANGE);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "arg 'dv'");
    char where[128];
    snprintf(where, sizeof where, "not in a user allocation of device %s", hg_device_spec(b));
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), where);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "another device's");

    /* b's resident copy is untouched: the next run hits on w's bytes. */
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(r, &copy, args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 1);
    unsigned char back[BYTES];
    ASSERT_OK(hg_devbuf_copy_from(b, back, u, BYTES));
    ASSERT(memcmp(back, hg_hostbuf_data(w), BYTES) == 0);
    fixture_close(&f);
}

TEST_EACH_BACKEND(runtime_owned_memory_is_refused_as_a_device_view_and_by_devbuf_calls)
{
    fixture f;
    ASSERT(fixture_open(&f, backend));
    hg_device *dev = f.dev;
    hg_runner *r = f.r;
    hg_hostbuf *w = f.w, *out = f.out;
    hg_devaddr first;
    ASSERT_OK(hg_devbuf_malloc(dev, 1, &first));
    /* A resident copy (w), a retained buffer (out's slice), pooled scratch. */
    hg_arg args[2] = {host_arg("w", HG_IN, w, HG_RESIDENT), host_arg("out", HG_OUT, out, 0)};
    hg_callable c = {"scratch", orch_with_scratch, (void *)&K_COPY};
    hg_callable fill = {"fill", orch_pair, (void *)&K_FILL77};
    for (size_t i = 0; i < 3; i++) {
        for (uint64_t at = 0; at < 2; at++) { /* its first byte, and one inside */
            /* A run that takes scratch first: a failed run frees the pooled
             * scratch it did not use. */
            ASSERT_OK(hg_runner_run(r, &c, args, 2, NULL));
            hg_devaddr owned[8];
            ASSERT_UEQ(runtime_allocs(dev, first, &first, 1, owned, 8), 3);
            ASSERT_EQ(hg_devbuf_free(dev, owned[i]), HG_ENOTFOUND); /* not the user's */
            unsigned char junk[64] = {0};
            ASSERT_EQ(hg_devbuf_copy_to(dev, owned[i], junk, sizeof junk), HG_ERANGE);
            ASSERT_EQ(hg_devbuf_copy_from(dev, junk, owned[i], sizeof junk), HG_ERANGE);
            hg_arg bad[2] = {host_arg("w", HG_IN, w, HG_RESIDENT),
                             dev_arg("dv", HG_OUT, owned[i] + at * 64, 64)};
            ASSERT_EQ(hg_runner_run(r, &fill, bad, 2, NULL), HG_ERANGE);
            ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "arg 'dv'");
            ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "runtime-owned");
        }
    }
    /* Nothing was overwritten: the next run hits and copies w's bytes. */
    hg_run_stats s;
    memset(hg_hostbuf_data(out), 0, BYTES);
    ASSERT_OK(hg_hostbuf_mark_written(out, 0, BYTES));
    ASSERT_OK(hg_runner_run(r, &c, args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 1);
    ASSERT(memcmp(hg_hostbuf_data(out), hg_hostbuf_data(w), BYTES) == 0);
    fixture_close(&f);
}

TEST_EACH_BACKEND(freed_allocation_is_refused_and_zero_byte_views_go_anywhere)
{
    fixture f;
    ASSERT(fixture_open(&f, backend));
    hg_device *dev = f.dev, *other = f.other;
    hg_runner *r = f.r;
    hg_hostbuf *w = f.w;
    hg_devaddr gone, elsewhere;
    ASSERT_OK(hg_devbuf_malloc(dev, BYTES, &gone));
    ASSERT_OK(hg_devbuf_free(dev, gone));
    ASSERT_OK(hg_devbuf_malloc(other, BYTES, &elsewhere));
    hg_callable fill = {"fill", orch_pair, (void *)&K_FILL77};
    hg_arg bad[2] = {host_arg("w", HG_IN, w, 0), dev_arg("dv", HG_OUT, gone, BYTES)};
    ASSERT_EQ(hg_runner_run(r, &fill, bad, 2, NULL), HG_ERANGE);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "arg 'dv'");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "freed");
    /* Zero bytes: valid at a freed address, another device's, or any. */
    const hg_devaddr anywhere[] = {gone, elsewhere, 0x1234000ull, ~0ull - 4096};
    for (size_t i = 0; i < sizeof anywhere / sizeof anywhere[0]; i++) {
        hg_arg ok[2] = {host_arg("w", HG_IN, w, 0), dev_arg("dv", HG_OUT, anywhere[i], 0)};
        ASSERT_OK(hg_runner_run(r, &fill, ok, 2, NULL));
    }
    fixture_close(&f);
}

TEST_EACH_BACKEND(devbuf_calls_refuse_another_devices_address)
{
    fixture f;
    ASSERT(fixture_open(&f, backend));
    hg_device *a = f.other, *b = f.dev;
    hg_devaddr x, y;
    ASSERT_OK(hg_devbuf_malloc(a, BYTES, &x));
    ASSERT_OK(hg_devbuf_malloc(b, BYTES, &y)); /* the first allocation of each */
    ASSERT(x != y);
    unsigned char buf[BYTES] = {0};
    ASSERT_EQ(hg_devbuf_copy_to(b, x, buf, BYTES), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_copy_from(b, buf, x, BYTES), HG_ERANGE);
    ASSERT_EQ(hg_devbuf_free(b, x), HG_ENOTFOUND);
    ASSERT_OK(hg_devbuf_free(a, x));
    ASSERT_OK(hg_devbuf_free(b, y));
    fixture_close(&f);
}

int main(void)
{
    return RUN_TESTS();
}
