/*
 * graph.c: task records and dependency inference (the tensor map).
 *
 * The tensor map is a set of disjoint device byte ranges ("records"), each
 * with the last task that wrote it and the tasks that read it since.  Records
 * live in a treap ordered by lo, so a submit costs O(log n + records it
 * touches), whatever the number of unrelated records.  A write replaces every
 * record it covers by one record: earlier writers and readers of those bytes
 * are ordered before the new writer, so they can never be the nearest
 * conflict of a later task again, and forgetting them loses no ordering.
 *
 * Per byte the map keeps exactly what inference needs:
 *   - a reader depends on the byte's last writer;
 *   - a writer depends on the byte's readers since that write, or on the
 *     writer itself when there are none (every such reader depends on the
 *     writer already, so the edge writer -> task would be redundant).
 * Reader lists are immutable linked lists shared between the two halves of a
 * split record; a new reader is pushed in front.  A dependency walk marks the
 * nodes it passes (with the submit's epoch) and stops at a marked one: the
 * rest of that list was walked already.
 *
 * Invariants: records are disjoint and non-empty; every edge goes from an
 * earlier task to a later one (the graph is a DAG by construction); edges of
 * one task are distinct.  A submit that fails before touching the map leaves
 * the graph as it was; one that runs out of memory while updating the map
 * marks the graph broken until graph_reset, since its map may then hold part
 * of a task that was never recorded.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "tensor/checked.h"

#define NONE UINT32_MAX

struct graph_region {
    hg_devaddr lo, hi;    /* a non-empty byte range, disjoint from the others */
    uint32_t writer;      /* last task that wrote it, NONE if none did */
    uint32_t readers;     /* head of its reader list, NONE if empty */
    uint32_t left, right; /* treap children; `left` links the free list */
    uint32_t prio;        /* treap heap priority (random) */
};

typedef struct reader_node {
    uint32_t task;
    uint32_t next;  /* the readers before it, NONE at the end */
    uint32_t epoch; /* the last submit whose dependency walk passed here */
} reader_node;

/* graph.scratch: the map's private state. */
typedef struct graph_map {
    uint32_t root, free_list, rng, epoch;
    bool broken;
    reader_node *readers;
    uint32_t nreaders, cap_readers;
    uint32_t *seen; /* per task: epoch in which it was last added as a dep */
    uint32_t cap_seen;
    uint32_t *deps; /* distinct dependencies of the task being added */
    uint32_t ndeps, cap_deps;
    uint32_t *order; /* in-order records of one range, capacity cap_regions */
    uint32_t cap_order;
} graph_map;

/* ---------------------------------------------------------------- memory */

/* Grows the array at *pp (of elem-sized items) to hold `need` items.  Counts
 * stay below NONE so every index fits a uint32_t and differs from NONE. */
static int grow(void *pp, uint32_t *cap, uint64_t need, size_t elem)
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

/* The three edge arrays share cap_edges; it grows only when all three did. */
static int grow_edges(graph *g, uint64_t need)
{
    uint32_t c1 = g->cap_edges, c2 = g->cap_edges, c3 = g->cap_edges;
    int rc = grow(&g->edge_from, &c1, need, sizeof(uint32_t));
    if (rc == 0)
        rc = grow(&g->edge_to, &c2, need, sizeof(uint32_t));
    if (rc == 0)
        rc = grow(&g->succ, &c3, need, sizeof(uint32_t));
    if (rc == 0)
        g->cap_edges = c1;
    return rc;
}

/* Room for `extra` more region records (and the in-order list of all). */
static int reserve_regions(graph *g, graph_map *m, uint32_t extra)
{
    int rc =
        grow(&g->regions, &g->cap_regions, (uint64_t)g->nregions + extra, sizeof(graph_region));
    if (rc == 0)
        rc = grow(&m->order, &m->cap_order, g->cap_regions, sizeof(uint32_t));
    return rc;
}

static int reserve_readers(graph_map *m, uint64_t extra)
{
    return grow(&m->readers, &m->cap_readers, m->nreaders + extra, sizeof(reader_node));
}

static graph_map *map_of(graph *g)
{
    if (g->scratch == NULL) {
        graph_map *m = calloc(1, sizeof *m);
        if (m == NULL)
            return NULL;
        m->root = m->free_list = NONE;
        m->rng = 0x9e3779b9u;
        g->scratch = m;
    }
    return g->scratch;
}

/* ----------------------------------------------------------------- treap */

static uint32_t rng_next(graph_map *m)
{
    /* xorshift32: priorities need only be unpredictable to the layout. */
    uint32_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return m->rng = x;
}

