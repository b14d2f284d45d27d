/*
 * transfer.c: the device memory a run touches, and the bytes it moves.
 *
 * Retained buffer: one per runner, grow-only and geometric.  Growth frees the
 * old buffer before allocating the new one (the device may not hold both),
 * so a failed growth leaves the runner with no buffer rather than a stale
 * capacity.
 *
 * Upload copies IN/INOUT slices and the resident copies bind.c found stale
 * or new (a hit is not touched), and fills pure OUT slices with STAGE_POISON
 * on the device: bytes no task writes must not hand the host whatever an
 * earlier run left in the retained buffer (another arg's data).
 *
 * Copy-back is all or nothing.  Phase 1 lands every D2H in host staging (the
 * plan's, grow-only, reused across runs), laid out as each arg's extent
 * image; phase 2, which cannot fail, writes the bytes each view covers to
 * its host buffer and moves the generation on.  A failed D2H therefore
 * changes no host byte and no generation.  The price is one host memcpy of
 * the copied bytes (docs/PERFORMANCE.md).  Only the covered bytes reach the
 * host: a strided OUT view's gaps were never uploaded, so they must stay as
 * the host has them.  Over the link, a strided view moves its whole extent
 * in one copy or one copy per contiguous run, whichever is cheaper under
 * STAGE_COPY_COST_BYTES; the gaps land in staging only.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

/* The capacity to grow to: at least double (geometric, so a slowly growing
 * arg reallocates O(log n) times), never past what the device has free. */
static size_t retained_target(const stage_retained *r, hg_device *dev, size_t required)
{
    size_t doubled;
    if (!ck_mul(r->capacity, 2, &doubled) || doubled <= required)
        return required;
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    uint64_t cap = hg_device_capacity(dev);
    /* Free memory once the old buffer is gone (it is freed first). */
    uint64_t held = c.live_bytes > r->capacity ? c.live_bytes - r->capacity : 0;
    uint64_t room = cap > held ? cap - held : 0;
    return doubled <= room ? doubled : required;
}

int stage_retained_reserve(stage_retained *r, hg_device *dev, hg_device_counters *tally,
                           size_t required, hg_err *e)
{
    if (required <= r->capacity)
        return 0;
    size_t target = retained_target(r, dev, required);
    stage_retained_free(r, dev, tally);
    hg_devaddr addr;
    int rc = device_malloc(dev, target, &addr, tally);
    if (rc == HG_EDEVMEM && target > required) {
        target = required; /* another user took the room: exact is enough */
        rc = device_malloc(dev, target, &addr, tally);
    }
    if (rc != 0)
        return err_set(e, rc, "bind: cannot allocate the retained buffer of %zu bytes: %s",
                       required, hg_strerror(rc));
    r->addr = addr;
    r->capacity = target;
    return 0;
}

void stage_retained_free(stage_retained *r, hg_device *dev, hg_device_counters *tally)
{
    if (r->capacity != 0)
        device_free(dev, r->addr, tally);
    r->addr = 0;
    r->capacity = 0;
}

static const char *host_bytes(const stage_arg *sa)
{
    return (const char *)hg_hostbuf_data(sa->tensor.host);
}

int stage_upload(stage_plan *p, hg_device *dev, const stage_retained *r, hg_err *e)
{
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind == STAGE_RESIDENT && !sa->upload)
            continue; /* a hit: current on the device */
        if (sa->kind != STAGE_SLICE && sa->kind != STAGE_RESIDENT)
            continue;
        if (sa->kind == STAGE_SLICE)
            sa->dev_region = r->addr + sa->slice_offset;
        const size_t bytes = sa->hi - sa->lo;
        int rc = sa->upload
                     ? device_copy_to(dev, sa->dev_region, host_bytes(sa) + sa->lo, bytes, p->tally)
                     : device_fill(dev, sa->dev_region, STAGE_POISON, bytes);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': %s of %zu bytes failed: %s", sa->name,
                           sa->upload ? "host -> device copy" : "poisoning the OUT slice", bytes,
                           hg_strerror(rc));
    }
    return 0;
}

