"""Orchestration in Python: a function ``orchestrate(o, args)`` as an hg_callable.

The function runs inside hg_runner_run, through a ctypes callback (which
takes the GIL itself), on the thread that called the run: once per
orchestrated run, never for a run that replays its recording
(``Runner(replay=True)``, ``--replay``).  It sees the run through ``o``
(an :class:`Orch`, valid only during the call) and ``args`` (views of the
run's args by name)::

    def orchestrate(o, args):
        n, t = args.a.shape[0], args.tile
        for i in range(0, n, t):
            o.submit("vadd", None, [args.a[i:i + t], args.b[i:i + t], args.c[i:i + t]])

A view's access is its arg's direction (IN, OUT, INOUT); ``.as_in()``,
``.as_out()`` and ``.as_inout()`` say otherwise (a scratch read by a later
task).  ``o.host_view(args.x)`` is a read-only numpy array over the arg's
host bytes, recorded for replay (a write to x through the API makes the next
run orchestrate again).  ``o.scratch(name, dtype, shape)`` is run-owned
device memory.

An exception raised by the function fails the run: the callback catches
it, hands its text to hg_orch_fail (so the run's error, and the exception
Runner.run raises, carry it) and returns the code; the runner stays usable.
``PythonCallable.calls`` counts the orchestrations, ``last_error`` keeps the
last exception.
"""

from __future__ import annotations

import ctypes
import traceback
from typing import Any, Callable as Fn, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi, dtypes
from .errors import Error, InvalidArgument, error_for
from .runtime import Callable, scalar_bits

_lib = _capi.core

_CORES = {"cube": _capi.HG_CORE_CUBE, "vector": _capi.HG_CORE_VECTOR, "any": _capi.HG_CORE_ANY}
_ACCESS = {"in": _capi.HG_IN, "out": _capi.HG_OUT, "inout": _capi.HG_INOUT}


def core_of(core: Union[str, int, None], what: str) -> Optional[int]:
    """hg_core_type of "cube", "vector" or "any" (None stays None)."""
    if core is None or isinstance(core, int) and core in _CORES.values():
        return core
    if isinstance(core, str) and core.lower() in _CORES:
        return _CORES[core.lower()]
    raise InvalidArgument(f"{what}: core {core!r}: want 'cube', 'vector' or 'any'")


class View:
    """A view of one run arg (or scratch) for a task: the arg's index, a
    buffer-relative hg_tensor and the access the task makes.  Index it like
    a numpy array (ints and step-1 slices, one per dimension)."""

    __slots__ = ("arg", "name", "tensor", "access")

    def __init__(self, arg: int, name: str, tensor: "_capi.hg_tensor", access: int) -> None:
        self.arg, self.name, self.tensor, self.access = arg, name, tensor, access

    @property
    def ndim(self) -> int:
        return int(self.tensor.ndims)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(int(self.tensor.shape[i]) for i in range(self.tensor.ndims))

    @property
    def dtype(self) -> str:
        return dtypes.from_code(self.tensor.dtype)

    def _slice1(self, key: slice) -> "View":
        """The common case, a 1-D view's step-1 slice, without the general loop."""
        src = self.tensor
        start, stop, _ = key.indices(src.shape[0])
        t = _capi.hg_tensor.from_buffer_copy(src)
        t.offset = src.offset + start * src.strides[0]
        t.shape[0] = max(stop - start, 0)
        return View(self.arg, self.name, t, self.access)

    def _with(self, tensor: "_capi.hg_tensor", access: Optional[int] = None) -> "View":
        return View(self.arg, self.name, tensor, self.access if access is None else access)

    def as_in(self) -> "View":
        return self._with(self.tensor, _capi.HG_IN)

    def as_out(self) -> "View":
        return self._with(self.tensor, _capi.HG_OUT)

    def as_inout(self) -> "View":
        return self._with(self.tensor, _capi.HG_INOUT)

    def __getitem__(self, key: Any) -> "View":
        if type(key) is slice and self.tensor.ndims == 1 and key.step is None:
            return self._slice1(key)
        keys = key if isinstance(key, tuple) else (key,)
        nd = self.ndim
        if len(keys) > nd:
            raise IndexError(f"arg '{self.name}': {len(keys)} indices for {nd} dimensions")
        t = _capi.hg_tensor()
        ctypes.pointer(t)[0] = self.tensor  # a copy
        shape = [int(self.tensor.shape[i]) for i in range(nd)]
        strides = [int(self.tensor.strides[i]) for i in range(nd)]
        offset = int(self.tensor.offset)
        keep: List[int] = []
        for d in range(nd):
            k = keys[d] if d < len(keys) else slice(None)
            if isinstance(k, slice):
                start, stop, step = k.indices(shape[d])
                if step != 1:
                    raise IndexError(f"arg '{self.name}': dim {d}: only step-1 slices")
                offset += start * strides[d]
                shape[d] = max(stop - start, 0)
                keep.append(d)
            else:
                i = int(k)
                if i < 0:
                    i += shape[d]
                if not 0 <= i < shape[d]:
                    raise IndexError(f"arg '{self.name}': index {k} out of range for dim {d} "
                                     f"of size {shape[d]}")
                offset += i * strides[d]
        if not keep:  # every dim indexed: one element, as a 1-D view of length 1
            keep_shape, keep_strides = [1], [1]
        else:
            keep_shape, keep_strides = [shape[d] for d in keep], [strides[d] for d in keep]
        t.ndims = len(keep_shape)
        for i in range(_capi.MAX_DIMS):
            t.shape[i] = keep_shape[i] if i < len(keep_shape) else 0
            t.strides[i] = keep_strides[i] if i < len(keep_strides) else 0
        t.offset = offset
        return self._with(t)

    def __repr__(self) -> str:
        acc = {v: k for k, v in _ACCESS.items()}.get(self.access, "?")
        return f"<View {self.name!r} {acc} {self.dtype}{list(self.shape)} at {self.tensor.offset}>"


