/*
 * granules.c: the tensor map's narrow read records, by granule: a hash
 * table from granule to a list of the records inside it.
 *
 * Why not the read tree: at 10^6 scattered 64-byte reads (frag) the read
 * tree is ~47 MB, and each new record's insert waits for one or two misses
 * to memory at a random leaf, then shifts the leaf's slots: ~60% of the
 * map's time there, and the reason frag's cost per task grew with N.  Here
 * a new record touches its granule's slot (the table is 16 bytes a slot,
 * at most two slots a granule held: ~2 MB at frag's 10^6 tasks, which the
 * caches keep) and the next free entry (records are handed out in order,
 * so a run of new records is a sequential write).  What is paid instead:
 * a write's cut walks each of its granules' lists, a miss per record; but
 * a record a cut overlaps is an edge of that write or goes with it, and one
 * it passes over leaves for the read tree (the caller's `passed`), so no
 * record is walked past twice.
 *
 * Layout: slot[] is open addressing with linear probing, keyed by granule
 * + 1 (0: empty), at most half full; a slot keeps its granule until a
 * drain or a reset, even once its list empties.  used[] lists the slots
 * with a key, so a reset or a drain clears only those.  ent[] holds the
 * records with their list links; a freed entry goes on the free list.
 *
 * Cost: add is O(1) expected (a probe sequence of ~1.5 slots at half load;
 * the table doubles when half full, O(granules) rehash, amortized O(1));
 * visit and cut are O(granules spanned + records in them); drain is
 * O(records + granules held).  Memory: 32 bytes a record ever held at once,
 * 16 bytes a slot (two per granule held, at most) and 4 a granule held.
 *
 * Invariants: every record lies in one granule and is on that granule's
 * list only; a slot's list is empty or its records lie in its granule;
 * live counts the records on lists; no slot in used[] is listed twice.
 */
#include <stdlib.h>

#include "graph/granules.h"
#include "graph/tensor_map.h"

#define NONE GRAPH_TREE_NONE

struct graph_gran_slot {
    uint64_t key;  /* granule + 1; 0: empty */
    uint32_t head; /* newest record, or NONE */
    uint32_t pad;
};

struct graph_gran_entry {
    graph_tree_entry e;
    uint32_t next; /* the granule's next record, or the free list's */
    uint32_t pad;
};

typedef graph_gran_slot slot_t;
typedef graph_gran_entry entry_t;

void graph_granules_init(graph_granules *g)
{
    *g = (graph_granules){.free = NONE};
}

void graph_granules_free(graph_granules *g)
{
    free(g->slot);
    free(g->used);
    free(g->ent);
    graph_granules_init(g);
}

static uint32_t slot_hash(const graph_granules *g, uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - g->bits));
}

/* The slot holding granule `gran`, or NONE. */
static uint32_t slot_find(graph_granules *g, uint64_t gran)
{
    if (g->slot == NULL)
        return NONE;
    const uint64_t key = gran + 1;
    for (uint32_t i = slot_hash(g, key);; i = (i + 1) & (g->cap - 1)) {
        g->steps++;
        if (g->slot[i].key == key)
            return i;
        if (g->slot[i].key == 0)
            return NONE;
    }
}

/* The slot where `key` goes in a table that lacks it. */
static uint32_t slot_free_for(const graph_granules *g, uint64_t key)
{
    uint32_t i = slot_hash(g, key);
    while (g->slot[i].key != 0)
        i = (i + 1) & (g->cap - 1);
    return i;
}

/* Doubles the table (64 slots first), moving every granule held. */
static int slots_grow(graph_granules *g)
{
    const uint32_t bits = g->cap ? g->bits + 1 : 6;
    if (bits > 31)
        return HG_ELIMIT;
    graph_granules bigger = *g;
    bigger.bits = bits;
    bigger.cap = 1u << bits;
    bigger.slot = calloc(bigger.cap, sizeof *bigger.slot);
    if (bigger.slot == NULL)
        return HG_ENOMEM;
    for (uint32_t k = 0; k < g->nused; k++) {
        const slot_t *s = &g->slot[g->used[k]];
        const uint32_t i = slot_free_for(&bigger, s->key);
        bigger.slot[i] = *s;
        g->used[k] = i;
    }
    free(g->slot);
    g->slot = bigger.slot;
    g->cap = bigger.cap;
    g->bits = bigger.bits;
    return 0;
}

/* The slot of granule `gran`, taken if no slot holds it.  Changes nothing
 * on failure. */
static int slot_take(graph_granules *g, uint64_t gran, uint32_t *out)
{
    uint32_t i = slot_find(g, gran);
    if (i != NONE) {
        *out = i;
        return 0;
    }
    int rc = graph_grow(&g->used, &g->cap_used, (uint64_t)g->nused + 1, sizeof *g->used);
    if (rc == 0 && ((uint64_t)g->nused + 1) * 2 > g->cap)
        rc = slots_grow(g);
    if (rc != 0)
        return rc;
    i = slot_free_for(g, gran + 1);
    g->slot[i] = (slot_t){gran + 1, NONE, 0};
    g->used[g->nused++] = i;
    *out = i;
    return 0;
}

/* Room for one more entry.  Moves ent[]: indices only across it. */
static int entry_reserve(graph_granules *g)
{
    if (g->free != NONE)
        return 0;
    return graph_grow(&g->ent, &g->cap_ent, (uint64_t)g->nent + 1, sizeof *g->ent);
}

