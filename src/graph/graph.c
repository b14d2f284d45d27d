/*
 * graph.c: task records: a task's kernel, args, scalars and edges, and the
 * successor lists execution walks.
 *
 * Dependencies come from the tensor map (tensor_map.c): graph_add_task
 * checks the task, reserves room for everything it will record, asks the map
 * for its dependencies, lets the map take its accesses, then records it.
 *
 * Invariants: every edge goes from an earlier task to a later one (the graph
 * is a DAG by construction); edges of one task are distinct.  A submit that
 * fails before the map's update leaves the graph as it was; one that fails in
 * the update breaks the graph until graph_reset.  graph_reset keeps every
 * array's memory, and a submit that needs no more room allocates and clears
 * nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/tensor_map.h"
#include "tensor/checked.h"

#define NONE UINT32_MAX

/* ---------------------------------------------------------------- memory */

int graph_grow(void *pp, uint32_t *cap, uint64_t need, size_t elem)
{
    void *p;
    memcpy(&p, pp, sizeof p);
    if (need == 0)
        need = 1; /* keep arrays non-NULL: the inline accessors offset them */
    if (need <= *cap && p != NULL)
        return 0;
    if (need >= NONE)
        return HG_ELIMIT;
    uint64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c >= NONE)
        c = NONE - 1;
    size_t bytes;
    if (!ck_mul((size_t)c, elem, &bytes))
        return HG_ENOMEM;
    void *q = realloc(p, bytes);
    if (q == NULL)
        return HG_ENOMEM;
    memcpy(pp, &q, sizeof q);
    *cap = (uint32_t)c;
    return 0;
}

/* True when t is a dense 1-D view that a graph_arg says whole (graph.h):
 * its address is lo, one dim of stride 1 covers [lo, hi) in elements of a
 * power-of-two size, and the unused dims are 0.  *elem_log2 gets the
 * size's log2. */
static bool dense_1d(const graph_targ *t, uint8_t *elem_log2)
{
    if (t->ndims != 1 || t->strides[0] != 1 || t->addr != t->lo)
        return false;
    for (uint32_t d = 1; d < HG_MAX_DIMS; d++)
        if (t->shape[d] != 0 || t->strides[d] != 0)
            return false;
    const size_t size = hg_dtype_size(t->dtype);
    if (size == 0 || (size & (size - 1)) != 0)
        return false;
    uint8_t log2 = 0;
    while (((size_t)1 << log2) != size)
        log2++;
    if (t->shape[0] > (SIZE_MAX >> log2) || (t->shape[0] << log2) != t->hi - t->lo)
        return false;
    *elem_log2 = log2;
    return true;
}

/* The three edge arrays share cap_edges; it grows only when all three did. */
static int grow_edges(graph *g, uint64_t need)
{
    uint32_t c1 = g->cap_edges, c2 = g->cap_edges, c3 = g->cap_edges;
    int rc = graph_grow(&g->edge_from, &c1, need, sizeof(uint32_t));
    if (rc == 0)
        rc = graph_grow(&g->edge_to, &c2, need, sizeof(uint32_t));
    if (rc == 0)
        rc = graph_grow(&g->succ, &c3, need, sizeof(uint32_t));
    if (rc == 0)
        g->cap_edges = c1;
    return rc;
}

/* ------------------------------------------------------------- the graph */

void graph_init(graph *g)
{
    memset(g, 0, sizeof *g);
}

void graph_reset(graph *g)
{
    g->ntasks = g->nargs = g->nshapes = g->nscalars = g->nedges = 0;
    graph_map_reset(g);
}

void graph_free(graph *g)
{
    graph_map_free(g);
    intern_free(&g->names);
    free(g->tasks);
    free(g->args);
    free(g->shapes);
    free(g->scalars);
    free(g->succ);
    free(g->edge_from);
    free(g->edge_to);
    free(g->exec_words);
    free(g->kernels);
    free(g->kernel_slots);
    graph_init(g);
}

void graph_swap_records(graph *a, graph *b)
{
    graph t = *a;
    *a = *b;
    *b = t;
    /* The maps go back: each stays with its graph. */
    b->scratch = a->scratch;
    a->scratch = t.scratch;
}

