#!/usr/bin/env bash
# scene_command_test.sh: hg_scene_command is the command (issue 26).  The
# same arguments given to the command and to hg_scene_command in another
# program (command_test --command ARGS, tests/scene/command_test.c) give the
# same exit code, the same stderr and the same stdout (a run's table: the
# same rows and columns, its times aside); --tp N > 1 is the one difference,
# refused in-process with a usage error saying it needs the command.  Then
# plugins: --scene-lib (run, compare, list; repeatable) and HG_SCENE_PATH
# load one, list shows its scene beside the built-in ones with its file, it
# runs and compares; a missing file, one without hg_scene_plugin, one of
# another definition version or with a bad param table is exit 2 naming the
# file.
#
# usage: scene_command_test.sh PATH/TO/hostgraph
#        (in the environment, from CMake: HG_COMMAND_TEST=PATH/TO/command_test,
#        HG_SCENE_EXAMPLE=PATH/TO/libscene_saxpy.so, HG_PLUGIN_DIR=the folder of
#        the broken plugins tests/scene/plugins/*.c, libplugin_*.so)
set -u

. "$(dirname "$0")/lib.sh" "$@"
CT=${HG_COMMAND_TEST:?HG_COMMAND_TEST: the command_test program}

# both ARGS...: runs the command and the in-process call with ARGS; their
# outputs land in $TMP/{cmd,call}.{out,err}, their codes in RC_CMD, RC_CALL.
both() {
    "$HG" "$@" >"$TMP/cmd.out" 2>"$TMP/cmd.err"
    RC_CMD=$?
    "$CT" --command "$@" >"$TMP/call.out" 2>"$TMP/call.err"
    RC_CALL=$?
}

# same NAME ARGS...: the same code, stdout and stderr, byte for byte.
same() {
    local name=$1
    shift
    both "$@"
    if [ "$RC_CMD" -ne "$RC_CALL" ]; then
        bad "$name: exit $RC_CALL in-process, $RC_CMD from the command"
    elif ! cmp -s "$TMP/cmd.out" "$TMP/call.out"; then
        bad "$name: stdout differs: $(diff "$TMP/cmd.out" "$TMP/call.out" | head -c 300)"
    elif ! cmp -s "$TMP/cmd.err" "$TMP/call.err"; then
        bad "$name: stderr differs: $(diff "$TMP/cmd.err" "$TMP/call.err" | head -c 300)"
    else
        ok "$name (exit $RC_CMD)"
    fi
}

same "list" list
check "list: every built-in scene" grep -Eq '^qwen3_decode ' "$TMP/call.out"
same "list SCENE" list bgemm
same "list --help" list --help
same "list, a typo" list bgem
same "list, two scenes" list bgemm vector_add
same "--help" --help
same "help" help
same "--version" --version
same "run --help" run --help
same "compare --help" compare --help
same "devices" devices
same "no command" 
same "unknown command" frobnicate
same "run, no scene" run
same "run, unknown flag" run vector_add --fast
same "run, a flag without its value" run vector_add --rounds
same "run, a bad param" run vector_add --param n=-1
same "run, a misspelt scene" run bgem
same "compare --rounds 1" compare vector_add --rounds 1
same "compare --residency" compare vector_add --residency all
same "run --svg" run vector_add --svg x.svg
same "run, a JSON path that cannot be written" run vector_add --json /nonexistent/dir/r.json
same "run, a device too small (exit 3)" run vector_add --param n=100 --device sim:mem=10
same "run, a malformed device" run vector_add --device sim:cores=x
same "--tp 0" run vector_add --tp 0
same "compare --tp" compare vector_add --tp 2

# A run: the same code and stderr; the same table but for its times (and
# the widths of their columns).
table() { sed -E 's/[-+]?[0-9]+\.[0-9]+%?/T/g; s/ +/ /g' "$1"; }
for args in "run vector_add --param n=100 --rounds 3" \
    "run bgemm --rounds 2 --residency all --replay" \
    "compare vector_add --param n=100 --rounds 2 --repeat 1"; do
    # shellcheck disable=SC2086 # the words are the arguments
    both $args
    check "$args: the same exit code ($RC_CMD)" test "$RC_CMD" -eq "$RC_CALL"
    check "$args: the same stderr" cmp -s "$TMP/cmd.err" "$TMP/call.err"
    check "$args: the same table, times aside" \
        cmp -s <(table "$TMP/cmd.out") <(table "$TMP/call.out")
done
both run vector_add --param n=100 --rounds 2 --json "$TMP/cmd.json"
mv "$TMP/cmd.json" "$TMP/first.json"
"$CT" --command run vector_add --param n=100 --rounds 2 --json "$TMP/call.json" >/dev/null 2>&1
check "run --json: the same report, times aside" python3 - "$TMP/first.json" "$TMP/call.json" <<'PY'
import json, sys
def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items() if not k.endswith("_ms")}
    if isinstance(v, list):
        return [shape(x) for x in v]
    return v if not isinstance(v, float) else "float"
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert shape(a) == shape(b), (shape(a), shape(b))
PY

# --tp N > 1 needs the command itself: refused in-process, before any round.
both run vector_add --tp 2 --json "$TMP/tp.json"
check "--tp 2 in-process: exit 2" test "$RC_CALL" -eq 2
check "--tp 2 in-process: says it needs the command" \
    grep -q "^hostgraph: --tp 2: needs the hostgraph command itself" "$TMP/call.err"
