/*
 * early_failure_test.c: a run that fails before it executes on one rank,
 * on 2 and 4 ranks.  Runs must pair one to one across ranks whatever fails
 * where, so each such run still takes part in the agreement: it fails on
 * every rank with the failing rank's code and a message naming it, and the
 * next run of every rank pairs with the next run of the others (its sums
 * are of that run's data).  Before, a NULL callable returned before the
 * decide hook: the other ranks' run paired with the failing rank's next
 * run, succeeded with sums of two runs' data, and the job aborted a run
 * later.  Each way to fail is on one rank only: a NULL callable, a callable
 * with no orchestration function, NULL args, a bad arg (plan), a device
 * view at no allocation (bind), a device allocation fault (bind), an
 * orchestration that fails before its allreduce.  Each test runs on every
 * backend every rank has.
 */
#include "mpi_fixture.h"

enum { N = 128 };

typedef struct plan {
    hg_mpi *m;
    bool fail; /* the orchestration fails before its allreduce */
} plan;

static int orch_sum(hg_orch *o, void *user)
{
    const plan *p = user;
    if (p->fail)
        return hg_orch_fail(o, HG_EINVAL, "config: this rank's orchestration refuses");
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    return rc ? rc : hg_mpi_allreduce(o, p->m, 0, &x->tensor, NULL);
}

typedef enum early {
    EARLY_NULL_CALLABLE,
    EARLY_NO_ORCHESTRATE,
    EARLY_NULL_ARGS,
    EARLY_BAD_DIRECTION,
    EARLY_VIEW_AT_NO_ALLOCATION,
    EARLY_ALLOC_FAULT,
    EARLY_ORCH_FAILS,
    EARLY_KINDS
} early;

/* Each way's code and a part of its message. */
static const struct {
    const char *name;
    int code;
    const char *says;
} EARLY[EARLY_KINDS] = {
    {"a NULL callable", HG_EINVAL, "callable: no orchestration function"},
    {"no orchestration function", HG_EINVAL, "callable: no orchestration function"},
    {"NULL args", HG_EINVAL, "args: NULL with nargs 1"},
    {"a bad direction", HG_EINVAL, "direction 9"},
    {"a device view at no allocation", HG_ERANGE, "arg 'x'"},
    {"a device allocation fault", HG_EDEVMEM, ""},
    {"a failing orchestration", HG_EINVAL, "this rank's orchestration refuses"},
};

typedef struct bench {
    mpi_fixture f;
    hg_hostbuf *hb;
    hg_arg arg;
    plan p;
    hg_callable c;
} bench;

static int bench_open(bench *b, const char *backend)
{
    memset(b, 0, sizeof *b);
    int rc = mpi_fixture_open_on(&b->f, backend, "cores=2,mem=64M");
    size_t shape[1] = {N};
    b->arg = (hg_arg){"x", HG_INOUT, {0}, 0, HG_STAGED};
    if (rc == 0)
        rc = hg_hostbuf_create(N * sizeof(float), &b->hb);
    if (rc == 0)
        rc = hg_tensor_host(&b->arg.tensor, b->hb, HG_F32, 1, shape);
    b->p = (plan){b->f.m, false};
    b->c = (hg_callable){"sum", orch_sum, &b->p};
    return rc;
}

/* x[i] = round * 1000 + rank + i: a run's sums say which round each rank's
 * data came from. */
static int bench_fill(bench *b, int round)
{
    float *x = hg_hostbuf_data(b->hb);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(round * 1000 + b->f.rank + (int)i);
    return hg_hostbuf_mark_written(b->hb, 0, N * sizeof(float));
}

static int bench_pass(bench *b, int round)
{
    if (bench_fill(b, round) != 0)
        return -1;
    int rc = hg_runner_run(b->f.r, &b->c, &b->arg, 1, NULL);
    if (rc != 0) {
        fprintf(stderr, "rank %d round %d: %s\n", b->f.rank, round, hg_runner_errmsg(b->f.r));
        return rc;
    }
    const float *x = hg_hostbuf_data(b->hb);
    const int n = b->f.size;
    for (size_t i = 0; i < N; i++) {
        const float want = (float)(n * (round * 1000 + (int)i) + n * (n - 1) / 2);
        if (x[i] != want) {
            fprintf(stderr, "rank %d round %d: x[%zu] = %g, want %g (another round's data)\n",
                    b->f.rank, round, i, x[i], want);
            return -1;
        }
    }
    return 0;
}

