"""An INOUT accumulator across rounds, and a host read that steers the graph.

acc[t] += scale[t] * x[t] for every tile t whose scale (an IN the
orchestration reads on the host, `host_reads`) is not zero; tiles with scale
0 get no task and keep their bytes.  acc is INOUT: each round starts from
its made contents, which the scene runner restores on the host between
rounds (only the ranges the last round copied back), as the built-in bgemm
does, so golden (computed once from the made inputs) holds every round, and
a later round of `--residency all` uploads exactly those ranges.  Under
`--residency pin`, x is a device view and scale stays host-backed.

    PYTHONPATH=build/python python3 -m hostgraph run examples/scenes/test_inout.py --rounds 3 --residency all --replay
"""

import numpy as np

import hostgraph as hg

AXPY_C = r"""
#include "hostgraph.h"

/* acc += s * x over one 1-D tile; s arrives as a signed 64-bit scalar. */
int axpy_tile(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2 || ctx->nscalars != 1)
        return 1;
    const hg_kview *x = &ctx->args[0], *acc = &ctx->args[1];
    float s = (float)(int64_t)ctx->scalars[0];
    const float *px = x->data;
    float *pa = acc->data;
    for (size_t i = 0; i < acc->shape[0]; i++)
        pa[i * acc->strides[0]] += s * px[i * x->strides[0]];
    return 0;
}
"""

AXPY_CL = r"""
__kernel void axpy_tile(HG_STATUS_ARGS, HG_TENSOR(float, x), HG_TENSOR(float, acc), ulong s)
{
    size_t i = get_global_id(0);
    HG_PTR(acc)[i * acc_v.strides[0]] += (float)(long)s * HG_PTR(x)[i * x_v.strides[0]];
}
"""


class Accumulate(hg.Scene):
    """acc += scale[t] * x per tile, INOUT across rounds, tiles picked by a host read"""

    kernels = [hg.Kernel("axpy_tile", "vector", c=AXPY_C, cl=AXPY_CL)]
    params = {
        "tiles": hg.Param(16, 1, 4096, "tiles of acc and x"),
        "tile": hg.Param(256, 1, 1 << 20, "elements per tile"),
    }
    cases = [hg.Case("default"), hg.Case("many", tiles=64, tile=100)]
    rtol, atol = 0.0, 0.0  # small integers: exact
    host_reads = ("scale",)

    def make_args(self, p):
        rng = np.random.default_rng(3)
        n = p.tiles * p.tile
        x = rng.integers(-8, 9, n).astype(np.float32)
        acc = rng.integers(-100, 101, n).astype(np.float32)
        scale = rng.integers(-2, 3, p.tiles).astype(np.int32)
        scale[0], scale[-1] = 0, 2  # at least one tile skipped and one updated
        return [hg.In("x", x), hg.In("scale", scale), hg.InOut("acc", acc),
                hg.Scalar("tile", p.tile)]

    def golden(self, args, p):
        s = np.repeat(args.scale.astype(np.float64), p.tile)
        return {"acc": args.acc + s * args.x}

    def orchestrate(self, o, args):
        scale = o.host_view(args.scale)  # recorded: a write to scale re-orchestrates
        t = args.tile
        for i, s in enumerate(scale):
            if s != 0:
                o.submit("axpy_tile", None, [args.x[i * t:(i + 1) * t], args.acc[i * t:(i + 1) * t]],
                         scalars=[int(s)])


hg.scene_main()
