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
 * The extra host memcpy that buys all or nothing is avoided where a failure
 * cannot leave a half-written host byte (direct_arg): one range that is
 * exactly what the tasks wrote, on a device whose copy of one range writes
 * all of it or none, lands straight in the host buffer.  That is the
 * common large case (a whole output tensor).  Splitting the commit across
 * the device's idle core threads was measured instead and lost: waking
 * them cost milliseconds on a loaded 2-CPU host (docs/PERFORMANCE.md).
 * A failure before the commit (planning, staging, fetch) changes no host
 * byte and no generation.  The fetched ranges stay in the plan
 * (stage_arg.back_first/back_n) for hg_runner_copied_back.
 *
 * Neighbouring dense commit items are joined, so tiles written side by side
 * commit as one memcpy.  A replayed run borrows the plan its recording kept
 * (backplan.c) and skips step 1.
 *
 * Cost: O(W log W) in written views W (sorted once by arg and extent), plus
 * O(R log R) in the runs of views that interleave or overlap one another
 * (none in the common case), plus the bytes moved, each copied once on the
 * host.  With a borrowed plan: O(fetched ranges + commit items + args).
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
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

/* True when x and y are one view of one buffer (dims past ndims are not
 * part of a view). */
static bool same_tensor(const hg_tensor *x, const hg_tensor *y)
{
    return x->host == y->host && x->device == y->device && tensor_same_layout(x, y);
}

/* The view of written note w: its strided view, or NULL for a dense one. */
static const hg_tensor *note_view(const stage_plan *p, const stage_written *w)
{
    return w->strided == STAGE_NO_VIEW ? NULL : &p->strided[w->strided];
}

/* Notes [lo, hi) of arg, with its strided view (NULL: dense).  A view the
 * previous note already holds is not noted again: a chain of W tasks writing
 * one view notes it once, so copy-back's planning (a sort of the notes)
 * costs O(1) for it instead of O(W log W), and W notes take no memory.
 * Views repeated out of turn are dropped at planning instead. */
static int note(stage_plan *p, uint32_t arg, size_t lo, size_t hi, const hg_tensor *view, hg_err *e)
{
    p->note_work++;
    if (p->nwritten > 0) {
        const stage_written *last = &p->written[p->nwritten - 1];
        const hg_tensor *lv = note_view(p, last);
        if (last->arg == arg && last->lo == lo && last->hi == hi &&
            (view == NULL ? lv == NULL : lv != NULL && same_tensor(lv, view)))
            return 0;
    }
    uint32_t strided = STAGE_NO_VIEW;
    int rc =
        grow(p, (void **)&p->written, &p->cap_written, (size_t)p->nwritten + 1, sizeof *p->written);
    if (rc == 0 && view != NULL) {
        rc = grow(p, (void **)&p->strided, &p->cap_strided, (size_t)p->nstrided + 1,
                  sizeof *p->strided);
        if (rc == 0) {
            strided = p->nstrided++;
            p->strided[strided] = *view;
        }
    }
    if (rc != 0)
        return err_set(e, HG_ENOMEM, "task arg for '%s': cannot note what it writes",
                       p->args[arg].name);
    p->written[p->nwritten++] = (stage_written){arg, strided, lo, hi};
    return 0;
}

int stage_note_written(stage_plan *p, uint32_t arg, const hg_tensor *view, hg_err *e)
{
    size_t lo = 0, hi = 0;
    if (hg_tensor_extent(view, &lo, &hi) != 0 || lo == hi)
        return 0; /* validated at resolve; an empty view brings nothing back */
    return note(p, arg, lo, hi, hg_tensor_is_dense(view) ? NULL : view, e);
}

