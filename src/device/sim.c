/*
 * sim.c: the simulated device backend: memory, copies, translation, cores.
 *
 * Device memory is a fixed pool, as on hardware: one arena of `mem` bytes,
 * reserved once at open with MAP_NORESERVE (so a capacity larger than the
 * host's RAM costs nothing until touched) and touched lazily.  The sim's own
 * allocator hands out ranges of it, so memory freed and allocated again costs
 * no fresh page faults: a round that reuses its device memory pays memset
 * speed, not first-touch speed.
 *
 * Addresses.  Every open device owns its own region of SIM_REGION_BYTES
 * (2^48) addresses: region k starts at k << 48 for k in [SIM_FIRST_REGION,
 * SIM_FIRST_REGION + SIM_REGIONS), all non-canonical on x86-64, so a host
 * dereference of a device address faults as it would on hardware instead of
 * silently reading memory.  A range at arena offset `off` has device address
 * base + off.  Regions are handed out round robin from a process-wide table
 * (sim_region_take), so two open devices never share an address, and a
 * closed device's region comes back only after every other one was used: a
 * device view of another device's memory is not an address of this one.
 * The arena is page-aligned and so is every base, so a kernel's pointer has the
 * same alignment as its device address: HG_DEVICE_ALIGN (1024) at the start
 * of every allocation.  Ranges are reused first-fit, so a freed address comes
 * back: freshness above must never be inferred from an address.  New ranges
 * are poisoned (SIM_POISON) so a kernel that reads bytes nobody wrote sees
 * garbage, not zeros or another allocation's old data: by sim_prepare,
 * outside every lock, since that takes seconds for half a GiB.
 *
 * Sanitizers.  Under AddressSanitizer every allocation gets a redzone of
 * HG_DEVICE_ALIGN bytes after it, and freed ranges and redzones are poisoned
 * by hand, so a kernel that overruns its allocation is still caught although
 * the arena is one big mapping.  The arena is twice `mem` then, so redzones
 * never cost capacity (device.c counts capacity without them).
 *
 * The allocation table (alloc_table.h: sorted, first fit over the arena):
 *   - it is read (translate, copies) under the read lock from any thread,
 *     core threads included, and changed only under the write lock (taken
 *     through device.c's counting lock calls), each change taking a new
 *     version first; translate answers from its thread's cache of recent
 *     allocations without the lock while the version is the one it cached;
 *   - a copy holds the read lock for its memcpy, so a concurrent free waits;
 *     a batch checks all its ranges before it copies any, under that one
 *     lock, so it moves all of them or none (device_copy_batch_whole).
 *
 * Cores.  ncores persistent threads park on a condvar.  device_run_cores bumps
 * an epoch; each core runs the function once per epoch and the caller waits
 * until all have, so no core can miss or repeat an epoch.  Callers from
 * several threads (runners sharing the device) take turns on dispatch_lock:
 * one graph runs on the cores at a time, the others wait for it, never hang.
 *
 * Link model.  With link_gbps set, a copy takes at least bytes / (G * 1e9)
 * seconds: the remainder after the memcpy is slept, outside the lock.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/clock.h"
#include "device/alloc_table.h"
#include "device/backend.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif
#ifdef SIM_ASAN
#include <sanitizer/asan_interface.h>
#define SIM_REDZONE        HG_DEVICE_ALIGN
#define sim_poison(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define sim_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SIM_REDZONE        0u
#define sim_poison(p, n)   ((void)(p), (void)(n))
#define sim_unpoison(p, n) ((void)(p), (void)(n))
#endif

#define SIM_POISON 0xA5

/* Device address regions: bits 63..48 select the device.  0xD000..0xDFFF are
 * neither 0x0000 nor 0xFFFF, so every address in them is non-canonical on
 * x86-64 (whatever bit 47), and 4096 devices can be open at once.  An arena
 * never exceeds a region (x86-64 user space is 2^47 bytes anyway). */
