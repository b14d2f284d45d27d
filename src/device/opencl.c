/*
 * opencl.c: the OpenCL device backend: memory, copies, fill and the open
 * device (context, queues).  Programs and kernels: opencl_prog.c; runs:
 * opencl_run.c.
 * Compiled only with HG_HAVE_OPENCL.
 *
 * Memory.  No cl_mem may exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE (or the
 * max_alloc= cap, for tests), so an allocation is pieces of `piece` bytes
 * (that limit rounded down to HG_DEVICE_ALIGN), each its own cl_mem, made
 * as one: all or none.  A device address is opaque: the table maps it to
 * (allocation, offset), and the offset to (piece, offset in it), so a slice
 * of the retained buffer is an offset, never a sub-buffer whose alignment
 * rules could refuse it.  Copies and fills are split at piece boundaries;
 * a kernel arg must lie in one piece (opencl_run.c).  translate returns
 * NULL: device memory has no host pointer here, and a host view of device
 * memory stays the named error HG_ENOHOSTVIEW above.
 *
 * Addresses.  Each open OpenCL device holds its own window of the
 * non-canonical range OCL_BASE + w * OCL_WINDOW, w taken from a
 * process-wide table of held windows (ocl_windows, alloc_table.h: round
 * robin, given back at close), so no address of one open device is ever
 * valid on another, nor on a sim device (0xD000...); with every window held
 * the next open fails, naming the limit.  Inside its window, ranges are
 * first fit over twice the capacity (address space only: fragmentation
 * never refuses what the capacity allows) and rounded to HG_DEVICE_ALIGN;
 * freed addresses come back.
 *
 * The allocation table (alloc_table.h, shared with the sim) is read under
 * the read lock and changed under the write lock, each held only briefly
 * (the lock order: locks.c).  A launch (opencl_run.c) holds the read lock
 * from its args' lookup to its enqueue, never for its run; a copy holds it
 * until its transfer-queue commands are done, and that queue holds nothing
 * that waits for a run or for the host.  A free takes its entry out under
 * the write lock and releases its cl_mems after, with no lock held: OpenCL
 * keeps a cl_mem that an enqueued command uses until that command is done
 * (OpenCL 1.2, clReleaseMemObject; PoCL retains it per command), so a free
 * during a run that uses the memory never waits for the run, and the
 * memory goes after its last use.  clCreateBuffer runs with no lock held:
 * the range is reserved first as a pending entry, and is nobody else's
 * until malloc returns.
 *
 * Queues.  Copies, fills and poisoning go to one in-order transfer queue,
 * each command with its event, and every call waits for its commands and
 * reads each one's status before it returns (ocl_xfer below): a command
 * the device failed fails the call.  Kernels go to the run queues
 * (opencl_run.c), whose every run first waits for the transfer queue's
 * earlier commands through an event, not a host wait.
 */
#ifdef HG_HAVE_OPENCL
#include <stdlib.h>
#include <string.h>

#include "device/opencl_dev.h"

#define OCL_BASE   0xC000000000000000ull /* non-canonical on x86-64 */
#define OCL_WINDOW (1ull << 44)          /* 16 TiB of addresses per device */
#define OCL_POISON 0xA5                  /* as the sim: new memory is garbage */

/* The windows open OpenCL devices hold, process-wide: ALLOC_WINDOWS of
 * OCL_WINDOW bytes span 2^56 addresses, all inside 0xC0... */
static alloc_windows ocl_windows = ALLOC_WINDOWS_INIT;

/* ------------------------------------------------------------ table */

static int ocl_find_alloc(void *state, hg_devaddr addr, hg_devaddr *base, size_t *size, bool *user)
{
    ocl_dev *s = state;
    return alloc_table_find(&s->table, &s->table_lock, addr, base, size, user);
}

static bool ocl_owns(void *state, hg_devaddr addr)
{
    const ocl_dev *s = state;
    return addr - s->base < s->window;
}

