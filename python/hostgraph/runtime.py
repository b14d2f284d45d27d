"""Devices, runners, args, callables and a run's stats.

Lifetimes follow the C API: close runners before their device (Device.close
closes the runners still open on it first), and keep host buffers open while
a run uses them.  ``with`` blocks close in the right order::

    with hostgraph.Device("sim:cores=4") as dev, hostgraph.Runner(dev) as runner:
        stats = runner.run(callable, args)
"""

from __future__ import annotations

import ctypes
import enum
import os
import struct
import threading
import weakref
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from . import _capi, _interrupt, dtypes
from .buffers import Tensor, _size
from .errors import InvalidArgument, NotFoundError, check, error_for
from ._lifetime import Closing
from ._runner_handle import _RunnerHandle

_lib = _capi.core


class Dir(enum.IntEnum):
    """An arg's direction (hg_dir)."""

    IN = _capi.HG_IN
    OUT = _capi.HG_OUT
    INOUT = _capi.HG_INOUT
    SCALAR = _capi.HG_SCALAR


IN, OUT, INOUT, SCALAR = Dir.IN, Dir.OUT, Dir.INOUT, Dir.SCALAR


def _dir_of(direction: Union[Dir, int, str]) -> Dir:
    if isinstance(direction, str):
        try:
            return Dir[direction.upper()]
        except KeyError:
            raise InvalidArgument(f"direction {direction!r}: want in, out, inout or scalar") from None
    try:
        return Dir(direction)
    except ValueError:
        raise InvalidArgument(f"direction {direction!r}: want IN, OUT, INOUT or SCALAR") from None


# ------------------------------------------------------------------- device


