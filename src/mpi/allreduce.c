/*
 * allreduce.c: the allreduce task (hg_mpi_allreduce) and its kernel.
 *
 * Owns: the checks at submit and what the host step does (on a sim core
 * over the device range itself, or on a queue device's helper thread over
 * its host staging): prepare (injected fault, bf16 staging) -> status
 * exchange (carrying a prepare failure) -> data collective -> counts.
 *
 * Invariants:
 *   - a run's allreduces form a chain (each depends on the one submitted
 *     before it), so on every rank they call MPI in submission order and
 *     one at a time: the kernel may use m's staging buffer and m->why
 *     without a lock, and MPI_THREAD_SERIALIZED suffices;
 *   - the data collective is entered only after a status exchange in which
 *     every rank was in an allreduce of the same signature and none had
 *     failed (comm.c's agreement relies on it);
 *   - the kernel reads only its own task arg, through a host pointer
 *     (hg_task_submit_host_step): handed to MPI as it is;
 *   - the task holds m as a scalar, so a replay recording holds it too: it
 *     is submitted only while m's runner runs (another runner's recording
 *     would outlive m), and hg_mpi_detach drops that runner's recording.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/hgmpi.h"

/* The kernel's failure codes (the run's message names the task and code;
 * m->why says more, and the agreement adds it). */
enum { KRC_PEER_FAILED = 1, KRC_GRAPHS_DIFFER = 2, KRC_MPI = 3, KRC_INJECTED = 4 };

static size_t view_elements(const hg_kview *v)
{
    if (v->data == NULL)
        return 0;
    size_t n = 1;
    for (uint32_t d = 0; d < v->ndims; d++)
        n *= v->shape[d];
    return n;
}

/* Room for n floats in the staging buffer (grows to at least double). */
static int staging_reserve(hg_mpi *m, size_t n)
{
    if (n <= m->staging_cap)
        return 0;
    size_t cap = m->staging_cap * 2 > n ? m->staging_cap * 2 : n;
    float *grown = realloc(m->staging, cap * sizeof *grown);
    if (grown == NULL) {
        snprintf(m->why, sizeof m->why, "no host memory for %zu f32 staging elements", cap);
        m->why_code = HG_ENOMEM;
        return HG_ENOMEM;
    }
    m->staging = grown;
    m->staging_cap = cap;
    return 0;
}

/* The sum over ranks of v's n elements, in place (bf16 through f32).  An
 * MPI error here leaves the other ranks in the collective: they abort at
 * the bounded wait (MPI errors are not expected to be survivable). */
static int reduce(hg_mpi *m, const hg_kview *v, size_t n)
{
    float *sum = v->data;
    if (v->dtype == HG_BF16) { /* staging reserved by prepare() */
        const uint16_t *src = v->data;
        for (size_t i = 0; i < n; i++)
            m->staging[i] = hg_bf16_to_f32(src[i]);
        sum = m->staging;
    }
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, sum, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return hgmpi_fail(m, "MPI_Iallreduce", rc);
    hg_kernel_count(HG_KCOUNT_NET_BYTES, (uint64_t)n * sizeof(float));
    rc = hgmpi_wait(m, &req, "an allreduce");
    if (rc != 0 || v->dtype != HG_BF16)
        return rc;
    uint16_t *dst = v->data;
    for (size_t i = 0; i < n; i++)
        dst[i] = hg_f32_to_bf16(m->staging[i]);
    return 0;
}

/* What can fail here before any data moves (an injected fault, no room
 * for the bf16 staging): 0 or an HG_E* code, m->why saying what.  It goes
 * into this task's status word, so every rank skips the data collective
 * instead of the others waiting in it for this one. */
static int prepare(hg_mpi *m, uint64_t seq, const hg_kview *v, size_t n)
{
    if (m->fault_at != 0 && --m->fault_at == 0) {
        snprintf(m->why, sizeof m->why, "allreduce #%llu: injected fault (hg_mpi_inject_fault)",
                 (unsigned long long)seq);
        return HG_EKERNEL;
    }
    return v->dtype == HG_BF16 && n > 0 ? staging_reserve(m, n) : 0;
}

/* Status exchange in a task, carrying this rank's `prep` failure: 0 when
 * every rank is in an allreduce of this signature and none failed; else the
 * kernel's failure code. */
