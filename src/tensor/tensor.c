/*
 * tensor.c: views (hg_tensor): construction, slicing, sizes, byte extents,
 * density, overlap and the contiguous byte runs a view covers.
 *
 * Invariants:
 *   - every size is computed with ck_add / ck_mul, so an extent that does not
 *     fit in size_t (or, for a device view, past the 64-bit device address
 *     space) is HG_EOVERFLOW, never a wrapped number;
 *   - ndims == 0 is one element (only in a view filled in by hand: the
 *     constructors refuse ndims 0 as a likely mistake); any shape[i] == 0
 *     makes the view empty, and an empty view has extent [0, 0), 0 bytes, no
 *     runs and overlaps nothing;
 *   - a host view made by hg_tensor_host lies inside its buffer as the buffer
 *     is sized then; a hand-made or sliced view is checked at run time
 *     (stage/plan.c), not here;
 *   - a call that fails writes none of its out-params; a NULL view or a NULL
 *     out-param is HG_EINVAL (false for the two predicates);
 *   - views are taken by value: nothing here keeps a pointer to a view or
 *     dereferences a host buffer (hg_hostbuf is only compared by address).
 */
#include <stdlib.h>
#include <string.h>

#include "tensor/checked.h"
#include "tensor/tensor.h"

/* The element span of a valid, non-empty view: first and one past the last
 * element index reached. */
typedef struct elem_span {
    size_t first, end;
    bool empty;
} elem_span;

static int check_fields(const hg_tensor *t)
{
    if (t == NULL || hg_dtype_size(t->dtype) == 0)
        return HG_EINVAL;
    if (t->ndims > HG_MAX_DIMS)
        return HG_ELIMIT;
    return 0;
}

static int view_span(const hg_tensor *t, elem_span *s)
{
    int rc = check_fields(t);
    if (rc != 0)
        return rc;
    s->first = s->end = 0;
    s->empty = false;
    /* An empty view touches nothing, whatever its other dims say. */
    for (uint32_t i = 0; i < t->ndims; i++)
        if (t->shape[i] == 0)
            s->empty = true;
    if (s->empty)
        return 0;
    size_t reach = 0; /* sum of (shape[i] - 1) * strides[i] */
    for (uint32_t i = 0; i < t->ndims; i++) {
        size_t step;
        if (!ck_mul(t->shape[i] - 1, t->strides[i], &step) || !ck_add(reach, step, &reach))
            return HG_EOVERFLOW;
    }
    size_t last;
    if (!ck_add(t->offset, reach, &last) || !ck_add(last, 1, &s->end))
        return HG_EOVERFLOW;
    s->first = t->offset;
    return 0;
}

int hg_tensor_extent(const hg_tensor *t, size_t *lo, size_t *hi)
{
    if (lo == NULL || hi == NULL)
        return HG_EINVAL;
    elem_span s;
    int rc = view_span(t, &s);
    if (rc != 0)
        return rc;
    size_t size = hg_dtype_size(t->dtype), blo = 0, bhi = 0;
    if (!s.empty && (!ck_mul(s.first, size, &blo) || !ck_mul(s.end, size, &bhi)))
        return HG_EOVERFLOW;
    *lo = blo;
    *hi = bhi;
    return 0;
}

int tensor_numel(const hg_tensor *t, size_t *out)
{
    int rc = check_fields(t);
    if (rc != 0)
        return rc;
    size_t n = 1;
    for (uint32_t i = 0; i < t->ndims; i++)
        if (t->shape[i] == 0)
            n = 0; /* empty, even if the other dims would overflow */
    for (uint32_t i = 0; i < t->ndims && n != 0; i++)
        if (!ck_mul(n, t->shape[i], &n))
            return HG_EOVERFLOW;
    *out = n;
    return 0;
}