/* ------------------------------------------------------------- kernels */

static bool kernel_same(const graph_kernel *a, const graph_kernel *b)
{
    return a->fn == b->fn && a->name == b->name && a->dev_kernel == b->dev_kernel &&
           a->core == b->core && a->host_step == b->host_step;
}

/* Names are interned, so their pointers stand for them. */
static size_t kernel_hash(const graph_kernel *k, uint32_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)k->name;
    h = (h ^ (uint64_t)(uintptr_t)k->fn) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (uint64_t)(uintptr_t)k->dev_kernel) * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)k->core << 1 | (uint64_t)k->host_step;
    return (size_t)((h ^ h >> 29) & (cap - 1));
}

/* The slot holding an entry equal to k, or the empty one where it goes. */
static uint32_t *kernel_slot(const graph *g, const graph_kernel *k)
{
    size_t i = kernel_hash(k, g->cap_kernel_slots);
    while (g->kernel_slots[i] != GRAPH_NO_KERNEL &&
           !kernel_same(&g->kernels[g->kernel_slots[i]], k))
        i = (i + 1) & (g->cap_kernel_slots - 1);
    return &g->kernel_slots[i];
}

/* Doubles the slots (16 to start) and puts every entry back. */
static int grow_kernel_slots(graph *g)
{
    const uint32_t cap = g->cap_kernel_slots ? 2 * g->cap_kernel_slots : 16;
    uint32_t *slots = malloc((size_t)cap * sizeof *slots);
    if (cap > NONE / 2 || slots == NULL) {
        free(slots);
        return HG_ENOMEM;
    }
    memset(slots, 0xff, (size_t)cap * sizeof *slots); /* GRAPH_NO_KERNEL */
    free(g->kernel_slots);
    g->kernel_slots = slots;
    g->cap_kernel_slots = cap;
    for (uint32_t i = 0; i < g->nkernels; i++)
        *kernel_slot(g, &g->kernels[i]) = i;
    return 0;
}

/* k's entry (k->name interned), added if the graph holds none equal.
 * O(1) expected: the last submit's kernel first, then the hash. */
static int kernel_index(graph *g, const graph_kernel *k, uint32_t *out)
{
    if (g->last_kernel < g->nkernels && kernel_same(&g->kernels[g->last_kernel], k)) {
        *out = g->last_kernel;
        return 0;
    }
    int rc = 0;
    if (2 * ((uint64_t)g->nkernels + 1) > g->cap_kernel_slots)
        rc = grow_kernel_slots(g);
    if (rc == 0)
        rc = graph_grow(&g->kernels, &g->cap_kernels, (uint64_t)g->nkernels + 1,
                        sizeof(graph_kernel));
    if (rc != 0)
        return rc;
    uint32_t *slot = kernel_slot(g, k);
    if (*slot == GRAPH_NO_KERNEL) {
        g->kernels[g->nkernels] = *k;
        *slot = g->nkernels++;
    }
    *out = g->last_kernel = *slot;
    return 0;
}

/* ---------------------------------------------------------------- tasks */

static int check_lists(const graph *g, const hg_kernel *kernel, const graph_targ *args,
                       uint32_t nargs, const uint64_t *scalars, uint32_t nscalars,
                       const hg_task_id *deps, uint32_t ndeps, hg_err *e)
{
    const uint32_t id = g->ntasks;
    if (kernel == NULL)
        return err_set(e, HG_EINVAL, "task %u: no kernel", id);
    if (nargs > HG_MAX_TASK_ARGS)
        return err_set(e, HG_ELIMIT, "task %u: %u args, the limit is %d", id, nargs,
                       HG_MAX_TASK_ARGS);
    if (nscalars > HG_MAX_TASK_SCALARS)
        return err_set(e, HG_ELIMIT, "task %u: %u scalars, the limit is %d", id, nscalars,
                       HG_MAX_TASK_SCALARS);
    if (ndeps > HG_MAX_TASK_DEPS)
        return err_set(e, HG_ELIMIT, "task %u: %u explicit deps, the limit is %d", id, ndeps,
                       HG_MAX_TASK_DEPS);
    if ((nargs && args == NULL) || (nscalars && scalars == NULL) || (ndeps && deps == NULL))
        return err_set(e, HG_EINVAL, "task %u: a list is NULL with a non-zero count", id);
    return 0;
}

