/*
 * exec.c: the scheduler.  Runs a finalized graph on the device's cores.
 *
 * Owns: the per-execution state (exec_state) that lives on exec_run's stack
 * for one call, the core loop every core thread runs, and hg_kernel_count
 * (a kernel adds to its run's counters through a thread-local pointer set
 * around each task, so hg_kernel_ctx keeps its layout).
 *
 * Invariants, all under exec_state.lock:
 *   - remaining[t] counts t's predecessors not yet finished; t is pushed on
 *     ready[kernel type] exactly once, when remaining[t] reaches 0 (or at the
 *     start when npreds is 0).  A task whose predecessor failed never reaches
 *     0, so nothing that depends on a failed task runs.
 *   - a ready queue only grows at its tail: each task is pushed at most once,
 *     so an array of ntasks ids per queue never overflows and never wraps.
 *   - a CUBE core takes from ready[CUBE] only, a VECTOR core from
 *     ready[VECTOR] only, an ANY core from both.
 *   - stop is set once: when every task is done, on the first error, on a
 *     cancel seen as a task finishes (exec_run_cancelable), or when
 *     no task runs, none is ready and some are not done (a graph that cannot
 *     progress; a finalized DAG never gets there).  After stop no task is
 *     taken; tasks already running finish, then every core loop returns.
 *
 * Hot path: one lock/unlock per task taken and one per task finished, no
 * allocation.  A finishing core keeps one newly ready successor it can run
 * for itself, so a chain never goes through the queue or a wakeup.  An idle
 * core first yields a bounded number of times watching an atomic "news"
 * counter (a wakeup costs microseconds; a typed chain hands every task to
 * another core), then sleeps on the one condvar, which is broadcast only
 * when someone sleeps.  Pure busy-waiting (pause) was measured 10x worse on
 * an oversubscribed 2-CPU host, so the spin yields.
 */
#include "exec/exec.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/trace.h"
#include "device/device.h"

#define EXEC_NO_TASK UINT32_MAX
/* Yields an idle core makes, watching for news, before it sleeps. */
#define EXEC_SPIN_YIELDS 64

typedef struct exec_queue {
    uint32_t *ids;
    uint32_t head, tail; /* ids[head..tail) are ready, oldest first */
} exec_queue;

typedef struct exec_state {
    hg_device *dev;
    const graph *g;
    hg_trace *trace;
    uint32_t run;
    const atomic_bool *cancel; /* hg_runner_cancel's flag, or NULL */
    exec_counts *counts;       /* the run's kernel counters, or NULL */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* under lock */
    uint32_t *remaining;
    exec_queue ready[2]; /* indexed by HG_CORE_CUBE, HG_CORE_VECTOR */
    uint32_t done, running, nwaiting;
    bool stop;
    hg_err err; /* the first error; code 0 if none */
    /* bumped under lock on every push and on stop; read without it by
     * idle cores spinning before they sleep */
    atomic_uint news;
} exec_state;

/* The counters of the run whose task this core thread is executing
 * (hg_kernel_count), NULL between tasks. */
static _Thread_local exec_counts *exec_tls_counts;

/* What one core thread keeps between tasks: its kernel views and the error
 * of its last task, formatted outside the lock. */
typedef struct exec_core {
    uint32_t core;
    hg_core_type type;
    hg_kview views[HG_MAX_TASK_ARGS];
    hg_err err;
} exec_core;

static hg_core_type exec_task_type(const exec_state *s, uint32_t t)
{
    return graph_task_kernel(s->g, &s->g->tasks[t])->core;
}

static void exec_push(exec_state *s, uint32_t t)
{
    exec_queue *q = &s->ready[exec_task_type(s, t)];
    q->ids[q->tail++] = t;
}

static uint32_t exec_pop_queue(exec_queue *q)
{
    return q->head < q->tail ? q->ids[q->head++] : EXEC_NO_TASK;
}

