/*
 * hostgraph_tp.c: the scene runner's tensor-parallel callbacks (scene_tp)
 * over libhostgraph_mpi: attach and detach a runner (hg_mpi_attach), the
 * orchestration's allreduce (hg_mpi_allreduce), and the two small
 * collectives the scene runner agrees with (MPI_Allreduce MIN of int64
 * words, MPI_Gather of bytes to rank 0) on the job's communicator.  Those
 * two are called between runs only, from the thread that runs the rounds,
 * so MPI_THREAD_SERIALIZED is enough (the allreduce tasks call MPI from the
 * device's core threads during runs, one at a time: hostgraph_mpi.h).
 */
#include "hostgraph_tp.h"

#include <string.h>

static int tp_attach(void *user, hg_runner *r, hg_err *err)
{
    tp_job *job = user;
    int rc = hg_mpi_attach(r, job->comm, &job->mpi, err->msg, sizeof err->msg);
    if (rc == 0 && job->timeout_s > 0)
        rc = hg_mpi_set_timeout(job->mpi, job->timeout_s);
    err->code = rc;
    return rc;
}

static void tp_detach(void *user)
{
    tp_job *job = user;
    hg_mpi_detach(job->mpi);
    job->mpi = NULL;
}

static int tp_allreduce(void *user, hg_orch *o, uint32_t arg, const hg_tensor *view)
{
    tp_job *job = user;
    return hg_mpi_allreduce(o, job->mpi, arg, view, NULL);
}

static int tp_agree_min(void *user, const int64_t *in, int64_t *out, uint32_t n)
{
    tp_job *job = user;
    int rc = MPI_Allreduce(in, out, (int)n, MPI_INT64_T, MPI_MIN, job->comm);
    return rc == MPI_SUCCESS ? 0 : HG_EIO;
}

static int tp_gather(void *user, const void *in, size_t bytes, void *out)
{
    tp_job *job = user;
    int rc = MPI_Gather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, 0, job->comm);
    return rc == MPI_SUCCESS ? 0 : HG_EIO;
}

int tp_job_init(tp_job *job, MPI_Comm comm)
{
    int rank = 0, size = 0;
    memset(job, 0, sizeof *job);
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return HG_EIO;
    /* The ranks that share this host: a device index is per host. */
    MPI_Comm host;
    int local = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) != MPI_SUCCESS)
        return HG_EIO;
    int lrc = MPI_Comm_rank(host, &local);
    MPI_Comm_free(&host);
    if (lrc != MPI_SUCCESS)
        return HG_EIO;
    job->comm = comm;
    job->tp = (scene_tp){.rank = (uint32_t)rank,
                         .size = (uint32_t)size,
                         .local_rank = (uint32_t)local,
                         .user = job,
                         .attach = tp_attach,
                         .detach = tp_detach,
                         .allreduce = tp_allreduce,
                         .agree_min = tp_agree_min,
                         .gather = tp_gather};
    return 0;
}

int tp_job_begin(tp_job *job, uint32_t n, FILE *err)
{
    int provided = 0, size = 0, rank = 0;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rc = SCENE_EXIT_OK;
    if (provided < MPI_THREAD_SERIALIZED) {
        fprintf(err, "hostgraph: --tp %u: MPI gives thread level %d, below MPI_THREAD_SERIALIZED\n",
                n, provided);
        rc = SCENE_EXIT_RUNTIME;
    } else if ((uint32_t)size != n) {
        if (rank == 0)
            fprintf(err,
                    "hostgraph: --tp %u: the MPI job has %d rank%s; run it under mpirun -np %u "
                    "(one rank per share)\n",
                    n, size, size == 1 ? "" : "s", n);
        rc = SCENE_EXIT_USAGE;
    } else if (tp_job_init(job, MPI_COMM_WORLD) != 0) {
        fprintf(err, "hostgraph: --tp %u: MPI cannot say this rank\n", n);
        rc = SCENE_EXIT_RUNTIME;
    }
    if (rc != SCENE_EXIT_OK)
        MPI_Finalize();
    return rc;
}

void tp_job_end(tp_job *job)
{
    /* No rank exits before rank 0 has written its reports: mpirun aborts
     * the job when the first rank exits non-zero (a golden failure, an
     * interrupt), which would kill rank 0 mid-write. */
    MPI_Barrier(job->comm);
    MPI_Finalize();
}
