/*
 * transfer.c: the retained buffer and the upload half of bind.
 *
 * Retained buffer: one per runner, grow-only and geometric.  Growth frees the
 * old buffer before allocating the new one (the device may not hold both),
 * so a failed growth leaves the runner with no buffer rather than a stale
 * capacity.
 *
 * Upload copies IN/INOUT slices and the resident copies bind.c found stale
 * or new (a hit is not touched; a stale copy whose buffer's write log
 * reaches back takes only the ranges written since), all in one batched
 * H2D, and fills pure OUT slices with STAGE_POISON on the device, so a
 * kernel that reads bytes it did not write never sees another arg's data.
 * Copy-back is copyback.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
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

/* The ranges arg sa uploads: its extent, or a stale resident copy's ranges
 * the host wrote since it was published. */
static size_t upload_ranges(const stage_arg *sa)
{
    if (!sa->upload || (sa->kind != STAGE_SLICE && sa->kind != STAGE_RESIDENT))
        return 0;
    return sa->up_whole ? 1 : sa->up_n;
}

/* Fills pure OUT slices with STAGE_POISON on the device. */
static int poison_outs(stage_plan *p, hg_device *dev, hg_err *e)
{
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_SLICE || sa->upload)
            continue;
        int rc = device_fill(dev, sa->dev_region, STAGE_POISON, sa->hi - sa->lo);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': poisoning the OUT slice of %zu bytes failed: %s",
                           sa->name, sa->hi - sa->lo, hg_strerror(rc));
    }
    return 0;
}

int stage_upload(stage_plan *p, hg_device *dev, const stage_retained *r, hg_err *e)
{
    size_t n = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind == STAGE_SLICE)
            sa->dev_region = r->addr + sa->slice_offset;
        n += upload_ranges(sa);
    }
    if (stage_batch_reserve(p, n) != 0)
        return err_set(e, HG_ENOMEM, "bind: cannot plan %zu copies", n);
    n = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        size_t k = upload_ranges(sa);
        for (size_t j = 0; j < k; j++) {
            size_t lo = sa->up_whole ? sa->lo : p->spans[sa->up_first + j].lo;
            size_t hi = sa->up_whole ? sa->hi : p->spans[sa->up_first + j].hi;
            p->batch[n++] = (device_copy){(void *)(host_bytes(sa) + lo),
                                          sa->dev_region + (lo - sa->lo), hi - lo};
        }
    }
    size_t done = 0;
    const uint64_t t0 = clock_now_ns();
    int rc = device_copy_batch(dev, true, p->batch, n, p->tally, &done);
    p->rstats.h2d_ns += clock_now_ns() - t0;
    if (rc != 0) {
        const char *name = stage_batch_arg(p, done, upload_ranges);
        return err_set(e, rc, "arg '%s': host -> device copy failed: %s", name, hg_strerror(rc));
    }
    return poison_outs(p, dev, e);
}
