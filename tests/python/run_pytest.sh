#!/usr/bin/env bash
# ctest's python/pytest: the Python package's tests, with the interpreter
# CMake found (Debian's /usr/bin/python3, where python3-numpy and
# python3-pytest install).  HOSTGRAPH_BUILD_DIR (set by ctest) says which
# build's package, libraries and command to test.
# Usage: bash tests/python/run_pytest.sh PYTHON TESTS_DIR [pytest args...]
# Exit 77 (ctest: skipped) when the interpreter lacks numpy or pytest.
set -euo pipefail
py=$1
dir=$2
shift 2
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "skipped: $py cannot import numpy and pytest (apt-get install python3-numpy python3-pytest)"
    exit 77
fi
# -p no:cacheprovider: write nothing into the source tree.  pytest exits 5
# when it collects no tests: that fails here, as any non-zero code does.
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
exec "$py" -m pytest -q -p no:cacheprovider --rootdir "$dir" "$dir" "$@"
