"""replay_host.py: a scene's later-round host time with and without checked
graph replay, and the recording's cost, side by side in one
process (docs/PERFORMANCE.md, "Checked graph replay").

    PYTHONPATH=build/python python3 bench/replay_host.py bgemm "qwen3_decode:preset=tiny"

Each argument is SCENE or SCENE:KEY=VALUE,...; every IN and INOUT arg is
resident (--residency all).  CYCLES (environment) sets the cycles (default
40, 6 for preset=real).  Two runners on one device, rounds rotating between
  O: the runner with replay off (orchestrates, records nothing)
  V: the runner with replay on after every IN buffer took an empty write (its
     generation moved, so it orchestrates and records anew, replacing the recording)
  R: the runner with replay on (replays V's recording)
host = wall - exec - h2d - d2h; medians over the cycles after the first."""
import statistics as st
import os
import sys

import hostgraph as hg

def measure(scene, params, cycles, device="sim"):
    with hg.SceneCase(scene, params) as case, hg.Device(device) as dev, \
            hg.Runner(dev) as off, hg.Runner(dev, replay=True) as on:
        args = [a.with_residency(a.direction in (hg.IN, hg.INOUT) and a.tensor.nbytes > 0)
                for a in case.args]
        host = {"O": [], "V": [], "R": []}
        orch = {"O": [], "V": [], "R": []}
        for cyc in range(cycles + 1):
            for kind in "OVR":
                run = off if kind == "O" else on
                if kind != "R":  # O sees the same writes as V
                    for a in args:
                        if a.direction == hg.IN and a.tensor.nbytes > 0:
                            a.tensor.buffer.mark_written(0, 0)
                s = run.run(case.callable, args)
                assert s.replayed == (kind == "R"), (kind, s.replayed)
                if cyc > 0:  # the first cycle uploads and allocates: not a later round
                    host[kind].append(s.wall_ms - s.exec_ms - s.h2d_ms - s.d2h_ms)
                    orch[kind].append(s.orch_ms)
        m = {k: st.median(v) for k, v in host.items()}
        o = {k: st.median(v) for k, v in orch.items()}
        tasks = s.tasks
    print(f"| {scene} {' '.join(f'{k}={v}' for k, v in params.items())} | {tasks} | "
          f"{m['O']:.3f} | {m['R']:.3f} | {m['R'] / m['O']:.3f} | {o['O']:.3f} | {o['R']:.4f} | "
          f"{m['V']:.3f} | {(m['V'] - m['O']) / m['O'] * 100:+.1f}% | {o['V']:.3f} | "
          f"{(o['V'] - o['O']) / o['O'] * 100:+.1f}% |", flush=True)

print("| case | tasks | host ms, orchestrated | host ms, replayed | replayed / orchestrated "
      "| orch_ms orchestrated | orch_ms replayed | host ms, orchestrated + recorded "
      "| recording cost (host) | orch_ms orchestrated + recorded | recording cost (orch) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for spec in sys.argv[1:]:
    scene, *kv = spec.split(":")
    params = dict(p.split("=") for p in kv[0].split(",")) if kv else {}
    measure(scene, {k: int(v) if v.isdigit() else v for k, v in params.items()},
            int(os.environ.get("CYCLES", 6 if params.get("preset") == "real" else 40)))
