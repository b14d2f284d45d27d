"""Ctrl-C in Python (the issue "never lose a file, stop cleanly, measure
honestly", item 5): every long call raises KeyboardInterrupt within about a
round and leaves every object usable.

The Ctrl-C is simulated by _thread.interrupt_main() from a timer, as the
interpreter's SIGINT handler does.  Each call would run for minutes if the
interrupt were ignored (the test then hangs: it did before the fix); nothing
here compares timings, only what was raised and what is left.
"""

import _thread
import ctypes
import json
import os
import threading
import time

import pytest

import hostgraph as hg
from conftest import device_specs, run_child


def interrupt_soon(delay: float = 0.5) -> threading.Timer:
    t = threading.Timer(delay, _thread.interrupt_main)
    t.start()
    return t


@pytest.mark.parametrize("compare", [False, True])
def test_a_long_scene_call_raises_keyboard_interrupt(compare):
    timer = interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        if compare:
            hg.compare_scene("vector_add", rounds=100000, params={"n": 4096, "tile": 512})
        else:
            hg.run_scene("vector_add", rounds=100000, params={"n": 4096, "tile": 512})
    timer.join()
    # Nothing is left half-done: the next call runs as usual.
    report = hg.run_scene("vector_add", rounds=2, params={"n": 100, "tile": 10})
    assert [r["golden"] for r in report["rounds"]] == ["pass", "pass"]


def interrupt_when_executing(runner: hg.Runner) -> threading.Thread:
    """Ctrl-C once the runner's run is executing its tasks (hg_runner_stage,
    the one call another thread may make), so the cancel lands mid-run."""
    stage = hg._capi.core["hg_runner_stage"]  # a private prototype for the test
    stage.restype, stage.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    handle = runner._handle()

    def watch() -> None:
        while stage(handle) != b"execute":
            time.sleep(0.01)
        _thread.interrupt_main()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_long_run_raises_keyboard_interrupt_and_the_runner_stays_usable(monkeypatch):
    # bgemm at grid 16, tile 96: 4096 GEMMs of 96^3, seconds of execution on
    # its portable tiles (the AVX2 ones take a fraction of a second).
    monkeypatch.setenv("HG_KERNELS", "portable")
    with hg.SceneCase("bgemm", {"grid": 16, "tile": 96}) as big, \
            hg.SceneCase("bgemm", {"grid": 2, "tile": 8}) as small, \
            hg.Device("sim:cores=2") as dev, hg.Runner(dev) as runner:
        c = big.arg("C").tensor.buffer
        before = (c.generation, big.array("C").copy())
        watcher = interrupt_when_executing(runner)
        with pytest.raises(KeyboardInterrupt):
            runner.run(big.callable, big.args)
        watcher.join()
        # The canceled run published and copied back nothing.
        assert c.generation == before[0]
        assert (big.array("C") == before[1]).all()
        # The runner is usable, and no cancel is left over for the next run.
        runner.run(small.callable, small.args)
        ok, why = small.check()
        assert ok, why
        runner.run(small.callable, small.args)


