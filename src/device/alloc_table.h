/*
 * alloc_table.h: a backend's table of live allocations over its own address
 * range, shared by sim.c and opencl.c (both hand out first-fit ranges of an
 * address window and look addresses up in it).
 *
 * Invariants: entries are sorted by addr; their spans [addr, addr+span) are
 * disjoint, HG_DEVICE_ALIGN-aligned and inside [base, base+bytes).  An entry
 * may be `pending`: reserved by a backend that has not finished making its
 * memory (opencl's clCreateBuffer runs with no lock held); lookups skip it,
 * since its address was never returned to anyone.
 *
 * Locking is the caller's (alloc_table_find takes the read lock it is
 * given): the table has none.  Backends read it under
 * their read lock and change it under their write lock (backend.h).
 *
 * Cost: lookups are a binary search, O(log n) in live allocations; insert
 * and remove are O(n) (the first-fit scan and the sorted memmove), fine for
 * the hundreds of allocations a runner holds and the few it makes after its
 * first round.
 *
 * Address windows.  Each backend also keeps one process-wide table of the
 * windows of its address range that open devices hold (alloc_windows: the
 * sim's regions, OpenCL's windows), so no two open devices ever hand out
 * the same address.  Windows are taken round robin, so a closed device's
 * window comes back only after every other one was taken: an address kept
 * from a closed device is not soon valid on a new one.  Take is O(1) while
 * the next window in turn is free and O(ALLOC_WINDOWS) at worst (a scan of
 * 4096 bits); give is O(1).  When every window is held, take says so and
 * the open fails (HG_ENOMEM) until a device closes.
 */
#ifndef HG_DEVICE_ALLOC_TABLE_H
#define HG_DEVICE_ALLOC_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostgraph.h"

typedef struct alloc_entry {
    hg_devaddr addr;
    size_t size;   /* bytes the caller asked for */
    uint64_t span; /* address bytes it takes: size rounded up (plus any redzone) */
    bool user;     /* hg_devbuf_malloc's, not the runtime's */
    bool pending;  /* reserved, memory not made yet: invisible to lookups */
    void *mem;     /* the backend's own (opencl: its cl_mem pieces); NULL on the sim */
} alloc_entry;

typedef struct alloc_table {
    alloc_entry *entries;
    size_t n, cap;
    hg_devaddr base; /* the addresses handed out: [base, base + bytes) */
    uint64_t bytes;
} alloc_table;

void alloc_table_init(alloc_table *t, hg_devaddr base, uint64_t bytes);
/* Frees the entries array (not what their `mem` points to). */
void alloc_table_free(alloc_table *t);

/* `bytes` rounded up to HG_DEVICE_ALIGN. */
uint64_t alloc_table_align(uint64_t bytes);

/* The live (not pending) entry holding [a, a+bytes) (bytes 0: a may be one
 * past its end), or NULL. */
const alloc_entry *alloc_table_lookup(const alloc_table *t, hg_devaddr a, size_t bytes);
/* The live entry whose [addr, addr+size) contains a, or NULL. */
const alloc_entry *alloc_table_containing(const alloc_table *t, hg_devaddr a);

/* The backend op find_alloc (backend.h) over the table: the live entry
 * containing a, its base, size and user flag, under `lock` taken for
 * reading here; HG_ENOTFOUND if none. */
int alloc_table_find(const alloc_table *t, pthread_rwlock_t *lock, hg_devaddr a, hg_devaddr *base,
                     size_t *size, bool *user);

/* Reserves the lowest free range of `span` bytes for an entry (its addr is
 * filled in) and returns the stored entry, or NULL when no range is free
 * or the table cannot grow. */
alloc_entry *alloc_table_insert(alloc_table *t, const alloc_entry *e);
/* The entry starting exactly at a, pending or not, or NULL. */
alloc_entry *alloc_table_at(alloc_table *t, hg_devaddr a);
/* Removes the entry starting exactly at a into *out; false if none. */
bool alloc_table_remove(alloc_table *t, hg_devaddr a, alloc_entry *out);

/* Windows per backend: open devices at once, per backend and process. */
#define ALLOC_WINDOWS 4096u

typedef struct alloc_windows {
    pthread_mutex_t lock;
    uint64_t held[ALLOC_WINDOWS / 64]; /* bit w: window w is an open device's */
    uint32_t next;                     /* the next one in turn */
} alloc_windows;

#define ALLOC_WINDOWS_INIT                                                                         \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, {0}, 0                                                          \
    }

/* Takes the next free window in turn into *window; false when all
 * ALLOC_WINDOWS are held. */
bool alloc_window_take(alloc_windows *w, uint32_t *window);
/* Gives back a window alloc_window_take returned. */
void alloc_window_give(alloc_windows *w, uint32_t window);

#endif
