/*
 * copyback.c: copy back only what the graph wrote, all or nothing.
 *
 * During orchestration every task arg that writes a host-backed OUT/INOUT
 * arg is noted (stage_note_written).  Copy-back then
 *   1. plans, per arg, the ranges to fetch: each written view's extent when
 *      it is dense, else its extent or its contiguous runs, whichever moves
 *      fewer equivalent bytes (STAGE_COPY_COST_BYTES a copy); the ranges are
 *      merged and laid out back to back in host staging (a runner-owned host
 *      buffer, grow-only): staging holds only what is fetched;
 *   2. fetches every range of every arg in one batched D2H;
 *   3. only when that all succeeded, commits: the bytes each written view
 *      covers go from staging to the host buffer (a strided view's gaps and
 *      bytes no task wrote stay as the host has them), and each buffer takes
 *      one write step with the fetched ranges logged, so resident copies of
 *      it elsewhere upload only those ranges.
 * A failed fetch changes no host byte and no generation.  The fetched ranges
 * stay in the plan (stage_arg.back_first/back_n) for hg_runner_copied_back.
 *
 * Cost: O(W log W) in written views W (sorted by arg once, each arg's found
 * by binary search, its ranges merged), plus the bytes moved; the commit
 * finds each run's range by binary search.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

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

int stage_note_written(stage_plan *p, uint32_t arg, const hg_tensor *view, hg_err *e)
{
    if (p->nwritten == p->cap_written) {
        uint32_t cap = p->cap_written ? 2 * p->cap_written : 64;
        stage_written *grown = realloc(p->written, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return err_set(e, HG_ENOMEM, "task arg for '%s': cannot note what it writes",
                           p->args[arg].name);
        p->written = grown;
        p->cap_written = cap;
    }
    p->written[p->nwritten++] = (stage_written){arg, *view};
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

typedef struct run_sink {
    stage_plan *p;
    size_t runs, bytes;
    bool push; /* false: only count */
    int rc;
} run_sink;

static int sink_run(void *ctx, size_t offset, size_t len)
{
    run_sink *k = ctx;
    k->runs++;
    k->bytes += len;
    if (!k->push)
        return 0;
    uint32_t at;
    if ((k->rc = stage_spans_reserve(k->p, 1, &at)) != 0)
        return k->rc;
    k->p->spans[at] = (hg_range){offset, offset + len};
    return 0;
}

/* Pushes the ranges to fetch for one written view. */
static int plan_view(stage_plan *p, const hg_tensor *v)
{
    size_t lo, hi;
    if (hg_tensor_extent(v, &lo, &hi) != 0 || lo == hi)
        return 0;
    run_sink k = {p, 0, 0, false, 0};
    bool whole = hg_tensor_is_dense(v);
    if (!whole) {
        tensor_for_each_run(v, sink_run, &k);
        double per_run = (double)k.bytes + (double)k.runs * STAGE_COPY_COST_BYTES;
        whole = (double)(hi - lo) + STAGE_COPY_COST_BYTES <= per_run;
    }
    if (!whole) {
        k.push = true;
        tensor_for_each_run(v, sink_run, &k);
        return k.rc;
    }
    uint32_t at;
    int rc = stage_spans_reserve(p, 1, &at);
    if (rc == 0)
        p->spans[at] = (hg_range){lo, hi};
    return rc;
}

static int written_cmp(const void *a, const void *b)
{
    const stage_written *x = a, *y = b;
    return x->arg < y->arg ? -1 : x->arg > y->arg;
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

/* Plans every arg's fetch ranges and their staging places; sizes staging. */
static int plan_fetch(stage_plan *p, size_t *total, hg_err *e)
{
    *total = 0;
    if (p->nwritten > 1) /* qsort takes no NULL, even for 0 items */
        qsort(p->written, p->nwritten, sizeof *p->written, written_cmp);
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        sa->back_first = p->nspans;
        sa->back_n = 0;
        if (!backs(sa))
            continue;
        uint32_t w0, nw = written_of(p, i, &w0);
        for (uint32_t w = w0; w < w0 + nw; w++) {
            if (plan_view(p, &p->written[w].view) != 0)
                return err_set(e, HG_ENOMEM, "arg '%s': cannot plan its copy back", sa->name);
        }
        sa->back_n = (uint32_t)ranges_merge(p->spans + sa->back_first, p->nspans - sa->back_first);
        p->nspans = sa->back_first + sa->back_n;
        size_t fetched = 0;
        for (uint32_t k = sa->back_first; k < sa->back_first + sa->back_n; k++) {
            p->span_staging[k] = *total;
            fetched += p->spans[k].hi - p->spans[k].lo;
            if (!ck_add(*total, p->spans[k].hi - p->spans[k].lo, total))
                return err_set(e, HG_EOVERFLOW, "arg '%s': copy-back staging overflows", sa->name);
        }
        p->rstats.d2h_bytes_skipped += (sa->hi - sa->lo) - fetched;
    }
    return 0;
}

static int reserve_staging(stage_plan *p, size_t total, hg_err *e)
{
    if (total <= p->staging_cap)
        return 0;
    size_t cap = p->staging_cap * 2 > total ? p->staging_cap * 2 : total;
    unsigned char *grown = realloc(p->staging, cap);
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
    if (n <= p->cap_batch)
        return 0;
    if (n > UINT32_MAX)
        return HG_ENOMEM;
    device_copy *grown = realloc(p->batch, n * sizeof *grown);
    if (grown == NULL)
        return HG_ENOMEM;
    p->batch = grown;
    p->cap_batch = (uint32_t)n;
    return 0;
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

typedef struct commit_ctx {
    const stage_plan *p;
    const stage_arg *sa;
    unsigned char *host;
} commit_ctx;

/* One run of a written view: from its fetched range in staging to the host. */
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
    return 0;
}

/* Commits one arg and logs its write step; cannot fail once fetched. */
static void commit_arg(stage_plan *p, uint32_t i)
{
    const stage_arg *sa = &p->args[i];
    if (sa->back_n == 0)
        return; /* nothing written: the host and its generation are as they were */
    commit_ctx c = {p, sa, hg_hostbuf_data(sa->tensor.host)};
    uint32_t w0, nw = written_of(p, i, &w0);
    for (uint32_t w = w0; w < w0 + nw; w++) {
        const hg_tensor *v = &p->written[w].view;
        size_t lo, hi;
        if (hg_tensor_extent(v, &lo, &hi) != 0 || lo == hi)
            continue;
        if (hg_tensor_is_dense(v))
            commit_run(&c, lo, hi - lo);
        else
            tensor_for_each_run(v, commit_run, &c);
    }
    /* One write step, the fetched ranges logged: a superset of what was
     * committed, so at worst a resident copy elsewhere uploads a few more
     * bytes. */
    hostbuf_mark_ranges(sa->tensor.host, p->spans + sa->back_first, sa->back_n);
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    size_t total;
    int rc = plan_fetch(p, &total, e);
    if (rc == 0)
        rc = reserve_staging(p, total, e);
    if (rc == 0)
        rc = fetch(p, dev, e);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < p->nargs; i++)
        if (backs(&p->args[i]))
            commit_arg(p, i);
    return 0;
}
