/*
 * replay.h: checked graph replay (replay.c): the recording a runner keeps
 * of its last orchestrated run, and the checks that let a later run execute
 * it instead of orchestrating again.
 *
 * A recording is the run's graph (its task records, swapped in from the
 * runner's working graph in O(1): graph_swap_records) plus what the
 * orchestration did besides: the run arg of every task arg, the host views
 * it read (arg, byte range, buffer id, generation at the read), the scratch
 * it took, the views its tasks wrote (what copy-back brings back), and the
 * callable and args it ran with, with each arg's device region, and its
 * copy-back plan.  Memory: O(tasks + task args + args + the bytes of the
 * names it holds), all of it the recording's own (no name outlives it in a
 * table of the runner's) and counted by replay_bytes.
 *
 * Invariant: a recording exists only for a run that succeeded, and is
 * dropped (or replaced) as soon as a check or a run shows it no longer
 * stands for what the orchestration would build.
 */
#ifndef HG_RUN_REPLAY_H
#define HG_RUN_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "graph/graph.h"
#include "hostgraph.h"
#include "stage/stage.h"

/* A host view the orchestration read: [lo, hi) of run arg `arg`'s buffer
 * (the arg's extent, all a host view reaches), at generation `gen`; in
 * verify mode also the XXH3 of those bytes. */
typedef struct replay_read {
    uint32_t arg;
    size_t lo, hi;
    uint64_t gen;
    uint64_t hash;
    bool hashed;
} replay_read;

/* A scratch request: what hg_orch_scratch was asked for. */
typedef struct replay_scratch {
    const char *name; /* the log's own copy, in its scratch_names */
    hg_tensor view;   /* dtype, ndims, shape (the address is the run's) */
} replay_scratch;

/* A written view as copy-back noted it: arg, byte extent, and the view
 * itself only when it is strided (a dense one is its extent). */
typedef struct replay_written {
    uint32_t arg;
    bool strided;
    size_t lo, hi;
    hg_tensor view; /* strided only */
} replay_written;

/* What one orchestration did besides building its graph. */
typedef struct replay_log {
    uint32_t *targ_arg; /* per task arg of the graph, in order: its run arg */
    uint32_t ntarg, cap_targ;
    replay_read *reads;
    uint32_t nreads, cap_reads;
    replay_written *written; /* the views its tasks wrote, in submission order */
    uint32_t nwritten, cap_written;
    replay_scratch *scratch;
    uint32_t nscratch, cap_scratch;
    /* The scratch names, end to end: the log owns them, so they go with
     * it (a recording's are freed with the recording), and the capacity is
     * the longest run's names, reused by the next. */
    char *scratch_names;
    size_t names_cap;
} replay_log;

/* One run arg as the recording saw it (name copied into the names blob). */
typedef struct replay_arg {
    hg_arg arg;
    size_t name_at;   /* the name's offset in replay_state.names */
    uint64_t host_id; /* 0: no host buffer */
} replay_arg;

/* An arg's device region [lo, lo + len) and how far it moved: the alias
 * check's unit. */
typedef struct replay_span {
    hg_devaddr lo, len;
    int64_t delta;
} replay_span;

typedef struct replay_state {
    bool on;    /* hg_runner_set_replay */
    bool valid; /* a recording is held */
    /* The recording's callable. */
    hg_orch_fn fn;
    void *user;
    char *name; /* NULL: the callable had none */
    /* The recording's args. */
    replay_arg *args;
    uint32_t nargs, cap_args;
    char *names;
    size_t names_len, names_cap;
    /* Each arg's device region (run args then scratch) where the
     * recording's graph points now, and its extent's length. */
    hg_devaddr *regions, *lens;
    uint32_t nregions, cap_regions;
    graph graph;          /* the recorded task records (no tensor map) */
    replay_log rec;       /* the recorded log */
    stage_backplan back;  /* the recorded run's copy-back plan, lent to replayed runs */
    replay_log cur;       /* the orchestration in flight */
    uint64_t *read_stamp; /* per arg: the run that last logged a read of it */
    uint32_t cap_stamp;
    replay_span *spans; /* the alias check's work list */
    uint32_t cap_spans;
} replay_state;

void replay_init(replay_state *rs);
void replay_free(replay_state *rs);
/* Drops the recording and frees its memory (hg_runner_invalidate_replay). */
void replay_drop(replay_state *rs);
/* Host bytes the recording holds (hg_runner_replay_bytes), its names
 * (args', scratch's, kernels') included. */
uint64_t replay_bytes(const replay_state *rs);
/* Host bytes the replay state holds in all: the recording, plus the log of
 * the orchestration in flight and the checks' work arrays (each kept at
 * the largest run's size). */
uint64_t replay_state_bytes(const replay_state *rs);

/* Orchestration hooks, called only while replay is on.  replay_begin
 * empties the log of the orchestration about to run. */
void replay_begin(replay_state *rs);
/* A submitted task's args (after graph_add_task recorded them).  HG_ENOMEM. */
int replay_note_task(replay_state *rs, const hg_task_desc *d, hg_err *e);
/* A host view of arg `arg` read at run `run` (logged once per arg and run);
 * `hash`: also hash its bytes (verify mode).  HG_ENOMEM. */
int replay_note_read(replay_state *rs, const stage_plan *p, uint32_t arg, uint64_t run, bool hash,
                     hg_err *e);
/* After a successful orchestration: its written views and scratch from the
 * plan into the log.  HG_ENOMEM. */
int replay_capture(replay_state *rs, const stage_plan *p, hg_err *e);

/* 1 when the recording is for this callable and these args and every host
 * view it read is at its recorded generation; 0 otherwise.  In verify mode
 * (`verify`), a read whose generation held but whose bytes changed is
 * HG_ESTALE naming the arg and the buffer (and drops the recording). */
int replay_match(replay_state *rs, const hg_callable *c, const hg_arg *args, uint32_t nargs,
                 bool verify, hg_err *e);
/* Puts the recording in place for the bound plan: checks every arg's device
 * region is where it was or moved without changing which args overlap
 * (0: not replayable), takes the recorded scratch (unless `orchestrated`:
 * the orchestration took it) and points the recording's task args at the
 * regions; unless `orchestrated`, lends the plan the recorded copy-back plan
 * (stage_backplan_lend) in place of noting its written views.
 * 1 when placed; HG_EDEVMEM, HG_ENOMEM, HG_ELIMIT from taking scratch. */
int replay_place(replay_state *rs, stage_plan *p, hg_device *dev, bool orchestrated, hg_err *e);
/* Verify mode, after the orchestration ran again (its log in `cur`): 0
 * when its scratch and host reads equal the recording's, else HG_ESTALE
 * naming the difference. */
int replay_compare_log(const replay_state *rs, hg_err *e);
/* Verify mode, after replay_place: 0 when graph g (and the views its tasks
 * wrote) equal the placed recording, else HG_ESTALE naming the task and the
 * field. */
int replay_compare_graph(const replay_state *rs, const graph *g, hg_err *e);
/* After a successful orchestrated run: its graph and log become the
 * recording (the old one's memory becomes the working graph's), and its
 * copy-back plan the recording's (stage_backplan_keep).  On HG_ENOMEM no
 * recording is kept. */
int replay_record(replay_state *rs, graph *g, stage_plan *p, const hg_callable *c,
                  const hg_arg *args, uint32_t nargs);

#endif
