/*
 * hostgraph_mpi.h: the public header of libhostgraph_mpi, collectives across
 * MPI ranks as tasks of hostgraph's graphs.  Built when CMake finds MPI
 * (Debian: openmpi-bin libopenmpi-dev); libhostgraph itself never links MPI.
 *
 * The model: each rank (an MPI process) opens its own device and runner and
 * attaches a communicator to the runner.  Every rank then makes the same
 * sequence of runs, each run's orchestration submitting the same sequence of
 * allreduces (same elements, same dtype; the data differ): SPMD.  An
 * allreduce is a task like any other: it reads and writes a device range
 * (an INOUT task arg), its dependencies come from the same inference as
 * every task's, and the graph's other tasks keep running on the other cores
 * while it waits on MPI.
 *
 * Failure agreement (the promise): a run that fails on one rank fails on
 * every rank, with the same code and the message "rank F of N failed: <its
 * message>" naming the lowest failing rank F; no rank hangs waiting for a
 * failed one; nothing is written to the host or published on any rank; and
 * the next run works.  Runs pair one to one across ranks whatever fails
 * where: a run that fails before it executes (bad args, a plan or bind
 * error, an orchestration's failure, a NULL callable or one without an
 * orchestration function: HG_EINVAL) still takes part in the agreement, so
 * it fails on every rank with its code, and every rank's next run pairs
 * with the others' next.  hg_runner_run(NULL, ...) is no run at all: with
 * no runner there is no attachment to agree through, so it returns
 * HG_EINVAL on that rank alone and the others' run pairs with that rank's
 * next one (a caller must not make it).  How: every allreduce first
 * exchanges a small status word (a rank whose run already failed sends it
 * from its run's end, so every pending exchange completes), and every run
 * of an attached runner ends, before copy back writes anything, with the
 * same exchange repeated until every rank has reached its run's end (the
 * runner's decide hook, hg_runner_set_decide).  A rank that stops making
 * runs, or whose kernel never returns, would leave the others waiting:
 * every wait is bounded (hg_mpi_set_timeout), and past the bound the job
 * is aborted with MPI_Abort and a message naming the rank and the
 * collective.
 *
 * Threading: MPI must be initialised with at least MPI_THREAD_SERIALIZED:
 * allreduce tasks call MPI from the device's core threads (the sim) or the
 * run's host-step helper threads (a queue device), one at a time (a run's
 * allreduces form a chain), and the agreement from the thread that calls
 * hg_runner_run.  The library talks on its own duplicate of the
 * communicator, so it never matches the caller's messages; a caller that
 * uses MPI on other threads while a run is in flight needs
 * MPI_THREAD_MULTIPLE.
 */
#ifndef HOSTGRAPH_MPI_H
#define HOSTGRAPH_MPI_H

#include <mpi.h>

#include "hostgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hg_mpi hg_mpi;

/* Attaches communicator `comm` to runner r: duplicates it (a collective
 * call over comm) and sets r's decide hook (hg_runner_set_decide), so every
 * later run of r ends with the failure agreement above, even one that
 * submits no allreduce (its cost: one small collective per run).  One
 * attachment per runner.  On error, if errbuf is not NULL, writes a
 * one-line message there: HG_EINVAL (r or out NULL, comm MPI_COMM_NULL);
 * HG_EUNSUPPORTED (MPI not initialised, or finalised, or a thread level
 * below MPI_THREAD_SERIALIZED); HG_EIO (an MPI call failed); HG_ENOMEM. */
int hg_mpi_attach(hg_runner *r, MPI_Comm comm, hg_mpi **out, char *errbuf, size_t errlen);
/* Removes the hook, drops the runner's replay recording
 * (hg_runner_invalidate_replay: its allreduce tasks name this attachment,
 * so the runner's next run orchestrates, with whatever attachment its
 * orchestration then names) and frees the duplicate communicator
 * (collective over it: every rank detaches).  Detach before closing the
 * runner and before MPI_Finalize, with no run of the runner in flight.
 * NULL is a no-op. */
