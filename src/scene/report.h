/*
 * report.h: what one `hostgraph run` measured, and its three renderings: the
 * per-round table, the summary line, and the --json file.  The field names
 * are a contract (issue 2): outside tools parse them.
 */
#ifndef HG_SCENE_REPORT_H
#define HG_SCENE_REPORT_H

#include <stdio.h>

#include "scene/scene.h"

/* The JSON report's shape: bumped when a field changes meaning or goes. */
#define SCENE_REPORT_SCHEMA 3

typedef struct scene_round {
    hg_run_stats stats;
    const char *golden;     /* "pass", "fail" or "skipped" (--tp: every rank's verdict) */
    const char *own_golden; /* this rank's own verdict (without --tp: golden) */
} scene_round;

typedef struct scene_report {
    const scene *scene;
    const int64_t *params; /* the case's, resolved (no preset placeholders) */
    const char *device;    /* the device's normalized spec */
    scene_residency residency;
    bool verify;
    bool replay; /* --replay: the table gains a "replayed" column */
    const scene_round *rounds;
    uint32_t nrounds;    /* rounds completed */
    double first_ms;     /* round 1's wall time; NAN (JSON null) when no round ran */
    double later_avg_ms; /* mean wall time of rounds 2..N; NAN (JSON null) with one round */
    /* The whole command, from its start to the report: making the case,
     * opening the device, setup, warm-up, the rounds with their restores and
     * golden checks, and the repeats.  compare: a mode's setup and rounds. */
    double overall_ms;
    double setup_ms;  /* pin: the one-time upload before the rounds; else 0 */
    double case_ms;   /* making the case (its buffers, inputs and goldens) */
    double golden_ms; /* every golden check of the rounds, together */
    uint64_t setup_h2d_bytes;
    uint32_t repeat, warmup; /* the rounds ran `repeat` times after `warmup` rounds */
    scene_spread later;      /* later_avg_ms over the repeats */
    const char *verdict;     /* compare: against off ("within noise", ...); NULL: none */
    bool compared;           /* compare's: "verdict" is written (null when none) */
    bool interrupted;        /* stopped early on request (SIGINT, a cancel call) */
    hg_err error;            /* the runtime error that stopped the rounds; code 0 if none */
    /* --tp, on rank 0: every rank's rounds, rank after rank, nrounds each
     * (the JSON's "ranks"); NULL and 0 otherwise. */
    const scene_round *rank_rounds;
    uint32_t nranks;
    /* --tp, on rank 0: every rank's device (its normalized spec, `{rank}`
     * filled in), SCENE_TP_SPEC bytes each; NULL otherwise. */
    const char *rank_devices;
} scene_report;
#define SCENE_TP_SPEC 128

/* Runs the rounds of one mode (runner.c): a new runner, the mode's args
 * (pin's setup), every round with its golden check; fills rep, whose rounds
 * point into `rounds` (o->rounds entries, the caller's).  overall_ms is left
 * to the caller.  Returns SCENE_EXIT_OK, _GOLDEN or _RUNTIME. */
int scene_run_rounds(const scene_run_opts *o, hg_device *dev, scene_case *c, hg_trace *trace,
                     scene_round *rounds, scene_report *rep);

/* scene_run_rounds after o->warmup unreported rounds, then o->repeat - 1
 * more times (unreported, each from the case's initial outputs): rep is the
 * first repeat's, with repeat, warmup and the spread of every repeat's
 * later-round average (repeat.c).  Returns as scene_run_rounds. */
int scene_run_repeats(const scene_run_opts *o, hg_device *dev, scene_case *c, hg_trace *trace,
                      scene_round *rounds, scene_report *rep);

/* tp.c: the ranks' agreements (every one a collective of o->tp; each is a
 * no-op without --tp).
 *
 * After a setup step that returned rc on this rank: every rank returns 0
 * if every rank's rc was 0, else the code of the lowest failing rank (which
 * printed why). */
int scene_tp_agree(const scene_run_opts *o, int rc);
/* At a round's end, one collective: *all_pass is whether every rank's
 * golden passed (pass: this rank's), *stop whether any rank was asked to
 * stop (o->cancel).  SCENE_EXIT_RUNTIME after a line on o->err if the
 * collective fails. */
int scene_tp_round_end(const scene_run_opts *o, bool pass, bool *all_pass, bool *stop);
/* Gathers every rank's rounds of rep on rank 0 into rep->rank_rounds
 * (freed by scene_tp_free_ranks) and rep->nranks. */
int scene_tp_gather(const scene_run_opts *o, scene_report *rep);
void scene_tp_free_ranks(scene_report *rep);

/* Fills first_ms and later_avg_ms from the rounds. */
void scene_report_summarize(scene_report *r);
void scene_report_print_header(FILE *f);
/* `round` counts from 1. */
void scene_report_print_row(FILE *f, uint32_t round, const scene_round *sr);
/* The same with --replay: a "replayed" column (yes/no) before golden. */
void scene_report_print_header_replay(FILE *f, bool replay);
void scene_report_print_row_replay(FILE *f, uint32_t round, const scene_round *sr, bool replay);
void scene_report_print_summary(FILE *f, const scene_report *r);
/* HG_EIO if the file cannot be written; the file at path is then untouched. */
int scene_report_write_json(const scene_report *r, const char *path);
/* The report's JSON object, indented by `indent` spaces (compare nests it). */
void scene_report_write_object(FILE *f, const scene_report *r, int indent);
/* The host object {"cpu": model, "cores": n, "memory_bytes": n} (host.c). */
void scene_report_write_host(FILE *f);
/* "schema", "hostgraph_version", "kernels" and "host": what produced a
 * report, each on its own line at `indent`, each followed by a comma. */
void scene_report_write_provenance(FILE *f, int indent);
/* The params object {"name": value, ...}. */
void scene_report_write_params(FILE *f, const scene *s, const int64_t *params);

#endif
