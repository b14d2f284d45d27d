/*
 * transfer.c: the device memory a run touches, and the bytes it moves.
 *
 * Retained buffer: one per runner, grow-only.  Growth frees the old buffer
 * before allocating the new one (the device may not hold both), so a failed
 * growth leaves the runner with no buffer rather than a stale capacity.
 *
 * Copy-back moves only the bytes a view covers: a strided OUT view's gaps
 * were never uploaded, so copying its whole extent back would overwrite host
 * bytes the graph never wrote.  Each copied arg bumps its host buffer's
 * generation, since its host bytes changed through the runtime.
 */
#include <stdlib.h>
#include <string.h>

#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

int stage_retained_reserve(stage_retained *r, hg_device *dev, size_t required, hg_err *e)
{
    if (required <= r->capacity)
        return 0;
    stage_retained_free(r, dev);
    hg_devaddr addr;
    int rc = hg_devbuf_malloc(dev, required, &addr);
    if (rc != 0)
        return err_set(e, rc, "bind: cannot allocate the retained buffer of %zu bytes: %s",
                       required, hg_strerror(rc));
    r->addr = addr;
    r->capacity = required;
    return 0;
}

void stage_retained_free(stage_retained *r, hg_device *dev)
{
    if (r->capacity != 0)
        hg_devbuf_free(dev, r->addr);
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
        if (sa->kind != STAGE_SLICE)
            continue;
        sa->dev_region = r->addr + sa->slice_offset;
        if (!sa->upload)
            continue;
        int rc = hg_devbuf_copy_to(dev, sa->dev_region, host_bytes(sa) + sa->lo, sa->hi - sa->lo);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': host -> device copy of %zu bytes failed: %s", sa->name,
                           sa->hi - sa->lo, hg_strerror(rc));
    }
    return 0;
}

static int plan_grow(stage_plan *p, hg_err *e)
{
    if (p->nall < p->cap)
        return 0;
    uint32_t cap = p->cap ? p->cap * 2 : 16;
    stage_arg *grown = realloc(p->args, (size_t)cap * sizeof *grown);
    if (grown == NULL)
        return err_set(e, HG_ENOMEM, "scratch: cannot grow the plan");
    p->args = grown;
    p->cap = cap;
    return 0;
}

int stage_add_scratch(stage_plan *p, hg_device *dev, const char *name, hg_dtype dtype,
                      uint32_t ndims, const size_t *shape, uint32_t *index, hg_tensor *view,
                      hg_err *e)
{
    const char *label = name ? name : "scratch";
    hg_tensor t;
    /* A placeholder address lets the dense-view constructor check the shape. */
    int rc = hg_tensor_device(&t, 1, dtype, ndims, shape);
    size_t bytes = 0;
    if (rc == 0)
        rc = hg_tensor_nbytes(&t, &bytes);
    if (rc != 0)
        return err_set(e, rc, "scratch '%s': bad shape: %s", label, hg_strerror(rc));
    if (p->nall - p->nargs >= HG_MAX_TENSOR_ARGS)
        return err_set(e, HG_ELIMIT, "scratch '%s': more than %d scratch tensors in one run", label,
                       HG_MAX_TENSOR_ARGS);
    rc = plan_grow(p, e);
    if (rc != 0)
        return rc;
    stage_arg *sa = &p->args[p->nall];
    memset(sa, 0, sizeof *sa);
    sa->name = label;
    sa->dir = HG_INOUT;
    if (bytes == 0) {
        t.device = 0;
        sa->kind = STAGE_ZERO;
    } else {
        hg_devaddr addr;
        rc = hg_devbuf_malloc(dev, bytes, &addr);
        if (rc != 0)
            return err_set(e, rc, "scratch '%s': cannot allocate %zu device bytes: %s", label,
                           bytes, hg_strerror(rc));
        t.device = addr;
        sa->kind = STAGE_SCRATCH;
        sa->release = RELEASE_RUN_OWNED;
        sa->owned_addr = addr;
        sa->dev_region = addr;
        sa->hi = bytes;
    }
    /* A zero-byte scratch has no address; tasks match it by that. */
    sa->tensor = t;
    *index = p->nall++;
    if (view)
        *view = t;
    return 0;
}

typedef struct copy_back_ctx {
    hg_device *dev;
    const stage_arg *sa;
    char *host;
} copy_back_ctx;

static int copy_back_run(void *ctx, size_t offset, size_t len)
{
    copy_back_ctx *c = ctx;
    return hg_devbuf_copy_from(c->dev, c->host + offset, c->sa->dev_region + (offset - c->sa->lo),
                               len);
}

int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e)
{
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_SLICE || !sa->copy_back)
            continue;
        copy_back_ctx c = {dev, sa, (char *)hg_hostbuf_data(sa->tensor.host)};
        int rc = hg_tensor_is_dense(&sa->tensor)
                     ? copy_back_run(&c, sa->lo, sa->hi - sa->lo)
                     : tensor_for_each_run(&sa->tensor, copy_back_run, &c);
        /* Even a failed copy may have changed host bytes: move the generation on. */
        hg_hostbuf_mark_written(sa->tensor.host, sa->lo, sa->hi - sa->lo);
        if (rc != 0)
            return err_set(e, rc, "arg '%s': device -> host copy back failed: %s", sa->name,
                           hg_strerror(rc));
    }
    return 0;
}

void stage_release(stage_plan *p, hg_device *dev)
{
    for (uint32_t i = 0; i < p->nall; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->release == RELEASE_RUN_OWNED) {
            hg_devbuf_free(dev, sa->owned_addr);
            sa->owned_addr = 0;
            sa->release = RELEASE_NONE;
        }
    }
    p->nall = p->nargs;
}
