"""Row softmax with C and OpenCL kernels and a C orchestration.

y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), one vector task per
band of `rows_per_task` rows.  The kernels and the orchestration are C,
compiled once by hostgraph's compile cache ($HG_CACHE_DIR, else
~/.cache/hostgraph) with the library's headers; the orchestration finds
each kernel as `hg_kernel_NAME`.  ``residency = "in"``: x stays on the
device across rounds unless --residency says otherwise.

    PYTHONPATH=build/python python3 -m hostgraph run examples/scenes/test_softmax.py --rounds 5
    PYTHONPATH=build/python python3 -m hostgraph run examples/scenes/test_softmax.py::Softmax::wide --device opencl --verify
    PYTHONPATH=build/python python3 examples/scenes/test_softmax.py --rounds 3
"""

import numpy as np

import hostgraph as hg

SOFTMAX_C = r"""
#include <math.h>
#include "hostgraph.h"

/* y = softmax(x) along each row of the task's band (any strides). */
int softmax_rows(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2)
        return 1;
    const hg_kview *x = &ctx->args[0], *y = &ctx->args[1];
    if (x->ndims != 2 || y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1])
        return 1;
    const float *px = x->data;
    float *py = y->data;
    for (size_t r = 0; r < x->shape[0]; r++) {
        const float *xr = px + r * x->strides[0];
        float *yr = py + r * y->strides[0];
        float m = xr[0];
        for (size_t c = 1; c < x->shape[1]; c++)
            m = fmaxf(m, xr[c * x->strides[1]]);
        float sum = 0.0f;
        for (size_t c = 0; c < x->shape[1]; c++)
            sum += expf(xr[c * x->strides[1]] - m);
        for (size_t c = 0; c < x->shape[1]; c++)
            yr[c * y->strides[1]] = expf(xr[c * x->strides[1]] - m) / sum;
    }
    return 0;
}
"""

# One work item per element of y's band: each reduces its row (cheap at these sizes).
SOFTMAX_CL = r"""
__kernel void softmax_rows(HG_STATUS_ARGS, HG_TENSOR(float, x), HG_TENSOR(float, y))
{
    size_t g = get_global_id(0);
    size_t cols = y_v.shape[1], r = g / cols, c = g % cols;
    __global const float *xr = HG_PTR(x) + r * x_v.strides[0];
    float m = xr[0];
    for (size_t k = 1; k < cols; k++)
        m = fmax(m, xr[k * x_v.strides[1]]);
    float sum = 0.0f;
    for (size_t k = 0; k < cols; k++)
        sum += exp(xr[k * x_v.strides[1]] - m);
    HG_PTR(y)[r * y_v.strides[0] + c * y_v.strides[1]] = exp(xr[c * x_v.strides[1]] - m) / sum;
}
"""

# The orchestration: an hg_callable function (hostgraph.h), here called
# `orchestrate` (the class's orchestration_fn).
SOFTMAX_ORCH = r"""
int orchestrate(hg_orch *o, void *user)
{
    (void)user;
    int x = hg_orch_find_arg(o, "x"), y = hg_orch_find_arg(o, "y");
    int band = hg_orch_find_arg(o, "rows_per_task");
    if (x < 0 || y < 0 || band < 0)
        return hg_orch_fail(o, HG_ENOTFOUND, "softmax: args x, y and rows_per_task wanted");
    const hg_arg *ax, *ay, *ab;
    hg_orch_arg(o, (uint32_t)x, &ax);
    hg_orch_arg(o, (uint32_t)y, &ay);
    hg_orch_arg(o, (uint32_t)band, &ab);
    size_t rows = ax->tensor.shape[0], t = (size_t)ab->scalar;
    if (t == 0)
        return hg_orch_fail(o, HG_EINVAL, "arg 'rows_per_task': 0, want a positive band");
    for (size_t r = 0; r < rows; r += t) {
        size_t len = rows - r < t ? rows - r : t;
        hg_task_arg targs[2] = {{(uint32_t)x, HG_IN, {0}}, {(uint32_t)y, HG_OUT, {0}}};
        int rc = hg_tensor_slice(&ax->tensor, 0, r, len, &targs[0].view);
        if (rc == 0)
            rc = hg_tensor_slice(&ay->tensor, 0, r, len, &targs[1].view);
        hg_task_desc d = {.kernel = &hg_kernel_softmax_rows, .args = targs, .nargs = 2};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}
"""


class Softmax(hg.Scene):
    """row softmax over f32, C and OpenCL kernels, C orchestration"""

    kernels = [hg.Kernel("softmax_rows", "vector", c=SOFTMAX_C, cl=SOFTMAX_CL)]
    orchestration = SOFTMAX_ORCH
    params = {
        "rows": hg.Param(64, 1, 1 << 16, "rows of x and y"),
        "cols": hg.Param(256, 1, 1 << 16, "columns (the softmax's length)"),
        "rows_per_task": hg.Param(8, 1, 1 << 16, "rows per task"),
    }
    cases = [
        hg.Case("default"),
        hg.Case("wide", rows=16, cols=2048, rows_per_task=4),
        hg.Case("ragged", rows=37, cols=100, rows_per_task=5),  # the last band is short
    ]
    rtol, atol = 1e-4, 1e-7
    residency = "in"  # x is read every round and never changes: keep it on the device

    def make_args(self, p):
        rng = np.random.default_rng(7)  # fixed seed: every round starts from the same bytes
        x = (rng.standard_normal((p.rows, p.cols)) * 4).astype(np.float32)
        return [hg.In("x", x), hg.Out("y", np.zeros_like(x)),
                hg.Scalar("rows_per_task", p.rows_per_task)]

    def golden(self, args, p):
        x = args.x.astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {"y": e / e.sum(axis=1, keepdims=True)}


hg.scene_main()