class Args:
    """The run's args by name: ``args.a`` (or ``args["a"]``) is a :class:`View`
    of a tensor arg, an int (the raw 64 bits, signed) for a scalar arg;
    ``args.f64("scale")`` reads a scalar written as a float."""

    def __init__(self, orch: "Orch") -> None:
        object.__setattr__(self, "_o", orch)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._o.arg(name)

    def __getitem__(self, name: str) -> Any:
        return self._o.arg(name)

    def f64(self, name: str) -> float:
        return float(_lib.hg_scalar_as_f64(self._o._scalar_bits(name)))

    def names(self) -> List[str]:
        return self._o.arg_names()


class Orch:
    """One orchestration's context (hg_orch), valid only inside the call."""

    def __init__(self, ptr: int, kernels: Mapping[str, Any]) -> None:
        self._ptr: Optional[int] = ptr
        self._kernels = kernels
        self._core_variants: Dict[Tuple[str, int], Any] = {}
        self._argcache: Dict[str, Any] = {}
        self._recs: Dict[Any, Any] = {}
        self._targs = (_capi.hg_task_arg * _capi.HG_MAX_TASK_ARGS)()
        self._scalars = (ctypes.c_uint64 * _capi.HG_MAX_TASK_SCALARS)()
        self._desc = _capi.hg_task_desc(None, self._targs, 0, self._scalars, 0, None, 0)
        self._desc_ref = ctypes.byref(self._desc)
        self._tid = ctypes.c_uint32()
        self._tid_ref = ctypes.byref(self._tid)
        self.tasks = 0

    def _h(self) -> int:
        if self._ptr is None:
            raise InvalidArgument("the orchestration context is used after its run")
        return self._ptr

    def _carg(self, i: int) -> "_capi.hg_arg":
        out = ctypes.POINTER(_capi.hg_arg)()
        rc = _lib.hg_orch_arg(self._h(), i, ctypes.byref(out))
        if rc != 0:
            raise error_for(rc, f"arg {i}: hg_orch_arg failed")
        return out.contents

    def arg_names(self) -> List[str]:
        n = int(_lib.hg_orch_num_args(self._h()))
        return [(self._carg(i).name or b"").decode() for i in range(n)]

    def _index(self, name: str) -> int:
        i = _lib.hg_orch_find_arg(self._h(), name.encode())
        if i < 0:
            raise InvalidArgument(f"no arg named '{name}' (args: {', '.join(self.arg_names())})")
        return i

    def _scalar_bits(self, name: str) -> int:
        a = self._carg(self._index(name))
        if a.dir != _capi.HG_SCALAR:
            raise InvalidArgument(f"arg '{name}' is not a scalar")
        return int(a.scalar)

    def arg(self, name: str) -> Any:
        """A View of tensor arg `name` (access: its direction), or a scalar's
        value as a signed int."""
        if name in self._argcache:
            return self._argcache[name]
        i = self._index(name)
        a = self._carg(i)
        if a.dir == _capi.HG_SCALAR:
            v = int(a.scalar)
            out: Any = v - (1 << 64) if v >= 1 << 63 else v
        else:
            t = _capi.hg_tensor()
            ctypes.pointer(t)[0] = a.tensor
            out = View(i, name, t, int(a.dir))
        self._argcache[name] = out
        return out

    def _kernel(self, kernel: Any, core: Optional[int]) -> Any:
        if isinstance(kernel, str):
            if kernel not in self._kernels:
                raise InvalidArgument(f"no kernel named '{kernel}' (kernels: "
                                      f"{', '.join(self._kernels) or 'none'})")
            rec = self._kernels[kernel]
        else:
            rec = kernel
        if not isinstance(rec, _capi.hg_kernel):
            raise TypeError(f"submit: kernel {kernel!r} is not a kernel name or an hg_kernel")
        if core is None or core == rec.core:
            return rec
        key = ((rec.name or b"").decode(), core)
        if key not in self._core_variants:  # the run copies the record at submit
            v = _capi.hg_kernel(rec.name, rec.fn, core, rec.cl_source, rec.cl_entry)
            self._core_variants[key] = v
        return self._core_variants[key]

    def submit(self, kernel: Any, core: Union[str, int, None], views: Sequence[View],
               scalars: Sequence[Union[int, float]] = (), deps: Sequence[int] = ()) -> int:
        """Submits a task of `kernel` (a name among the scene's kernels, or an
        hg_kernel) on `core` ("cube", "vector", "any"; None: the kernel's
        own) over `views`; scalars go as 64 bits each (floats as f64).
        Returns its task id; raises the Error for a code the C side refuses
        with (naming the task)."""
        key = (kernel if isinstance(kernel, str) else id(kernel), core)
        recp = self._recs.get(key)
        if recp is None:  # the record's pointer, once per kernel and core
            recp = ctypes.pointer(self._kernel(kernel, core_of(core, "submit")))
            self._recs[key] = (recp, kernel)
        else:
            recp = recp[0]
        n = len(views)
        if n > _capi.HG_MAX_TASK_ARGS:
            raise InvalidArgument(f"submit: {n} views, at most {_capi.HG_MAX_TASK_ARGS}")
        if len(scalars) > _capi.HG_MAX_TASK_SCALARS:
            raise InvalidArgument(f"submit: {len(scalars)} scalars, at most "
                                  f"{_capi.HG_MAX_TASK_SCALARS}")
        # The run copies everything a desc points to at submit: one set of
        # arrays serves every submit of this orchestration.
        targs, sc, desc = self._targs, self._scalars, self._desc
        for i, v in enumerate(views):
            if type(v) is not View:
                raise TypeError(f"submit: views[{i}] is a {type(v).__name__}, not a View "
                                "(args.NAME[...] or o.scratch(...))")
            t = targs[i]
            t.arg = v.arg
            t.access = v.access
            t.view = v.tensor
        for i, x in enumerate(scalars):
            sc[i] = x if type(x) is int and 0 <= x < (1 << 64) else scalar_bits(x)
        desc.kernel = recp
        desc.nargs = n
        desc.nscalars = len(scalars)
        if deps:
            dp = (ctypes.c_uint32 * len(deps))(*deps)
            desc.deps, desc.ndeps = dp, len(deps)
        else:
            desc.ndeps = 0
        rc = _lib.hg_task_submit(self._h(), self._desc_ref, self._tid_ref)
        if rc != 0:
            name = (recp.contents.name or b"").decode()
            raise error_for(rc, f"submit of kernel '{name}' (task {self.tasks}) failed: "
                                f"{_capi.strerror(rc)}")
        self.tasks += 1
        return int(self._tid.value)

    def host_view(self, view: Union[View, str]) -> np.ndarray:
        """The host bytes of an IN arg (or of a view of one) as a read-only
        numpy array, valid during this orchestration only (copy it to keep
        it).  NoHostViewError for an arg that is only a device view (under
        ``--residency pin`` every IN arg the scene does not list in
        host_reads)."""
        if isinstance(view, str):
            view = self.arg(view)
        if not isinstance(view, View):
            raise TypeError("host_view wants a View or an arg name")
        ptr = ctypes.c_void_p()
        rc = _lib.hg_orch_host_view(self._h(), view.arg, ctypes.byref(ptr))
        if rc != 0:
            raise error_for(rc, f"arg '{view.name}': no host view ({_capi.strerror(rc)})")
        base = self._carg(view.arg).tensor
        npdt = dtypes.numpy_of(dtypes.from_code(base.dtype))
        t = view.tensor
        rel = int(t.offset) - int(base.offset)
        shape = [int(t.shape[i]) for i in range(t.ndims)]
        strides = [int(t.strides[i]) for i in range(t.ndims)]
        if any(s == 0 for s in shape):
            return np.zeros(shape, npdt)
        span = rel + sum((s - 1) * st for s, st in zip(shape, strides)) + 1
        raw = (ctypes.c_char * (span * npdt.itemsize)).from_address(ptr.value)
        flat = np.frombuffer(raw, dtype=npdt)
        arr = np.lib.stride_tricks.as_strided(flat[rel:], shape=shape,
                                              strides=[st * npdt.itemsize for st in strides])
        arr.flags.writeable = False
        return arr

    def scratch(self, name: str, dtype: dtypes.DTypeLike, shape: Sequence[int]) -> View:
        """Run-owned device scratch of a dense shape (pooled across runs);
        its view's access is INOUT (as_out() for the task that fills it)."""
        nd = len(shape)
        cshape = (ctypes.c_size_t * max(nd, 1))(*shape)
        idx = ctypes.c_uint32()
        t = _capi.hg_tensor()
        rc = _lib.hg_orch_scratch(self._h(), name.encode(), dtypes.code_of(dtype), nd, cshape,
                                  ctypes.byref(idx), ctypes.byref(t))
        if rc != 0:
            raise error_for(rc, f"scratch '{name}': {_capi.strerror(rc)}")
        return View(int(idx.value), name, t, _capi.HG_INOUT)

    def fail(self, message: str, code: int = _capi.HG_EINVAL) -> None:
        """Fails the run with `message` (raises, so the orchestration stops)."""
        raise error_for(code, message)


