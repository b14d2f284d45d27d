/*
 * replay_place.c: puts a recording in place on a bound plan, and compares
 * it with a fresh orchestration (verify mode).
 *
 * Placing re-resolves the recording exactly: a task arg lies at its arg's
 * device region plus a fixed offset, so when a region moved (a resident copy
 * that was uploaded elsewhere, the retained buffer that grew, scratch from
 * another pool block) the task args move with it.  Dependencies were
 * inferred from which device bytes overlap; they still hold exactly when
 * args that overlap (now, or when recorded) moved together.  Anything else
 * is not replayable: the run orchestrates.
 *
 * Cost: O(args) when nothing moved; O(args log args + task args) when
 * something did.
 */
#include <stdlib.h>
#include <string.h>

#include "run/replay.h"

/* Orders spans by their start. */
static int by_lo(const void *a, const void *b)
{
    const replay_span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* True when every two spans that overlap have the same delta: each
 * connected group of overlapping spans moved as one. */
static bool overlaps_moved_together(replay_span *s, uint32_t n)
{
    qsort(s, n, sizeof *s, by_lo);
    hg_devaddr end = 0;
    int64_t delta = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0 && s[i].lo < end && s[i].delta != delta)
            return false;
        if (i == 0 || s[i].lo >= end)
            delta = s[i].delta; /* a new group */
        if (s[i].lo + s[i].len > end)
            end = s[i].lo + s[i].len;
    }
    return true;
}

/* Fills spans[0..n) for the run args and checks the alias rule; *moved
 * tells whether any region moved. */
static bool args_placeable(replay_state *rs, const stage_plan *p, bool *moved)
{
    replay_span *sp = rs->spans, *work = rs->spans + rs->nregions;
    uint32_t nwork = 0;
    *moved = false;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        hg_devaddr at = 0;
        const bool memory =
            sa->kind == STAGE_SLICE || sa->kind == STAGE_RESIDENT || sa->kind == STAGE_DEVICE_VIEW;
        if (memory && sa->hi > sa->lo)
            at = sa->dev_region;
        if ((at == 0) != (rs->regions[i] == 0))
            return false; /* memory appeared or went: not the recorded kind */
        sp[i] = (replay_span){at, rs->lens[i], (int64_t)(at - rs->regions[i])};
        *moved |= sp[i].delta != 0;
        if (at != 0)
            work[nwork++] = sp[i];
    }
    if (!*moved)
        return true;
    if (!overlaps_moved_together(work, nwork))
        return false; /* overlaps now that were not there, or broke */
    for (uint32_t k = 0; k < nwork; k++)
        work[k].lo -= (hg_devaddr)work[k].delta; /* where they were */
    return overlaps_moved_together(work, nwork);
}

/* Takes the recorded scratch, in order (same indices as recorded). */
static int take_scratch(replay_state *rs, stage_plan *p, hg_device *dev, hg_err *e)
{
    for (uint32_t k = 0; k < rs->rec.nscratch; k++) {
        const replay_scratch *s = &rs->rec.scratch[k];
        uint32_t idx;
        int rc = stage_add_scratch(p, dev, s->name, s->view.dtype, s->view.ndims, s->view.shape,
                                   &idx, NULL, e);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Points the recording's task args at the regions in spans[]. */
static void patch(replay_state *rs)
{
    const replay_span *sp = rs->spans;
    graph *g = &rs->graph;
    for (uint32_t j = 0; j < g->nargs; j++) {
        const int64_t d = sp[rs->rec.targ_arg[j]].delta;
        graph_arg *a = &g->args[j];
        if (d == 0 || a->lo == a->hi)
            continue;
        a->lo += (hg_devaddr)d;
        a->hi += (hg_devaddr)d;
        if (a->shape != GRAPH_DENSE_1D)
            g->shapes[a->shape].addr += (hg_devaddr)d;
    }
    for (uint32_t i = 0; i < rs->nregions; i++)
        rs->regions[i] += (hg_devaddr)sp[i].delta;
}

int replay_place(replay_state *rs, stage_plan *p, hg_device *dev, bool orchestrated, hg_err *e)
{
    if (rs->nregions != p->nargs + rs->rec.nscratch || !rs->back.valid)
        return 0;
    uint32_t cap = rs->cap_spans;
    if (cap < 2 * rs->nregions) {
        replay_span *s = realloc(rs->spans, 2 * (size_t)rs->nregions * sizeof *s);
        if (s == NULL)
            return err_set(e, HG_ENOMEM, "replay: cannot check %u args", rs->nregions);
        rs->spans = s;
        rs->cap_spans = 2 * rs->nregions;
    }
    bool moved;
    if (!args_placeable(rs, p, &moved))
        return 0;
    if (!orchestrated) {
        int rc = take_scratch(rs, p, dev, e);
        if (rc != 0)
            return rc;
    }
    if (p->nall != rs->nregions)
        return 0; /* verify: the orchestration took other scratch (compared first) */
    for (uint32_t i = p->nargs; i < p->nall; i++) {
        /* Scratch is its own pool block: it overlaps nothing. */
        const stage_arg *sa = &p->args[i];
        const hg_devaddr at = sa->kind == STAGE_SCRATCH ? sa->dev_region : 0;
        rs->spans[i] = (replay_span){at, rs->lens[i], (int64_t)(at - rs->regions[i])};
        moved |= rs->spans[i].delta != 0;
    }
    if (moved)
        patch(rs);
    if (orchestrated)
        return 1;
    int rc = stage_backplan_lend(p, &rs->back, e);
    return rc == 0 ? 1 : rc;
}
