/*
 * runner.c: the scene runner, a scene's case run for N rounds.
 *
 * Every round must produce the same golden-correct result, so before each
 * round the OUT and INOUT host buffers are restored to the contents they had
 * when the case was made, through hg_hostbuf_write (which bumps their
 * generation, as any user write between rounds would).  Without the restore
 * an INOUT like bgemm's C would accumulate round after round.
 *
 * Exit codes follow the CLI contract: 0 all golden passed or skipped, 1 a
 * golden check failed (all rounds still run, the reports still written), 2 a
 * --json or --trace path that cannot be written (found before the device is
 * opened or any round runs, one line naming the path; nothing is created), 3
 * a runtime error (one line on o->err; the remaining rounds are not run; the
 * trace is still written, the JSON report is not; a file that fails to write
 * only after the rounds is a runtime error too).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "scene/report.h"
#include "scene/scene.h"

int scene_residency_parse(const char *name, scene_residency *out)
{
    if (name != NULL && strcmp(name, "off") == 0) {
        *out = SCENE_RESIDENCY_OFF;
        return 0;
    }
    return HG_EINVAL;
}

const char *scene_residency_name(scene_residency r)
{
    return r == SCENE_RESIDENCY_OFF ? "off" : "?";
}

/* The directory a new file at `path` would go in, into dir; false if it
 * does not fit. */
static bool parent_dir(const char *path, char *dir, size_t dirlen)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash == NULL || slash == path ? 1 : (size_t)(slash - path); /* "." or "/" */
    if (len >= dirlen)
        return false;
    memcpy(dir, slash == NULL ? "." : path, len);
    dir[len] = '\0';
    return true;
}

/* Writes the reason a check failed into why; returns false, so that a check
 * can `return why_not(...)`. */
static bool why_not(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool why_not(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return false;
}

/* True if a file could be written at `path`; else why not, in why.  Only
 * looks (stat, access): a probe that created the file would leave it behind
 * when a later round fails. */
static bool output_writable(const char *path, char *why, size_t whylen)
{
    struct stat st;
    char dir[4096];
    if (*path == '\0')
        return why_not(why, whylen, "the path is empty");
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return why_not(why, whylen, "it is a directory");
        if (access(path, W_OK) != 0)
            return why_not(why, whylen, "%s", strerror(errno));
        return true;
    }
    if (errno != ENOENT) /* e.g. ENOTDIR: the path goes through a file */
        return why_not(why, whylen, "%s", strerror(errno));
    if (!parent_dir(path, dir, sizeof dir))
        return true; /* too long to look at here: the write will say */
    if (stat(dir, &st) != 0)
        return why_not(why, whylen, "directory '%s': %s", dir, strerror(errno));
    if (access(dir, W_OK | X_OK) != 0)
        return why_not(why, whylen, "directory '%s': %s", dir, strerror(errno));
    return true;
}

/* Checks the --json and --trace paths before any round runs; returns 0 or
 * SCENE_EXIT_USAGE after one line naming the path. */
static int check_output_paths(const scene_run_opts *o)
{
    const char *paths[2] = {o->json_path, o->trace_path};
    const char *what[2] = {"JSON report", "trace"};
    char why[4200];
    if (paths[0] != NULL && paths[1] != NULL && strcmp(paths[0], paths[1]) == 0) {
        fprintf(o->err, "hostgraph: the JSON report and the trace both name '%s'\n", paths[0]);
        return SCENE_EXIT_USAGE;
    }
    for (int i = 0; i < 2; i++) {
        if (paths[i] != NULL && !output_writable(paths[i], why, sizeof why)) {
            fprintf(o->err, "hostgraph: cannot write %s '%s': %s\n", what[i], paths[i], why);
            return SCENE_EXIT_USAGE;
        }
    }
    return 0;
}

/* The initial bytes of every OUT/INOUT arg, indexed like the case's args. */
typedef struct snapshot {
    void *bytes[SCENE_MAX_ARGS];
} snapshot;

static void snapshot_free(snapshot *s)
{
    for (uint32_t i = 0; i < SCENE_MAX_ARGS; i++)
        free(s->bytes[i]);
}

static bool is_output(const hg_arg *a)
{
    return a->dir == HG_OUT || a->dir == HG_INOUT;
}

static int snapshot_take(snapshot *s, const scene_case *c)
{
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (!is_output(&c->args[i]))
            continue;
        size_t bytes = hg_hostbuf_size(c->args[i].tensor.host);
        s->bytes[i] = malloc(bytes > 0 ? bytes : 1);
        if (s->bytes[i] == NULL) {
            snapshot_free(s);
            return HG_ENOMEM;
        }
        memcpy(s->bytes[i], hg_hostbuf_data(c->args[i].tensor.host), bytes);
    }
    return 0;
}

