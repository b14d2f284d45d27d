"""HG_KERNELS from Python: the scene calls check it before a case is made,
as the command does, and the report names the path that ran."""

import pytest

import hostgraph as hg


def test_unknown_hg_kernels_is_a_usage_error_naming_it(monkeypatch):
    monkeypatch.setenv("HG_KERNELS", "avx9000")
    with pytest.raises(hg.UsageError, match="HG_KERNELS='avx9000'"):
        hg.run_scene("vector_add", params={"n": 100})
    with pytest.raises(hg.UsageError, match="avx9000"):
        hg.compare_scene("vector_add", rounds=2, params={"n": 100})
    with pytest.raises(hg.InvalidArgument, match="avx9000"):
        hg.SceneCase("vector_add", {"n": 100})


def cpu_flags():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


NEEDS = {"portable": [], "avx2": ["avx2", "fma", "f16c"],
         "avx512bf16": ["avx2", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "fma",
                        "avx512_bf16"]}


@pytest.mark.parametrize("path", ["portable", "avx2", "avx512bf16"])
def test_hg_kernels_forces_the_path_the_report_names(monkeypatch, path):
    monkeypatch.setenv("HG_KERNELS", path)
    missing = [f for f in NEEDS[path] if f not in cpu_flags()]
    if missing:  # refused, naming the feature; the path itself is skipped here
        with pytest.raises(hg.UsageError, match=missing[0]):
            hg.run_scene("vector_add", params={"n": 100})
        pytest.skip(f"CPU lacks {path}")
    report = hg.run_scene("bgemm", rounds=2, params={"grid": 2, "tile": 32})
    assert report["kernels"] == path
    assert all(r["golden"] == "pass" for r in report["rounds"])
