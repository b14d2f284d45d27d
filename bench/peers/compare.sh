#!/bin/bash
# compare.sh: hostgraph and StarPU side by side on the same PoCL device, in
# one run (docs/PERFORMANCE.md, "hostgraph vs StarPU on the same PoCL
# device").  Builds the two StarPU peers into a temporary folder (never part
# of the CMake build or the tests), then runs, one after the other:
#   bgemm M=N=K=2048, tile 256, 5 rounds: `hostgraph run bgemm --residency all`
#     and starpu_bgemm (C restored each round on both sides);
#   10^4 empty OpenCL tasks, chain and independent: opencl_overhead and
#     starpu_overhead.
#
#     bench/peers/compare.sh <build dir> [grid tile rounds tasks]
#
# Needs libstarpu-dev (pkg-config starpu-1.3) and an OpenCL platform (PoCL).
set -euo pipefail
build=$(cd "${1:?usage: compare.sh <build dir> [grid tile rounds tasks]}" && pwd)
grid=${2:-8} tile=${3:-256} rounds=${4:-5} tasks=${5:-10000}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$tmp/pocl}
for peer in starpu_bgemm starpu_overhead; do
    cc -O2 -o "$tmp/$peer" "$here/$peer.c" $(pkg-config --cflags --libs starpu-1.3) -lOpenCL
done
starpu_env=(env STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 STARPU_SILENT=1)
echo "== $(date -u +%FT%TZ) on $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== hostgraph bgemm"
"$build/hostgraph" run bgemm --device opencl --param grid="$grid" --param tile="$tile" \
    --residency all --rounds "$rounds"
echo "== starpu bgemm"
"${starpu_env[@]}" "$tmp/starpu_bgemm" "$grid" "$tile" "$rounds"
echo "== per-task overhead"
"$build/opencl_overhead" "$tasks" opencl 5
"${starpu_env[@]}" "$tmp/starpu_overhead" "$tasks" 5
