/*
 * enqueue.c: the executor for queue devices (OpenCL).  Where exec.c hands
 * ready tasks to core threads, this hands the whole graph to the device's
 * queue: tasks in submission order (the graph's edges only go from earlier
 * to later tasks, so that order is topological and an in-order queue keeps
 * every dependency), then one wait.  No state outlives the call; the
 * device's status words say which kernel failed.
 */
#include <string.h>

#include "device/device.h"
#include "exec/exec.h"

/* The launch args of task t, from its resolved graph args. */
static void enqueue_args(const graph *g, const graph_task *task, device_karg *out)
{
    const graph_targ *args = graph_task_args(g, task);
    for (uint32_t i = 0; i < task->nargs; i++) {
        const graph_targ *a = &args[i];
        out[i] = (device_karg){.addr = a->lo == a->hi ? 0 : a->addr,
                               .dtype = a->dtype,
                               .ndims = a->ndims,
                               .write = a->write};
        memcpy(out[i].shape, a->shape, sizeof out[i].shape);
        memcpy(out[i].strides, a->strides, sizeof out[i].strides);
    }
}

/* Enqueues every task; the first failure stops it, naming the task. */
static int enqueue_all(hg_device *dev, const graph *g, hg_err *e)
{
    device_karg args[HG_MAX_TASK_ARGS];
    for (uint32_t t = 0; t < g->ntasks; t++) {
        const graph_task *task = &g->tasks[t];
        if (task->dev_kernel == NULL)
            return err_set(e, HG_EINVAL, "task %u (kernel '%s') has no kernel for device '%s'", t,
                           task->name, hg_device_spec(dev));
        if (task->nargs > HG_MAX_TASK_ARGS)
            return err_set(e, HG_ELIMIT, "task %u (kernel '%s'): %u args, at most %d", t,
                           task->name, task->nargs, HG_MAX_TASK_ARGS);
        enqueue_args(g, task, args);
        hg_err le;
        err_clear(&le);
        int rc = device_launch(dev, task->dev_kernel, t, args, task->nargs,
                               graph_task_scalars(g, task), task->nscalars, &le);
        if (rc != 0)
            return err_set(e, rc, "task %u (kernel '%s'): %s", t, task->name, le.msg);
    }
    return 0;
}

int exec_run_queue(hg_device *dev, const graph *g, hg_err *e)
{
    int rc = device_queue_begin(dev, g->ntasks, e);
    if (rc == 0)
        rc = enqueue_all(dev, g, e);
    uint32_t bad = UINT32_MAX;
    int32_t code = 0;
    hg_err end;
    err_clear(&end);
    int erc = device_queue_end(dev, g->ntasks, &bad, &code, &end);
    if (rc != 0)
        return rc;
    if (erc != 0)
        return err_set(e, erc, "executing %u tasks: %s", g->ntasks, end.msg);
    if (bad != UINT32_MAX)
        return err_set(e, HG_EKERNEL, "task %u (kernel '%s') failed with code %d", bad,
                       g->tasks[bad].name, (int)code);
    return 0;
}
