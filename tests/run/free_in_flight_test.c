/*
 * free_in_flight_test.c: another thread's allocation and every kind of free
 * proceed while a run is in flight on the same device (hostgraph.h's
 * sharing clause), on every backend.
 *
 * Thread A runs one host step that holds its run in flight until thread
 * B's operation on the same device is done, or until HOLD_S passed; B
 * starts its operation once the step has started.  B mallocs 4 KiB, copies
 * to and from a user buffer, frees an unrelated user buffer, destroys a host buffer whose resident
 * copy another runner holds, evicts that runner's copies (hg_runner_set_budget, and a bind that
 * evicts), or closes that runner.  Each must be done before the host step ends: by ordering (the
 * step saw it), never by a time.  A run that held a device-wide lock for its whole length, or a
 * free that called the backend under a lock the step's copies take, hangs here (the watchdog fails
 * the test after WATCHDOG_S) or is seen only after the step.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_device.h"
#include "testlib.h"

enum { N = 4096, HOLD_S = 30, WATCHDOG_S = 120 };

typedef enum op {
    OP_MALLOC,
    OP_COPY,
    OP_FREE,
    OP_DESTROY,
    OP_SET_BUDGET,
    OP_EVICTING_BIND,
    OP_CLOSE,
    OP_COUNT
} op;

static const char *const op_names[OP_COUNT] = {
    [OP_MALLOC] = "hg_devbuf_malloc of 4 KiB",
    [OP_COPY] = "hg_devbuf_copy_to and _from",
    [OP_FREE] = "hg_devbuf_free",
    [OP_DESTROY] = "hg_hostbuf_destroy",
    [OP_SET_BUDGET] = "hg_runner_set_budget",
    [OP_EVICTING_BIND] = "a bind that evicts",
    [OP_CLOSE] = "hg_runner_close",
};

typedef struct gate {
    hg_device *dev;
    op what;
    /* Polled, not waited on under a lock: a thread stuck in the device
     * must never keep the watchdog from reporting it. */
    atomic_bool step_started; /* A's host step is running */
    atomic_bool op_started;   /* B has taken frees0 and is calling */
    atomic_bool op_done;      /* B's operation returned */
    atomic_bool a_done, b_done;
    atomic_uint_least64_t frees0; /* the device's frees before B's operation */
    bool seen;                    /* the step saw B's operation done before it ended */
} gate;

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits until *flag is set, or `seconds` passed; whether it was set. */
static bool wait_flag(atomic_bool *flag, double seconds)
{
    const double until = now_s() + seconds;
    while (!atomic_load(flag) && now_s() < until)
        pause_ms(1);
    return atomic_load(flag);
}

/* Whether B's operation is done, seen from the step.  A bind that evicts
 * waits for the run's turn on the device after its eviction, so that one
 * is seen through the device's frees. */
static bool gate_op_done(gate *g)
{
    if (g->what != OP_EVICTING_BIND)
        return atomic_load(&g->op_done);
    if (!atomic_load(&g->op_started))
        return false;
    hg_device_counters c;
    hg_device_counters_get(g->dev, &c);
    return c.frees > atomic_load(&g->frees0);
}

/* Host step: x[i] += 1, once B's operation is done (or HOLD_S passed). */
static int k_hold(const hg_kernel_ctx *ctx)
{
    gate *g = (gate *)(uintptr_t)ctx->scalars[0];
    atomic_store(&g->step_started, true);
    const double until = now_s() + HOLD_S;
    while (!gate_op_done(g) && now_s() < until)
        pause_ms(1);
    g->seen = gate_op_done(g);
    int32_t *x = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        x[i] += 1;
    return 0;
}

/* Kernel: y[i] = x[i] + 1. */
static int k_inc(const hg_kernel_ctx *ctx)
{
    const int32_t *x = ctx->args[0].data;
    int32_t *y = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        y[i] = x[i] + 1;
    return 0;
}