/* A new record; the caller reserved room for it. */
static uint32_t region_new(graph *g, graph_map *m, hg_devaddr lo, hg_devaddr hi, uint32_t writer,
                           uint32_t readers)
{
    uint32_t i = m->free_list;
    if (i != NONE)
        m->free_list = g->regions[i].left;
    else
        i = g->nregions++;
    g->regions[i] = (graph_region){lo, hi, writer, readers, NONE, NONE, rng_next(m)};
    return i;
}

static void region_free(graph *g, graph_map *m, uint32_t i)
{
    g->regions[i].left = m->free_list;
    m->free_list = i;
}

/* Splits tree t into records with lo < key (*l) and the rest (*r). */
static void map_split(graph *g, uint32_t t, hg_devaddr key, uint32_t *l, uint32_t *r)
{
    if (t == NONE) {
        *l = *r = NONE;
        return;
    }
    graph_region *n = &g->regions[t];
    if (n->lo < key) {
        map_split(g, n->right, key, &n->right, r);
        *l = t;
    } else {
        map_split(g, n->left, key, l, &n->left);
        *r = t;
    }
}

/* Joins two trees where every record of a lies before every record of b. */
static uint32_t map_merge(graph *g, uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    graph_region *r = g->regions;
    if (r[a].prio > r[b].prio) {
        r[a].right = map_merge(g, r[a].right, b);
        return a;
    }
    r[b].left = map_merge(g, a, r[b].left);
    return b;
}

/* If the last record of `left` reaches past `at`, moves its part from `at`
 * on to the front of `right` (the halves share the reader list). */
static uint32_t map_cut(graph *g, graph_map *m, uint32_t left, hg_devaddr at, uint32_t right)
{
    if (left == NONE)
        return right;
    uint32_t x = left;
    while (g->regions[x].right != NONE)
        x = g->regions[x].right;
    if (g->regions[x].hi <= at)
        return right;
    graph_region *r = &g->regions[x];
    uint32_t piece = region_new(g, m, at, r->hi, r->writer, r->readers);
    g->regions[x].hi = at;
    return map_merge(g, piece, right);
}

/* Splits the map into records before [lo, hi) (*a), inside it (*mid) and
 * after it (*c), cutting records that straddle lo or hi.  Needs room for two
 * records.  The map is empty until map_join. */
static void map_isolate(graph *g, graph_map *m, hg_devaddr lo, hg_devaddr hi, uint32_t *a,
                        uint32_t *mid, uint32_t *c)
{
    uint32_t rest;
    map_split(g, m->root, lo, a, &rest);
    rest = map_cut(g, m, *a, lo, rest);
    map_split(g, rest, hi, mid, c);
    *c = map_cut(g, m, *mid, hi, *c);
    m->root = NONE;
}

static void map_join(graph *g, graph_map *m, uint32_t a, uint32_t mid, uint32_t c)
{
    m->root = map_merge(g, map_merge(g, a, mid), c);
}

/* Appends tree t's records, in order, to m->order (capacity: every record). */
static void map_list(graph *g, graph_map *m, uint32_t t, uint32_t *n)
{
    if (t == NONE)
        return;
    map_list(g, m, g->regions[t].left, n);
    m->order[(*n)++] = t;
    map_list(g, m, g->regions[t].right, n);
}

/* ---------------------------------------------------------- dependencies */

static int dep_add(graph_map *m, uint32_t task)
{
    if (m->seen[task] == m->epoch)
        return 0;
    int rc = grow(&m->deps, &m->cap_deps, (uint64_t)m->ndeps + 1, sizeof(uint32_t));
    if (rc != 0)
        return rc;
    m->seen[task] = m->epoch;
    m->deps[m->ndeps++] = task;
    return 0;
}

/* The tasks a new access of record r must follow. */
static int region_deps(graph_map *m, const graph_region *r, bool write)
{
    if (!write || r->readers == NONE)
        return r->writer == NONE ? 0 : dep_add(m, r->writer);
    int rc = 0;
    for (uint32_t i = r->readers; i != NONE && rc == 0; i = m->readers[i].next) {
        if (m->readers[i].epoch == m->epoch)
            break; /* this tail was walked already in this submit */
        m->readers[i].epoch = m->epoch;
        rc = dep_add(m, m->readers[i].task);
    }
    return rc;
}

