"""What a Python orchestration costs, beside the same graph orchestrated in C.

    PYTHONPATH=build-rel/python /usr/bin/python3 bench/scene_orch.py [REPEATS]

For 10^3 and 10^5 independent tasks (an empty kernel, each task on its own
64-byte slice of one buffer) on sim:cores=2, in one process, rounds
alternating:
  - orch_ms per task: C orchestration (compiled by hostgraph.compile_kernels)
    against the same loop in Python (hostgraph.python_callable);
  - host time of a round (wall - exec - h2d - d2h): Python with replay on
    (a later round replays, running no Python) against C without replay;
  - compiling the kernels into a fresh cache against finding them cached,
    and a whole `python3 -m hostgraph run FILE.py` first (compiling) and
    cached.
Prints medians over REPEATS (default 5) later rounds; times vary with the
host's load, the ratios are taken side by side.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import hostgraph as hg
from hostgraph import _capi

NOP_C = r"""
#include "hostgraph.h"
int nop(const hg_kernel_ctx *ctx) { (void)ctx; return 0; }
"""

ORCH_C = r"""
int orchestrate(hg_orch *o, void *user)
{
    (void)user;
    int ix = hg_orch_find_arg(o, "x");
    const hg_arg *x;
    hg_orch_arg(o, (uint32_t)ix, &x);
    size_t n = x->tensor.shape[0] / 16;
    for (size_t i = 0; i < n; i++) {
        hg_task_arg a = {.arg = (uint32_t)ix, .access = HG_INOUT};
        int rc = hg_tensor_slice(&x->tensor, 0, i * 16, 16, &a.view);
        hg_task_desc d = {.kernel = &hg_kernel_nop, .args = &a, .nargs = 1};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}
"""


def py_orchestrate(o, args):
    x = args.x
    for i in range(0, x.shape[0], 16):
        o.submit("nop", None, [x[i:i + 16]])


def host_ms(st):
    return st.wall_ms - st.exec_ms - st.h2d_ms - st.d2h_ms


def rounds(dev, cal, arg, replay, n):
    """n + 1 rounds on one runner; the stats of the n later ones."""
    out = []
    with hg.Runner(dev, replay=replay) as r:
        for i in range(n + 1):
            st = r.run(cal, [arg])
            if i > 0:
                out.append(st)
    return out


def compile_times():
    kernels = [hg.Kernel("nop", "vector", c=NOP_C)]
    with tempfile.TemporaryDirectory() as d:
        os.environ["HG_CACHE_DIR"] = d
        t0 = time.perf_counter()
        hg.compile_kernels(kernels, orchestration=ORCH_C, label="bench")
        t1 = time.perf_counter()
        hg.compile_kernels(kernels, orchestration=ORCH_C, label="bench")
        t2 = time.perf_counter()
    del os.environ["HG_CACHE_DIR"]
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


def file_runs(reps):
    """`python3 -m hostgraph run examples/scenes/test_softmax.py`, whole
    processes: the first into an empty cache (it compiles), then cached."""
    here = os.path.dirname(os.path.abspath(__file__))
    scene_file = os.path.join(here, "..", "examples", "scenes", "test_softmax.py")
    cmd = [sys.executable, "-m", "hostgraph", "run", scene_file, "--rounds", "1", "--quiet"]
    first, cached = [], []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, HG_CACHE_DIR=d)
            for out in (first, cached):
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(first), statistics.median(cached)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    first, cached = compile_times()
    print(f"compile_kernels: first {first:.1f} ms, again in the process {cached:.2f} ms")
    first, cached = file_runs(reps)
    print(f"run test_softmax.py (a whole process): first (compiles) {first:.0f} ms, "
          f"cached {cached:.0f} ms ({first / cached:.2f}x)")
    ks = hg.compile_kernels([hg.Kernel("nop", "vector", c=NOP_C)], orchestration=ORCH_C,
                            label="bench")
    c_cal = hg.Callable(_capi.hg_callable(b"bench_c", ks.orchestrate_addr, None), ks.lib,
                        "bench: C orchestration")
    py_cal = hg.python_callable(py_orchestrate, ks)
    for tasks in (1000, 100000):
        x = np.zeros(tasks * 16, np.float32)
        buf = hg.HostBuffer.wrap(x)
        arg = hg.Arg("x", hg.INOUT, buf.tensor(), resident=True)
        with hg.Device("sim:cores=2") as dev:
            c_orch, py_orch, py_replay = [], [], []
            for _ in range(reps):  # alternate, so a drift of the host weighs on each alike
                c_orch += rounds(dev, c_cal, arg, False, 1)
                py_orch += rounds(dev, py_cal, arg, False, 1)
                py_replay += rounds(dev, py_cal, arg, True, 1)
        buf.close()
        assert all(s.tasks == tasks for s in c_orch + py_orch)
        assert all(s.replayed for s in py_replay), "a later round did not replay"
        co = statistics.median(s.orch_ms for s in c_orch)
        po = statistics.median(s.orch_ms for s in py_orch)
        ch = statistics.median(host_ms(s) for s in c_orch)
        ph = statistics.median(host_ms(s) for s in py_orch)
        rh = statistics.median(host_ms(s) for s in py_replay)
        print(f"{tasks:>6} tasks: orch_ms C {co:.3f} ({co / tasks * 1e3:.2f} us a task), "
              f"Python {po:.3f} ({po / tasks * 1e3:.2f} us a task, {po / co:.1f}x C)")
        print(f"{'':>13} host ms: C orchestrated {ch:.3f}, Python orchestrated {ph:.3f}, "
              f"Python replayed {rh:.3f} ({rh / ch:.2f}x C orchestrated)")


if __name__ == "__main__":
    main()