# A child process (a real SIGINT, and a crash fails the test, not the
# session): SIGINT at a seeded moment of a run of bgemm at grid 16, tile 96
# on one runner, then at once a small run on the same runner, checked against
# its golden; four times.  Debian's Python 3.11.2 marks a thread stopped once
# its join() is interrupted, so before the fix KeyboardInterrupt came while
# the canceled run still executed, and the next run raced it on the same
# runner: golden mismatches, seconds of waiting booked as exec_ms (issue 25,
# item 1).  The moment is a seeded fraction of how long that run executes on
# this device, host and load (a first run, uninterrupted, says), so the
# SIGINT lands inside the run whatever the kernels' speed: the watcher sends
# it only while the run still executes.  One that lands just after the run
# returned (between that check and the kill) is a Ctrl-C after the call:
# the row says "late" and the next rows go on with the same runner.
CTRL_C_THEN_RUN = r"""
import ctypes, json, os, random, signal, threading, time
import hostgraph as hg
os.environ["HG_KERNELS"] = "portable"  # bgemm's portable tiles: the longest runs
stage = hg._capi.core["hg_runner_stage"]
stage.restype, stage.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
rng = random.Random(SEED)
with hg.SceneCase("bgemm", {"grid": 16, "tile": 96}) as big, \
        hg.Device("SPEC") as dev, hg.Runner(dev) as runner:
    h = runner._handle()
    exec_s = runner.run(big.callable, big.args).exec_ms / 1e3
    print(json.dumps({"exec_s": exec_s}), flush=True)
    for i in range(4):
        delay = rng.uniform(0.05, 0.6) * exec_s
        sent = threading.Event()

        def sigint_during_execution():
            while stage(h) != b"execute":
                time.sleep(0.002)
            time.sleep(delay)
            if stage(h) == b"execute":
                sent.set()
                os.kill(os.getpid(), signal.SIGINT)

        w = threading.Thread(target=sigint_during_execution, daemon=True)
        w.start()
        row = {"delay": delay}
        try:
            try:
                runner.run(big.callable, big.args)
                row["raised"] = None
            except KeyboardInterrupt:
                row["raised"] = "KeyboardInterrupt"
            s = stage(h)  # at once: the canceled run must be over
            row["stage_at_raise"] = s.decode() if s else None
            with hg.SceneCase("bgemm", {"grid": 2, "tile": 8}) as small:
                try:
                    runner.run(small.callable, small.args)
                    row["golden"] = list(small.check())
                except hg.Error as e:
                    row["golden"] = [False, type(e).__name__ + ": " + str(e)]
            w.join()
        except KeyboardInterrupt:
            row["late"] = True
            w.join()
        row["sent"] = sent.is_set()
        print(json.dumps(row), flush=True)
"""


@pytest.mark.parametrize("spec", device_specs())
def test_ctrl_c_then_a_run_on_the_same_runner_never_races_the_canceled_run(spec):
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    child = run_child(CTRL_C_THEN_RUN.replace("SEED", str(seed)).replace("SPEC", spec))
    assert child.returncode == 0, f"seed {seed}: exit {child.returncode}\n{child.stderr}"
    rows = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 5, child.stdout
    rows = rows[1:]
    interrupted = [row for row in rows if row["raised"] == "KeyboardInterrupt"]
    assert len(interrupted) >= 2, (seed, child.stdout)  # the SIGINTs land inside runs
    for row in rows:
        if row.get("late"):
            continue
        # A SIGINT sent raised KeyboardInterrupt; none sent, none raised.
        assert (row["raised"] == "KeyboardInterrupt") == row["sent"], (seed, row)
        # KeyboardInterrupt came once the C run had returned, not before ...
        assert row["stage_at_raise"] is None, (seed, row)
        # ... so the next run had the runner to itself.
        assert row["golden"][0] is True, (seed, row)


# Ctrl-C in run_scene(print_table=True) raises once the scene runner has
# returned: no row or summary comes after the exception (before the fix they
# did, from the scene run left going).  The child waits 2 s after the
# exception, time for a run left going to finish its round (~0.6 s) and
# print; with the fix nothing can come, whatever the timing.
SCENE_CTRL_C = r"""
import os, signal, threading, time
import hostgraph as hg
threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    hg.run_scene("bgemm", rounds=1000, params={"grid": 8, "tile": 96}, print_table=True)
except KeyboardInterrupt:
    print("RAISED", flush=True)
time.sleep(2)
"""


def test_ctrl_c_in_run_scene_prints_nothing_after_the_exception():
    child = run_child(SCENE_CTRL_C)
    assert child.returncode == 0, child.stderr
    before, marker, after = child.stdout.partition("RAISED\n")
    assert marker, child.stdout
    assert "golden" in before  # the table's head, printed before the exception
    assert after == "", f"printed after KeyboardInterrupt:\n{after}"


def test_canceled_error_is_exported():
    import hostgraph

    assert issubclass(hostgraph.CanceledError, hostgraph.Error)
    assert "CanceledError" in hostgraph.__all__
