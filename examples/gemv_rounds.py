#!/usr/bin/env python3
"""Runs a user's compiled callable (examples/gemv.c) for N rounds with residency,
the way a scene's round loop does, and checks every round against numpy.

    y   = alpha * (w @ x) + bias
    acc = acc + y

w and bias are the same every round: resident, they cross the link once.  x is
new every round: written in place, then declared with mark_written, so the
next run uploads it (and only it).  acc is INOUT and resident: after each run
the device copy and the host array are equal, so it does not cross again.

    cmake -S . -B build && cmake --build build -j2
    PYTHONPATH=build/python /usr/bin/python3 examples/gemv_rounds.py build/example_gemv.so --rounds 5

Exit code 0 when every round matched numpy, 1 otherwise.
"""

import argparse
import sys

import numpy as np

import hostgraph as hg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("library", help="the shared object built from examples/gemv.c")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=512)
    ap.add_argument("--tile", type=int, default=128, help="rows per task")
    ap.add_argument("--device", default="sim:cube=2,vector=2")
    ap.add_argument("--staged", action="store_true", help="no residency: stage every arg every round")
    ap.add_argument("--verify", action="store_true", help="verify mode: catch writes that bypass the API")
    opts = ap.parse_args()

    rng = np.random.default_rng(7)
    w = rng.standard_normal((opts.rows, opts.cols), dtype=np.float32)
    bias = rng.standard_normal(opts.rows, dtype=np.float32)
    x = np.zeros(opts.cols, np.float32)
    y = np.zeros(opts.rows, np.float32)
    acc = np.zeros(opts.rows, np.float32)
    alpha = 0.5
    resident = not opts.staged

    gemv = hg.load_callable(opts.library, "hg_example_gemv")
    arrays = {"w": w, "x": x, "bias": bias, "y": y, "acc": acc}
    bufs = {name: hg.HostBuffer.wrap(a) for name, a in arrays.items()}  # no copies
    args = [
        hg.Arg("w", hg.IN, bufs["w"].tensor(), resident=resident),
        hg.Arg("x", hg.IN, bufs["x"].tensor(), resident=resident),
        hg.Arg("bias", hg.IN, bufs["bias"].tensor(), resident=resident),
        hg.Arg("y", hg.OUT, bufs["y"].tensor()),
        hg.Arg("acc", hg.INOUT, bufs["acc"].tensor(), resident=resident),
        hg.scalar("alpha", alpha),
        hg.scalar("tile", opts.tile),
    ]

    want_acc = np.zeros(opts.rows, np.float64)
    failed = 0
    print(f"{gemv}: {opts.rounds} rounds on {opts.device}, residency {'on' if resident else 'off'}")
    print("round  wall_ms  h2d_bytes  d2h_bytes  resident_hits  stale_uploads  check")
    with hg.Device(opts.device) as dev, hg.Runner(dev, verify=opts.verify) as runner:
        later = []
        for r in range(1, opts.rounds + 1):
            x[:] = rng.standard_normal(opts.cols, dtype=np.float32)  # in place ...
            bufs["x"].mark_written()  # ... so say so: the next run uploads x
            stats = runner.run(gemv, args)
            want_y = alpha * (w.astype(np.float64) @ x.astype(np.float64)) + bias
            want_acc += y  # the device added this round's y (f32) to acc
            ok = np.allclose(y, want_y, rtol=1e-4, atol=1e-4) and np.allclose(
                acc, want_acc, rtol=1e-4, atol=1e-3)
            failed += not ok
            print(f"{r:<5}  {stats.wall_ms:<7.3f}  {stats.h2d_bytes:<9}  {stats.d2h_bytes:<9}  "
                  f"{stats.resident_hits:<13}  {stats.stale_uploads:<13}  {'pass' if ok else 'FAIL'}")
            if r > 1:
                later.append(stats.h2d_bytes)
        if later:
            print(f"later rounds upload {sum(later) / len(later):.0f} bytes on average "
                  f"(x is {x.nbytes} bytes; everything is {sum(a.nbytes for a in (w, x, bias, acc))})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