static int check_task(const graph *g, const graph_targ *args, uint32_t nargs,
                      const hg_task_id *deps, uint32_t ndeps, hg_err *e)
{
    const uint32_t id = g->ntasks;
    if (id >= NONE - 1)
        return err_set(e, HG_ELIMIT, "task %u: the graph is full", id);
    for (uint32_t i = 0; i < nargs; i++) {
        if (args[i].lo > args[i].hi)
            return err_set(e, HG_EINVAL, "task %u: arg %u: extent [0x%llx, 0x%llx) is reversed", id,
                           i, (unsigned long long)args[i].lo, (unsigned long long)args[i].hi);
        if (!args[i].read && !args[i].write)
            return err_set(e, HG_EINVAL, "task %u: arg %u is neither read nor written", id, i);
        if ((unsigned)args[i].dtype > UINT8_MAX) /* a graph_arg keeps it in a byte */
            return err_set(e, HG_EINVAL, "task %u: arg %u: dtype %d is not one", id, i,
                           (int)args[i].dtype);
    }
    for (uint32_t i = 0; i < ndeps; i++)
        if (deps[i] >= id)
            return err_set(e, HG_EINVAL, "task %u: dep %u is not an earlier task", id, deps[i]);
    return 0;
}

/* Room for the task: a graph_shape for each arg at most (which of them
 * need one is decided once, as they are recorded). */
static int reserve_task(graph *g, uint32_t nargs, uint32_t nscalars)
{
    int rc = graph_grow(&g->tasks, &g->cap_tasks, (uint64_t)g->ntasks + 1, sizeof(graph_task));
    if (rc == 0)
        rc = graph_grow(&g->args, &g->cap_args, (uint64_t)g->nargs + nargs, sizeof(graph_arg));
    if (rc == 0)
        rc = graph_grow(&g->shapes, &g->cap_shapes, (uint64_t)g->nshapes + nargs,
                        sizeof(graph_shape));
    if (rc == 0)
        rc = graph_grow(&g->scalars, &g->cap_scalars, (uint64_t)g->nscalars + nscalars,
                        sizeof(uint64_t));
    return rc;
}

/* Records one arg; graph.args and graph.shapes have room. */
static void record_arg(graph *g, const graph_targ *t)
{
    uint8_t elem_log2 = 0;
    graph_arg *a = &g->args[g->nargs++];
    *a = (graph_arg){.lo = t->lo,
                     .hi = t->hi,
                     .shape = GRAPH_DENSE_1D,
                     .dtype = (uint8_t)t->dtype,
                     .read = t->read,
                     .write = t->write};
    if (dense_1d(t, &elem_log2)) {
        a->elem_log2 = elem_log2;
        return;
    }
    graph_shape *s = &g->shapes[g->nshapes];
    a->shape = g->nshapes++;
    s->addr = t->addr;
    s->ndims = t->ndims;
    memcpy(s->shape, t->shape, sizeof s->shape);
    memcpy(s->strides, t->strides, sizeof s->strides);
}

/* Records the task and its edges from `preds`; every array was reserved, so
 * this cannot fail. */
static void record_task(graph *g, uint32_t kernel, const graph_targ *args, uint32_t nargs,
                        const uint64_t *scalars, uint32_t nscalars, const uint32_t *preds,
                        uint32_t npreds)
{
    const uint32_t id = g->ntasks++;
    g->tasks[id] = (graph_task){.kernel = kernel,
                                .args_first = g->nargs,
                                .nargs = nargs,
                                .scalars_first = g->nscalars,
                                .nscalars = nscalars,
                                .npreds = npreds};
    for (uint32_t i = 0; i < nargs; i++)
        record_arg(g, &args[i]);
    if (nscalars)
        memcpy(g->scalars + g->nscalars, scalars, nscalars * sizeof *scalars);
    g->nscalars += nscalars;
    for (uint32_t i = 0; i < npreds; i++) {
        g->edge_from[g->nedges] = preds[i];
        g->edge_to[g->nedges] = id;
        g->nedges++;
    }
}

