/*
 * granules.h: the tensor map's narrow read records, kept by the 1 KiB
 * granule they lie in; private to src/graph (granules.c states the layout
 * and the costs).
 *
 * A record here is what a read tree entry is (graph_tree_entry: [lo, hi),
 * a task, a reader list), for a range inside one granule.  Records may
 * overlap.  They are named by index; an index stays valid until a cut or a
 * drain removes its record.
 */
#ifndef HG_GRAPH_GRANULES_H
#define HG_GRAPH_GRANULES_H

#include "graph/range_tree.h"

/* A granule: 1 << GRAPH_GRAN_SHIFT device bytes. */
#define GRAPH_GRAN_SHIFT 10

/* The most granules a cut may span (graph_granules_cut). */
#define GRAPH_GRAN_SPAN 8

typedef struct graph_gran_slot graph_gran_slot;   /* granules.c */
typedef struct graph_gran_entry graph_gran_entry; /* granules.c */

typedef struct graph_granules {
    graph_gran_slot *slot; /* open addressing by granule; NULL until the first add */
    uint32_t cap, bits;    /* slots (a power of two), log2 of it */
    uint32_t *used;        /* the slots holding a granule, in the order they took it */
    uint32_t nused, cap_used;
    graph_gran_entry *ent;  /* the records; freed ones linked */
    uint32_t nent, cap_ent; /* entries ever handed out / room for */
    uint32_t free;          /* freed entries, linked */
    uint32_t live;          /* records now */
    uint64_t steps;         /* slots probed and records visited */
} graph_granules;

/* True when [lo, hi) (non-empty) lies in one granule. */
static inline bool graph_gran_narrow(hg_devaddr lo, hg_devaddr hi)
{
    return lo >> GRAPH_GRAN_SHIFT == (hi - 1) >> GRAPH_GRAN_SHIFT;
}

void graph_granules_init(graph_granules *g);
void graph_granules_free(graph_granules *g);
/* Forgets every record and granule, keeping the memory: O(granules held). */
void graph_granules_reset(graph_granules *g);

/* Adds record e (narrow); *at names it.  HG_ENOMEM, HG_ELIMIT: nothing
 * changed. */
int graph_granules_add(graph_granules *g, const graph_tree_entry *e, uint32_t *at);

/* The record `at` names, to read or to change its reader list. */
graph_tree_entry *graph_granules_entry(graph_granules *g, uint32_t at);

/* Calls fn on every record overlapping [lo, hi), which spans at most
 * GRAPH_GRAN_SPAN granules; stops at the first non-zero return, which it
 * returns.  Records come granule by granule, newest first in each. */
int graph_granules_visit(graph_granules *g, hg_devaddr lo, hg_devaddr hi, graph_tree_visit_fn fn,
                         void *ctx);

/* What a cut tells its caller, record by record (ctx is each's first arg). */
typedef struct graph_gran_cut_fns {
    void (*gone)(void *ctx, const graph_tree_entry *e); /* inside the cut: removed */
    /* across both ends: it keeps its part before lo, and a new record
     * [hi, e->hi) of e's task gets the reader list *more the callee makes;
     * non-zero (the callee's error) stops the cut. */
    int (*split)(void *ctx, const graph_tree_entry *e, uint32_t *more);
    /* in a granule of the cut but apart from it: the callee takes it (to
     * keep elsewhere), then it is removed here; non-zero stops the cut and
     * it stays.  So a record is passed over at most once. */
    int (*passed)(void *ctx, const graph_tree_entry *e);
    void *ctx;
} graph_gran_cut_fns;

/* Removes bytes [lo, hi) (at most GRAPH_GRAN_SPAN granules) from the
 * records of its granules, as graph_tree_cut does from a tree's: a record
 * inside goes, one across an end is trimmed, one across both is split.
 * Sets *changed when any record changed or went.  Returns 0 or the first
 * callee's error; the records are consistent either way. */
int graph_granules_cut(graph_granules *g, hg_devaddr lo, hg_devaddr hi,
                       const graph_gran_cut_fns *fns, bool *changed);

/* Hands every record to fn (which takes it), removing each that it took;
 * once all are gone, forgets the granules too.  Stops at fn's first error,
 * which it returns, with the records not taken still here. */
int graph_granules_drain(graph_granules *g, graph_tree_visit_fn fn, void *ctx);

#endif
