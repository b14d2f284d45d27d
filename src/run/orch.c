/*
 * orch.c: the calls an orchestration function makes: look up args, read host
 * views, take scratch, submit tasks.  Every task arg is resolved to device
 * addresses here (stage_resolve), so the graph and the scheduler below see
 * device regions only.  With replay on, host reads and each task arg's run
 * arg are logged too (replay.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/trace.h"
#include "device/device.h"
#include "run/run.h"
#include "stage/stage.h"

/* Records rc as the run's failure if it is the first: its message (just
 * written to the runner's err by the failing call) is saved with it, since
 * later failing calls write the runner's err again. */
static int orch_fail(hg_orch *o, int rc)
{
    if (rc != 0 && o->failed == 0) {
        o->failed = rc;
        o->first = o->runner->err;
        o->first.code = rc;
    }
    return rc;
}

int hg_orch_fail(hg_orch *o, int code, const char *fmt, ...)
{
    if (o == NULL)
        return HG_EINVAL;
    if (code >= 0)
        code = HG_EINVAL; /* a failure must fail the run */
    if (o->failed != 0)
        return code; /* the first failure's message is kept */
    hg_err *e = &o->runner->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt ? fmt : "orchestration failed", ap);
    va_end(ap);
    e->code = code;
    return orch_fail(o, code);
}

uint32_t hg_orch_num_args(const hg_orch *o)
{
    return o ? o->nargs : 0;
}

int hg_orch_find_arg(const hg_orch *o, const char *name)
{
    if (o == NULL || name == NULL)
        return HG_EINVAL;
    for (uint32_t i = 0; i < o->nargs; i++)
        if (strcmp(o->args[i].name, name) == 0)
            return (int)i;
    return HG_ENOTFOUND;
}

int hg_orch_arg(const hg_orch *o, uint32_t arg, const hg_arg **out)
{
    if (o == NULL || out == NULL || arg >= o->nargs)
        return HG_EINVAL;
    *out = &o->args[arg];
    return 0;
}

int hg_orch_host_view(hg_orch *o, uint32_t arg, const void **out)
{
    if (o == NULL || out == NULL)
        return HG_EINVAL;
    hg_err *e = &o->runner->err;
    const stage_plan *p = &o->runner->plan;
    if (arg >= p->nall)
        return orch_fail(
            o, err_set(e, HG_EINVAL, "host view: arg index %u, the run has %u", arg, p->nall));
    const stage_arg *sa = &p->args[arg];
    if (sa->kind == STAGE_SCALAR)
        return orch_fail(o,
                         err_set(e, HG_EINVAL, "host view of '%s': the arg is a scalar", sa->name));
    if (sa->tensor.host == NULL)
        return orch_fail(o, err_set(e, HG_ENOHOSTVIEW,
                                    "host view of '%s': the arg is only a device view", sa->name));
    hg_runner *r = o->runner;
    if (r->replay.on) {
        int rc = replay_note_read(&r->replay, p, arg, r->runs, p->verify, e);
        if (rc != 0)
            return orch_fail(o, rc);
    }
    size_t first = sa->lo;
    *out = (const char *)hg_hostbuf_data(sa->tensor.host) + first;
    return 0;
}

int hg_orch_scratch(hg_orch *o, const char *name, hg_dtype dtype, uint32_t ndims,
                    const size_t *shape, uint32_t *arg, hg_tensor *view)
{
    if (o == NULL || arg == NULL)
        return HG_EINVAL;
    hg_runner *r = o->runner;
    return orch_fail(
        o, stage_add_scratch(&r->plan, r->dev, name, dtype, ndims, shape, arg, view, &r->err));
}

/* HG_EUNSUPPORTED unless k has the slot the runner's device runs: the
 * OpenCL slot on a queue device, the host function on the sim. */
static int check_slot(hg_orch *o, const hg_kernel *k, const char *kname, bool host_step, hg_err *e)
{
    hg_device *dev = o->runner->dev;
    if (host_step && k->fn == NULL)
        return err_set(e, HG_EINVAL, "host step '%s' has no host function (fn)", kname);
    if (host_step)
        return 0; /* every device runs fn: the sim on a core, a queue device staged */
    if (device_runs_queue(dev) && (k->cl_source == NULL || k->cl_entry == NULL))
        return err_set(e, HG_EUNSUPPORTED,
                       "kernel '%s' has no OpenCL slot (cl_source, cl_entry); device '%s' runs "
                       "OpenCL kernels only",
                       kname, hg_device_spec(dev));
    if (!device_runs_queue(dev) && k->fn == NULL)
        return err_set(e, HG_EUNSUPPORTED,
                       "kernel '%s' has no host function (fn); device '%s' runs host functions "
                       "only",
                       kname, hg_device_spec(dev));
    return 0;
}

