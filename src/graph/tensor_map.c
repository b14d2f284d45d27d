/*
 * tensor_map.c: dependency inference for graph.c, from the byte ranges
 * each task reads and writes (the tensor map).
 *
 * Per device byte, inference follows one rule:
 *   - a reader depends on the byte's last writer;
 *   - a writer depends on the byte's readers since that write, or on the
 *     writer itself when there are none (every such reader depends on the
 *     writer already, so the edge writer -> task would be redundant).
 * The tensor map keeps exactly that, as two trees of byte ranges
 * ("records"), B+-trees ordered by lo that share one node pool
 * (range_tree.c):
 *   - write records are disjoint, each with its last writer.  A write
 *     replaces every write record it covers by one: records merge back.
 *   - read records hold, per read arg, the bytes its task read that no later
 *     task wrote; they may overlap each other (the tree keeps each subtree's
 *     largest hi, so a range query skips subtrees that end before it).  A
 *     write removes its bytes from them: a read record it covers goes, one
 *     it overlaps at an end is trimmed, one it splits becomes two.
 * A read touches no record but its own new one, so reads never fragment the
 * map, and no reader is ever copied into many records.  A read of exactly
 * the bytes of one of the last GRAPH_TREE_PINS read records made (with no
 * write to read records since; the tree keeps their positions pinned) joins
 * that record instead: its reader goes on the record's list
 * (graph_map.readers, O(1)), so a fan of N readers on one range is one
 * record.  A write that splits such a record copies its list (each entry is
 * an edge of the write); one that removes it frees the list (paid by the
 * reads).
 *
 * Where a read record lives: one whose bytes lie inside one 1 KiB granule
 * goes on that granule's list (granules.c: a hash table of lists), not into
 * the read tree, since a scattered insert into a tree of 10^6 records
 * waits for a miss to memory at its leaf (frag at 10^6 tasks: 60% of the
 * map's time, and why its cost per task grew 1.5x from 10^3) where a list
 * takes it with a probe of a table the caches hold and a sequential write.
 * A write over at most GRAPH_GRAN_SPAN granules cuts their lists as it
 * cuts the tree; a record on them that it does not overlap moves to the
 * read tree (so no write walks past it again).  A wider write first moves
 * every granule record to the tree (graph_map_deps), once each.  The pins
 * for joins have a granule twin (gpin): the last GRAPH_TREE_PINS granule
 * records made, forgotten when a cut changes the lists.
 *
 * Cost, with h = O(log_7 m) the trees' height (m: records made since
 * graph_reset; 5-6 nodes at 10^6 records, where a treap was ~30 records
 * deep, each a cache miss): a read arg costs O(h) plus the write records it
 * overlaps, whose writers it depends on (records of one writer alternate
 * with other writers' records, so these are at most about twice its edges,
 * plus the writer's args), times O(h) nodes each.  A write arg costs O(h)
 * plus O(h) per read record and write record it overlaps: a record inside
 * its range is removed (paid for once, by the access that made it), one
 * across an end is a task it depends on (an edge).  A read that joins a
 * pinned record costs O(1).  A granule read costs O(1) expected; a write
 * over G <= GRAPH_GRAN_SPAN granules adds O(G) probes and O(1) per granule
 * record it overlaps, and a record it passes over pays O(h) once, as its
 * move.  So a graph costs O((args + edges) h), and the map holds at most
 * one read record per read arg plus one per (write, read record it splits)
 * pair, which is again an edge, and one list entry per joined read plus one
 * per edge of a split.  Nothing depends on the access pattern.  `steps`
 * counts tree nodes, granule slots and list entries visited.
 *
 * Memory, not work: a new read record waits in a batch of up to
 * GRAPH_TREE_BATCH (graph_map.pend) and goes into the tree in order when
 * the batch is full or before anything searches or cuts the read tree, the
 * batch's paths asked for at once (reads_flush): same records, same
 * inserts, but their misses to memory overlap (frag at 10^6 tasks: ~27%
 * less map time).  A task's dependencies are told apart by a scan of its
 * list while it is short, by per-task marks (a miss each in a large graph)
 * only past that (deps.c).  A read arg whose granules no write record
 * covers (written.c: a bit per granule, modulo 1 GiB) skips the write
 * tree's search, which would find nothing (frag at 10^6 tasks: 3 in 4
 * reads skip, 10-20% less map time).  The filter starts once the map holds
 * WG_FROM nodes' worth of memory (map_nodes): a smaller map's searches hit
 * the caches, and a first run of a small graph pays nothing for the bits.
 *
 * Invariants: write records are disjoint and non-empty; read records are
 * non-empty and lie on bytes their task read and nobody wrote since; a
 * task's dependencies are distinct, earlier tasks.  The edges are exactly the
 * rule's, whatever the records' layout (and in an order that depends on the
 * accesses only, so a rebuilt graph is the same).  An update that runs out of
 * memory marks the map broken until graph_reset, since it may then hold part
 * of a task that was never recorded.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/deps.h"
#include "graph/granules.h"
#include "graph/range_tree.h"
#include "graph/tensor_map.h"
#include "graph/written.h"

#define NONE UINT32_MAX

/* One more reader of a read record's bytes: a fan of readers on one range is
 * one record with a list, not one record per reader. */
