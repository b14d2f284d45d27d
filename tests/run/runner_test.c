/*
 * runner_test.c: one run end to end through the public API: results, exact
 * byte counts per direction, zero-byte and device-view args, host views,
 * strided copy-back, failures that leave the runner usable, traces.  Every
 * test runs once per backend (test_device.h); what only the sim has (core
 * types, per-task trace spans so far) is checked on the sim only.
 */
#include <string.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

/* ---------------------------------------------------------------- kernels */

/* out[i] = in[i] * 2 over a dense 1-D f32 view; args: in, out. */
static int k_double(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = in[i] * 2.0f;
    return 0;
}

/* acc[i] += in[i]; args: in, acc. */
static int k_accumulate(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *acc = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        acc[i] += in[i];
    return 0;
}

/* Writes 7 into every element of a 2-D strided f32 view. */
static int k_fill7(const hg_kernel_ctx *ctx)
{
    const hg_kview *v = &ctx->args[0];
    float *p = v->data;
    for (size_t r = 0; r < v->shape[0]; r++)
        for (size_t c = 0; c < v->shape[1]; c++)
            p[r * v->strides[0] + c * v->strides[1]] = 7.0f;
    return 0;
}

static int k_fail(const hg_kernel_ctx *ctx)
{
    return 42;
}

static int saw_null;
static int k_expect_null(const hg_kernel_ctx *ctx)
{
    saw_null = ctx->args[0].data == NULL;
    return 0;
}

/* The same kernels for OpenCL: one work item per element of the arg written
 * (the strided fill7 maps its row-major index through the strides). */
static const char RUNNER_CL[] =
    "__kernel void twice(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out))\n"
    "{ size_t i = get_global_id(0); HG_PTR(out)[i] = HG_PTR(in)[i] * 2.0f; }\n"
    "__kernel void accumulate(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, acc))\n"
    "{ size_t i = get_global_id(0); HG_PTR(acc)[i] += HG_PTR(in)[i]; }\n"
    "__kernel void fill7(HG_STATUS_ARGS, HG_TENSOR(float, x))\n"
    "{\n"
    "    ulong i = get_global_id(0), r = i / x_v.shape[1], c = i % x_v.shape[1];\n"
    "    HG_PTR(x)[r * x_v.strides[0] + c * x_v.strides[1]] = 7.0f;\n"
    "}\n"
    "__kernel void fail(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out))\n"
    "{ HG_FAIL(42); }\n"
    "__kernel void expect_null(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out))\n"
    "{ if (in != 0) HG_FAIL(1); }\n";

static const hg_kernel K_DOUBLE = {"double", k_double, HG_CORE_VECTOR, RUNNER_CL, "twice"};
static const hg_kernel K_ACC = {"accumulate", k_accumulate, HG_CORE_VECTOR, RUNNER_CL,
                                "accumulate"};
static const hg_kernel K_FILL7 = {"fill7", k_fill7, HG_CORE_VECTOR, RUNNER_CL, "fill7"};
static const hg_kernel K_FAIL = {"fail", k_fail, HG_CORE_VECTOR, RUNNER_CL, "fail"};
static const hg_kernel K_NULL = {"expect_null", k_expect_null, HG_CORE_VECTOR, RUNNER_CL,
                                 "expect_null"};
static const hg_kernel K_CUBE = {"cube_double", k_double, HG_CORE_CUBE, RUNNER_CL, "twice"};

/* ---------------------------------------------------------- orchestrations */

/* Submits kernel `user` over args 0 (IN) and 1 (OUT/INOUT as declared). */
static int orch_pair(hg_orch *o, void *user)
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    hg_task_arg ta[2] = {{0, HG_IN, in->tensor}, {1, out->dir, out->tensor}};
    hg_task_desc d = {user, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

/* Through scratch: tmp = 2*in (scratch), out += tmp. */
static int orch_scratch(hg_orch *o, void *user)
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    uint32_t tmp;
    hg_tensor tv;
    int rc = hg_orch_scratch(o, "tmp", HG_F32, 1, in->tensor.shape, &tmp, &tv);
    if (rc != 0)
        return rc;
    hg_task_arg a1[2] = {{0, HG_IN, in->tensor}, {tmp, HG_OUT, tv}};
    hg_task_desc d1 = {&K_DOUBLE, a1, 2, NULL, 0, NULL, 0};
    if ((rc = hg_task_submit(o, &d1, NULL)) != 0)
        return rc;
    hg_task_arg a2[2] = {{tmp, HG_IN, tv}, {1, HG_INOUT, out->tensor}};
    hg_task_desc d2 = {user ? user : &K_ACC, a2, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d2, NULL);
}

