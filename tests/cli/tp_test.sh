#!/usr/bin/env bash
# tp_test.sh: the command's --tp flag (issue 18).
#   - --tp 1 (and no --tp) runs as before and never initialises MPI: with
#     an Open MPI setting that makes MPI_Init fail (a pml component that
#     does not exist), the run still passes and says nothing of MPI, though
#     the command links the MPI library when it is built in;
#   - --tp N > 1: with MPI built in (HG_MPI_BUILT=ON, from CMake), a usage
#     error saying the scene cannot split; without it, a usage error saying
#     MPI was not built in; either way before any round runs;
#   - --tp 0, --tp x and compare --tp are usage errors;
#   - the JSON report's rounds carry net_bytes and net_ms (0 without MPI);
#   - with MPI built in, under mpiexec (HG_MPIEXEC and HG_MPIEXEC_FLAGS, from
#     CMake): qwen3_decode --tp 2 and --tp 4 pass golden, rank 0 alone prints
#     the table and writes --json, whose "ranks" hold every rank's rounds
#     with its net_bytes; a world of another size, or a tp that does not
#     divide the heads, is a usage error naming --tp; {rank} in --device is
#     each rank's index on its host (the JSON's ranks name each device);
#     a bad spec on one rank fails every rank; on the first OpenCL device
#     (skipped, named, without one) --tp 2 passes and a later round moves
#     the sim's bytes plus the allreduced range each way; SIGTERM to one rank
#     stops every rank after the same round (exit 130, "interrupted").
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

if [ "${HG_MPI_BUILT:-OFF}" = ON ] && [ -n "${HG_MPIEXEC:-}" ]; then
    unset OMPI_MCA_pml
    # shellcheck disable=SC2086 # the flags are words
    mpi() { local np=$1; shift; "$HG_MPIEXEC" ${HG_MPIEXEC_FLAGS:-} -np "$np" "$HG" "$@"; }
    expect_mpi() { # name rc np args...
        local name=$1 want=$2 np=$3
        shift 3
        mpi "$np" "$@" >"$TMP/out" 2>"$TMP/err"
        local got=$?
        if [ "$got" -eq "$want" ]; then ok "$name"; else
            bad "$name (exit $got, wanted $want; stderr: $(head -c 600 "$TMP/err"))"
        fi
    }
    for np in 2 4; do
        expect_mpi "--tp $np under mpiexec -np $np passes" 0 "$np" run qwen3_decode --rounds 2 \
            --residency all --tp "$np" --json "$TMP/tp$np.json"
        check "--tp $np: one table (rank 0's)" test "$(grep -c '^round ' "$TMP/out")" -eq 1
        check "--tp $np: one summary" test "$(grep -c '^first round' "$TMP/out")" -eq 1
        # tiny preset: 2 layers x 2 allreduces x batch 16 x hidden 64 x 4 bytes (f32) = 16384
        check "--tp $np: JSON ranks, rounds and net_bytes" python3 - "$TMP/tp$np.json" "$np" <<'PY'
import json, sys
j, n = json.load(open(sys.argv[1])), int(sys.argv[2])
want = 2 * 2 * 16 * 64 * 4
assert j["tp"] == n and len(j["ranks"]) == n, j.get("ranks")
assert [r["golden"] for r in j["rounds"]] == ["pass", "pass"], j["rounds"]
assert all(r["net_bytes"] == want and r["net_ms"] > 0 for r in j["rounds"]), j["rounds"]
for k, rank in enumerate(j["ranks"]):
    assert rank["rank"] == k and len(rank["rounds"]) == 2, rank
    assert all(r["net_bytes"] == want and r["golden"] == "pass" for r in rank["rounds"]), rank
assert j["ranks"][0]["rounds"][1]["h2d_bytes"] == j["rounds"][1]["h2d_bytes"]
PY
    done
    # --tp on the first OpenCL device (the allreduces as host steps): golden
    # passes on every rank, net_bytes as on the sim, and a later round moves
    # the sim's floor plus the allreduced range each way (2 layers x 2
    # allreduces x 16 x 64 f32 partial sums = 16384 bytes, down to the host
    # and back up).
    cl=$("$HG" devices 2>/dev/null | grep -o '^opencl:platform=[0-9]*,device=[0-9]*' | head -n 1)
    if [ -z "$cl" ]; then
        echo "     skipped: no OpenCL platform (--tp on opencl)"
        [ "${HG_REQUIRE_OPENCL:-0}" = 1 ] && bad "HG_REQUIRE_OPENCL=1 but no OpenCL device listed"
    else
        expect_mpi "--tp 2 --device $cl passes" 0 2 run qwen3_decode --rounds 2 --residency all \
            --tp 2 --device "$cl" --json "$TMP/cl.json"
        expect_mpi "--tp 2 on the sim, for its bytes" 0 2 run qwen3_decode --rounds 2 \
            --residency all --tp 2 --json "$TMP/clsim.json"
        check "--tp 2 on opencl: golden, net_bytes, and the floor plus the allreduced range" \
            python3 - "$TMP/cl.json" "$TMP/clsim.json" <<'PY'
