"""Runs from Python: round trips against numpy, zero copy, residency, errors."""

import numpy as np
import pytest

import hostgraph as hg

ROWS, COLS, TILE = 96, 40, 32


class Gemv:
    """examples/gemv.c's graph over numpy arrays: y = alpha*(w@x)+bias, acc += y."""

    def __init__(self, lib, resident=False, rows=ROWS, cols=COLS, seed=1):
        rng = np.random.default_rng(seed)
        self.callable = hg.load_callable(lib, "hg_example_gemv")
        self.w = rng.integers(-4, 5, (rows, cols)).astype(np.float32)
        self.x = rng.integers(-4, 5, cols).astype(np.float32)
        self.bias = rng.integers(-4, 5, rows).astype(np.float32)
        self.y = np.full(rows, np.nan, np.float32)
        self.acc = np.ones(rows, np.float32)
        self.alpha = 0.5
        self.bufs = {n: hg.HostBuffer.wrap(getattr(self, n)) for n in ("w", "x", "bias", "y", "acc")}
        self.args = [
            hg.Arg("w", hg.IN, self.bufs["w"].tensor(), resident=resident),
            hg.Arg("x", hg.IN, self.bufs["x"].tensor(), resident=resident),
            hg.Arg("bias", hg.IN, self.bufs["bias"].tensor(), resident=resident),
            hg.Arg("y", hg.OUT, self.bufs["y"].tensor()),
            hg.Arg("acc", hg.INOUT, self.bufs["acc"].tensor(), resident=resident),
            hg.scalar("alpha", self.alpha),
            hg.scalar("tile", TILE),
        ]

    def want_y(self):
        return self.alpha * (self.w.astype(np.float64) @ self.x) + self.bias

    def arg(self, name):
        return next(a for a in self.args if a.name == name)

    def replace(self, name, arg):
        self.args = [arg if a.name == name else a for a in self.args]


@pytest.fixture
def runner():
    with hg.Device("sim:cores=4") as dev, hg.Runner(dev) as r:
        yield r