static void *ocl_translate(void *state, hg_devaddr addr, size_t bytes)
{
    return NULL; /* no host pointers: see the top of this file */
}

ocl_part opencl_part(const ocl_dev *s, const alloc_entry *e, hg_devaddr addr, size_t bytes)
{
    const ocl_mem *m = e->mem;
    uint64_t off = addr - e->addr;
    uint64_t k = off / s->piece, in = off - k * s->piece;
    uint64_t room = s->piece - in;
    return (ocl_part){m->piece[k], (size_t)in, bytes < room ? bytes : (size_t)room};
}

/* ---------------------------------------------------- allocate and free */

static void ocl_mem_release(const ocl_dev *s, ocl_mem *m)
{
    for (uint32_t k = 0; m != NULL && k < m->npieces; k++)
        if (m->piece[k] != NULL)
            s->api->clReleaseMemObject(m->piece[k]);
    free(m);
}

/* The cl_mem pieces of an allocation of `bytes` (no lock held). */
static int ocl_mem_make(const ocl_dev *s, size_t bytes, ocl_mem **out)
{
    uint64_t n = (bytes + s->piece - 1) / s->piece;
    if (n > UINT32_MAX)
        return opencl_fail(HG_EDEVMEM, "opencl: %zu bytes would need %llu pieces", bytes,
                           (unsigned long long)n);
    ocl_mem *m = calloc(1, sizeof *m + (size_t)n * sizeof(cl_mem));
    if (m == NULL)
        return opencl_fail(HG_ENOMEM, "opencl: no host memory for %llu pieces",
                           (unsigned long long)n);
    m->npieces = (uint32_t)n;
    int rc = 0;
    for (uint32_t k = 0; k < m->npieces && rc == 0; k++) {
        uint64_t left = bytes - (uint64_t)k * s->piece;
        size_t len = (size_t)(left < s->piece ? left : s->piece);
        cl_int crc = CL_SUCCESS;
        m->piece[k] = s->api->clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, len, NULL, &crc);
        rc = opencl_check(crc, "clCreateBuffer", HG_EDEVMEM);
    }
    if (rc != 0) {
        ocl_mem_release(s, m);
        return rc;
    }
    *out = m;
    return 0;
}

static int ocl_malloc(void *state, size_t bytes, bool user, hg_devaddr *out)
{
    ocl_dev *s = state;
    const alloc_entry want = {
        .size = bytes, .span = alloc_table_align(bytes), .user = user, .pending = true};
    hg_devaddr addr = 0;
    device_rwlock_wrlock(&s->table_lock);
    const alloc_entry *e = alloc_table_insert(&s->table, &want);
    if (e != NULL)
        addr = e->addr;
    device_rwlock_unlock(&s->table_lock);
    if (e == NULL)
        return opencl_fail(HG_EDEVMEM, "opencl: no free address range of %zu bytes", bytes);
    ocl_mem *m = NULL;
    int rc = ocl_mem_make(s, bytes, &m);
    alloc_entry gone;
    device_rwlock_wrlock(&s->table_lock);
    alloc_entry *mine = alloc_table_at(&s->table, addr);
    if (rc == 0) {
        mine->mem = m;
        mine->pending = false;
    } else {
        alloc_table_remove(&s->table, addr, &gone);
    }
    device_rwlock_unlock(&s->table_lock);
    if (rc == 0)
        *out = addr;
    return rc;
}

static int ocl_fill(void *state, hg_devaddr dst, int value, size_t bytes, bool doomed);

/* New memory is garbage, as on the sim: a kernel that reads bytes nobody
 * wrote sees 0xA5, not zeros.  The fill is waited for and its status read
 * here: a GPU may back memory only at its first use, and say it failed
 * only through that command's status (HG_EDEVMEM: device.c frees it). */
