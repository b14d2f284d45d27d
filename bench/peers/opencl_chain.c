/*
 * opencl_chain.c: the chain of bench/opencl_overhead.c with no runtime at
 * all, straight on OpenCL (PoCL's CPU device), to tell what a chain's
 * per-task time owes to PoCL and the host from what it owes to hostgraph
 * (docs/PERFORMANCE.md, "hostgraph vs StarPU on the same PoCL device").  A
 * benchmark: never built or needed by the tests.
 *
 *     cc -O2 -o opencl_chain bench/peers/opencl_chain.c -lOpenCL
 *     ./opencl_chain [all|last|finish] [tasks (10000)] [reps (9)] [chain (1) or independent (0)]
 *
 * A repetition: a begin marker, `tasks` one-item launches of an empty
 * kernel on one out-of-order queue, each waiting on the one before (chain)
 * or on the marker (independent), then one wait, as hostgraph's run does:
 *   all     a blocking read whose wait list is every launch's event
 *           (hostgraph's wait today);
 *   last    the same read waiting on the last launch only (independent:
 *           every launch, as there is no other sink);
 *   finish  clFinish.
 * The first repetition is dropped; printed: the median us per task and
 * every rep sorted, for the whole and for the enqueue alone.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_sorted(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf(" %s med %.1f [", what, v[n / 2]);
    for (int i = 0; i < n; i++)
        printf(" %.1f", v[i]);
    printf(" ]");
}

typedef struct bench {
    cl_command_queue q;
    cl_kernel k;
    cl_mem status;
    cl_event *ev;
    int *host;
    int tasks;
} bench;

/* One repetition; returns its whole and enqueue-only us per task. */
static int rep_once(bench *b, const char *mode, int chain, double *whole, double *enq)
{
    size_t one = 1, bytes = (size_t)b->tasks * sizeof(int);
    double t0 = now_s();
    cl_event begin;
    cl_int err = clEnqueueMarkerWithWaitList(b->q, 0, NULL, &begin);
    for (int i = 0; i < b->tasks && err == CL_SUCCESS; i++) {
        cl_event *wait = chain && i > 0 ? &b->ev[i - 1] : &begin;
        err = clSetKernelArg(b->k, 0, sizeof b->status, &b->status);
        if (err == CL_SUCCESS)
            err = clEnqueueNDRangeKernel(b->q, b->k, 1, NULL, &one, NULL, 1, wait, &b->ev[i]);
    }
    double t1 = now_s();
    if (err == CL_SUCCESS && strcmp(mode, "all") == 0)
        err = clEnqueueReadBuffer(b->q, b->status, CL_TRUE, 0, bytes, b->host, (cl_uint)b->tasks,
                                  b->ev, NULL);
    else if (err == CL_SUCCESS && strcmp(mode, "last") == 0)
        err = clEnqueueReadBuffer(b->q, b->status, CL_TRUE, 0, bytes, b->host,
                                  chain ? 1 : (cl_uint)b->tasks,
                                  chain ? &b->ev[b->tasks - 1] : b->ev, NULL);
    else if (err == CL_SUCCESS)
        err = clFinish(b->q);
    double t2 = now_s();
    for (int i = 0; i < b->tasks; i++)
        clReleaseEvent(b->ev[i]);
    clReleaseEvent(begin);
    *whole = (t2 - t0) * 1e6 / b->tasks;
    *enq = (t1 - t0) * 1e6 / b->tasks;
    return err;
}

static int bench_open(bench *b, int tasks)
{
    static const char *src = "__kernel void empty(__global int *x) {}";
    cl_platform_id pl;
    cl_device_id dev;
    cl_int err = clGetPlatformIDs(1, &pl, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
    if (err != CL_SUCCESS)
        return err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        b->q = clCreateCommandQueue(ctx, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    cl_program prog = err == CL_SUCCESS ? clCreateProgramWithSource(ctx, 1, &src, NULL, &err) : 0;
    if (err == CL_SUCCESS)
        err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
    if (err == CL_SUCCESS)
        b->k = clCreateKernel(prog, "empty", &err);
    if (err == CL_SUCCESS)
        b->status = clCreateBuffer(ctx, 0, (size_t)tasks * sizeof(int), NULL, &err);
    b->ev = malloc((size_t)tasks * sizeof *b->ev);
    b->host = malloc((size_t)tasks * sizeof *b->host);
    b->tasks = tasks;
    return err != CL_SUCCESS ? err : b->ev == NULL || b->host == NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    int tasks = argc > 2 ? atoi(argv[2]) : 10000, reps = argc > 3 ? atoi(argv[3]) : 9;
    int chain = argc > 4 ? atoi(argv[4]) : 1;
    bench b;
    if (tasks < 1 || reps < 1 || bench_open(&b, tasks) != 0) {
        fprintf(stderr, "opencl_chain: no OpenCL device, or bad args\n");
        return 1;
    }
    double *whole = malloc((size_t)reps * sizeof *whole), *enq = malloc((size_t)reps * sizeof *enq);
    for (int rep = -1; rep < reps; rep++) {
        double w, e;
        int err = rep_once(&b, mode, chain, &w, &e);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "opencl_chain: OpenCL error %d\n", err);
            return 1;
        }
        if (rep >= 0) {
            whole[rep] = w;
            enq[rep] = e;
        }
    }
    printf("opencl %-6s %s, %d tasks, us/task:", mode, chain ? "chain" : "independent", tasks);
    print_sorted("whole", whole, reps);
    print_sorted("enqueue", enq, reps);
    printf("\n");
    free(whole);
    free(enq);
    return 0;
}
