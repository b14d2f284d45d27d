/*
 * copyback.c: copy back only what the graph wrote, all or nothing, each
 * byte once.
 *
 * During orchestration every task arg that writes a host-backed OUT/INOUT
 * arg is noted (stage_note_written).  Copy-back then
 *   1. plans, before anything moves, with every host allocation it needs:
 *      - the order: args grouped by host buffer, so each buffer's fetched
 *        ranges are adjacent and it takes ONE write step per run;
 *      - per arg, the ranges to fetch: each distinct written view's extent
 *        when it is dense, else its extent or its contiguous runs, whichever
 *        moves fewer equivalent bytes (STAGE_COPY_COST_BYTES a copy);
 *        merged and laid out back to back in host staging (runner-owned,
 *        grow-only).  Gaps between views are not fetched: what comes down
 *        is what the graph wrote, which the host reads;
 *      - per arg, the commit's items: identical views are one view; views
 *        whose extents overlap form a cluster, committed as the dense view
 *        that covers it when there is one, else as the merged byte runs of
 *        its views (materialised now); a view alone is walked at commit
 *        time when its runs come in order (no allocation), else
 *        materialised now.  Items never overlap: the commit writes each
 *        host byte once, however many tasks wrote it;
 *   2. fetches every range of every arg in one batched D2H;
 *   3. only when that all succeeded, commits: the planned items go from
 *      staging to the host (a strided view's gaps and bytes no task wrote
 *      stay as the host has them), and each written buffer takes one write
 *      step with every range fetched into it logged.  The commit allocates
 *      nothing and cannot fail.
 * A failure before the commit (planning, staging, fetch) changes no host
 * byte and no generation.  The fetched ranges stay in the plan
 * (stage_arg.back_first/back_n) for hg_runner_copied_back.
 *
 * Cost: O(W log W) in written views W (sorted once by arg and extent), plus
 * O(R log R) in the runs of views that interleave or overlap one another
 * (none in the common case), plus the bytes moved, each copied once on the
 * host.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

/* The test hook: true when this host allocation must fail. */
static bool host_fault_fires(stage_plan *p)
{
    return p->host_fault != 0 && --p->host_fault == 0;
}

/* Grows *arr (of elements of `size` bytes, capacity *cap) to hold `need`,
 * at least doubling.  HG_ENOMEM, leaving *arr as it was. */
static int grow(stage_plan *p, void **arr, uint32_t *cap, size_t need, size_t size)
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

int stage_note_written(stage_plan *p, uint32_t arg, const hg_tensor *view, hg_err *e)
{
    if (grow(p, (void **)&p->written, &p->cap_written, (size_t)p->nwritten + 1,
             sizeof *p->written) != 0)
        return err_set(e, HG_ENOMEM, "task arg for '%s': cannot note what it writes",
                       p->args[arg].name);
    p->written[p->nwritten++] = (stage_written){.arg = arg, .view = *view};
    return 0;
}

/* OUT and INOUT args with device memory of their own come back. */
static bool backs(const stage_arg *sa)
{
    return (sa->kind == STAGE_SLICE || sa->kind == STAGE_RESIDENT) && sa->copy_back;
}

/* The ranges arg sa contributes to the fetch batch. */
static size_t fetch_ranges(const stage_arg *sa)
{
    return backs(sa) ? sa->back_n : 0;
}

/* ------------------------------------------------------------ planning */

typedef struct run_sink {
    stage_plan *p;
    size_t runs, bytes;
    bool push;    /* false: only count */
    bool commits; /* push to p->commits rather than p->spans */
    int rc;
} run_sink;

static int sink_run(void *ctx, size_t offset, size_t len)
{
    run_sink *k = ctx;
    k->runs++;
    k->bytes += len;
    if (!k->push)
        return 0;
    stage_plan *p = k->p;
    if (k->commits) {
        k->rc = grow(p, (void **)&p->commits, &p->cap_commits, (size_t)p->ncommits + 1,
                     sizeof *p->commits);
        if (k->rc == 0)
            p->commits[p->ncommits++] = (stage_commit){STAGE_NO_VIEW, offset, offset + len};
        return k->rc;
    }
    uint32_t at;
    if ((k->rc = stage_spans_reserve(p, 1, &at)) != 0)
        return k->rc;
    p->spans[at] = (hg_range){offset, offset + len};
    return 0;
}

