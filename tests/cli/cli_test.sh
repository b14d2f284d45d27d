#!/usr/bin/env bash
# cli_test.sh: the `hostgraph` command's contract (issue 2): exit codes
# 0/2/3, the table and summary, --quiet, list, --help, --version, the --json
# and --trace files (and their paths checked before the first round), and
# every scene `list` prints running at its defaults.  Exit 1 (golden failure) has no honest trigger
# from the command line; scene_test.c covers it through the scene runner.
#
# usage: cli_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"

# ---- help, version, list
expect_rc "--version exits 0" 0 --version
check "--version prints the version" grep -Eq '^hostgraph [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out"
expect_rc "--help exits 0" 0 --help
check "--help shows usage" grep -q 'hostgraph run SCENE' "$TMP/out"
expect_rc "run --help exits 0" 0 run --help
check "run --help lists flags and params" grep -q -- '--residency' "$TMP/out"
check "run --help lists scene params" grep -q 'grid_k' "$TMP/out"
expect_rc "list exits 0" 0 list
SCENES=$(awk '{print $1}' "$TMP/out")
"$HG" run --help >"$TMP/help" 2>&1
check "list has one line per scene run --help describes" \
    test "$(wc -l <"$TMP/out")" -eq "$(grep -Ec '^  [a-z0-9_]+: ' "$TMP/help")"
check "list shows at least the two known scenes" test "$(wc -l <"$TMP/out")" -ge 2
check "list shows vector_add with defaults" grep -Eq '^vector_add .*n=1048576 tile=65536' "$TMP/out"
check "list shows bgemm with defaults" grep -Eq '^bgemm .*grid=4 tile=32 grid_k=0' "$TMP/out"

# ---- a good run: table, rows, summary
expect_rc "run vector_add exits 0" 0 run vector_add --rounds 3 --param n=4096 --param tile=512
HEADER='round  wall_ms    bind_ms    orch_ms    exec_ms    back_ms    rel_ms     h2d_bytes    d2h_bytes    golden'
check "table header is exact" test "$(head -n 1 "$TMP/out")" = "$HEADER"
check "a row per round, golden pass" test "$(grep -Ec '^[123] .* pass$' "$TMP/out")" -eq 3
check "rows show exact bytes" grep -Eq '^2 +([0-9.]+ +){6}32768 +16384 +pass$' "$TMP/out"
SUMMARY='^first round [0-9.]+ ms    later rounds avg ([0-9.]+ ms|n/a)    overall [0-9.]+ ms \(case [0-9.]+ ms, golden [0-9.]+ ms\)$'
check "summary line" grep -Eq "$SUMMARY" "$TMP/out"
check "summary has a later-rounds mean with 3 rounds" grep -Eq 'later rounds avg [0-9.]+ ms' "$TMP/out"
expect_rc "one round exits 0" 0 run vector_add --param n=100 --json "$TMP/one.json"
check "one round: later-rounds mean is n/a" grep -Eq 'later rounds avg n/a    overall' "$TMP/out"
check "one round: later_avg_ms is null in JSON" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["later_avg_ms"] is None and len(r["rounds"]) == 1, r
' "$TMP/one.json"
expect_rc "--quiet exits 0" 0 run bgemm --rounds 2 --quiet --param grid=2
check "--quiet prints only the summary" test "$(wc -l <"$TMP/out")" -eq 1
check "--quiet line is the summary" grep -Eq "$SUMMARY" "$TMP/out"
expect_rc "--skip-golden exits 0" 0 run vector_add --skip-golden --param n=1000 --residency off
check "--skip-golden marks rows skipped" grep -Eq '^1 .* skipped$' "$TMP/out"
expect_rc "--flag=value form" 0 run vector_add --rounds=2 --param=n=100 --device=sim:cores=2
expect_rc "bgemm on split cores" 0 run bgemm --rounds 2 --device sim:cube=1,vector=2