typedef struct reader_entry {
    uint32_t task, next;
} reader_entry;

/* A run of bytes that read records cover (see writes_deps). */
typedef struct byte_run {
    hg_devaddr lo, hi;
} byte_run;

/* graph.scratch: the map's private state. */
typedef struct graph_map {
    graph_tree_pool pool;
    graph_tree writes, reads;
    uint64_t steps; /* reader list entries visited (the pool counts nodes) */
    bool broken;
    int cut_rc;      /* a cut's first failure (graph_tree_cut cannot return one) */
    graph_deps deps; /* of the task being added (deps.c) */
    byte_run *runs;  /* bytes of one write arg's range that read records cover */
    uint32_t nruns, cap_runs;
    graph_tree_entry *pieces; /* parts past a write of records it split */
    uint32_t npieces, cap_pieces;
    reader_entry *readers; /* the read records' later readers; `next` links the free list */
    uint32_t nreaders, cap_readers, free_readers;
    uint32_t pin_next; /* the read tree's pin the next new record takes */
    /* New read records not yet in the read tree (see reads_flush). */
    graph_tree_entry pend[GRAPH_TREE_BATCH];
    uint32_t npend;
    uint64_t deferred; /* read records that went through pend */
    /* Reads whose granules no write covered skip the write tree
     * (written.c), once the map outgrows the caches. */
    graph_written wg;
    bool runs_unsorted; /* m->runs got a run before the last (granule records) */
    /* Read records inside one granule (granules.c), and the last
     * GRAPH_TREE_PINS of them made, for joins (NONE: none, or changed). */
    graph_granules gran;
    uint32_t gpin[GRAPH_TREE_PINS];
    uint32_t gpin_next;
    uint64_t gran_reads; /* read records made in granules */
    uint64_t gran_moved; /* of them, moved to the read tree later */
} graph_map;

#define WG_FROM GRAPH_TREE_PREFETCH_FROM /* tree nodes (~900 KB) from which the filter pays */

static void gpins_forget(graph_map *m)
{
    for (uint32_t k = 0; k < GRAPH_TREE_PINS; k++)
        m->gpin[k] = NONE;
}

static graph_map *map_of(graph *g)
{
    if (g->scratch == NULL) {
        graph_map *m = calloc(1, sizeof *m);
        if (m == NULL)
            return NULL;
        m->pool.free = m->free_readers = NONE;
        graph_tree_init(&m->writes);
        graph_tree_init(&m->reads);
        graph_granules_init(&m->gran);
        gpins_forget(m);
        g->scratch = m;
    }
    return g->scratch;
}

/* ------------------------------------------------------- reader lists */

/* Room for `extra` more reader entries. */
static int reserve_readers(graph_map *m, uint64_t extra)
{
    return graph_grow(&m->readers, &m->cap_readers, (uint64_t)m->nreaders + extra,
                      sizeof(reader_entry));
}

