/*
 * task_overhead.c: the runtime's cost per task, with kernels that do nothing.
 *
 *     task_overhead [tasks (default 20000)] [device spec (default sim:cores=2)]
 *
 * Builds graphs of N empty tasks in three shapes and times, separately, the
 * graph build (graph_add_task for each task + graph_finalize) and the
 * execution (exec_run), over several repetitions on one reused graph:
 *   independent  no edges: the scheduler's pure dispatch cost;
 *   chain        task i depends on i-1: every task waits on a completion;
 *   fan64        1 -> 64 -> 1 diamonds, chained: fan-out and fan-in.
 * Tasks alternate cube and vector kernels when the device runs both.  It
 * prints measured numbers only (median and min ns per task) and the ratio
 * chain / independent; it is a benchmark, not a test.
 *
 * Then the tensor map alone (graph build, no execution), ns per task at 1k,
 * 10k and 100k tasks side by side, for access patterns that once cost it
 * quadratic time or memory: 64-byte piece reads in a scattered order; piece
 * reads then whole-buffer reads; 1 KiB writes at random offsets in 64 MiB; a
 * read-after-write chain; piece reads then one whole write (a fan-in); piece
 * writes then 16 whole reads (16 edges per writer, made by the rule).  And
 * arg-less tasks from 1k to 1M, which must stay flat.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "exec/exec.h"
#include "graph/graph.h"

#define REPS 7
#define FAN  64

typedef enum pattern { PAT_INDEPENDENT, PAT_CHAIN, PAT_FAN, PAT_COUNT } pattern;

static const char *const pattern_name[PAT_COUNT] = {"independent", "chain", "fan64"};

static int empty_kernel(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel k_cube = {"empty_cube", empty_kernel, HG_CORE_CUBE, NULL, NULL};
static const hg_kernel k_vector = {"empty_vector", empty_kernel, HG_CORE_VECTOR, NULL, NULL};

typedef struct bench {
    hg_device *dev;
    graph g;
    bool cube, vector; /* which kernel types the device runs */
    uint32_t ntasks;
} bench;

static const hg_kernel *kernel_for(const bench *b, uint32_t t)
{
    if (b->cube && b->vector)
        return t % 2 ? &k_vector : &k_cube;
    return b->cube ? &k_cube : &k_vector;
}

/* The explicit deps of task t in pattern p, into deps; returns how many. */
static uint32_t deps_for(pattern p, uint32_t t, hg_task_id *deps)
{
    if (p == PAT_INDEPENDENT || t == 0)
        return 0;
    if (p == PAT_CHAIN) {
        deps[0] = t - 1;
        return 1;
    }
    /* diamonds of FAN + 1 tasks: a sink every FAN + 1 tasks, at 0, 65, ... */
    uint32_t pos = t % (FAN + 1), sink = t - pos;
    if (pos != 0) {
        deps[0] = sink;
        return 1;
    }
    for (uint32_t m = 0; m < FAN; m++)
        deps[m] = t - FAN + m;
    return FAN;
}

static int build(bench *b, pattern p, hg_err *e)
{
    hg_task_id deps[FAN], id;
    graph_reset(&b->g);
    for (uint32_t t = 0; t < b->ntasks; t++) {
        uint32_t ndeps = deps_for(p, t, deps);
        int rc = graph_add_task(&b->g, kernel_for(b, t), NULL, 0, NULL, 0, deps, ndeps, &id, e);
        if (rc != 0)
            return rc;
    }
    return graph_finalize(&b->g, e);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Times REPS builds and executions of pattern p.  out gets ns per task:
 * build median, build min, exec median, exec min. */
static int measure(bench *b, pattern p, double out[4])
{
    uint64_t tb[REPS], te[REPS];
    hg_err e;
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = clock_now_ns();
        int rc = build(b, p, &e);
        uint64_t t1 = clock_now_ns();
        if (rc == 0)
            rc = exec_run(b->dev, &b->g, NULL, (uint32_t)r, &e);
        uint64_t t2 = clock_now_ns();
        if (rc != 0) {
            fprintf(stderr, "task_overhead: %s: %s (%s)\n", pattern_name[p], e.msg,
                    hg_strerror(rc));
            return rc;
        }
        tb[r] = t1 - t0;
        te[r] = t2 - t1;
    }
    qsort(tb, REPS, sizeof tb[0], cmp_u64);
    qsort(te, REPS, sizeof te[0], cmp_u64);
    double n = (double)b->ntasks;
    out[0] = (double)tb[REPS / 2] / n;
    out[1] = (double)tb[0] / n;
    out[2] = (double)te[REPS / 2] / n;
    out[3] = (double)te[0] / n;
    return 0;
}

/* ------------------------------------------------------ the tensor map */

typedef enum access_pattern {
    ACC_FRAG_READS,
    ACC_WHOLE_AFTER_FRAGS,
    ACC_RANDOM_WRITES,
    ACC_RAW_CHAIN,
    ACC_FAN_IN,
    ACC_WRITES_THEN_READS,
    ACC_COUNT
} access_pattern;

static const char *const access_name[ACC_COUNT] = {"frag_reads",       "whole_after_frags",
                                                   "random_1k_writes", "raw_chain",
                                                   "fan_in",           "writes_then_16_reads"};

#define BUF     0x10000000ull
#define PIECE   64
#define READERS 16 /* whole reads after the piece writes */
#define BUF_64M (64u << 20)

static hg_devaddr piece_at(uint64_t i)
{
    return BUF + i * PIECE;
}

