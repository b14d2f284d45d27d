/*
 * allreduce_test.c: hg_mpi_allreduce as a task, on 2 and 4 local ranks.
 *   - f32 over ranges at offsets: the ranges hold the sum over ranks, the
 *     bytes around them keep this rank's values; net_bytes is exact;
 *   - bf16 summed in f32 and rounded once (values chosen so that summing
 *     in bf16 pairwise would round differently on 4 ranks);
 *   - dependencies: a writer before the allreduce is included, a reader
 *     after it sees the sum, an independent kernel gets no edge and runs
 *     while the allreduce waits on MPI (proved without timing: a deadlock
 *     otherwise, turned into an abort by the bounded wait);
 *   - bytes: a later round of a resident arg moves the sim's floor, plus,
 *     on a queue device, each allreduce's range down and up (its staging);
 *   - refusals: strided views, dtypes, NULLs, attach errors, graphs that
 *     differ across ranks: each fails every rank cleanly, and the next run
 *     works.
 * Each test but attach's runs on every backend every rank has (sim, and
 * OpenCL where there is a platform).  Every expected value is computed by
 * each rank from the rank count.
 */
#include <limits.h>

#include "mpi_fixture.h"

enum { N = 1000 };

typedef struct ranges {
    hg_mpi *m;
    size_t lo[3], len[3];
    uint32_t n;
} ranges;

/* The run arg "x": INOUT, N f32 in a new host buffer. */
static int x_arg(hg_hostbuf **hb, hg_arg *arg, hg_residency residency)
{
    *arg = (hg_arg){"x", HG_INOUT, {0}, 0, residency};
    size_t shape[1] = {N};
    int rc = hg_hostbuf_create(N * sizeof(float), hb);
    return rc ? rc : hg_tensor_host(&arg->tensor, *hb, HG_F32, 1, shape);
}

