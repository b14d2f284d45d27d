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

# issue 25 item 18: with a cold PoCL cache ($TMP/pocl is new), --quiet
# prints the summary and nothing on stderr: no compiler chatter ("104
# warnings generated."); -v shows each program build's log.
for spec in $(echo "$specs" | head -1); do
    for scene in bgemm qwen3_decode; do
        # (under ASan, LeakSanitizer's table of PoCL's suppressed leaks is not ours)
        LSAN_OPTIONS="${LSAN_OPTIONS:-}:print_suppressions=0" \
            "$HG" run "$scene" --device "$spec" --quiet >"$TMP/run" 2>"$TMP/err"
        [ "$?" -eq 0 ] && [ ! -s "$TMP/err" ] && [ "$(wc -l <"$TMP/run")" -eq 1 ] &&
            ok "$scene on $spec --quiet, cold cache: nothing on stderr" ||
            bad "$scene on $spec --quiet: stderr $(head -c 300 "$TMP/err")"
    done
    # The build has its own field and span, out of orch_ms: round 1 builds
    # (a cold cache: $TMP/pocl-b is new), round 2 builds nothing.
    POCL_CACHE_DIR="$TMP/pocl-b" "$HG" run vector_add --device "$spec" --rounds 2 --quiet \
        --json "$TMP/build.json" --trace "$TMP/build.trace" >"$TMP/run" 2>"$TMP/err"
    python3 - "$TMP/build.json" "$TMP/build.trace" <<'PY' && ok "build_ms: round 1 only, with a span" ||
import json, sys
r = json.load(open(sys.argv[1]))
first, second = r["rounds"]
assert first["build_ms"] > 0 and second["build_ms"] == 0, (first["build_ms"], second["build_ms"])
assert first["build_ms"] + first["orch_ms"] <= first["wall_ms"], first
names = [e.get("name") for e in json.load(open(sys.argv[2]))["traceEvents"]]
assert names.count("build program") >= 1, sorted(set(names))
PY
        bad "build_ms: $(head -c 300 "$TMP/err")"
    grep -Eq 'programs built [0-9.]+ ms$' "$TMP/run" && ok "the summary gives the build time" ||
        bad "summary: $(cat "$TMP/run")"
    POCL_CACHE_DIR="$TMP/pocl-v" "$HG" run vector_add --device "$spec" --quiet -v \
        >"$TMP/run" 2>"$TMP/err"
    grep -q "^hostgraph: OpenCL build of the program of kernel entry 'vector_add'" "$TMP/err" &&
        ok "-v: the build's log on stderr" || bad "-v: stderr $(head -c 300 "$TMP/err")"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