static uint32_t exec_pop(exec_state *s, hg_core_type type)
{
    if (type != HG_CORE_ANY)
        return exec_pop_queue(&s->ready[type]);
    uint32_t t = exec_pop_queue(&s->ready[HG_CORE_CUBE]);
    return t != EXEC_NO_TASK ? t : exec_pop_queue(&s->ready[HG_CORE_VECTOR]);
}

static bool exec_queues_empty(const exec_state *s)
{
    return s->ready[0].head == s->ready[0].tail && s->ready[1].head == s->ready[1].tail;
}

static void exec_wake_all(exec_state *s)
{
    atomic_fetch_add_explicit(&s->news, 1, memory_order_relaxed);
    if (s->nwaiting > 0)
        pthread_cond_broadcast(&s->wake);
}

/* Stops dispatch with the first error; later errors are dropped. */
static void exec_fail(exec_state *s, const hg_err *err)
{
    if (!s->stop) {
        s->err = *err;
        s->stop = true;
    }
    exec_wake_all(s);
}

/* Called and returns under lock.  Drops the lock and yields the CPU a few
 * times while watching s->news; true if news came.  Waking a sleeping
 * thread costs microseconds, so a handoff between cores (a chain that
 * alternates cube and vector) is faster when the taker is still awake. */
static bool exec_spin(exec_state *s)
{
    unsigned seen = atomic_load_explicit(&s->news, memory_order_relaxed);
    bool news = false;
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < EXEC_SPIN_YIELDS && !news; i++) {
        sched_yield();
        news = atomic_load_explicit(&s->news, memory_order_relaxed) != seen;
    }
    pthread_mutex_lock(&s->lock);
    return news || atomic_load_explicit(&s->news, memory_order_relaxed) != seen;
}

static void exec_sleep(exec_state *s)
{
    s->nwaiting++;
    pthread_cond_wait(&s->wake, &s->lock);
    s->nwaiting--;
}

/* Under lock: the next task this core may run, waiting while none is ready.
 * EXEC_NO_TASK once the execution stops. */
static uint32_t exec_take(exec_state *s, hg_core_type type)
{
    for (;;) {
        if (s->stop)
            return EXEC_NO_TASK;
        uint32_t t = exec_pop(s, type);
        if (t != EXEC_NO_TASK)
            return t;
        if (s->running == 0 && exec_queues_empty(s)) {
            hg_err stuck;
            err_set(&stuck, HG_EINVAL, "graph cannot progress: %u of %u tasks never became ready",
                    s->g->ntasks - s->done, s->g->ntasks);
            exec_fail(s, &stuck);
            return EXEC_NO_TASK;
        }
        if (!exec_spin(s))
            exec_sleep(s);
    }
}

static bool exec_core_runs(hg_core_type core, hg_core_type kernel)
{
    return core == HG_CORE_ANY || core == kernel;
}

/* Under lock: records task t as finished with rc and releases its
 * successors.  Returns the next task for this core (EXEC_NO_TASK to exit). */
static uint32_t exec_complete(exec_state *s, exec_core *c, uint32_t t, int rc)
{
    if (rc != 0) {
        exec_fail(s, &c->err);
        return EXEC_NO_TASK;
    }
    const graph *g = s->g;
    if (++s->done == g->ntasks) {
        s->stop = true;
        exec_wake_all(s);
        return EXEC_NO_TASK;
    }
    if (s->cancel != NULL && atomic_load_explicit(s->cancel, memory_order_relaxed)) {
        hg_err canceled;
        err_set(&canceled, HG_ECANCELED, "run canceled after %u of %u tasks", s->done, g->ntasks);
        exec_fail(s, &canceled);
        return EXEC_NO_TASK;
    }
    const graph_task *task = &g->tasks[t];
    const uint32_t *succ = graph_task_succ(g, task);
    uint32_t mine = EXEC_NO_TASK, pushed = 0;
    for (uint32_t i = 0; i < task->nsucc; i++) {
        uint32_t v = succ[i];
        if (--s->remaining[v] != 0)
            continue;
        if (mine == EXEC_NO_TASK && exec_core_runs(c->type, exec_task_type(s, v))) {
            mine = v;
        } else {
            exec_push(s, v);
            pushed++;
        }
    }
    if (pushed > 0)
        exec_wake_all(s);
    if (s->stop)
        return EXEC_NO_TASK;
    return mine != EXEC_NO_TASK ? mine : exec_take(s, c->type);
}

