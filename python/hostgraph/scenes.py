"""The built-in scenes: the scene runner (as the `hostgraph` command runs it)
and a scene's case, to run with your own Runner.

These load libhostgraph_scenes on first use; the core bindings never do.
"""

from __future__ import annotations

import ctypes
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _capi, _interrupt
from .buffers import HostBuffer, Tensor
from .errors import GoldenError, SceneError, UsageError, check, error_for
from .runtime import Arg, Callable, Dir
from ._lifetime import Closing

Params = Union[Mapping[str, Union[int, str]], Iterable[str], None]


@dataclass(frozen=True)
class ParamInfo:
    """One integer param of a scene (named params also take their names)."""

    name: str
    default: int
    min: int
    max: int
    default_name: Optional[str]
    help: str


@dataclass(frozen=True)
class SceneInfo:
    name: str
    description: str
    params: Dict[str, ParamInfo]


def scenes() -> Dict[str, SceneInfo]:
    """The built-in scenes by name, with their params, as `hostgraph list` shows them."""
    lib = _capi.scenes()
    out: Dict[str, SceneInfo] = {}
    for i in range(lib.hg_scene_count()):
        params: Dict[str, ParamInfo] = {}
        for j in range(lib.hg_scene_num_params(i)):
            p = _capi.hg_scene_param_info()
            if lib.hg_scene_param(i, j, ctypes.byref(p)) != 0:
                continue
            name = p.name.decode()
            params[name] = ParamInfo(name, p.def_, p.min, p.max,
                                     p.def_name.decode() if p.def_name else None,
                                     (p.help or b"").decode())
        name = lib.hg_scene_name(i).decode()
        out[name] = SceneInfo(name, lib.hg_scene_description(i).decode(), params)
    return out


def _param_strings(params: Params) -> List[bytes]:
    if params is None:
        return []
    if isinstance(params, Mapping):
        return [f"{k}={v}".encode() for k, v in params.items()]
    if isinstance(params, (str, bytes)):
        raise TypeError("params: a dict {'key': value} or a list of 'KEY=VALUE' strings")
    return [str(p).encode() for p in params]


def _c_strings(strings: List[bytes]) -> "ctypes.Array[ctypes.c_char_p]":
    return (ctypes.c_char_p * max(len(strings), 1))(*strings)


def _run(compare: bool, scene: str, rounds: int, residency: Optional[str], params: Params,
         device: Optional[str], verify: bool, skip_golden: bool, trace: Optional[str],
         svg: Optional[str], print_table: bool, replay: bool = False) -> Dict[str, Any]:
    strings = _param_strings(params)
    carr = _c_strings(strings)
    with tempfile.TemporaryDirectory(prefix="hostgraph-") as tmp:
        path = os.path.join(tmp, "report.json")
        opts = _capi.hg_scene_opts(
            scene=scene.encode(), params=carr, nparams=len(strings), rounds=int(rounds),
            residency=residency.encode() if residency else None, verify=verify,
            skip_golden=skip_golden, device=device.encode() if device else None,
            json_path=path.encode(), trace_path=os.fsencode(trace) if trace else None,
            svg_path=os.fsencode(svg) if svg else None, print=print_table, replay=replay)
        if rounds < 1:
            raise UsageError(f"rounds: {rounds}, want at least 1")
        errbuf = ctypes.create_string_buffer(8192)
        lib = _capi.scenes()
        fn = lib.hg_scene_compare if compare else lib.hg_scene_run

        def begin() -> ctypes.c_void_p:  # on the worker, as is end: they pair
            cancel = ctypes.c_void_p()
            check(lib.hg_scene_cancel_create(ctypes.byref(cancel)))
            return cancel

        def run(cancel: ctypes.c_void_p) -> int:
            opts.cancel = cancel
            return int(fn(ctypes.byref(opts), errbuf, len(errbuf)))

        # Ctrl-C stops the rounds after the one in flight, and raises once
        # the scene runner has returned (no row is printed after it).
        rc = _interrupt.call(run, lib.hg_scene_cancel_request, begin, lib.hg_scene_cancel_destroy)
        message = errbuf.value.decode(errors="replace")
        report = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
    if rc == 0:
        assert report is not None
        return report
    if rc == 1:
        raise GoldenError(message, report if report is not None else {})
    if rc == 2:
        raise UsageError(message)
    raise SceneError(message)


def run_scene(scene: str, *, rounds: int = 1, residency: str = "off", params: Params = None,
              device: Optional[str] = None, verify: bool = False, skip_golden: bool = False,
              trace: Optional[str] = None, print_table: bool = False,
              replay: bool = False) -> Dict[str, Any]:
    """Runs a built-in scene as ``hostgraph run`` does; returns its JSON report as Python objects.

    Args:
        scene: the scene's name (see :func:`scenes`).
        rounds: rounds to run (>= 1).
        residency: "off", "pin", "in" or "all" (the command's --residency).
        params: {"grid": 8} or ["grid=8"] (the command's --param).
        device: a device spec (default "sim").
        verify: verify mode (--verify).
        replay: checked graph replay on every runner (--replay).
        skip_golden: do not compare outputs with the golden reference.
        trace: also write a Chrome trace-event JSON here (--trace).
        print_table: print the command's table and summary on stdout.

    Raises:
        GoldenError: a round's outputs did not match (``.report`` holds the report).
        UsageError: a bad scene, param, mode, device spec or path.
        SceneError: a run failed (the message names the round and the arg).
    """
    return _run(False, scene, rounds, residency, params, device, verify, skip_golden, trace, None,
                print_table, replay)


