"""hostgraph: build task graphs of compute kernels on the host, run them on a
device round after round, and move only the bytes that changed.

Python bindings over the C library (ctypes over libhostgraph.so.0; the scenes
over libhostgraph_scenes.so.0, loaded on first use)::

    import numpy as np, hostgraph as hg

    gemv = hg.load_callable("build/example_gemv.so", "hg_example_gemv")
    w = np.random.rand(256, 128).astype(np.float32)       # weights: resident
    x = np.zeros(128, np.float32)
    ...
    with hg.Device("sim:cores=4") as dev, hg.Runner(dev) as runner:
        wb, xb = hg.HostBuffer.wrap(w), hg.HostBuffer.wrap(x)
        args = [hg.Arg("w", hg.IN, wb.tensor(), resident=True), ...]
        for step in range(rounds):
            x[:] = next_input()
            xb.mark_written()           # without it a resident x would be stale
            stats = runner.run(gemv, args)

The contract that matters: a wrapped array written in place must be followed
by ``buf.mark_written(lo, hi)`` (or written with ``buf.write``); otherwise a
resident device copy is reused stale.  ``Runner(dev, verify=True)`` catches
that with :class:`StaleError`.

Scenes: :func:`run_scene`, :func:`compare_scene` (the command's JSON report,
as Python objects), :class:`SceneCase`; ``python3 -m hostgraph`` is the
``hostgraph`` command.  Your own scenes: subclass :class:`Scene` in a
``test_*.py`` file (hostgraph/scene.py), run it with ``python3 -m hostgraph
run FILE.py`` or pytest; :func:`python_callable` turns a Python
orchestration into a Callable for Runner.run.
"""

import sys as _sys

#: The version of the bindings; the C library's is HG_VERSION, the same.
__version__ = "0.1.0"

try:
    import numpy as _numpy
except ImportError as _e:
    # `python -m hostgraph` runs the command and needs no numpy: while -m
    # locates the module, sys.argv[0] is "-m" (documented by CPython).
    if _sys.argv[:1] != ["-m"]:
        raise ImportError(
            "hostgraph needs numpy, which this Python cannot import: install it (Debian: "
            "apt-get install python3-numpy; in a virtual environment: pip install numpy, or "
            "create it with --system-site-packages)", name="numpy") from _e
    _numpy = None

if _numpy is None:  # only the command (hostgraph.__main__) is usable
    __all__ = []  # type: ignore[var-annotated]

    def __getattr__(name: str) -> None:
        if name.startswith("_"):  # submodules (_capi), found by the import system
            raise AttributeError(name)
        raise ImportError(f"hostgraph.{name} needs numpy: install it (apt-get install python3-numpy)")
else:
    from ._api import *  # noqa: F401,F403
    from ._api import __all__ as _core_all
    from ._compile import SceneCompileError
    from .orchestration import Args, Orch, PythonCallable, View, python_callable
    from .scene import (Case, In, InOut, Kernel, KernelSet, Out, Param, Scalar, Scene,
                        compile_kernels, scene_main)

    __all__ = list(_core_all) + [
        "Args", "Case", "In", "InOut", "Kernel", "KernelSet", "Orch", "Out", "Param",
        "PythonCallable", "Scalar", "Scene", "SceneCompileError", "View", "compile_kernels",
        "python_callable", "scene_main",
    ]  # fmt: skip
