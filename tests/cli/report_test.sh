#!/usr/bin/env bash
# report_test.sh: a JSON report says what ran (issue 25, item 17): the params
# as resolved, a 0 that stood for "the preset's value" replaced by the value
# used, with the preset named, in run's report and in compare's.
#
# usage: report_test.sh PATH/TO/hostgraph
set -u

. "$(dirname "$0")/lib.sh" "$@"

expect_rc "qwen3_decode at its defaults" 0 run qwen3_decode --json "$TMP/q3.json"
check "qwen3_decode: params resolved, the preset named" python3 - "$TMP/q3.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["params"]
want = {"preset": "tiny", "layers": 2, "batch": 16, "context": 40, "rope_len": 64,
        "block_size": 8, "chunk_blocks": 2}
assert p == want, p
PY
expect_rc "qwen3_decode layers=3" 0 run qwen3_decode --param layers=3 --param context=20 \
    --json "$TMP/q3b.json"
check "qwen3_decode: a given value is kept, the rest resolved" python3 - "$TMP/q3b.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["params"]
assert p["layers"] == 3 and p["context"] == 20 and p["rope_len"] == 64, p
PY
expect_rc "paged_attention at its defaults" 0 run paged_attention --json "$TMP/pa.json"
check "paged_attention: params resolved" python3 - "$TMP/pa.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["params"]
want = {"preset": "tiny", "batch": 5, "heads": 4, "kv_heads": 2, "head_dim": 16,
        "block_size": 8, "context": 37, "chunk_blocks": 2}
assert p == want, p
PY
expect_rc "compare qwen3_decode" 0 compare qwen3_decode --rounds 2 --repeat 1 --json "$TMP/cmp.json"
check "compare: params resolved at the top and in every mode" python3 - "$TMP/cmp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for p in [r["params"]] + [m["params"] for m in r["modes"].values()]:
    assert p["layers"] == 2 and p["context"] == 40 and p["preset"] == "tiny", p
PY

finish