def compare_scene(scene: str, *, rounds: int = 5, params: Params = None, device: Optional[str] = None,
                  verify: bool = False, skip_golden: bool = False, svg: Optional[str] = None,
                  print_table: bool = False, replay: bool = False) -> Dict[str, Any]:
    """Runs a scene's rounds (at least 2) three times per residency mode, interleaved,
    as ``hostgraph compare`` does; returns its JSON report: ``{"scene", "device",
    "params", "repeat", "modes": {"off": REPORT, ...}}``, each REPORT with
    ``later_avg_ms_median``, ``_min``, ``_max`` and ``verdict``.  Raises as
    :func:`run_scene`; Ctrl-C raises KeyboardInterrupt after the round in flight.
    ``replay=True``: every mode with replay on (--replay)."""
    return _run(True, scene, rounds, None, params, device, verify, skip_golden, None, svg,
                print_table, replay)


class SceneCase(Closing):
    """A built-in scene's case: host buffers with deterministic contents, the
    args over them, the scene's callable and its golden check.

    Run it with your own Runner, e.g. with residency::

        with SceneCase("bgemm", {"grid": 2}) as case:
            args = [a.with_residency(a.direction in (IN, INOUT)) for a in case.args]
            runner.run(case.callable, args)
            ok, why = case.check()

    The case owns its buffers: they close with it.  Arrays over them
    (:meth:`array`, Tensor.numpy) keep the memory alive, also after close.
    """

    def __init__(self, scene: str, params: Params = None) -> None:
        lib = _capi.scenes()
        strings = _param_strings(params)
        ptr = ctypes.c_void_p()
        errbuf = ctypes.create_string_buffer(1024)
        rc = lib.hg_scene_case_open(scene.encode(), _c_strings(strings), len(strings),
                                    ctypes.byref(ptr), errbuf, len(errbuf))
        if rc != 0:
            raise error_for(rc, errbuf.value.decode(errors="replace"))
        self._memory: Optional[_CaseMemory] = _CaseMemory(ptr.value)
        self._ptr: Optional[int] = ptr.value
        self.scene = scene
        self.params: Tuple[str, ...] = tuple(p.decode() for p in strings)  # as given
        cc = lib.hg_scene_case_callable(self._ptr).contents
        # Scenes' callables keep no state: a copy outlives the case.
        self.callable = Callable(_capi.hg_callable(cc.name, cc.orchestrate, cc.user), lib,
                                 f"scene {scene}")
        self.args: List[Arg] = []
        cargs = lib.hg_scene_case_args(self._ptr)
        buffers: Dict[int, HostBuffer] = {}
        for i in range(lib.hg_scene_case_num_args(self._ptr)):
            a = cargs[i]
            name = a.name.decode()
            if a.dir == _capi.HG_SCALAR:
                arg = Arg(name, Dir.SCALAR, scalar=int(a.scalar))
            else:
                host = a.tensor.host
                buf = buffers.setdefault(host, HostBuffer._borrow(host, self))
                arg = Arg(name, Dir(a.dir), Tensor._from_struct(a.tensor, buf))
            self.args.append(arg)

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def arg(self, name: str) -> Arg:
        """The arg called `name` (KeyError if none)."""
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    def array(self, name: str) -> np.ndarray:
        """Arg `name`'s elements as a numpy view of the case's host buffer."""
        t = self.arg(name).tensor
        if t is None:
            raise KeyError(f"{name} is a scalar")
        return t.numpy()

    def check(self) -> Tuple[bool, str]:
        """Compares the outputs, as they are now, with the golden reference:
        (passed, one line: the worst errors or the first mismatch)."""
        if self._ptr is None:
            raise ValueError("scene case is closed")
        msg = ctypes.create_string_buffer(512)
        ok = _capi.scenes().hg_scene_case_check(self._ptr, msg, len(msg))
        return bool(ok), msg.value.decode(errors="replace")

    def __repr__(self) -> str:
        params = "".join(f" {p}" for p in self.params)
        if self.closed:
            return f"<SceneCase {self.scene}{params} closed>"
        args = ", ".join(f"{a.name} {a.direction.name}" + (f" {a.tensor.dtype}{list(a.tensor.shape)}"
                                                           if a.tensor is not None else "")
                         for a in self.args)
        return f"<SceneCase {self.scene}{params}: {args}>"

    def close(self) -> None:
        """Closes the case: its buffers can no longer be used in a run.  Its
        memory is freed now, or, while arrays from :meth:`array` or
        Tensor.numpy still view it, when the last of them goes. Idempotent."""
        self._ptr = None
        self._memory = None


class _CaseMemory:
    """The C scene case: held by its SceneCase until closed and by every
    array over its buffers; freed when the last of them lets go, so an array
    never outlives the memory it views."""

    def __init__(self, ptr: Optional[int]) -> None:
        self.ptr = ptr

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            try:
                _capi.scenes().hg_scene_case_close(ptr)
            except Exception:  # interpreter shutdown: the library may be gone
                pass

