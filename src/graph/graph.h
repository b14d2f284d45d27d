/*
 * graph.h: task records and dependency inference (the tensor map).
 *
 * The orchestration submits tasks whose args are already resolved to device
 * addresses.  graph_add_task infers dependencies from overlapping device byte
 * extents: a reader depends on the last writers of any overlapping region; a
 * writer depends on earlier readers and writers of it.  Extents of strided
 * views are taken whole, so two interleaved views may get an edge they do not
 * strictly need: conservative, never missing one.  Edges go from an earlier
 * task to a later one only, so the graph is a DAG by construction.
 *
 * Cost: O(log n) expected per task arg (n: the tensor map's live records),
 * plus O(log n) per edge the rule makes, whatever the access pattern; the
 * map holds O(task args + edges) records (tensor_map.c says why).
 *
 * Memory: one graph is reused run after run (graph_reset keeps capacity).
 */
#ifndef HG_GRAPH_GRAPH_H
#define HG_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/intern.h"
#include "hostgraph.h"

/* One resolved task arg. */
typedef struct graph_targ {
    hg_devaddr addr;   /* device address of the view's first element; 0 if empty */
    hg_devaddr lo, hi; /* device byte extent [lo, hi); lo == hi when empty */
    hg_dtype dtype;
    uint32_t ndims;
    size_t shape[HG_MAX_DIMS];
    size_t strides[HG_MAX_DIMS];
    bool read, write; /* IN: read; OUT: write; INOUT: both */
} graph_targ;

/* A dense 1-D u8 arg over device bytes [lo, hi): the graph's unit of
 * dependency, as the graph and exec tests and the map benchmark build it. */
static inline graph_targ graph_targ_bytes(hg_devaddr lo, hg_devaddr hi, bool read, bool write)
{
    graph_targ a = {.addr = lo, .lo = lo, .hi = hi, .dtype = HG_U8, .ndims = 1};
    a.shape[0] = (size_t)(hi - lo);
    a.strides[0] = 1;
    a.read = read;
    a.write = write;
    return a;
}

/* A task keeps what it needs of its kernel record, copied at submit: the
 * record and its name need not outlive graph_add_task. */
typedef struct graph_task {
    hg_kernel_fn fn;
    hg_core_type core;
    const char *name;                 /* interned in graph.names; "(unnamed)" for NULL */
    const void *dev_kernel;           /* a queue device's kernel handle (set at submit) */
    bool host_step;                   /* hg_task_submit_host_step: staged on a queue device */
    uint32_t args_first, nargs;       /* into graph.targs */
    uint32_t scalars_first, nscalars; /* into graph.scalars */
    uint32_t npreds;                  /* distinct predecessors */
    uint32_t succ_first, nsucc;       /* into graph.succ, valid after finalize */
} graph_task;

typedef struct graph_region graph_region; /* the tensor map's records (graph.c) */

typedef struct graph {
    graph_task *tasks;
    uint32_t ntasks, cap_tasks;
    graph_targ *targs;
    uint32_t ntargs, cap_targs;
    uint64_t *scalars;
    uint32_t nscalars, cap_scalars;
    uint32_t *succ; /* successor ids, grouped per task after finalize */
    uint32_t nedges, cap_edges;
    uint32_t *edge_from, *edge_to; /* edges in submission order, before finalize */
    /* tensor map state, owned by tensor_map.c */
    graph_region *regions;
    uint32_t nregions, cap_regions;
    void *scratch; /* tensor_map.c's private state */
    /* The scheduler's words for one execution (exec.c: 3 a task), reserved
     * by graph_finalize and kept across graph_reset, so a warm run allocates
     * and first-touches nothing there (a fresh 12 MB block for 10^6 tasks
     * cost every run ~3000 page faults).  One execution of a graph at a
     * time uses them. */
    uint32_t *exec_words;
    uint32_t cap_exec_words;
    /* Kernel names, one copy per distinct name, kept across graph_reset:
     * O(distinct names) memory, and a submit of a name already held
     * allocates nothing. */
    intern_table names;
} graph;

void graph_init(graph *g);
/* Empties the graph, keeping its memory for the next run. */
void graph_reset(graph *g);
void graph_free(graph *g);
/* Exchanges the task records of a and b (tasks, args, scalars, edges,
 * successor lists, kernel names) and keeps each graph's tensor map where it
 * is: a finished graph becomes a recording in O(1), the recording's memory
 * becomes the working graph's, and a recording never holds a map. */
void graph_swap_records(graph *a, graph *b);

/* Adds a task, infers its dependencies, adds `deps` (explicit, each must be an
 * earlier task id: HG_EINVAL otherwise) and returns its id in *out.  Copies
 * the kernel's function, core type and (interned) name: `kernel` may die
 * when this returns.
 * HG_ELIMIT past HG_MAX_TASK_ARGS / HG_MAX_TASK_SCALARS / HG_MAX_TASK_DEPS. */
int graph_add_task(graph *g, const hg_kernel *kernel, const graph_targ *args, uint32_t nargs,
                   const uint64_t *scalars, uint32_t nscalars, const hg_task_id *deps,
                   uint32_t ndeps, hg_task_id *out, hg_err *e);

/* What the tensor map holds and has done since graph_reset: for tests and
 * benchmarks, which check that it grows linearly with the tasks. */
typedef struct graph_map_counts {
    uint32_t records;      /* live write records: disjoint ranges with their last writer */
    uint32_t reader_nodes; /* live read records: ranges read since their last write */
    uint64_t steps;        /* records visited by searches, trims and frees (each treap
                            * split or merge adds O(log n) more, not counted) */
    uint64_t mark_extends; /* times the per-task dedupe marks grew (and were zeroed) */
} graph_map_counts;

void graph_map_stats(const graph *g, graph_map_counts *out);

/* Groups successors per task (graph_task.succ_first/nsucc).  Call once after
 * the last graph_add_task and before execution. */
int graph_finalize(graph *g, hg_err *e);

static inline const graph_targ *graph_task_args(const graph *g, const graph_task *t)
{
    return g->targs + t->args_first;
}
static inline const uint64_t *graph_task_scalars(const graph *g, const graph_task *t)
{
    return g->scalars + t->scalars_first;
}
static inline const uint32_t *graph_task_succ(const graph *g, const graph_task *t)
{
    return g->succ + t->succ_first;
}

#endif