class Device(Closing):
    """A device: where kernels run, with its own memory.

    ``spec`` as the C API and the command take it: ``"sim"``,
    ``"sim:cores=4"``, ``"sim:cube=1,vector=2,mem=1G"``, ``link_gbps=``,
    ``fail_alloc=K``, ``fail_copy=K``, ``fail_complete=K``.  A bad spec raises InvalidArgument with
    the C side's message.
    """

    def __init__(self, spec: str = "sim") -> None:
        ptr = ctypes.c_void_p()
        errbuf = ctypes.create_string_buffer(512)
        rc = _lib.hg_device_open(spec.encode(), ctypes.byref(ptr), errbuf, len(errbuf))
        check(rc, errbuf.value.decode(errors="replace") or f"cannot open device {spec!r}")
        self._ptr: Optional[int] = ptr.value
        # The runners' handles, not the Runners: a handle outlives the
        # collector's clearing of weak references, so closing the device
        # closes its runners first whatever order finalizers run in.
        self._runners: "set[_RunnerHandle]" = set()
        self._devbufs: "weakref.WeakSet[DeviceBuffer]" = weakref.WeakSet()

    def _handle(self) -> int:
        if self._ptr is None:
            raise InvalidArgument("device is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @property
    def spec(self) -> str:
        """The normalised spec, e.g. "sim:cores=4"."""
        return _lib.hg_device_spec(self._handle()).decode()

    @property
    def capacity(self) -> int:
        """Device memory capacity in bytes."""
        return int(_lib.hg_device_capacity(self._handle()))

    @property
    def num_cores(self) -> int:
        return int(_lib.hg_device_num_cores(self._handle()))

    def counters(self) -> Dict[str, int]:
        """Device-wide counters (every runner's and user's operations together)."""
        buf = ctypes.create_string_buffer(ctypes.sizeof(_capi.hg_device_counters) + _capi.STRUCT_SLACK)
        _lib.hg_device_counters_get(self._handle(), ctypes.addressof(buf))
        c = _capi.hg_device_counters.from_buffer(buf)
        return {name: int(getattr(c, name)) for name, _ in _capi.hg_device_counters._fields_}

    def inject_fault(self, kind: str, k: int) -> None:
        """Makes the k-th next allocation ("alloc") or copied range ("copy") fail, once, or the
        k-th copy, fill or new memory's poisoning complete with an error ("complete"); k=0 disarms."""
        kinds = {"alloc": _capi.HG_FAULT_ALLOC, "copy": _capi.HG_FAULT_COPY,
                 "complete": _capi.HG_FAULT_COMPLETE}
        if kind not in kinds:
            raise InvalidArgument(f"fault kind {kind!r}: want 'alloc', 'copy' or 'complete'")
        check(_lib.hg_device_inject_fault(self._handle(), kinds[kind], _size(k, "k")), "inject_fault")

    def malloc(self, nbytes: int) -> "DeviceBuffer":
        """User-owned device memory (hg_devbuf_malloc); free it with DeviceBuffer.free."""
        return DeviceBuffer(self, nbytes)

    def close(self) -> None:
        """Closes the runners still open on this device, then the device. Idempotent."""
        if self._ptr is None:
            return
        for handle in list(self._runners):
            handle.close()
        self._runners.clear()
        for devbuf in list(self._devbufs):
            devbuf._forget()
        ptr, self._ptr = self._ptr, None
        _lib.hg_device_close(ptr)


    def __repr__(self) -> str:
        return "<Device closed>" if self.closed else f"<Device {self.spec}>"


class DeviceBuffer:
    """User-owned device memory: the runtime reads and writes it when it is
    passed as an arg (a device view, no copy) but never frees it."""

    def __init__(self, device: Device, nbytes: int) -> None:
        addr = ctypes.c_uint64()
        rc = _lib.hg_devbuf_malloc(device._handle(), _size(nbytes, "nbytes"), ctypes.byref(addr))
        check(rc, f"device malloc of {nbytes} bytes" if rc else "")
        self.device = device
        self.nbytes = nbytes
        self._addr: Optional[int] = addr.value
        device._devbufs.add(self)

    @property
    def address(self) -> int:
        """The device address (not a host pointer)."""
        if self._addr is None:
            raise InvalidArgument("device buffer is freed")
        return self._addr

    def write(self, offset: int, data: Any) -> None:
        """Copies host bytes to the device at byte `offset`."""
        src = np.ascontiguousarray(data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8))
        rc = _lib.hg_devbuf_copy_to(self.device._handle(), self.address + _size(offset, "offset"),
                                    src.ctypes.data, src.nbytes)
        check(rc, f"device write of {src.nbytes} bytes at offset {offset}" if rc else "")

    def read(self, offset: int = 0, nbytes: Optional[int] = None) -> bytes:
        """Copies device bytes back to the host."""
        n = self.nbytes - offset if nbytes is None else nbytes
        out = ctypes.create_string_buffer(max(n, 1))
        rc = _lib.hg_devbuf_copy_from(self.device._handle(), ctypes.addressof(out),
                                      self.address + _size(offset, "offset"), _size(n, "nbytes"))
        check(rc, f"device read of {n} bytes at offset {offset}" if rc else "")
        return out.raw[:n]

    def tensor(self, dtype: dtypes.DTypeLike, shape: Sequence[int]) -> Tensor:
        """A dense view of this memory: an arg over it is a device view (no host view)."""
        return Tensor(self, dtype, shape)

    def _forget(self) -> None:
        self._addr = None  # the device frees everything at close

    def free(self) -> None:
        """Frees the memory. Idempotent."""
        addr, self._addr = self._addr, None
        if addr is not None and not self.device.closed:
            check(_lib.hg_devbuf_free(self.device._handle(), addr), "device free")

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


# ---------------------------------------------------------------- args


