/*
 * comm.c: a runner's MPI attachment and the agreement that ends every run.
 *
 * Owns: the hg_mpi record (our duplicate communicator, the run's allreduce
 * chain, what a failed allreduce learned), the bounded wait every MPI call
 * of the library goes through, and the runner's decide hook.
 *
 * The agreement (hostgraph_mpi.h states the promise).  Every collective
 * of the library, bar the data of an allreduce, is one status word
 * (hgmpi.h) reduced with MPI_MIN, so any two of them match: a rank that
 * failed and sits at its run's end matches a rank still in an allreduce's
 * status exchange.  Invariants:
 *   - every rank calls the library's collectives in the same order: a
 *     run's allreduces form a chain, and the agreement runs on the thread
 *     that called hg_runner_run after execution has joined every core;
 *   - an allreduce sends its data only after a status exchange in which
 *     every rank was in that same allreduce and none had failed, so a data
 *     collective is never left half matched;
 *   - at its run's end a rank repeats the exchange until one in which every
 *     rank was at its end: all ranks leave it in the same exchange, with the
 *     same lowest failing rank, whose message one MPI_Ibcast then gives to
 *     every rank.
 * A rank's own failure is keyed rank * 256 + (-code); a rank that failed
 * only because an allreduce told it a peer had failed sends no key of its
 * own, so the rank named is one where something actually went wrong.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/hgmpi.h"

/* A collective among local ranks mostly completes within microseconds:
 * test this many times, yielding between tests, before sleeping between
 * them (a sleeping rank makes no MPI progress, so the sleep is short). */
#define HGMPI_SPIN_TESTS 2000
#define HGMPI_SLEEP_NS   50000
/* The default bound on one wait: generous, since a peer may be running a
 * long graph before it reaches the collective. */
#define HGMPI_DEFAULT_TIMEOUT_S 600.0

uint64_t hgmpi_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int hgmpi_fail(hg_mpi *m, const char *call, int mpi_rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", mpi_rc);
    snprintf(m->why, sizeof m->why, "%s failed: %s", call, text);
    m->why_code = HG_EIO;
    return HG_EIO;
}