# ---- usage errors: exit 2
expect_rc "no command" 2
expect_rc "unknown command" 2 frobnicate
expect_rc "run without scene" 2 run
expect_rc "unknown scene" 2 run no_such_scene
check "unknown scene is named" grep -q no_such_scene "$TMP/err"
expect_rc "unknown flag" 2 run vector_add --fast
expect_rc "unknown param key" 2 run vector_add --param bogus=1
check "unknown param is named" grep -q bogus "$TMP/err"
expect_rc "bad param number" 2 run vector_add --param n=12abc
expect_rc "param out of range" 2 run bgemm --param tile=0
expect_rc "param without =" 2 run vector_add --param n
expect_rc "rounds 0" 2 run vector_add --rounds 0
expect_rc "rounds negative" 2 run vector_add --rounds -1
expect_rc "rounds not a number" 2 run vector_add --rounds many
expect_rc "--svg without compare" 2 run vector_add --svg "$TMP/x.svg"
expect_rc "--residency with compare" 2 compare vector_add --residency in
expect_rc "--trace with compare" 2 compare vector_add --trace "$TMP/x.json"
expect_rc "compare without scene" 2 compare
expect_rc "compare svg in a missing directory" 2 compare vector_add --svg "$TMP/nodir/x.svg"
check "compare: no table for a bad path" test ! -s "$TMP/out"
expect_rc "residency bogus" 2 run vector_add --residency sometimes
expect_rc "missing flag value" 2 run vector_add --rounds
expect_rc "two scenes" 2 run vector_add bgemm
# issue 25 item 19: a bad device spec is a usage error on every backend: a
# malformed sim spec, half of cube=/vector= (refused at parse, naming the
# key: cube=1 alone ran with no vector core and failed at round 1), and an
# OpenCL platform or device this machine lacks (exit 3 before).
expect_rc "sim spec with a bad key" 2 run vector_add --device sim:bogus=1
expect_rc "sim:cube=1 alone" 2 run vector_add --device sim:cube=1
check "sim:cube=1: names the key and the missing one" grep -q "cube=1 without vector=" "$TMP/err"
check "sim:cube=1: no round ran" test ! -s "$TMP/out"
expect_rc "sim:vector=2 alone" 2 run bgemm --device sim:vector=2
check "sim:vector=2: names the key" grep -q "vector=2 without cube=" "$TMP/err"
expect_rc "compare sim:cube=1 alone" 2 compare vector_add --device sim:cube=1
expect_rc "sim:cube=1,vector=0 stays a spec" 3 run vector_add --device sim:cube=1,vector=0
if "$HG" devices | grep -q '^opencl:platform='; then
    for spec in opencl:device=9 opencl:platform=9; do
        expect_rc "$spec (not on this machine)" 2 run vector_add --device "$spec"
        check "$spec: says what the machine has" grep -q "has [0-9]* OpenCL\|OpenCL platform 0 has" \
            "$TMP/err"
        expect_rc "compare $spec" 2 compare vector_add --device "$spec"
    done
else
    echo "     skipped: opencl:device=9 (no OpenCL device listed)"
fi
expect_rc "run --help for --device" 0 run --help
check "--device help names opencl" grep -q "opencl:platform=P,device=D" "$TMP/out"
check "--device help names the fault keys" grep -q "fail_alloc=K, fail_copy=K" "$TMP/out"

expect_rc "list with an unknown scene" 2 list extra
check "list extra: names the scene" grep -q "unknown scene 'extra'" "$TMP/err"
expect_rc "list with two scenes" 2 list bgemm vector_add

# ---- runtime errors: exit 3, one line
expect_rc "device alloc fault" 3 run bgemm --device sim:fail_alloc=1
check "runtime error is one line" test "$(wc -l <"$TMP/err")" -eq 1
check "an injected alloc fault says so (item 19)" \
    grep -q "out of device memory (an injected fault: fail_alloc=1 in --device 'sim:fail_alloc=1')" \
    "$TMP/err"