static const hg_kernel K_HOLD = {"hold", k_hold, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel K_INC = {
    "inc", k_inc, HG_CORE_VECTOR,
    "__kernel void inc(HG_STATUS_ARGS, HG_TENSOR(int, x), HG_TENSOR(int, y))\n"
    "{ size_t i = get_global_id(0); HG_PTR(y)[i] = HG_PTR(x)[i] + 1; }",
    "inc"};

/* hold(x) [host] -> inc(x -> y) */
static int orch_hold(hg_orch *o, void *user)
{
    const hg_arg *x, *y;
    hg_orch_arg(o, 0, &x);
    hg_orch_arg(o, 1, &y);
    const uint64_t g = (uint64_t)(uintptr_t)user;
    hg_task_arg t0[1] = {{0, HG_INOUT, x->tensor}};
    hg_task_arg t1[2] = {{0, HG_IN, x->tensor}, {1, HG_OUT, y->tensor}};
    const hg_task_desc d0 = {&K_HOLD, t0, 1, &g, 1, NULL, 0};
    const hg_task_desc d1 = {&K_INC, t1, 2, NULL, 0, NULL, 0};
    int rc = hg_task_submit_host_step(o, &d0, NULL);
    return rc != 0 ? rc : hg_task_submit(o, &d1, NULL);
}

/* Kernel only: y[i] = x[i] + 1 (the other runner's runs). */
static int orch_inc(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *x, *y;
    hg_orch_arg(o, 0, &x);
    hg_orch_arg(o, 1, &y);
    hg_task_arg t[2] = {{0, HG_IN, x->tensor}, {1, HG_OUT, y->tensor}};
    const hg_task_desc d = {&K_INC, t, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

/* Two args over x and y, x of the given residency; x filled with `base`. */
static void args_make(hg_arg args[2], hg_hostbuf *x, hg_hostbuf *y, hg_residency res, int32_t base)
{
    size_t shape[1] = {N};
    args[0] = (hg_arg){"x", res == HG_RESIDENT ? HG_IN : HG_INOUT, {0}, 0, res};
    args[1] = (hg_arg){"y", HG_OUT, {0}, 0, HG_STAGED};
    hg_tensor_host(&args[0].tensor, x, HG_I32, 1, shape);
    hg_tensor_host(&args[1].tensor, y, HG_I32, 1, shape);
    int32_t *v = hg_hostbuf_data(x);
    for (size_t i = 0; i < N; i++)
        v[i] = base + (int32_t)i;
}

/* What B works on: a user buffer and another runner whose resident copy
 * of `kept` (and its retained buffer) live on the device. */
typedef struct other {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *kept, *next, *y;
    hg_devaddr user_buf;
    gate *g;
    int rc;
    char why[256];
} other;

static bool y_is(hg_hostbuf *y, int32_t base)
{
    const int32_t *v = hg_hostbuf_data(y);
    for (size_t i = 0; i < N; i++)
        if (v[i] != base + (int32_t)i)
            return false;
    return true;
}

/* B's operation. */
static int other_op(other *b)
{
    hg_devaddr small;
    hg_arg args[2];
    hg_callable c = {"inc", orch_inc, NULL};
    int rc;
    switch (b->g->what) {
    case OP_MALLOC:
        rc = hg_devbuf_malloc(b->dev, 4096, &small);
        return rc != 0 ? rc : hg_devbuf_free(b->dev, small);
    case OP_COPY:
        rc = hg_devbuf_copy_to(b->dev, b->user_buf, hg_hostbuf_data(b->y), N * sizeof(int32_t));
        return rc != 0 ? rc
                       : hg_devbuf_copy_from(b->dev, hg_hostbuf_data(b->y), b->user_buf,
                                             N * sizeof(int32_t));
    case OP_FREE:
        return hg_devbuf_free(b->dev, b->user_buf);
    case OP_DESTROY:
        hg_hostbuf_destroy(b->kept);
        b->kept = NULL;
        return 0;
    case OP_SET_BUDGET:
        rc = hg_runner_set_budget(b->r, 1024);
        return rc != 0 ? rc : (hg_runner_resident_copies(b->r) == 0 ? 0 : -1000);
    case OP_EVICTING_BIND:
        /* The budget holds one copy: `next`'s bind evicts `kept`'s. */
        args_make(args, b->next, b->y, HG_RESIDENT, 500);
        rc = hg_runner_run(b->r, &c, args, 2, NULL);
        return rc != 0 ? rc : (y_is(b->y, 501) ? 0 : -1001);
    case OP_CLOSE:
        hg_runner_close(b->r);
        b->r = NULL;
        return 0;
    default:
        return -1;
    }
}

static void *other_main(void *arg)
{
    other *b = arg;
    gate *g = b->g;
    b->rc = -1;
    snprintf(b->why, sizeof b->why, "the run's host step never started");
    if (wait_flag(&g->step_started, WATCHDOG_S)) {
        hg_device_counters c;
        hg_device_counters_get(b->dev, &c);
        atomic_store(&g->frees0, c.frees);
        atomic_store(&g->op_started, true);
        b->rc = other_op(b);
        if (b->rc != 0)
            snprintf(b->why, sizeof b->why, "%s: %d (%s)", op_names[g->what], b->rc,
                     b->r ? hg_runner_errmsg(b->r) : "");
    }
    atomic_store(&g->op_done, true);
    atomic_store(&g->b_done, true);
    return NULL;
}

typedef struct runner_a {
    hg_runner *r;
    hg_arg args[2];
    gate *g;
    int rc;
} runner_a;

static void *runner_main(void *arg)
{
    runner_a *a = arg;
    hg_callable c = {"hold", orch_hold, a->g};
    a->rc = hg_runner_run(a->r, &c, a->args, 2, NULL);
    atomic_store(&a->g->a_done, true);
    return NULL;
}

/* Waits for both threads, failing the whole process past WATCHDOG_S: a
 * deadlocked thread cannot be joined. */
static void gate_wait_both(gate *g, const char *backend)
{
    const double until = now_s() + WATCHDOG_S;
    while (!(atomic_load(&g->a_done) && atomic_load(&g->b_done)) && now_s() < until)
        pause_ms(10);
    const bool a = atomic_load(&g->a_done), b = atomic_load(&g->b_done);
    if (a && b)
        return;
    printf("FAIL %s: %s during a run with a host step: after %d s the run %s and the "
           "operation %s: deadlock\n",
           backend, op_names[g->what], WATCHDOG_S, a ? "ended" : "is still in flight",
           b ? "returned" : "has not returned");
    fflush(stdout);
    _exit(1);
}

/* The other runner's setup: one run with `kept` resident, so its resident
 * copy and retained buffer are on the device; a budget of that one copy. */
static void other_open(other *b, hg_device *dev)
{
    b->dev = dev;
    ASSERT_OK(hg_runner_open(dev, &b->r));
    ASSERT_OK(hg_hostbuf_create(N * sizeof(int32_t), &b->kept));
    ASSERT_OK(hg_hostbuf_create(N * sizeof(int32_t), &b->next));
    ASSERT_OK(hg_hostbuf_create(N * sizeof(int32_t), &b->y));
    ASSERT_OK(hg_runner_set_budget(b->r, N * sizeof(int32_t)));
    hg_arg args[2];
    args_make(args, b->kept, b->y, HG_RESIDENT, 100);
    hg_callable c = {"inc", orch_inc, NULL};
    ASSERT_OK(hg_runner_run(b->r, &c, args, 2, NULL));
    ASSERT(y_is(b->y, 101));
    ASSERT_EQ(hg_runner_resident_copies(b->r), 1);
    ASSERT_OK(hg_devbuf_malloc(dev, 64 * 1024, &b->user_buf));
}

static void other_close(other *b)
{
    hg_runner_close(b->r);
    hg_hostbuf_destroy(b->kept);
    hg_hostbuf_destroy(b->next);
    hg_hostbuf_destroy(b->y);
    if (b->g->what != OP_FREE)
        ASSERT_OK(hg_devbuf_free(b->dev, b->user_buf));
}

static void one_op(const char *backend, hg_device *dev, op what)
{
    gate g = {.dev = dev, .what = what};
    other b = {.g = &g};
    other_open(&b, dev);
    if (test_failed_now)
        return;
    runner_a a = {.g = &g};
    hg_hostbuf *x, *y;
    ASSERT_OK(hg_runner_open(dev, &a.r));
    ASSERT_OK(hg_hostbuf_create(N * sizeof(int32_t), &x));
    ASSERT_OK(hg_hostbuf_create(N * sizeof(int32_t), &y));
    args_make(a.args, x, y, HG_STAGED, 0);
    pthread_t ta, tb;
    ASSERT_OK(pthread_create(&ta, NULL, runner_main, &a));
    ASSERT_OK(pthread_create(&tb, NULL, other_main, &b));
    gate_wait_both(&g, backend);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("     %s: the step %s it\n", op_names[what], g.seen ? "saw" : "did not see");
    if (!g.seen)
        TEST_FAIL_("%s: %s was not done before the run's host step ended", backend, op_names[what]);
    if (b.rc != 0)
        TEST_FAIL_("%s: %s", backend, b.why);
    if (a.rc != 0)
        TEST_FAIL_("%s: the run failed: %s", backend, hg_runner_errmsg(a.r));
    ASSERT(y_is(y, 2)); /* x + 1 in the step, + 1 in the kernel */
    hg_runner_close(a.r);
    hg_hostbuf_destroy(x);
    hg_hostbuf_destroy(y);
    other_close(&b);
}

TEST_EACH_BACKEND(allocations_and_frees_proceed_during_a_run_with_a_host_step)
{
    hg_device *dev = test_device_on(backend, "cores=2,mem=16M");
    ASSERT(dev != NULL);
    for (int what = 0; what < OP_COUNT && !test_failed_now; what++)
        one_op(backend, dev, (op)what);
    hg_device_close(dev);
}

/* The same on in-order queues (one: every command in one order). */
TEST(allocations_and_frees_proceed_during_a_run_on_one_in_order_queue)
{
    if (!test_backend_available(1))
        return;
    hg_device *dev = test_device_on("opencl", "mem=16M,queues=1");
    ASSERT(dev != NULL);
    for (int what = 0; what < OP_COUNT && !test_failed_now; what++)
        one_op("opencl:queues=1", dev, (op)what);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