int hg_tensor_nbytes(const hg_tensor *t, size_t *out)
{
    if (out == NULL)
        return HG_EINVAL;
    size_t n, lo;
    int rc = tensor_numel(t, &n);
    if (rc == 0) /* the extent must be computable too, or the view is unusable */
        rc = hg_tensor_extent(t, &lo, &lo);
    if (rc != 0)
        return rc;
    if (!ck_mul(n, hg_dtype_size(t->dtype), &n))
        return HG_EOVERFLOW;
    *out = n;
    return 0;
}

int tensor_validate(const hg_tensor *t, const char *what, hg_err *e)
{
    what = what ? what : "view";
    if (t == NULL)
        return err_set(e, HG_EINVAL, "%s: no view", what);
    if (hg_dtype_size(t->dtype) == 0)
        return err_set(e, HG_EINVAL, "%s: dtype %d is not a dtype", what, (int)t->dtype);
    if (t->ndims > HG_MAX_DIMS)
        return err_set(e, HG_ELIMIT, "%s: %u dims, at most %d", what, t->ndims, HG_MAX_DIMS);
    size_t lo, hi, n;
    int rc = hg_tensor_nbytes(t, &n);
    if (rc == 0)
        rc = hg_tensor_extent(t, &lo, &hi);
    if (rc != 0)
        return err_set(e, rc, "%s: %u-dim %s view at element offset %zu: its size overflows", what,
                       t->ndims, hg_dtype_name(t->dtype), t->offset);
    /* A device view's extent must also fit the 64-bit device address space. */
    hg_devaddr end;
    if (t->host == NULL && hi > 0 && __builtin_add_overflow(t->device, (hg_devaddr)hi, &end))
        return err_set(e, HG_EOVERFLOW, "%s: device address 0x%llx + %zu bytes overflows", what,
                       (unsigned long long)t->device, hi);
    return 0;
}

/* Fills a dense row-major view; the caller sets the buffer fields.  ndims 0
 * is refused: a caller that means one element says ndims 1, shape {1}. */
static int dense_view(hg_tensor *v, hg_dtype dtype, uint32_t ndims, const size_t *shape)
{
    if (hg_dtype_size(dtype) == 0 || ndims == 0 || shape == NULL)
        return HG_EINVAL;
    if (ndims > HG_MAX_DIMS)
        return HG_ELIMIT;
    memset(v, 0, sizeof *v);
    v->dtype = dtype;
    v->ndims = ndims;
    size_t stride = 1;
    for (uint32_t i = ndims; i-- > 0;) {
        v->shape[i] = shape[i];
        v->strides[i] = stride;
        if (i > 0 && !ck_mul(stride, shape[i], &stride))
            return HG_EOVERFLOW;
    }
    size_t n;
    return hg_tensor_nbytes(v, &n); /* numel * size must fit as well */
}

int hg_tensor_host(hg_tensor *out, hg_hostbuf *hb, hg_dtype dtype, uint32_t ndims,
                   const size_t *shape)
{
    if (out == NULL || hb == NULL)
        return HG_EINVAL;
    hg_tensor v;
    size_t lo, hi;
    int rc = dense_view(&v, dtype, ndims, shape);
    if (rc == 0)
        rc = hg_tensor_extent(&v, &lo, &hi);
    if (rc != 0)
        return rc;
    if (hi > hg_hostbuf_size(hb)) /* a view is no use past its buffer's end */
        return HG_ERANGE;
    v.host = hb;
    *out = v;
    return 0;
}

int hg_tensor_device(hg_tensor *out, hg_devaddr addr, hg_dtype dtype, uint32_t ndims,
                     const size_t *shape)
{
    if (out == NULL)
        return HG_EINVAL;
    hg_tensor v;
    int rc = dense_view(&v, dtype, ndims, shape);
    if (rc != 0)
        return rc;
    v.device = addr;
    size_t lo = 0, hi = 0;
    hg_devaddr end;
    rc = hg_tensor_extent(&v, &lo, &hi);
    if (rc != 0)
        return rc;
    if (hi > 0 && addr == 0) /* only an empty view may have no address */
        return HG_EINVAL;
    if (__builtin_add_overflow(addr, (hg_devaddr)hi, &end))
        return HG_EOVERFLOW;
    *out = v;
    return 0;
}

