"""A Runner shared between threads (issue 25, item 10): one thread at a time,
enforced.  While a run is in flight on one thread, every other call into C
on the runner raises RunnerBusyError and changes nothing; close waits for
the run; calls between runs are serialised, never refused.

Before, only run, close and the trace setter took the runner's lock:
invalidate_replay during a replayed run freed the recording the core threads
were executing (SIGSEGV in exec_complete).  The races run in a child process,
so a crash fails the test rather than the session.  They check what happened
to each call while the run was seen in flight before and after it
(hg_runner_stage, which C lets another thread call), never timings.
"""

import json
import threading

import pytest

import hostgraph as hg
from conftest import device_specs, run_child

# Thread A runs a replay of bgemm (grid 16, tile 64: a second or more);
# the main thread, once A executes, calls every method that reaches C.
RACE = r"""
import ctypes, json, os, threading, time
import numpy as np
import hostgraph as hg
os.environ["HG_KERNELS"] = "portable"  # bgemm's portable tiles: a second or more
stage = hg._capi.core["hg_runner_stage"]
stage.restype, stage.argtypes = ctypes.c_char_p, [ctypes.c_void_p]

with hg.Device("sim:cores=2") as dev, hg.Runner(dev, replay=True) as runner, \
        hg.SceneCase("bgemm", {"grid": 16, "tile": 64}) as case, \
        hg.SceneCase("bgemm", {"grid": 2, "tile": 8}) as small, hg.Trace() as trace:
    h = runner._handle()
    c0 = case.array("C").copy()  # C is INOUT: put it back before each run

    def reset():
        case.array("C")[:] = c0
        case.arg("C").tensor.buffer.mark_written()

    runner.run(case.callable, case.args)  # records the graph
    out = {"spec": dev.spec}

    def run_in_a(key):
        reset()
        try:
            out[key] = {"replayed": runner.run(case.callable, case.args).replayed,
                        "golden": list(case.check())}
        except BaseException as e:
            out[key] = {"error": type(e).__name__ + ": " + str(e)}

    def wait_executing():
        while stage(h) != b"execute":
            time.sleep(0.001)

    calls = {
        "invalidate_replay": runner.invalidate_replay,
        "replay = False": lambda: setattr(runner, "replay", False),
        "verify = True": lambda: setattr(runner, "verify", True),
        "set_budget": lambda: runner.set_budget(1 << 20),
        "set_poison_scratch": lambda: runner.set_poison_scratch(True),
        "trace = t": lambda: setattr(runner, "trace", trace),
        "run": lambda: runner.run(small.callable, small.args),
        "errmsg": lambda: runner.errmsg,
        "replay_bytes": lambda: runner.replay_bytes,
        "retained_capacity": lambda: runner.retained_capacity,
        "device_bytes": lambda: runner.device_bytes,
        "resident_bytes": lambda: runner.resident_bytes,
        "resident_copies": lambda: runner.resident_copies,
    }
    a = threading.Thread(target=run_in_a, args=("first",))
    a.start()
    wait_executing()
    results = {}
    for name, fn in calls.items():
        before = stage(h)
        try:
            fn()
            what = "returned"
        except hg.RunnerBusyError as e:
            what = "busy: " + str(e)
        results[name] = {"what": what, "in_flight": before == stage(h) == b"execute"}
    results["repr"] = {"what": repr(runner), "in_flight": stage(h) == b"execute"}
    a.join()
    out["calls"] = results
    out["after"] = {"replay": runner.replay, "verify": runner.verify, "trace": runner.trace is None,
                    "repr": repr(runner)}

    # close from this thread while A runs: it waits for the run, which completes.
    a = threading.Thread(target=run_in_a, args=("second",))
    a.start()
    wait_executing()
    runner.close()
    out["closed_while_running"] = {"closed": runner.closed}
    a.join()
    print(json.dumps(out))
"""


@pytest.mark.parametrize("spec", device_specs())
def test_a_run_in_flight_on_another_thread_refuses_every_call_and_close_waits(spec):
    child = run_child(RACE.replace("SPEC", spec))
    assert child.returncode == 0, f"exit {child.returncode}\n{child.stderr}"
    out = json.loads(child.stdout.splitlines()[-1])
    # The run on thread A was untouched: it replayed and its outputs are right.
    assert out["first"] == {"replayed": 1, "golden": [True, "pass: max abs err 0, max rel err 0"]}
    for name, r in out["calls"].items():
        assert r["in_flight"], f"{name}: the run was not in flight throughout: inconclusive, {r}"
        if name == "repr":
            assert r["what"].endswith(" replay running>"), r
        else:
            assert r["what"] == "busy: " + hg.errors.RUNNER_BUSY, (name, r)
    # Nothing the refused calls asked for was done.
    assert out["after"] == {"replay": True, "verify": False, "trace": True,
                            "repr": f"<Runner on {out['spec']} replay>"}
    # close waited for the run in flight, which completed normally.
    assert out["closed_while_running"]["closed"]
    assert out["second"] == {"replayed": 1, "golden": [True, "pass: max abs err 0, max rel err 0"]}


def test_calls_between_runs_from_two_threads_are_serialised_never_refused():
    with hg.Device("sim:cores=2") as dev, hg.Runner(dev) as runner, \
            hg.SceneCase("vector_add", {"n": 64, "tile": 16}) as case:
        errors = []

        def hammer():
            try:
                for i in range(2000):
                    runner.set_poison_scratch(i % 2 == 0)
                    assert runner.device_bytes >= 0
                    runner.verify = False
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        runner.run(case.callable, case.args)
        ok, why = case.check()
        assert ok, why


def test_repr_of_a_runner_and_a_scene_case():
    with hg.Device("sim:cores=2") as dev:
        runner = hg.Runner(dev, verify=True)
        assert repr(runner) == "<Runner on sim:cores=2 verify>"
        runner.close()
        assert repr(runner) == "<Runner closed>"
    case = hg.SceneCase("bgemm", {"grid": 2, "tile": 8})
    assert repr(case) == ("<SceneCase bgemm grid=2 tile=8: A IN f32[16, 16], B IN f32[16, 16], "
                          "C INOUT f32[16, 16], config IN i64[4]>")
    case.close()
    assert repr(case) == "<SceneCase bgemm grid=2 tile=8 closed>"