static int ocl_prepare(void *state, hg_devaddr addr, size_t bytes, bool doomed)
{
    int rc = ocl_fill(state, addr, OCL_POISON, bytes, doomed);
    return rc == 0 ? 0
                   : opencl_fail(HG_EDEVMEM, "opencl: new memory of %zu bytes: %s", bytes,
                                 opencl_errmsg());
}

static int ocl_free(void *state, hg_devaddr addr, bool user, size_t *bytes)
{
    ocl_dev *s = state;
    alloc_entry gone = {0};
    device_rwlock_wrlock(&s->table_lock);
    /* A pending entry is an allocation still being made: its address was
     * never returned, so it is nobody's to free. */
    const alloc_entry *e = alloc_table_lookup(&s->table, addr, 0);
    bool found = e != NULL && e->addr == addr && e->user == user &&
                 alloc_table_remove(&s->table, addr, &gone);
    device_rwlock_unlock(&s->table_lock);
    if (!found)
        return HG_ENOTFOUND;
    *bytes = gone.size;
    /* No lock held: OpenCL frees it once the commands that use it are done
     * (the top of this file). */
    ocl_mem_release(s, gone.mem);
    return 0;
}

/* ------------------------------------------------------------ copies */

/* The commands of one copy, fill or poisoning call, each with its event,
 * their statuses read once they are done and before the call returns: a
 * driver may accept a command and fail it on the device (a GPU backing
 * memory on first use reports CL_MEM_OBJECT_ALLOCATION_FAILURE there),
 * which clFinish does not tell.  So no caller publishes bytes a failed
 * command did not move.  At most OCL_XFER_EVENTS in flight per call (more
 * wait for the earlier ones first): no allocation. */
#define OCL_XFER_EVENTS 64

typedef struct ocl_xfer {
    cl_event ev[OCL_XFER_EVENTS];
    size_t item[OCL_XFER_EVENTS]; /* the caller's range each command is part of */
    uint32_t n;
    size_t doomed; /* the injected completion failure's range (SIZE_MAX: none) */
    size_t failed; /* the lowest range whose command failed (SIZE_MAX: none) */
    int rc;        /* its error */
} ocl_xfer;

/* Records range `item` failed with rc (the lowest failing range wins). */
static void ocl_xfer_fail(ocl_xfer *x, size_t item, int rc)
{
    if (item < x->failed) {
        x->failed = item;
        x->rc = rc;
    }
}

/* Waits for every command in flight and reads each one's status. */
static void ocl_xfer_wait(const ocl_dev *s, ocl_xfer *x)
{
    (void)s->api->clFlush(s->xfer);
    for (uint32_t i = 0; i < x->n; i++) {
        cl_int st = CL_COMPLETE;
        if (x->item[i] != x->doomed) /* a doomed command's event is complete already */
            (void)s->api->clWaitForEvents(1, &x->ev[i]);
        if (s->api->clGetEventInfo(x->ev[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st,
                                   NULL) != CL_SUCCESS)
            st = CL_INVALID_EVENT;
        if (st < 0 && x->item[i] < x->failed)
            ocl_xfer_fail(x, x->item[i],
                          opencl_fail(HG_ECOPY, "opencl: a transfer command completed with %s%s",
                                      opencl_error_name(st),
                                      x->item[i] == x->doomed ? " (injected: fail_complete)" : ""));
        s->api->clReleaseEvent(x->ev[i]);
    }
    x->n = 0;
}

/* Takes the event of a command of range `item` just enqueued. */
static void ocl_xfer_add(const ocl_dev *s, ocl_xfer *x, size_t item, cl_event ev)
{
    x->ev[x->n] = ev;
    x->item[x->n++] = item;
    if (x->n == OCL_XFER_EVENTS)
        ocl_xfer_wait(s, x);
}

/* In place of range item's commands, when it is doomed: an event that
 * completes with the status a driver gives a command it could not back
 * (a user event no command waits on: PoCL hangs a command whose wait list
 * holds a failed event, device.h).  No byte of the range moves. */
static int ocl_xfer_doom(const ocl_dev *s, ocl_xfer *x, size_t item)
{
    cl_int crc = CL_SUCCESS;
    cl_event ev = s->api->clCreateUserEvent(s->ctx, &crc);
    int rc = opencl_check(crc, "clCreateUserEvent", HG_ECOPY);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_ECOPY, clSetUserEventStatus, ev, CL_MEM_OBJECT_ALLOCATION_FAILURE);
    if (rc == 0)
        ocl_xfer_add(s, x, item, ev);
    else if (ev != NULL)
        s->api->clReleaseEvent(ev);
    return rc;
}