/* ------------------------------------------------------------ copy back */

/* OUT and INOUT args with device memory of their own come back. */
static bool backs(const stage_arg *sa)
{
    return (sa->kind == STAGE_SLICE || sa->kind == STAGE_RESIDENT) && sa->copy_back;
}

typedef struct run_count {
    size_t runs, bytes;
} run_count;

static int count_run(void *ctx, size_t offset, size_t len)
{
    run_count *c = ctx;
    (void)offset;
    c->runs++;
    c->bytes += len;
    return 0;
}

/* Lays out each copy-back arg's extent image in host staging and picks how
 * it comes back; grows the staging buffer (geometrically) to fit. */
static int copy_back_plan(stage_plan *p, hg_err *e)
{
    size_t total = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (!backs(sa))
            continue;
        const size_t extent = sa->hi - sa->lo;
        sa->back_whole = true;
        if (!hg_tensor_is_dense(&sa->tensor)) {
            run_count c = {0, 0};
            tensor_for_each_run(&sa->tensor, count_run, &c);
            /* per-run: c.bytes + runs * cost; whole: extent + one cost */
            double per_run = (double)c.bytes + (double)c.runs * STAGE_COPY_COST_BYTES;
            sa->back_whole = (double)extent + STAGE_COPY_COST_BYTES <= per_run;
        }
        sa->staging_offset = total;
        if (!ck_add(total, extent, &total))
            return err_set(e, HG_EOVERFLOW, "arg '%s': copy-back staging overflows size_t",
                           sa->name);
    }
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

typedef struct back_ctx {
    hg_device *dev;
    hg_device_counters *tally;
    const stage_arg *sa;
    unsigned char *image; /* staging bytes standing for the arg's byte lo */
    unsigned char *host;  /* the host buffer's bytes */
} back_ctx;

/* One contiguous run, device -> staging. */
static int back_fetch_run(void *ctx, size_t offset, size_t len)
{
    back_ctx *c = ctx;
    size_t rel = offset - c->sa->lo;
    return device_copy_from(c->dev, c->image + rel, c->sa->dev_region + rel, len, c->tally);
}

/* One contiguous run, staging -> host. */
static int back_commit_run(void *ctx, size_t offset, size_t len)
{
    back_ctx *c = ctx;
    memcpy(c->host + offset, c->image + (offset - c->sa->lo), len);
    return 0;
}

static back_ctx back_ctx_of(stage_plan *p, hg_device *dev, const stage_arg *sa)
{
    back_ctx c = {dev, p->tally, sa, p->staging + sa->staging_offset,
                  (unsigned char *)hg_hostbuf_data(sa->tensor.host)};
    return c;
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    int rc = copy_back_plan(p, e);
    /* Phase 1: every D2H into staging.  Nothing on the host has changed. */
    for (uint32_t i = 0; rc == 0 && i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (!backs(sa))
            continue;
        back_ctx c = back_ctx_of(p, dev, sa);
        rc = sa->back_whole ? back_fetch_run(&c, sa->lo, sa->hi - sa->lo)
                            : tensor_for_each_run(&sa->tensor, back_fetch_run, &c);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': device -> host copy back failed: %s", sa->name,
                           hg_strerror(rc));
    }
    if (rc != 0)
        return rc;
    /* Phase 2: commit, which cannot fail: the covered bytes, and only them,
     * reach the host, and the generation moves on. */
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (!backs(sa))
            continue;
        back_ctx c = back_ctx_of(p, dev, sa);
        if (hg_tensor_is_dense(&sa->tensor))
            back_commit_run(&c, sa->lo, sa->hi - sa->lo);
        else
            tensor_for_each_run(&sa->tensor, back_commit_run, &c);
        hg_hostbuf_mark_written(sa->tensor.host, sa->lo, sa->hi - sa->lo);
    }
    return 0;
}
