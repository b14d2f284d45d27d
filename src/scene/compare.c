/*
 * compare.c: `hostgraph compare`, every residency mode of one scene side by
 * side in one process, measured honestly.
 *
 * Unreported warm-up rounds come first (o->warmup, at least one), so the
 * process's first-time costs do not all land on the first mode.  The case is
 * made once (its host buffers and goldens are the same for every mode; each
 * run starts from its initial outputs).  Then the modes run o->repeat times,
 * interleaved mode by mode (off, pin, in, all, off, pin, ...), each run on a
 * fresh device of the same spec, so no mode inherits another's touched
 * device pages and a drift of the machine (another process, the clock) hits
 * every mode alike.  Each mode's later-round average is the median over its
 * repeats, with its min-max spread; a mode is faster or slower than off only
 * when the spreads lie apart by more than the wider one (spread.c).  The JSON keeps one shape:
 * modes[m] is the first repeat's `run --json` report, plus the spread and
 * the verdict.  A mode's overall counts its setup (pin's upload) and its
 * rounds, not the shared case making.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
#include "scene/compare.h"

static void later_bytes(mode_run *m)
{
    double h = 0, d = 0;
    for (uint32_t i = 1; i < m->rep.nrounds; i++) {
        h += (double)m->rounds[i].stats.h2d_bytes;
        d += (double)m->rounds[i].stats.d2h_bytes;
    }
    uint32_t n = m->rep.nrounds > 1 ? m->rep.nrounds - 1 : 0;
    m->h2d_later = n ? h / n : NAN;
    m->d2h_later = n ? d / n : NAN;
}

/* One run of a mode on a fresh device, into rep and rounds; returns its
 * SCENE_EXIT_* code. */
static int run_mode(const scene_run_opts *base, scene_case *c, scene_residency mode,
                    scene_round *rounds, uint32_t nrounds, scene_report *rep, char *device,
                    size_t devlen)
{
    scene_run_opts o = *base;
    o.residency = mode;
    o.quiet = true;
    o.rounds = nrounds;
    o.json_path = o.trace_path = NULL;
    memset(rep, 0, sizeof *rep);
    hg_device *dev = NULL;
    char msg[256] = "";
    if (hg_device_open(o.device_spec ? o.device_spec : "sim", &dev, msg, sizeof msg) != 0) {
        fprintf(o.err, "hostgraph: %s\n", msg);
        return SCENE_EXIT_RUNTIME;
    }
    const uint64_t start = clock_now_ns();
    int rc = scene_run_rounds(&o, dev, c, NULL, rounds, rep);
    rep->overall_ms = (double)(clock_now_ns() - start) / 1e6;
    snprintf(device, devlen, "%s", hg_device_spec(dev));
    rep->device = device;
    hg_device_close(dev);
    return rc;
}

static void write_json(FILE *f, const scene_run_opts *o, const mode_run *m, const char *device,
                       bool interrupted)
{
    fputs("{", f);
    scene_report_write_provenance(f, 2);
    fputs("\n  \"scene\": ", f);
    json_write_string(f, o->scene->name);
    fputs(",\n  \"device\": ", f);
    json_write_string(f, device);
    fputs(",\n  \"params\": ", f);
    scene_report_write_params(f, o->scene, m[0].rep.params != NULL ? m[0].rep.params : o->params);
    fprintf(f, ",\n  \"repeat\": %u", o->repeat > 0 ? o->repeat : 1);
    fprintf(f, ",\n  \"interrupted\": %s", interrupted ? "true" : "false");
    char why[256];
    compare_no_verdict(o, m, why, sizeof why);
    fputs(",\n  \"no_verdict\": ", f);
    if (*why != '\0')
        json_write_string(f, why);
    else
        fputs("null", f);
    fputs(",\n  \"modes\": {", f);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_write_string(f, scene_residency_name((scene_residency)i));
        fputs(": ", f);
        scene_report_write_object(f, &m[i].rep, 4);
    }
    fputs("\n  }\n}\n", f);
}

/* Each mode's spread over its repeats and its verdict against off. */
static void summarize(const scene_run_opts *o, mode_run *m)
{
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++) {
        m[i].rep.later = scene_spread_of(m[i].later, m[i].nlater);
        m[i].rep.repeat = o->repeat > 0 ? o->repeat : 1;
    }
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++) {
        m[i].rep.verdict = scene_verdict(&m[i].rep.later, &m[0].rep.later);
        m[i].rep.compared = true;
    }
}

