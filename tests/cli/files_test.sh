#!/usr/bin/env bash
# files_test.sh: the command as users live with it (the issue "never lose a
# file, stop cleanly, measure honestly"): report files are written whole or
# not at all and never remove what the program did not create; an output
# path that cannot be written stops the command before any round.
#
# usage: files_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"

# no_temp DIR: no temporary file was left behind in DIR.
no_temp() { [ -z "$(find "$1" -maxdepth 1 -name '.*.tmp' -print -quit)" ]; }

# ---- item 1: a failed write keeps the old file and leaves no partial one.
# A file-size limit makes every write past 1 KiB fail (EFBIG, SIGXFSZ ignored).
mkdir "$TMP/keep"
for flag in json trace; do
    echo OLD >"$TMP/keep/old.$flag"
    (
        trap '' XFSZ
        ulimit -f 1
        exec "$HG" run bgemm --rounds 20 --param grid=2 --param tile=8 \
            "--$flag" "$TMP/keep/old.$flag"
    ) >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "--$flag: a failed write exits 3 (got $rc)" test "$rc" -eq 3
    check "--$flag: a failed write keeps the old file" test "$(cat "$TMP/keep/old.$flag")" = OLD
    check "--$flag: a failed write names the path" grep -q "$TMP/keep/old.$flag" "$TMP/err"
done
echo OLD >"$TMP/keep/old.svg"
(
    trap '' XFSZ
    ulimit -f 1
    exec "$HG" compare bgemm --rounds 20 --param grid=2 --param tile=8 \
        --svg "$TMP/keep/old.svg"
) >"$TMP/out" 2>"$TMP/err"
check "--svg: a failed write keeps the old file" test "$(cat "$TMP/keep/old.svg")" = OLD
check "failed writes leave no temporary file" no_temp "$TMP/keep"

# A write into a device that fails (/dev/full) never removes the path given:
# here a link to it, so the test never risks the device node itself.
if [ -w /dev/full ]; then
    ln -s /dev/full "$TMP/full"
    expect_rc "--json into /dev/full exits 3" 3 run vector_add --param n=100 --json "$TMP/full"
    check "--json /dev/full: the link is kept" test -L "$TMP/full"
    check "--json /dev/full: the device is kept" test -c /dev/full
fi
# A good write replaces the old file whole, through a link to it too.
echo OLD >"$TMP/keep/real.json"
ln -s real.json "$TMP/keep/link.json"
expect_rc "a good write exits 0" 0 run vector_add --param n=100 --json "$TMP/keep/link.json"
check "a good write replaces the file a link names" python3 -c '
import json, sys; json.load(open(sys.argv[1]))' "$TMP/keep/real.json"
check "a good write keeps the link" test -L "$TMP/keep/link.json"
check "a good write leaves no temporary file" no_temp "$TMP/keep"
"$HG" run vector_add --param n=100 --json /dev/stdout --quiet 2>"$TMP/err" | cat >"$TMP/piped"
check "--json into a pipe: exit 0" test "${PIPESTATUS[0]}" -eq 0
check "--json into a pipe: the report arrives" grep -q '"scene": "vector_add"' "$TMP/piped"

# ---- issue 25 item 13: a report written over a file keeps its mode (and
# its group, here one of ours), for --json, --trace and --svg alike; a new
# file gets the umask's mode.
mkdir "$TMP/mode"
for m in 600 444 640; do
    for flag in json trace; do
        f="$TMP/mode/$m.$flag"
        echo OLD >"$f"
        chmod "$m" "$f"
        expect_rc "--$flag over a $m file" 0 run vector_add --param n=100 "--$flag" "$f"
        check "--$flag over a $m file: the mode stays $m (got $(stat -c %a "$f"))" \
            test "$(stat -c %a "$f")" = "$m"
        check "--$flag over a $m file: replaced" test "$(head -c 3 "$f")" != OLD
    done
done
echo OLD >"$TMP/mode/old.svg"
chmod 600 "$TMP/mode/old.svg"
expect_rc "--svg over a 600 file" 0 compare vector_add --param n=100 --svg "$TMP/mode/old.svg"
check "--svg over a 600 file: the mode stays 600" test "$(stat -c %a "$TMP/mode/old.svg")" = 600
if [ "$(id -G | wc -w)" -gt 1 ]; then
    g=$(id -G | cut -d' ' -f2)
    echo OLD >"$TMP/mode/group.json"
    chgrp "$g" "$TMP/mode/group.json"
    expect_rc "--json over a file of group $g" 0 run vector_add --param n=100 \
        --json "$TMP/mode/group.json"
    check "--json over a file of group $g: the group stays" \
        test "$(stat -c %g "$TMP/mode/group.json")" = "$g"
fi
(
    umask 027
    exec "$HG" run vector_add --param n=100 --json "$TMP/mode/new.json"
) >/dev/null 2>&1
check "a new report gets 0666 less the umask (027: 640, got $(stat -c %a "$TMP/mode/new.json"))" \
    test "$(stat -c %a "$TMP/mode/new.json")" = 640
check "keeping modes leaves no temporary file" no_temp "$TMP/mode"

