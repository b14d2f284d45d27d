/*
 * starpu_overhead.c: StarPU's cost per task on its OpenCL driver with empty
 * kernels, the peer of bench/opencl_overhead.c on the same device (PoCL's
 * CPU device).  A benchmark: never built or needed by the tests.
 *
 * Build and run (bench/peers/README.md):
 *
 *     cc -O2 -o starpu_overhead bench/peers/starpu_overhead.c \
 *         $(pkg-config --cflags --libs starpu-1.3) -lOpenCL
 *     STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 ./starpu_overhead [tasks reps]
 *
 * (defaults 10000 tasks, 5 repetitions).  Two shapes, as opencl_overhead:
 *   chain        every task RW on one 4-byte vector: each waits for the last;
 *   independent  every task R on that vector: no dependencies.
 * Each task launches one work item of an empty kernel (hostgraph launches
 * one work item for a task whose only arg is 1 element).  A repetition is
 * submit to starpu_task_wait_for_all; the first (program build, data
 * transfer, calibration) is dropped; printed: median and min microseconds
 * per task.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <starpu.h>

static const char EMPTY_CL[] = "__kernel void empty(__global uint *x) {}\n";

static struct starpu_opencl_program program;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One work item of `empty`, asynchronous: StarPU waits on the queue. */
static void empty_opencl(void *buffers[], void *arg)
{
    (void)arg;
    int devid = starpu_worker_get_devid(starpu_worker_get_id());
    cl_kernel k;
    cl_command_queue q;
    cl_int err = starpu_opencl_load_kernel(&k, &q, &program, "empty", devid);
    cl_mem mem = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[0]);
    size_t one = 1;
    if (err == CL_SUCCESS)
        err = clSetKernelArg(k, 0, sizeof mem, &mem);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        STARPU_OPENCL_REPORT_ERROR(err);
    starpu_opencl_release_kernel(k);
}

static struct starpu_codelet empty_rw = {
    .opencl_funcs = {empty_opencl},
    .opencl_flags = {STARPU_OPENCL_ASYNC},
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "empty_rw",
};

static struct starpu_codelet empty_r = {
    .opencl_funcs = {empty_opencl},
    .opencl_flags = {STARPU_OPENCL_ASYNC},
    .nbuffers = 1,
    .modes = {STARPU_R},
    .name = "empty_r",
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median, min and max us per task over reps timed repetitions (after one
 * more), and every rep. */
static void measure(const char *shape, struct starpu_codelet *cl, starpu_data_handle_t h, int tasks,
                    int reps)
{
    uint64_t *ns = malloc((size_t)reps * sizeof *ns);
    for (int rep = -1; rep < reps; rep++) {
        uint64_t t0 = now_ns();
        for (int t = 0; t < tasks; t++)
            STARPU_CHECK_RETURN_VALUE(starpu_task_insert(cl, cl->modes[0], h, 0),
                                      "starpu_task_insert");
        starpu_task_wait_for_all();
        if (rep >= 0)
            ns[rep] = now_ns() - t0;
    }
    qsort(ns, (size_t)reps, sizeof *ns, cmp_u64);
    printf("starpu %-12s %d tasks: median %.2f us/task, min %.2f us/task, max %.2f us/task (%d "
           "reps)\n  reps (us/task, sorted):",
           shape, tasks, (double)ns[reps / 2] / 1e3 / tasks, (double)ns[0] / 1e3 / tasks,
           (double)ns[reps - 1] / 1e3 / tasks, reps);
    for (int i = 0; i < reps; i++)
        printf(" %.1f", (double)ns[i] / 1e3 / tasks);
    printf("\n");
    free(ns);
}

int main(int argc, char **argv)
{
    int tasks = argc > 1 ? atoi(argv[1]) : 10000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    STARPU_CHECK_RETURN_VALUE(starpu_init(NULL), "starpu_init");
    if (starpu_opencl_worker_get_count() < 1) {
        fprintf(stderr, "starpu_overhead: no OpenCL worker (set STARPU_OPENCL_ON_CPUS=1 "
                        "STARPU_NCPU=0 STARPU_NOPENCL=1)\n");
        starpu_shutdown();
        return 2;
    }
    STARPU_CHECK_RETURN_VALUE(starpu_opencl_load_opencl_from_string(EMPTY_CL, &program, NULL),
                              "starpu_opencl_load_opencl_from_string");
    static uint32_t word;
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)&word, 1, sizeof word);
    measure("chain", &empty_rw, h, tasks, reps);
    measure("independent", &empty_r, h, tasks, reps);
    starpu_data_unregister(h);
    starpu_opencl_unload_opencl(&program);
    starpu_shutdown();
    return 0;
}
