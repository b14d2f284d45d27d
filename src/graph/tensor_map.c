/*
 * tensor_map.c: dependency inference for graph.c, from the byte ranges
 * each task reads and writes (the tensor map).
 *
 * Per device byte, inference follows one rule:
 *   - a reader depends on the byte's last writer;
 *   - a writer depends on the byte's readers since that write, or on the
 *     writer itself when there are none (every such reader depends on the
 *     writer already, so the edge writer -> task would be redundant).
 * The tensor map keeps exactly that, as two treaps of byte ranges
 * ("records") ordered by lo, in one node pool (graph.regions):
 *   - write records are disjoint, each with its last writer.  A write
 *     replaces every write record it covers by one: records merge back.
 *   - read records hold, per read arg, the bytes its task read that no later
 *     task wrote; they may overlap each other.  Each node knows the largest
 *     hi in its subtree, so a range query skips subtrees that end before it.
 *     A write removes its bytes from them: a read record it covers goes, one
 *     it overlaps at an end is trimmed, one it splits becomes two.
 * A read touches no record but its own new one, so reads never fragment the
 * map, and no reader is ever copied into many records.  A read of exactly
 * the bytes of one of the last RECENT_READS read records made (with no write
 * to read records since) joins that record instead: its reader goes on the
 * record's list (graph_map.readers, O(1)), so a fan of N readers on one
 * range is one record, not N records in a treap of depth log N.  A write
 * that splits such a record copies its list (each entry is an edge of the
 * write); one that removes it frees the list (paid by the reads).
 *
 * Cost, with n live records and expected treap depth O(log n): a read arg
 * costs O(log n) plus the write records it overlaps, whose writers it
 * depends on (records of one writer alternate with other writers' records,
 * so these are at most about twice its edges, plus the writer's args).  A
 * write arg costs O(log n) plus O(log n) per read record and write record it
 * overlaps: a record inside its range is removed (paid for once, by the
 * access that made it), one across an end is a task it depends on (an edge).
 * A read that joins a recent record costs O(1).  So a graph costs
 * O((args + edges) log n), and the map holds at most one read record per
 * read arg plus one per (write, read record it splits) pair, which is again
 * an edge, and one list entry per joined read plus one per edge of a split.
 * Nothing depends on the access pattern.  (Scattered small reads over 10^6
 * records still pay the treap's depth, ~30 records visited per task+edge,
 * each a cache miss once the records outgrow the caches: docs/PERFORMANCE.md.)
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

#include "graph/tensor_map.h"

#define NONE UINT32_MAX

struct graph_region {
    hg_devaddr lo, hi;    /* a non-empty byte range */
    hg_devaddr maxhi;     /* read records: the largest hi in the subtree */
    uint32_t task;        /* a write record's writer, a read record's first reader */
    uint32_t left, right; /* treap children; `left` links the free list */
    uint32_t prio;        /* treap heap priority (random) */
    uint32_t more;        /* read records: the later readers of the same bytes (a
                           * list in graph_map.readers, latest first), or NONE */
};

/* One more reader of a read record's bytes: a fan of readers on one range is
 * one record with a list, not one treap record per reader. */
typedef struct reader_entry {
    uint32_t task, next;
} reader_entry;

/* Read records a read may join (the last few made); emptied whenever a write
 * changes read records, so each one held is live and unchanged. */
#define RECENT_READS 4

/* Which treap an operation works on: only the read treap keeps maxhi (the
 * write treap's records are disjoint, so lo order is hi order there). */
typedef enum tree_kind { WRITES, READS } tree_kind;

/* A run of bytes that read records cover (see writes_deps). */
typedef struct byte_run {
    hg_devaddr lo, hi;
} byte_run;

