"""setuptools hook (the metadata is in pyproject.toml): when the install can
say where hostgraph's shared libraries and command are, it writes
hostgraph/_paths.py into the built package, as CMake does for its own copies:

    HOSTGRAPH_LIBDIR, HOSTGRAPH_BINDIR   the folders, given at install time;
    HOSTGRAPH_BUILD_DIR                  a CMake build tree (both folders);
    ../build next to this file           a checkout's default build tree.

It also records where hostgraph.h is, for the scene compile cache
(hostgraph/_compile.py): $HOSTGRAPH_INCLUDEDIR, else the named build's own
_paths.INCLUDEDIR (what CMake recorded), else this checkout's include/.

Otherwise it writes none, and the package looks at import time in this
Python's prefix (lib, bin) and on the dynamic loader's path (hostgraph/_capi.py).
HOSTGRAPH_LIBDIR at run time overrides either.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "libhostgraph.so.0"


def locate():
    """(libdir, bindir) of a build or install named at install time, or None."""
    libdir = os.environ.get("HOSTGRAPH_LIBDIR")
    if libdir:
        return os.path.abspath(libdir), os.path.abspath(os.environ.get("HOSTGRAPH_BINDIR", libdir))
    for build in (os.environ.get("HOSTGRAPH_BUILD_DIR"), os.path.join(HERE, "..", "build")):
        if build and os.path.exists(os.path.join(build, CORE)):
            build = os.path.abspath(build)
            return build, build
    return None


def locate_includedir(libdir):
    """Where hostgraph.h is, or "" (the compiler's default path)."""
    inc = os.environ.get("HOSTGRAPH_INCLUDEDIR")
    if inc:
        return os.path.abspath(inc)
    paths = os.path.join(libdir, "python", "hostgraph", "_paths.py")
    if os.path.exists(paths):  # a build tree: CMake wrote where its headers are
        found = {}
        with open(paths, encoding="utf-8") as f:
            exec(f.read(), found)  # noqa: S102 (a file CMake generated)
        if found.get("INCLUDEDIR"):
            return found["INCLUDEDIR"]
    here = os.path.join(HERE, "..", "include")
    return os.path.abspath(here) if os.path.exists(os.path.join(here, "hostgraph.h")) else ""


class BuildPy(build_py):
    def run(self):
        super().run()
        found = locate()
        path = os.path.join(self.build_lib, "hostgraph", "_paths.py")
        if found is None:
            if os.path.exists(path):  # a stale copy from an earlier build
                os.remove(path)
            print("hostgraph: no build named (HOSTGRAPH_BUILD_DIR): the package will look for "
                  "libhostgraph.so.0 in its prefix and on the loader's path")
            return
        with open(path, "w", encoding="utf-8") as f:
            f.write("# Written by setup.py: where this installed copy finds hostgraph.\n"
                    f"LIBDIR = {found[0]!r}\nBINDIR = {found[1]!r}\n"
                    f"INCLUDEDIR = {locate_includedir(found[0])!r}\n")
        print(f"hostgraph: the package will load the libraries from {found[0]}")


setup(cmdclass={"build_py": BuildPy})