/* ----------------------------------------------------------------- helpers */

typedef struct fixture {
    hg_device *dev;
    hg_runner *runner;
    hg_hostbuf *in, *out;
    hg_arg args[2];
} fixture;

enum { N = 1000 };

/* keys: a sim spec's keys (test_device_on drops the sim-only ones). */
static int fixture_open(fixture *f, const char *backend, const char *keys, hg_dir out_dir)
{
    memset(f, 0, sizeof *f);
    size_t shape[1] = {N};
    if ((f->dev = test_device_on(backend, keys)) == NULL || hg_runner_open(f->dev, &f->runner) ||
        hg_hostbuf_create(N * sizeof(float), &f->in) ||
        hg_hostbuf_create(N * sizeof(float), &f->out))
        return -1;
    float *in = hg_hostbuf_data(f->in), *out = hg_hostbuf_data(f->out);
    for (int i = 0; i < N; i++) {
        in[i] = (float)i;
        out[i] = 1000.0f;
    }
    f->args[0] = (hg_arg){"in", HG_IN, {0}, 0, HG_STAGED};
    f->args[1] = (hg_arg){"out", out_dir, {0}, 0, HG_STAGED};
    hg_tensor_host(&f->args[0].tensor, f->in, HG_F32, 1, shape);
    hg_tensor_host(&f->args[1].tensor, f->out, HG_F32, 1, shape);
    return 0;
}

static void fixture_close(fixture *f)
{
    hg_runner_close(f->runner);
    hg_hostbuf_destroy(f->in);
    hg_hostbuf_destroy(f->out);
    hg_device_close(f->dev);
}

static uint64_t live_bytes(hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c.live_bytes;
}

/* ------------------------------------------------------------------- tests */

TEST_EACH_BACKEND(in_out_run_is_correct_and_moves_exact_bytes)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=2", HG_OUT));
    hg_callable c = {"pair", orch_pair, (void *)&K_DOUBLE};
    hg_run_stats s;
    uint64_t gen = hg_hostbuf_generation(f.out);
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    const float *out = hg_hostbuf_data(f.out);
    for (int i = 0; i < N; i++)
        ASSERT(out[i] == 2.0f * (float)i);
    ASSERT_UEQ(s.h2d_bytes, N * 4); /* IN only: pure OUT is not copied in */
    ASSERT_UEQ(s.d2h_bytes, N * 4);
    ASSERT_UEQ(s.h2d_copies, 1);
    ASSERT_UEQ(s.d2h_copies, 1);
    ASSERT_UEQ(s.tasks, 1);
    ASSERT(hg_hostbuf_generation(f.out) > gen); /* copy-back is a write */
    ASSERT_UEQ(hg_hostbuf_generation(f.in), 1);
    ASSERT_ULE(s.bind_ns + s.orch_ns + s.exec_ns + s.copyback_ns + s.release_ns, s.wall_ns);
    ASSERT_STR_EQ(hg_runner_errmsg(f.runner), "");
    fixture_close(&f);
}

TEST_EACH_BACKEND(inout_accumulates_through_scratch_each_run)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cube=1,vector=2", HG_INOUT));
    hg_callable c = {"scratch", orch_scratch, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    const float *out = hg_hostbuf_data(f.out);
    for (int i = 0; i < N; i++)
        ASSERT(out[i] == 1000.0f + 4.0f * (float)i);
    ASSERT_UEQ(s.h2d_bytes, 2 * N * 4); /* IN and INOUT */
    ASSERT_UEQ(s.d2h_bytes, N * 4);
    ASSERT_UEQ(s.edges, 1);         /* the add waits for the product */
    ASSERT_UEQ(s.device_allocs, 0); /* second run: retained buffer and pooled scratch reused */
    ASSERT_UEQ(live_bytes(f.dev), hg_runner_device_bytes(f.runner));
    fixture_close(&f);
}

TEST_EACH_BACKEND(retained_buffer_is_kept_for_smaller_runs_and_freed_on_close)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    hg_callable c = {"pair", orch_pair, (void *)&K_DOUBLE};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    size_t cap = hg_runner_retained_capacity(f.runner);
    ASSERT_UEQ(cap, 8192); /* two 4000-byte slices at 1024-byte alignment */
    f.args[0].tensor.shape[0] = 10;
    f.args[1].tensor.shape[0] = 10;
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    ASSERT_UEQ(hg_runner_retained_capacity(f.runner), cap);
    ASSERT_UEQ(s.device_allocs, 0);
    ASSERT_UEQ(s.h2d_bytes, 40);
    hg_runner_close(f.runner);
    f.runner = NULL;
    ASSERT_UEQ(live_bytes(f.dev), 0);
    fixture_close(&f);
}

