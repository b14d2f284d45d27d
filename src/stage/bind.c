/*
 * bind.c: the resident half of bind, and publish.
 *
 * Freshness, exactly (docs/ARCHITECTURE.md, "Residency"): a resident arg reuses its copy only when
 * the copy is current and was published for this host buffer id and byte
 * extent at the generation the buffer has now, at this run's bind.  Anything
 * else uploads: a copy that exists but is not current counts as a stale
 * upload, a new copy as a first upload.  Every copy the run will write (an
 * upload, or an INOUT arg that the graph may write) is marked not current
 * here, before any byte of it changes; stage_publish marks the run's copies
 * current only after the whole run succeeded.  So a failure anywhere leaves
 * no copy that looks fresh and is not.
 *
 * A copy that is current but older than the buffer (the host wrote it
 * through the API since) uploads only the ranges written since it was
 * published, from the buffer's write log, while the log reaches back that
 * far; else its whole extent.  A copy that is not current (a failed run, a
 * new copy) uploads its whole extent: its device bytes are unknown.
 *
 * Verify mode (verify.c) checks a current copy before reusing it: every
 * byte outside the ranges declared since it was published must be as it
 * was published (blocks no declared write touched by their hash, the rest
 * of a declared block against a host shadow), whatever else was declared;
 * a mismatch is HG_ESTALE naming the arg, the buffer and the byte.  A copy
 * published while verify was off cannot be checked, so verify mode uploads
 * it again (whole).  When the write log no longer reaches back to the
 * copy's generation, declared and undeclared writes cannot be told apart:
 * the whole extent is uploaded, so nothing stale is computed on.
 *
 * An IN's copy is published at the generation sampled at bind, the one
 * whose bytes it holds: a write during the run (which the API forbids)
 * then makes the next run upload rather than trust old bytes.  An INOUT's
 * at the generation its own copy-back gave the buffer, and only if nothing
 * else moved it during the run.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/tensor.h"

/* The ranges of sa's extent written through the API since generation
 * `since`, merged, as p->spans[*first..+n]; SIZE_MAX when the log no longer
 * reaches back (or host memory for the list failed): unknown. */
static size_t written_since(stage_plan *p, const stage_arg *sa, uint64_t since, uint32_t *first)
{
    if (stage_spans_reserve(p, HG_HOSTBUF_LOG, first) != 0)
        return SIZE_MAX;
    size_t n = hostbuf_written_since(sa->tensor.host, since, sa->lo, sa->hi, p->spans + *first,
                                     HG_HOSTBUF_LOG);
    p->nspans = *first + (n == SIZE_MAX ? 0 : (uint32_t)n);
    return n;
}

/* The upload of a current copy: the ranges written since it was published
 * (p->spans[first..+n]), covered by the one cost rule. */
static void plan_ranged_upload(stage_plan *p, stage_arg *sa, uint32_t first, size_t n)
{
    n = stage_ranges_cover(p->spans + first, n);
    p->nspans = first + (uint32_t)n;
    size_t bytes = 0;
    for (size_t k = 0; k < n; k++)
        bytes += p->spans[first + k].hi - p->spans[first + k].lo;
    sa->up_whole = false;
    sa->up_first = first;
    sa->up_n = (uint32_t)n;
    p->rstats.h2d_bytes_skipped += (sa->hi - sa->lo) - bytes;
}

/* A copy that exists: a hit, a ranged upload (current, older than the
 * buffer) or a whole one; in verify mode, checked against its shadow. */
static int bind_existing(stage_plan *p, stage_arg *sa, resident_copy *r, uint64_t gen, hg_err *e)
{
    const bool checkable = !p->verify || r->shadowed;
    bool fresh = r->current && r->generation == gen && checkable;
    if (r->current && r->generation <= gen && checkable) {
        uint32_t first = 0;
        size_t n = r->generation == gen ? 0 : written_since(p, sa, r->generation, &first);
        if (n != SIZE_MAX && p->verify) {
            /* No list at all when nothing was declared (and none allocated yet). */
            int rc = verify_check(p, sa, r, n ? p->spans + first : NULL, n, e);
            if (rc != 0)
                return rc;
        }
        if (n != SIZE_MAX && !fresh)
            plan_ranged_upload(p, sa, first, n);
    }
    sa->upload = !fresh;
    if (fresh) {
        p->rstats.hits++;
        p->rstats.bytes_skipped += sa->hi - sa->lo;
        p->rstats.h2d_bytes_skipped += sa->hi - sa->lo;
    } else {
        p->rstats.stale_uploads++;
    }
    return 0;
}