expect_rc "device copy fault, named" 3 run bgemm --device sim:cores=2,fail_copy=2
check "an injected copy fault says so" grep -q "(an injected fault: fail_copy=2 in --device" \
    "$TMP/err"
expect_rc "a real shortage names mem=, not a fault" 3 run bgemm --param grid=8 --param tile=128 \
    --device sim:mem=64K
check "a real shortage: no injected fault" test "$(grep -c "injected" "$TMP/err")" -eq 0
expect_rc "device copy fault" 3 run vector_add --param n=1000 --device sim:fail_copy=1
# bgemm makes 5 copies a round (A, B, C, config in; C back): the 6th is round 2's
# first upload, and round 1's trace must still be written
expect_rc "copy fault in round 2 keeps the trace" 3 run bgemm --rounds 3 --param tiles=2 \
    --param tile=8 --device sim:fail_copy=6 --trace "$TMP/failed-trace.json" --json "$TMP/failed.json"
check "trace of a failed run has round 1's stages" python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
stages = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "stage"]
assert any(e["name"] == "copy back" for e in stages), stages
' "$TMP/failed-trace.json"
check "a failed run still writes its JSON report" test -s "$TMP/failed.json"
expect_rc "bad device spec is a usage error" 2 run vector_add --device tpu
check "bad device spec is one line" test "$(wc -l <"$TMP/err")" -eq 1

# ---- output paths that cannot be written: exit 2 before any round, one line
# naming the path, no table printed, nothing created
mkdir "$TMP/adir"
expect_rc "json in a missing directory" 2 run vector_add --param n=100 \
    --json "$TMP/no/such/dir/out.json" --trace "$TMP/unused-trace.json"
check "missing directory: one line naming the path" \
    test "$(wc -l <"$TMP/err")" -eq 1 -a "$(grep -c "$TMP/no/such/dir/out.json" "$TMP/err")" -eq 1
check "missing directory: no round ran" test ! -s "$TMP/out"
check "missing directory: the trace was not created" test ! -e "$TMP/unused-trace.json"
expect_rc "json path is a directory" 2 run vector_add --param n=100 --json "$TMP/adir"
check "directory: one line naming the path" \
    test "$(wc -l <"$TMP/err")" -eq 1 -a "$(grep -c "'$TMP/adir'" "$TMP/err")" -eq 1
expect_rc "trace in a missing directory" 2 run vector_add --param n=100 \
    --trace "$TMP/nodir/trace.json" --json "$TMP/unused.json"
check "trace path is named" grep -q "trace '$TMP/nodir/trace.json'" "$TMP/err"
check "missing trace directory: the JSON was not created" test ! -e "$TMP/unused.json"
expect_rc "trace path is a directory" 2 run bgemm --trace "$TMP/adir"
check "trace directory: no round ran" test ! -s "$TMP/out"
expect_rc "json and trace the same file" 2 run vector_add --json "$TMP/same" --trace "$TMP/same"

# ---- the JSON report ("tiles" is the issue's spelling of bgemm's grid)
expect_rc "bgemm with json and trace" 0 run bgemm --rounds 3 --param tiles=2 --param tile=8 \
    --json "$TMP/out.json" --trace "$TMP/trace.json"
check "json fields present and typed" python3 - "$TMP/out.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
num = (int, float)
assert r["scene"] == "bgemm" and isinstance(r["device"], str) and r["residency"] == "off"
assert r["params"] == {"grid": 2, "tile": 8, "grid_k": 0}, r["params"]
assert len(r["rounds"]) == 3
for i, rd in enumerate(r["rounds"]):
    assert rd["round"] == i + 1
    for k in ("wall_ms", "bind_ms", "orch_ms", "exec_ms", "copyback_ms", "release_ms"):
        assert isinstance(rd[k], num) and rd[k] >= 0, k
    for k in ("h2d_bytes", "d2h_bytes", "h2d_copies", "d2h_copies"):
        assert isinstance(rd[k], int) and rd[k] >= 0, k
    # A, B, C are 16x16 f32, config is 4 x i64: all go in, C comes back.
    assert rd["h2d_bytes"] == 3 * 16 * 16 * 4 + 32 and rd["d2h_bytes"] == 16 * 16 * 4
    assert rd["golden"] == "pass"
