/*
 * tp.c: the scene runner's side of a tensor-parallel job (`run --tp N`):
 * the points where the ranks must agree so that none is left waiting.
 *
 * Every rank runs the same rounds of its share of the case.  A run that
 * fails on one rank fails on every rank (libhostgraph_mpi's agreement, in
 * the runner's decide hook), so the rounds end together on an error.  What
 * the runs do not cover is agreed here, through scene_tp's collectives:
 *   - each setup step (the report files, the device, the case, each
 *     runner and its attachment): one MIN of (rank, exit code), so a rank
 *     that failed stops every rank, with its code;
 *   - each round's end: one MIN of two words, the golden verdict (every
 *     rank's must pass) and "no stop request" (a Ctrl-C that reached one
 *     rank stops all of them after this same round);
 *   - the report: rank 0 gathers every rank's rounds for the JSON's
 *     "ranks".
 * The invariant: every rank makes the same sequence of these calls, so the
 * collectives always match.
 */
#include <stdlib.h>
#include <string.h>

#include "scene/report.h"
#include "scene/scene.h"

int scene_device_spec_for_rank(const scene_run_opts *o, char *out, size_t n)
{
    const char *spec = o->device_spec != NULL ? o->device_spec : "sim";
    const char *hole = scene_tp_on(o->tp) ? strstr(spec, "{rank}") : NULL;
    int len = hole == NULL ? snprintf(out, n, "%s", spec)
                           : snprintf(out, n, "%.*s%u%s", (int)(hole - spec), spec,
                                      o->tp->local_rank, hole + strlen("{rank}"));
    return len < 0 || (size_t)len >= n ? HG_ELIMIT : 0;
}

/* A rank's failure as one word: the lowest rank wins, its code rides along. */
#define TP_NO_FAILURE INT64_MAX
#define TP_CODES      256

int scene_tp_agree(const scene_run_opts *o, int rc)
{
    if (!scene_tp_on(o->tp))
        return rc;
    int64_t mine = rc == SCENE_EXIT_OK ? TP_NO_FAILURE : (int64_t)o->tp->rank * TP_CODES + rc, all;
    if (o->tp->agree_min(o->tp->user, &mine, &all, 1) != 0) {
        fprintf(o->err, "hostgraph: rank %u of %u: the ranks could not agree (MPI failed)\n",
                o->tp->rank, o->tp->size);
        return SCENE_EXIT_RUNTIME;
    }
    if (all == TP_NO_FAILURE)
        return SCENE_EXIT_OK;
    if (o->tp->rank == 0 && all / TP_CODES != 0)
        fprintf(o->err, "hostgraph: rank %lld of %u failed (its message above); every rank stops\n",
                (long long)(all / TP_CODES), o->tp->size);
    return (int)(all % TP_CODES);
}

int scene_tp_round_end(const scene_run_opts *o, bool pass, bool *all_pass, bool *stop)
{
    *all_pass = pass;
    *stop = false;
    if (!scene_tp_on(o->tp))
        return 0;
    int64_t mine[2] = {pass ? 1 : 0, scene_cancel_requested(o->cancel) ? 0 : 1}, all[2];
    if (o->tp->agree_min(o->tp->user, mine, all, 2) != 0) {
        fprintf(o->err, "hostgraph: rank %u of %u: the ranks could not agree (MPI failed)\n",
                o->tp->rank, o->tp->size);
        return SCENE_EXIT_RUNTIME;
    }
    *all_pass = all[0] == 1;
    *stop = all[1] == 0;
    return 0;
}

/* A round as it travels to rank 0: its stats and its own verdict. */
typedef struct tp_round {
    hg_run_stats stats;
    int64_t golden; /* index into verdicts[]; 0: no such round */
} tp_round;

static const char *const verdicts[] = {NULL, "pass", "fail", "skipped"};

static int64_t verdict_index(const char *golden)
{
    for (int64_t i = 1; i < 4; i++) {
        if (golden != NULL && strcmp(golden, verdicts[i]) == 0)
            return i;
    }
    return 0;
}

/* The most ranks --tp takes (the command's bound): one round of every rank
 * fits on the stack. */
#define TP_MAX_RANKS 256

int scene_tp_gather(const scene_run_opts *o, scene_report *rep)
{
    rep->rank_rounds = NULL;
    rep->rank_devices = NULL;
    rep->nranks = 0;
    if (!scene_tp_on(o->tp))
        return 0;
    uint32_t n = o->tp->size, per = rep->nrounds; /* the same on every rank: agreed */
    if (n > TP_MAX_RANKS)
        return HG_ELIMIT;
    scene_round *out = o->tp->rank == 0 ? calloc((size_t)n * per + 1, sizeof *out) : NULL;
    char *devs = o->tp->rank == 0 ? calloc(n, SCENE_TP_SPEC) : NULL;
    int rc = o->tp->rank == 0 && (out == NULL || devs == NULL) ? HG_ENOMEM : 0;
    /* Each rank's device first (a spec longer than SCENE_TP_SPEC - 1 is
     * cut), through a stack buffer as the rounds below. */
    char mydev[SCENE_TP_SPEC], alldev[TP_MAX_RANKS * SCENE_TP_SPEC];
    snprintf(mydev, sizeof mydev, "%s", rep->device != NULL ? rep->device : "");
    int drc = o->tp->gather(o->tp->user, mydev, sizeof mydev, alldev);
    rc = rc != 0 ? rc : drc;
    if (rc == 0 && devs != NULL)
        memcpy(devs, alldev, (size_t)n * SCENE_TP_SPEC);
    /* One gather per round, from stack buffers, so that every rank makes
     * every call whatever memory it has: none is left waiting in one. */
    tp_round row[TP_MAX_RANKS];
    for (uint32_t i = 0; i < per; i++) {
        tp_round mine = {rep->rounds[i].stats, verdict_index(rep->rounds[i].own_golden)};
        memset(row, 0, sizeof row[0]);
        int grc = o->tp->gather(o->tp->user, &mine, sizeof mine, row);
        rc = rc != 0 ? rc : grc;
        for (uint32_t k = 0; rc == 0 && out != NULL && k < n; k++) {
            const char *v = verdicts[row[k].golden >= 0 && row[k].golden < 4 ? row[k].golden : 0];
            out[(size_t)k * per + i] = (scene_round){row[k].stats, v, v};
        }
    }
    if (rc != 0) {
        free(out);
        free(devs);
        fprintf(o->err, "hostgraph: rank %u of %u: cannot gather the ranks' rounds: %s\n",
                o->tp->rank, n, hg_strerror(rc));
        return rc;
    }
    rep->rank_rounds = out;
    rep->rank_devices = devs;
    rep->nranks = out != NULL ? n : 0;
    return 0;
}

void scene_tp_free_ranks(scene_report *rep)
{
    free((void *)rep->rank_rounds);
    free((void *)rep->rank_devices);
    rep->rank_rounds = NULL;
    rep->rank_devices = NULL;
    rep->nranks = 0;
}