/* Pushes the ranges to fetch for one written view. */
static int plan_view(stage_plan *p, const stage_written *w)
{
    const hg_tensor *v = &w->view;
    run_sink k = {p, 0, 0, false, false, 0};
    bool whole = hg_tensor_is_dense(v);
    if (!whole) {
        int rc = tensor_for_each_run(v, sink_run, &k);
        if (rc != 0)
            return rc;
        double per_run = (double)k.bytes + (double)k.runs * STAGE_COPY_COST_BYTES;
        whole = (double)(w->hi - w->lo) + STAGE_COPY_COST_BYTES <= per_run;
    }
    if (!whole) {
        k.push = true;
        int rc = tensor_for_each_run(v, sink_run, &k);
        return rc != 0 ? rc : k.rc;
    }
    uint32_t at;
    int rc = stage_spans_reserve(p, 1, &at);
    if (rc == 0)
        p->spans[at] = (hg_range){w->lo, w->hi};
    return rc;
}

static int cmp_size(size_t a, size_t b)
{
    return (a > b) - (a < b);
}

/* By arg, then extent, then the view itself: identical views end up
 * adjacent.  Dims past ndims are not part of a view. */
static int written_cmp(const void *a, const void *b)
{
    const stage_written *x = a, *y = b;
    int c = cmp_size(x->arg, y->arg);
    c = c ? c : cmp_size(x->lo, y->lo);
    c = c ? c : cmp_size(x->hi, y->hi);
    c = c ? c : cmp_size((size_t)x->view.dtype, (size_t)y->view.dtype);
    c = c ? c : cmp_size(x->view.ndims, y->view.ndims);
    c = c ? c : cmp_size(x->view.offset, y->view.offset);
    for (uint32_t d = 0; c == 0 && d < x->view.ndims && d < HG_MAX_DIMS; d++) {
        c = cmp_size(x->view.shape[d], y->view.shape[d]);
        c = c ? c : cmp_size(x->view.strides[d], y->view.strides[d]);
    }
    return c;
}

static bool same_view(const stage_written *x, const stage_written *y)
{
    return written_cmp(x, y) == 0;
}

/* Drops empty views and duplicates (p->written sorted); one pass. */
static void written_dedupe(stage_plan *p)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->nwritten; i++) {
        const stage_written *w = &p->written[i];
        if (w->lo == w->hi || (k > 0 && same_view(&p->written[k - 1], w)))
            continue;
        p->written[k++] = *w;
    }
    p->nwritten = k;
}

/* The written views of arg i, once p->written is sorted by arg: the first
 * index goes to *first, their number is returned. */