/* A reader entry for `task` in front of list `next`; the caller reserved it. */
static uint32_t reader_new(graph_map *m, uint32_t task, uint32_t next)
{
    uint32_t i = m->free_readers;
    if (i != NONE)
        m->free_readers = m->readers[i].next;
    else
        i = m->nreaders++;
    m->readers[i] = (reader_entry){task, next};
    return i;
}

/* A copy of list `l` (same order), or HG_ENOMEM in *rc. */
static uint32_t readers_copy(graph_map *m, uint32_t l, int *rc)
{
    uint32_t n = 0;
    for (uint32_t i = l; i != NONE; i = m->readers[i].next)
        n++;
    if (n > 0 && (*rc = reserve_readers(m, n)) != 0)
        return NONE;
    uint32_t head = NONE, *link = &head;
    for (; l != NONE; l = m->readers[l].next) {
        m->steps++;
        uint32_t e = reader_new(m, m->readers[l].task, NONE);
        *link = e;
        link = &m->readers[e].next;
    }
    return head;
}

static void readers_free(graph_map *m, uint32_t l)
{
    while (l != NONE) {
        m->steps++;
        uint32_t next = m->readers[l].next;
        m->readers[l].next = m->free_readers;
        m->free_readers = l;
        l = next;
    }
}

static int dep_add(graph_map *m, uint32_t task)
{
    return graph_deps_add(&m->deps, task);
}

/* Adds [lo, hi) to m->runs, merging while calls come in order of lo (the
 * read tree's); one out of order (a granule's record) marks the runs for
 * runs_sort. */
static int run_add(graph_map *m, hg_devaddr lo, hg_devaddr hi)
{
    byte_run *last = m->nruns ? &m->runs[m->nruns - 1] : NULL;
    if (last != NULL && lo >= last->lo && lo <= last->hi) {
        if (hi > last->hi)
            last->hi = hi;
        return 0;
    }
    m->runs_unsorted |= last != NULL && lo < last->lo;
    int rc = graph_grow(&m->runs, &m->cap_runs, (uint64_t)m->nruns + 1, sizeof(byte_run));
    if (rc == 0)
        m->runs[m->nruns++] = (byte_run){lo, hi};
    return rc;
}

static int run_cmp(const void *a, const void *b)
{
    const byte_run *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Puts m->runs in order of lo, merged, as runs_cover needs. */
static void runs_sort(graph_map *m)
{
    if (!m->runs_unsorted)
        return;
    qsort(m->runs, m->nruns, sizeof m->runs[0], run_cmp);
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nruns; i++) {
        if (n > 0 && m->runs[i].lo <= m->runs[n - 1].hi) {
            if (m->runs[i].hi > m->runs[n - 1].hi)
                m->runs[n - 1].hi = m->runs[i].hi;
        } else {
            m->runs[n++] = m->runs[i];
        }
    }
    m->nruns = n;
    m->runs_unsorted = false;
}

/* What one arg's searches need. */
typedef struct arg_query {
    graph_map *m;
    const graph_targ *a;
    uint32_t run; /* an index into m->runs that only moves forward */
} arg_query;

/* A read record r overlaps a written range: the writer depends on its
 * readers, and m->runs gets the bytes it covers there. */
static int read_record_deps(void *ctx, const graph_tree_entry *r)
{
    arg_query *q = ctx;
    graph_map *m = q->m;
    int rc = dep_add(m, r->task);
    for (uint32_t l = r->more; rc == 0 && l != NONE; l = m->readers[l].next) {
        m->steps++;
        rc = dep_add(m, m->readers[l].task);
    }
    if (rc == 0)
        rc = run_add(m, r->lo > q->a->lo ? r->lo : q->a->lo, r->hi < q->a->hi ? r->hi : q->a->hi);
    return rc;
}

/* True if m->runs covers [lo, hi).  q->run only moves forward: calls come
 * in order of lo. */