/* One allreduce per range of arg 0. */
static int orch_ranges(hg_orch *o, void *user)
{
    const ranges *rg = user;
    const hg_arg *x;
    hg_orch_arg(o, 0, &x);
    for (uint32_t i = 0; i < rg->n; i++) {
        hg_tensor v;
        int rc = hg_tensor_slice(&x->tensor, 0, rg->lo[i], rg->len[i], &v);
        if (rc == 0)
            rc = hg_mpi_allreduce(o, rg->m, 0, &v, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static bool in_ranges(const ranges *rg, size_t i)
{
    for (uint32_t k = 0; k < rg->n; k++)
        if (i >= rg->lo[k] && i < rg->lo[k] + rg->len[k])
            return true;
    return false;
}

MPI_TEST_EACH_BACKEND(f32_ranges_at_offsets_hold_the_sum_and_net_bytes_are_exact)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    hg_hostbuf *hb;
    hg_arg arg;
    ASSERT_OK(x_arg(&hb, &arg, HG_RESIDENT));
    ranges rg = {f.m, {100, 600, 999}, {300, 17, 1}, 3};
    hg_callable c = {"ranges", orch_ranges, &rg};
    const double ranks_sum = (double)f.size * (f.size - 1) / 2; /* 0 + 1 + ... */
    for (int round = 0; round < 3; round++) {
        float *x = hg_hostbuf_data(hb);
        for (size_t i = 0; i < N; i++)
            x[i] = (float)(f.rank * 1000 + (int)i + round);
        ASSERT_OK(hg_hostbuf_mark_written(hb, 0, N * sizeof(float)));
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(f.r, &c, &arg, 1, &s));
        ASSERT_UEQ(s.net_bytes, (300u + 17u + 1u) * sizeof(float));
        ASSERT_UGT(s.net_ns, 0);
        ASSERT_EQ(s.edges, 2); /* the chain: 3 allreduces in order */
        for (size_t i = 0; i < N; i++) {
            double want = in_ranges(&rg, i) ? 1000 * ranks_sum + f.size * ((double)i + round)
                                            : f.rank * 1000 + (double)i + round;
            if (x[i] != (float)want)
                TEST_FAIL_("rank %d round %d: x[%zu] = %g, want %g", f.rank, round, i, x[i], want);
        }
    }
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

/* A replayed run (hg_runner_set_replay) executes the recorded allreduce
 * tasks without orchestrating: the sums and net_bytes stay exact, and a
 * failure in a replayed run still fails every rank. */
MPI_TEST_EACH_BACKEND(replayed_runs_allreduce_and_agree)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    hg_runner_set_replay(f.r, true);
    hg_hostbuf *hb;
    hg_arg arg;
    ASSERT_OK(x_arg(&hb, &arg, HG_STAGED));
    ranges rg = {f.m, {10, 500}, {20, 100}, 2};
    hg_callable c = {"ranges", orch_ranges, &rg};
    uint32_t replayed = 0;
    for (int round = 0; round < 4; round++) {
        float *x = hg_hostbuf_data(hb);
        for (size_t i = 0; i < N; i++)
            x[i] = (float)(f.rank + 1);
        ASSERT_OK(hg_hostbuf_mark_written(hb, 0, N * sizeof(float)));
        if (round == 2 && f.rank == f.size - 1)
            ASSERT_OK(hg_mpi_inject_fault(f.m, 1));
        hg_run_stats s;
        int rc = hg_runner_run(f.r, &c, &arg, 1, &s);
        if (round == 2) {
            ASSERT_EQ(rc, HG_EKERNEL);
            ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "injected fault");
            continue;
        }
        ASSERT_OK(rc);
        replayed += s.replayed;
        ASSERT_UEQ(s.net_bytes, 120u * sizeof(float));
        const float sum = (float)(f.size * (f.size + 1) / 2);
        ASSERT(x[10] == sum && x[599] == sum && x[9] == (float)(f.rank + 1));
    }
    ASSERT_UGT(replayed, 0);
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

MPI_TEST_EACH_BACKEND(bf16_is_summed_in_f32_and_rounded_once)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    enum { M = 64 };
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(M * sizeof(uint16_t), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {M};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_BF16, 1, shape));
    /* Rank r holds 1 + r * 2^-7 (exact in bf16) scaled by 1 + i/8: on 4
     * ranks the f32 sum 4 + 6 * 2^-7 lies halfway between two bf16 values
     * and rounds to even once, where pairwise bf16 sums would give 4.03125. */
    uint16_t *x = hg_hostbuf_data(hb);
    for (size_t i = 0; i < M; i++)
        x[i] = hg_f32_to_bf16((1.0f + (float)f.rank / 128.0f) * (float)(1 + i % 8));
    ASSERT_OK(hg_hostbuf_mark_written(hb, 0, sizeof(uint16_t) * M));
    ranges rg = {f.m, {0}, {M}, 1};
    hg_callable c = {"bf16", orch_ranges, &rg};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.r, &c, &arg, 1, &s));
    ASSERT_UEQ(s.net_bytes, M * sizeof(float)); /* f32 on the wire */
    for (size_t i = 0; i < M; i++) {
        float sum = 0;
        for (int r = 0; r < f.size; r++)
            sum += hg_bf16_to_f32(hg_f32_to_bf16((1.0f + (float)r / 128.0f) * (float)(1 + i % 8)));
        if (x[i] != hg_f32_to_bf16(sum))
            TEST_FAIL_("rank %d: x[%zu] = %g, want %g", f.rank, i, hg_bf16_to_f32(x[i]),
                       hg_bf16_to_f32(hg_f32_to_bf16(sum)));
    }
    if (f.size == 4)
        ASSERT(hg_bf16_to_f32(x[0]) == 4.0625f);
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

/* ------------------------------------------------ dependencies and overlap */

typedef struct mixed {
    hg_mpi *m;
    int rank;
} mixed;

/* Host step: a[i] = rank + 1.  On rank 1 it first waits for rank 0's
 * `signal` step (a message on MPI_COMM_WORLD), which follows rank 0's
 * independent kernel: so rank 0's allreduce cannot complete before rank 0
 * has run that kernel.  Were the kernel (or the signal) queued behind the
 * allreduce, the job would deadlock (and the bounded wait would abort it).
 * The message carries b[0] as the kernel left it. */
