/*
 * opencl_run.c: runs on the OpenCL device: the run queues, per-task events
 * and status words, and per-task times for traces.
 * Compiled only with HG_HAVE_OPENCL.
 *
 * Queues.  Kernels go to one out-of-order queue where the device has one
 * (CL_DEVICE_QUEUE_PROPERTIES), else to nqueues in-order queues (task t on
 * queue t % nqueues).  Either way each launch carries an event wait list:
 * the events of the tasks the graph says it depends on, or the run's begin
 * event for a task that depends on none, so the device may run independent
 * tasks at once and in any order, never a task before what it depends on.
 * An event waited on from another queue needs its own queue flushed first
 * (OpenCL 1.2, 5.13), so with several queues a queue is flushed only when a
 * task on another queue is about to wait on it.  A task with nothing to run
 * (an empty first written arg) gets a marker with the same wait list, so a
 * task that waits on it still follows its predecessors.
 *
 * Host steps.  A host step's event is a user event that its helper
 * completes.  Tasks are launched in any order their wait lists allow (each
 * after the tasks it waits for), and the executor launches a task that
 * depends on a host step only once that step is done (enqueue.c): so no
 * command here ever waits for an event the host has yet to complete, and
 * an in-order queue, or a driver whose out-of-order queue runs in order,
 * never holds a kernel behind a host step it does not depend on.
 *
 * Runs.  queue_begin takes run_lock, the device's turn (a cl_kernel's args
 * are per kernel object, so two runs must not set them at once; nothing
 * but another run's queue_begin takes it), and zeroes one status word per
 * task after a marker on the transfer queue (the poisoning of new memory
 * comes first, with no host wait); each launch looks its args up, sets
 * them and enqueues an NDRange under the table's read lock, and lets go:
 * the command holds its cl_mems from then on (opencl.c's top), so a free
 * or an allocation from another thread never waits for the run, and the
 * run's host steps never wait for them (the lock order: locks.c);
 * queue_end is the run's one wait: a blocking read of the status words
 * that waits on every task's event.  Then it releases run_lock.  The status buffer, its host copy
 * and the event array belong to the device, grow geometrically, and their transfers are not
 * counted: they are the runtime's, not the run's.
 *
 * Times.  A traced run (queue_begin's `profile`) uses a second set of run
 * queues made with CL_QUEUE_PROFILING_ENABLE at the first traced run, so an
 * untraced run pays no profiling.  Device times map to the host clock
 * (clock_now_ns) through one anchor per run: the begin event's QUEUED time
 * against the host time taken around its enqueue (OpenCL 1.2 has no shared
 * clock), so spans are off by at most the enqueue call's duration.
 */
#ifdef HG_HAVE_OPENCL
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "device/opencl_dev.h"

/* The kernel's view of one tensor arg; OCL_PREAMBLE's hg_view, field for
 * field (8-byte fields, so host and device lay it out alike). */
typedef struct ocl_view {
    cl_ulong offset; /* elements from the cl_mem's start */
    cl_uint ndims, pad;
    cl_ulong shape[HG_MAX_DIMS];
    cl_ulong strides[HG_MAX_DIMS];
} ocl_view;

/* ------------------------------------------------------------- queues */

int opencl_queues_make(ocl_dev *s, bool profile)
{
    ocl_queues *qs = &s->runq[profile];
    cl_command_queue_properties props =
        (s->out_of_order ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0) |
        (profile ? CL_QUEUE_PROFILING_ENABLE : 0);
    while (qs->n < s->nqueues) {
        cl_int crc = CL_SUCCESS;
        qs->q[qs->n] = s->api->clCreateCommandQueue(s->ctx, s->id, props, &crc);
        int rc = opencl_check(crc, "clCreateCommandQueue", HG_EUNSUPPORTED);
        if (rc != 0)
            return rc;
        qs->n++;
    }
    return 0;
}

