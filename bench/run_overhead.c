/*
 * run_overhead.c: the cost per task of a whole run through the public API,
 * with kernels that do nothing.
 *
 *     run_overhead [tasks (default 20000)] [device spec (default sim:cores=2)]
 *
 * Where task_overhead times the graph and the scheduler alone, this goes
 * through hg_runner_run: bind (one IN and one INOUT arg), an orchestration
 * that submits N tasks with hg_task_submit (each reads a 64-byte tile of the
 * IN arg and writes its own 64-byte tile of the INOUT arg, so every task arg
 * is resolved and dependency inference sees real regions), execution, copy
 * back and release.  It prints the median over several runs of each stage in
 * ns per task, and the share of the run the orchestration API takes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hostgraph.h"

#define REPS 7
#define TILE 16 /* f32 elements: 64 bytes */

static int empty_kernel(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel k_empty = {"empty", empty_kernel, HG_CORE_VECTOR, NULL, NULL};

static int orchestrate(hg_orch *o, void *user)
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    size_t tiles = in->tensor.shape[0] / TILE;
    for (size_t t = 0; t < tiles; t++) {
        hg_task_arg ta[2] = {{0, HG_IN, {0}}, {1, HG_INOUT, {0}}};
        int rc = hg_tensor_slice(&in->tensor, 0, t * TILE, TILE, &ta[0].view);
        if (rc == 0)
            rc = hg_tensor_slice(&out->tensor, 0, t * TILE, TILE, &ta[1].view);
        hg_task_desc d = {&k_empty, ta, 2, NULL, 0, NULL, 0};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_per_task(uint64_t *v, size_t ntasks)
{
    qsort(v, REPS, sizeof *v, cmp_u64);
    return (double)v[REPS / 2] / (double)ntasks;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    if (n < 1 || n > 10000000) {
        fprintf(stderr, "tasks: want 1..10000000, got '%s'\n", argv[1]);
        return 2;
    }
    char msg[256];
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *in, *out;
    size_t shape[1] = {(size_t)n * TILE};
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    if (hg_runner_open(dev, &r) || hg_hostbuf_create(shape[0] * 4, &in) ||
        hg_hostbuf_create(shape[0] * 4, &out))
        return 3;
    hg_arg args[2] = {{"in", HG_IN, {0}, 0, HG_STAGED}, {"out", HG_INOUT, {0}, 0, HG_STAGED}};
    hg_tensor_host(&args[0].tensor, in, HG_F32, 1, shape);
    hg_tensor_host(&args[1].tensor, out, HG_F32, 1, shape);
    hg_callable c = {"empty_tiles", orchestrate, NULL};
    uint64_t wall[REPS], bind[REPS], orch[REPS], exec[REPS], back[REPS];
    for (int i = 0; i < REPS; i++) {
        hg_run_stats s;
        if (hg_runner_run(r, &c, args, 2, &s) != 0) {
            fprintf(stderr, "run failed: %s\n", hg_runner_errmsg(r));
            return 3;
        }
        wall[i] = s.wall_ns, bind[i] = s.bind_ns, orch[i] = s.orch_ns;
        exec[i] = s.exec_ns, back[i] = s.copyback_ns;
    }
    size_t nt = (size_t)n;
    double w = median_per_task(wall, nt), o = median_per_task(orch, nt);
    printf("run_overhead: %ld empty tasks (2 task args each), device %s, median of %d runs\n", n,
           hg_device_spec(dev), REPS);
    printf("ns/task: run %.1f  bind %.1f  orchestrate %.1f  execute %.1f  copy back %.1f\n", w,
           median_per_task(bind, nt), o, median_per_task(exec, nt), median_per_task(back, nt));
    printf("orchestrate / run: %.2f\n", o / w);
    hg_runner_close(r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(out);
    hg_device_close(dev);
    return 0;
}
