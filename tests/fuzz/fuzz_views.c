/*
 * fuzz_views.c: tensor views and the bind plan.
 *
 * Part 1, views: two random views (any dtype value, 0-6 dims, small or huge
 * shapes, strides and offsets) against a reference computed in 128-bit
 * arithmetic: hg_tensor_extent, hg_tensor_nbytes, hg_tensor_slice (fails
 * exactly when the header says, writes nothing then), hg_tensor_is_dense
 * (against the bytes the elements cover, counted one by one when few) and
 * hg_tensor_overlap.
 *
 * Part 2, the bind plan: a run over 1-5 random args (names, directions,
 * residency and views of any shape, stride and offset over three small host
 * buffers and a user device buffer; scalars) whose one task writes every
 * element of its OUT and INOUT args.  The run must succeed exactly when the
 * args are valid by the header's rules (checked here independently); then
 * every host byte equals the oracle's (the elements written, nothing
 * else), each written buffer's generation moved once, a dense written arg
 * was copied back as its extent; on failure nothing changed.  The same run
 * again (residency hits this time) must agree too.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hostgraph.h"

typedef unsigned __int128 u128;

enum { NBUF = 3, MAX_BUF = 256, MAX_ARGS = 5, MAX_COUNT = 4096 };

/* ---------------------------------------------------------- reference */

/* The header's extent in 128-bit arithmetic: an HG_E* code, or 0 and the
 * byte extent (lo == hi == 0 when empty). */
static int ref_extent(const hg_tensor *t, u128 *lo, u128 *hi)
{
    size_t es = hg_dtype_size(t->dtype);
    if (es == 0)
        return HG_EINVAL;
    if (t->ndims > HG_MAX_DIMS)
        return HG_ELIMIT;
    *lo = *hi = 0;
    u128 end = (u128)t->offset + 1;
    for (uint32_t i = 0; i < t->ndims; i++) {
        if (t->shape[i] == 0)
            return 0;
        u128 term = (u128)(t->shape[i] - 1) * t->strides[i]; /* < 2^128 */
        if (term > SIZE_MAX)
            end = (u128)SIZE_MAX + 1; /* saturate: 5 such terms would wrap */
        else
            end += term;
    }
    if (end * es > SIZE_MAX)
        return HG_EOVERFLOW;
    *lo = (u128)t->offset * es;
    *hi = end * es;
    return 0;
}

/* Elements of t, saturated at MAX_COUNT + 1; 0 when empty. */
static size_t ref_count(const hg_tensor *t, u128 *exact)
{
    u128 n = 1;
    for (uint32_t i = 0; i < t->ndims && i < HG_MAX_DIMS; i++) {
        n *= t->shape[i];
        if (n > ((u128)1 << 64))
            n = ((u128)1 << 64) + 1; /* beyond any size_t: keep it so */
    }
    *exact = n;
    return n > MAX_COUNT ? MAX_COUNT + 1 : (size_t)n;
}

/* Calls fn(ctx, element offset) for every element of a view with at most
 * MAX_COUNT elements, in row-major index order. */
static void each_element(const hg_tensor *t, void (*fn)(void *, size_t, size_t), void *ctx)
{
    size_t idx[HG_MAX_DIMS] = {0}, count, k = 0;
    u128 exact;
    count = ref_count(t, &exact);
    for (size_t e = 0; e < count; e++) {
        size_t off = t->offset;
        for (uint32_t i = 0; i < t->ndims; i++)
            off += idx[i] * t->strides[i];
        fn(ctx, off, k++);
        for (uint32_t i = t->ndims; i-- > 0;) {
            if (++idx[i] < t->shape[i])
                break;
            idx[i] = 0;
        }
    }
}

typedef struct cover {
    unsigned char *count; /* per byte of the extent, saturated at 2 (it is a byte) */
    size_t lo, es;
} cover;