static int check_desc(hg_orch *o, const hg_task_desc *d, bool host_step, hg_err *e)
{
    if (d == NULL || d->kernel == NULL ||
        (d->kernel->fn == NULL && (d->kernel->cl_source == NULL || d->kernel->cl_entry == NULL)))
        return err_set(e, HG_EINVAL, "task %u: no kernel function", o->runner->graph.ntasks);
    const hg_kernel *k = d->kernel;
    const char *kname = k->name ? k->name : "(unnamed)";
    int rc = check_slot(o, k, kname, host_step, e);
    if (rc != 0)
        return rc;
    if (k->core != HG_CORE_CUBE && k->core != HG_CORE_VECTOR)
        return err_set(e, HG_EINVAL, "kernel '%s': core type %d is not cube or vector", kname,
                       (int)k->core);
    if (!device_has_core_type(o->runner->dev, k->core))
        return err_set(e, HG_EUNSUPPORTED, "kernel '%s' needs a %s core; device %s has none", kname,
                       k->core == HG_CORE_CUBE ? "cube" : "vector", hg_device_spec(o->runner->dev));
    if ((d->nargs && d->args == NULL) || (d->nscalars && d->scalars == NULL) ||
        (d->ndeps && d->deps == NULL))
        return err_set(e, HG_EINVAL, "kernel '%s': a task list is NULL with a non-zero count",
                       kname);
    if (d->nargs > HG_MAX_TASK_ARGS)
        return err_set(e, HG_ELIMIT, "kernel '%s': %u task args, the limit is %d", kname, d->nargs,
                       HG_MAX_TASK_ARGS);
    return 0;
}

/* hg_task_submit and hg_task_submit_host_step. */
static int submit(hg_orch *o, const hg_task_desc *d, bool host_step, hg_task_id *out)
{
    if (o == NULL)
        return HG_EINVAL;
    hg_runner *r = o->runner;
    int rc = check_desc(o, d, host_step, &r->err);
    if (rc != 0)
        return orch_fail(o, rc);
    graph_targ targs[HG_MAX_TASK_ARGS];
    for (uint32_t i = 0; i < d->nargs; i++) {
        rc = stage_resolve(&r->plan, &d->args[i], &targs[i], &r->err);
        if (rc != 0)
            return orch_fail(o, rc);
    }
    /* What the task writes of host-backed args is what comes back. */
    for (uint32_t i = 0; i < d->nargs; i++) {
        const hg_task_arg *ta = &d->args[i];
        if (!targs[i].write || ta->arg >= r->plan.nargs || !r->plan.args[ta->arg].copy_back)
            continue;
        rc = stage_note_written(&r->plan, ta->arg, &ta->view, &r->err);
        if (rc != 0)
            return orch_fail(o, rc);
    }
    /* A queue device's kernel: built (once per source) before the task is
     * recorded, so a build error fails this submit.  A call that built a
     * program is booked as build time, with its own trace span, not as
     * orchestration (runner.c takes it out of orch_ns). */
    const void *dev_kernel = NULL;
    if (device_runs_queue(r->dev) && !host_step) {
        const uint64_t builds = device_debug_program_builds(r->dev), start = clock_now_ns();
        rc = device_kernel_get(r->dev, d->kernel->cl_source, d->kernel->cl_entry, &dev_kernel,
                               &r->err);
        if (rc != 0)
            return orch_fail(o, rc);
        if (device_debug_program_builds(r->dev) != builds) {
            const uint64_t end = clock_now_ns();
            r->build_ns += end - start;
            if (r->trace != NULL)
                trace_build_span(r->trace, "build program", (uint32_t)r->runs, start, end);
        }
    }
    hg_task_id id;
    rc = graph_add_device_task(&r->graph, d->kernel, dev_kernel, host_step, targs, d->nargs,
                               d->scalars, d->nscalars, d->deps, d->ndeps, &id, &r->err);
    if (rc != 0)
        return orch_fail(o, rc);
    if (r->replay.on) {
        rc = replay_note_task(&r->replay, d, &r->err);
        if (rc != 0)
            return orch_fail(o, rc);
    }
    if (out)
        *out = id;
    return 0;
}

int hg_task_submit(hg_orch *o, const hg_task_desc *d, hg_task_id *out)
{
    return submit(o, d, false, out);
}

int hg_task_submit_host_step(hg_orch *o, const hg_task_desc *d, hg_task_id *out)
{
    return submit(o, d, true, out);
}
