/*
 * hostgraph.h: the one public header of libhostgraph.
 *
 * hostgraph builds task graphs of compute kernels on the host, runs them on a
 * device round after round, and moves only the bytes that changed.  A run is
 *
 *     bind -> orchestrate -> execute -> copy back -> publish -> release
 *
 * Every call returns 0 or a negative HG_E* code; hg_strerror() names a code.
 * Calls that take a runner keep a detailed message on it (hg_runner_errmsg),
 * naming the arg and the value.  Nothing here asserts on user input.
 *
 * Ownership, in one place:
 *   - a host buffer owns its memory when created by hg_hostbuf_create, and
 *     never when it wraps user memory (hg_hostbuf_wrap);
 *   - device memory from hg_devbuf_malloc is user-owned: the runtime reads and
 *     writes it when it is passed as an arg but never frees it; a non-empty
 *     device view passed as an arg must lie inside one such allocation of
 *     the runner's own device;
 *   - the runner owns its retained device buffer, its resident copies and its
 *     pooled scratch; closing the runner frees them all and forgets every
 *     residency record.
 *
 * Threading: one runner is used by one thread at a time.  Host buffers are not
 * locked; do not write one while a run that uses it is in flight.
 */
#ifndef HOSTGRAPH_H
#define HOSTGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HG_VERSION "0.1.0"

/* ------------------------------------------------------------------ errors */

enum {
    HG_OK = 0,
    HG_EINVAL = -1,        /* an argument is malformed (names it in the message) */
    HG_EOVERFLOW = -2,     /* a size computation would overflow */
    HG_ELIMIT = -3,        /* a fixed limit was exceeded (args, scalars, dims) */
    HG_ENOMEM = -4,        /* host memory allocation failed */
    HG_EDEVMEM = -5,       /* device memory allocation failed */
    HG_ECOPY = -6,         /* a host<->device copy failed */
    HG_EKERNEL = -7,       /* a kernel returned an error */
    HG_ENOHOSTVIEW = -8,   /* host code read an arg that is only a device view */
    HG_ERANGE = -9,        /* a view reaches outside its buffer or arg */
    HG_ENOTFOUND = -10,    /* no such scene, arg, param or device address */
    HG_EIO = -11,          /* a file could not be read or written */
    HG_ESTALE = -12,       /* a resident copy no longer matches its host buffer */
    HG_EUNSUPPORTED = -13, /* the device cannot do what was asked */
    HG_ECANCELED = -14     /* the run was stopped by hg_runner_cancel */
};

/* A short, static, human name for an HG_E* code ("view out of range"). */
const char *hg_strerror(int code);

/* ------------------------------------------------------------------ dtypes */

typedef enum hg_dtype {
    HG_F32,
    HG_F16,
    HG_BF16,
    HG_F64,
    HG_I8,
    HG_U8,
    HG_I16,
    HG_I32,
    HG_I64,
    HG_U64,
    HG_BOOL,
    HG_DTYPE_COUNT
} hg_dtype;

/* Bytes per element; 0 for a value outside the enum. */
size_t hg_dtype_size(hg_dtype dtype);
/* "f32", "bf16", ...; "?" for a value outside the enum. */
const char *hg_dtype_name(hg_dtype dtype);

/* IEEE half and bfloat16 conversions, round to nearest even. */
float hg_f16_to_f32(uint16_t h);
uint16_t hg_f32_to_f16(float f);
float hg_bf16_to_f32(uint16_t b);
uint16_t hg_f32_to_bf16(float f);

/* Reads element i (a linear index into a dense buffer) of any dtype as a
 * double.  Used by golden checks and tests. */
double hg_dtype_load(hg_dtype dtype, const void *base, size_t i);
/* Stores v, converted (rounded, saturating for integers), as element i. */
void hg_dtype_store(hg_dtype dtype, void *base, size_t i, double v);

/* ------------------------------------------------------------ host buffers */

/*
 * A host buffer is host memory registered once.  It has an id that is never
 * reused in the process and a content generation that every write through the
 * API bumps (with the written byte range).  Residency keys freshness on
 * (id, generation): a write that bypasses the API breaks that contract.
 */
typedef struct hg_hostbuf hg_hostbuf;

/*
 * Two live host buffers never overlap: registering memory [data, data+bytes)
 * that shares a byte with a live buffer's fails with HG_EINVAL, since the
 * same bytes under two ids would let a write declared through one leave the
 * other's resident copy "fresh".  Wrap memory once and take views of that
 * buffer (hg_tensor_host, hg_tensor_slice).  A zero-byte buffer overlaps
 * nothing; a destroyed buffer's memory may be registered again.  Checking
 * costs O(log n) in live buffers.  These two calls have no runner to carry a
 * message: on failure hg_last_errmsg() says why (on overlap, naming the live
 * buffer's id and address range and the new range), and on success it is "".
 */
/* Allocates a zeroed host buffer of `bytes` bytes (0 is allowed).  HG_EINVAL
 * (out NULL, or the new memory overlaps a live buffer: one that wrapped
 * memory that was freed while it lived); HG_ENOMEM. */
int hg_hostbuf_create(size_t bytes, hg_hostbuf **out);
/* Registers user memory; hg_hostbuf_destroy will not free `data`.
 * `data` may be NULL only when `bytes` is 0.  HG_EINVAL (out NULL, data NULL
 * with bytes, or the memory overlaps a live buffer); HG_ENOMEM. */
int hg_hostbuf_wrap(void *data, size_t bytes, hg_hostbuf **out);
/* Forgets the buffer (frees its memory if it was created) and releases its
 * memory's registration.  Its resident copies in every runner are freed on
 * the device at once (each runner forgets their records at its next run or
 * query), so wrapping a fresh buffer every step never fills the device.  Do
 * not destroy a buffer while a run that uses it is in flight.  NULL is a
 * no-op. */