void compare_no_verdict(const scene_run_opts *o, const mode_run *m, char *why, size_t len)
{
    uint32_t fewest = SCENE_MAX_REPEAT;
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++)
        fewest = m[i].rep.later.n < fewest ? m[i].rep.later.n : fewest;
    *why = '\0';
    if (fewest >= SCENE_VERDICT_MIN_REPEAT)
        return;
    snprintf(why, len,
             "no verdict: a mode measured %u time%s (--repeat %u) has no spread to tell a change "
             "from noise; a verdict needs --repeat %d or more",
             fewest, fewest == 1 ? "" : "s", o->repeat > 0 ? o->repeat : 1,
             SCENE_VERDICT_MIN_REPEAT);
}

/* The table and the files, of the modes run (all, unless interrupted). */
static int finish(const scene_run_opts *o, const char *svg_path, mode_run *m, scene_outputs *outs,
                  int rc)
{
    summarize(o, m);
    if (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_GOLDEN || rc == SCENE_EXIT_INTERRUPTED)
        compare_print_table(o->out, o, m);
    if (rc == SCENE_EXIT_INTERRUPTED)
        fprintf(o->out, "interrupted: the rows cover the runs done before the stop\n");
    const char *device = m[0].rep.device  ? m[0].rep.device
                         : o->device_spec ? o->device_spec
                                          : "sim";
    if (outs->json.f != NULL && (rc != SCENE_EXIT_RUNTIME || m[0].rep.scene != NULL)) {
        write_json(outs->json.f, o, m, device, rc == SCENE_EXIT_INTERRUPTED);
        if (scene_output_commit(&outs->json, o->err, "--json", o->json_path) != 0)
            rc = SCENE_EXIT_RUNTIME;
    }
    if (outs->svg.f != NULL && rc != SCENE_EXIT_RUNTIME) {
        compare_write_svg(outs->svg.f, o, m);
        if (scene_output_commit(&outs->svg, o->err, "--svg", svg_path) != 0)
            rc = SCENE_EXIT_RUNTIME;
    }
    return rc;
}

/* Unreported rounds of `off` on a fresh device: the process's own
 * first-time costs (code and host pages, the allocator's arenas) would
 * otherwise all land on the first mode. */
static int warm_up(const scene_run_opts *o, scene_case *c, const scene_snapshot *initial)
{
    uint32_t n = o->warmup > 0 ? o->warmup : 1;
    scene_round *rounds = calloc(n, sizeof *rounds);
    scene_report rep;
    char device[256];
    if (rounds == NULL) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        return SCENE_EXIT_RUNTIME;
    }
    int rc = run_mode(o, c, SCENE_RESIDENCY_OFF, rounds, n, &rep, device, sizeof device);
    free(rounds);
    scene_snapshot_restore(initial, c);
    return rc == SCENE_EXIT_GOLDEN ? SCENE_EXIT_OK : rc;
}

/* Folds one run's code into the compare's: a runtime error or an interrupt
 * stops everything, a golden failure is kept. */
static int worst(int rc, int run_rc)
{
    if (rc == SCENE_EXIT_RUNTIME || rc == SCENE_EXIT_INTERRUPTED)
        return rc;
    return run_rc == SCENE_EXIT_OK ? rc : run_rc;
}

/* The repeats, interleaved mode by mode; `scratch` holds the later
 * repeats' rounds. */
