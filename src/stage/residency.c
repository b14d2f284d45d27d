/*
 * residency.c: the residency cache's records, index, budget and eviction
 * (contract and costs in residency.h).  It knows nothing of runs' args: the
 * bind plan (bind.c) decides which args are resident, asks here for their
 * copies, and publishes them after a run succeeded.
 */
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* header-only: the library gains no link dependency */
#include <xxhash.h>

#include "device/device.h"
#include "stage/residency.h"

void residency_init(residency_cache *c)
{
    memset(c, 0, sizeof *c);
}

static uint64_t key_hash(uint64_t id, size_t lo, size_t hi)
{
    uint64_t k[3] = {id, (uint64_t)lo, (uint64_t)hi};
    return XXH3_64bits(k, sizeof k);
}

/* Rebuilds the index at twice (or more) the number of copies. */
static int index_rebuild(residency_cache *c)
{
    uint32_t cap = 16;
    while (cap < 2 * c->nslots + 2)
        cap *= 2;
    if (cap != c->index_cap) {
        uint32_t *grown = realloc(c->index, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return HG_ENOMEM;
        c->index = grown;
        c->index_cap = cap;
    }
    memset(c->index, 0, (size_t)c->index_cap * sizeof *c->index);
    for (uint32_t i = 0; i < c->nslots; i++) {
        const resident_copy *r = &c->copies[i];
        if (!r->live)
            continue;
        uint32_t slot = (uint32_t)key_hash(r->buf_id, r->lo, r->hi) & (c->index_cap - 1);
        while (c->index[slot] != 0)
            slot = (slot + 1) & (c->index_cap - 1);
        c->index[slot] = i + 1;
    }
    return 0;
}

uint32_t residency_find(const residency_cache *c, uint64_t id, size_t lo, size_t hi)
{
    if (c->index_cap == 0)
        return RESIDENCY_NONE;
    uint32_t slot = (uint32_t)key_hash(id, lo, hi) & (c->index_cap - 1);
    for (; c->index[slot] != 0; slot = (slot + 1) & (c->index_cap - 1)) {
        const resident_copy *r = &c->copies[c->index[slot] - 1];
        if (r->buf_id == id && r->lo == lo && r->hi == hi)
            return c->index[slot] - 1;
    }
    return RESIDENCY_NONE;
}

/* Frees copy i's memory and its slot; other copies keep their indices. */
static void copy_remove(residency_cache *c, hg_device *dev, hg_device_counters *tally, uint32_t i)
{
    device_free(dev, c->copies[i].addr, tally);
    free(c->copies[i].shadow);
    c->copies[i].shadow = NULL;
    c->held -= c->copies[i].span;
    c->copies[i].live = false;
    c->nlive--;
    /* Same slot count: the index keeps its capacity, so this cannot fail. */
    (void)index_rebuild(c);
}

bool residency_evict_one(residency_cache *c, hg_device *dev, hg_device_counters *tally,
                         uint64_t run)
{
    uint32_t victim = RESIDENCY_NONE;
    for (uint32_t i = 0; i < c->nslots; i++) {
        if (!c->copies[i].live || c->copies[i].last_run == run)
            continue; /* free, or the current run uses it */
        if (victim == RESIDENCY_NONE || c->copies[i].last_run < c->copies[victim].last_run)
            victim = i;
    }
    if (victim == RESIDENCY_NONE)
        return false;
    copy_remove(c, dev, tally, victim);
    return true;
}

void residency_clear(residency_cache *c, hg_device *dev, hg_device_counters *tally)
{
    for (uint32_t i = 0; i < c->nslots; i++)
        if (c->copies[i].live) {
            device_free(dev, c->copies[i].addr, tally);
            free(c->copies[i].shadow);
        }
    free(c->copies);
    free(c->index);
    residency_init(c);
}

static uint64_t span_of(size_t bytes)
{
    return ((uint64_t)bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
}

int residency_add(residency_cache *c, hg_device *dev, hg_device_counters *tally, uint64_t id,
                  size_t lo, size_t hi, uint64_t run, uint32_t *out, uint64_t *evictions)
{
    const size_t bytes = hi - lo;
    const uint64_t span = span_of(bytes);
    const uint64_t budget = c->budget ? c->budget : hg_device_capacity(dev);
    if (span > budget)
        return HG_EDEVMEM;
    while (c->held + span > budget) {
        if (!residency_evict_one(c, dev, tally, run))
            return HG_EDEVMEM;
        (*evictions)++;
    }
    uint32_t slot = 0;
    while (slot < c->nslots && c->copies[slot].live)
        slot++;
    if (slot == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 16;
        resident_copy *grown = realloc(c->copies, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return HG_ENOMEM;
        c->copies = grown;
        c->cap = cap;
    }
    hg_devaddr addr;
    int rc;
    while ((rc = device_malloc(dev, bytes, &addr, tally)) == HG_EDEVMEM &&
           residency_evict_one(c, dev, tally, run))
        (*evictions)++;
    if (rc != 0)
        return rc;
    const uint32_t old_slots = c->nslots;
    c->copies[slot] = (resident_copy){.buf_id = id,
                                      .lo = lo,
                                      .hi = hi,
                                      .addr = addr,
                                      .span = span,
                                      .last_run = run,
                                      .live = true};
    if (slot == c->nslots)
        c->nslots++;
    if (index_rebuild(c) != 0) {
        c->copies[slot].live = false;
        c->nslots = old_slots;
        device_free(dev, addr, tally);
        return HG_ENOMEM;
    }
    c->nlive++;
    c->held += span;
    *out = slot;
    return 0;
}
