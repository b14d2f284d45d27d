"""pytest plugin: hostgraph Scene classes in test_*.py files become tests.

One item per (class, case), named ``FILE.py::Class::case`` (so ``-k wide``
or ``-k Softmax`` selects).  Each item registers its scene and runs it with
the scene runner (hg_scene_run, as ``hostgraph run`` does); a round whose
outputs miss the golden reference fails the item with the runner's message
(the worst element: index, got, want), a run that fails fails it with the
run's error.  A case declared for other devices (``Case(devices=...)``) is
skipped on this one.

Options: --hg-device SPEC (default sim), --hg-rounds N (default 3),
--hg-residency MODE (default: the scene's own, else off), --hg-verify,
--hg-replay.

Loaded by examples/scenes/conftest.py in a build tree, and by the
``pytest11`` entry point of an installed package (python/pyproject.toml),
under one name (PLUGIN_NAME) so the two never both register.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Iterator, Optional

import pytest

PLUGIN_NAME = "hostgraph.pytest_plugin"


def pytest_addoption(parser: Any) -> None:
    g = parser.getgroup("hostgraph", "hostgraph scenes")
    g.addoption("--hg-device", default="sim", help="device spec the scenes run on (sim, opencl, ...)")
    g.addoption("--hg-rounds", type=int, default=3, help="rounds per scene case (default 3)")
    g.addoption("--hg-residency", default=None, choices=("off", "pin", "in", "all"),
                help="residency mode (default: the scene's own, else off)")
    g.addoption("--hg-verify", action="store_true", help="verify mode (hostgraph run --verify)")
    g.addoption("--hg-replay", action="store_true", help="graph replay (hostgraph run --replay)")


def _is_scene_class(collector: Any, obj: Any) -> bool:
    # Installed, this plugin sees every test module of every project: one
    # that never imported hostgraph.scene holds no Scene class, and costs
    # nothing (no import of numpy or of the libraries).
    loaded = sys.modules.get("hostgraph.scene")
    if loaded is None or not inspect.isclass(obj):
        return False
    Scene = loaded.Scene
    module = getattr(collector, "obj", None)
    return (inspect.isclass(obj) and issubclass(obj, Scene) and obj is not Scene
            and module is not None and obj.__module__ == getattr(module, "__name__", None)
            and not obj.__name__.startswith("_"))


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: Any) -> Optional[Any]:
    if isinstance(collector, pytest.Module) and _is_scene_class(collector, obj):
        return SceneClass.from_parent(collector, name=name, obj=obj)
    return None


class SceneClass(pytest.Collector):
    """A Scene subclass: one SceneItem per case."""

    def __init__(self, *, obj: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.obj = obj

    def collect(self) -> Iterator["SceneItem"]:
        from .scene import _cases_of

        for case in _cases_of(self.obj):
            yield SceneItem.from_parent(self, name=case.name, case=case)


class SceneFailure(Exception):
    """A scene item's failure: its message is the whole report."""


class SceneItem(pytest.Item):
    def __init__(self, *, case: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case

    def runtest(self) -> None:
        from . import scene
        from .scenes import run_scene
        from .errors import GoldenError, SceneError, UsageError

        cfg = self.config
        device = cfg.getoption("--hg-device")
        kind = device.split(":", 1)[0]
        if self.case.devices and kind not in self.case.devices:
            pytest.skip(f"case '{self.case.name}' is for {', '.join(self.case.devices)}, "
                        f"not {kind}")
        cls = self.parent.obj
        file = str(getattr(self, "path", None) or self.fspath)
        regs = scene.register(cls, file)
        reg = next(r for r in regs if r.case.name == self.case.name)
        reg.prepare()  # a compile error fails here, with the compiler's lines
        residency = cfg.getoption("--hg-residency") or cls.residency or "off"
        try:
            report = run_scene(reg.name, rounds=cfg.getoption("--hg-rounds"),
                                      residency=residency, device=device,
                                      verify=cfg.getoption("--hg-verify"),
                                      replay=cfg.getoption("--hg-replay"))
        except GoldenError as e:
            raise SceneFailure(f"{reg.name} on {device}, residency {residency}: golden check "
                               f"failed: {e}") from None
        except (SceneError, UsageError) as e:
            raise SceneFailure(f"{reg.name} on {device}, residency {residency}: {e}") from None
        self.user_properties.append(("report", report))

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, SceneFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> Any:
        return getattr(self, "path", None) or self.fspath, None, f"{self.parent.name}::{self.name}"
