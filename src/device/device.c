/*
 * device.c: the generic device object, shared by every backend.
 *
 * Owns (with spec.c, which parses specs) exact counters, the capacity
 * check, fault injection, argument validation of the public
 * hg_devbuf_* calls, and dispatch to the backend's device_ops (backend.h).
 *
 * Invariants:
 *   - counters count successful operations only: a call that fails (bad
 *     argument, range, capacity, injected fault, backend) changes none;
 *   - live_bytes is the sum of the spans of live allocations (each size
 *     rounded up to HG_DEVICE_ALIGN, as a real device's allocator rounds)
 *     and never exceeds the capacity (mem=); peak_bytes is the largest
 *     live_bytes seen;
 *   - every counted operation is also added, under the same lock, to the
 *     caller's tally when it passes one (device.h): a runner's own counts,
 *     exact even while other runners use the device;
 *   - an armed fault counts every allocation / copy that passed argument and
 *     range validation, the runtime's and the user's alike; the k-th fails
 *     once, doing nothing, and the fault disarms itself (an all-or-nothing
 *     batch that holds the k-th copy does nothing at all); a completion
 *     fault (fail_complete) counts the copied ranges the copy fault let
 *     through, fills and new allocations' preparation, and the backend is
 *     told which command is doomed (it accepts it, moves none of its
 *     bytes, and fails it as it completes);
 *   - counters and fault state change only under dev->lock, so several
 *     threads may share a device;
 *   - an allocation takes the lock twice, briefly: to count its fault and
 *     reserve its capacity (live_bytes + reserved never exceeds mem=), and
 *     to count it (or return its reservation) once the backend is done.
 *     The backend's malloc reserves an address range under its own lock;
 *     prepare (poisoning, which for 512 MiB takes seconds) runs holding no
 *     lock, so copies and allocations of other threads go on meanwhile;
 *   - a free calls the backend's free first and counts under the lock
 *     after (live_bytes counts the allocation until then: a concurrent
 *     allocation may find the capacity short, never over-committed).  No
 *     backend call is made holding dev->lock: the lock order (locks.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/backend.h"
#ifdef HG_HAVE_OPENCL
#include "device/opencl.h"
#endif

struct hg_device {
    const device_ops *ops;
    void *state; /* the backend's */
    device_config cfg;
    char spec[DEVICE_SPEC_MAX];
    uint64_t default_mem; /* this host's default capacity */
    pthread_mutex_t lock; /* counters and faults */
    hg_device_counters counters;
    uint64_t reserved;            /* capacity held by allocations in flight */
    uint64_t fault_alloc;         /* allocations left until the injected failure; 0: off */
    uint64_t fault_copy;          /* copies left until the injected failure; 0: off */
    uint64_t fault_complete;      /* copies, fills, preparations left until one completes
                                     with an error; 0: off */
    device_alloc_hook alloc_hook; /* tests only */
    void *alloc_hook_ctx;
    atomic_uint_least64_t locked_prepare_bytes; /* tests only: must stay 0 */
};

/* ---------------------------------------------------------- open / close */

int hg_device_open(const char *spec, hg_device **out, char *errbuf, size_t errlen)
{
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (out == NULL)
        return device_spec_fail(spec, errbuf, errlen, "no place for the device (out is NULL)");
    *out = NULL;
    device_config cfg = {0};
    const device_ops *ops = NULL;
    int rc = device_spec_parse(spec, &cfg, &ops, errbuf, errlen);
    if (rc != 0)
        return rc;
    hg_device *dev = calloc(1, sizeof *dev);
    if (dev == NULL) {
        device_spec_fail(spec, errbuf, errlen, "out of host memory");
        return HG_ENOMEM;
    }
    dev->ops = ops;
    dev->cfg = cfg;
    dev->fault_alloc = cfg.fail_alloc;
    dev->fault_copy = cfg.fail_copy;
    dev->fault_complete = cfg.fail_complete;
    rc = ops->open(&dev->cfg, &dev->state);
    if (rc != 0) {
        const char *why = ops->errmsg ? ops->errmsg() : NULL;
        if (why != NULL && *why != '\0')
            device_spec_fail(spec, errbuf, errlen, "backend '%s' could not start: %s", ops->name,
                             why);
        else
            device_spec_fail(spec, errbuf, errlen,
                             "backend '%s' could not start with mem=%llu bytes (%s)", ops->name,
                             (unsigned long long)cfg.mem_bytes, hg_strerror(rc));
        free(dev);
        return rc;
    }
    dev->default_mem = dev->cfg.default_mem;
    pthread_mutex_init(&dev->lock, NULL);
    atomic_init(&dev->locked_prepare_bytes, 0);
    device_spec_normalize(&dev->cfg, ops, dev->default_mem, dev->spec, sizeof dev->spec);
    *out = dev;
    return 0;
}

