#!/usr/bin/env bash
# usage_test.sh: usage errors and small contracts of the command (the issue
# "never lose a file, stop cleanly, measure honestly", item 9): one-line
# errors pointing at --help, a suggestion for a misspelt scene, a device
# spec's mem= named when the device is too small, --json - on stdout with the
# table on stderr, -- ending flags, list's preset params and its --help, and
# columns as wide as their widest value.
#
# usage: usage_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"

# ---- a usage error is its line and a pointer to --help, not the whole usage
expect_rc "unknown flag exits 2" 2 run vector_add --fast
check "unknown flag: two lines" test "$(wc -l <"$TMP/err")" -eq 2
check "unknown flag: the message" grep -q "^hostgraph: unknown flag '--fast'$" "$TMP/err"
check "unknown flag: see run --help" grep -q "^see 'hostgraph run --help'$" "$TMP/err"
expect_rc "compare usage error exits 2" 2 compare vector_add --rounds 0
check "compare: see compare --help" grep -q "^see 'hostgraph compare --help'$" "$TMP/err"
expect_rc "unknown command exits 2" 2 frobnicate
check "unknown command: see --help" grep -q "^see 'hostgraph --help'$" "$TMP/err"
check "unknown command: no usage dump" test "$(wc -l <"$TMP/err")" -eq 2

# ---- a misspelt scene gets a suggestion
expect_rc "run bgem exits 2" 2 run bgem
check "run bgem suggests bgemm" grep -q "did you mean 'bgemm'" "$TMP/err"
expect_rc "run zzzz exits 2" 2 run zzzz
check "run zzzz suggests nothing" test "$(grep -c 'did you mean' "$TMP/err")" -eq 0

# ---- a device too small for the case names the spec's mem=
expect_rc "sim:mem=10 exits 3" 3 run vector_add --param n=100 --device sim:mem=10
check "sim:mem=10: names mem=10" grep -q "mem=10" "$TMP/err"
check "sim:mem=10: one line" test "$(wc -l <"$TMP/err")" -eq 1

# ---- --json - : the report on stdout, the table on stderr
expect_rc "--json - exits 0" 0 run vector_add --param n=100 --rounds 2 --json -
check "--json -: stdout is the JSON report" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["scene"] == "vector_add"' "$TMP/out"
check "--json -: the table is on stderr" grep -q '^round ' "$TMP/err"
expect_rc "compare --json - exits 0" 0 compare vector_add --param n=100 --rounds 3 --json -
check "compare --json -: stdout is the JSON report" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert "modes" in r' "$TMP/out"

# ---- -- ends the flags
expect_rc "-- ends flags" 0 run --rounds 2 -- vector_add
check "-- ends flags: ran the scene" grep -Eq '^2 ' "$TMP/out"
expect_rc "a flag after -- is a scene name" 2 run vector_add -- --rounds
check "after --, --rounds is an argument" grep -q "unexpected argument '--rounds'" "$TMP/err"

# ---- list: a 0 that means "the preset's value" shows as preset; list --help
expect_rc "list exits 0" 0 list
check "list: qwen3_decode layers=preset" grep -Eq '^qwen3_decode .*layers=preset' "$TMP/out"
check "list: paged_attention batch=preset" grep -Eq '^paged_attention .*batch=preset' "$TMP/out"
check "list: bgemm grid_k=0 stays a number" grep -Eq '^bgemm .*grid_k=0' "$TMP/out"
check "list: descriptions start in one column" python3 - "$TMP/out" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
starts = {len(l.split()[0]) + len(l[len(l.split()[0]):]) - len(l[len(l.split()[0]):].lstrip()) for l in lines}
assert len(starts) == 1, starts
PY
expect_rc "list --help exits 0" 0 list --help
check "list --help says what list prints" grep -q "hostgraph list" "$TMP/out"
# issue 25 item 19: list SCENE shows the scene's params with their help,
# defaults and ranges (list bgemm was refused); a typo gets a suggestion.
expect_rc "list bgemm exits 0" 0 list bgemm
check "list bgemm: the scene's line" grep -q '^bgemm: C += A x B' "$TMP/out"
check "list bgemm: grid's default, range and help" \
    grep -Eq '^    grid +default 4, range \[1, 16\]: tiles per side' "$TMP/out"
check "list bgemm: a line per param" test "$(grep -c '^    [a-z_]* *default' "$TMP/out")" -eq 3
expect_rc "list qwen3_decode exits 0" 0 list qwen3_decode
check "list qwen3_decode: a named param lists its names" \
    grep -Eq '^    preset +default tiny, one of tiny, real: ' "$TMP/out"
check "list qwen3_decode: a preset's 0 says so" \
    grep -Eq "^    layers +default 0 \(the preset's\), range \[0, 40\]: decoder layers" "$TMP/out"
for s in $("$HG" list | cut -d' ' -f1); do
    check "list $s: every param has its line" \
        test "$("$HG" list "$s" | grep -c '^    [a-z_]* *default')" -eq \
        "$("$HG" list | grep "^$s " | sed 's/.*\[//' | wc -w)"
done
expect_rc "list bgem: a typo" 2 list bgem
check "list bgem: suggests bgemm" grep -q "did you mean 'bgemm'" "$TMP/err"

# ---- columns as wide as their widest value
expect_rc "compare for widths" 0 compare vector_add --param n=100 --rounds 3
check "compare: every row's columns start under the header's" python3 - "$TMP/out" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
head = next(i for i, l in enumerate(lines) if l.startswith("mode "))
starts = [m.start() for m in re.finditer(r"\S+", lines[head])]
for l in lines[head + 1:head + 5]:
    got = [m.start() for m in re.finditer(r"\S+", l)]
    assert got[:len(starts)] == starts[:len(got)], (l, starts, got)
PY

expect_rc "run for widths" 0 run vector_add --param n=100 --rounds 2
check "run: every row's columns start under the header's" python3 - "$TMP/out" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
for l in lines[1:3]:
    assert [m.start() for m in re.finditer(r"\S+", l)] == starts, (l, starts)
PY

# ---- item 8: the JSON report says what produced it
expect_rc "run for provenance" 0 run vector_add --param n=100 --json "$TMP/prov.json"
"$HG" --version >"$TMP/version"
check "JSON: schema, version, device, kernels, host" python3 - "$TMP/prov.json" "$TMP/version" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
version = open(sys.argv[2]).read().split()[1]
assert r["schema"] == 3 and r["hostgraph_version"] == version, r
assert r["scene_file"] is None and r["scene_class"] is None, r
assert r["device"].startswith("sim:cores="), r["device"]
assert r["kernels"] in ("avx512bf16", "avx2", "portable"), r["kernels"]
h = r["host"]
assert isinstance(h["cpu"], str) and h["cpu"], h
assert h["cores"] == os.cpu_count(), h
assert h["memory_bytes"] > 1 << 20, h
PY
HG_KERNELS=portable "$HG" run vector_add --param n=100 --json "$TMP/port.json" >/dev/null 2>&1
check "JSON: HG_KERNELS=portable says portable" python3 -c '
import json, sys; assert json.load(open(sys.argv[1]))["kernels"] == "portable"' "$TMP/port.json"
expect_rc "compare for provenance" 0 compare vector_add --param n=100 --json "$TMP/cprov.json"
check "compare JSON: schema and host at the top" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["schema"] == 3 and r["host"]["cores"] > 0' \
    "$TMP/cprov.json"

finish
