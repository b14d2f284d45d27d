/*
 * opencl.c: the OpenCL device backend: memory, copies, fill and the open
 * device (context, one in-order queue).  Kernels and runs: opencl_run.c.
 * Compiled only with HG_HAVE_OPENCL.
 *
 * Memory.  Each allocation is its own cl_mem, no larger than the device's
 * CL_DEVICE_MAX_MEM_ALLOC_SIZE: a larger one fails with HG_EDEVMEM and a
 * message naming the limit (no splitting yet).  A device address is opaque:
 * the table maps it to (cl_mem, offset), so a slice of the retained buffer
 * is an offset, never a sub-buffer whose alignment rules could refuse it.
 * translate returns NULL: device memory has no host pointer here, and a host
 * view of device memory stays the named error HG_ENOHOSTVIEW above.
 *
 * Addresses.  Each opened OpenCL device takes its own window of the
 * non-canonical range OCL_BASE + slot * OCL_WINDOW (slot: a process-wide
 * counter), so no address of one device is ever valid on another, nor on a
 * sim device (0xD000...).  Inside its window, ranges are first fit over twice
 * the capacity (address space only: fragmentation never refuses what the
 * capacity allows) and rounded to HG_DEVICE_ALIGN; freed addresses come back.
 *
 * The allocation table keeps the sim's invariants (backend.h): sorted by
 * address, disjoint spans, read under the read lock (copies and runs hold it
 * while their commands are in flight, so a concurrent free waits), changed
 * under the write lock.  clCreateBuffer runs with no lock held: the range is
 * reserved first with no cl_mem, and is nobody else's until malloc returns.
 */
#ifdef HG_HAVE_OPENCL
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "device/opencl_dev.h"

#define OCL_BASE    0xC000000000000000ull /* non-canonical on x86-64 */
#define OCL_WINDOW  (1ull << 44)          /* 16 TiB of addresses per device */
#define OCL_WINDOWS 256u                  /* windows before slots wrap around */
#define OCL_POISON  0xA5                  /* as the sim: new memory is garbage */

static atomic_uint ocl_next_slot;

/* ------------------------------------------------------------ table */

