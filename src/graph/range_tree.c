/*
 * range_tree.c: B+-trees of byte ranges for the tensor map (tensor_map.c):
 * ordered by lo, each inner slot knowing its subtree's first lo and largest
 * hi, so a range query skips every subtree that ends before it or starts
 * after it.
 *
 * Why a wide tree: the map used to be a treap of 48-byte records, whose
 * depth reached ~30 at 10^6 records and whose every visit past ~32k records
 * was a cache miss (scattered reads: 7x slower per task from 10^3 to 10^6).
 * Here a node holds GRAPH_TREE_FAN (16) slots, its keys in arrays of their
 * own (the 16 lo of a node span three cache lines), and nodes are cache-line
 * aligned in one pool: a search at 10^6 entries visits 5-6 nodes (6 on frag at 10^6 tasks).
 *
 * Layout: a leaf's slots are entries (lo, hi, task, reader list); an inner
 * node's slots are children (their first lo, their largest hi, their node).
 * Leaves in order hold the entries sorted by lo.  A full node splits in
 * half, or, when the new slot is its last (entries arriving in order), keeps
 * its slots and starts a sibling with the new one: in-order inserts fill
 * nodes.  Removal never merges nodes: a node that empties is freed, a root
 * with one child hands over to it.
 *
 * Cost, with m the entries inserted since the tree was initialized: its
 * height is at most about 1 + log_7(m) (a node splits only when full, and
 * leaves at least 8 slots on each side, or, the last node of its level, 16
 * and 1: either way 7 more slot inserts come before it splits again, so each
 * level has at most 1/7 as many nodes as slot inserts below); an insert
 * visits one node per level and splits at most one per level; a query or a
 * cut visits O(height) nodes per entry it reports or changes, plus the two
 * paths to its ends (a subtree it enters overlaps it by its lo and largest
 * hi, so it holds such an entry or lies on those paths).  Every node visited
 * counts in pool.steps, but graph_tree_prefetch's (pool.prefetched: one per
 * level below the root per entry, visited again by the inserts that follow).
 *
 * Invariants: leaves hold entries in order of lo; an inner slot's lo is its
 * child's first lo and its hi the largest hi below it; no node but the root
 * is empty; pins name live leaf slots.  A cut keeps lo order without moving
 * entries: an entry across lo keeps its start, and every entry starting in
 * [lo, hi) either goes or now starts at hi, where nothing that started
 * before hi could follow it.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/range_tree.h"

#define NONE GRAPH_TREE_NONE
#define FAN  GRAPH_TREE_FAN

struct graph_tree_node {
    _Alignas(64) uint32_t n; /* slots in use */
    uint32_t leaf;
    hg_devaddr lo[FAN]; /* leaf: entries' lo; inner: children's first lo */
    hg_devaddr hi[FAN]; /* leaf: entries' hi; inner: children's largest hi */
    uint32_t ref[FAN];  /* leaf: entries' task; inner: child nodes; ref[0] links a freed node */
    uint32_t more[FAN]; /* leaf: entries' reader list */
};

typedef graph_tree_node node;

/* Asks for all of node a's cache lines at once: a visit then waits for
 * about one miss, not one per line it reads in turn (at 10^6 entries the
 * lower levels are out of cache on every visit). */
static void node_prefetch(const node *nodes, uint32_t a)
{
    const char *b = (const char *)&nodes[a];
    for (size_t off = 0; off < sizeof(node); off += 64)
        __builtin_prefetch(b + off);
}

/* --------------------------------------------------------------- the pool */

static int pool_grow(graph_tree_pool *p, uint64_t need)
{
    uint64_t cap = p->cap ? p->cap : 16;
    while (cap < need)
        cap *= 2;
    if (cap >= NONE)
        return HG_ELIMIT;
    size_t off = p->raw ? (size_t)((char *)p->node - (char *)p->raw) : 0;
    /* realloc, not a fresh aligned block: a large block moves by remapping
     * its pages, where a copy would first-touch as many new ones. */
    char *raw = realloc(p->raw, (size_t)cap * sizeof(node) + 64);
    if (raw == NULL)
        return HG_ENOMEM;
    size_t to = (64 - (uintptr_t)raw % 64) % 64;
    if (p->raw != NULL && to != off)
        memmove(raw + to, raw + off, (size_t)p->used * sizeof(node));
    p->raw = raw;
    p->node = (node *)(void *)(raw + to);
    p->cap = (uint32_t)cap;
    return 0;
}

