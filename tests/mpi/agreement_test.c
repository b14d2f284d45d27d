/*
 * agreement_test.c: the failure agreement (hostgraph_mpi.h) on 2 and 4 ranks.
 * A failure on one rank, wherever it lands (a kernel before the
 * allreduces, the allreduce itself, a device copy at bind, a kernel after
 * the last allreduce, a cancel), fails the run on every rank with the same
 * code and a message naming the failing rank; no rank writes a host byte
 * or moves a generation; nobody hangs (a hang would hit the 60 s bound and
 * abort the job); and the next run passes on every rank.  Each test runs
 * on every backend every rank has: on OpenCL a failing kernel does not stop
 * the queue, so the allreduces still run there, and the agreement at the
 * run's end is what fails every rank.
 */
#include "mpi_fixture.h"

enum { N = 512 };

typedef struct plan {
    hg_mpi *m;
    int rank;
    int fail_pre, fail_post; /* the rank whose kernel fails there; -1: none */
    int fail_pre2;           /* a second rank failing before; -1: none */
} plan;

/* x[i] += 1; fails when scalars[0] says so. */
static int k_pre(const hg_kernel_ctx *ctx)
{
    float *x = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        x[i] += 1.0f;
    return ctx->scalars[0] ? 9 : 0;
}

/* y = x; fails when scalars[0] says so. */
static int k_post(const hg_kernel_ctx *ctx)
{
    memcpy(ctx->args[1].data, ctx->args[0].data, ctx->args[0].shape[0] * sizeof(float));
    return ctx->scalars[0] ? 9 : 0;
}

static const char plan_cl[] = "__kernel void pre(HG_STATUS_ARGS, HG_TENSOR(float, x), ulong fail)\n"
                              "{\n"
                              "    HG_PTR(x)[get_global_id(0)] += 1.0f;\n"
                              "    if (fail && get_global_id(0) == 0)\n"
                              "        HG_FAIL(9);\n"
                              "}\n"
                              "__kernel void post(HG_STATUS_ARGS, HG_TENSOR(float, x),\n"
                              "                   HG_TENSOR(float, y), ulong fail)\n"
                              "{\n"
                              "    size_t i = get_global_id(0);\n"
                              "    HG_PTR(y)[i] = HG_PTR(x)[i];\n"
                              "    if (fail && i == 0)\n"
                              "        HG_FAIL(9);\n"
                              "}\n";

static const hg_kernel K_PRE = {"pre", k_pre, HG_CORE_VECTOR, plan_cl, "pre"};
static const hg_kernel K_POST = {"post", k_post, HG_CORE_VECTOR, plan_cl, "post"};