TEST_EACH_BACKEND(zero_byte_arg_gets_null_and_no_allocation)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    f.args[0].tensor.shape[0] = 0;
    hg_callable c = {"pair", orch_pair, (void *)&K_NULL};
    saw_null = 0;
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    ASSERT(saw_null || !test_backend_is_sim(backend)); /* on OpenCL the kernel checks */
    ASSERT_UEQ(s.h2d_bytes, 0);
    ASSERT_UEQ(hg_runner_retained_capacity(f.runner), 4096); /* only 'out' */
    fixture_close(&f);
}

TEST_EACH_BACKEND(device_view_arg_is_passed_through_never_copied_nor_freed)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=2", HG_OUT));
    hg_devaddr d;
    ASSERT_OK(hg_devbuf_malloc(f.dev, N * 4, &d));
    ASSERT_OK(hg_devbuf_copy_to(f.dev, d, hg_hostbuf_data(f.in), N * 4));
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_device(&f.args[0].tensor, d, HG_F32, 1, shape));
    hg_callable c = {"pair", orch_pair, (void *)&K_DOUBLE};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, 0);
    ASSERT_UEQ(s.d2h_bytes, N * 4);
    const float *out = hg_hostbuf_data(f.out);
    ASSERT(out[N - 1] == 2.0f * (float)(N - 1));
    hg_runner_close(f.runner);
    f.runner = NULL;
    ASSERT_OK(hg_devbuf_free(f.dev, d)); /* the runtime did not free it */
    fixture_close(&f);
}

static int host_view_rc;
static int orch_read_device_view(hg_orch *o, void *user)
{
    const void *p = NULL;
    host_view_rc = hg_orch_host_view(o, 0, &p);
    return 0; /* ignores the error: the run must fail anyway */
}

TEST_EACH_BACKEND(host_view_of_a_device_only_arg_is_a_named_error)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    hg_devaddr d;
    ASSERT_OK(hg_devbuf_malloc(f.dev, N * 4, &d));
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_device(&f.args[0].tensor, d, HG_F32, 1, shape));
    hg_callable c = {"reader", orch_read_device_view, NULL};
    ASSERT_EQ(hg_runner_run(f.runner, &c, f.args, 2, NULL), HG_ENOHOSTVIEW);
    ASSERT_EQ(host_view_rc, HG_ENOHOSTVIEW);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.runner), "'in'");
    fixture_close(&f);
}

static int orch_read_config(hg_orch *o, void *user)
{
    const void *p;
    int rc = hg_orch_host_view(o, 0, &p);
    if (rc != 0)
        return rc;
    *(float *)user = ((const float *)p)[7];
    return 0;
}

TEST_EACH_BACKEND(orchestration_reads_the_host_view_of_a_host_arg)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    float seen = -1;
    hg_callable c = {"config", orch_read_config, &seen};
    f.args[0].tensor.offset = 3; /* the host view starts at the view's first element */
    f.args[0].tensor.shape[0] = 10;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    ASSERT(seen == 10.0f);
    fixture_close(&f);
}

static int orch_fill_columns(hg_orch *o, void *user)
{
    const hg_arg *out;
    hg_orch_arg(o, 1, &out);
    hg_task_arg ta[1] = {{1, HG_OUT, out->tensor}};
    hg_task_desc d = {&K_FILL7, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(strided_out_copies_back_only_the_elements_it_covers)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    /* A 10 x 50 view of every other column of a 10 x 100 matrix. */
    hg_tensor *t = &f.args[1].tensor;
    t->ndims = 2;
    t->shape[0] = 10;
    t->shape[1] = 50;
    t->strides[0] = 100;
    t->strides[1] = 2;
    hg_callable c = {"columns", orch_fill_columns, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, &s));
    const float *out = hg_hostbuf_data(f.out);
    for (int i = 0; i < N; i++)
        ASSERT(out[i] == (i % 2 == 0 ? 7.0f : 1000.0f));
    /* 500 runs of 4 bytes cost more than one copy of the 3996-byte extent:
     * the extent crosses the link once, and only the covered elements reach
     * the host (staging_test.c has the rest of this contract). */
    ASSERT_UEQ(s.d2h_copies, 1);
    ASSERT_UEQ(s.d2h_bytes, 999 * 4);
    fixture_close(&f);
}

