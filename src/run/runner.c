/*
 * runner.c: the runner and one run end to end.
 *
 *     bind -> orchestrate -> execute -> copy back -> release
 *
 * All staging state hangs off the runner (retained buffer, plan, graph), so
 * closing the runner forgets it.  A failure at any stage skips the stages that
 * would move data (no copy-back after a failed execution), always releases
 * run-owned memory, and leaves the runner usable for the next run.  Every
 * stage is timed; byte and call counts are the runner's own exact tally of
 * its device operations, taken around the run.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/trace.h"
#include "exec/exec.h"
#include "run/run.h"

int hg_runner_open(hg_device *dev, hg_runner **out)
{
    if (dev == NULL || out == NULL)
        return HG_EINVAL;
    hg_runner *r = calloc(1, sizeof *r);
    if (r == NULL)
        return HG_ENOMEM;
    r->dev = dev;
    residency_init(&r->cache);
    stage_plan_init(&r->plan, &r->tally);
    r->plan.cache = &r->cache;
    graph_init(&r->graph);
    replay_init(&r->replay);
    *out = r;
    return 0;
}

void hg_runner_close(hg_runner *r)
{
    if (r == NULL)
        return;
    stage_release(&r->plan, r->dev);
    stage_pool_free(&r->plan, r->dev);
    residency_clear(&r->cache, r->dev, &r->tally);
    stage_retained_free(&r->retained, r->dev, &r->tally);
    stage_plan_free(&r->plan);
    graph_free(&r->graph);
    replay_free(&r->replay);
    free(r);
}

hg_device *hg_runner_device(const hg_runner *r)
{
    return r ? r->dev : NULL;
}

void hg_runner_set_trace(hg_runner *r, hg_trace *t)
{
    if (r)
        r->trace = t;
}

size_t hg_runner_retained_capacity(const hg_runner *r)
{
    return r ? r->retained.capacity : 0;
}

int hg_runner_set_budget(hg_runner *r, uint64_t bytes)
{
    if (r == NULL)
        return HG_EINVAL;
    r->cache.budget = bytes;
    const uint64_t budget = bytes ? bytes : hg_device_capacity(r->dev);
    /* No run is in flight: every copy is evictable (run 0 uses none). */
    residency_drain(&r->cache, &r->tally);
    if (r->cache.held > budget)
        residency_evict(&r->cache, r->dev, &r->tally, 0, r->cache.held - budget);
    return 0;
}

/* The counts below first forget copies whose host buffers were destroyed
 * (freed on the device already): the runner's own bookkeeping, so the
 * queries stay const to the caller. */
static hg_runner *drained(const hg_runner *r)
{
    hg_runner *w = (hg_runner *)r;
    residency_drain(&w->cache, &w->tally);
    return w;
}

uint64_t hg_runner_device_bytes(const hg_runner *r)
{
    return r ? drained(r)->tally.live_bytes : 0;
}

uint64_t hg_runner_resident_bytes(const hg_runner *r)
{
    return r ? drained(r)->cache.held : 0;
}

uint32_t hg_runner_resident_copies(const hg_runner *r)
{
    return r ? drained(r)->cache.nlive : 0;
}

void hg_runner_set_verify(hg_runner *r, bool on)
{
    if (r)
        r->plan.verify = on;
}

void hg_runner_set_replay(hg_runner *r, bool on)
{
    if (r == NULL)
        return;
    r->replay.on = on;
    if (!on)
        replay_drop(&r->replay);
}

void hg_runner_invalidate_replay(hg_runner *r)
{
    if (r)
        replay_drop(&r->replay);
}

uint64_t hg_runner_replay_bytes(const hg_runner *r)
{
    return r ? replay_bytes(&r->replay) : 0;
}

void hg_runner_set_poison_scratch(hg_runner *r, bool on)
{
    if (r)
        r->plan.poison_scratch = on;
}

int hg_runner_copied_back(const hg_runner *r, uint32_t arg, hg_range *out, size_t max, size_t *n)
{
    if (r == NULL || n == NULL || (out == NULL && max != 0))
        return HG_EINVAL;
    *n = 0;
    if (arg >= r->plan.nargs)
        return HG_EINVAL;
    const stage_arg *sa = &r->plan.args[arg];
    if (!r->copied_back || !sa->copy_back ||
        (sa->kind != STAGE_SLICE && sa->kind != STAGE_RESIDENT))
        return 0;
    *n = sa->back_n;
    if (sa->back_n > max)
        return HG_ERANGE;
    for (uint32_t k = 0; k < sa->back_n; k++)
        out[k] = r->plan.spans[sa->back_first + k];
    return 0;
}

