"""ctypes declarations of the C API (include/hostgraph.h, include/hostgraph_scenes.h).

This module owns the only copy of the C structs' layouts on the Python side;
tests/python/test_abi.py checks every size and offset against a C probe
compiled from the headers, so a header change that these miss fails a test
instead of corrupting memory.  Nothing here is public API.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import sysconfig
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Optional

MAX_DIMS = 5

# Error codes (enum in hostgraph.h).
HG_OK = 0
HG_EINVAL = -1
HG_EOVERFLOW = -2
HG_ELIMIT = -3
HG_ENOMEM = -4
HG_EDEVMEM = -5
HG_ECOPY = -6
HG_EKERNEL = -7
HG_ENOHOSTVIEW = -8
HG_ERANGE = -9
HG_ENOTFOUND = -10
HG_EIO = -11
HG_ESTALE = -12
HG_EUNSUPPORTED = -13
HG_ECANCELED = -14
# exit codes of hg_scene_run / hg_scene_compare beyond 0-3
HG_SCENE_INTERRUPTED = 130

# hg_dir
HG_IN, HG_OUT, HG_INOUT, HG_SCALAR = 1, 2, 3, 4
# hg_residency
HG_STAGED, HG_RESIDENT = 0, 1
# hg_fault
HG_FAULT_ALLOC, HG_FAULT_COPY, HG_FAULT_COMPLETE = 0, 1, 2


class hg_tensor(Structure):
    _fields_ = [
        ("dtype", c_int),
        ("ndims", c_uint32),
        ("shape", c_size_t * MAX_DIMS),
        ("strides", c_size_t * MAX_DIMS),
        ("offset", c_size_t),
        ("host", c_void_p),
        ("device", c_uint64),
    ]


class hg_arg(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("dir", c_int),
        ("tensor", hg_tensor),
        ("scalar", c_uint64),
        ("residency", c_int),
    ]


class hg_callable(Structure):
    _fields_ = [("name", c_char_p), ("orchestrate", c_void_p), ("user", c_void_p)]


class hg_run_stats(Structure):
    _fields_ = [
        ("wall_ns", c_uint64),
        ("bind_ns", c_uint64),
        ("orch_ns", c_uint64),
        ("exec_ns", c_uint64),
        ("copyback_ns", c_uint64),
        ("release_ns", c_uint64),
        ("h2d_bytes", c_uint64),
        ("d2h_bytes", c_uint64),
        ("h2d_copies", c_uint64),
        ("d2h_copies", c_uint64),
        ("h2d_batches", c_uint64),
        ("d2h_batches", c_uint64),
        ("device_allocs", c_uint64),
        ("tasks", c_uint32),
        ("edges", c_uint32),
        ("retained_bytes", c_size_t),
        ("resident_hits", c_uint64),
        ("resident_bytes_skipped", c_uint64),
        ("stale_uploads", c_uint64),
        ("resident_staged", c_uint64),
        ("evictions", c_uint64),
        ("h2d_bytes_skipped", c_uint64),
        ("d2h_bytes_skipped", c_uint64),
        ("h2d_ns", c_uint64),
        ("d2h_ns", c_uint64),
        ("replayed", c_uint32),
        ("net_bytes", c_uint64),
        ("net_ns", c_uint64),
        ("build_ns", c_uint64),
    ]


class hg_device_counters(Structure):
    _fields_ = [
        ("h2d_bytes", c_uint64),
        ("d2h_bytes", c_uint64),
        ("h2d_copies", c_uint64),
        ("d2h_copies", c_uint64),
        ("allocs", c_uint64),
        ("frees", c_uint64),
        ("live_bytes", c_uint64),
        ("peak_bytes", c_uint64),
        ("h2d_batches", c_uint64),
        ("d2h_batches", c_uint64),
    ]


class hg_scene_param_info(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("def_", c_int64),
        ("min", c_int64),
        ("max", c_int64),
        ("def_name", c_char_p),
        ("help", c_char_p),
    ]


class hg_scene_opts(Structure):
    _fields_ = [
        ("scene", c_char_p),
        ("params", POINTER(c_char_p)),
        ("nparams", c_uint32),
        ("rounds", c_uint32),
        ("residency", c_char_p),
        ("verify", c_bool),
        ("skip_golden", c_bool),
        ("device", c_char_p),
        ("json_path", c_char_p),
        ("trace_path", c_char_p),
        ("svg_path", c_char_p),
        ("print", c_bool),
        ("repeat", c_uint32),
        ("warmup", c_uint32),
        ("cancel", c_void_p),
        ("replay", c_bool),
    ]


class hg_kernel(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("fn", c_void_p),
        ("core", c_int),
        ("cl_source", c_char_p),
        ("cl_entry", c_char_p),
    ]


class hg_task_arg(Structure):
    _fields_ = [("arg", c_uint32), ("access", c_int), ("view", hg_tensor)]


class hg_task_desc(Structure):
    _fields_ = [
        ("kernel", POINTER(hg_kernel)),
        ("args", POINTER(hg_task_arg)),
        ("nargs", c_uint32),
        ("scalars", POINTER(c_uint64)),
        ("nscalars", c_uint32),
        ("deps", POINTER(c_uint32)),
        ("ndeps", c_uint32),
    ]


# hg_core_type
HG_CORE_CUBE, HG_CORE_VECTOR, HG_CORE_ANY = 0, 1, 2
HG_MAX_TASK_ARGS = 16
HG_MAX_TASK_SCALARS = 16

# int (*hg_orch_fn)(hg_orch *o, void *user)
ORCH_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)


# ------------------------------------------------ scene definition (issue 26)

HG_SCENE_DEF_VERSION = 1
HG_SCENE_MAX_PARAMS = 16
HG_SCENE_MAX_ARGS = 32
HG_SCENE_MAX_CHECKS = 8


class hg_scene_value(Structure):
    _fields_ = [("name", c_char_p), ("value", c_int64)]


class hg_scene_param_def(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("def_", c_int64),
        ("min", c_int64),
        ("max", c_int64),
        ("help", c_char_p),
        ("alias", c_char_p),
        ("values", POINTER(hg_scene_value)),
    ]


# int (*make)(hg_scene_case *c, const int64_t *params, void *user)
SCENE_MAKE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_int64), c_void_p)
# void (*destroy)(hg_scene_case *c, void *user)
SCENE_DESTROY_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)


class hg_scene_def(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("version", c_uint32),
        ("name", c_char_p),
        ("description", c_char_p),
        ("params", POINTER(hg_scene_param_def)),
        ("nparams", c_uint32),
        ("make", SCENE_MAKE_FN),
        ("destroy", SCENE_DESTROY_FN),
        ("host_reads", POINTER(c_char_p)),
        ("splits", c_bool),
        ("user", c_void_p),
        ("file", c_char_p),
        ("cls", c_char_p),
    ]


# Slack after every struct the C side fills in: a field appended to the
# header later must not write past a Python buffer before the ABI test
# says the bindings need it.
STRUCT_SLACK = 256

_P = c_void_p
_CORE_PROTOTYPES = {
    "hg_strerror": (c_char_p, [c_int]),
    "hg_dtype_size": (c_size_t, [c_int]),
    "hg_dtype_name": (c_char_p, [c_int]),
    "hg_hostbuf_create": (c_int, [c_size_t, POINTER(_P)]),
    "hg_hostbuf_wrap": (c_int, [_P, c_size_t, POINTER(_P)]),
    "hg_hostbuf_destroy": (None, [_P]),
    "hg_hostbuf_id": (c_uint64, [_P]),
    "hg_hostbuf_generation": (c_uint64, [_P]),
    "hg_hostbuf_size": (c_size_t, [_P]),
    "hg_hostbuf_data": (_P, [_P]),
    "hg_hostbuf_write": (c_int, [_P, c_size_t, _P, c_size_t]),
    "hg_hostbuf_mark_written": (c_int, [_P, c_size_t, c_size_t]),
    "hg_hostbuf_last_write": (None, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "hg_last_errmsg": (c_char_p, []),
    "hg_device_open": (c_int, [c_char_p, POINTER(_P), c_char_p, c_size_t]),
    "hg_device_close": (None, [_P]),
    "hg_device_spec": (c_char_p, [_P]),
    "hg_device_capacity": (c_uint64, [_P]),
    "hg_device_num_cores": (c_uint32, [_P]),
    "hg_device_counters_get": (None, [_P, _P]),
    "hg_device_inject_fault": (c_int, [_P, c_int, c_uint64]),
    "hg_devbuf_malloc": (c_int, [_P, c_size_t, POINTER(c_uint64)]),
    "hg_devbuf_free": (c_int, [_P, c_uint64]),
    "hg_devbuf_copy_to": (c_int, [_P, c_uint64, _P, c_size_t]),
    "hg_devbuf_copy_from": (c_int, [_P, _P, c_uint64, c_size_t]),
    "hg_tensor_host": (c_int, [POINTER(hg_tensor), _P, c_int, c_uint32, POINTER(c_size_t)]),
    "hg_tensor_device": (c_int, [POINTER(hg_tensor), c_uint64, c_int, c_uint32, POINTER(c_size_t)]),
    "hg_tensor_slice": (c_int, [POINTER(hg_tensor), c_uint32, c_size_t, c_size_t, POINTER(hg_tensor)]),
    "hg_tensor_nbytes": (c_int, [POINTER(hg_tensor), POINTER(c_size_t)]),
    "hg_tensor_extent": (c_int, [POINTER(hg_tensor), POINTER(c_size_t), POINTER(c_size_t)]),
    "hg_tensor_is_dense": (c_bool, [POINTER(hg_tensor)]),
    "hg_tensor_overlap": (c_bool, [POINTER(hg_tensor), POINTER(hg_tensor)]),
    "hg_scalar_f64": (c_uint64, [ctypes.c_double]),
    "hg_scalar_as_f64": (ctypes.c_double, [c_uint64]),
    "hg_trace_create": (c_int, [POINTER(_P)]),
    "hg_trace_destroy": (None, [_P]),
    "hg_trace_write_json": (c_int, [_P, c_char_p]),
    "hg_trace_num_host_spans": (c_size_t, [_P]),
    "hg_trace_num_task_spans": (c_size_t, [_P]),
    "hg_runner_open": (c_int, [_P, POINTER(_P)]),
    "hg_runner_close": (None, [_P]),
    "hg_runner_set_trace": (None, [_P, _P]),
    "hg_runner_retained_capacity": (c_size_t, [_P]),
    "hg_runner_set_budget": (c_int, [_P, c_uint64]),
    "hg_runner_device_bytes": (c_uint64, [_P]),
    "hg_runner_resident_bytes": (c_uint64, [_P]),
    "hg_runner_resident_copies": (c_uint32, [_P]),
    "hg_runner_set_verify": (None, [_P, c_bool]),
    "hg_runner_set_replay": (None, [_P, c_bool]),
    "hg_runner_invalidate_replay": (None, [_P]),
    "hg_runner_replay_bytes": (c_uint64, [_P]),
    "hg_runner_set_poison_scratch": (None, [_P, c_bool]),
    "hg_runner_run": (c_int, [_P, POINTER(hg_callable), POINTER(hg_arg), c_uint32, _P]),
    "hg_runner_cancel": (None, [_P]),
    "hg_runner_cancel_clear": (None, [_P]),
    "hg_runner_errmsg": (c_char_p, [_P]),
    "hg_orch_num_args": (c_uint32, [_P]),
    "hg_orch_find_arg": (c_int, [_P, c_char_p]),
    "hg_orch_arg": (c_int, [_P, c_uint32, POINTER(POINTER(hg_arg))]),
    "hg_orch_host_view": (c_int, [_P, c_uint32, POINTER(_P)]),
    "hg_orch_scratch": (
        c_int,
        [_P, c_char_p, c_int, c_uint32, POINTER(c_size_t), POINTER(c_uint32), POINTER(hg_tensor)],
    ),
    # variadic: always called as (o, code, b"%s", message)
    "hg_orch_fail": (c_int, [_P, c_int, c_char_p, c_char_p]),
    "hg_task_submit": (c_int, [_P, POINTER(hg_task_desc), POINTER(c_uint32)]),
}

_SCENE_PROTOTYPES = {
    "hg_scene_count": (c_uint32, []),
    "hg_scene_name": (c_char_p, [c_uint32]),
    "hg_scene_description": (c_char_p, [c_uint32]),
    "hg_scene_num_params": (c_uint32, [c_uint32]),
    "hg_scene_param": (c_int, [c_uint32, c_uint32, POINTER(hg_scene_param_info)]),
    "hg_scene_run": (c_int, [POINTER(hg_scene_opts), c_char_p, c_size_t]),
    "hg_scene_compare": (c_int, [POINTER(hg_scene_opts), c_char_p, c_size_t]),
    "hg_scene_case_open": (
        c_int,
        [c_char_p, POINTER(c_char_p), c_uint32, POINTER(_P), c_char_p, c_size_t],
    ),
    "hg_scene_case_close": (None, [_P]),
    "hg_scene_cancel_create": (c_int, [POINTER(_P)]),
    "hg_scene_cancel_destroy": (None, [_P]),
    "hg_scene_cancel_request": (None, [_P]),
    "hg_scene_case_args": (POINTER(hg_arg), [_P]),
    "hg_scene_case_num_args": (c_uint32, [_P]),
    "hg_scene_case_callable": (POINTER(hg_callable), [_P]),
    "hg_scene_case_check": (c_bool, [_P, c_char_p, c_size_t]),
}


# The scene definition API (hg_scene_register, the case builder,
# hg_scene_command): bound on first use by scene_def_api(), so a library
# built before it still loads for everything else.
_SCENE_DEF_PROTOTYPES = {
    "hg_scene_register": (c_int, [POINTER(hg_scene_def), c_char_p, c_size_t]),
    "hg_scene_unregister": (c_int, [c_char_p, c_char_p, c_size_t]),
    "hg_scene_case_add_tensor": (
        c_int,
        [_P, c_char_p, c_int, c_int, c_uint32, POINTER(c_size_t), POINTER(c_uint32)],
    ),
    "hg_scene_case_add_scalar": (c_int, [_P, c_char_p, c_uint64, POINTER(c_uint32)]),
    "hg_scene_case_data": (_P, [_P, c_uint32]),
    "hg_scene_case_add_check": (
        c_int,
        [_P, c_uint32, ctypes.c_double, ctypes.c_double, POINTER(POINTER(ctypes.c_double))],
    ),
    "hg_scene_case_set_callable": (c_int, [_P, POINTER(hg_callable)]),
    "hg_scene_case_set_state": (None, [_P, _P]),
    "hg_scene_case_state": (_P, [_P]),
    # variadic: always called as (c, code, b"%s", message)
    "hg_scene_case_fail": (c_int, [_P, c_int, c_char_p, c_char_p]),
}


def _package_relative(path: str) -> str:
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), path))


_CORE = "libhostgraph.so.0"


def _prefix_libdirs() -> "list[str]":
    """This interpreter's prefix's library folders (a virtual environment or
    prefix that `cmake --install --prefix` also put the libraries in)."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    names = ["lib", "lib64"] + ([os.path.join("lib", multiarch)] if multiarch else [])
    return [os.path.join(sys.prefix, n) for n in names]


