/*
 * workload.c: the real-workload scenes' seeded generator, content hash,
 * hand-made views and memory check (workload.h says what each promises).
 */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE), before any header */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../kernels/kernels.h"
#include "hostgraph.h"
#include "workload.h"

/* splitmix64's finalizer, as scene_fill uses: cheap and well mixed. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The 16 random bits element i uses. */
static inline uint32_t uniform_bits(uint64_t base, size_t i)
{
    uint64_t h = mix64(base + (uint64_t)(i >> 2) * 0xd1b54a32d192ed03ull);
    return (uint32_t)(h >> ((i & 3) * 16)) & 0xffffu;
}

/* (2 bits - 65535) / 65536: odd multiples of 2^-16 in (-1, 1). */
static inline float bits_to_unit(uint32_t bits)
{
    return (float)(2 * (int32_t)bits - 65535) * (1.0f / 65536.0f);
}

double wl_uniform(uint64_t seed, size_t i)
{
    return bits_to_unit(uniform_bits(mix64(seed), i));
}

/* The one rounding path every generated value takes: float arithmetic, then
 * the dtype.  wl_fill and wl_fill_bf16_at must agree bit for bit. */
static inline float generated(float offset, float scale, uint32_t bits)
{
    return offset + scale * bits_to_unit(bits);
}

uint16_t wl_fill_bf16_at(uint64_t seed, double offset, double scale, size_t i)
{
    return kern_f32_to_bf16(generated((float)offset, (float)scale, uniform_bits(mix64(seed), i)));
}

/* Asks for transparent huge pages over the page-aligned inside of a large
 * buffer before its first touch: where page faults are dear (a VM), a
 * gigabyte of weights costs 512 times fewer of them.  Advice only. */
static void advise_huge(void *data, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = 2u << 20;
    uintptr_t lo = ((uintptr_t)data + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)data + bytes) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)data;
    (void)bytes;
#endif
}

/* One thread's share of a fill: elements [lo, hi), lo a multiple of 4 so
 * each hash feeds four neighbours. */
typedef struct fill_job {
    void *out;
    hg_dtype dtype;
    uint64_t base;
    float offset, scale;
    size_t lo, hi;
} fill_job;

static void *fill_range(void *arg)
{
    const fill_job *j = arg;
    for (size_t g = j->lo; g < j->hi; g += 4) {
        uint64_t h = mix64(j->base + (uint64_t)(g >> 2) * 0xd1b54a32d192ed03ull);
        size_t n = j->hi - g < 4 ? j->hi - g : 4;
        for (size_t e = 0; e < n; e++) {
            float v = generated(j->offset, j->scale, (uint32_t)(h >> (16 * e)) & 0xffffu);
            if (j->dtype == HG_BF16)
                ((uint16_t *)j->out)[g + e] = kern_f32_to_bf16(v);
            else
                ((float *)j->out)[g + e] = v;
        }
    }
    return NULL;
}

/* Fills above this many elements use a second thread (the host has >= 2
 * cores; make() of preset=real fills ~0.4 G elements per layer). */
#define FILL_SPLIT (1u << 22)

int wl_fill(scene_case *c, uint32_t arg, uint64_t seed, double offset, double scale)
{
    const hg_tensor *t = &c->args[arg].tensor;
    size_t bytes = hg_hostbuf_size(t->host);
    if (t->dtype != HG_BF16 && t->dtype != HG_F32)
        return HG_EINVAL;
    size_t n = bytes / hg_dtype_size(t->dtype), half = n / 8 * 4;
    fill_job jobs[2] = {
        {hg_hostbuf_data(t->host), t->dtype, mix64(seed), (float)offset, (float)scale, 0, n}};
    advise_huge(jobs[0].out, bytes);
    pthread_t helper;
    bool split = n > FILL_SPLIT;
    if (split) {
        jobs[1] = jobs[0];
        jobs[0].hi = jobs[1].lo = half;
        split = pthread_create(&helper, NULL, fill_range, &jobs[1]) == 0;
        if (!split)
            jobs[0].hi = n; /* no thread: do it all here */
    }
    fill_range(&jobs[0]);
    if (split)
        pthread_join(helper, NULL);
    return hg_hostbuf_mark_written(t->host, 0, bytes);
}

/* Four independent multiply-xorshift lanes over 32-byte blocks: the chains
 * overlap, so hashing runs near memory speed. */
uint64_t wl_hash(uint64_t h, const void *data, size_t lo, size_t hi)
{
    const unsigned char *p = (const unsigned char *)data + lo;
    size_t n = hi > lo ? hi - lo : 0;
    uint64_t lane[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h + 0x3c6ef372fe94f82bull, ~h};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int j = 0; j < 4; j++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * (size_t)j, 8);
            lane[j] = (lane[j] ^ w) * 0xff51afd7ed558ccdull;
            lane[j] ^= lane[j] >> 29;
        }
    }
    uint64_t out = mix64(lane[0]) ^ mix64(lane[1] + 1) ^ mix64(lane[2] + 2) ^ mix64(lane[3] + 3);
    for (; i < n; i++)
        out = mix64(out ^ p[i]);
    return mix64(out ^ n);
}

hg_tensor wl_view(const hg_tensor *base, size_t offset, uint32_t ndims, const size_t *shape,
                  const size_t *strides)
{
    hg_tensor v = {.dtype = base->dtype,
                   .ndims = ndims,
                   .offset = base->offset + offset,
                   .host = base->host,
                   .device = base->device};
    for (uint32_t d = 0; d < ndims && d < HG_MAX_DIMS; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

bool wl_block_table(size_t batch, const size_t *blocks, size_t max_blocks, size_t num_blocks,
                    uint64_t seed, int32_t *table)
{
    int32_t *ids = malloc(num_blocks * sizeof *ids + 1);
    if (ids == NULL)
        return false;
    for (size_t i = 0; i < num_blocks; i++)
        ids[i] = (int32_t)i;
    for (size_t i = num_blocks; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)((wl_uniform(seed, i) + 1.0) * 0.5 * (double)i);
        j = j < i ? j : i - 1;
        int32_t tmp = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = tmp;
    }
    size_t next = 0;
    bool ok = true;
    for (size_t b = 0; b < batch; b++) {
        for (size_t i = 0; i < max_blocks; i++) {
            bool used = i < blocks[b] && next < num_blocks;
            ok = ok && (i >= blocks[b] || used);
            table[b * max_blocks + i] = used ? ids[next++] : -1;
        }
    }
    free(ids);
    return ok;
}

uint64_t wl_host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)page;
}

bool wl_memory_fits(uint64_t host, uint64_t device)
{
    uint64_t ram = wl_host_memory();
    /* The sim's default capacity is half of RAM; host and device both live in
     * RAM, and the rest of the process (and the machine) needs some too.  An
     * unknown RAM size passes: the device allocation will say. */
    return ram == 0 || (device <= ram / 2 && host + device + ram / 16 <= ram);
}

int wl_check_memory(const char *param, const char *what, uint64_t host, uint64_t device,
                    hg_err *err)
{
    uint64_t ram = wl_host_memory(), device_cap = ram / 2;
    if (wl_memory_fits(host, device))
        return 0;
    return err_set(err, HG_ERANGE,
                   "param '%s': %s needs %.2f GiB of memory (%.2f GiB on the host: args, "
                   "snapshot, copy-back staging, golden; %.2f GiB on the sim device, whose "
                   "default is %.2f GiB); this host has %.2f GiB",
                   param, what, wl_gib(host + device), wl_gib(host), wl_gib(device),
                   wl_gib(device_cap), wl_gib(ram));
}
