/*
 * hostreg.h: the process-wide registry of live host buffers' memory.
 *
 * Two live host buffers never overlap: freshness lives on the registration
 * (id, generation), so one memory registered twice would let a write declared
 * through one buffer leave the other's resident copy "fresh".  Every host
 * buffer with at least one byte registers [data, data + size) here when it
 * is created or wraps memory, and leaves when it is destroyed; a zero-byte
 * buffer overlaps nothing and is never stored.
 *
 * Structure: an AVL tree of disjoint intervals ordered by start, under one
 * mutex (buffers are created and destroyed from any thread).  Because the
 * intervals are disjoint, the one that could overlap [lo, hi) is the last
 * starting below hi: one descent.  Cost, with n live buffers: add, remove
 * and the overlap check each visit O(log n) nodes (at most about
 * 1.44 log2(n + 2) per descent); memory O(n).  hostreg_visits() counts the
 * visits so a test can hold that bound.
 */
#ifndef HG_TENSOR_HOSTREG_H
#define HG_TENSOR_HOSTREG_H

#include <stddef.h>
#include <stdint.h>

/* One registration: host buffer `id` holds [lo, hi). */
typedef struct hostreg_entry {
    uint64_t id;
    uintptr_t lo, hi;
} hostreg_entry;

/* The interval [data, data + bytes), its end saturated at the top of the
 * address space (a size reaching past it is taken to reach its end). */
hostreg_entry hostreg_span(const void *data, size_t bytes, uint64_t id);

/* Registers `e`.  0 (also for an empty one, which is not stored);
 * HG_EINVAL when it overlaps a live registration (*clash is that one);
 * HG_ENOMEM when the node cannot be allocated. */
int hostreg_add(hostreg_entry e, hostreg_entry *clash);

/* Removes e, the registration of buffer e.id starting at e.lo (no-op when
 * empty or absent). */
void hostreg_remove(hostreg_entry e);

/* Live registrations, and nodes visited by every add and remove so far. */
size_t hostreg_live(void);
uint64_t hostreg_visits(void);

#endif
