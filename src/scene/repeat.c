/*
 * repeat.c: `run --warmup N --repeat N`: unreported warm-up rounds, then the
 * rounds N times, each time on a new runner from the case's initial outputs.
 * The report is the first repeat's (its rows, its trace); every repeat's
 * later-round average goes into the report's spread, so a user sees how much
 * the number moves before trusting it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scene/report.h"
#include "scene/scene.h"

/* Runs `rounds` unreported rounds from the initial outputs; their
 * later-round average goes to *later. */
static int run_quiet(const scene_run_opts *o, hg_device *dev, scene_case *c,
                     const scene_snapshot *initial, uint32_t rounds, double *later,
                     scene_report *failed)
{
    scene_run_opts q = *o;
    q.quiet = true;
    q.on_round = NULL;
    q.rounds = rounds;
    scene_round *rs = calloc(rounds, sizeof *rs);
    if (rs == NULL || scene_snapshot_restore(initial, c) != 0) {
        free(rs);
        fprintf(o->err, "hostgraph: out of host memory\n");
        return SCENE_EXIT_RUNTIME;
    }
    scene_report rep;
    int rc = scene_run_rounds(&q, dev, c, NULL, rs, &rep);
    *later = rep.later_avg_ms;
    failed->error = rep.error;
    free(rs);
    return rc;
}

int scene_run_repeats(const scene_run_opts *o, hg_device *dev, scene_case *c, hg_trace *trace,
                      scene_round *rounds, scene_report *rep)
{
    const uint32_t repeat = o->repeat > 0 ? o->repeat : 1;
    double later[SCENE_MAX_REPEAT];
    scene_snapshot initial;
    scene_report extra = {0};
    int rc = SCENE_EXIT_OK;
    if (scene_snapshot_take(&initial, c) != 0) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        memset(rep, 0, sizeof *rep);
        return SCENE_EXIT_RUNTIME;
    }
    double ignored;
    if (o->warmup > 0)
        rc = run_quiet(o, dev, c, &initial, o->warmup, &ignored, &extra);
    if (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_GOLDEN) {
        int first = scene_snapshot_restore(&initial, c) == 0
                        ? scene_run_rounds(o, dev, c, trace, rounds, rep)
                        : SCENE_EXIT_RUNTIME;
        rc = first == SCENE_EXIT_OK ? rc : first;
        later[0] = rep->later_avg_ms;
    } else {
        memset(rep, 0, sizeof *rep); /* the warm-up failed: no report of rounds */
    }
    uint32_t done = 1;
    for (; done < repeat && (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_GOLDEN); done++) {
        int more = run_quiet(o, dev, c, &initial, o->rounds, &later[done], &extra);
        rc = more == SCENE_EXIT_OK ? rc : more;
    }
    if (rc == SCENE_EXIT_RUNTIME && extra.error.code != 0 && rep->error.code == 0)
        rep->error = extra.error;
    rep->interrupted = rep->interrupted || rc == SCENE_EXIT_INTERRUPTED;
    rep->repeat = repeat;
    rep->warmup = o->warmup;
    rep->later = scene_spread_of(later, rep->scene != NULL ? done : 0);
    scene_snapshot_free(&initial);
    return rc;
}
