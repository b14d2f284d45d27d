"""hostgraph's exceptions: one class per HG_E* code, all under :class:`Error`.

A failing call raises the subclass for its code, carrying the C side's one
line: for a run, the runner's message (``hg_runner_errmsg``), which names the
arg and the value, e.g. ``arg 'k_cache': view ends at byte 184549376, buffer
has 184549120``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

from . import _capi


class Error(Exception):
    """Any hostgraph failure.

    Attributes:
        code: the negative HG_E* code (None for scene-runner exit codes).
        message: the one-line message, as the C side wrote it.
    """

    code: Optional[int] = None

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    """HG_EINVAL: an argument is malformed (the message names it)."""

    code = _capi.HG_EINVAL


class SizeOverflowError(Error):
    """HG_EOVERFLOW: a size computation would overflow."""

    code = _capi.HG_EOVERFLOW


class LimitError(Error):
    """HG_ELIMIT: a fixed limit was exceeded (args, scalars, dims)."""

    code = _capi.HG_ELIMIT


class HostMemoryError(Error):
    """HG_ENOMEM: host memory allocation failed."""

    code = _capi.HG_ENOMEM


class DeviceMemoryError(Error):
    """HG_EDEVMEM: device memory allocation failed."""

    code = _capi.HG_EDEVMEM


class CopyError(Error):
    """HG_ECOPY: a host<->device copy failed."""

    code = _capi.HG_ECOPY


class KernelError(Error):
    """HG_EKERNEL: a kernel returned an error (the message names the task)."""

    code = _capi.HG_EKERNEL


class NoHostViewError(Error):
    """HG_ENOHOSTVIEW: host code read an arg that is only a device view."""

    code = _capi.HG_ENOHOSTVIEW


class RangeError(Error, IndexError):
    """HG_ERANGE: a view or write reaches outside its buffer or arg."""

    code = _capi.HG_ERANGE


class NotFoundError(Error, LookupError):
    """HG_ENOTFOUND: no such scene, arg, param, symbol or device address."""

    code = _capi.HG_ENOTFOUND


class FileError(Error):
    """HG_EIO: a file could not be read or written."""

    code = _capi.HG_EIO


class StaleError(Error):
    """HG_ESTALE: verify mode found a resident arg's host bytes changed
    without a write through the API (buf.write / buf.mark_written)."""

    code = _capi.HG_ESTALE


class UnsupportedError(Error):
    """HG_EUNSUPPORTED: the device cannot do what was asked."""

    code = _capi.HG_EUNSUPPORTED


class CanceledError(Error):
    """HG_ECANCELED: the run was stopped by hg_runner_cancel (Python raises
    KeyboardInterrupt for a run it canceled on Ctrl-C)."""

    code = _capi.HG_ECANCELED


class RunnerBusyError(Error, RuntimeError):
    """A Runner was called while a run of it is in flight: on another thread,
    or a run that a Ctrl-C interrupted and that is still stopping.  A runner
    is used by one thread at a time, and it refuses the call rather than
    wait (a run can take minutes) or let it race the run.  Nothing was done:
    call again once the run has returned.  (Runner.close waits instead.)"""

    def __init__(self, message: str = "") -> None:
        super().__init__(message or RUNNER_BUSY)


#: The message of RunnerBusyError.
RUNNER_BUSY = ("runner is running on another thread: a runner is used by one thread at a "
               "time; call it again once that run has returned")


class UsageError(Error, ValueError):
    """The scene runner refused its arguments (the command's exit code 2)."""


class GoldenError(Error):
    """A round's outputs did not match the golden reference (exit code 1).

    Attributes:
        report: the report, as complete as the command writes it in that case.
    """

    def __init__(self, message: str, report: Dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


class SceneError(Error):
    """A scene's run failed at run time (the command's exit code 3)."""


_BY_CODE: Dict[int, Type[Error]] = {
    cls.code: cls  # type: ignore[misc]
    for cls in (
        InvalidArgument,
        SizeOverflowError,
        LimitError,
        HostMemoryError,
        DeviceMemoryError,
        CopyError,
        KernelError,
        NoHostViewError,
        RangeError,
        NotFoundError,
        FileError,
        StaleError,
        UnsupportedError,
        CanceledError,
    )
}


def error_for(code: int, message: str = "") -> Error:
    """The exception for an HG_E* code, with `message` (or the code's name)."""
    cls = _BY_CODE.get(code, Error)
    text = message or _capi.strerror(code)
    return cls(text, code) if cls is Error else cls(text)


def check(code: int, message: str = "") -> None:
    """Raises error_for(code, message) unless code is 0."""
    if code != 0:
        raise error_for(code, message)
