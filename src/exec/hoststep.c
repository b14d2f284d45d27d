/*
 * hoststep.c: host steps (hg_task_submit_host_step) on a queue device.
 *
 * Owns, for one exec_run_queue: the helper threads, the host staging of
 * every host step, and what the steps found (the lowest failure, spans).
 * A host step's shape: the device gives it an event the host completes
 * (device_host_launch); a helper takes it, waits for the tasks it depends
 * on (device_host_wait), copies its args' extents down into its staging,
 * runs its fn there, copies its written args back up, and completes the
 * event (device_host_done).  The kernels that depend on it are enqueued
 * only after that (enqueue.c), so no command on the device ever waits for
 * the host: fn may block (MPI) while the device runs the rest of the graph,
 * even on in-order queues, where a command waiting for the host would hold
 * back every unrelated command behind it.
 *
 * Why the copies are made by the helper, synchronously, and not enqueued
 * behind the step's wait list: a copy enqueued to run after the host
 * completes an event would sit in an in-order queue, holding back every
 * command behind it (another runner's copies, or, on a device without an
 * out-of-order queue, independent kernels) while fn waits on the network.
 * The helper instead uses the device's own copy path (device_copy_batch:
 * counted in the run's stats, split at pieces, subject to injected faults)
 * once the step's inputs are done.
 *
 * Invariants:
 *   - steps are taken in the order they are posted, by up to
 *     EXEC_HOST_THREADS helpers; a step is posted once the kernels it
 *     depends on are launched and the host steps it depends on are posted
 *     (enqueue.c), so every step a step depends on was taken before it and
 *     the oldest step in progress always has its inputs coming;
 *   - every posted step's event is completed exactly once, whatever
 *     failed: a step that did not run completes it too (its waiters would
 *     wait for ever otherwise), and only then is its end told to the
 *     posting thread (exec_hosts_next_done), which enqueues the kernels
 *     that depend on it only after a step that ran and succeeded;
 *   - a step that fails marks everything that depends on it (its
 *     descendants, through the graph's successor lists) failed before it
 *     completes its event: a host step so marked does not run, and no
 *     kernel that depends on it is enqueued, as on the sim, where a failed
 *     task's dependents never run;
 *   - once the run's cancel flag is set, a step whose wait ends does not
 *     run (nor do the kernels after it): it ends as canceled.
 * Memory: O(tasks) per run with host steps (marks, a walk's stack) plus
 * the staging (the sum of the host steps' arg extents); none otherwise.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "device/device.h"
#include "exec/exec.h"

/* Host steps of one run in flight at once: MPI's chain needs one; more let
 * independent steps (a send and a receive, say) make progress together. */
#define EXEC_HOST_THREADS 4u

enum { HOST_UNKNOWN = 0, HOST_FAILED = 1 };

/* How a posted step ended (exec_hosts_next_done). */
enum { STEP_RAN = 1, STEP_FAILED = 2, STEP_CANCELED = 3 };

struct exec_hosts {
    hg_device *dev;
    const graph *g;
    exec_counts *counts;
    hg_device_counters *tally;
    const atomic_bool *cancel; /* hg_runner_cancel's flag, or NULL */
    uint32_t nsteps;
    uint32_t *pred_first; /* per task: its first edge in edge_from */
    uint32_t *step_of;    /* per host step's task: its rank among the host steps */
    atomic_uchar *mark;   /* per task: HOST_FAILED once something it needs failed */
    uint32_t *walk;       /* the marking walk's stack (ntasks), under lock */
    uint32_t *order;      /* the steps posted, in posting order (j-th posted) */
    size_t *stage_at;     /* per step (k-th host step in task order): its staging */
    uint64_t *span;       /* per posted step j: host-clock start and end */
    uint8_t *outcome;     /* per posted step j: STEP_*, once it ended */
    uint32_t *ended;      /* posted steps j in the order they ended */
    char *staging;
    pthread_mutex_t lock;
    pthread_cond_t more;
    pthread_cond_t end;                       /* a step ended */
    uint32_t posted, taken, nended, reported; /* under lock */
    uint32_t ran, canceled;                   /* under lock */
    bool closed;
    uint32_t bad_task; /* the lowest failing step, under lock */
    hg_err bad;
    uint32_t nthreads;
    pthread_t thread[EXEC_HOST_THREADS];
};

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* Where arg a's staging starts, from offset `at`: at its device address's
 * offset modulo HG_DEVICE_ALIGN, so that a kernel sees the alignment it
 * would see on the device. */
