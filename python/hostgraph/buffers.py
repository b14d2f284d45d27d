"""Host buffers and tensor views.

A :class:`HostBuffer` is host memory registered once with hostgraph.  It has
an id that is never reused and a *generation* that every write through the
API moves on; residency reuses a device copy only while the generation it was
published at is still the buffer's.  So:

    Writing a wrapped array in place (``arr[:] = ...``) without
    ``buf.mark_written(lo, hi)`` afterwards is a contract violation: a
    resident device copy of it stays "fresh" and the next run computes on
    the old bytes.  Verify mode (``Runner(dev, verify=True)``) catches it: the
    run fails with :class:`~hostgraph.StaleError` naming the arg.

A :class:`Tensor` is a view (dtype, shape, strides in elements, offset) over
a host buffer, or over device memory (:meth:`hostgraph.DeviceBuffer.tensor`).
"""

from __future__ import annotations

import ctypes
import operator
import weakref
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi, dtypes
from .errors import HostMemoryError, InvalidArgument, check, error_for
from ._lifetime import Closing

_lib = _capi.core


class HostBuffer(Closing):
    """Host memory registered with hostgraph.

    Make one with ``HostBuffer(nbytes)`` (zeroed memory the buffer owns) or
    :meth:`HostBuffer.wrap` (an array or any buffer, without a copy).  Close it
    with :meth:`close` or a ``with`` block; a closed buffer cannot be used in a
    run.  Arrays handed out (:attr:`array`, :meth:`numpy`, Tensor.numpy) keep
    the memory they view alive, also after the buffer is closed.

    Two live buffers never share a byte: wrapping memory that a live buffer
    already holds raises InvalidArgument; take a view of that buffer instead.
    """

    def __init__(self, nbytes: int) -> None:
        """Allocates `nbytes` zeroed bytes (0 is allowed), owned by the buffer."""
        n = _size(nbytes, "nbytes")
        try:
            # numpy owns the memory, so every array handed out keeps it alive
            # (numpy's reference counting), whatever happens to the buffer.
            memory = np.zeros(n, np.uint8)
        except MemoryError:
            raise HostMemoryError(f"HostBuffer: cannot allocate nbytes = {n}") from None
        self._register(memory, "HostBuffer(nbytes)")
        self._created = True

    @classmethod
    def wrap(cls, array: Any) -> "HostBuffer":
        """Registers memory without a copy: a C-contiguous numpy array, or any
        object with the buffer protocol (bytearray, memoryview, array.array,
        mmap, ...) or ``__array_interface__``.

        The buffer's data pointer is the memory's, and the buffer keeps the
        object alive.  Read-only memory (``np.load(..., mmap_mode="r")``, bytes)
        can be wrapped: use it as IN only (an OUT or INOUT arg over it is
        refused).  After writing the memory in place, call :meth:`mark_written`
        for the bytes written: see the module docs.  Raises InvalidArgument if
        a live buffer already holds any of this memory (view that buffer
        instead: ``buf.tensor()[lo:hi]``).
        """
        arr = _as_array(array)
        self = cls.__new__(cls)
        self._register(arr, "HostBuffer.wrap(array)")
        self._created = False
        return self

    def _register(self, arr: np.ndarray, call: str) -> None:
        ptr = ctypes.c_void_p()
        data = arr.ctypes.data if arr.nbytes > 0 else None
        rc = _lib.hg_hostbuf_wrap(data, arr.nbytes, ctypes.byref(ptr))
        if rc != 0:
            msg = _lib.hg_last_errmsg().decode(errors="replace")
            if rc == _capi.HG_EINVAL and "overlaps" in msg:  # the C hint, in Python's words
                msg = msg.split("; take a view")[0] + (
                    "; take a tensor view of the HostBuffer that already wraps this memory "
                    "(buf.tensor()[lo:hi], hg.Tensor(buf, dtype, shape)) instead of wrapping "
                    "it again")
            raise error_for(rc, f"{call}: {msg}" if msg else call)
        self._ptr: Optional[int] = ptr.value
        self._array: Optional[np.ndarray] = arr
        self._owner: Optional["weakref.ref[Any]"] = None  # a scene case, for borrowed memory
        self._owned = True

    @classmethod
    def _borrow(cls, ptr: int, owner: Any) -> "HostBuffer":
        """A buffer a scene case owns; closing it does nothing.  Arrays over
        it hold owner._memory, which frees the case when the last goes."""
        self = cls.__new__(cls)
        self._ptr = ptr
        self._array = None
        self._owner = weakref.ref(owner)
        self._owned = False
        self._created = True
        return self

    # -------------------------------------------------------------- queries

    @property
    def closed(self) -> bool:
        if self._owner is not None:
            owner = self._owner()
            if owner is None or getattr(owner, "closed", False):
                return True
        return self._ptr is None

    def _handle(self) -> int:
        if self.closed:
            raise InvalidArgument("host buffer is closed")
        assert self._ptr is not None
        return self._ptr

    @property
    def id(self) -> int:
        """The buffer's id: never reused in the process."""
        return int(_lib.hg_hostbuf_id(self._handle()))

    @property
    def generation(self) -> int:
        """The content generation: every write through the API moves it on."""
        return int(_lib.hg_hostbuf_generation(self._handle()))

    @property
    def nbytes(self) -> int:
        return int(_lib.hg_hostbuf_size(self._handle()))

    @property
    def data_ptr(self) -> int:
        """The address of the buffer's bytes (the wrapped array's, for wrap)."""
        return int(_lib.hg_hostbuf_data(self._handle()) or 0)

    @property
    def readonly(self) -> bool:
        """True when the wrapped memory is read-only: usable as IN args only."""
        return self._array is not None and not self._array.flags.writeable

    @property
    def last_write(self) -> Tuple[int, int]:
        """The byte range [lo, hi) of the most recent write."""
        lo, hi = ctypes.c_size_t(), ctypes.c_size_t()
        _lib.hg_hostbuf_last_write(self._handle(), ctypes.byref(lo), ctypes.byref(hi))
        return lo.value, hi.value

    @property
    def array(self) -> np.ndarray:
        """The wrapped array (for a buffer-protocol object, a numpy array over
        it), or for a buffer made with HostBuffer(n) its bytes as uint8."""
        if self._array is not None:
            return self._array
        return self.numpy(np.uint8)

    def numpy(self, dtype: dtypes.DTypeLike = np.uint8, shape: Optional[Sequence[int]] = None) -> np.ndarray:
        """The buffer's bytes as a numpy array (no copy).

        The array keeps the memory it views alive, also after the buffer (or
        the scene case that owns it) is closed.  Writing through it is writing
        in place: follow with :meth:`mark_written`.
        """
        nbytes = self.nbytes
        if self._array is not None:
            raw = self._array.reshape(-1).view(np.uint8)
        elif nbytes == 0:
            raw = np.empty(0, np.uint8)
        else:
            raw = _foreign_bytes(self.data_ptr, nbytes, self._keeper())
        npdt = dtypes.numpy_of(dtype) if isinstance(dtype, str) else np.dtype(dtype)
        out = raw[: (nbytes // npdt.itemsize) * npdt.itemsize].view(npdt)
        return out.reshape(tuple(shape)) if shape is not None else out

    def _keeper(self) -> Any:
        """What keeps borrowed memory alive: the owner's memory object."""
        owner = self._owner() if self._owner is not None else None
        keeper = getattr(owner, "_memory", None)
        if keeper is None:
            raise InvalidArgument("host buffer is closed")
        return keeper

    # --------------------------------------------------------------- writes

    def write(self, offset: int, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> None:
        """Copies `data` into the buffer at byte `offset` and moves the generation on.

        Raises RangeError if it does not fit.
        """
        if self.readonly:
            raise InvalidArgument("write: the buffer wraps read-only memory (wrap a writable copy)")
        if not isinstance(data, np.ndarray):
            data = np.frombuffer(data, np.uint8)
        src = np.ascontiguousarray(data)
        nbytes = src.nbytes
        ptr = src.ctypes.data if nbytes > 0 else None
        rc = _lib.hg_hostbuf_write(self._handle(), _size(offset, "offset"), ptr, nbytes)
        check(rc, f"write of {nbytes} bytes at offset {offset}: the buffer has {self.nbytes}" if rc else "")

    def mark_written(self, lo: int = 0, hi: Optional[int] = None) -> None:
        """Declares bytes [lo, hi) written in place (default: all); moves the generation on.

        Raises RangeError if the range does not fit the buffer.
        """
        size = self.nbytes
        hi = size if hi is None else hi
        if hi < lo:
            raise InvalidArgument(f"mark_written: hi {hi} < lo {lo}")
        rc = _lib.hg_hostbuf_mark_written(self._handle(), _size(lo, "lo"), hi - lo)
        check(rc, f"mark_written [{lo}, {hi}): the buffer has {size} bytes" if rc else "")

    # ---------------------------------------------------------------- views

    def tensor(self, dtype: Optional[dtypes.DTypeLike] = None,
               shape: Optional[Sequence[int]] = None) -> "Tensor":
        """A dense row-major view from element 0.  For a wrapped array, dtype
        and shape default to the array's."""
        wrapped = self._array is not None and not self._created
        if dtype is None:
            if not wrapped:
                raise InvalidArgument("tensor: say the dtype (the buffer wraps no array)")
            assert self._array is not None
            dtype = self._array.dtype
        if shape is None:
            if wrapped:
                assert self._array is not None
                shape = self._array.shape if self._array.ndim > 0 else (1,)
            else:
                shape = (self.nbytes // dtypes.numpy_of(dtype).itemsize,)
        return Tensor(self, dtype, shape)

    # ------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Forgets the buffer; its memory may be registered again.  Memory the
        buffer owns is freed when no array handed out views it. Idempotent."""
        ptr, self._ptr = self._ptr, None
        if ptr is not None and self._owned:
            _lib.hg_hostbuf_destroy(ptr)
            if self._created:
                self._array = None  # numpy frees it once no view of it is left


    def __repr__(self) -> str:
        if self.closed:
            return "<HostBuffer closed>"
        return f"<HostBuffer id={self.id} nbytes={self.nbytes} generation={self.generation}>"


def _as_array(obj: Any) -> np.ndarray:
    """A numpy array over obj's memory (no copy), keeping obj alive."""
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__array_interface__") or hasattr(obj, "__array_struct__"):
        arr = np.asarray(obj)
    else:
        try:
            arr = np.asarray(memoryview(obj))
        except TypeError:
            raise TypeError(f"HostBuffer.wrap(array): a {type(obj).__name__} has neither the buffer "
                            "protocol nor __array_interface__ (wrap a numpy array, bytearray, "
                            "memoryview, array.array, mmap, ...)") from None
        except (ValueError, NotImplementedError) as e:
            raise InvalidArgument(f"HostBuffer.wrap(array): numpy cannot view this "
                                  f"{type(obj).__name__}: {e}") from None
    if not arr.flags.c_contiguous:
        raise InvalidArgument("HostBuffer.wrap(array): the array is not C-contiguous; wrap "
                              "np.ascontiguousarray(array), a copy, and read results from it")
    return arr


def _foreign_bytes(ptr: int, nbytes: int, keeper: Any) -> np.ndarray:
    """uint8 array over C memory at ptr that keeps `keeper` alive (the
    owner of that memory) for as long as any view of it lives."""
    mem = (ctypes.c_uint8 * nbytes).from_address(ptr)
    mem._hostgraph_keeper = keeper  # type: ignore[attr-defined]
    return np.frombuffer(mem, np.uint8)


def _size(value: int, what: str) -> int:
    v = operator.index(value)
    if v < 0:
        raise InvalidArgument(f"{what}: {v} is negative")
    return v


class Tensor:
    """A view: dtype, shape, strides (elements), offset (elements) over a buffer.

    ``Tensor(buf, "f32", (rows, cols))`` is dense row-major from element 0.
    Index it like a numpy array: ``t[2:10, ::2]``, ``t[3]``, ``t[..., 1:]``.
    Ranges with a positive step and integers map onto views; a negative step
    does not (strides are unsigned) and raises IndexError.  Indexing every
    dimension with an integer gives a one-element view of shape (1,).
    """

    def __init__(self, buffer: Any, dtype: dtypes.DTypeLike, shape: Sequence[int]) -> None:
        self._t = _capi.hg_tensor()
        self.buffer = buffer
        shape = tuple(_size(s, "shape") for s in shape)
        arr = (ctypes.c_size_t * max(len(shape), 1))(*shape)
        code = dtypes.code_of(dtype)
        if isinstance(buffer, HostBuffer):
            rc = _lib.hg_tensor_host(ctypes.byref(self._t), buffer._handle(), code, len(shape), arr)
        elif hasattr(buffer, "address"):
            rc = _lib.hg_tensor_device(ctypes.byref(self._t), buffer.address, code, len(shape), arr)
        else:
            raise TypeError(f"a Tensor views a HostBuffer or a DeviceBuffer, not {type(buffer).__name__}")
        check(rc, f"tensor {dtypes.name_of(dtype)} {list(shape)}: {_capi.strerror(rc)}" if rc else "")

    @classmethod
    def _from_struct(cls, t: "_capi.hg_tensor", buffer: Any) -> "Tensor":
        self = cls.__new__(cls)
        self._t = _capi.hg_tensor()
        ctypes.pointer(self._t)[0] = t
        self.buffer = buffer
        return self

    @property
    def dtype(self) -> str:
        return dtypes.from_code(self._t.dtype)

    @property
    def ndim(self) -> int:
        return int(self._t.ndims)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._t.shape[: self._t.ndims])

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements (numpy's are in bytes)."""
        return tuple(self._t.strides[: self._t.ndims])

    @property
    def offset(self) -> int:
        """The element index of the first element within the buffer."""
        return int(self._t.offset)

    @property
    def nbytes(self) -> int:
        n = ctypes.c_size_t()
        check(_lib.hg_tensor_nbytes(ctypes.byref(self._t), ctypes.byref(n)), "tensor nbytes")
        return n.value

    @property
    def extent(self) -> Tuple[int, int]:
        """The byte range [lo, hi) of the buffer the view can touch."""
        lo, hi = ctypes.c_size_t(), ctypes.c_size_t()
        rc = _lib.hg_tensor_extent(ctypes.byref(self._t), ctypes.byref(lo), ctypes.byref(hi))
        check(rc, "tensor extent")
        return lo.value, hi.value

    @property
    def is_dense(self) -> bool:
        return bool(_lib.hg_tensor_is_dense(ctypes.byref(self._t)))

    def overlaps(self, other: "Tensor") -> bool:
        """True if both view the same buffer and their byte extents intersect."""
        return bool(_lib.hg_tensor_overlap(ctypes.byref(self._t), ctypes.byref(other._t)))

    def slice(self, dim: int, start: int, length: int) -> "Tensor":
        """Narrows dimension `dim` to [start, start+length) (hg_tensor_slice)."""
        out = _capi.hg_tensor()
        rc = _lib.hg_tensor_slice(ctypes.byref(self._t), dim, _size(start, "start"),
                                  _size(length, "length"), ctypes.byref(out))
        check(rc, f"slice dim {dim} [{start}, {start + length}) of shape {list(self.shape)}" if rc else "")
        return Tensor._from_struct(out, self.buffer)

    def __getitem__(self, key: Any) -> "Tensor":
        shape, strides = self.shape, self.strides
        keys = _expand_key(key, len(shape))
        offset = self.offset
        new_shape, new_strides = [], []
        for dim, k in enumerate(keys):
            n, s = shape[dim], strides[dim]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise IndexError("a negative step does not map onto a hostgraph view "
                                     "(strides are unsigned)")
                length = len(range(start, stop, step))
                if length > 0:
                    offset += start * s
                new_shape.append(length)
                new_strides.append(s * step)
            else:
                i = operator.index(k)
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise IndexError(f"index {operator.index(k)} is out of range for "
                                     f"dimension {dim} of size {n}")
                offset += i * s
        if not new_shape:
            new_shape, new_strides = [1], [1]
        if len(new_shape) > _capi.MAX_DIMS:
            raise IndexError("too many dimensions")
        out = _capi.hg_tensor()
        ctypes.pointer(out)[0] = self._t
        out.ndims = len(new_shape)
        for d in range(_capi.MAX_DIMS):
            out.shape[d] = new_shape[d] if d < len(new_shape) else 0
            out.strides[d] = new_strides[d] if d < len(new_shape) else 0
        out.offset = offset
        return Tensor._from_struct(out, self.buffer)

    def numpy(self) -> np.ndarray:
        """The view's elements as a numpy array over the host buffer (no copy).

        bf16 views come back as uint16.  Only for host views.
        """
        if not isinstance(self.buffer, HostBuffer):
            raise InvalidArgument("a device view has no host bytes (DeviceBuffer.read copies them)")
        npdt = dtypes.numpy_of(self.dtype)
        raw = self.buffer.numpy(np.uint8)
        item = npdt.itemsize
        if 0 in self.shape:
            return np.empty(self.shape, npdt)
        return np.ndarray(self.shape, dtype=npdt, buffer=raw, offset=self.offset * item,
                          strides=tuple(s * item for s in self.strides))

    def __repr__(self) -> str:
        where = "host" if isinstance(self.buffer, HostBuffer) else "device"
        return f"<Tensor {self.dtype} shape={self.shape} strides={self.strides} offset={self.offset} {where}>"


def _expand_key(key: Any, ndim: int) -> Tuple[Any, ...]:
    keys = key if isinstance(key, tuple) else (key,)
    if any(k is None for k in keys):
        raise IndexError("np.newaxis does not map onto a hostgraph view")
    ellipses = sum(1 for k in keys if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis")
    if ellipses:
        i = next(j for j, k in enumerate(keys) if k is Ellipsis)
        fill = (slice(None),) * (ndim - (len(keys) - 1))
        keys = keys[:i] + fill + keys[i + 1 :]
    if len(keys) > ndim:
        raise IndexError(f"too many indices for a view of {ndim} dimensions")
    for k in keys:
        if isinstance(k, bool) or not (isinstance(k, slice) or hasattr(k, "__index__")):
            raise IndexError(f"only integers, slices and ... index a view, not {k!r}")
    return keys + (slice(None),) * (ndim - len(keys))