static int run_repeats(const scene_run_opts *o, scene_case *c, const scene_snapshot *initial,
                       mode_run *m, scene_round *scratch)
{
    const uint32_t repeat = o->repeat > 0 ? o->repeat : 1;
    int rc = SCENE_EXIT_OK;
    for (uint32_t r = 0; r < repeat && rc != SCENE_EXIT_RUNTIME; r++) {
        for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++) {
            if (rc == SCENE_EXIT_INTERRUPTED || scene_cancel_requested(o->cancel))
                return SCENE_EXIT_INTERRUPTED;
            scene_report later_rep;
            char device[256];
            scene_report *rep = r == 0 ? &m[i].rep : &later_rep;
            int run_rc = run_mode(o, c, (scene_residency)i, r == 0 ? m[i].rounds : scratch,
                                  o->rounds, rep, r == 0 ? m[i].device : device, sizeof device);
            scene_snapshot_restore(initial, c);
            if (run_rc == SCENE_EXIT_OK || run_rc == SCENE_EXIT_GOLDEN)
                m[i].later[m[i].nlater++] = rep->later_avg_ms;
            if (r > 0 && run_rc == SCENE_EXIT_RUNTIME)
                m[i].rep.error = later_rep.error;
            m[i].rc = worst(m[i].rc, run_rc);
            rc = worst(rc, run_rc);
            if (rc == SCENE_EXIT_RUNTIME)
                return rc;
        }
    }
    return rc;
}

/* scenes/kernels/kernels.h's: 0 when HG_KERNELS is unset or a path the CPU has. */
int kern_env_check(char *msg, size_t len);

/* Opens the device once (a bad spec is a usage error before the case is
 * made) and makes the case. */
static int make_case(const scene_run_opts *o, scene_case **c)
{
    hg_device *probe = NULL;
    char msg[512] = "";
    hg_err err;
    err_clear(&err);
    if (o->rounds < 2) {
        fprintf(o->err,
                "hostgraph: compare --rounds %u: want at least 2 (the later rounds are "
                "what it compares)\n",
                o->rounds);
        return SCENE_EXIT_USAGE;
    }
    if (scene_device_spec_check(o->device_spec, msg, sizeof msg) != 0 ||
        kern_env_check(msg, sizeof msg) != 0) { /* HG_KERNELS: usage, as for run */
        fprintf(o->err, "hostgraph: %s\n", msg);
        return SCENE_EXIT_USAGE;
    }
    int rc = hg_device_open(o->device_spec ? o->device_spec : "sim", &probe, msg, sizeof msg);
    if (rc != 0) {
        fprintf(o->err, "hostgraph: %s\n", *msg ? msg : hg_strerror(rc));
        return scene_device_open_exit(rc);
    }
    hg_device_close(probe);
    rc = scene_case_make(o->scene, o->params, c, &err);
    if (rc != 0) {
        fprintf(o->err, "hostgraph: scene '%s': %s\n", o->scene->name,
                *err.msg ? err.msg : hg_strerror(rc));
        return SCENE_EXIT_RUNTIME;
    }
    return 0;
}

int scene_compare(const scene_run_opts *o, const char *svg_path)
{
    scene_case *c = NULL;
    scene_outputs outs;
    if (o->repeat > SCENE_MAX_REPEAT) {
        fprintf(o->err, "hostgraph: --repeat %u: at most %d\n", o->repeat, SCENE_MAX_REPEAT);
        return SCENE_EXIT_USAGE;
    }
    int rc = scene_outputs_open(&outs, o->err, o->json_path, NULL, svg_path);
    if (rc != 0)
        return rc;
    const uint64_t case_start = clock_now_ns();
    if ((rc = make_case(o, &c)) != 0) {
        scene_outputs_abort(&outs);
        return rc;
    }
    const double case_ms = (double)(clock_now_ns() - case_start) / 1e6;
    mode_run m[SCENE_RESIDENCY_COUNT];
    memset(m, 0, sizeof m);
    scene_snapshot initial;
    scene_round *scratch = calloc(o->rounds, sizeof *scratch);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        m[i].rounds = calloc(o->rounds, sizeof *m[i].rounds);
    bool ok = scratch != NULL && scene_snapshot_take(&initial, c) == 0;
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        ok = ok && m[i].rounds != NULL;
    if (!ok) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        rc = SCENE_EXIT_RUNTIME;
    } else {
        rc = warm_up(o, c, &initial);
        if (rc == SCENE_EXIT_OK)
            rc = run_repeats(o, c, &initial, m, scratch);
        for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++) {
            later_bytes(&m[i]);
            m[i].rep.case_ms = case_ms; /* the one case every mode ran */
        }
        rc = finish(o, svg_path, m, &outs, rc);
        scene_snapshot_free(&initial);
    }
    scene_outputs_abort(&outs);
    free(scratch);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        free(m[i].rounds);
    scene_case_destroy(c);
    return rc;
}