/* Enqueues range `item`, piece by piece, on the transfer queue without
 * waiting (the read lock held). */
static int ocl_enqueue_copy(ocl_dev *s, ocl_xfer *x, size_t item, bool to_device,
                            const device_copy *c)
{
    const alloc_entry *e = alloc_table_lookup(&s->table, c->dev, c->bytes);
    if (e == NULL)
        return HG_ERANGE;
    if (item == x->doomed)
        return ocl_xfer_doom(s, x, item);
    int rc = 0;
    hg_devaddr addr = c->dev;
    unsigned char *h = c->host;
    for (size_t bytes = c->bytes; bytes > 0 && rc == 0;) {
        ocl_part p = opencl_part(s, e, addr, bytes);
        cl_event ev = NULL;
        if (to_device)
            rc = OCL_CALL(s->api, HG_ECOPY, clEnqueueWriteBuffer, s->xfer, p.mem, CL_FALSE, p.off,
                          p.bytes, h, 0, NULL, &ev);
        else
            rc = OCL_CALL(s->api, HG_ECOPY, clEnqueueReadBuffer, s->xfer, p.mem, CL_FALSE, p.off,
                          p.bytes, h, 0, NULL, &ev);
        if (rc == 0)
            ocl_xfer_add(s, x, item, ev);
        addr += p.bytes;
        h += p.bytes;
        bytes -= p.bytes;
    }
    return rc;
}

/* Every range enqueued without waiting, then every command waited for
 * (also when a range failed to enqueue, so no command outlives its host
 * memory) and its status read: the lowest failing range's error. */
static int ocl_copy_list(void *state, bool to_device, const device_copy *list, size_t n,
                         size_t doomed, size_t *failed)
{
    ocl_dev *s = state;
    ocl_xfer x = {.doomed = doomed < n ? doomed : SIZE_MAX, .failed = SIZE_MAX};
    int rc = 0;
    device_rwlock_rdlock(&s->table_lock);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (list[i].bytes != 0 && (rc = ocl_enqueue_copy(s, &x, i, to_device, &list[i])) != 0)
            ocl_xfer_fail(&x, i, rc);
    ocl_xfer_wait(s, &x);
    device_rwlock_unlock(&s->table_lock);
    *failed = x.failed != SIZE_MAX ? x.failed : 0;
    return x.failed != SIZE_MAX ? x.rc : 0;
}

static int ocl_copy_to(void *state, hg_devaddr dst, const void *src, size_t bytes)
{
    const device_copy one = {(void *)src, dst, bytes};
    size_t failed;
    return ocl_copy_list(state, true, &one, 1, 1, &failed);
}

static int ocl_copy_from(void *state, void *dst, hg_devaddr src, size_t bytes)
{
    const device_copy one = {dst, src, bytes};
    size_t failed;
    return ocl_copy_list(state, false, &one, 1, 1, &failed);
}

/* Fills the range with `value`, waits and reads every command's status
 * (ocl_xfer); HG_ERANGE outside live memory, HG_ECOPY when one failed. */
