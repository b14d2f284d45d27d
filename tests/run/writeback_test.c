/*
 * writeback_test.c: the edges of copy-back and publish that an independent
 * review found, each a reproducer that failed before its fix:
 *   - one write step per host buffer per run, whatever number of args and
 *     tasks wrote it (hg_hostbuf_last_write covers every range);
 *   - an INOUT whose buffer was written through the API during its run is
 *     not published as current;
 *   - a written view the commit cannot plan fails the run before the fetch,
 *     host bytes and generation untouched (it used to be lost with rc 0);
 *   - a host allocation failure anywhere in copy-back's planning fails the
 *     run cleanly; the commit allocates nothing;
 *   - a region written W times is committed once (counted);
 *   - uploads use the one cost rule: fewer, larger copies when cheaper;
 *   - verify mode fails a run on a write that bypassed the API even when
 *     the same buffer also had declared writes (next to it, or in the same
 *     block), for IN and INOUT, with outputs and generations untouched.
 * Every test runs once per backend (test_device.h) unless its name says
 * sim_only.
 */
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "run/run.h"
#include "test_device.h"
#include "testlib.h"

/* Each byte of args[0] (written) = args[0][i] + scalar 0, over its view's
 * dense bytes.  The kernel knows its view is dense or a broadcast of
 * `scalars[1]` bytes. */
static int k_add(const hg_kernel_ctx *ctx)
{
    unsigned char *p = ctx->args[0].data;
    size_t n = ctx->nscalars > 1 ? (size_t)ctx->scalars[1] : 1;
    if (ctx->nscalars < 2)
        for (uint32_t d = 0; d < ctx->args[0].ndims; d++)
            n *= ctx->args[0].shape[d];
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(p[i] + ctx->scalars[0]);
    return 0;
}
/* On OpenCL (one work item per byte of the dense view; no broadcast). */
static const hg_kernel K_ADD = {
    "add", k_add, HG_CORE_VECTOR,
    "__kernel void add(HG_STATUS_ARGS, HG_TENSOR(uchar, x), ulong s)\n"
    "{ size_t i = get_global_id(0); HG_PTR(x)[i] = (uchar)(HG_PTR(x)[i] + s); }",
    "add"};

enum { BYTES = 4096 };

typedef struct rig {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *hb;
    unsigned char *host;
} rig;

static int rig_open(rig *g, const char *backend)
{
    memset(g, 0, sizeof *g);
    g->dev = test_device_on(backend, "cores=2");
    if (g->dev == NULL || hg_runner_open(g->dev, &g->r) || hg_hostbuf_create(BYTES, &g->hb))
        return -1;
    g->host = hg_hostbuf_data(g->hb);
    for (size_t i = 0; i < BYTES; i++)
        g->host[i] = (unsigned char)i;
    return hg_hostbuf_mark_written(g->hb, 0, BYTES);
}

static void rig_close(rig *g)
{
    hg_runner_close(g->r);
    hg_hostbuf_destroy(g->hb);
    hg_device_close(g->dev);
}

static int view(hg_hostbuf *hb, size_t offset, size_t n, hg_tensor *t)
{
    size_t all = hg_hostbuf_size(hb);
    int rc = hg_tensor_host(t, hb, HG_U8, 1, &all);
    return rc ? rc : hg_tensor_slice(t, 0, offset, n, t);
}

