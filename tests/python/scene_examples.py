"""ctest's python/scene_examples: every examples/scenes/test_*.py file, each
case, on the sim and on OpenCL (skipped where no OpenCL device opens, unless
HG_REQUIRE_OPENCL=1), as ``python3 -m hostgraph run`` runs them:

  - every residency mode (off, pin, in, all) with --replay, and all with
    --verify, 3 rounds each: golden passes every round;
  - in and all: every later round moves fewer bytes up than the first.

Runs hostgraph's command in this process (hostgraph.__main__.main, the
path ``python3 -m hostgraph run FILE.py`` takes), so each device builds a
program once per case, not once per process.  Normal build only (the
sanitizer builds do not register it: it needs an uninstrumented Python).

Usage: python3 tests/python/scene_examples.py BUILD_DIR EXAMPLES_DIR
Exit 0 when every run passed, 1 (after the list of failures) otherwise.
"""

import glob
import json
import os
import sys
import tempfile

ROUNDS = 3


def main() -> int:
    build, examples = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(build, "python"))
    import hostgraph
    from hostgraph.__main__ import main as hg_main
    from hostgraph import scene

    devices = ["sim"]
    try:
        hostgraph.Device("opencl").close()
        devices.append("opencl")
    except hostgraph.Error as e:
        if os.environ.get("HG_REQUIRE_OPENCL") == "1":
            raise
        print(f"opencl: skipped (no OpenCL device: {e})")
    failures = []
    runs = 0
    files = sorted(glob.glob(os.path.join(examples, "test_*.py")))
    if not files:
        print(f"no test_*.py in {examples}")
        return 1
    with tempfile.TemporaryDirectory(prefix="hg-examples-") as tmp:
        for path in files:
            _, classes = scene.load_file(path)
            for cls in classes:
                for case in scene._cases_of(cls):
                    sel = f"{path}::{cls.__name__}::{case.name}"
                    for dev in devices:
                        if case.devices and dev not in case.devices:
                            continue
                        for mode, flag in (("off", "--replay"), ("pin", "--replay"),
                                           ("in", "--replay"), ("all", "--replay"),
                                           ("all", "--verify")):
                            runs += 1
                            what = f"{sel} --device {dev} --residency {mode} {flag}"
                            out = os.path.join(tmp, "r.json")
                            if os.path.exists(out):
                                os.unlink(out)
                            rc = hg_main(["run", sel, "--device", dev, "--rounds", str(ROUNDS),
                                          "--residency", mode, flag, "--quiet", "--json", out])
                            why = check(rc, out, mode)
                            print(f"{'ok  ' if why is None else 'FAIL'} {what}"
                                  + ("" if why is None else f": {why}"), flush=True)
                            if why is not None:
                                failures.append(f"{what}: {why}")
    print(f"{runs - len(failures)} of {runs} runs passed")
    for f in failures:
        print("failed:", f)
    return 1 if failures else 0


def check(rc: int, path: str, mode: str):
    """None when the run passed, else why not."""
    if rc != 0:
        return f"exit {rc}"
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    rounds = report["rounds"]
    if len(rounds) != ROUNDS:
        return f"{len(rounds)} rounds in the report, want {ROUNDS}"
    bad = [r["round"] for r in rounds if r.get("golden") != "pass"]
    if bad:
        return f"golden not passed in rounds {bad}"
    if mode in ("in", "all"):
        first = rounds[0]["h2d_bytes"]
        more = [(r["round"], r["h2d_bytes"]) for r in rounds[1:] if r["h2d_bytes"] >= first]
        if more:
            return f"later rounds moved no fewer bytes up than the first ({first}): {more}"
    return None


if __name__ == "__main__":
    sys.exit(main())