class PythonCallable(Callable):
    """A Python orchestration function as a hostgraph Callable (usable with
    Runner.run and as a scene's callable)."""

    def __init__(self, fn: Fn[[Orch, Args], Any], kernels: Mapping[str, Any],
                 name: Optional[str] = None, keepalive: Any = None) -> None:
        self.fn = fn
        self.kernels = dict(kernels)
        self.calls = 0
        self.last_error: Optional[BaseException] = None
        self._cfn = _capi.ORCH_FN(self._entry)
        label = name or getattr(fn, "__qualname__", None) or "python_orchestration"
        self._name = label.encode()
        struct_ = _capi.hg_callable(self._name, ctypes.cast(self._cfn, ctypes.c_void_p), None)
        super().__init__(struct_, (self._cfn, keepalive), f"python:{label}")

    def _entry(self, optr: int, user: int) -> int:
        self.calls += 1
        orch = Orch(optr, self.kernels)
        try:
            self.fn(orch, Args(orch))
            return 0
        except BaseException as e:  # the run fails with its text; nothing escapes into C
            self.last_error = e
            code = e.code if isinstance(e, Error) and isinstance(e.code, int) and e.code < 0 \
                else _capi.HG_EINVAL
            where = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
            at = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
            text = f"orchestration raised {type(e).__name__}: {e}{at}"
            _lib.hg_orch_fail(optr, code, b"%s", text.encode(errors="replace"))
            return code
        finally:
            orch._ptr = None


def python_callable(fn: Fn[[Orch, Args], Any], kernels: Mapping[str, Any],
                    name: Optional[str] = None) -> PythonCallable:
    """A Python function ``fn(o, args)`` and its kernels (name -> hg_kernel
    record: :func:`hostgraph.compile_kernels` makes them) as a Callable for
    Runner.run."""
    keep = getattr(kernels, "keepalive", None)
    return PythonCallable(fn, kernels, name, keep)
