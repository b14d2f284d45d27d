/*
 * plan.c: the bind plan.  Validates every arg with checked arithmetic,
 * classifies it, and lays out the retained-buffer slices, before any device
 * memory is touched: an impossible size fails here, allocating nothing.
 * (Resident args are bound to their copies between build and layout, in
 * bind.c: the ones that do not fit become slices.)
 *
 * Host-backed args that overlap in one host buffer are refused when either is
 * written: each gets its own device slice, so the aliasing the host had would
 * silently split in two on the device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/checked.h"
#include "tensor/tensor.h"

void stage_plan_init(stage_plan *p, hg_device_counters *tally)
{
    memset(p, 0, sizeof *p);
    p->tally = tally;
}

/* The pool's device memory is freed by stage_pool_free (it needs the
 * device); this frees the host side. */
void stage_plan_free(stage_plan *p)
{
    free(p->args);
    free(p->staging);
    free(p->pool.blocks);
    free(p->spans);
    free(p->span_staging);
    free(p->written);
    free(p->strided);
    free(p->commits);
    free(p->back_order);
    free(p->batch);
    stage_plan_init(p, p->tally);
}

static int plan_reserve(stage_plan *p, uint32_t n, hg_err *e)
{
    if (n <= p->cap)
        return 0;
    uint32_t cap = p->cap ? p->cap : 16;
    while (cap < n)
        cap *= 2;
    stage_arg *grown = realloc(p->args, (size_t)cap * sizeof *grown);
    if (grown == NULL)
        return err_set(e, HG_ENOMEM, "bind: cannot allocate the plan for %u args", n);
    p->args = grown;
    p->cap = cap;
    return 0;
}

static bool is_written(hg_dir d)
{
    return d == HG_OUT || d == HG_INOUT;
}

static int check_limits(const hg_arg *args, uint32_t nargs, hg_err *e)
{
    uint32_t ntensors = 0, nscalars = 0;
    for (uint32_t i = 0; i < nargs; i++) {
        if (args[i].dir == HG_SCALAR)
            nscalars++;
        else
            ntensors++;
    }
    if (ntensors > HG_MAX_TENSOR_ARGS)
        return err_set(e, HG_ELIMIT, "args: %u tensor args, the limit is %d", ntensors,
                       HG_MAX_TENSOR_ARGS);
    if (nscalars > HG_MAX_SCALAR_ARGS)
        return err_set(e, HG_ELIMIT, "args: %u scalar args, the limit is %d", nscalars,
                       HG_MAX_SCALAR_ARGS);
    return 0;
}

static int check_name(const hg_arg *args, uint32_t i, hg_err *e)
{
    const char *name = args[i].name;
    if (name == NULL || name[0] == '\0')
        return err_set(e, HG_EINVAL, "arg %u: name is empty", i);
    for (uint32_t j = 0; j < i; j++)
        if (strcmp(args[j].name, name) == 0)
            return err_set(e, HG_EINVAL, "arg '%s': name used by args %u and %u", name, j, i);
    if (args[i].dir < HG_IN || args[i].dir > HG_SCALAR)
        return err_set(e, HG_EINVAL, "arg '%s': direction %d is not IN, OUT, INOUT or SCALAR", name,
                       (int)args[i].dir);
    return 0;
}

/* A host-backed arg: a slice of the retained buffer, or, when declared
 * resident and read (IN, INOUT), a copy in the residency cache. */
static int classify_host(stage_arg *sa, hg_residency residency, bool cache, hg_err *e)
{
    size_t size = hg_hostbuf_size(sa->tensor.host);
    if (sa->hi > size)
        return err_set(e, HG_ERANGE, "arg '%s': view ends at byte %zu, buffer has %zu", sa->name,
                       sa->hi, size);
    const bool resident = residency == HG_RESIDENT && sa->dir != HG_OUT && cache;
    sa->kind = resident ? STAGE_RESIDENT : STAGE_SLICE;
    sa->release = resident ? RELEASE_RESIDENT : RELEASE_RETAINED_SLICE;
    sa->upload = sa->dir != HG_OUT;
    sa->up_whole = true;
    sa->copy_back = is_written(sa->dir);
    return 0;
}

/* Why a non-empty device view's address is refused, by its owner. */
static const char *device_view_refusal(device_addr_owner owner)
{
    switch (owner) {
    case DEVICE_ADDR_RUNTIME:
        return "runtime-owned memory (a retained buffer, resident copy or scratch)";
    case DEVICE_ADDR_NONE:
        return "no live allocation (freed, or never allocated)";
    default:
        return "not an address of this device (another device's, or none)";
    }
}

/* A non-empty device view must lie inside one user allocation
 * (hg_devbuf_malloc) of the runner's own device. */
