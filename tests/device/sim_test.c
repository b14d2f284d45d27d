/*
 * sim_test.c: the sim backend as kernels and the stages above rely on it:
 * first-fit address reuse, poisoned new memory, device addresses that are not
 * host pointers, translation bounds, core threads, and the link model.
 * Timing checks are lower bounds only: a loaded machine must not fail them.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "test_device.h"
#include "testlib.h"

TEST(address_reuse_after_free)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, b, c, big, small;
    ASSERT_OK(hg_devbuf_malloc(dev, 100, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 100, &b));
    ASSERT(a != 0 && b != 0 && a != b);
    ASSERT_UEQ(a % HG_DEVICE_ALIGN, 0);
    ASSERT_UEQ(b % HG_DEVICE_ALIGN, 0);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT_OK(hg_devbuf_malloc(dev, 100, &c));
    ASSERT_UEQ(c, a); /* first fit reuses the hole */
    ASSERT_OK(hg_devbuf_free(dev, c));
    ASSERT_OK(hg_devbuf_malloc(dev, 2000, &big)); /* too big for the hole */
    ASSERT(big != a);
    ASSERT_UEQ(big % HG_DEVICE_ALIGN, 0);
    ASSERT_OK(hg_devbuf_malloc(dev, HG_DEVICE_ALIGN, &small)); /* fits exactly */
    ASSERT_UEQ(small, a);
    hg_device_close(dev); /* still-live allocations are freed by close */
}

TEST(new_allocation_is_poisoned)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char buf[300];
    ASSERT_OK(hg_devbuf_malloc(dev, sizeof buf, &a));
    ASSERT_OK(hg_devbuf_copy_from(dev, buf, a, sizeof buf));
    for (size_t i = 0; i < sizeof buf; i++)
        ASSERT(buf[i] != 0);
    hg_device_close(dev);
}

/* The child dereferences a device address.  It must never reach _exit(0):
 * it dies by SIGSEGV, or (under ASan, whose handler reports and exits) it
 * exits non-zero. */
TEST(device_address_is_not_a_host_pointer)
{
    hg_device *dev = test_device_open("sim:cores=2");
    ASSERT(dev != NULL);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, 64, &a));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2); /* keep a sanitizer's report out of the log */
        volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)a;
        unsigned char v = *p;
        (void)v;
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0));
    hg_device_close(dev);
}

TEST(translate_bounds)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, base;
    size_t size;
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    unsigned char *p = device_translate(dev, a, 1000);
    ASSERT(p != NULL);
    ASSERT(p != (unsigned char *)(uintptr_t)a);
    ASSERT(device_translate(dev, a + 10, 10) == p + 10);
    ASSERT(device_translate(dev, a + 1000, 0) == p + 1000); /* one past */
    ASSERT(device_translate(dev, a + 1000, 1) == NULL);
    ASSERT(device_translate(dev, a + 1, 1000) == NULL);
    ASSERT(device_translate(dev, a - 1, 1) == NULL);
    ASSERT(device_translate(dev, a + 10, SIZE_MAX) == NULL);
    ASSERT(device_translate(dev, 0, 0) == NULL);
    ASSERT(device_translate(NULL, a, 1) == NULL);

    /* What a kernel writes through the pointer, a copy sees. */
    memset(p, 0x3c, 1000);
    unsigned char back[1000];
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, sizeof back));
    ASSERT_EQ(back[999], 0x3c);

    ASSERT_OK(device_find_alloc(dev, a + 999, &base, &size));
    ASSERT_UEQ(base, a);
    ASSERT_UEQ(size, 1000);
    ASSERT_EQ(device_find_alloc(dev, a + 1000, &base, &size), HG_ENOTFOUND);
    ASSERT_EQ(device_find_alloc(dev, a - 1, &base, &size), HG_ENOTFOUND);
    ASSERT_EQ(device_find_alloc(NULL, a, &base, &size), HG_EINVAL);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT(device_translate(dev, a, 1) == NULL);
    hg_device_close(dev);
}

/* ------------------------------------------------------------------- cores */

typedef struct core_log {
    uint32_t ncores;
    unsigned calls[16];
    hg_core_type types[16];
    int bad_core;
} core_log;

