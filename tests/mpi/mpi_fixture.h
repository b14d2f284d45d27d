/*
 * mpi_fixture.h: what the mpi tests share.  Each rank opens its own device
 * (the sim, or each backend in turn: MPI_TEST_EACH_BACKEND) and runner and
 * attaches MPI_COMM_WORLD; every rank runs every test in the same order
 * (SPMD), each checking what it sees.  A wait bounded at 60 s turns a hang
 * (a bug in the agreement) into an aborted job, which fails the test,
 * instead of a stuck ctest.
 */
#ifndef HG_TESTS_MPI_FIXTURE_H
#define HG_TESTS_MPI_FIXTURE_H

#include <string.h>

#include "hostgraph_mpi.h"
#include "test_device.h"
#include "testlib.h"

typedef struct mpi_fixture {
    hg_device *dev;
    hg_runner *r;
    hg_mpi *m;
    int rank, size;
} mpi_fixture;

/* Attaches a runner on f->dev (opened by the caller). */
static inline int mpi_fixture_attach(mpi_fixture *f)
{
    char err[256];
    if (f->dev == NULL || hg_runner_open(f->dev, &f->r) != 0)
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

static inline int mpi_fixture_open(mpi_fixture *f, const char *spec)
{
    memset(f, 0, sizeof *f);
    char err[256];
    if (hg_device_open(spec, &f->dev, err, sizeof err) != 0)
        return -1;
    return mpi_fixture_attach(f);
}

/* mpi_fixture_open on backend with a sim spec's keys (test_device_on drops
 * the sim-only ones on other backends). */
static inline int mpi_fixture_open_on(mpi_fixture *f, const char *backend, const char *keys)
{
    memset(f, 0, sizeof *f);
    f->dev = test_device_on(backend, keys);
    return mpi_fixture_attach(f);
}

/* Whether any rank's test has failed so far (a collective): every rank
 * stops a backend loop together, so their collectives stay matched. */
static inline bool mpi_any_failed(void)
{
    int mine = test_failed_now, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any != 0;
}

/* test_each_backend over ranks: a backend runs only when every rank has it
 * (an absent OpenCL platform skips, said so; under HG_REQUIRE_OPENCL=1 the
 * open fails the test instead). */
static inline void mpi_each_backend(test_backend_body body)
{
    for (size_t b = 0; b < TEST_NBACKENDS && !mpi_any_failed(); b++) {
        int have = test_backend_available(b), all = 0;
        MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all)
            continue;
        printf("     backend %s\n", test_backends[b]);
        fflush(stdout);
        body(test_backends[b]);
    }
}

#define MPI_TEST_EACH_BACKEND(name)                                                                \
    static void name##_each(const char *backend);                                                  \
    TEST(name)                                                                                     \
    {                                                                                              \
        mpi_each_backend(name##_each);                                                             \
    }                                                                                              \
    static void name##_each(const char *backend)

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