const char *hg_runner_stage(const hg_runner *r)
{
    if (r == NULL)
        return NULL;
    return atomic_load_explicit(&((hg_runner *)r)->stage, memory_order_relaxed);
}

void hg_runner_cancel(hg_runner *r)
{
    if (r != NULL)
        atomic_store_explicit(&r->cancel, true, memory_order_relaxed);
}

void hg_runner_cancel_clear(hg_runner *r)
{
    if (r != NULL)
        atomic_store_explicit(&r->cancel, false, memory_order_relaxed);
}

int hg_runner_set_decide(hg_runner *r, hg_run_decide_fn fn, void *user)
{
    if (r == NULL)
        return HG_EINVAL;
    r->decide = fn;
    r->decide_user = fn ? user : NULL;
    return 0;
}

/* Between stages: HG_ECANCELED if a cancel is pending. */
static int run_check_cancel(hg_runner *r, const char *before)
{
    if (!atomic_load_explicit(&r->cancel, memory_order_relaxed))
        return 0;
    return err_set(&r->err, HG_ECANCELED, "run canceled before %s", before);
}

const char *hg_runner_errmsg(const hg_runner *r)
{
    return r ? r->err.msg : "no runner";
}

/* Times one stage: the span goes to the trace and its length to *ns. */
typedef struct stage_timer {
    hg_runner *r;
    uint64_t start;
} stage_timer;

static stage_timer timer_start(hg_runner *r, const char *stage)
{
    atomic_store_explicit(&r->stage, stage, memory_order_relaxed);
    stage_timer t = {r, clock_now_ns()};
    return t;
}

static void timer_stop(stage_timer t, const char *name, uint64_t *ns)
{
    uint64_t end = clock_now_ns();
    *ns = end - t.start;
    if (t.r->trace)
        trace_host_span(t.r->trace, name, (uint32_t)t.r->runs, t.start, end);
}

/* Plan, bind resident args to their copies, lay out and reserve the slices
 * (making room from the pool and the cache when the device is short), then
 * upload what is not current on the device. */
static int run_bind(hg_runner *r, const hg_arg *args, uint32_t nargs)
{
    stage_plan *p = &r->plan;
    p->run = r->runs;
    int rc = stage_plan_build(p, r->dev, args, nargs, &r->err);
    if (rc == 0)
        rc = stage_bind_resident(p, r->dev, &r->err);
    if (rc == 0)
        rc = stage_plan_layout(p, &r->err);
    while (rc == 0) {
        rc = stage_retained_reserve(&r->retained, r->dev, &r->tally, p->required, &r->err);
        if (rc != HG_EDEVMEM || !stage_make_room(p, r->dev, p->required))
            break;
        rc = 0; /* room was made: try again */
    }
    if (rc == 0)
        rc = stage_upload(p, r->dev, &r->retained, &r->err);
    return rc;
}

static int run_orchestrate(hg_runner *r, const hg_callable *c, const hg_arg *args, uint32_t nargs)
{
    hg_orch o = {.runner = r, .args = args, .nargs = nargs};
    graph_reset(&r->graph);
    int rc = c->orchestrate(&o, c->user);
    const char *name = c->name ? c->name : "(unnamed)";
    if (o.failed != 0) {
        r->err = o.first; /* code and message of the first failure, together */
        return o.failed;
    }
    if (rc > 0)
        return err_set(&r->err, HG_EINVAL, "orchestration '%s' returned %d, not an HG_E code", name,
                       rc);
    if (rc < 0)
        return r->err.code
                   ? rc
                   : err_set(&r->err, rc, "orchestration '%s' failed: %s", name, hg_strerror(rc));
    return graph_finalize(&r->graph, &r->err);
}

/* What the run executes: `graph` (the recording when `replayed`). */
typedef struct run_graph {
    const graph *graph;
    bool replayed;
} run_graph;

/* With replay on: the recording when it matches and can be placed (in
 * verify mode only after a fresh orchestration equals it), else a fresh
 * orchestration whose log the runner keeps for the recording. */
