/*
 * detach_test.c: an attachment's lifetime against the runner's replay
 * recording, on 2 and 4 ranks.  An allreduce task holds its attachment (a
 * scalar of the task), so a recording holds it too:
 *   - hg_mpi_detach drops the runner's recording: detach, attach again and
 *     run the same callable with the same args, and the run orchestrates
 *     with the new attachment (it replayed on the freed one: ASan's
 *     heap-use-after-free in the allreduce, SIGSEGV in MPI_Iallreduce
 *     without a sanitizer), the sums are right, and the run after replays;
 *   - an allreduce is submitted only from its own runner's orchestration:
 *     another runner's recording would keep the attachment past its detach,
 *     so that submit fails (every rank alike) and records nothing.
 * Each test runs on every backend every rank has.
 */
#include "sum_bench.h"

/* A bench whose runner replays. */
static int bench_open(sum_bench *b, const char *backend)
{
    int rc = sum_bench_open(b, backend);
    if (rc == 0)
        hg_runner_set_replay(b->f.r, true);
    return rc;
}

MPI_TEST_EACH_BACKEND(detach_drops_the_recording_and_a_new_attachment_orchestrates)
{
    sum_bench b;
    ASSERT_OK(bench_open(&b, backend));
    uint32_t replayed = 9;
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 1, &replayed));
    ASSERT_EQ(replayed, 0);
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 2, &replayed));
    ASSERT_EQ(replayed, 1); /* the recording holds the attachment's allreduce */
    ASSERT_UGT(hg_runner_replay_bytes(b.f.r), 0);

    hg_mpi_detach(b.f.m);
    const uint64_t left = hg_runner_replay_bytes(b.f.r); /* checked after the reproducer */
    char err[256];
    ASSERT_OK(hg_mpi_attach(b.f.r, MPI_COMM_WORLD, &b.f.m, err, sizeof err));
    ASSERT_OK(hg_mpi_set_timeout(b.f.m, 60.0));
    b.p.m = b.f.m; /* the same callable and args: only its user data changed */
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 3, &replayed));
    ASSERT_EQ(replayed, 0);
    ASSERT_UEQ(left, 0);
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 4, &replayed));
    ASSERT_EQ(replayed, 1); /* recorded anew, on the new attachment */

    sum_bench_close(&b);
}

MPI_TEST_EACH_BACKEND(another_runners_attachment_is_refused_and_recorded_nowhere)
{
    sum_bench b;
    ASSERT_OK(bench_open(&b, backend));
    hg_runner *other;
    ASSERT_OK(hg_runner_open(b.f.dev, &other));
    hg_runner_set_replay(other, true);
    /* b.p.m is b.f.r's attachment: `other` must not take it. */
    for (int round = 0; round < 2; round++) {
        hg_run_stats s;
        ASSERT_EQ(hg_runner_run(other, &b.c, &b.arg, 1, &s), HG_EINVAL);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(other), "the MPI attachment is another runner's");
        ASSERT_EQ(s.replayed, 0);
        ASSERT_UEQ(s.net_bytes, 0);
        ASSERT_UEQ(hg_runner_replay_bytes(other), 0);
    }
    /* Its own runner still runs it, and detaching it leaves `other` with
     * nothing that names it. */
    uint32_t replayed;
    ASSERT_OK(sum_bench_pass(&b, b.f.r, 1, &replayed));
    hg_mpi_detach(b.f.m);
    b.f.m = NULL;
    ASSERT_UEQ(hg_runner_replay_bytes(other), 0);
    hg_runner_close(other);
    sum_bench_close(&b);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
