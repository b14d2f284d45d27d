/*
 * written.c: the written-granule filter (written.h states what it promises
 * and costs).
 *
 * Why it starts late: while the map fits the caches a search is cheap, and
 * a first run of a small graph would pay for 192 KiB of bits; the tensor
 * map starts it once it holds ~900 KB (GRAPH_TREE_PREFETCH_FROM nodes).
 *
 * Invariants: once on and not off, every granule of every write record
 * since the start (and of every record there at the start) has its bit;
 * words[] lists each word of bits that is non-zero, once.
 */
#include <stdlib.h>

#include "graph/granules.h"
#include "graph/written.h"

#define BITS  (1u << 20) /* 128 KiB of bits: 1 GiB of granules unaliased */
#define WORDS (BITS / 64)
#define SHIFT GRAPH_GRAN_SHIFT

static void mark(graph_written *w, hg_devaddr lo, hg_devaddr hi)
{
    const uint64_t g0 = lo >> SHIFT, g1 = (hi - 1) >> SHIFT;
    if (g1 - g0 >= GRAPH_WRITTEN_SPAN) {
        w->off = true;
        return;
    }
    for (uint64_t g = g0; g <= g1; g++) {
        const uint32_t b = (uint32_t)(g % BITS);
        if (w->bits[b / 64] == 0)
            w->words[w->nwords++] = b / 64; /* each word once: at most WORDS */
        w->bits[b / 64] |= (uint64_t)1 << (b % 64);
    }
}

static int mark_record(void *ctx, const graph_tree_entry *e)
{
    graph_written *w = ctx;
    mark(w, e->lo, e->hi);
    return w->off; /* stops the walk */
}

void graph_written_start(graph_written *w, graph_tree_pool *p, const graph_tree *writes)
{
    if (w->bits == NULL) {
        w->bits = calloc(WORDS, sizeof *w->bits);
        w->words = malloc(WORDS * sizeof *w->words);
        if (w->bits == NULL || w->words == NULL) {
            graph_written_free(w);
            w->off = true; /* not asked again until the reset */
            return;
        }
    }
    w->on = true;
    (void)graph_tree_visit(p, writes, 0, UINT64_MAX, mark_record, w);
}

void graph_written_mark(graph_written *w, hg_devaddr lo, hg_devaddr hi)
{
    if (w->on && !w->off)
        mark(w, lo, hi);
}

bool graph_written_none(graph_written *w, hg_devaddr lo, hg_devaddr hi)
{
    if (!w->on || w->off)
        return false;
    const uint64_t g0 = lo >> SHIFT, g1 = (hi - 1) >> SHIFT;
    if (g1 - g0 >= GRAPH_WRITTEN_SPAN)
        return false;
    for (uint64_t g = g0; g <= g1; g++) {
        const uint32_t b = (uint32_t)(g % BITS);
        if (w->bits[b / 64] >> (b % 64) & 1)
            return false;
    }
    w->skips++;
    return true;
}

void graph_written_reset(graph_written *w)
{
    for (uint32_t i = 0; i < w->nwords; i++)
        w->bits[w->words[i]] = 0;
    w->nwords = 0;
    w->on = w->off = false;
    w->skips = 0;
}

void graph_written_free(graph_written *w)
{
    free(w->bits);
    free(w->words);
    w->bits = NULL;
    w->words = NULL;
    w->nwords = 0;
}