static void cover_one(void *ctx, size_t off, size_t k)
{
    cover *c = ctx;
    for (size_t b = 0; b < c->es; b++) {
        unsigned char *n = &c->count[off * c->es + b - c->lo];
        *n += *n < 2; /* 256 visits must not read as 0 */
    }
}

/* The view is dense by counting: every byte of the extent covered once.
 * -1 when too big to count. */
static int ref_dense(const hg_tensor *t, size_t lo, size_t hi)
{
    u128 exact;
    if (ref_count(t, &exact) > MAX_COUNT || hi - lo > (1u << 16))
        return -1;
    if (lo == hi)
        return 1;
    cover c = {calloc(hi - lo, 1), lo, hg_dtype_size(t->dtype)};
    if (c.count == NULL)
        return -1;
    each_element(t, cover_one, &c);
    int dense = 1;
    for (size_t b = 0; b < hi - lo; b++)
        dense &= c.count[b] == 1;
    free(c.count);
    return dense;
}

/* ---------------------------------------------------------- part 1 */

static size_t pick_size(fz_in *in)
{
    uint8_t c = fz_u8(in);
    if (c < 200)
        return c % 6;
    if (c < 250)
        return fz_u16(in);
    size_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fz_u8(in);
    return v;
}

static void pick_view(fz_in *in, hg_tensor *t, hg_hostbuf *hb)
{
    memset(t, 0, sizeof *t);
    uint8_t c = fz_u8(in);
    t->dtype = (hg_dtype)(c % (HG_DTYPE_COUNT + 1));
    t->ndims = (c >> 4) % 7;
    for (uint32_t i = 0; i < HG_MAX_DIMS; i++) {
        t->shape[i] = pick_size(in);
        t->strides[i] = pick_size(in);
    }
    t->offset = pick_size(in);
    t->host = hb;
}

static void check_view(const hg_tensor *t)
{
    u128 rlo = 0, rhi = 0, count = 0;
    int want = ref_extent(t, &rlo, &rhi);
    size_t lo = 7, hi = 7, nbytes = 7;
    int rc = hg_tensor_extent(t, &lo, &hi);
    if ((rc == 0) != (want == 0) || (rc == 0 && (lo != rlo || hi != rhi)))
        fz_fail("extent: rc %d [%zu, %zu), the reference says rc %d [%zu, %zu)", rc, lo, hi, want,
                (size_t)rlo, (size_t)rhi);
    ref_count(t, &count);
    bool any_zero = false;
    for (uint32_t i = 0; i < t->ndims && i < HG_MAX_DIMS; i++)
        any_zero |= t->shape[i] == 0;
    u128 bytes = any_zero ? 0 : count * hg_dtype_size(t->dtype);
    bool nb_ok = want == 0 && (any_zero || (count <= SIZE_MAX && bytes <= SIZE_MAX));
    rc = hg_tensor_nbytes(t, &nbytes);
    if ((rc == 0) != nb_ok || (rc == 0 && nbytes != bytes))
        fz_fail("nbytes: rc %d %zu, the reference says %s %zu", rc, nbytes,
                nb_ok ? "ok" : "an error", (size_t)bytes);
    /* Defect 10: is_dense answers for a view whose byte extent overflows. */
    int dense = want == 0 ? ref_dense(t, lo, hi) : fz_known(10) ? 0 : -1;
    if (dense >= 0 && hg_tensor_is_dense(t) != (dense == 1))
        fz_fail("is_dense says %d, the bytes the elements cover say %d", !dense, dense);
}

