"""Long C calls that Ctrl-C can stop.

A ctypes call blocks the main thread inside C, where Python cannot deliver
KeyboardInterrupt until the call returns (a 1000-round scene: minutes).  So
the blocking call runs on a worker thread (ctypes releases the GIL) and the
main thread waits in short joins, which let the interrupt through.  On
KeyboardInterrupt it asks the C side to stop (hg_runner_cancel, or the scene
runner's cancel request: the round in flight finishes), keeps waiting for
the worker (a second Ctrl-C asks again: stop now), runs `settle` (e.g.
withdraw a cancel the run finished before seeing), and re-raises.  So every
object is left usable, and nothing runs on behind the caller's back.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, TypeVar

T = TypeVar("T")

# How often the waiting thread wakes to let a pending KeyboardInterrupt in.
_POLL_S = 0.05


def call(fn: Callable[[], T], cancel: Callable[[], None],
         settle: Optional[Callable[[], None]] = None) -> T:
    """Returns fn() run on a worker thread; on KeyboardInterrupt calls
    cancel(), waits for fn to return, calls settle() and re-raises."""
    out: Dict[str, Any] = {}

    def work() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the caller below
            out["error"] = e

    worker = threading.Thread(target=work, name="hostgraph-call", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(_POLL_S)
    except KeyboardInterrupt:
        cancel()
        while worker.is_alive():
            try:
                worker.join(_POLL_S)
            except KeyboardInterrupt:
                cancel()  # again: stop now
        if settle is not None:
            settle()
        raise
    if "error" in out:
        raise out["error"]
    return out["value"]