def libdir() -> str:
    """Where the shared libraries are: $HOSTGRAPH_LIBDIR; else _paths.LIBDIR
    (a build tree, a CMake install, or a pip install that named a build);
    else this prefix's lib folders; else "" (the dynamic loader's search
    path: /usr/lib, ld.so.cache, LD_LIBRARY_PATH)."""
    env = os.environ.get("HOSTGRAPH_LIBDIR")
    if env:
        return env
    try:
        from . import _paths
    except ImportError:  # a pip install that named no build, or the source tree
        for d in _prefix_libdirs():
            if os.path.exists(os.path.join(d, _CORE)):
                return d
        return ""
    return _package_relative(_paths.LIBDIR)


def bindir() -> str:
    """Where the `hostgraph` command is: $HOSTGRAPH_BINDIR, else _paths.BINDIR,
    else this prefix's bin, else the folder of the first `hostgraph` on PATH."""
    env = os.environ.get("HOSTGRAPH_BINDIR")
    if env:
        return env
    try:
        from . import _paths
    except ImportError:
        if os.access(os.path.join(sys.prefix, "bin", "hostgraph"), os.X_OK):
            return os.path.join(sys.prefix, "bin")
        found = shutil.which("hostgraph")
        return os.path.dirname(found) if found else os.path.join(sys.prefix, "bin")
    return _package_relative(_paths.BINDIR)