static int ocl_fill(void *state, hg_devaddr dst, int value, size_t bytes, bool doomed)
{
    ocl_dev *s = state;
    ocl_xfer x = {.doomed = doomed ? 0 : SIZE_MAX, .failed = SIZE_MAX};
    cl_uchar byte = (cl_uchar)value;
    int rc = 0;
    device_rwlock_rdlock(&s->table_lock);
    const alloc_entry *e = alloc_table_lookup(&s->table, dst, bytes);
    if (e == NULL)
        rc = HG_ERANGE;
    else if (doomed)
        rc = ocl_xfer_doom(s, &x, 0);
    while (e != NULL && !doomed && bytes > 0 && rc == 0) {
        ocl_part p = opencl_part(s, e, dst, bytes);
        cl_event ev = NULL;
        rc = OCL_CALL(s->api, HG_ECOPY, clEnqueueFillBuffer, s->xfer, p.mem, &byte, 1, p.off,
                      p.bytes, 0, NULL, &ev);
        if (rc == 0)
            ocl_xfer_add(s, &x, 0, ev);
        dst += p.bytes;
        bytes -= p.bytes;
    }
    if (rc != 0)
        ocl_xfer_fail(&x, 0, rc);
    ocl_xfer_wait(s, &x);
    device_rwlock_unlock(&s->table_lock);
    return x.failed != SIZE_MAX ? x.rc : 0;
}

/* ---------------------------------------------------- open and close */

static void ocl_close(void *state)
{
    ocl_dev *s = state;
    if (s == NULL)
        return;
    if (s->xfer != NULL)
        s->api->clFinish(s->xfer);
    opencl_queues_free(s);
    opencl_programs_free(s);
    for (size_t i = 0; i < s->table.n; i++)
        ocl_mem_release(s, s->table.entries[i].mem);
    if (s->xfer != NULL)
        s->api->clReleaseCommandQueue(s->xfer);
    if (s->ctx != NULL)
        s->api->clReleaseContext(s->ctx);
    alloc_table_free(&s->table);
    if (s->base != 0)
        alloc_window_give(&ocl_windows, s->slot);
    pthread_mutex_destroy(&s->run_lock);
    pthread_mutex_destroy(&s->prog_lock);
    pthread_rwlock_destroy(&s->table_lock);
    free(s);
}

/* The run queues' shape: one out-of-order queue where the device has one
 * (and queues= does not ask for in-order ones), else in-order queues, one
 * per compute unit (at least 2, at most OCL_MAX_QUEUES) or queues=. */
static int ocl_queue_shape(ocl_dev *s, const device_config *cfg, cl_uint cus)
{
    cl_command_queue_properties props = 0;
    int rc = OCL_CALL(s->api, HG_EINVAL, clGetDeviceInfo, s->id, CL_DEVICE_QUEUE_PROPERTIES,
                      sizeof props, &props, NULL);
    if (rc != 0)
        return rc;
    s->out_of_order = cfg->cl_queues == 0 && (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    uint32_t n = cfg->cl_queues ? cfg->cl_queues : cus < 2 ? 2 : cus;
    s->nqueues = s->out_of_order ? 1 : n < OCL_MAX_QUEUES ? n : OCL_MAX_QUEUES;
    return 0;
}

/* The device's limits; the capacity is mem= capped by its global memory,
 * and is its global memory without mem=. */
static int ocl_query(ocl_dev *s, device_config *cfg)
{
    cl_ulong global = 0, max_alloc = 0;
    cl_uint cus = 0;
    int rc = OCL_CALL(s->api, HG_EINVAL, clGetDeviceInfo, s->id, CL_DEVICE_GLOBAL_MEM_SIZE,
                      sizeof global, &global, NULL);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clGetDeviceInfo, s->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                      sizeof max_alloc, &max_alloc, NULL);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clGetDeviceInfo, s->id, CL_DEVICE_MAX_COMPUTE_UNITS,
                      sizeof cus, &cus, NULL);
    if (rc == 0)
        rc = ocl_queue_shape(s, cfg, cus);
    if (rc != 0)
        return rc;
    s->max_alloc =
        cfg->cl_max_alloc != 0 && cfg->cl_max_alloc < max_alloc ? cfg->cl_max_alloc : max_alloc;
    s->piece = s->max_alloc & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
    if (s->piece == 0)
        return opencl_fail(HG_EUNSUPPORTED, "opencl: max alloc of %llu bytes is below %u",
                           (unsigned long long)s->max_alloc, HG_DEVICE_ALIGN);
    cfg->default_mem = global;
    if (cfg->mem_default || cfg->mem_bytes > global)
        cfg->mem_bytes = global;
    cfg->ncores = cus > 0 ? cus : 1;
    if (cfg->mem_bytes > OCL_WINDOW / 2)
        cfg->mem_bytes = OCL_WINDOW / 2;
    if (!alloc_window_take(&ocl_windows, &s->slot))
        return opencl_fail(HG_ENOMEM,
                           "opencl: all %u address windows are held: a process holds at most "
                           "%u open OpenCL devices; close one first",
                           ALLOC_WINDOWS, ALLOC_WINDOWS);
    s->window = 2 * alloc_table_align(cfg->mem_bytes);
    s->base = OCL_BASE + (uint64_t)s->slot * OCL_WINDOW;
    alloc_table_init(&s->table, s->base, s->window);
    return 0;
}