def scalar_bits(value: Union[int, float, bool]) -> int:
    """A scalar's 64 raw bits: a float as IEEE f64 (hg_scalar_f64), an int as
    two's complement u64, a bool as 0 or 1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    v = int(value)  # ints and numpy integers
    if not -(1 << 63) <= v < (1 << 64):
        raise InvalidArgument(f"scalar {v} does not fit 64 bits")
    return v & 0xFFFF_FFFF_FFFF_FFFF


class Arg:
    """One argument of a run: a name, a direction, and a tensor or a scalar.

    ``resident=True`` (IN and INOUT host views) keeps the device copy across
    runs, reused without a copy while the host buffer's generation is the one
    it was published at; it is refused on OUT args.  An OUT or INOUT arg over
    a buffer that wraps read-only memory is refused (InvalidArgument naming
    the arg).  Scalars: :func:`scalar`.
    """

    __slots__ = ("name", "direction", "tensor", "scalar", "resident")

    def __init__(self, name: str, direction: Union[Dir, int, str], tensor: Optional[Tensor] = None,
                 *, resident: bool = False, scalar: Union[int, float, None] = None) -> None:
        self.name = name
        self.direction = _dir_of(direction)
        if self.direction == Dir.SCALAR:
            if tensor is not None or scalar is None:
                raise InvalidArgument(f"arg '{name}': a SCALAR arg takes a scalar value, not a tensor")
            self.scalar = scalar_bits(scalar)
        else:
            if not isinstance(tensor, Tensor):
                raise InvalidArgument(f"arg '{name}': a {self.direction.name} arg takes a Tensor")
            if self.direction != Dir.IN and getattr(tensor.buffer, "readonly", False):
                raise InvalidArgument(
                    f"arg '{name}': a {self.direction.name} arg is written in place, but its "
                    "buffer wraps read-only memory; make the arg IN, or wrap a writable copy "
                    "(np.array(x))")
            self.scalar = 0
        self.tensor = tensor
        self.resident = _residency(name, self.direction, resident)

    def with_residency(self, resident: bool) -> "Arg":
        """A copy with `resident` set."""
        out = Arg.__new__(Arg)
        out.name, out.direction, out.tensor, out.scalar = self.name, self.direction, self.tensor, self.scalar
        out.resident = _residency(self.name, self.direction, resident)
        return out

    def __repr__(self) -> str:
        what = f"scalar=0x{self.scalar:x}" if self.direction == Dir.SCALAR else repr(self.tensor)
        return f"<Arg {self.name!r} {self.direction.name}{' resident' if self.resident else ''} {what}>"


def _residency(name: str, direction: Dir, resident: bool) -> bool:
    if resident and direction == Dir.OUT:
        raise InvalidArgument(
            f"arg '{name}': resident=True on an OUT arg: residency keeps the device copy of "
            "what the host sent, and an OUT arg sends nothing; make it INOUT to keep its "
            "device copy between runs, or drop resident=True")
    return bool(resident)


def scalar(name: str, value: Union[int, float, bool]) -> Arg:
    """A SCALAR arg (floats travel as f64 bits, ints as u64)."""
    return Arg(name, Dir.SCALAR, scalar=value)


# ------------------------------------------------------------ callables


class Callable:
    """An orchestration function and its kernels (a C ``hg_callable``)."""

    def __init__(self, struct_: "_capi.hg_callable", keepalive: Any, origin: str) -> None:
        self._struct = struct_
        self._keepalive = keepalive  # the shared object or case that holds the code
        self.origin = origin

    @property
    def name(self) -> str:
        return (self._struct.name or b"(unnamed)").decode()

    def __repr__(self) -> str:
        return f"<Callable {self.name!r} from {self.origin}>"


def load_callable(path: Union[str, "os.PathLike[str]"], symbol: str) -> Callable:
    """Loads the ``const hg_callable`` called `symbol` from the shared object at `path`.

    Build the shared object against libhostgraph (its kernels and
    orchestration call hg_task_submit and friends); examples/gemv.c is one.
    Raises NotFoundError if the file or the symbol is missing.
    """
    full = os.path.abspath(os.fspath(path))
    try:
        lib = ctypes.CDLL(full)
    except OSError as e:
        raise NotFoundError(f"cannot load '{full}': {e}") from None
    try:
        c = _capi.hg_callable.in_dll(lib, symbol)
    except ValueError:
        raise NotFoundError(f"'{full}' exports no symbol '{symbol}'") from None
    if not c.orchestrate:
        raise InvalidArgument(f"'{symbol}' in '{full}' has no orchestration function")
    return Callable(c, lib, f"{full}:{symbol}")


# ---------------------------------------------------------------- stats


@dataclass(frozen=True)
class RunStats:
    """One run's own counts, named as in the command's JSON report (its
    per-round fields come first, in its order; times in milliseconds)."""

    wall_ms: float
    bind_ms: float
    orch_ms: float
    exec_ms: float
    copyback_ms: float
    release_ms: float
    h2d_bytes: int
    d2h_bytes: int
    h2d_copies: int  # contiguous ranges copied
    d2h_copies: int
    h2d_batches: int  # device copy calls (each moves many ranges)
    d2h_batches: int
    h2d_bytes_skipped: int  # of resident args the host did not change
    d2h_bytes_skipped: int  # of OUT/INOUT extents no task wrote
    device_allocs: int
    resident_hits: int
    resident_bytes_skipped: int
    stale_uploads: int
    resident_staged: int
    evictions: int
    h2d_ms: float  # time in the batched copies each way (within bind_ms, copyback_ms):
    d2h_ms: float  # host time = wall_ms - exec_ms - h2d_ms - d2h_ms
    replayed: int  # 1: the run executed the runner's recorded graph (Runner(replay=True))
    net_bytes: int  # handed to a network by the run's kernels (MPI allreduces)
    net_ms: float
    build_ms: float  # waiting for kernel programs to build (OpenCL, first use); not in orch_ms
    # Not in the report's rounds:
    tasks: int
    edges: int
    retained_bytes: int

    #: The fields a round of the command's JSON report has (besides round and golden).
    JSON_FIELDS = (
        "wall_ms", "bind_ms", "orch_ms", "exec_ms", "copyback_ms", "release_ms",
        "h2d_bytes", "d2h_bytes", "h2d_copies", "d2h_copies", "h2d_batches", "d2h_batches",
        "h2d_bytes_skipped", "d2h_bytes_skipped", "device_allocs", "resident_hits",
        "resident_bytes_skipped", "stale_uploads", "resident_staged", "evictions",
        "h2d_ms", "d2h_ms", "replayed",
        "net_bytes", "net_ms", "build_ms",
    )  # fmt: skip

    @classmethod
    def _from_c(cls, s: "_capi.hg_run_stats") -> "RunStats":
        values: Dict[str, Any] = {}
        for f in fields(cls):
            if f.name.endswith("_ms"):
                values[f.name] = getattr(s, f.name[:-3] + "_ns") / 1e6
            else:
                values[f.name] = int(getattr(s, f.name))
        return cls(**values)

    def as_dict(self, json_only: bool = False) -> Dict[str, Any]:
        """The stats as a dict; json_only: only the JSON report's round fields."""
        d = asdict(self)
        return {k: d[k] for k in self.JSON_FIELDS} if json_only else d


