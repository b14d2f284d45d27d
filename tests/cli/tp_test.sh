#!/usr/bin/env bash
# tp_test.sh: the command's --tp flag before any scene splits (issue 18).
#   - --tp 1 (and no --tp) runs as before and never initialises MPI: with
#     an Open MPI setting that makes MPI_Init fail (a pml component that
#     does not exist), the run still passes and says nothing of MPI, though
#     the command links the MPI library when it is built in;
#   - --tp N > 1: with MPI built in (HG_MPI_BUILT=ON, from CMake), a usage
#     error saying the scene cannot split; without it, a usage error saying
#     MPI was not built in; either way before any round runs;
#   - --tp 0, --tp x and compare --tp are usage errors;
#   - the JSON report's rounds carry net_bytes and net_ms (0 without MPI).
#
# usage: tp_test.sh PATH/TO/hostgraph      (HG_MPI_BUILT=ON|OFF in the environment)
set -u

. "$(dirname "$0")/lib.sh" "$@"

export OMPI_MCA_pml=hg_no_such_component # MPI_Init would fail with this
expect_rc "--tp 1 runs without MPI" 0 run vector_add --tp 1 --quiet
check "--tp 1 says nothing of MPI" bash -c "! grep -qi 'mpi' '$TMP/err' '$TMP/out'"
expect_rc "no --tp runs without MPI" 0 run vector_add --quiet --rounds 2 --json "$TMP/one.json"
check "no --tp says nothing of MPI" bash -c "! grep -qi 'mpi' '$TMP/err' '$TMP/out'"
check "JSON rounds carry net_bytes and net_ms, 0 without MPI" python3 - "$TMP/one.json" <<'PY'
import json, sys
rounds = json.load(open(sys.argv[1]))["rounds"]
assert len(rounds) == 2 and all(r["net_bytes"] == 0 and r["net_ms"] == 0 for r in rounds), rounds
PY

expect_rc "--tp 2 is a usage error" 2 run vector_add --tp 2 --json "$TMP/r.json"
if [ "${HG_MPI_BUILT:-OFF}" = ON ]; then
    check "--tp 2 (MPI built in): the scene cannot split" \
        grep -q "^hostgraph: --tp 2: scene 'vector_add' cannot split across ranks" "$TMP/err"
    check "--tp 2 names the MPI library" grep -q "MPI built in: [A-Za-z]" "$TMP/err"
    # So the runs above, without mpirun, ran with the MPI library loaded.
    if command -v readelf >/dev/null; then
        check "the command links the MPI library" bash -c "readelf -d '$HG' | grep -q 'NEEDED.*libmpi'"
    fi
else
    check "--tp 2 (no MPI): MPI was not built in" \
        grep -q "^hostgraph: --tp 2: MPI was not built in" "$TMP/err"
fi
check "--tp 2: no round ran" test ! -e "$TMP/r.json"
expect_rc "--tp=4 is a usage error too" 2 run vector_add --tp=4
expect_rc "--tp 0 is a usage error" 2 run vector_add --tp 0
check "--tp 0: says what it wants" grep -q "integer from 1 to 256, not '0'" "$TMP/err"
expect_rc "--tp x is a usage error" 2 run vector_add --tp x
expect_rc "compare --tp is a usage error" 2 compare vector_add --tp 2
check "compare --tp: only with run" grep -q -- "--tp: only with run" "$TMP/err"
finish
