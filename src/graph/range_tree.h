/*
 * range_tree.h: the tensor map's trees of byte ranges; private to src/graph
 * (range_tree.c states the layout and the costs).
 *
 * A tree holds entries [lo, hi) with a task and a reader list, in order of
 * lo (ties in insertion order); entries may overlap.  Its nodes live in a
 * pool that two trees share.  A pool grows only in graph_tree_reserve, so
 * node indices, never pointers, are kept across calls.
 */
#ifndef HG_GRAPH_RANGE_TREE_H
#define HG_GRAPH_RANGE_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "hostgraph.h"

#define GRAPH_TREE_NONE UINT32_MAX

/* Children per inner node, entries per leaf: a node is 7 cache lines. */
#define GRAPH_TREE_FAN 16

/* Entry positions a tree keeps valid across inserts (graph_tree_pin). */
#define GRAPH_TREE_PINS 4

/* One entry as the tree's callers see it. */
typedef struct graph_tree_entry {
    hg_devaddr lo, hi; /* non-empty */
    uint32_t task;     /* the tensor map's writer or first reader */
    uint32_t more;     /* the tensor map's reader list, or GRAPH_TREE_NONE */
} graph_tree_entry;

/* Where an entry is: a leaf and a slot in it. */
typedef struct graph_tree_pos {
    uint32_t node, slot; /* node GRAPH_TREE_NONE: nowhere */
} graph_tree_pos;

typedef struct graph_tree_node graph_tree_node; /* range_tree.c */

typedef struct graph_tree_pool {
    void *raw;             /* the allocation; nodes start at its first 64-byte boundary */
    graph_tree_node *node; /* cache-line aligned */
    uint32_t used, cap;    /* nodes ever handed out / room for */
    uint32_t free, nfree;  /* freed nodes, linked */
    uint64_t steps;        /* nodes visited, by every operation but graph_tree_prefetch */
    uint64_t prefetched;   /* nodes graph_tree_prefetch visited */
    uint64_t batches;      /* graph_tree_prefetch calls with entries */
} graph_tree_pool;

typedef struct graph_tree {
    uint32_t root;   /* GRAPH_TREE_NONE when empty */
    uint32_t height; /* levels, leaves included; 0 when empty */
    uint32_t count;  /* entries */
    graph_tree_pos pin[GRAPH_TREE_PINS];
} graph_tree;

void graph_tree_init(graph_tree *t);
void graph_tree_pool_free(graph_tree_pool *p);
/* Forgets every node, keeping the memory; the trees must be re-initialized. */
void graph_tree_pool_reset(graph_tree_pool *p);
/* Nodes in use now. */
uint32_t graph_tree_pool_live(const graph_tree_pool *p);

/* Room for one insert into t.  HG_ENOMEM, HG_ELIMIT. */
int graph_tree_reserve(graph_tree_pool *p, const graph_tree *t);

/* Adds e (after the entries starting where it does); needs
 * graph_tree_reserve first.  Returns where it went. */
graph_tree_pos graph_tree_insert(graph_tree_pool *p, graph_tree *t, const graph_tree_entry *e);

/* Entries one graph_tree_prefetch may take. */
#define GRAPH_TREE_BATCH 32

/* Nodes in the pool (~900 KB) from which graph_tree_prefetch works. */
#define GRAPH_TREE_PREFETCH_FROM 2048

/* Asks for the nodes that inserts of n (<= GRAPH_TREE_BATCH) entries
 * starting at keys[] will visit, level by level for all of them at once:
 * their cache misses then overlap, where inserts one after another wait
 * for each in turn (past a few MB a miss costs ~300 ns on the project's
 * host, a few times a whole task's other work).  Does nothing while the
 * pool holds under GRAPH_TREE_PREFETCH_FROM nodes.  Changes nothing; counts
 * its nodes in pool.prefetched, not in pool.steps (the inserts visit them
 * again, from cache). */
void graph_tree_prefetch(graph_tree_pool *p, const graph_tree *t, const hg_devaddr *keys,
                         uint32_t n);

/* Calls fn on every entry overlapping [lo, hi), in order; stops at the first
 * non-zero return, which it returns. */
typedef int (*graph_tree_visit_fn)(void *ctx, const graph_tree_entry *e);
int graph_tree_visit(graph_tree_pool *p, const graph_tree *t, hg_devaddr lo, hg_devaddr hi,
                     graph_tree_visit_fn fn, void *ctx);

/* Removes bytes [lo, hi) from every entry: an entry inside goes (fn(ctx, e,
 * false) first), one across an end is trimmed, and one across both keeps its
 * part before lo while fn(ctx, e, true) gets the entry as it was, whose part
 * from hi on the caller may insert again.  In a tree of disjoint entries,
 * `put` (starting at lo; or NULL) takes the slot of the first entry that
 * goes, and *placed says whether it did (else the caller inserts it): a
 * range written again takes no new node.  Allocates nothing.  Returns the
 * entries changed; any change forgets the pins. */
typedef void (*graph_tree_cut_fn)(void *ctx, const graph_tree_entry *e, bool spans);
uint32_t graph_tree_cut(graph_tree_pool *p, graph_tree *t, hg_devaddr lo, hg_devaddr hi,
                        const graph_tree_entry *put, bool *placed, graph_tree_cut_fn fn, void *ctx);

/* Pin k (< GRAPH_TREE_PINS) keeps `at` valid across inserts, until a cut
 * changes the tree.  graph_tree_pinned copies the entry there into *out
 * (false when the pin holds nothing); graph_tree_set_more changes its
 * reader list. */
void graph_tree_pin(graph_tree *t, uint32_t k, graph_tree_pos at);
bool graph_tree_pinned(graph_tree_pool *p, const graph_tree *t, uint32_t k, graph_tree_entry *out);
void graph_tree_set_more(graph_tree_pool *p, const graph_tree *t, uint32_t k, uint32_t more);

#endif