# ---------------------------------------------------------------- trace


class Trace(Closing):
    """Host stage spans and per-task spans of the runs of the runners it is set on
    (``runner.trace = t``); ``write(path)`` writes Chrome trace-event JSON."""

    def __init__(self) -> None:
        ptr = ctypes.c_void_p()
        check(_lib.hg_trace_create(ctypes.byref(ptr)), "hg_trace_create")
        self._ptr: Optional[int] = ptr.value
        self._runners: "set[_RunnerHandle]" = set()  # recording into this trace

    def write(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the trace; FileError if it cannot."""
        p = os.fspath(path)
        rc = _lib.hg_trace_write_json(self._handle(), p.encode())
        check(rc, f"cannot write trace '{p}'" if rc else "")

    @property
    def num_host_spans(self) -> int:
        return int(_lib.hg_trace_num_host_spans(self._handle()))

    @property
    def num_task_spans(self) -> int:
        return int(_lib.hg_trace_num_task_spans(self._handle()))

    def _handle(self) -> int:
        if self._ptr is None:
            raise InvalidArgument("trace is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Detaches the trace from every runner recording into it (waiting for
        a run in flight), then frees it. Idempotent."""
        ptr, self._ptr = self._ptr, None
        if ptr is None:
            return
        for handle in list(self._runners):
            handle.detach_trace(ptr)
        self._runners.clear()
        _lib.hg_trace_destroy(ptr)



# ---------------------------------------------------------------- runner


class Runner(Closing):
    """Runs callables on a device, keeping a retained buffer, resident copies
    and pooled scratch across runs.

    One thread at a time, enforced: while a run is in flight (on another
    thread, or one a Ctrl-C interrupted that is still stopping), every
    method that calls into C on the runner (run, the setters,
    invalidate_replay, set_budget, set_poison_scratch, errmsg and the byte
    counts) raises RunnerBusyError and does nothing; only :meth:`close`
    waits for the run to return.  Calls between runs from several threads
    are serialised, never refused.  So a runner shared between threads
    either works or says so; it never races its own run.

    Args:
        device: the device to run on; the runner keeps it open.
        verify: verify mode: hash resident args' host bytes, so a write that
            bypassed the API fails the run with StaleError.
        budget: device bytes resident copies may hold (0: the device's capacity).
        replay: checked graph replay: a run of the same callable with the same
            args replays the last run's graph while nothing its orchestration
            read changed (``RunStats.replayed``); see :meth:`invalidate_replay`.
    """

    def __init__(self, device: Device, *, verify: bool = False, budget: int = 0,
                 replay: bool = False) -> None:
        ptr = ctypes.c_void_p()
        check(_lib.hg_runner_open(device._handle(), ctypes.byref(ptr)), "hg_runner_open")
        self.device = device
        self._spec = device.spec  # for repr, which never calls C
        self._h = _RunnerHandle(ptr.value)
        self._trace: Optional[Trace] = None
        self._verify = False
        self._replay = False
        device._runners.add(self._h)
        self.verify = verify
        self.replay = replay
        if budget:
            self.set_budget(budget)

    def _handle(self) -> int:
        ptr = self._h.ptr
        if ptr is None:
            raise InvalidArgument("runner is closed")
        return ptr

    @property
    def closed(self) -> bool:
        return self._h.ptr is None

    @property
    def running(self) -> bool:
        """Whether a run of this runner is in flight (on any thread)."""
        return self._h.running

    def run(self, callable_: Callable, args: Sequence[Arg]) -> RunStats:
        """One run: bind, orchestrate, execute, copy back, publish, release.

        Returns the run's stats.  Raises the Error subclass for the failure's
        code, carrying the runner's one-line message (it names the arg);
        RunnerBusyError, doing nothing, while another run is in flight.
        Ctrl-C cancels the run between tasks and raises KeyboardInterrupt
        once the run has stopped; the runner stays usable.
        """
        if not isinstance(callable_, Callable):
            raise TypeError(f"run wants a hostgraph.Callable, not {type(callable_).__name__}")
        carr = _arg_array(args)
        stats = ctypes.create_string_buffer(ctypes.sizeof(_capi.hg_run_stats) + _capi.STRUCT_SLACK)
        c = ctypes.byref(callable_._struct)

        def run(h: int) -> "tuple[int, str]":  # on the worker, holding the runner
            rc = _lib.hg_runner_run(h, c, carr, len(args), ctypes.addressof(stats))
            return rc, _errmsg(h) if rc != 0 else ""

        def end(h: int) -> None:  # the run returned: withdraw a late cancel, give it back
            _lib.hg_runner_cancel_clear(h)
            self._h.leave()

        rc, msg = _interrupt.call(run, _lib.hg_runner_cancel, lambda: self._h.enter(run=True), end)
        if rc != 0:
            raise error_for(rc, msg)
        return RunStats._from_c(_capi.hg_run_stats.from_buffer(stats))

    @property
    def errmsg(self) -> str:
        """The last error as one line naming the arg and the value ("" after success)."""
        with self._h.calling() as h:
            return _errmsg(h)

    @property
    def verify(self) -> bool:
        return self._verify

    @verify.setter
    def verify(self, on: bool) -> None:
        with self._h.calling() as h:
            _lib.hg_runner_set_verify(h, bool(on))
            self._verify = bool(on)

    @property
    def replay(self) -> bool:
        return self._replay

    @replay.setter
    def replay(self, on: bool) -> None:
        with self._h.calling() as h:
            _lib.hg_runner_set_replay(h, bool(on))
            self._replay = bool(on)

    def invalidate_replay(self) -> None:
        """Drop the recording: what the orchestration reads outside its args (a
        global, its closure) changed.  The next run orchestrates.
        RunnerBusyError while a run is in flight (it may be executing the
        recording)."""
        with self._h.calling() as h:
            _lib.hg_runner_invalidate_replay(h)

    @property
    def replay_bytes(self) -> int:
        """Host bytes the runner's recording holds (0 with none)."""
        with self._h.calling() as h:
            return int(_lib.hg_runner_replay_bytes(h))

    def set_poison_scratch(self, on: bool) -> None:
        """Fill reused scratch with 0xA5 (debugging kernels that read unwritten scratch)."""
        with self._h.calling() as h:
            _lib.hg_runner_set_poison_scratch(h, bool(on))

    def set_budget(self, nbytes: int) -> None:
        """Device bytes resident copies may hold (0: the device's capacity); evicts now."""
        n = _size(nbytes, "budget")
        with self._h.calling() as h:
            rc = _lib.hg_runner_set_budget(h, n)
            msg = _errmsg(h) if rc != 0 else ""
        check(rc, msg)

    @property
    def trace(self) -> Optional[Trace]:
        """The trace this runner records into (None once that trace is closed)."""
        t = self._trace
        return t if t is not None and not t.closed else None

    @trace.setter
    def trace(self, t: Optional[Trace]) -> None:
        """Records into `t` (None: stop).  A closed trace is refused."""
        tptr = t._handle() if t is not None else None
        self._h.set_trace(tptr)
        old = self._trace
        if old is not None:
            old._runners.discard(self._h)
        if t is not None:
            t._runners.add(self._h)
        self._trace = t

    @property
    def retained_capacity(self) -> int:
        with self._h.calling() as h:
            return int(_lib.hg_runner_retained_capacity(h))

    @property
    def device_bytes(self) -> int:
        """Device bytes the runner holds: retained buffer, resident copies, pooled scratch."""
        with self._h.calling() as h:
            return int(_lib.hg_runner_device_bytes(h))

    @property
    def resident_bytes(self) -> int:
        with self._h.calling() as h:
            return int(_lib.hg_runner_resident_bytes(h))

    @property
    def resident_copies(self) -> int:
        with self._h.calling() as h:
            return int(_lib.hg_runner_resident_copies(h))

    def close(self) -> None:
        """Frees the runner's device memory and forgets every residency record.
        Waits for a run in flight on another thread to return first. Idempotent."""
        self._h.close()
        self.device._runners.discard(self._h)
        if self._trace is not None:
            self._trace._runners.discard(self._h)

    def __repr__(self) -> str:
        if self.closed:
            return "<Runner closed>"
        modes = "".join(f" {name}" for name, on in (("verify", self._verify), ("replay", self._replay),
                                                     ("traced", self.trace is not None)) if on)
        return f"<Runner on {self._spec}{modes}{' running' if self.running else ''}>"


def _errmsg(h: int) -> str:
    return _lib.hg_runner_errmsg(h).decode(errors="replace")


def _arg_array(args: Sequence[Arg]) -> "ctypes.Array[_capi.hg_arg]":
    """The C array of args; its _objects keep the names alive for the call."""
    carr = (_capi.hg_arg * max(len(args), 1))()
    for i, a in enumerate(args):
        if not isinstance(a, Arg):
            raise TypeError(f"args[{i}] is a {type(a).__name__}, not a hostgraph.Arg")
        c = carr[i]
        c.name = a.name.encode()
        c.dir = int(a.direction)
        c.scalar = a.scalar
        c.residency = _capi.HG_RESIDENT if a.resident else _capi.HG_STAGED
        if a.tensor is not None:
            buf = a.tensor.buffer
            if getattr(buf, "closed", False) or (isinstance(buf, DeviceBuffer) and buf._addr is None):
                raise InvalidArgument(f"arg '{a.name}': its buffer is closed")
            c.tensor = a.tensor._t
    return carr