void hg_hostbuf_destroy(hg_hostbuf *hb);
/* The calling thread's last error of hg_hostbuf_create or hg_hostbuf_wrap as
 * one line naming the argument and the value; "" after either succeeded (and
 * before any call).  Thread-local: another thread's failure never shows here.
 * Valid until this thread's next such call. */
const char *hg_last_errmsg(void);

uint64_t hg_hostbuf_id(const hg_hostbuf *hb);
uint64_t hg_hostbuf_generation(const hg_hostbuf *hb);
size_t hg_hostbuf_size(const hg_hostbuf *hb);
/* The buffer's bytes.  Reading is always fine; a write through this pointer
 * must be followed by hg_hostbuf_mark_written for the same range. */
void *hg_hostbuf_data(const hg_hostbuf *hb);

/* Copies `bytes` from src to buffer offset `offset`, bumps the generation.
 * HG_ERANGE if the range does not fit the buffer. */
int hg_hostbuf_write(hg_hostbuf *hb, size_t offset, const void *src, size_t bytes);
/* Declares that [offset, offset+bytes) was written in place; bumps the
 * generation.  HG_ERANGE if the range does not fit the buffer. */
int hg_hostbuf_mark_written(hg_hostbuf *hb, size_t offset, size_t bytes);
/* The byte range of the most recent write step, [*lo, *hi).  A run takes
 * exactly one write step on each host buffer it copies anything back into
 * (whatever number of args and tasks wrote it), covering every range that
 * run copied back into it: from the lowest start to the highest end. */
void hg_hostbuf_last_write(const hg_hostbuf *hb, size_t *lo, size_t *hi);

/* A byte range [lo, hi). */
typedef struct hg_range {
    size_t lo, hi;
} hg_range;

/* How many of its latest written ranges a host buffer remembers.  A resident
 * copy published at generation g uploads the ranges written since g (merged,
 * within its extent) while the log reaches back to g, and its whole extent
 * once it does not.  Uploads follow one cost rule: a copy costs as much as
 * moving 64 KiB, so ranges closer than that go as one copy covering them.
 * An upload is never fewer bytes than were written since g, never more than
 * the extent, never more copies than written ranges; args of one run with
 * the same resident bytes share one copy and one upload. */
#define HG_HOSTBUF_LOG 256

/* ------------------------------------------------------------------ device */

typedef struct hg_device hg_device;

/* A device address.  On the sim it is deliberately not a host pointer:
 * dereferencing one on the host faults, as it would on real hardware.  Every
 * device owns its addresses: no two open devices hand out the same one. */
typedef uint64_t hg_devaddr;

typedef enum hg_core_type { HG_CORE_CUBE = 0, HG_CORE_VECTOR = 1, HG_CORE_ANY = 2 } hg_core_type;

/* Every device allocation starts at a multiple of HG_DEVICE_ALIGN bytes, and
 * so does the pointer a kernel gets for it (and for each staged arg's slice):
 * kernels may use aligned vector loads as on hardware.  Capacity is consumed
 * in whole units of it. */
#define HG_DEVICE_ALIGN 1024u

/*
 * Opens a device from a spec string:
 *   "sim"                      4 cores, each runs cube and vector kernels
 *   "sim:cores=N"              N cores that run any kernel
 *   "sim:cube=C,vector=V"      C cube cores and V vector cores (one key
 *                              alone means 0 of the other type)
 * further sim keys, comma separated:
 *   mem=BYTES                  device memory capacity; K/M/G suffixes.  Default:
 *                              half the host's physical memory (the sim backs
 *                              device memory with host memory, so "device
 *                              memory full" comes before the host runs out)
 *   link_gbps=G                cap each copy at G GB/s (a PCIe-like link model)
 *   fail_alloc=K, fail_copy=K  fail the K-th allocation / copy (fault injection),
 *                              K >= 1: refused when it is made, nothing moves
 *   fail_complete=K            the K-th copied range, fill or poisoning of new
 *                              memory (HG_FAULT_COMPLETE) is accepted, then
 *                              completes with an error status, as a driver
 *                              reports a command that failed on the device (a
 *                              GPU backing memory on first use): its bytes do
 *                              not move, the call fails (HG_ECOPY; a new
 *                              allocation's poisoning: HG_EDEVMEM, and the
 *                              allocation is undone), K >= 1
 *   "opencl"                   the first OpenCL device (platform 0, device 0)
 *   "opencl:platform=P,device=D"
 * OpenCL keys: mem= (capped by the device's global memory, which is also the
 * default), fail_alloc=, fail_copy=, fail_complete=, and for tests max_alloc=BYTES (lower
 * the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE, at least 1K) and queues=N (run
 * kernels on N in-order queues, 1..16, instead of the out-of-order queue).
 * An allocation larger than the max alloc is held as several cl_mem pieces
 * of that size; copies cross them freely, but a task's view of device
 * memory must lie in one piece (staged args are placed so that each one
 * that fits in a piece does), else the run fails with HG_EUNSUPPORTED
 * naming the task and the arg.  OpenCL is loaded at
 * open (libOpenCL.so.1, with dlopen): a machine without it gets HG_EUNSUPPORTED
 * and a message naming the library.  OpenCL device memory has no host
 * pointer; kernels run from their OpenCL slot (hg_kernel).  Each open OpenCL
 * device has its own window of addresses, and a process holds at most 4096
 * open OpenCL devices: the next open fails (HG_ENOMEM, its message naming
 * the limit) until one is closed.
 * Whole numbers are decimal without a leading zero ("cores=04" is refused, not
 * read as 4).  On error returns HG_EINVAL and, if errbuf is not NULL, writes a
 * one-line message naming the bad key or value.
 *
 * The sim's memory is one arena of `mem` bytes reserved at open and touched
 * lazily but for its first MiB (backed at open, as a device's memory is from
 * the start): memory freed and allocated again costs no fresh page faults.  Each
 * open sim device has its own 2^48-byte address region (so mem= is at most
 * that), and a process holds at most 4096 open sim devices: the next open
 * fails (HG_ENOMEM) until one is closed.
 *
 * Sharing: a device may be used by several runners from several threads at
 * once.  Their copies and allocations proceed concurrently (a new
 * allocation is poisoned holding no lock, so a large one stalls no copy);
 * their graphs take turns on the cores (one executes at a time, the others
 * wait for it).  A run in flight, host steps included, holds up no
 * allocation, free or copy of another thread on the same device, nor an
 * eviction, a runner's close or an hg_hostbuf_destroy, on every backend;
 * another runner's run evicts what it must at bind, then waits its turn.
 */