/* The context, the transfer queue and the plain run queues. */
static int ocl_open_queues(ocl_dev *s)
{
    cl_int crc = CL_SUCCESS;
    s->ctx = s->api->clCreateContext(NULL, 1, &s->id, NULL, NULL, &crc);
    int rc = opencl_check(crc, "clCreateContext", HG_EUNSUPPORTED);
    if (rc == 0) {
        s->xfer = s->api->clCreateCommandQueue(s->ctx, s->id, 0, &crc);
        rc = opencl_check(crc, "clCreateCommandQueue", HG_EUNSUPPORTED);
    }
    return rc == 0 ? opencl_queues_make(s, false) : rc;
}

static int ocl_open(device_config *cfg, void **state)
{
    const ocl_api *api = opencl_api();
    if (api == NULL)
        return HG_EUNSUPPORTED;
    ocl_dev *s = calloc(1, sizeof *s);
    if (s == NULL)
        return HG_ENOMEM;
    s->api = api;
    pthread_rwlock_init(&s->table_lock, NULL);
    pthread_mutex_init(&s->run_lock, NULL);
    pthread_mutex_init(&s->prog_lock, NULL);
    int rc = opencl_pick(api, cfg->cl_platform, cfg->cl_device, &s->id);
    if (rc == 0)
        rc = ocl_query(s, cfg);
    if (rc == 0)
        rc = ocl_open_queues(s);
    if (rc != 0) {
        ocl_close(s);
        return rc;
    }
    *state = s;
    return 0;
}

static uint64_t ocl_alloc_piece(void *state)
{
    const ocl_dev *s = state;
    return s->piece;
}

static const char *ocl_errmsg(void)
{
    return opencl_errmsg();
}

const device_ops device_opencl_ops = {
    .name = "opencl",
    .open = ocl_open,
    .close = ocl_close,
    .malloc = ocl_malloc,
    .prepare = ocl_prepare,
    .free = ocl_free,
    .copy_to = ocl_copy_to,
    .copy_from = ocl_copy_from,
    .copy_batch = ocl_copy_list,
    .fill = ocl_fill,
    .translate = ocl_translate,
    .find_alloc = ocl_find_alloc,
    .owns = ocl_owns,
    .run_cores = NULL,
    .kernel_get = opencl_kernel_get,
    .queue_begin = opencl_queue_begin,
    .launch = opencl_launch,
    .queue_end = opencl_queue_end,
    .host_launch = opencl_host_launch,
    .host_wait = opencl_host_wait,
    .host_done = opencl_host_done,
    .program_builds = opencl_program_builds,
    .profiled_runs = opencl_profiled_runs,
    .alloc_piece = ocl_alloc_piece,
    .errmsg = ocl_errmsg,
};
#else
typedef int hg_no_opencl_backend;
#endif