void hg_device_close(hg_device *dev)
{
    if (dev == NULL)
        return;
    dev->ops->close(dev->state);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

/* ------------------------------------------------------------- queries */

const char *hg_device_spec(const hg_device *dev)
{
    return dev ? dev->spec : "";
}

uint64_t hg_device_capacity(const hg_device *dev)
{
    return dev ? dev->cfg.mem_bytes : 0;
}

uint32_t hg_device_num_cores(const hg_device *dev)
{
    return dev ? dev->cfg.ncores : 0;
}

hg_core_type hg_device_core_type(const hg_device *dev, uint32_t core)
{
    if (dev == NULL || core >= dev->cfg.ncores)
        return HG_CORE_ANY;
    return device_config_core_type(&dev->cfg, core);
}

bool device_has_core_type(const hg_device *dev, hg_core_type type)
{
    if (dev == NULL)
        return false;
    if (!dev->cfg.typed || type == HG_CORE_ANY)
        return true;
    return (type == HG_CORE_CUBE ? dev->cfg.ncube : dev->cfg.nvector) > 0;
}

void hg_device_counters_get(const hg_device *dev, hg_device_counters *out)
{
    if (out == NULL)
        return;
    if (dev == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    /* The lock is not part of the device's observable state. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&dev->lock;
    device_mutex_lock(lock);
    *out = dev->counters;
    device_mutex_unlock(lock);
}

/* ------------------------------------------------------ fault injection */

/* The counter of fault `kind` (a valid one). */
static uint64_t *device_fault_of(hg_device *dev, hg_fault kind)
{
    return kind == HG_FAULT_ALLOC  ? &dev->fault_alloc
           : kind == HG_FAULT_COPY ? &dev->fault_copy
                                   : &dev->fault_complete;
}

static bool device_fault_kind(hg_fault kind)
{
    return kind == HG_FAULT_ALLOC || kind == HG_FAULT_COPY || kind == HG_FAULT_COMPLETE;
}

int hg_device_inject_fault(hg_device *dev, hg_fault kind, uint64_t k)
{
    if (dev == NULL || !device_fault_kind(kind))
        return HG_EINVAL;
    device_mutex_lock(&dev->lock);
    *device_fault_of(dev, kind) = k;
    device_mutex_unlock(&dev->lock);
    return 0;
}

uint64_t device_debug_fault_left(hg_device *dev, hg_fault kind)
{
    if (dev == NULL || !device_fault_kind(kind))
        return 0;
    device_mutex_lock(&dev->lock);
    uint64_t left = *device_fault_of(dev, kind);
    device_mutex_unlock(&dev->lock);
    return left;
}

/* Counts one operation against an armed fault; true if this one must fail.
 * Caller holds dev->lock. */
static bool device_fault_fires(uint64_t *left)
{
    if (*left == 0)
        return false;
    return --*left == 0;
}

/* ------------------------------------------------------- device memory */

/* The device bytes an allocation of `bytes` holds; false past the range. */
static bool device_span(size_t bytes, uint64_t *span)
{
    if (bytes > UINT64_MAX - (HG_DEVICE_ALIGN - 1))
        return false;
    *span = ((uint64_t)bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
    return true;
}

/* Adds one allocation of `span` bytes to a counter set. */
static void counters_alloc(hg_device_counters *c, uint64_t span)
{
    c->allocs++;
    c->live_bytes += span;
    if (c->live_bytes > c->peak_bytes)
        c->peak_bytes = c->live_bytes;
}

/* Counts the allocation fault and reserves `span` bytes of capacity, under
 * the lock: HG_EDEVMEM if the fault fires or the capacity is short.  Then
 * counts the completion fault for the allocation's preparation (*doomed). */
static int device_reserve(hg_device *dev, uint64_t span, bool *doomed)
{
    device_mutex_lock(&dev->lock);
    int rc = device_fault_fires(&dev->fault_alloc) ? HG_EDEVMEM : 0;
    if (rc == 0 && span > dev->cfg.mem_bytes - dev->counters.live_bytes - dev->reserved)
        rc = HG_EDEVMEM;
    if (rc == 0)
        dev->reserved += span;
    *doomed = rc == 0 && device_fault_fires(&dev->fault_complete);
    device_mutex_unlock(&dev->lock);
    return rc;
}

/* Readies a new allocation's memory, holding no lock (device.h's debug
 * hook and counter watch that).  On failure (the device's, or an injected
 * completion fault) the allocation is undone: HG_EDEVMEM. */
static int device_prepare(hg_device *dev, hg_devaddr addr, size_t bytes, bool user, bool doomed)
{
    if (dev->alloc_hook != NULL)
        dev->alloc_hook(dev->alloc_hook_ctx, addr, bytes);
    if (device_locks_held() != 0)
        atomic_fetch_add(&dev->locked_prepare_bytes, bytes);
    if (dev->ops->prepare(dev->state, addr, bytes, doomed) == 0)
        return 0;
    size_t gone = 0;
    dev->ops->free(dev->state, addr, user, &gone); /* nobody else has its address yet */
    return HG_EDEVMEM;
}

/* An allocation for the user (hg_devbuf_malloc) or the runtime. */
static int device_alloc(hg_device *dev, size_t bytes, bool user, hg_devaddr *out,
                        hg_device_counters *tally)
{
    if (dev == NULL || out == NULL || bytes == 0)
        return HG_EINVAL;
    *out = 0;
    uint64_t span;
    if (!device_span(bytes, &span))
        return HG_EDEVMEM;
    bool doomed = false;
    int rc = device_reserve(dev, span, &doomed);
    if (rc != 0)
        return rc;
    hg_devaddr addr = 0;
    rc = dev->ops->malloc(dev->state, bytes, user, &addr);
    if (rc == 0)
        rc = device_prepare(dev, addr, bytes, user, doomed);
    device_mutex_lock(&dev->lock);
    dev->reserved -= span; /* counted as live now, or given back */
    if (rc == 0) {
        counters_alloc(&dev->counters, span);
        if (tally != NULL)
            counters_alloc(tally, span);
        *out = addr;
    }
    device_mutex_unlock(&dev->lock);
    return rc;
}

int device_malloc(hg_device *dev, size_t bytes, hg_devaddr *out, hg_device_counters *tally)
{
    return device_alloc(dev, bytes, false, out, tally);
}

/* Frees an allocation of the given owner: the user frees only its own, and
 * so does the runtime. */
static int device_release(hg_device *dev, hg_devaddr addr, bool user, hg_device_counters *tally)
{
    if (dev == NULL)
        return HG_EINVAL;
    size_t bytes = 0;
    uint64_t span = 0;
    /* The backend first, holding no lock of ours (the lock order, at the
     * top of this file): its free may wait for its table's readers. */
    int rc = dev->ops->free(dev->state, addr, user, &bytes);
    if (rc != 0)
        return rc;
    device_span(bytes, &span); /* cannot fail: the allocation had a span */
    device_mutex_lock(&dev->lock);
    dev->counters.frees++;
    dev->counters.live_bytes -= span;
    if (tally != NULL) {
        tally->frees++;
        tally->live_bytes -= span < tally->live_bytes ? span : tally->live_bytes;
    }
    device_mutex_unlock(&dev->lock);
    return 0;
}

int device_free(hg_device *dev, hg_devaddr addr, hg_device_counters *tally)
{
    return device_release(dev, addr, false, tally);
}

int hg_devbuf_malloc(hg_device *dev, size_t bytes, hg_devaddr *out)
{
    return device_alloc(dev, bytes, true, out, NULL);
}

int hg_devbuf_free(hg_device *dev, hg_devaddr addr)
{
    return device_release(dev, addr, true, NULL);
}

/* True if [addr, addr+bytes) lies inside one live allocation (bytes > 0):
 * through find_alloc, which every backend has (translate is the sim's). */
static bool device_range_live(hg_device *dev, hg_devaddr addr, size_t bytes)
{
    hg_devaddr base;
    size_t size;
    bool user;
    if (dev->ops->find_alloc(dev->state, addr, &base, &size, &user) != 0)
        return false;
    return bytes <= size - (size_t)(addr - base);
}

/* Validates every range of a batch (nothing moves unless all are valid) and
 * counts the armed copy fault across its non-empty ranges.  Returns
 * HG_EINVAL / HG_ERANGE with *ok the first invalid range, or 0 with *ok the
 * number of leading ranges that may go ahead (n unless the fault fires
 * inside the batch), and *doomed the one of those the completion fault
 * fails (*ok if none). */
static int device_batch_begin(hg_device *dev, const device_copy *list, size_t n, size_t *ok,
                              size_t *doomed)
{
    *ok = 0;
    *doomed = n;
    if (dev == NULL || (list == NULL && n != 0))
        return HG_EINVAL;
    for (size_t i = 0; i < n; i++) {
        *ok = i;
        if (list[i].bytes == 0)
            continue;
        if (list[i].host == NULL)
            return HG_EINVAL;
        if (!device_range_live(dev, list[i].dev, list[i].bytes))
            return HG_ERANGE;
    }
    *ok = n;
    device_mutex_lock(&dev->lock);
    for (size_t i = 0; i < n; i++) {
        if (list[i].bytes != 0 && device_fault_fires(&dev->fault_copy)) {
            *ok = i;
            break;
        }
    }
    *doomed = *ok;
    for (size_t i = 0; i < *ok; i++) {
        if (list[i].bytes != 0 && device_fault_fires(&dev->fault_complete)) {
            *doomed = i;
            break;
        }
    }
    device_mutex_unlock(&dev->lock);
    return 0;
}

/* Counts the first n ranges of a finished batch (one batch call if any
 * range moved bytes) on the device and on the caller's tally. */
static void device_batch_count(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                               hg_device_counters *tally)
{
    uint64_t bytes = 0, ranges = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += list[i].bytes;
        ranges += list[i].bytes != 0;
    }
    if (ranges == 0)
        return;
    device_mutex_lock(&dev->lock);
    for (hg_device_counters *c = &dev->counters; c != NULL; c = c == tally ? NULL : tally) {
        *(to_device ? &c->h2d_bytes : &c->d2h_bytes) += bytes;
        *(to_device ? &c->h2d_copies : &c->d2h_copies) += ranges;
        (*(to_device ? &c->h2d_batches : &c->d2h_batches))++;
    }
    device_mutex_unlock(&dev->lock);
}

/* The synchronous default for a backend without copy_batch: one call per
 * range (IREE's queue emulation habit: a simple backend needs nothing new),
 * the doomed one failed in place of its copy.  *failed: as copy_batch's. */
static int device_batch_run(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                            size_t doomed, size_t *failed)
{
    if (dev->ops->copy_batch != NULL)
        return dev->ops->copy_batch(dev->state, to_device, list, n, doomed, failed);
    for (size_t i = 0; i < n; i++) {
        *failed = i;
        if (i == doomed)
            return HG_ECOPY;
        if (list[i].bytes == 0)
            continue;
        int rc = to_device
                     ? dev->ops->copy_to(dev->state, list[i].dev, list[i].host, list[i].bytes)
                     : dev->ops->copy_from(dev->state, list[i].host, list[i].dev, list[i].bytes);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int device_copy_batch(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                      hg_device_counters *tally, size_t *done)
{
    size_t ok = 0, doomed = 0, failed = 0;
    if (done != NULL)
        *done = 0;
    int rc = device_batch_begin(dev, list, n, &ok, &doomed);
    if (rc != 0)
        return rc;
    rc = device_batch_run(dev, to_device, list, ok, doomed, &failed);
    if (rc != 0) /* the ranges before the failed one are done */
        ok = failed < ok ? failed : ok;
    device_batch_count(dev, to_device, list, ok, tally);
    if (done != NULL)
        *done = ok;
    return rc != 0 ? rc : ok < n ? HG_ECOPY : 0;
}

bool device_batch_whole(const hg_device *dev)
{
    return dev != NULL && dev->ops->copy_batch != NULL && dev->ops->copy_batch_whole;
}

/* The fault is decided for the whole batch before the backend sees it, and
 * the backend checks every range before it copies any: so a failure at any
 * range, injected or not, leaves every destination byte as it was. */
int device_copy_batch_whole(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                            hg_device_counters *tally, size_t *at)
{
    size_t ok = 0, doomed = 0, failed = 0;
    if (at != NULL)
        *at = 0;
    if (dev == NULL)
        return HG_EINVAL;
    if (!device_batch_whole(dev))
        return HG_EUNSUPPORTED;
    /* A completion fault fails the whole batch as a copy fault does: its
     * ranges all complete at once, as they are checked. */
    int rc = device_batch_begin(dev, list, n, &ok, &doomed);
    if (rc == 0 && (ok < n || doomed < n))
        rc = HG_ECOPY;
    if (rc != 0) {
        if (at != NULL)
            *at = doomed < ok ? doomed : ok;
        return rc;
    }
    rc = dev->ops->copy_batch(dev->state, to_device, list, n, n, &failed);
    if (rc != 0)
        return rc;
    device_batch_count(dev, to_device, list, n, tally);
    return 0;
}

/* A zero-byte copy moves nothing: it succeeds without counting (a non-NULL
 * device is all it needs). */
int device_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes,
                   hg_device_counters *tally)
{
    device_copy one = {(void *)src, dst, bytes};
    if (src == NULL && bytes != 0)
        return HG_EINVAL;
    return device_copy_batch(dev, true, &one, 1, tally, NULL);
}

int device_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes,
                     hg_device_counters *tally)
{
    device_copy one = {dst, src, bytes};
    if (dst == NULL && bytes != 0)
        return HG_EINVAL;
    return device_copy_batch(dev, false, &one, 1, tally, NULL);
}

/* The user's copies reach only user allocations: a resident copy written
 * behind the runtime's back would be used as fresh. */
static bool device_user_range(hg_device *dev, hg_devaddr addr, size_t bytes)
{
    hg_devaddr base;
    size_t size;
    return bytes == 0 || device_addr_lookup(dev, addr, &base, &size) == DEVICE_ADDR_USER;
}

int hg_devbuf_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes)
{
    if (dev != NULL && !device_user_range(dev, dst, bytes))
        return HG_ERANGE;
    return device_copy_to(dev, dst, src, bytes, NULL);
}

int hg_devbuf_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes)
{
    if (dev != NULL && !device_user_range(dev, src, bytes))
        return HG_ERANGE;
    return device_copy_from(dev, dst, src, bytes, NULL);
}

int device_fill(hg_device *dev, hg_devaddr dst, int value, size_t bytes)
{
    if (dev == NULL)
        return HG_EINVAL;
    if (bytes == 0)
        return 0;
    if (!device_range_live(dev, dst, bytes)) /* only a valid fill counts against a fault */
        return HG_ERANGE;
    device_mutex_lock(&dev->lock);
    const bool doomed = device_fault_fires(&dev->fault_complete);
    device_mutex_unlock(&dev->lock);
    return dev->ops->fill(dev->state, dst, value, bytes, doomed);
}

/* -------------------------------------------------- internal interface */

void *device_translate(hg_device *dev, hg_devaddr addr, size_t bytes)
{
    return dev ? dev->ops->translate(dev->state, addr, bytes) : NULL;
}

int device_find_alloc(hg_device *dev, hg_devaddr addr, hg_devaddr *base, size_t *size)
{
    if (dev == NULL || base == NULL || size == NULL)
        return HG_EINVAL;
    bool user;
    return dev->ops->find_alloc(dev->state, addr, base, size, &user);
}

device_addr_owner device_addr_lookup(hg_device *dev, hg_devaddr addr, hg_devaddr *base,
                                     size_t *size)
{
    bool user = false;
    if (dev == NULL || !dev->ops->owns(dev->state, addr))
        return DEVICE_ADDR_FOREIGN;
    if (dev->ops->find_alloc(dev->state, addr, base, size, &user) != 0)
        return DEVICE_ADDR_NONE;
    return user ? DEVICE_ADDR_USER : DEVICE_ADDR_RUNTIME;
}

void device_debug_set_alloc_hook(hg_device *dev, device_alloc_hook fn, void *ctx)
{
    if (dev == NULL)
        return;
    dev->alloc_hook = fn;
    dev->alloc_hook_ctx = ctx;
}

uint64_t device_debug_locked_prepare_bytes(const hg_device *dev)
{
    return dev ? atomic_load(&dev->locked_prepare_bytes) : 0;
}

void device_run_cores(hg_device *dev, device_core_fn fn, void *ctx)
{
    if (dev != NULL && fn != NULL && dev->ops->run_cores != NULL)
        dev->ops->run_cores(dev->state, fn, ctx);
}

/* ------------------------------------------------------- queue devices */

bool device_runs_queue(const hg_device *dev)
{
    return dev != NULL && dev->ops->launch != NULL;
}

int device_kernel_get(hg_device *dev, const char *source, const char *entry, const void **handle,
                      hg_err *e)
{
    if (!device_runs_queue(dev))
        return err_set(e, HG_EUNSUPPORTED, "device '%s' runs no kernel programs",
                       hg_device_spec(dev));
    return dev->ops->kernel_get(dev->state, source, entry, handle, e);
}

int device_queue_begin(hg_device *dev, uint32_t ntasks, bool profile, hg_err *e)
{
    if (!device_runs_queue(dev))
        return err_set(e, HG_EUNSUPPORTED, "device '%s' has no queue", hg_device_spec(dev));
    return dev->ops->queue_begin(dev->state, ntasks, profile, e);
}

int device_launch(hg_device *dev, const device_task *t, hg_err *e)
{
    return dev->ops->launch(dev->state, t, e);
}

int device_queue_end(hg_device *dev, uint32_t ntasks, device_queue_result *res, hg_err *e)
{
    return dev->ops->queue_end(dev->state, ntasks, res, e);
}

int device_host_launch(hg_device *dev, uint32_t task, hg_err *e)
{
    if (dev == NULL || dev->ops->host_launch == NULL)
        return err_set(e, HG_EUNSUPPORTED, "device '%s' stages no host steps", hg_device_spec(dev));
    return dev->ops->host_launch(dev->state, task, e);
}

int device_host_wait(hg_device *dev, const uint32_t *tasks, uint32_t n, hg_err *e)
{
    if (dev == NULL || dev->ops->host_wait == NULL)
        return err_set(e, HG_EUNSUPPORTED, "device '%s' stages no host steps", hg_device_spec(dev));
    return dev->ops->host_wait(dev->state, tasks, n, e);
}

void device_host_done(hg_device *dev, uint32_t task)
{
    if (dev != NULL && dev->ops->host_done != NULL)
        dev->ops->host_done(dev->state, task);
}

uint64_t device_alloc_piece(const hg_device *dev)
{
    if (dev == NULL || dev->ops->alloc_piece == NULL)
        return 0;
    return dev->ops->alloc_piece(dev->state);
}

uint64_t device_debug_profiled_runs(const hg_device *dev)
{
    if (dev == NULL || dev->ops->profiled_runs == NULL)
        return 0;
    return dev->ops->profiled_runs(dev->state);
}

uint64_t device_debug_program_builds(const hg_device *dev)
{
    if (dev == NULL || dev->ops->program_builds == NULL)
        return 0;
    return dev->ops->program_builds(dev->state);
}

const char *device_backend_errmsg(const hg_device *dev)
{
    const char *m = dev && dev->ops->errmsg ? dev->ops->errmsg() : NULL;
    return m ? m : "";
}

void device_list(FILE *f)
{
    fprintf(f,
            "sim  the embedded simulator: sim:cores=N or sim:cube=C,vector=V, "
            "memory %llu MiB by default (half the host's)\n",
            (unsigned long long)(device_default_mem() >> 20));
#ifdef HG_HAVE_OPENCL
    opencl_list(f);
#else
    fprintf(f, "opencl: not built (no CL/cl.h at build time; Debian: opencl-c-headers "
               "ocl-icd-opencl-dev pocl-opencl-icd)\n");
#endif
}