static bool runs_cover(arg_query *q, hg_devaddr lo, hg_devaddr hi)
{
    const graph_map *m = q->m;
    while (q->run < m->nruns && m->runs[q->run].hi <= lo)
        q->run++;
    return q->run < m->nruns && m->runs[q->run].lo <= lo && m->runs[q->run].hi >= hi;
}

/* A write record r overlaps the arg: a reader depends on its writer, a
 * writer does where r has bytes there that no reader read. */
static int write_record_deps(void *ctx, const graph_tree_entry *r)
{
    arg_query *q = ctx;
    const graph_targ *a = q->a;
    hg_devaddr lo = r->lo > a->lo ? r->lo : a->lo, hi = r->hi < a->hi ? r->hi : a->hi;
    if (a->write && runs_cover(q, lo, hi))
        return 0;
    return dep_add(q->m, r->task);
}

/* The map's memory in tree nodes (a granule record is 32 bytes, a node 7
 * cache lines). */
static uint32_t map_nodes(const graph_map *m)
{
    return m->pool.used + m->gran.nent / 14;
}

/* Adds the tasks an access of a's (non-empty) range must follow. */
static int arg_deps(graph_map *m, const graph_targ *a)
{
    arg_query q = {m, a, 0};
    m->nruns = 0;
    m->runs_unsorted = false;
    int rc = 0;
    if (a->write)
        rc = graph_tree_visit(&m->pool, &m->reads, a->lo, a->hi, read_record_deps, &q);
    if (rc == 0 && a->write)
        rc = graph_granules_visit(&m->gran, a->lo, a->hi, read_record_deps, &q);
    runs_sort(m);
    if (rc == 0 && !a->write) {
        if (graph_written_waiting(&m->wg) && map_nodes(m) >= WG_FROM)
            graph_written_start(&m->wg, &m->pool, &m->writes);
        if (graph_written_none(&m->wg, a->lo, a->hi))
            return 0;
    }
    if (rc == 0)
        rc = graph_tree_visit(&m->pool, &m->writes, a->lo, a->hi, write_record_deps, &q);
    return rc;
}

/* ---------------------------------------------------------------- update */

/* graph_tree_cut's report on a record a write cuts: one it covers goes
 * (with its readers), one it splits leaves a piece past the write, with a
 * copy of its readers (each an edge of the write). */
static void record_cut(void *ctx, const graph_tree_entry *e, bool spans)
{
    graph_map *m = ctx;
    if (!spans) {
        readers_free(m, e->more);
        return;
    }
    int rc = graph_grow(&m->pieces, &m->cap_pieces, (uint64_t)m->npieces + 1, sizeof *m->pieces);
    graph_tree_entry piece = {0, e->hi, e->task, NONE};
    if (rc == 0)
        piece.more = readers_copy(m, e->more, &rc);
    if (rc == 0)
        m->pieces[m->npieces++] = piece;
    else if (m->cut_rc == 0)
        m->cut_rc = rc;
}

/* Removes bytes [lo, hi) from tree t's records, then inserts the split
 * records' parts from hi on; `put` as graph_tree_cut's. */
static int tree_remove(graph_map *m, graph_tree *t, hg_devaddr lo, hg_devaddr hi,
                       const graph_tree_entry *put, bool *placed)
{
    m->npieces = 0;
    m->cut_rc = 0;
    graph_tree_cut(&m->pool, t, lo, hi, put, placed, record_cut, m);
    int rc = m->cut_rc;
    for (uint32_t i = 0; i < m->npieces && rc == 0; i++) {
        m->pieces[i].lo = hi;
        rc = graph_tree_reserve(&m->pool, t);
        if (rc == 0)
            graph_tree_insert(&m->pool, t, &m->pieces[i]);
    }
    return rc;
}

/* A granule record goes to the read tree: a cut passed it over, or a
 * wide write drains the granules. */
static int gran_move(void *ctx, const graph_tree_entry *e)
{
    graph_map *m = ctx;
    int rc = graph_tree_reserve(&m->pool, &m->reads);
    if (rc == 0) {
        graph_tree_insert(&m->pool, &m->reads, e);
        m->gran_moved++;
    }
    return rc;
}

