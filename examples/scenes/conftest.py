"""pytest for the scene files here: one test item per (scene class, case).

Loads hostgraph's pytest plugin (hostgraph/pytest_plugin.py), so a bare
``PYTHONPATH=build/python python3 -m pytest examples/scenes`` works from a
build tree with no install; an installed package loads it by its entry
point, and this file then adds nothing.  Options: --hg-device,
--hg-rounds, --hg-residency, --hg-verify, --hg-replay.
"""

import os
import sys

try:
    import hostgraph.pytest_plugin as _plugin
except ImportError:  # HOSTGRAPH_BUILD_DIR names a build tree to take the package from
    build = os.environ.get("HOSTGRAPH_BUILD_DIR")
    if not build:
        raise
    sys.path.insert(0, os.path.join(build, "python"))
    import hostgraph.pytest_plugin as _plugin


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.has_plugin(_plugin.PLUGIN_NAME):
        pluginmanager.register(_plugin, _plugin.PLUGIN_NAME)