void hg_mpi_detach(hg_mpi *m);
/* This rank and the number of ranks in the communicator; -1 for NULL. */
int hg_mpi_rank(const hg_mpi *m);
int hg_mpi_size(const hg_mpi *m);
/* The bound on any one wait for the other ranks, in seconds (default 600;
 * 0 waits for ever).  Past it the job is aborted (MPI_Abort) naming this
 * rank and what it waited for.  HG_EINVAL for NULL, a negative or NaN. */
int hg_mpi_set_timeout(hg_mpi *m, double seconds);

/*
 * Submits, from an orchestration of m's runner, an allreduce task: `view`
 * (a view of run arg `arg`, as a task arg) becomes, on every rank, the
 * elementwise sum over the ranks.  It is the task arg {arg, HG_INOUT,
 * *view}: readers after it see the sum; writers before it are included.
 * Each allreduce also depends on the run's previous allreduce (the chain
 * that keeps every rank's MPI calls in the same order).
 *
 *   - dtypes: HG_F32, and HG_BF16 summed in f32: the bf16 elements are
 *     widened into a host staging buffer, summed by MPI as MPI_FLOAT with
 *     MPI_SUM, and rounded back to bf16 once (round to nearest even), so
 *     the sum is rounded once whatever the number of ranks and every rank
 *     gets the same bits; the cost is 4 bytes per element handed to MPI.
 *   - views: dense views at any offset; a strided view (gaps or reuse) is
 *     refused (HG_EINVAL): allreduce a dense view of it.
 *   - staging: the task is a host step (hg_task_submit_host_step).  On
 *     the sim the device memory is host memory, so it hands MPI the
 *     translated pointer of the device range (f32 in place, no copy; bf16
 *     through the staging buffer): no byte crosses a link.  On a queue
 *     device (OpenCL) the range comes down into host staging once the tasks
 *     it depends on are done, is reduced there by a helper thread of the
 *     run, and goes back up before its readers start: 2 x the range's bytes
 *     in the run's d2h/h2d stats, and the device keeps running the tasks
 *     that do not depend on it meanwhile.
 *   - counts: the run's hg_run_stats.net_bytes grows by the bytes handed to
 *     MPI (elements x 4, f32 and bf16 alike) and net_ns by the task's time
 *     in MPI calls (its status word included); the agreement at the run's
 *     end is not counted (it is in the run's copy-back time).
 *   - on the sim the task takes a vector core for the time it waits: a
 *     device with no vector core cannot run it (HG_EUNSUPPORTED at submit).
 *
 * On error the orchestration fails (hg_orch_fail) and the code is returned:
 * HG_EINVAL (o, m or view NULL; a dtype other than f32 or bf16; a strided
 * view; m attached to a runner that is not running, i.e. o is another
 * runner's orchestration: a task of that runner's replay recording would
 * hold m past its detach), HG_ELIMIT (more than INT_MAX elements), or any code
 * hg_task_submit_host_step returns (e.g. HG_ERANGE: the view
 * is not inside the arg).  The task's id goes to *out when out is not NULL.
 */
int hg_mpi_allreduce(hg_orch *o, hg_mpi *m, uint32_t arg, const hg_tensor *view, hg_task_id *out);

/* Fault injection, for tests: the k-th next allreduce task on this rank
 * (k = 1: the very next) fails as a kernel failure before any data moves,
 * once, as a failure to get its staging memory would: it still takes part
 * in the status exchange, carrying its failure, so no rank sends data.
 * k = 0 disarms.  HG_EINVAL for NULL. */
int hg_mpi_inject_fault(hg_mpi *m, uint64_t k);

#ifdef __cplusplus
}
#endif
#endif /* HOSTGRAPH_MPI_H */
