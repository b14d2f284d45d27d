"""The bindings' struct layouts and constants equal the C headers' (via abi_probe.c)."""

import ctypes

import pytest

import hostgraph
from hostgraph import _capi, dtypes


class Field(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char_p), ("field", ctypes.c_char_p),
                ("offset", ctypes.c_size_t), ("size", ctypes.c_size_t)]


class Const(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_longlong)]


STRUCTS = {
    "hg_tensor": _capi.hg_tensor,
    "hg_arg": _capi.hg_arg,
    "hg_callable": _capi.hg_callable,
    "hg_run_stats": _capi.hg_run_stats,
    "hg_device_counters": _capi.hg_device_counters,
    "hg_scene_param_info": _capi.hg_scene_param_info,
    "hg_scene_opts": _capi.hg_scene_opts,
    "hg_kernel": _capi.hg_kernel,
    "hg_task_arg": _capi.hg_task_arg,
    "hg_task_desc": _capi.hg_task_desc,
    "hg_scene_value": _capi.hg_scene_value,
    "hg_scene_param_def": _capi.hg_scene_param_def,
    "hg_scene_def": _capi.hg_scene_def,
}


@pytest.fixture(scope="module")
def probe(build_dir):
    return ctypes.CDLL(str(build_dir / "hg_abi_probe.so"))


def _table(lib, name, count, cls):
    n = ctypes.c_size_t.in_dll(lib, count).value
    return list((cls * n).in_dll(lib, name))


def test_every_struct_matches_the_header(probe):
    seen = {name: set() for name in STRUCTS}
    for f in _table(probe, "hg_abi_fields", "hg_abi_num_fields", Field):
        cls = STRUCTS[f.type.decode()]
        if f.field is None:
            assert ctypes.sizeof(cls) == f.size, f"sizeof({f.type.decode()})"
            continue
        name = f.field.decode()
        pyname = "def_" if name == "def" else name
        desc = getattr(cls, pyname)
        assert (desc.offset, desc.size) == (f.offset, f.size), f"{f.type.decode()}.{name}"
        seen[f.type.decode()].add(pyname)
    for name, cls in STRUCTS.items():
        assert seen[name] == {fname for fname, _ in cls._fields_}, name


def test_constants_match_the_header(probe):
    for c in _table(probe, "hg_abi_consts", "hg_abi_num_consts", Const):
        name = c.name.decode()
        if name.startswith("HG_") and hasattr(_capi, name):
            assert getattr(_capi, name) == c.value, name
        elif name == "HG_MAX_DIMS":
            assert _capi.MAX_DIMS == c.value
        elif name == "HG_DTYPE_COUNT":
            assert len(dtypes.CODES) == c.value
        else:
            assert dtypes.CODES[name[3:].lower()] == c.value, name


def test_version_is_the_commands(cli):
    import subprocess

    out = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"hostgraph {hostgraph.__version__}"
