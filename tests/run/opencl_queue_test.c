/*
 * opencl_queue_test.c: a graph on the OpenCL device runs as enqueued work
 * with event wait lists from its inferred dependencies: on the device's
 * out-of-order queue (PoCL has one) and on in-order queues (queues=N, the
 * shape for a device without one).  Chains of read-modify-write tasks whose
 * result depends on their order, interleaved with independent chains, give
 * the host model's bytes round after round; the lowest failing task is
 * named; a traced run records one span per task, with its kernel's name,
 * from the device's own times, and each chain's spans in order; a host
 * step that blocks until a later, independent one runs holds up nothing on
 * any queue shape.  Skipped with "skipped: no OpenCL platform" where there
 * is none.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/trace.h"
#include "device/device.h"
#include "one_arg.h"
#include "test_device.h"
#include "testlib.h"

#define LANES 4  /* independent chains, each on its own quarter of x */
#define DEPTH 24 /* tasks per chain */
#define N     4096

/* x = x * 3 + k: the order of two such steps changes the result. */
static const char step_cl[] =
    "__kernel void chain_step(HG_STATUS_ARGS, HG_TENSOR(uint, x), ulong k,\n"
    "                   ulong fail_k)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (k == fail_k) { HG_FAIL(7); return; }\n"
    "    HG_PTR(x)[i] = HG_PTR(x)[i] * 3u + (uint)k;\n"
    "}\n";

static const hg_kernel lane_kernel[LANES] = {
    {"lane0", NULL, HG_CORE_VECTOR, step_cl, "chain_step"},
    {"lane1", NULL, HG_CORE_VECTOR, step_cl, "chain_step"},
    {"lane2", NULL, HG_CORE_VECTOR, step_cl, "chain_step"},
    {"lane3", NULL, HG_CORE_VECTOR, step_cl, "chain_step"},
};

typedef struct chains {
    uint64_t fail_k[2]; /* tasks whose k is one of these fail (0: none) */
} chains;

/* The scalar k of the task at depth d of lane l: task number d*LANES + l. */
static uint64_t step_k(uint32_t d, uint32_t l)
{
    return (uint64_t)d * LANES + l + 1;
}

/* Submits depth by depth, lane by lane: consecutive tasks are independent
 * (other lanes), each lane a chain. */
static int chains_orch(hg_orch *o, void *user)
{
    const chains *c = user;
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    for (uint32_t d = 0; d < DEPTH && rc == 0; d++) {
        for (uint32_t l = 0; l < LANES && rc == 0; l++) {
            hg_task_arg ta = {.arg = 0, .access = HG_INOUT, .view = x->tensor};
            ta.view.offset = (size_t)l * (N / LANES);
            ta.view.shape[0] = N / LANES;
            uint64_t k = step_k(d, l);
            uint64_t fail = k == c->fail_k[0] || k == c->fail_k[1] ? k : 0;
            uint64_t sc[2] = {k, fail ? fail : UINT64_MAX};
            hg_task_desc t = {
                .kernel = &lane_kernel[l], .args = &ta, .nargs = 1, .scalars = sc, .nscalars = 2};
            rc = hg_task_submit(o, &t, NULL);
        }
    }
    return rc;
}

/* One round of the host model. */
static void chains_model(uint32_t *x)
{
    for (uint32_t d = 0; d < DEPTH; d++)
        for (uint32_t l = 0; l < LANES; l++)
            for (uint32_t i = l * (N / LANES); i < (l + 1) * (N / LANES); i++)
                x[i] = x[i] * 3u + (uint32_t)step_k(d, l);
}

typedef test_one_arg fixture;

static bool fixture_open(fixture *f, const char *keys)
{
    if (!test_one_arg_open(f, "opencl", keys, N))
        return false;
    uint32_t *x = hg_hostbuf_data(f->hb);
    for (uint32_t i = 0; i < N; i++)
        x[i] = i * 2654435761u;
    return true;
}

static void fixture_close(fixture *f)
{
    test_one_arg_close(f);
}

static int run(fixture *f, chains *c, hg_residency res)
{
    hg_callable cl = {"chains", chains_orch, c};
    f->arg.residency = res;
    return hg_runner_run(f->r, &cl, &f->arg, 1, NULL);
}

/* Round after round, staged and resident, on the out-of-order queue and on
 * 1 and 3 in-order queues: the host model's bytes exactly.  Without the
 * wait lists the out-of-order queue runs a lane's steps in any order, and
 * with several queues a lane's steps land on different queues. */