static int run_replay_or_orchestrate(hg_runner *r, const hg_callable *c, const hg_arg *args,
                                     uint32_t nargs, run_graph *out)
{
    replay_state *rs = &r->replay;
    const bool verify = r->plan.verify;
    out->graph = &r->graph;
    int m = replay_match(rs, c, args, nargs, verify, &r->err);
    if (m < 0)
        return m;
    if (m == 1 && !verify) {
        int rc = replay_place(rs, &r->plan, r->dev, false, &r->err);
        if (rc == 1) {
            *out = (run_graph){&rs->graph, true};
            return 0;
        }
        if (rc < 0)
            return rc;
    }
    replay_begin(rs);
    int rc = run_orchestrate(r, c, args, nargs);
    if (rc == 0)
        rc = replay_capture(rs, &r->plan, &r->err);
    if (m != 1 || !verify) /* not replayable: this orchestration records anew */
        return rc;
    if (rc != 0) {
        replay_drop(rs); /* the orchestration no longer builds the recording */
        return rc;
    }
    /* Verify: the recording must be what the orchestration built. */
    rc = replay_compare_log(rs, &r->err);
    if (rc == 0 && replay_place(rs, &r->plan, r->dev, true, &r->err) != 1)
        return 0; /* the regions moved apart: a new recording, nothing stale */
    if (rc == 0)
        rc = replay_compare_graph(rs, &r->graph, &r->err);
    if (rc != 0) {
        replay_drop(rs);
        return rc;
    }
    out->replayed = true;
    return 0;
}

/* Byte, copy and allocation counts are this runner's own tally (device.h),
 * so they stay exact while other runners share the device. */
static void fill_stats(hg_runner *r, const hg_device_counters *before, const run_graph *rg,
                       hg_run_stats *s)
{
    const hg_device_counters now = r->tally;
    s->h2d_bytes = now.h2d_bytes - before->h2d_bytes;
    s->d2h_bytes = now.d2h_bytes - before->d2h_bytes;
    s->h2d_copies = now.h2d_copies - before->h2d_copies;
    s->d2h_copies = now.d2h_copies - before->d2h_copies;
    s->h2d_batches = now.h2d_batches - before->h2d_batches;
    s->d2h_batches = now.d2h_batches - before->d2h_batches;
    s->device_allocs = now.allocs - before->allocs;
    s->replayed = rg->replayed;
    s->retained_bytes = r->retained.capacity;
    const stage_residency_stats *rs = &r->plan.rstats;
    s->resident_hits = rs->hits;
    s->resident_bytes_skipped = rs->bytes_skipped;
    s->stale_uploads = rs->stale_uploads;
    s->resident_staged = rs->staged;
    s->evictions = rs->evictions;
    s->h2d_bytes_skipped = rs->h2d_bytes_skipped;
    s->d2h_bytes_skipped = rs->d2h_bytes_skipped;
    s->h2d_ns = rs->h2d_ns;
    s->d2h_ns = rs->d2h_ns;
}

/* After a run with replay on: a successful orchestrated run becomes the
 * recording (a failed one leaves none of its own); a replayed run that
 * failed in its graph (execution, cancel aside) drops the recording. */
static void run_keep_recording(hg_runner *r, const hg_callable *c, const hg_arg *args,
                               uint32_t nargs, const run_graph *rg, int rc, int exec_rc)
{
    if (rc == 0 && !rg->replayed)
        replay_record(&r->replay, &r->graph, &r->plan, c, args, nargs);
    else if (rg->replayed && exec_rc != 0 && exec_rc != HG_ECANCELED)
        replay_drop(&r->replay);
}

/* The decide hook's ruling on code rc (hg_runner_set_decide): a failure
 * stays one, whatever the hook returns (it may name another code). */
static int run_decide(hg_runner *r, int rc)
{
    if (r->decide == NULL)
        return rc;
    if (rc == 0)
        err_clear(&r->err);
    int ruled = r->decide(r->decide_user, rc, r->err.msg, sizeof r->err.msg);
    r->err.msg[sizeof r->err.msg - 1] = '\0';
    if (rc != 0)
        return r->err.code = ruled < 0 ? ruled : rc;
    if (ruled > 0 || (ruled < 0 && r->err.msg[0] == '\0'))
        return err_set(&r->err, ruled > 0 ? HG_EINVAL : ruled, "decide hook: %s (%d)",
                       ruled > 0 ? "returned a positive code" : hg_strerror(ruled), ruled);
    return r->err.code = ruled;
}

/* Copy back around the decide hook: the device reads, the ruling, then
 * (only on 0) the host writes and publish.  Without a hook a run that
 * failed earlier skips this stage, as before hooks existed, and copy-back
 * runs in one step, so a lone written range may land straight in the host
 * buffer (stage_copy_back) instead of through host staging. */
