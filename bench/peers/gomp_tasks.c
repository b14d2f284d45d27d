/*
 * gomp_tasks.c: libgomp (OpenMP tasks) on run_overhead's patterns, the peer
 * figure beside hostgraph's.  Not part of the build: a benchmark only.
 *
 *     gcc -O2 -fopenmp bench/peers/gomp_tasks.c -o build/gomp_tasks
 *     OMP_NUM_THREADS=2 ./build/gomp_tasks [max tasks (default 1000000)] [pattern]
 *
 * Each task is empty and declares, with `depend` clauses on 64-byte tiles,
 * the accesses bench/run_overhead.c's tasks declare as views:
 *   independent  in(in[t]) inout(out[t]);
 *   chain        inout(out[0]) for every task;
 *   readers      inout(out[0]) for task 0, in(out[0]) for the others;
 *   frag         in(out[t * 7919 % n]), and every 32nd task inout on the
 *                16 tiles of a scattered 1 KiB block (one depend per tile:
 *                OpenMP matches dependences by address, not by range).
 * One thread creates the tasks (`single`), the team runs them; a run is one
 * parallel region.  For each pattern and size three processes are forked;
 * each times its first run and the median of 3 warm runs after it; printed:
 * the medians over the processes, ns per task, and first / warm.
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPS   3
#define PROCS  3
#define FRAG_W 32
#define FRAG_B 16

typedef struct tile {
    char bytes[64];
} tile;

enum { PAT_INDEPENDENT, PAT_CHAIN, PAT_READERS, PAT_FRAG, PAT_COUNT };
static const char *const pattern_name[PAT_COUNT] = {"independent", "chain", "readers", "frag"};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void frag_write(tile *out, size_t b)
{
    tile *w = out + b;
    (void)w; /* gcc sees no use in a depend clause of an empty task */
#pragma omp task depend(inout                                                                      \
                        : w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10],       \
                          w[11], w[12], w[13], w[14], w[15])
    {
    }
}

static void submit(int p, tile *in, tile *out, size_t t, size_t n)
{
    (void)in;
    switch (p) {
    case PAT_INDEPENDENT:
#pragma omp task depend(in : in[t]) depend(inout : out[t])
    {
    } break;
    case PAT_CHAIN:
#pragma omp task depend(inout : out[0])
    {
    } break;
    case PAT_READERS:
        if (t == 0) {
#pragma omp task depend(inout : out[0])
            {
            }
        } else {
#pragma omp task depend(in : out[0])
            {
            }
        }
        break;
    default:
        if (t % FRAG_W == FRAG_W - 1) {
            frag_write(out, (t * 4099 % (n / FRAG_B)) * FRAG_B);
        } else {
            size_t s = t * 7919 % n;
#pragma omp task depend(in : out[s])
            {
            }
        }
    }
}

/* One run: ns for n tasks of pattern p. */
static uint64_t run(int p, tile *in, tile *out, size_t n)
{
    uint64_t t0 = now_ns();
#pragma omp parallel
#pragma omp single
    for (size_t t = 0; t < n; t++)
        submit(p, in, out, t, n);
    return now_ns() - t0;
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

/* In a child process: first and median warm ns per task, through a pipe. */
static int measure_forked(int p, size_t n, double out[2])
{
    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        tile *in = calloc(n, sizeof *in), *o = calloc(n, sizeof *o);
        double r[2], warm[REPS];
        if (in == NULL || o == NULL)
            _exit(1);
        r[0] = (double)run(p, in, o, n) / (double)n;
        for (int i = 0; i < REPS; i++)
            warm[i] = (double)run(p, in, o, n) / (double)n;
        r[1] = median(warm, REPS);
        _exit(write(fd[1], r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = pid > 0 ? read(fd[0], out, 2 * sizeof(double)) : -1;
    close(fd[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    return got == (ssize_t)(2 * sizeof(double)) && WIFEXITED(status) && !WEXITSTATUS(status) ? 0
                                                                                             : 1;
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (max < 1000) {
        fprintf(stderr, "max tasks: want >= 1000\n");
        return 2;
    }
    printf("gomp_tasks: empty OpenMP tasks, %d threads; ns/task first/warm (median of %d "
           "processes; warm: median of %d runs each)\n",
           omp_get_max_threads(), PROCS, REPS);
    for (int p = 0; p < PAT_COUNT; p++) {
        if (only != NULL && strcmp(only, pattern_name[p]) != 0)
            continue;
        double warm_first = 0, warm_last = 0;
        for (size_t n = 1000; n <= (size_t)max; n *= 10) {
            double first[PROCS], warm[PROCS], r[2];
            for (int i = 0; i < PROCS; i++) {
                if (measure_forked(p, n, r) != 0)
                    return 3;
                first[i] = r[0], warm[i] = r[1];
            }
            double f = median(first, PROCS), w = median(warm, PROCS);
            printf("%-12s %8zu %9.1f/%-9.1f %6.2f\n", pattern_name[p], n, f, w, f / w);
            fflush(stdout);
            warm_first = n == 1000 ? w : warm_first;
            warm_last = w;
        }
        printf("%-12s growth of warm ns/task, 10^3 -> max: %.2fx\n", pattern_name[p],
               warm_last / warm_first);
    }
    return 0;
}