static void count_call(void *ctx, uint32_t core, hg_core_type type)
{
    core_log *log = ctx;
    if (core >= log->ncores) {
        __atomic_store_n(&log->bad_core, 1, __ATOMIC_RELAXED);
        return;
    }
    log->calls[core]++;
    log->types[core] = type;
}

TEST(run_cores_calls_every_core_once_per_call)
{
    hg_device *dev = test_device_open("sim:cores=5");
    ASSERT(dev != NULL);
    core_log log = {.ncores = 5};
    for (unsigned round = 1; round <= 300; round++) {
        device_run_cores(dev, count_call, &log);
        for (uint32_t i = 0; i < 5; i++)
            ASSERT_EQ(log.calls[i], round);
    }
    ASSERT_EQ(log.bad_core, 0);
    hg_device_close(dev);
}

TEST(typed_cores_report_their_types)
{
    hg_device *dev = test_device_open("sim:cube=1,vector=2");
    ASSERT(dev != NULL);
    ASSERT_EQ(hg_device_num_cores(dev), 3);
    ASSERT_EQ(hg_device_core_type(dev, 0), HG_CORE_CUBE);
    ASSERT_EQ(hg_device_core_type(dev, 1), HG_CORE_VECTOR);
    ASSERT_EQ(hg_device_core_type(dev, 2), HG_CORE_VECTOR);
    ASSERT_EQ(hg_device_core_type(dev, 3), HG_CORE_ANY);
    ASSERT(device_has_core_type(dev, HG_CORE_CUBE));
    ASSERT(device_has_core_type(dev, HG_CORE_VECTOR));
    core_log log = {.ncores = 3};
    device_run_cores(dev, count_call, &log);
    ASSERT_EQ(log.types[0], HG_CORE_CUBE);
    ASSERT_EQ(log.types[1], HG_CORE_VECTOR);
    ASSERT_EQ(log.types[2], HG_CORE_VECTOR);
    hg_device_close(dev);

    dev = test_device_open("sim:cube=2");
    ASSERT(dev != NULL);
    ASSERT(device_has_core_type(dev, HG_CORE_CUBE));
    ASSERT(!device_has_core_type(dev, HG_CORE_VECTOR));
    hg_device_close(dev);
}

typedef struct fill_job {
    hg_device *dev;
    hg_devaddr buf;
    size_t per_core;
    int failed;
} fill_job;

/* Each core translates its own slice and fills it with its index. */
static void fill_slice(void *ctx, uint32_t core, hg_core_type type)
{
    fill_job *job = ctx;
    hg_devaddr at = job->buf + core * job->per_core;
    unsigned char *p = device_translate(job->dev, at, job->per_core);
    if (p == NULL) {
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    memset(p, (int)core + 1, job->per_core);
}

TEST(cores_translate_concurrently)
{
    hg_device *dev = test_device_open("sim:cores=4");
    ASSERT(dev != NULL);
    fill_job job = {.dev = dev, .per_core = 4096};
    ASSERT_OK(hg_devbuf_malloc(dev, 4 * job.per_core, &job.buf));
    static unsigned char back[4 * 4096];
    for (int round = 0; round < 50; round++) {
        device_run_cores(dev, fill_slice, &job);
        ASSERT_EQ(job.failed, 0);
        ASSERT_OK(hg_devbuf_copy_from(dev, back, job.buf, sizeof back));
        for (size_t i = 0; i < sizeof back; i += 512)
            ASSERT_EQ(back[i], i / job.per_core + 1);
    }
    hg_device_close(dev);
}

/* Translation answers from its thread's cache of recent allocations while
 * the table is unchanged: every change (a free, an allocation at the freed
 * address, another device at the same place) shows at once. */
TEST(translate_sees_every_table_change)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, b, c;
    ASSERT_OK(hg_devbuf_malloc(dev, 4096, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 4096, &b));
    unsigned char *pa = device_translate(dev, a, 4096), *pb = device_translate(dev, b, 10);
    ASSERT(pa != NULL && pb != NULL);
    ASSERT(device_translate(dev, a + 100, 3996) == pa + 100); /* from the cache */
    ASSERT(device_translate(dev, a + 100, 3997) == NULL);
    ASSERT(device_translate(dev, a + 4096, 0) == pa + 4096);
    ASSERT_OK(hg_devbuf_free(dev, a));
    ASSERT(device_translate(dev, a, 1) == NULL);
    ASSERT(device_translate(dev, b, 4096) == pb); /* b is still live */
    ASSERT_OK(hg_devbuf_malloc(dev, 100, &c));    /* first fit: a's place */
    ASSERT_UEQ(c, a);
    ASSERT(device_translate(dev, c, 100) == pa);
    ASSERT(device_translate(dev, c, 101) == NULL); /* the new, smaller size */
    /* A second device: none of the first's cached allocations is its own. */
    hg_device *other = test_device_open("sim:cores=1");
    ASSERT(other != NULL);
    ASSERT(device_translate(other, c, 1) == NULL);
    ASSERT(device_translate(other, b, 1) == NULL);
    hg_device_close(other);
    hg_device_close(dev);
    /* A device opened after one closed: nothing the closed one cached. */
    for (int i = 0; i < 3; i++) {
        dev = test_device_open("sim:cores=1");
        ASSERT(dev != NULL);
        ASSERT_OK(hg_devbuf_malloc(dev, 4096, &a));
        ASSERT(device_translate(dev, a, 4096) != NULL);
        ASSERT(device_translate(dev, a + 4096, 1) == NULL);
        hg_device_close(dev);
    }
}

