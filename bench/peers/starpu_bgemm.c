/*
 * starpu_bgemm.c: the StarPU peer of `hostgraph run bgemm` on the same
 * OpenCL device (PoCL's CPU device), for docs/PERFORMANCE.md's "hostgraph vs
 * StarPU on the same PoCL device".  A benchmark: never built or needed by
 * the tests.
 *
 * Build and run (bench/peers/README.md):
 *
 *     cc -O2 -Iscenes/kernels -o starpu_bgemm bench/peers/starpu_bgemm.c \
 *         $(pkg-config --cflags --libs starpu-1.3) -lOpenCL
 *     STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 ./starpu_bgemm [grid tile rounds]
 *
 * (defaults 8 256 5: M = N = K = 2048).  The same graph and kernel math as
 * scenes/bgemm.c: C += A x B over a grid of tiles, f32; for each output
 * tile (i, j) and each k a GEMM task writes A(i,k) x B(k,j) into its own
 * product tile (a StarPU temporary handle, home node -1: it lives on the
 * device only, as hostgraph's run-owned scratch), and an ADD task adds it
 * into C(i,j) (RW: StarPU chains the ADDs of one tile as hostgraph does).
 * The OpenCL kernels are bgemm.c's: scenes/kernels/gemm_cl.h's cores
 * (included, the same text), launched as hostgraph launches them (one work
 * item per element of the tile written, the local size left to PoCL), with
 * the view's fields as plain arguments.
 *
 * A round: submit every task, wait for all, then acquire every C tile on
 * the host (RW: its bytes come back), check sampled elements against a
 * double dot product, and restore C's initial bytes, as hostgraph's scene
 * runner checks golden and restores C; the next round's tasks fetch C
 * again.  A and B stay on the device.  Printed per round: wall (submit to
 * the last tile restored), the restore alone, and the bytes StarPU's bus
 * profiling counted each way (starpu_bus_get_profiling_info).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <starpu.h>

#include "gemm_cl.h"

/* gemm_cl.h's cores, the very text bgemm.c's OpenCL slot runs, behind
 * entry points that take StarPU's buffers as (buffer, element offset,
 * leading dimension) and the sizes as ulongs. */
static const char BGEMM_CL[] = KERN_CL_GEMM
    "__kernel void gemm(__global const float *a, ulong a_off, ulong lda,\n"
    "                   __global const float *b, ulong b_off, ulong ldb,\n"
    "                   __global float *p, ulong p_off, ulong ldp, ulong m, ulong n, ulong k)\n"
    "{\n"
    "    kc_gemm(a + a_off, lda, b + b_off, ldb, p + p_off, ldp, m, n, k);\n"
    "}\n"
    "__kernel void add(__global const float *p, ulong p_off, ulong ldp,\n"
    "                  __global float *c, ulong c_off, ulong ldc, ulong m, ulong n)\n"
    "{\n"
    "    kc_add(p + p_off, ldp, c + c_off, ldc, m, n);\n"
    "}\n";

static struct starpu_opencl_program program;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sets (buffer, element offset, leading dimension) for matrix buffer b. */
static cl_int set_matrix(cl_kernel k, cl_uint *at, void *b)
{
    cl_mem mem = (cl_mem)STARPU_MATRIX_GET_DEV_HANDLE(b);
    cl_ulong off = STARPU_MATRIX_GET_OFFSET(b) / sizeof(float), ld = STARPU_MATRIX_GET_LD(b);
    cl_int err = clSetKernelArg(k, (*at)++, sizeof mem, &mem);
    err |= clSetKernelArg(k, (*at)++, sizeof off, &off);
    err |= clSetKernelArg(k, (*at)++, sizeof ld, &ld);
    return err;
}

/* Enqueues `name` over the matrices, then the scalars; one work item per
 * element of the last matrix (the one written).  Asynchronous: StarPU
 * waits on the queue (STARPU_OPENCL_ASYNC). */
static void launch(const char *name, void *buffers[], int nbuf, const cl_ulong *scalars, int nsc)
{
    int devid = starpu_worker_get_devid(starpu_worker_get_id());
    cl_kernel k;
    cl_command_queue q;
    cl_int err = starpu_opencl_load_kernel(&k, &q, &program, name, devid);
    if (err != CL_SUCCESS)
        STARPU_OPENCL_REPORT_ERROR(err);
    cl_uint at = 0;
    for (int i = 0; i < nbuf; i++)
        err |= set_matrix(k, &at, buffers[i]);
    for (int i = 0; i < nsc; i++)
        err |= clSetKernelArg(k, at++, sizeof scalars[i], &scalars[i]);
    void *w = buffers[nbuf - 1];
    size_t global = (size_t)STARPU_MATRIX_GET_NX(w) * STARPU_MATRIX_GET_NY(w);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        STARPU_OPENCL_REPORT_ERROR(err);
    starpu_opencl_release_kernel(k);
}

