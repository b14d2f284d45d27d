/*
 * opencl_dev.h: the OpenCL device's state, shared by opencl.c (memory,
 * copies, open), opencl_prog.c (programs, kernels) and opencl_run.c (run
 * queues, runs, traces).
 */
#ifndef HG_DEVICE_OPENCL_DEV_H
#define HG_DEVICE_OPENCL_DEV_H

#include <stdatomic.h>

#include "device/alloc_table.h"
#include "device/opencl.h"

/* At most this many in-order queues where the device has no out-of-order
 * queue: past the compute units a queue adds no parallelism. */
#define OCL_MAX_QUEUES 16u

/* An allocation's memory: pieces of `piece` bytes (the last one shorter),
 * each its own cl_mem, since no cl_mem may exceed the device's max alloc.
 * Piece k holds the allocation's bytes [k * piece, (k + 1) * piece). */
typedef struct ocl_mem {
    uint32_t npieces;
    cl_mem piece[];
} ocl_mem;

typedef struct ocl_program ocl_program;

/* A kernel handle (device_kernel_get): one entry point of a built program. */
typedef struct ocl_kernel {
    struct ocl_kernel *next;
    char *entry;
    cl_kernel kernel;
} ocl_kernel;

/* Where the run queues stand: one out-of-order queue, or nqueues in-order
 * ones; each set made with and without profiling (the profiling set only
 * at the first traced run: no profiling cost otherwise). */
typedef struct ocl_queues {
    cl_command_queue q[OCL_MAX_QUEUES];
    uint32_t n;
} ocl_queues;

typedef struct ocl_dev {
    const ocl_api *api;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue xfer; /* in-order: copies, fills, poisoning */
    ocl_queues runq[2];    /* kernels; [1]: with CL_QUEUE_PROFILING_ENABLE */
    bool out_of_order;     /* runq sets are one out-of-order queue each */
    uint32_t nqueues;      /* queues per set */
    uint64_t max_alloc;    /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, or the max_alloc= cap */
    uint64_t piece;        /* max_alloc rounded down to HG_DEVICE_ALIGN */
    hg_devaddr base;       /* this device's address window (0: none held yet) */
    uint64_t window;       /* its bytes */
    uint32_t slot;         /* its index in opencl.c's table of held windows */
    pthread_rwlock_t table_lock;
    alloc_table table; /* entries' mem: their ocl_mem */
    /* Programs, built once per source text (opencl_prog.c). */
    pthread_mutex_t prog_lock;
    ocl_program *programs;
    uint64_t builds;
    /* One run at a time (kernel args are set on shared cl_kernels); its
     * status words live on the device, allocated once and grown, and so do
     * its per-task events. */
    pthread_mutex_t run_lock;
    cl_mem status;
    cl_int *status_host;
    cl_event *events;
    uint32_t status_cap;
    uint32_t run_tasks; /* this run's tasks: events[0..run_tasks), NULL until launched */
    uint32_t launched;  /* tasks of this run with an event */
    uint32_t dirty;     /* bit per run queue: commands since its last flush */
    cl_event *waits;    /* one launch's wait list */
    uint32_t waits_cap;
    bool profiling; /* this run's queue set */
    /* Runs that used it (device_debug_profiled_runs), read with no lock:
     * nothing but a run takes run_lock (locks.c). */
    atomic_uint_least64_t profiled_runs;
    cl_event begin;         /* the status words' fill: every root task waits on it */
    uint64_t begin_host_ns; /* the host clock when `begin` was enqueued */
} ocl_dev;

/* *v, read under m (the debug counters). */
static inline uint64_t opencl_read_locked(pthread_mutex_t *m, const uint64_t *v)
{
    pthread_mutex_lock(m);
    uint64_t n = *v;
    pthread_mutex_unlock(m);
    return n;
}

/* One piece-local part of a device range. */
typedef struct ocl_part {
    cl_mem mem;
    size_t off, bytes;
} ocl_part;

/* The part of [addr, addr+bytes) that lies in e's piece holding addr:
 * bytes up to that piece's end at most.  addr lies in e. */
ocl_part opencl_part(const ocl_dev *s, const alloc_entry *e, hg_devaddr addr, size_t bytes);

/* opencl_run.c: the device_ops entries of the same names (backend.h). */
int opencl_kernel_get(void *state, const char *source, const char *entry, const void **handle,
                      hg_err *e);
int opencl_queue_begin(void *state, uint32_t ntasks, bool profile, hg_err *e);
int opencl_launch(void *state, const device_task *t, hg_err *e);
int opencl_queue_end(void *state, uint32_t ntasks, device_queue_result *res, hg_err *e);
int opencl_host_launch(void *state, uint32_t task, hg_err *e);
int opencl_host_wait(void *state, const uint32_t *tasks, uint32_t n, hg_err *e);
void opencl_host_done(void *state, uint32_t task);
uint64_t opencl_program_builds(void *state);
uint64_t opencl_profiled_runs(void *state);
void opencl_programs_free(ocl_dev *s);
/* Makes runq[profile] if not made yet (open makes the plain set; the first
 * traced run the profiling one).  run_lock held, or at open. */
int opencl_queues_make(ocl_dev *s, bool profile);
/* Waits for and releases every run queue (close). */
void opencl_queues_free(ocl_dev *s);

#endif
