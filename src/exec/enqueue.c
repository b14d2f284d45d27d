/*
 * enqueue.c: the executor for queue devices (OpenCL).  Where exec.c hands
 * ready tasks to core threads, this hands the whole graph to the device's
 * queue(s): each task in submission order (the graph's edges only go from
 * earlier to later tasks, so that order is topological: every task a launch
 * waits for was launched before it), with the tasks the graph says it
 * depends on as its wait list, then one wait for the run.  The device may
 * run tasks that do not depend on each other at once and in any order.
 *
 * A task's predecessors are its npreds entries of graph.edge_from: edges are
 * recorded in submission order as each task is added (graph.h), so task t's
 * edges are the next npreds after those of tasks 0..t-1.
 *
 * Host steps (hg_task_submit_host_step) are launched in the same order as
 * an event the host completes (device_host_launch) and handed to the
 * run's helper threads (hoststep.c), which stage and run them while this
 * thread goes on enqueueing; the helpers are joined before the run's one
 * wait, and the run fails naming the lowest failing task, kernel or host
 * step.
 *
 * Traces: with a trace set, the device reports each task's start and end in
 * the host clock and each becomes a span, on lane L: the first lane free
 * at its start (spans taken in start order), so overlapping tasks show side
 * by side as the sim's cores do (a host step's span: its helper's host
 * time).  Without one, nothing is measured.  No state outlives the call.
 */
#include <stdlib.h>
#include <string.h>

#include "base/trace.h"
#include "device/device.h"
#include "exec/exec.h"

/* The launch args of task t, from its resolved graph args. */
static void enqueue_args(const graph *g, const graph_task *task, device_karg *out)
{
    const graph_arg *args = graph_task_args(g, task);
    for (uint32_t i = 0; i < task->nargs; i++) {
        const graph_arg *a = &args[i];
        out[i] =
            (device_karg){.lo = a->lo, .hi = a->hi, .dtype = (hg_dtype)a->dtype, .write = a->write};
        const hg_devaddr addr = graph_arg_layout(g, a, &out[i].ndims, out[i].shape, out[i].strides);
        out[i].addr = a->lo == a->hi ? 0 : addr;
    }
}

/* One run's enqueueing, in the graph's exec words (graph_finalize reserves
 * 3 a task: a run allocates nothing there). */
typedef struct enqueue_state {
    hg_device *dev;
    const graph *g;
    exec_hosts *hosts;         /* NULL: the graph has no host step */
    const atomic_bool *cancel; /* hg_runner_cancel's flag, or NULL */
    uint32_t *remaining;       /* per task: predecessors not yet far enough */
    uint32_t *pred_first;      /* per task: its first edge in edge_from */
    uint32_t *ready;           /* tasks that became ready after the walk passed them */
    uint32_t head, tail;       /* ready[head..tail), oldest first */
    uint32_t walked;           /* the in-order walk is at this task */
    uint32_t launched, posted; /* kernels launched, host steps posted */
    bool canceled;             /* a task was left out for a cancel */
} enqueue_state;

enum { RELEASE_KERNELS = 1, RELEASE_HOSTS = 2 };

static bool enqueue_is_host(const enqueue_state *s, uint32_t t)
{
    return graph_task_kernel(s->g, &s->g->tasks[t])->host_step && s->hosts != NULL;
}

/* One predecessor of each successor of t of the kinds in `which` is far
 * enough; one whose last is, and that the walk passed, is ready. */
static void enqueue_release(enqueue_state *s, uint32_t t, unsigned which)
{
    const graph_task *task = &s->g->tasks[t];
    const uint32_t *succ = graph_task_succ(s->g, task);
    for (uint32_t i = 0; i < task->nsucc; i++) {
        const uint32_t v = succ[i];
        if (!(which & (enqueue_is_host(s, v) ? RELEASE_HOSTS : RELEASE_KERNELS)))
            continue;
        if (--s->remaining[v] == 0 && v < s->walked)
            s->ready[s->tail++] = v; /* each task once: tail <= ntasks */
    }
}

/* Launches host step t (hoststep.c runs it) and hands it to the helpers:
 * a host step it precedes may be posted now (taken after it), a kernel
 * only once it is done. */
static int enqueue_host_step(enqueue_state *s, uint32_t t, hg_err *e)
{
    hg_err le;
    err_clear(&le);
    int rc = device_host_launch(s->dev, t, &le);
    if (rc != 0)
        return err_set(e, rc, "task %u (host step '%s'): %s", t,
                       graph_task_kernel(s->g, &s->g->tasks[t])->name, le.msg);
    exec_hosts_post(s->hosts, t);
    enqueue_release(s, t, RELEASE_HOSTS);
    return 0;
}

