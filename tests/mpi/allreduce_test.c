/*
 * allreduce_test.c: hg_mpi_allreduce as a task, on 2 and 4 local ranks.
 *   - f32 over ranges at offsets: the ranges hold the sum over ranks, the
 *     bytes around them keep this rank's values; net_bytes is exact;
 *   - bf16 summed in f32 and rounded once (values chosen so that summing
 *     in bf16 pairwise would round differently on 4 ranks);
 *   - dependencies: a writer before the allreduce is included, a reader
 *     after it sees the sum, an independent task gets no edge and runs
 *     while the allreduce waits on MPI (proved without timing: a deadlock
 *     otherwise, turned into an abort by the bounded wait);
 *   - refusals: strided views, dtypes, NULLs, attach errors, a queue
 *     device, graphs that differ across ranks: each fails every rank
 *     cleanly, and the next run works.
 * Every expected value is computed by each rank from the rank count.
 */
#include <limits.h>

#include "mpi_fixture.h"

enum { N = 1000 };

typedef struct ranges {
    hg_mpi *m;
    size_t lo[3], len[3];
    uint32_t n;
} ranges;

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

TEST(f32_ranges_at_offsets_hold_the_sum_and_net_bytes_are_exact)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(N * sizeof(float), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_RESIDENT};
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape));
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
TEST(replayed_runs_allreduce_and_agree)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
    hg_runner_set_replay(f.r, true);
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(N * sizeof(float), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape));
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

TEST(bf16_is_summed_in_f32_and_rounded_once)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
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

/* a[i] = rank + 1.  On rank 1 it first waits for rank 0's independent task
 * (a message on MPI_COMM_WORLD), so rank 0's allreduce cannot complete
 * before rank 0 has run that task: were it queued behind the allreduce,
 * the job would deadlock (and the bounded wait would abort it). */
static int k_write(const hg_kernel_ctx *ctx)
{
    int rank = (int)ctx->scalars[0], token = 0;
    if (rank == 1 && MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != 0)
        return 1;
    float *a = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        a[i] = (float)(rank + 1);
    return 0;
}

/* b[i] += 1; on rank 0 it then lets rank 1's writer go. */
static int k_independent(const hg_kernel_ctx *ctx)
{
    int rank = (int)ctx->scalars[0], token = 1;
    float *b = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        b[i] += 1.0f;
    return rank == 0 && MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD) != 0;
}

/* out[i] = 2 * a[i]. */
static int k_read(const hg_kernel_ctx *ctx)
{
    const float *a = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = 2 * a[i];
    return 0;
}

static const hg_kernel K_WRITE = {"write_a", k_write, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel K_INDEP = {"bump_b", k_independent, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel K_READ = {"read_a", k_read, HG_CORE_VECTOR, NULL, NULL};

/* write a -> allreduce a -> read a into out; bump b, independent. */
static int orch_mixed(hg_orch *o, void *user)
{
    const mixed *mx = user;
    const hg_arg *a, *b, *out;
    hg_orch_arg(o, 0, &a);
    hg_orch_arg(o, 1, &b);
    hg_orch_arg(o, 2, &out);
    const uint64_t rank = (uint64_t)mx->rank;
    hg_task_arg wa[1] = {{0, HG_OUT, a->tensor}};
    hg_task_desc w = {&K_WRITE, wa, 1, &rank, 1, NULL, 0};
    int rc = hg_task_submit(o, &w, NULL);
    if (rc == 0)
        rc = hg_mpi_allreduce(o, mx->m, 0, &a->tensor, NULL);
    hg_task_arg ba[1] = {{1, HG_INOUT, b->tensor}};
    hg_task_desc bd = {&K_INDEP, ba, 1, &rank, 1, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit(o, &bd, NULL);
    hg_task_arg ra[2] = {{0, HG_IN, a->tensor}, {2, HG_OUT, out->tensor}};
    hg_task_desc rd = {&K_READ, ra, 2, NULL, 0, NULL, 0};
    if (rc == 0)
        rc = hg_task_submit(o, &rd, NULL);
    return rc;
}

TEST(allreduce_orders_with_readers_and_writers_and_never_holds_independent_tasks)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
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
        ASSERT_OK(hg_runner_run(f.r, &c, args, 3, &s));
        ASSERT_EQ(s.tasks, 4);
        ASSERT_EQ(s.edges, 2); /* write -> allreduce -> read; bump_b has none */
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

TEST(malformed_allreduces_fail_every_rank_and_the_next_run_works)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(N * sizeof(float), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape));
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

TEST(a_run_without_allreduces_agrees_and_counts_no_net_bytes)
{
    mpi_fixture f;
    ASSERT_OK(mpi_fixture_open(&f, "sim:cores=2,mem=64M"));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(N * sizeof(float), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape));
    ranges none = {f.m, {0}, {0}, 0};
    hg_callable c = {"none", orch_ranges, &none};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.r, &c, &arg, 1, &s));
    ASSERT_UEQ(s.net_bytes, 0);
    ASSERT_UEQ(s.net_ns, 0);
    hg_hostbuf_destroy(hb);
    mpi_fixture_close(&f);
}

/* A queue device (OpenCL) cannot stage an allreduce yet: every rank is
 * refused, naming its device.  Skipped (said so) without an OpenCL device
 * on every rank. */
TEST(queue_device_is_refused_naming_the_device)
{
    hg_device *dev = NULL;
    int have = hg_device_open("opencl", &dev, NULL, 0) == 0, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        hg_device_close(dev);
        const char *required = getenv("HG_REQUIRE_OPENCL");
        if (required != NULL && *required != '\0' && strcmp(required, "0") != 0)
            TEST_FAIL_("HG_REQUIRE_OPENCL is set, and a rank has no OpenCL device");
        printf("     skipped: no OpenCL device on every rank\n");
        return;
    }
    hg_runner *r;
    hg_mpi *m;
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_mpi_attach(r, MPI_COMM_WORLD, &m, NULL, 0));
    ASSERT_OK(hg_mpi_set_timeout(m, 60.0));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(N * sizeof(float), &hb));
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[1] = {N};
    ASSERT_OK(hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape));
    ranges one = {m, {0}, {N}, 1};
    hg_callable c = {"queue", orch_ranges, &one};
    ASSERT_EQ(hg_runner_run(r, &c, &arg, 1, NULL), HG_EUNSUPPORTED);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "device 'opencl");
    hg_hostbuf_destroy(hb);
    hg_mpi_detach(m);
    hg_runner_close(r);
    hg_device_close(dev);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