static int bind_one(stage_plan *p, hg_device *dev, stage_arg *sa, hg_err *e)
{
    residency_cache *c = p->cache;
    const uint64_t id = hg_hostbuf_id(sa->tensor.host);
    const uint64_t gen = hg_hostbuf_generation(sa->tensor.host); /* sampled at bind */
    uint32_t i = residency_find(c, id, sa->lo, sa->hi);
    if (i != RESIDENCY_NONE && c->copies[i].bound_run == p->run) {
        /* Another arg of this run has the same bytes: it shares the copy
         * and its upload (both are IN: written overlaps were refused). */
        sa->upload = false;
        sa->bind_gen = gen;
        sa->resident = i;
        sa->dev_region = c->copies[i].addr;
        return 0;
    }
    if (i == RESIDENCY_NONE) {
        int rc = residency_add(c, dev, p->tally, sa->tensor.host, sa->lo, sa->hi, p->run, &i,
                               &p->rstats.evictions);
        if (rc == HG_EDEVMEM) { /* no room: staged for this run, not an error */
            sa->kind = STAGE_SLICE;
            sa->release = RELEASE_RETAINED_SLICE;
            p->rstats.staged++;
            return 0;
        }
        if (rc != 0)
            return err_set(e, rc, "arg '%s': cannot add a resident copy: %s", sa->name,
                           hg_strerror(rc));
        sa->upload = true;
    } else {
        int rc = bind_existing(p, sa, &c->copies[i], gen, e);
        if (rc != 0)
            return rc;
    }
    resident_copy *r = &c->copies[i];
    if (p->verify && sa->upload) {
        int rc = verify_take(p, sa, r, e);
        if (rc != 0)
            return rc;
    }
    sa->bind_gen = gen;
    residency_touch(c, i, p->run);
    r->bound_run = p->run;
    if (sa->upload || sa->dir == HG_INOUT)
        r->current = false; /* invalidate before anything writes it */
    sa->resident = i;
    sa->dev_region = r->addr;
    return 0;
}

int stage_bind_resident(stage_plan *p, hg_device *dev, hg_err *e)
{
    /* Mark every resident arg's copy as used by this run first, so binding
     * one arg never evicts another arg's copy of the same run. */
    residency_drain(p->cache, p->tally); /* copies of destroyed buffers */
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_RESIDENT)
            continue;
        uint32_t k = residency_find(p->cache, hg_hostbuf_id(sa->tensor.host), sa->lo, sa->hi);
        if (k != RESIDENCY_NONE)
            residency_touch(p->cache, k, p->run);
    }
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_RESIDENT)
            continue;
        int rc = bind_one(p, dev, sa, e);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void stage_publish(stage_plan *p)
{
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_RESIDENT)
            continue;
        resident_copy *r = &p->cache->copies[sa->resident];
        if (sa->dir == HG_IN) {
            /* The copy holds the host bytes of bind's generation, whatever
             * happened to the host buffer since; bind checked them. */
            r->current = true;
            r->shadowed = p->verify;
            r->generation = sa->bind_gen;
            continue;
        }
        /* After copy-back an INOUT's host bytes equal its device copy at the
         * generation this run's own write step gave the buffer (bind's when
         * it wrote nothing back).  Any other move of the generation is a
         * write through the API during the run: the host then holds bytes
         * the copy does not, so the copy stays not current. */
        const uint64_t expected = sa->back_gen ? sa->back_gen : sa->bind_gen;
        if (hg_hostbuf_generation(sa->tensor.host) != expected ||
            (sa->back_gen && sa->back_gen != sa->bind_gen + 1))
            continue;
        if (p->verify)
            verify_copied_back(p, sa, r);
        r->current = true;
        r->shadowed = p->verify;
        r->generation = expected;
    }
}
