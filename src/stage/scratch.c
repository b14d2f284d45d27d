/*
 * scratch.c: run-owned scratch, pooled across runs, and release.
 *
 * A run's scratch (hg_orch_scratch) is taken from the runner's pool: a free
 * block of exactly the requested size if there is one (no device allocation,
 * no poisoning: a later round of an unchanged scene allocates nothing), else
 * a new device allocation, which the sim poisons.  Release gives the run's
 * blocks back to the pool and frees the blocks this run did not take, so the
 * pool never holds more than one run's worth of scratch shapes.  When the
 * device runs short (stage_make_room), unused blocks go first, then resident
 * copies the run does not use, least recently used first.
 *
 * Cost: finding a block is O(blocks in the pool), a handful per run.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "stage/stage.h"
#include "tensor/checked.h"

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

/* A free pooled block of exactly `bytes`, or UINT32_MAX. */
static uint32_t pool_find(const stage_pool *pool, size_t bytes)
{
    for (uint32_t i = 0; i < pool->n; i++)
        if (!pool->blocks[i].in_use && pool->blocks[i].bytes == bytes)
            return i;
    return UINT32_MAX;
}

static void pool_remove(stage_plan *p, hg_device *dev, uint32_t i)
{
    device_free(dev, p->pool.blocks[i].addr, p->tally);
    p->pool.blocks[i] = p->pool.blocks[--p->pool.n];
}

bool stage_pool_trim(stage_plan *p, hg_device *dev)
{
    bool freed = false;
    for (uint32_t i = p->pool.n; i-- > 0;) {
        if (!p->pool.blocks[i].in_use) {
            pool_remove(p, dev, i);
            freed = true;
        }
    }
    return freed;
}

void stage_pool_free(stage_plan *p, hg_device *dev)
{
    while (p->pool.n > 0)
        pool_remove(p, dev, p->pool.n - 1);
}

bool stage_make_room(stage_plan *p, hg_device *dev, uint64_t bytes)
{
    if (stage_pool_trim(p, dev))
        return true;
    uint64_t n = p->cache ? residency_evict(p->cache, dev, p->tally, p->run, bytes) : 0;
    p->rstats.evictions += n;
    return n > 0;
}

/* Takes a block of `bytes` for this run: pooled, or newly allocated (making
 * room when the device is short).  Its index goes to *block. */
static int pool_take(stage_plan *p, hg_device *dev, size_t bytes, uint32_t *block)
{
    uint32_t i = pool_find(&p->pool, bytes);
    if (i != UINT32_MAX) {
        stage_pool_block *b = &p->pool.blocks[i];
        if (p->poison_scratch) {
            int rc = device_fill(dev, b->addr, STAGE_POISON, bytes);
            if (rc != 0)
                return rc;
        }
        b->in_use = true;
        b->last_run = p->run;
        *block = i;
        return 0;
    }
    if (p->pool.n == p->pool.cap) {
        uint32_t cap = p->pool.cap ? 2 * p->pool.cap : 8;
        stage_pool_block *grown = realloc(p->pool.blocks, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return HG_ENOMEM;
        p->pool.blocks = grown;
        p->pool.cap = cap;
    }
    hg_devaddr addr;
    int rc;
    while ((rc = device_malloc(dev, bytes, &addr, p->tally)) == HG_EDEVMEM &&
           stage_make_room(p, dev, bytes)) {
    }
    if (rc != 0)
        return rc;
    p->pool.blocks[p->pool.n] =
        (stage_pool_block){.addr = addr, .bytes = bytes, .in_use = true, .last_run = p->run};
    *block = p->pool.n++;
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
        uint32_t block;
        rc = pool_take(p, dev, bytes, &block);
        if (rc != 0)
            return err_set(e, rc, "scratch '%s': cannot allocate %zu device bytes: %s", label,
                           bytes, hg_strerror(rc));
        t.device = p->pool.blocks[block].addr;
        sa->kind = STAGE_SCRATCH;
        sa->release = RELEASE_POOLED;
        sa->dev_region = t.device;
        sa->hi = bytes;
    }
    /* A zero-byte scratch has no address; tasks match it by that. */
    sa->tensor = t;
    *index = p->nall++;
    if (view)
        *view = t;
    return 0;
}

void stage_release(stage_plan *p, hg_device *dev)
{
    for (uint32_t i = 0; i < p->pool.n; i++)
        p->pool.blocks[i].in_use = false;
    /* Blocks this run did not take are shapes it no longer asks for. */
    for (uint32_t i = p->pool.n; i-- > 0;)
        if (p->pool.blocks[i].last_run != p->run)
            pool_remove(p, dev, i);
    for (uint32_t i = 0; i < p->nall; i++)
        if (p->args[i].release == RELEASE_POOLED)
            p->args[i].release = RELEASE_NONE;
    p->nall = p->nargs;
}
