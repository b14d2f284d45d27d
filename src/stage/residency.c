/*
 * residency.c: the residency cache's records, index, LRU order, budget,
 * eviction, and the links that free a destroyed buffer's copies (contract
 * and costs in residency.h).  It knows nothing of runs' args: the bind plan
 * (bind.c) decides which args are resident, asks here for their copies,
 * and publishes them after a run succeeded.
 */
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* header-only: the library gains no link dependency */
#include <xxhash.h>

#include "device/device.h"
#include "stage/residency.h"
#include "tensor/tensor.h"

/* A copy's watch on its host buffer.  `orphan` and the orphan list change
 * only under hostbuf_watch_lock; whoever sets `orphan` (the destroy) or
 * takes the watch off the buffer first (eviction, close) frees the device
 * memory, never both. */
typedef struct copy_link {
    hostbuf_watch watch;    /* first: the callback gets this pointer */
    residency_cache *cache; /* only its orphan list is touched from other threads */
    hg_device *dev;         /* the copy's device (the cache's own fields are its runner's) */
    hg_hostbuf *hb;         /* while not an orphan */
    hg_devaddr addr;
    uint32_t copy; /* its record in the cache */
    bool orphan;
    struct copy_link *next_orphan;
} copy_link;

void residency_init(residency_cache *c)
{
    memset(c, 0, sizeof *c);
    c->free_slot = c->lru = c->mru = RESIDENCY_NONE;
}

uint64_t residency_hash(const void *bytes, size_t len)
{
    return XXH3_64bits(bytes, len);
}

static uint32_t key_slot(const residency_cache *c, uint64_t id, size_t lo, size_t hi)
{
    uint64_t k[3] = {id, (uint64_t)lo, (uint64_t)hi};
    return (uint32_t)XXH3_64bits(k, sizeof k) & (c->index_cap - 1);
}

static void index_put(residency_cache *c, uint32_t i)
{
    const resident_copy *r = &c->copies[i];
    uint32_t slot = key_slot(c, r->buf_id, r->lo, r->hi);
    while (c->index[slot] != 0) {
        c->touched++;
        slot = (slot + 1) & (c->index_cap - 1);
    }
    c->index[slot] = i + 1;
}

/* Makes the index hold at least twice the live copies; O(copies) when it
 * doubles, which amortises to O(1) per add. */
static int index_reserve(residency_cache *c, uint32_t live)
{
    if (c->index_cap >= 2 * (uint64_t)live + 2)
        return 0;
    uint32_t cap = c->index_cap ? c->index_cap : 16;
    while (cap < 2 * (uint64_t)live + 2)
        cap *= 2;
    uint32_t *index = calloc(cap, sizeof *index);
    if (index == NULL)
        return HG_ENOMEM;
    free(c->index);
    c->index = index;
    c->index_cap = cap;
    for (uint32_t i = 0; i < c->nslots; i++)
        if (c->copies[i].live)
            index_put(c, i);
    return 0;
}

uint32_t residency_find(residency_cache *c, uint64_t id, size_t lo, size_t hi)
{
    if (c->index_cap == 0)
        return RESIDENCY_NONE;
    for (uint32_t slot = key_slot(c, id, lo, hi); c->index[slot] != 0;
         slot = (slot + 1) & (c->index_cap - 1)) {
        c->touched++;
        const resident_copy *r = &c->copies[c->index[slot] - 1];
        if (r->buf_id == id && r->lo == lo && r->hi == hi)
            return c->index[slot] - 1;
    }
    return RESIDENCY_NONE;
}

/* Linear probing's deletion: empty the slot, then shift back every entry of
 * the cluster after it that would no longer be found. */
