"""Long C calls that Ctrl-C can stop.

A ctypes call blocks the main thread inside C, where Python cannot deliver
KeyboardInterrupt until the call returns (a 1000-round scene: minutes).  So
the blocking call runs on a worker thread (ctypes releases the GIL) and the
calling thread waits on an Event the worker sets when it is done, in short
waits, which let the interrupt through.  On KeyboardInterrupt it asks the C
side to stop (hg_runner_cancel, or the scene runner's cancel request: the
round in flight finishes), keeps waiting for the worker (a second Ctrl-C
asks again: stop now), and re-raises.  So every object is left usable, and
nothing runs on behind the caller's back.

The worker owns the call from end to end: `begin` (take the runner, make a
cancel object), the call, and `end` (withdraw a cancel the call finished
before seeing, give the runner back) all run on it, in a finally.  The
caller's own view of the worker is only the Event, never Thread.is_alive():
Debian's Python 3.11.2 marks a thread stopped once a join() of it is
interrupted, while it still runs.  So even when a KeyboardInterrupt escapes
the waiting caller early (a Ctrl-C landing between two of its statements),
what the call holds is given back only once the C call returned, and a
runner is never run twice at once.

A cancel reaches only the call it was made for: the caller cancels only
while the call is in flight (under the worker's state lock), a cancel asked
before the call began is made when it begins, and `end` clears what is left.
Lock order: the state lock is taken alone, and nothing under it blocks.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, TypeVar

T = TypeVar("T")
H = TypeVar("H")

# How often the waiting thread wakes to let a pending KeyboardInterrupt in.
_POLL_S = 0.05


def call(fn: Callable[[H], T], cancel: Callable[[H], None],
         begin: Callable[[], H], end: Optional[Callable[[H], None]] = None) -> T:
    """Returns fn(h) run on a worker thread, h = begin() (on the worker too).

    What begin() raises is raised here and nothing else runs.  end(h) runs on
    the worker once fn returned, whatever happened to the caller meanwhile.
    On KeyboardInterrupt: cancel(h) while fn runs, wait for the worker to
    finish, re-raise."""
    out: Dict[str, Any] = {}
    done = threading.Event()
    state = threading.Lock()
    live: Dict[str, Any] = {"h": None, "on": False, "wanted": False}

    def work() -> None:
        try:
            h = begin()
        except BaseException as e:  # handed to the caller below
            out["error"] = e
            done.set()
            return
        try:
            with state:
                live["h"], live["on"] = h, True
                if live["wanted"]:  # Ctrl-C came before the call began
                    cancel(h)
            try:
                out["value"] = fn(h)
            except BaseException as e:  # handed to the caller below
                out["error"] = e
            with state:
                live["on"] = False
        finally:
            try:
                if end is not None:
                    end(h)
            finally:
                done.set()

    def ask() -> None:
        with state:
            live["wanted"] = True
            if live["on"]:
                cancel(live["h"])

    worker = threading.Thread(target=work, name="hostgraph-call", daemon=True)
    worker.start()  # RuntimeError if no thread can start: nothing was taken
    try:
        while not done.wait(_POLL_S):
            pass
    except KeyboardInterrupt:
        ask()
        while not done.is_set():
            try:
                done.wait(_POLL_S)
            except KeyboardInterrupt:
                ask()  # again: stop now
        raise
    if "error" in out:
        raise out["error"]
    return out["value"]