/* Visits the records overlapping a's extent. */
static int map_deps(graph *g, graph_map *m, uint32_t t, const graph_targ *a)
{
    if (t == NONE)
        return 0;
    const graph_region *r = &g->regions[t];
    int rc = 0;
    if (r->lo > a->lo) /* left records end by r->lo */
        rc = map_deps(g, m, r->left, a);
    if (rc == 0 && r->lo < a->hi && r->hi > a->lo)
        rc = region_deps(m, r, a->write);
    if (rc == 0 && r->hi < a->hi) /* right records start at r->hi or later */
        rc = map_deps(g, m, r->right, a);
    return rc;
}

/* Starts a submit's marks: an epoch no seen[] or reader node holds yet. */
static void epoch_next(graph_map *m)
{
    if (++m->epoch == 0) { /* wrapped: forget every old mark */
        memset(m->seen, 0, (size_t)m->cap_seen * sizeof m->seen[0]);
        for (uint32_t i = 0; i < m->nreaders; i++)
            m->readers[i].epoch = 0;
        m->epoch = 1;
    }
    m->ndeps = 0;
}

/* ---------------------------------------------------------------- update */

/* Task `task` writes [lo, hi): one record replaces all it covers. */
static int map_write(graph *g, graph_map *m, const graph_targ *a, uint32_t task)
{
    if (reserve_regions(g, m, 3) != 0)
        return HG_ENOMEM;
    uint32_t before, mid, after, n = 0;
    map_isolate(g, m, a->lo, a->hi, &before, &mid, &after);
    map_list(g, m, mid, &n);
    for (uint32_t i = 0; i < n; i++)
        region_free(g, m, m->order[i]);
    mid = region_new(g, m, a->lo, a->hi, task, NONE);
    map_join(g, m, before, mid, after);
    return 0;
}

static uint32_t reader_push(graph_map *m, uint32_t task, uint32_t head)
{
    if (head != NONE && m->readers[head].task == task)
        return head; /* two read args of one task over the same bytes */
    m->readers[m->nreaders] = (reader_node){task, head, 0};
    return m->nreaders++;
}

/* Task `task` reads [lo, hi): it joins the readers of every record there,
 * and the gaps become records with no writer. */
static int map_read(graph *g, graph_map *m, const graph_targ *a, uint32_t task)
{
    if (reserve_regions(g, m, 2) != 0)
        return HG_ENOMEM;
    uint32_t before, mid, after, n = 0;
    map_isolate(g, m, a->lo, a->hi, &before, &mid, &after);
    map_list(g, m, mid, &n);
    if (reserve_regions(g, m, n + 1) != 0 || reserve_readers(m, (uint64_t)2 * n + 1) != 0) {
        map_join(g, m, before, mid, after);
        return HG_ENOMEM;
    }
    hg_devaddr at = a->lo;
    uint32_t built = NONE;
    for (uint32_t i = 0; i <= n; i++) {
        hg_devaddr next = i < n ? g->regions[m->order[i]].lo : a->hi;
        if (at < next)
            built =
                map_merge(g, built, region_new(g, m, at, next, NONE, reader_push(m, task, NONE)));
        if (i == n)
            break;
        graph_region *r = &g->regions[m->order[i]];
        r->left = r->right = NONE;
        r->readers = reader_push(m, task, r->readers);
        at = r->hi;
        built = map_merge(g, built, m->order[i]);
    }
    map_join(g, m, before, built, after);
    return 0;
}

/* Applies the task's accesses: reads first, so that its own writes then
 * replace the records where it both reads and writes. */
static int map_update(graph *g, graph_map *m, const graph_targ *args, uint32_t nargs, uint32_t task)
{
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nargs; i++) {
            const graph_targ *a = &args[i];
            if (a->lo >= a->hi || (pass == 0 ? (!a->read || a->write) : !a->write))
                continue;
            int rc = pass == 0 ? map_read(g, m, a, task) : map_write(g, m, a, task);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- the graph */

void graph_init(graph *g)
{
    memset(g, 0, sizeof *g);
}

void graph_reset(graph *g)
{
    g->ntasks = g->ntargs = g->nscalars = g->nedges = g->nregions = 0;
    graph_map *m = g->scratch;
    if (m != NULL) {
        /* The epoch keeps counting: marks from before the reset never equal it. */
        m->root = m->free_list = NONE;
        m->nreaders = m->ndeps = 0;
        m->broken = false;
    }
}

void graph_free(graph *g)
{
    graph_map *m = g->scratch;
    if (m != NULL) {
        free(m->readers);
        free(m->seen);
        free(m->deps);
        free(m->order);
        free(m);
    }
    free(g->tasks);
    free(g->targs);
    free(g->scalars);
    free(g->succ);
    free(g->edge_from);
    free(g->edge_to);
    free(g->regions);
    graph_init(g);
}

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
    }
    for (uint32_t i = 0; i < ndeps; i++)
        if (deps[i] >= id)
            return err_set(e, HG_EINVAL, "task %u: dep %u is not an earlier task", id, deps[i]);
    return 0;
}

