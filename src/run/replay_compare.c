/*
 * replay_compare.c: verify mode's check of a recording against a fresh
 * orchestration of the same run: the scratch it took and the host views it
 * read, then task by task the kernel, args, scalars and dependencies, the
 * tasks submitted beyond the other's last, and the views the tasks wrote.
 * The first difference fails the run with HG_ESTALE naming the task and the
 * field (a scratch or a host read by its index and arg): something the orchestration
 * depends on changed without the runner knowing (a global, the contents of
 * its user pointer), which hg_runner_invalidate_replay declares.
 */
#include <string.h>

#include "run/replay.h"
#include "tensor/tensor.h"

#define UNDECLARED                                                                                 \
    "(the orchestration depends on something it did not declare: see "                             \
    "hg_runner_invalidate_replay)"

static bool view_same(const hg_tensor *a, const hg_tensor *b)
{
    return a->host == b->host && tensor_same_layout(a, b);
}

static bool written_same(const replay_written *a, const replay_written *b)
{
    return a->arg == b->arg && a->lo == b->lo && a->hi == b->hi && a->strided == b->strided &&
           (!a->strided || view_same(&a->view, &b->view));
}

int replay_compare_log(const replay_state *rs, hg_err *e)
{
    const replay_log *r = &rs->rec, *c = &rs->cur;
    if (r->nscratch != c->nscratch)
        return err_set(e, HG_ESTALE,
                       "replay: the orchestration took %u scratch, the recording %u " UNDECLARED,
                       c->nscratch, r->nscratch);
    for (uint32_t k = 0; k < r->nscratch; k++) {
        hg_tensor a = r->scratch[k].view, b = c->scratch[k].view;
        a.device = b.device = 0; /* where the pool put it is placement, not the graph */
        if (strcmp(r->scratch[k].name, c->scratch[k].name) != 0 || !view_same(&a, &b))
            return err_set(e, HG_ESTALE,
                           "replay: scratch %u ('%s'): name, dtype or shape differs " UNDECLARED, k,
                           c->scratch[k].name);
    }
    if (r->nreads != c->nreads)
        return err_set(e, HG_ESTALE,
                       "replay: the orchestration read %u host views, the recording %u " UNDECLARED,
                       c->nreads, r->nreads);
    for (uint32_t k = 0; k < r->nreads; k++)
        if (r->reads[k].arg != c->reads[k].arg)
            return err_set(e, HG_ESTALE,
                           "replay: host read %u: of arg %u, the recording's of arg %u " UNDECLARED,
                           k, c->reads[k].arg, r->reads[k].arg);
    return 0;
}

/* The views the tasks wrote (what copy-back plans from): a difference the
 * tasks' args did not already show. */
static int written_diff(const replay_state *rs, hg_err *e)
{
    const replay_log *r = &rs->rec, *c = &rs->cur;
    if (r->nwritten != c->nwritten)
        return err_set(e, HG_ESTALE,
                       "replay: tasks wrote %u views, in the recording %u " UNDECLARED, c->nwritten,
                       r->nwritten);
    for (uint32_t k = 0; k < r->nwritten; k++)
        if (!written_same(&r->written[k], &c->written[k]))
            return err_set(e, HG_ESTALE, "replay: written view %u (of arg %u) differs " UNDECLARED,
                           k, c->written[k].arg);
    return 0;
}

/* The first field of task arg a that differs from b, or NULL. */
static const char *targ_diff(const graph_targ *a, const graph_targ *b)
{
    if (a->addr != b->addr || a->lo != b->lo || a->hi != b->hi)
        return "device range";
    if (a->dtype != b->dtype)
        return "dtype";
    if (a->ndims != b->ndims)
        return "ndims";
    if (memcmp(a->shape, b->shape, sizeof a->shape) != 0)
        return "shape";
    if (memcmp(a->strides, b->strides, sizeof a->strides) != 0)
        return "strides";
    if (a->read != b->read || a->write != b->write)
        return "access";
    return NULL;
}

/* The first field of task t that differs between r (recorded) and g; its
 * predecessors start at edge `edge` of both (every earlier task's are
 * equal).  Equal predecessor lists for every task are equal edges, so the
 * successor lists need no look. */
static int task_diff(const graph *r, const graph *g, uint32_t t, uint32_t edge, hg_err *e)
{
    const graph_task *a = &r->tasks[t], *b = &g->tasks[t];
    const graph_kernel *ka = graph_task_kernel(r, a), *kb = graph_task_kernel(g, b);
    const char *name = kb->name;
#define DIFF(...) err_set(e, HG_ESTALE, "replay: task %u ('%s'): " __VA_ARGS__)
    if (ka->fn != kb->fn || ka->dev_kernel != kb->dev_kernel || ka->host_step != kb->host_step ||
        strcmp(ka->name, kb->name) != 0)
        return DIFF("kernel is '%s' in the recording " UNDECLARED, t, name, ka->name);
    if (ka->core != kb->core)
        return DIFF("core type differs " UNDECLARED, t, name);
    if (a->nargs != b->nargs)
        return DIFF("%u args, %u in the recording " UNDECLARED, t, name, b->nargs, a->nargs);
    for (uint32_t i = 0; i < a->nargs; i++) {
        const graph_targ x = graph_arg_expand(r, &graph_task_args(r, a)[i]);
        const graph_targ y = graph_arg_expand(g, &graph_task_args(g, b)[i]);
        const char *f = targ_diff(&x, &y);
        if (f != NULL)
            return DIFF("arg %u: %s differs from the recording " UNDECLARED, t, name, i, f);
    }
    if (a->nscalars != b->nscalars)
        return DIFF("%u scalars, %u in the recording " UNDECLARED, t, name, b->nscalars,
                    a->nscalars);
    for (uint32_t i = 0; i < a->nscalars; i++) {
        const uint64_t x = graph_task_scalars(r, a)[i], y = graph_task_scalars(g, b)[i];
        if (x != y)
            return DIFF("scalar %u is %llu, %llu in the recording " UNDECLARED, t, name, i,
                        (unsigned long long)y, (unsigned long long)x);
    }
    if (a->npreds != b->npreds ||
        memcmp(r->edge_from + edge, g->edge_from + edge, a->npreds * sizeof(uint32_t)) != 0)
        return DIFF("dependencies differ from the recording " UNDECLARED, t, name);
#undef DIFF
    return 0;
}

int replay_compare_graph(const replay_state *rs, const graph *g, hg_err *e)
{
    const graph *r = &rs->graph;
    const uint32_t common = r->ntasks < g->ntasks ? r->ntasks : g->ntasks;
    for (uint32_t t = 0, edge = 0; t < common; edge += g->tasks[t++].npreds) {
        int rc = task_diff(r, g, t, edge, e);
        if (rc != 0)
            return rc;
    }
    if (g->ntasks > common)
        return err_set(e, HG_ESTALE,
                       "replay: the orchestration submitted %u tasks, the recording %u: task %u "
                       "('%s') is not in the recording " UNDECLARED,
                       g->ntasks, r->ntasks, common, graph_task_kernel(g, &g->tasks[common])->name);
    if (r->ntasks > common)
        return err_set(e, HG_ESTALE,
                       "replay: the orchestration submitted %u tasks, the recording %u: the "
                       "recording's task %u ('%s') was not submitted " UNDECLARED,
                       g->ntasks, r->ntasks, common, graph_task_kernel(r, &r->tasks[common])->name);
    return written_diff(rs, e);
}
