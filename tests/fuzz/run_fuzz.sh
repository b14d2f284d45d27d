#!/usr/bin/env bash
# Fuzzes every libFuzzer target for a while, as CI does after the tests:
# builds the tree with clang (build-fuzz, -DHG_FUZZ=ON: ASan + UBSan +
# coverage, -Werror like every build; the fuzz targets only), then runs each build-fuzz/fuzz_<name>
# for SECONDS (default 60) on a copy of its corpus tests/fuzz/corpus/<name>
# in a temporary directory (the repository is never written).  A crash keeps
# its input as build-fuzz/crash-<name>-*: replay it with
#     build-fuzz/fuzz_<name> build-fuzz/crash-<name>-...   (or build/replay_<name>)
# and HG_FUZZ_TRACE=1 to see the operations of fuzz_residency.
# Usage: bash tests/fuzz/run_fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
jobs=$(nproc 2>/dev/null || echo 2)
command -v clang >/dev/null || { echo "run_fuzz.sh: clang is not installed" >&2; exit 1; }

CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_FUZZ=ON >/dev/null
# Only the libFuzzer binaries (and the libraries they link): the rest of the
# tree is built and tested by tests/run_all.sh, and building it again with
# clang cost CI about two minutes.
targets=()
for src in tests/fuzz/fuzz_*.c; do
    targets+=(--target "$(basename "$src" .c)")
done
cmake --build build-fuzz -j"$jobs" "${targets[@]}" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fuzz_one() { # target name: runs it, leaves its log and exit status in $work
    local target=$1 name=$2 rc=0
    # -len_control=0: the residency target needs long inputs from the start.
    build-fuzz/"$target" "$work/$name" -max_total_time="$seconds" -len_control=0 \
        -max_len=1024 -print_final_stats=1 -artifact_prefix="build-fuzz/crash-$name-" \
        >"$work/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$name.rc"
}

# The targets run $jobs at a time (one process each), so CI spends SECONDS
# per batch of targets, not per target.
names=()
for src in tests/fuzz/fuzz_*.c; do
    target=$(basename "$src" .c)
    name=${target#fuzz_}
    names+=("$name")
    mkdir -p "$work/$name"
    cp tests/fuzz/corpus/"$name"/* "$work/$name"/
    echo "== $target: ${seconds} s from $(ls "$work/$name" | wc -l) inputs"
    fuzz_one "$target" "$name" &
    if [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; then
        wait -n || true
    fi
done
wait
status=0
for name in "${names[@]}"; do
    if [ "$(cat "$work/$name.rc")" != 0 ]; then
        echo "== fuzz_$name FAILED:"
        tail -n 40 "$work/$name.log"
        status=1
    else
        echo "== fuzz_$name:"
        grep -E 'stat::(number_of_executed_units|new_units_added)' "$work/$name.log"
    fi
done
exit $status