check "--tp 2 in-process: points at run --help" grep -q "^see 'hostgraph run --help'$" "$TMP/call.err"
check "--tp 2 in-process: no round ran" test ! -e "$TMP/tp.json"
"$CT" --command run vector_add --param n=100 --tp 1 >/dev/null 2>&1
check "--tp 1 in-process runs" test $? -eq 0

# ---- plugins: --scene-lib PATH (run, compare, list) and HG_SCENE_PATH
LIB=${HG_SCENE_EXAMPLE:?HG_SCENE_EXAMPLE: the example plugin, libscene_saxpy.so}
PLUGINS=${HG_PLUGIN_DIR:?HG_PLUGIN_DIR: the broken plugins, libplugin_*.so}
NOSYM=$PLUGINS/libplugin_no_symbol.so
same "list --scene-lib" list --scene-lib "$LIB"
check "list --scene-lib: the plugin's scene, from its file" \
    grep -Eq "^saxpy +y = alpha .*  from $LIB\$" "$TMP/cmd.out"
check "list --scene-lib: the built-in scenes too" grep -Eq '^vector_add ' "$TMP/cmd.out"
check "list --scene-lib: one column for descriptions" python3 - "$TMP/cmd.out" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
starts = {len(l) - len(l[len(l.split()[0]):].lstrip()) for l in lines}
assert len(starts) == 1, starts
PY
same "list SCENE --scene-lib" list saxpy --scene-lib="$LIB"
check "list saxpy: where it is defined" grep -q "^defined in $LIB\$" "$TMP/cmd.out"
check "list without --scene-lib: no plugin scene" bash -c "! '$HG' list | grep -q '^saxpy '"
expect_rc "run a plugin's scene" 0 run saxpy --scene-lib "$LIB" --rounds 2 --param n=1000 \
    --param tile=100 --json "$TMP/saxpy.json"
check "run a plugin's scene: golden passes each round" python3 - "$TMP/saxpy.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["scene"] == "saxpy" and [x["golden"] for x in r["rounds"]] == ["pass", "pass"], r
PY
expect_rc "compare a plugin's scene" 0 compare saxpy --scene-lib "$LIB" --rounds 2 --repeat 1 \
    --param n=1000 --param tile=100
expect_rc "the same plugin twice loads once" 0 run saxpy --scene-lib "$LIB" --scene-lib "$LIB" \
    --param n=1000 --quiet
HG_SCENE_PATH="::$LIB:" expect_rc "HG_SCENE_PATH loads a plugin" 0 run saxpy --param n=1000 \
    --quiet
same "run --help --scene-lib lists its scene" run --scene-lib "$LIB" --help
check "run --help: the plugin's scene and params" grep -q '^  saxpy: y = alpha' "$TMP/cmd.out"
same "run --help --scene-lib (after --help)" run --help --scene-lib "$LIB"
check "run --help, --scene-lib after it: the plugin's scene" grep -q '^  saxpy: y = alpha' "$TMP/cmd.out"

# A file that cannot be loaded: exit 2, naming it, in-process alike.
same "--scene-lib, a missing file" run saxpy --scene-lib "$TMP/missing.so"
check "--scene-lib, a missing file: names it" \
    grep -q "^hostgraph: --scene-lib: .*$TMP/missing.so" "$TMP/cmd.err"
check "--scene-lib, a missing file: points at run --help" \
    grep -q "^see 'hostgraph run --help'$" "$TMP/cmd.err"
check "--scene-lib, a missing file: two lines" test "$(wc -l <"$TMP/cmd.err")" -eq 2
same "--scene-lib, no hg_scene_plugin" list --scene-lib "$NOSYM"
check "--scene-lib, no hg_scene_plugin: names the file and the symbol" \
    grep -q "^hostgraph: --scene-lib: $NOSYM: .*hg_scene_plugin" "$TMP/cmd.err"
same "compare --scene-lib, no hg_scene_plugin" compare vector_add --scene-lib "$NOSYM"
check "compare --scene-lib: points at compare --help" \
    grep -q "^see 'hostgraph compare --help'$" "$TMP/cmd.err"
same "--scene-lib without a value" run saxpy --scene-lib
same "--scene-lib, another definition version" run vector_add \
    --scene-lib "$PLUGINS/libplugin_bad_version.so"
check "--scene-lib, another version: names the file and both versions" grep -Eq \
    "^hostgraph: --scene-lib: $PLUGINS/libplugin_bad_version.so: .*version 99.*version 1" \
    "$TMP/cmd.err"
same "--scene-lib, a bad param table" list --scene-lib "$PLUGINS/libplugin_bad_params.so"
check "--scene-lib, a bad param table: names the file, the scene and the param" grep -Eq \
    "^hostgraph: --scene-lib: $PLUGINS/libplugin_bad_params.so: scene 'upside_down': param 'n'" \
    "$TMP/cmd.err"
check "a refused plugin registers none of its scenes" bash -c \
    "! '$HG' list --scene-lib '$PLUGINS/libplugin_bad_params.so' 2>/dev/null | grep -q upside_down"
HG_SCENE_PATH="$LIB:$TMP/missing.so" both run vector_add --param n=100
check "HG_SCENE_PATH, a missing file: exit 2 (command and in-process)" \
    test "$RC_CMD" -eq 2 -a "$RC_CALL" -eq 2
check "HG_SCENE_PATH, a missing file: names the variable and the file" \
    grep -q "^hostgraph: HG_SCENE_PATH: .*$TMP/missing.so" "$TMP/cmd.err"
check "HG_SCENE_PATH, a missing file: the same message in-process" \
    cmp -s "$TMP/cmd.err" "$TMP/call.err"

finish
