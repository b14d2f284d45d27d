/*
 * sum_bench.h: one run arg summed over the ranks, for the mpi tests that
 * check which runs paired (early_failure_test.c, detach_test.c).  Round k
 * fills x[i] = k * 1000 + rank + i on every rank, so a sum says which
 * round each rank's data came from.
 */
#ifndef HG_TESTS_MPI_SUM_BENCH_H
#define HG_TESTS_MPI_SUM_BENCH_H

#include "mpi_fixture.h"

enum { SUM_N = 128 };

typedef struct sum_plan {
    hg_mpi *m;
    bool fail; /* the orchestration fails before its allreduce */
} sum_plan;

/* One allreduce over the whole of arg 0 (or hg_orch_fail when p->fail). */
static inline int sum_orch(hg_orch *o, void *user)
{
    const sum_plan *p = user;
    if (p->fail)
        return hg_orch_fail(o, HG_EINVAL, "config: this rank's orchestration refuses");
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    return rc ? rc : hg_mpi_allreduce(o, p->m, 0, &x->tensor, NULL);
}

typedef struct sum_bench {
    mpi_fixture f;
    hg_hostbuf *hb;
    hg_arg arg; /* "x": INOUT, SUM_N f32, staged */
    sum_plan p;
    hg_callable c;
} sum_bench;

static inline int sum_bench_open(sum_bench *b, const char *backend)
{
    memset(b, 0, sizeof *b);
    int rc = mpi_fixture_open_on(&b->f, backend, "cores=2,mem=64M");
    size_t shape[1] = {SUM_N};
    b->arg = (hg_arg){"x", HG_INOUT, {0}, 0, HG_STAGED};
    if (rc == 0)
        rc = hg_hostbuf_create(SUM_N * sizeof(float), &b->hb);
    if (rc == 0)
        rc = hg_tensor_host(&b->arg.tensor, b->hb, HG_F32, 1, shape);
    b->p = (sum_plan){b->f.m, false};
    b->c = (hg_callable){"sum", sum_orch, &b->p};
    return rc;
}

static inline void sum_bench_close(sum_bench *b)
{
    hg_hostbuf_destroy(b->hb);
    mpi_fixture_close(&b->f);
}

/* x as round `round` fills it on this rank (a write step). */
static inline int sum_bench_fill(sum_bench *b, int round)
{
    float *x = hg_hostbuf_data(b->hb);
    for (size_t i = 0; i < SUM_N; i++)
        x[i] = (float)(round * 1000 + b->f.rank + (int)i);
    return hg_hostbuf_mark_written(b->hb, 0, SUM_N * sizeof(float));
}

/* Round `round` on runner r: it succeeds and x holds the sum over ranks of
 * that round's data; *replayed (if not NULL) says whether it replayed. */
static inline int sum_bench_pass(sum_bench *b, hg_runner *r, int round, uint32_t *replayed)
{
    if (sum_bench_fill(b, round) != 0)
        return -1;
    hg_run_stats s;
    int rc = hg_runner_run(r, &b->c, &b->arg, 1, &s);
    if (rc != 0) {
        fprintf(stderr, "rank %d round %d: %s\n", b->f.rank, round, hg_runner_errmsg(r));
        return rc;
    }
    const float *x = hg_hostbuf_data(b->hb);
    const int n = b->f.size;
    for (size_t i = 0; i < SUM_N; i++) {
        const float want = (float)(n * (round * 1000 + (int)i) + n * (n - 1) / 2);
        if (x[i] != want) {
            fprintf(stderr, "rank %d round %d: x[%zu] = %g, want %g (another round's data)\n",
                    b->f.rank, round, i, x[i], want);
            return -1;
        }
    }
    if (replayed != NULL)
        *replayed = s.replayed;
    return 0;
}

#endif