int graph_tree_reserve(graph_tree_pool *p, const graph_tree *t)
{
    /* An insert splits at most one node per level and may add a root. */
    uint64_t need = (uint64_t)t->height + 1;
    if ((uint64_t)(p->cap - p->used) + p->nfree >= need)
        return 0;
    return pool_grow(p, (uint64_t)p->used + need);
}

static uint32_t node_new(graph_tree_pool *p, bool leaf)
{
    uint32_t i = p->free;
    if (i != NONE) {
        p->free = p->node[i].ref[0];
        p->nfree--;
    } else {
        i = p->used++;
    }
    p->node[i].n = 0;
    p->node[i].leaf = leaf;
    return i;
}

static void node_free(graph_tree_pool *p, uint32_t i)
{
    p->node[i].ref[0] = p->free;
    p->free = i;
    p->nfree++;
}

void graph_tree_pool_reset(graph_tree_pool *p)
{
    p->used = p->nfree = 0;
    p->free = NONE;
    p->steps = p->prefetched = p->batches = 0;
}

void graph_tree_pool_free(graph_tree_pool *p)
{
    free(p->raw);
    *p = (graph_tree_pool){.free = NONE};
}

uint32_t graph_tree_pool_live(const graph_tree_pool *p)
{
    return p->used - p->nfree;
}

void graph_tree_init(graph_tree *t)
{
    t->root = NONE;
    t->height = t->count = 0;
    for (int k = 0; k < GRAPH_TREE_PINS; k++)
        t->pin[k] = (graph_tree_pos){NONE, 0};
}

/* ------------------------------------------------------------- one node */

static hg_devaddr node_maxhi(const node *a)
{
    hg_devaddr h = 0;
    for (uint32_t i = 0; i < a->n; i++)
        h = a->hi[i] > h ? a->hi[i] : h;
    return h;
}

/* The first slot whose lo is past key (a->n if none). */
static uint32_t upper(const node *a, hg_devaddr key)
{
    uint32_t i = 0;
    while (i < a->n && a->lo[i] <= key)
        i++;
    return i;
}

/* Moves a's slots from k on into the empty node b; pins follow. */
static void move_tail(graph_tree *t, node *nodes, uint32_t a, uint32_t b, uint32_t k)
{
    node *A = &nodes[a], *B = &nodes[b];
    uint32_t m = A->n - k;
    memcpy(B->lo, A->lo + k, m * sizeof A->lo[0]);
    memcpy(B->hi, A->hi + k, m * sizeof A->hi[0]);
    memcpy(B->ref, A->ref + k, m * sizeof A->ref[0]);
    memcpy(B->more, A->more + k, m * sizeof A->more[0]);
    B->n = m;
    A->n = k;
    for (int p = 0; p < GRAPH_TREE_PINS && A->leaf; p++)
        if (t->pin[p].node == a && t->pin[p].slot >= k)
            t->pin[p] = (graph_tree_pos){b, t->pin[p].slot - k};
}

/* Opens slot pos of node a (not full); pins follow. */
static void open_slot(graph_tree *t, node *A, uint32_t a, uint32_t pos)
{
    uint32_t m = A->n - pos;
    memmove(A->lo + pos + 1, A->lo + pos, m * sizeof A->lo[0]);
    memmove(A->hi + pos + 1, A->hi + pos, m * sizeof A->hi[0]);
    memmove(A->ref + pos + 1, A->ref + pos, m * sizeof A->ref[0]);
    memmove(A->more + pos + 1, A->more + pos, m * sizeof A->more[0]);
    A->n++;
    for (int p = 0; p < GRAPH_TREE_PINS && A->leaf; p++)
        if (t->pin[p].node == a && t->pin[p].slot >= pos)
            t->pin[p].slot++;
}

/* Puts slot s at position pos of node a, splitting a when full; returns the
 * new right sibling (NONE if none) and in *at where s went. */
static uint32_t node_put(graph_tree_pool *p, graph_tree *t, uint32_t a, uint32_t pos,
                         bool rightmost, const graph_tree_entry *s, graph_tree_pos *at)
{
    uint32_t sib = NONE;
    if (p->node[a].n == FAN) {
        sib = node_new(p, p->node[a].leaf);
        /* Arrivals in order fill nodes; elsewhere, halves (else inserts in
         * descending order into one gap would make a node per entry). */
        uint32_t k = rightmost && pos == FAN ? FAN : FAN / 2;
        move_tail(t, p->node, a, sib, k);
        if (pos > k || k == FAN) {
            a = sib;
            pos -= k;
        }
    }
    node *A = &p->node[a];
    open_slot(t, A, a, pos);
    A->lo[pos] = s->lo;
    A->hi[pos] = s->hi;
    A->ref[pos] = s->task;
    A->more[pos] = s->more;
    *at = (graph_tree_pos){a, pos};
    return sib;
}

