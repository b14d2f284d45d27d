#!/usr/bin/env bash
# readme_test.sh: the README's command examples work pasted verbatim (the
# issue "never lose a file, stop cleanly, measure honestly", item 12): every
# `hostgraph ...` line of "Using the command" runs with the built command on
# PATH, in a scratch directory (the real-preset qwen3 line, minutes long, is
# only parsed: --help must accept its flags); no example line is a pipeline
# of hostgraph commands; the files they write are ignored by git; the Python
# snippet marks written only an arg it made resident.
#
# usage: readme_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

mkdir "$TMP/bin"
ln -s "$(cd "$(dirname "$HG")" && pwd)/$(basename "$HG")" "$TMP/bin/hostgraph"
# The example lines: indented "hostgraph ..." lines of the command section.
awk '/^## Using the command/{on=1; next} /^## /{on=0} on && /^    hostgraph /{sub(/^    /, ""); print}' \
    "$ROOT/README.md" >"$TMP/lines"
check "the command section has examples" test "$(wc -l <"$TMP/lines")" -ge 5
check "no example pipes one hostgraph into another" test "$(grep -c '| *hostgraph' "$TMP/lines")" -eq 0
mkdir "$TMP/work"
while IFS= read -r line; do
    case "$line" in
    *preset=real*) continue ;;
    esac
    if (cd "$TMP/work" && PATH="$TMP/bin:$PATH" bash -o pipefail -c "$line" >/dev/null 2>"$TMP/err"); then
        ok "runs: $line"
    else
        bad "runs: $line ($(head -c 200 "$TMP/err"))"
    fi
done <"$TMP/lines"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    for f in "$TMP"/work/*; do
        name=$(basename "$f")
        check "git ignores the example output $name" git -C "$ROOT" check-ignore -q "$name"
    done
else
    echo "skip the .gitignore checks: $ROOT is not a git checkout"
fi
check "the README says to put the build on PATH or install" \
    grep -q 'put the build tree on your `PATH`' "$ROOT/README.md"
check "the Python snippet marks written a resident arg" python3 - "$ROOT/README.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
snippet = text[text.index("```python"):]
snippet = snippet[:snippet.index("```", 9)]
for buf in re.findall(r"(\w+)\.mark_written\(\)", snippet):
    name = {"xb": "x", "wb": "w", "bb": "bias", "yb": "y", "ab": "acc"}[buf]
    assert re.search(r'hg\.Arg\("%s", hg\.IN, %s\.tensor\(\), resident=True\)' % (name, buf), snippet), name
PY

finish
