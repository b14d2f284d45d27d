/*
 * residency.h: the runner's residency cache.  Device copies of host-buffer
 * extents that outlive a run, each with the generation it was published at.
 *
 * Freshness contract (docs/ARCHITECTURE.md, "Residency"): a copy is reused only when it was
 * published for this host buffer id and byte extent at the generation the
 * buffer has at bind of this run.  An address + size is never freshness.  A
 * copy is invalidated (current = false) before anything writes its device
 * bytes (an upload, or a run that writes it as INOUT) and published only
 * after the whole run succeeded.
 *
 * Destroyed buffers: each copy watches its host buffer (tensor.h,
 * hostbuf_watch).  hg_hostbuf_destroy, on whatever thread, frees the
 * copy's device memory at once (the device is thread-safe) and hands the
 * record to the cache's orphan list; the runner forgets the record at its
 * next bind, query or close (residency_drain).  So dead copies never fill
 * the device, and the record count stays bounded by the live buffers.
 *
 * Cost, stated and tested by counting (`touched`): find is O(1) expected
 * (open addressing on (id, lo, hi), deletion by backward shift); add and
 * remove are O(1) expected (a free list of slots, the index grows by
 * doubling); the LRU order is a list (touch O(1)); eviction frees what a
 * request needs in one pass from the least recently used end, O(copies
 * evicted); draining orphans is O(orphans).
 */
#ifndef HG_STAGE_RESIDENCY_H
#define HG_STAGE_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostgraph.h"

struct copy_link;

typedef struct resident_copy {
    uint64_t buf_id;        /* the host buffer's id */
    size_t lo, hi;          /* its byte extent in that buffer */
    hg_devaddr addr;        /* the device copy: its own allocation */
    uint64_t span;          /* device bytes it holds (rounded to HG_DEVICE_ALIGN) */
    uint64_t generation;    /* published at; meaningful only while current */
    bool current;           /* published, and nothing wrote the device bytes since */
    bool shadowed;          /* verify mode: `shadow` holds the host bytes at publish */
    unsigned char *shadow;  /* verify mode's host copy of the extent, or NULL */
    uint64_t *block_hash;   /* verify mode: XXH3 of each block of the shadow (verify.c) */
    uint64_t last_run;      /* LRU clock: the last run that used it */
    uint64_t bound_run;     /* the last run that bound an arg to it (one upload per run) */
    bool live;              /* false: a free slot (indices of live copies never move) */
    uint32_t older, newer;  /* LRU list (RESIDENCY_NONE ends it); free list: newer */
    struct copy_link *link; /* its watch on the host buffer */
} resident_copy;

typedef struct residency_cache {
    resident_copy *copies; /* slots; a copy keeps its index while it lives */
    uint32_t nslots, cap;
    uint32_t nlive;
    uint32_t free_slot; /* free list head (RESIDENCY_NONE: none) */
    uint32_t lru, mru;  /* least and most recently used live copies */
    uint32_t *index;    /* open addressing: copy index + 1, 0 empty */
    uint32_t index_cap;
    uint64_t held;             /* device bytes the copies hold */
    uint64_t budget;           /* 0: the device's capacity */
    uint64_t touched;          /* records and index slots visited: the cost, counted */
    hg_device *dev;            /* where the copies live (set at the first add) */
    struct copy_link *orphans; /* copies of destroyed buffers, under hostbuf_watch_lock */
} residency_cache;

#define RESIDENCY_NONE UINT32_MAX

void residency_init(residency_cache *c);
/* Frees every copy's device memory and forgets every record. */
void residency_clear(residency_cache *c, hg_device *dev, hg_device_counters *tally);

/* Forgets the records of copies whose host buffer was destroyed (their
 * device memory is already free); their bytes leave *tally's live bytes. */
void residency_drain(residency_cache *c, hg_device_counters *tally);

/* The copy of (id, lo, hi), or RESIDENCY_NONE. */
uint32_t residency_find(residency_cache *c, uint64_t id, size_t lo, size_t hi);

/* Marks copy i used by `run`: the most recently used. */
void residency_touch(residency_cache *c, uint32_t i, uint64_t run);

/* A new, not current copy of host buffer hb's (id, lo, hi), used by run
 * `run`.  Makes room under the budget by evicting least recently used
 * copies not used by `run` (counted in *evictions), and again when the
 * device itself is full, each time in one pass.  HG_EDEVMEM when it still
 * does not fit (the caller stages the arg for this run instead); HG_ENOMEM
 * for host memory. */
int residency_add(residency_cache *c, hg_device *dev, hg_device_counters *tally, hg_hostbuf *hb,
                  size_t lo, size_t hi, uint64_t run, uint32_t *out, uint64_t *evictions);

/* Frees least recently used copies not used by `run` until `bytes` device
 * bytes are freed or none is left; returns how many it freed. */
uint64_t residency_evict(residency_cache *c, hg_device *dev, hg_device_counters *tally,
                         uint64_t run, uint64_t bytes);

/* XXH3 of host bytes: verify mode's block fingerprint. */
uint64_t residency_hash(const void *bytes, size_t len);

#endif