static int snapshot_restore(const snapshot *s, scene_case *c)
{
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (!is_output(&c->args[i]))
            continue;
        hg_hostbuf *hb = c->args[i].tensor.host;
        int rc = hg_hostbuf_write(hb, 0, s->bytes[i], hg_hostbuf_size(hb));
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Checks golden for one round, records "pass"/"fail" and explains a fail. */
static bool check_round(const scene_run_opts *o, const scene_case *c, uint32_t round,
                        scene_round *sr)
{
    scene_check_result res;
    if (o->skip_golden) {
        sr->golden = "skipped";
        return true;
    }
    bool pass = scene_case_check(c, &res);
    sr->golden = pass ? "pass" : "fail";
    if (!pass)
        fprintf(o->err,
                "hostgraph: round %u: golden mismatch in output '%s': max abs err %g, "
                "max rel err %g, first mismatch at index %zu\n",
                round, res.output, res.max_abs_err, res.max_rel_err, res.first_bad);
    return pass;
}

typedef struct round_loop {
    uint64_t start_ns; /* what overall_ms counts from */
    hg_runner *runner;
    snapshot initial;
    scene_round *rounds;
    uint32_t done;
    bool golden_failed;
} round_loop;

/* Runs the rounds; returns 0 or SCENE_EXIT_RUNTIME after printing why. */
static int run_rounds(const scene_run_opts *o, scene_case *c, round_loop *l)
{
    if (!o->quiet)
        scene_report_print_header(o->out);
    for (uint32_t i = 0; i < o->rounds; i++) {
        scene_round *sr = &l->rounds[i];
        int rc = snapshot_restore(&l->initial, c);
        if (rc != 0) {
            fprintf(o->err, "hostgraph: round %u: cannot restore outputs: %s\n", i + 1,
                    hg_strerror(rc));
            return SCENE_EXIT_RUNTIME;
        }
        rc = hg_runner_run(l->runner, &c->callable, c->args, c->nargs, &sr->stats);
        if (rc != 0) {
            const char *msg = hg_runner_errmsg(l->runner);
            fprintf(o->err, "hostgraph: round %u: %s\n", i + 1, *msg ? msg : hg_strerror(rc));
            return SCENE_EXIT_RUNTIME;
        }
        if (!check_round(o, c, i + 1, sr))
            l->golden_failed = true;
        l->done = i + 1;
        if (o->on_round != NULL)
            o->on_round(o->on_round_user, i + 1, c, &sr->stats);
        if (!o->quiet)
            scene_report_print_row(o->out, i + 1, sr);
    }
    return 0;
}

/* Writes the trace, the summary and the JSON once the rounds are done. */
static int finish(const scene_run_opts *o, hg_device *dev, const round_loop *l, hg_trace *trace)
{
    if (trace != NULL && hg_trace_write_json(trace, o->trace_path) != 0) {
        fprintf(o->err, "hostgraph: cannot write trace '%s'\n", o->trace_path);
        return SCENE_EXIT_RUNTIME;
    }
    scene_report rep = {.scene = o->scene,
                        .params = o->params,
                        .device = hg_device_spec(dev),
                        .residency = o->residency,
                        .rounds = l->rounds,
                        .nrounds = l->done};
    scene_report_summarize(&rep);
    rep.overall_ms = (double)(clock_now_ns() - l->start_ns) / 1e6;
    scene_report_print_summary(o->out, &rep);
    if (o->json_path != NULL && scene_report_write_json(&rep, o->json_path) != 0) {
        fprintf(o->err, "hostgraph: cannot write JSON report '%s'\n", o->json_path);
        return SCENE_EXIT_RUNTIME;
    }
    return l->golden_failed ? SCENE_EXIT_GOLDEN : SCENE_EXIT_OK;
}

int scene_run_case(const scene_run_opts *o, hg_device *dev, scene_case *c)
{
    round_loop l = {.start_ns = o->start_ns != 0 ? o->start_ns : clock_now_ns()};
    hg_trace *trace = NULL;
    int rc = check_output_paths(o);
    if (rc != 0)
        return rc;
    rc = SCENE_EXIT_RUNTIME;
    l.rounds = calloc(o->rounds > 0 ? o->rounds : 1, sizeof *l.rounds);
    if (l.rounds == NULL || snapshot_take(&l.initial, c) != 0) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        free(l.rounds);
        return SCENE_EXIT_RUNTIME;
    }
    int hrc = hg_runner_open(dev, &l.runner);
    if (hrc == 0 && o->trace_path != NULL && (hrc = hg_trace_create(&trace)) == 0)
        hg_runner_set_trace(l.runner, trace);
    if (hrc != 0)
        fprintf(o->err, "hostgraph: cannot open a runner: %s\n", hg_strerror(hrc));
    else if ((rc = run_rounds(o, c, &l)) == 0)
        rc = finish(o, dev, &l, trace);
    else if (trace != NULL && hg_trace_write_json(trace, o->trace_path) != 0)
        fprintf(o->err, "hostgraph: cannot write trace '%s'\n", o->trace_path);
    /* A failed round still leaves its trace: the spans up to the failure are
     * what a user debugging it wants.  The JSON report has no form for a
     * round that did not finish, so it is written only after all rounds. */
    hg_runner_close(l.runner);
    if (trace != NULL)
        hg_trace_destroy(trace);
    snapshot_free(&l.initial);
    free(l.rounds);
    return rc;
}

int scene_run(const scene_run_opts *o)
{
    const char *spec = o->device_spec != NULL ? o->device_spec : "sim";
    char msg[256] = "";
    hg_device *dev = NULL;
    int rc = check_output_paths(o); /* before the case is made: that can take a while */
    if (rc != 0)
        return rc;
    rc = hg_device_open(spec, &dev, msg, sizeof msg);
    if (rc != 0) {
        if (*msg != '\0')
            fprintf(o->err, "hostgraph: %s\n", msg);
        else
            fprintf(o->err, "hostgraph: cannot open device '%s'\n", spec);
        /* A spec the device cannot parse is a bad --device value: usage. */
        return rc == HG_EINVAL ? SCENE_EXIT_USAGE : SCENE_EXIT_RUNTIME;
    }
    scene_case *c = NULL;
    hg_err err;
    err_clear(&err);
    rc = scene_case_make(o->scene, o->params, &c, &err);
    if (rc != 0) {
        fprintf(o->err, "hostgraph: scene '%s': %s\n", o->scene->name,
                *err.msg ? err.msg : hg_strerror(rc));
        hg_device_close(dev);
        return SCENE_EXIT_RUNTIME;
    }
    rc = scene_run_case(o, dev, c);
    scene_case_destroy(c);
    hg_device_close(dev);
    return rc;
}
