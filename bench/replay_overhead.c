/*
 * replay_overhead.c: the cost per task of a whole run through the public API,
 * with kernels that do nothing, orchestrated against replayed.
 *
 *     replay_overhead [tasks (default 20000)] [device spec (default sim:cores=2)] [--replay]
 *                     [--resident]
 *
 * Where task_overhead times the graph and the scheduler alone, this goes
 * through hg_runner_run: bind (one IN and one INOUT arg), an orchestration
 * that submits N tasks with hg_task_submit (each reads a 64-byte tile of the
 * IN arg and writes its own 64-byte tile of the INOUT arg, so every task arg
 * is resolved and dependency inference sees real regions), execution, copy
 * back and release.  It prints the median over several runs of each stage in
 * ns per task, and the share of the run the orchestration API takes.
 *
 * --replay: also a runner with hg_runner_set_replay (its first run records,
 * unreported) and one that records every run (replay on, the callable's
 * name alternating, so each run orchestrates and replaces the recording),
 * their runs interleaved with the first's, and the ratios of their host time
 * per task (wall - execute - copies) to the first's, from this one run.
 *
 * --resident: both args HG_RESIDENT (--residency all): a later run uploads
 * nothing (in is current; out's copy was published by its own copy-back)
 * and copies back only the written tiles.  Default: both staged.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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

typedef struct series {
    hg_runner *r;
    uint64_t wall[REPS], bind[REPS], orch[REPS], exec[REPS], back[REPS], host[REPS];
    uint64_t faults[REPS];              /* page faults of the whole run (getrusage minflt) */
    uint64_t release[REPS], rest[REPS]; /* release; the run outside its timed stages */
    uint32_t replayed;
} series;

static int run_once(series *m, int i, const hg_callable *c, const hg_arg *args)
{
    hg_run_stats s;
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    int rc = hg_runner_run(m->r, c, args, 2, &s);
    getrusage(RUSAGE_SELF, &u1);
    m->faults[i] = (uint64_t)(u1.ru_minflt - u0.ru_minflt);
    if (rc != 0) {
        fprintf(stderr, "run failed: %s\n", hg_runner_errmsg(m->r));
        return 3;
    }
    m->wall[i] = s.wall_ns, m->bind[i] = s.bind_ns, m->orch[i] = s.orch_ns;
    m->exec[i] = s.exec_ns, m->back[i] = s.copyback_ns;
    m->host[i] = s.wall_ns - s.exec_ns - s.h2d_ns - s.d2h_ns;
    m->release[i] = s.release_ns;
    m->rest[i] = s.wall_ns - s.bind_ns - s.orch_ns - s.exec_ns - s.copyback_ns - s.release_ns;
    m->replayed += s.replayed;
    return 0;
}

/* Prints one runner's medians; returns its host ns per task. */
static double print_series(series *m, const char *label, size_t nt)
{
    double w = median_per_task(m->wall, nt), o = median_per_task(m->orch, nt);
    double h = median_per_task(m->host, nt);
    printf("%sns/task: run %.1f  bind %.1f  orchestrate %.1f  execute %.1f  copy back %.1f  "
           "host %.1f\n",
           label, w, median_per_task(m->bind, nt), o, median_per_task(m->exec, nt),
           median_per_task(m->back, nt), h);
    printf("%sorchestrate / run: %.2f  (replayed %u of %d runs)  page faults/task %.4f  release "
           "%.1f  untimed %.1f\n",
           label, o / w, m->replayed, REPS, median_per_task(m->faults, nt),
           median_per_task(m->release, nt), median_per_task(m->rest, nt));
    return h;
}

int main(int argc, char **argv)
{
    bool replay = false, resident = false;
    while (argc > 1 && strncmp(argv[argc - 1], "--", 2) == 0) {
        if (strcmp(argv[argc - 1], "--replay") == 0)
            replay = true;
        else if (strcmp(argv[argc - 1], "--resident") == 0)
            resident = true;
        else
            break;
        argc--;
    }
    long n = argc > 1 ? atol(argv[1]) : 20000;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    if (n < 1 || n > 10000000) {
        fprintf(stderr, "tasks: want 1..10000000, got '%s'\n", argv[1]);
        return 2;
    }
    char msg[256];
    hg_device *dev;
    series m[3] = {{0}, {0}, {0}};
    hg_hostbuf *in, *out;
    size_t shape[1] = {(size_t)n * TILE};
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    if (hg_runner_open(dev, &m[0].r) || hg_runner_open(dev, &m[1].r) ||
        hg_runner_open(dev, &m[2].r) || hg_hostbuf_create(shape[0] * 4, &in) ||
        hg_hostbuf_create(shape[0] * 4, &out))
        return 3;
    const hg_residency res = resident ? HG_RESIDENT : HG_STAGED;
    hg_arg args[2] = {{"in", HG_IN, {0}, 0, res}, {"out", HG_INOUT, {0}, 0, res}};
    hg_tensor_host(&args[0].tensor, in, HG_F32, 1, shape);
    hg_tensor_host(&args[1].tensor, out, HG_F32, 1, shape);
    hg_callable c = {"empty_tiles", orchestrate, NULL};
    hg_callable other[2] = {{"empty_tiles_a", orchestrate, NULL},
                            {"empty_tiles_b", orchestrate, NULL}};
    hg_runner_set_replay(m[1].r, true);
    hg_runner_set_replay(m[2].r, true);
    if (replay && (run_once(&m[1], 0, &c, args) || run_once(&m[2], 0, &other[1], args)))
        return 3; /* the first records; the third's warm-up recording */
    for (int i = 0; i < REPS; i++)
        for (int k = 0; k < (replay ? 3 : 1); k++)
            if (run_once(&m[k], i, k == 2 ? &other[i % 2] : &c, args) != 0)
                return 3;
    size_t nt = (size_t)n;
    printf("replay_overhead: %ld empty tasks (2 task args each), device %s, args %s, median of %d "
           "runs\n",
           n, hg_device_spec(dev), resident ? "resident" : "staged", REPS);
    double h0 = print_series(&m[0], "", nt);
    if (replay) {
        double h1 = print_series(&m[1], "replay: ", nt);
        double h2 = print_series(&m[2], "recording every run: ", nt);
        printf("replayed / orchestrated host time per task: %.3f; recorded / orchestrated: %.3f "
               "(this run)\n",
               h1 / h0, h2 / h0);
    }
    hg_runner_close(m[0].r);
    hg_runner_close(m[1].r);
    hg_runner_close(m[2].r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(out);
    hg_device_close(dev);
    return 0;
}