int hg_device_open(const char *spec, hg_device **out, char *errbuf, size_t errlen);
/* Frees all device memory still allocated and stops the core threads.
 * Close every runner opened on the device first. */
void hg_device_close(hg_device *dev);
/* The normalized spec, e.g. "sim:cores=4" or "sim:cube=1,vector=2,link_gbps=16".
 * mem= shows only when it differs from this host's default. */
const char *hg_device_spec(const hg_device *dev);
/* Device memory capacity in bytes (mem=, or the default); 0 for NULL. */
uint64_t hg_device_capacity(const hg_device *dev);
uint32_t hg_device_num_cores(const hg_device *dev);
hg_core_type hg_device_core_type(const hg_device *dev, uint32_t core);

typedef struct hg_device_counters {
    uint64_t h2d_bytes, d2h_bytes;     /* bytes copied each way */
    uint64_t h2d_copies, d2h_copies;   /* contiguous ranges copied each way */
    uint64_t allocs, frees;            /* successful allocations and frees */
    uint64_t live_bytes, peak_bytes;   /* device bytes held now, and at most: each
                                          allocation rounded up to HG_DEVICE_ALIGN */
    uint64_t h2d_batches, d2h_batches; /* device copy calls each way: the runtime
                                          moves many ranges in one batched call */
} hg_device_counters;

/* Device-wide counters: every runner's and user's operations together. */
void hg_device_counters_get(const hg_device *dev, hg_device_counters *out);

typedef enum hg_fault { HG_FAULT_ALLOC, HG_FAULT_COPY, HG_FAULT_COMPLETE } hg_fault;
/* Makes the k-th next operation of that kind fail (k = 1: the very next one),
 * once.  k = 0 disarms.  Counts every allocation / copied range of the
 * device, the runtime's and the user's alike: a fault can land inside a
 * batched copy, whose earlier ranges are then done.  HG_FAULT_COMPLETE (the
 * spec's fail_complete=K) counts the copied ranges a copy fault let through,
 * fills, and new allocations' poisoning: the k-th is accepted, then
 * completes with an error (its bytes do not move; on OpenCL the device
 * reports the command's status as CL_MEM_OBJECT_ALLOCATION_FAILURE), and
 * the call fails as a copy that failed does (HG_ECOPY; HG_EDEVMEM for an
 * allocation, undone).  A copy call checks every command's status before
 * it returns, so nothing is published on a copy that failed. */
int hg_device_inject_fault(hg_device *dev, hg_fault kind, uint64_t k);

/* User-owned device memory.  The runtime never frees it. */
int hg_devbuf_malloc(hg_device *dev, size_t bytes, hg_devaddr *out);
/* HG_ENOTFOUND if addr is not the start of a live user allocation of dev
 * (another device's address, a freed one, or the runtime's own memory: a
 * runner's retained buffer, resident copies and scratch are not the user's
 * to free). */
int hg_devbuf_free(hg_device *dev, hg_devaddr addr);
/* HG_ERANGE if [dst, dst+bytes) is not inside one live user allocation of
 * dev (another device's address never is, and the runtime's memory is not
 * the user's to read or write). */
int hg_devbuf_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes);
int hg_devbuf_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes);

/* ----------------------------------------------------------------- tensors */

#define HG_MAX_DIMS 5

/*
 * A view over a host buffer (host != NULL) or a device buffer (host == NULL,
 * device != 0).  Shape and strides count elements; offset is the element index
 * of the view's first element within its buffer.  The byte region a view can
 * touch is its extent: [offset, offset + sum((shape[i]-1)*strides[i]) + 1)
 * elements, empty when any shape[i] is 0.
 */
typedef struct hg_tensor {
    hg_dtype dtype;
    uint32_t ndims;
    size_t shape[HG_MAX_DIMS];
    size_t strides[HG_MAX_DIMS];
    size_t offset;
    hg_hostbuf *host;
    hg_devaddr device;
} hg_tensor;

/*
 * The tensor calls return HG_EINVAL for a NULL view or a NULL out-param, and
 * write no out-param when they fail.  A view filled in by hand with ndims 0
 * is one element; the constructors refuse ndims 0 (say ndims 1, shape {1}).
 */

/* A dense row-major view of a host buffer, starting at element 0.
 * HG_EINVAL if out or hb is NULL, ndims is 0, shape is NULL or dtype is not
 * a dtype; HG_ELIMIT if ndims > HG_MAX_DIMS; HG_EOVERFLOW if the strides or
 * the byte size overflow; HG_ERANGE if the view's bytes exceed
 * hg_hostbuf_size(hb) (an empty view fits any buffer). */
int hg_tensor_host(hg_tensor *out, hg_hostbuf *hb, hg_dtype dtype, uint32_t ndims,
                   const size_t *shape);
/* A dense row-major view of user-owned device memory at `addr` (which is 0
 * only for an empty view: HG_EINVAL otherwise).  The same HG_EINVAL (out
 * NULL, ndims 0, shape NULL, bad dtype), HG_ELIMIT and HG_EOVERFLOW as
 * hg_tensor_host; HG_EOVERFLOW too if the view runs past the end of the
 * 64-bit device address space.  Device allocations are not checked here:
 * hg_runner_run checks at bind that a non-empty view lies inside one user
 * allocation of the runner's device. */
