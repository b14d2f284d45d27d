/*
 * copyplan.c: what a run wrote, and copy-back's plan of it.
 *
 * During orchestration every task arg that writes a host-backed OUT/INOUT
 * arg is noted (stage_note_written).  Before anything moves, copy-back
 * plans (stage_copy_back_plan), with every host allocation it needs:
 *   - the order: args grouped by host buffer, so each buffer's fetched
 *     ranges are adjacent and it takes ONE write step per run;
 *   - per arg, the ranges to fetch: each distinct written view's extent
 *     when it is dense, else its extent or its contiguous runs, whichever
 *     moves fewer equivalent bytes (STAGE_COPY_COST_BYTES a copy); merged
 *     and laid out back to back in host staging.  Gaps between views are
 *     not fetched: what comes down is what the graph wrote;
 *   - per arg, the commit's items: identical views are one view; views
 *     whose extents overlap form a cluster, committed as the dense view
 *     that covers it when there is one, else as the merged byte runs of its
 *     views (materialised now); a view alone is walked at commit time when
 *     its runs come in order (no allocation), else materialised now.  Items
 *     never overlap: the commit writes each host byte once, however many
 *     tasks wrote it.  Neighbouring dense items are joined, so tiles
 *     written side by side commit as one memcpy.
 * copyback.c fetches and commits what is planned here; a replayed run
 * borrows the plan its recording kept (backplan.c) and skips this file.
 *
 * Cost: O(W log W) in written views W (sorted once by arg and extent), plus
 * O(R log R) in the runs of views that interleave or overlap one another
 * (none in the common case).
 */
#include <stdlib.h>
#include <string.h>

#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

/* True when x and y are one view of one buffer (dims past ndims are not
 * part of a view). */
static bool same_tensor(const hg_tensor *x, const hg_tensor *y)
{
    return x->host == y->host && x->device == y->device && tensor_same_layout(x, y);
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
        const hg_tensor *lv = stage_note_view(p, last);
        if (last->arg == arg && last->lo == lo && last->hi == hi &&
            (view == NULL ? lv == NULL : lv != NULL && same_tensor(lv, view)))
            return 0;
    }
    uint32_t strided = STAGE_NO_VIEW;
    int rc = stage_grow(p, (void **)&p->written, &p->cap_written, (size_t)p->nwritten + 1,
                        sizeof *p->written);
    if (rc == 0 && view != NULL) {
        rc = stage_grow(p, (void **)&p->strided, &p->cap_strided, (size_t)p->nstrided + 1,
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
    return stage_note_view(p, &p->written[k]);
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
    k->p->plan_runs++;
    k->bytes += len;
    if (!k->push)
        return 0;
    stage_plan *p = k->p;
    if (k->commits) {
        k->rc = stage_grow(p, (void **)&p->commits, &p->cap_commits, (size_t)p->ncommits + 1,
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
    const hg_tensor *v = stage_note_view(p, w);
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
    return written_cmp(x, stage_note_view(p, x), y, stage_note_view(p, y)) == 0;
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

/* True when the notes already come in extent_cmp's order: one pass. */
static bool written_in_order(const stage_plan *p)
{
    for (uint32_t i = 1; i < p->nwritten; i++)
        if (extent_cmp(&p->written[i - 1], &p->written[i]) > 0)
            return false;
    return true;
}

/* Sorts the notes by written_cmp: by extent (no sort when tasks wrote in
 * address order, the common case: O(W) then), then the few strided views
 * of one extent among themselves (insertion sort: such ties are rare and
 * short; k of them cost O(k^2)). */
static void written_sort(stage_plan *p)
{
    stage_written *w = p->written;
    if (p->nwritten > 1 && !written_in_order(p)) { /* qsort takes no NULL */
        qsort(w, p->nwritten, sizeof *w, extent_cmp);
        p->plan_sorted += p->nwritten;
    }
    for (uint32_t i = 1; p->nstrided > 1 && i < p->nwritten; i++) {
        stage_written x = w[i];
        uint32_t j = i;
        for (; j > 0 && written_cmp(&w[j - 1], stage_note_view(p, &w[j - 1]), &x,
                                    stage_note_view(p, &x)) > 0;
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

/* Joins note b into note a (both of one arg, a first in the sorted order)
 * when their union is one view: two byte ranges that touch or overlap, or
 * two strided views where b continues a along one dim (tensor_join).  A
 * join that comes out dense drops the view.  True if joined. */
static bool join_notes(stage_plan *p, stage_written *a, const stage_written *b)
{
    if (a->arg != b->arg)
        return false;
    const hg_tensor *va = stage_note_view(p, a), *vb = stage_note_view(p, b);
    if (va == NULL || vb == NULL) {
        if (va != NULL || vb != NULL || b->lo > a->hi)
            return false;
        a->hi = b->hi > a->hi ? b->hi : a->hi;
        return true;
    }
    hg_tensor joined;
    size_t lo, hi;
    if (!tensor_join(va, vb, &joined) || hg_tensor_extent(&joined, &lo, &hi) != 0)
        return false;
    if (hg_tensor_is_dense(&joined))
        a->strided = STAGE_NO_VIEW; /* its slot in p->strided is left unused */
    else
        p->strided[a->strided] = joined; /* each note has a slot of its own */
    a->lo = lo;
    a->hi = hi;
    return true;
}

/* Joins neighbouring notes whose union is one view (p->written sorted and
 * deduplicated): the tiles of a row of C become one strided view, a whole
 * row of tiles one dense range, the rows of tiles one range, so planning
 * walks no tile's runs.  One pass with a stack, O(W); the joined notes keep
 * the order by start (a join keeps a's start, the smaller). */
static void written_join(stage_plan *p)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->nwritten; i++) {
        p->written[k++] = p->written[i];
        while (k > 1 && join_notes(p, &p->written[k - 2], &p->written[k - 1]))
            k--;
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
        const hg_tensor *view = stage_note_view(p, v);
        bool alone_in_order = w0 == w1 && (view == NULL || tensor_runs_in_order(view));
        bool covers_all = v->lo == lo && v->hi == hi && view == NULL;
        if (alone_in_order || covers_all) {
            int rc = stage_grow(p, (void **)&p->commits, &p->cap_commits, (size_t)p->ncommits + 1,
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
        const hg_tensor *view = stage_note_view(p, v);
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
    return it->view == STAGE_NO_VIEW || stage_note_view(p, &p->written[it->view]) == NULL;
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
    if (stage_grow(p, (void **)&p->back_order, &p->cap_order, p->nargs, sizeof *p->back_order) != 0)
        return HG_ENOMEM;
    *n = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (!stage_backs(sa))
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
int stage_copy_back_plan(stage_plan *p, uint32_t *norder, size_t *total, hg_err *e)
{
    *total = 0;
    p->ncommits = 0;
    p->note_work += p->nwritten;
    p->back_base = p->nspans;
    const uint64_t skipped = p->rstats.d2h_bytes_skipped;
    written_sort(p);
    written_dedupe(p);
    written_join(p);
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
