/*
 * device.h: the backend interface and the generic device object.
 *
 * device.c owns what every backend shares: spec parsing of the common keys,
 * exact counters, fault injection, the normalized spec string.  A backend
 * (sim.c, later cuda.c) supplies memory, copies, address translation and its
 * cores through device_ops.  Stages above talk to the device only through the
 * public hg_devbuf_* calls and the device_* calls below.
 */
#ifndef HG_DEVICE_DEVICE_H
#define HG_DEVICE_DEVICE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "hostgraph.h"

/*
 * Memory and copies with a tally: the same as hg_devbuf_malloc, _free,
 * _copy_to and _copy_from, and each counted operation is also added to
 * *tally (when not NULL), under the device's lock.  device_malloc's memory
 * is the runtime's: device_free frees only that, hg_devbuf_free only the
 * user's, and a device view (a run arg) is valid only in the user's.  A runner passes its own
 * counters, so its stats count its operations only, even while other runners
 * share the device.  live_bytes in a tally counts what that caller holds.
 */
int device_malloc(hg_device *dev, size_t bytes, hg_devaddr *out, hg_device_counters *tally);
int device_free(hg_device *dev, hg_devaddr addr, hg_device_counters *tally);
int device_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes,
                   hg_device_counters *tally);
int device_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes,
                     hg_device_counters *tally);
/* One range of a batched copy: `bytes` between host and dev. */
typedef struct device_copy {
    void *host;
    hg_devaddr dev;
    size_t bytes;
} device_copy;

/* Copies a list of ranges in one call, host -> device (to_device) or back.
 * Every range is validated first (HG_EINVAL, HG_ERANGE: nothing moves);
 * then each non-empty range counts as one copy (h2d_copies / d2h_copies)
 * and against an armed copy fault, so a fault can land inside a batch: the
 * ranges before it are done and counted, the rest are not, and the call
 * returns HG_ECOPY.  The call counts one batch (h2d_batches / d2h_batches)
 * when it moved anything.  *done (may be NULL) gets the number of ranges
 * completed.  The sim runs a batch as memcpys under one lock; a real backend
 * maps it to one batch of async copies. */
int device_copy_batch(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                      hg_device_counters *tally, size_t *done);

/* Whether dev's batches can be all or nothing (device_copy_batch_whole): a
 * host-memory device (the sim) checks every range of a batch before it
 * copies any, and a checked copy cannot fail.  A queue device (OpenCL)
 * makes no such promise: its copies are commands that can fail one by one. */
bool device_batch_whole(const hg_device *dev);

/* device_copy_batch, all or nothing, on a device with device_batch_whole:
 * every range is validated (HG_EINVAL, HG_ERANGE) and the armed copy fault
 * counted over all the batch's non-empty ranges, one each, as
 * device_copy_batch counts them, BEFORE any byte moves.  A fault that fires
 * on any range of the batch fails all of it (HG_ECOPY; the fault disarms
 * as ever): no byte moves and nothing is counted.  On success every range
 * moved and counts as device_copy_batch's do.  HG_EUNSUPPORTED (nothing
 * moves, no fault counted) on a device without device_batch_whole.  *at
 * (may be NULL) gets the range a failure is blamed on: the invalid range,
 * or the one the fault fired on (0 if the backend's own check failed: a
 * range freed meanwhile). */
int device_copy_batch_whole(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                            hg_device_counters *tally, size_t *at);

/* Sets `bytes` device bytes at dst to `value` on the device itself: no copy
 * crosses the link and none is counted.  HG_ERANGE unless the range lies in
 * one live allocation. */
int device_fill(hg_device *dev, hg_devaddr dst, int value, size_t bytes);

/* The function every core runs for one device_run_cores call. */
typedef void (*device_core_fn)(void *ctx, uint32_t core, hg_core_type type);

/* Looks up the live allocation containing [addr, addr+bytes) and returns a
 * pointer usable by kernels on core threads.  NULL if out of range.  bytes
 * may be 0 (then addr must be inside or one past an allocation). */
