"""Scenes written in Python: a class per workload in a ``test_*.py`` file.

A :class:`Scene` subclass declares its kernels (C for the sim, OpenCL C for
opencl), its orchestration (C source, or a Python method ``orchestrate(o,
args)``), its params and named cases, ``make_args(params)`` (deterministic
inputs) and ``golden(args, params)`` (the expected outputs, computed with
numpy from the inputs).  :func:`register` turns each (class, case) into an
``hg_scene_def`` named ``FILE.py::Class::case`` and registers it with the
scene runner, so the class gets what the built-in scenes get: rounds,
residency modes, --verify, --replay, golden per round, compare, the JSON
report (with its file and class), traces.  No part of the runner is
reimplemented here: the C runner calls back into Python for make() and, for
a Python orchestration, for each orchestrated round.

Lifetimes: hg_scene_register copies the def but not what it points to, so a
:class:`Registration` holds every ctypes object the def reaches (strings,
param tables, callbacks, the compiled object) for as long as it is
registered; registrations live in a module table for the process.

Golden: make() runs make_args, copies each array into the case's host
buffer, then calls golden() on copies of the made inputs and fills the
case's golden arrays from it, once.  Every round restores OUT/INOUT args to
their made contents, so a golden computed from the made inputs holds every
round.  A golden that reads an output instead of computing it cannot be told
from a right one: golden must compute from inputs.
"""

from __future__ import annotations

import ctypes
import importlib.util
import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np

from . import _capi, _compile, dtypes
from ._compile import SceneCompileError, Source
from .errors import InvalidArgument, UsageError
from .orchestration import PythonCallable, python_callable
from .runtime import Callable, scalar_bits

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_NAME = re.compile(r"^[a-z0-9_]+$")
_DIRS = {"in": _capi.HG_IN, "out": _capi.HG_OUT, "inout": _capi.HG_INOUT}


# ------------------------------------------------------------- declarations


@dataclass(frozen=True)
class Kernel:
    """A kernel: its name (a C identifier), its core type and one
    implementation per backend.

    Args:
        name: the kernel's name, in traces and errors; orchestrations submit
            it by this name (C: ``&hg_kernel_NAME``).
        core: "vector" or "cube".
        c: the sim's implementation: C source text (it has a newline) or a
            file path relative to the scene's file, defining
            ``int FN(const hg_kernel_ctx *ctx)``.
        fn: that function's name (default: the kernel's name).
        cl: the OpenCL implementation: OpenCL C text or a file path
            (hostgraph.h's calling convention), with entry ``cl_entry``
            (default: the kernel's name).
    A kernel without an implementation for the run's device fails the run's
    submit with HG_EUNSUPPORTED naming the kernel and the device.
    """

    name: str
    core: str = "vector"
    c: Optional[str] = None
    fn: Optional[str] = None
    cl: Optional[str] = None
    cl_entry: Optional[str] = None


@dataclass(frozen=True)
class Param:
    """An integer param with an inclusive range, or a named one (``values``:
    name -> integer; then ``default`` is one of the names)."""

    default: Union[int, str]
    min: int = 0
    max: int = (1 << 62)
    help: str = ""
    values: Optional[Mapping[str, int]] = None


