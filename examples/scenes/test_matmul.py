"""A tiled matmul whose orchestration is Python: C = A x B over f32 tiles.

One cube task per (i, j) tile of C, over a row band of A and a column band
of B.  The orchestration runs in Python once per orchestrated round; with
``--replay`` the rounds after the first execute the recorded graph and run
no Python at all (nothing the orchestration reads on the host changes).
Inputs are small integers, so every f32 sum is exact and golden is exact.

    PYTHONPATH=build/python python3 -m hostgraph run examples/scenes/test_matmul.py --rounds 5 --replay
    PYTHONPATH=build/python python3 -m pytest examples/scenes -k Matmul
"""

import numpy as np

import hostgraph as hg

# The sim's kernel: one tile of C from a row band of A and a column band of B
# (any strides: the views are slices of the whole matrices).
MATMUL_C = r"""
#include "hostgraph.h"

int matmul_tile(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 3)
        return 1;
    const hg_kview *a = &ctx->args[0], *b = &ctx->args[1], *c = &ctx->args[2];
    size_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (b->shape[0] != k || c->shape[0] != m || c->shape[1] != n)
        return 1;
    const float *pa = a->data, *pb = b->data;
    float *pc = c->data;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (size_t p = 0; p < k; p++)
                acc += pa[i * a->strides[0] + p * a->strides[1]] *
                       pb[p * b->strides[0] + j * b->strides[1]];
            pc[i * c->strides[0] + j * c->strides[1]] = acc;
        }
    return 0;
}
"""

# The OpenCL kernel: one work item per element of the C tile.
MATMUL_CL = r"""
__kernel void matmul_tile(HG_STATUS_ARGS, HG_TENSOR(float, a), HG_TENSOR(float, b),
                          HG_TENSOR(float, c))
{
    size_t g = get_global_id(0);
    size_t n = c_v.shape[1], i = g / n, j = g % n, k = a_v.shape[1];
    float acc = 0.0f;
    for (size_t p = 0; p < k; p++)
        acc += HG_PTR(a)[i * a_v.strides[0] + p * a_v.strides[1]] *
               HG_PTR(b)[p * b_v.strides[0] + j * b_v.strides[1]];
    HG_PTR(c)[i * c_v.strides[0] + j * c_v.strides[1]] = acc;
}
"""


class Matmul(hg.Scene):
    """C = A x B over f32 tiles, orchestrated in Python"""

    kernels = [hg.Kernel("matmul_tile", "cube", c=MATMUL_C, cl=MATMUL_CL)]
    params = {
        "m": hg.Param(64, 1, 4096, "rows of A and C"),
        "n": hg.Param(64, 1, 4096, "columns of B and C"),
        "k": hg.Param(64, 1, 4096, "columns of A, rows of B"),
        "tile": hg.Param(16, 1, 4096, "rows and columns of a C tile"),
    }
    cases = [
        hg.Case("square"),
        hg.Case("tall", m=96, n=32, k=48, tile=32),  # last tiles cut short
    ]
    rtol, atol = 0.0, 0.0  # integer inputs: every sum is exact

    def make_args(self, p):
        rng = np.random.default_rng(20260)  # fixed seed: every round starts from the same bytes
        a = rng.integers(-4, 5, (p.m, p.k)).astype(np.float32)
        b = rng.integers(-4, 5, (p.k, p.n)).astype(np.float32)
        return [hg.In("a", a), hg.In("b", b), hg.Out("c", np.zeros((p.m, p.n), np.float32)),
                hg.Scalar("tile", p.tile)]

    def golden(self, args, p):
        return {"c": args.a.astype(np.float64) @ args.b.astype(np.float64)}

    def orchestrate(self, o, args):
        (m, n), t = args.c.shape, args.tile
        for i in range(0, m, t):
            for j in range(0, n, t):
                o.submit("matmul_tile", None,
                         [args.a[i:i + t, :], args.b[:, j:j + t], args.c[i:i + t, j:j + t]])


hg.scene_main()
