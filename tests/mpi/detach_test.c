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
#include "mpi_fixture.h"

enum { N = 256 };

typedef struct sum_plan {
    hg_mpi *m;
} sum_plan;

/* One allreduce over the whole of arg 0. */
static int orch_sum(hg_orch *o, void *user)
{
    const sum_plan *p = user;
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    return rc ? rc : hg_mpi_allreduce(o, p->m, 0, &x->tensor, NULL);
}

typedef struct bench {
    mpi_fixture f;
    hg_hostbuf *hb;
    hg_arg arg;
    sum_plan p;
    hg_callable c;
} bench;

static int bench_open(bench *b, const char *backend)
{
    memset(b, 0, sizeof *b);
    int rc = mpi_fixture_open_on(&b->f, backend, "cores=2,mem=64M");
    size_t shape[1] = {N};
    b->arg = (hg_arg){"x", HG_INOUT, {0}, 0, HG_STAGED};
    if (rc == 0)
        rc = hg_hostbuf_create(N * sizeof(float), &b->hb);
    if (rc == 0)
        rc = hg_tensor_host(&b->arg.tensor, b->hb, HG_F32, 1, shape);
    b->p.m = b->f.m;
    b->c = (hg_callable){"sum", orch_sum, &b->p};
    if (rc == 0)
        hg_runner_set_replay(b->f.r, true);
    return rc;
}

/* Run `round` on runner r: x[i] = round * 1000 + rank + i on every rank,
 * then x must hold the sum over ranks; *replayed says whether it replayed. */
static int bench_round(bench *b, hg_runner *r, int round, uint32_t *replayed)
{
    float *x = hg_hostbuf_data(b->hb);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(round * 1000 + b->f.rank + (int)i);
    int rc = hg_hostbuf_mark_written(b->hb, 0, N * sizeof(float));
    hg_run_stats s;
    if (rc == 0)
        rc = hg_runner_run(r, &b->c, &b->arg, 1, &s);
    if (rc != 0) {
        fprintf(stderr, "rank %d round %d: %s\n", b->f.rank, round, hg_runner_errmsg(r));
        return rc;
    }
    const int n = b->f.size;
    for (size_t i = 0; i < N; i++) {
        const float want = (float)(n * (round * 1000 + (int)i) + n * (n - 1) / 2);
        if (x[i] != want) {
            fprintf(stderr, "rank %d round %d: x[%zu] = %g, want %g\n", b->f.rank, round, i, x[i],
                    want);
            return -1;
        }
    }
    *replayed = s.replayed;
    return 0;
}

MPI_TEST_EACH_BACKEND(detach_drops_the_recording_and_a_new_attachment_orchestrates)
{
    bench b;
    ASSERT_OK(bench_open(&b, backend));
    uint32_t replayed = 9;
    ASSERT_OK(bench_round(&b, b.f.r, 1, &replayed));
    ASSERT_EQ(replayed, 0);
    ASSERT_OK(bench_round(&b, b.f.r, 2, &replayed));
    ASSERT_EQ(replayed, 1); /* the recording holds the attachment's allreduce */
    ASSERT_UGT(hg_runner_replay_bytes(b.f.r), 0);

    hg_mpi_detach(b.f.m);
    const uint64_t left = hg_runner_replay_bytes(b.f.r); /* checked after the reproducer */
    char err[256];
    ASSERT_OK(hg_mpi_attach(b.f.r, MPI_COMM_WORLD, &b.f.m, err, sizeof err));
    ASSERT_OK(hg_mpi_set_timeout(b.f.m, 60.0));
    b.p.m = b.f.m; /* the same callable and args: only its user data changed */
    ASSERT_OK(bench_round(&b, b.f.r, 3, &replayed));
    ASSERT_EQ(replayed, 0);
    ASSERT_UEQ(left, 0);
    ASSERT_OK(bench_round(&b, b.f.r, 4, &replayed));
    ASSERT_EQ(replayed, 1); /* recorded anew, on the new attachment */

    hg_hostbuf_destroy(b.hb);
    mpi_fixture_close(&b.f);
}

MPI_TEST_EACH_BACKEND(another_runners_attachment_is_refused_and_recorded_nowhere)
{
    bench b;
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
    ASSERT_OK(bench_round(&b, b.f.r, 1, &replayed));
    hg_mpi_detach(b.f.m);
    b.f.m = NULL;
    ASSERT_UEQ(hg_runner_replay_bytes(other), 0);
    hg_runner_close(other);
    hg_hostbuf_destroy(b.hb);
    mpi_fixture_close(&b.f);
}

int main(int argc, char **argv)
{
    return mpi_test_main(argc, argv);
}