/* StarPU's matrix: nx elements per row (contiguous), ny rows. */
static void gemm_opencl(void *buffers[], void *arg)
{
    (void)arg;
    cl_ulong sc[3] = {STARPU_MATRIX_GET_NY(buffers[2]), STARPU_MATRIX_GET_NX(buffers[2]),
                      STARPU_MATRIX_GET_NX(buffers[0])};
    launch("gemm", buffers, 3, sc, 3);
}

static void add_opencl(void *buffers[], void *arg)
{
    (void)arg;
    cl_ulong sc[2] = {STARPU_MATRIX_GET_NY(buffers[1]), STARPU_MATRIX_GET_NX(buffers[1])};
    launch("add", buffers, 2, sc, 2);
}

static struct starpu_codelet gemm_cl = {
    .opencl_funcs = {gemm_opencl},
    .opencl_flags = {STARPU_OPENCL_ASYNC},
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .name = "gemm",
};

static struct starpu_codelet add_cl = {
    .opencl_funcs = {add_opencl},
    .opencl_flags = {STARPU_OPENCL_ASYNC},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .name = "add",
};

/* Multiples of 1/8 of small magnitude: every f32 sum is exact. */
static void fill(float *x, size_t n, unsigned seed, int span, float step)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)((i * 2654435761u + seed) % (unsigned)span) - span / 2) * step;
}

/* Bytes StarPU's buses moved since the last call, host to device and back. */
static void bus_bytes(long long *h2d, long long *d2h)
{
    *h2d = *d2h = 0;
    for (int bus = 0; bus < starpu_bus_get_count(); bus++) {
        struct starpu_profiling_bus_info info;
        if (starpu_bus_get_profiling_info(bus, &info) != 0)
            continue;
        if (starpu_node_get_kind((unsigned)starpu_bus_get_src(bus)) == STARPU_CPU_RAM)
            *h2d += info.transferred_bytes;
        else
            *d2h += info.transferred_bytes;
    }
}

typedef struct problem {
    size_t g, t, m; /* grid, tile, m = n = k = g * t */
    float *a, *b, *c, *c0;
    starpu_data_handle_t ha, hb, hc, *prod;
} problem;

static void submit_round(problem *p)
{
    size_t g = p->g;
    for (size_t i = 0; i < g; i++)
        for (size_t j = 0; j < g; j++)
            for (size_t k = 0; k < g; k++) {
                starpu_data_handle_t a = starpu_data_get_sub_data(p->ha, 2, k, i);
                starpu_data_handle_t b = starpu_data_get_sub_data(p->hb, 2, j, k);
                starpu_data_handle_t c = starpu_data_get_sub_data(p->hc, 2, j, i);
                starpu_data_handle_t pr = p->prod[(i * g + j) * g + k];
                int rc = starpu_task_insert(&gemm_cl, STARPU_R, a, STARPU_R, b, STARPU_W, pr, 0);
                rc |= starpu_task_insert(&add_cl, STARPU_R, pr, STARPU_RW, c, 0);
                STARPU_CHECK_RETURN_VALUE(rc, "starpu_task_insert");
            }
}

/* Acquires every C tile on the host (its bytes come back), checks `samples`
 * elements, restores C's initial bytes.  Returns the elements that differ. */
static int check_and_restore(problem *p, int samples, uint64_t *restore_ns)
{
    size_t g = p->g, t = p->t, m = p->m;
    int bad = 0;
    for (size_t i = 0; i < g; i++)
        for (size_t j = 0; j < g; j++)
            starpu_data_acquire(starpu_data_get_sub_data(p->hc, 2, j, i), STARPU_RW);
    for (int s = 0; s < samples; s++) {
        size_t r = (size_t)s * 2654435761u % m, col = (size_t)s * 40503u % m;
        double want = p->c0[r * m + col];
        for (size_t kk = 0; kk < m; kk++)
            want += (double)p->a[r * m + kk] * p->b[kk * m + col];
        bad += p->c[r * m + col] != (float)want;
    }
    uint64_t t0 = now_ns();
    memcpy(p->c, p->c0, m * m * sizeof(float));
    *restore_ns = now_ns() - t0;
    for (size_t i = 0; i < g; i++)
        for (size_t j = 0; j < g; j++)
            starpu_data_release(starpu_data_get_sub_data(p->hc, 2, j, i));
    (void)t;
    return bad;
}