static int enter(hg_mpi *m, uint64_t seq, const hg_kview *v, size_t n, int prep)
{
    const int64_t sig = (int64_t)n * 16 + (int64_t)v->dtype;
    const int64_t mine = prep != 0 ? (int64_t)m->rank * 256 - prep : HGMPI_NO_FAILURE;
    const int64_t in[HGMPI_STATUS_WORDS] = {0, 1, mine, sig, -sig};
    int64_t st[HGMPI_STATUS_WORDS];
    if (hgmpi_status(m, in, st) != 0)
        return KRC_MPI;
    if (prep != 0) /* this rank's own failure: its key goes out again at the run's end */
        return prep == HG_EKERNEL ? KRC_INJECTED : KRC_MPI;
    if (st[HGMPI_KEY] != HGMPI_NO_FAILURE) {
        m->peer_key = st[HGMPI_KEY];
        return KRC_PEER_FAILED;
    }
    if (st[HGMPI_NOT_DONE] == 0 || st[HGMPI_SIG] != -st[HGMPI_NEG_SIG]) {
        snprintf(m->why, sizeof m->why,
                 "allreduce #%llu (%zu %s elements): the ranks' graphs differ (%s)",
                 (unsigned long long)seq, n, hg_dtype_name(v->dtype),
                 st[HGMPI_NOT_DONE] == 0 ? "a rank's run has fewer allreduces"
                                         : "a rank's has another size or dtype");
        m->why_code = HG_EINVAL;
        return KRC_GRAPHS_DIFFER;
    }
    return 0;
}

static int hgmpi_allreduce_kernel(const hg_kernel_ctx *ctx)
{
    hg_mpi *m = (hg_mpi *)(uintptr_t)ctx->scalars[0];
    const uint64_t seq = ctx->scalars[1];
    const hg_kview *v = &ctx->args[0];
    const size_t n = view_elements(v);
    const uint64_t start = hgmpi_now_ns();
    int krc = enter(m, seq, v, n, prepare(m, seq, v, n));
    if (krc == 0 && n > 0 && reduce(m, v, n) != 0)
        krc = KRC_MPI; /* m->why and why_code say which */
    hg_kernel_count(HG_KCOUNT_NET_NS, hgmpi_now_ns() - start);
    return krc;
}

/* A vector core: the task moves data, it does no matrix work. */
static const hg_kernel HGMPI_KERNEL = {"allreduce", hgmpi_allreduce_kernel, HG_CORE_VECTOR, NULL,
                                       NULL};

/* The checks of hg_mpi_allreduce that need no graph; fails o on error. */
static int check_view(hg_orch *o, const hg_mpi *m, uint32_t arg, const hg_tensor *view)
{
    if (view->dtype != HG_F32 && view->dtype != HG_BF16)
        return hg_orch_fail(o, HG_EINVAL, "allreduce on arg %u: dtype %s; f32 and bf16 only", arg,
                            hg_dtype_name(view->dtype));
    size_t nbytes;
    int rc = hg_tensor_nbytes(view, &nbytes);
    if (rc != 0)
        return hg_orch_fail(o, rc, "allreduce on arg %u: the view's size: %s", arg,
                            hg_strerror(rc));
    if (nbytes != 0 && !hg_tensor_is_dense(view))
        return hg_orch_fail(o, HG_EINVAL,
                            "allreduce on arg %u: the view is strided (gaps or reuse); "
                            "allreduce a dense view",
                            arg);
    if (nbytes / hg_dtype_size(view->dtype) > INT_MAX)
        return hg_orch_fail(o, HG_ELIMIT, "allreduce on arg %u: %zu elements, at most %d", arg,
                            nbytes / hg_dtype_size(view->dtype), INT_MAX);
    return 0;
}

int hg_mpi_allreduce(hg_orch *o, hg_mpi *m, uint32_t arg, const hg_tensor *view, hg_task_id *out)
{
    if (o == NULL)
        return HG_EINVAL;
    if (m == NULL || view == NULL)
        return hg_orch_fail(o, HG_EINVAL, "allreduce on arg %u: %s is NULL", arg,
                            m == NULL ? "the MPI attachment" : "the view");
    /* m's runner is orchestrating now if o is its orchestration: another
     * runner's attachment would land in that runner's replay recording,
     * which m's detach could not drop. */
    if (hg_runner_stage(m->runner) == NULL)
        return hg_orch_fail(o, HG_EINVAL,
                            "allreduce on arg %u: the MPI attachment is another runner's (its "
                            "runner is not running); submit from its own runner's orchestration",
                            arg);
    int rc = check_view(o, m, arg, view);
    if (rc != 0)
        return rc;
    hg_task_arg ta = {arg, HG_INOUT, *view};
    const uint64_t scalars[2] = {(uint64_t)(uintptr_t)m, (uint64_t)m->submitted + 1};
    hg_task_desc d = {&HGMPI_KERNEL,       &ta, 1, scalars, 2, m->chained ? &m->last : NULL,
                      m->chained ? 1u : 0u};
    hg_task_id id;
    rc = hg_task_submit_host_step(o, &d, &id);
    if (rc != 0)
        return rc;
    m->chained = true;
    m->last = id;
    m->submitted++;
    if (out != NULL)
        *out = id;
    return 0;
}