static void gran_gone(void *ctx, const graph_tree_entry *e)
{
    readers_free(ctx, e->more);
}

static int gran_split(void *ctx, const graph_tree_entry *e, uint32_t *more)
{
    int rc = 0;
    *more = readers_copy(ctx, e->more, &rc);
    return rc;
}

/* True when a write of [lo, hi) spans too many granules to cut them one by
 * one: the granule records all go to the read tree first. */
static bool gran_wide(hg_devaddr lo, hg_devaddr hi)
{
    return ((hi - 1) >> GRAPH_GRAN_SHIFT) - (lo >> GRAPH_GRAN_SHIFT) >= GRAPH_GRAN_SPAN;
}

/* Removes a write's bytes [lo, hi) from the granule records. */
static int gran_remove(graph_map *m, hg_devaddr lo, hg_devaddr hi)
{
    if (m->gran.live == 0)
        return 0;
    if (gran_wide(lo, hi)) {
        /* graph_map_deps drained the others: these are the task's own
         * reads, which its write removes (in the tree, once moved). */
        gpins_forget(m);
        int rc = graph_granules_drain(&m->gran, gran_move, m);
        return rc != 0 ? rc : tree_remove(m, &m->reads, lo, hi, NULL, &(bool){false});
    }
    const graph_gran_cut_fns fns = {gran_gone, gran_split, gran_move, m};
    bool changed;
    int rc = graph_granules_cut(&m->gran, lo, hi, &fns, &changed);
    if (changed)
        gpins_forget(m);
    return rc;
}

/* Task `task` writes a's range: no read record keeps its bytes, and one
 * write record replaces every one there. */
static int map_write(graph_map *m, const graph_targ *a, uint32_t task)
{
    const graph_tree_entry w = {a->lo, a->hi, task, NONE};
    bool placed;
    graph_written_mark(&m->wg, a->lo, a->hi);
    int rc = tree_remove(m, &m->reads, a->lo, a->hi, NULL, &placed);
    if (rc == 0)
        rc = gran_remove(m, a->lo, a->hi);
    if (rc == 0)
        rc = tree_remove(m, &m->writes, a->lo, a->hi, &w, &placed);
    if (rc == 0 && !placed)
        rc = graph_tree_reserve(&m->pool, &m->writes);
    if (rc == 0 && !placed)
        graph_tree_insert(&m->pool, &m->writes, &w);
    return rc;
}

/* Puts the pending read records into the read tree, in the order they were
 * made (so the tree is as if each had gone in at its read), pinning each in
 * turn: the last GRAPH_TREE_PINS end up pinned, as they would have.  Every
 * search or cut of the read tree comes after a flush.  Why pending: a read
 * record goes to a random place in the tree, and at 10^6 records (~30 MB)
 * each insert waits for one or two misses to memory; a batch asks for all
 * of its paths at once (graph_tree_prefetch) and waits for them about once.
 * On HG_ENOMEM the records not inserted stay pending: the map still holds
 * exactly the same records, so a failed flush changes nothing. */
static int reads_flush(graph_map *m)
{
    hg_devaddr keys[GRAPH_TREE_BATCH];
    for (uint32_t i = 0; i < m->npend; i++)
        keys[i] = m->pend[i].lo;
    graph_tree_prefetch(&m->pool, &m->reads, keys, m->npend);
    uint32_t done = 0;
    for (; done < m->npend; done++) {
        if (graph_tree_reserve(&m->pool, &m->reads) != 0)
            break;
        const graph_tree_pos at = graph_tree_insert(&m->pool, &m->reads, &m->pend[done]);
        graph_tree_pin(&m->reads, m->pin_next, at);
        m->pin_next = (m->pin_next + 1) % GRAPH_TREE_PINS;
    }
    m->npend -= done;
    memmove(m->pend, m->pend + done, m->npend * sizeof m->pend[0]);
    return m->npend == 0 ? 0 : HG_ENOMEM;
}