for k in ("first_ms", "later_avg_ms", "overall_ms"):
    assert isinstance(r[k], num) and r[k] >= 0, k
assert r["overall_ms"] >= r["first_ms"]
EOF

# ---- the trace: a slice per task on device lanes, stage slices on the host
check "trace loads with task and stage slices" python3 - "$TMP/trace.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
events = t["traceEvents"] if isinstance(t, dict) else t
slices = [e for e in events if e.get("ph") == "X"]
lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
         if e.get("ph") == "M" and e["name"] == "thread_name"}
device_pids = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"] == "device"}
tasks = [e for e in slices if e["pid"] in device_pids]
# grid=2 (and grid_k = grid): 2*2*2 (i, j, k) GEMMs and as many ADDs, 3 rounds.
assert len(tasks) == 3 * 16, len(tasks)
assert {e["name"] for e in tasks} == {"gemm", "add"}
assert all((e["pid"], e["tid"]) in lanes for e in tasks)
host = [e for e in slices if e["pid"] not in device_pids]
names = {e["name"] for e in host}
assert "bind" in names and any(n.startswith("exec") for n in names), names
assert len(host) >= 3 * 4, len(host)
EOF

# ---- residency modes: every one passes, later rounds move what the mode implies
for mode in off pin in all; do
    expect_rc "bgemm --residency $mode exits 0" 0 run bgemm --rounds 3 --residency $mode \
        --json "$TMP/mode-$mode.json"
done
expect_rc "--verify exits 0" 0 run bgemm --rounds 3 --residency all --verify
expect_rc "pin run for its setup line" 0 run bgemm --rounds 2 --residency pin
check "pin prints its setup line" grep -Eq '^setup: [0-9.]+ ms, 131072 bytes host -> device' \
    "$TMP/out"
check "pin summary has setup" grep -Eq 'setup [0-9.]+ ms \(131072 bytes\)$' "$TMP/out"
check "mode JSON: residency fields and bytes per mode" python3 - "$TMP" <<'EOF'
import json, sys
MAT, CFG = 128 * 128 * 4, 32
want_h2d = {"off": 3 * MAT + CFG, "pin": MAT + CFG, "in": MAT, "all": MAT}
for mode, h2d in want_h2d.items():
    r = json.load(open(f"{sys.argv[1]}/mode-{mode}.json"))
    assert r["residency"] == mode and r["verify"] is False
    for rd in r["rounds"]:
        for k in ("resident_hits", "resident_bytes_skipped", "stale_uploads",
                  "resident_staged", "evictions", "device_allocs"):
            assert isinstance(rd[k], int) and rd[k] >= 0, (mode, k)
    later = r["rounds"][1:]
    assert all(rd["h2d_bytes"] == h2d for rd in later), (mode, [rd["h2d_bytes"] for rd in later])
    assert all(rd["device_allocs"] == 0 for rd in later), mode
    assert ("setup_ms" in r) == (mode == "pin"), mode
    if mode == "pin":
        assert r["setup_h2d_bytes"] == 2 * MAT and r["setup_ms"] > 0
EOF

# ---- compare: a row per mode, every mode's report in JSON, an SVG
expect_rc "compare bgemm exits 0" 0 compare bgemm --rounds 3 --json "$TMP/cmp.json" \
    --svg "$TMP/cmp.svg"
