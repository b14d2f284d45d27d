/*
 * copyback.c: copy back only what the graph wrote, all or nothing, each
 * byte once.
 *
 * Copy-back
 *   1. plans, before anything moves (copyplan.c: the order, each arg's
 *      fetched ranges laid out in host staging, the commit's items), and
 *      reserves the staging (runner-owned, grow-only);
 *   2. fetches every range of every arg in one batched D2H;
 *   3. only when that all succeeded, commits: the planned items go from
 *      staging to the host (a strided view's gaps and bytes no task wrote
 *      stay as the host has them), and each written buffer takes one write
 *      step with every range fetched into it logged.  The commit allocates
 *      nothing and cannot fail.
 * The extra host memcpy that buys all or nothing is avoided where a failure
 * cannot leave a half-written host byte (direct_ok): when every arg's
 * fetched ranges are exactly what its tasks wrote, and the device copies a
 * batch all or nothing (device_batch_whole: the sim; OpenCL stages), every
 * range lands straight in its host buffer in one batch and the commit only
 * takes the write steps.  Splitting the commit across
 * the device's idle core threads was measured instead and lost: waking
 * them cost milliseconds on a loaded 2-CPU host (docs/PERFORMANCE.md).
 * A failure before the commit (planning, staging, fetch) changes no host
 * byte and no generation.  The fetched ranges stay in the plan
 * (stage_arg.back_first/back_n) for hg_runner_copied_back.
 *
 * Cost: planning's (copyplan.c), plus the bytes moved, each copied once on
 * the host.  With a borrowed plan: O(fetched ranges + commit items + args).
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "device/device.h"
#include "stage/stage.h"
#include "tensor/tensor.h"

static bool host_fault_fires(stage_plan *p)
{
    return p->host_fault != 0 && --p->host_fault == 0;
}

/* Grows *arr (of elements of `size` bytes, capacity *cap) to hold `need`,
 * at least doubling.  HG_ENOMEM, leaving *arr as it was. */
int stage_grow(stage_plan *p, void **arr, uint32_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    if (need > UINT32_MAX || host_fault_fires(p))
        return HG_ENOMEM;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n = n > UINT32_MAX / 2 ? need : 2 * n;
    void *grown = realloc(*arr, n * size);
    if (grown == NULL)
        return HG_ENOMEM;
    *arr = grown;
    *cap = (uint32_t)n;
    return 0;
}

int stage_spans_reserve(stage_plan *p, size_t n, uint32_t *first)
{
    if (n > UINT32_MAX - p->nspans)
        return HG_ENOMEM;
    uint32_t need = p->nspans + (uint32_t)n;
    if (need > p->cap_spans) {
        uint32_t cap = p->cap_spans ? p->cap_spans : 64;
        while (cap < need)
            cap = cap > UINT32_MAX / 2 ? need : cap * 2;
        hg_range *spans = realloc(p->spans, (size_t)cap * sizeof *spans);
        if (spans != NULL)
            p->spans = spans;
        size_t *staging = realloc(p->span_staging, (size_t)cap * sizeof *staging);
        if (staging != NULL)
            p->span_staging = staging;
        if (spans == NULL || staging == NULL)
            return HG_ENOMEM;
        p->cap_spans = cap;
    }
    *first = p->nspans;
    p->nspans = need;
    return 0;
}

size_t stage_ranges_cover(hg_range *r, size_t n)
{
    if (n == 0)
        return 0;
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (r[i].lo - r[k].hi < STAGE_COPY_COST_BYTES)
            r[k].hi = r[i].hi;
        else
            r[++k] = r[i];
    }
    return k + 1;
}

/* The ranges arg sa contributes to the fetch batch. */
static size_t fetch_ranges(const stage_arg *sa)
{
    return stage_backs(sa) ? sa->back_n : 0;
}

static int reserve_staging(stage_plan *p, size_t total, hg_err *e)
{
    if (total <= p->staging_cap)
        return 0;
    size_t cap = p->staging_cap * 2 > total ? p->staging_cap * 2 : total;
    unsigned char *grown = host_fault_fires(p) ? NULL : realloc(p->staging, cap);
    if (grown == NULL && cap > total)
        grown = realloc(p->staging, cap = total);
    if (grown == NULL)
        return err_set(e, HG_ENOMEM, "copy back: cannot allocate %zu bytes of host staging", total);
    p->staging = grown;
    p->staging_cap = cap;
    return 0;
}