typedef struct churn_job {
    hg_device *dev;
    hg_devaddr buf;
    int failed;
} churn_job;

/* Each core translates the one live buffer many times. */
static void translate_many(void *ctx, uint32_t core, hg_core_type type)
{
    (void)core;
    (void)type;
    churn_job *job = ctx;
    for (int i = 0; i < 1000; i++)
        if (device_translate(job->dev, job->buf + (size_t)(i % 64), 64) == NULL)
            __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
}

/* Another thread allocates and frees while the cores translate (TSan sees
 * the cache and the table's versions): a live buffer always translates. */
static void *churn(void *arg)
{
    hg_device *dev = arg;
    for (int i = 0; i < 200; i++) {
        hg_devaddr x;
        if (hg_devbuf_malloc(dev, 1000 + (size_t)i, &x) == 0)
            hg_devbuf_free(dev, x);
    }
    return NULL;
}

TEST(translate_while_another_thread_allocates)
{
    hg_device *dev = test_device_open("sim:cores=2,mem=64M");
    ASSERT(dev != NULL);
    churn_job job = {.dev = dev};
    ASSERT_OK(hg_devbuf_malloc(dev, 4096, &job.buf));
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, churn, dev), 0);
    for (int round = 0; round < 20; round++)
        device_run_cores(dev, translate_many, &job);
    pthread_join(t, NULL);
    ASSERT_EQ(job.failed, 0);
    hg_device_close(dev);
}

TEST(open_close_many_times)
{
    for (int i = 0; i < 40; i++) {
        hg_device *dev = test_device_open(i % 2 ? "sim:cores=3" : "sim:cube=1,vector=1");
        ASSERT(dev != NULL);
        core_log log = {.ncores = 3};
        if (i % 4 == 0)
            device_run_cores(dev, count_call, &log);
        hg_device_close(dev);
    }
}

/* ------------------------------------------------------- pool and alignment */

/* A kernel's pointer has the device address's alignment: HG_DEVICE_ALIGN at
 * the start of every allocation, whatever sizes came before. */
TEST(kernel_pointers_are_device_aligned)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    static const size_t sizes[] = {1, 17, 1000, 1024, 1025, 4096, 70001, 3};
    hg_devaddr a[8];
    for (int i = 0; i < 8; i++) {
        ASSERT_OK(hg_devbuf_malloc(dev, sizes[i], &a[i]));
        ASSERT_UEQ(a[i] % HG_DEVICE_ALIGN, 0);
        uintptr_t p = (uintptr_t)device_translate(dev, a[i], sizes[i]);
        ASSERT(p != 0);
        ASSERT_UEQ(p % HG_DEVICE_ALIGN, 0);
        /* the pointer and the address agree modulo a page too */
        ASSERT_UEQ(p % 4096, a[i] % 4096);
    }
    hg_device_close(dev);
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Device memory is a pool: allocating, freeing and allocating 32 MiB again
 * lands on the same, already touched pages, so the second time costs (almost)
 * no page faults, where the first touched every page (one fault per 4 KiB
 * page, or per 2 MiB where the host gives the arena huge pages).  Counted,
 * not timed. */