void *device_translate(hg_device *dev, hg_devaddr addr, size_t bytes);

/* The live allocation containing addr (the user's or the runtime's): its
 * base and size.  HG_ENOTFOUND. */
int device_find_alloc(hg_device *dev, hg_devaddr addr, hg_devaddr *base, size_t *size);

/* Whose address addr is on dev.  Every device owns its own addresses: no
 * other device hands them out. */
typedef enum device_addr_owner {
    DEVICE_ADDR_USER,    /* in a live user allocation (hg_devbuf_malloc): base, size */
    DEVICE_ADDR_RUNTIME, /* in a live allocation of the runtime (device_malloc): a
                            retained buffer, resident copy or scratch; base, size */
    DEVICE_ADDR_NONE,    /* dev's address, in no live allocation: freed or never given */
    DEVICE_ADDR_FOREIGN  /* not an address of dev: another device's, or no device's */
} device_addr_owner;
device_addr_owner device_addr_lookup(hg_device *dev, hg_devaddr addr, hg_devaddr *base,
                                     size_t *size);

/* Tests: operations left until the armed fault of that kind fires (0: it
 * fired, or none is armed). */
uint64_t device_debug_fault_left(hg_device *dev, hg_fault kind);

/* Debug hook for tests: called on the allocating thread for every
 * allocation, once its range is reserved and before its memory is prepared
 * (poisoned), with the address and size.  Set it (NULL removes it) while no
 * other thread uses the device. */
typedef void (*device_alloc_hook)(void *ctx, hg_devaddr addr, size_t bytes);
void device_debug_set_alloc_hook(hg_device *dev, device_alloc_hook fn, void *ctx);
/* Bytes of new allocations the device prepared (poisoned) while the
 * preparing thread held a device or backend lock: 0 unless a change broke
 * the rule that an allocation's poisoning stalls no other thread. */
uint64_t device_debug_locked_prepare_bytes(const hg_device *dev);

/* Runs fn(ctx, core, type) once on every core thread and returns when all
 * have returned.  Safe to call from several threads: callers take turns (one
 * graph on the cores at a time).  Not reentrant from a core thread. */
void device_run_cores(hg_device *dev, device_core_fn fn, void *ctx);

/* True if some core can run kernels of type `type` (CUBE or VECTOR). */
bool device_has_core_type(const hg_device *dev, hg_core_type type);

/* ------------------------------------------------ queue devices (opencl) */

/* True if dev runs kernels through a queue (OpenCL kernel slots) rather
 * than host functions on core threads (the sim). */
bool device_runs_queue(const hg_device *dev);

/* The device's handle for kernel `entry` of program `source`: built at the
 * first use of that source text on this device (the text is copied, and
 * the cache is keyed by its content), then reused for as long as the device
 * lives.  A build error is HG_EINVAL with the compiler log's first lines. */
int device_kernel_get(hg_device *dev, const char *source, const char *entry, const void **handle,
                      hg_err *e);

/* One task arg of a launch: the view's first element and its layout. */
typedef struct device_karg {
    hg_devaddr addr;   /* 0 for an empty view */
    hg_devaddr lo, hi; /* the view's device byte extent (lo == hi when empty) */
    hg_dtype dtype;
    uint32_t ndims;
    size_t shape[HG_MAX_DIMS];
    size_t strides[HG_MAX_DIMS];
    bool write;
} device_karg;

/* One task of a run on a queue device. */
typedef struct device_task {
    const void *kernel; /* device_kernel_get's handle */
    uint32_t task;      /* 0..ntasks-1, launched in increasing order */
    const device_karg *args;
    uint32_t nargs;
    const uint64_t *scalars;
    uint32_t nscalars;
    const uint32_t *waits; /* earlier tasks (already launched) this one must follow */
    uint32_t nwaits;
} device_task;