int hg_tensor_device(hg_tensor *out, hg_devaddr addr, hg_dtype dtype, uint32_t ndims,
                     const size_t *shape);
/* Narrows dimension `dim` to [start, start+len).  HG_ERANGE if it does not
 * fit; HG_EINVAL if t or out is NULL (they may be the same view) or dim >= ndims;
 * HG_EOVERFLOW if the new offset overflows. */
int hg_tensor_slice(const hg_tensor *t, uint32_t dim, size_t start, size_t len, hg_tensor *out);
/* Number of elements times element size (a broadcast element counts each
 * time).  HG_EINVAL for a NULL view or out, or a bad dtype; HG_ELIMIT if
 * ndims > HG_MAX_DIMS; HG_EOVERFLOW if the size or the extent overflows. */
int hg_tensor_nbytes(const hg_tensor *t, size_t *out);
/* The byte extent [*lo, *hi) within the buffer; lo == hi == 0 when empty.
 * HG_EINVAL for a NULL view, lo or hi, or a bad dtype; HG_ELIMIT if ndims >
 * HG_MAX_DIMS; HG_EOVERFLOW if the extent overflows. */
int hg_tensor_extent(const hg_tensor *t, size_t *lo, size_t *hi);
/* True if the view's elements are exactly its extent (no gaps, no reuse);
 * false for NULL or a view whose extent is not computable. */
bool hg_tensor_is_dense(const hg_tensor *t);
/* True if a and b view the same buffer and their byte extents intersect;
 * false if either is NULL or not computable. */
bool hg_tensor_overlap(const hg_tensor *a, const hg_tensor *b);

/* -------------------------------------------------------------------- args */

typedef enum hg_dir { HG_IN = 1, HG_OUT = 2, HG_INOUT = 3, HG_SCALAR = 4 } hg_dir;

#define HG_MAX_TENSOR_ARGS 256
#define HG_MAX_SCALAR_ARGS 128

/* Whether a host-backed arg's device copy outlives the run. */
typedef enum hg_residency {
    /* Staged every run: uploaded at bind (IN, INOUT), copied back (OUT,
     * INOUT), its device memory reused by the next run for anything.  The
     * zero value, so every initialiser that leaves the field out means it. */
    HG_STAGED = 0,
    /* IN and INOUT: the device copy is kept in the runner's residency cache
     * and reused, without a copy, by a later run while it is fresh: published
     * for this host buffer id and extent at the generation the buffer has at
     * that run's bind.  Otherwise it is uploaded again ("stale").  An INOUT
     * just copied back is current at its new generation.  Resident args keep
     * their host buffer as their host view.  OUT args, zero-byte args and
     * device views ignore it. */
    HG_RESIDENT = 1
} hg_residency;

/* One argument of a run.  Tensor args use `tensor`, scalar args `scalar`
 * (64 raw bits; see hg_scalar_f64).  `name` must stay valid for the run. */
typedef struct hg_arg {
    const char *name;
    hg_dir dir;
    hg_tensor tensor;
    uint64_t scalar;
    hg_residency residency; /* HG_STAGED (0) unless set */
} hg_arg;

uint64_t hg_scalar_f64(double v);
double hg_scalar_as_f64(uint64_t bits);

/* ------------------------------------------------------------------ kernels */

/* What a kernel sees of one task arg: a translated pointer to the view's
 * first element (NULL for a zero-byte view), dtype, shape and strides. */
typedef struct hg_kview {
    void *data;
    hg_dtype dtype;
    uint32_t ndims;
    size_t shape[HG_MAX_DIMS];
    size_t strides[HG_MAX_DIMS];
} hg_kview;

typedef struct hg_kernel_ctx {
    const hg_kview *args;
    uint32_t nargs;
    const uint64_t *scalars;
    uint32_t nscalars;
    uint32_t core;          /* which device core runs it */
    hg_core_type core_type; /* the kernel's type */
} hg_kernel_ctx;

/* Returns 0, or non-zero to fail the run with HG_EKERNEL. */
typedef int (*hg_kernel_fn)(const hg_kernel_ctx *ctx);

/* Counters a kernel adds to from its core thread; the run sums them into
 * its hg_run_stats.  Not tied to any one library: a kernel that moves bytes
 * over a network (libhostgraph_mpi's allreduce) says so here. */
typedef enum hg_kernel_counter {
    HG_KCOUNT_NET_BYTES = 0, /* bytes handed to a network: hg_run_stats.net_bytes */
    HG_KCOUNT_NET_NS = 1,    /* nanoseconds spent in network calls: hg_run_stats.net_ns */
    HG_KCOUNT_MAX
} hg_kernel_counter;
/* From inside a kernel: adds `amount` to counter `which` of the run whose
 * task the calling core thread is executing (atomically: kernels on other
 * cores may count at the same time).  Called anywhere else (a kernel
 * called directly, not by a run) or with `which` outside the enum, it does
 * nothing. */
void hg_kernel_count(hg_kernel_counter which, uint64_t amount);

