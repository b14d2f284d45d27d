/*
 * decide_test.c: the two core hooks libhostgraph_mpi is built on, tested
 * without MPI.
 *   - hg_kernel_count: what kernels count lands in the run's stats
 *     (net_bytes, net_ns), exactly, summed over tasks on several cores, and
 *     starts from 0 every run; outside a run it does nothing.
 *   - hg_runner_set_decide: called once per run, success or failure, before
 *     copy back writes the host; a ruling that fails a successful run leaves
 *     every host byte and generation as it was and publishes nothing (the
 *     next run uploads the resident arg again); a failure stays a failure.
 * Counts calls and bytes, never times.
 */
#include <string.h>

#include "hostgraph.h"
#include "testlib.h"

enum { N = 64, TASKS = 12 };

/* acc[i] += 1, and counts 100 net bytes and 7 ns. */
static int k_add_count(const hg_kernel_ctx *ctx)
{
    float *acc = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        acc[i] += 1.0f;
    hg_kernel_count(HG_KCOUNT_NET_BYTES, 100);
    hg_kernel_count(HG_KCOUNT_NET_NS, 7);
    hg_kernel_count(HG_KCOUNT_MAX, 1); /* outside the enum: nothing */
    return 0;
}

static const hg_kernel K_ADD = {"add_count", k_add_count, HG_CORE_VECTOR, NULL, NULL};

/* TASKS tasks, each on its own slice of N/4 floats (so 4 run at once). */
static int orch_slices(hg_orch *o, void *user)
{
    const hg_arg *acc;
    hg_orch_arg(o, 0, &acc);
    for (int i = 0; i < TASKS; i++) {
        hg_task_arg ta[1] = {{0, HG_INOUT, acc->tensor}};
        int rc = hg_tensor_slice(&acc->tensor, 0, (size_t)(i % 4) * (N / 4), N / 4, &ta[0].view);
        hg_task_desc d = {&K_ADD, ta, 1, NULL, 0, NULL, 0};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

typedef struct ruling {
    int calls;
    int last_rc;      /* the rc the hook was called with */
    int verdict;      /* what it returns */
    char seen[64];    /* the message it was called with */
    const char *text; /* if not NULL, the message it writes */
} ruling;

static int decide(void *user, int rc, char *msg, size_t msglen)
{
    ruling *d = user;
    d->calls++;
    d->last_rc = rc;
    snprintf(d->seen, sizeof d->seen, "%s", msg);
    if (d->text)
        snprintf(msg, msglen, "%s", d->text);
    return d->verdict;
}

typedef struct fixture {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *acc;
    hg_arg arg;
    hg_callable c;
} fixture;

static int fixture_open(fixture *f)
{
    size_t shape[1] = {N};
    memset(f, 0, sizeof *f);
    if (hg_device_open("sim:cores=4", &f->dev, NULL, 0) || hg_runner_open(f->dev, &f->r) ||
        hg_hostbuf_create(N * sizeof(float), &f->acc))
        return -1;
    f->arg = (hg_arg){"acc", HG_INOUT, {0}, 0, HG_RESIDENT};
    f->c = (hg_callable){"slices", orch_slices, NULL};
    return hg_tensor_host(&f->arg.tensor, f->acc, HG_F32, 1, shape);
}

static void fixture_close(fixture *f)
{
    hg_runner_close(f->r);
    hg_hostbuf_destroy(f->acc);
    hg_device_close(f->dev);
}

static float acc_at(const fixture *f, size_t i)
{
    return ((const float *)hg_hostbuf_data(f->acc))[i];
}

TEST(kernel_counts_sum_into_the_run_stats_exactly)
{
    fixture f;
    ASSERT_OK(fixture_open(&f));
    for (int run = 0; run < 3; run++) {
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, &s));
        ASSERT_UEQ(s.net_bytes, 100u * TASKS); /* from 0 every run */
        ASSERT_UEQ(s.net_ns, 7u * TASKS);
    }
    ASSERT(acc_at(&f, 0) == 9.0f); /* 3 tasks per slice, 3 runs */
    fixture_close(&f);
}

