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
#include "sum_bench.h"

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

/* One run of round `round` that fails on rank `who` in way `e`: every rank
 * fails with e's code, names `who`, and leaves x as it was. */
static int bench_fails(sum_bench *b, int round, early e, int who)
{
    if (sum_bench_fill(b, round) != 0)
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
            size_t shape[1] = {SUM_N};
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
    sum_bench b;
    ASSERT_OK(sum_bench_open(&b, backend));
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 0, NULL));
    ASSERT_OK(bench_fails(&b, 1, EARLY_NULL_CALLABLE, 1));
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 2, NULL));
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 3, NULL));
    sum_bench_close(&b);
}

/* Every way to fail before execution, each on one rank (taking turns),
 * each followed by a clean run.  The allocation fault comes first, while
 * the runner's retained buffer is still to be allocated. */
MPI_TEST_EACH_BACKEND(every_early_failure_on_one_rank_fails_every_rank_and_the_next_runs_pair)
{
    sum_bench b;
    ASSERT_OK(sum_bench_open(&b, backend));
    static const early order[] = {
        EARLY_ALLOC_FAULT,   EARLY_NULL_CALLABLE,         EARLY_NO_ORCHESTRATE, EARLY_NULL_ARGS,
        EARLY_BAD_DIRECTION, EARLY_VIEW_AT_NO_ALLOCATION, EARLY_ORCH_FAILS};
    int round = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const int who = (int)(k % (size_t)b.f.size);
        ASSERT_OK(bench_fails(&b, round++, order[k], who));
        ASSERT_OK(sum_bench_pass(&b, b.f.r, round++, NULL));
    }
    sum_bench_close(&b);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