void opencl_queues_free(ocl_dev *s)
{
    for (int p = 0; p < 2; p++) {
        for (uint32_t i = 0; i < s->runq[p].n; i++) {
            s->api->clFinish(s->runq[p].q[i]);
            s->api->clReleaseCommandQueue(s->runq[p].q[i]);
        }
        s->runq[p].n = 0;
    }
    if (s->status != NULL)
        s->api->clReleaseMemObject(s->status);
    free(s->status_host);
    free(s->events);
    free(s->waits);
    s->status = NULL;
    s->status_host = NULL;
    s->events = NULL;
    s->waits = NULL;
}

static cl_command_queue ocl_queue_of(const ocl_dev *s, uint32_t task)
{
    return s->runq[s->profiling].q[task % s->nqueues];
}

/* Flushes queue qi if a command went there since its last flush, so that
 * a command on another queue may wait on its events. */
static int ocl_flush_for(ocl_dev *s, uint32_t qi)
{
    if (!(s->dirty & (1u << qi)))
        return 0;
    s->dirty &= ~(1u << qi);
    return OCL_CALL(s->api, HG_EKERNEL, clFlush, s->runq[s->profiling].q[qi]);
}

uint64_t opencl_profiled_runs(void *state)
{
    ocl_dev *s = state;
    return atomic_load(&s->profiled_runs);
}

/* ---------------------------------------------------------------- runs */

/* Room for ntasks status words, events and waits (run_lock held): grown
 * geometrically. */
static int ocl_status_reserve(ocl_dev *s, uint32_t ntasks, hg_err *e)
{
    if (ntasks <= s->status_cap)
        return 0;
    uint32_t cap = s->status_cap * 2 > ntasks ? s->status_cap * 2 : ntasks;
    cl_int *host = realloc(s->status_host, (size_t)cap * sizeof *host);
    if (host != NULL)
        s->status_host = host;
    cl_event *ev = host ? realloc(s->events, (size_t)cap * sizeof *ev) : NULL;
    if (ev != NULL)
        s->events = ev;
    cl_event *waits = ev && cap > s->waits_cap ? realloc(s->waits, (size_t)cap * sizeof *ev) : NULL;
    if (waits != NULL) {
        s->waits = waits;
        s->waits_cap = cap;
    }
    if (host == NULL || ev == NULL || s->waits_cap < cap)
        return err_set(e, HG_ENOMEM, "status words for %u tasks", cap);
    if (s->status != NULL)
        s->api->clReleaseMemObject(s->status);
    cl_int crc = CL_SUCCESS;
    s->status =
        s->api->clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, (size_t)cap * sizeof(cl_int), NULL, &crc);
    int rc = opencl_check(crc, "clCreateBuffer", HG_EDEVMEM);
    s->status_cap = rc == 0 ? cap : 0;
    if (rc != 0)
        s->status = NULL;
    return rc == 0 ? 0 : err_set(e, rc, "status words for %u tasks: %s", cap, opencl_errmsg());
}

/* Zeroes the status words on queue 0 after the transfer queue's earlier
 * commands: the run's begin event, and its host-clock anchor. */
static int ocl_begin_event(ocl_dev *s, uint32_t ntasks)
{
    cl_event xfer_done = NULL;
    int rc =
        OCL_CALL(s->api, HG_EKERNEL, clEnqueueMarkerWithWaitList, s->xfer, 0, NULL, &xfer_done);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EKERNEL, clFlush, s->xfer);
    cl_int zero = 0;
    uint64_t h0 = clock_now_ns();
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueFillBuffer, ocl_queue_of(s, 0), s->status, &zero,
                      sizeof zero, 0, (size_t)ntasks * sizeof zero, 1, &xfer_done, &s->begin);
    s->begin_host_ns = h0 + (clock_now_ns() - h0) / 2;
    if (xfer_done != NULL)
        s->api->clReleaseEvent(xfer_done);
    s->dirty = rc == 0 ? 1u : 0u;
    return rc;
}