static int classify_device(stage_arg *sa, hg_device *dev, hg_err *e)
{
    hg_devaddr base = 0;
    size_t size = 0;
    const hg_devaddr start = sa->tensor.device;
    const device_addr_owner owner = device_addr_lookup(dev, start, &base, &size);
    if (owner != DEVICE_ADDR_USER)
        return err_set(e, HG_ERANGE,
                       "arg '%s': device address 0x%llx is not in a user allocation of device "
                       "%s: %s",
                       sa->name, (unsigned long long)start, hg_device_spec(dev),
                       device_view_refusal(owner));
    const size_t room = size - (size_t)(start - base);
    if (sa->hi > room)
        return err_set(e, HG_ERANGE,
                       "arg '%s': view ends at byte %zu, device buffer has %zu from its address",
                       sa->name, sa->hi, room);
    sa->kind = STAGE_DEVICE_VIEW;
    sa->release = RELEASE_USER_OWNED;
    sa->dev_region = start + sa->lo;
    return 0;
}

/* A zero-byte arg of any kind (a host view, a device view at address 0 as
 * hg_tensor_device makes it, or one at a live address) gets a null address
 * and no allocation; a non-empty one needs exactly one of the two buffers. */
static int classify(stage_arg *sa, const hg_arg *arg, const stage_plan *p, hg_device *dev,
                    hg_err *e)
{
    const hg_tensor *t = &sa->tensor;
    if (arg->residency != HG_STAGED && arg->residency != HG_RESIDENT)
        return err_set(e, HG_EINVAL, "arg '%s': residency %d is neither HG_STAGED nor HG_RESIDENT",
                       sa->name, (int)arg->residency);
    if (t->host != NULL && t->device != 0)
        return err_set(e, HG_EINVAL,
                       "arg '%s': tensor has both a host buffer and a device address 0x%llx",
                       sa->name, (unsigned long long)t->device);
    char what[HG_ERR_MSG_MAX / 2];
    snprintf(what, sizeof what, "arg '%s'", sa->name);
    int rc = tensor_validate(t, what, e);
    if (rc != 0)
        return rc;
    rc = hg_tensor_extent(t, &sa->lo, &sa->hi);
    if (rc != 0)
        return err_set(e, rc, "arg '%s': extent does not fit in size_t", sa->name);
    if (sa->lo == sa->hi) {
        sa->kind = STAGE_ZERO;
        sa->release = RELEASE_NONE;
        return 0;
    }
    if (t->host == NULL && t->device == 0)
        return err_set(e, HG_EINVAL,
                       "arg '%s': a non-empty tensor needs a host buffer or a device address",
                       sa->name);
    return t->host ? classify_host(sa, arg->residency, p->cache != NULL, e)
                   : classify_device(sa, dev, e);
}

/* Host-backed args have their own device memory each (slice or resident
 * copy). */
static bool own_device_copy(const stage_arg *a)
{
    return a->kind == STAGE_SLICE || a->kind == STAGE_RESIDENT;
}

static int check_aliasing(const stage_plan *p, hg_err *e)
{
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *a = &p->args[i];
        if (!own_device_copy(a))
            continue;
        for (uint32_t j = i + 1; j < p->nargs; j++) {
            const stage_arg *b = &p->args[j];
            if (!own_device_copy(b) || a->tensor.host != b->tensor.host)
                continue;
            if (!region_overlap(a->lo, a->hi, b->lo, b->hi))
                continue;
            if (is_written(a->dir) || is_written(b->dir))
                return err_set(e, HG_EINVAL,
                               "args '%s' and '%s' overlap in one host buffer and '%s' is written",
                               a->name, b->name, is_written(a->dir) ? a->name : b->name);
        }
    }
    return 0;
}

/* A slice of len bytes at `at` or later: at the next multiple of the
 * device's allocation piece when it would cross one and fits in one piece
 * (a kernel arg must lie in one piece; device_alloc_piece). */
static size_t slice_place(const stage_plan *p, size_t at, size_t len)
{
    size_t piece = p->piece;
    if (piece == 0 || len == 0 || len > piece || at / piece == (at + len - 1) / piece)
        return at;
    return (at / piece + 1) * piece;
}

int stage_plan_layout(stage_plan *p, hg_err *e)
{
    size_t required = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        if (sa->kind != STAGE_SLICE)
            continue;
        size_t end;
        if (p->piece != 0 && required > SIZE_MAX - p->piece)
            return err_set(e, HG_EOVERFLOW, "arg '%s': the retained size overflows", sa->name);
        sa->slice_offset = required = slice_place(p, required, sa->hi - sa->lo);
        if (!ck_add(required, sa->hi - sa->lo, &end) ||
            !ck_align_up(end, STAGE_SLICE_ALIGN, &required))
            return err_set(e, HG_EOVERFLOW,
                           "arg '%s': staging %zu more bytes after %zu overflows the retained size",
                           sa->name, sa->hi - sa->lo, sa->slice_offset);
    }
    p->required = required;
    return 0;
}