# ---- item 2: an output path that cannot be written is found before round 1:
# exit 2, one line naming the flag, the path and the OS error
for flag in json trace; do
    expect_rc "--$flag /proc/x.json exits 2" 2 run vector_add --param n=100 \
        "--$flag" /proc/x.json
    check "--$flag /proc/x.json: no round ran" test ! -s "$TMP/out"
    check "--$flag /proc/x.json: one line naming the flag, path and error" \
        grep -Eq "^hostgraph: --$flag '/proc/x.json': .+" "$TMP/err"
    check "--$flag /proc/x.json: one line" test "$(wc -l <"$TMP/err")" -eq 1
done
expect_rc "--svg /proc/x.svg exits 2" 2 compare vector_add --param n=100 --svg /proc/x.svg
check "--svg /proc/x.svg: one line naming the flag" grep -Eq "^hostgraph: --svg '/proc/x.svg': .+" \
    "$TMP/err"
expect_rc "--json in a missing directory" 2 run vector_add --json "$TMP/none/x.json"
check "missing directory: the OS error" grep -q "No such file or directory" "$TMP/err"
check "checks leave no temporary file" no_temp "$TMP"

# ---- item 4: a failed run still writes its JSON report: the rounds that
# completed and the error.  bgemm makes 5 copies a round: the 6th fails round 2.
expect_rc "copy fault in round 2 exits 3" 3 run bgemm --rounds 3 --param grid=2 --param tile=8 \
    --device sim:fail_copy=6 --json "$TMP/failed.json"
check "runtime error is one line" test "$(wc -l <"$TMP/err")" -eq 1
check "failed run: JSON with round 1 and the error" python3 - "$TMP/failed.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert [rd["round"] for rd in r["rounds"]] == [1], r["rounds"]
e = r["error"]
assert e["code"] == -6 and e["name"] == "device copy failed", e
assert e["message"].startswith("round 2: "), e
assert r["interrupted"] is False
PY
expect_rc "compare: copy fault exits 3" 3 compare bgemm --rounds 3 --param grid=2 --param tile=8 \
    --device sim:fail_copy=6 --json "$TMP/failed-cmp.json"
check "failed compare: JSON with the failed mode's error" python3 - "$TMP/failed-cmp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
off = r["modes"]["off"]
assert len(off["rounds"]) == 1 and off["error"]["code"] == -6, off
PY
expect_rc "good run" 0 run vector_add --param n=100 --json "$TMP/good.json"
check "good run: error is null" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["error"] is None, r' "$TMP/good.json"

# ---- item 3: SIGINT / SIGTERM stop after the current round: the summary of
# the rounds done, the reports with "interrupted": true, exit 130.  The
# signal is sent once the first row is out (no sleeping on a guess).
# interrupt NAME SIGNAL COUNT ARGS...: runs hostgraph ARGS in the background
# with stdout into a pipe, sends SIGNAL COUNT times after the first row (or,
# for compare, which prints at the end, once the JSON's file is open).
interrupt() {
    local name=$1 sig=$2 count=$3
    shift 3
    rm -f "$TMP/int.out"
    ( "$HG" "$@" 2>"$TMP/int.err" | cat >"$TMP/int.out"; exit "${PIPESTATUS[0]}" ) &
    local job=$!
    local pid=""
    for _ in $(seq 1 1200); do
        [ -z "$pid" ] && pid=$(pgrep -P "$job" -x hostgraph || true)
        [ -n "$pid" ] && grep -Eq '^1 ' "$TMP/int.out" 2>/dev/null && break
        [ -n "$pid" ] && [ "$1" = compare ] && ls "$TMP"/.int.json.*.tmp >/dev/null 2>&1 && break
        sleep 0.05
    done
    for _ in $(seq 1 "$count"); do kill "-$sig" "$pid" 2>/dev/null; done
    wait "$job"
    local rc=$?
    check "$name: exit 130 (got $rc; $(head -c 200 "$TMP/int.err"))" test "$rc" -eq 130
}
ROWS='^(round  wall_ms .*|[0-9]+ +([0-9.]+ +){8}pass|first round .*)$'
for sig in INT TERM; do
    rm -f "$TMP/int.json" "$TMP/int.trace"
    interrupt "SIG$sig" "$sig" 1 run vector_add --param n=65536 --rounds 100000 \
        --json "$TMP/int.json" --trace "$TMP/int.trace"
    check "SIG$sig: the summary of the rounds done" grep -Eq '^first round .*overall' "$TMP/int.out"
    check "SIG$sig: no line cut (every line a header, a row or the summary)" \
        test "$(grep -Evc "$ROWS" "$TMP/int.out")" -eq 0
    check "SIG$sig: the JSON says interrupted" python3 - "$TMP/int.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["interrupted"] is True and r["error"] is None, r
assert 1 <= len(r["rounds"]) < 100000, len(r["rounds"])
assert [x["round"] for x in r["rounds"]] == list(range(1, len(r["rounds"]) + 1))
PY
    check "SIG$sig: the trace is written" python3 -c '
import json, sys; json.load(open(sys.argv[1]))' "$TMP/int.trace"
done
rm -f "$TMP/int.json"
interrupt "two SIGINTs" INT 2 run bgemm --param grid=8 --param tile=64 --rounds 100000 \
    --json "$TMP/int.json"
check "two SIGINTs: the JSON says interrupted" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["interrupted"] is True, r' \
    "$TMP/int.json"
rm -f "$TMP/int.json"
interrupt "compare SIGINT" INT 1 compare vector_add --param n=65536 --rounds 100000 \
    --json "$TMP/int.json"
check "compare SIGINT: the JSON says interrupted" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["interrupted"] is True, r' \
    "$TMP/int.json"

finish