def _load(name: str, prototypes: dict) -> ctypes.CDLL:
    where = libdir()
    path = os.path.join(where, name) if where else name
    # RTLD_GLOBAL: a user's shared object that leaves hg_* undefined (instead
    # of linking libhostgraph) still finds them, in this one copy.
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        how = ("HOSTGRAPH_LIBDIR" if os.environ.get("HOSTGRAPH_LIBDIR") else
               "this package's _paths.py" if where else "the dynamic loader's search path")
        raise ImportError(
            f"hostgraph: cannot load {path} (from {how}): {e}. Build hostgraph and import the "
            "package from <build>/python, install it (cmake --install build --prefix P, the "
            "same prefix as this Python's), pip install it with HOSTGRAPH_BUILD_DIR=<build>, "
            "or set HOSTGRAPH_LIBDIR") from None
    for fname, (restype, argtypes) in prototypes.items():
        fn = getattr(lib, fname)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


core = _load("libhostgraph.so.0", _CORE_PROTOTYPES)
_scenes: Optional[ctypes.CDLL] = None


def scenes() -> ctypes.CDLL:
    """libhostgraph_scenes, loaded on first use: the core alone pays nothing for it."""
    global _scenes
    if _scenes is None:
        _scenes = _load("libhostgraph_scenes.so.0", _SCENE_PROTOTYPES)
    return _scenes