static uint32_t written_of(const stage_plan *p, uint32_t i, uint32_t *first)
{
    uint32_t lo = 0, hi = p->nwritten;
    while (lo < hi) { /* the first with arg >= i */
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->written[mid].arg < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    *first = lo;
    uint32_t n = 0;
    while (lo + n < p->nwritten && p->written[lo + n].arg == i)
        n++;
    return n;
}

static int commit_cmp(const void *a, const void *b)
{
    const stage_commit *x = a, *y = b;
    return cmp_size(x->lo, y->lo);
}

/* The commit items of one cluster of written views [w0, w1] whose extents
 * overlap (one view, or several) spanning [lo, hi). */
static int plan_cluster(stage_plan *p, uint32_t w0, uint32_t w1, size_t lo, size_t hi)
{
    for (uint32_t w = w0; w <= w1; w++) {
        const stage_written *v = &p->written[w];
        bool alone_in_order = w0 == w1 && tensor_runs_in_order(&v->view);
        bool covers_all = v->lo == lo && v->hi == hi && hg_tensor_is_dense(&v->view);
        if (alone_in_order || covers_all) {
            int rc = grow(p, (void **)&p->commits, &p->cap_commits, (size_t)p->ncommits + 1,
                          sizeof *p->commits);
            if (rc == 0)
                p->commits[p->ncommits++] = (stage_commit){w, v->lo, v->hi};
            return rc;
        }
    }
    /* Views that interleave or overlap: their runs, merged. */
    const uint32_t first = p->ncommits;
    for (uint32_t w = w0; w <= w1; w++) {
        run_sink k = {p, 0, 0, true, true, 0};
        int rc = tensor_for_each_run(&p->written[w].view, sink_run, &k);
        if ((rc = rc != 0 ? rc : k.rc) != 0)
            return rc;
    }
    stage_commit *c = p->commits + first;
    size_t n = p->ncommits - first, k = 0;
    qsort(c, n, sizeof *c, commit_cmp);
    for (size_t i = 1; i < n; i++) {
        if (c[i].lo <= c[k].hi)
            c[k].hi = c[i].hi > c[k].hi ? c[i].hi : c[k].hi;
        else
            c[++k] = c[i];
    }
    p->ncommits = first + (uint32_t)(n ? k + 1 : 0);
    return 0;
}

/* Arg sa's fetch ranges (merged, covered) and commit items. */
static int plan_arg(stage_plan *p, uint32_t i, size_t *total, hg_err *e)
{
    stage_arg *sa = &p->args[i];
    sa->back_first = p->nspans;
    sa->commit_first = p->ncommits;
    uint32_t w0, nw = written_of(p, i, &w0);
    for (uint32_t w = w0; w < w0 + nw; w++) {
        int rc = plan_view(p, &p->written[w]);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': cannot plan its copy back: %s", sa->name,
                           hg_strerror(rc));
    }
    if (p->nspans > sa->back_first) /* no span list yet when nothing was written */
        sa->back_n = (uint32_t)ranges_merge(p->spans + sa->back_first, p->nspans - sa->back_first);
    p->nspans = sa->back_first + sa->back_n;
    size_t fetched = 0;
    for (uint32_t k = sa->back_first; k < p->nspans; k++) {
        p->span_staging[k] = *total;
        fetched += p->spans[k].hi - p->spans[k].lo;
        if (!ck_add(*total, p->spans[k].hi - p->spans[k].lo, total))
            return err_set(e, HG_EOVERFLOW, "arg '%s': copy-back staging overflows", sa->name);
    }
    p->rstats.d2h_bytes_skipped += (sa->hi - sa->lo) - fetched;
    for (uint32_t w = w0; w < w0 + nw;) { /* clusters of overlapping extents */
        uint32_t end = w;
        size_t hi = p->written[w].hi;
        while (end + 1 < w0 + nw && p->written[end + 1].lo < hi) {
            end++;
            hi = p->written[end].hi > hi ? p->written[end].hi : hi;
        }
        int rc = plan_cluster(p, w, end, p->written[w].lo, hi);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': cannot plan its copy back: %s", sa->name,
                           hg_strerror(rc));
        w = end + 1;
    }
    sa->commit_n = p->ncommits - sa->commit_first;
    return 0;
}

/* Copy-back's arg order: args that come back, grouped by host buffer (in
 * first-seen order of the buffer), so a buffer's ranges are adjacent. */
static int plan_order(stage_plan *p, uint32_t *n)
{
    if (grow(p, (void **)&p->back_order, &p->cap_order, p->nargs, sizeof *p->back_order) != 0)
        return HG_ENOMEM;
    *n = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (!backs(sa))
            continue;
        uint32_t at = *n;
        /* After the last arg of the same buffer: O(args^2) only over the
         * written args of one run, which are few (<= HG_MAX_TENSOR_ARGS). */
        for (uint32_t k = *n; k-- > 0;)
            if (p->args[p->back_order[k]].tensor.host == sa->tensor.host) {
                at = k + 1;
                break;
            }
        memmove(p->back_order + at + 1, p->back_order + at, (*n - at) * sizeof *p->back_order);
        p->back_order[at] = i;
        (*n)++;
    }
    return 0;
}