#define SIM_REGION_SHIFT 48
#define SIM_REGION_BYTES (1ull << SIM_REGION_SHIFT)
#define SIM_FIRST_REGION 0xD000u
#define SIM_REGIONS      ALLOC_WINDOWS

struct sim;

typedef struct sim_core {
    struct sim *sim;
    uint32_t index;
    hg_core_type type;
    pthread_t thread;
} sim_core;

typedef struct sim {
    unsigned char *arena; /* the device's memory: base maps to arena[0] */
    hg_devaddr base;      /* the start of this device's address region */
    uint32_t region;      /* its index in the process-wide table */
    uint64_t arena_bytes;
    uint64_t high_water; /* arena bytes ever handed out: what ASan may have poisoned */
    pthread_rwlock_t table_lock;
    alloc_table table; /* spans include the redzone */
    /* The table's version: a new one (sim_versions) before every change,
     * under the write lock.  What sim_translate's per-thread cache checks. */
    atomic_uint_least64_t version;
    double link_gbps;

    pthread_mutex_t dispatch_lock; /* one run_cores caller at a time */
    pthread_mutex_t core_lock;
    pthread_cond_t core_start, core_done;
    uint64_t epoch;    /* bumped once per run_cores call */
    device_core_fn fn; /* this epoch's work */
    void *fn_ctx;
    uint32_t pending; /* cores yet to finish this epoch */
    bool stop;
    sim_core *cores;
    uint32_t ncores, nstarted;
} sim;

/* ------------------------------------------------------------ table lookup */

static unsigned char *sim_host(const sim *s, hg_devaddr a)
{
    return s->arena + (a - s->base);
}

/* Versions of every sim's table, process-wide: no two tables (of one device
 * over time, or of two devices, even one opened where a closed one was)
 * ever share a version, so a cache entry never matches another table. */
static atomic_uint_least64_t sim_versions = 1;

/* Called under the write lock, before the table changes. */
static void sim_table_changes(sim *s)
{
    atomic_store_explicit(&s->version, atomic_fetch_add(&sim_versions, 1) + 1,
                          memory_order_release);
}

/* Translation runs once per task arg on the core threads, and a read lock
 * of the shared table per arg costs a cache line bouncing between cores.
 * So each thread keeps the last SIM_TCACHE allocations it translated, each
 * stamped with the table's version at its (locked) lookup.  An entry whose
 * stamp is the table's version now was live when that version was loaded,
 * and still is at that instant: the answer a locked lookup then would give.
 * (Neither path keeps an allocation live after it returns: freeing memory a
 * running graph uses is the caller's error either way.)  A miss takes the
 * read lock. */
#define SIM_TCACHE 4

typedef struct sim_tcache_entry {
    uint64_t version; /* 0: empty (versions start at 2) */
    hg_devaddr addr;
    size_t size;
} sim_tcache_entry;

static _Thread_local sim_tcache_entry sim_tcache[SIM_TCACHE];
static _Thread_local unsigned sim_tcache_next;

/* True if [addr, addr+bytes) lies in [base, base+size) (bytes 0: addr may
 * be one past its end), as alloc_table_lookup decides. */
static bool sim_in(hg_devaddr base, size_t size, hg_devaddr addr, size_t bytes)
{
    return addr >= base && addr - base <= size && bytes <= size - (size_t)(addr - base);
}

static void *sim_translate(void *state, hg_devaddr addr, size_t bytes)
{
    sim *s = state;
    const uint64_t now = atomic_load_explicit(&s->version, memory_order_acquire);
    for (unsigned i = 0; i < SIM_TCACHE; i++) {
        const sim_tcache_entry *c = &sim_tcache[i];
        if (c->version == now && sim_in(c->addr, c->size, addr, bytes))
            return sim_host(s, addr);
    }
    device_rwlock_rdlock(&s->table_lock);
    const alloc_entry *e = alloc_table_lookup(&s->table, addr, bytes);
    if (e != NULL) {
        sim_tcache[sim_tcache_next] = (sim_tcache_entry){
            atomic_load_explicit(&s->version, memory_order_relaxed), e->addr, e->size};
        sim_tcache_next = (sim_tcache_next + 1) % SIM_TCACHE;
    }
    void *p = e ? sim_host(s, addr) : NULL;
    device_rwlock_unlock(&s->table_lock);
    return p;
}

