/*
 * mpi_fixture.h: what the mpi tests share.  Each rank opens its own sim
 * device and runner and attaches MPI_COMM_WORLD; every rank runs every test
 * in the same order (SPMD), each checking what it sees.  A wait bounded at
 * 60 s turns a hang (a bug in the agreement) into an aborted job, which
 * fails the test, instead of a stuck ctest.
 */
#ifndef HG_TESTS_MPI_FIXTURE_H
#define HG_TESTS_MPI_FIXTURE_H

#include <string.h>

#include "hostgraph_mpi.h"
#include "testlib.h"

typedef struct mpi_fixture {
    hg_device *dev;
    hg_runner *r;
    hg_mpi *m;
    int rank, size;
} mpi_fixture;

static inline int mpi_fixture_open(mpi_fixture *f, const char *spec)
{
    memset(f, 0, sizeof *f);
    char err[256];
    if (hg_device_open(spec, &f->dev, err, sizeof err) != 0 || hg_runner_open(f->dev, &f->r) != 0)
        return -1;
    int rc = hg_mpi_attach(f->r, MPI_COMM_WORLD, &f->m, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "hg_mpi_attach: %s\n", err);
        return rc;
    }
    f->rank = hg_mpi_rank(f->m);
    f->size = hg_mpi_size(f->m);
    return hg_mpi_set_timeout(f->m, 60.0);
}

static inline void mpi_fixture_close(mpi_fixture *f)
{
    hg_mpi_detach(f->m);
    hg_runner_close(f->r);
    hg_device_close(f->dev);
}

/* MPI_Init_thread, the tests, and a verdict every rank agrees on. */
static inline int mpi_test_main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI_THREAD_MULTIPLE unavailable (got %d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int failed = RUN_TESTS(), any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}

#endif