/* graph.scratch: the map's private state. */
typedef struct graph_map {
    uint32_t writes, reads; /* roots of the write and read treaps */
    uint32_t free_list, rng, epoch;
    uint32_t nwrites, nreads; /* live records in each */
    uint64_t steps, mark_extends;
    bool broken;
    uint32_t *seen; /* per task: epoch in which it was last added as a dep */
    uint32_t cap_seen;
    uint32_t *deps; /* distinct dependencies of the task being added */
    uint32_t ndeps, cap_deps;
    byte_run *runs; /* bytes of one write arg's range that read records cover */
    uint32_t nruns, cap_runs;
    reader_entry *readers; /* the read records' later readers; `next` links the free list */
    uint32_t nreaders, cap_readers, free_readers;
    uint32_t recent[RECENT_READS]; /* read records a read of the same range joins */
    uint32_t recent_next;
} graph_map;

/* ---------------------------------------------------------------- memory */

/* Room for `extra` more records.  Nothing may hold a pointer into the pool
 * across this call. */
static int reserve_regions(graph *g, uint64_t extra)
{
    return graph_grow(&g->regions, &g->cap_regions, g->nregions + extra, sizeof(graph_region));
}

static graph_map *map_of(graph *g)
{
    if (g->scratch == NULL) {
        graph_map *m = calloc(1, sizeof *m);
        if (m == NULL)
            return NULL;
        m->writes = m->reads = m->free_list = m->free_readers = NONE;
        memset(m->recent, 0xff, sizeof m->recent);
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

/* A new record, alone; the caller reserved room for it and counts it. */
static uint32_t region_new(graph *g, graph_map *m, hg_devaddr lo, hg_devaddr hi, uint32_t task)
{
    uint32_t i = m->free_list;
    if (i != NONE)
        m->free_list = g->regions[i].left;
    else
        i = g->nregions++;
    g->regions[i] = (graph_region){lo, hi, hi, task, NONE, NONE, rng_next(m), NONE};
    return i;
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

/* Entries in list `l`. */
static uint32_t readers_count(const graph_map *m, uint32_t l)
{
    uint32_t n = 0;
    for (; l != NONE; l = m->readers[l].next)
        n++;
    return n;
}

/* A copy of list `l` (same order); the caller reserved its entries. */
static uint32_t readers_copy(graph_map *m, uint32_t l)
{
    uint32_t head = NONE, *link = &head;
    for (; l != NONE; l = m->readers[l].next) {
        m->steps++;
        *link = reader_new(m, m->readers[l].task, NONE);
        link = &m->readers[*link].next;
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

/* A write is about to change read records: none may be joined any more. */
static void recent_forget(graph_map *m)
{
    memset(m->recent, 0xff, sizeof m->recent);
}

/* Frees every record of tree t; returns how many. */
static uint32_t tree_free(graph *g, graph_map *m, uint32_t t)
{
    if (t == NONE)
        return 0;
    m->steps++;
    graph_region *r = &g->regions[t];
    uint32_t n = 1 + tree_free(g, m, r->left) + tree_free(g, m, r->right);
    r->left = m->free_list;
    m->free_list = t;
    return n;
}

/* Recomputes t's maxhi from its range and its children. */
static void fix(graph *g, uint32_t t)
{
    graph_region *r = g->regions, *n = &r[t];
    hg_devaddr h = n->hi;
    if (n->left != NONE && r[n->left].maxhi > h)
        h = r[n->left].maxhi;
    if (n->right != NONE && r[n->right].maxhi > h)
        h = r[n->right].maxhi;
    n->maxhi = h;
}

/* Splits tree t into records with lo < key (*l) and the rest (*r). */
static void map_split(graph *g, tree_kind kind, uint32_t t, hg_devaddr key, uint32_t *l,
                      uint32_t *r)
{
    if (t == NONE) {
        *l = *r = NONE;
        return;
    }
    graph_region *n = &g->regions[t];
    if (n->lo < key) {
        map_split(g, kind, n->right, key, &n->right, r);
        *l = t;
    } else {
        map_split(g, kind, n->left, key, l, &n->left);
        *r = t;
    }
    if (kind == READS)
        fix(g, t);
}

/* Joins two trees where no record of b starts before a record of a. */
static uint32_t map_merge(graph *g, tree_kind kind, uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    graph_region *r = g->regions;
    uint32_t top;
    if (r[a].prio > r[b].prio) {
        r[a].right = map_merge(g, kind, r[a].right, b);
        top = a;
    } else {
        r[b].left = map_merge(g, kind, a, r[b].left);
        top = b;
    }
    if (kind == READS)
        fix(g, top);
    return top;
}

/* Inserts record rec, alone, into tree *root, before the records that start
 * where it does: one descent to where its priority puts it, then a split of
 * the subtree found there (of expected constant depth). */
static void tree_insert(graph *g, graph_map *m, uint32_t *root, uint32_t rec)
{
    graph_region *r = g->regions, *n = &r[rec];
    uint32_t *link = root;
    while (*link != NONE && r[*link].prio > n->prio) {
        m->steps++;
        graph_region *p = &r[*link];
        if (p->maxhi < n->hi)
            p->maxhi = n->hi;
        link = n->lo <= p->lo ? &p->left : &p->right;
    }
    map_split(g, READS, *link, n->lo, &n->left, &n->right);
    fix(g, rec);
    *link = rec;
}

/* --------------------------------------------------------- write records */

/* If the last record of write tree t reaches past `at`, cuts it there and
 * returns its part from `at` on, alone; NONE otherwise.  Needs room for one
 * record. */
static uint32_t cut_last(graph *g, graph_map *m, uint32_t t, hg_devaddr at)
{
    if (t == NONE)
        return NONE;
    m->steps++;
    uint32_t piece = NONE;
    if (g->regions[t].right != NONE) {
        piece = cut_last(g, m, g->regions[t].right, at);
    } else if (g->regions[t].hi > at) {
        piece = region_new(g, m, at, g->regions[t].hi, g->regions[t].task);
        g->regions[t].hi = at;
        m->nwrites++;
    }
    return piece;
}

/* Task `task` writes a's range: one record replaces every write record
 * there, cutting those that reach out of it.  Needs room for three. */
static void writes_replace(graph *g, graph_map *m, const graph_targ *a, uint32_t task)
{
    uint32_t before, mid, after, rest;
    map_split(g, WRITES, m->writes, a->lo, &before, &rest);
    rest = map_merge(g, WRITES, cut_last(g, m, before, a->lo), rest);
    map_split(g, WRITES, rest, a->hi, &mid, &after);
    after = map_merge(g, WRITES, cut_last(g, m, mid, a->hi), after);
    m->nwrites -= tree_free(g, m, mid);
    mid = region_new(g, m, a->lo, a->hi, task);
    m->nwrites++;
    m->writes = map_merge(g, WRITES, map_merge(g, WRITES, before, mid), after);
}

/* ---------------------------------------------------------- read records */

/* Read records of tree t that start before lo and end after hi: a write of
 * [lo, hi) splits each of them in two.  *entries gets their later readers,
 * whose lists the split copies (each is an edge of the write). */
static uint32_t count_spanning(graph *g, graph_map *m, uint32_t t, hg_devaddr lo, hg_devaddr hi,
                               uint64_t *entries)
{
    if (t == NONE || g->regions[t].maxhi <= hi)
        return 0;
    m->steps++;
    const graph_region *r = &g->regions[t];
    uint32_t n = count_spanning(g, m, r->left, lo, hi, entries);
    if (r->lo < lo && r->hi > hi && r->more != NONE)
        *entries += readers_count(m, r->more);
    if (r->lo < lo) /* else the right subtree starts at lo or later */
        n += (r->hi > hi) + count_spanning(g, m, r->right, lo, hi, entries);
    return n;
}

/* Read records of tree t, which all start before lo, lose their bytes in
 * [lo, hi); the part of one past hi becomes a record in *pieces.  Needs room
 * for the records count_spanning counts. */
static void trim_before(graph *g, graph_map *m, uint32_t t, hg_devaddr lo, hg_devaddr hi,
                        uint32_t *pieces)
{
    if (t == NONE || g->regions[t].maxhi <= lo)
        return;
    m->steps++;
    trim_before(g, m, g->regions[t].left, lo, hi, pieces); /* in order: pieces stay in order */
    hg_devaddr end = g->regions[t].hi;
    if (end > hi) {
        uint32_t piece = region_new(g, m, hi, end, g->regions[t].task);
        g->regions[piece].more = readers_copy(m, g->regions[t].more);
        *pieces = map_merge(g, READS, *pieces, piece);
        m->nreads++;
    }
    if (end > lo)
        g->regions[t].hi = lo;
    trim_before(g, m, g->regions[t].right, lo, hi, pieces);
    fix(g, t);
}

/* Read records of tree t, which all start in [lo, hi), lose their bytes
 * before hi: one reaching past hi moves into *pieces, the others are freed. */
static void trim_inside(graph *g, graph_map *m, uint32_t t, hg_devaddr hi, uint32_t *pieces)
{
    if (t == NONE)
        return;
    m->steps++;
    graph_region *r = &g->regions[t];
    uint32_t right = r->right;
    trim_inside(g, m, r->left, hi, pieces); /* in order: pieces stay in order */
    if (r->hi > hi) {
        r->lo = hi;
        r->left = r->right = NONE;
        fix(g, t);
        *pieces = map_merge(g, READS, *pieces, t);
    } else {
        readers_free(m, r->more);
        r->more = NONE;
        r->left = m->free_list;
        m->free_list = t;
        m->nreads--;
    }
    trim_inside(g, m, right, hi, pieces);
}

/* True if a read record of tree t overlaps [lo, hi): one descent. */
static bool reads_overlap(graph *g, graph_map *m, uint32_t t, hg_devaddr lo, hg_devaddr hi)
{
    const graph_region *r = g->regions;
    while (t != NONE && r[t].maxhi > lo) {
        m->steps++;
        if (r[t].lo >= hi) {
            t = r[t].left;
            continue;
        }
        /* t starts before hi, and so does every record in its left subtree */
        if (r[t].hi > lo || (r[t].left != NONE && r[r[t].left].maxhi > lo))
            return true;
        t = r[t].right;
    }
    return false;
}

/* Bytes [lo, hi) are being written: no read record keeps them. */
static int reads_remove(graph *g, graph_map *m, hg_devaddr lo, hg_devaddr hi)
{
    uint64_t entries = 0;
    uint32_t spanning = count_spanning(g, m, m->reads, lo, hi, &entries);
    if (reserve_regions(g, spanning) != 0 || reserve_readers(m, entries) != 0)
        return HG_ENOMEM;
    recent_forget(m);
    uint32_t before, mid, after, pieces = NONE; /* every piece starts at hi */
    map_split(g, READS, m->reads, lo, &before, &mid);
    map_split(g, READS, mid, hi, &mid, &after);
    trim_before(g, m, before, lo, hi, &pieces);
    trim_inside(g, m, mid, hi, &pieces);
    m->reads = map_merge(g, READS, before, map_merge(g, READS, pieces, after));
    return 0;
}

/* ---------------------------------------------------------- dependencies */

static int dep_add(graph_map *m, uint32_t task)
{
    if (m->seen[task] == m->epoch)
        return 0;
    int rc = graph_grow(&m->deps, &m->cap_deps, (uint64_t)m->ndeps + 1, sizeof(uint32_t));
    if (rc != 0)
        return rc;
    m->seen[task] = m->epoch;
    m->deps[m->ndeps++] = task;
    return 0;
}

/* Adds [lo, hi) to m->runs, merging; calls come in order of lo. */
static int run_add(graph_map *m, hg_devaddr lo, hg_devaddr hi)
{
    byte_run *last = m->nruns ? &m->runs[m->nruns - 1] : NULL;
    if (last != NULL && lo <= last->hi) {
        if (hi > last->hi)
            last->hi = hi;
        return 0;
    }
    int rc = graph_grow(&m->runs, &m->cap_runs, (uint64_t)m->nruns + 1, sizeof(byte_run));
    if (rc == 0)
        m->runs[m->nruns++] = (byte_run){lo, hi};
    return rc;
}

/* Read records of tree t overlapping [lo, hi), in order of lo: a writer
 * there depends on their readers, and m->runs gets the bytes they cover. */
static int reads_deps(graph *g, graph_map *m, uint32_t t, hg_devaddr lo, hg_devaddr hi)
{
    if (t == NONE || g->regions[t].maxhi <= lo)
        return 0;
    m->steps++;
    const graph_region *r = &g->regions[t];
    int rc = reads_deps(g, m, r->left, lo, hi);
    if (rc != 0 || r->lo >= hi) /* the right subtree starts at hi or later */
        return rc;
    if (r->hi > lo) {
        rc = dep_add(m, r->task);
        for (uint32_t l = r->more; rc == 0 && l != NONE; l = m->readers[l].next) {
            m->steps++;
            rc = dep_add(m, m->readers[l].task);
        }
        if (rc == 0)
            rc = run_add(m, r->lo > lo ? r->lo : lo, r->hi < hi ? r->hi : hi);
    }
    return rc == 0 ? reads_deps(g, m, r->right, lo, hi) : rc;
}

/* True if m->runs covers [lo, hi).  *i, a run index, only moves forward:
 * calls come in order of lo. */
static bool runs_cover(const graph_map *m, uint32_t *i, hg_devaddr lo, hg_devaddr hi)
{
    while (*i < m->nruns && m->runs[*i].hi <= lo)
        (*i)++;
    return *i < m->nruns && m->runs[*i].lo <= lo && m->runs[*i].hi >= hi;
}

/* Write records of tree t overlapping a's range, in order: a reader depends
 * on their writers, a writer on those with bytes there no reader read. */
static int writes_deps(graph *g, graph_map *m, uint32_t t, const graph_targ *a, uint32_t *run)
{
    if (t == NONE)
        return 0;
    m->steps++;
    const graph_region *r = &g->regions[t];
    int rc = 0;
    if (r->lo > a->lo) /* left records end by r->lo */
        rc = writes_deps(g, m, r->left, a, run);
    if (rc == 0 && r->lo < a->hi && r->hi > a->lo) {
        hg_devaddr lo = r->lo > a->lo ? r->lo : a->lo, hi = r->hi < a->hi ? r->hi : a->hi;
        if (!a->write || !runs_cover(m, run, lo, hi))
            rc = dep_add(m, r->task);
    }
    if (rc == 0 && r->hi < a->hi) /* right records start at r->hi or later */
        rc = writes_deps(g, m, r->right, a, run);
    return rc;
}

/* Adds the tasks an access of a's (non-empty) range must follow. */
static int arg_deps(graph *g, graph_map *m, const graph_targ *a)
{
    uint32_t run = 0;
    m->nruns = 0;
    int rc = a->write ? reads_deps(g, m, m->reads, a->lo, a->hi) : 0;
    return rc == 0 ? writes_deps(g, m, m->writes, a, &run) : rc;
}

/* Starts a submit's marks: an epoch no seen[] slot holds yet. */
static void epoch_next(graph_map *m)
{
    if (++m->epoch == 0) { /* wrapped: forget every old mark */
        memset(m->seen, 0, (size_t)m->cap_seen * sizeof m->seen[0]);
        m->epoch = 1;
    }
    m->ndeps = 0;
}

/* ---------------------------------------------------------------- update */

/* Task `task` writes a's range. */
static int map_write(graph *g, graph_map *m, const graph_targ *a, uint32_t task)
{
    int rc = 0;
    if (reads_overlap(g, m, m->reads, a->lo, a->hi))
        rc = reads_remove(g, m, a->lo, a->hi);
    if (rc == 0)
        rc = reserve_regions(g, 3);
    if (rc == 0)
        writes_replace(g, m, a, task);
    return rc;
}

/* A recent read record of exactly [lo, hi), or NONE. */
static uint32_t recent_find(const graph *g, const graph_map *m, hg_devaddr lo, hg_devaddr hi)
{
    for (int i = 0; i < RECENT_READS; i++) {
        uint32_t t = m->recent[i];
        if (t != NONE && g->regions[t].lo == lo && g->regions[t].hi == hi)
            return t;
    }
    return NONE;
}

/* Task `task` reads a's range: it joins a recent read record of the same
 * bytes (O(1): a fan of readers is one record), else gets a record of its
 * own; nothing else changes. */
static int map_read(graph *g, graph_map *m, const graph_targ *a, uint32_t task)
{
    uint32_t rec = recent_find(g, m, a->lo, a->hi);
    if (rec != NONE) {
        graph_region *r = &g->regions[rec];
        m->steps++;
        if ((r->more != NONE ? m->readers[r->more].task : r->task) == task)
            return 0; /* the task reads these bytes twice */
        if (reserve_readers(m, 1) != 0)
            return HG_ENOMEM;
        r->more = reader_new(m, task, r->more);
        return 0;
    }
    if (reserve_regions(g, 1) != 0)
        return HG_ENOMEM;
    rec = region_new(g, m, a->lo, a->hi, task);
    tree_insert(g, m, &m->reads, rec);
    m->nreads++;
    m->recent[m->recent_next] = rec;
    m->recent_next = (m->recent_next + 1) % RECENT_READS;
    return 0;
}

/* Applies the task's accesses: reads first, so that its own writes then
 * remove the read records where it both reads and writes. */
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

/* ------------------------------------------------------- for graph.c */

int graph_map_reserve(graph *g, hg_err *e)
{
    const uint32_t id = g->ntasks;
    graph_map *m = map_of(g);
    if (m == NULL)
        return err_set(e, HG_ENOMEM, "task %u: cannot allocate the tensor map", id);
    if (m->broken)
        return err_set(e, HG_ENOMEM, "task %u: the graph ran out of memory earlier", id);
    if (m->seen != NULL && id < m->cap_seen)
        return 0; /* the common case: nothing to grow, nothing to clear */
    uint32_t old = m->cap_seen;
    int rc = graph_grow(&m->seen, &m->cap_seen, (uint64_t)id + 1, sizeof(uint32_t));
    if (rc != 0)
        return err_set(e, rc, "task %u: cannot grow the graph: %s", id, hg_strerror(rc));
    /* New slots must not look marked. */
    memset(m->seen + old, 0, (size_t)(m->cap_seen - old) * sizeof m->seen[0]);
    m->mark_extends++;
    return 0;
}

int graph_map_deps(graph *g, const graph_targ *args, uint32_t nargs, const hg_task_id *deps,
                   uint32_t ndeps, const uint32_t **out, uint32_t *nout)
{
    graph_map *m = g->scratch;
    epoch_next(m);
    int rc = 0;
    for (uint32_t i = 0; i < ndeps && rc == 0; i++)
        rc = dep_add(m, deps[i]);
    for (uint32_t i = 0; i < nargs && rc == 0; i++)
        if (args[i].lo < args[i].hi)
            rc = arg_deps(g, m, &args[i]);
    *out = m->deps;
    *nout = m->ndeps;
    return rc;
}

int graph_map_update(graph *g, const graph_targ *args, uint32_t nargs, uint32_t task)
{
    graph_map *m = g->scratch;
    int rc = map_update(g, m, args, nargs, task);
    if (rc != 0)
        m->broken = true;
    return rc;
}

void graph_map_reset(graph *g)
{
    graph_map *m = g->scratch;
    g->nregions = 0;
    if (m != NULL) {
        /* The epoch keeps counting: marks from before the reset never equal it. */
        m->writes = m->reads = m->free_list = m->free_readers = NONE;
        m->nwrites = m->nreads = m->ndeps = m->nruns = m->nreaders = 0;
        recent_forget(m);
        m->steps = m->mark_extends = 0;
        m->broken = false;
    }
}

void graph_map_free(graph *g)
{
    graph_map *m = g->scratch;
    if (m != NULL) {
        free(m->seen);
        free(m->deps);
        free(m->runs);
        free(m->readers);
        free(m);
    }
    free(g->regions);
    g->scratch = NULL;
    g->regions = NULL;
}

void graph_map_stats(const graph *g, graph_map_counts *out)
{
    const graph_map *m = g->scratch;
    *out = (graph_map_counts){0};
    if (m != NULL)
        *out = (graph_map_counts){m->nwrites, m->nreads, m->steps, m->mark_extends};
}