TEST(opencl_chains_and_independent_tasks_follow_the_graph)
{
    if (test_backend_skipped("opencl"))
        return;
    static const char *const keys[] = {NULL, "queues=1", "queues=3"};
    for (int k = 0; k < 3; k++) {
        printf("     opencl%s%s\n", keys[k] ? ":" : "", keys[k] ? keys[k] : "");
        fixture f;
        ASSERT(fixture_open(&f, keys[k]));
        uint32_t *model = malloc(N * sizeof *model);
        memcpy(model, hg_hostbuf_data(f.hb), N * sizeof *model);
        chains c = {{0, 0}};
        for (int round = 0; round < 6; round++) {
            int rc = run(&f, &c, round < 3 ? HG_STAGED : HG_RESIDENT);
            if (rc != 0)
                TEST_FAIL_("round %d: %s", round, hg_runner_errmsg(f.r));
            chains_model(model);
            const uint32_t *x = hg_hostbuf_data(f.hb);
            for (uint32_t i = 0; i < N; i++)
                if (x[i] != model[i])
                    TEST_FAIL_("round %d, x[%u] = %u, the model has %u", round, i, x[i], model[i]);
        }
        free(model);
        fixture_close(&f);
    }
}

/* Two tasks fail (their status words): the run fails naming the lower,
 * whatever order the device ran them in, and copies nothing back. */
TEST(opencl_the_lowest_failing_task_is_named)
{
    if (test_backend_skipped("opencl"))
        return;
    fixture f;
    ASSERT(fixture_open(&f, NULL));
    uint32_t before = ((const uint32_t *)hg_hostbuf_data(f.hb))[5];
    chains c = {{step_k(9, 2), step_k(3, 1)}}; /* tasks 38 and 13 */
    ASSERT_EQ(run(&f, &c, HG_STAGED), HG_EKERNEL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "task 13 (kernel 'lane1') failed with code 7");
    ASSERT_UEQ(((const uint32_t *)hg_hostbuf_data(f.hb))[5], before);
    c = (chains){{0, 0}};
    ASSERT_OK(run(&f, &c, HG_STAGED)); /* the next run is clean */
    fixture_close(&f);
}

typedef struct task_span {
    double ts, dur;
    unsigned lane;
    bool seen;
    char name[16];
} task_span;

/* Reads the task spans of the trace's JSON, by task number. */
static int read_spans(hg_trace *t, task_span *out, uint32_t n)
{
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    if (f == NULL)
        return -1;
    trace_write(t, f);
    fclose(f);
    int found = 0;
    for (char *p = strstr(json, "\"ph\":\"X\""); p != NULL; p = strstr(p + 1, "\"ph\":\"X\"")) {
        char name[16];
        unsigned tid, run, task;
        double ts, dur;
        if (sscanf(p,
                   "\"ph\":\"X\",\"name\":\"%15[^\"]\",\"cat\":\"task\",\"pid\":2,\"tid\":%u,"
                   "\"ts\":%lf,\"dur\":%lf,\"args\":{\"run\":%u,\"task\":%u}",
                   name, &tid, &ts, &dur, &run, &task) != 6 ||
            task >= n)
            continue;
        if (out[task].seen)
            found = -1000000; /* two spans for one task */
        out[task] = (task_span){ts, dur, tid, true, ""};
        memcpy(out[task].name, name, sizeof name);
        found++;
    }
    free(json);
    return found;
}

/* A traced run: one span per task, named after its kernel, and within each
 * chain a task starts no earlier than its predecessor ended (the device's
 * own times: what the wait lists guarantee). */
TEST(opencl_traced_run_records_one_span_per_task)
{
    if (test_backend_skipped("opencl"))
        return;
    fixture f;
    ASSERT(fixture_open(&f, NULL));
    chains c = {{0, 0}};
    ASSERT_OK(run(&f, &c, HG_STAGED)); /* untraced first: no profiling */
    ASSERT_UEQ(device_debug_profiled_runs(f.dev), 0);
    hg_trace *trace;
    ASSERT_OK(hg_trace_create(&trace));
    hg_runner_set_trace(f.r, trace);
    ASSERT_OK(run(&f, &c, HG_STAGED));
    ASSERT_UEQ(device_debug_profiled_runs(f.dev), 1);
    ASSERT_UEQ(hg_trace_num_task_spans(trace), LANES * DEPTH);
    task_span sp[LANES * DEPTH];
    memset(sp, 0, sizeof sp);
    ASSERT_EQ(read_spans(trace, sp, LANES * DEPTH), LANES * DEPTH);
    for (uint32_t d = 0; d < DEPTH; d++) {
        for (uint32_t l = 0; l < LANES; l++) {
            uint32_t t = d * LANES + l;
            ASSERT(sp[t].seen);
            ASSERT_STR_EQ(sp[t].name, lane_kernel[l].name);
            ASSERT(sp[t].dur >= 0.0);
            /* ts and dur print with 3 decimals (ns): allow their rounding */
            if (d > 0)
                ASSERT(sp[t].ts >= sp[t - LANES].ts + sp[t - LANES].dur - 0.002);
        }
    }
    hg_runner_set_trace(f.r, NULL);
    ASSERT_OK(run(&f, &c, HG_STAGED));
    ASSERT_UEQ(device_debug_profiled_runs(f.dev), 1);
    fixture_close(&f);
    hg_trace_destroy(trace);
}

/* ---------------------------------------------- a blocking host step */

/* The scenario of a host step that blocks: H0 waits for a flag, K1 depends
 * on H0, K2 and K3 are independent of both (K3 lands on K1's queue with
 * queues=1 and queues=2: task t % 2), and H4 depends on K3 and sets the
 * flag.  Only a run where K3 does not wait behind K1 finishes.  H0's wait
 * is bounded (the watchdog): a regression fails after BLOCK_LIMIT_S instead
 * of hanging the test. */
