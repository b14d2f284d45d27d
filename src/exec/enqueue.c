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

/* Launches host step t (hoststep.c runs it) and hands it to the helpers. */
static int enqueue_host_step(hg_device *dev, const graph *g, uint32_t t, exec_hosts *hosts,
                             hg_err *e)
{
    hg_err le;
    err_clear(&le);
    int rc = device_host_launch(dev, t, &le);
    if (rc != 0)
        return err_set(e, rc, "task %u (host step '%s'): %s", t,
                       graph_task_kernel(g, &g->tasks[t])->name, le.msg);
    exec_hosts_post(hosts, t);
    return 0;
}

/* Enqueues every task; the first failure stops it, naming the task. */
static int enqueue_all(hg_device *dev, const graph *g, exec_hosts *hosts, hg_err *e)
{
    device_karg args[HG_MAX_TASK_ARGS];
    uint32_t edge = 0; /* task t's predecessors: edge_from[edge .. edge + npreds) */
    for (uint32_t t = 0; t < g->ntasks; t++) {
        const graph_task *task = &g->tasks[t];
        const graph_kernel *k = graph_task_kernel(g, task);
        if (task->npreds > g->nedges - edge)
            return err_set(e, HG_EINVAL, "task %u: %u predecessors, %u edges left", t, task->npreds,
                           g->nedges - edge);
        if (k->host_step && hosts != NULL) {
            int rc = enqueue_host_step(dev, g, t, hosts, e);
            if (rc != 0)
                return rc;
            edge += task->npreds;
            continue;
        }
        if (k->dev_kernel == NULL)
            return err_set(e, HG_EINVAL, "task %u (kernel '%s') has no kernel for device '%s'", t,
                           k->name, hg_device_spec(dev));
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
                                .waits = task->npreds ? g->edge_from + edge : NULL,
                                .nwaits = task->npreds};
        edge += task->npreds;
        hg_err le;
        err_clear(&le);
        int rc = device_launch(dev, &dt, &le);
        if (rc != 0)
            return err_set(e, rc, "task %u (kernel '%s'): %s", t, k->name, le.msg);
    }
    return 0;
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

int exec_run_queue(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                   exec_counts *counts, hg_device_counters *tally, hg_err *e)
{
    uint64_t *spans = trace ? calloc((size_t)g->ntasks * 2, sizeof *spans) : NULL;
    exec_hosts *hosts = NULL;
    int rc = device_queue_begin(dev, g->ntasks, spans != NULL, e);
    if (rc == 0)
        rc = exec_hosts_start(dev, g, counts, tally, &hosts, e);
    if (rc == 0)
        rc = enqueue_all(dev, g, hosts, e);
    if (hosts != NULL) /* every launched host step done: its event complete */
        exec_hosts_finish(hosts);
    device_queue_result res = {.spans = spans};
    hg_err end;
    err_clear(&end);
    int erc = device_queue_end(dev, g->ntasks, &res, &end);
    int hrc = hosts != NULL && rc == 0 ? enqueue_host_result(hosts, spans, &res, erc, e) : 0;
    exec_hosts_free(hosts);
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
