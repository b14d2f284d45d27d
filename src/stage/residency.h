/*
 * residency.h: the runner's residency cache.  Device copies of host-buffer
 * extents that outlive a run, each with the generation it was published at.
 *
 * Freshness contract (DESIGN.md): a copy is reused only when it was
 * published for this host buffer id and byte extent at the generation the
 * buffer has at bind of this run.  An address + size is never freshness.  A
 * copy is invalidated (current = false) before anything writes its device
 * bytes (an upload, or a run that writes it as INOUT) and published only
 * after the whole run succeeded.  Host buffer ids are never reused, so the
 * record of a destroyed buffer can never match a later one; it stays until
 * evicted or the runner closes.
 *
 * Cost: find is O(1) expected (open addressing on (id, lo, hi)); adding or
 * removing a copy rebuilds the index, O(copies), which happens only when a
 * device allocation is made or freed anyway.  Eviction picks the least
 * recently used copy not used by the current run: O(copies) per eviction.
 */
#ifndef HG_STAGE_RESIDENCY_H
#define HG_STAGE_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostgraph.h"

typedef struct resident_copy {
    uint64_t buf_id;       /* the host buffer's id */
    size_t lo, hi;         /* its byte extent in that buffer */
    hg_devaddr addr;       /* the device copy: its own allocation */
    uint64_t span;         /* device bytes it holds (rounded to HG_DEVICE_ALIGN) */
    uint64_t generation;   /* published at; meaningful only while current */
    bool current;          /* published, and nothing wrote the device bytes since */
    bool shadowed;         /* verify mode: `shadow` holds the host bytes at publish */
    unsigned char *shadow; /* verify mode's host copy of the extent, or NULL */
    uint64_t last_run;     /* LRU clock: the last run that used it */
    uint64_t bound_run;    /* the last run that bound an arg to it (one upload per run) */
    bool live;             /* false: a free slot (indices of live copies never move) */
} resident_copy;

typedef struct residency_cache {
    resident_copy *copies; /* slots; a copy keeps its index while it lives */
    uint32_t nslots, cap;
    uint32_t nlive;
    uint32_t *index; /* open addressing: copy index + 1, 0 empty */
    uint32_t index_cap;
    uint64_t held;   /* device bytes the copies hold */
    uint64_t budget; /* 0: the device's capacity */
} residency_cache;

#define RESIDENCY_NONE UINT32_MAX

void residency_init(residency_cache *c);
/* Frees every copy's device memory and forgets every record. */
void residency_clear(residency_cache *c, hg_device *dev, hg_device_counters *tally);

/* The copy of (id, lo, hi), or RESIDENCY_NONE. */
uint32_t residency_find(const residency_cache *c, uint64_t id, size_t lo, size_t hi);

/* A new, not current copy of (id, lo, hi) of `bytes` device bytes, used by
 * run `run`.  Makes room under the budget by evicting least recently used
 * copies not used by `run` (counted in *evictions), and again when the
 * device itself is full.  HG_EDEVMEM when it still does not fit (the caller
 * stages the arg for this run instead); HG_ENOMEM for host memory. */
int residency_add(residency_cache *c, hg_device *dev, hg_device_counters *tally, uint64_t id,
                  size_t lo, size_t hi, uint64_t run, uint32_t *out, uint64_t *evictions);

/* Frees the least recently used copy not used by `run`.  False if none. */
bool residency_evict_one(residency_cache *c, hg_device *dev, hg_device_counters *tally,
                         uint64_t run);

#endif