/* One task adding 1 to the whole of each written arg, `times` times each. */
static int orch_each_arg(hg_orch *o, void *user)
{
    int times = user ? *(const int *)user : 1;
    for (uint32_t a = 0; a < hg_orch_num_args(o); a++) {
        const hg_arg *arg;
        hg_orch_arg(o, a, &arg);
        if (arg->dir == HG_SCALAR || arg->dir == HG_IN)
            continue;
        for (int t = 0; t < times; t++) {
            hg_task_arg ta = {a, HG_INOUT, arg->tensor};
            uint64_t one = 1;
            hg_task_desc d = {&K_ADD, &ta, 1, &one, 1, NULL, 0};
            int rc = hg_task_submit(o, &d, NULL);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

TEST_EACH_BACKEND(a_run_takes_one_write_step_per_buffer)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend));
    hg_arg args[2] = {{"lo", HG_INOUT, {0}, 0, HG_STAGED}, {"hi", HG_OUT, {0}, 0, HG_STAGED}};
    ASSERT_OK(view(g.hb, 100, 50, &args[0].tensor));
    ASSERT_OK(view(g.hb, 3000, 10, &args[1].tensor));
    const hg_callable c = {"each", orch_each_arg, NULL};
    uint64_t gen = hg_hostbuf_generation(g.hb);
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, NULL));
    ASSERT_UEQ(hg_hostbuf_generation(g.hb), gen + 1);
    size_t lo, hi;
    hg_hostbuf_last_write(g.hb, &lo, &hi);
    ASSERT_UEQ(lo, 100);
    ASSERT_UEQ(hi, 3010);
    ASSERT_EQ(g.host[100], (unsigned char)101);
    ASSERT_EQ(g.host[3000], (unsigned char)(0xA5 + 1));
    rig_close(&g);
}

/* The orchestration writes the INOUT's buffer through the API (outside what
 * the tasks write) while its run is in flight. */
static int orch_write_during_run(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *arg;
    hg_orch_arg(o, 0, &arg);
    unsigned char v = 200;
    int rc = hg_hostbuf_write(arg->tensor.host, 4000, &v, 1);
    if (rc != 0)
        return rc;
    hg_tensor first;
    rc = view(arg->tensor.host, 0, 64, &first);
    hg_task_arg ta = {0, HG_INOUT, first};
    uint64_t one = 1;
    hg_task_desc d = {&K_ADD, &ta, 1, &one, 1, NULL, 0};
    return rc ? rc : hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(an_inout_written_through_the_api_during_its_run_is_not_current)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend));
    hg_arg args[1] = {{"acc", HG_INOUT, {0}, 0, HG_RESIDENT}};
    ASSERT_OK(view(g.hb, 0, BYTES, &args[0].tensor));
    const hg_callable during = {"during", orch_write_during_run, NULL};
    ASSERT_OK(hg_runner_run(g.r, &during, args, 1, NULL));
    ASSERT_EQ(g.host[4000], 200);
    /* Nothing changes on the host now: a run that adds 1 to every byte must
     * see the 200 the host has, not the device's old byte. */
    const hg_callable each = {"each", orch_each_arg, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &each, args, 1, &s));
    ASSERT_EQ(g.host[4000], 201);
    ASSERT_UEQ(s.resident_hits, 0);
    ASSERT_EQ(g.host[0], 2); /* 0 + 1 (first run) + 1 */
    rig_close(&g);
}

/* A task writes a view of three overlapping dims of 2^20 (2^41 elements
 * over 2 MiB): copy-back cannot list its runs.  Before the fix the run
 * returned 0 with the host bytes not written.  Sim only: the kernel runs
 * before copy-back plans, and on OpenCL it would be 2^41 work items (one
 * per element of the written view). */