/* Launches kernel task t, with its predecessors as its wait list. */
static int enqueue_kernel(enqueue_state *s, uint32_t t, hg_err *e)
{
    const graph *g = s->g;
    const graph_task *task = &g->tasks[t];
    const graph_kernel *k = graph_task_kernel(g, task);
    device_karg args[HG_MAX_TASK_ARGS];
    if (k->dev_kernel == NULL)
        return err_set(e, HG_EINVAL, "task %u (kernel '%s') has no kernel for device '%s'", t,
                       k->name, hg_device_spec(s->dev));
    if (task->nargs > HG_MAX_TASK_ARGS)
        return err_set(e, HG_ELIMIT, "task %u (kernel '%s'): %u args, at most %d", t, k->name,
                       task->nargs, HG_MAX_TASK_ARGS);
    enqueue_args(g, task, args);
    const device_task dt = {.kernel = k->dev_kernel,
                            .task = t,
                            .args = args,
                            .nargs = task->nargs,
                            .scalars = graph_task_scalars(g, task),
                            .nscalars = task->nscalars,
                            .waits = task->npreds ? g->edge_from + s->pred_first[t] : NULL,
                            .nwaits = task->npreds};
    hg_err le;
    err_clear(&le);
    int rc = device_launch(s->dev, &dt, &le);
    if (rc != 0)
        return err_set(e, rc, "task %u (kernel '%s'): %s", t, k->name, le.msg);
    s->launched++;
    enqueue_release(s, t, RELEASE_KERNELS | RELEASE_HOSTS);
    return 0;
}

/* Task t, ready: launched or posted, unless a cancel came first. */
static int enqueue_task(enqueue_state *s, uint32_t t, hg_err *e)
{
    if (s->cancel != NULL && atomic_load_explicit(s->cancel, memory_order_relaxed)) {
        s->canceled = true;
        return 0;
    }
    if (!enqueue_is_host(s, t))
        return enqueue_kernel(s, t, e);
    s->posted++;
    return enqueue_host_step(s, t, e);
}

/* Each task's first edge and predecessor count; HG_EINVAL on a graph
 * whose edges do not add up. */
static int enqueue_init(enqueue_state *s, hg_err *e)
{
    const graph *g = s->g;
    if (g->exec_words == NULL || g->cap_exec_words / 3 < g->ntasks)
        return err_set(e, HG_EINVAL, "graph of %u tasks is not finalized", g->ntasks);
    s->remaining = g->exec_words;
    s->pred_first = g->exec_words + g->ntasks;
    s->ready = g->exec_words + 2 * (size_t)g->ntasks;
    uint32_t edge = 0;
    for (uint32_t t = 0; t < g->ntasks; t++) {
        const graph_task *task = &g->tasks[t];
        if (task->npreds > g->nedges - edge)
            return err_set(e, HG_EINVAL, "task %u: %u predecessors, %u edges left", t, task->npreds,
                           g->nedges - edge);
        s->pred_first[t] = edge;
        s->remaining[t] = task->npreds;
        edge += task->npreds;
    }
    return 0;
}

/* Enqueues every task once what it depends on is far enough: a kernel's
 * kernels launched and its host steps done, a host step's kernels launched
 * and its host steps posted.  So no command ever waits on an event the host
 * has yet to complete, and an in-order queue (queues=N, or a driver whose
 * out-of-order queue runs in order) never holds a kernel behind a blocked
 * host step.  First a walk in submission order (without host steps, every
 * task is ready when the walk reaches it: its predecessors come before
 * it), then, while host steps are out, the tasks their completion readies,
 * in the order they became ready.  The first failure stops it. */
static int enqueue_all(enqueue_state *s, hg_err *e)
{
    int rc = enqueue_init(s, e);
    for (uint32_t t = 0; rc == 0 && !s->canceled && t < s->g->ntasks; t++) {
        s->walked = t;
        if (s->remaining[t] == 0)
            rc = enqueue_task(s, t, e);
    }
    s->walked = s->g->ntasks;
    while (rc == 0 && !s->canceled) {
        uint32_t step;
        bool ok;
        if (s->head < s->tail)
            rc = enqueue_task(s, s->ready[s->head++], e);
        else if (s->hosts != NULL && exec_hosts_next_done(s->hosts, &step, &ok))
            enqueue_release(s, step, ok ? RELEASE_KERNELS : 0); /* a failed step's wait */
        else
            break;
    }
    return rc;
}

typedef struct enqueue_span {
    uint64_t start, end;
    uint32_t task;
} enqueue_span;

static int enqueue_span_cmp(const void *a, const void *b)
{
    const enqueue_span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->task < y->task ? -1 : x->task > y->task;
}

/* Records one span per task (spans: [2t] start, [2t+1] end), each on the
 * first lane free at its start.  A span the trace cannot store is lost; the
 * run's result stands. */