import json, sys
cl, sim = (json.load(open(p)) for p in sys.argv[1:3])
staged = 2 * 2 * 16 * 64 * 4
for k, (a, b) in enumerate(zip(cl["ranks"], sim["ranks"])):
    assert a["device"].startswith("opencl:"), a["device"]
    assert [r["golden"] for r in a["rounds"]] == ["pass", "pass"], (k, a["rounds"])
    ra, rb = a["rounds"][1], b["rounds"][1]
    assert ra["net_bytes"] == rb["net_bytes"] == 2 * 2 * 16 * 64 * 4, (ra, rb)
    assert ra["h2d_bytes"] == rb["h2d_bytes"] + staged, (k, ra["h2d_bytes"], rb["h2d_bytes"])
    assert ra["d2h_bytes"] == rb["d2h_bytes"] + staged, (k, ra["d2h_bytes"], rb["d2h_bytes"])
PY
    fi

    # {rank} in --device: each rank's own spec, each named in "ranks".
    expect_mpi "--device with {rank}: each rank its own device" 0 2 run qwen3_decode --rounds 2 \
        --tp 2 --device 'sim:cores=1{rank}' --json "$TMP/dev.json"
    check "--device with {rank}: the ranks' devices in the JSON" python3 - "$TMP/dev.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["device"] == "sim:cores=10", j["device"]
assert [r["device"] for r in j["ranks"]] == ["sim:cores=10", "sim:cores=11"], j["ranks"]
PY
    expect_mpi "--device with {rank}: a rank's bad spec fails every rank" 2 2 run qwen3_decode \
        --tp 2 --device 'sim:cores={rank}'
    check "--device with {rank}: the bad spec is rank 0's" grep -q "device spec 'sim:cores=0'" "$TMP/err"
    expect_mpi "--tp 4 on 2 ranks is a usage error" 2 2 run qwen3_decode --tp 4
    check "--tp 4 on 2 ranks: says the job's size" \
        grep -q "^hostgraph: --tp 4: the MPI job has 2 ranks; run it under mpirun -np 4" "$TMP/err"
    expect_rc "--tp 2 without mpirun is a usage error" 2 run qwen3_decode --tp 2
    check "--tp 2 without mpirun: says the job's size" \
        grep -q "^hostgraph: --tp 2: the MPI job has 1 rank; run it under mpirun -np 2" "$TMP/err"
    expect_mpi "--tp 3 is a usage error (16 heads)" 2 3 run qwen3_decode --tp 3
    check "--tp 3: says what must divide" grep -q -- "--tp 3: qwen3_decode's 16 query heads" "$TMP/err"

    # SIGTERM to one rank (the last started) once rank 0 has printed a
    # row: every rank stops after one same round, none waits.
    # shellcheck disable=SC2086 # the flags are words
    "$HG_MPIEXEC" ${HG_MPIEXEC_FLAGS:-} -np 2 "$HG" run qwen3_decode --rounds 100000 --tp 2 \
        --json "$TMP/stop.json" >"$TMP/out" 2>"$TMP/err" &
    job=$! # mpiexec itself: the ranks are its children
    for _ in $(seq 600); do
        grep -q '^2 ' "$TMP/out" 2>/dev/null && break
        sleep 0.1
    done
    rank=$(pgrep -P "$job" -n)
    [ -n "$rank" ] && kill -TERM "$rank"
    wait "$job"
    stop_rc=$?
    if [ "$stop_rc" -eq 130 ]; then ok "SIGTERM to one rank: every rank stops (exit 130)"; else
        bad "SIGTERM to one rank: every rank stops (exit $stop_rc, rank pid '$rank'; $(head -c 600 "$TMP/err"))"
    fi
    check "SIGTERM to one rank: the same rounds on every rank, interrupted" \
        python3 - "$TMP/stop.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
done = len(j["rounds"])
assert j["interrupted"] is True and 2 <= done < 100000, (j["interrupted"], done)
assert all(len(r["rounds"]) == done for r in j["ranks"]), [len(r["rounds"]) for r in j["ranks"]]
PY
fi
finish
