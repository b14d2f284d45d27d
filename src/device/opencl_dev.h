/*
 * opencl_dev.h: the OpenCL device's state, shared by opencl.c (memory,
 * copies, open) and opencl_run.c (programs, kernels, runs).
 */
#ifndef HG_DEVICE_OPENCL_DEV_H
#define HG_DEVICE_OPENCL_DEV_H

#include "device/opencl.h"

typedef struct ocl_alloc {
    hg_devaddr addr;
    size_t size;   /* bytes the user asked for */
    uint64_t span; /* size rounded up to HG_DEVICE_ALIGN */
    cl_mem mem;    /* NULL while malloc is still creating it */
    bool user;     /* hg_devbuf_malloc's, not the runtime's */
} ocl_alloc;

typedef struct ocl_program ocl_program;

typedef struct ocl_dev {
    const ocl_api *api;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue; /* one in-order queue: copies, fills and runs */
    uint64_t max_alloc;     /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    hg_devaddr base;        /* this device's address window */
    uint64_t window;
    pthread_rwlock_t table_lock;
    ocl_alloc *allocs;
    size_t nallocs, cap_allocs;
    /* Programs, built once per source text (opencl_run.c). */
    pthread_mutex_t prog_lock;
    ocl_program *programs;
    uint64_t builds;
    /* One run at a time (kernel args are set on shared cl_kernels); its
     * status words live on the device, allocated once and grown. */
    pthread_mutex_t run_lock;
    cl_mem status;
    cl_int *status_host;
    uint32_t status_cap;
} ocl_dev;

/* The entry holding [a, a+bytes), or NULL; caller holds the table lock. */
const ocl_alloc *opencl_lookup(const ocl_dev *s, hg_devaddr a, size_t bytes);

/* opencl_run.c: the device_ops entries of the same names (backend.h). */
int opencl_kernel_get(void *state, const char *source, const char *entry, const void **handle,
                      hg_err *e);
int opencl_queue_begin(void *state, uint32_t ntasks, hg_err *e);
int opencl_launch(void *state, const void *handle, uint32_t task, const device_karg *args,
                  uint32_t nargs, const uint64_t *scalars, uint32_t nscalars, hg_err *e);
int opencl_queue_end(void *state, uint32_t ntasks, uint32_t *bad_task, int32_t *bad_code,
                     hg_err *e);
uint64_t opencl_program_builds(void *state);
void opencl_programs_free(ocl_dev *s);

#endif