/* Fills c->views for task t.  HG_ERANGE if an arg no longer lies in live
 * device memory. */
static int exec_translate(exec_state *s, exec_core *c, uint32_t t, const graph_task *task)
{
    const graph_arg *args = graph_task_args(s->g, task);
    for (uint32_t i = 0; i < task->nargs; i++) {
        const graph_arg *a = &args[i];
        hg_kview *v = &c->views[i];
        v->dtype = (hg_dtype)a->dtype;
        const hg_devaddr addr = graph_arg_layout(s->g, a, &v->ndims, v->shape, v->strides);
        if (a->lo == a->hi) {
            v->data = NULL;
            continue;
        }
        char *base = NULL;
        if (addr >= a->lo && addr < a->hi)
            base = device_translate(s->dev, a->lo, (size_t)(a->hi - a->lo));
        if (base == NULL)
            return err_set(&c->err, HG_ERANGE,
                           "task %u (kernel '%s'): arg %u [0x%llx, 0x%llx) is not in live "
                           "device memory",
                           t, graph_task_kernel(s->g, task)->name, i, (unsigned long long)a->lo,
                           (unsigned long long)a->hi);
        v->data = base + (addr - a->lo);
    }
    return 0;
}

/* Runs task t on this core, outside the lock.  Returns 0 or an HG_E* code
 * with the message in c->err. */
static int exec_task(exec_state *s, exec_core *c, uint32_t t)
{
    const graph_task *task = &s->g->tasks[t];
    const graph_kernel *k = graph_task_kernel(s->g, task);
    int rc = exec_translate(s, c, t, task);
    if (rc != 0)
        return rc;
    hg_kernel_ctx kc = {
        .args = c->views,
        .nargs = task->nargs,
        .scalars = graph_task_scalars(s->g, task),
        .nscalars = task->nscalars,
        .core = c->core,
        .core_type = k->core,
    };
    uint64_t start = s->trace ? clock_now_ns() : 0;
    int krc = exec_call(k->fn, &kc, s->counts);
    if (s->trace) {
        /* A span the trace cannot store is lost; the run's result stands. */
        (void)trace_task_span(s->trace, c->core, k->name, s->run, t, start, clock_now_ns());
    }
    if (krc != 0)
        return err_set(&c->err, HG_EKERNEL, "task %u (kernel '%s') failed with code %d", t, k->name,
                       krc);
    return 0;
}

