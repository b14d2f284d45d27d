#!/usr/bin/env bash
# Runs every test hostgraph has, the way CI does:
#   1. the clang-format check;
#   2. the normal build and its C and command tests (ctest);
#   3. the Python package's tests (pytest, tests/python, with Debian's
#      /usr/bin/python3) and the install test (tests/install: install into a
#      temporary prefix, build outside programs with pkg-config and
#      find_package, run them, import the installed Python package);
#   4. the C suite again built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   5. the C suite again built with ThreadSanitizer (nearly every test
#      starts threads: the sim's cores, runners sharing a device), less four
#      of the command's single-threaded tests (named in that step).
# The mpi tests (label mpi, tests/mpi: built when CMake finds MPI) run in
# steps 2, 4 and 5 alike, each as 2 and 4 local ranks under mpiexec: under
# ASan with tests/sanitizers/openmpi.supp for Open MPI's own leaks; under
# TSan as they are (Open MPI 4.1 is not instrumented, and its calls from our
# core threads are ordered by the scheduler's locks, which TSan sees).
# Usage: bash tests/run_all.sh        (from the repository root; a few minutes on 2 cores)
# The residency model test's soak (2M operations) runs only on request:
#   ctest --test-dir build -L soak
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

# Each step prints its wall time when it ends ("-- NAME: N s"), so a CI log
# says what each pass cost (README, "What the test command runs").
step_name=
step_start=$SECONDS
step() { # name: ends the running step, printing its time, and starts this one
    if [ -n "$step_name" ]; then echo "-- $step_name: $((SECONDS - step_start)) s"; fi
    step_name=$1
    step_start=$SECONDS
    if [ -n "$step_name" ]; then echo "== $step_name"; fi
}

build() { # dir, extra cmake args...
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j"$jobs" >/dev/null
}

step "clang-format"
if command -v clang-format >/dev/null; then
    git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
    echo "format ok"
else
    echo "clang-format not installed: skipped"
fi

step "build and test (RelWithDebInfo)"
build build
ctest --test-dir build --output-on-failure -j"$jobs" -LE 'soak|python|install'

step "Python package (pytest) and install test"
ctest --test-dir build --output-on-failure -j"$jobs" -L 'python|install'

step "AddressSanitizer + UndefinedBehaviorSanitizer"
# intercept_tls_get_addr=0: see HG_ASAN_TLS_OPTION in CMakeLists.txt (a
# sanitizer runtime bug that crashes the leak check on dlopened TLS).
build build-asan -DHG_SANITIZE=address,undefined
ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE soak

step "ThreadSanitizer"
build build-tsan -DHG_SANITIZE=thread
# TSan needs a low-entropy address space on kernels with high mmap randomness.
tsan_prefix=()
if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
    tsan_prefix=(setarch "$(uname -m)" -R)
fi
# The command's argument, file and compare tests (single-threaded code over
# the same runtime the other tests cover) run in steps 2 and 4, not here:
# under TSan they took ~7 of its minutes; cli_test (signals, the stop thread)
# and tp_test still run.
"${tsan_prefix[@]}" ctest --test-dir build-tsan --output-on-failure -j"$jobs" -LE soak \
    -E '^cli/(readme|usage|files|repeat)_test$'
step ""
echo "-- all: $SECONDS s"
