/*
 * hoststep_test.c: host steps (hg_task_submit_host_step) on every backend.
 *   - between kernels: a kernel's output is the step's input, the step's
 *     output a kernel's input, and the result is the host model's; on a
 *     queue device the step's args cross the link (what it reads down,
 *     what it writes up), counted in the run's stats, on the sim nothing;
 *   - a written view with gaps keeps its gaps' bytes (they come down and
 *     go back as they were);
 *   - a failing step fails the run naming it, copies nothing back, and a
 *     host step that depends on it (through a kernel) does not run; the
 *     next run works;
 *   - a step's fn counts (hg_kernel_count) into its run's stats.
 */
#include <stdatomic.h>

#include "test_device.h"
#include "testlib.h"

enum { N = 1024 };

/* Kernel: x[i] = i. */
static int k_iota(const hg_kernel_ctx *ctx)
{
    float *x = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        x[i * ctx->args[0].strides[0]] = (float)i;
    return 0;
}

/* Kernel: z[i] = y[i] + 1. */
static int k_inc(const hg_kernel_ctx *ctx)
{
    const float *y = ctx->args[0].data;
    float *z = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        z[i] = y[i] + 1.0f;
    return 0;
}

static const char kernels_cl[] = "__kernel void iota(HG_STATUS_ARGS, HG_TENSOR(float, x))\n"
                                 "{\n"
                                 "    size_t i = get_global_id(0);\n"
                                 "    HG_PTR(x)[i * x_v.strides[0]] = (float)i;\n"
                                 "}\n"
                                 "__kernel void inc(HG_STATUS_ARGS, HG_TENSOR(float, y),\n"
                                 "                  HG_TENSOR(float, z))\n"
                                 "{\n"
                                 "    size_t i = get_global_id(0);\n"
                                 "    HG_PTR(z)[i] = HG_PTR(y)[i] + 1.0f;\n"
                                 "}\n";

/* Host step: y[i] = 2 * x[i] (x's view may be strided); fails with
 * scalars[0] when it is not 0; counts its calls into *scalars[1] and 7
 * net bytes per call. */
static int k_double(const hg_kernel_ctx *ctx)
{
    atomic_int *calls = (atomic_int *)(uintptr_t)ctx->scalars[1];
    atomic_fetch_add(calls, 1);
    hg_kernel_count(HG_KCOUNT_NET_BYTES, 7);
    if (ctx->scalars[0] != 0)
        return (int)ctx->scalars[0];
    const float *x = ctx->args[0].data;
    float *y = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[1].shape[0]; i++)
        y[i] = 2.0f * x[i * ctx->args[0].strides[0]];
    return 0;
}

static const hg_kernel K_IOTA = {"iota", k_iota, HG_CORE_VECTOR, kernels_cl, "iota"};
static const hg_kernel K_INC = {"inc", k_inc, HG_CORE_VECTOR, kernels_cl, "inc"};
static const hg_kernel K_DOUBLE = {"double", k_double, HG_CORE_VECTOR, NULL, NULL};

typedef struct plan {
    uint64_t fail;    /* the first step's return */
    atomic_int calls; /* host step calls */
    bool strided;     /* iota and double over every other element of x */
} plan;

/* iota(x) -> double(x -> y) [host] -> inc(y -> z) -> double(z -> w) [host] */
static int orch(hg_orch *o, void *user)
{
    plan *p = user;
    const hg_arg *a[4];
    for (uint32_t i = 0; i < 4; i++)
        hg_orch_arg(o, i, &a[i]);
    hg_tensor xv = a[0]->tensor;
    if (p->strided) {
        xv.shape[0] = N / 2;
        xv.strides[0] = 2;
    }
    hg_tensor yv = a[1]->tensor, zv = a[2]->tensor, wv = a[3]->tensor;
    yv.shape[0] = zv.shape[0] = wv.shape[0] = xv.shape[0];
    const uint64_t s1[2] = {p->fail, (uint64_t)(uintptr_t)&p->calls};
    const uint64_t s2[2] = {0, (uint64_t)(uintptr_t)&p->calls};
    hg_task_arg t0[1] = {{0, HG_OUT, xv}};
    hg_task_arg t1[2] = {{0, HG_IN, xv}, {1, HG_OUT, yv}};
    hg_task_arg t2[2] = {{1, HG_IN, yv}, {2, HG_OUT, zv}};
    hg_task_arg t3[2] = {{2, HG_IN, zv}, {3, HG_OUT, wv}};
    const hg_task_desc d0 = {&K_IOTA, t0, 1, NULL, 0, NULL, 0};
    const hg_task_desc d1 = {&K_DOUBLE, t1, 2, s1, 2, NULL, 0};
    const hg_task_desc d2 = {&K_INC, t2, 2, NULL, 0, NULL, 0};
    const hg_task_desc d3 = {&K_DOUBLE, t3, 2, s2, 2, NULL, 0};
    int rc = hg_task_submit(o, &d0, NULL);
    if (rc == 0)
        rc = hg_task_submit_host_step(o, &d1, NULL);
    if (rc == 0)
        rc = hg_task_submit(o, &d2, NULL);
    if (rc == 0)
        rc = hg_task_submit_host_step(o, &d3, NULL);
    return rc;
}