int opencl_queue_begin(void *state, uint32_t ntasks, bool profile, hg_err *e)
{
    ocl_dev *s = state;
    pthread_mutex_lock(&s->run_lock);
    s->profiling = profile;
    atomic_fetch_add(&s->profiled_runs, profile);
    s->launched = 0;
    s->run_tasks = 0;
    s->begin = NULL;
    int rc = opencl_queues_make(s, profile);
    if (rc != 0)
        return err_set(e, rc, "%s", opencl_errmsg());
    rc = ocl_status_reserve(s, ntasks > 0 ? ntasks : 1, e);
    if (rc == 0) { /* no task has an event yet: launches come in any order */
        memset(s->events, 0, (size_t)ntasks * sizeof *s->events);
        s->run_tasks = ntasks;
    }
    if (rc == 0 && (rc = ocl_begin_event(s, ntasks > 0 ? ntasks : 1)) != 0)
        err_set(e, rc, "%s", opencl_errmsg());
    return rc; /* queue_end releases run_lock, whatever happened */
}

/* Whether task t of this run has an event (was launched). */
static bool ocl_has_event(const ocl_dev *s, uint32_t t)
{
    return t < s->run_tasks && s->events[t] != NULL;
}

/* Refuses a launch of a task out of range or launched already. */
static int ocl_check_new(const ocl_dev *s, uint32_t task, hg_err *e)
{
    if (task >= s->run_tasks)
        return err_set(e, HG_EINVAL, "task %u launched in a run of %u tasks", task, s->run_tasks);
    if (s->events[task] != NULL)
        return err_set(e, HG_EINVAL, "task %u launched twice", task);
    return 0;
}

/* The view of arg i and the cl_mem of the piece it lies in.  A view must
 * lie in one piece: a cl_mem is the most a kernel can address through one
 * pointer, and an allocation past the max alloc is several. */
static int ocl_arg_view(ocl_dev *s, const device_karg *a, uint32_t i, cl_mem *mem, ocl_view *v,
                        hg_err *e)
{
    size_t esize = hg_dtype_size(a->dtype);
    const alloc_entry *al = alloc_table_lookup(&s->table, a->lo, (size_t)(a->hi - a->lo));
    if (al == NULL || esize == 0 || a->addr < a->lo)
        return err_set(e, HG_ERANGE, "arg %u at 0x%llx is not in live device memory", i,
                       (unsigned long long)a->addr);
    ocl_part p = opencl_part(s, al, a->lo, (size_t)(a->hi - a->lo));
    if (p.bytes < a->hi - a->lo)
        return err_set(e, HG_EUNSUPPORTED,
                       "arg %u: its %llu bytes at offset %llu of a %zu-byte allocation cross "
                       "the boundary between two of its cl_mem pieces (%llu bytes each: the "
                       "device's max alloc); a kernel arg must lie in one piece",
                       i, (unsigned long long)(a->hi - a->lo),
                       (unsigned long long)(a->lo - al->addr), al->size,
                       (unsigned long long)s->piece);
    uint64_t from_piece = p.off + (a->addr - a->lo);
    if (from_piece % esize != 0)
        return err_set(e, HG_ERANGE, "arg %u at 0x%llx is not a whole element from its buffer", i,
                       (unsigned long long)a->addr);
    *mem = p.mem;
    v->offset = from_piece / esize;
    return 0;
}

/* Sets arg `*at` and the next (buffer, view) for one tensor arg. */
static int ocl_set_tensor(ocl_dev *s, cl_kernel k, cl_uint *at, const device_karg *a, uint32_t i,
                          hg_err *e)
{
    ocl_view v = {.ndims = a->ndims};
    cl_mem mem = NULL;
    for (uint32_t d = 0; d < HG_MAX_DIMS; d++) {
        v.shape[d] = a->shape[d];
        v.strides[d] = a->strides[d];
    }
    if (a->addr != 0) {
        int rc = ocl_arg_view(s, a, i, &mem, &v, e);
        if (rc != 0)
            return rc;
    }
    int rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, (*at)++, sizeof mem, &mem);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, (*at)++, sizeof v, &v);
    return rc == 0 ? 0 : err_set(e, rc, "arg %u: %s", i, opencl_errmsg());
}

