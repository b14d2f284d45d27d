"""The compile cache: C sources -> one shared object per distinct source set.

A Python scene's kernels and C orchestration are C sources; this module
compiles them with the system C compiler ($CC, else ``cc``) against the
library's own headers (the folder CMake recorded in _paths.INCLUDEDIR: a
build tree's <src>/include, an install's <prefix>/include) and links them
against libhostgraph from _paths.LIBDIR.  Flags: ``-std=c11 -O2 -fPIC
-shared``.

Invariants:
  - an entry's name is the SHA-256 of everything that decides its bytes:
    each source's name and text, the flags, the compiler's path and its
    ``--version`` line, the library version and hostgraph.h's text.  So a
    second run of an unchanged scene compiles nothing (``compile_count`` does
    not move), and any change compiles afresh.  Headers a source includes
    itself are not part of the key (list them in ``depends``).
  - an entry appears whole or not at all: the compiler writes a temporary
    file in the cache folder, renamed onto the entry's name once it
    succeeded (rename is atomic within a folder); a failed compile removes
    its temporary file and raises SceneCompileError.

Cache folder: $HG_CACHE_DIR, else $XDG_CACHE_HOME/hostgraph, else
~/.cache/hostgraph.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import _capi
from .errors import Error

FLAGS = ("-std=c11", "-O2", "-fPIC", "-shared")

#: How many times this process ran the compiler (a cache hit adds nothing).
compile_count = 0

_lock = threading.Lock()
_loaded: Dict[str, ctypes.CDLL] = {}
_compiler_ids: Dict[str, str] = {}


class SceneCompileError(Error):
    """A scene's C source did not compile: the message names the source
    file(s) and carries the compiler's first lines."""


@dataclass(frozen=True)
class Source:
    """One C source: `name` is a file path (compiled from there, so its own
    #include "..." work) or, for text given inline, a label such as
    "test_x.py:Softmax.kernels[0]" (written to a temporary file)."""

    name: str
    text: str
    path: Optional[str] = None  # the file it was read from; None: inline text


def cache_dir() -> str:
    """Where entries live: $HG_CACHE_DIR, $XDG_CACHE_HOME/hostgraph or ~/.cache/hostgraph."""
    d = os.environ.get("HG_CACHE_DIR")
    if d:
        return d
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hostgraph")


def compiler() -> List[str]:
    """The compiler command: $CC (split as a shell would), else cc."""
    return shlex.split(os.environ.get("CC", "") or "cc")


def _compiler_id(cc: List[str]) -> str:
    key = " ".join(cc)
    if key not in _compiler_ids:
        try:
            out = subprocess.run(cc + ["--version"], capture_output=True, text=True, timeout=60)
            first = (out.stdout or out.stderr).splitlines()[:1]
        except OSError as e:
            raise SceneCompileError(f"cannot run the C compiler {key!r} ($CC or cc): {e}") from None
        _compiler_ids[key] = first[0] if first else ""
    return _compiler_ids[key]


def _header_text(incdir: str) -> str:
    path = os.path.join(incdir, "hostgraph.h") if incdir else ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _core_library() -> str:
    where = _capi.libdir()
    return os.path.join(where, "libhostgraph.so.0") if where else "libhostgraph.so.0"


def _link_args() -> List[str]:
    lib = _core_library()
    if os.path.isabs(lib):
        return [lib, "-Wl,-rpath," + os.path.dirname(lib)]
    return ["-lhostgraph"]


def key_of(sources: Sequence[Source], extra_flags: Sequence[str] = ()) -> str:
    """The cache key of a source set (hex SHA-256)."""
    from . import __version__

    cc = compiler()
    inc = _capi.includedir()
    h = hashlib.sha256()
    for part in ([" ".join(cc), _compiler_id(cc), " ".join(FLAGS), " ".join(extra_flags),
                  __version__, _header_text(inc)]
                 + [x for s in sources for x in (s.name, s.text)]):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def _first_lines(text: str, n: int = 20) -> str:
    lines = text.strip().splitlines()
    more = f"\n... ({len(lines) - n} more lines)" if len(lines) > n else ""
    return "\n".join(lines[:n]) + more


