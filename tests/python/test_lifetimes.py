"""Python that cannot crash the interpreter: arrays keep alive what they view,
closing order never depends on the garbage collector, a closed trace is
detached from its runners.

Each case runs in a child interpreter, so a crash (a segfault, an abort on a
double free) fails its test instead of ending the whole test run.
"""

import os
import subprocess
import sys
import textwrap

import pytest

# Big enough that glibc serves it with mmap: freed, it is unmapped, and a
# read through a dangling view faults instead of reading stale bytes.
BIG = 1 << 20


def run_child(build_dir, code):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"), PYTHONDONTWRITEBYTECODE="1")
    prelude = "import gc, numpy as np, hostgraph as hg\n"
    out = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, (
        f"child exited with {out.returncode} (negative: killed by that signal)\n"
        f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}")
    return out.stdout


# ------------------------------------------------ 12: arrays keep their memory


def test_an_array_of_a_temporary_scene_case_outlives_it(build_dir):
    out = run_child(build_dir, f"""
        want = None
        with hg.SceneCase("vector_add", {{"n": {BIG}, "tile": 4096}}) as case:
            want = case.array("a").copy()
        a = hg.SceneCase("vector_add", {{"n": {BIG}, "tile": 4096}}).array("a")
        gc.collect()
        junk = [np.full({BIG}, 7, np.float32) for _ in range(8)]  # reuse what was freed
        assert np.array_equal(a, want)
        print("ok", a.shape)
    """)
    assert out.startswith("ok")


def test_an_array_of_a_closed_scene_case_stays_valid(build_dir):
    out = run_child(build_dir, f"""
        with hg.SceneCase("vector_add", {{"n": {BIG}, "tile": 4096}}) as case:
            a = case.array("a")
            t = case.arg("b").tensor.numpy()
            want = a.copy()
        assert case.closed and case.arg("a").tensor.buffer.closed
        gc.collect()
        junk = [np.full({BIG}, 7, np.float32) for _ in range(8)]
        assert np.array_equal(a, want) and t.shape == ({BIG},)
        a[:] = 1.0  # writable, and still its own memory
        print("ok")
    """)
    assert out.startswith("ok")


def test_an_array_of_a_closed_host_buffer_stays_valid(build_dir):
    out = run_child(build_dir, f"""
        buf = hg.HostBuffer({4 * BIG})
        raw = buf.numpy("f32")
        view = hg.Tensor(buf, "f32", ({BIG},))[::2].numpy()
        buf.close()
        del buf
        gc.collect()
        junk = [np.full({BIG}, 7, np.float32) for _ in range(8)]
        raw[:] = 3.0
        assert view.sum() == 3.0 * ({BIG} // 2)
        print("ok")
    """)
    assert out.startswith("ok")


# ----------------------------------- 13: a device and its runner in one cycle


def test_a_device_and_its_runner_collected_in_one_cycle(build_dir):
    """The collector clears weak references into a cycle, then runs the
    finalizers in an order of its own (here: the device's first, which
    crashed inside hg_runner_close); a trace in the cycle too."""
    out = run_child(build_dir, """
        order = []
        for cls, tag in ((hg.Device, "D"), (hg.Runner, "R")):
            def fin(self, _del=cls.__del__, _tag=tag):
                order.append(_tag)
                _del(self)
            cls.__del__ = fin
        gc.disable()
        seen = set()
        a = np.arange(64, dtype=np.float32)
        ab = hg.HostBuffer.wrap(a)
        for i in range(100):
            dev = hg.Device("sim:cores=2")
            r = hg.Runner(dev)
            t = hg.Trace()
            r.trace = t
            with hg.SceneCase("vector_add", {"n": 64, "tile": 16}) as case:
                r.run(case.callable, [hg.Arg("a", hg.IN, ab.tensor(), resident=True)]
                      + case.args[1:])
            cycle = [dev, r, t] if i % 2 else [r, dev, t]  # the two finalization orders
            cycle.append(cycle)
            dev.me = cycle
            del dev, r, t, cycle
            order.clear()
            gc.collect()
            seen.add("".join(order))
        assert seen <= {"DR", "RD"}, seen
        print("ok", sorted(seen))
    """)
    assert out.startswith("ok")


@pytest.mark.parametrize("first", ["device", "runner", "trace"])
def test_finalizers_in_any_order(build_dir, first):
    """Whichever finalizer the collector runs first, each closes once and in
    a safe order: the device closes its runners first, a runner the device
    closed does nothing, a trace detaches from its runners."""
    out = run_child(build_dir, f"""
        dev = hg.Device("sim:cores=2")
        r = hg.Runner(dev)
        t = hg.Trace()
        r.trace = t
        objs = {{"device": dev, "runner": r, "trace": t}}
        for k in ["{first}"] + [k for k in objs if k != "{first}"]:
            objs[k].__del__()
        assert dev.closed and r.closed and t.closed
        print("ok")
    """)
    assert out.startswith("ok")


# --------------------------------------------- 14: a trace closed while in use


def test_closing_a_trace_detaches_it_from_its_runners(build_dir):
    out = run_child(build_dir, """
        a = np.arange(4096, dtype=np.float32)
        c = np.zeros(4096, np.float32)
        with hg.Device("sim:cores=2") as dev, hg.Runner(dev) as r, hg.Runner(dev) as r2, \\
                hg.SceneCase("vector_add", {"n": 4096, "tile": 256}) as case:
            ab, cb = hg.HostBuffer.wrap(a), hg.HostBuffer.wrap(c)
            args = [hg.Arg("a", hg.IN, ab.tensor()), hg.Arg("b", hg.IN, ab.tensor()),
                    hg.Arg("c", hg.OUT, cb.tensor()), hg.scalar("tile", 256)]
            t = hg.Trace()
            r.trace = t
            r2.trace = t
            r.run(case.callable, args)
            spans = t.num_task_spans
            assert spans > 0
            t.close()
            assert r.trace is None and r2.trace is None
            for _ in range(50):  # each would append to the freed trace
                r.run(case.callable, args)
                r2.run(case.callable, args)
            try:
                r.trace = t
            except hg.InvalidArgument as e:
                assert "closed" in str(e)
            else:
                raise AssertionError("a closed trace was attached again")
            t2 = hg.Trace()
            r.trace = t2
            r.run(case.callable, args)
            assert t2.num_task_spans == spans
            r.trace = None
            t2.close()
            r.run(case.callable, args)
        assert np.array_equal(c, 2 * a)
        print("ok")
    """)
    assert out.startswith("ok")