/* Grows the plan's batch list to n entries. */
int stage_batch_reserve(stage_plan *p, size_t n)
{
    return stage_grow(p, (void **)&p->batch, &p->cap_batch, n, sizeof *p->batch);
}

/* The one batched D2H of every planned range, into host staging, or with
 * `direct` straight into the host buffers as one all-or-nothing batch;
 * names the arg of a failure. */
static int fetch(stage_plan *p, hg_device *dev, bool direct, hg_err *e)
{
    size_t n = 0;
    for (uint32_t i = 0; i < p->nargs; i++)
        n += fetch_ranges(&p->args[i]);
    if (stage_batch_reserve(p, n) != 0)
        return err_set(e, HG_ENOMEM, "copy back: cannot plan %zu copies", n);
    n = 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        for (uint32_t k = sa->back_first; stage_backs(sa) && k < sa->back_first + sa->back_n; k++) {
            const hg_range *s = &p->spans[k];
            unsigned char *to = direct ? (unsigned char *)hg_hostbuf_data(sa->tensor.host) + s->lo
                                       : p->staging + p->span_staging[k];
            p->batch[n++] = (device_copy){to, sa->dev_region + (s->lo - sa->lo), s->hi - s->lo};
            bytes += s->hi - s->lo;
        }
    }
    size_t done = 0;
    const uint64_t t0 = clock_now_ns();
    int rc = direct ? device_copy_batch_whole(dev, false, p->batch, n, p->tally, &done)
                    : device_copy_batch(dev, false, p->batch, n, p->tally, &done);
    p->rstats.d2h_ns += clock_now_ns() - t0;
    if (rc == 0 && direct) {
        p->rstats.committed_bytes += bytes;
        p->direct_fetches++;
    }
    if (rc == 0)
        return 0;
    const char *name = stage_batch_arg(p, done, fetch_ranges);
    return err_set(e, rc, "arg '%s': device -> host copy back failed: %s", name, hg_strerror(rc));
}

/* -------------------------------------------------------------- commit */

typedef struct commit_ctx {
    const stage_plan *p;
    const stage_arg *sa;
    unsigned char *host;
    uint64_t committed; /* bytes this share wrote */
} commit_ctx;

/* One byte run of a written view: from its fetched range in staging to the
 * host.  It lies inside one fetched range (ranges are merged unions of the
 * views' runs). */
static int commit_run(void *ctx, size_t offset, size_t len)
{
    commit_ctx *c = ctx;
    const uint32_t first = c->sa->back_first;
    const hg_range *s = c->p->spans + first;
    uint32_t lo = 0, hi = c->sa->back_n;
    while (hi - lo > 1) { /* the last span with s.lo <= offset */
        uint32_t mid = lo + (hi - lo) / 2;
        if (s[mid].lo <= offset)
            lo = mid;
        else
            hi = mid;
    }
    memcpy(c->host + offset, c->p->staging + c->p->span_staging[first + lo] + (offset - s[lo].lo),
           len);
    c->committed += len;
    return 0;
}

/* Commits one arg's planned items; allocates nothing (an item with a view
 * is one whose runs come in order).  Returns the bytes written. */
static uint64_t commit_arg(const stage_plan *p, const stage_arg *sa)
{
    commit_ctx c = {p, sa, hg_hostbuf_data(sa->tensor.host), 0};
    for (uint32_t k = sa->commit_first; k < sa->commit_first + sa->commit_n; k++) {
        const stage_commit *it = &p->commits[k];
        const hg_tensor *view =
            it->view == STAGE_NO_VIEW ? NULL : stage_note_view(p, &p->written[it->view]);
        if (view == NULL || hg_tensor_is_dense(view))
            commit_run(&c, it->lo, it->hi - it->lo);
        else
            (void)tensor_for_each_run(view, commit_run, &c);
    }
    return c.committed;
}

/* Commits every arg, buffer by buffer, each buffer taking one write step
 * with every range fetched into it logged (a superset of what was
 * committed, so at worst a resident copy elsewhere uploads a few more
 * bytes).  Cannot fail. */
