# lib.sh: what every CLI test script shares.  Sourced (not run) as
#     . "$(dirname "$0")/lib.sh" "$@"
# with the script's arguments: $1 is the hostgraph command under test.  It
# sets HG and a scratch directory TMP (removed at exit), and gives:
#   ok NAME / bad NAME     count a result and print it
#   expect_rc NAME RC ARGS...   runs hostgraph ARGS, wants exit code RC;
#                          stdout and stderr land in $TMP/out and $TMP/err
#   check NAME COMMAND...  passes if the command succeeds
#   finish                 prints "N passed, N failed"; its status is the verdict
HG=${1:?usage: $(basename "$0") PATH/TO/hostgraph}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

expect_rc() {
    local name=$1 want=$2
    shift 2
    "$HG" "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then
        ok "$name"
    else
        bad "$name (exit $got, wanted $want; stderr: $(head -c 300 "$TMP/err"))"
    fi
}

check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}

finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