TEST(freed_memory_is_reused_without_page_faults)
{
    enum { BYTES = 32 << 20, PAGES = BYTES / 4096 };
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, b;
    long f0 = minor_faults();
    ASSERT_OK(hg_devbuf_malloc(dev, BYTES, &a));
    long first = minor_faults() - f0;
    void *pa = device_translate(dev, a, BYTES);
    ASSERT_OK(hg_devbuf_free(dev, a));
    long f1 = minor_faults();
    ASSERT_OK(hg_devbuf_malloc(dev, BYTES, &b));
    long second = minor_faults() - f1;
    ASSERT_UEQ(b, a);
    ASSERT(device_translate(dev, b, BYTES) == pa);
    printf("     page faults: first allocation %ld, reuse %ld (%d pages)\n", first, second, PAGES);
    ASSERT_LT(second, PAGES / 64 + 16);
    ASSERT_OK(hg_devbuf_free(dev, b));
    hg_device_close(dev);
}

/* The arena's first MiB is backed at open (header: "touched lazily but for
 * its first MiB"): an allocation there, poisoned whole, takes (almost) no
 * page faults of its own, where one past that MiB takes one per 4 KiB
 * page (32 for 128 KiB, below the size that asks for huge pages).  Compared
 * within one run, so a sanitizer's shadow faults, alike for both, cancel.
 * A kernel without MADV_POPULATE_WRITE (before Linux 5.14) skips, named.
 * Counted, not timed. */
TEST(first_allocations_land_on_memory_backed_at_open)
{
    enum { BYTES = 128 << 10, PAGES = BYTES / 4096, BLOCKS = 12 /* 1.5 MiB */ };
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(probe != MAP_FAILED);
#ifdef MADV_POPULATE_WRITE
    const bool populate = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
#else
    const bool populate = false;
#endif
    munmap(probe, 4096);
    if (!populate) {
        printf("     skipped: this kernel has no MADV_POPULATE_WRITE\n");
        return;
    }
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a[BLOCKS];
    long faults[BLOCKS];
    for (int k = 0; k < BLOCKS; k++) {
        const long f0 = minor_faults();
        ASSERT_OK(hg_devbuf_malloc(dev, BYTES, &a[k]));
        faults[k] = minor_faults() - f0;
    }
    /* The second allocation, not the first: the first also pays the
     * device's own first bookkeeping (its table, a sanitizer's allocator). */
    printf("     page faults of a %d-page allocation: in the first MiB %ld, past it %ld\n", PAGES,
           faults[1], faults[BLOCKS - 1]);
    ASSERT_GE(faults[BLOCKS - 1] - faults[1], PAGES / 4);
    for (int k = 0; k < BLOCKS; k++)
        ASSERT_OK(hg_devbuf_free(dev, a[k]));
    hg_device_close(dev);
}

/* Fill sets device bytes on the device: no copy is counted. */
TEST(fill_sets_device_bytes_without_a_copy)
{
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a;
    unsigned char back[300];
    ASSERT_OK(hg_devbuf_malloc(dev, sizeof back, &a));
    hg_device_counters before, after;
    hg_device_counters_get(dev, &before);
    ASSERT_OK(device_fill(dev, a + 10, 0x3c, 100));
    ASSERT_EQ(device_fill(dev, a + 10, 0, sizeof back), HG_ERANGE);
    ASSERT_EQ(device_fill(NULL, a, 0, 1), HG_EINVAL);
    ASSERT_OK(device_fill(dev, a, 0, 0));
    hg_device_counters_get(dev, &after);
    ASSERT(memcmp(&before, &after, sizeof before) == 0);
    ASSERT_OK(hg_devbuf_copy_from(dev, back, a, sizeof back));
    ASSERT_EQ(back[9], 0xA5);
    ASSERT_EQ(back[10], 0x3c);
    ASSERT_EQ(back[109], 0x3c);
    ASSERT_EQ(back[110], 0xA5);
    hg_device_close(dev);
}

