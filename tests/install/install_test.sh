#!/usr/bin/env bash
# ctest's install/install_test: installs a build into a temporary prefix and
# uses it the three ways a user would, from outside the project:
#   1. what is installed: headers (none reaching into src/), libhostgraph.so.0
#      with its soname and no link dependency beyond libc/libm, the static
#      libraries, the command, hostgraph.pc, the CMake package, the Python
#      package;
#   2. a C program built with `pkg-config --cflags --libs hostgraph` (core
#      only: it must not pull in the scenes) and one with hostgraph_scenes;
#   3. a CMake project with find_package(hostgraph): shared, static, scenes;
#   4. the installed command, and the installed Python package (found by its
#      libraries relative to itself, also after the prefix moves);
#   5. with MPI built (HAVE_MPI ON): libhostgraph_mpi (shared and static),
#      hostgraph_mpi.h, hostgraph_mpi.pc and the CMake component mpi, used by
#      an outside program (mpi_consumer.c) run under MPIEXEC as 2 ranks; and
#      libhostgraph.so still needs no MPI.  Without MPI, none of it installed.
# Usage: bash tests/install/install_test.sh BUILD_DIR [PYTHON [HAVE_MPI MPIEXEC [FLAGS]]]
# Exit 77 (ctest: skipped) without pkg-config or a C compiler.
set -euo pipefail
build=$(cd "$1" && pwd)
py=${2:-}
have_mpi=${3:-OFF}
mpiexec=${4:-mpiexec}
IFS=';' read -r -a mpiflags <<<"${5:-}" # a CMake list
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
for tool in pkg-config "$cc" readelf; do
    command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "install_test: $*" >&2; exit 1; }
step() { echo "-- $*"; }

step "cmake --install $build --prefix <tmp>"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
pc=$(find "$prefix" -name hostgraph.pc)
[ -n "$pc" ] || fail "no hostgraph.pc installed"
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
for f in include/hostgraph.h include/hostgraph_scenes.h bin/hostgraph; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
done
for f in libhostgraph.so libhostgraph.so.0 libhostgraph.so.0.1.0 libhostgraph.a \
    libhostgraph_scenes.so.0 libhostgraph_scenes.a pkgconfig/hostgraph_scenes.pc \
    cmake/hostgraph/hostgraphConfig.cmake cmake/hostgraph/hostgraphConfigVersion.cmake; do
    [ -e "$libdir/$f" ] || fail "$libdir/$f is not installed"
done
# The Python package goes where the configured interpreter looks for
# packages under this prefix (sysconfig's posix_prefix scheme, named: Debian's
# default scheme would say <prefix>/local/...), and the install says where.
pyrel=lib/python3/dist-packages # no interpreter: Debian's layout
if [ -n "$py" ]; then
    pyrel=$("$py" -c 'import sysconfig; print(sysconfig.get_path("purelib", "posix_prefix",
        vars={"base": "", "platbase": ""}).lstrip("/"))')
fi
pydir=$prefix/$pyrel
[ -f "$pydir/hostgraph/__init__.py" ] && [ -f "$pydir/hostgraph/_paths.py" ] ||
    fail "the Python package is not under $pydir"
grep -q "hostgraph Python package: $pydir/hostgraph" "$tmp/install.log" ||
    fail "the install does not say where the Python package went"

for f in "$prefix/include/hostgraph_mpi.h" "$libdir/libhostgraph_mpi.so.0" \
    "$libdir/libhostgraph_mpi.a" "$libdir/pkgconfig/hostgraph_mpi.pc" \
    "$libdir/cmake/hostgraph/hostgraphMpiTargets.cmake"; do
    if [ "$have_mpi" = ON ]; then
        [ -e "$f" ] || fail "$f is not installed (MPI was built)"
    elif [ -e "$f" ]; then
        fail "$f is installed, but MPI was not built"
    fi
done