@dataclass(frozen=True)
class Case:
    """A named param set (unnamed params keep their defaults), with the
    devices it is meant for ("sim", "opencl"; empty: every device)."""

    name: str
    params: Mapping[str, Union[int, str]] = field(default_factory=dict)
    devices: Tuple[str, ...] = ()

    def __init__(self, name: str, devices: Sequence[str] = (), **params: Union[int, str]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params", dict(params))
        object.__setattr__(self, "devices", tuple(devices))


@dataclass
class SceneArg:
    """One arg make_args returns: a name, a direction and a numpy array (its
    contents are the arg's made contents); ``dtype`` names the library dtype
    when numpy's does not say it (bf16 in a uint16 array)."""

    name: str
    direction: str
    array: np.ndarray
    dtype: Optional[str] = None


@dataclass
class SceneScalar:
    """A SCALAR arg: an int (64 bits, two's complement) or a float (f64 bits)."""

    name: str
    value: Union[int, float]


def In(name: str, array: Any, dtype: Optional[str] = None) -> SceneArg:
    return SceneArg(name, "in", np.asarray(array), dtype)


def Out(name: str, array: Any, dtype: Optional[str] = None) -> SceneArg:
    """An OUT arg; `array` is its made contents (what every round starts from)."""
    return SceneArg(name, "out", np.asarray(array), dtype)


def InOut(name: str, array: Any, dtype: Optional[str] = None) -> SceneArg:
    return SceneArg(name, "inout", np.asarray(array), dtype)


def Scalar(name: str, value: Union[int, float]) -> SceneScalar:
    return SceneScalar(name, value)


class SceneArgs(dict):
    """golden()'s view of the made args: name -> a copy of its array (a
    scalar: its value); also by attribute (``args.x``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Params(dict):
    """The case's params: name -> int (a named param: its name); also by attribute."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Scene:
    """Base class of a Python scene.  Subclass it in a ``test_*.py`` file::

        class VecAdd(hostgraph.Scene):
            kernels = [hostgraph.Kernel("vadd", "vector", c=VADD_C, cl=VADD_CL)]
            params = {"n": hostgraph.Param(4096, 1, 1 << 24, "elements")}
            cases = [hostgraph.Case("small", n=4096), hostgraph.Case("big", n=1 << 20)]

            def make_args(self, p):
                rng = np.random.default_rng(1)
                a = rng.integers(-8, 8, p.n).astype(np.float32)
                ...
                return [hostgraph.In("a", a), ..., hostgraph.Out("c", np.zeros(p.n, np.float32))]

            def golden(self, args, p):
                return {"c": args.a + args.b}

            def orchestrate(self, o, args):       # or: orchestration = C source
                ...

    Class attributes: ``description``, ``kernels``, ``orchestration`` (C
    text or a file path, defining ``int FN(hg_orch *o, void *user)``, FN
    ``orchestration_fn``, default "orchestrate") or a Python method
    ``orchestrate``; ``params`` (name -> Param, in order), ``cases`` (the
    first is the default; none: one case "default" of the params'
    defaults), ``rtol`` / ``atol`` (a float, or name -> float per output),
    ``residency`` (the default mode of ``run``; --residency overrides it),
    ``host_reads`` (the IN args the orchestration reads on the host),
    ``cflags`` (extra compiler flags).
    """

    description: str = ""
    kernels: Sequence[Kernel] = ()
    orchestration: Optional[str] = None
    orchestration_fn: str = "orchestrate"
    params: Mapping[str, Param] = {}
    cases: Sequence[Case] = ()
    rtol: Union[float, Mapping[str, float]] = 1e-5
    atol: Union[float, Mapping[str, float]] = 1e-6
    residency: Optional[str] = None
    host_reads: Sequence[str] = ()
    cflags: Sequence[str] = ()

    def make_args(self, params: Params) -> Sequence[Union[SceneArg, SceneScalar]]:
        raise NotImplementedError(f"{type(self).__name__}.make_args")

    def golden(self, args: SceneArgs, params: Params) -> Mapping[str, Any]:
        raise NotImplementedError(f"{type(self).__name__}.golden")


def _cases_of(cls: Type[Scene]) -> List[Case]:
    return list(cls.cases) if cls.cases else [Case("default")]


def _has_python_orchestration(cls: Type[Scene]) -> bool:
    return callable(getattr(cls, "orchestrate", None))


# ---------------------------------------------------------------- kernels


class KernelSet(dict):
    """Compiled kernels: name -> hg_kernel record (in the loaded object),
    plus the object (``lib``) and its C orchestration's address, if any."""

    lib: Optional[ctypes.CDLL] = None
    orchestrate_addr: Optional[int] = None
    compiled_now: bool = False

    @property
    def keepalive(self) -> Any:
        return self.lib


def _records_source(kernels: Sequence[Kernel], base_dir: str, label: str) -> str:
    lines = ["/* generated by hostgraph/scene.py: the scene's kernel records */",
             '#include "hostgraph.h"', ""]
    for i, k in enumerate(kernels):
        core = {"vector": "HG_CORE_VECTOR", "cube": "HG_CORE_CUBE"}.get(k.core.lower())
        if core is None:
            raise InvalidArgument(f"{label}: kernel '{k.name}': core {k.core!r}: want 'vector' "
                                  "or 'cube'")
        fn = "NULL"
        if k.c is not None:
            fn = k.fn or k.name
            if not _IDENT.match(fn):
                raise InvalidArgument(f"{label}: kernel '{k.name}': fn {fn!r} is not a C name")
            lines.append(f"int {fn}(const hg_kernel_ctx *ctx);")
        cl, entry = "NULL", "NULL"
        if k.cl is not None:
            text = _compile.read_source(k.cl, base_dir, f"{label}: kernel '{k.name}' cl").text
            lines.append(f"static const char hg_cl_{i}[] =\n    {_compile.c_string_literal(text)};")
            cl, entry = f"hg_cl_{i}", '"' + (k.cl_entry or k.name) + '"'
        lines.append(f'const hg_kernel hg_kernel_{k.name} = {{"{k.name}", {fn}, {core}, {cl}, '
                     f"{entry}}};")
        lines.append("")
    return "\n".join(lines)


def _declarations(kernels: Sequence[Kernel]) -> str:
    return "".join(f"extern const hg_kernel hg_kernel_{k.name};\n" for k in kernels)


def compile_kernels(kernels: Sequence[Kernel], base_dir: str = ".",
                    orchestration: Optional[str] = None, orchestration_fn: str = "orchestrate",
                    cflags: Sequence[str] = (), label: str = "scene") -> KernelSet:
    """Compiles kernels (and a C orchestration) into one cached shared
    object; returns their records by name.  C sources see hostgraph.h; a C
    orchestration also sees ``extern const hg_kernel hg_kernel_NAME`` for
    each kernel.  SceneCompileError on a compile error."""
    seen = set()
    for k in kernels:
        if not _IDENT.match(k.name):
            raise InvalidArgument(f"{label}: kernel name {k.name!r}: want a C identifier")
        if k.name in seen:
            raise InvalidArgument(f"{label}: two kernels named '{k.name}'")
        if k.c is None and k.cl is None:
            raise InvalidArgument(f"{label}: kernel '{k.name}' has neither c= nor cl= source")
        seen.add(k.name)
    sources: List[Source] = []
    for k in kernels:
        if k.c is not None:
            s = _compile.read_source(k.c, base_dir, f"{label}: kernel '{k.name}'")
            if s not in sources:
                sources.append(s)
    sources.append(Source(f"{label} (kernel records)", _records_source(kernels, base_dir, label)))
    if orchestration is not None:
        s = _compile.read_source(orchestration, base_dir, f"{label}: orchestration")
        head = '#include "hostgraph.h"\n' + _declarations(kernels)
        line = f'#line 1 "{s.name}"\n'
        sources.append(Source(s.name, head + line + s.text))
    flags = ["-I" + os.path.abspath(base_dir)] + list(cflags)
    path, compiled = _compile.build(sources, flags)
    lib = _compile.load(sources, flags)
    out = KernelSet()
    out.lib = lib
    out.compiled_now = compiled
    for k in kernels:
        out[k.name] = _capi.hg_kernel.in_dll(lib, f"hg_kernel_{k.name}")
    if orchestration is not None:
        try:
            fnptr = getattr(lib, orchestration_fn)
        except AttributeError:
            raise SceneCompileError(f"{label}: the orchestration source defines no function "
                                    f"'{orchestration_fn}' (orchestration_fn)") from None
        out.orchestrate_addr = ctypes.cast(fnptr, ctypes.c_void_p).value
    return out


# ----------------------------------------------------------- registration


def _param_value(cls_name: str, pname: str, p: Param, v: Union[int, str], what: str) -> int:
    if p.values is not None:
        if isinstance(v, str) and v in p.values:
            return int(p.values[v])
        if not isinstance(v, str) and int(v) in p.values.values():
            return int(v)
        raise InvalidArgument(f"{cls_name}: {what}: param '{pname}' = {v!r}: want one of "
                              f"{', '.join(p.values)}")
    if isinstance(v, str) or isinstance(v, bool):
        raise InvalidArgument(f"{cls_name}: {what}: param '{pname}' = {v!r}: want an integer")
    iv = int(v)
    if not p.min <= iv <= p.max:
        raise InvalidArgument(f"{cls_name}: {what}: param '{pname}' = {iv}: outside "
                              f"[{p.min}, {p.max}]")
    return iv


def scene_name(file: str, cls: Type[Scene], case: Case) -> str:
    """The registered name: FILE.py::Class::case (FILE.py: the file's basename)."""
    return f"{os.path.basename(file)}::{cls.__name__}::{case.name}"


class Registration:
    """One registered (class, case): the def and everything it points to."""

    def __init__(self, cls: Type[Scene], case: Case, file: str) -> None:
        self.cls, self.case, self.file = cls, case, file
        self.name = scene_name(file, cls, case)
        self.instance = cls()
        self.kernels: Optional[KernelSet] = None
        self.callable: Optional[Callable] = None
        self.makes = 0
        self._keep: List[Any] = []
        self.def_ = self._build_def()

    # -- the def --
    def _b(self, s: str) -> bytes:
        b = s.encode()
        self._keep.append(b)
        return b

    def _build_def(self) -> "_capi.hg_scene_def":
        cls, case = self.cls, self.case
        params = dict(cls.params)
        if len(params) > _capi.HG_SCENE_MAX_PARAMS:
            raise InvalidArgument(f"{cls.__name__}: {len(params)} params, at most "
                                  f"{_capi.HG_SCENE_MAX_PARAMS}")
        for k in case.params:
            if k not in params:
                raise InvalidArgument(f"{cls.__name__}: case '{case.name}': no param '{k}' "
                                      f"(params: {', '.join(params) or 'none'})")
        table = (_capi.hg_scene_param_def * max(len(params), 1))()
        self.param_names = list(params)
        for i, (pname, p) in enumerate(params.items()):
            if not isinstance(p, Param):
                raise InvalidArgument(f"{cls.__name__}: param '{pname}' is a "
                                      f"{type(p).__name__}, not a hostgraph.Param")
            if not _PARAM_NAME.match(pname):
                raise InvalidArgument(f"{cls.__name__}: param name {pname!r}: want [a-z0-9_]+")
            d = case.params.get(pname, p.default)
            t = table[i]
            t.name = self._b(pname)
            t.def_ = _param_value(cls.__name__, pname, p, d, f"case '{case.name}'")
            t.help = self._b(p.help or pname)
            if p.values is not None:
                vals = (_capi.hg_scene_value * (len(p.values) + 1))()
                for j, (vn, vv) in enumerate(p.values.items()):
                    vals[j].name, vals[j].value = self._b(vn), int(vv)
                self._keep.append(vals)
                t.values = vals
                t.min, t.max = min(p.values.values()), max(p.values.values())
            else:
                t.min, t.max = int(p.min), int(p.max)
        self._keep.append(table)
        self._make_cb = _capi.SCENE_MAKE_FN(self._make)
        reads = [self._b(r) for r in cls.host_reads] + [None]
        host_reads = (ctypes.c_char_p * len(reads))(*reads)
        self._keep.append(host_reads)
        desc = (cls.description or (cls.__doc__ or "").strip().split("\n")[0] or cls.__name__)
        devs = f" (for {', '.join(case.devices)})" if case.devices else ""
        d = _capi.hg_scene_def()
        d.size = ctypes.sizeof(_capi.hg_scene_def)
        d.version = _capi.HG_SCENE_DEF_VERSION
        d.name = self._b(self.name)
        d.description = self._b(f"{desc} [case {case.name}{devs}]")
        d.params = table
        d.nparams = len(params)
        d.make = self._make_cb
        d.destroy = _capi.SCENE_DESTROY_FN()  # NULL: the case holds nothing of ours
        d.host_reads = host_reads if cls.host_reads else None
        d.splits = False
        d.user = None
        d.file = self._b(self.file)
        d.cls = self._b(cls.__name__)
        return d

    # -- compile and callable --
    def prepare(self) -> Callable:
        """Compiles the kernels (cached) and makes the callable, once.
        SceneCompileError on a compile error."""
        if self.callable is not None:
            return self.callable
        cls = self.cls
        py = _has_python_orchestration(cls)
        if py and cls.orchestration is not None:
            raise InvalidArgument(f"{cls.__name__}: both an orchestration source and an "
                                  "orchestrate method: keep one")
        if not py and cls.orchestration is None:
            raise InvalidArgument(f"{cls.__name__}: no orchestration: give orchestration = C "
                                  "source, or an orchestrate(self, o, args) method")
        base = os.path.dirname(os.path.abspath(self.file))
        ks = compile_kernels(cls.kernels, base, cls.orchestration, cls.orchestration_fn,
                             cls.cflags, f"{os.path.basename(self.file)}::{cls.__name__}")
        self.kernels = ks
        if py:
            self.callable = python_callable(self.instance.orchestrate, ks, self.name)
        else:
            name = self._b(self.name)
            struct_ = _capi.hg_callable(name, ks.orchestrate_addr, None)
            self.callable = Callable(struct_, ks.lib, f"{self.name} (C)")
        return self.callable

    @property
    def orchestrations(self) -> int:
        """How many times the Python orchestration ran (0 for a C one)."""
        c = self.callable
        return c.calls if isinstance(c, PythonCallable) else 0

    # -- make() --
    def params_of(self, values: Sequence[int]) -> Params:
        out = Params()
        for pname, v in zip(self.param_names, values):
            p = self.cls.params[pname]
            if p.values is not None:
                names = [n for n, x in p.values.items() if x == v]
                out[pname] = names[0] if names else int(v)
            else:
                out[pname] = int(v)
        return out

    def _make(self, cptr: int, params_ptr: Any, user: int) -> int:
        lib = _capi.scene_def_api()
        self.makes += 1
        try:
            self._make_case(lib, cptr, [params_ptr[i] for i in range(len(self.param_names))])
            return 0
        except BaseException as e:  # the case fails with its text; nothing escapes into C
            self.last_error = e
            code = _make_code(e)
            where = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
            at = f" (at {where[0].filename}:{where[0].lineno})" if where and \
                not isinstance(e, SceneCompileError) else ""
            text = f"{self.name}: {type(e).__name__}: {e}{at}"
            return int(lib.hg_scene_case_fail(cptr, code, b"%s", text.encode(errors="replace")))

    def _make_case(self, lib: ctypes.CDLL, cptr: int, values: List[int]) -> None:
        callable_ = self.prepare()
        p = self.params_of(values)
        made = self.instance.make_args(p)
        inputs = SceneArgs()
        index: Dict[str, Tuple[int, SceneArg]] = {}
        for a in made:
            if isinstance(a, SceneScalar):
                idx = ctypes.c_uint32()
                _check(lib.hg_scene_case_add_scalar(cptr, self._b(a.name), scalar_bits(a.value),
                                                    ctypes.byref(idx)), f"scalar '{a.name}'")
                inputs[a.name] = a.value
                continue
            if not isinstance(a, SceneArg):
                raise TypeError(f"make_args returned a {type(a).__name__}: want hostgraph.In, "
                                "Out, InOut or Scalar")
            arr = np.ascontiguousarray(a.array)
            dt = a.dtype or _dtype_name(a.name, arr)
            if dtypes.numpy_of(dt) != arr.dtype:
                raise InvalidArgument(f"arg '{a.name}': dtype {dt} is held in "
                                      f"{dtypes.numpy_of(dt)} arrays, not {arr.dtype}")
            if a.direction not in _DIRS:
                raise InvalidArgument(f"arg '{a.name}': direction {a.direction!r}")
            shape = arr.shape if arr.ndim else (1,)
            cshape = (ctypes.c_size_t * len(shape))(*shape)
            idx = ctypes.c_uint32()
            _check(lib.hg_scene_case_add_tensor(cptr, self._b(a.name), _DIRS[a.direction],
                                                dtypes.code_of(dt), len(shape), cshape,
                                                ctypes.byref(idx)), f"arg '{a.name}'")
            if arr.nbytes:
                dst = lib.hg_scene_case_data(cptr, idx.value)
                ctypes.memmove(dst, arr.ctypes.data, arr.nbytes)
            index[a.name] = (int(idx.value), a)
            inputs[a.name] = arr.copy()
        want = self.instance.golden(inputs, p)
        if not isinstance(want, Mapping):
            raise TypeError(f"golden returned a {type(want).__name__}: want a dict name -> array")
        for name, g in want.items():
            if name not in index:
                raise InvalidArgument(f"golden: no tensor arg '{name}' (args: "
                                      f"{', '.join(index)})")
            i, a = index[name]
            if a.direction == "in":
                raise InvalidArgument(f"golden: arg '{name}' is IN: only OUT and INOUT are checked")
            g = np.asarray(g, dtype=np.float64)
            if g.size != a.array.size:
                raise InvalidArgument(f"golden['{name}']: {g.size} elements, the arg has "
                                      f"{a.array.size}")
            gptr = ctypes.POINTER(ctypes.c_double)()
            _check(lib.hg_scene_case_add_check(cptr, i, _tol(self.cls.rtol, name),
                                               _tol(self.cls.atol, name), ctypes.byref(gptr)),
                   f"check of '{name}'")
            if g.size:
                np.ctypeslib.as_array(gptr, shape=(g.size,))[:] = g.ravel()
        _check(lib.hg_scene_case_set_callable(cptr, ctypes.byref(callable_._struct)),
               "set_callable")


def _make_code(e: BaseException) -> int:
    """make()'s code for an exception: the runner exits 2 (usage) for
    HG_EINVAL and HG_ERANGE, 3 (runtime) for any other.  A ValueError (params
    that do not fit together, a bad arg) is a usage error; a hostgraph Error
    keeps its code; anything else (a compile error, a bug in make_args or
    golden) is a runtime error, HG_EIO."""
    code = getattr(e, "code", None)
    if isinstance(e, SceneCompileError):
        return _capi.HG_EIO
    if isinstance(code, int) and code < 0:
        return code
    if isinstance(e, ValueError):
        return _capi.HG_EINVAL
    return _capi.HG_EIO


def _check(rc: int, what: str) -> None:
    if rc != 0:
        from .errors import error_for

        raise error_for(rc, f"{what}: {_capi.strerror(rc)}")


def _tol(t: Union[float, Mapping[str, float]], name: str) -> float:
    if isinstance(t, Mapping):
        return float(t.get(name, t.get("*", 0.0)))
    return float(t)


def _dtype_name(name: str, arr: np.ndarray) -> str:
    try:
        return dtypes.name_of(arr.dtype)
    except ValueError as e:
        raise InvalidArgument(f"arg '{name}': {e}") from None


_registry: Dict[str, Registration] = {}
# Unregistered, kept alive: the library keeps an unregistered entry (a
# pointer handed out earlier never dangles), which points into these.
_retired: List[Registration] = []


def register(cls: Type[Scene], file: Optional[str] = None) -> List[Registration]:
    """Registers every case of `cls` (once per process; a different class
    under the same name replaces the old registration).  Returns them in
    case order."""
    if not (isinstance(cls, type) and issubclass(cls, Scene)) or cls is Scene:
        raise TypeError(f"register wants a Scene subclass, not {cls!r}")
    if file is None:
        file = inspect.getsourcefile(cls) or f"{cls.__module__}.py"
    lib = _capi.scene_def_api()
    out = []
    names = set()
    for case in _cases_of(cls):
        if case.name in names:
            raise InvalidArgument(f"{cls.__name__}: two cases named '{case.name}'")
        names.add(case.name)
        name = scene_name(file, cls, case)
        old = _registry.get(name)
        if old is not None and old.cls is cls:
            out.append(old)
            continue
        if old is not None:
            unregister(name)
        reg = Registration(cls, case, file)
        err = ctypes.create_string_buffer(1024)
        rc = lib.hg_scene_register(ctypes.byref(reg.def_), err, len(err))
        if rc != 0:
            raise InvalidArgument(err.value.decode(errors="replace") or
                                  f"cannot register scene {name}: {_capi.strerror(rc)}")
        _registry[name] = reg
        out.append(reg)
    return out


def unregister(name: str) -> None:
    """Removes a registered scene (its def's memory goes with it)."""
    lib = _capi.scene_def_api()
    err = ctypes.create_string_buffer(1024)
    rc = lib.hg_scene_unregister(name.encode(), err, len(err))
    if rc != 0 and rc != _capi.HG_ENOTFOUND:
        raise InvalidArgument(err.value.decode(errors="replace"))
    reg = _registry.pop(name, None)
    if reg is not None:  # the library keeps the entry (never freed): so do we, what it points to
        _retired.append(reg)


def registration(name: str) -> Registration:
    return _registry[name]


# -------------------------------------------------------------- scene files


def scene_classes(module: Any) -> List[Type[Scene]]:
    """The Scene subclasses a module defines (not ones it imports), in order."""
    out = []
    for obj in vars(module).values():
        if (isinstance(obj, type) and issubclass(obj, Scene) and obj is not Scene
                and obj.__module__ == module.__name__ and not obj.__name__.startswith("_")):
            out.append(obj)
    return out


def load_file(path: str) -> Tuple[Any, List[Type[Scene]]]:
    """Imports a scene file (its folder first on sys.path, so helper modules
    beside it import) and returns (module, its scene classes).  A file that
    is this process's __main__ (run standalone) is not imported again."""
    full = os.path.abspath(path)
    main = sys.modules.get("__main__")
    if main is not None and os.path.abspath(getattr(main, "__file__", "") or "") == full:
        return main, scene_classes(main)
    if not os.path.isfile(full):
        raise UsageError(f"scene file '{path}' does not exist")
    for mod in list(sys.modules.values()):
        if os.path.abspath(getattr(mod, "__file__", "") or "") == full:
            return mod, scene_classes(mod)
    modname = "hostgraph_scene_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(full))[0])
    spec = importlib.util.spec_from_file_location(modname, full)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import scene file '{path}'")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(full)
    sys.path.insert(0, folder)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module, scene_classes(module)


def select(path: str, cls_name: Optional[str], case_name: Optional[str]) \
        -> Tuple[List[Registration], Optional[Registration]]:
    """Registers the scenes of a file; returns (all its registrations, the
    one FILE.py[::Class[::case]] names: the first class's first case by
    default; None when only the file was named and it has no scene)."""
    _, classes = load_file(path)
    if not classes:
        raise UsageError(f"'{path}' defines no hostgraph.Scene subclass")
    regs: List[Registration] = []
    by_class: Dict[str, List[Registration]] = {}
    for cls in classes:
        r = register(cls, path)
        regs += r
        by_class[cls.__name__] = r
    if cls_name is None:
        return regs, by_class[classes[0].__name__][0]
    if cls_name not in by_class:
        raise UsageError(f"'{path}' has no scene class '{cls_name}' (classes: "
                         f"{', '.join(by_class)})")
    cands = by_class[cls_name]
    if case_name is None:
        return regs, cands[0]
    for r in cands:
        if r.case.name == case_name:
            return regs, r
    raise UsageError(f"{cls_name} has no case '{case_name}' (cases: "
                     f"{', '.join(r.case.name for r in cands)})")


def scene_main(argv: Optional[Sequence[str]] = None) -> None:
    """Call at the bottom of a scene file: ``python3 test_x.py [run|compare|list]
    [Class[::case]] [options]`` runs it as ``python3 -m hostgraph run
    test_x.py[::Class[::case]]`` would, and exits with its code.  Does
    nothing when the file is imported (pytest, python3 -m hostgraph)."""
    caller = inspect.currentframe()
    g = caller.f_back.f_globals if caller is not None and caller.f_back is not None else {}
    if g.get("__name__") != "__main__":
        return
    from .__main__ import run_python_scene

    args = list(sys.argv[1:] if argv is None else argv)
    cmd = "run"
    if args and args[0] in ("run", "compare", "list"):
        cmd = args.pop(0)
    cls_name = case_name = None
    if args and not args[0].startswith("-"):
        parts = args.pop(0).split("::")
        cls_name = parts[0] or None
        case_name = parts[1] if len(parts) > 1 and parts[1] else None
    path = g.get("__file__") or sys.argv[0]
    # The file itself, whatever its name ends with: it is this process's __main__.
    sys.exit(run_python_scene([cmd, path] + args, 1, (path, cls_name, case_name)))