TEST(kernel_count_outside_a_run_does_nothing)
{
    hg_kernel_count(HG_KCOUNT_NET_BYTES, 5); /* no run, no crash */
    fixture f;
    ASSERT_OK(fixture_open(&f));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, &s));
    ASSERT_UEQ(s.net_bytes, 100u * TASKS);
    fixture_close(&f);
}

TEST(decide_hook_is_called_once_per_run_and_can_fail_a_run_before_host_writes)
{
    fixture f;
    ASSERT_OK(fixture_open(&f));
    ruling d = {0};
    ASSERT_EQ(hg_runner_set_decide(NULL, decide, &d), HG_EINVAL);
    ASSERT_OK(hg_runner_set_decide(f.r, decide, &d));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, &s));
    ASSERT_EQ(d.calls, 1);
    ASSERT_EQ(d.last_rc, 0);
    ASSERT_STR_EQ(d.seen, "");
    ASSERT(acc_at(&f, 0) == 3.0f);
    const uint64_t gen = hg_hostbuf_generation(f.acc);

    /* A ruling against a run that succeeded here: nothing reaches the host. */
    d.verdict = HG_EKERNEL;
    d.text = "rank 1 failed";
    ASSERT_EQ(hg_runner_run(f.r, &f.c, &f.arg, 1, &s), HG_EKERNEL);
    ASSERT_EQ(d.calls, 2);
    ASSERT_STR_EQ(hg_runner_errmsg(f.r), "rank 1 failed");
    ASSERT(acc_at(&f, 0) == 3.0f);
    ASSERT_UEQ(hg_hostbuf_generation(f.acc), gen);
    size_t n = 1;
    hg_range rg;
    ASSERT_OK(hg_runner_copied_back(f.r, 0, &rg, 1, &n));
    ASSERT_EQ(n, 0);

    /* Nothing was published: the next run uploads the resident arg again
     * (its device copy was written by the overruled run). */
    d.verdict = 0;
    d.text = NULL;
    ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, &s));
    ASSERT_EQ(s.resident_hits, 0);
    ASSERT(acc_at(&f, 0) == 6.0f);
    ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, &s));
    ASSERT_EQ(s.resident_hits, 1);
    ASSERT_EQ(d.calls, 4);
    fixture_close(&f);
}

TEST(decide_hook_sees_a_failure_and_cannot_turn_it_into_success)
{
    fixture f;
    ASSERT_OK(fixture_open(&f));
    ruling d = {0};
    ASSERT_OK(hg_runner_set_decide(f.r, decide, &d));
    ASSERT_OK(hg_device_inject_fault(f.dev, HG_FAULT_COPY, 1)); /* the bind's upload */
    ASSERT_EQ(hg_runner_run(f.r, &f.c, &f.arg, 1, NULL), HG_ECOPY);
    ASSERT_EQ(d.calls, 1);
    ASSERT_EQ(d.last_rc, HG_ECOPY);
    ASSERT(strstr(d.seen, "acc") != NULL); /* the run's own message */
    ASSERT(acc_at(&f, 0) == 0.0f);

    /* It may name another code for a failure. */
    ASSERT_OK(hg_device_inject_fault(f.dev, HG_FAULT_COPY, 1));
    d.verdict = HG_ECANCELED;
    ASSERT_EQ(hg_runner_run(f.r, &f.c, &f.arg, 1, NULL), HG_ECANCELED);

    /* A positive ruling on a success is a malformed hook: the run fails. */
    d.verdict = 5;
    ASSERT_EQ(hg_runner_run(f.r, &f.c, &f.arg, 1, NULL), HG_EINVAL);
    ASSERT(strstr(hg_runner_errmsg(f.r), "decide hook") != NULL);

    ASSERT_OK(hg_runner_set_decide(f.r, NULL, NULL)); /* removed */
    ASSERT_OK(hg_runner_run(f.r, &f.c, &f.arg, 1, NULL));
    ASSERT_EQ(d.calls, 3);
    ASSERT(acc_at(&f, 0) == 3.0f);
    fixture_close(&f);
}

int main(void)
{
    return RUN_TESTS();
}