/* The args of task t of n in pattern p; returns how many. */
static uint32_t access_args(access_pattern p, uint32_t t, uint32_t n, uint64_t *rng,
                            graph_targ *args)
{
    uint32_t scattered = (uint32_t)((uint64_t)t * 7919 % n), half = n / 2;
    switch (p) {
    case ACC_FRAG_READS:
        args[0] = graph_targ_bytes(piece_at(scattered), piece_at(scattered + 1), true, false);
        return 1;
    case ACC_WHOLE_AFTER_FRAGS:
        args[0] = t < half ? graph_targ_bytes(piece_at(t), piece_at(t + 1), true, false)
                           : graph_targ_bytes(piece_at(0), piece_at(half), true, false);
        return 1;
    case ACC_RANDOM_WRITES: {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        hg_devaddr lo = BUF + (*rng >> 33) % (BUF_64M - 1024);
        args[0] = graph_targ_bytes(lo, lo + 1024, false, true);
        return 1;
    }
    case ACC_RAW_CHAIN:
        args[0] = graph_targ_bytes(piece_at(t), piece_at(t + 1), false, true);
        args[1] = graph_targ_bytes(piece_at(t) - PIECE, piece_at(t), true, false);
        return t > 0 ? 2 : 1;
    case ACC_FAN_IN:
        args[0] = t + 1 < n ? graph_targ_bytes(piece_at(t), piece_at(t + 1), true, false)
                            : graph_targ_bytes(piece_at(0), piece_at(n), false, true);
        return 1;
    default:
        args[0] = t + READERS < n
                      ? graph_targ_bytes(piece_at(t), piece_at(t + 1), false, true)
                      : graph_targ_bytes(piece_at(0), piece_at(n - READERS), true, false);
        return 1;
    }
}

/* Builds n tasks of pattern p (ACC_COUNT: arg-less) three times; returns the
 * fastest build in ns per task, and the edges per task in *edges. */
static double map_build(graph *g, int p, uint32_t n, double *edges)
{
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < 3; r++) {
        uint64_t rng = 42, t0 = clock_now_ns();
        graph_targ args[2];
        hg_task_id id;
        graph_reset(g);
        for (uint32_t t = 0; t < n; t++) {
            uint32_t nargs = p < ACC_COUNT ? access_args((access_pattern)p, t, n, &rng, args) : 0;
            if (graph_add_task(g, &k_vector, args, nargs, NULL, 0, NULL, 0, &id, NULL) != 0)
                return -1;
        }
        if (graph_finalize(g, NULL) != 0)
            return -1;
        uint64_t dt = clock_now_ns() - t0;
        best = dt < best ? dt : best;
    }
    *edges = (double)g->nedges / n;
    return (double)best / n;
}

static int run_map(graph *g)
{
    static const uint32_t sizes[] = {1000, 10000, 100000, 1000000};
    double edges = 0;
    printf("\ntensor map: graph build only, ns/task (min of 3)\n%-22s", "pattern");
    for (int i = 0; i < 4; i++)
        printf(" %10u", sizes[i]);
    printf("  edges/task\n");
    for (int p = 0; p <= ACC_COUNT; p++) {
        printf("%-22s", p < ACC_COUNT ? access_name[p] : "arg-less");
        for (int i = 0; i < 4; i++) {
            if (p < ACC_COUNT && sizes[i] > 100000) {
                printf(" %10s", "");
                continue;
            }
            double ns = map_build(g, p, sizes[i], &edges);
            if (ns < 0)
                return HG_ENOMEM;
            printf(" %10.1f", ns);
            fflush(stdout);
        }
        printf("  %.2f\n", edges);
    }
    return 0;
}

static void find_core_types(bench *b)
{
    for (uint32_t c = 0; c < hg_device_num_cores(b->dev); c++) {
        hg_core_type t = hg_device_core_type(b->dev, c);
        b->cube |= t != HG_CORE_VECTOR;
        b->vector |= t != HG_CORE_CUBE;
    }
}

static int run_all(bench *b)
{
    double res[PAT_COUNT][4];
    printf("task_overhead: %u empty tasks, device %s, %d reps, ns/task (median / min)\n", b->ntasks,
           hg_device_spec(b->dev), REPS);
    printf("%-12s %20s %20s\n", "pattern", "build", "exec");
    for (int p = 0; p < PAT_COUNT; p++) {
        int rc = measure(b, (pattern)p, res[p]);
        if (rc != 0)
            return rc;
        printf("%-12s %9.1f / %8.1f %9.1f / %8.1f\n", pattern_name[p], res[p][0], res[p][1],
               res[p][2], res[p][3]);
    }
    printf("exec ratio chain/independent: %.2f (median), fan64/independent: %.2f\n",
           res[PAT_CHAIN][2] / res[PAT_INDEPENDENT][2], res[PAT_FAN][2] / res[PAT_INDEPENDENT][2]);
    return 0;
}

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    if (n < 1 || n > 100000000) {
        fprintf(stderr, "task_overhead: task count must be 1..100000000, got '%s'\n", argv[1]);
        return 2;
    }
    b.ntasks = (uint32_t)n;
    char msg[256] = "";
    if (hg_device_open(spec, &b.dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "task_overhead: %s\n", msg);
        return 2;
    }
    find_core_types(&b);
    graph_init(&b.g);
    int rc = run_all(&b);
    if (rc == 0)
        rc = run_map(&b.g);
    graph_free(&b.g);
    hg_device_close(b.dev);
    return rc == 0 ? 0 : 1;
}