static void commit(stage_plan *p, uint32_t norder, bool bytes_landed)
{
    for (uint32_t k = 0; k < norder;) {
        hg_hostbuf *hb = p->args[p->back_order[k]].tensor.host;
        uint32_t end = k;
        for (; end < norder && p->args[p->back_order[end]].tensor.host == hb; end++)
            if (!bytes_landed)
                p->rstats.committed_bytes += commit_arg(p, &p->args[p->back_order[end]]);
        /* The group's fetched ranges are adjacent in p->spans. */
        const stage_arg *first = &p->args[p->back_order[k]];
        const stage_arg *last = &p->args[p->back_order[end - 1]];
        uint32_t nspans = last->back_first + last->back_n - first->back_first;
        if (nspans > 0)
            hostbuf_mark_ranges(hb, p->spans + first->back_first, nspans);
        for (uint32_t j = k; j < end; j++)
            p->args[p->back_order[j]].back_gen = nspans > 0 ? hg_hostbuf_generation(hb) : 0;
        k = end;
    }
}

/* Adds a run's length to *ctx (a size_t). */
static int count_run(void *ctx, size_t offset, size_t len)
{
    (void)offset;
    *(size_t *)ctx += len;
    return 0;
}

/* True when sa's commit items cover its fetched ranges exactly: the items
 * are disjoint and each lies inside one range, so they do when their bytes
 * add up to the ranges' (bgemm's C: 256 tile views, one range).  A gap the
 * fetch spans but no task wrote (a strided view fetched by its extent,
 * views merged across a small hole) makes them fall short. */
static bool commits_cover(const stage_plan *p, const stage_arg *sa)
{
    size_t fetched = 0, bytes = 0;
    for (uint32_t k = sa->back_first; k < sa->back_first + sa->back_n; k++)
        fetched += p->spans[k].hi - p->spans[k].lo;
    for (uint32_t i = sa->commit_first; i < sa->commit_first + sa->commit_n; i++) {
        const stage_commit *it = &p->commits[i];
        const hg_tensor *view =
            it->view == STAGE_NO_VIEW ? NULL : stage_note_view(p, &p->written[it->view]);
        if (view == NULL || hg_tensor_is_dense(view))
            bytes += it->hi - it->lo;
        else if (tensor_for_each_run(view, count_run, &bytes) != 0)
            return false;
    }
    return bytes == fetched;
}

/* Whether every fetched range may land straight in its host buffer, all or
 * nothing still, without the commit's second memcpy: when the device
 * copies a batch all or nothing (device_batch_whole: a failure at its k-th
 * range leaves the first k unwritten too; a queue device makes no such
 * promise) and each arg's fetched ranges are exactly the bytes its commit
 * would write (a gap would be overwritten with device bytes no task wrote).
 * Never in verify mode, which shadows what lands in staging.  Args of one
 * host buffer never overlap (plan.c refuses written overlaps), so the
 * batch's order among them does not matter. */
static bool direct_ok(const stage_plan *p, hg_device *dev, uint32_t norder)
{
    if (p->verify || !device_batch_whole(dev))
        return false;
    for (uint32_t k = 0; k < norder; k++)
        if (!commits_cover(p, &p->args[p->back_order[k]]))
            return false;
    return true;
}

/* Plans and fetches; with may_direct, every range lands straight in the
 * host buffers when direct_ok (*direct), else everything goes to staging. */
static int copy_back_fetch(stage_plan *p, hg_device *dev, bool may_direct, uint32_t *norder,
                           bool *direct, hg_err *e)
{
    size_t total = p->back_total;
    *norder = p->back_norder;
    int rc = 0;
    if (p->lent != NULL) /* a replayed run's borrowed plan */
        p->rstats.d2h_bytes_skipped += p->back_skipped;
    else
        rc = stage_copy_back_plan(p, norder, &total, e);
    if (rc != 0)
        return rc;
    *direct = may_direct && direct_ok(p, dev, *norder);
    if (*direct)
        return fetch(p, dev, true, e);
    if ((rc = reserve_staging(p, total, e)) == 0)
        rc = fetch(p, dev, false, e);
    return rc;
}

/* The two steps never fetch straight to the host: the decide hook between
 * them may still fail the run, and then no host byte may have changed. */
int stage_copy_back_fetch(stage_plan *p, hg_device *dev, uint32_t *norder, hg_err *e)
{
    bool direct;
    return copy_back_fetch(p, dev, false, norder, &direct, e);
}

void stage_copy_back_commit(stage_plan *p, uint32_t norder)
{
    commit(p, norder, false);
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    uint32_t norder;
    bool direct;
    int rc = copy_back_fetch(p, dev, true, &norder, &direct, e);
    if (rc == 0)
        commit(p, norder, direct);
    return rc;
}
