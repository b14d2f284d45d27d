/*
 * cancel_test.c: hg_runner_cancel.  A cancel stops the run in flight between
 * tasks (here from a kernel on a device core thread, i.e. another thread, and
 * from a signal handler) with HG_ECANCELED: nothing copied back, no
 * generation moved, nothing published, the runner usable.  A cancel made
 * while no run is in flight stops the next run before it binds; one cancel
 * stops one run.  Counts kernel calls, never times.  The cancels made
 * from inside a kernel are sim_only (only a sim kernel runs host code); the
 * others run once per backend (test_device.h), where the result shows how
 * many tasks ran (each adds 1).  A cancel made while a host step runs lets
 * that step finish and stops every task after it, on every backend (on
 * OpenCL, tasks behind a host step are not yet on the device).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

enum { N = 256, CHAIN = 16 };

static hg_runner *cancel_target;
static atomic_uint calls;
static atomic_uint cancel_at; /* the call that cancels (1-based); 0: none */

/* acc[i] += 1; the cancel_at-th call cancels its runner. */
static int k_step(const hg_kernel_ctx *ctx)
{
    float *acc = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        acc[i] += 1.0f;
    if (atomic_fetch_add(&calls, 1) + 1 == atomic_load(&cancel_at))
        hg_runner_cancel(cancel_target);
    return 0;
}

static int k_signal_step(const hg_kernel_ctx *ctx)
{
    if (atomic_fetch_add(&calls, 1) + 1 == atomic_load(&cancel_at))
        raise(SIGUSR1);
    return 0;
}

/* OpenCL C has a builtin step(): the entry point is add_one. */
static const hg_kernel K_STEP = {"step", k_step, HG_CORE_VECTOR,
                                 "__kernel void add_one(HG_STATUS_ARGS, HG_TENSOR(float, acc))\n"
                                 "{ HG_PTR(acc)[get_global_id(0)] += 1.0f; }",
                                 "add_one"};
static const hg_kernel K_SIGNAL = {"signal_step", k_signal_step, HG_CORE_VECTOR, NULL, NULL};

/* A chain of CHAIN tasks over the one INOUT arg: each depends on the last. */
static int orch_chain(hg_orch *o, void *user)
{
    const hg_arg *acc;
    hg_orch_arg(o, 0, &acc);
    for (int i = 0; i < CHAIN; i++) {
        hg_task_arg ta[1] = {{0, HG_INOUT, acc->tensor}};
        hg_task_desc d = {user, ta, 1, NULL, 0, NULL, 0};
        int rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

typedef struct fixture {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *acc;
    hg_arg arg;
} fixture;

static int fixture_open(fixture *f, const char *backend, hg_residency res)
{
    size_t shape[1] = {N};
    memset(f, 0, sizeof *f);
    if ((f->dev = test_device_on(backend, "cores=2")) == NULL || hg_runner_open(f->dev, &f->r) ||
        hg_hostbuf_create(N * sizeof(float), &f->acc))
        return -1;
    f->arg = (hg_arg){"acc", HG_INOUT, {0}, 0, res};
    cancel_target = f->r;
    atomic_store(&calls, 0);
    atomic_store(&cancel_at, 0);
    return hg_tensor_host(&f->arg.tensor, f->acc, HG_F32, 1, shape);
}

static void fixture_close(fixture *f)
{
    hg_runner_close(f->r);
    hg_hostbuf_destroy(f->acc);
    hg_device_close(f->dev);
}

static int run(fixture *f, const hg_kernel *k, hg_run_stats *s)
{
    hg_callable c = {"chain", orch_chain, (void *)k};
    return hg_runner_run(f->r, &c, &f->arg, 1, s);
}

TEST(sim_only_cancel_from_another_thread_stops_between_tasks_and_publishes_nothing)
{
    const char *backend = "sim";
    for (int res = 0; res < 2; res++) {
        fixture f;
        hg_run_stats s;
        ASSERT_OK(fixture_open(&f, backend, res ? HG_RESIDENT : HG_STAGED));
        uint64_t gen = hg_hostbuf_generation(f.acc);
        atomic_store(&cancel_at, 3);
        ASSERT_EQ(run(&f, &K_STEP, &s), HG_ECANCELED);
        ASSERT_UEQ(atomic_load(&calls), 3); /* a chain: nothing ran beside the canceling task */
        ASSERT_UEQ(s.d2h_bytes, 0);         /* nothing copied back */
        ASSERT_UEQ(hg_hostbuf_generation(f.acc), gen);
        ASSERT_EQ(((float *)hg_hostbuf_data(f.acc))[0], 0.0f);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "canceled");
        ASSERT_STR_CONTAINS(hg_strerror(HG_ECANCELED), "cancel");
        /* The runner is usable, and the cancel was spent on that run. */
        atomic_store(&calls, 0);
        atomic_store(&cancel_at, 0);
        ASSERT_OK(run(&f, &K_STEP, &s));
        ASSERT_UEQ(atomic_load(&calls), CHAIN);
        ASSERT_EQ(((float *)hg_hostbuf_data(f.acc))[N - 1], (float)CHAIN);
        /* Nothing stale was published: a resident run uploads the acc again. */
        ASSERT_UEQ(s.resident_hits, 0);
        fixture_close(&f);
    }
}

/* acc[0] after the runs so far: one per task run. */
static float acc0(const fixture *f)
{
    return ((const float *)hg_hostbuf_data(f->acc))[0];
}

TEST_EACH_BACKEND(cancel_between_runs_stops_the_next_run_before_it_binds)
{
    fixture f;
    hg_run_stats s;
    ASSERT_OK(fixture_open(&f, backend, HG_STAGED));
    hg_runner_cancel(f.r);
    ASSERT_EQ(run(&f, &K_STEP, &s), HG_ECANCELED);
    ASSERT_EQ(acc0(&f), 0.0f);
    ASSERT_UEQ(s.h2d_bytes, 0);
    ASSERT_OK(run(&f, &K_STEP, &s)); /* one cancel, one run */
    ASSERT_EQ(acc0(&f), (float)CHAIN);
    hg_runner_cancel(NULL); /* a no-op */
    fixture_close(&f);
}

TEST_EACH_BACKEND(a_cancel_withdrawn_stops_nothing)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend, HG_STAGED));
    hg_runner_cancel(f.r);
    hg_runner_cancel_clear(f.r);
    ASSERT_OK(run(&f, &K_STEP, NULL));
    ASSERT_EQ(acc0(&f), (float)CHAIN);
    hg_runner_cancel_clear(NULL); /* a no-op */
    fixture_close(&f);
}