static int sim_find_alloc(void *state, hg_devaddr addr, hg_devaddr *base, size_t *size, bool *user)
{
    sim *s = state;
    return alloc_table_find(&s->table, &s->table_lock, addr, base, size, user);
}

/* ------------------------------------------------------ allocate and free */

/* The arena bytes an allocation of `bytes` takes: rounded up, plus the
 * redzone.  bytes <= arena_bytes, so it cannot overflow. */
static uint64_t sim_span(size_t bytes)
{
    return alloc_table_align(bytes) + SIM_REDZONE;
}

/* Huge pages (THP "madvise" mode) for the 2 MiB pages that an allocation
 * of at least SIM_HUGE_MIN bytes covers, before it is first touched.  A
 * large allocation is touched in long runs and kernels stream through it: a
 * 2 MiB page takes one fault where 4 KiB pages take 512 (2-13 us each on
 * this project's VMs) and spares the TLB.  A small one would pay for
 * zeroing a whole 2 MiB page it uses little of (a run of 10^3 tiny tasks
 * paid ~0.13 ms for its 128 KiB), so it stays on 4 KiB pages.  A host
 * without THP says no, which changes nothing but speed.
 * What remains is the host's price for memory it has not supplied yet, paid
 * once per arena range, on its first allocation: a huge page the kernel
 * recycles costs ~0.1 ms of CPU a MiB to hand over and clear; one whose
 * memory the hypervisor has not backed yet (a VM booted minutes ago)
 * ~2.7 ms a MiB, all in the kernel's clear_page; 4 KiB pages ~0.7 ms a MiB.
 * So bgemm's first round (grid=16 tile=128 grid_k=2: a 20 MiB retained
 * buffer in bind, 32 MiB of scratch in orchestrate) pays 3.5 and 3 ms warm,
 * 58 and 93 ms cold, against 1.5-2 and 0.5-1 ms a later round. */
#define SIM_HUGE_PAGE (2u << 20)
#define SIM_HUGE_MIN  (256u << 10) /* where 2 MiB of zeroing costs less than 64 faults */

static void sim_huge_pages(const sim *s, unsigned char *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes < SIM_HUGE_MIN)
        return;
    /* Rounded out to the 2 MiB pages it touches, but never past the arena:
     * the advice is for the sim's own mapping only. */
    const uintptr_t first = (uintptr_t)s->arena, end = first + (uintptr_t)s->arena_bytes;
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(SIM_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + bytes + SIM_HUGE_PAGE - 1) & ~(uintptr_t)(SIM_HUGE_PAGE - 1);
    lo = lo < first ? first : lo;
    hi = hi > end ? end : hi;
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)s;
    (void)p;
    (void)bytes;
#endif
}