static void check_slice(fz_in *in, const hg_tensor *t)
{
    uint32_t dim = fz_u8(in) % (HG_MAX_DIMS + 1);
    size_t start = pick_size(in), len = pick_size(in);
    hg_tensor out;
    memset(&out, 0x5a, sizeof out);
    hg_tensor before = out;
    u128 lo, hi;
    bool ok = ref_extent(t, &lo, &hi) == 0 && dim < t->ndims &&
              (u128)start + len <= t->shape[dim] &&
              (u128)t->offset + (u128)start * t->strides[dim] <= SIZE_MAX;
    int rc = hg_tensor_slice(t, dim, start, len, &out);
    if ((rc == 0) != ok)
        fz_fail("slice dim %u [%zu,+%zu): rc %d, the header says %s", dim, start, len, rc,
                ok ? "it fits" : "an error");
    if (rc != 0 && memcmp(&out, &before, sizeof out) != 0)
        fz_fail("a failed slice wrote its out-param");
    if (rc == 0 && (out.shape[dim] != len || out.offset != t->offset + start * t->strides[dim]))
        fz_fail("slice dim %u: shape %zu offset %zu", dim, out.shape[dim], out.offset);
}

static void check_overlap(const hg_tensor *a, const hg_tensor *b)
{
    u128 alo, ahi, blo, bhi;
    bool want = ref_extent(a, &alo, &ahi) == 0 && ref_extent(b, &blo, &bhi) == 0 &&
                a->host == b->host && alo < ahi && blo < bhi && alo < bhi && blo < ahi;
    if (hg_tensor_overlap(a, b) != want)
        fz_fail("overlap says %d, the extents say %d", !want, want);
}

static void part_views(fz_in *in)
{
    static char two[2]; /* stand-ins for two host buffers: only compared */
    hg_tensor a, b;
    pick_view(in, &a, (hg_hostbuf *)&two[0]);
    pick_view(in, &b, (hg_hostbuf *)&two[fz_u8(in) & 1]);
    check_view(&a);
    check_view(&b);
    check_slice(in, &a);
    check_overlap(&a, &b);
}

/* ---------------------------------------------------------- part 2 */

/* Byte k of element e of arg a becomes (or gains, for INOUT) this. */
static unsigned char pattern(uint32_t a, size_t e, size_t k)
{
    return (unsigned char)(17u * a + 3u * e + k + 1u);
}

/* Every element of each written task arg, in row-major index order. */
static int k_write(const hg_kernel_ctx *ctx)
{
    for (uint32_t a = 0; a < ctx->nargs; a++) {
        const hg_kview *v = &ctx->args[a];
        uint32_t arg = (uint32_t)(ctx->scalars[a] >> 8);
        hg_dir dir = (hg_dir)(ctx->scalars[a] & 0xff);
        if (dir == HG_IN || v->data == NULL)
            continue;
        size_t es = hg_dtype_size(v->dtype), idx[HG_MAX_DIMS] = {0}, n = 1;
        for (uint32_t i = 0; i < v->ndims; i++)
            n *= v->shape[i];
        for (size_t e = 0; e < n; e++) {
            size_t off = 0;
            for (uint32_t i = 0; i < v->ndims; i++)
                off += idx[i] * v->strides[i];
            unsigned char *p = (unsigned char *)v->data + off * es;
            for (size_t k = 0; k < es; k++)
                p[k] = (unsigned char)((dir == HG_INOUT ? p[k] : 0) + pattern(arg, e, k));
            for (uint32_t i = v->ndims; i-- > 0;) {
                if (++idx[i] < v->shape[i])
                    break;
                idx[i] = 0;
            }
        }
    }
    return 0;
}
static const hg_kernel K_WRITE = {"write", k_write, HG_CORE_VECTOR, NULL, NULL};

typedef struct plan_world {
    hg_device *dev;
    hg_runner *r;
    hg_devaddr dbuf;
    hg_hostbuf *hb[NBUF];
    unsigned char model[NBUF][MAX_BUF];
    uint64_t gen[NBUF];
    hg_arg args[MAX_ARGS];
    int slot[MAX_ARGS]; /* host buffer, -1 device view or scalar */
    uint32_t n;
} plan_world;