/* What the one wait of a run found. */
typedef struct device_queue_result {
    uint32_t bad_task; /* the lowest task that failed (UINT32_MAX: none) */
    int32_t bad_code;  /* its status word; 0 if its command failed (then an error) */
    /* In: NULL, or room for 2 * ntasks.  Out: each task's start and end on
     * the device, in clock_now_ns's clock ([2t], [2t+1]); a task never
     * launched gets 0, 0.  Only after a queue_begin with `profile`. */
    uint64_t *spans;
} device_queue_result;

/* A run on a queue device: begin (takes the device's run lock and clears
 * ntasks status words; `profile` asks for per-task times, at a cost paid
 * only then), one launch per task in increasing task order, each after the
 * tasks it waits for (the device may run tasks that wait for nothing
 * common at once, in any order), end (one wait for all of it; releases the
 * lock, also after a failed launch).  end reports the lowest task whose
 * kernel set its status word, or whose command failed (then its return is
 * HG_EKERNEL with the API's words).  The status words are the device's
 * own: no counted copy, no allocation after the first run of a size. */
int device_queue_begin(hg_device *dev, uint32_t ntasks, bool profile, hg_err *e);
int device_launch(hg_device *dev, const device_task *t, hg_err *e);
int device_queue_end(hg_device *dev, uint32_t ntasks, device_queue_result *res, hg_err *e);
/* Host steps (hg_task_submit_host_step) on a queue device.  The executor
 * runs a host step's host code on a helper thread; the device gives it an
 * event the helper completes, so the tasks that depend on it wait for it
 * on the device and no other task does:
 *   - host_launch, in the launch order (as device_launch, between begin
 *     and end): makes task `task`'s event, one the host completes (OpenCL:
 *     a user event), and flushes the run queues so that the tasks it
 *     depends on reach the device;
 *   - host_wait, from any thread: blocks until every task of `tasks` (or,
 *     for n == 0, the run's begin) is done.  HG_EKERNEL if one's command
 *     failed;
 *   - host_done, from any thread, once per host_launch, always (also after
 *     a failure: the host step's waiters would wait for ever otherwise):
 *     completes the task's event.  A failure is reported by the executor,
 *     never through the event: PoCL 3.1 never completes a command enqueued
 *     after an event of its wait list failed, and the run's one wait is
 *     such a command.
 * HG_EUNSUPPORTED from a device without them (the sim: host steps run on
 * its cores). */
int device_host_launch(hg_device *dev, uint32_t task, hg_err *e);
int device_host_wait(hg_device *dev, const uint32_t *tasks, uint32_t n, hg_err *e);
void device_host_done(hg_device *dev, uint32_t task);
/* The bytes of each piece a device splits its allocations into (a kernel
 * arg must lie in one piece): 0 when an allocation is one piece whatever
 * its size (the sim).  OpenCL: its max alloc, rounded down to
 * HG_DEVICE_ALIGN. */
uint64_t device_alloc_piece(const hg_device *dev);
/* Runs the device has timed per task (queue_begin's `profile`): tests see
 * that an untraced run pays no profiling. */
uint64_t device_debug_profiled_runs(const hg_device *dev);
/* Programs the device has built (tests: a later round builds none). */
uint64_t device_debug_program_builds(const hg_device *dev);
/* The calling thread's last message from dev's backend ("" if none): why
 * an allocation or copy failed, in the native API's words. */
const char *device_backend_errmsg(const hg_device *dev);

/* Writes one line per device this build can open: the sim, then every
 * OpenCL platform and device (or why there is none): compute units,
 * memory, max allocation, and its queue shape (out-of-order or not). */
void device_list(FILE *f);
/* From now on, in this process, every OpenCL program build keeps its
 * warnings and prints its log on stderr, as HG_OPENCL_BUILD_LOG=1 asks
 * (the command's -v; opencl_prog.c).  Safe from any thread. */
void device_build_log_on(void);

#endif
