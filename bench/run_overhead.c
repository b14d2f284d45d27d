/*
 * run_overhead.c: the cost per task of a whole run through the public API,
 * with kernels that do nothing, first run against warm runs, 10^3 tasks up.
 *
 *     run_overhead [max tasks (default 1000000)] [device spec (default sim:cores=2)]
 *                  [pattern (default: all)]
 *
 * Every run goes through hg_runner_run: bind (one IN and one INOUT arg of
 * 64 bytes a task), an orchestration that submits N tasks with
 * hg_task_submit (dependencies inferred from their views), execution, copy
 * back and release.  Patterns:
 *   independent  task t reads tile t of `in` and writes tile t of `out`;
 *   chain        every task reads and writes the same 64 bytes of `out`;
 *   readers      task 0 writes 64 bytes of `out`, every other task reads
 *                them: a fan of N - 1 readers on one arg;
 *   frag         64-byte reads of `out` in a scattered order, and every 32nd
 *                task writes 1 KiB (16 pieces) over them: fragmented readers.
 * For each pattern and size (10^3, 10^4, ... up to max) three processes are
 * forked; each opens its own device and runner, times its first run and the
 * median of REPS warm runs after it.  It prints per stage the median over
 * the processes of both, in ns per task, and first / warm: a first run is
 * measured in a fresh process, where nothing is warm yet.  Ratios are
 * measured side by side, in one process; the figures are medians, never one
 * sample, since the machine is shared.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostgraph.h"

#define REPS    3  /* warm runs per process */
#define PROCS   3  /* processes per point */
#define TILE    16 /* f32 elements: 64 bytes */
#define FRAG_W  32 /* frag: every FRAG_W-th task writes */
#define FRAG_WB 16 /* frag: tiles a write covers */

typedef enum pattern { PAT_INDEPENDENT, PAT_CHAIN, PAT_READERS, PAT_FRAG, PAT_COUNT } pattern;

static const char *const pattern_name[PAT_COUNT] = {"independent", "chain", "readers", "frag"};

/* The stages printed, as indices into sample.ns. */
enum { ST_WALL, ST_BIND, ST_ORCH, ST_EXEC, ST_BACK, ST_COUNT };
static const char *const stage_name[ST_COUNT] = {"run", "bind", "orch", "exec", "back"};

typedef struct sample {
    double first[ST_COUNT], warm[ST_COUNT]; /* ns per task */
    double edges;                           /* per task */
} sample;

typedef struct job {
    pattern p;
    size_t ntasks;
} job;

