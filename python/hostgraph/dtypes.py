"""hostgraph's element types and their numpy counterparts.

hostgraph names dtypes as the C API does (``"f32"``, ``"bf16"``, ...).  Every
one but bf16 has a numpy dtype; bf16 data lives in ``uint16`` arrays, and a
``uint16`` array must say ``dtype="bf16"`` explicitly (hostgraph has no u16).
"""

from __future__ import annotations

from typing import Dict, Union

import numpy as np

# hg_dtype values, in the enum's order.
_NAMES = ("f32", "f16", "bf16", "f64", "i8", "u8", "i16", "i32", "i64", "u64", "bool")
CODES: Dict[str, int] = {name: i for i, name in enumerate(_NAMES)}

_NUMPY: Dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}
_FROM_NUMPY: Dict[np.dtype, str] = {dt: name for name, dt in _NUMPY.items() if name != "bf16"}

DTypeLike = Union[str, np.dtype, type]


def name_of(dtype: DTypeLike) -> str:
    """The hostgraph name of a dtype given as a name ("f32") or a numpy dtype."""
    if isinstance(dtype, str) and dtype in CODES:
        return dtype
    try:
        npdt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"unknown dtype {dtype!r}") from None
    if npdt in _FROM_NUMPY:
        return _FROM_NUMPY[npdt]
    if npdt == np.dtype(np.uint16):
        raise ValueError("uint16 arrays have no hostgraph dtype: say dtype='bf16' if they hold bf16")
    raise ValueError(f"numpy dtype {npdt} has no hostgraph dtype (one of {', '.join(_NAMES)})")


def code_of(dtype: DTypeLike) -> int:
    """The hg_dtype value."""
    return CODES[name_of(dtype)]


def numpy_of(dtype: DTypeLike) -> np.dtype:
    """The numpy dtype that holds elements of this dtype (uint16 for bf16)."""
    return _NUMPY[name_of(dtype)]


def from_code(code: int) -> str:
    if not 0 <= code < len(_NAMES):
        raise ValueError(f"hg_dtype {code} is not a dtype")
    return _NAMES[code]