check "compare prints a row per mode" test "$(grep -Ec '^(off|pin|in|all) ' "$TMP/out")" -eq 4
check "compare header" grep -q '^mode  setup_ms  first_ms' "$TMP/out"
check "compare JSON has every mode's report" python3 - "$TMP/cmp.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["scene"] == "bgemm" and isinstance(r["device"], str) and r["params"]["grid"] == 4
assert sorted(r["modes"]) == ["all", "in", "off", "pin"]
for mode, rep in r["modes"].items():
    assert rep["residency"] == mode and len(rep["rounds"]) == 3
    assert rep["params"] == r["params"], (mode, rep["params"])
    assert all(rd["golden"] == "pass" for rd in rep["rounds"])
    assert rep["overall_ms"] >= rep["first_ms"]
assert r["modes"]["pin"]["setup_h2d_bytes"] == 2 * 128 * 128 * 4
EOF
check "compare SVG: a series per mode, axes labelled" python3 - "$TMP/cmp.svg" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg"
assert len(root.findall(ns + "polyline")) == 4
texts = [t.text for t in root.iter(ns + "text")]
assert "round" in texts and any("wall time" in (t or "") for t in texts)
assert all(m in texts for m in ("off", "pin", "in", "all"))
EOF

# ---- --replay: later rounds replay the first's graph; the table and JSON say which
expect_rc "run --replay exits 0" 0 run bgemm --rounds 3 --residency all --replay --json "$TMP/rp.json"
check "--replay adds the replayed column" \
    test "$(head -n 1 "$TMP/out")" = "${HEADER%golden}replayed  golden"
check "--replay: round 1 orchestrates, 2 and 3 replay, golden passes" \
    test "$(grep -Ec '^1 .* no +pass$' "$TMP/out")$(grep -Ec '^[23] .* yes +pass$' "$TMP/out")" = 12
check "--replay: JSON has replay, replayed, h2d_ms and d2h_ms" python3 - "$TMP/rp.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["replay"] is True
assert [rd["replayed"] for rd in r["rounds"]] == [0, 1, 1], r["rounds"]
assert all(rd["h2d_ms"] >= 0 and rd["d2h_ms"] >= 0 for rd in r["rounds"])
EOF
expect_rc "run --replay --verify exits 0" 0 run qwen3_decode --rounds 2 --residency all --replay --verify
check "--replay --verify replays round 2" grep -Eq '^2 .* yes +pass$' "$TMP/out"
expect_rc "compare --replay exits 0" 0 compare bgemm --rounds 2 --repeat 1 --replay --json "$TMP/cr.json"
check "compare --replay: every mode replays its later rounds" python3 - "$TMP/cr.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for mode, rep in r["modes"].items():
    assert rep["replay"] is True, mode
    assert [rd["replayed"] for rd in rep["rounds"]] == [0, 1], (mode, rep["rounds"])
EOF
expect_rc "run without --replay: no column" 0 run vector_add --rounds 1 --param n=100
check "without --replay the header is unchanged" test "$(head -n 1 "$TMP/out")" = "$HEADER"

# ---- every scene `list` prints, at its defaults: 2 rounds, golden pass, JSON
for scene in $SCENES; do
    expect_rc "$scene compare at defaults exits 0" 0 compare "$scene" --rounds 2
    expect_rc "$scene at defaults exits 0" 0 run "$scene" --rounds 2 --json "$TMP/$scene.json"
    check "$scene at defaults: 2 rows, golden pass" test "$(grep -Ec '^[12] .* pass$' "$TMP/out")" -eq 2
    check "$scene at defaults: JSON parses, 2 passing rounds" python3 - "$TMP/$scene.json" "$scene" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["scene"] == sys.argv[2], r["scene"]
assert [rd["round"] for rd in r["rounds"]] == [1, 2]
assert all(rd["golden"] == "pass" for rd in r["rounds"])
assert all(isinstance(rd["release_ms"], (int, float)) for rd in r["rounds"])
assert isinstance(r["later_avg_ms"], (int, float))
EOF
done

finish
