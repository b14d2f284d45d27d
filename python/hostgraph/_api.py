"""The package's public names (imported by __init__ once numpy is there)."""

from .buffers import HostBuffer, Tensor
from .dtypes import CODES as DTYPES
from .errors import (
    CanceledError,
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
    RunnerBusyError,
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

__all__ = [
    "Arg", "Callable", "CanceledError", "CopyError", "DTYPES", "Device", "DeviceBuffer", "DeviceMemoryError", "Dir",
    "Error", "FileError", "GoldenError", "HostBuffer", "HostMemoryError", "IN", "INOUT",
    "InvalidArgument", "KernelError", "LimitError", "NoHostViewError", "NotFoundError", "OUT",
    "ParamInfo", "RangeError", "RunStats", "Runner", "RunnerBusyError", "SCALAR", "SceneCase", "SceneError",
    "SceneInfo", "SizeOverflowError", "StaleError", "Tensor", "Trace", "UnsupportedError",
    "UsageError", "compare_scene", "load_callable", "run_scene", "scalar", "scalar_bits", "scenes",
]  # fmt: skip
