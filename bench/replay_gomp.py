"""replay_gomp.py: a replayed hostgraph run of N empty tasks against libgomp's
OpenMP tasks, per task, side by side (docs/PERFORMANCE.md,
"Checked graph replay").

    gcc -O2 -fopenmp bench/peers/gomp_tasks.c -o build/gomp_tasks
    python3 bench/replay_gomp.py [build dir (default build)] [max tasks (default 1000000)]
        [--resident]

For each round (PROCS, default 3) it runs one gomp_tasks process (itself
the median of 3 processes per size, warm runs) and, per size 10^3..max, one
replay_overhead --replay process, alternating, so both see the same load.
Printed per size: medians over the rounds of hostgraph's replayed run, its
execute and host shares, the orchestrated run, and libgomp's warm run, all
ns per task, the ratio replayed / libgomp, and the load average around.
--resident: replay_overhead's args resident (no upload in a later run).
"""
import os
import re
import statistics as st
import subprocess
import sys

resident = "--resident" in sys.argv
argv = [a for a in sys.argv if a != "--resident"]
build = argv[1] if len(argv) > 1 else "build"
top = int(argv[2]) if len(argv) > 2 else 1000000
procs = int(os.environ.get("PROCS", 3))
sizes = [n for n in (1000, 10000, 100000, 1000000) if n <= top]
env = dict(os.environ, OMP_NUM_THREADS="2")


def load():
    return os.getloadavg()[0]


def hostgraph(n):
    out = subprocess.run([f"{build}/replay_overhead", str(n), "sim:cores=2", "--replay"]
                         + (["--resident"] if resident else []),
                         capture_output=True, text=True, check=True, env=env).stdout
    lines = out.splitlines()

    def stage(prefix, name):
        for ln in lines:
            if ln.startswith(prefix + "ns/task:"):
                return float(re.search(name + r" ([0-9.]+)", ln).group(1))
        raise ValueError(out)
    return {"orch_run": stage("", "run"), "run": stage("replay: ", "run"),
            "exec": stage("replay: ", "execute"), "host": stage("replay: ", "host")}


def gomp():
    out = subprocess.run([f"{build}/gomp_tasks", str(top), "independent"],
                         capture_output=True, text=True, check=True, env=env).stdout
    warm = {}
    for ln in out.splitlines():
        m = re.match(r"independent\s+(\d+)\s+[0-9.]+/([0-9.]+)", ln)
        if m:
            warm[int(m.group(1))] = float(m.group(2))
    return warm


rows = {n: [] for n in sizes}
gw = {n: [] for n in sizes}
loads = [load()]
for r in range(procs):
    g = gomp()
    for n in sizes:
        gw[n].append(g[n])
        rows[n].append(hostgraph(n))
    loads.append(load())

print(f"load average (1 min) over the run: {min(loads):.1f}-{max(loads):.1f} on "
      f"{os.cpu_count()} CPUs; medians of {procs} processes each; args "
      f"{'resident' if resident else 'staged'}")
print("| tasks | replayed run | its execute | its host | orchestrated run | libgomp run "
      "| replayed / libgomp |")
print("|---|---|---|---|---|---|---|")
for n in sizes:
    m = {k: st.median(x[k] for x in rows[n]) for k in rows[n][0]}
    g = st.median(gw[n])
    print(f"| {n} | {m['run']:.1f} | {m['exec']:.1f} | {m['host']:.1f} | {m['orch_run']:.1f} "
          f"| {g:.1f} | {m['run'] / g:.2f} |", flush=True)