static void enqueue_trace(const graph *g, const uint64_t *spans, hg_trace *trace, uint32_t run)
{
    enqueue_span *order = malloc((size_t)g->ntasks * sizeof *order);
    uint64_t *lane_end = calloc(g->ntasks, sizeof *lane_end);
    if (order == NULL || lane_end == NULL) {
        free(order);
        free(lane_end);
        return;
    }
    for (uint32_t t = 0; t < g->ntasks; t++)
        order[t] = (enqueue_span){spans[2 * t], spans[2 * t + 1], t};
    qsort(order, g->ntasks, sizeof *order, enqueue_span_cmp);
    uint32_t lanes = 0;
    for (uint32_t i = 0; i < g->ntasks; i++) {
        uint32_t l = 0;
        while (l < lanes && lane_end[l] > order[i].start)
            l++;
        if (l == lanes)
            lanes++;
        lane_end[l] = order[i].end;
        (void)trace_task_span(trace, l, graph_task_kernel(g, &g->tasks[order[i].task])->name, run,
                              order[i].task, order[i].start, order[i].end);
    }
    free(order);
    free(lane_end);
}

/* The run's result when the device found nothing wrong but a host step
 * failed, or the lower of the two failures. */
static int enqueue_host_result(exec_hosts *hosts, uint64_t *spans, const device_queue_result *res,
                               int erc, hg_err *e)
{
    hg_err step;
    err_clear(&step);
    uint32_t bad = exec_hosts_result(hosts, spans, &step);
    if (bad == UINT32_MAX || (res->bad_task != UINT32_MAX && res->bad_task < bad) ||
        (erc != 0 && res->bad_task == UINT32_MAX))
        return 0;
    return err_set(e, step.code, "%s", step.msg);
}

/* The run's result once the device and the host steps found nothing wrong:
 * HG_ECANCELED if a cancel left a task out (tasks already on the device ran:
 * a command cannot be recalled); HG_EINVAL if a task never became ready
 * (a malformed graph; a finalized DAG never gets there). */
static int enqueue_reached(const enqueue_state *s, exec_hosts *hosts, hg_err *e)
{
    uint32_t canceled = 0;
    const uint32_t ran = hosts != NULL ? exec_hosts_ran(hosts, &canceled) : 0;
    if (s->canceled || canceled > 0)
        return err_set(e, HG_ECANCELED, "run canceled after %u of %u tasks", s->launched + ran,
                       s->g->ntasks);
    if (s->launched + s->posted != s->g->ntasks)
        return err_set(e, HG_EINVAL, "%u of %u tasks never became ready",
                       s->g->ntasks - s->launched - s->posted, s->g->ntasks);
    return 0;
}

int exec_run_queue(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                   const atomic_bool *cancel, exec_counts *counts, hg_device_counters *tally,
                   hg_err *e)
{
    uint64_t *spans = trace ? calloc((size_t)g->ntasks * 2, sizeof *spans) : NULL;
    enqueue_state s = {.dev = dev, .g = g, .cancel = cancel};
    int rc = device_queue_begin(dev, g->ntasks, spans != NULL, e);
    if (rc == 0)
        rc = exec_hosts_start(dev, g, cancel, counts, tally, &s.hosts, e);
    if (rc == 0)
        rc = enqueue_all(&s, e);
    if (s.hosts != NULL) /* every posted host step done: its event complete */
        exec_hosts_finish(s.hosts);
    device_queue_result res = {.spans = spans};
    hg_err end;
    err_clear(&end);
    int erc = device_queue_end(dev, g->ntasks, &res, &end);
    int hrc = s.hosts != NULL && rc == 0 ? enqueue_host_result(s.hosts, spans, &res, erc, e) : 0;
    if (rc == 0 && erc == 0 && hrc == 0 && res.bad_task == UINT32_MAX)
        rc = enqueue_reached(&s, s.hosts, e);
    exec_hosts_free(s.hosts);
    if (rc == 0 && erc == 0 && hrc == 0 && spans != NULL)
        enqueue_trace(g, spans, trace, run);
    free(spans);
    if (rc != 0 || hrc != 0)
        return rc != 0 ? rc : hrc;
    if (erc != 0 && res.bad_task != UINT32_MAX)
        return err_set(e, erc, "task %u (kernel '%s'): %s", res.bad_task,
                       graph_task_kernel(g, &g->tasks[res.bad_task])->name, end.msg);
    if (erc != 0)
        return err_set(e, erc, "executing %u tasks: %s", g->ntasks, end.msg);
    if (res.bad_task != UINT32_MAX)
        return err_set(e, HG_EKERNEL, "task %u (kernel '%s') failed with code %d", res.bad_task,
                       graph_task_kernel(g, &g->tasks[res.bad_task])->name, (int)res.bad_code);
    return 0;
}
