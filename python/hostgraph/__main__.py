"""``python3 -m hostgraph ARGS...``: the ``hostgraph`` command, with the same
arguments, output and exit codes.

Two ways, decided by the scene argument:
  - a Python scene file (``run|compare|list FILE.py[::Class[::case]]``): this
    process imports the file, registers its scenes (hostgraph/scene.py) and
    runs the command in-process (hg_scene_command), since the scene runner
    must call back into this interpreter for make() and a Python
    orchestration.  Ctrl-C goes through _interrupt: the first stops the
    rounds after the one in flight, the second the round itself, and the
    command returns its code (130).  ``--tp`` is refused (MPI ranks are
    separate processes, which cannot call back into this one);
  - anything else: this process replaces itself with the command this
    package was built or installed with (<build>/hostgraph, or
    <prefix>/bin/hostgraph), which needs no numpy.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import List, Optional, Sequence, Tuple

from . import _capi

# The command's flags that take a value (tools/hostgraph.c's is_value_flag,
# and --scene-lib): their value is never the scene argument.
_VALUE_FLAGS = {"--rounds", "--residency", "--param", "--device", "--json", "--trace", "--svg",
                "--repeat", "--warmup", "--tp", "--scene-lib"}


def _scene_position(args: Sequence[str]) -> Optional[int]:
    """Index of the scene argument in args (args[0] is the subcommand)."""
    i = 1
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1 if i + 1 < len(args) else None
        if a.startswith("-"):
            if a in _VALUE_FLAGS:
                i += 1
            i += 1
            continue
        return i
    return None


def _has_flag(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args[1:])


def _python_scene(args: Sequence[str]) -> Optional[Tuple[int, Tuple[str, Optional[str], Optional[str]]]]:
    if not args or args[0] not in ("run", "compare", "list"):
        return None
    pos = _scene_position(args)
    if pos is None:
        return None
    sel = parse_selector(args[pos])
    return (pos, sel) if sel is not None else None


def parse_selector(arg: str) -> Optional[Tuple[str, Optional[str], Optional[str]]]:
    """FILE.py[::Class[::case]] -> (file, class, case); None for anything else
    (a built-in or plugin scene's name)."""
    parts = arg.split("::")
    if not parts[0].endswith(".py") or len(parts) > 3:
        return None
    cls = parts[1] or None if len(parts) > 1 else None
    case = parts[2] or None if len(parts) > 2 else None
    return parts[0], cls, case


def _usage(msg: str) -> int:
    print(f"hostgraph: {msg}", file=sys.stderr)
    return 2


def _command(argv: List[str]) -> int:
    """hg_scene_command(argv) in this process, stoppable by Ctrl-C."""
    lib = _capi.scene_def_api()
    command = _capi.scene_command()
    cargv = (ctypes.c_char_p * (len(argv) + 1))(*[os.fsencode(a) for a in argv], None)

    def begin() -> ctypes.c_void_p:
        cancel = ctypes.c_void_p()
        rc = lib.hg_scene_cancel_create(ctypes.byref(cancel))
        if rc != 0:
            raise MemoryError("hg_scene_cancel_create failed")
        return cancel

    def run(cancel: ctypes.c_void_p) -> int:
        return int(command(len(argv), cargv, cancel))

    asked = [0]

    def cancel(c: ctypes.c_void_p) -> None:  # each Ctrl-C, said at once as the command does
        asked[0] += 1
        if asked[0] == 1:
            msg = ("interrupted (Ctrl-C): stopping before the next round; Ctrl-C again stops "
                   "the round in flight")
        else:
            msg = "interrupted again (Ctrl-C): stopping the round in flight"
        print(f"{chr(13) + chr(27) + '[K' if sys.stderr.isatty() else ''}hostgraph: {msg}",
              file=sys.stderr, flush=True)
        lib.hg_scene_cancel_request(c)

    sys.stdout.flush()
    sys.stderr.flush()
    _line_buffered_stdout()
    from . import _interrupt

    try:
        rc = _interrupt.call(run, cancel, begin, lib.hg_scene_cancel_destroy)
    except KeyboardInterrupt:
        rc = _capi.HG_SCENE_INTERRUPTED
    finally:
        ctypes.CDLL(None).fflush(None)  # the command's stdio, before ours goes on
    return rc


_stdout_set = False


def _line_buffered_stdout() -> None:
    """As the command does: a table into a pipe or a file goes out a line at
    a time (the C library's stdout of this process), so an interrupted or
    killed run never leaves half a row."""
    global _stdout_set
    if _stdout_set or os.isatty(1):
        return
    _stdout_set = True
    try:
        libc = ctypes.CDLL(None)
        stream = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t]
        libc.setvbuf(stream, None, 1, 0)  # _IOLBF
    except (OSError, ValueError, AttributeError):  # not glibc-like: block buffered, as before
        pass


def run_python_scene(args: List[str], pos: int,
                     sel: Tuple[str, Optional[str], Optional[str]]) -> int:
    try:
        from . import scene
        from ._compile import SceneCompileError
        from .errors import Error

        _capi.scene_command()
    except ImportError as e:  # no numpy, or a library without hg_scene_command
        return _usage(f"{sel[0]}: {e}")

    sub = args[0]
    if _has_flag(args, "--tp"):
        return _usage(f"--tp: not for Python scenes ({sel[0]}): ranks are separate processes "
                      "and cannot call back into this one; run without --tp")
    try:
        regs, chosen = scene.select(*sel)
    except SceneCompileError as e:
        return _usage(str(e))
    except (Error, ImportError, OSError, SyntaxError) as e:
        return _usage(f"{sel[0]}: {type(e).__name__}: {e}")
    if sub == "list" and sel[1] is None:  # the whole file: every class and case
        rc = 0
        for r in regs:
            rc = rc or _command(["hostgraph", "list", r.name])
        return rc
    assert chosen is not None
    if sub != "list":
        try:
            chosen.prepare()  # compile now: an error is the file's, said once
        except SceneCompileError as e:
            print(f"hostgraph: {chosen.name}: {e}", file=sys.stderr)
            return 3
        except Error as e:
            print(f"hostgraph: {chosen.name}: {e}", file=sys.stderr)
            return 2
    argv = ["hostgraph"] + list(args)
    argv[pos + 1] = chosen.name
    if sub == "run" and chosen.cls.residency and not _has_flag(args, "--residency"):
        argv += ["--residency", chosen.cls.residency]
    return _command(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    found = _python_scene(args)
    if found is not None:
        return run_python_scene(args, *found)
    exe = os.path.join(_capi.bindir(), "hostgraph")
    if not os.access(exe, os.X_OK):
        print(f"hostgraph: the command is not at {exe} (set HOSTGRAPH_BINDIR)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + list(args))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
