"""A Runner's C handle and who holds it (runtime.Runner's, split out).

The handle is shared by its Runner, its Device and the Trace it records
into, so that whichever of them closes first closes it once.  It keeps the
runner to one thread at a time, enforced (issue 25, item 10: before, only
run, close and the trace setter took a lock, and invalidate_replay from
another thread freed the recording a run was executing).

Lock order: the handle's condition is taken alone (under no lock of the
package, none taken under it) and never held across a call into C.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional

from . import _capi
from .errors import InvalidArgument, RunnerBusyError

_lib = _capi.core


class _RunnerHandle:
    """The C runner, shared by its Runner, its Device and the Trace it records
    into, so that whichever of them closes first (by hand, or by the
    collector in any order within one cycle) closes it exactly once, before
    the device, and a closed trace is detached first.

    It keeps the runner to one thread at a time.  A holder is a run (from
    its worker's begin to its end) or a short call (a setter, a count, a
    close); the condition guards who holds it and is never held across a
    call into C.  A short call waits for another short call, and refuses
    (RunnerBusyError) while a run holds the runner; a run refuses likewise;
    close and a trace's detach wait for a run too.  Lock order: the
    condition is taken alone (under no lock of the package's, and none is
    taken under it)."""

    __slots__ = ("ptr", "trace_ptr", "_cond", "_run", "_call")

    def __init__(self, ptr: int) -> None:
        self.ptr: Optional[int] = ptr
        self.trace_ptr: Optional[int] = None
        self._cond = threading.Condition(threading.Lock())
        self._run = False  # a run holds the runner
        self._call = False  # a short call holds it

    @property
    def running(self) -> bool:
        return self._run

    def enter(self, *, run: bool = False, wait: bool = False) -> Optional[int]:
        """Takes the runner for a run or a short call; returns its pointer,
        None if it is closed (InvalidArgument unless waiting)."""
        with self._cond:
            while self._call or (wait and self._run):
                self._cond.wait()
            if self._run:
                raise RunnerBusyError()
            if self.ptr is None:
                if wait:
                    return None
                raise InvalidArgument("runner is closed")
            if run:
                self._run = True
            else:
                self._call = True
            return self.ptr

    def leave(self) -> None:
        """Gives the runner back."""
        with self._cond:
            self._run = self._call = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def calling(self) -> Iterator[int]:
        """``with handle.calling() as ptr``: a short call into C."""
        ptr = self.enter()
        assert ptr is not None
        try:
            yield ptr
        finally:
            self.leave()

    def close(self) -> None:
        """Closes the runner, waiting for a run in flight.  (A run's worker
        holds its Runner, so the collector never closes one mid-run.)"""
        ptr = self.enter(wait=True)
        if ptr is None:
            return
        try:
            self.ptr = None
            _lib.hg_runner_close(ptr)
        finally:
            self.leave()

    def set_trace(self, tptr: Optional[int]) -> None:
        with self.calling() as ptr:
            _lib.hg_runner_set_trace(ptr, tptr)
            self.trace_ptr = tptr

    def detach_trace(self, tptr: int) -> None:
        """Stops recording into trace `tptr` (a trace being closed), if it
        still does; waits for a run in flight."""
        ptr = self.enter(wait=True)
        if ptr is None:
            return
        try:
            if self.trace_ptr == tptr:
                _lib.hg_runner_set_trace(ptr, None)
                self.trace_ptr = None
        finally:
            self.leave()