int hgmpi_wait(hg_mpi *m, MPI_Request *req, const char *what)
{
    const uint64_t start = hgmpi_now_ns();
    for (uint64_t i = 0;; i++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return hgmpi_fail(m, "MPI_Test", rc);
        if (done)
            return 0;
        if (m->timeout_s > 0 && (double)(hgmpi_now_ns() - start) > m->timeout_s * 1e9) {
            fprintf(stderr,
                    "hostgraph mpi: rank %d of %d: %s did not complete within %g s (a rank "
                    "stopped making runs, or a kernel never returned); aborting the job\n",
                    m->rank, m->size, what, m->timeout_s);
            fflush(stderr);
            MPI_Abort(m->comm, 70);
        }
        if (i < HGMPI_SPIN_TESTS) {
            sched_yield();
        } else {
            struct timespec ts = {0, HGMPI_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
}

int hgmpi_status(hg_mpi *m, const int64_t in[HGMPI_STATUS_WORDS], int64_t out[HGMPI_STATUS_WORDS])
{
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, HGMPI_STATUS_WORDS, MPI_INT64_T, MPI_MIN, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return hgmpi_fail(m, "MPI_Iallreduce (status)", rc);
    return hgmpi_wait(m, &req, "the status exchange");
}

/* This rank's own failure as a key, or HGMPI_NO_FAILURE (success, or a
 * failure an allreduce learned from a peer). */
static int64_t own_key(const hg_mpi *m, int rc)
{
    if (rc == 0 || m->peer_key != HGMPI_NO_FAILURE)
        return HGMPI_NO_FAILURE;
    int code = rc < 0 && rc > -256 ? -rc : -HG_EINVAL;
    return (int64_t)m->rank * 256 + code;
}

static void reset_run(hg_mpi *m)
{
    m->chained = false;
    m->submitted = 0;
    m->peer_key = HGMPI_NO_FAILURE;
    m->why[0] = '\0';
    m->why_code = 0;
}

/* Repeats the status exchange until every rank is at its run's end; the
 * lowest failure key seen (or HGMPI_NO_FAILURE) goes to *lowest. */
static int agree(hg_mpi *m, int64_t key, int64_t *lowest)
{
    const int64_t in[HGMPI_STATUS_WORDS] = {1, 0, key, 0, 0};
    int64_t out[HGMPI_STATUS_WORDS];
    *lowest = m->peer_key;
    for (;;) {
        int rc = hgmpi_status(m, in, out);
        if (rc != 0)
            return rc;
        if (out[HGMPI_KEY] < *lowest)
            *lowest = out[HGMPI_KEY];
        if (out[HGMPI_DONE] == 1)
            return 0;
    }
}

/* The failing rank's message, to every rank: "rank F of N failed: ...". */
static int share_message(hg_mpi *m, int failed, char *msg, size_t msglen)
{
    char text[HGMPI_MSG_MAX];
    memset(text, 0, sizeof text);
    if (m->rank == failed)
        snprintf(text, sizeof text, "%s", msg);
    MPI_Request req;
    int rc = MPI_Ibcast(text, HGMPI_MSG_MAX, MPI_CHAR, failed, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return hgmpi_fail(m, "MPI_Ibcast (failure message)", rc);
    rc = hgmpi_wait(m, &req, "the failure message");
    if (rc != 0)
        return rc;
    text[HGMPI_MSG_MAX - 1] = '\0';
    snprintf(msg, msglen, "rank %d of %d failed: %s", failed, m->size, text);
    return 0;
}

/* The runner's decide hook (hg_runner_set_decide). */
static int hgmpi_decide(void *user, int rc, char *msg, size_t msglen)
{
    hg_mpi *m = user;
    if (rc != 0 && m->peer_key == HGMPI_NO_FAILURE && m->why[0] != '\0') {
        char local[HGMPI_MSG_MAX];
        snprintf(local, sizeof local, "%s", msg);
        snprintf(msg, msglen, "%s: %s", local, m->why);
        if (rc == HG_EKERNEL && m->why_code != 0)
            rc = m->why_code; /* an allreduce's own reason, not a kernel's */
    }
    int64_t lowest;
    int arc = agree(m, own_key(m, rc), &lowest);
    if (arc == 0 && lowest != HGMPI_NO_FAILURE) {
        arc = share_message(m, (int)(lowest / 256), msg, msglen);
        if (arc == 0)
            arc = -(int)(lowest % 256);
    }
    if (arc == HG_EIO)
        snprintf(msg, msglen, "rank %d of %d: the run's agreement failed: %s", m->rank, m->size,
                 m->why);
    reset_run(m);
    return arc;
}

static int attach_error(char *errbuf, size_t errlen, int code, const char *what)
{
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", what);
    return code;
}

/* HG_EUNSUPPORTED unless MPI is usable from the device's core threads. */
static int check_mpi(char *errbuf, size_t errlen)
{
    int init = 0, fin = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return attach_error(errbuf, errlen, HG_EUNSUPPORTED,
                            fin ? "MPI was finalised" : "MPI is not initialised (MPI_Init_thread)");
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED)
        return attach_error(errbuf, errlen, HG_EUNSUPPORTED,
                            "MPI's thread level is below MPI_THREAD_SERIALIZED: allreduce tasks "
                            "call MPI from the device's core threads (MPI_Init_thread with "
                            "MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE)");
    return 0;
}

int hg_mpi_attach(hg_runner *r, MPI_Comm comm, hg_mpi **out, char *errbuf, size_t errlen)
{
    if (r == NULL || out == NULL || comm == MPI_COMM_NULL)
        return attach_error(errbuf, errlen, HG_EINVAL,
                            r == NULL     ? "runner is NULL"
                            : out == NULL ? "out is NULL"
                                          : "communicator is MPI_COMM_NULL");
    int rc = check_mpi(errbuf, errlen);
    if (rc != 0)
        return rc;
    hg_mpi *m = calloc(1, sizeof *m);
    if (m == NULL)
        return attach_error(errbuf, errlen, HG_ENOMEM, "no memory for the MPI attachment");
    int mrc = MPI_Comm_dup(comm, &m->comm);
    if (mrc != MPI_SUCCESS) {
        hgmpi_fail(m, "MPI_Comm_dup", mrc);
        attach_error(errbuf, errlen, HG_EIO, m->why);
        free(m);
        return HG_EIO;
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    m->runner = r;
    m->timeout_s = HGMPI_DEFAULT_TIMEOUT_S;
    reset_run(m);
    hg_runner_set_decide(r, hgmpi_decide, m);
    *out = m;
    return 0;
}

void hg_mpi_detach(hg_mpi *m)
{
    if (m == NULL)
        return;
    hg_runner_set_decide(m->runner, NULL, NULL);
    /* A replay recording's allreduce tasks hold m as a scalar: it must not
     * outlive m (allreduce.c takes m from its own runner's orchestration
     * only, so no other runner's recording holds it). */
    hg_runner_invalidate_replay(m->runner);
    MPI_Comm_free(&m->comm);
    free(m->staging);
    free(m);
}

int hg_mpi_rank(const hg_mpi *m)
{
    return m ? m->rank : -1;
}

int hg_mpi_size(const hg_mpi *m)
{
    return m ? m->size : -1;
}

int hg_mpi_set_timeout(hg_mpi *m, double seconds)
{
    if (m == NULL || isnan(seconds) || seconds < 0)
        return HG_EINVAL;
    m->timeout_s = seconds;
    return 0;
}

int hg_mpi_inject_fault(hg_mpi *m, uint64_t k)
{
    if (m == NULL)
        return HG_EINVAL;
    m->fault_at = k;
    return 0;
}