static int orch_overlapping(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *arg;
    hg_orch_arg(o, 0, &arg);
    hg_tensor v = arg->tensor;
    v.ndims = 3;
    v.shape[0] = v.shape[1] = 1u << 20;
    v.shape[2] = 2;
    v.strides[0] = v.strides[1] = v.strides[2] = 1;
    hg_task_arg ta = {0, HG_OUT, v};
    uint64_t sc[2] = {1, 1}; /* the kernel writes one byte */
    hg_task_desc d = {&K_ADD, &ta, 1, sc, 2, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST(sim_only_a_written_view_copy_back_cannot_plan_fails_the_run_cleanly)
{
    const char *backend = "sim";
    hg_device *dev = test_device_on(backend, "cores=2");
    hg_runner *r;
    hg_hostbuf *hb;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_hostbuf_create((2u << 20) + 1, &hb));
    hg_arg args[1] = {{"out", HG_OUT, {0}, 0, HG_STAGED}};
    ASSERT_OK(view(hb, 0, (2u << 20) + 1, &args[0].tensor));
    const hg_callable c = {"overlap", orch_overlapping, NULL};
    uint64_t gen = hg_hostbuf_generation(hb);
    int rc = hg_runner_run(r, &c, args, 1, NULL);
    ASSERT_EQ(rc, HG_ELIMIT);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "arg 'out'");
    ASSERT_UEQ(hg_hostbuf_generation(hb), gen);
    ASSERT_EQ(((unsigned char *)hg_hostbuf_data(hb))[0], 0);
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* Interleaved written views (the even and odd bytes of one arg, each by two
 * tasks, plus a column of a 2-D view): copy-back plans their runs.  A host
 * allocation failing at each point of the planning in turn fails the run
 * with HG_ENOMEM and changes nothing; without a fault every byte is right,
 * and each written byte is committed once. */
static int k_strided_add(const hg_kernel_ctx *ctx)
{
    const hg_kview *v = &ctx->args[0];
    unsigned char *p = v->data;
    for (size_t i = 0; i < v->shape[0]; i++)
        p[i * v->strides[0]] = (unsigned char)(p[i * v->strides[0]] + 1);
    return 0;
}
static const hg_kernel K_STRIDED = {
    "strided", k_strided_add, HG_CORE_VECTOR,
    "__kernel void strided(HG_STATUS_ARGS, HG_TENSOR(uchar, x))\n"
    "{ __global uchar *p = HG_PTR(x) + get_global_id(0) * x_v.strides[0]; *p = (uchar)(*p + 1); }",
    "strided"};

static int orch_interleaved(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *arg;
    hg_orch_arg(o, 0, &arg);
    for (int t = 0; t < 4; t++) {
        hg_tensor v = arg->tensor;
        v.ndims = 1;
        v.offset = (size_t)(t % 2);
        v.shape[0] = BYTES / 2;
        v.strides[0] = 2;
        hg_task_arg ta = {0, HG_INOUT, v};
        hg_task_desc d = {&K_STRIDED, &ta, 1, NULL, 0, NULL, 0};
        int rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

TEST_EACH_BACKEND(copy_back_planning_fails_cleanly_at_every_host_allocation)
{
    const hg_callable c = {"interleaved", orch_interleaved, NULL};
    bool succeeded = false;
    for (uint64_t k = 1; !succeeded && k < 64; k++) {
        rig g;
        ASSERT_OK(rig_open(&g, backend));
        hg_arg args[1] = {{"x", HG_INOUT, {0}, 0, HG_STAGED}};
        ASSERT_OK(view(g.hb, 0, BYTES, &args[0].tensor));
        uint64_t gen = hg_hostbuf_generation(g.hb);
        g.r->plan.host_fault = k;
        int rc = hg_runner_run(g.r, &c, args, 1, NULL);
        if (rc == 0) {
            succeeded = true;
            for (size_t i = 0; i < BYTES; i++)
                ASSERT_EQ(g.host[i], (unsigned char)(i + 2));
            ASSERT_UEQ(hg_hostbuf_generation(g.hb), gen + 1);
            ASSERT_UEQ(g.r->plan.rstats.committed_bytes, BYTES);
        } else {
            ASSERT_EQ(rc, HG_ENOMEM);
            for (size_t i = 0; i < BYTES; i++)
                ASSERT_EQ(g.host[i], (unsigned char)i);
            ASSERT_UEQ(hg_hostbuf_generation(g.hb), gen);
            /* and the runner is usable */
            g.r->plan.host_fault = 0;
            ASSERT_OK(hg_runner_run(g.r, &c, args, 1, NULL));
            ASSERT_EQ(g.host[7], 9);
        }
        rig_close(&g);
    }
    ASSERT(succeeded);
}

TEST_EACH_BACKEND(a_region_written_w_times_is_committed_once)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend));
    hg_arg args[1] = {{"c", HG_INOUT, {0}, 0, HG_STAGED}};
    ASSERT_OK(view(g.hb, 0, BYTES, &args[0].tensor));
    int times = 8;
    const hg_callable c = {"w_times", orch_each_arg, &times};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &c, args, 1, &s));
    ASSERT_UEQ(g.r->plan.rstats.committed_bytes, BYTES);
    ASSERT_UEQ(s.d2h_bytes, BYTES);
    ASSERT_EQ(g.host[5], 5 + 8);
    rig_close(&g);
}