/* Work items: the elements of the first arg the task writes (1 if none). */
static size_t ocl_elements(const device_karg *a)
{
    size_t n = 1;
    for (uint32_t d = 0; d < a->ndims; d++)
        n *= a->shape[d];
    return n;
}

/* The launch's work items: the first written arg's elements, 1 when the task
 * writes nothing.  0 (no launch) only when every written arg is empty: a
 * task whose first written arg is empty but another is not cannot run by
 * the convention (no work item would write the other), so it is refused
 * naming both args, never skipped with that arg left unwritten. */
static int ocl_work_items(const device_karg *args, uint32_t nargs, size_t *work, hg_err *e)
{
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 0; i < nargs; i++) {
        if (!args[i].write)
            continue;
        if (first == UINT32_MAX) {
            first = i;
            *work = ocl_elements(&args[i]);
        } else if (*work == 0 && ocl_elements(&args[i]) != 0) {
            return err_set(e, HG_EUNSUPPORTED,
                           "its first written arg (arg %u) is empty, so on OpenCL it runs no "
                           "work item, but written arg %u is not empty: put a non-empty written "
                           "arg first",
                           first, i);
        }
    }
    if (first == UINT32_MAX)
        *work = 1;
    return 0;
}

/* Sets every arg of t's kernel: status words, task number, tensors, scalars. */
static int ocl_set_args(ocl_dev *s, cl_kernel k, const device_task *t, hg_err *e)
{
    cl_uint at = 0, task = t->task;
    int rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof s->status, &s->status);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof task, &task);
    if (rc != 0)
        return err_set(e, rc, "%s", opencl_errmsg());
    for (uint32_t i = 0; i < t->nargs && rc == 0; i++)
        rc = ocl_set_tensor(s, k, &at, &t->args[i], i, e);
    for (uint32_t i = 0; i < t->nscalars && rc == 0; i++) {
        cl_ulong v = t->scalars[i];
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof v, &v);
        if (rc != 0)
            err_set(e, rc, "scalar %u: %s", i, opencl_errmsg());
    }
    return rc;
}

/* t's wait list into s->waits (the begin event if it waits for no task),
 * flushing the queues it refers to on other queues. */
static int ocl_wait_list(ocl_dev *s, const device_task *t, cl_uint *n, hg_err *e)
{
    uint32_t need = t->nwaits > 0 ? t->nwaits : 1;
    if (need > s->waits_cap) {
        cl_event *grown = realloc(s->waits, (size_t)need * sizeof *grown);
        if (grown == NULL)
            return err_set(e, HG_ENOMEM, "a wait list of %u events", need);
        s->waits = grown;
        s->waits_cap = need;
    }
    const uint32_t mine = t->task % s->nqueues;
    int rc = 0;
    for (uint32_t i = 0; i < t->nwaits && rc == 0; i++) {
        uint32_t w = t->waits[i];
        if (!ocl_has_event(s, w))
            return err_set(e, HG_EINVAL, "waits for task %u, which was not launched before it", w);
        s->waits[i] = s->events[w];
        if (w % s->nqueues != mine)
            rc = ocl_flush_for(s, w % s->nqueues);
    }
    if (t->nwaits == 0) {
        s->waits[0] = s->begin;
        if (mine != 0)
            rc = ocl_flush_for(s, 0);
    }
    *n = need;
    return rc == 0 ? 0 : err_set(e, rc, "%s", opencl_errmsg());
}