/* ---------------------------------------------------------------- insert */

/* Inserts e below node a (the last node of its level when `rightmost`);
 * returns a's new right sibling, or NONE. */
static uint32_t insert_below(graph_tree_pool *p, graph_tree *t, uint32_t a, bool rightmost,
                             const graph_tree_entry *e, graph_tree_pos *at)
{
    p->steps++;
    uint32_t i = upper(&p->node[a], e->lo);
    if (p->node[a].leaf)
        return node_put(p, t, a, i, rightmost, e, at);
    i = i > 0 ? i - 1 : 0;
    const uint32_t c = p->node[a].ref[i];
    node_prefetch(p->node, c);
    const uint32_t sib = insert_below(p, t, c, rightmost && i + 1 == p->node[a].n, e, at);
    node *A = &p->node[a];
    A->lo[i] = p->node[c].lo[0];
    if (sib == NONE) {
        A->hi[i] = e->hi > A->hi[i] ? e->hi : A->hi[i];
        return NONE;
    }
    A->hi[i] = node_maxhi(&p->node[c]);
    graph_tree_entry s = {p->node[sib].lo[0], node_maxhi(&p->node[sib]), sib, NONE};
    graph_tree_pos unused;
    return node_put(p, t, a, i + 1, rightmost, &s, &unused);
}

graph_tree_pos graph_tree_insert(graph_tree_pool *p, graph_tree *t, const graph_tree_entry *e)
{
    if (t->root == NONE) {
        t->root = node_new(p, true);
        t->height = 1;
    }
    node_prefetch(p->node, t->root);
    graph_tree_pos at;
    const uint32_t sib = insert_below(p, t, t->root, true, e, &at);
    if (sib != NONE) { /* the root split: a new root above both halves */
        const uint32_t r = node_new(p, false), old = t->root;
        node *R = &p->node[r];
        R->n = 2;
        R->lo[0] = p->node[old].lo[0];
        R->hi[0] = node_maxhi(&p->node[old]);
        R->ref[0] = old;
        R->lo[1] = p->node[sib].lo[0];
        R->hi[1] = node_maxhi(&p->node[sib]);
        R->ref[1] = sib;
        t->root = r;
        t->height++;
    }
    t->count++;
    return at;
}

void graph_tree_prefetch(graph_tree_pool *p, const graph_tree *t, const hg_devaddr *keys,
                         uint32_t n)
{
    uint32_t at[GRAPH_TREE_BATCH];
    n = n < GRAPH_TREE_BATCH ? n : GRAPH_TREE_BATCH;
    /* A pool that fits the caches would pay the pass and gain nothing (the
     * map of 10^3 frag tasks built ~20% slower with it). */
    if (t->root == NONE || n == 0 || p->used < GRAPH_TREE_PREFETCH_FROM)
        return;
    p->batches++;
    node_prefetch(p->node, t->root);
    for (uint32_t i = 0; i < n; i++)
        at[i] = t->root;
    /* One level for every key, then the next: each level's n misses are in
     * flight together.  The choice of child is insert_below's. */
    for (uint32_t level = t->height; level > 1; level--)
        for (uint32_t i = 0; i < n; i++) {
            const node *A = &p->node[at[i]];
            const uint32_t k = upper(A, keys[i]);
            at[i] = A->ref[k > 0 ? k - 1 : 0];
            node_prefetch(p->node, at[i]);
            p->prefetched++;
        }
}

/* ----------------------------------------------------------------- query */