static void partition(starpu_data_handle_t h, size_t g)
{
    struct starpu_data_filter cols = {.filter_func = starpu_matrix_filter_block,
                                      .nchildren = (unsigned)g};
    struct starpu_data_filter rows = {.filter_func = starpu_matrix_filter_vertical_block,
                                      .nchildren = (unsigned)g};
    starpu_data_map_filters(h, 2, &cols, &rows);
}

static void problem_open(problem *p, size_t g, size_t t)
{
    size_t m = g * t, bytes = m * m * sizeof(float);
    *p = (problem){.g = g, .t = t, .m = m};
    starpu_malloc((void **)&p->a, bytes);
    starpu_malloc((void **)&p->b, bytes);
    starpu_malloc((void **)&p->c, bytes);
    p->c0 = malloc(bytes);
    fill(p->a, m * m, 11, 4, 0.125f);
    fill(p->b, m * m, 12, 4, 0.125f);
    fill(p->c0, m * m, 13, 8, 0.25f);
    memcpy(p->c, p->c0, bytes);
    starpu_matrix_data_register(&p->ha, STARPU_MAIN_RAM, (uintptr_t)p->a, m, m, m, sizeof(float));
    starpu_matrix_data_register(&p->hb, STARPU_MAIN_RAM, (uintptr_t)p->b, m, m, m, sizeof(float));
    starpu_matrix_data_register(&p->hc, STARPU_MAIN_RAM, (uintptr_t)p->c, m, m, m, sizeof(float));
    partition(p->ha, g);
    partition(p->hb, g);
    partition(p->hc, g);
    p->prod = malloc(g * g * g * sizeof *p->prod);
    for (size_t i = 0; i < g * g * g; i++)
        starpu_matrix_data_register(&p->prod[i], -1, 0, t, t, t, sizeof(float));
}

static void problem_close(problem *p)
{
    for (size_t i = 0; i < p->g * p->g * p->g; i++)
        starpu_data_unregister(p->prod[i]);
    starpu_data_handle_t hs[3] = {p->ha, p->hb, p->hc};
    for (int i = 0; i < 3; i++) {
        starpu_data_unpartition(hs[i], STARPU_MAIN_RAM);
        starpu_data_unregister(hs[i]);
    }
    starpu_free(p->a);
    starpu_free(p->b);
    starpu_free(p->c);
    free(p->c0);
    free(p->prod);
}

int main(int argc, char **argv)
{
    size_t g = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;
    size_t t = argc > 2 ? strtoul(argv[2], NULL, 0) : 256;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    STARPU_CHECK_RETURN_VALUE(starpu_init(NULL), "starpu_init");
    if (starpu_opencl_worker_get_count() < 1) {
        fprintf(stderr, "starpu_bgemm: no OpenCL worker (set STARPU_OPENCL_ON_CPUS=1 "
                        "STARPU_NCPU=0 STARPU_NOPENCL=1)\n");
        starpu_shutdown();
        return 2;
    }
    STARPU_CHECK_RETURN_VALUE(starpu_opencl_load_opencl_from_string(BGEMM_CL, &program, NULL),
                              "starpu_opencl_load_opencl_from_string");
    problem p;
    problem_open(&p, g, t);
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    long long h2d, d2h;
    bus_bytes(&h2d, &d2h); /* resets the counters */
    printf("starpu bgemm M=N=K=%zu tile %zu (%zu tasks a round), %d rounds, %u OpenCL worker\n",
           p.m, t, 2 * g * g * g, rounds, starpu_opencl_worker_get_count());
    printf("round  wall_ms    restore_ms  h2d_bytes    d2h_bytes    check\n");
    int failed = 0;
    for (int round = 1; round <= rounds; round++) {
        uint64_t t0 = now_ns(), restore_ns;
        submit_round(&p);
        starpu_task_wait_for_all();
        int bad = check_and_restore(&p, 64, &restore_ns);
        uint64_t wall = now_ns() - t0;
        bus_bytes(&h2d, &d2h);
        printf("%-6d %-10.3f %-11.3f %-12lld %-12lld %s\n", round, (double)wall / 1e6,
               (double)restore_ns / 1e6, h2d, d2h, bad ? "FAIL" : "pass");
        failed |= bad != 0;
    }
    problem_close(&p);
    starpu_opencl_unload_opencl(&program);
    starpu_shutdown();
    return failed;
}