int opencl_launch(void *state, const device_task *t, hg_err *e)
{
    ocl_dev *s = state;
    int rc = ocl_check_new(s, t->task, e);
    if (rc != 0)
        return rc;
    cl_kernel k = ((const ocl_kernel *)t->kernel)->kernel;
    cl_uint nwait = 0;
    size_t work = 0;
    rc = ocl_work_items(t->args, t->nargs, &work, e);
    /* The table's read lock from the args' lookup to the enqueue only: the
     * enqueued command holds its cl_mems from then on (the top of this file). */
    device_rwlock_rdlock(&s->table_lock);
    if (rc == 0)
        rc = ocl_set_args(s, k, t, e);
    if (rc == 0)
        rc = ocl_wait_list(s, t, &nwait, e);
    if (rc != 0) {
        device_rwlock_unlock(&s->table_lock);
        return rc;
    }
    cl_command_queue q = ocl_queue_of(s, t->task);
    cl_event *ev = &s->events[t->task];
    if (work == 0) /* nothing to run; a marker keeps the order for its waiters */
        rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueMarkerWithWaitList, q, nwait, s->waits, ev);
    else
        rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueNDRangeKernel, q, k, 1, NULL, &work, NULL, nwait,
                      s->waits, ev);
    device_rwlock_unlock(&s->table_lock);
    if (rc != 0)
        return err_set(e, rc, "%s", opencl_errmsg());
    s->launched++;
    s->dirty |= 1u << (t->task % s->nqueues);
    return 0;
}

/* ---------------------------------------------------------- host steps */

int opencl_host_launch(void *state, uint32_t task, hg_err *e)
{
    ocl_dev *s = state;
    /* The helper waits on the events of the tasks before this one from the
     * host: the queues holding them must have reached the device. */
    int rc = ocl_check_new(s, task, e);
    if (rc != 0)
        return rc;
    for (uint32_t qi = 0; qi < s->nqueues && rc == 0; qi++)
        rc = ocl_flush_for(s, qi);
    cl_int crc = CL_SUCCESS;
    cl_event ev = rc == 0 ? s->api->clCreateUserEvent(s->ctx, &crc) : NULL;
    if (rc == 0)
        rc = opencl_check(crc, "clCreateUserEvent", HG_EKERNEL);
    if (rc != 0)
        return err_set(e, rc, "%s", opencl_errmsg());
    s->events[task] = ev;
    s->launched++;
    return 0;
}

int opencl_host_wait(void *state, const uint32_t *tasks, uint32_t n, hg_err *e)
{
    ocl_dev *s = state;
    /* One event at a time: no wait list to allocate, and the same wait. */
    for (uint32_t i = 0; i < (n > 0 ? n : 1); i++) {
        cl_event ev = n > 0 ? s->events[tasks[i]] : s->begin;
        int rc = OCL_CALL(s->api, HG_EKERNEL, clWaitForEvents, 1, &ev);
        if (rc != 0)
            return err_set(e, rc, "waiting for %s %u: %s", n > 0 ? "task" : "the run's begin",
                           n > 0 ? tasks[i] : 0, opencl_errmsg());
    }
    return 0;
}

void opencl_host_done(void *state, uint32_t task)
{
    ocl_dev *s = state;
    /* Always complete: a negative status would hang PoCL 3.1 (device.h). */
    s->api->clSetUserEventStatus(s->events[task], CL_COMPLETE);
}

/* After a failed wait: the lowest launched task whose command failed
 * (UINT32_MAX if none did), once every queue is drained. */
static uint32_t ocl_failed_task(ocl_dev *s, cl_int *status)
{
    for (uint32_t i = 0; i < s->runq[s->profiling].n; i++)
        s->api->clFinish(s->runq[s->profiling].q[i]);
    for (uint32_t t = 0; t < s->run_tasks; t++) {
        cl_int st = CL_COMPLETE;
        if (s->events[t] == NULL)
            continue;
        s->api->clGetEventInfo(s->events[t], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st,
                               NULL);
        if (st < 0) {
            *status = st;
            return t;
        }
    }
    return UINT32_MAX;
}

/* Each launched task's device start and end in the host clock, through the
 * begin event's anchor (the top of this file). */