/* A kernel record: one implementation per kind of device, as a StarPU
 * codelet has.  `fn` is the host function the sim's cores run; cl_source
 * and cl_entry are the OpenCL slot (OpenCL C 1.2 program text and the
 * __kernel's name; NULL: none).  A task whose kernel has no slot for the
 * runner's device fails at submit with HG_EUNSUPPORTED naming the kernel and
 * the device (a record with no slot at all is HG_EINVAL).
 *
 * The record, its name and its source need live only until the
 * hg_task_submit that passes it returns: the run copies the function, the
 * core type and the name (interned: one copy per distinct name for as long
 * as the runner lives, so a million tasks of one kernel store it once), and
 * a trace keeps its own copy of every name it writes.  An OpenCL device
 * builds each distinct source text once (it copies the text, keyed by its
 * content) and keeps the program until the device closes: no later run
 * compiles anything.  A source that does not build fails the submit with
 * HG_EINVAL and the compiler log's first lines.
 *
 * The OpenCL calling convention.  The runtime builds every program with a
 * preamble that defines the macros below, and calls the entry point as
 *
 *     __kernel void k(HG_STATUS_ARGS, HG_TENSOR(float, a), ..., ulong s0, ...)
 *
 *   - HG_STATUS_ARGS: the run's status words and this task's number.  A
 *     kernel fails the run with HG_EKERNEL (naming the task, as the sim's
 *     non-zero return does) by HG_FAIL(code) with code != 0.  Tasks run as
 *     their inferred dependencies allow (event wait lists on an out-of-order
 *     queue, or on in-order queues where the device has none); after a
 *     failure, tasks that do not depend on it may still run, but the run
 *     fails naming the lowest failing task and publishes nothing.
 *   - HG_TENSOR(T, x), one per task arg in order: `__global T *x` (the
 *     allocation holding the view) and `hg_view x_v` by value: x_v.offset
 *     (elements from x to the view's first element; HG_PTR(x) is that
 *     pointer), x_v.ndims, x_v.shape[5], x_v.strides[5] (elements, ulong).
 *     An empty view comes as a NULL buffer.  T is the element type; f16 and
 *     bf16 come as ushort (hg_bf16_to_f32 and hg_f32_to_bf16 convert).
 *   - then each scalar as `ulong`, its 64 raw bits (as_double(s) for a
 *     double written with hg_scalar_f64).
 *   - the work size: one work item per element of the task's first written
 *     arg (get_global_id(0) is the element's row-major index), one work item
 *     when the task writes nothing, no launch when every written arg is
 *     empty.  A task whose first written arg is empty while another written
 *     arg is not fails the run with HG_EUNSUPPORTED naming both (no work item
 *     would write the other): put a non-empty written arg first.
 * The status words and any launch data are the runtime's own: they are not
 * counted in a run's copies and are allocated once per device, not per run. */
typedef struct hg_kernel {
    const char *name; /* shown in traces and errors; NULL shows as "(unnamed)" */
    hg_kernel_fn fn;
    hg_core_type core;     /* HG_CORE_CUBE or HG_CORE_VECTOR */
    const char *cl_source; /* OpenCL slot: program text (NULL: none) */
    const char *cl_entry;  /* OpenCL slot: the __kernel's name */
} hg_kernel;

/* ------------------------------------------------------------ orchestration */

/* The orchestration context: valid only inside the orchestration function. */
typedef struct hg_orch hg_orch;

typedef int (*hg_orch_fn)(hg_orch *o, void *user);

typedef struct hg_callable {
    const char *name;
    hg_orch_fn orchestrate;
    void *user;
} hg_callable;

#define HG_MAX_TASK_ARGS    16
#define HG_MAX_TASK_SCALARS 16
#define HG_MAX_TASK_DEPS    64

typedef uint32_t hg_task_id;

/* A task arg: a view of run arg `arg` (an index into the run's args, or one
 * returned by hg_orch_scratch), accessed as `access` (IN, OUT or INOUT).  The
 * view is buffer-relative, like the arg's own tensor, and must lie inside the
 * arg's extent. */
typedef struct hg_task_arg {
    uint32_t arg;
    hg_dir access;
    hg_tensor view;
} hg_task_arg;

typedef struct hg_task_desc {
    const hg_kernel *kernel;
    const hg_task_arg *args;
    uint32_t nargs;
    const uint64_t *scalars;
    uint32_t nscalars;
    const hg_task_id *deps; /* explicit extra dependencies (earlier tasks) */
    uint32_t ndeps;
} hg_task_desc;

/* Number of run args (scratch args are numbered after them). */
uint32_t hg_orch_num_args(const hg_orch *o);
/* Index of the arg called `name`, or HG_ENOTFOUND. */
int hg_orch_find_arg(const hg_orch *o, const char *name);
/* The arg as the caller passed it (tensor views are buffer-relative). */
int hg_orch_arg(const hg_orch *o, uint32_t arg, const hg_arg **out);
/* A host pointer to the arg's first element, for reading on the host.
 * HG_ENOHOSTVIEW if the arg is only a device view; HG_EINVAL for scalars.
 * With replay on, the read is recorded (hg_runner_set_replay): read an arg
 * on the host through this call, not through its buffer's data. */
int hg_orch_host_view(hg_orch *o, uint32_t arg, const void **out);
/* Run-owned device scratch of the given dense shape.  The runner pools it:
 * at release it is kept for a later run that asks for the same size (so an
 * unchanged scene's later rounds make no device allocation and pay no
 * poisoning), and freed at runner close, when a run does not use it, or when
 * the device runs short.  Its contents at the start of a run are undefined
 * (0xA5 when new, or with hg_runner_set_poison_scratch).  Its arg index (for
 * task args) goes to *arg, its view to *view. */
int hg_orch_scratch(hg_orch *o, const char *name, hg_dtype dtype, uint32_t ndims,
                    const size_t *shape, uint32_t *arg, hg_tensor *view);
/* Fails the run with `code` (a negative HG_E* code) and a message naming what
 * the orchestration found wrong, e.g. hg_orch_fail(o, HG_EINVAL, "config:
 * tile %lld does not divide %zu", ...).  Returns `code`, so an orchestration
 * can `return hg_orch_fail(...)`.  The first failure of a run is kept. */