static int orch_one_task(hg_orch *o, void *user)
{
    const plan_world *w = user;
    hg_task_arg ta[MAX_ARGS];
    uint64_t tag[MAX_ARGS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        if (w->args[i].dir == HG_SCALAR)
            continue;
        ta[n] = (hg_task_arg){i, w->args[i].dir, w->args[i].tensor};
        tag[n++] = (uint64_t)i << 8 | (uint64_t)w->args[i].dir;
    }
    hg_task_desc d = {&K_WRITE, ta, n, tag, n, NULL, 0};
    return n ? hg_task_submit(o, &d, NULL) : 0;
}

static const char *const NAMES[] = {"a", "b", "c", "d", "e", ""};

static void pick_arg(fz_in *in, plan_world *w, uint32_t k)
{
    hg_arg *a = &w->args[k];
    uint8_t c = fz_u8(in), d = fz_u8(in);
    memset(a, 0, sizeof *a);
    a->name = NAMES[c % 16 < 14 ? k : c % 6];
    a->dir = (hg_dir)(d % 16 < 14 ? 1 + d % 4 : d % 16 - 13); /* 1..4, now and then 0 or 2 */
    a->dir = d == 255 ? (hg_dir)5 : a->dir;
    a->residency = (hg_residency)((c >> 4) % 8 == 7 ? 2 : (c >> 4) & 1);
    a->scalar = c;
    w->slot[k] = -1;
    if (a->dir == HG_SCALAR)
        return;
    hg_tensor *t = &a->tensor;
    uint8_t s = fz_u8(in);
    t->dtype = (hg_dtype)(s % 32 < 31 ? s % HG_DTYPE_COUNT : HG_DTYPE_COUNT);
    t->ndims = 1 + (s >> 5) % 3;
    for (uint32_t i = 0; i < t->ndims; i++) {
        uint8_t e = fz_u8(in);
        t->shape[i] = e % 5;
        t->strides[i] = (e >> 3) % 9;
    }
    t->offset = fz_u8(in) % 33;
    uint8_t b = fz_u8(in);
    if (b % 8 < 7) {
        w->slot[k] = b % NBUF;
        t->host = w->hb[w->slot[k]];
    } else {
        t->device = w->dbuf + (b >> 3) % 4 * 64;
    }
}

/* The header's rules for a run's args, checked here independently: NULL
 * when valid, else what is wrong. */
static const char *args_invalid(const plan_world *w)
{
    u128 lo[MAX_ARGS], hi[MAX_ARGS];
    for (uint32_t k = 0; k < w->n; k++) {
        const hg_arg *a = &w->args[k];
        if (a->name[0] == '\0' || a->dir < HG_IN || a->dir > HG_SCALAR)
            return "a name or direction";
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(a->name, w->args[j].name) == 0)
                return "a name used twice";
        if (a->dir == HG_SCALAR)
            continue; /* its residency is not read */
        if (a->residency > 1)
            return "a residency";
        if (ref_extent(&a->tensor, &lo[k], &hi[k]) != 0)
            return "a view's dtype or extent";
        u128 room =
            w->slot[k] >= 0 ? hg_hostbuf_size(a->tensor.host) : 256 - (a->tensor.device - w->dbuf);
        if (hi[k] > lo[k] && hi[k] > room)
            return "a view past its buffer's end";
        for (uint32_t j = 0; j < k; j++) {
            bool written = a->dir != HG_IN || w->args[j].dir != HG_IN;
            if (w->slot[k] >= 0 && w->slot[j] == w->slot[k] && w->args[j].dir != HG_SCALAR &&
                written && lo[k] < hi[k] && lo[j] < hi[j] && lo[k] < hi[j] && lo[j] < hi[k])
                return "overlapping args, one written";
        }
    }
    return NULL;
}

typedef struct apply_ctx {
    unsigned char *bytes;
    uint32_t arg;
    size_t es;
    bool add;
} apply_ctx;

static void apply_one(void *ctx, size_t off, size_t e)
{
    apply_ctx *c = ctx;
    for (size_t k = 0; k < c->es; k++) {
        unsigned char *p = c->bytes + off * c->es + k;
        *p = (unsigned char)((c->add ? *p : 0) + pattern(c->arg, e, k));
    }
}