static int empty_kernel(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel k_empty = {"empty", empty_kernel, HG_CORE_VECTOR, NULL, NULL};

static int submit(hg_orch *o, const hg_arg *a, uint32_t arg, hg_dir access, size_t tile,
                  size_t tiles)
{
    hg_task_arg ta = {arg, access, {0}};
    int rc = hg_tensor_slice(&a->tensor, 0, tile * TILE, tiles * TILE, &ta.view);
    hg_task_desc d = {&k_empty, &ta, 1, NULL, 0, NULL, 0};
    return rc != 0 ? rc : hg_task_submit(o, &d, NULL);
}

static int submit_tile_pair(hg_orch *o, const hg_arg *in, const hg_arg *out, size_t t)
{
    hg_task_arg ta[2] = {{0, HG_IN, {0}}, {1, HG_INOUT, {0}}};
    int rc = hg_tensor_slice(&in->tensor, 0, t * TILE, TILE, &ta[0].view);
    if (rc == 0)
        rc = hg_tensor_slice(&out->tensor, 0, t * TILE, TILE, &ta[1].view);
    hg_task_desc d = {&k_empty, ta, 2, NULL, 0, NULL, 0};
    return rc != 0 ? rc : hg_task_submit(o, &d, NULL);
}

/* Task t of n in pattern p. */
static int submit_task(hg_orch *o, const job *j, const hg_arg *in, const hg_arg *out, size_t t)
{
    size_t n = j->ntasks;
    switch (j->p) {
    case PAT_INDEPENDENT:
        return submit_tile_pair(o, in, out, t);
    case PAT_CHAIN:
        return submit(o, out, 1, HG_INOUT, 0, 1);
    case PAT_READERS:
        return submit(o, out, 1, t == 0 ? HG_INOUT : HG_IN, 0, 1);
    default:
        if (t % FRAG_W == FRAG_W - 1 && n >= FRAG_WB) {
            size_t blocks = n / FRAG_WB;
            return submit(o, out, 1, HG_INOUT, (t * 4099 % blocks) * FRAG_WB, FRAG_WB);
        }
        return submit(o, out, 1, HG_IN, t * 7919 % n, 1);
    }
}

static int orchestrate(hg_orch *o, void *user)
{
    const job *j = user;
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    for (size_t t = 0; t < j->ntasks; t++) {
        int rc = submit_task(o, j, in, out, t);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void per_task(const hg_run_stats *s, size_t n, double out[ST_COUNT])
{
    const uint64_t ns[ST_COUNT] = {s->wall_ns, s->bind_ns, s->orch_ns, s->exec_ns, s->copyback_ns};
    for (int k = 0; k < ST_COUNT; k++)
        out[k] = (double)ns[k] / (double)n;
}

/* One process's measure: a first run on a fresh runner, then REPS warm. */
static int measure(const char *spec, job *j, sample *out)
{
    char msg[256];
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *in, *outb;
    size_t shape[1] = {j->ntasks * TILE};
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    if (hg_runner_open(dev, &r) || hg_hostbuf_create(shape[0] * 4, &in) ||
        hg_hostbuf_create(shape[0] * 4, &outb))
        return 3;
    hg_arg args[2] = {{"in", HG_IN, {0}, 0, HG_STAGED}, {"out", HG_INOUT, {0}, 0, HG_STAGED}};
    hg_tensor_host(&args[0].tensor, in, HG_F32, 1, shape);
    hg_tensor_host(&args[1].tensor, outb, HG_F32, 1, shape);
    hg_callable c = {"overhead", orchestrate, j};
    double warm[ST_COUNT][REPS];
    for (int i = 0; i <= REPS; i++) {
        hg_run_stats s;
        if (hg_runner_run(r, &c, args, 2, &s) != 0) {
            fprintf(stderr, "run failed: %s\n", hg_runner_errmsg(r));
            return 3;
        }
        double v[ST_COUNT];
        per_task(&s, j->ntasks, i == 0 ? out->first : v);
        for (int k = 0; i > 0 && k < ST_COUNT; k++)
            warm[k][i - 1] = v[k];
        out->edges = (double)s.edges / (double)j->ntasks;
    }
    for (int k = 0; k < ST_COUNT; k++)
        out->warm[k] = median(warm[k], REPS);
    hg_runner_close(r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(outb);
    hg_device_close(dev);
    return 0;
}

/* measure() in a child process, so that its first run is a process's
 * first; the sample comes back through a pipe. */
static int measure_forked(const char *spec, job *j, sample *out)
{
    int fd[2];
    if (pipe(fd) != 0)
        return 4;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 4;
    if (pid == 0) {
        close(fd[0]);
        sample s;
        int rc = measure(spec, j, &s);
        if (rc == 0 && write(fd[1], &s, sizeof s) != (ssize_t)sizeof s)
            rc = 4;
        _exit(rc);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof *out);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}

/* PROCS processes; the median of each figure over them. */
static int point(const char *spec, job *j, sample *med)
{
    sample s[PROCS];
    for (int i = 0; i < PROCS; i++)
        if (measure_forked(spec, j, &s[i]) != 0)
            return 4;
    for (int k = 0; k < ST_COUNT; k++) {
        double f[PROCS], w[PROCS];
        for (int i = 0; i < PROCS; i++)
            f[i] = s[i].first[k], w[i] = s[i].warm[k];
        med->first[k] = median(f, PROCS);
        med->warm[k] = median(w, PROCS);
    }
    med->edges = s[0].edges;
    return 0;
}

static void print_point(const job *j, const sample *m)
{
    printf("%-12s %8zu %6.2f", pattern_name[j->p], j->ntasks, m->edges);
    for (int k = 0; k < ST_COUNT; k++)
        printf(" %8.1f/%-8.1f", m->first[k], m->warm[k]);
    printf(" %6.2f\n", m->first[ST_WALL] / m->warm[ST_WALL]);
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    const char *only = argc > 3 ? argv[3] : NULL;
    if (max < 1000 || max > 10000000) {
        fprintf(stderr, "max tasks: want 1000..10000000, got '%s'\n", argv[1]);
        return 2;
    }
    printf("run_overhead: empty tasks, device %s; ns/task first/warm (median of %d processes; "
           "warm: median of %d runs each)\n",
           spec, PROCS, REPS);
    printf("%-12s %8s %6s", "pattern", "tasks", "edges");
    for (int k = 0; k < ST_COUNT; k++)
        printf(" %17s", stage_name[k]);
    printf(" %6s\n", "1st/wm");
    for (int p = 0; p < PAT_COUNT; p++) {
        if (only != NULL && strcmp(only, pattern_name[p]) != 0)
            continue;
        double first_warm[2] = {0, 0};
        for (size_t n = 1000; n <= (size_t)max; n *= 10) {
            job j = {(pattern)p, n};
            sample m;
            if (point(spec, &j, &m) != 0) {
                fprintf(stderr, "run_overhead: %s at %zu tasks failed\n", pattern_name[p], n);
                return 3;
            }
            print_point(&j, &m);
            if (n == 1000)
                first_warm[0] = m.warm[ST_WALL];
            first_warm[1] = m.warm[ST_WALL];
            fflush(stdout);
        }
        printf("%-12s growth of warm ns/task, 10^3 -> max: %.2fx\n", pattern_name[p],
               first_warm[1] / first_warm[0]);
    }
    return 0;
}
