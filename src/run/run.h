/*
 * run.h: what the runner and the orchestration context share.
 */
#ifndef HG_RUN_RUN_H
#define HG_RUN_RUN_H

#include <stdatomic.h>

#include "base/error.h"
#include "graph/graph.h"
#include "hostgraph.h"
#include "run/replay.h"
#include "stage/stage.h"

struct hg_runner {
    hg_device *dev;
    hg_device_counters tally; /* this runner's device operations only */
    stage_retained retained;
    residency_cache cache; /* resident copies: outlive runs, freed at close */
    stage_plan plan;
    graph graph;
    hg_err err;
    hg_trace *trace;
    uint64_t runs; /* runs started: the LRU clock (64-bit, as the cache's), labels trace spans */
    uint64_t build_ns; /* this run's program builds so far (orch.c; hg_run_stats.build_ns) */
    bool copied_back;  /* the last run's copy-back succeeded (hg_runner_copied_back) */
    /* The stage a run is in (a static name), NULL between runs: read by
     * other threads (progress display), hence atomic. */
    _Atomic(const char *) stage;
    /* hg_runner_cancel's request: set from any thread or a signal handler,
     * read between tasks and stages, cleared when a run ends. */
    atomic_bool cancel;
    replay_state replay; /* hg_runner_set_replay: the recording and its log */
    /* hg_runner_set_decide's hook (NULL: none) and its argument. */
    hg_run_decide_fn decide;
    void *decide_user;
};

/* The orchestration context lives on the runner's stack for one run.  The
 * first failing call is sticky: the run fails with its code and its message
 * (kept in `first`, since later calls overwrite the runner's err) even if the
 * orchestration function ignores the code and returns 0. */
struct hg_orch {
    hg_runner *runner;
    const hg_arg *args;
    uint32_t nargs;
    int failed;
    hg_err first;
};

#endif
