/*
 * run_overhead.c: the cost per task of a whole run through the public API,
 * with kernels that do nothing, first run against warm runs, 10^3 tasks up.
 *
 *     run_overhead [max tasks (default 1000000)] [device spec (default sim:cores=2)]
 *                  [pattern, or all (default)] [again | kept]
 *     run_overhead map [max tasks] [pattern, or all (default)]
 *     run_overhead miss
 *
 * `map` builds a pattern's graph alone (graph_add_task for every task, no
 * run), 10^3 tasks up, and prints its cost per task + edge: CPU ns
 * (the least of 3 + 3*10^6 / N builds: a build of 10^3 tasks takes ~0.1 ms)
 * and tree nodes visited (graph_map_stats).  `miss` prices a cache miss
 * here: a random pointer chase through 1 to 128 MiB.
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
 * For each pattern and size (10^3, 10^4, ... up to max) PROCS (5)
 * processes are forked, the sizes taking turns (one process of each size,
 * then again), so a drift of the host's speed weighs on every size alike;
 * each opens its own device and runner, times its first run and the median
 * of the warm runs after it (warm_reps: 3 at 10^5 tasks and up, more below,
 * so that a small graph's median spans ~3*10^5 tasks: a run of 10^3 tasks
 * takes ~0.3 ms, where one preemption moves a sample by half).  It prints
 * per stage the median over the processes of both, in ns per task, and
 * first / warm: a first run is measured in a fresh process, where nothing
 * is warm yet (but the user's host buffers, which it writes before the
 * first run).  Ratios are measured side by side, in one process; the
 * figures are medians, never one sample, since the machine is shared.
 *
 * Where a first run's time goes: each process also counts the page faults
 * (getrusage minflt) of its first and warm runs, per task, those taken
 * inside the orchestration apart, and times the first touch of a fresh
 * 8 MiB block to price one fault on this host.  `1st-flt/wm` is first /
 * warm with every fault of the first run beyond the warm run's priced at
 * that cost and taken out: what the first run would cost where fresh
 * memory is cheap.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "graph/graph.h"
#include "hostgraph.h"

#define REPS    31 /* warm runs per process, at most */
#define PROCS   5  /* processes per point */
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
    double flt_first, flt_warm;             /* page faults per task, whole run */
    double orch_flt_first;                  /* of them, in the orchestration */
    double ns_per_fault;                    /* first touch of a fresh page here */
} sample;

typedef struct job {
    pattern p;
    size_t ntasks;
    long orch_flt; /* page faults inside the last orchestration */
} job;