int hg_tensor_slice(const hg_tensor *t, uint32_t dim, size_t start, size_t len, hg_tensor *out)
{
    size_t lo, end, skip;
    int rc = hg_tensor_extent(t, &lo, &lo);
    if (rc != 0)
        return rc;
    if (out == NULL || dim >= t->ndims)
        return HG_EINVAL;
    if (!ck_add(start, len, &end) || end > t->shape[dim])
        return HG_ERANGE;
    hg_tensor v = *t;
    if (!ck_mul(start, t->strides[dim], &skip) || !ck_add(v.offset, skip, &v.offset))
        return HG_EOVERFLOW;
    v.shape[dim] = len;
    rc = hg_tensor_extent(&v, &lo, &lo); /* inside the old extent, but say so by check */
    if (rc != 0)
        return rc;
    *out = v;
    return 0;
}

/* ------------------------------------------------------- canonical layout */

/* The view's dims reduced to what decides which elements it touches: dims of
 * shape 1 and broadcast dims (stride 0) dropped, sorted by stride, outermost
 * (largest) first, and adjacent dims that tile each other exactly merged. */
typedef struct layout {
    uint32_t n;
    size_t shape[HG_MAX_DIMS], stride[HG_MAX_DIMS];
    bool broadcast; /* some dim of shape > 1 has stride 0: elements repeat */
} layout;

static void layout_sort(layout *l)
{
    for (uint32_t i = 1; i < l->n; i++) {
        size_t sh = l->shape[i], st = l->stride[i];
        uint32_t j = i;
        for (; j > 0 && l->stride[j - 1] < st; j--) {
            l->shape[j] = l->shape[j - 1];
            l->stride[j] = l->stride[j - 1];
        }
        l->shape[j] = sh;
        l->stride[j] = st;
    }
}

/* Merges dim i into dim i+1 where stride[i] == stride[i+1] * shape[i+1]. */
static void layout_merge(layout *l)
{
    if (l->n < 2)
        return;
    uint32_t k = l->n - 1; /* the dims kept are [k, n) after the loop */
    for (uint32_t i = l->n - 1; i-- > 0;) {
        size_t tile;
        if (ck_mul(l->stride[k], l->shape[k], &tile) && tile == l->stride[i]) {
            l->shape[k] *= l->shape[i]; /* fits: bounded by the checked extent */
        } else {
            k--;
            l->shape[k] = l->shape[i];
            l->stride[k] = l->stride[i];
        }
    }
    uint32_t kept = l->n - k;
    memmove(l->shape, l->shape + k, kept * sizeof l->shape[0]);
    memmove(l->stride, l->stride + k, kept * sizeof l->stride[0]);
    l->n = kept;
}

/* For a valid, non-empty view. */
static void layout_of(const hg_tensor *t, layout *l)
{
    memset(l, 0, sizeof *l);
    for (uint32_t i = 0; i < t->ndims; i++) {
        if (t->shape[i] <= 1)
            continue;
        if (t->strides[i] == 0) {
            l->broadcast = true;
            continue;
        }
        l->shape[l->n] = t->shape[i];
        l->stride[l->n] = t->strides[i];
        l->n++;
    }
    layout_sort(l);
    layout_merge(l);
}

bool hg_tensor_is_dense(const hg_tensor *t)
{
    elem_span s;
    size_t lo, hi; /* the byte extent too: a view whose bytes overflow is not computable */
    if (view_span(t, &s) != 0 || hg_tensor_extent(t, &lo, &hi) != 0)
        return false;
    if (s.empty)
        return true;
    layout l;
    layout_of(t, &l);
    return !l.broadcast && (l.n == 0 || (l.n == 1 && l.stride[0] == 1));
}

