#!/bin/bash
# compare.sh: hostgraph and StarPU side by side on the same PoCL device, in
# one run (docs/PERFORMANCE.md, "hostgraph vs StarPU on the same PoCL
# device").  Builds the two StarPU peers into a temporary folder (never part
# of the CMake build or the tests), then alternates, `passes` times each:
#   bgemm M=N=K=grid*tile, 5 rounds: `hostgraph run bgemm --residency all`
#     and starpu_bgemm (C restored each round on both sides; the same
#     OpenCL kernels, scenes/kernels/gemm_cl.h);
#   10^4 empty OpenCL tasks, chain and independent: opencl_overhead and
#     starpu_overhead, `reps` timed repetitions each.
# The load average (uptime) is printed before every command: the host is
# shared, so only figures taken side by side compare.
#
#     bench/peers/compare.sh <build dir> [grid tile rounds tasks passes reps what]
#
# (defaults 8 256 5 10000 2 9 all; what: all, bgemm or overhead).  Needs
# libstarpu-dev (pkg-config starpu-1.3) and an OpenCL platform (PoCL).
set -euo pipefail
usage="usage: compare.sh <build dir> [grid tile rounds tasks passes reps all|bgemm|overhead]"
build=$(cd "${1:?$usage}" && pwd)
grid=${2:-8} tile=${3:-256} rounds=${4:-5} tasks=${5:-10000} passes=${6:-2} reps=${7:-9}
what=${8:-all}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$tmp/pocl}
for peer in starpu_bgemm starpu_overhead; do
    cc -O2 -I"$here/../../scenes/kernels" -o "$tmp/$peer" "$here/$peer.c" \
        $(pkg-config --cflags --libs starpu-1.3) -lOpenCL
done
starpu_env=(env STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 STARPU_SILENT=1)
load() { echo "== $1 at $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"; }
echo "== $(nproc) cores, commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
for pass in $(seq "$passes"); do
    if [ "$what" != overhead ]; then
        load "pass $pass: hostgraph bgemm"
        "$build/hostgraph" run bgemm --device opencl --param grid="$grid" --param tile="$tile" \
            --residency all --rounds "$rounds"
        load "pass $pass: starpu bgemm"
        "${starpu_env[@]}" "$tmp/starpu_bgemm" "$grid" "$tile" "$rounds"
    fi
    if [ "$what" != bgemm ]; then
        load "pass $pass: hostgraph per-task overhead"
        "$build/opencl_overhead" "$tasks" opencl "$reps"
        load "pass $pass: starpu per-task overhead"
        "${starpu_env[@]}" "$tmp/starpu_overhead" "$tasks" "$reps"
    fi
done
load end