static size_t stage_base(size_t at, const graph_arg *a)
{
    return align_up(at, HG_DEVICE_ALIGN) + (size_t)(a->lo % HG_DEVICE_ALIGN);
}

/* Each task's first edge, and the staging of every host step (the k-th
 * host step in task order: the order they are posted in). */
static int hosts_layout(exec_hosts *h, hg_err *e)
{
    const graph *g = h->g;
    size_t at = 0;
    uint32_t k = 0, edge = 0;
    for (uint32_t t = 0; t < g->ntasks; t++) {
        const graph_task *task = &g->tasks[t];
        h->pred_first[t] = edge;
        edge += task->npreds;
        if (!graph_task_kernel(g, task)->host_step)
            continue;
        h->step_of[t] = k;
        h->stage_at[k++] = at;
        const graph_arg *args = graph_task_args(g, task);
        for (uint32_t i = 0; i < task->nargs; i++)
            if (args[i].hi > args[i].lo)
                at = stage_base(at, &args[i]) + (size_t)(args[i].hi - args[i].lo);
    }
    if (at == 0)
        return 0;
    h->staging = aligned_alloc(HG_DEVICE_ALIGN, align_up(at, HG_DEVICE_ALIGN));
    return h->staging ? 0 : err_set(e, HG_ENOMEM, "host staging of %zu bytes", at);
}

/* A written arg whose extent has gaps comes down too, so that the gaps go
 * back up as they were. */
static bool targ_dense(const graph_targ *a)
{
    size_t n = 1;
    for (uint32_t d = 0; d < a->ndims; d++)
        n *= a->shape[d];
    return n * hg_dtype_size(a->dtype) == (size_t)(a->hi - a->lo);
}

/* Copies step k's args down (up: its written args back up). */
static int host_copy(exec_hosts *h, uint32_t k, const graph_task *task, bool up, hg_err *e)
{
    const graph_arg *args = graph_task_args(h->g, task);
    device_copy list[HG_MAX_TASK_ARGS];
    size_t n = 0, at = h->stage_at[k];
    for (uint32_t i = 0; i < task->nargs; i++) {
        const graph_arg *a = &args[i];
        if (a->hi == a->lo)
            continue;
        at = stage_base(at, a);
        const graph_targ whole = graph_arg_expand(h->g, a);
        bool moves = up ? a->write : a->read || !targ_dense(&whole);
        if (moves)
            list[n++] = (device_copy){h->staging + at, a->lo, (size_t)(a->hi - a->lo)};
        at += (size_t)(a->hi - a->lo);
    }
    int rc = n ? device_copy_batch(h->dev, up, list, n, h->tally, NULL) : 0;
    return rc == 0 ? 0
                   : err_set(e, rc, "staging its args %s: %s",
                             up ? "host -> device" : "device -> host", hg_strerror(rc));
}

/* Runs step k's fn on views of its staging. */
static int host_call(exec_hosts *h, uint32_t k, uint32_t t, uint32_t helper, hg_err *e)
{
    const graph_task *task = &h->g->tasks[t];
    const graph_arg *args = graph_task_args(h->g, task);
    hg_kview views[HG_MAX_TASK_ARGS];
    size_t at = h->stage_at[k];
    for (uint32_t i = 0; i < task->nargs; i++) {
        const graph_arg *a = &args[i];
        views[i] = (hg_kview){.data = NULL, .dtype = (hg_dtype)a->dtype};
        const hg_devaddr addr =
            graph_arg_layout(h->g, a, &views[i].ndims, views[i].shape, views[i].strides);
        if (a->hi == a->lo)
            continue;
        at = stage_base(at, a);
        views[i].data = h->staging + at + (addr - a->lo);
        at += (size_t)(a->hi - a->lo);
    }
    const hg_kernel_ctx kc = {.args = views,
                              .nargs = task->nargs,
                              .scalars = graph_task_scalars(h->g, task),
                              .nscalars = task->nscalars,
                              .core = helper,
                              .core_type = graph_task_kernel(h->g, task)->core};
    int krc = exec_call(graph_task_kernel(h->g, task)->fn, &kc, h->counts);
    return krc == 0 ? 0 : err_set(e, HG_EKERNEL, "failed with code %d", krc);
}