bool hg_tensor_overlap(const hg_tensor *a, const hg_tensor *b)
{
    size_t alo, ahi, blo, bhi;
    if (hg_tensor_extent(a, &alo, &ahi) != 0 || hg_tensor_extent(b, &blo, &bhi) != 0)
        return false;
    if (a->host != NULL || b->host != NULL)
        return a->host == b->host && region_overlap(alo, ahi, blo, bhi);
    /* Device views of different allocations share one address space, so
     * compare where their bytes are in it, not their buffer-relative extents. */
    hg_devaddr a0, a1, b0, b1;
    if (__builtin_add_overflow(a->device, (hg_devaddr)alo, &a0) ||
        __builtin_add_overflow(a->device, (hg_devaddr)ahi, &a1) ||
        __builtin_add_overflow(b->device, (hg_devaddr)blo, &b0) ||
        __builtin_add_overflow(b->device, (hg_devaddr)bhi, &b1))
        return false;
    return alo < ahi && blo < bhi && a0 < b1 && b0 < a1;
}

/* ----------------------------------------------------------- byte runs */

/* Accumulates runs and hands fn maximal ones: a run that starts at or
 * before the pending run's end extends it. */
typedef struct run_merger {
    tensor_run_fn fn;
    void *ctx;
    size_t lo, hi; /* pending run [lo, hi), none when lo == hi */
} run_merger;

static int merger_add(run_merger *m, size_t lo, size_t len)
{
    if (m->lo < m->hi && lo <= m->hi && lo >= m->lo) {
        if (lo + len > m->hi)
            m->hi = lo + len;
        return 0;
    }
    int rc = m->lo < m->hi ? m->fn(m->ctx, m->lo, m->hi - m->lo) : 0;
    m->lo = lo;
    m->hi = lo + len;
    return rc;
}

static int merger_flush(run_merger *m)
{
    return m->lo < m->hi ? m->fn(m->ctx, m->lo, m->hi - m->lo) : 0;
}

/* True when visiting the layout's elements in index order visits increasing
 * addresses with no overlap: each dim's stride clears everything inside it. */
static bool layout_ordered(const layout *l)
{
    size_t inner = 1; /* elements from an inner block's first to one past its last */
    for (uint32_t i = l->n; i-- > 0;) {
        if (l->stride[i] < inner)
            return false;
        inner += (l->shape[i] - 1) * l->stride[i]; /* within the checked extent */
    }
    return true;
}

/* Walks the blocks of `chunk` contiguous elements in index order, giving
 * each to emit(ctx, element offset). */
typedef int (*block_fn)(void *ctx, size_t elem);

static int layout_walk(const layout *l, uint32_t nouter, size_t base, block_fn emit, void *ctx)
{
    size_t idx[HG_MAX_DIMS] = {0};
    size_t pos = base;
    for (;;) {
        int rc = emit(ctx, pos);
        if (rc != 0)
            return rc;
        /* Odometer: bump the innermost outer dim, carrying outward. */
        for (uint32_t d = nouter;;) {
            if (d == 0)
                return 0;
            d--;
            if (++idx[d] < l->shape[d]) {
                pos += l->stride[d];
                break;
            }
            pos -= (l->shape[d] - 1) * l->stride[d];
            idx[d] = 0;
        }
    }
}

typedef struct walk_ctx {
    run_merger m;
    size_t esize, chunk_bytes;
    size_t *collected; /* out-of-order views: element offsets, sorted later */
    size_t ncollected;
} walk_ctx;

static int emit_merge(void *ctx, size_t elem)
{
    walk_ctx *w = ctx;
    return merger_add(&w->m, elem * w->esize, w->chunk_bytes);
}

static int emit_collect(void *ctx, size_t elem)
{
    walk_ctx *w = ctx;
    w->collected[w->ncollected++] = elem;
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Views whose dims interleave (or overlap) are walked into a list of block
 * offsets, sorted, then merged.  A view with more blocks than
 * RUNS_REVISIT_MAX times its extent's elements plus RUNS_SLACK (three or
 * more overlapping dims) is refused with HG_ELIMIT rather than walked: its
 * block list would dwarf the bytes it covers. */
