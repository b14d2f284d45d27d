"""The package as users get it: without numpy, pip-installed into a virtual
environment (python3-venv; CI reaches no package index), and the command
through ``python -m hostgraph`` with no numpy at all."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

def without_numpy(tmp_path, build_dir):
    """An environment whose `import numpy` fails, as on a machine without it."""
    shadow = tmp_path / "shadow"
    (shadow / "numpy").mkdir(parents=True)
    (shadow / "numpy" / "__init__.py").write_text("raise ImportError('No module named numpy')\n")
    return dict(os.environ, PYTHONPATH=f"{shadow}:{build_dir / 'python'}",
                PYTHONDONTWRITEBYTECODE="1")


def test_import_without_numpy_says_to_install_it(tmp_path, build_dir):
    out = subprocess.run([sys.executable, "-c", "import hostgraph"], capture_output=True,
                         text=True, env=without_numpy(tmp_path, build_dir), timeout=300)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "numpy" in last and "install" in last, out.stderr


def test_python_m_hostgraph_needs_no_numpy(tmp_path, build_dir, cli):
    env = without_numpy(tmp_path, build_dir)
    listed = subprocess.run([sys.executable, "-m", "hostgraph", "list"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == subprocess.run([str(cli), "list"], capture_output=True,
                                           text=True).stdout
    ran = subprocess.run([sys.executable, "-m", "hostgraph", "run", "vector_add", "--param",
                          "n=1000", "--rounds", "2", "--quiet"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr


def _venv_or_skip(tmp_path):
    """A virtual environment that sees Debian's numpy and setuptools; skips
    only when this Python truly lacks venv/ensurepip, setuptools or wheel."""
    for module, package in (("ensurepip", "python3-venv"), ("setuptools", "python3-setuptools"),
                            ("wheel", "python3-wheel")):
        if subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode != 0:
            pytest.skip(f"{sys.executable} cannot import {module} (apt-get install {package})")
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    return venv / "bin" / "python"


def _pip_install(py, root, tmp_path, env):
    src = tmp_path / "src"  # a copy: the build writes nothing into the checkout
    shutil.copytree(root / "python", src, ignore=shutil.ignore_patterns("__pycache__", "_paths.py"))
    out = subprocess.run([str(py), "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          str(src)], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


USE = """
import os, sys
import numpy as np, hostgraph as hg
assert hg.__file__.startswith(sys.prefix), hg.__file__
a = np.arange(64, dtype=np.float32); c = np.zeros(64, np.float32)
with hg.SceneCase("vector_add", {"n": 64, "tile": 16}) as case, hg.Device() as dev, \
        hg.Runner(dev) as r:
    ab = hg.HostBuffer.wrap(a)
    r.run(case.callable, [hg.Arg("a", hg.IN, ab.tensor()), hg.Arg("b", hg.IN, ab.tensor()),
                          hg.Arg("c", hg.OUT, hg.HostBuffer.wrap(c).tensor()), hg.scalar("tile", 16)])
assert (c == 2 * a).all()
print("ok", hg.__file__)
"""


def test_pip_install_into_a_virtual_environment(tmp_path, root, build_dir, cli):
    py = _venv_or_skip(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HOSTGRAPH_"))}
    # Installed from a checkout with a build: the package finds that build's libraries.
    _pip_install(py, root, tmp_path, dict(env, HOSTGRAPH_BUILD_DIR=str(build_dir)))
    out = subprocess.run([str(py), "-c", USE], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    listed = subprocess.run([str(py), "-m", "hostgraph", "list"], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=300)
    assert listed.returncode == 0 and listed.stdout == subprocess.run(
        [str(cli), "list"], capture_output=True, text=True).stdout, listed.stderr


def test_pip_install_finds_libraries_installed_into_the_same_prefix(tmp_path, root, build_dir):
    py = _venv_or_skip(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HOSTGRAPH_"))}
    prefix = Path(subprocess.run([str(py), "-c", "import sys; print(sys.prefix)"],
                                 capture_output=True, text=True).stdout.strip())
    inst = subprocess.run(["cmake", "--install", str(build_dir), "--prefix", str(prefix)],
                          capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    out = subprocess.run([str(py), "-c", USE], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr  # cmake's install: no PYTHONPATH needed
    _pip_install(py, root, tmp_path, env)  # no build named: it searches the prefix
    out = subprocess.run([str(py), "-c", USE], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    # HOSTGRAPH_LIBDIR stays the override: a wrong one fails, naming it.
    bad = subprocess.run([str(py), "-c", "import hostgraph"], capture_output=True, text=True,
                         env=dict(env, HOSTGRAPH_LIBDIR=str(tmp_path / "nowhere")), cwd=tmp_path)
    assert bad.returncode != 0 and "nowhere" in bad.stderr
