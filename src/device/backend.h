/*
 * backend.h: what a device backend (sim.c, later cuda.c) supplies to device.c.
 *
 * device.c parses the spec into a device_config, keeps the counters, the
 * capacity check and fault injection, and calls a backend only for work that
 * differs between backends: memory, copies, address translation and cores.
 * Invariants a backend keeps:
 *   - addresses it hands out are never 0, never host pointers, and multiples
 *     of HG_DEVICE_ALIGN (and so are the host pointers translate returns for
 *     them, where a backend has host pointers);
 *   - two open devices never hand out the same address: `owns` tells this
 *     device's addresses (allocated or not) from every other device's;
 *   - each allocation records whether it is the user's (hg_devbuf_malloc)
 *     or the runtime's (device_malloc); free frees only an allocation of
 *     the owner it is told;
 *   - malloc/free/copy/translate/find_alloc are safe to call from any thread,
 *     translate and find_alloc concurrently with each other;
 *   - a failed call changes nothing (no memory, no table entry);
 *   - malloc only reserves a range (in its table, under its lock); prepare
 *     readies the new range's memory (poison, sanitizer state) holding no
 *     lock at all, so one large allocation stalls no copy or allocation;
 *   - every lock a backend takes on a copy or allocation path goes through
 *     the device_* lock calls below, which count the locks each thread
 *     holds (device_locks_held: what the test of the rule above checks),
 *     and keeps the lock order (locks.c): device.c calls no backend op
 *     holding a lock of its own, and a run (run_cores, queue_begin to
 *     queue_end) holds no lock that malloc, free, copy or fill take;
 *   - close frees everything, live allocations included.
 * Backends never touch counters or faults: device.c counts only successes.
 *
 * Two shapes of execution (IREE's HAL habit: the generic layer sees one
 * interface): a backend with cores (the sim) supplies run_cores and the
 * executor runs host functions on them; a backend with a queue (opencl)
 * supplies kernel_get, queue_begin, launch and queue_end instead, and the
 * executor enqueues the graph in submission order (a topological order),
 * each task with the tasks it depends on as its wait list.
 */
#ifndef HG_DEVICE_BACKEND_H
#define HG_DEVICE_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "device/device.h"

/* Upper bound on cores, so a typo like cores=100000 fails at open instead of
 * starting that many threads. */
#define DEVICE_MAX_CORES 1024u

/* A parsed device spec.  Typed devices have cube cores 0..ncube-1, then
 * vector cores; untyped ones have ncores HG_CORE_ANY cores. */
typedef struct device_config {
    bool typed;             /* cube=/vector= given rather than cores= */
    uint32_t ncores;        /* total cores, >= 1 */
    uint32_t ncube;         /* typed only */
    uint32_t nvector;       /* typed only */
    uint64_t mem_bytes;     /* capacity, > 0: allocations rounded up to HG_DEVICE_ALIGN */
    double link_gbps;       /* 0: link model off */
    uint64_t fail_alloc;    /* 0: not armed */
    uint64_t fail_copy;     /* 0: not armed */
    uint64_t fail_complete; /* 0: not armed */
    bool mem_default;       /* no mem= given: the backend may pick its own */
    uint64_t default_mem;   /* the capacity without mem= (a backend's open may set it) */
    uint32_t cl_platform;   /* opencl: platform= and device= */
    uint32_t cl_device;
    uint64_t cl_max_alloc; /* opencl: max_alloc= (0: the device's own limit) */
    uint32_t cl_queues;    /* opencl: queues= in-order queues (0: out-of-order if the
                              device has it) */
} device_config;

/* The type of core `core` under cfg (HG_CORE_ANY when untyped). */
static inline hg_core_type device_config_core_type(const device_config *cfg, uint32_t core)
{
    if (!cfg->typed)
        return HG_CORE_ANY;
    return core < cfg->ncube ? HG_CORE_CUBE : HG_CORE_VECTOR;
}