/* One run; the oracle moves on when it succeeds. */
static void plan_run(plan_world *w, const char *invalid)
{
    hg_callable call = {"one task", orch_one_task, w};
    int rc = hg_runner_run(w->r, &call, w->args, w->n, NULL);
    if ((rc == 0) != (invalid == NULL))
        fz_fail("run: rc %d (%s), but the args are %s", rc, hg_runner_errmsg(w->r),
                invalid ? invalid : "valid");
    bool bumped[NBUF] = {false}, twice = false;
    for (uint32_t k = 0; rc == 0 && k < w->n; k++) {
        const hg_tensor *t = &w->args[k].tensor;
        size_t lo, hi;
        if (w->slot[k] < 0 || w->args[k].dir == HG_IN || w->args[k].dir == HG_SCALAR ||
            hg_tensor_extent(t, &lo, &hi) != 0 || lo == hi)
            continue;
        apply_ctx c = {w->model[w->slot[k]], k, hg_dtype_size(t->dtype),
                       w->args[k].dir == HG_INOUT};
        each_element(t, apply_one, &c);
        twice |= bumped[w->slot[k]];
        bumped[w->slot[k]] = true;
        hg_range got[2];
        size_t n = 0;
        if (hg_tensor_is_dense(t) && (hg_runner_copied_back(w->r, k, got, 2, &n) != 0 || n != 1 ||
                                      got[0].lo != lo || got[0].hi != hi))
            fz_fail("arg %u: a dense written view was copied back as %zu ranges, not [%zu, %zu)", k,
                    n, lo, hi);
    }
    for (int i = 0; i < NBUF; i++) {
        w->gen[i] += bumped[i];
        if (memcmp(hg_hostbuf_data(w->hb[i]), w->model[i], hg_hostbuf_size(w->hb[i])) != 0)
            fz_fail("buffer %d differs from the oracle after a run (rc %d)", i, rc);
        if (hg_hostbuf_generation(w->hb[i]) != w->gen[i] && (!twice || fz_known(6)))
            fz_fail("buffer %d: generation %llu, the oracle says %llu", i,
                    (unsigned long long)hg_hostbuf_generation(w->hb[i]),
                    (unsigned long long)w->gen[i]);
        w->gen[i] = hg_hostbuf_generation(w->hb[i]);
    }
}

static void part_plan(fz_in *in)
{
    plan_world *w = calloc(1, sizeof *w);
    char msg[256];
    if (w == NULL || hg_device_open("sim:cores=2,mem=1M", &w->dev, msg, sizeof msg) != 0 ||
        hg_runner_open(w->dev, &w->r) != 0 || hg_devbuf_malloc(w->dev, 256, &w->dbuf) != 0)
        fz_fail("cannot open the device");
    hg_runner_set_verify(w->r, fz_u8(in) & 1);
    for (int i = 0; i < NBUF; i++) {
        size_t size = 1 + fz_u8(in);
        hg_hostbuf_create(size, &w->hb[i]);
        for (size_t j = 0; j < size; j++)
            w->model[i][j] = (unsigned char)(j * 7 + (size_t)i);
        hg_hostbuf_write(w->hb[i], 0, w->model[i], size);
        w->gen[i] = hg_hostbuf_generation(w->hb[i]);
    }
    w->n = 1 + fz_below(in, MAX_ARGS);
    for (uint32_t k = 0; k < w->n; k++)
        pick_arg(in, w, k);
    const char *invalid = args_invalid(w);
    plan_run(w, invalid);
    plan_run(w, invalid); /* again: resident copies are reused this time */
    hg_runner_close(w->r);
    hg_devbuf_free(w->dev, w->dbuf);
    hg_device_close(w->dev);
    for (int i = 0; i < NBUF; i++)
        hg_hostbuf_destroy(w->hb[i]);
    free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    if (size == 0)
        return 0;
    if (fz_u8(&in) & 1)
        part_views(&in);
    else
        part_plan(&in);
    return 0;
}
