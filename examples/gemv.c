/*
 * gemv.c: a user's compiled orchestration and kernels, shipped as a shared
 * object that exports one callable, `const hg_callable hg_example_gemv`.
 * This is how users bring their own kernels to hostgraph: build a shared
 * object against libhostgraph (pkg-config hostgraph, or CMake
 * hostgraph::hostgraph), then load the callable by name from Python
 * (hostgraph.load_callable(path, "hg_example_gemv")) or with dlsym from C.
 *
 * The graph is one layer of a decode step in miniature:
 *
 *     y   = alpha * (w @ x) + bias      (OUT)
 *     acc = acc + y                     (INOUT)
 *
 * Args, found by name:
 *   w      IN      f32 [rows, cols]  weights: the same every round (resident)
 *   x      IN      f32 [cols]        the input: new every round
 *   bias   IN      f32 [rows]
 *   y      OUT     f32 [rows]
 *   acc    INOUT   f32 [rows]
 *   alpha  SCALAR  f64 bits (hg_scalar_f64)
 *   tile   SCALAR  rows per task, > 0
 * Per tile of rows: a cube task (gemv_tile: w rows, x, bias rows -> y rows)
 * and a vector task (accumulate: y rows -> acc rows) that depends on it
 * through y, an edge the runtime infers from the overlapping bytes.
 *
 * gemv_tile checks its input as a careful kernel would: a non-finite x
 * element fails the task (the run fails with HG_EKERNEL naming it).
 */
#include <math.h>

#include "hostgraph.h"

#define EXPORT __attribute__((visibility("default")))

enum { A_W, A_X, A_BIAS, A_Y, A_ACC, A_ALPHA, A_TILE, A_COUNT };

/* y[i] = alpha * sum_j w[i, j] * x[j] + bias[i] over one tile of rows;
 * args: w, x, bias (IN), y (OUT); scalars: alpha (f64 bits). */
static int gemv_tile(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 4 || ctx->nscalars != 1)
        return 1;
    const hg_kview *w = &ctx->args[0], *x = &ctx->args[1], *b = &ctx->args[2], *y = &ctx->args[3];
    const float *pw = w->data, *px = x->data, *pb = b->data;
    float *py = y->data;
    double alpha = hg_scalar_as_f64(ctx->scalars[0]);
    for (size_t j = 0; j < x->shape[0]; j++) {
        if (!isfinite(px[j * x->strides[0]]))
            return 1;
    }
    for (size_t i = 0; i < w->shape[0]; i++) {
        double sum = 0.0;
        for (size_t j = 0; j < w->shape[1]; j++)
            sum +=
                (double)pw[i * w->strides[0] + j * w->strides[1]] * (double)px[j * x->strides[0]];
        py[i * y->strides[0]] = (float)(alpha * sum + (double)pb[i * b->strides[0]]);
    }
    return 0;
}

/* acc[i] += y[i] over one tile; args: y (IN), acc (INOUT). */
static int accumulate(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2)
        return 1;
    const hg_kview *y = &ctx->args[0], *acc = &ctx->args[1];
    const float *py = y->data;
    float *pa = acc->data;
    for (size_t i = 0; i < y->shape[0]; i++)
        pa[i * acc->strides[0]] += py[i * y->strides[0]];
    return 0;
}

static const hg_kernel gemv_kernel = {"gemv_tile", gemv_tile, HG_CORE_CUBE, NULL, NULL};
static const hg_kernel acc_kernel = {"accumulate", accumulate, HG_CORE_VECTOR, NULL, NULL};

/* Finds the args by name (their indices into idx); checks kinds and shapes. */
static int find_args(hg_orch *o, uint32_t *idx, const hg_arg **a)
{
    static const char *const names[A_COUNT] = {"w", "x", "bias", "y", "acc", "alpha", "tile"};
    for (int i = 0; i < A_COUNT; i++) {
        int idx_or_err = hg_orch_find_arg(o, names[i]);
        if (idx_or_err < 0)
            return hg_orch_fail(o, HG_ENOTFOUND, "gemv: no arg '%s'", names[i]);
        idx[i] = (uint32_t)idx_or_err;
        int rc = hg_orch_arg(o, idx[i], &a[i]);
        if (rc != 0)
            return rc;
        if ((i >= A_ALPHA) != (a[i]->dir == HG_SCALAR))
            return hg_orch_fail(o, HG_EINVAL, "gemv: arg '%s' has the wrong direction", names[i]);
        if (i < A_ALPHA && a[i]->tensor.dtype != HG_F32)
            return hg_orch_fail(o, HG_EINVAL, "gemv: arg '%s' is %s, want f32", names[i],
                                hg_dtype_name(a[i]->tensor.dtype));
    }
    const hg_tensor *w = &a[A_W]->tensor;
    size_t rows = w->shape[0], cols = w->ndims == 2 ? w->shape[1] : 0;
    if (w->ndims != 2 || a[A_X]->tensor.shape[0] != cols || a[A_BIAS]->tensor.shape[0] != rows ||
        a[A_Y]->tensor.shape[0] != rows || a[A_ACC]->tensor.shape[0] != rows)
        return hg_orch_fail(o, HG_EINVAL,
                            "gemv: want w [rows, cols], x [cols], bias, y and acc [rows]");
    if (a[A_TILE]->scalar == 0)
        return hg_orch_fail(o, HG_EINVAL, "gemv: arg 'tile': 0, want rows per task > 0");
    return 0;
}

static int gemv_orchestrate(hg_orch *o, void *user)
{
    const hg_arg *a[A_COUNT];
    uint32_t idx[A_COUNT];
    int rc = find_args(o, idx, a);
    if (rc != 0)
        return rc;
    size_t rows = a[A_W]->tensor.shape[0];
    size_t tile = (size_t)a[A_TILE]->scalar;
    uint64_t alpha = a[A_ALPHA]->scalar;
    for (size_t start = 0; start < rows; start += tile) {
        size_t len = rows - start < tile ? rows - start : tile;
        hg_task_arg g[4] = {{idx[A_W], HG_IN, a[A_W]->tensor},
                            {idx[A_X], HG_IN, a[A_X]->tensor},
                            {idx[A_BIAS], HG_IN, a[A_BIAS]->tensor},
                            {idx[A_Y], HG_OUT, a[A_Y]->tensor}};
        hg_task_arg s[2] = {{idx[A_Y], HG_IN, a[A_Y]->tensor},
                            {idx[A_ACC], HG_INOUT, a[A_ACC]->tensor}};
        if ((rc = hg_tensor_slice(&g[0].view, 0, start, len, &g[0].view)) != 0 ||
            (rc = hg_tensor_slice(&g[2].view, 0, start, len, &g[2].view)) != 0 ||
            (rc = hg_tensor_slice(&g[3].view, 0, start, len, &g[3].view)) != 0 ||
            (rc = hg_tensor_slice(&s[0].view, 0, start, len, &s[0].view)) != 0 ||
            (rc = hg_tensor_slice(&s[1].view, 0, start, len, &s[1].view)) != 0)
            return rc;
        hg_task_desc gd = {
            .kernel = &gemv_kernel, .args = g, .nargs = 4, .scalars = &alpha, .nscalars = 1};
        hg_task_desc sd = {.kernel = &acc_kernel, .args = s, .nargs = 2};
        if ((rc = hg_task_submit(o, &gd, NULL)) != 0 || (rc = hg_task_submit(o, &sd, NULL)) != 0)
            return rc;
    }
    return 0;
}

/* The callable this shared object exports: load it by this name. */
EXPORT const hg_callable hg_example_gemv = {"gemv", gemv_orchestrate, NULL};
