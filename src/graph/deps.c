/*
 * deps.c: a task's distinct dependencies (deps.h states the scheme and its
 * costs).
 *
 * Invariants: list[0..n) are distinct; once n > GRAPH_DEPS_SCAN, every
 * task on the list has seen[task] == epoch, and no task off it does.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "graph/deps.h"
#include "graph/tensor_map.h"

int graph_deps_reserve(graph_deps *d, uint32_t task)
{
    if (d->seen != NULL && task < d->cap_seen)
        return 0; /* the common case: nothing to grow, nothing to clear */
    const uint32_t old = d->cap_seen;
    int rc = graph_grow(&d->seen, &d->cap_seen, (uint64_t)task + 1, sizeof(uint32_t));
    if (rc != 0)
        return rc;
    /* New slots must not look marked. */
    memset(d->seen + old, 0, (size_t)(d->cap_seen - old) * sizeof d->seen[0]);
    d->extends++;
    return 0;
}

void graph_deps_start(graph_deps *d)
{
    if (++d->epoch == 0) { /* wrapped: forget every old mark */
        memset(d->seen, 0, (size_t)d->cap_seen * sizeof d->seen[0]);
        d->epoch = 1;
    }
    d->n = 0;
}

static bool known(const graph_deps *d, uint32_t task)
{
    if (d->n > GRAPH_DEPS_SCAN)
        return d->seen[task] == d->epoch;
    for (uint32_t i = 0; i < d->n; i++)
        if (d->list[i] == task)
            return true;
    return false;
}

int graph_deps_add(graph_deps *d, uint32_t task)
{
    if (known(d, task))
        return 0;
    int rc = graph_grow(&d->list, &d->cap, (uint64_t)d->n + 1, sizeof(uint32_t));
    if (rc != 0)
        return rc;
    d->list[d->n++] = task;
    if (d->n > GRAPH_DEPS_SCAN + 1)
        d->seen[task] = d->epoch;
    else if (d->n == GRAPH_DEPS_SCAN + 1) /* from now on, marks: mark the list */
        for (uint32_t i = 0; i < d->n; i++)
            d->seen[d->list[i]] = d->epoch;
    d->marks += d->n > GRAPH_DEPS_SCAN;
    return 0;
}

void graph_deps_free(graph_deps *d)
{
    free(d->list);
    free(d->seen);
    *d = (graph_deps){0};
}