typedef struct device_ops {
    const char *name;
    /* Creates backend state (and starts cores).  HG_ENOMEM on failure.  May
     * fill in what only the device knows: ncores, mem_bytes when
     * mem_default (or capped), default_mem. */
    int (*open)(device_config *cfg, void **state);
    void (*close)(void *state);
    /* bytes > 0 and within capacity (device.c checked); HG_EDEVMEM if the
     * backend cannot provide it.  Reserves the range only: prepare follows. */
    int (*malloc)(void *state, size_t bytes, bool user, hg_devaddr *out);
    /* Readies the range malloc just returned (addr, bytes) for its first
     * user: on the sim, poisons it (SIM_POISON) and its sanitizer state;
     * on OpenCL, fills it and waits for the fill's status (a GPU may back
     * memory only then).  Called with no lock held; the range is the
     * caller's alone.  HG_EDEVMEM when the device failed it, or when
     * `doomed` (an injected fail_complete): device.c then frees it. */
    int (*prepare)(void *state, hg_devaddr addr, size_t bytes, bool doomed);
    /* HG_ENOTFOUND unless addr starts a live allocation of that owner
     * (user or runtime); *bytes gets its size. */
    int (*free)(void *state, hg_devaddr addr, bool user, size_t *bytes);
    /* HG_ERANGE unless the device range lies inside one live allocation. */
    int (*copy_to)(void *state, hg_devaddr dst, const void *src, size_t bytes);
    int (*copy_from)(void *state, void *dst, hg_devaddr src, size_t bytes);
    /* Optional (NULL: device.c copies range by range): copies the ranges,
     * all validated already; empty ranges are skipped.  Range `doomed`
     * (n: none) is an injected completion failure (fail_complete=K): it is
     * accepted like the others, moves no byte, and completes with an error.
     * Returns only once every command it made is done and its status read:
     * 0, or the error of the lowest failing range, whose index goes to
     * *failed (the ranges before it are done; later ones may have moved). */
    int (*copy_batch)(void *state, bool to_device, const device_copy *list, size_t n, size_t doomed,
                      size_t *failed);
    /* True when copy_batch is all or nothing: it checks every range (under
     * the lock that keeps them live) before it copies any, and fails only
     * at that check (HG_ERANGE, nothing moved): device_copy_batch_whole. */
    bool copy_batch_whole;
    /* Sets every byte of the device range to `value` on the device (no copy
     * crosses the link), done and its status read when it returns.
     * HG_ERANGE as for copies; HG_ECOPY when the device failed it, or when
     * `doomed` (as copy_batch's). */
    int (*fill)(void *state, hg_devaddr dst, int value, size_t bytes, bool doomed);
    void *(*translate)(void *state, hg_devaddr addr, size_t bytes);
    /* The live allocation containing addr: base, size and owner; HG_ENOTFOUND. */
    int (*find_alloc)(void *state, hg_devaddr addr, hg_devaddr *base, size_t *size, bool *user);
    /* Whether addr is in this device's address range, allocated or not. */
    bool (*owns)(void *state, hg_devaddr addr);
    /* Cores backends only (NULL on queue backends). */
    void (*run_cores)(void *state, device_core_fn fn, void *ctx);
    /* Queue backends only (all NULL on the sim); device.h documents them
     * (device_kernel_get, device_queue_begin, device_launch, device_queue_end). */
    int (*kernel_get)(void *state, const char *source, const char *entry, const void **handle,
                      hg_err *e);
    int (*queue_begin)(void *state, uint32_t ntasks, bool profile, hg_err *e);
    int (*launch)(void *state, const device_task *t, hg_err *e);
    int (*queue_end)(void *state, uint32_t ntasks, device_queue_result *res, hg_err *e);
    /* Queue backends: host steps (device.h: device_host_launch, _wait, _done). */
    int (*host_launch)(void *state, uint32_t task, hg_err *e);
    int (*host_wait)(void *state, const uint32_t *tasks, uint32_t n, hg_err *e);
    void (*host_done)(void *state, uint32_t task);
    uint64_t (*program_builds)(void *state);
    /* Optional (NULL: 0): device_debug_profiled_runs. */
    uint64_t (*profiled_runs)(void *state);
    /* Optional (NULL: 0): device_alloc_piece. */
    uint64_t (*alloc_piece)(void *state);
    /* Optional: the calling thread's last backend message ("" or NULL). */
    const char *(*errmsg)(void);
} device_ops;

/* ------------------------------------------------------------ locks */

/* The locks of device.c and of the backends' copy and allocation paths, taken
 * through these so that each thread knows how many it holds. */
void device_mutex_lock(pthread_mutex_t *m);
void device_mutex_unlock(pthread_mutex_t *m);
void device_rwlock_rdlock(pthread_rwlock_t *l);
void device_rwlock_wrlock(pthread_rwlock_t *l);
void device_rwlock_unlock(pthread_rwlock_t *l);
/* Device and backend locks the calling thread holds now. */
unsigned device_locks_held(void);

/* ------------------------------------------------------------ spec.c */

#define DEVICE_SPEC_MAX 256

/* Parses spec into cfg (defaults filled in) and picks its backend.
 * HG_EINVAL with one line "device spec '<spec>': ..." in errbuf. */
int device_spec_parse(const char *spec, device_config *cfg, const device_ops **ops, char *errbuf,
                      size_t errlen);
/* Writes "device spec '<spec>': <message>" into errbuf (when not NULL) and
 * returns HG_EINVAL. */
int device_spec_fail(const char *spec, char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The normalized spec of cfg into s: fault keys left out, mem= only when it
 * is not default_mem, the link model always when on. */
void device_spec_normalize(const device_config *cfg, const device_ops *ops, uint64_t default_mem,
                           char *s, size_t n);
/* This host's default capacity: a share of its physical memory. */
uint64_t device_default_mem(void);

/* The sim backend (sim.c). */
extern const device_ops device_sim_ops;
#ifdef HG_HAVE_OPENCL
/* The OpenCL backend (opencl.c), when the build found CL/cl.h. */
extern const device_ops device_opencl_ops;
#endif

#endif