/* Under lock: records step t's failure (the lowest task wins) and marks
 * every task that depends on it, so no host step among them runs. */
static void host_failed(exec_hosts *h, uint32_t t, const hg_err *why)
{
    const graph *g = h->g;
    if (t < h->bad_task) {
        h->bad_task = t;
        err_set(&h->bad, why->code, "task %u (kernel '%s') %s", t,
                graph_task_kernel(g, &g->tasks[t])->name, why->msg);
    }
    uint32_t n = 0;
    h->walk[n++] = t;
    while (n > 0) {
        const graph_task *task = &g->tasks[h->walk[--n]];
        const uint32_t *succ = graph_task_succ(g, task);
        for (uint32_t i = 0; i < task->nsucc; i++) {
            if (atomic_exchange(&h->mark[succ[i]], HOST_FAILED) == HOST_UNKNOWN)
                h->walk[n++] = succ[i]; /* each task pushed once: n <= ntasks */
        }
    }
}

static bool host_canceled(const exec_hosts *h)
{
    return h->cancel != NULL && atomic_load_explicit(h->cancel, memory_order_relaxed);
}

/* The j-th posted host step, from wait to completion; then its end is
 * told to the posting thread, after its event is complete. */
static void host_step(exec_hosts *h, uint32_t j, uint32_t helper)
{
    const uint32_t t = h->order[j], k = h->step_of[t];
    const graph_task *task = &h->g->tasks[t];
    hg_err err;
    err_clear(&err);
    int rc = device_host_wait(h->dev, h->g->edge_from + h->pred_first[t], task->npreds, &err);
    uint64_t start = clock_now_ns();
    const bool canceled = rc == 0 && host_canceled(h); /* not started: it does not run */
    if (rc == 0 && !canceled && atomic_load(&h->mark[t]) == HOST_FAILED)
        rc = err_set(&err, HG_EKERNEL, "did not run: a host step it depends on failed");
    if (rc == 0 && !canceled)
        rc = host_copy(h, k, task, false, &err);
    if (rc == 0 && !canceled)
        rc = host_call(h, k, t, helper, &err);
    if (rc == 0 && !canceled)
        rc = host_copy(h, k, task, true, &err);
    h->span[2 * j] = start;
    h->span[2 * j + 1] = clock_now_ns();
    if (rc != 0) { /* marked before its event completes: its waiters see it */
        pthread_mutex_lock(&h->lock);
        host_failed(h, t, &err);
        pthread_mutex_unlock(&h->lock);
    }
    device_host_done(h->dev, t);
    pthread_mutex_lock(&h->lock);
    h->outcome[j] = rc != 0 ? STEP_FAILED : canceled ? STEP_CANCELED : STEP_RAN;
    h->ran += h->outcome[j] == STEP_RAN;
    h->canceled += canceled;
    h->ended[h->nended++] = j;
    pthread_cond_signal(&h->end);
    pthread_mutex_unlock(&h->lock);
}

typedef struct host_helper {
    exec_hosts *h;
    uint32_t index;
} host_helper;

static void *host_loop(void *arg)
{
    exec_hosts *h = ((host_helper *)arg)->h;
    const uint32_t index = ((host_helper *)arg)->index;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->taken == h->posted && !h->closed)
            pthread_cond_wait(&h->more, &h->lock);
        if (h->taken == h->posted)
            break;
        uint32_t k = h->taken++;
        pthread_mutex_unlock(&h->lock);
        host_step(h, k, index);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* The state of a run's host steps, all allocated (NULL on failure). */
static exec_hosts *hosts_alloc(const graph *g, uint32_t nsteps)
{
    exec_hosts *h = calloc(1, sizeof *h + EXEC_HOST_THREADS * sizeof(host_helper));
    if (h == NULL)
        return NULL;
    h->pred_first = malloc((size_t)g->ntasks * sizeof *h->pred_first);
    h->step_of = malloc((size_t)g->ntasks * sizeof *h->step_of);
    h->mark = calloc(g->ntasks, sizeof *h->mark);
    h->walk = malloc((size_t)g->ntasks * sizeof *h->walk);
    h->order = malloc((size_t)nsteps * sizeof *h->order);
    h->stage_at = malloc((size_t)nsteps * sizeof *h->stage_at);
    h->span = calloc((size_t)nsteps * 2, sizeof *h->span);
    h->outcome = calloc(nsteps, sizeof *h->outcome);
    h->ended = malloc((size_t)nsteps * sizeof *h->ended);
    if (h->pred_first && h->step_of && h->mark && h->walk && h->order && h->stage_at && h->span &&
        h->outcome && h->ended)
        return h;
    exec_hosts_free(h);
    return NULL;
}