static int visit_below(graph_tree_pool *p, uint32_t a, hg_devaddr lo, hg_devaddr hi,
                       graph_tree_visit_fn fn, void *ctx)
{
    p->steps++;
    const node *A = &p->node[a];
    for (uint32_t i = 0; i < A->n && A->lo[i] < hi; i++) {
        if (A->hi[i] <= lo)
            continue;
        int rc;
        if (A->leaf) {
            graph_tree_entry e = {A->lo[i], A->hi[i], A->ref[i], A->more[i]};
            rc = fn(ctx, &e);
        } else {
            node_prefetch(p->node, A->ref[i]);
            rc = visit_below(p, A->ref[i], lo, hi, fn, ctx);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

int graph_tree_visit(graph_tree_pool *p, const graph_tree *t, hg_devaddr lo, hg_devaddr hi,
                     graph_tree_visit_fn fn, void *ctx)
{
    return t->root == NONE || lo >= hi ? 0 : visit_below(p, t->root, lo, hi, fn, ctx);
}

/* ------------------------------------------------------------------- cut */

typedef struct cut_job {
    hg_devaddr lo, hi;
    const graph_tree_entry *put; /* takes the first dropped entry's slot, if any */
    graph_tree_cut_fn fn;
    void *ctx;
    uint32_t changed, dropped;
} cut_job;

/* Cuts [lo, hi) out of leaf A's entries, dropping those inside. */
static void cut_leaf(node *A, cut_job *j)
{
    uint32_t w = 0;
    for (uint32_t i = 0; i < A->n; i++) {
        hg_devaddr lo = A->lo[i], hi = A->hi[i];
        if (lo < j->hi && hi > j->lo) {
            const graph_tree_entry e = {lo, hi, A->ref[i], A->more[i]};
            j->changed++;
            if (lo < j->lo) {
                if (hi > j->hi)
                    j->fn(j->ctx, &e, true);
                hi = j->lo;
            } else if (hi > j->hi) {
                lo = j->hi;
            } else {
                j->fn(j->ctx, &e, false);
                if (j->put == NULL) {
                    j->dropped++;
                    continue;
                }
                lo = j->put->lo; /* disjoint entries: nothing before starts at lo or later */
                hi = j->put->hi;
                A->ref[i] = j->put->task;
                A->more[i] = j->put->more;
                j->put = NULL;
            }
        }
        A->lo[w] = lo;
        A->hi[w] = hi;
        A->ref[w] = A->ref[i];
        A->more[w] = A->more[i];
        w++;
    }
    A->n = w;
}

static void cut_below(graph_tree_pool *p, uint32_t a, cut_job *j)
{
    p->steps++;
    node *A = &p->node[a];
    if (A->leaf) {
        cut_leaf(A, j);
        return;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < A->n; i++) {
        const uint32_t c = A->ref[i];
        hg_devaddr lo = A->lo[i], hi = A->hi[i];
        if (lo >= j->hi && w == i) { /* nothing further overlaps, nothing moved */
            w = A->n;
            break;
        }
        if (lo < j->hi && hi > j->lo) {
            cut_below(p, c, j);
            if (p->node[c].n == 0) {
                node_free(p, c);
                continue;
            }
            lo = p->node[c].lo[0];
            hi = node_maxhi(&p->node[c]);
        }
        A->lo[w] = lo;
        A->hi[w] = hi;
        A->ref[w] = c;
        w++;
    }
    A->n = w;
}

uint32_t graph_tree_cut(graph_tree_pool *p, graph_tree *t, hg_devaddr lo, hg_devaddr hi,
                        const graph_tree_entry *put, bool *placed, graph_tree_cut_fn fn, void *ctx)
{
    *placed = false;
    if (t->root == NONE || lo >= hi)
        return 0;
    cut_job j = {lo, hi, put, fn, ctx, 0, 0};
    cut_below(p, t->root, &j);
    *placed = put != NULL && j.put == NULL;
    if (j.changed == 0)
        return 0;
    t->count -= j.dropped;
    while (!p->node[t->root].leaf && p->node[t->root].n == 1) {
        const uint32_t old = t->root;
        t->root = p->node[old].ref[0];
        node_free(p, old);
        t->height--;
    }
    if (p->node[t->root].n == 0) {
        node_free(p, t->root);
        t->root = NONE;
        t->height = 0;
    }
    for (int k = 0; k < GRAPH_TREE_PINS; k++)
        t->pin[k].node = NONE;
    return j.changed;
}

/* ------------------------------------------------------------------ pins */

void graph_tree_pin(graph_tree *t, uint32_t k, graph_tree_pos at)
{
    t->pin[k] = at;
}

bool graph_tree_pinned(graph_tree_pool *p, const graph_tree *t, uint32_t k, graph_tree_entry *out)
{
    const graph_tree_pos at = t->pin[k];
    if (at.node == NONE)
        return false;
    const node *A = &p->node[at.node];
    *out = (graph_tree_entry){A->lo[at.slot], A->hi[at.slot], A->ref[at.slot], A->more[at.slot]};
    return true;
}

void graph_tree_set_more(graph_tree_pool *p, const graph_tree *t, uint32_t k, uint32_t more)
{
    const graph_tree_pos at = t->pin[k];
    p->node[at.node].more[at.slot] = more;
}