/* A new entry holding e, in front of list `next`; needs entry_reserve. */
static uint32_t entry_new(graph_granules *g, const graph_tree_entry *e, uint32_t next)
{
    uint32_t i = g->free;
    if (i != NONE)
        g->free = g->ent[i].next;
    else
        i = g->nent++;
    g->ent[i] = (entry_t){*e, next, 0};
    g->live++;
    return i;
}

/* Takes entry i, after `prev` (NONE: first) on slot s's list, off it. */
static void entry_unlink(graph_granules *g, uint32_t s, uint32_t prev, uint32_t i)
{
    const uint32_t next = g->ent[i].next;
    if (prev == NONE)
        g->slot[s].head = next;
    else
        g->ent[prev].next = next;
    g->ent[i].next = g->free;
    g->free = i;
    g->live--;
}

int graph_granules_add(graph_granules *g, const graph_tree_entry *e, uint32_t *at)
{
    uint32_t s;
    int rc = slot_take(g, e->lo >> GRAPH_GRAN_SHIFT, &s);
    if (rc == 0)
        rc = entry_reserve(g);
    if (rc != 0)
        return rc; /* a slot taken stays, with its list as it was: harmless */
    *at = entry_new(g, e, g->slot[s].head);
    g->slot[s].head = *at;
    g->steps++;
    return 0;
}

graph_tree_entry *graph_granules_entry(graph_granules *g, uint32_t at)
{
    return &g->ent[at].e;
}

static bool overlaps(const graph_tree_entry *e, hg_devaddr lo, hg_devaddr hi)
{
    return e->lo < hi && e->hi > lo;
}

int graph_granules_visit(graph_granules *g, hg_devaddr lo, hg_devaddr hi, graph_tree_visit_fn fn,
                         void *ctx)
{
    if (g->live == 0)
        return 0;
    for (uint64_t gran = lo >> GRAPH_GRAN_SHIFT; gran <= (hi - 1) >> GRAPH_GRAN_SHIFT; gran++) {
        const uint32_t s = slot_find(g, gran);
        for (uint32_t i = s == NONE ? NONE : g->slot[s].head; i != NONE; i = g->ent[i].next) {
            g->steps++;
            int rc = overlaps(&g->ent[i].e, lo, hi) ? fn(ctx, &g->ent[i].e) : 0;
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Cuts [lo, hi) out of granule slot s's records. */
static int cut_slot(graph_granules *g, uint32_t s, hg_devaddr lo, hg_devaddr hi,
                    const graph_gran_cut_fns *fns, bool *changed)
{
    uint32_t prev = NONE;
    for (uint32_t i = g->slot[s].head; i != NONE;) {
        graph_tree_entry *e = &g->ent[i].e;
        const uint32_t next = g->ent[i].next;
        g->steps++;
        if (!overlaps(e, lo, hi)) {
            int rc = fns->passed(fns->ctx, e);
            if (rc != 0)
                return rc;
            entry_unlink(g, s, prev, i);
        } else if (e->lo >= lo && e->hi <= hi) {
            fns->gone(fns->ctx, e);
            entry_unlink(g, s, prev, i);
        } else if (e->lo < lo && e->hi > hi) {
            uint32_t more;
            int rc = entry_reserve(g);
            if (rc == 0)
                rc = fns->split(fns->ctx, &g->ent[i].e, &more);
            if (rc != 0)
                return rc;
            e = &g->ent[i].e; /* entry_reserve may have moved it */
            const graph_tree_entry piece = {hi, e->hi, e->task, more};
            e->hi = lo;
            prev = entry_new(g, &piece, next); /* after i: apart from the cut, not walked */
            g->ent[i].next = prev;
        } else {
            if (e->lo < lo)
                e->hi = lo;
            else
                e->lo = hi;
            prev = i;
        }
        *changed = true;
        i = next;
    }
    return 0;
}

int graph_granules_cut(graph_granules *g, hg_devaddr lo, hg_devaddr hi,
                       const graph_gran_cut_fns *fns, bool *changed)
{
    *changed = false;
    if (g->live == 0)
        return 0;
    for (uint64_t gran = lo >> GRAPH_GRAN_SHIFT; gran <= (hi - 1) >> GRAPH_GRAN_SHIFT; gran++) {
        const uint32_t s = slot_find(g, gran);
        int rc = s == NONE ? 0 : cut_slot(g, s, lo, hi, fns, changed);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Forgets every granule and entry; the lists must be empty or unwanted. */
static void forget(graph_granules *g)
{
    for (uint32_t k = 0; k < g->nused; k++)
        g->slot[g->used[k]] = (slot_t){0, NONE, 0};
    g->nused = g->nent = g->live = 0;
    g->free = NONE;
}

int graph_granules_drain(graph_granules *g, graph_tree_visit_fn fn, void *ctx)
{
    for (uint32_t k = 0; k < g->nused && g->live > 0; k++) {
        const uint32_t s = g->used[k];
        while (g->slot[s].head != NONE) {
            g->steps++;
            int rc = fn(ctx, &g->ent[g->slot[s].head].e);
            if (rc != 0)
                return rc;
            entry_unlink(g, s, NONE, g->slot[s].head);
        }
    }
    forget(g);
    return 0;
}

void graph_granules_reset(graph_granules *g)
{
    forget(g);
    g->steps = 0;
}