/* ------------------------------------------- a cancel during a host step */

enum { STEPS = 6 }; /* host steps, a kernel between each two */

typedef struct stepping {
    hg_runner *r;
    atomic_int started, canceled; /* H0 began; the other thread canceled */
    atomic_uint steps;            /* host step calls */
} stepping;

/* Host step: acc += 1; the first call waits (at most 10 s) until the other
 * thread has canceled the run. */
static int h_step(const hg_kernel_ctx *ctx)
{
    stepping *st = (stepping *)(uintptr_t)ctx->scalars[0];
    if (atomic_fetch_add(&st->steps, 1) == 0) {
        atomic_store(&st->started, 1);
        for (int i = 0; i < 10000 && !atomic_load(&st->canceled); i++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    float *acc = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        acc[i] += 1.0f;
    return 0;
}

static const hg_kernel H_STEP = {"host_step", h_step, HG_CORE_VECTOR, NULL, NULL};

/* H K H K ... H over one INOUT arg: a chain of 2 * STEPS - 1 tasks. */
static int orch_steps(hg_orch *o, void *user)
{
    const hg_arg *acc;
    hg_orch_arg(o, 0, &acc);
    const uint64_t me[1] = {(uint64_t)(uintptr_t)user};
    int rc = 0;
    for (int i = 0; i < 2 * STEPS - 1 && rc == 0; i++) {
        hg_task_arg ta[1] = {{0, HG_INOUT, acc->tensor}};
        hg_task_desc d = {i % 2 ? &K_STEP : &H_STEP, ta, 1, me, i % 2 ? 0 : 1, NULL, 0};
        rc = i % 2 ? hg_task_submit(o, &d, NULL) : hg_task_submit_host_step(o, &d, NULL);
    }
    return rc;
}

static void *cancel_when_started(void *arg)
{
    stepping *st = arg;
    while (!atomic_load(&st->started))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    hg_runner_cancel(st->r);
    atomic_store(&st->canceled, 1);
    return NULL;
}

/* The repro (a chain of host steps canceled from another thread
 * while the first runs), counted: the first step finishes, and no later
 * host step or kernel runs, on every backend.  The arg is device memory of
 * the user's, so what ran shows there although nothing is copied back. */
TEST_EACH_BACKEND(cancel_during_a_host_step_runs_no_later_step_or_kernel)
{
    hg_device *dev = test_device_on(backend, "cores=2");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_devaddr mem;
    ASSERT_OK(hg_devbuf_malloc(dev, N * sizeof(float), &mem));
    float acc[N] = {0};
    ASSERT_OK(hg_devbuf_copy_to(dev, mem, acc, sizeof acc));
    size_t shape[1] = {N};
    hg_arg arg = {"acc", HG_INOUT, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_device(&arg.tensor, mem, HG_F32, 1, shape));
    stepping st = {.r = r};
    hg_callable c = {"steps", orch_steps, &st};
    pthread_t canceler;
    ASSERT_OK(pthread_create(&canceler, NULL, cancel_when_started, &st));
    ASSERT_EQ(hg_runner_run(r, &c, &arg, 1, NULL), HG_ECANCELED);
    pthread_join(canceler, NULL);
    ASSERT_UEQ(atomic_load(&st.steps), 1);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "canceled after 1 of 11 tasks");
    ASSERT_OK(hg_devbuf_copy_from(dev, acc, mem, sizeof acc));
    ASSERT_EQ(acc[0], 1.0f); /* H0 only: no kernel after it */
    ASSERT_EQ(acc[N - 1], 1.0f);
    /* The next run runs everything. */
    atomic_store(&st.started, 1);
    atomic_store(&st.canceled, 1);
    if (hg_runner_run(r, &c, &arg, 1, NULL) != 0)
        TEST_FAIL_("the run after: %s", hg_runner_errmsg(r));
    ASSERT_UEQ(atomic_load(&st.steps), 1 + STEPS);
    ASSERT_OK(hg_devbuf_copy_from(dev, acc, mem, sizeof acc));
    ASSERT_EQ(acc[0], (float)(1 + 2 * STEPS - 1));
    hg_runner_close(r);
    hg_devbuf_free(dev, mem);
    hg_device_close(dev);
}

static void on_usr1(int sig)
{
    (void)sig;
    hg_runner_cancel(cancel_target);
}

TEST(sim_only_cancel_is_safe_from_a_signal_handler)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, "sim", HG_STAGED));
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    ASSERT_OK(sigaction(SIGUSR1, &sa, &old));
    atomic_store(&cancel_at, 2);
    ASSERT_EQ(run(&f, &K_SIGNAL, NULL), HG_ECANCELED);
    ASSERT_UEQ(atomic_load(&calls), 2);
    sigaction(SIGUSR1, &old, NULL);
    fixture_close(&f);
}

int main(void)
{
    return RUN_TESTS();
}