int exec_hosts_start(hg_device *dev, const graph *g, const atomic_bool *cancel, exec_counts *counts,
                     hg_device_counters *tally, exec_hosts **out, hg_err *e)
{
    *out = NULL;
    uint32_t nsteps = 0;
    for (uint32_t t = 0; t < g->ntasks; t++)
        nsteps += graph_task_kernel(g, &g->tasks[t])->host_step;
    if (nsteps == 0)
        return 0;
    exec_hosts *h = hosts_alloc(g, nsteps);
    if (h == NULL)
        return err_set(e, HG_ENOMEM, "host steps: state for %u tasks", g->ntasks);
    h->dev = dev;
    h->g = g;
    h->counts = counts;
    h->tally = tally;
    h->cancel = cancel;
    h->nsteps = nsteps;
    h->bad_task = UINT32_MAX;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->more, NULL);
    pthread_cond_init(&h->end, NULL);
    int rc = hosts_layout(h, e);
    host_helper *helpers = (host_helper *)(h + 1);
    const uint32_t want = nsteps < EXEC_HOST_THREADS ? nsteps : EXEC_HOST_THREADS;
    for (uint32_t i = 0; rc == 0 && i < want; i++) {
        helpers[i] = (host_helper){h, i};
        if (pthread_create(&h->thread[i], NULL, host_loop, &helpers[i]) != 0)
            rc = err_set(e, HG_ENOMEM, "host steps: helper thread %u of %u", i + 1, want);
        else
            h->nthreads++;
    }
    if (rc != 0) {
        exec_hosts_finish(h);
        exec_hosts_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

void exec_hosts_post(exec_hosts *h, uint32_t task)
{
    pthread_mutex_lock(&h->lock);
    h->order[h->posted++] = task;
    pthread_cond_signal(&h->more);
    pthread_mutex_unlock(&h->lock);
}

bool exec_hosts_next_done(exec_hosts *h, uint32_t *task, bool *ok)
{
    pthread_mutex_lock(&h->lock);
    while (h->reported == h->nended && h->reported < h->posted)
        pthread_cond_wait(&h->end, &h->lock);
    const bool any = h->reported < h->nended;
    if (any) {
        const uint32_t j = h->ended[h->reported++];
        *task = h->order[j];
        *ok = h->outcome[j] == STEP_RAN;
    }
    pthread_mutex_unlock(&h->lock);
    return any;
}

void exec_hosts_finish(exec_hosts *h)
{
    pthread_mutex_lock(&h->lock);
    h->closed = true;
    pthread_cond_broadcast(&h->more);
    pthread_mutex_unlock(&h->lock);
    for (uint32_t i = 0; i < h->nthreads; i++)
        pthread_join(h->thread[i], NULL);
    h->nthreads = 0;
}

uint32_t exec_hosts_result(const exec_hosts *h, uint64_t *spans, hg_err *e)
{
    for (uint32_t k = 0; spans != NULL && k < h->posted; k++) {
        spans[2 * h->order[k]] = h->span[2 * k];
        spans[2 * h->order[k] + 1] = h->span[2 * k + 1];
    }
    if (h->bad_task != UINT32_MAX)
        err_set(e, h->bad.code, "%s", h->bad.msg);
    return h->bad_task;
}

uint32_t exec_hosts_ran(const exec_hosts *h, uint32_t *canceled)
{
    *canceled = h->canceled;
    return h->ran;
}

void exec_hosts_free(exec_hosts *h)
{
    if (h == NULL)
        return;
    if (h->dev != NULL) { /* initialised */
        pthread_cond_destroy(&h->end);
        pthread_cond_destroy(&h->more);
        pthread_mutex_destroy(&h->lock);
    }
    free(h->pred_first);
    free(h->step_of);
    free(h->mark);
    free(h->walk);
    free(h->order);
    free(h->stage_at);
    free(h->span);
    free(h->outcome);
    free(h->ended);
    free(h->staging);
    free(h);
}