typedef struct bufs {
    hg_hostbuf *hb[4];
    hg_arg args[4];
} bufs;

static void bufs_open(bufs *b)
{
    static const char *const names[4] = {"x", "y", "z", "w"};
    size_t shape[1] = {N};
    for (int i = 0; i < 4; i++) {
        hg_hostbuf_create(N * sizeof(float), &b->hb[i]);
        b->args[i] = (hg_arg){names[i], i == 0 ? HG_INOUT : HG_OUT, {0}, 0, HG_STAGED};
        hg_tensor_host(&b->args[i].tensor, b->hb[i], HG_F32, 1, shape);
        float *v = hg_hostbuf_data(b->hb[i]);
        for (size_t k = 0; k < N; k++)
            v[k] = -1.0f;
    }
}

static void bufs_close(bufs *b)
{
    for (int i = 0; i < 4; i++)
        hg_hostbuf_destroy(b->hb[i]);
}

TEST_EACH_BACKEND(host_steps_run_between_kernels_and_count_their_staging)
{
    hg_device *dev = test_device_on(backend, "cores=2,mem=64M");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    for (int strided = 0; strided < 2; strided++) {
        bufs b;
        bufs_open(&b);
        plan p = {.strided = strided};
        atomic_init(&p.calls, 0);
        hg_callable c = {"steps", orch, &p};
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(r, &c, b.args, 4, &s));
        const size_t n = strided ? N / 2 : N;
        const float *x = hg_hostbuf_data(b.hb[0]), *w = hg_hostbuf_data(b.hb[3]);
        for (size_t i = 0; i < n; i++)
            if (w[i] != 2.0f * (2.0f * (float)i + 1.0f) || x[strided ? 2 * i : i] != (float)i)
                TEST_FAIL_("%s: w[%zu] = %g, x = %g", backend, i, w[i], x[strided ? 2 * i : i]);
        if (strided) /* the gaps: never written, on the device or the host */
            ASSERT(x[1] == -1.0f && x[N - 1] == -1.0f);
        ASSERT_EQ(atomic_load(&p.calls), 2);
        ASSERT_UEQ(s.net_bytes, 14);
        ASSERT_EQ(s.tasks, 4);
        ASSERT_EQ(s.edges, 3);
        /* The sim's bytes: x up (INOUT), the written views back.  A queue
         * device also moves each step's args: x's extent and z down, y and
         * w up (x's extent is whole whether its view has gaps or not). */
        const uint64_t fb = sizeof(float), xb = (strided ? N - 1 : N) * fb;
        const uint64_t staged = test_backend_is_sim(backend) ? 0 : 1;
        ASSERT_UEQ(s.h2d_bytes, N * fb + staged * 2 * n * fb);
        ASSERT_UEQ(s.d2h_bytes, xb + 3 * n * fb + staged * (xb + n * fb));
        bufs_close(&b);
    }
    hg_runner_close(r);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(a_failing_host_step_fails_the_run_and_its_dependents_do_not_run)
{
    hg_device *dev = test_device_on(backend, "cores=2,mem=64M");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    bufs b;
    bufs_open(&b);
    plan p = {.fail = 5};
    atomic_init(&p.calls, 0);
    hg_callable c = {"steps", orch, &p};
    const uint64_t gen = hg_hostbuf_generation(b.hb[3]);
    ASSERT_EQ(hg_runner_run(r, &c, b.args, 4, NULL), HG_EKERNEL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "task 1 (kernel 'double') failed with code 5");
    ASSERT_EQ(atomic_load(&p.calls), 1); /* the second step depends on the first */
    ASSERT(((const float *)hg_hostbuf_data(b.hb[3]))[0] == -1.0f);
    ASSERT_UEQ(hg_hostbuf_generation(b.hb[3]), gen);
    p.fail = 0;
    ASSERT_OK(hg_runner_run(r, &c, b.args, 4, NULL));
    ASSERT(((const float *)hg_hostbuf_data(b.hb[3]))[3] == 14.0f);
    bufs_close(&b);
    hg_runner_close(r);
    hg_device_close(dev);
}

static int orch_no_fn(hg_orch *o, void *user)
{
    (void)user;
    static const hg_kernel no_fn = {"no_fn", NULL, HG_CORE_VECTOR, kernels_cl, "iota"};
    const hg_arg *x;
    hg_orch_arg(o, 0, &x);
    hg_task_arg ta[1] = {{0, HG_OUT, x->tensor}};
    const hg_task_desc d = {&no_fn, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit_host_step(o, &d, NULL);
}

TEST_EACH_BACKEND(a_host_step_needs_a_host_function)
{
    hg_device *dev = test_device_on(backend, "cores=1,mem=16M");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    bufs b;
    bufs_open(&b);
    hg_callable c = {"no_fn", orch_no_fn, NULL};
    ASSERT_EQ(hg_runner_run(r, &c, b.args, 4, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "host step 'no_fn' has no host function");
    ASSERT_EQ(hg_task_submit_host_step(NULL, NULL, NULL), HG_EINVAL);
    bufs_close(&b);
    hg_runner_close(r);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