static int run_copy_back(hg_runner *r, int rc, hg_run_stats *s)
{
    if (rc != 0 && r->decide == NULL)
        return rc;
    stage_timer t = timer_start(r, "copy back");
    uint32_t norder = 0;
    if (r->decide == NULL) {
        rc = stage_copy_back(&r->plan, r->dev, &r->err);
    } else {
        if (rc == 0)
            rc = stage_copy_back_fetch(&r->plan, r->dev, &norder, &r->err);
        rc = run_decide(r, rc);
        if (rc == 0)
            stage_copy_back_commit(&r->plan, norder);
    }
    if (rc == 0)
        stage_publish(&r->plan); /* only now: the whole run succeeded */
    r->copied_back = rc == 0;
    timer_stop(t, "copy back", &s->copyback_ns);
    return rc;
}

int hg_runner_run(hg_runner *r, const hg_callable *c, const hg_arg *args, uint32_t nargs,
                  hg_run_stats *stats)
{
    hg_run_stats s;
    memset(&s, 0, sizeof s);
    if (r == NULL) { /* filled on failure too, as the header says */
        if (stats)
            *stats = s;
        return HG_EINVAL;
    }
    err_clear(&r->err);
    if (c == NULL || c->orchestrate == NULL) {
        if (stats)
            *stats = s;
        /* Nothing runs, but the run still counts for the decide hook: its
         * peers' runs must pair with this one, not with the next. */
        return run_decide(r, err_set(&r->err, HG_EINVAL, "callable: no orchestration function"));
    }
    r->runs++;
    r->copied_back = false;
    r->build_ns = 0;
    const hg_device_counters before = r->tally;
    const uint64_t t0 = clock_now_ns();

    stage_timer t = timer_start(r, "bind");
    int rc = run_check_cancel(r, "bind");
    if (rc == 0)
        rc = run_bind(r, args, nargs);
    timer_stop(t, "bind", &s.bind_ns);
    if (rc == 0)
        rc = run_check_cancel(r, "orchestrate");
    run_graph rg = {&r->graph, false};
    if (rc == 0) {
        t = timer_start(r, "orchestrate");
        rc = r->replay.on ? run_replay_or_orchestrate(r, c, args, nargs, &rg)
                          : run_orchestrate(r, c, args, nargs);
        timer_stop(t, rg.replayed && !r->plan.verify ? "replay" : "orchestrate", &s.orch_ns);
        /* Building programs is not orchestrating: its own field and span. */
        s.build_ns = r->build_ns < s.orch_ns ? r->build_ns : s.orch_ns;
        s.orch_ns -= s.build_ns;
    }
    exec_counts counts;
    for (int i = 0; i < HG_KCOUNT_MAX; i++)
        atomic_init(&counts.v[i], 0);
    int exec_rc = 0;
    if (rc == 0) {
        t = timer_start(r, "execute");
        exec_rc = rc = exec_run_counted(r->dev, rg.graph, r->trace, (uint32_t)r->runs, &r->cancel,
                                        &counts, &r->tally, &r->err);
        timer_stop(t, "execute", &s.exec_ns);
    }
    if (rc == 0)
        rc = run_check_cancel(r, "copy back"); /* nothing copied back or published */
    rc = run_copy_back(r, rc, &s);
    stage_backplan_return(&r->plan); /* before a recording is dropped or replaced */
    s.tasks = rg.graph->ntasks;      /* before a recording takes the graph */
    s.edges = rg.graph->nedges;
    if (r->replay.on)
        run_keep_recording(r, c, args, nargs, &rg, rc, exec_rc);
    t = timer_start(r, "release");
    stage_release(&r->plan, r->dev);
    timer_stop(t, "release", &s.release_ns);
    atomic_store_explicit(&r->stage, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->cancel, false, memory_order_relaxed); /* one cancel, one run */

    s.wall_ns = clock_now_ns() - t0;
    fill_stats(r, &before, &rg, &s);
    s.net_bytes = atomic_load_explicit(&counts.v[HG_KCOUNT_NET_BYTES], memory_order_relaxed);
    s.net_ns = atomic_load_explicit(&counts.v[HG_KCOUNT_NET_NS], memory_order_relaxed);
    if (stats)
        *stats = s;
    if (rc == 0)
        err_clear(&r->err);
    return rc;
}
