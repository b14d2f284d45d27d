#!/usr/bin/env bash
# abort_check.sh: the bounded wait (hg_mpi_set_timeout), around
# abort_check.c.  Rank 0 makes a run rank 1 never makes; the job must end,
# with rank 0's message naming the exchange it waited 1 s for, and no run
# may return instead of aborting.  A hang is caught by ctest's TIMEOUT.
#
# Open MPI's launcher (4.1, Debian's) sometimes crashes in its own teardown
# after an MPI_Abort (SIGSEGV in PMIx_server_finalize: seen once in CI, not
# reproduced in 20 runs here; upstream tracks launcher crashes in abnormal
# termination, e.g. open-mpi/ompi#13650 for v5); ctest alone counts that as
# our failure.
# Here a signal report is accepted only when every frame it prints is
# mpiexec's or Open MPI's: a frame of ours (the check or libhostgraph)
# fails the test, as does a job that exits 0.
#
# usage: abort_check.sh MPIEXEC ARGS...    (the whole launch line)
set -u
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "FAIL: $1"; exit 1; }
grep -q "rank 0 of 2: the status exchange did not complete within 1 s" <<<"$out" ||
    fail "rank 0 did not report the bounded wait"
! grep -q "instead of aborting" <<<"$out" || fail "a run returned instead of aborting"
[ "$rc" -ne 0 ] || fail "the job exited 0 after an abort"
if grep -q "Process received signal" <<<"$out"; then
    frames=$(grep -E '^\[[^]]*\] \[ *[0-9]+\] ' <<<"$out")
    ! grep -qE 'mpi_abort_check|hostgraph' <<<"$frames" ||
        fail "a process of ours crashed: $frames"
    grep -q 'mpiexec' <<<"$frames" || fail "a crash that is not the launcher's: $frames"
    echo "note: the launcher crashed in its own teardown after the abort (exit $rc); accepted"
fi
echo "ok: the job aborted on the bounded wait (exit $rc)"
