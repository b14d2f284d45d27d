"""The scene runner from Python: the same report as the command's JSON."""

import json
import os
import subprocess
import sys

import pytest

import hostgraph as hg

from conftest import run_cli

CASES = [
    ("vector_add", {"n": 5000, "tile": 700}, "all", 3),
    ("bgemm", {"grid": 3, "tile": 16}, "in", 3),
    ("bgemm", {"grid": 2, "tile": 16}, "pin", 2),
    ("paged_attention", {"preset": "tiny"}, "all", 2),
    ("qwen3_decode", {"preset": "tiny", "layers": 1}, "all", 2),
]


def deterministic(report):
    """A report without its times: bytes, copies, golden, params, names."""
    if isinstance(report, dict):
        return {k: deterministic(v) for k, v in report.items()
                if not k.endswith("_ms") and "_ms_" not in k and k != "verdict"}
    if isinstance(report, list):
        return [deterministic(v) for v in report]
    return report


def cli_params(params):
    out = []
    for k, v in params.items():
        out += ["--param", f"{k}={v}"]
    return out


def test_scenes_are_the_commands(cli):
    listed = [line.split()[0] for line in run_cli(cli, "list").stdout.splitlines()]
    info = hg.scenes()
    assert list(info) == listed
    assert info["bgemm"].params["grid"].default == 4
    assert info["qwen3_decode"].params["preset"].default_name == "tiny"


@pytest.mark.parametrize("scene,params,mode,rounds", CASES)
def test_run_scene_report_equals_the_commands_json(tmp_path, cli, scene, params, mode, rounds):
    path = tmp_path / "cli.json"
    run_cli(cli, "run", scene, "--rounds", str(rounds), "--residency", mode, "--quiet",
            "--json", str(path), *cli_params(params))
    want = json.loads(path.read_text())
    got = hg.run_scene(scene, rounds=rounds, residency=mode, params=params)
    assert set(got) == set(want)
    assert deterministic(got) == deterministic(want)
    assert all(r["golden"] == "pass" for r in got["rounds"])
    assert len(got["rounds"]) == rounds


def test_compare_scene_equals_the_commands_json(tmp_path, cli):
    params = {"grid": 2, "tile": 16}
    path = tmp_path / "cli.json"
    run_cli(cli, "compare", "bgemm", "--rounds", "2", "--json", str(path), *cli_params(params))
    want = json.loads(path.read_text())
    got = hg.compare_scene("bgemm", rounds=2, params=params)
    assert set(got["modes"]) == {"off", "pin", "in", "all"}
    for report in (got, want):  # checked on their own below
        for mode in report["modes"].values():
            mode.pop("params")
    assert deterministic(got) == deterministic(want)


def test_compare_modes_report_the_scenes_params():
    got = hg.compare_scene("bgemm", rounds=2, params={"grid": 2, "tile": 16})
    for mode in got["modes"].values():
        assert mode["params"] == got["params"]


def test_run_scene_writes_a_trace(tmp_path):
    trace = tmp_path / "t.json"
    report = hg.run_scene("vector_add", params={"n": 100, "tile": 10}, trace=str(trace))
    assert report["rounds"][0]["golden"] == "pass"
    assert json.loads(trace.read_text())


def test_run_scene_errors():
    with pytest.raises(hg.UsageError, match="nope"):
        hg.run_scene("nope")
    with pytest.raises(hg.UsageError, match="grid"):
        hg.run_scene("bgemm", params={"grid": -1})
    with pytest.raises(hg.UsageError, match="sideways"):
        hg.run_scene("bgemm", residency="sideways")
    with pytest.raises(hg.UsageError, match="sim:bogus"):
        hg.run_scene("vector_add", device="sim:bogus=1")
    with pytest.raises(hg.SceneError, match="round 1") as e:
        hg.run_scene("vector_add", params={"n": 64, "tile": 16}, device="sim:fail_copy=1")
    assert isinstance(e.value, hg.Error)


def test_golden_error_carries_the_report(monkeypatch):
    """A case whose outputs do not match: run vector_add's check before any run."""
    with hg.SceneCase("vector_add", {"n": 32, "tile": 8}) as case:
        ok, why = case.check()
        assert not ok and "golden mismatch in output 'c'" in why
    err = hg.GoldenError("x", {"rounds": []})
    assert err.report == {"rounds": []} and isinstance(err, hg.Error)


def test_scene_case_errors():
    with pytest.raises(hg.NotFoundError, match="nope"):
        hg.SceneCase("nope")
    with pytest.raises(hg.NotFoundError, match="bogus"):
        hg.SceneCase("bgemm", {"bogus": 1})
    with pytest.raises(hg.RangeError, match="grid"):
        hg.SceneCase("bgemm", {"grid": 0})


def test_python_m_hostgraph_is_the_command(tmp_path, cli, build_dir):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))

    def py_m(*args):
        return subprocess.run([sys.executable, "-m", "hostgraph", *args], capture_output=True,
                              text=True, env=env)

    assert py_m("list").stdout == run_cli(cli, "list").stdout
    assert py_m("--version").stdout == run_cli(cli, "--version").stdout
    bad = py_m("run", "nope")
    assert bad.returncode == 2 and bad.stderr == run_cli(cli, "run", "nope", check=False).stderr
    path = tmp_path / "m.json"
    ok = py_m("run", "vector_add", "--param", "n=1000", "--rounds", "2", "--json", str(path))
    assert ok.returncode == 0, ok.stderr
    assert "later rounds avg" in ok.stdout
    assert deterministic(json.loads(path.read_text())) == deterministic(
        hg.run_scene("vector_add", params={"n": 1000}, rounds=2))


def test_the_example_runs(root, build_dir, example_lib):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))
    out = subprocess.run([sys.executable, str(root / "examples" / "gemv_rounds.py"), str(example_lib),
                          "--rounds", "3", "--rows", "256", "--cols", "64"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line[:1].isdigit()]
    assert [r[-1] for r in rows] == ["pass"] * 3
    assert int(rows[1][2]) == 64 * 4  # a later round uploads only x