static void index_delete(residency_cache *c, uint32_t i)
{
    const resident_copy *r = &c->copies[i];
    const uint32_t mask = c->index_cap - 1;
    uint32_t hole = key_slot(c, r->buf_id, r->lo, r->hi);
    while (c->index[hole] != i + 1) {
        c->touched++;
        hole = (hole + 1) & mask;
    }
    c->index[hole] = 0;
    for (uint32_t slot = (hole + 1) & mask; c->index[slot] != 0; slot = (slot + 1) & mask) {
        c->touched++;
        const resident_copy *s = &c->copies[c->index[slot] - 1];
        uint32_t home = key_slot(c, s->buf_id, s->lo, s->hi);
        /* It may move into the hole unless its home lies in (hole, slot]. */
        bool stays = hole < slot ? (home > hole && home <= slot) : (home > hole || home <= slot);
        if (!stays) {
            c->index[hole] = c->index[slot];
            c->index[slot] = 0;
            hole = slot;
        }
    }
}

static void lru_unlink(residency_cache *c, uint32_t i)
{
    resident_copy *r = &c->copies[i];
    if (r->older != RESIDENCY_NONE)
        c->copies[r->older].newer = r->newer;
    else
        c->lru = r->newer;
    if (r->newer != RESIDENCY_NONE)
        c->copies[r->newer].older = r->older;
    else
        c->mru = r->older;
}

static void lru_push(residency_cache *c, uint32_t i)
{
    resident_copy *r = &c->copies[i];
    r->older = c->mru;
    r->newer = RESIDENCY_NONE;
    if (c->mru != RESIDENCY_NONE)
        c->copies[c->mru].newer = i;
    else
        c->lru = i;
    c->mru = i;
}

void residency_touch(residency_cache *c, uint32_t i, uint64_t run)
{
    c->touched++;
    c->copies[i].last_run = run;
    if (c->mru != i) {
        lru_unlink(c, i);
        lru_push(c, i);
    }
}

/* Forgets record i (its device memory already freed or being freed by the
 * caller); its slot goes to the free list. */
static void copy_forget(residency_cache *c, uint32_t i)
{
    resident_copy *r = &c->copies[i];
    c->touched++;
    index_delete(c, i);
    lru_unlink(c, i);
    free(r->shadow);
    free(r->block_hash);
    free(r->link);
    c->held -= r->span;
    c->nlive--;
    *r = (resident_copy){.newer = c->free_slot, .older = RESIDENCY_NONE};
    c->free_slot = i;
}

/* The watch's callback, at hg_hostbuf_destroy under the watch lock: the
 * device memory goes now, the record at the runner's next drain. */
static void link_destroyed(hostbuf_watch *w)
{
    copy_link *l = (copy_link *)w;
    device_free(l->dev, l->addr, NULL);
    l->orphan = true;
    l->hb = NULL;
    l->next_orphan = l->cache->orphans;
    l->cache->orphans = l;
}

void residency_drain(residency_cache *c, hg_device_counters *tally)
{
    if (c->dev == NULL)
        return;
    hostbuf_watch_lock();
    copy_link *l = c->orphans;
    c->orphans = NULL;
    hostbuf_watch_unlock();
    while (l != NULL) {
        copy_link *next = l->next_orphan;
        if (tally != NULL) { /* freed for us on another thread: our count too */
            tally->frees++;
            tally->live_bytes -= c->copies[l->copy].span;
        }
        copy_forget(c, l->copy);
        l = next;
    }
}

/* Frees copy i: its device memory, unless its buffer's destroy already did
 * (then the record waits on the orphan list for the next drain). */
static void copy_remove(residency_cache *c, hg_device *dev, hg_device_counters *tally, uint32_t i)
{
    copy_link *l = c->copies[i].link;
    hostbuf_watch_lock();
    bool orphan = l->orphan;
    if (!orphan)
        hostbuf_watch_remove(l->hb, &l->watch);
    hostbuf_watch_unlock();
    if (orphan)
        return;
    device_free(dev, c->copies[i].addr, tally);
    copy_forget(c, i);
}

uint64_t residency_evict(residency_cache *c, hg_device *dev, hg_device_counters *tally,
                         uint64_t run, uint64_t bytes)
{
    residency_drain(c, tally);
    uint64_t freed = 0, n = 0;
    uint32_t i = c->lru;
    while (freed < bytes && i != RESIDENCY_NONE && (run == 0 || c->copies[i].last_run != run)) {
        uint32_t newer = c->copies[i].newer;
        freed += c->copies[i].span;
        copy_remove(c, dev, tally, i);
        n++;
        i = newer;
    }
    return n;
}