#define BLOCK_LIMIT_S 20

typedef struct blocking {
    atomic_int flag;     /* set by H4 */
    atomic_int watchdog; /* set by H0 when it gave up waiting */
} blocking;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* H0: waits for the flag (at most BLOCK_LIMIT_S), then x += 1. */
static int h_wait_flag(const hg_kernel_ctx *ctx)
{
    blocking *b = (blocking *)(uintptr_t)ctx->scalars[0];
    const double give_up = now_s() + BLOCK_LIMIT_S;
    while (!atomic_load(&b->flag)) {
        if (now_s() > give_up) {
            atomic_store(&b->watchdog, 1);
            break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    uint32_t *x = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        x[i] += 1u;
    return 0;
}

/* H4: reads y (its input: it follows K3), sets the flag. */
static int h_set_flag(const hg_kernel_ctx *ctx)
{
    atomic_store(&((blocking *)(uintptr_t)ctx->scalars[0])->flag, 1);
    return 0;
}

/* The sim's chain_step: x = x * 3 + k. */
static int k_step_host(const hg_kernel_ctx *ctx)
{
    uint32_t *x = ctx->args[0].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        x[i] = x[i] * 3u + (uint32_t)ctx->scalars[0];
    return 0;
}

static const hg_kernel K_STEP = {"step", k_step_host, HG_CORE_VECTOR, step_cl, "chain_step"};
static const hg_kernel H_WAIT = {"wait_flag", h_wait_flag, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel H_SET = {"set_flag", h_set_flag, HG_CORE_VECTOR, NULL, NULL};

/* x's first half is H0 -> K1's; its second half K2 -> K3 -> H4's. */
static int blocking_orch(hg_orch *o, void *user)
{
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    hg_tensor lo = x->tensor, hi = x->tensor;
    lo.shape[0] = hi.shape[0] = N / 2;
    hi.offset = N / 2;
    const uint64_t me[1] = {(uint64_t)(uintptr_t)user};
    const uint64_t k1[2] = {1, UINT64_MAX}, k2[2] = {2, UINT64_MAX}, k3[2] = {3, UINT64_MAX};
    hg_task_arg on_lo = {0, HG_INOUT, lo}, on_hi = {0, HG_INOUT, hi}, read_hi = {0, HG_IN, hi};
    const hg_task_desc d[5] = {
        {&H_WAIT, &on_lo, 1, me, 1, NULL, 0},  {&K_STEP, &on_lo, 1, k1, 2, NULL, 0},
        {&K_STEP, &on_hi, 1, k2, 2, NULL, 0},  {&K_STEP, &on_hi, 1, k3, 2, NULL, 0},
        {&H_SET, &read_hi, 1, me, 1, NULL, 0},
    };
    for (int t = 0; t < 5 && rc == 0; t++)
        rc = d[t].kernel->fn != k_step_host ? hg_task_submit_host_step(o, &d[t], NULL)
                                            : hg_task_submit(o, &d[t], NULL);
    return rc;
}

/* On the sim, on PoCL's out-of-order queue and on 1 and 2 in-order queues:
 * the run finishes without the watchdog, with the model's bytes. */
TEST(a_host_step_that_blocks_holds_up_no_task_that_does_not_depend_on_it)
{
    static const char *const specs[][2] = {
        {"sim", "cores=2"}, {"opencl", NULL}, {"opencl", "queues=1"}, {"opencl", "queues=2"}};
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
        if (c == 1 && test_backend_skipped("opencl"))
            return;
        printf("     %s%s%s\n", specs[c][0], specs[c][1] ? ":" : "",
               specs[c][1] ? specs[c][1] : "");
        fixture f;
        ASSERT(test_one_arg_open(&f, specs[c][0], specs[c][1], N));
        uint32_t *x = hg_hostbuf_data(f.hb);
        for (uint32_t i = 0; i < N; i++)
            x[i] = i;
        blocking b = {0, 0};
        hg_callable cl = {"blocking", blocking_orch, &b};
        int rc = hg_runner_run(f.r, &cl, &f.arg, 1, NULL);
        if (rc != 0)
            TEST_FAIL_("%s: %s", specs[c][0], hg_runner_errmsg(f.r));
        if (atomic_load(&b.watchdog))
            TEST_FAIL_("%s%s%s: H0 waited %d s for H4, which waits behind K1 (H0's dependent)",
                       specs[c][0], specs[c][1] ? ":" : "", specs[c][1] ? specs[c][1] : "",
                       BLOCK_LIMIT_S);
        for (uint32_t i = 0; i < N; i++) {
            uint32_t want = i < N / 2 ? (i + 1u) * 3u + 1u : (i * 3u + 2u) * 3u + 3u;
            if (x[i] != want)
                TEST_FAIL_("%s: x[%u] = %u, the model has %u", specs[c][0], i, x[i], want);
        }
        test_one_arg_close(&f);
    }
}

int main(void)
{
    return RUN_TESTS();
}
