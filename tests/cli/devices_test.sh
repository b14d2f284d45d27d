#!/usr/bin/env bash
# devices_test.sh: `hostgraph devices` lists the sim and every OpenCL device
# (or says why there is none), takes no arguments, and each OpenCL spec it
# prints opens and runs vector_add with golden passing.  Without an OpenCL
# platform it prints "skipped: no OpenCL platform" for the OpenCL part.
#
# usage: devices_test.sh PATH/TO/hostgraph
set -u

HG=${1:?usage: devices_test.sh PATH/TO/hostgraph}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$TMP/pocl}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

"$HG" devices >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 0 ] && ok "devices exits 0" || bad "devices exits $rc: $(cat "$TMP/err")"
grep -q '^sim ' "$TMP/out" && ok "devices lists the sim" || bad "no sim line: $(cat "$TMP/out")"
grep -q '^opencl' "$TMP/out" && ok "devices has an opencl line" || bad "no opencl line"

"$HG" devices extra >/dev/null 2>"$TMP/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "devices takes no arguments" "$TMP/err" &&
    ok "devices refuses arguments (exit 2)" || bad "devices extra: exit $rc"

specs=$(grep -o '^opencl:platform=[0-9]*,device=[0-9]*' "$TMP/out")
if [ -z "$specs" ]; then
    echo "     skipped: no OpenCL platform ($(grep '^opencl' "$TMP/out"))"
    [ "${HG_REQUIRE_OPENCL:-0}" = 1 ] && bad "HG_REQUIRE_OPENCL=1 but no OpenCL device listed"
fi
for spec in $specs; do
    grep "^$spec " "$TMP/out" | grep -Eq 'max allocation [0-9]+ MiB, (out-of-order queue|in-order queues)$' &&
        ok "$spec: its max allocation and queue shape" || bad "$spec line: $(grep "^$spec " "$TMP/out")"
    if "$HG" run vector_add --device "$spec" --param n=3000 --param tile=700 --rounds 2 \
        --quiet >"$TMP/run" 2>&1; then
        ok "vector_add runs on $spec"
    else
        bad "vector_add on $spec: $(tail -3 "$TMP/run")"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