int graph_add_task(graph *g, const hg_kernel *kernel, const graph_targ *args, uint32_t nargs,
                   const uint64_t *scalars, uint32_t nscalars, const hg_task_id *deps,
                   uint32_t ndeps, hg_task_id *out, hg_err *e)
{
    return graph_add_device_task(g, kernel, NULL, false, args, nargs, scalars, nscalars, deps,
                                 ndeps, out, e);
}

int graph_add_device_task(graph *g, const hg_kernel *kernel, const void *dev_kernel, bool host_step,
                          const graph_targ *args, uint32_t nargs, const uint64_t *scalars,
                          uint32_t nscalars, const hg_task_id *deps, uint32_t ndeps,
                          hg_task_id *out, hg_err *e)
{
    int rc = check_lists(g, kernel, args, nargs, scalars, nscalars, deps, ndeps, e);
    if (rc == 0)
        rc = check_task(g, args, nargs, deps, ndeps, e);
    if (rc == 0)
        rc = graph_map_reserve(g, e);
    if (rc != 0)
        return rc;
    const uint32_t id = g->ntasks;
    graph_kernel k = {.fn = kernel->fn,
                      .name = kernel->name ? intern_get(&g->names, kernel->name) : "(unnamed)",
                      .dev_kernel = dev_kernel,
                      .core = kernel->core,
                      .host_step = host_step};
    uint32_t kernel_at;
    if (k.name == NULL || kernel_index(g, &k, &kernel_at) != 0)
        return err_set(e, HG_ENOMEM, "task %u: cannot copy kernel '%s'", id,
                       kernel->name ? kernel->name : "(unnamed)");
    const uint32_t *preds = NULL;
    uint32_t npreds = 0;
    const bool mapped = nargs > 0 || ndeps > 0; /* else: no edge, no access to record */
    rc = reserve_task(g, nargs, nscalars);
    if (rc == 0 && mapped)
        rc = graph_map_deps(g, args, nargs, deps, ndeps, &preds, &npreds);
    if (rc == 0)
        rc = grow_edges(g, (uint64_t)g->nedges + npreds);
    if (rc != 0)
        return err_set(e, rc, "task %u: cannot grow the graph: %s", id, hg_strerror(rc));
    rc = mapped ? graph_map_update(g, args, nargs, id) : 0;
    if (rc != 0)
        return err_set(e, rc, "task %u: cannot grow the tensor map: %s", id, hg_strerror(rc));
    record_task(g, kernel_at, args, nargs, scalars, nscalars, preds, npreds);
    if (out)
        *out = id;
    return 0;
}

int graph_finalize(graph *g, hg_err *e)
{
    int rc = grow_edges(g, g->nedges); /* succ exists even with no edges */
    if (rc != 0)
        return err_set(e, rc, "graph: cannot allocate the successor lists");
    rc = graph_grow(&g->exec_words, &g->cap_exec_words, 3 * (uint64_t)g->ntasks, sizeof(uint32_t));
    if (rc != 0)
        return err_set(e, rc, "graph: cannot allocate the scheduler's state for %u tasks",
                       g->ntasks);
    for (uint32_t t = 0; t < g->ntasks; t++)
        g->tasks[t].nsucc = 0;
    for (uint32_t i = 0; i < g->nedges; i++)
        g->tasks[g->edge_from[i]].nsucc++;
    uint32_t first = 0;
    for (uint32_t t = 0; t < g->ntasks; t++) {
        g->tasks[t].succ_first = first;
        first += g->tasks[t].nsucc;
        g->tasks[t].nsucc = 0;
    }
    /* Edges are in submission order, so each list comes out sorted by id. */
    for (uint32_t i = 0; i < g->nedges; i++) {
        graph_task *t = &g->tasks[g->edge_from[i]];
        g->succ[t->succ_first + t->nsucc++] = g->edge_to[i];
    }
    return 0;
}
