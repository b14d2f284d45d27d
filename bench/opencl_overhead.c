/*
 * opencl_overhead.c: hostgraph's cost per task on an OpenCL device with
 * empty kernels, through the public API, the side of the comparison with
 * StarPU's OpenCL driver (bench/peers/starpu_overhead.c) on the same device.
 *
 *     opencl_overhead [tasks (default 10000)] [device spec (default opencl)] [reps (default 5)]
 *
 * Two shapes, as the StarPU peer:
 *   chain        every task INOUT on one 4-byte resident tensor: inferred
 *                dependencies make each wait for the one before;
 *   independent  every task IN on that tensor: no dependencies.
 * Each task launches one work item of an empty kernel (the calling
 * convention: one work item per element of the first written arg, one when
 * the task writes nothing).  A repetition is one hg_runner_run (submit,
 * bind, enqueue, one wait, copy-back of 4 bytes for the chain); the first
 * (program build, resident copy) is dropped.  Printed: median, min and
 * max microseconds per task (the run's wall over its tasks), the share of
 * the slowest rep spent in exec (enqueue and the one wait), and every rep.  A benchmark, not
 * a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hostgraph.h"

static int empty_kernel(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel k_empty = {"empty", empty_kernel, HG_CORE_VECTOR,
                                  "__kernel void empty(HG_STATUS_ARGS, HG_TENSOR(int, x)) {}",
                                  "empty"};

typedef struct shape {
    const char *name;
    hg_dir access;
    uint32_t tasks;
} shape;

static int orchestrate(hg_orch *o, void *user)
{
    const shape *s = user;
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    for (uint32_t t = 0; t < s->tasks && rc == 0; t++) {
        hg_task_arg ta = {0, s->access, x->tensor};
        hg_task_desc d = {&k_empty, &ta, 1, NULL, 0, NULL, 0};
        rc = hg_task_submit(o, &d, NULL);
    }
    return rc;
}

/* Prints the reps' us/task, sorted, so a noisy median shows whether one
 * rep or many were slow. */
static void print_reps(const uint64_t *sorted_ns, int reps, uint32_t tasks)
{
    printf("  reps (us/task, sorted):");
    for (int i = 0; i < reps; i++)
        printf(" %.1f", (double)sorted_ns[i] / 1e3 / tasks);
    printf("\n");
}

static int measure(hg_runner *r, hg_arg *arg, shape *s, int reps)
{
    uint64_t *wall = calloc((size_t)reps, sizeof *wall);
    uint64_t exec_max = 0, wall_max = 0;
    hg_callable c = {s->name, orchestrate, s};
    arg->dir = s->access == HG_IN ? HG_IN : HG_INOUT;
    for (int rep = -1; rep < reps; rep++) {
        hg_run_stats st;
        if (hg_runner_run(r, &c, arg, 1, &st) != 0) {
            fprintf(stderr, "opencl_overhead: %s\n", hg_runner_errmsg(r));
            free(wall);
            return 1;
        }
        if (rep < 0)
            continue;
        wall[rep] = st.wall_ns;
        if (st.wall_ns > wall_max) {
            wall_max = st.wall_ns;
            exec_max = st.exec_ns;
        }
    }
    double med_ms = bench_median_ms(wall, reps); /* sorts wall */
    printf("hostgraph %-12s %u tasks: median %.2f us/task, min %.2f us/task, max %.2f us/task "
           "(%.0f%% of it exec) (%d reps)\n",
           s->name, s->tasks, med_ms * 1e3 / s->tasks, (double)wall[0] / 1e3 / s->tasks,
           (double)wall_max / 1e3 / s->tasks, 100.0 * (double)exec_max / (double)wall_max, reps);
    print_reps(wall, reps, s->tasks);
    free(wall);
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t tasks = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 10000;
    const char *spec = argc > 2 ? argv[2] : "opencl";
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *hb;
    char msg[256] = "";
    if (reps < 1 || hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "opencl_overhead: device '%s': %s\n", spec, msg);
        return 1;
    }
    size_t one = 1;
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_RESIDENT};
    if (hg_runner_open(dev, &r) != 0 || hg_hostbuf_create(sizeof(int32_t), &hb) != 0 ||
        hg_tensor_host(&arg.tensor, hb, HG_I32, 1, &one) != 0)
        return 1;
    printf("device %s\n", hg_device_spec(dev));
    shape chain = {"chain", HG_INOUT, tasks}, indep = {"independent", HG_IN, tasks};
    int rc = measure(r, &arg, &chain, reps) || measure(r, &arg, &indep, reps);
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
    return rc;
}