/* Task `task` joins a read record of the bytes it reads, whose first reader
 * is `first` and reader list *more. */
static int join(graph_map *m, uint32_t task, uint32_t first, uint32_t *more)
{
    m->steps++;
    if ((*more != NONE ? m->readers[*more].task : first) == task)
        return 0; /* the task reads these bytes twice */
    if (reserve_readers(m, 1) != 0)
        return HG_ENOMEM;
    *more = reader_new(m, task, *more);
    return 0;
}

/* map_read for a range inside one granule: the same, with the granule
 * records. */
static int gran_read(graph_map *m, const graph_targ *a, uint32_t task)
{
    for (uint32_t k = 0; k < GRAPH_TREE_PINS; k++) {
        graph_tree_entry *r =
            m->gpin[k] == NONE ? NULL : graph_granules_entry(&m->gran, m->gpin[k]);
        if (r != NULL && r->lo == a->lo && r->hi == a->hi)
            return join(m, task, r->task, &r->more);
    }
    uint32_t at;
    int rc = graph_granules_add(&m->gran, &(graph_tree_entry){a->lo, a->hi, task, NONE}, &at);
    if (rc == 0) {
        m->gpin[m->gpin_next] = at;
        m->gpin_next = (m->gpin_next + 1) % GRAPH_TREE_PINS;
        m->gran_reads++;
    }
    return rc;
}

/* Task `task` reads a's range: it joins one of the last GRAPH_TREE_PINS read
 * records made (pending, or pinned in the tree) of the same bytes (O(1): a
 * fan of readers is one record), else makes a record of its own, pending;
 * nothing else changes. */
static int map_read(graph_map *m, const graph_targ *a, uint32_t task)
{
    if (graph_gran_narrow(a->lo, a->hi))
        return gran_read(m, a, task);
    for (uint32_t i = m->npend; i > 0 && i + GRAPH_TREE_PINS > m->npend; i--) {
        graph_tree_entry *q = &m->pend[i - 1];
        if (q->lo == a->lo && q->hi == a->hi)
            return join(m, task, q->task, &q->more);
    }
    graph_tree_entry r;
    for (uint32_t k = 0; k < GRAPH_TREE_PINS; k++) {
        if (!graph_tree_pinned(&m->pool, &m->reads, k, &r) || r.lo != a->lo || r.hi != a->hi)
            continue;
        const uint32_t more = r.more;
        int rc = join(m, task, r.task, &r.more);
        if (rc == 0 && r.more != more)
            graph_tree_set_more(&m->pool, &m->reads, k, r.more);
        return rc;
    }
    if (m->npend == GRAPH_TREE_BATCH && reads_flush(m) != 0)
        return HG_ENOMEM;
    m->pend[m->npend++] = (graph_tree_entry){a->lo, a->hi, task, NONE};
    m->deferred++;
    return 0;
}

/* Applies the task's accesses: reads first, so that its own writes then
 * remove the read records where it both reads and writes. */
