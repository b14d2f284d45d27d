#!/usr/bin/env bash
# readme_test.sh: every command block in README.md works pasted as written.
#
# A command block is a fenced ```sh block (README keeps output and file
# listings in ```text blocks, and has no indented code blocks, which this
# test checks, so no command can hide from it).  The blocks run in order,
# each in its own `bash -e -o pipefail`, in a scratch copy of the checkout
# (its tracked files as they are in the working tree), with a scratch HOME,
# so the README's build, install and `$HOME/.local` prefix are the test's
# own: nothing is built, installed or written in the real checkout or home.
# The README's first command builds that copy; every later block uses it.
# The build tree is on PATH, as the command section tells a reader to put it.
# The ```python block runs too, from the copy's root.
#
# Left out, and only these (named where they are skipped):
#   - the test command itself (bash tests/run_all.sh),
#   - the fuzzing commands (tests/fuzz/run_fuzz.sh),
#   - runs at preset=real (minutes each): such a line is only checked to
#     parse, with --help taking the rest of its flags.
#
# It builds the project once (about a minute on 2 cores), so it runs in the
# normal build only, not under the sanitizer passes (CMakeLists.txt).
#
# usage: readme_test.sh PATH/TO/hostgraph  (the build's command, for the
#        preset=real lines' parse check)
set -u

. "$(dirname "$0")/lib.sh" "$@"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
README=$ROOT/README.md
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

# The blocks, one file each, in order: $TMP/blocks/NN.LANG.
mkdir "$TMP/blocks"
"$py" - "$README" "$TMP/blocks" <<'PY' || bad "README's code blocks could not be read"
import re, sys
text = open(sys.argv[1]).read().split("\n")
out, n, fence, body, prev = sys.argv[2], 0, None, [], ""
for i, line in enumerate(text):
    if fence is None:
        m = re.match(r"^```(\w*)\s*$", line)
        if m:
            fence, body = m.group(1) or "none", []
        elif line.startswith("    ") and prev.strip() == "" and line.strip():
            sys.exit("README.md:%d: an indented code block (fence it as ```sh or ```text)" % (i + 1))
        prev = line
        continue
    if line.startswith("```"):
        n += 1
        open("%s/%02d.%s" % (out, n, fence), "w").write("\n".join(body) + "\n")
        fence, prev = None, line
    else:
        body.append(line)
if fence is not None:
    sys.exit("README.md: a code block is never closed")
PY
check "README fences every code block with a language" \
    test -z "$(find "$TMP/blocks" -name '*.none' | head -1)"
nblocks=$(find "$TMP/blocks" -name '*.sh' | wc -l)
check "README has command blocks (found $nblocks)" test "$nblocks" -ge 10

# The scratch copy and home.
SRC=$TMP/src
mkdir -p "$SRC" "$TMP/home"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$SRC" 2>/dev/null)
else
    (cd "$ROOT" && tar --exclude='./build*' --exclude='./.git' -cf - .) | (cd "$SRC" && tar -xf -)
fi
check "the scratch copy has the sources" test -f "$SRC/CMakeLists.txt"
touch "$TMP/before"
# PoCL's compiled programs stay in the real cache (as for every OpenCL test):
# a cold cache costs seconds a program, not correctness.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-${HOME:-/tmp}/.cache/pocl}
# Open MPI refuses root unless told; a reader running as root is told so by
# mpirun itself. Its own variables say it here, leaving the commands as written.
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

run_block() { # file
    local block=$1 name
    name="README block $(basename "$block"): $(grep -m1 -v '^\s*$' "$block" | cut -c1-70)"
    # Drop the lines this test leaves out, saying so.
    local kept=$TMP/kept.sh
    : >"$kept"
    local line
    while IFS= read -r line; do
        case "$line" in
        *"tests/run_all.sh"* | *"tests/fuzz/run_fuzz.sh"*)
            echo "skip (left out: the test command / fuzzing): $line"
            continue
            ;;
        *preset=real*)
            echo "skip (left out: a preset=real run, minutes): $line"
            local flags=${line#*hostgraph }
            flags=${flags%%#*}
            if (cd "$SRC" && eval "\"$HG\" $flags --help" >/dev/null 2>"$TMP/err"); then
                ok "parses: $line"
            else
                bad "parses: $line ($(head -c 200 "$TMP/err"))"
            fi
            continue
            ;;
        esac
        printf '%s\n' "$line" >>"$kept"
    done <"$block"
    grep -q '[^[:space:]]' "$kept" || return 0
    if (cd "$SRC" && HOME="$TMP/home" PATH="$SRC/build:$PATH" \
        bash -e -o pipefail "$kept" >"$TMP/block.out" 2>&1); then
        ok "$name"
    else
        bad "$name (exit $?): $(tail -c 600 "$TMP/block.out")"
    fi
}

for block in "$TMP"/blocks/*.sh; do
    run_block "$block"
done

# The Python snippet, after the blocks that built its example.
for block in "$TMP"/blocks/*.python; do
    if (cd "$SRC" && HOME="$TMP/home" PYTHONPATH="$SRC/build/python" \
        "$py" "$block" >"$TMP/block.out" 2>&1); then
        ok "README Python block $(basename "$block") runs"
    else
        bad "README Python block $(basename "$block") runs: $(tail -c 600 "$TMP/block.out")"
    fi
done
check "the Python snippet marks written a resident arg" "$py" - "$README" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
snippet = text[text.index("```python"):]
snippet = snippet[:snippet.index("```", 9)]
for buf in re.findall(r"(\w+)\.mark_written\(\)", snippet):
    name = {"xb": "x", "wb": "w", "bb": "bias", "yb": "y", "ab": "acc"}[buf]
    assert re.search(r'hg\.Arg\("%s", hg\.IN, %s\.tensor\(\), resident=True\)' % (name, buf), snippet), name
PY

# What the blocks wrote in the checkout's copy is ignored by git, so a reader
# who pastes them in a checkout leaves it clean.
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$SRC" && find . -path ./build -prune -o -type f -newer "$TMP/before" -print | sed 's|^\./||') |
        git -C "$ROOT" check-ignore --no-index -n -v --stdin | sed -n 's/^::[[:space:]]*//p' >"$TMP/unignored"
    check "git ignores what the README's commands write (not: $(head -5 "$TMP/unignored" | tr '\n' ' '))" \
        test ! -s "$TMP/unignored"
else
    echo "skip the .gitignore checks: $ROOT is not a git checkout"
fi
check "the README says to put the build on PATH or install" \
    grep -q 'put the build tree on your `PATH`' "$README"
check "the install put nothing outside the scratch home" test ! -e "$TMP/src/\$HOME"

finish
