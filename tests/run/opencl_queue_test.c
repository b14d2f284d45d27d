/*
 * opencl_queue_test.c: a graph on the OpenCL device runs as enqueued work
 * with event wait lists from its inferred dependencies: on the device's
 * out-of-order queue (PoCL has one) and on in-order queues (queues=N, the
 * shape for a device without one).  Chains of read-modify-write tasks whose
 * result depends on their order, interleaved with independent chains, give
 * the host model's bytes round after round; the lowest failing task is
 * named; a traced run records one span per task, with its kernel's name,
 * from the device's own times, and each chain's spans in order.  Skipped
 * with "skipped: no OpenCL platform" where there is none.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <string.h>

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

int main(void)
{
    return RUN_TESTS();
}
