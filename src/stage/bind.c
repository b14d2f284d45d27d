/*
 * bind.c: the resident half of bind, and publish.
 *
 * Freshness, exactly (DESIGN.md): a resident arg reuses its copy only when
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
 * Verify mode: a copy published with the hash of its host bytes is reused
 * only if the host bytes still hash the same; a mismatch is HG_ESTALE, a
 * write that bypassed the API.  A copy published without a hash (verify was
 * off) cannot be checked, so verify mode uploads it again.  An IN is hashed
 * once per run, at bind (the bytes checked or uploaded then are the bytes
 * its copy holds); an INOUT again at publish, after copy-back changed them.
 *
 * An IN's copy is published at the generation sampled at bind, the one
 * whose bytes it holds: a write during the run (which the API forbids)
 * then makes the next run upload rather than trust old bytes.
 */
#include "device/device.h"
#include "stage/stage.h"
#include "tensor/tensor.h"

/* For a copy current at generation `since`: the ranges of sa's extent
 * written since, as the upload (sa->up_first/up_n); whole when unknown or
 * when there is no room to list them (the extent is always right). */
static void plan_ranged_upload(stage_plan *p, stage_arg *sa, uint64_t since)
{
    uint32_t first;
    if (stage_spans_reserve(p, HG_HOSTBUF_LOG, &first) != 0)
        return;
    size_t n = hostbuf_written_since(sa->tensor.host, since, sa->lo, sa->hi, p->spans + first,
                                     HG_HOSTBUF_LOG);
    if (n != SIZE_MAX) /* the one cost rule: fewer, larger copies when cheaper */
        n = stage_ranges_cover(p->spans + first, n);
    p->nspans = first + (n == SIZE_MAX ? 0 : (uint32_t)n);
    if (n == SIZE_MAX)
        return;
    size_t bytes = 0;
    for (size_t k = 0; k < n; k++)
        bytes += p->spans[first + k].hi - p->spans[first + k].lo;
    sa->up_whole = false;
    sa->up_first = first;
    sa->up_n = (uint32_t)n;
    p->rstats.h2d_bytes_skipped += (sa->hi - sa->lo) - bytes;
}

/* sa's extent hashed now, into sa->bind_hash. */
static void hash_at_bind(stage_plan *p, stage_arg *sa)
{
    p->rstats.hashed_bytes += sa->hi - sa->lo;
    sa->bind_hash =
        residency_hash((const char *)hg_hostbuf_data(sa->tensor.host) + sa->lo, sa->hi - sa->lo);
}

static int bind_one(stage_plan *p, hg_device *dev, stage_arg *sa, hg_err *e)
{
    residency_cache *c = p->cache;
    const uint64_t id = hg_hostbuf_id(sa->tensor.host);
    const uint64_t gen = hg_hostbuf_generation(sa->tensor.host); /* sampled at bind */
    const size_t bytes = sa->hi - sa->lo;
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
        int rc =
            residency_add(c, dev, p->tally, id, sa->lo, sa->hi, p->run, &i, &p->rstats.evictions);
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
        resident_copy *r = &c->copies[i];
        bool fresh = r->current && r->generation == gen;
        if (fresh && p->verify && !r->hashed) {
            fresh = false; /* published unhashed: it cannot be checked */
        } else if (fresh && p->verify) {
            hash_at_bind(p, sa);
            if (sa->bind_hash != r->hash)
                return err_set(e, HG_ESTALE,
                               "arg '%s': host buffer %llu changed without a write through the "
                               "API since generation %llu (verify mode): its resident copy is "
                               "stale",
                               sa->name, (unsigned long long)id, (unsigned long long)gen);
        }
        sa->upload = !fresh;
        if (fresh) {
            p->rstats.hits++;
            p->rstats.bytes_skipped += bytes;
            p->rstats.h2d_bytes_skipped += bytes;
        } else {
            p->rstats.stale_uploads++;
            if (r->current && r->generation < gen && (!p->verify || r->hashed))
                plan_ranged_upload(p, sa, r->generation);
        }
    }
    if (p->verify && sa->dir == HG_IN && sa->upload)
        hash_at_bind(p, sa); /* the bytes uploaded now: what the copy will hold */
    sa->bind_gen = gen;
    resident_copy *r = &c->copies[i];
    r->last_run = p->run;
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
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_RESIDENT)
            continue;
        uint32_t k = residency_find(p->cache, hg_hostbuf_id(sa->tensor.host), sa->lo, sa->hi);
        if (k != RESIDENCY_NONE)
            p->cache->copies[k].last_run = p->run;
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
        r->current = true;
        r->hashed = p->verify;
        if (sa->dir == HG_IN) {
            /* The copy holds the host bytes of bind's generation, whatever
             * happened to the host buffer since; bind hashed them. */
            r->generation = sa->bind_gen;
            r->hash = p->verify ? sa->bind_hash : 0;
            continue;
        }
        /* After copy-back an INOUT's host bytes equal its device copy at the
         * generation this run's own write step gave the buffer (bind's when
         * it wrote nothing back).  Any other move of the generation is a
         * write through the API during the run: the host then holds bytes
         * the copy does not, so the copy stays not current. */
        const uint64_t expected = sa->back_gen ? sa->back_gen : sa->bind_gen;
        if (hg_hostbuf_generation(sa->tensor.host) != expected ||
            (sa->back_gen && sa->back_gen != sa->bind_gen + 1)) {
            r->current = false;
            continue;
        }
        r->generation = expected;
        if (p->verify) {
            p->rstats.hashed_bytes += sa->hi - sa->lo;
            r->hash = residency_hash((const char *)hg_hostbuf_data(sa->tensor.host) + sa->lo,
                                     sa->hi - sa->lo);
        }
    }
}