/* The loop every core thread runs for one exec_run. */
static void exec_core_loop(void *ctx, uint32_t core, hg_core_type type)
{
    exec_state *s = ctx;
    exec_core c = {.core = core, .type = type};
    pthread_mutex_lock(&s->lock);
    uint32_t t = exec_take(s, type);
    while (t != EXEC_NO_TASK) {
        s->running++;
        pthread_mutex_unlock(&s->lock);
        int rc = exec_task(s, &c, t);
        pthread_mutex_lock(&s->lock);
        s->running--;
        t = exec_complete(s, &c, t, rc);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Rejects, before anything runs, a task no core of dev can run or one whose
 * record is malformed: without this a typed queue nobody serves would hang. */
static int exec_check(hg_device *dev, const graph *g, hg_err *e)
{
    bool has[2] = {device_has_core_type(dev, HG_CORE_CUBE),
                   device_has_core_type(dev, HG_CORE_VECTOR)};
    static const char *const type_name[2] = {"cube", "vector"};
    for (uint32_t t = 0; t < g->ntasks; t++) {
        const graph_task *task = &g->tasks[t];
        const graph_kernel *k = graph_task_kernel(g, task);
        if (k->fn == NULL)
            return err_set(e, HG_EINVAL, "task %u has no kernel function", t);
        if (k->core != HG_CORE_CUBE && k->core != HG_CORE_VECTOR)
            return err_set(e, HG_EINVAL,
                           "task %u (kernel '%s'): core type %d is not cube or vector", t, k->name,
                           (int)k->core);
        if (task->nargs > HG_MAX_TASK_ARGS)
            return err_set(e, HG_ELIMIT, "task %u (kernel '%s'): %u args, at most %d", t, k->name,
                           task->nargs, HG_MAX_TASK_ARGS);
        if (!has[k->core])
            return err_set(e, HG_EUNSUPPORTED,
                           "task %u (kernel '%s') needs a %s core; device '%s' has none", t,
                           k->name, type_name[k->core], hg_device_spec(dev));
    }
    return 0;
}

/* Sets up the counters and queues in the graph's exec words (reserved by
 * graph_finalize: a run allocates nothing) and queues the roots. */
static int exec_state_init(exec_state *s, hg_device *dev, const graph *g, hg_trace *trace,
                           uint32_t run, hg_err *e)
{
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->g = g;
    s->trace = trace;
    s->run = run;
    atomic_init(&s->news, 0);
    if (g->exec_words == NULL || g->cap_exec_words / 3 < g->ntasks)
        return err_set(e, HG_EINVAL, "graph of %u tasks is not finalized", g->ntasks);
    uint32_t *block = g->exec_words;
    s->remaining = block;
    s->ready[HG_CORE_CUBE].ids = block + g->ntasks;
    s->ready[HG_CORE_VECTOR].ids = block + 2 * (size_t)g->ntasks;
    for (uint32_t t = 0; t < g->ntasks; t++) {
        s->remaining[t] = g->tasks[t].npreds;
        if (g->tasks[t].npreds == 0)
            exec_push(s, t);
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    return 0;
}

int exec_call(hg_kernel_fn fn, const hg_kernel_ctx *kc, exec_counts *counts)
{
    exec_tls_counts = counts;
    int rc = fn(kc);
    exec_tls_counts = NULL;
    return rc;
}

void hg_kernel_count(hg_kernel_counter which, uint64_t amount)
{
    exec_counts *c = exec_tls_counts;
    if (c == NULL || (unsigned)which >= HG_KCOUNT_MAX)
        return;
    atomic_fetch_add_explicit(&c->v[which], amount, memory_order_relaxed);
}

int exec_run(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run, hg_err *e)
{
    return exec_run_cancelable(dev, g, trace, run, NULL, NULL, e);
}

int exec_run_cancelable(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                        const atomic_bool *cancel, exec_counts *counts, hg_err *e)
{
    return exec_run_counted(dev, g, trace, run, cancel, counts, NULL, e);
}

int exec_run_counted(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                     const atomic_bool *cancel, exec_counts *counts, hg_device_counters *tally,
                     hg_err *e)
{
    if (g->ntasks == 0)
        return 0;
    if (device_runs_queue(dev))
        return exec_run_queue(dev, g, trace, run, cancel, counts, tally, e);
    int rc = exec_check(dev, g, e);
    if (rc != 0)
        return rc;
    exec_state s;
    rc = exec_state_init(&s, dev, g, trace, run, e);
    if (rc != 0)
        return rc;
    s.cancel = cancel;
    s.counts = counts;
    device_run_cores(dev, exec_core_loop, &s);
    pthread_cond_destroy(&s.wake);
    pthread_mutex_destroy(&s.lock);
    if (s.err.code != 0)
        return err_set(e, s.err.code, "%s", s.err.msg);
    return 0;
}