def _compile(sources: Sequence[Source], extra_flags: Sequence[str], out_dir: str,
             entry: str) -> None:
    global compile_count
    cc = compiler()
    inc = _capi.includedir()
    with tempfile.TemporaryDirectory(prefix="hg-src-") as srcdir:
        files: List[str] = []
        for i, s in enumerate(sources):
            if s.path is not None:
                files.append(s.path)
                continue
            p = os.path.join(srcdir, f"src{i}.c")
            with open(p, "w", encoding="utf-8") as f:
                f.write(f'#line 1 "{s.name}"\n' + s.text)
            files.append(p)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=out_dir)
        os.close(fd)
        cmd = cc + list(FLAGS) + (["-I" + inc] if inc else []) + list(extra_flags) + \
            ["-o", tmp] + files + _link_args()
        try:
            compile_count += 1
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except OSError as e:
                raise SceneCompileError(f"cannot run the C compiler {cc[0]!r} ($CC or cc): {e}") \
                    from None
            if done.returncode != 0:
                names = ", ".join(s.name for s in sources)
                raise SceneCompileError(
                    f"C compile failed ({names}), exit {done.returncode}:\n"
                    + _first_lines(done.stderr or done.stdout))
            os.replace(tmp, entry)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def build(sources: Sequence[Source], extra_flags: Sequence[str] = ()) -> Tuple[str, bool]:
    """The cached shared object of `sources`: (its path, whether it was
    compiled now).  SceneCompileError when it does not compile."""
    if not sources:
        raise ValueError("build: no sources")
    key = key_of(sources, extra_flags)
    out_dir = cache_dir()
    entry = os.path.join(out_dir, key + ".so")
    with _lock:
        if os.path.exists(entry):
            return entry, False
        try:
            os.makedirs(out_dir, exist_ok=True)
        except OSError as e:
            raise SceneCompileError(f"cannot create the compile cache {out_dir!r} "
                                    f"(HG_CACHE_DIR): {e}") from None
        _compile(sources, extra_flags, out_dir, entry)
        return entry, True


def load(sources: Sequence[Source], extra_flags: Sequence[str] = ()) -> ctypes.CDLL:
    """build(), then the loaded object (one load per entry per process)."""
    path, _ = build(sources, extra_flags)
    with _lock:
        if path not in _loaded:
            _capi.core  # libhostgraph first, RTLD_GLOBAL: the object's hg_* resolve to it
            _loaded[path] = ctypes.CDLL(path)
        return _loaded[path]


def read_source(text_or_path: str, base_dir: str, label: str) -> Source:
    """A source given as text (it has a newline) or as a path relative to
    base_dir (the scene file's folder).  FileNotFoundError names both."""
    if "\n" in text_or_path:
        return Source(label, text_or_path)
    path = text_or_path if os.path.isabs(text_or_path) else os.path.join(base_dir, text_or_path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise FileNotFoundError(f"{label}: cannot read source file {path!r}: {e.strerror}") from None
    return Source(os.path.abspath(path), text, os.path.abspath(path))


def c_string_literal(text: str) -> str:
    """`text` as a C string literal, one source line per line of text."""
    out = []
    for line in text.splitlines(keepends=True):
        esc = []
        for ch in line.encode("utf-8"):
            c = chr(ch)
            if c == "\\":
                esc.append("\\\\")
            elif c == '"':
                esc.append('\\"')
            elif c == "\n":
                esc.append("\\n")
            elif c == "?":
                esc.append("\\?")  # no trigraphs
            elif 32 <= ch < 127:
                esc.append(c)
            else:
                esc.append(f"\\{ch:03o}")
        out.append('"' + "".join(esc) + '"')
    return "\n    ".join(out) if out else '""'