#if defined(__SANITIZE_ADDRESS__)
#define SIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_TEST_ASAN 1
#endif
#endif

/* Under AddressSanitizer a kernel that writes one byte past its allocation
 * is caught although device memory is one arena: the child must not reach
 * _exit(0).  Without ASan there is nothing to check. */
TEST(overrun_past_an_allocation_is_caught_under_asan)
{
#ifdef SIM_TEST_ASAN
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_devaddr a, b;
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &a));
    ASSERT_OK(hg_devbuf_malloc(dev, 1000, &b));
    unsigned char *p = device_translate(dev, a, 1000);
    ASSERT(p != NULL);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        ((volatile unsigned char *)p)[1000] = 1;
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0));
    /* A freed allocation is poisoned too. */
    ASSERT_OK(hg_devbuf_free(dev, b));
    hg_device_close(dev);
#else
    printf("     not an ASan build: nothing to check\n");
#endif
}

/* Several host threads dispatch work on one device's cores at once (runners
 * sharing a device): every call runs on every core exactly once, and none
 * hangs.  Before, a second caller overwrote the first one's dispatch. */
enum { DISPATCH_THREADS = 4, DISPATCH_ROUNDS = 300 };

typedef struct dispatch_job {
    hg_device *dev;
    unsigned calls[4];
    int bad;
} dispatch_job;

static void count_dispatch(void *ctx, uint32_t core, hg_core_type type)
{
    dispatch_job *job = ctx;
    (void)type;
    if (core >= 4) {
        __atomic_store_n(&job->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&job->calls[core], 1, __ATOMIC_RELAXED);
}

static void *dispatch_rounds(void *arg)
{
    dispatch_job *job = arg;
    for (unsigned round = 1; round <= DISPATCH_ROUNDS; round++) {
        device_run_cores(job->dev, count_dispatch, job);
        for (int c = 0; c < 4; c++)
            if (__atomic_load_n(&job->calls[c], __ATOMIC_RELAXED) != round)
                __atomic_store_n(&job->bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

TEST(run_cores_from_several_threads)
{
    hg_device *dev = test_device_open("sim:cores=4");
    ASSERT(dev != NULL);
    static dispatch_job jobs[DISPATCH_THREADS];
    pthread_t threads[DISPATCH_THREADS];
    for (int i = 0; i < DISPATCH_THREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].dev = dev;
        ASSERT_OK(pthread_create(&threads[i], NULL, dispatch_rounds, &jobs[i]));
    }
    for (int i = 0; i < DISPATCH_THREADS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < DISPATCH_THREADS; i++) {
        ASSERT_EQ(jobs[i].bad, 0);
        for (int c = 0; c < 4; c++)
            ASSERT_EQ(jobs[i].calls[c], DISPATCH_ROUNDS);
    }
    hg_device_close(dev);
}

/* -------------------------------------------------------------- link model */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

TEST(link_model_copies_take_at_least_modeled_time)
{
    /* 1 MiB at 0.5 GB/s: at least 2.097 ms each way.  A lower bound only. */
    hg_device *dev = test_device_open("sim:cores=1,link_gbps=0.5");
    ASSERT(dev != NULL);
    ASSERT_STR_EQ(hg_device_spec(dev), "sim:cores=1,link_gbps=0.5");
    size_t bytes = 1u << 20;
    uint64_t floor_ns = (uint64_t)((double)bytes / 0.5);
    unsigned char *host = calloc(1, bytes);
    ASSERT(host != NULL);
    hg_devaddr a;
    ASSERT_OK(hg_devbuf_malloc(dev, bytes, &a));
    uint64_t t0 = now_ns();
    ASSERT_OK(hg_devbuf_copy_to(dev, a, host, bytes));
    uint64_t t1 = now_ns();
    ASSERT_OK(hg_devbuf_copy_from(dev, host, a, bytes));
    uint64_t t2 = now_ns();
    free(host);
    ASSERT_UGE(t1 - t0, floor_ns);
    ASSERT_UGE(t2 - t1, floor_ns);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
