/*
 * written.h: the tensor map's written-granule filter; private to src/graph.
 *
 * One bit per 1 KiB granule of device address, modulo 1 GiB, set for every
 * granule a write record has covered since the last reset: a read whose
 * granules hold no bit can have no writer, and skips the write tree's
 * search (at 10^6 scattered reads, a chain of misses: ~85 ns a read on
 * frag).  Aliasing makes false "written" (a search), never false
 * "unwritten".  A write too wide to mark turns the filter off until the
 * reset.
 *
 * Cost: mark and check are O(granules), at most GRAPH_WRITTEN_SPAN; start
 * is O(write records); reset is O(words set).  Memory: 192 KiB, taken when
 * it starts.
 */
#ifndef HG_GRAPH_WRITTEN_H
#define HG_GRAPH_WRITTEN_H

#include "graph/range_tree.h"

/* Granules a write marks, or a read checks, at most. */
#define GRAPH_WRITTEN_SPAN 64

typedef struct graph_written {
    uint64_t *bits;  /* NULL until the first start */
    uint32_t *words; /* the words of bits set, each once */
    uint32_t nwords;
    bool on, off;   /* marking since start; turned off (wide write, no memory) */
    uint64_t skips; /* searches the filter saved (graph_written_none true) */
} graph_written;

/* True until it starts or goes off. */
static inline bool graph_written_waiting(const graph_written *w)
{
    return !w->on && !w->off;
}

/* Starts it, marking every record of tree `writes`.  Without memory it
 * goes off; nothing else changes. */
void graph_written_start(graph_written *w, graph_tree_pool *p, const graph_tree *writes);

/* A write of [lo, hi) (non-empty): its granules are marked, or the filter
 * goes off when they are too many.  Nothing unless started. */
void graph_written_mark(graph_written *w, hg_devaddr lo, hg_devaddr hi);

/* True when no write record can overlap [lo, hi) (non-empty); counts it
 * in skips.  False unless started. */
bool graph_written_none(graph_written *w, hg_devaddr lo, hg_devaddr hi);

/* Forgets every mark, waiting to start again; keeps the memory. */
void graph_written_reset(graph_written *w);
void graph_written_free(graph_written *w);

#endif