int hg_orch_fail(hg_orch *o, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Submits a task.  Dependencies are inferred from overlapping byte regions:
 * a reader depends on the last writers of what it reads; a writer depends on
 * earlier readers and writers of what it writes.  Everything `desc` points to
 * (the kernel record and its name included) is copied: it may die as soon as
 * this returns. */
int hg_task_submit(hg_orch *o, const hg_task_desc *desc, hg_task_id *out);
/*
 * Submits a host step: a task whose kernel is host code over its args' bytes
 * (desc->kernel->fn; its OpenCL slot, if any, is ignored), runnable on every
 * device.  Dependencies are inferred as for any task.
 *   - sim: it is a task like any other (device memory is host memory): fn
 *     runs on a core of the kernel's type with translated pointers.
 *   - queue devices (OpenCL): the runtime stages it.  Once every task it
 *     depends on is done, a helper thread of the run copies its args'
 *     extents device -> host (args it reads, and written args with gaps)
 *     into host staging, calls fn on views of that staging, and copies its
 *     written args' extents back host -> device; only then are the kernels
 *     that depend on it enqueued.  Tasks that do not depend on it never wait
 *     for it, on every queue shape (queues=N too), so fn may block (on a
 *     network, say, or until a later independent step runs) while the
 *     device keeps running them.  Up to 4 host steps of a run run at once,
 *     taken in submission order as far as their dependencies allow.  The staging copies count
 *     in the run's h2d/d2h stats and against injected copy faults; each arg
 *     has its own staging (two args viewing the same bytes do not alias).
 *   - failure: a non-zero return fails the run with HG_EKERNEL naming the
 *     task, as a kernel does, and its written bytes are not copied back to
 *     the device.  As on the sim, no task that depends (directly or through
 *     other tasks) on a host step that failed runs, and the run fails naming
 *     the lowest failing task.
 * fn may call hg_kernel_count.  Same errors as hg_task_submit; HG_EINVAL
 * too for a kernel without fn.
 */
int hg_task_submit_host_step(hg_orch *o, const hg_task_desc *desc, hg_task_id *out);

/* ------------------------------------------------------------------- traces */

/* A trace collects host stage spans and per-task spans on device cores, and
 * writes Chrome trace-event JSON (opens in Perfetto).  It keeps its own copy
 * of every kernel name it records (one per distinct name), so names need not
 * outlive the runs it records. */
typedef struct hg_trace hg_trace;

int hg_trace_create(hg_trace **out);
void hg_trace_destroy(hg_trace *t);
/* HG_EIO if the file cannot be written. */
int hg_trace_write_json(const hg_trace *t, const char *path);
/* Counts of recorded spans, for tests. */
size_t hg_trace_num_host_spans(const hg_trace *t);
size_t hg_trace_num_task_spans(const hg_trace *t);

/* ------------------------------------------------------------------ runner */

typedef struct hg_runner hg_runner;

/* A run's own counts: exact, and only this run's operations even while other
 * runners use the same device. */
typedef struct hg_run_stats {
    uint64_t wall_ns; /* the whole run */
    uint64_t bind_ns, orch_ns, exec_ns, copyback_ns, release_ns;
    uint64_t h2d_bytes, d2h_bytes;     /* bytes this run copied */
    uint64_t h2d_copies, d2h_copies;   /* contiguous ranges this run copied */
    uint64_t h2d_batches, d2h_batches; /* device copy calls (each moves many ranges) */
    uint64_t device_allocs;            /* device allocations this run made */
    uint32_t tasks, edges;             /* graph size */
    size_t retained_bytes;             /* retained buffer capacity after the run */
    /* Residency (HG_RESIDENT args): */
    uint64_t resident_hits;          /* args reused without a copy */
    uint64_t resident_bytes_skipped; /* the bytes those hits did not upload */
    uint64_t stale_uploads;          /* resident copies uploaded again: the host changed them */
    uint64_t resident_staged;        /* resident args staged this run for lack of room */
    uint64_t evictions;              /* resident copies this run evicted */
    /* Bytes that did not cross: */
    uint64_t h2d_bytes_skipped; /* of resident args, because the host did not change them */
    uint64_t d2h_bytes_skipped; /* of OUT/INOUT extents, because no task wrote them */
    /* Time in the batched copies each way (within bind_ns and copyback_ns):
     * the host's own time is wall_ns - exec_ns - h2d_ns - d2h_ns. */
    uint64_t h2d_ns, d2h_ns;
    /* 1 when the run executed its runner's recorded graph instead of
     * orchestrating (hg_runner_set_replay); 0 otherwise. */
    uint32_t replayed;
    /* What the run's kernels counted (hg_kernel_count): */
    uint64_t net_bytes; /* bytes handed to a network (MPI: the allreduce payloads) */
    uint64_t net_ns;    /* time spent in network calls */
    /* Time this run waited for kernel programs to build: a queue device
     * (OpenCL) builds a kernel's program at its first submit, seconds on a
     * cold compiler cache.  Within wall_ns, not in orch_ns. */
    uint64_t build_ns;
} hg_run_stats;

/* A runner keeps, across runs, a retained device buffer that holds the
 * staged args' slices (each HG_DEVICE_ALIGN-aligned).  It grows when a run
 * needs more, geometrically (at least doubling, within the device's free
 * memory), so an arg that grows a little every run makes O(log n)
 * allocations over n runs; it never shrinks.  Several runners may share one
 * device, each used by one thread at a time. */
int hg_runner_open(hg_device *dev, hg_runner **out);
/* Frees the retained buffer and forgets all staging state. NULL is a no-op. */
void hg_runner_close(hg_runner *r);
/* The device the runner was opened on; NULL for NULL. */
hg_device *hg_runner_device(const hg_runner *r);
/* Records spans of later runs into t (NULL stops recording). Not owned. */
void hg_runner_set_trace(hg_runner *r, hg_trace *t);
/* Capacity of the runner's retained device buffer. */
size_t hg_runner_retained_capacity(const hg_runner *r);

/* The device bytes the runner's resident copies may hold (0: the device's
 * capacity, the default).  Copies past a smaller budget are evicted now,
 * least recently used first.  When a run's resident args do not fit, the
 * ones that do not are staged for that run (hg_run_stats.resident_staged),
 * which is not an error.  A runner evicts only its own copies. */
int hg_runner_set_budget(hg_runner *r, uint64_t bytes);
/* Device bytes the runner holds now: its retained buffer, resident copies and
 * pooled scratch (each allocation rounded up to HG_DEVICE_ALIGN).  Between
 * runs, everything the runner allocated and has not freed. */
uint64_t hg_runner_device_bytes(const hg_runner *r);
/* Device bytes and number of the runner's resident copies now. */
uint64_t hg_runner_resident_bytes(const hg_runner *r);
uint32_t hg_runner_resident_copies(const hg_runner *r);
/* Verify mode (off by default; off, it costs nothing): before a run reuses
 * a resident copy, checks every byte of its extent that no write through
 * the API declared since the copy was published.  Any such byte that
 * changed, a host write that bypassed the API, fails that run with
 * HG_ESTALE naming the arg, the buffer and the byte, whatever declared
 * writes the buffer also had; no host byte, output or generation changes.
 * Cost per run: each resident arg's extent hashed once (XXH3, in 64 KiB
 * blocks; a block a declared write touched is compared byte for byte with
 * a host shadow instead), plus the bytes uploaded or copied back, copied
 * into the shadow.  Memory: the shadow, one host copy of each resident
 * extent, while it is on.  Copies published while it was off cannot be
 * checked: the first run with it on uploads them again (whole).  When a
 * buffer's write log no longer reaches back to a copy's generation
 * (HG_HOSTBUF_LOG), the copy is uploaded whole rather than checked: nothing
 * stale is computed on. */
void hg_runner_set_verify(hg_runner *r, bool on);
/*
 * Checked graph replay (off by default; off, it costs nothing).  With it on:
 *   - after a successful run, the runner keeps its graph (the recording):
 *     tasks, kernels, scalars, resolved device ranges, dependencies, the
 *     scratch taken, the views the tasks wrote (with copy-back's plan for
 *     them: what to fetch and commit), and every host view the
 *     orchestration read (hg_orch_host_view: buffer, the arg's byte extent,
 *     the generation at the read);
 *   - the next run of the same callable (orchestrate function, user pointer
 *     and name) with the same args (names, directions, dtypes, shapes,
 *     strides, offsets, buffers, residency, scalar values) executes the
 *     recording instead of orchestrating when, and only when, every buffer
 *     the orchestration read is at the generation it was read at (a write
 *     through the API moves it, whichever bytes it wrote), and every arg's
 *     device region is where it was or re-resolves exactly: a region that
 *     moved (a resident copy uploaded elsewhere, the retained buffer that
 *     grew, scratch from another pool block) moves its task args with it,
 *     so long as args whose regions overlap (then or now) moved together.
 *     Anything else orchestrates again and records anew;
 *   - what the orchestration depends on outside its args (the contents of
 *     its user pointer, globals) is the caller's to declare, with
 *     hg_runner_invalidate_replay; so is a host read that did not go
 *     through hg_orch_host_view (hg_hostbuf_data of an arg's buffer): only
 *     hg_orch_host_view's reads are recorded;
 *   - with verify mode also on (hg_runner_set_verify), a run that would
 *     replay orchestrates too: a host view read in the recording whose
 *     bytes changed at the same generation (a write that bypassed the API)
 *     fails the run with HG_ESTALE naming the arg and the buffer (when the
 *     recording was made with verify on: only then were the bytes hashed);
 *     a new graph that differs from the recording (tasks, kernels, args'
 *     device ranges, dtypes, shapes, strides, access, scalars,
 *     dependencies, scratch, written views, host reads) fails it with
 *     HG_ESTALE naming the task and the field (a scratch or a host read by
 *     its index and arg; a task one graph has beyond the other's last by
 *     its index and kernel), before either graph runs
 *     (so no task runs, nothing is copied back); the recording is dropped;
 *   - bind, residency, upload, copy-back, publish and release are the same
 *     as for an orchestrated run: a replayed run's bytes and results equal
 *     an orchestrated one's;
 *   - a failed run (any stage) leaves no recording of its own: a previous
 *     recording stays, checked again at the next run.  A replayed run that
 *     fails leaves the recording usable unless the failure was in the graph
 *     itself: execution failed (a kernel's error; a cancel is not one).  A
 *     failure in bind, in taking the scratch, in copy-back, or a cancel
 *     keeps it.  An orchestration that fails in verify mode drops it.
 * hg_run_stats.replayed says which runs replayed; their orch_ns is the
 * checks and restoring the recorded copy-back plan (O(args + host reads +
 * the merged ranges it fetches), plus O(task args) when a region moved);
 * their copy-back plans nothing per written view.  Memory: one
 * recording, O(tasks + task args + args + the bytes of the names it holds:
 * args', scratch's, kernels') host bytes, all counted by
 * hg_runner_replay_bytes, besides the graph every runner keeps; a new
 * recording takes the old one's place (its arrays become the working
 * graph's, reused by the next orchestration as a graph's always are);
 * hg_runner_invalidate_replay, turning replay off, and hg_runner_close free
 * it. */
void hg_runner_set_replay(hg_runner *r, bool on);
/* Drops the recording (and frees it): the next run orchestrates.  NULL is
 * a no-op. */
void hg_runner_invalidate_replay(hg_runner *r);
/* Host bytes the runner's recording holds now; 0 with none. */
uint64_t hg_runner_replay_bytes(const hg_runner *r);
/* Debug switch (off by default): fill pooled scratch with 0xA5 each time it
 * is reused, so a kernel that reads scratch it never wrote sees garbage. */
void hg_runner_set_poison_scratch(hg_runner *r, bool on);

/*
 * One run: bind -> orchestrate -> execute -> copy back -> publish -> release.
 *
 *   - bind: IN and INOUT args are copied to the device in one batched copy
 *     (a resident copy that is current but older than its buffer: the
 *     ranges the host wrote since, by the cost rule at HG_HOSTBUF_LOG);
 *     pure OUT args' device bytes are filled
 *     with the poison byte 0xA5, so a kernel that reads bytes it did not
 *     write never sees another arg's data.  A zero-byte
 *     arg of any kind (host view, or device view at address 0 or any other)
 *     gets a NULL pointer and no allocation.  A non-empty device view must
 *     lie inside one user allocation (hg_devbuf_malloc) of the runner's
 *     device, else HG_ERANGE names the arg, the address and why: another
 *     device's address, runtime-owned memory (a retained buffer, resident
 *     copy or scratch), no live allocation (freed), or a view that runs
 *     past its allocation's end.
 *   - copy back brings back what the tasks wrote, and nothing else: the
 *     bytes of OUT and INOUT args covered by task args that write them.  An
 *     OUT arg's bytes no task wrote stay untouched on the host; a strided
 *     view's gaps keep their host bytes.  It is all or nothing: everything
 *     is planned (every host allocation made) and lands in host staging
 *     first, in one batched copy, and reaches the host buffers only when
 *     every range succeeded (or, when the fetched ranges are exactly the
 *     bytes the tasks wrote and the device's batched copy moves every
 *     range or none, as the sim's does, it lands straight in the host
 *     buffers in one such copy), each written byte copied to the host once
 *     however many tasks wrote it; then each written buffer's generation
 *     moves on once (one write step per buffer per run).  A strided written
 *     view crosses the link as its whole extent or one range per contiguous
 *     run, whichever is cheaper.  A written view whose dims overlap so much
 *     that its runs cannot be listed (more than 4 times its extent's
 *     elements, beyond 2^20) fails the run with HG_ELIMIT before anything
 *     is copied.
 *   - publish: only when everything above succeeded are the run's resident
 *     copies recorded as current: an IN's at the generation sampled at bind,
 *     an INOUT's at the generation its copy-back gave the buffer, and only
 *     if nothing else (a write through the API during the run) moved that
 *     generation; else it stays not current and the next run uploads it.
 *     Before anything writes a resident copy's device bytes (an
 *     upload, or execution of a run that writes it as INOUT) it is marked
 *     not current, so a failed run leaves nothing that looks fresh.
 *   - on failure (at any stage, copy-back included) no host byte and no
 *     generation changed, nothing was published, run-owned memory is
 *     released, and the runner stays usable; hg_runner_errmsg names the first
 *     failure (an orchestration's first failing call keeps its code and
 *     message together).  HG_ESTALE: verify mode found a resident arg's host
 *     bytes changed without a write through the API.
 *
 * `stats` may be NULL; it is filled on success and failure alike.
 */
int hg_runner_run(hg_runner *r, const hg_callable *c, const hg_arg *args, uint32_t nargs,
                  hg_run_stats *stats);
/* The byte ranges (of its host buffer) the last run copied back for run arg
 * `arg`, merged and sorted: up to `max` into out, their number into *n.  0
 * ranges for an arg no task wrote, or that was not copied back.  HG_ERANGE
 * (with *n the number needed) when max is too small; HG_EINVAL for an index
 * past the last run's args.  A scene restoring its outputs between rounds
 * needs to write back only these. */
int hg_runner_copied_back(const hg_runner *r, uint32_t arg, hg_range *out, size_t max, size_t *n);

/* Stops the runner's run in flight between two tasks (or two stages): it
 * fails with HG_ECANCELED, nothing is copied back or published, no host
 * byte or generation changes, run-owned memory is released, and the runner
 * stays usable.  Made while no run is in flight, it stops the next run
 * before it binds, so a cancel that falls between two runs of a loop is not
 * lost.  Each run clears the request when it ends, whether it acted on it
 * or finished first: one cancel stops at most one run.  On a queue device
 * (OpenCL) no task is enqueued and no host step starts after the cancel;
 * kernels the device already holds run first (a command cannot be
 * recalled), and a host step in progress finishes: a run canceled during a
 * host step stops when that step returns.  Safe from any thread and from a
 * signal handler (one atomic store).  NULL is a no-op. */
void hg_runner_cancel(hg_runner *r);
/* Withdraws a cancel that no run acted on: one made after the run it was
 * meant for had finished, which would otherwise stop the next run.  For a
 * caller that joins the run before it clears (the Python bindings).  NULL
 * is a no-op. */
void hg_runner_cancel_clear(hg_runner *r);

/* The stage the runner's run is in now ("bind", "orchestrate", "execute",
 * "copy back", "release"), or NULL between runs.  With hg_runner_cancel, the
 * calls that may be made from another thread while a run is in flight. */
const char *hg_runner_stage(const hg_runner *r);
/* The last error of this runner as one line naming the arg and the value,
 * or "" after a successful run. */
const char *hg_runner_errmsg(const hg_runner *r);

/* A run's decide hook: rules on the outcome of every run of the runner, for
 * a library that must agree on it with peers (libhostgraph_mpi agrees with
 * the other ranks).  Called once per hg_runner_run, success or failure,
 * from the calling thread, after execution and the device reads of copy
 * back and before copy back writes any host byte: `rc` is the run's code so
 * far and `msg` (msglen bytes, NUL-terminated) its message, which the hook
 * may rewrite.  It returns the run's code: 0 lets a successful run write
 * its host bytes and publish; an HG_E* code fails it with nothing written
 * or published.  It cannot turn a failure into a success: for a non-zero
 * rc, a negative return replaces the code and anything else keeps rc.
 * Every run of the runner calls it, whatever fails where, so runs pair one
 * to one with the peers': a run that fails at bind (bad args, a plan or
 * device error), in orchestration or in execution, and one given a NULL
 * callable (or one without an orchestration function) that fails with
 * HG_EINVAL before it binds, all call it with their code.  A NULL runner
 * has no hook to call: hg_runner_run(NULL, ...) returns HG_EINVAL and no
 * peer hears of it.  Its time counts in the copy-back stage (for a NULL
 * callable, in no stage: the stats stay zero). */
typedef int (*hg_run_decide_fn)(void *user, int rc, char *msg, size_t msglen);
/* Sets the runner's decide hook (one per runner; fn NULL removes it).
 * HG_EINVAL for a NULL runner. */
int hg_runner_set_decide(hg_runner *r, hg_run_decide_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif /* HOSTGRAPH_H */