TEST_EACH_BACKEND(kernel_failure_copies_nothing_back_and_runner_stays_usable)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=2", HG_INOUT));
    hg_callable bad = {"scratch", orch_scratch, (void *)&K_FAIL};
    hg_run_stats s;
    ASSERT_EQ(hg_runner_run(f.runner, &bad, f.args, 2, &s), HG_EKERNEL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.runner), "fail");
    ASSERT_UEQ(s.d2h_bytes, 0);
    ASSERT(((const float *)hg_hostbuf_data(f.out))[5] == 1000.0f);
    ASSERT_UEQ(live_bytes(f.dev), hg_runner_device_bytes(f.runner)); /* nothing leaked */
    hg_callable good = {"scratch", orch_scratch, NULL};
    ASSERT_OK(hg_runner_run(f.runner, &good, f.args, 2, &s));
    ASSERT(((const float *)hg_hostbuf_data(f.out))[5] == 1010.0f);
    fixture_close(&f);
}

static int orch_write_in(hg_orch *o, void *user)
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    hg_task_arg ta[2] = {{1, HG_OUT, out->tensor}, {0, HG_OUT, in->tensor}};
    hg_task_desc d = {&K_DOUBLE, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

static int orch_outside(hg_orch *o, void *user)
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    hg_tensor wide = in->tensor;
    wide.shape[0] += 1;
    hg_task_arg ta[2] = {{0, HG_IN, wide}, {1, HG_OUT, out->tensor}};
    hg_task_desc d = {&K_DOUBLE, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(bad_task_args_fail_the_run_with_named_errors)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "vector=1", HG_OUT));
    hg_callable w = {"write_in", orch_write_in, NULL};
    ASSERT_EQ(hg_runner_run(f.runner, &w, f.args, 2, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.runner), "writes an IN arg");
    hg_callable x = {"outside", orch_outside, NULL};
    ASSERT_EQ(hg_runner_run(f.runner, &x, f.args, 2, NULL), HG_ERANGE);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.runner), "'in'");
    hg_callable cube = {"pair", orch_pair, (void *)&K_CUBE};
    if (test_backend_is_sim(backend)) { /* sim:vector=1 has no cube core */
        ASSERT_EQ(hg_runner_run(f.runner, &cube, f.args, 2, NULL), HG_EUNSUPPORTED);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(f.runner), "cube");
    }
    ASSERT(((const float *)hg_hostbuf_data(f.out))[1] == 1000.0f);
    hg_callable ok = {"pair", orch_pair, (void *)&K_DOUBLE};
    ASSERT_OK(hg_runner_run(f.runner, &ok, f.args, 2, NULL));
    fixture_close(&f);
}

static int orch_fail_twice(hg_orch *o, void *user)
{
    hg_orch_fail(o, HG_ERANGE, "arg 'config': tile %d is too large", 99);
    hg_orch_fail(o, HG_EINVAL, "a second failure");
    return 0; /* ignores both: the run must still fail with the first */
}

TEST_EACH_BACKEND(orchestration_failure_keeps_the_first_message_and_fails_the_run)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=1", HG_OUT));
    hg_callable c = {"failing", orch_fail_twice, NULL};
    hg_run_stats s;
    ASSERT_EQ(hg_runner_run(f.runner, &c, f.args, 2, &s), HG_ERANGE);
    ASSERT_STR_EQ(hg_runner_errmsg(f.runner), "arg 'config': tile 99 is too large");
    ASSERT_UEQ(s.d2h_bytes, 0);
    hg_callable ok = {"pair", orch_pair, (void *)&K_DOUBLE};
    ASSERT_OK(hg_runner_run(f.runner, &ok, f.args, 2, NULL));
    fixture_close(&f);
}

TEST_EACH_BACKEND(trace_has_five_stage_spans_per_run_and_a_span_per_task)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, "cores=2", HG_INOUT));
    hg_trace *t;
    ASSERT_OK(hg_trace_create(&t));
    hg_runner_set_trace(f.runner, t);
    hg_callable c = {"scratch", orch_scratch, NULL};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    ASSERT_UEQ(hg_trace_num_host_spans(t), 10);
    if (test_backend_is_sim(backend)) /* OpenCL has no per-task spans yet (ARCHITECTURE) */
        ASSERT_UEQ(hg_trace_num_task_spans(t), 4);
    ASSERT_EQ(hg_trace_write_json(t, "/nonexistent-dir/trace.json"), HG_EIO);
    fixture_close(&f);
    hg_trace_destroy(t);
}

int main(void)
{
    return RUN_TESTS();
}
