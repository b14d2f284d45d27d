/*
 * abort_check.c: the bounded wait (hg_mpi_set_timeout).  Rank 0 makes a run
 * that rank 1 never makes: rank 0's agreement waits for it, at most 1 s,
 * then aborts the whole job naming itself and what it waited for.  A hang
 * here is the bug.  tests/mpi/abort_check.sh judges the job's output (the
 * message, a nonzero exit, no run that returned); ctest's TIMEOUT catches
 * a hang.
 */
#include <stdio.h>

#include "hostgraph_mpi.h"

static int orch_nothing(hg_orch *o, void *user)
{
    (void)o;
    (void)user;
    return 0;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    hg_device *dev = NULL;
    hg_runner *r = NULL;
    hg_mpi *m = NULL;
    char err[256] = "";
    if (hg_device_open("sim:cores=1,mem=16M", &dev, err, sizeof err) != 0 ||
        hg_runner_open(dev, &r) != 0 ||
        hg_mpi_attach(r, MPI_COMM_WORLD, &m, err, sizeof err) != 0) {
        fprintf(stderr, "setup failed: %s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    hg_mpi_set_timeout(m, 1.0);
    if (hg_mpi_rank(m) == 0) {
        hg_callable c = {"nothing", orch_nothing, NULL};
        int rc = hg_runner_run(r, &c, NULL, 0, NULL); /* aborts the job in its agreement */
        fprintf(stderr, "rank 0: the run returned %d instead of aborting\n", rc);
    }
    hg_mpi_detach(m);
    hg_runner_close(r);
    hg_device_close(dev);
    MPI_Finalize();
    return 0;
}