/* Scattered small writes to a resident IN: the upload takes fewer, larger
 * copies when a copy costs more than the gap (STAGE_COPY_COST_BYTES), never
 * more copies than ranges written, never more than the extent. */
static int orch_read_in(hg_orch *o, void *user)
{
    (void)o;
    (void)user;
    return 0;
}

TEST_EACH_BACKEND(scattered_writes_upload_as_fewer_larger_copies)
{
    enum { BIG = 1 << 20 };
    hg_device *dev = test_device_on(backend, "cores=2");
    hg_runner *r;
    hg_hostbuf *hb;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_hostbuf_create(BIG, &hb));
    hg_arg args[1] = {{"w", HG_IN, {0}, 0, HG_RESIDENT}};
    ASSERT_OK(view(hb, 0, BIG, &args[0].tensor));
    const hg_callable c = {"none", orch_read_in, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
    /* 256 writes of 4 bytes, 1 KiB apart: one copy of the span is cheaper */
    unsigned char v[4] = {1, 2, 3, 4};
    for (int k = 0; k < 256; k++)
        ASSERT_OK(hg_hostbuf_write(hb, (size_t)k * 1024, v, 4));
    ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
    ASSERT_UEQ(s.h2d_copies, 1);
    ASSERT_UEQ(s.h2d_bytes, 255 * 1024 + 4);
    /* two writes far apart (more than a copy's cost): two copies, exact */
    ASSERT_OK(hg_hostbuf_write(hb, 0, v, 4));
    ASSERT_OK(hg_hostbuf_write(hb, BIG - 4, v, 4));
    ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
    ASSERT_UEQ(s.h2d_copies, 2);
    ASSERT_UEQ(s.h2d_bytes, 8);
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* Two resident args over the same bytes in one run: one copy, one upload. */
TEST_EACH_BACKEND(two_resident_args_over_the_same_bytes_upload_once)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend));
    hg_arg args[2] = {{"a", HG_IN, {0}, 0, HG_RESIDENT}, {"b", HG_IN, {0}, 0, HG_RESIDENT}};
    ASSERT_OK(view(g.hb, 0, BYTES, &args[0].tensor));
    args[1].tensor = args[0].tensor;
    const hg_callable c = {"none", orch_read_in, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, BYTES);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1);
    ASSERT_OK(hg_hostbuf_write(g.hb, 8, "x", 1));
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, 1);
    rig_close(&g);
}

/* Verify mode: `res` is a resident arg over g.hb (IN or INOUT), `out` an
 * OUT over another buffer.  After two clean runs, an undeclared write at
 * `sneak` plus a declared write at `declared` must fail the run. */
static void expect_stale(const char *backend, hg_dir dir, size_t sneak, size_t declared)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend));
    hg_hostbuf *ob;
    ASSERT_OK(hg_hostbuf_create(64, &ob));
    hg_arg args[2] = {{"res", dir, {0}, 0, HG_RESIDENT}, {"out", HG_OUT, {0}, 0, HG_STAGED}};
    ASSERT_OK(view(g.hb, 0, BYTES, &args[0].tensor));
    ASSERT_OK(view(ob, 0, 64, &args[1].tensor));
    hg_runner_set_verify(g.r, true);
    const hg_callable c = {"each", orch_each_arg, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, &s));
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, &s));
    g.host[sneak] ^= 0x5A; /* behind the API's back */
    unsigned char v = 77;
    ASSERT_OK(hg_hostbuf_write(g.hb, declared, &v, 1));
    unsigned char host_before[BYTES], out_before[64];
    memcpy(host_before, g.host, BYTES);
    memcpy(out_before, hg_hostbuf_data(ob), 64);
    uint64_t gen = hg_hostbuf_generation(g.hb), ogen = hg_hostbuf_generation(ob);
    ASSERT_EQ(hg_runner_run(g.r, &c, args, 2, &s), HG_ESTALE);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), "arg 'res'");
    char id[64];
    snprintf(id, sizeof id, "host buffer %llu changed at byte %zu",
             (unsigned long long)hg_hostbuf_id(g.hb), sneak);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), id);
    ASSERT(memcmp(host_before, g.host, BYTES) == 0);
    ASSERT(memcmp(out_before, hg_hostbuf_data(ob), 64) == 0);
    ASSERT_UEQ(hg_hostbuf_generation(g.hb), gen);
    ASSERT_UEQ(hg_hostbuf_generation(ob), ogen);
    /* Every later run fails too until the write is declared; then it runs
     * on the host's bytes. */
    ASSERT_EQ(hg_runner_run(g.r, &c, args, 2, &s), HG_ESTALE);
    ASSERT_OK(hg_hostbuf_mark_written(g.hb, sneak, 1));
    ASSERT_OK(hg_runner_run(g.r, &c, args, 2, &s));
    if (dir == HG_INOUT) {
        ASSERT_EQ(g.host[sneak], (unsigned char)(host_before[sneak] + 1));
        ASSERT_EQ(g.host[declared], 78);
    }
    hg_hostbuf_destroy(ob);
    rig_close(&g);
}