static int reserve_task(graph *g, graph_map *m, uint32_t nargs, uint32_t nscalars)
{
    int rc = grow(&g->tasks, &g->cap_tasks, (uint64_t)g->ntasks + 1, sizeof(graph_task));
    if (rc == 0)
        rc = grow(&g->targs, &g->cap_targs, (uint64_t)g->ntargs + nargs, sizeof(graph_targ));
    if (rc == 0)
        rc = grow(&g->scalars, &g->cap_scalars, (uint64_t)g->nscalars + nscalars, sizeof(uint64_t));
    if (rc == 0) {
        uint32_t old = m->cap_seen;
        rc = grow(&m->seen, &m->cap_seen, (uint64_t)g->ntasks + 1, sizeof(uint32_t));
        if (rc == 0) /* new slots must not look marked */
            memset(m->seen + old, 0, (size_t)(m->cap_seen - old) * sizeof m->seen[0]);
    }
    return rc;
}

/* Collects the task's distinct dependencies into m->deps. */
static int collect_deps(graph *g, graph_map *m, const graph_targ *args, uint32_t nargs,
                        const hg_task_id *deps, uint32_t ndeps)
{
    epoch_next(m);
    int rc = 0;
    for (uint32_t i = 0; i < ndeps && rc == 0; i++)
        rc = dep_add(m, deps[i]);
    for (uint32_t i = 0; i < nargs && rc == 0; i++)
        if (args[i].lo < args[i].hi)
            rc = map_deps(g, m, m->root, &args[i]);
    if (rc == 0)
        rc = grow_edges(g, (uint64_t)g->nedges + m->ndeps);
    return rc;
}

/* Records the task; every array was reserved, so this cannot fail. */
static void record_task(graph *g, const graph_map *m, const hg_kernel *kernel,
                        const graph_targ *args, uint32_t nargs, const uint64_t *scalars,
                        uint32_t nscalars)
{
    const uint32_t id = g->ntasks++;
    g->tasks[id] = (graph_task){.kernel = kernel,
                                .args_first = g->ntargs,
                                .nargs = nargs,
                                .scalars_first = g->nscalars,
                                .nscalars = nscalars,
                                .npreds = m->ndeps};
    if (nargs)
        memcpy(g->targs + g->ntargs, args, nargs * sizeof *args);
    if (nscalars)
        memcpy(g->scalars + g->nscalars, scalars, nscalars * sizeof *scalars);
    g->ntargs += nargs;
    g->nscalars += nscalars;
    for (uint32_t i = 0; i < m->ndeps; i++) {
        g->edge_from[g->nedges] = m->deps[i];
        g->edge_to[g->nedges] = id;
        g->nedges++;
    }
}

int graph_add_task(graph *g, const hg_kernel *kernel, const graph_targ *args, uint32_t nargs,
                   const uint64_t *scalars, uint32_t nscalars, const hg_task_id *deps,
                   uint32_t ndeps, hg_task_id *out, hg_err *e)
{
    int rc = check_lists(g, kernel, args, nargs, scalars, nscalars, deps, ndeps, e);
    if (rc == 0)
        rc = check_task(g, args, nargs, deps, ndeps, e);
    if (rc != 0)
        return rc;
    const uint32_t id = g->ntasks;
    graph_map *m = map_of(g);
    if (m == NULL)
        return err_set(e, HG_ENOMEM, "task %u: cannot allocate the tensor map", id);
    if (m->broken)
        return err_set(e, HG_ENOMEM, "task %u: the graph ran out of memory earlier", id);
    rc = reserve_task(g, m, nargs, nscalars);
    if (rc == 0)
        rc = collect_deps(g, m, args, nargs, deps, ndeps);
    if (rc != 0)
        return err_set(e, rc, "task %u: cannot grow the graph: %s", id, hg_strerror(rc));
    rc = map_update(g, m, args, nargs, id);
    if (rc != 0) {
        m->broken = true;
        return err_set(e, rc, "task %u: cannot grow the tensor map: %s", id, hg_strerror(rc));
    }
    record_task(g, m, kernel, args, nargs, scalars, nscalars);
    if (out)
        *out = id;
    return 0;
}

int graph_finalize(graph *g, hg_err *e)
{
    int rc = grow_edges(g, g->nedges); /* succ exists even with no edges */
    if (rc != 0)
        return err_set(e, rc, "graph: cannot allocate the successor lists");
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