static int k_write(const hg_kernel_ctx *ctx)
{
    int rank = (int)ctx->scalars[0];
    float token = 0;
    if (rank == 1 && MPI_Recv(&token, 1, MPI_FLOAT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != 0)
        return 1;
    if (rank == 1 && token != (float)ctx->scalars[1])
        return 2; /* rank 0's kernel had not run before its signal */
    float *a = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        a[i] = (float)(rank + 1);
    return 0;
}

/* Host step after the independent kernel: on rank 0, sends b[0] to rank 1. */
static int k_signal(const hg_kernel_ctx *ctx)
{
    int rank = (int)ctx->scalars[0];
    float token = ((const float *)ctx->args[0].data)[0];
    return rank == 0 && MPI_Send(&token, 1, MPI_FLOAT, 1, 7, MPI_COMM_WORLD) != 0;
}

/* Kernel, independent of the allreduce: b[i] += 1. */
static int k_bump(const hg_kernel_ctx *ctx)
{
    float *b = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        b[i] += 1.0f;
    return 0;
}

/* Kernel: out[i] = 2 * a[i]. */
static int k_read(const hg_kernel_ctx *ctx)
{
    const float *a = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = 2 * a[i];
    return 0;
}

static const char mixed_cl[] = "__kernel void bump(HG_STATUS_ARGS, HG_TENSOR(float, b))\n"
                               "{\n"
                               "    HG_PTR(b)[get_global_id(0)] += 1.0f;\n"
                               "}\n"
                               "__kernel void twice(HG_STATUS_ARGS, HG_TENSOR(float, a),\n"
                               "                    HG_TENSOR(float, out))\n"
                               "{\n"
                               "    size_t i = get_global_id(0);\n"
                               "    HG_PTR(out)[i] = 2.0f * HG_PTR(a)[i];\n"
                               "}\n";

static const hg_kernel K_WRITE = {"write_a", k_write, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel K_SIGNAL = {"signal", k_signal, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel K_BUMP = {"bump_b", k_bump, HG_CORE_VECTOR, mixed_cl, "bump"};
static const hg_kernel K_READ = {"read_a", k_read, HG_CORE_VECTOR, mixed_cl, "twice"};

/* write a (host step) -> allreduce a -> read a into out (kernel); bump b
 * (kernel) -> signal (host step, reads b), independent of the allreduce. */
static int orch_mixed(hg_orch *o, void *user)
{
    const mixed *mx = user;
    const hg_arg *a, *b, *out;
    hg_orch_arg(o, 0, &a);
    hg_orch_arg(o, 1, &b);
    hg_orch_arg(o, 2, &out);
    const float *hb = hg_hostbuf_data(b->tensor.host); /* b[0] before this round */
    const uint64_t sc[2] = {(uint64_t)mx->rank, (uint64_t)(hb[0] + 1.0f)};
    hg_task_arg wa[1] = {{0, HG_OUT, a->tensor}};
    hg_task_desc w = {&K_WRITE, wa, 1, sc, 2, NULL, 0};
    int rc = hg_task_submit_host_step(o, &w, NULL);
    if (rc == 0)
        rc = hg_mpi_allreduce(o, mx->m, 0, &a->tensor, NULL);
    hg_task_arg ba[1] = {{1, HG_INOUT, b->tensor}};
    hg_task_desc bd = {&K_BUMP, ba, 1, NULL, 0, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit(o, &bd, NULL);
    hg_task_arg sa[1] = {{1, HG_IN, b->tensor}};
    hg_task_desc sd = {&K_SIGNAL, sa, 1, sc, 1, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit_host_step(o, &sd, NULL);
    hg_task_arg ra[2] = {{0, HG_IN, a->tensor}, {2, HG_OUT, out->tensor}};
    hg_task_desc rd = {&K_READ, ra, 2, NULL, 0, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit(o, &rd, NULL);
    return rc;
}

MPI_TEST_EACH_BACKEND(allreduce_orders_with_readers_and_writers_and_never_holds_independent_tasks)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    enum { M = 256 };
    hg_hostbuf *hb[3];
    hg_arg args[3] = {{"a", HG_INOUT, {0}, 0, HG_STAGED},
                      {"b", HG_INOUT, {0}, 0, HG_RESIDENT},
                      {"out", HG_OUT, {0}, 0, HG_STAGED}};
    size_t shape[1] = {M};
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(hg_hostbuf_create(M * sizeof(float), &hb[i]));
        ASSERT_OK(hg_tensor_host(&args[i].tensor, hb[i], HG_F32, 1, shape));
    }
    mixed mx = {f.m, f.rank};
    hg_callable c = {"mixed", orch_mixed, &mx};
    for (int round = 1; round <= 2; round++) {
        hg_run_stats s;
        int rc = hg_runner_run(f.r, &c, args, 3, &s);
        if (rc != 0)
            TEST_FAIL_("rank %d: %s", f.rank, hg_runner_errmsg(f.r));
        ASSERT_EQ(s.tasks, 5);
        ASSERT_EQ(s.edges, 3); /* write -> allreduce -> read; bump_b -> signal */
        ASSERT_UEQ(s.net_bytes, M * sizeof(float));
        const float *a = hg_hostbuf_data(hb[0]), *b = hg_hostbuf_data(hb[1]);
        const float *out = hg_hostbuf_data(hb[2]);
        const float sum = (float)(f.size * (f.size + 1) / 2);
        for (size_t i = 0; i < M; i++) {
            if (a[i] != sum || out[i] != 2 * sum || b[i] != (float)round)
                TEST_FAIL_("rank %d: a[%zu] %g out %g b %g; want %g, %g, %d", f.rank, i, a[i],
                           out[i], b[i], sum, 2 * sum, round);
        }
    }
    for (int i = 0; i < 3; i++)
        hg_hostbuf_destroy(hb[i]);
    mpi_fixture_close(&f);
}

/* A later round of a resident INOUT arg that the host leaves alone, in
 * `all` residency: the sim uploads nothing and copies back the ranges the
 * allreduces wrote (the floor); a queue device also stages each range down
 * and back up: floor + 2 x the ranges, one each way. */
MPI_TEST_EACH_BACKEND(later_rounds_move_the_floor_plus_each_range_down_and_up)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    hg_hostbuf *hb;
    hg_arg arg;
    ASSERT_OK(x_arg(&hb, &arg, HG_RESIDENT));
    float *x = hg_hostbuf_data(hb);
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0f;
    ASSERT_OK(hg_hostbuf_mark_written(hb, 0, N * sizeof(float)));
    ranges rg = {f.m, {0, 512}, {256, 64}, 2};
    hg_callable c = {"ranges", orch_ranges, &rg};
    const uint64_t range_bytes = (256 + 64) * sizeof(float);
    const uint64_t staged = test_backend_is_sim(backend) ? 0 : range_bytes;
    float want = 1.0f;
    for (int round = 0; round < 3; round++) {
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(f.r, &c, &arg, 1, &s));
        want *= (float)f.size;
        ASSERT(x[0] == want && x[575] == want && x[256] == 1.0f && x[N - 1] == 1.0f);
        if (round == 0)
            continue;
        printf("     rank %d round %d: h2d %llu d2h %llu net %llu bytes\n", f.rank, round,
               (unsigned long long)s.h2d_bytes, (unsigned long long)s.d2h_bytes,
               (unsigned long long)s.net_bytes);
        ASSERT_UEQ(s.h2d_bytes, 0 + staged);
        ASSERT_UEQ(s.d2h_bytes, range_bytes + staged);
        ASSERT_UEQ(s.net_bytes, range_bytes);
        ASSERT_UEQ(s.device_allocs, 0);
    }
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

/* ------------------------------------------------------------ refusals */

typedef struct refusal {
    hg_mpi *m;
    int what; /* which malformed allreduce to submit */
    int rank;
} refusal;

enum { BAD_STRIDED, BAD_DTYPE, BAD_NULL_VIEW, BAD_EXTRA_ON_RANK0, BAD_SIZE_ON_RANK0 };

static int orch_bad(hg_orch *o, void *user)
{
    const refusal *rf = user;
    const hg_arg *x;
    hg_orch_arg(o, 0, &x);
    hg_tensor v = x->tensor;
    switch (rf->what) {
    case BAD_STRIDED: /* every other element */
        v.shape[0] = N / 2;
        v.strides[0] = 2;
        return hg_mpi_allreduce(o, rf->m, 0, &v, NULL);
    case BAD_DTYPE:
        v.dtype = HG_I32;
        return hg_mpi_allreduce(o, rf->m, 0, &v, NULL);
    case BAD_NULL_VIEW:
        return hg_mpi_allreduce(o, rf->m, 0, NULL, NULL);
    case BAD_EXTRA_ON_RANK0: {
        int rc = hg_mpi_allreduce(o, rf->m, 0, &v, NULL);
        if (rc == 0 && rf->rank == 0)
            rc = hg_mpi_allreduce(o, rf->m, 0, &v, NULL);
        return rc;
    }
    default: /* BAD_SIZE_ON_RANK0 */
        if (rf->rank == 0)
            v.shape[0] = N - 1;
        return hg_mpi_allreduce(o, rf->m, 0, &v, NULL);
    }
}

MPI_TEST_EACH_BACKEND(malformed_allreduces_fail_every_rank_and_the_next_run_works)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    hg_hostbuf *hb;
    hg_arg arg;
    ASSERT_OK(x_arg(&hb, &arg, HG_STAGED));
    float *x = hg_hostbuf_data(hb);
    x[5] = 1.0f;
    const struct {
        int what, code;
        const char *says;
    } cases[] = {
        {BAD_STRIDED, HG_EINVAL, "strided"},
        {BAD_DTYPE, HG_EINVAL, "dtype i32"},
        {BAD_NULL_VIEW, HG_EINVAL, "the view is NULL"},
        {BAD_EXTRA_ON_RANK0, HG_EINVAL, "graphs differ"},
        {BAD_SIZE_ON_RANK0, HG_EINVAL, "graphs differ"},
    };
    ranges good = {f.m, {0}, {N}, 1};
    hg_callable ok = {"ok", orch_ranges, &good};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        refusal rf = {f.m, cases[k].what, f.rank};
        hg_callable c = {"bad", orch_bad, &rf};
        ASSERT_EQ(hg_runner_run(f.r, &c, &arg, 1, NULL), cases[k].code);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "failed: ");
        ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), cases[k].says);
        ASSERT(x[5] == 1.0f); /* nothing written on any rank */
        ASSERT_OK(hg_runner_run(f.r, &ok, &arg, 1, NULL));
        ASSERT(x[5] == (float)f.size);
        x[5] = 1.0f;
        ASSERT_OK(hg_hostbuf_mark_written(hb, 5 * sizeof(float), sizeof(float)));
    }
    /* The strided refusal names the lowest rank (all refused). */
    refusal rf = {f.m, BAD_STRIDED, f.rank};
    hg_callable c = {"bad", orch_bad, &rf};
    ASSERT_EQ(hg_runner_run(f.r, &c, &arg, 1, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "rank 0 of");
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

TEST(attach_refuses_null_and_a_null_communicator)
{
    hg_device *dev;
    hg_runner *r;
    ASSERT_OK(hg_device_open("sim:cores=1,mem=16M", &dev, NULL, 0));
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_mpi *m = NULL;
    char err[128];
    ASSERT_EQ(hg_mpi_attach(NULL, MPI_COMM_WORLD, &m, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "runner");
    ASSERT_EQ(hg_mpi_attach(r, MPI_COMM_NULL, &m, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "MPI_COMM_NULL");
    ASSERT_EQ(hg_mpi_attach(r, MPI_COMM_WORLD, NULL, NULL, 0), HG_EINVAL);
    ASSERT(m == NULL);
    ASSERT_EQ(hg_mpi_rank(NULL), -1);
    ASSERT_EQ(hg_mpi_set_timeout(NULL, 1.0), HG_EINVAL);
    hg_mpi_detach(NULL);
    hg_runner_close(r);
    hg_device_close(dev);
}

MPI_TEST_EACH_BACKEND(a_run_without_allreduces_agrees_and_counts_no_net_bytes)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open_on(&f, backend, "cores=2,mem=64M"));
    hg_hostbuf *hb;
    hg_arg arg;
    ASSERT_OK(x_arg(&hb, &arg, HG_STAGED));
    ranges none = {f.m, {0}, {0}, 0};
    hg_callable c = {"none", orch_ranges, &none};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.r, &c, &arg, 1, &s));
    ASSERT_UEQ(s.net_bytes, 0);
    ASSERT_UEQ(s.net_ns, 0);
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