TEST_EACH_BACKEND(verify_catches_an_undeclared_write_beside_a_declared_one)
{
    expect_stale(backend, HG_IN, 10, 3000);
    expect_stale(backend, HG_INOUT, 10, 3000);
}

TEST_EACH_BACKEND(verify_catches_an_undeclared_write_in_the_block_of_a_declared_one)
{
    expect_stale(backend, HG_IN, 3001, 3000);
    expect_stale(backend, HG_INOUT, 2999, 3000);
}

/* An extent of several verify blocks: an undeclared write in a block no
 * declared write touches (judged by its hash), with and without declared
 * writes elsewhere, names its byte. */
TEST_EACH_BACKEND(verify_catches_an_undeclared_write_blocks_away_from_a_declared_one)
{
    enum { BIG = 256 << 10 };
    for (int declare = 0; declare < 2; declare++) {
        hg_device *dev = test_device_on(backend, "cores=2");
        hg_runner *r;
        hg_hostbuf *hb;
        ASSERT(dev != NULL);
        ASSERT_OK(hg_runner_open(dev, &r));
        ASSERT_OK(hg_hostbuf_create(BIG, &hb));
        hg_runner_set_verify(r, true);
        hg_arg args[1] = {{"w", HG_IN, {0}, 0, HG_RESIDENT}};
        ASSERT_OK(view(hb, 0, BIG, &args[0].tensor));
        const hg_callable c = {"none", orch_read_in, NULL};
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
        ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
        ASSERT_UEQ(s.resident_hits, 1);
        ((unsigned char *)hg_hostbuf_data(hb))[200000] = 9; /* behind the API's back */
        if (declare)
            ASSERT_OK(hg_hostbuf_write(hb, 10, "x", 1));
        ASSERT_EQ(hg_runner_run(r, &c, args, 1, &s), HG_ESTALE);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "changed at byte 200000");
        ASSERT_OK(hg_hostbuf_mark_written(hb, 200000, 1));
        ASSERT_OK(hg_runner_run(r, &c, args, 1, &s));
        ASSERT_OK(hg_runner_run(r, &c, args, 1, &s)); /* and clean again */
        ASSERT_UEQ(s.resident_hits, 1);
        hg_runner_close(r);
        hg_hostbuf_destroy(hb);
        hg_device_close(dev);
    }
}

TEST(a_run_without_a_runner_still_fills_its_stats)
{
    hg_run_stats s;
    memset(&s, 0xFF, sizeof s);
    const hg_callable c = {"none", orch_read_in, NULL};
    ASSERT_EQ(hg_runner_run(NULL, &c, NULL, 0, &s), HG_EINVAL);
    ASSERT_UEQ(s.wall_ns, 0);
    ASSERT_UEQ(s.h2d_bytes, 0);
    ASSERT_UEQ(s.tasks, 0);
}

int main(void)
{
    return RUN_TESTS();
}
