"""trace_kernels.py: each kernel's task time per round, for two or more
hostgraph binaries (say, before and after a kernel change) run in turn.

    HG_KERNELS=avx2 python3 bench/trace_kernels.py 8 OLD/hostgraph build-rel/hostgraph -- \
        qwen3_decode --param preset=real --param layers=1 --rounds 5 --residency all \
        --device sim:cores=2

Runs `BIN run ARGS --trace FILE` for each binary, RUNS times, the order of
the binaries swapped each time (a shared host's noise then falls on all of
them alike), and reads each trace's task events: per kernel name, the core
time of its tasks in each later round (every round but the first), whose
median is that run's figure.  Prints, per binary and kernel, the median over
the runs with the range, and each binary's ratio to the first.  A kernel
change that the step's wall time cannot show through the noise (one kernel
is a tenth of the step) shows here; two kernels that share the memory show
as one faster and the other slower (docs/PERFORMANCE.md, "Then, later that
afternoon").  A benchmark, not a test."""
import collections
import json
import os
import statistics as st
import subprocess
import sys
import tempfile


def one_run(binary, args, trace):
    proc = subprocess.run([binary, "run", *args, "--trace", trace, "--quiet"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{binary} run {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    rounds = collections.defaultdict(lambda: collections.defaultdict(float))
    for e in events:
        if e.get("cat") == "task":
            rounds[e["args"]["run"]][e["name"]] += e["dur"] / 1e3
    later = sorted(rounds)[1:]
    if not later:
        sys.exit("trace_kernels.py: the scene needs --rounds 2 or more (the first is left out)")
    names = {k for r in later for k in rounds[r]}
    fig = {k: st.median(rounds[r][k] for r in later) for k in names}
    fig["(all tasks)"] = st.median(sum(rounds[r].values()) for r in later)
    return fig


def main():
    if "--" not in sys.argv or sys.argv.index("--") < 3:
        sys.exit(__doc__)
    cut = sys.argv.index("--")
    runs, binaries, args = int(sys.argv[1]), sys.argv[2:cut], sys.argv[cut + 1:]
    if runs < 1 or not binaries or not args:
        sys.exit(__doc__)
    figs = {b: collections.defaultdict(list) for b in binaries}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        for i in range(runs):
            for b in (binaries if i % 2 == 0 else binaries[::-1]):
                for k, v in one_run(b, args, trace).items():
                    figs[b][k].append(v)
    first = figs[binaries[0]]
    # every kernel any binary ran (one that a binary did not run counts 0 there)
    names = sorted({k for b in binaries for k in figs[b]},
                   key=lambda k: (-st.median(first.get(k, [0.0])), k != "(all tasks)", k))
    print(f"core-ms a later round, median over {runs} runs [range]; ratio to the first binary")
    for b in binaries:
        print(b)
        for k in names:
            v, v0 = figs[b].get(k, [0.0]), first.get(k, [0.0])
            ratio = st.median(v) / st.median(v0) if st.median(v0) > 0 else float("nan")
            print(f"  {k:20s} {st.median(v):9.3f} [{min(v):.3f} - {max(v):.3f}]  {ratio:.3f}")


if __name__ == "__main__":
    main()
