/*
 * mpi_consumer.c: an application outside the project that links the
 * installed libhostgraph_mpi (built by install_test.sh with pkg-config and
 * with find_package(hostgraph COMPONENTS mpi), run under mpiexec as 2
 * ranks).  Each rank opens a sim device and a runner, attaches
 * MPI_COMM_WORLD, and allreduces x = rank + 1 twice: both rounds every
 * element holds the sum over ranks, and net_bytes is the payload.
 */
#include <stdio.h>

#include <hostgraph_mpi.h>

enum { N = 1000 };

static int orchestrate(hg_orch *o, void *user)
{
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    return rc ? rc : hg_mpi_allreduce(o, user, 0, &x->tensor, NULL);
}

static int check(const char *what, int rc, const hg_runner *r)
{
    if (rc != 0)
        fprintf(stderr, "mpi_consumer: %s: %s (%s)\n", what, hg_strerror(rc),
                r ? hg_runner_errmsg(r) : "");
    return rc;
}

static int run(hg_mpi *m, hg_runner *r, int rank, int size)
{
    hg_hostbuf *hb;
    int rc = hg_hostbuf_create(N * sizeof(float), &hb);
    hg_arg arg = {"x", HG_INOUT, {0}, 0, HG_RESIDENT};
    size_t shape[1] = {N};
    if (rc == 0)
        rc = hg_tensor_host(&arg.tensor, hb, HG_F32, 1, shape);
    hg_callable c = {"allreduce", orchestrate, m};
    for (int round = 0; round < 2 && rc == 0; round++) {
        float *x = hg_hostbuf_data(hb);
        for (size_t i = 0; i < N; i++)
            x[i] = (float)(rank + 1);
        hg_hostbuf_mark_written(hb, 0, N * sizeof(float));
        hg_run_stats s;
        rc = check("hg_runner_run", hg_runner_run(r, &c, &arg, 1, &s), r);
        const float want = (float)(size * (size + 1) / 2);
        for (size_t i = 0; rc == 0 && i < N; i++)
            rc = x[i] == want ? 0 : check("the sum", HG_EINVAL, NULL);
        if (rc == 0 && s.net_bytes != N * sizeof(float))
            rc = check("net_bytes", HG_EINVAL, NULL);
    }
    hg_hostbuf_destroy(hb);
    return rc;
}

int main(int argc, char **argv)
{
    int provided = 0, rank = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    hg_device *dev = NULL;
    hg_runner *r = NULL;
    hg_mpi *m = NULL;
    char err[256] = "";
    int rc =
        check("hg_device_open", hg_device_open("sim:cores=2,mem=16M", &dev, err, sizeof err), NULL);
    if (rc == 0)
        rc = check("hg_runner_open", hg_runner_open(dev, &r), NULL);
    if (rc == 0)
        rc = check("hg_mpi_attach", hg_mpi_attach(r, MPI_COMM_WORLD, &m, err, sizeof err), NULL);
    if (rc == 0) {
        rank = hg_mpi_rank(m);
        size = hg_mpi_size(m);
        rc = run(m, r, rank, size);
    }
    hg_mpi_detach(m);
    hg_runner_close(r);
    hg_device_close(dev);
    int any = rc != 0, failed = 0;
    MPI_Allreduce(&any, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    if (!failed && rank == 0)
        printf("   mpi_consumer: %d ranks: ok\n", size);
    return failed;
}