static long minflt_now(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The price of one page fault here: the first touch of a fresh 8 MiB. */
static double price_fault(void)
{
    const size_t bytes = 8u << 20;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    long f0 = minflt_now();
    double t0 = now_ns();
    memset(p, 1, bytes);
    double dt = now_ns() - t0;
    long faults = minflt_now() - f0;
    munmap(p, bytes);
    return faults > 0 ? dt / (double)faults : 0;
}

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
    job *j = user;
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    long f0 = minflt_now();
    for (size_t t = 0; t < j->ntasks; t++) {
        int rc = submit_task(o, j, in, out, t);
        if (rc != 0)
            return rc;
    }
    j->orch_flt = minflt_now() - f0;
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

/* Warm runs per process at n tasks: 3, or more while that is under
 * ~3*10^5 tasks (odd, so the median is a sample). */
static int warm_reps(size_t n)
{
    size_t r = 300000 / n;
    r = r < 3 ? 3 : r > REPS ? REPS : r;
    return (int)(r | 1);
}

/* One process's measure: a first run on a fresh runner, then warm runs. */
static int measure(hg_device *dev, job *j, sample *out)
{
    hg_runner *r;
    hg_hostbuf *in, *outb;
    size_t shape[1] = {j->ntasks * TILE};
    if (hg_runner_open(dev, &r) || hg_hostbuf_create(shape[0] * 4, &in) ||
        hg_hostbuf_create(shape[0] * 4, &outb))
        return 3;
    /* The user's data is written before the first run, as a program fills
     * its inputs: the first touch of the user's own buffers is not the
     * runtime's cost (calloc hands back untouched pages, which the first
     * upload would read and the first copy-back write). */
    memset(hg_hostbuf_data(in), 1, shape[0] * 4);
    memset(hg_hostbuf_data(outb), 2, shape[0] * 4);
    if (hg_hostbuf_mark_written(in, 0, shape[0] * 4) ||
        hg_hostbuf_mark_written(outb, 0, shape[0] * 4))
        return 3;
    hg_arg args[2] = {{"in", HG_IN, {0}, 0, HG_STAGED}, {"out", HG_INOUT, {0}, 0, HG_STAGED}};
    hg_tensor_host(&args[0].tensor, in, HG_F32, 1, shape);
    hg_tensor_host(&args[1].tensor, outb, HG_F32, 1, shape);
    hg_callable c = {"overhead", orchestrate, j};
    double warm[ST_COUNT][REPS], flt[REPS];
    const int reps = warm_reps(j->ntasks);
    for (int i = 0; i <= reps; i++) {
        hg_run_stats s;
        long f0 = minflt_now();
        if (hg_runner_run(r, &c, args, 2, &s) != 0) {
            fprintf(stderr, "run failed: %s\n", hg_runner_errmsg(r));
            return 3;
        }
        double faults = (double)(minflt_now() - f0) / (double)j->ntasks;
        double v[ST_COUNT];
        per_task(&s, j->ntasks, i == 0 ? out->first : v);
        for (int k = 0; i > 0 && k < ST_COUNT; k++)
            warm[k][i - 1] = v[k];
        if (i == 0) {
            out->flt_first = faults;
            out->orch_flt_first = (double)j->orch_flt / (double)j->ntasks;
        } else {
            flt[i - 1] = faults;
        }
        out->edges = (double)s.edges / (double)j->ntasks;
    }
    for (int k = 0; k < ST_COUNT; k++)
        out->warm[k] = median(warm[k], reps);
    out->flt_warm = median(flt, reps);
    out->ns_per_fault = price_fault();
    hg_runner_close(r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(outb);
    return 0;
}

/* `again` mode: a whole runner's life (first run, warm runs, close) comes
 * first on the same device, and the measured runner is the process's
 * second.  `kept` mode: the same, and malloc keeps what is freed (no
 * mmap'd chunks, no trimming), so the second runner's first run finds the
 * process's memory already touched.  What is left of first / warm there is
 * the runtime's own first-run work, without this host's price of fresh
 * pages. */
static bool run_twice, keep_memory;

static int measure_process(const char *spec, job *j, sample *out)
{
    char msg[256];
    hg_device *dev;
    if (keep_memory) {
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, INT_MAX);
    }
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    int rc = run_twice ? measure(dev, j, out) : 0;
    if (rc == 0)
        rc = measure(dev, j, out);
    hg_device_close(dev);
    return rc;
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
        int rc = measure_process(spec, j, &s);
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

/* The median of each figure over PROCS processes' samples s[]. */
static void point(const sample *s, sample *med)
{
    for (int k = 0; k < ST_COUNT; k++) {
        double f[PROCS], w[PROCS];
        for (int i = 0; i < PROCS; i++)
            f[i] = s[i].first[k], w[i] = s[i].warm[k];
        med->first[k] = median(f, PROCS);
        med->warm[k] = median(w, PROCS);
    }
    double ff[PROCS], fw[PROCS], fo[PROCS], nf[PROCS];
    for (int i = 0; i < PROCS; i++)
        ff[i] = s[i].flt_first, fw[i] = s[i].flt_warm, fo[i] = s[i].orch_flt_first,
        nf[i] = s[i].ns_per_fault;
    med->flt_first = median(ff, PROCS);
    med->flt_warm = median(fw, PROCS);
    med->orch_flt_first = median(fo, PROCS);
    med->ns_per_fault = median(nf, PROCS);
    med->edges = s[0].edges;
}

static void print_point(const job *j, const sample *m)
{
    printf("%-12s %8zu %6.2f", pattern_name[j->p], j->ntasks, m->edges);
    for (int k = 0; k < ST_COUNT; k++)
        printf(" %8.1f/%-8.1f", m->first[k], m->warm[k]);
    double fresh = (m->flt_first - m->flt_warm) * m->ns_per_fault;
    printf(" %6.2f %7.3f/%-6.3f %7.3f %7.0f %6.2f\n", m->first[ST_WALL] / m->warm[ST_WALL],
           m->flt_first, m->flt_warm, m->orch_flt_first, m->ns_per_fault,
           (m->first[ST_WALL] - fresh) / m->warm[ST_WALL]);
}

/* Task t of n in pattern p as graph args: what submit_task declares, in
 * bytes (`in` and `out` where the sim would put them: 2 MiB apart, at
 * least, and 2 MiB aligned).  Returns how many. */
static uint32_t pattern_targs(pattern p, size_t t, size_t n, graph_targ args[2])
{
    const hg_devaddr tile = TILE * 4, out = 0x10000000;
    const hg_devaddr in = out + ((n * tile + (2u << 20) - 1) & ~(hg_devaddr)((2u << 20) - 1));
    size_t at, len = 1;
    switch (p) {
    case PAT_INDEPENDENT:
        args[0] = graph_targ_bytes(in + t * tile, in + (t + 1) * tile, true, false);
        args[1] = graph_targ_bytes(out + t * tile, out + (t + 1) * tile, true, true);
        return 2;
    case PAT_CHAIN:
        args[0] = graph_targ_bytes(out, out + tile, true, true);
        return 1;
    case PAT_READERS:
        args[0] = graph_targ_bytes(out, out + tile, true, t == 0);
        return 1;
    default:
        at = t * 7919 % n;
        if (t % FRAG_W == FRAG_W - 1 && n >= FRAG_WB) {
            at = (t * 4099 % (n / FRAG_WB)) * FRAG_WB;
            len = FRAG_WB;
        }
        args[0] = graph_targ_bytes(out + at * tile, out + (at + len) * tile, true, len > 1);
        return 1;
    }
}

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The graph and tensor map alone on pattern p, 10^3 tasks up to max. */
static int map_only(pattern p, size_t max)
{
    printf("graph + tensor map alone, %s: per task + edge, CPU ns (least of 3 + 3e6/N builds) and "
           "nodes visited\n%8s %6s %8s %8s %7s\n",
           pattern_name[p], "tasks", "edges", "ns", "steps", "height");
    graph g;
    graph_init(&g);
    for (size_t n = 1000; n <= max; n *= 10) {
        double best = 1e300;
        graph_map_counts c;
        for (size_t r = 0; r < 3 + 3000000 / n; r++) {
            graph_reset(&g);
            double t0 = cpu_ns();
            for (size_t t = 0; t < n; t++) {
                graph_targ a[2];
                const uint32_t nargs = pattern_targs(p, t, n, a);
                hg_task_id id;
                if (graph_add_task(&g, &k_empty, a, nargs, NULL, 0, NULL, 0, &id, NULL) != 0)
                    return 3;
            }
            double dt = cpu_ns() - t0;
            best = dt < best ? dt : best;
            graph_map_stats(&g, &c);
        }
        double units = (double)n + g.nedges;
        printf("%8zu %6.2f %8.1f %8.2f %7u\n", n, g.nedges / (double)n, best / units,
               (double)c.steps / units, c.height);
    }
    graph_free(&g);
    return 0;
}

/* The price of a cache miss here: ns per load of a random pointer chase
 * through 1 to 128 MiB of 64-byte lines (each load waits for the last).
 * Where it jumps is the cache a process gets on this host; past it, every
 * scattered visit of a structure that large costs about that much. */
static int miss_price(void)
{
    printf("random dependent loads: working set, ns per load\n");
    for (size_t mb = 1; mb <= 128; mb *= 2) {
        const size_t lines = (mb << 20) / 64;
        char *p = malloc(mb << 20);
        uint32_t *order = malloc(lines * sizeof *order);
        if (p == NULL || order == NULL)
            return 3;
        uint64_t x = 88172645463325252ull; /* xorshift, fixed: the same chase each run */
        for (size_t i = 0; i < lines; i++)
            order[i] = (uint32_t)i;
        for (size_t i = lines - 1; i > 0; i--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t j = x % (i + 1);
            uint32_t t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (size_t i = 0; i < lines; i++)
            *(char **)(void *)(p + (size_t)order[i] * 64) = p + (size_t)order[(i + 1) % lines] * 64;
        char *q = p;
        for (size_t i = 0; i < lines; i++) /* one lap first: every page touched */
            q = *(char **)(void *)q;
        const size_t steps = 4000000;
        double t0 = now_ns();
        for (size_t i = 0; i < steps; i++)
            q = *(char **)(void *)q;
        printf("%5zu MiB %8.1f\n", mb, (now_ns() - t0) / (double)steps + (q == NULL));
        free(order);
        free(p);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "map") == 0) {
        const size_t max = argc > 2 ? (size_t)atol(argv[2]) : 1000000;
        int rc = 0;
        for (int p = 0; p < PAT_COUNT && rc == 0; p++)
            if (argc <= 3 || strcmp(argv[3], "all") == 0 || strcmp(argv[3], pattern_name[p]) == 0)
                rc = map_only((pattern)p, max);
        return rc;
    }
    if (argc > 1 && strcmp(argv[1], "miss") == 0)
        return miss_price();
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    const char *only = argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
    keep_memory = argc > 4 && strcmp(argv[4], "kept") == 0;
    run_twice = keep_memory || (argc > 4 && strcmp(argv[4], "again") == 0);
    if (max < 1000 || max > 10000000) {
        fprintf(stderr, "max tasks: want 1000..10000000, got '%s'\n", argv[1]);
        return 2;
    }
    printf("run_overhead: empty tasks, device %s; ns/task first/warm (median of %d processes; "
           "warm: median of %d runs each at 10^3 tasks, %d from 10^5)%s\n",
           spec, PROCS, warm_reps(1000), warm_reps(100000),
           keep_memory ? "; kept: each process ran a runner before, malloc keeps what it frees"
           : run_twice ? "; again: each process ran a runner before"
                       : "");
    printf("%-12s %8s %6s", "pattern", "tasks", "edges");
    for (int k = 0; k < ST_COUNT; k++)
        printf(" %17s", stage_name[k]);
    printf(" %6s %14s %7s %7s %6s\n", "1st/wm", "faults/task", "orch", "ns/flt", "1st-flt/wm");
    for (int p = 0; p < PAT_COUNT; p++) {
        if (only != NULL && strcmp(only, pattern_name[p]) != 0)
            continue;
        /* The sizes' processes take turns (10^3, 10^4, ..., then again), so
         * that a drift of the host's speed weighs on every size alike and
         * the growth compares sizes measured side by side. */
        enum { SIZES = 5 };
        static sample s[SIZES][PROCS];
        for (int i = 0; i < PROCS; i++) {
            size_t n = 1000;
            for (int z = 0; z < SIZES && n <= (size_t)max; z++, n *= 10) {
                job j = {(pattern)p, n, 0};
                if (measure_forked(spec, &j, &s[z][i]) != 0) {
                    fprintf(stderr, "run_overhead: %s at %zu tasks failed\n", pattern_name[p], n);
                    return 3;
                }
            }
        }
        double first_warm[2] = {0, 0};
        size_t n = 1000;
        for (int z = 0; z < SIZES && n <= (size_t)max; z++, n *= 10) {
            job j = {(pattern)p, n, 0};
            sample m;
            point(s[z], &m);
            print_point(&j, &m);
            if (n == 1000)
                first_warm[0] = m.warm[ST_WALL];
            first_warm[1] = m.warm[ST_WALL];
        }
        fflush(stdout);
        printf("%-12s growth of warm ns/task, 10^3 -> max: %.2fx\n", pattern_name[p],
               first_warm[1] / first_warm[0]);
    }
    return 0;
}