/* Reserves the range under the write lock; sim_prepare poisons it. */
static int sim_malloc(void *state, size_t bytes, bool user, hg_devaddr *out)
{
    sim *s = state;
    if (bytes > s->arena_bytes)
        return HG_EDEVMEM;
    const alloc_entry want = {.size = bytes, .span = sim_span(bytes), .user = user};
    int rc = HG_EDEVMEM;
    device_rwlock_wrlock(&s->table_lock);
    sim_table_changes(s);
    const alloc_entry *e = alloc_table_insert(&s->table, &want);
    if (e != NULL) {
        if (e->addr + e->span - s->base > s->high_water)
            s->high_water = e->addr + e->span - s->base;
        *out = e->addr;
        rc = 0;
    }
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

/* The range is the caller's alone until its allocation is returned: no lock
 * is needed, and none is held (device.c calls this outside its own).  The
 * sim's poisoning cannot fail but for an injected completion fault, after
 * which device.c frees the range (poisoned, as a free leaves it). */
static int sim_prepare(void *state, hg_devaddr addr, size_t bytes, bool doomed)
{
    sim *s = state;
    unsigned char *p = sim_host(s, addr);
    sim_huge_pages(s, p, bytes);
    sim_unpoison(p, bytes);
    sim_poison(p + bytes, sim_span(bytes) - bytes);
    memset(p, SIM_POISON, bytes);
    return doomed ? HG_EDEVMEM : 0;
}

static int sim_free(void *state, hg_devaddr addr, bool user, size_t *bytes)
{
    sim *s = state;
    int rc = HG_ENOTFOUND;
    device_rwlock_wrlock(&s->table_lock);
    sim_table_changes(s);
    const alloc_entry *e = alloc_table_at(&s->table, addr);
    alloc_entry gone;
    if (e != NULL && e->user == user && alloc_table_remove(&s->table, addr, &gone)) {
        *bytes = gone.size;
        sim_poison(sim_host(s, addr), gone.span);
        rc = 0;
    }
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

/* Sets [addr, addr+bytes) to `value` under the read lock; a doomed fill
 * (an injected completion fault) sets nothing and fails. */
static int sim_fill(void *state, hg_devaddr addr, int value, size_t bytes, bool doomed)
{
    sim *s = state;
    int rc = HG_ERANGE;
    device_rwlock_rdlock(&s->table_lock);
    if (alloc_table_lookup(&s->table, addr, bytes) != NULL) {
        if (!doomed)
            memset(sim_host(s, addr), value, bytes);
        rc = doomed ? HG_ECOPY : 0;
    }
    device_rwlock_unlock(&s->table_lock);
    return rc;
}

/* ------------------------------------------------------------------ copies */

/* Sleeps until `start_ns + bytes / link` has passed: the modeled copy time is
 * a floor, never a ceiling. */
static void sim_link_wait(const sim *s, uint64_t start_ns, size_t bytes)
{
    if (s->link_gbps <= 0.0)
        return;
    double ns = (double)bytes / s->link_gbps; /* bytes / (G * 1e9) s, in ns */
    uint64_t end = start_ns + (uint64_t)ns + 1;
    struct timespec until = {.tv_sec = (time_t)(end / 1000000000ull),
                             .tv_nsec = (long)(end % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}

/* Copies between host memory and [addr, addr+bytes) under the read lock:
 * from `from_host` when it is not NULL, else into `to_host`. */
static int sim_copy(sim *s, hg_devaddr addr, size_t bytes, const void *from_host, void *to_host)
{
    uint64_t start = clock_now_ns();
    int rc = HG_ERANGE;
    device_rwlock_rdlock(&s->table_lock);
    if (alloc_table_lookup(&s->table, addr, bytes) != NULL) {
        unsigned char *dev = sim_host(s, addr);
        if (from_host != NULL)
            memcpy(dev, from_host, bytes);
        else if (to_host != NULL)
            memcpy(to_host, dev, bytes);
        rc = 0;
    }
    device_rwlock_unlock(&s->table_lock);
    if (rc == 0)
        sim_link_wait(s, start, bytes);
    return rc;
}

static int sim_copy_to(void *state, hg_devaddr dst, const void *src, size_t bytes)
{
    return sim_copy(state, dst, bytes, src, NULL);
}

static int sim_copy_from(void *state, void *dst, hg_devaddr src, size_t bytes)
{
    return sim_copy(state, src, bytes, NULL, dst);
}

/* A batch: every range under one read lock, and the link model applied to
 * the batch's total bytes (one transfer's worth of setup, as a real
 * backend's single batch of async copies would have).  All or nothing
 * (copy_batch_whole): every range is looked up before any is copied, under
 * the same lock, so no free can come between the check and the memcpys.
 * A doomed range (an injected completion fault) fails where it stands: the
 * sim's copies complete as they are made, so the ranges before it are
 * done and none from it on moves. */
static int sim_copy_batch(void *state, bool to_device, const device_copy *list, size_t n,
                          size_t doomed, size_t *failed)
{
    sim *s = state;
    uint64_t start = clock_now_ns(), total = 0;
    int rc = 0;
    *failed = 0;
    device_rwlock_rdlock(&s->table_lock);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (list[i].bytes != 0 && alloc_table_lookup(&s->table, list[i].dev, list[i].bytes) == NULL)
            rc = HG_ERANGE;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i == doomed) {
            *failed = i;
            rc = HG_ECOPY;
            break;
        }
        if (list[i].bytes == 0)
            continue;
        unsigned char *dev = sim_host(s, list[i].dev);
        if (to_device)
            memcpy(dev, list[i].host, list[i].bytes);
        else
            memcpy(list[i].host, dev, list[i].bytes);
        total += list[i].bytes;
    }
    device_rwlock_unlock(&s->table_lock);
    sim_link_wait(s, start, total);
    return rc;
}

/* ------------------------------------------------------------------- cores */

static void *sim_core_main(void *arg)
{
    sim_core *c = arg;
    sim *s = c->sim;
    uint64_t seen = 0; /* epochs start at 1, so a late starter still runs 1 */
    pthread_mutex_lock(&s->core_lock);
    for (;;) {
        while (!s->stop && s->epoch == seen)
            pthread_cond_wait(&s->core_start, &s->core_lock);
        if (s->stop)
            break;
        seen = s->epoch;
        device_core_fn fn = s->fn;
        void *ctx = s->fn_ctx;
        pthread_mutex_unlock(&s->core_lock);
        fn(ctx, c->index, c->type);
        pthread_mutex_lock(&s->core_lock);
        if (--s->pending == 0)
            pthread_cond_signal(&s->core_done);
    }
    pthread_mutex_unlock(&s->core_lock);
    return NULL;
}

static void sim_run_cores(void *state, device_core_fn fn, void *ctx)
{
    sim *s = state;
    pthread_mutex_lock(&s->dispatch_lock);
    pthread_mutex_lock(&s->core_lock);
    s->fn = fn;
    s->fn_ctx = ctx;
    s->pending = s->ncores;
    s->epoch++;
    pthread_cond_broadcast(&s->core_start);
    while (s->pending > 0)
        pthread_cond_wait(&s->core_done, &s->core_lock);
    pthread_mutex_unlock(&s->core_lock);
    pthread_mutex_unlock(&s->dispatch_lock);
}

static void sim_stop_cores(sim *s)
{
    pthread_mutex_lock(&s->core_lock);
    s->stop = true;
    pthread_cond_broadcast(&s->core_start);
    pthread_mutex_unlock(&s->core_lock);
    for (uint32_t i = 0; i < s->nstarted; i++)
        pthread_join(s->cores[i].thread, NULL);
    s->nstarted = 0;
}

static bool sim_start_cores(sim *s, const device_config *cfg)
{
    s->cores = calloc(cfg->ncores, sizeof *s->cores);
    if (s->cores == NULL)
        return false;
    s->ncores = cfg->ncores;
    for (uint32_t i = 0; i < s->ncores; i++) {
        sim_core *c = &s->cores[i];
        *c = (sim_core){.sim = s, .index = i, .type = device_config_core_type(cfg, i)};
        if (pthread_create(&c->thread, NULL, sim_core_main, c) != 0)
            return false;
        s->nstarted++;
    }
    return true;
}

/* ------------------------------------------------------- address regions */

/* Which regions open devices hold, process-wide: the one piece of state the
 * sim shares between devices, because addresses must differ between them. */
static alloc_windows sim_regions = ALLOC_WINDOWS_INIT;

/* Takes the next free region; false if all SIM_REGIONS are held. */
static bool sim_region_take(sim *s)
{
    if (!alloc_window_take(&sim_regions, &s->region))
        return false;
    s->base = (hg_devaddr)(SIM_FIRST_REGION + s->region) << SIM_REGION_SHIFT;
    return true;
}

/* Whether addr lies in this device's region (allocated or not). */
static bool sim_owns(void *state, hg_devaddr addr)
{
    const sim *s = state;
    return addr - s->base < SIM_REGION_BYTES;
}

/* ---------------------------------------------------------- open and close */

static void sim_close(void *state)
{
    sim *s = state;
    if (s == NULL)
        return;
    sim_stop_cores(s);
    if (s->arena != NULL) {
        /* Only what was handed out can carry poison; unpoisoning the whole
         * arena would write shadow for every byte of it. */
        sim_unpoison(s->arena, s->high_water);
        munmap(s->arena, s->arena_bytes);
    }
    if (s->base != 0)
        alloc_window_give(&sim_regions, s->region);
    alloc_table_free(&s->table);
    free(s->cores);
    pthread_cond_destroy(&s->core_done);
    pthread_cond_destroy(&s->core_start);
    pthread_mutex_destroy(&s->core_lock);
    pthread_mutex_destroy(&s->dispatch_lock);
    pthread_rwlock_destroy(&s->table_lock);
    free(s);
}

/* Reserves the arena: address space only but its first SIM_BACKED bytes;
 * pages arrive when first touched (sim_prepare asks for huge pages where an
 * allocation is large). */
#define SIM_BACKED (1u << 20)
static bool sim_reserve_arena(sim *s, uint64_t mem_bytes)
{
    if (mem_bytes > (UINT64_MAX >> 2))
        return false;
    /* Rounded up: a capacity that is not a multiple of the alignment still
     * fits its last allocation. */
    uint64_t bytes = (mem_bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
    bytes *= SIM_REDZONE != 0 ? 2 : 1;
    if (bytes > SIZE_MAX || bytes > SIM_REGION_BYTES)
        return false;
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
#ifdef MADV_POPULATE_WRITE
    /* The arena's first SIM_BACKED bytes are backed now, in one call, as a
     * device's memory is from the start: else a run's first small
     * allocations (first-fit: they land here) pay a host page fault per
     * 4 KiB on first touch (2-13 us each on this project's VMs: ~70 us of a
     * 10^3-task first run, a cost no device charges the host), where the
     * call takes ~0.3 ms of hg_device_open once.  A kernel without it (before
     * Linux 5.14) says no, and pages come on first touch as before. */
    (void)madvise(p, (size_t)(bytes < SIM_BACKED ? bytes : SIM_BACKED), MADV_POPULATE_WRITE);
#endif
    s->arena = p;
    s->arena_bytes = bytes;
    return true;
}

static int sim_open(device_config *cfg, void **state)
{
    sim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return HG_ENOMEM;
    s->link_gbps = cfg->link_gbps;
    pthread_rwlock_init(&s->table_lock, NULL);
    pthread_mutex_init(&s->dispatch_lock, NULL);
    pthread_mutex_init(&s->core_lock, NULL);
    pthread_cond_init(&s->core_start, NULL);
    pthread_cond_init(&s->core_done, NULL);
    if (!sim_region_take(s) || !sim_reserve_arena(s, cfg->mem_bytes) || !sim_start_cores(s, cfg)) {
        sim_close(s);
        return HG_ENOMEM;
    }
    alloc_table_init(&s->table, s->base, s->arena_bytes);
    atomic_init(&s->version, 0);
    sim_table_changes(s);
    *state = s;
    return 0;
}

const device_ops device_sim_ops = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .malloc = sim_malloc,
    .prepare = sim_prepare,
    .free = sim_free,
    .copy_to = sim_copy_to,
    .copy_from = sim_copy_from,
    .copy_batch = sim_copy_batch,
    .copy_batch_whole = true,
    .fill = sim_fill,
    .translate = sim_translate,
    .find_alloc = sim_find_alloc,
    .owns = sim_owns,
    .run_cores = sim_run_cores,
};
