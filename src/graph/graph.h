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
 * Cost: O(log m) per task arg (m: the tensor map's records made since
 * graph_reset; B+-trees of fanout 16, 5-6 nodes deep at 10^6), plus O(log m)
 * per edge the rule makes, whatever the access pattern; the map holds
 * O(task args + edges) records (tensor_map.c says why).
 *
 * Memory: one graph is reused run after run (graph_reset keeps capacity);
 * per task a 32-byte record, 24 bytes a task arg (96 more for an arg that is
 * not dense 1-D), 8 a scalar and 12 an edge.
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

/* A task arg as the graph keeps it: 24 bytes.  Most task args are dense
 * 1-D views (addr == lo, one dim of stride 1 covering [lo, hi)), which the
 * extent and the dtype say whole; any other view keeps its address, shape
 * and strides in graph.shapes.  Keeping a whole graph_targ (120 bytes) per
 * task arg was most of what a first run wrote per task, and every fresh
 * page costs a first run a fault (2-13 us on the VMs this project runs on).
 * Expanding a record gives back exactly the graph_targ submitted. */
typedef struct graph_arg {
    hg_devaddr lo, hi; /* device byte extent [lo, hi); lo == hi when empty */
    uint32_t shape;    /* GRAPH_DENSE_1D, or its entry in graph.shapes */
    uint8_t dtype;     /* an hg_dtype */
    uint8_t elem_log2; /* log2 of the dtype's size: the dense form's shape[0] */
    bool read, write;
} graph_arg;

#define GRAPH_DENSE_1D UINT32_MAX

/* The layout of a task arg that is not dense 1-D. */
typedef struct graph_shape {
    hg_devaddr addr;
    uint32_t ndims;
    size_t shape[HG_MAX_DIMS];
    size_t strides[HG_MAX_DIMS];
} graph_shape;

/* What a task runs: the graph keeps one entry per distinct (function, core
 * type, name, queue kernel, host step), copied at submit, so a kernel record
 * and its name need not outlive graph_add_task and a task record stays 32
 * bytes (a task record per task is fresh memory on a first run). */
typedef struct graph_kernel {
    hg_kernel_fn fn;
    const char *name;       /* interned in graph.names; "(unnamed)" for NULL */
    const void *dev_kernel; /* a queue device's kernel handle, or NULL */
    hg_core_type core;
    bool host_step; /* hg_task_submit_host_step: staged on a queue device */
} graph_kernel;

typedef struct graph_task {
    uint32_t kernel;                  /* into graph.kernels */
    uint32_t args_first, nargs;       /* into graph.args */
    uint32_t scalars_first, nscalars; /* into graph.scalars */
    uint32_t npreds;                  /* distinct predecessors */
    uint32_t succ_first, nsucc;       /* into graph.succ, valid after finalize */
} graph_task;

typedef struct graph {
    graph_task *tasks;
    uint32_t ntasks, cap_tasks;
    graph_arg *args; /* every task's args, in task order */
    uint32_t nargs, cap_args;
    graph_shape *shapes; /* the layouts of the args that are not dense 1-D */
    uint32_t nshapes, cap_shapes;
    uint64_t *scalars;
    uint32_t nscalars, cap_scalars;
    uint32_t *succ; /* successor ids, grouped per task after finalize */
    uint32_t nedges, cap_edges;
    uint32_t *edge_from, *edge_to; /* edges in submission order, before finalize */
    void *scratch;                 /* the tensor map, owned by tensor_map.c */
    /* The scheduler's words for one execution (exec.c: 3 a task), reserved
     * by graph_finalize and kept across graph_reset, so a warm run allocates
     * and first-touches nothing there (a fresh 12 MB block for 10^6 tasks
     * cost every run ~3000 page faults).  One execution of a graph at a
     * time uses them. */
    uint32_t *exec_words;
    uint32_t cap_exec_words;
    /* Kernel names, one copy per distinct name, and the kernels tasks run,
     * one entry per distinct kernel (kernel_slots: their indices by hash,
     * open addressing, at most half full; last_kernel: the one the last
     * submit ran), all kept across graph_reset: O(distinct kernels) memory,
     * and a submit of a kernel already held allocates nothing. */
    intern_table names;
    graph_kernel *kernels;
    uint32_t nkernels, cap_kernels;
    uint32_t *kernel_slots; /* GRAPH_NO_KERNEL: empty */
    uint32_t cap_kernel_slots, last_kernel;
} graph;

#define GRAPH_NO_KERNEL UINT32_MAX

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
/* The same, for a task a queue device runs with `dev_kernel` (its handle
 * for the kernel's OpenCL slot), or a host step. */
int graph_add_device_task(graph *g, const hg_kernel *kernel, const void *dev_kernel, bool host_step,
                          const graph_targ *args, uint32_t nargs, const uint64_t *scalars,
                          uint32_t nscalars, const hg_task_id *deps, uint32_t ndeps,
                          hg_task_id *out, hg_err *e);

/* What the tensor map holds and has done since graph_reset: for tests and
 * benchmarks, which check that it grows linearly with the tasks. */
typedef struct graph_map_counts {
    uint32_t records;      /* live write records: disjoint ranges with their last writer */
    uint32_t reader_nodes; /* live read records: ranges read since their last write */
    uint64_t steps;        /* tree nodes visited by inserts, searches and cuts, and
                            * reader list entries walked */
    uint64_t mark_extends; /* times the per-task dedupe marks grew (and were zeroed) */
    uint32_t nodes;        /* tree nodes handed out since graph_reset (the pool's high water) */
    uint32_t height;       /* the taller tree's levels now */
} graph_map_counts;

void graph_map_stats(const graph *g, graph_map_counts *out);

/* Groups successors per task (graph_task.succ_first/nsucc).  Call once after
 * the last graph_add_task and before execution. */
int graph_finalize(graph *g, hg_err *e);

static inline const graph_arg *graph_task_args(const graph *g, const graph_task *t)
{
    return g->args + t->args_first;
}

/* Fills a task arg's address, dims, shape and strides (HG_MAX_DIMS each,
 * unused entries 0) from its record: exactly what was submitted. */
static inline hg_devaddr graph_arg_layout(const graph *g, const graph_arg *a, uint32_t *ndims,
                                          size_t *shape, size_t *strides)
{
    if (a->shape == GRAPH_DENSE_1D) {
        for (uint32_t d = 1; d < HG_MAX_DIMS; d++)
            shape[d] = strides[d] = 0;
        *ndims = 1;
        shape[0] = (size_t)((a->hi - a->lo) >> a->elem_log2);
        strides[0] = 1;
        return a->lo;
    }
    const graph_shape *s = &g->shapes[a->shape];
    *ndims = s->ndims;
    for (uint32_t d = 0; d < HG_MAX_DIMS; d++) {
        shape[d] = s->shape[d];
        strides[d] = s->strides[d];
    }
    return s->addr;
}

/* The whole resolved arg a record stands for. */
static inline graph_targ graph_arg_expand(const graph *g, const graph_arg *a)
{
    graph_targ t = {
        .lo = a->lo, .hi = a->hi, .dtype = (hg_dtype)a->dtype, .read = a->read, .write = a->write};
    t.addr = graph_arg_layout(g, a, &t.ndims, t.shape, t.strides);
    return t;
}

static inline const graph_kernel *graph_task_kernel(const graph *g, const graph_task *t)
{
    return &g->kernels[t->kernel];
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