/* Plans every arg's fetch ranges, staging places and commit items. */
static int plan_fetch(stage_plan *p, uint32_t *norder, size_t *total, hg_err *e)
{
    *total = 0;
    p->ncommits = 0;
    for (uint32_t w = 0; w < p->nwritten; w++) {
        stage_written *v = &p->written[w];
        if (hg_tensor_extent(&v->view, &v->lo, &v->hi) != 0)
            v->lo = v->hi = 0; /* validated at submit: cannot happen */
    }
    if (p->nwritten > 1) /* qsort takes no NULL, even for 0 items */
        qsort(p->written, p->nwritten, sizeof *p->written, written_cmp);
    written_dedupe(p);
    if (plan_order(p, norder) != 0)
        return err_set(e, HG_ENOMEM, "copy back: cannot plan the order of %u args", p->nargs);
    for (uint32_t i = 0; i < p->nargs; i++)
        p->args[i].back_n = p->args[i].commit_n = 0;
    for (uint32_t k = 0; k < *norder; k++) {
        int rc = plan_arg(p, p->back_order[k], total, e);
        if (rc != 0)
            return rc;
    }
    return 0;
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
    return grow(p, (void **)&p->batch, &p->cap_batch, n, sizeof *p->batch);
}

/* The one batched D2H of every planned range; names the arg of a failure. */
static int fetch(stage_plan *p, hg_device *dev, hg_err *e)
{
    size_t n = 0;
    for (uint32_t i = 0; i < p->nargs; i++)
        n += fetch_ranges(&p->args[i]);
    if (stage_batch_reserve(p, n) != 0)
        return err_set(e, HG_ENOMEM, "copy back: cannot plan %zu copies", n);
    n = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        for (uint32_t k = sa->back_first; backs(sa) && k < sa->back_first + sa->back_n; k++) {
            const hg_range *s = &p->spans[k];
            p->batch[n++] = (device_copy){p->staging + p->span_staging[k],
                                          sa->dev_region + (s->lo - sa->lo), s->hi - s->lo};
        }
    }
    size_t done = 0;
    int rc = device_copy_batch(dev, false, p->batch, n, p->tally, &done);
    if (rc == 0)
        return 0;
    const char *name = stage_batch_arg(p, done, fetch_ranges);
    return err_set(e, rc, "arg '%s': device -> host copy back failed: %s", name, hg_strerror(rc));
}

/* -------------------------------------------------------------- commit */

typedef struct commit_ctx {
    stage_plan *p;
    const stage_arg *sa;
    unsigned char *host;
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
    c->p->rstats.committed_bytes += len;
    return 0;
}

/* Commits one arg's planned items; allocates nothing (an item with a view
 * is one whose runs come in order). */
static void commit_arg(stage_plan *p, const stage_arg *sa)
{
    commit_ctx c = {p, sa, hg_hostbuf_data(sa->tensor.host)};
    for (uint32_t k = sa->commit_first; k < sa->commit_first + sa->commit_n; k++) {
        const stage_commit *it = &p->commits[k];
        if (it->view == STAGE_NO_VIEW || hg_tensor_is_dense(&p->written[it->view].view))
            commit_run(&c, it->lo, it->hi - it->lo);
        else
            (void)tensor_for_each_run(&p->written[it->view].view, commit_run, &c);
    }
}

/* Commits every arg, buffer by buffer, each buffer taking one write step
 * with every range fetched into it logged (a superset of what was
 * committed, so at worst a resident copy elsewhere uploads a few more
 * bytes).  Cannot fail. */
static void commit(stage_plan *p, uint32_t norder)
{
    for (uint32_t k = 0; k < norder;) {
        hg_hostbuf *hb = p->args[p->back_order[k]].tensor.host;
        uint32_t end = k;
        while (end < norder && p->args[p->back_order[end]].tensor.host == hb)
            commit_arg(p, &p->args[p->back_order[end++]]);
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

int stage_copy_back_fetch(stage_plan *p, hg_device *dev, uint32_t *norder, hg_err *e)
{
    size_t total;
    *norder = 0;
    int rc = plan_fetch(p, norder, &total, e);
    if (rc == 0)
        rc = reserve_staging(p, total, e);
    if (rc == 0)
        rc = fetch(p, dev, e);
    return rc;
}

void stage_copy_back_commit(stage_plan *p, uint32_t norder)
{
    commit(p, norder);
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    uint32_t norder;
    int rc = stage_copy_back_fetch(p, dev, &norder, e);
    if (rc == 0)
        stage_copy_back_commit(p, norder);
    return rc;
}