_scene_def_bound = False


def scene_def_api() -> ctypes.CDLL:
    """libhostgraph_scenes with the scene definition calls bound; ImportError
    naming the missing call when the library predates them."""
    global _scene_def_bound
    lib = scenes()
    if not _scene_def_bound:
        for fname, (restype, argtypes) in _SCENE_DEF_PROTOTYPES.items():
            try:
                fn = getattr(lib, fname)
            except AttributeError:
                raise ImportError(
                    f"hostgraph: {lib._name} has no {fname}: this library predates Python "
                    "scenes (issue 26); rebuild hostgraph") from None
            fn.restype = restype
            fn.argtypes = argtypes
        _scene_def_bound = True
    return lib


def scene_command() -> "ctypes._CFuncPtr":
    """hg_scene_command, bound; ImportError when the library predates it."""
    lib = scene_def_api()
    try:
        fn = lib.hg_scene_command
    except AttributeError:
        raise ImportError(f"hostgraph: {lib._name} has no hg_scene_command: this library "
                          "predates running Python scenes in-process; rebuild hostgraph") from None
    fn.restype = c_int
    fn.argtypes = [c_int, POINTER(c_char_p), _P]
    return fn


def includedir() -> str:
    """Where hostgraph.h is, as CMake recorded it (_paths.INCLUDEDIR), or
    $HOSTGRAPH_INCLUDEDIR; "" when neither says (a pip install that named
    no build): the compiler's default include path."""
    env = os.environ.get("HOSTGRAPH_INCLUDEDIR")
    if env:
        return env
    try:
        from . import _paths
    except ImportError:
        return ""
    inc = getattr(_paths, "INCLUDEDIR", "")
    return _package_relative(inc) if inc else ""


def strerror(code: int) -> str:
    return core.hg_strerror(code).decode()