/* One run of round `round` that fails on rank `who` in way `e`: every rank
 * fails with e's code, names `who`, and leaves x as it was. */
static int bench_fails(bench *b, int round, early e, int who)
{
    if (bench_fill(b, round) != 0)
        return -1;
    const uint64_t gen = hg_hostbuf_generation(b->hb);
    const bool mine = b->f.rank == who;
    hg_arg bad = b->arg;
    const hg_callable no_orch = {"no orchestration", NULL, NULL};
    const hg_callable *c = &b->c;
    const hg_arg *args = &b->arg;
    if (mine) {
        switch (e) {
        case EARLY_NULL_CALLABLE:
            c = NULL;
            break;
        case EARLY_NO_ORCHESTRATE:
            c = &no_orch;
            break;
        case EARLY_NULL_ARGS:
            args = NULL;
            break;
        case EARLY_BAD_DIRECTION:
            bad.dir = (hg_dir)9;
            args = &bad;
            break;
        case EARLY_VIEW_AT_NO_ALLOCATION: {
            size_t shape[1] = {N};
            if (hg_tensor_device(&bad.tensor, (hg_devaddr)1 << 40, HG_F32, 1, shape) != 0)
                return -1;
            args = &bad;
            break;
        }
        case EARLY_ALLOC_FAULT:
            if (hg_device_inject_fault(b->f.dev, HG_FAULT_ALLOC, 1) != 0)
                return -1;
            break;
        case EARLY_ORCH_FAILS:
            b->p.fail = true;
            break;
        case EARLY_KINDS:
            break;
        }
    }
    int rc = hg_runner_run(b->f.r, c, args, 1, NULL);
    b->p.fail = false;
    hg_device_inject_fault(b->f.dev, HG_FAULT_ALLOC, 0);
    const char *msg = hg_runner_errmsg(b->f.r);
    char named[64];
    snprintf(named, sizeof named, "rank %d of %d failed: ", who, b->f.size);
    const float *x = hg_hostbuf_data(b->hb);
    if (rc != EARLY[e].code || strstr(msg, named) == NULL || strstr(msg, EARLY[e].says) == NULL ||
        x[1] != (float)(round * 1000 + b->f.rank + 1) || hg_hostbuf_generation(b->hb) != gen) {
        fprintf(stderr,
                "rank %d, %s on rank %d: rc %d (want %d), message '%s' (want '%s...%s'), "
                "x[1] %g\n",
                b->f.rank, EARLY[e].name, who, rc, EARLY[e].code, msg, named, EARLY[e].says, x[1]);
        return -1;
    }
    return 0;
}

/* The reproducer: a NULL callable on rank 1, then clean runs. */
MPI_TEST_EACH_BACKEND(a_null_callable_on_one_rank_fails_every_rank_and_the_next_runs_pair)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    ASSERT_OK(bench_pass(&b, 0));
    ASSERT_OK(bench_fails(&b, 1, EARLY_NULL_CALLABLE, 1));
    ASSERT_OK(bench_pass(&b, 2));
    ASSERT_OK(bench_pass(&b, 3));
    hg_hostbuf_destroy(b.hb);
    mpi_fixture_close(&b.f);
}

/* Every way to fail before execution, each on one rank (taking turns),
 * each followed by a clean run.  The allocation fault comes first, while
 * the runner's retained buffer is still to be allocated. */
MPI_TEST_EACH_BACKEND(every_early_failure_on_one_rank_fails_every_rank_and_the_next_runs_pair)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    static const early order[] = {
        EARLY_ALLOC_FAULT,   EARLY_NULL_CALLABLE,         EARLY_NO_ORCHESTRATE, EARLY_NULL_ARGS,
        EARLY_BAD_DIRECTION, EARLY_VIEW_AT_NO_ALLOCATION, EARLY_ORCH_FAILS};
    int round = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const int who = (int)(k % (size_t)b.f.size);
        ASSERT_OK(bench_fails(&b, round++, order[k], who));
        ASSERT_OK(bench_pass(&b, round++));
    }
    hg_hostbuf_destroy(b.hb);
    mpi_fixture_close(&b.f);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