void residency_clear(residency_cache *c, hg_device *dev, hg_device_counters *tally)
{
    residency_drain(c, tally);
    for (uint32_t i = 0; i < c->nslots; i++)
        if (c->copies[i].live)
            copy_remove(c, dev, tally, i);
    residency_drain(c, tally); /* destroyed meanwhile */
    free(c->copies);
    free(c->index);
    residency_init(c);
}

static uint64_t span_of(size_t bytes)
{
    return ((uint64_t)bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
}

/* A free slot for a new record (index reserved for one more).  HG_ENOMEM. */
static int slot_take(residency_cache *c, uint32_t *out)
{
    if (index_reserve(c, c->nlive + 1) != 0)
        return HG_ENOMEM;
    if (c->free_slot != RESIDENCY_NONE) {
        *out = c->free_slot;
        c->free_slot = c->copies[*out].newer;
        return 0;
    }
    if (c->nslots == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 16;
        resident_copy *grown = realloc(c->copies, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return HG_ENOMEM;
        c->copies = grown;
        c->cap = cap;
    }
    *out = c->nslots++;
    return 0;
}

/* Device memory for a copy of `bytes`, evicting in one pass when the device
 * is short (and once more, everything evictable, if that was fragmented). */
static int copy_malloc(residency_cache *c, hg_device *dev, hg_device_counters *tally, size_t bytes,
                       uint64_t run, hg_devaddr *addr, uint64_t *evictions)
{
    int rc = device_malloc(dev, bytes, addr, tally);
    for (int pass = 0; rc == HG_EDEVMEM && pass < 2; pass++) {
        uint64_t n = residency_evict(c, dev, tally, run, pass == 0 ? span_of(bytes) : UINT64_MAX);
        if (n == 0)
            break;
        *evictions += n;
        rc = device_malloc(dev, bytes, addr, tally);
    }
    return rc;
}

int residency_add(residency_cache *c, hg_device *dev, hg_device_counters *tally, hg_hostbuf *hb,
                  size_t lo, size_t hi, uint64_t run, uint32_t *out, uint64_t *evictions)
{
    c->dev = dev;
    const uint64_t span = span_of(hi - lo);
    const uint64_t budget = c->budget ? c->budget : hg_device_capacity(dev);
    if (span > budget)
        return HG_EDEVMEM;
    if (c->held + span > budget)
        *evictions += residency_evict(c, dev, tally, run, c->held + span - budget);
    if (c->held + span > budget)
        return HG_EDEVMEM;
    copy_link *l = calloc(1, sizeof *l);
    uint32_t slot;
    if (l == NULL || slot_take(c, &slot) != 0) {
        free(l);
        return HG_ENOMEM;
    }
    hg_devaddr addr;
    int rc = copy_malloc(c, dev, tally, hi - lo, run, &addr, evictions);
    if (rc != 0) { /* the slot goes back to the free list */
        c->copies[slot] = (resident_copy){.newer = c->free_slot};
        c->free_slot = slot;
        free(l);
        return rc;
    }
    *l = (copy_link){.watch = {.destroyed = link_destroyed},
                     .cache = c,
                     .dev = dev,
                     .hb = hb,
                     .addr = addr,
                     .copy = slot};
    c->copies[slot] = (resident_copy){.buf_id = hg_hostbuf_id(hb),
                                      .lo = lo,
                                      .hi = hi,
                                      .addr = addr,
                                      .span = span,
                                      .live = true,
                                      .link = l};
    index_put(c, slot);
    lru_push(c, slot);
    c->copies[slot].last_run = run;
    c->nlive++;
    c->held += span;
    hostbuf_watch_lock();
    hostbuf_watch_add(hb, &l->watch);
    hostbuf_watch_unlock();
    *out = slot;
    return 0;
}