/* Index of the last entry with addr <= a, or -1.  Caller holds a lock. */
static long ocl_find_index(const ocl_dev *s, hg_devaddr a)
{
    size_t lo = 0, hi = s->nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->allocs[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

const ocl_alloc *opencl_lookup(const ocl_dev *s, hg_devaddr a, size_t bytes)
{
    long i = ocl_find_index(s, a);
    if (i < 0)
        return NULL;
    const ocl_alloc *e = &s->allocs[i];
    uint64_t off = a - e->addr;
    if (e->mem == NULL || off > e->size || bytes > e->size - off)
        return NULL;
    return e;
}

static int ocl_find_alloc(void *state, hg_devaddr addr, hg_devaddr *base, size_t *size, bool *user)
{
    ocl_dev *s = state;
    int rc = HG_ENOTFOUND;
    device_rwlock_rdlock(&s->table_lock);
    long i = ocl_find_index(s, addr);
    if (i >= 0 && s->allocs[i].mem != NULL && addr - s->allocs[i].addr < s->allocs[i].size) {
        *base = s->allocs[i].addr;
        *size = s->allocs[i].size;
        *user = s->allocs[i].user;
        rc = 0;
    }
    device_rwlock_unlock(&s->table_lock);
    return rc;
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

/* ---------------------------------------------------- allocate and free */

static uint64_t ocl_span(size_t bytes)
{
    return ((uint64_t)bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
}

/* First fit in the window; caller holds the write lock. */
static bool ocl_first_fit(const ocl_dev *s, uint64_t span, hg_devaddr *addr, size_t *at)
{
    uint64_t cursor = s->base;
    for (size_t i = 0; i < s->nallocs; i++) {
        if (s->allocs[i].addr - cursor >= span) {
            *addr = cursor;
            *at = i;
            return true;
        }
        cursor = s->allocs[i].addr + s->allocs[i].span;
    }
    if (s->base + s->window - cursor < span)
        return false;
    *addr = cursor;
    *at = s->nallocs;
    return true;
}

static bool ocl_table_reserve(ocl_dev *s)
{
    if (s->nallocs < s->cap_allocs)
        return true;
    size_t cap = s->cap_allocs ? s->cap_allocs * 2 : 64;
    ocl_alloc *grown = realloc(s->allocs, cap * sizeof *grown);
    if (grown == NULL)
        return false;
    s->allocs = grown;
    s->cap_allocs = cap;
    return true;
}

/* Removes the entry at addr (write lock held); its cl_mem to *mem. */
static bool ocl_table_remove(ocl_dev *s, hg_devaddr addr, size_t *bytes, cl_mem *mem)
{
    long i = ocl_find_index(s, addr);
    if (i < 0 || s->allocs[i].addr != addr)
        return false;
    *bytes = s->allocs[i].size;
    *mem = s->allocs[i].mem;
    memmove(&s->allocs[i], &s->allocs[i + 1], (s->nallocs - (size_t)i - 1) * sizeof *s->allocs);
    s->nallocs--;
    return true;
}

static int ocl_malloc(void *state, size_t bytes, bool user, hg_devaddr *out)
{
    ocl_dev *s = state;
    if (bytes > s->max_alloc)
        return opencl_fail(HG_EDEVMEM,
                           "opencl: %zu bytes in one allocation exceed the device's "
                           "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu bytes)",
                           bytes, (unsigned long long)s->max_alloc);
    const uint64_t span = ocl_span(bytes);
    hg_devaddr addr = 0;
    size_t at;
    int rc = HG_EDEVMEM;
    device_rwlock_wrlock(&s->table_lock);
    if (ocl_table_reserve(s) && ocl_first_fit(s, span, &addr, &at)) {
        memmove(&s->allocs[at + 1], &s->allocs[at], (s->nallocs - at) * sizeof *s->allocs);
        s->allocs[at] =
            (ocl_alloc){.addr = addr, .size = bytes, .span = span, .mem = NULL, .user = user};
        s->nallocs++;
        rc = 0;
    }
    device_rwlock_unlock(&s->table_lock);
    if (rc != 0)
        return opencl_fail(rc, "opencl: no free address range of %zu bytes", bytes);
    cl_int crc = CL_SUCCESS;
    cl_mem mem = s->api->clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, bytes, NULL, &crc);
    rc = opencl_check(crc, "clCreateBuffer", HG_EDEVMEM);
    device_rwlock_wrlock(&s->table_lock);
    if (rc == 0) {
        s->allocs[ocl_find_index(s, addr)].mem = mem;
    } else {
        size_t dummy;
        cl_mem none;
        ocl_table_remove(s, addr, &dummy, &none);
    }
    device_rwlock_unlock(&s->table_lock);
    if (rc == 0)
        *out = addr;
    return rc;
}

/* New memory is garbage, as on the sim: a kernel that reads bytes nobody
 * wrote sees 0xA5, not zeros.  Enqueued on the in-order queue, so every
 * later command sees it done. */
static void ocl_prepare(void *state, hg_devaddr addr, size_t bytes)
{
    ocl_dev *s = state;
    device_rwlock_rdlock(&s->table_lock);
    const ocl_alloc *e = opencl_lookup(s, addr, bytes);
    cl_uchar poison = OCL_POISON;
    if (e != NULL)
        (void)s->api->clEnqueueFillBuffer(s->queue, e->mem, &poison, 1, 0, bytes, 0, NULL, NULL);
    device_rwlock_unlock(&s->table_lock);
}

static int ocl_free(void *state, hg_devaddr addr, bool user, size_t *bytes)
{
    ocl_dev *s = state;
    cl_mem mem = NULL;
    device_rwlock_wrlock(&s->table_lock);
    /* An entry without a cl_mem is an allocation still being made: its
     * address was never returned, so it is nobody's to free. */
    const ocl_alloc *e = opencl_lookup(s, addr, 0);
    bool found =
        e != NULL && e->addr == addr && e->user == user && ocl_table_remove(s, addr, bytes, &mem);
    device_rwlock_unlock(&s->table_lock);
    if (!found)
        return HG_ENOTFOUND;
    /* OpenCL frees it once the commands that use it are done. */
    s->api->clReleaseMemObject(mem);
    return 0;
}

/* ------------------------------------------------------------ copies */

/* Enqueues one range (the read lock held); blocking when `wait`. */
static int ocl_enqueue_copy(ocl_dev *s, bool to_device, hg_devaddr addr, void *host, size_t bytes,
                            cl_bool wait)
{
    const ocl_alloc *e = opencl_lookup(s, addr, bytes);
    if (e == NULL)
        return HG_ERANGE;
    size_t off = (size_t)(addr - e->addr);
    if (to_device)
        return OCL_CALL(s->api, HG_ECOPY, clEnqueueWriteBuffer, s->queue, e->mem, wait, off, bytes,
                        host, 0, NULL, NULL);
    return OCL_CALL(s->api, HG_ECOPY, clEnqueueReadBuffer, s->queue, e->mem, wait, off, bytes, host,
                    0, NULL, NULL);
}

static int ocl_copy_to(void *state, hg_devaddr dst, const void *src, size_t bytes)
{
    ocl_dev *s = state;
    device_rwlock_rdlock(&s->table_lock);
    int rc = ocl_enqueue_copy(s, true, dst, (void *)src, bytes, CL_TRUE);
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

static int ocl_copy_from(void *state, void *dst, hg_devaddr src, size_t bytes)
{
    ocl_dev *s = state;
    device_rwlock_rdlock(&s->table_lock);
    int rc = ocl_enqueue_copy(s, false, src, dst, bytes, CL_FALSE);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_ECOPY, clFinish, s->queue);
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

/* A batch: every range enqueued without waiting, then one clFinish (which
 * also runs when a range failed, so no command outlives its host memory). */
static int ocl_copy_batch(void *state, bool to_device, const device_copy *list, size_t n)
{
    ocl_dev *s = state;
    int rc = 0;
    device_rwlock_rdlock(&s->table_lock);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (list[i].bytes != 0)
            rc = ocl_enqueue_copy(s, to_device, list[i].dev, list[i].host, list[i].bytes, CL_FALSE);
    int frc = OCL_CALL(s->api, HG_ECOPY, clFinish, s->queue);
    device_rwlock_unlock(&s->table_lock);
    return rc != 0 ? rc : frc;
}

static int ocl_fill(void *state, hg_devaddr dst, int value, size_t bytes)
{
    ocl_dev *s = state;
    int rc = HG_ERANGE;
    cl_uchar byte = (cl_uchar)value;
    device_rwlock_rdlock(&s->table_lock);
    const ocl_alloc *e = opencl_lookup(s, dst, bytes);
    if (e != NULL)
        rc = OCL_CALL(s->api, HG_ECOPY, clEnqueueFillBuffer, s->queue, e->mem, &byte, 1,
                      (size_t)(dst - e->addr), bytes, 0, NULL, NULL);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_ECOPY, clFinish, s->queue);
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

/* ---------------------------------------------------- open and close */

static void ocl_close(void *state)
{
    ocl_dev *s = state;
    if (s == NULL)
        return;
    if (s->queue != NULL)
        s->api->clFinish(s->queue);
    opencl_programs_free(s);
    for (size_t i = 0; i < s->nallocs; i++)
        if (s->allocs[i].mem != NULL)
            s->api->clReleaseMemObject(s->allocs[i].mem);
    if (s->queue != NULL)
        s->api->clReleaseCommandQueue(s->queue);
    if (s->ctx != NULL)
        s->api->clReleaseContext(s->ctx);
    free(s->allocs);
    pthread_mutex_destroy(&s->run_lock);
    pthread_mutex_destroy(&s->prog_lock);
    pthread_rwlock_destroy(&s->table_lock);
    free(s);
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
    if (rc != 0)
        return rc;
    s->max_alloc = max_alloc;
    cfg->default_mem = global;
    if (cfg->mem_default || cfg->mem_bytes > global)
        cfg->mem_bytes = global;
    cfg->ncores = cus > 0 ? cus : 1;
    if (cfg->mem_bytes > OCL_WINDOW / 2)
        cfg->mem_bytes = OCL_WINDOW / 2;
    s->window = 2 * ocl_span(cfg->mem_bytes);
    s->base = OCL_BASE + (uint64_t)(atomic_fetch_add(&ocl_next_slot, 1) % OCL_WINDOWS) * OCL_WINDOW;
    return 0;
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
    cl_int crc = CL_SUCCESS;
    if (rc == 0) {
        s->ctx = api->clCreateContext(NULL, 1, &s->id, NULL, NULL, &crc);
        rc = opencl_check(crc, "clCreateContext", HG_EUNSUPPORTED);
    }
    if (rc == 0) {
        s->queue = api->clCreateCommandQueue(s->ctx, s->id, 0, &crc);
        rc = opencl_check(crc, "clCreateCommandQueue", HG_EUNSUPPORTED);
    }
    if (rc != 0) {
        ocl_close(s);
        return rc;
    }
    *state = s;
    return 0;
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
    .copy_batch = ocl_copy_batch,
    .fill = ocl_fill,
    .translate = ocl_translate,
    .find_alloc = ocl_find_alloc,
    .owns = ocl_owns,
    .run_cores = NULL,
    .kernel_get = opencl_kernel_get,
    .queue_begin = opencl_queue_begin,
    .launch = opencl_launch,
    .queue_end = opencl_queue_end,
    .program_builds = opencl_program_builds,
    .errmsg = ocl_errmsg,
};
#else
typedef int hg_no_opencl_backend;
#endif
