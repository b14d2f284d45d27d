"""tp_decode.py: qwen3_decode's later rounds on tp = 1, 2, 4 local ranks
(`hostgraph run --tp N` under mpirun), per rank, side by side in one
session (docs/PERFORMANCE.md, "Tensor-parallel decode").

    python3 bench/tp_decode.py build/hostgraph [KEY=VALUE ...]

KEY=VALUE are scene params (default preset=real layers=1).  TPS (environment,
default "1 2 4") and PROCS (default 2: processes per tp, interleaved
1, 2, 4, 1, 2, 4, ...) set the runs; ROUNDS (default 5) the rounds of each,
residency all.  Prints, per tp and rank, the medians over the processes'
later rounds of wall, exec and net (time in MPI calls) in ms, net_bytes and
the bytes each way, and each tp's rank-0 wall against tp=1's; the load
average before and after."""
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

def run(hg, tp, params, rounds):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [hg, "run", "qwen3_decode", "--rounds", str(rounds), "--residency", "all",
               "--quiet", "--json", out] + [a for p in params for a in ("--param", p)]
        if tp > 1:
            cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl",
                   "self,vader", "-np", str(tp)] + cmd + ["--tp", str(tp)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        j = json.load(open(out))
    ranks = j["ranks"] if tp > 1 else [{"rank": 0, "rounds": j["rounds"]}]
    return [r["rounds"][1:] for r in ranks]  # later rounds, per rank

def main():
    hg = sys.argv[1]
    params = sys.argv[2:] or ["preset=real", "layers=1"]
    tps = [int(t) for t in os.environ.get("TPS", "1 2 4").split()]
    procs, rounds = int(os.environ.get("PROCS", "2")), int(os.environ.get("ROUNDS", "5"))
    print("load before:", open("/proc/loadavg").read().split()[:3], "params:", params)
    later = {tp: None for tp in tps}
    for _ in range(procs):
        for tp in tps:
            got = run(hg, tp, params, rounds)
            later[tp] = got if later[tp] is None else [a + b for a, b in zip(later[tp], got)]
    print("load after: ", open("/proc/loadavg").read().split()[:3])
    print("tp rank  wall_ms  exec_ms  net_ms  net_bytes  h2d_bytes  d2h_bytes  (medians)")
    base = None
    for tp in tps:
        for k, rs in enumerate(later[tp]):
            med = {f: st.median(r[f] for r in rs)
                   for f in ("wall_ms", "exec_ms", "net_ms", "net_bytes", "h2d_bytes", "d2h_bytes")}
            print(f"{tp:2d} {k:4d} {med['wall_ms']:8.1f} {med['exec_ms']:8.1f} {med['net_ms']:7.1f} "
                  f"{med['net_bytes']:10.0f} {med['h2d_bytes']:10.0f} {med['d2h_bytes']:10.0f}")
            if k == 0:
                base = base or med["wall_ms"]
                print(f"   rank 0 wall / tp=1's: {med['wall_ms'] / base:.2f}")

main()