static int map_update(graph_map *m, const graph_targ *args, uint32_t nargs, uint32_t task)
{
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nargs; i++) {
            const graph_targ *a = &args[i];
            if (a->lo >= a->hi || (pass == 0 ? (!a->read || a->write) : !a->write))
                continue;
            if (pass == 1 && m->npend > 0 && reads_flush(m) != 0)
                return HG_ENOMEM; /* the write cuts the read tree */
            int rc = pass == 0 ? map_read(m, a, task) : map_write(m, a, task);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------- for graph.c */

int graph_map_reserve(graph *g, hg_err *e)
{
    const uint32_t id = g->ntasks;
    graph_map *m = map_of(g);
    if (m == NULL)
        return err_set(e, HG_ENOMEM, "task %u: cannot allocate the tensor map", id);
    if (m->broken)
        return err_set(e, HG_ENOMEM, "task %u: the graph ran out of memory earlier", id);
    int rc = graph_deps_reserve(&m->deps, id);
    if (rc != 0)
        return err_set(e, rc, "task %u: cannot grow the graph: %s", id, hg_strerror(rc));
    return 0;
}

int graph_map_deps(graph *g, const graph_targ *args, uint32_t nargs, const hg_task_id *deps,
                   uint32_t ndeps, const uint32_t **out, uint32_t *nout)
{
    graph_map *m = g->scratch;
    graph_deps_start(&m->deps);
    int rc = 0;
    for (uint32_t i = 0; i < ndeps && rc == 0; i++)
        rc = dep_add(m, deps[i]);
    for (uint32_t i = 0; i < nargs && rc == 0 && m->gran.live > 0; i++)
        if (args[i].write && args[i].lo < args[i].hi && gran_wide(args[i].lo, args[i].hi)) {
            gpins_forget(m); /* the granule records go to the read tree, once */
            rc = graph_granules_drain(&m->gran, gran_move, m);
        }
    for (uint32_t i = 0; i < nargs && rc == 0 && m->npend > 0; i++)
        if (args[i].write && args[i].lo < args[i].hi)
            rc = reads_flush(m); /* the writes search the read tree */
    for (uint32_t i = 0; i < nargs && rc == 0; i++)
        if (args[i].lo < args[i].hi)
            rc = arg_deps(m, &args[i]);
    *out = m->deps.list;
    *nout = m->deps.n;
    return rc;
}

int graph_map_update(graph *g, const graph_targ *args, uint32_t nargs, uint32_t task)
{
    graph_map *m = g->scratch;
    int rc = map_update(m, args, nargs, task);
    if (rc != 0)
        m->broken = true;
    return rc;
}

void graph_map_reset(graph *g)
{
    graph_map *m = g->scratch;
    if (m != NULL) {
        /* The epoch keeps counting: marks from before the reset never equal it. */
        graph_tree_pool_reset(&m->pool);
        graph_tree_init(&m->writes);
        graph_tree_init(&m->reads);
        m->free_readers = NONE;
        m->deps.n = m->nruns = m->npieces = m->nreaders = m->pin_next = m->npend = 0;
        m->steps = m->deps.extends = m->deps.marks = m->deferred = 0;
        graph_written_reset(&m->wg);
        graph_granules_reset(&m->gran);
        gpins_forget(m);
        m->gpin_next = 0;
        m->gran_reads = m->gran_moved = 0;
        m->broken = false;
    }
}

void graph_map_free(graph *g)
{
    graph_map *m = g->scratch;
    if (m != NULL) {
        graph_tree_pool_free(&m->pool);
        graph_deps_free(&m->deps);
        free(m->runs);
        free(m->pieces);
        free(m->readers);
        graph_written_free(&m->wg);
        graph_granules_free(&m->gran);
        free(m);
    }
    g->scratch = NULL;
}

void graph_map_stats(const graph *g, graph_map_counts *out)
{
    const graph_map *m = g->scratch;
    *out = (graph_map_counts){0};
    if (m != NULL)
        *out = (graph_map_counts){.records = m->writes.count,
                                  .reader_nodes = m->reads.count + m->npend + m->gran.live,
                                  .steps = m->pool.steps + m->steps + m->gran.steps,
                                  .mark_extends = m->deps.extends,
                                  .nodes = m->pool.used,
                                  .height = m->reads.height > m->writes.height ? m->reads.height
                                                                               : m->writes.height};
}

void graph_map_more_stats(const graph *g, graph_map_more *out)
{
    const graph_map *m = g->scratch;
    *out = (graph_map_more){0};
    if (m != NULL)
        *out = (graph_map_more){.deferred = m->deferred,
                                .batches = m->pool.batches,
                                .prefetched = m->pool.prefetched,
                                .dep_marks = m->deps.marks,
                                .unwritten_reads = m->wg.skips,
                                .granule_reads = m->gran_reads,
                                .granule_moved = m->gran_moved,
                                .granule_slots = m->gran.cap,
                                .granule_held = m->gran.nused,
                                .granule_entries = m->gran.nent};
}