const hg_tensor *stage_written_view(const stage_plan *p, uint32_t k)
{
    return note_view(p, &p->written[k]);
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
    const hg_tensor *v = note_view(p, w);
    run_sink k = {p, 0, 0, false, false, 0};
    bool whole = v == NULL;
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

/* Two views, dense ones (NULL) first.  Dims past ndims are not part of a
 * view. */
static int view_cmp(const hg_tensor *x, const hg_tensor *y)
{
    if (x == NULL || y == NULL)
        return (x != NULL) - (y != NULL);
    int c = cmp_size((size_t)x->dtype, (size_t)y->dtype);
    c = c ? c : cmp_size(x->ndims, y->ndims);
    c = c ? c : cmp_size(x->offset, y->offset);
    for (uint32_t d = 0; c == 0 && d < x->ndims && d < HG_MAX_DIMS; d++) {
        c = cmp_size(x->shape[d], y->shape[d]);
        c = c ? c : cmp_size(x->strides[d], y->strides[d]);
    }
    return c;
}

/* By arg, then extent, then the view itself: identical views end up
 * adjacent. */
static int written_cmp(const stage_written *x, const hg_tensor *xv, const stage_written *y,
                       const hg_tensor *yv)
{
    int c = cmp_size(x->arg, y->arg);
    c = c ? c : cmp_size(x->lo, y->lo);
    c = c ? c : cmp_size(x->hi, y->hi);
    return c ? c : view_cmp(xv, yv);
}

static bool same_view(const stage_plan *p, const stage_written *x, const stage_written *y)
{
    return written_cmp(x, note_view(p, x), y, note_view(p, y)) == 0;
}

/* By arg and extent, dense before strided (qsort has no context for the
 * strided views). */
static int extent_cmp(const void *a, const void *b)
{
    const stage_written *x = a, *y = b;
    int c = cmp_size(x->arg, y->arg);
    c = c ? c : cmp_size(x->lo, y->lo);
    c = c ? c : cmp_size(x->hi, y->hi);
    return c ? c : cmp_size(x->strided != STAGE_NO_VIEW, y->strided != STAGE_NO_VIEW);
}

/* Sorts the notes by written_cmp: by extent, then the few strided views of
 * one extent among themselves (insertion sort: such ties are rare and
 * short; k of them cost O(k^2)). */
static void written_sort(stage_plan *p)
{
    stage_written *w = p->written;
    if (p->nwritten > 1) /* qsort takes no NULL, even for 0 items */
        qsort(w, p->nwritten, sizeof *w, extent_cmp);
    for (uint32_t i = 1; p->nstrided > 1 && i < p->nwritten; i++) {
        stage_written x = w[i];
        uint32_t j = i;
        for (; j > 0 && written_cmp(&w[j - 1], note_view(p, &w[j - 1]), &x, note_view(p, &x)) > 0;
             j--)
            w[j] = w[j - 1];
        w[j] = x;
    }
}

/* Drops empty views and duplicates (p->written sorted); one pass. */
static void written_dedupe(stage_plan *p)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->nwritten; i++) {
        const stage_written *w = &p->written[i];
        if (w->lo == w->hi || (k > 0 && same_view(p, &p->written[k - 1], w)))
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
        const hg_tensor *view = note_view(p, v);
        bool alone_in_order = w0 == w1 && (view == NULL || tensor_runs_in_order(view));
        bool covers_all = v->lo == lo && v->hi == hi && view == NULL;
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
        const stage_written *v = &p->written[w];
        const hg_tensor *view = note_view(p, v);
        int rc = view != NULL ? tensor_for_each_run(view, sink_run, &k)
                              : sink_run(&k, v->lo, v->hi - v->lo);
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

/* True when commit item `it` is one byte range (no view walked). */
static bool commit_dense(const stage_plan *p, const stage_commit *it)
{
    return it->view == STAGE_NO_VIEW || note_view(p, &p->written[it->view]) == NULL;
}

/* Joins an arg's neighbouring dense commit items (p->commits[first..],
 * ascending): N tasks writing N adjacent tiles commit with one memcpy, not
 * N.  Touching ranges were merged into one fetched range, so a joined item
 * still lies inside one. */
static void commits_join(stage_plan *p, uint32_t first)
{
    uint32_t k = first;
    for (uint32_t i = first + 1; i < p->ncommits; i++) {
        stage_commit *a = &p->commits[k];
        const stage_commit *b = &p->commits[i];
        if (a->hi == b->lo && commit_dense(p, a) && commit_dense(p, b))
            *a = (stage_commit){STAGE_NO_VIEW, a->lo, b->hi};
        else
            p->commits[++k] = *b;
    }
    if (p->ncommits > first)
        p->ncommits = k + 1;
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
    commits_join(p, sa->commit_first);
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
    p->note_work += p->nwritten;
    p->back_base = p->nspans;
    const uint64_t skipped = p->rstats.d2h_bytes_skipped;
    written_sort(p);
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
    p->back_norder = *norder;
    p->back_total = *total;
    p->back_skipped = p->rstats.d2h_bytes_skipped - skipped;
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
    const uint64_t t0 = clock_now_ns();
    int rc = device_copy_batch(dev, false, p->batch, n, p->tally, &done);
    p->rstats.d2h_ns += clock_now_ns() - t0;
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
            it->view == STAGE_NO_VIEW ? NULL : note_view(p, &p->written[it->view]);
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

/* The arg whose one fetched range is exactly what its commit items cover
 * (the bytes its tasks wrote), when that is all copy-back moves, and the device copies one range
 * with one memcpy after checking it (a host-memory device: the sim), so its copy either writes
 * every byte or fails before writing any: then it may land straight in the host buffer, all or
 * nothing still, without the commit's second memcpy.  NULL otherwise (several ranges: a batch
 * failing at its k-th range would leave the first k written; a queue device's copy makes no such
 * promise; verify mode shadows what lands in staging). */
static stage_arg *direct_arg(stage_plan *p, hg_device *dev, uint32_t norder)
{
    if (norder != 1 || p->verify || device_runs_queue(dev))
        return NULL;
    stage_arg *sa = &p->args[p->back_order[0]];
    if (sa->back_n != 1)
        return NULL;
    /* The items are disjoint and inside the range: they cover it exactly
     * when their bytes add up to it (bgemm's C: 256 tile views, one range). */
    const hg_range *s = &p->spans[sa->back_first];
    run_sink k = {p, 0, 0, false, false, 0};
    for (uint32_t i = sa->commit_first; i < sa->commit_first + sa->commit_n; i++) {
        const stage_commit *it = &p->commits[i];
        const hg_tensor *view =
            it->view == STAGE_NO_VIEW ? NULL : note_view(p, &p->written[it->view]);
        if (view == NULL || hg_tensor_is_dense(view))
            k.bytes += it->hi - it->lo;
        else if (tensor_for_each_run(view, sink_run, &k) != 0)
            return NULL;
    }
    return k.bytes == s->hi - s->lo ? sa : NULL;
}

/* The one range of sa, device -> host buffer. */
static int fetch_direct(stage_plan *p, hg_device *dev, const stage_arg *sa, hg_err *e)
{
    const hg_range *s = &p->spans[sa->back_first];
    unsigned char *host = hg_hostbuf_data(sa->tensor.host);
    const uint64_t t0 = clock_now_ns();
    int rc = device_copy_from(dev, host + s->lo, sa->dev_region + (s->lo - sa->lo), s->hi - s->lo,
                              p->tally);
    p->rstats.d2h_ns += clock_now_ns() - t0;
    if (rc != 0)
        return err_set(e, rc, "arg '%s': device -> host copy back failed: %s", sa->name,
                       hg_strerror(rc));
    p->rstats.committed_bytes += s->hi - s->lo;
    p->direct_fetches++;
    return 0;
}

/* Plans and fetches; with direct_ok, the one range that may land straight in
 * the host buffer does (*direct: its arg), else everything goes to staging. */
static int copy_back_fetch(stage_plan *p, hg_device *dev, bool direct_ok, uint32_t *norder,
                           const stage_arg **direct, hg_err *e)
{
    size_t total = p->back_total;
    *norder = p->back_norder;
    int rc = 0;
    if (p->lent != NULL) /* a replayed run's borrowed plan */
        p->rstats.d2h_bytes_skipped += p->back_skipped;
    else
        rc = plan_fetch(p, norder, &total, e);
    if (rc != 0)
        return rc;
    *direct = direct_ok ? direct_arg(p, dev, *norder) : NULL;
    if (*direct != NULL)
        return fetch_direct(p, dev, *direct, e);
    if ((rc = reserve_staging(p, total, e)) == 0)
        rc = fetch(p, dev, e);
    return rc;
}

/* The two steps never fetch straight to the host: the decide hook between
 * them may still fail the run, and then no host byte may have changed. */
int stage_copy_back_fetch(stage_plan *p, hg_device *dev, uint32_t *norder, hg_err *e)
{
    const stage_arg *direct;
    return copy_back_fetch(p, dev, false, norder, &direct, e);
}

void stage_copy_back_commit(stage_plan *p, uint32_t norder)
{
    commit(p, norder, false);
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    uint32_t norder;
    const stage_arg *direct;
    int rc = copy_back_fetch(p, dev, true, &norder, &direct, e);
    if (rc == 0)
        commit(p, norder, direct != NULL);
    return rc;
}
