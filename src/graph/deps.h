/*
 * deps.h: the distinct dependencies of the task being added, for the
 * tensor map; private to src/graph.
 *
 * Per task, a list of distinct earlier tasks.  A task's first
 * GRAPH_DEPS_SCAN dependencies are told apart by a scan of the list: a
 * mark in seen[] (indexed by task) is a cache miss per edge once the graph
 * outgrows the caches, where the list is in cache.  Past that, the list is
 * marked and marks do it in O(1) per dependency.  A mark is the epoch of
 * the task that set it, so starting a task clears nothing (O(1); O(tasks)
 * once every 2^32 tasks, when the epoch wraps).
 */
#ifndef HG_GRAPH_DEPS_H
#define HG_GRAPH_DEPS_H

#include <stdint.h>

#define GRAPH_DEPS_SCAN 32

typedef struct graph_deps {
    uint32_t *list; /* this task's, distinct */
    uint32_t n, cap;
    uint32_t *seen; /* per task: the epoch in which it was last marked */
    uint32_t cap_seen;
    uint32_t epoch;
    uint64_t marks;   /* dependencies told apart by marks, not by a scan */
    uint64_t extends; /* times seen[] grew (and its new slots were zeroed) */
} graph_deps;

/* Room for marks of tasks up to `task`; O(1) when there is.  HG_ENOMEM,
 * HG_ELIMIT: nothing changed. */
int graph_deps_reserve(graph_deps *d, uint32_t task);

/* Starts the next task's list, empty. */
void graph_deps_start(graph_deps *d);

/* Adds `task` (reserved) unless the list holds it.  HG_ENOMEM. */
int graph_deps_add(graph_deps *d, uint32_t task);

void graph_deps_free(graph_deps *d);

#endif