#define RUNS_REVISIT_MAX 4u
#define RUNS_SLACK       (1u << 20)
static int runs_unordered(const layout *l, uint32_t nouter, size_t base, size_t nelems, walk_ctx *w)
{
    size_t nblocks = 1, bytes;
    for (uint32_t i = 0; i < nouter; i++)
        if (!ck_mul(nblocks, l->shape[i], &nblocks))
            return HG_ELIMIT;
    if (nblocks > RUNS_SLACK && (nblocks - RUNS_SLACK) / RUNS_REVISIT_MAX > nelems)
        return HG_ELIMIT;
    if (!ck_mul(nblocks, sizeof(size_t), &bytes))
        return HG_ENOMEM;
    w->collected = malloc(bytes);
    if (w->collected == NULL)
        return HG_ENOMEM;
    layout_walk(l, nouter, base, emit_collect, w);
    qsort(w->collected, w->ncollected, sizeof(size_t), cmp_size);
    int rc = 0;
    for (size_t i = 0; i < w->ncollected && rc == 0; i++)
        rc = emit_merge(w, w->collected[i]);
    free(w->collected);
    return rc != 0 ? rc : merger_flush(&w->m);
}

bool tensor_runs_in_order(const hg_tensor *t)
{
    elem_span s;
    if (view_span(t, &s) != 0)
        return false;
    if (s.empty)
        return true;
    layout l;
    layout_of(t, &l);
    return layout_ordered(&l);
}

int tensor_for_each_run(const hg_tensor *t, tensor_run_fn fn, void *ctx)
{
    elem_span s;
    int rc = view_span(t, &s);
    if (rc != 0 || s.empty)
        return rc;
    if (fn == NULL)
        return HG_EINVAL;
    layout l;
    layout_of(t, &l);
    walk_ctx w = {.m = {.fn = fn, .ctx = ctx}, .esize = hg_dtype_size(t->dtype)};
    /* A unit-stride innermost dim is one contiguous block per outer index. */
    uint32_t nouter = l.n;
    size_t chunk = 1;
    if (l.n > 0 && l.stride[l.n - 1] == 1)
        chunk = l.shape[--nouter];
    w.chunk_bytes = chunk * w.esize;
    if (!layout_ordered(&l))
        return runs_unordered(&l, nouter, t->offset, s.end - s.first, &w);
    rc = layout_walk(&l, nouter, t->offset, emit_merge, &w);
    return rc != 0 ? rc : merger_flush(&w.m);
}

bool tensor_same_layout(const hg_tensor *a, const hg_tensor *b)
{
    if (a->dtype != b->dtype || a->ndims != b->ndims || a->offset != b->offset)
        return false;
    const uint32_t n = a->ndims < HG_MAX_DIMS ? a->ndims : HG_MAX_DIMS;
    for (uint32_t d = 0; d < n; d++)
        if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d])
            return false;
    return true;
}

bool tensor_join(const hg_tensor *a, const hg_tensor *b, hg_tensor *out)
{
    const uint32_t n = a->ndims;
    if (a->dtype != b->dtype || n != b->ndims || n == 0 || n > HG_MAX_DIMS)
        return false;
    uint32_t differs = n; /* the one dim whose shapes differ, if any */
    for (uint32_t d = 0; d < n; d++) {
        if (a->strides[d] != b->strides[d])
            return false;
        if (a->shape[d] != b->shape[d]) {
            if (differs != n)
                return false;
            differs = d;
        }
    }
    const uint32_t first = differs == n ? 0 : differs, last = differs == n ? n : differs + 1;
    for (uint32_t d = first; d < last; d++) {
        size_t step, next, grown, lo, hi;
        if (!ck_mul(a->shape[d], a->strides[d], &step) || !ck_add(a->offset, step, &next) ||
            next != b->offset || !ck_add(a->shape[d], b->shape[d], &grown))
            continue;
        hg_tensor t = *a;
        t.shape[d] = grown;
        if (hg_tensor_extent(&t, &lo, &hi) != 0)
            return false;
        *out = t;
        return true;
    }
    return false;
}
