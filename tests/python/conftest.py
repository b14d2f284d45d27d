"""Fixtures for the Python package's tests: which build to test.

HOSTGRAPH_BUILD_DIR (ctest sets it) names the build tree; the package is
imported from <build>/python, as a user of the build tree would.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("HOSTGRAPH_BUILD_DIR", ROOT / "build")).resolve()
sys.path.insert(0, str(BUILD / "python"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return BUILD


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `hostgraph` command of the same build."""
    return BUILD / "hostgraph"


@pytest.fixture(scope="session")
def example_lib() -> Path:
    """The example shared object (examples/gemv.c)."""
    return BUILD / "example_gemv.so"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def run_cli(cli: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli), *args], capture_output=True, text=True, check=check)


def run_child(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports the same package (a
    crash there, SIGSEGV included, fails the test instead of the session).
    The child prints its findings; the caller checks them and the exit code."""
    import hostgraph

    env = dict(os.environ, PYTHONPATH=str(Path(hostgraph.__file__).resolve().parents[1]),
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)


def device_specs() -> list:
    """The sim, and OpenCL where it opens (HG_REQUIRE_OPENCL=1: it must),
    as pytest params for tests that hold on both."""
    import hostgraph

    try:
        hostgraph.Device("opencl").close()
        opencl = pytest.param("opencl")
    except hostgraph.Error as e:
        if os.environ.get("HG_REQUIRE_OPENCL") == "1":
            raise
        opencl = pytest.param("opencl", marks=pytest.mark.skip(reason=f"no OpenCL device: {e}"))
    return ["sim:cores=2", opencl]
