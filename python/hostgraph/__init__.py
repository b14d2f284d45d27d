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
``hostgraph`` command.
"""

from .buffers import HostBuffer, Tensor
from .dtypes import CODES as DTYPES
from .errors import (
    CopyError,
    DeviceMemoryError,
    Error,
    FileError,
    GoldenError,
    HostMemoryError,
    InvalidArgument,
    KernelError,
    LimitError,
    NoHostViewError,
    NotFoundError,
    RangeError,
    SceneError,
    SizeOverflowError,
    StaleError,
    UnsupportedError,
    UsageError,
)
from .runtime import (
    IN,
    INOUT,
    OUT,
    SCALAR,
    Arg,
    Callable,
    Device,
    DeviceBuffer,
    Dir,
    Runner,
    RunStats,
    Trace,
    load_callable,
    scalar,
    scalar_bits,
)
from .scenes import ParamInfo, SceneCase, SceneInfo, compare_scene, run_scene, scenes

#: The version of the bindings; the C library's is HG_VERSION, the same.
__version__ = "0.1.0"

__all__ = [
    "Arg", "Callable", "CopyError", "DTYPES", "Device", "DeviceBuffer", "DeviceMemoryError", "Dir",
    "Error", "FileError", "GoldenError", "HostBuffer", "HostMemoryError", "IN", "INOUT",
    "InvalidArgument", "KernelError", "LimitError", "NoHostViewError", "NotFoundError", "OUT",
    "ParamInfo", "RangeError", "RunStats", "Runner", "SCALAR", "SceneCase", "SceneError",
    "SceneInfo", "SizeOverflowError", "StaleError", "Tensor", "Trace", "UnsupportedError",
    "UsageError", "compare_scene", "load_callable", "run_scene", "scalar", "scalar_bits", "scenes",
]  # fmt: skip