def test_round_trip_against_numpy(example_lib, runner):
    g = Gemv(example_lib)
    acc0 = g.acc.copy()
    stats = runner.run(g.callable, g.args)
    np.testing.assert_allclose(g.y, g.want_y(), rtol=1e-6)
    np.testing.assert_allclose(g.acc, acc0 + g.want_y(), rtol=1e-6)
    assert stats.tasks == 2 * ((ROWS + TILE - 1) // TILE)
    assert stats.edges >= stats.tasks // 2  # each accumulate waits for its gemv tile
    assert stats.h2d_bytes == sum(a.nbytes for a in (g.w, g.x, g.bias, g.acc))
    assert stats.d2h_bytes == g.y.nbytes + g.acc.nbytes


def test_a_scene_callable_runs_over_numpy_arrays(runner):
    a = np.arange(1000, dtype=np.float32) / 8
    b = np.full(1000, 0.25, np.float32)
    c = np.zeros(1000, np.float32)
    with hg.SceneCase("vector_add", {"n": 16, "tile": 4}) as case:
        args = [hg.Arg(n, d, hg.HostBuffer.wrap(v).tensor()) for n, d, v in
                [("a", hg.IN, a), ("b", hg.IN, b), ("c", hg.OUT, c)]]
        runner.run(case.callable, args + [hg.scalar("tile", 300)])
    np.testing.assert_array_equal(c, a + b)


def test_in_place_write_then_mark_written_is_seen(example_lib, runner):
    g = Gemv(example_lib, resident=True)
    runner.run(g.callable, g.args)
    g.x[:] = np.arange(COLS, dtype=np.float32)  # through the array: zero copy
    g.bufs["x"].mark_written(0, g.x.nbytes)
    stats = runner.run(g.callable, g.args)
    assert stats.stale_uploads == 1 and stats.h2d_bytes == g.x.nbytes
    np.testing.assert_allclose(g.y, g.want_y(), rtol=1e-6)


def test_in_place_write_without_mark_written_is_the_hazard_verify_catches(example_lib):
    with hg.Device("sim:cores=2") as dev:
        for verify in (False, True):
            g = Gemv(example_lib, resident=True)
            with hg.Runner(dev, verify=verify) as runner:
                runner.run(g.callable, g.args)
                old_y = g.y.copy()
                g.x[:] += 1  # bypasses the API
                if not verify:
                    runner.run(g.callable, g.args)  # reuses the stale device copy of x
                    np.testing.assert_array_equal(g.y, old_y)
                    assert not np.allclose(g.y, g.want_y())
                else:
                    with pytest.raises(hg.StaleError, match="'x'") as e:
                        runner.run(g.callable, g.args)
                    assert e.value.message == runner.errmsg
                    g.bufs["x"].mark_written()
                    runner.run(g.callable, g.args)
                    np.testing.assert_allclose(g.y, g.want_y(), rtol=1e-6)


def test_residency_bytes_per_round(example_lib, runner):
    g = Gemv(example_lib, resident=True)
    first = runner.run(g.callable, g.args)
    assert first.h2d_bytes == g.w.nbytes + g.x.nbytes + g.bias.nbytes + g.acc.nbytes
    for step in range(3):
        g.bufs["x"].write(0, np.full(COLS, step, np.float32))
        s = runner.run(g.callable, g.args)
        assert s.h2d_bytes == g.x.nbytes  # w, bias and acc (INOUT, coherent) stay
        assert s.resident_hits == 3 and s.stale_uploads == 1
        assert s.resident_bytes_skipped == g.w.nbytes + g.bias.nbytes + g.acc.nbytes
    assert runner.resident_copies == 4
    assert runner.resident_bytes >= g.w.nbytes


def _restore(case, snapshot):
    for a in case.args:
        if a.direction in (hg.OUT, hg.INOUT):
            a.tensor.buffer.write(0, snapshot[a.name])


@pytest.mark.parametrize("mode", ["off", "in", "all"])
def test_residency_from_python_moves_what_the_c_scene_runner_moves(mode):
    """The same graph (bgemm's case), the same round loop (restore outputs, run):
    bytes and copies per round equal the C scene runner's report."""
    params = {"grid": 2, "tile": 16}
    rounds = 3
    report = hg.run_scene("bgemm", rounds=rounds, residency=mode, params=params)
    kinds = {"off": (), "in": (hg.IN,), "all": (hg.IN, hg.INOUT)}[mode]
    with hg.SceneCase("bgemm", params) as case, hg.Device("sim") as dev, hg.Runner(dev) as runner:
        snapshot = {a.name: a.tensor.numpy().copy() for a in case.args
                    if a.direction in (hg.OUT, hg.INOUT)}
        args = [a.with_residency(a.direction in kinds and a.tensor.nbytes > 0) for a in case.args]
        for r in range(rounds):
            _restore(case, snapshot)
            stats = runner.run(case.callable, args)
            ok, why = case.check()
            assert ok, why
            c_round = report["rounds"][r]
            for field in ("h2d_bytes", "d2h_bytes", "h2d_copies", "d2h_copies", "resident_hits",
                          "resident_bytes_skipped", "stale_uploads", "device_allocs"):
                assert getattr(stats, field) == c_round[field], (r + 1, field)


def test_stats_fields_are_the_reports(runner):
    report = hg.run_scene("vector_add", params={"n": 64, "tile": 16})
    keys = set(report["rounds"][0]) - {"round", "golden"}
    assert keys == set(hg.RunStats.JSON_FIELDS)
    assert set(hg.RunStats.JSON_FIELDS) <= set(hg.RunStats.__dataclass_fields__)


def test_replay_from_python():
    report = hg.run_scene("bgemm", rounds=3, residency="all", replay=True)
    assert report["replay"] is True
    assert [r["replayed"] for r in report["rounds"]] == [0, 1, 1]
    with hg.SceneCase("bgemm") as case, hg.Device("sim") as dev, \
            hg.Runner(dev, replay=True) as runner:
        assert runner.replay
        first = runner.run(case.callable, case.args)
        ok, why = case.check()
        assert ok, why
        second = runner.run(case.callable, case.args)  # accumulates into C again
        assert (first.replayed, second.replayed) == (0, 1)
        assert second.tasks == first.tasks and runner.replay_bytes > 0
        assert second.h2d_ms >= 0 and second.d2h_ms >= 0
        runner.invalidate_replay()
        assert runner.replay_bytes == 0
        assert runner.run(case.callable, case.args).replayed == 0
    with hg.SceneCase("bgemm") as case, hg.Device("sim") as dev, hg.Runner(dev) as runner:
        assert not runner.replay
        # Off by default in the library too: the same call orchestrates each time.
        runs = [runner.run(case.callable, case.args) for _ in range(2)]
        assert [r.replayed for r in runs] == [0, 0] and runner.replay_bytes == 0


def test_compare_scene_with_replay():
    report = hg.compare_scene("vector_add", rounds=3, replay=True)
    assert set(report["modes"]) == {"off", "pin", "in", "all"}
    for mode, r in report["modes"].items():
        assert r["replay"] is True, mode
        assert [x["replayed"] for x in r["rounds"]] == [0, 1, 1], mode
        assert r["error"] is None and [x["golden"] for x in r["rounds"]] == ["pass"] * 3, mode
    off = hg.compare_scene("vector_add", rounds=2)
    assert all([x["replayed"] for x in r["rounds"]] == [0, 0] for r in off["modes"].values())


def test_a_callable_from_the_example_shared_object(example_lib):
    c = hg.load_callable(example_lib, "hg_example_gemv")
    assert c.name == "gemv" and "example_gemv" in repr(c)
    with pytest.raises(hg.NotFoundError, match="no_such_symbol"):
        hg.load_callable(example_lib, "no_such_symbol")
    with pytest.raises(hg.NotFoundError):
        hg.load_callable("/nonexistent/lib.so", "hg_example_gemv")


def test_close_order(example_lib):
    dev = hg.Device("sim:cores=2")
    r1, r2 = hg.Runner(dev), hg.Runner(dev)
    g = Gemv(example_lib, resident=True)
    r1.run(g.callable, g.args)
    dev.close()  # closes the runners first
    assert r1.closed and r2.closed and dev.closed
    with pytest.raises(hg.InvalidArgument, match="closed"):
        r1.run(g.callable, g.args)
    r1.close()
    dev.close()  # idempotent


def test_closed_buffers_are_refused(example_lib, runner):
    g = Gemv(example_lib)
    g.bufs["x"].close()
    with pytest.raises(hg.InvalidArgument, match="'x'"):
        runner.run(g.callable, g.args)


# ------------------------------------------------------------- error paths


def _expect(runner, g, cls, match):
    with pytest.raises(cls, match=match) as e:
        runner.run(g.callable, g.args)
    assert isinstance(e.value, hg.Error)
    assert e.value.code == cls.code
    assert e.value.message == runner.errmsg and runner.errmsg  # the runner's one line
    assert "\n" not in e.value.message
    return e.value


def test_invalid_argument(example_lib, runner):
    g = Gemv(example_lib)
    g.replace("tile", hg.scalar("tile", 0))
    _expect(runner, g, hg.InvalidArgument, "tile")
    with pytest.raises(hg.InvalidArgument, match="cores"):
        hg.Device("sim:cores=04")


def test_not_found(example_lib, runner):
    g = Gemv(example_lib)
    g.args = [a for a in g.args if a.name != "tile"]
    _expect(runner, g, hg.NotFoundError, "'tile'")


def test_kernel_error_names_the_kernel(example_lib, runner):
    g = Gemv(example_lib)
    g.x[3] = np.nan
    _expect(runner, g, hg.KernelError, "gemv_tile")
    runner.run(Gemv(example_lib).callable, Gemv(example_lib).args)  # the runner stays usable


def test_device_memory_error(example_lib):
    with hg.Device("sim:cores=2,mem=64K") as dev, hg.Runner(dev) as runner:
        g = Gemv(example_lib, rows=512, cols=64)
        _expect(runner, g, hg.DeviceMemoryError, "bytes")


def test_copy_error(example_lib):
    with hg.Device("sim:cores=2,fail_copy=1") as dev, hg.Runner(dev) as runner:
        g = Gemv(example_lib)
        acc0 = g.acc.copy()
        _expect(runner, g, hg.CopyError, ".")
        np.testing.assert_array_equal(g.acc, acc0)  # all or nothing


def test_no_host_view(runner):
    with hg.SceneCase("bgemm", {"grid": 2, "tile": 16}) as case:
        config = case.arg("config")
        dbuf = runner.device.malloc(config.tensor.nbytes)
        dbuf.write(0, config.tensor.numpy())
        args = [hg.Arg("config", hg.IN, dbuf.tensor(config.tensor.dtype, config.tensor.shape))
                if a.name == "config" else a for a in case.args]
        with pytest.raises(hg.NoHostViewError, match="config") as e:
            runner.run(case.callable, args)
        assert e.value.message == runner.errmsg
        dbuf.free()


def test_unsupported_core_type(example_lib):
    with hg.Device("sim:cube=1,vector=0") as dev, hg.Runner(dev) as runner:
        _expect(runner, Gemv(example_lib), hg.UnsupportedError, "vector")


def test_limit_error(runner):
    with hg.SceneCase("vector_add", {"n": 4, "tile": 4}) as case:
        buf = hg.HostBuffer(4)
        # HG_MAX_TENSOR_ARGS is 256.
        extra = [hg.Arg(f"t{i}", hg.IN, buf.tensor("u8", (1,))) for i in range(257)]
        with pytest.raises(hg.LimitError) as e:
            runner.run(case.callable, case.args + extra)
        assert e.value.message == runner.errmsg


def test_range_error_on_device_buffers(runner):
    d = runner.device.malloc(1024)
    with pytest.raises(hg.RangeError):
        d.write(1000, b"x" * 100)
    d.free()


def test_file_error(tmp_path, example_lib, runner):
    t = hg.Trace()
    runner.trace = t
    g = Gemv(example_lib)
    runner.run(g.callable, g.args)
    assert t.num_task_spans == 2 * ((ROWS + TILE - 1) // TILE)
    t.write(tmp_path / "trace.json")
    with pytest.raises(hg.FileError):
        t.write(tmp_path / "missing" / "trace.json")
    runner.trace = None