static void ocl_spans(ocl_dev *s, uint32_t ntasks, uint64_t *spans)
{
    memset(spans, 0, (size_t)ntasks * 2 * sizeof *spans);
    cl_ulong queued = 0;
    if (s->api->clGetEventProfilingInfo(s->begin, CL_PROFILING_COMMAND_QUEUED, sizeof queued,
                                        &queued, NULL) != CL_SUCCESS)
        return;
    for (uint32_t t = 0; t < s->run_tasks && t < ntasks; t++) {
        cl_ulong start = 0, end = 0;
        if (s->events[t] == NULL)
            continue;
        if (s->api->clGetEventProfilingInfo(s->events[t], CL_PROFILING_COMMAND_START, sizeof start,
                                            &start, NULL) != CL_SUCCESS ||
            s->api->clGetEventProfilingInfo(s->events[t], CL_PROFILING_COMMAND_END, sizeof end,
                                            &end, NULL) != CL_SUCCESS)
            continue;
        spans[2 * t] = s->begin_host_ns + (start - queued);
        spans[2 * t + 1] = s->begin_host_ns + (end > start ? end - queued : start - queued);
    }
}

/* The one wait: a blocking read of the status words after every task. */
static int ocl_wait_all(ocl_dev *s, uint32_t ntasks, device_queue_result *res, hg_err *e)
{
    for (uint32_t qi = 1; qi < s->nqueues; qi++) {
        int frc = ocl_flush_for(s, qi);
        if (frc != 0)
            return err_set(e, frc, "%s", opencl_errmsg());
    }
    /* Every launched task's event, into s->waits (no launch follows; it
     * has room for status_cap, ocl_status_reserve). */
    cl_uint nwait = 0;
    for (uint32_t t = 0; t < s->run_tasks; t++)
        if (s->events[t] != NULL)
            s->waits[nwait++] = s->events[t];
    const cl_event *list = nwait > 0 ? s->waits : &s->begin;
    nwait = nwait > 0 ? nwait : 1;
    int rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueReadBuffer, ocl_queue_of(s, 0), s->status,
                      CL_TRUE, 0, (size_t)(ntasks > 0 ? ntasks : 1) * sizeof(cl_int),
                      s->status_host, nwait, list, NULL);
    if (rc != 0) {
        cl_int st = 0;
        res->bad_task = ocl_failed_task(s, &st);
        if (res->bad_task != UINT32_MAX)
            return err_set(e, rc, "its command failed: %s", opencl_error_name(st));
        return err_set(e, rc, "%s", opencl_errmsg());
    }
    for (uint32_t t = 0; t < ntasks; t++) {
        if (s->status_host[t] != 0) {
            res->bad_task = t;
            res->bad_code = s->status_host[t];
            break;
        }
    }
    if (res->spans != NULL && s->profiling)
        ocl_spans(s, ntasks, res->spans);
    return 0;
}

int opencl_queue_end(void *state, uint32_t ntasks, device_queue_result *res, hg_err *e)
{
    ocl_dev *s = state;
    res->bad_task = UINT32_MAX;
    res->bad_code = 0;
    int rc = 0;
    if (s->begin != NULL) {
        rc = ocl_wait_all(s, ntasks, res, e);
    } else { /* begin failed: nothing was launched; drain what was */
        for (uint32_t i = 0; i < s->runq[s->profiling].n; i++)
            s->api->clFinish(s->runq[s->profiling].q[i]);
    }
    for (uint32_t t = 0; t < s->run_tasks; t++)
        if (s->events[t] != NULL)
            s->api->clReleaseEvent(s->events[t]);
    if (s->begin != NULL)
        s->api->clReleaseEvent(s->begin);
    s->begin = NULL;
    s->launched = 0;
    s->run_tasks = 0;
    pthread_mutex_unlock(&s->run_lock);
    return rc;
}
#else
typedef int hg_no_opencl_run;
#endif