/* pre(x) -> allreduce x[0, N/2) -> allreduce x[N/2, N) -> post(x -> y) */
static int orch_plan(hg_orch *o, void *user)
{
    const plan *p = user;
    const hg_arg *x, *y;
    hg_orch_arg(o, 0, &x);
    hg_orch_arg(o, 1, &y);
    const uint64_t pre_fails = p->rank == p->fail_pre || p->rank == p->fail_pre2;
    const uint64_t post_fails = p->rank == p->fail_post;
    hg_task_arg pa[1] = {{0, HG_INOUT, x->tensor}};
    hg_task_desc pd = {&K_PRE, pa, 1, &pre_fails, 1, NULL, 0};
    int rc = hg_task_submit(o, &pd, NULL);
    for (int half = 0; half < 2 && rc == 0; half++) {
        hg_tensor v;
        rc = hg_tensor_slice(&x->tensor, 0, (size_t)half * (N / 2), N / 2, &v);
        if (rc == 0)
            rc = hg_mpi_allreduce(o, p->m, 0, &v, NULL);
    }
    hg_task_arg qa[2] = {{0, HG_IN, x->tensor}, {1, HG_OUT, y->tensor}};
    hg_task_desc qd = {&K_POST, qa, 2, &post_fails, 1, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit(o, &qd, NULL);
    return rc;
}

typedef struct bench {
    mpi_fixture f;
    hg_hostbuf *hx, *hy;
    hg_arg args[2];
    plan p;
    hg_callable c;
} bench;

static int bench_open(bench *b, const char *backend)
{
    memset(b, 0, sizeof *b);
    int rc = mpi_fixture_open_on(&b->f, backend, "cores=2,mem=64M");
    size_t shape[1] = {N};
    if (rc == 0)
        rc = hg_hostbuf_create(N * sizeof(float), &b->hx);
    if (rc == 0)
        rc = hg_hostbuf_create(N * sizeof(float), &b->hy);
    b->args[0] = (hg_arg){"x", HG_INOUT, {0}, 0, HG_RESIDENT};
    b->args[1] = (hg_arg){"y", HG_OUT, {0}, 0, HG_STAGED};
    if (rc == 0)
        rc = hg_tensor_host(&b->args[0].tensor, b->hx, HG_F32, 1, shape);
    if (rc == 0)
        rc = hg_tensor_host(&b->args[1].tensor, b->hy, HG_F32, 1, shape);
    b->p = (plan){b->f.m, b->f.rank, -1, -1, -1};
    b->c = (hg_callable){"plan", orch_plan, &b->p};
    return rc;
}

static void bench_close(bench *b)
{
    hg_hostbuf_destroy(b->hx);
    hg_hostbuf_destroy(b->hy);
    mpi_fixture_close(&b->f);
}

/* x[i] = rank + i on the host (a write step). */
static int bench_fill(bench *b)
{
    float *x = hg_hostbuf_data(b->hx);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(b->f.rank + (int)i);
    return hg_hostbuf_mark_written(b->hx, 0, N * sizeof(float));
}

/* A run with no fault: x and y hold sum over r of (r + i + 1) on every rank. */
static int bench_pass(bench *b)
{
    b->p.fail_pre = b->p.fail_post = b->p.fail_pre2 = -1;
    if (bench_fill(b) != 0)
        return -1;
    hg_run_stats s;
    int rc = hg_runner_run(b->f.r, &b->c, b->args, 2, &s);
    if (rc != 0) {
        fprintf(stderr, "rank %d: clean run failed: %s\n", b->f.rank, hg_runner_errmsg(b->f.r));
        return rc;
    }
    const float *x = hg_hostbuf_data(b->hx), *y = hg_hostbuf_data(b->hy);
    const int n = b->f.size;
    for (size_t i = 0; i < N; i++) {
        float want = (float)(n * (n - 1) / 2 + n * ((int)i + 1));
        if (x[i] != want || y[i] != want) {
            fprintf(stderr, "rank %d: x[%zu] %g y %g want %g\n", b->f.rank, i, x[i], y[i], want);
            return -1;
        }
    }
    return s.net_bytes == N * sizeof(float) ? 0 : -1;
}

/* The faulty run: fails here with `code` naming rank `who`, host untouched. */
static int bench_fails(bench *b, int code, int who, const char *says)
{
    if (bench_fill(b) != 0)
        return -1;
    const uint64_t gx = hg_hostbuf_generation(b->hx), gy = hg_hostbuf_generation(b->hy);
    float *y = hg_hostbuf_data(b->hy);
    y[0] = -5.0f; /* y is OUT: it must stay as it was */
    int rc = hg_runner_run(b->f.r, &b->c, b->args, 2, NULL);
    const char *msg = hg_runner_errmsg(b->f.r);
    char named[64];
    snprintf(named, sizeof named, "rank %d of %d failed: ", who, b->f.size);
    const float *x = hg_hostbuf_data(b->hx);
    if (rc != code || strstr(msg, named) == NULL || strstr(msg, says) == NULL || y[0] != -5.0f ||
        x[3] != (float)(b->f.rank + 3) || hg_hostbuf_generation(b->hx) != gx ||
        hg_hostbuf_generation(b->hy) != gy) {
        fprintf(stderr,
                "rank %d: rc %d (want %d), message '%s' (want '%s...%s'), y[0] %g, x[3] %g, "
                "generations %llu %llu (were %llu %llu)\n",
                b->f.rank, rc, code, msg, named, says, y[0], x[3],
                (unsigned long long)hg_hostbuf_generation(b->hx),
                (unsigned long long)hg_hostbuf_generation(b->hy), (unsigned long long)gx,
                (unsigned long long)gy);
        return -1;
    }
    return 0;
}

MPI_TEST_EACH_BACKEND(kernel_failure_before_the_allreduces_fails_every_rank)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    ASSERT_OK(bench_pass(&b));
    b.p.fail_pre = b.f.size - 1;
    ASSERT_OK(bench_fails(&b, HG_EKERNEL, b.f.size - 1, "(kernel 'pre') failed with code 9"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

MPI_TEST_EACH_BACKEND(kernel_failure_after_the_last_allreduce_fails_every_rank_before_host_writes)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    b.p.fail_post = 1;
    ASSERT_OK(bench_fails(&b, HG_EKERNEL, 1, "(kernel 'post') failed with code 9"));
    ASSERT_OK(bench_pass(&b));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

MPI_TEST_EACH_BACKEND(an_allreduce_failing_on_one_rank_fails_every_rank)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    if (b.f.rank == 0)
        ASSERT_OK(hg_mpi_inject_fault(b.f.m, 2)); /* the second allreduce */
    ASSERT_OK(bench_fails(&b, HG_EKERNEL, 0, "allreduce #2: injected fault"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

MPI_TEST_EACH_BACKEND(a_device_fault_at_bind_fails_every_rank)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    if (b.f.rank == 1)
        ASSERT_OK(hg_device_inject_fault(b.f.dev, HG_FAULT_COPY, 1));
    ASSERT_OK(bench_fails(&b, HG_ECOPY, 1, "arg 'x'"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

/* The second copy of the run: on a queue device, the first allreduce's
 * staging (D2H) after the upload of x at bind; on the sim, a copy back. */
MPI_TEST_EACH_BACKEND(a_copy_fault_after_bind_fails_every_rank)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    ASSERT_OK(bench_pass(&b));
    if (b.f.rank == 1)
        ASSERT_OK(hg_device_inject_fault(b.f.dev, HG_FAULT_COPY, 2));
    ASSERT_OK(bench_fails(&b, HG_ECOPY, 1,
                          test_backend_is_sim(backend) ? "copy"
                                                       : "(kernel 'allreduce') staging its args"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

MPI_TEST_EACH_BACKEND(two_failing_ranks_name_the_lowest)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    b.p.fail_pre = b.f.size - 1;
    b.p.fail_pre2 = 1;
    ASSERT_OK(bench_fails(&b, HG_EKERNEL, 1, "kernel 'pre'"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

/* Ctrl-C under mpirun reaches one rank: every rank stops at that run. */
MPI_TEST_EACH_BACKEND(a_cancel_on_one_rank_stops_every_rank_at_the_same_run)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    ASSERT_OK(bench_pass(&b));
    if (b.f.rank == b.f.size - 1)
        hg_runner_cancel(b.f.r);
    ASSERT_OK(bench_fails(&b, HG_ECANCELED, b.f.size - 1, "canceled"));
    ASSERT_OK(bench_pass(&b));
    bench_close(&b);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
