/*
 * tensor_map.h: the tensor map, graph.c's dependency inference; private to
 * src/graph (tensor_map.c states the rule, the records and the costs).
 *
 * graph_add_task calls, per task: graph_map_reserve (room for the task; it
 * fails without changing anything), graph_map_deps (the task's distinct
 * dependencies; it may move records between the map's structures, but
 * changes none), then graph_map_update (the map takes
 * the task's accesses; a failure there breaks the map until graph_reset).
 * The map lives in graph.scratch; its trees are range_tree.c.
 */
#ifndef HG_GRAPH_TENSOR_MAP_H
#define HG_GRAPH_TENSOR_MAP_H

#include "graph/graph.h"

/* Grows the array at *pp (of elem-sized items) to hold `need` items, by
 * doubling; keeps it non-NULL.  HG_ELIMIT when `need` reaches UINT32_MAX
 * (every index fits a uint32_t and differs from UINT32_MAX), HG_ENOMEM. */
int graph_grow(void *pp, uint32_t *cap, uint64_t need, size_t elem);

/* Creates the map on first use and makes room for task g->ntasks.  Does no
 * work when nothing has to grow.  HG_ENOMEM (also once the map is broken). */
int graph_map_reserve(graph *g, hg_err *e);

/* The distinct tasks task g->ntasks must follow: `deps` and what its args'
 * accesses require.  *out stays valid until the next call.  HG_ENOMEM. */
int graph_map_deps(graph *g, const graph_targ *args, uint32_t nargs, const hg_task_id *deps,
                   uint32_t ndeps, const uint32_t **out, uint32_t *nout);

/* Records task `task`'s accesses.  HG_ENOMEM, after which the map is broken. */
int graph_map_update(graph *g, const graph_targ *args, uint32_t nargs, uint32_t task);

/* Counts beyond graph_map_counts (graph.h), since graph_reset: for tests
 * and benchmarks. */
typedef struct graph_map_more {
    uint64_t deferred;        /* read records made pending, then inserted in batches */
    uint64_t batches;         /* batches whose tree paths were asked for at once */
    uint64_t prefetched;      /* nodes those batches visited (not in steps) */
    uint64_t dep_marks;       /* dependencies told apart by per-task marks, not a scan */
    uint64_t unwritten_reads; /* reads whose granules no write covered: no search */
    uint64_t granule_reads;   /* read records made in their granule's list, not the tree */
    uint64_t granule_moved;   /* of them, moved to the read tree since (passed, drained) */
    uint32_t granule_slots;   /* the granule table's slots (its memory: 16 bytes each) */
    uint32_t granule_held;    /* granules it holds now */
    uint32_t granule_entries; /* record entries handed out since the last drain (32 bytes each) */
} graph_map_more;

void graph_map_more_stats(const graph *g, graph_map_more *out);

/* Empties the map, keeping its memory; frees it. */
void graph_map_reset(graph *g);
void graph_map_free(graph *g);

#endif
