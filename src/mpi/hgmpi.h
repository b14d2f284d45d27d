/*
 * hgmpi.h: what the two files of libhostgraph_mpi share (comm.c: the
 * attachment and the run's agreement; allreduce.c: the allreduce task).
 *
 * Internal names carry `hgmpi_`, not the folder's `mpi_`: MPI reserves the
 * MPI_ prefix and its Fortran bindings export lowercase mpi_* symbols.
 *
 * The library uses only the public API of hostgraph.h (plus MPI), so it can
 * sit on the static or the shared core alike.
 */
#ifndef HG_MPI_HGMPI_H
#define HG_MPI_HGMPI_H

#include <stdbool.h>
#include <stdint.h>

#include "hostgraph_mpi.h"

/* The status word every collective of the agreement exchanges (MPI_MIN
 * over int64 each):
 *   [DONE]     1 at the run's end, 0 in a task: the min is 1 iff every rank
 *              is at its run's end;
 *   [NOT_DONE] the opposite: the min is 0 iff some rank is at its end;
 *   [KEY]      a rank's own failure as rank * 256 + (-code), else
 *              HGMPI_NO_FAILURE: the min names the lowest failing rank and
 *              its code;
 *   [SIG], [NEG_SIG]  the allreduce's signature (elements * 16 + dtype; 0
 *              at the end) and its negation: the ranks agree iff min ==
 *              -min(neg). */
enum { HGMPI_DONE, HGMPI_NOT_DONE, HGMPI_KEY, HGMPI_SIG, HGMPI_NEG_SIG, HGMPI_STATUS_WORDS };
#define HGMPI_NO_FAILURE INT64_MAX
/* A failure's message as every rank sees it (one MPI_Bcast of this many
 * bytes from the failing rank). */
#define HGMPI_MSG_MAX 384

struct hg_mpi {
    hg_runner *runner;
    MPI_Comm comm; /* our duplicate of the caller's communicator */
    int rank, size;
    double timeout_s; /* the bound on any one wait; 0: none */
    /* This run's allreduces: a chain in submission order (each depends on
     * the last), so every rank calls MPI in the same order from whichever
     * core runs it, one call at a time.  Reset by the agreement. */
    bool chained;
    hg_task_id last;
    uint32_t submitted;
    /* Set by an allreduce task that failed, read by the agreement (the
     * tasks are done by then): a peer's failure learned in a task (its
     * status KEY) or this rank's own reason. */
    int64_t peer_key;
    char why[HGMPI_MSG_MAX];
    int why_code;      /* the HG_E* code `why` stands for (0: the run's own) */
    uint64_t fault_at; /* hg_mpi_inject_fault: fail the k-th next allreduce */
    /* bf16 staging: sums go to MPI as f32 (one buffer, as one allreduce
     * runs at a time; grows geometrically, never shrinks). */
    float *staging;
    size_t staging_cap;
};

/* Exchanges one status word (MPI_Iallreduce, MPI_MIN) into out: the
 * bounded wait of hgmpi_wait.  HG_EIO (MPI failed; m->why says how). */
int hgmpi_status(hg_mpi *m, const int64_t in[HGMPI_STATUS_WORDS], int64_t out[HGMPI_STATUS_WORDS]);
/* Waits for req, testing it, for at most m->timeout_s; past that the job
 * cannot agree any more (a rank stopped making runs, or hangs in a
 * kernel), so it is aborted (MPI_Abort) with a message naming this rank and
 * `what`.  HG_EIO if MPI_Test fails. */
int hgmpi_wait(hg_mpi *m, MPI_Request *req, const char *what);
/* Formats an MPI error into m->why and returns HG_EIO. */
int hgmpi_fail(hg_mpi *m, const char *call, int mpi_rc);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t hgmpi_now_ns(void);

#endif
