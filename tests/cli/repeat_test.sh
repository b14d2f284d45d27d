#!/usr/bin/env bash
# repeat_test.sh: measuring honestly (the issue "never lose a file, stop
# cleanly, measure honestly", item 6).  compare repeats each mode's rounds
# (--repeat, default 3) interleaved mode by mode on fresh devices, reports
# the median of the later-round averages with its min-max spread, and calls a
# change "within noise" when the spreads overlap; --rounds 1 is refused.  run
# takes --repeat and --warmup too.  Checks shapes and consistency, never
# timings.
#
# usage: repeat_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"

expect_rc "compare --rounds 1 is refused" 2 compare vector_add --rounds 1
check "compare --rounds 1: says why" grep -q "at least 2" "$TMP/err"
expect_rc "compare --repeat 0 is refused" 2 compare vector_add --repeat 0

expect_rc "compare at its defaults" 0 compare bgemm --param grid=2 --param tile=8 \
    --json "$TMP/cmp.json"
check "compare: the header says negative means faster" grep -q "negative means faster" "$TMP/out"
check "compare: a verdict per mode" \
    test "$(grep -Ec '^(off|pin|in|all) .*(faster|slower|within noise)$' "$TMP/out")" -eq 4
check "compare JSON: repeat, medians, spreads and verdicts" python3 - "$TMP/cmp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["repeat"] == 3, r.get("repeat")
assert sorted(r["modes"]) == ["all", "in", "off", "pin"]
for mode, m in r["modes"].items():
    assert len(m["rounds"]) >= 3, (mode, len(m["rounds"]))  # compare's default rounds
    lo, med, hi = m["later_avg_ms_min"], m["later_avg_ms_median"], m["later_avg_ms_max"]
    assert 0 <= lo <= med <= hi, (mode, lo, med, hi)
    assert m["verdict"] in ("faster", "slower", "within noise"), m["verdict"]
    off = r["modes"]["off"]
    width = max(hi - lo, off["later_avg_ms_max"] - off["later_avg_ms_min"])
    if off["later_avg_ms_min"] - hi > width:
        want = "faster"
    elif lo - off["later_avg_ms_max"] > width:
        want = "slower"
    else:
        want = "within noise"  # the spreads overlap, or lie closer than their width
    assert m["verdict"] == want, (mode, m["verdict"], want)
PY

# ---- issue 25 item 16: with fewer than 3 repeats a mode has no verdict
# (a single pair of runs printed "pin +1.2% slower"): the table says n/a and
# why, the JSON has "verdict": null and "no_verdict" saying why.
for n in 1 2; do
    expect_rc "compare --repeat $n" 0 compare vector_add --param n=1000 --repeat "$n" \
        --json "$TMP/cmp$n.json"
    check "compare --repeat $n: no verdict in the table" \
        test "$(grep -Ec '(faster|slower|within noise)$' "$TMP/out")" -eq 0
    check "compare --repeat $n: every mode's verdict is n/a" \
        test "$(grep -Ec '^(off|pin|in|all) .* n/a$' "$TMP/out")" -eq 4
    check "compare --repeat $n: the table says why" \
        grep -q "^no verdict: a mode measured $n time.* a verdict needs --repeat 3 or more" "$TMP/out"
    check "compare --repeat $n: JSON verdicts null, no_verdict says why" python3 - "$TMP/cmp$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert all(m["verdict"] is None for m in r["modes"].values()), r["modes"]
assert "--repeat 3" in r["no_verdict"], r["no_verdict"]
PY
done
check "compare at its defaults: no_verdict is null" python3 -c '
import json, sys; assert json.load(open(sys.argv[1]))["no_verdict"] is None' "$TMP/cmp.json"

expect_rc "run --repeat 3 --warmup 2" 0 run vector_add --param n=1000 --rounds 3 --repeat 3 \
    --warmup 2 --json "$TMP/run.json"
check "run: the summary has the median and spread" grep -Eq 'median [0-9.]+ ms \(min [0-9.]+, max [0-9.]+, 3 repeats\)' \
    "$TMP/out"
check "run JSON: repeat and the spread at the top level" python3 - "$TMP/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert "verdict" not in r, r  # run compares nothing
assert r["repeat"] == 3 and r["warmup"] == 2, r
assert len(r["rounds"]) == 3
assert 0 <= r["later_avg_ms_min"] <= r["later_avg_ms_median"] <= r["later_avg_ms_max"]
PY
expect_rc "run --repeat 0 is refused" 2 run vector_add --repeat 0

# ---- item 7: overall is defined, and its parts are reported: case_ms
# (making the case) and golden_ms (every golden check) beside the rounds
expect_rc "run --help" 0 run --help
check "--help defines overall" grep -q "overall: the whole command" "$TMP/out"
expect_rc "run for case and golden times" 0 run bgemm --rounds 3 --json "$TMP/parts.json"
check "summary: overall with case and golden" \
    grep -Eq 'overall [0-9.]+ ms \(case [0-9.]+ ms, golden [0-9.]+ ms\)' "$TMP/out"
check "JSON: case_ms and golden_ms" python3 - "$TMP/parts.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["case_ms"] > 0 and r["golden_ms"] > 0, r
walls = sum(x["wall_ms"] for x in r["rounds"])
assert r["overall_ms"] >= r["case_ms"] + r["golden_ms"] + walls, r
PY

finish