int stage_plan_build(stage_plan *p, hg_device *dev, const hg_arg *args, uint32_t nargs, hg_err *e)
{
    p->nargs = p->nall = 0;
    p->required = 0;
    p->nspans = p->nwritten = p->nstrided = 0;
    p->piece = device_alloc_piece(dev);
    memset(&p->rstats, 0, sizeof p->rstats);
    if (args == NULL && nargs != 0)
        return err_set(e, HG_EINVAL, "args: NULL with nargs %u", nargs);
    int rc = check_limits(args, nargs, e);
    if (rc == 0)
        rc = plan_reserve(p, nargs, e);
    for (uint32_t i = 0; rc == 0 && i < nargs; i++) {
        rc = check_name(args, i, e);
        if (rc != 0)
            break;
        stage_arg *sa = &p->args[i];
        memset(sa, 0, sizeof *sa);
        sa->name = args[i].name;
        sa->dir = args[i].dir;
        sa->tensor = args[i].tensor;
        p->nargs = p->nall = i + 1;
        if (sa->dir == HG_SCALAR)
            sa->kind = STAGE_SCALAR;
        else
            rc = classify(sa, &args[i], p, dev, e);
    }
    if (rc == 0)
        rc = check_aliasing(p, e);
    return rc;
}

const char *stage_batch_arg(const stage_plan *p, size_t index,
                            size_t (*ranges_of)(const stage_arg *))
{
    size_t seen = 0;
    for (uint32_t i = 0; i < p->nargs; i++) {
        seen += ranges_of(&p->args[i]);
        if (index < seen)
            return p->args[i].name;
    }
    return "?";
}

static int check_access(const stage_arg *sa, const hg_task_arg *ta, hg_err *e)
{
    if (ta->access != HG_IN && ta->access != HG_OUT && ta->access != HG_INOUT)
        return err_set(e, HG_EINVAL, "task arg for '%s': access %d is not IN, OUT or INOUT",
                       sa->name, (int)ta->access);
    if (sa->kind == STAGE_SCALAR)
        return err_set(e, HG_EINVAL, "task arg for '%s': the arg is a scalar", sa->name);
    if (sa->dir == HG_IN && is_written(ta->access))
        return err_set(e, HG_EINVAL, "task arg for '%s': a task writes an IN arg", sa->name);
    if (ta->view.host != sa->tensor.host || ta->view.device != sa->tensor.device)
        return err_set(e, HG_EINVAL, "task arg for '%s': view is of another buffer", sa->name);
    return 0;
}

int stage_resolve(const stage_plan *p, const hg_task_arg *ta, graph_targ *out, hg_err *e)
{
    if (ta->arg >= p->nall)
        return err_set(e, HG_EINVAL, "task arg: arg index %u, the run has %u", ta->arg, p->nall);
    const stage_arg *sa = &p->args[ta->arg];
    int rc = check_access(sa, ta, e);
    if (rc == 0 && tensor_validate(&ta->view, "", NULL) != 0) {
        /* Name the arg only on failure: this runs once per task arg. */
        char what[HG_ERR_MSG_MAX / 2];
        snprintf(what, sizeof what, "task arg for '%s'", sa->name);
        rc = tensor_validate(&ta->view, what, e);
    }
    if (rc != 0)
        return rc;
    size_t lo, hi;
    rc = hg_tensor_extent(&ta->view, &lo, &hi);
    if (rc != 0)
        return err_set(e, rc, "task arg for '%s': view extent does not fit in size_t", sa->name);
    memset(out, 0, sizeof *out);
    if (lo != hi && (lo < sa->lo || hi > sa->hi))
        return err_set(e, HG_ERANGE,
                       "task arg for '%s': view bytes [%zu, %zu) leave the arg's [%zu, %zu)",
                       sa->name, lo, hi, sa->lo, sa->hi);
    if (lo != hi) {
        out->lo = sa->dev_region + (lo - sa->lo);
        out->hi = out->lo + (hi - lo);
        out->addr = out->lo;
    }
    out->dtype = ta->view.dtype;
    out->ndims = ta->view.ndims;
    memcpy(out->shape, ta->view.shape, sizeof out->shape);
    memcpy(out->strides, ta->view.strides, sizeof out->strides);
    out->read = ta->access != HG_OUT;
    out->write = is_written(ta->access);
    return 0;
}