step "headers include nothing from src/"
if grep -n '#include "' "$prefix"/include/*.h | grep -v '"hostgraph.h"'; then
    fail "an installed header includes a project-internal header"
fi

step "libhostgraph.so.0: soname, link dependencies, exported symbols"
readelf -d "$libdir/libhostgraph.so.0" | grep -q 'SONAME.*\[libhostgraph.so.0\]' ||
    fail "libhostgraph.so has no soname libhostgraph.so.0"
needed=$(readelf -d "$libdir/libhostgraph.so.0" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "   needs: $needed"
for lib in $needed; do
    case $lib in libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | ld-linux*) ;;
    *) fail "libhostgraph.so needs $lib (only libc, libm, pthreads allowed; xxhash is header-only)" ;;
    esac
done
public=$(nm -D --defined-only "$libdir/libhostgraph.so.0" | awk '$3 ~ /@@HOSTGRAPH_0$/' | wc -l)
other=$(nm -D --defined-only "$libdir/libhostgraph.so.0" |
    awk '$2 != "A" && $3 !~ /^hg_.*@@HOSTGRAPH_0$/ && $3 !~ /@@HOSTGRAPH_PRIVATE$/ {print $3}')
[ -z "$other" ] || fail "libhostgraph.so exports non-API symbols: $other"
echo "   exports $public hg_* calls"

export PKG_CONFIG_PATH=$pcdir
cflags=(-std=c11 -Wall -Wextra -Werror)
step "pkg-config --cflags --libs hostgraph: $(pkg-config --cflags --libs hostgraph)"
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" "$here/consumer.c" -o "$tmp/consumer_pc" $(pkg-config --cflags --libs hostgraph)
if readelf -d "$tmp/consumer_pc" | grep -q 'libhostgraph_scenes'; then
    fail "a core-only program links the scenes library"
fi
LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc"
step "pkg-config --cflags --libs hostgraph_scenes"
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" "$here/scenes_consumer.c" -o "$tmp/scenes_pc" \
    $(pkg-config --cflags --libs hostgraph_scenes)
LD_LIBRARY_PATH=$libdir "$tmp/scenes_pc" "$tmp/pc.json"
grep -q '"golden": "pass"' "$tmp/pc.json" || fail "the scene runner's report says no pass"

step "find_package(hostgraph)"
cmake -S "$here/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$tmp/cm" >/dev/null
"$tmp/cm/consumer_shared"
"$tmp/cm/consumer_static"
"$tmp/cm/scenes_consumer"
if nm "$tmp/cm/consumer_static" | grep -q 'scene_'; then
    fail "a core-only static program carries scene code"
fi
[ "$(cat "$tmp/cm/hostgraph_executable.txt")" = "$prefix/bin/hostgraph" ] ||
    fail "hostgraph_EXECUTABLE is not the installed command"

if [ "$have_mpi" = ON ]; then
    step "libhostgraph_mpi.so.0: soname, link dependencies, exported symbols"
    readelf -d "$libdir/libhostgraph_mpi.so.0" | grep -q 'SONAME.*\[libhostgraph_mpi.so.0\]' ||
        fail "libhostgraph_mpi.so has no soname libhostgraph_mpi.so.0"
    mneeded=$(readelf -d "$libdir/libhostgraph_mpi.so.0" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "   needs: $(echo "$mneeded" | tr '\n' ' ')"
    echo "$mneeded" | grep -q '^libhostgraph.so.0$' || fail "libhostgraph_mpi.so does not need libhostgraph.so.0"
    echo "$mneeded" | grep -q '^libmpi' || fail "libhostgraph_mpi.so does not need MPI's library"
    other=$(nm -D --defined-only "$libdir/libhostgraph_mpi.so.0" |
        awk '$2 != "A" && $3 !~ /^hg_mpi_.*@@HOSTGRAPH_MPI_0$/ {print $3}')
    [ -z "$other" ] || fail "libhostgraph_mpi.so exports non-API symbols: $other"
    runmpi() { "$mpiexec" "${mpiflags[@]}" -n 2 "$@"; }
    step "pkg-config --cflags --libs hostgraph_mpi: $(pkg-config --cflags --libs hostgraph_mpi)"
    # shellcheck disable=SC2046
    "$cc" "${cflags[@]}" "$here/mpi_consumer.c" -o "$tmp/mpi_pc" $(pkg-config --cflags --libs hostgraph_mpi)
    LD_LIBRARY_PATH=$libdir runmpi "$tmp/mpi_pc"
    step "find_package(hostgraph COMPONENTS mpi)"
    cmake -S "$here/consumer" -B "$tmp/cm_mpi" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" -DWITH_MPI=ON >/dev/null
    cmake --build "$tmp/cm_mpi" >/dev/null
    runmpi "$tmp/cm_mpi/mpi_consumer"
    runmpi "$tmp/cm_mpi/mpi_consumer_static"
fi

step "the installed command"
"$prefix/bin/hostgraph" run vector_add --param n=10000 --rounds 2 --residency all --quiet

step "a C scene plugin built against the installed library, run by the installed command"
saxpy=$prefix/share/hostgraph/examples/scenes/saxpy.c
[ -f "$saxpy" ] || fail "examples/scenes/saxpy.c is not installed"
# shellcheck disable=SC2046
"$cc" "${cflags[@]}" -shared -fPIC "$saxpy" -o "$tmp/libscene_saxpy.so" \
    $(pkg-config --cflags --libs hostgraph_scenes)
LD_LIBRARY_PATH=$libdir "$prefix/bin/hostgraph" list --scene-lib "$tmp/libscene_saxpy.so" >"$tmp/list.txt"
grep -q '^saxpy ' "$tmp/list.txt" || fail "hostgraph list --scene-lib does not show saxpy"
LD_LIBRARY_PATH=$libdir "$prefix/bin/hostgraph" run saxpy --scene-lib "$tmp/libscene_saxpy.so" \
    --rounds 2 --residency all --json "$tmp/saxpy.json" --quiet
grep -q '"golden": "pass"' "$tmp/saxpy.json" || fail "the plugin's report says no pass"
grep -q "\"scene_file\": \"$tmp/libscene_saxpy.so\"" "$tmp/saxpy.json" ||
    fail "the plugin's report does not name its file"

if [ -z "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "-- the installed Python package: skipped (no python3 with numpy)"
    exit 0
fi
check_python() { # prefix
    PYTHONPATH=$1/$pyrel PYTHONDONTWRITEBYTECODE=1 "$py" - "$1" <<'PY'
import os, sys
import numpy as np
import hostgraph as hg
prefix = sys.argv[1]
pkg = os.path.dirname(hg.__file__)
assert pkg.startswith(prefix), pkg
a = np.arange(10, dtype=np.float32)
c = np.zeros(10, np.float32)
with hg.SceneCase("vector_add", {"n": 10, "tile": 4}) as case, hg.Device("sim") as dev, hg.Runner(dev) as r:
    ab = hg.HostBuffer.wrap(a)  # memory is wrapped once; b is another view of it
    args = [hg.Arg("a", hg.IN, ab.tensor(), resident=True), hg.Arg("b", hg.IN, ab.tensor()),
            hg.Arg("c", hg.OUT, hg.HostBuffer.wrap(c).tensor()), hg.scalar("tile", 4)]
    r.run(case.callable, args)
assert (c == 2 * a).all(), c
rep = hg.run_scene("vector_add", params={"n": 1000}, rounds=2)
assert [x["golden"] for x in rep["rounds"]] == ["pass", "pass"]
print(f"   python: hostgraph {hg.__version__} from {pkg}: ok")
PY
    local m
    m=$(PYTHONPATH=$1/$pyrel PYTHONDONTWRITEBYTECODE=1 "$py" -m hostgraph list)
    [ "$m" = "$("$1/bin/hostgraph" list)" ] || fail "python3 -m hostgraph list differs from hostgraph list"
}
step "the installed Python package"
check_python "$prefix"
step "an installed scene file, run by the installed Python package"
PYTHONPATH=$prefix/$pyrel PYTHONDONTWRITEBYTECODE=1 HG_CACHE_DIR=$tmp/cache "$py" -m hostgraph run \
    "$prefix/share/hostgraph/examples/scenes/test_matmul.py" --rounds 2 --replay \
    --json "$tmp/matmul.json" --quiet
grep -q '"golden": "pass"' "$tmp/matmul.json" || fail "the installed scene file's report says no pass"
step "the Python package after the prefix moves"
mv "$prefix" "$tmp/moved"
check_python "$tmp/moved"
echo "install test: ok"
