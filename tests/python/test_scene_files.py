"""Python scenes (issue 26): the compile cache, Python orchestration, the
Scene class through the scene runner, ``python3 -m hostgraph FILE.py`` and
the pytest plugin.

What a user relies on, each a test that can fail:
  - a wrong kernel fails golden, naming the worst element;
  - a compile error raises SceneCompileError with the compiler's text and
    the source, and leaves no cache entry; a cache hit compiles nothing;
  - a Python orchestration that raises fails the run with its text, and
    the runner runs again afterwards;
  - under replay a Python orchestration runs once in 5 rounds while nothing
    it read changed, and again after a host-read arg was written;
  - a Python scene's later rounds in --residency all move exactly the floor.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hostgraph as hg
from hostgraph import _compile, scene
from hostgraph.scenes import run_scene

from conftest import ROOT, device_specs

EXAMPLES = ROOT / "examples" / "scenes"

VADD_C = r"""
#include "hostgraph.h"
int vadd(const hg_kernel_ctx *ctx)
{
    const hg_kview *a = &ctx->args[0], *b = &ctx->args[1], *c = &ctx->args[2];
    const float *pa = a->data, *pb = b->data;
    float *pc = c->data;
    for (size_t i = 0; i < a->shape[0]; i++)
        pc[i * c->strides[0]] = pa[i * a->strides[0]] OP pb[i * b->strides[0]];
    return 0;
}
"""

VADD_CL = r"""
__kernel void vadd(HG_STATUS_ARGS, HG_TENSOR(float, a), HG_TENSOR(float, b), HG_TENSOR(float, c))
{
    size_t i = get_global_id(0);
    HG_PTR(c)[i * c_v.strides[0]] = HG_PTR(a)[i * a_v.strides[0]] + HG_PTR(b)[i * b_v.strides[0]];
}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Every test compiles into its own cache folder, and leaves no scene
    registered in this process (hg_scene_count would count it: other tests
    compare the process's scenes with `hostgraph list`)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("HG_CACHE_DIR", str(d))
    yield d
    for name in list(scene._registry):
        scene.unregister(name)


def vadd_kernels(op="+", label="vadd"):
    return hg.compile_kernels([hg.Kernel("vadd", "vector", c=VADD_C.replace("OP", op), cl=VADD_CL)],
                              label=label)


def tiled(o, args):
    n, t = args.a.shape[0], args.tile
    for i in range(0, n, t):
        o.submit("vadd", None, [args.a[i:i + t], args.b[i:i + t], args.c[i:i + t]])


class Buffers:
    """a, b, c over host buffers, and the args of a vadd run."""

    def __init__(self, n=1000, tile=100):
        self.a = np.arange(n, dtype=np.float32)
        self.b = np.full(n, 0.5, np.float32)
        self.c = np.zeros(n, np.float32)
        self.bufs = [hg.HostBuffer.wrap(x) for x in (self.a, self.b, self.c)]
        ab, bb, cb = self.bufs
        self.args = [hg.Arg("a", hg.IN, ab.tensor()), hg.Arg("b", hg.IN, bb.tensor()),
                     hg.Arg("c", hg.OUT, cb.tensor()), hg.scalar("tile", tile)]

    def close(self):
        for b in self.bufs:
            b.close()


# ---------------------------------------------------------- compile cache


def test_compile_error_names_the_source_and_leaves_no_entry(cache):
    before = _compile.compile_count
    bad = "#include \"hostgraph.h\"\nint vadd(const hg_kernel_ctx *ctx) { return undeclared_thing; }\n"
    with pytest.raises(hg.SceneCompileError) as e:
        hg.compile_kernels([hg.Kernel("vadd", "vector", c=bad)], label="test_bad.py::Broken")
    msg = str(e.value)
    assert "test_bad.py::Broken: kernel 'vadd'" in msg  # the source
    assert "undeclared_thing" in msg and "error" in msg  # the compiler's own lines
    assert _compile.compile_count == before + 1
    assert [p.name for p in cache.iterdir()] == []  # no entry, no temporary file


def test_a_cache_hit_compiles_nothing(cache):
    ks = vadd_kernels()
    assert ks.compiled_now
    n = _compile.compile_count
    again = vadd_kernels()
    assert not again.compiled_now and _compile.compile_count == n
    assert len(list(cache.glob("*.so"))) == 1
    vadd_kernels("-")  # another source: another entry
    assert _compile.compile_count == n + 1 and len(list(cache.glob("*.so"))) == 2


def test_a_second_process_finds_the_entry(cache):
    vadd_kernels()
    code = textwrap.dedent("""
        import hostgraph as hg
        from hostgraph import _compile
        import test_scene_files as t
        t.vadd_kernels()
        print("compiled", _compile.compile_count)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(hg.__file__).resolve().parents[1]), str(Path(__file__).parent)]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "compiled 0" in out.stdout


def test_source_files_are_relative_to_the_scene_file(tmp_path):
    (tmp_path / "k.c").write_text(VADD_C.replace("OP", "+"))
    ks = hg.compile_kernels([hg.Kernel("vadd", "vector", c="k.c")], base_dir=str(tmp_path))
    assert ks["vadd"].fn
    with pytest.raises(FileNotFoundError, match="missing.c"):
        hg.compile_kernels([hg.Kernel("vadd", "vector", c="missing.c")], base_dir=str(tmp_path))


# ---------------------------------------------------- Python orchestration


@pytest.mark.parametrize("spec", device_specs())
def test_python_orchestration_runs_on_a_runner(spec):
    cal = hg.python_callable(tiled, vadd_kernels())
    bufs = Buffers()
    try:
        with hg.Device(spec) as dev, hg.Runner(dev) as r:
            st = r.run(cal, bufs.args)
        assert st.tasks == 10 and cal.calls == 1
        np.testing.assert_array_equal(bufs.c, bufs.a + bufs.b)
    finally:
        bufs.close()


def test_a_raising_orchestration_fails_the_run_with_its_text_and_the_runner_goes_on():
    ks = vadd_kernels()

    def broken(o, args):
        tiled(o, args)
        raise RuntimeError("tile plan is wrong for n=1000")

    bufs = Buffers()
    try:
        with hg.Device("sim") as dev, hg.Runner(dev) as r:
            with pytest.raises(hg.Error, match="RuntimeError: tile plan is wrong for n=1000"):
                r.run(hg.python_callable(broken, ks), bufs.args)
            assert not bufs.c.any()  # nothing copied back
            good = hg.python_callable(tiled, ks)
            r.run(good, bufs.args)
        np.testing.assert_array_equal(bufs.c, bufs.a + bufs.b)
    finally:
        bufs.close()


def test_a_kernel_without_the_devices_implementation_is_unsupported_naming_it():
    ks = hg.compile_kernels([hg.Kernel("vadd", "vector", cl=VADD_CL)], label="cl only")
    bufs = Buffers()
    try:
        with hg.Device("sim") as dev, hg.Runner(dev) as r:
            with pytest.raises(hg.UnsupportedError, match="vadd"):
                r.run(hg.python_callable(tiled, ks), bufs.args)
            assert not bufs.c.any()
    finally:
        bufs.close()


def test_replay_runs_the_python_orchestration_once_until_a_host_read_arg_changes():
    ks = vadd_kernels()
    reads = []

    def steered(o, args):  # the tile size comes from a host read of arg "plan"
        t = int(o.host_view(args.plan)[0])
        reads.append(t)
        n = args.a.shape[0]
        for i in range(0, n, t):
            o.submit("vadd", None, [args.a[i:i + t], args.b[i:i + t], args.c[i:i + t]])

    cal = hg.python_callable(steered, ks)
    bufs = Buffers()
    plan = np.array([250], np.int64)
    pb = hg.HostBuffer.wrap(plan)
    args = bufs.args + [hg.Arg("plan", hg.IN, pb.tensor())]
    try:
        with hg.Device("sim") as dev, hg.Runner(dev, replay=True) as r:
            replayed = [r.run(cal, args).replayed for _ in range(5)]
            assert cal.calls == 1 and replayed == [0, 1, 1, 1, 1]
            pb.write(0, np.array([125], np.int64))  # what the orchestration read changed
            st = r.run(cal, args)
            assert cal.calls == 2 and st.replayed == 0 and st.tasks == 8
            assert reads == [250, 125]
            assert r.run(cal, args).replayed == 1 and cal.calls == 2
        np.testing.assert_array_equal(bufs.c, bufs.a + bufs.b)
    finally:
        bufs.close()
        pb.close()


@pytest.mark.parametrize("spec", device_specs())
def test_scratch_carries_one_task_s_output_to_the_next(spec):
    def twice(o, args):  # c = (a + b) + b through run-owned scratch
        n = args.a.shape[0]
        s = o.scratch("s", "f32", [n])
        o.submit("vadd", None, [args.a, args.b, s.as_out()])
        o.submit("vadd", None, [s.as_in(), args.b, args.c])

    bufs = Buffers()
    try:
        with hg.Device(spec) as dev, hg.Runner(dev) as r:
            for _ in range(2):  # the second run reuses the pooled scratch
                st = r.run(hg.python_callable(twice, vadd_kernels()), bufs.args)
                np.testing.assert_array_equal(bufs.c, bufs.a + 2 * bufs.b)
            assert st.tasks == 2 and st.edges == 1 and st.device_allocs == 0
    finally:
        bufs.close()


def test_views_index_two_dimensions_and_host_views_are_read_only():
    seen = {}

    def look(o, args):
        v = args.a[2:4, 1:3]
        seen["shape"], seen["offset"] = v.shape, v.tensor.offset
        h = o.host_view(v)
        seen["values"] = h.copy()
        seen["writeable"] = h.flags.writeable

    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    buf = hg.HostBuffer.wrap(a)
    try:
        with hg.Device("sim") as dev, hg.Runner(dev) as r:
            r.run(hg.python_callable(look, {}), [hg.Arg("a", hg.IN, buf.tensor())])
    finally:
        buf.close()
    assert seen["shape"] == (2, 2) and seen["offset"] == 11
    np.testing.assert_array_equal(seen["values"], a[2:4, 1:3])
    assert seen["writeable"] is False


# ------------------------------------------------------------ scene files


def write_scene(tmp_path, name, op="+", extra=""):
    src = textwrap.dedent(f'''
        import numpy as np
        import hostgraph as hg

        VADD_C = {VADD_C.replace("OP", op)!r}
        VADD_CL = {VADD_CL!r}

        class VecAdd(hg.Scene):
            kernels = [hg.Kernel("vadd", "vector", c=VADD_C, cl=VADD_CL)]
            params = {{"n": hg.Param(1000, 1, 1 << 20, "elements"),
                       "tile": hg.Param(100, 1, 1 << 20, "per task")}}
            cases = [hg.Case("small"), hg.Case("big", n=5000, tile=700)]
            atol = 0.0
            rtol = 0.0

            def make_args(self, p):
                rng = np.random.default_rng(5)
                a = rng.integers(-8, 8, p.n).astype(np.float32)
                b = rng.integers(-8, 8, p.n).astype(np.float32)
                return [hg.In("a", a), hg.In("b", b), hg.Out("c", np.zeros(p.n, np.float32)),
                        hg.Scalar("tile", p.tile)]

            def golden(self, args, p):
                return {{"c": args.a.astype(np.float64) + args.b}}

            def orchestrate(self, o, args):
                n, t = args.a.shape[0], args.tile
                for i in range(0, n, t):
                    o.submit("vadd", None, [args.a[i:i + t], args.b[i:i + t], args.c[i:i + t]])
        {extra}
        hg.scene_main()
    ''')
    path = tmp_path / name
    path.write_text(src)
    return path


def test_a_wrong_kernel_fails_golden_naming_the_worst_element(tmp_path):
    path = write_scene(tmp_path, "test_wrong.py", op="-")
    _, reg = scene.select(str(path), None, None)
    with pytest.raises(hg.GoldenError) as e:
        run_scene(reg.name, rounds=2)
    msg = str(e.value)
    assert "c" in msg and "got" in msg and "want" in msg, msg
    assert e.value.report["rounds"][0]["golden"] != "pass"


def test_a_right_kernel_passes_and_the_report_names_file_and_class(tmp_path):
    path = write_scene(tmp_path, "test_right.py")
    _, reg = scene.select(str(path), "VecAdd", "big")
    report = run_scene(reg.name, rounds=2)
    assert report["scene"] == "test_right.py::VecAdd::big"
    assert all(r["golden"] == "pass" for r in report["rounds"])
    text = json.dumps(report)
    assert "VecAdd" in text and "test_right.py" in text


def test_python_orchestration_runs_once_in_5_replayed_rounds_of_the_scene_runner(tmp_path):
    path = write_scene(tmp_path, "test_replay.py")
    _, reg = scene.select(str(path), None, None)
    reg.prepare()
    before = reg.orchestrations
    report = run_scene(reg.name, rounds=5, replay=True)
    assert reg.orchestrations - before == 1
    assert [r["replayed"] for r in report["rounds"]] == [0, 1, 1, 1, 1]


BF16_SCENE = r'''
import numpy as np
import hostgraph as hg

WIDEN_C = r"""
#include "hostgraph.h"
int widen(const hg_kernel_ctx *ctx)   /* y = 2 * float(x), x bf16 */
{
    const uint16_t *x = ctx->args[0].data;
    float *y = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        y[i] = 2.0f * hg_bf16_to_f32(x[i]);
    return 0;
}
"""

class Widen(hg.Scene):
    kernels = [hg.Kernel("widen", "vector", c=WIDEN_C)]
    params = {"n": hg.Param(300, 1, 4096, "elements"),
              "kind": hg.Param("bf16", values={"bf16": 1, "plain": 2})}
    cases = [hg.Case("bf16"), hg.Case("plain", kind="plain")]
    rtol, atol = 0.0, 0.0

    def make_args(self, p):
        x = (np.arange(p.n, dtype=np.float32) - 150) / 4   # exact in bf16
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)
        arg = hg.In("x", bits, dtype="bf16") if p.kind == "bf16" else hg.In("x", bits)
        return [arg, hg.Out("y", np.zeros(p.n, np.float32))]

    def golden(self, args, p):
        x = (args.x.astype(np.uint32) << 16).view(np.float32)
        return {"y": 2.0 * x.astype(np.float64)}

    def orchestrate(self, o, args):
        o.submit("widen", None, [args.x, args.y])
'''


def test_bf16_travels_as_uint16_with_a_declared_dtype_and_named_params(tmp_path):
    path = tmp_path / "test_widen.py"
    path.write_text(BF16_SCENE)
    _, reg = scene.select(str(path), "Widen", "bf16")
    report = run_scene(reg.name, rounds=2)
    assert report["params"]["kind"] in ("bf16", 1)  # the named value's name (or its value)
    assert all(r["golden"] == "pass" for r in report["rounds"])
    _, plain = scene.select(str(path), "Widen", "plain")
    with pytest.raises(hg.UsageError, match="arg 'x'.*uint16.*bf16"):
        run_scene(plain.name, rounds=1)


@pytest.mark.parametrize("spec", device_specs())
def test_later_rounds_of_all_move_exactly_the_floor(spec):
    # matmul: IN a, b unchanged (up: 0), OUT c all written (down: m*n f32)
    _, reg = scene.select(str(EXAMPLES / "test_matmul.py"), "Matmul", "square")
    report = run_scene(reg.name, rounds=3, residency="all", device=spec)
    m = n = 64
    for r in report["rounds"][1:]:
        assert (r["h2d_bytes"], r["d2h_bytes"], r["device_allocs"]) == (0, m * n * 4, 0), r
    assert report["rounds"][0]["h2d_bytes"] == 2 * 64 * 64 * 4


def test_inout_later_rounds_upload_what_the_last_round_copied_back():
    # Accumulate: acc is INOUT, restored on the host between rounds (only the
    # ranges the last round copied back), so in `all` a later round uploads
    # those ranges and nothing else: the tiles with a task, merged across the
    # skipped tiles between them (closer than the upload cost rule's 64 KiB),
    # never the skipped tile 0 before them; it copies back the written tiles.
    _, reg = scene.select(str(EXAMPLES / "test_inout.py"), "Accumulate", "default")
    report = run_scene(reg.name, rounds=3, residency="all")
    made = {a.name: a for a in reg.instance.make_args(reg.params_of([16, 256]))}
    written = np.flatnonzero(made["scale"].array)
    tile_bytes = 256 * 4
    span = (written.max() - written.min() + 1) * tile_bytes
    assert written.min() > 0 and len(written) < written.max() - written.min() + 1  # a gap
    for r in report["rounds"][1:]:
        assert (r["h2d_bytes"], r["d2h_bytes"]) == (span, len(written) * tile_bytes), r


# ------------------------------------------------- the command and pytest


def hg_cmd(*args, cwd=None, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(Path(hg.__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "hostgraph", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout)


def test_python_m_hostgraph_runs_a_scene_file(tmp_path):
    out = tmp_path / "r.json"
    p = hg_cmd("run", str(EXAMPLES / "test_softmax.py"), "--rounds", "3", "--json", str(out))
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["scene"] == "test_softmax.py::Softmax::default"
    assert report["residency"] == "in"  # the class's default
    p = hg_cmd("run", f"{EXAMPLES / 'test_softmax.py'}::Softmax::ragged", "--residency", "all",
               "--rounds", "2", "--json", str(out))
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["residency"] == "all" and report["params"]["rows"] == 37


def test_ctrl_c_stops_a_scene_file_after_the_round_in_flight_with_130(tmp_path):
    # SIGINT once the table's second row is out (an event, not a delay): the
    # command acknowledges it, stops after the round in flight, writes its
    # report with "interrupted": true and exits 130.
    import signal

    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(Path(hg.__file__).resolve().parents[1]))
    p = subprocess.Popen([sys.executable, "-m", "hostgraph", "run",
                          f"{EXAMPLES / 'test_matmul.py'}::Matmul::square", "--param", "m=256",
                          "--param", "n=256", "--param", "k=256", "--rounds", "100000",
                          "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        rows = 0
        for line in p.stdout:
            if line.split()[:1] and line.split()[0].isdigit():
                rows += 1
                if rows == 2:
                    p.send_signal(signal.SIGINT)
                    break
        rest, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "interrupted (Ctrl-C): stopping before the next round" in err
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and 2 <= len(report["rounds"]) < 100000
    assert all(r["golden"] == "pass" for r in report["rounds"])


def test_tp_is_refused_and_a_bad_selector_is_a_usage_error(tmp_path):
    p = hg_cmd("run", str(EXAMPLES / "test_softmax.py"), "--tp", "2")
    assert p.returncode == 2 and "--tp" in p.stderr and "Python scene" in p.stderr
    p = hg_cmd("run", f"{EXAMPLES / 'test_softmax.py'}::Nope")
    assert p.returncode == 2 and "no scene class 'Nope'" in p.stderr
    p = hg_cmd("run", f"{EXAMPLES / 'test_softmax.py'}::Softmax::nope")
    assert p.returncode == 2 and "no case 'nope'" in p.stderr


def test_a_golden_failure_exits_1_and_a_compile_error_3(tmp_path):
    p = hg_cmd("run", str(write_scene(tmp_path, "test_w.py", op="*")), "--rounds", "1")
    assert p.returncode == 1, p.stdout + p.stderr
    p = hg_cmd("run", str(write_scene(tmp_path, "test_c.py", op="+ nope +")))
    assert p.returncode == 3 and "C compile failed" in p.stderr and "nope" in p.stderr


def test_list_shows_every_case_and_param():
    p = hg_cmd("list", str(EXAMPLES / "test_softmax.py"))
    assert p.returncode == 0, p.stderr
    for name in ("Softmax::default", "Softmax::wide", "Softmax::ragged", "rows_per_task"):
        assert name in p.stdout


def test_the_file_run_standalone(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(hg.__file__).resolve().parents[1]))
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(EXAMPLES / "test_matmul.py"), "Matmul::tall",
                        "--rounds", "2", "--replay", "--json", str(out)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["scene"] == "test_matmul.py::Matmul::tall" and report["replay"] is True


def run_pytest(folder, *args):
    env = dict(os.environ, PYTHONPATH=str(Path(hg.__file__).resolve().parents[1]),
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), str(folder), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_pytest_collects_one_item_per_case_and_a_wrong_kernel_fails(tmp_path):
    (tmp_path / "conftest.py").write_text((EXAMPLES / "conftest.py").read_text())
    write_scene(tmp_path, "test_good.py")
    write_scene(tmp_path, "test_bad.py", op="-")
    p = run_pytest(tmp_path, "--hg-rounds", "2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "2 failed, 2 passed" in p.stdout, p.stdout
    assert "golden check failed" in p.stdout and "got" in p.stdout, p.stdout
    p = run_pytest(tmp_path, "-k", "test_good and big", "--hg-residency", "all", "--hg-replay")
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
