/*
 * runner.c: the scene runner, a scene's case run for N rounds.
 *
 * Every round must produce the same golden-correct result, so before each
 * round the OUT and INOUT host buffers are restored to the contents they had
 * when the case was made, through hg_hostbuf_write (which bumps their
 * generation, as any user write between rounds would).  Without the restore
 * an INOUT like bgemm's C would accumulate round after round.  Round 1
 * restores them whole; later rounds write back only the ranges the previous
 * round copied back (hg_runner_copied_back): nothing else changed, so a
 * resident copy then uploads about what the graph wrote, not the buffer.
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
bool scene_output_writable(const char *path, char *why, size_t whylen)
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

int scene_check_outputs(FILE *err, const char *first, const char *first_what, const char *second,
                        const char *second_what)
{
    const char *paths[2] = {first, second}, *what[2] = {first_what, second_what};
    char why[4200];
    if (first != NULL && second != NULL && strcmp(first, second) == 0) {
        fprintf(err, "hostgraph: the %s and the %s both name '%s'\n", first_what, second_what,
                first);
        return SCENE_EXIT_USAGE;
    }
    for (int i = 0; i < 2; i++) {
        if (paths[i] != NULL && !scene_output_writable(paths[i], why, sizeof why)) {
            fprintf(err, "hostgraph: cannot write %s '%s': %s\n", what[i], paths[i], why);
            return SCENE_EXIT_USAGE;
        }
    }
    return 0;
}

/* The --json and --trace paths, before any round runs. */
static int check_output_paths(const scene_run_opts *o)
{
    return scene_check_outputs(o->err, o->json_path, "JSON report", o->trace_path, "trace");
}

void scene_snapshot_free(scene_snapshot *s)
{
    for (uint32_t i = 0; i < SCENE_MAX_ARGS; i++) {
        free(s->bytes[i]);
        free(s->changed[i]);
    }
    memset(s, 0, sizeof *s);
}

static bool is_output(const hg_arg *a)
{
    return a->dir == HG_OUT || a->dir == HG_INOUT;
}

int scene_snapshot_take(scene_snapshot *s, const scene_case *c)
{
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (!is_output(&c->args[i]))
            continue;
        size_t bytes = hg_hostbuf_size(c->args[i].tensor.host);
        s->bytes[i] = malloc(bytes > 0 ? bytes : 1);
        if (s->bytes[i] == NULL) {
            scene_snapshot_free(s);
            return HG_ENOMEM;
        }
        memcpy(s->bytes[i], hg_hostbuf_data(c->args[i].tensor.host), bytes);
    }
    return 0;
}

int scene_snapshot_restore(const scene_snapshot *s, scene_case *c)
{
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (s->bytes[i] == NULL)
            continue;
        hg_hostbuf *hb = c->args[i].tensor.host;
        int rc = hg_hostbuf_write(hb, 0, s->bytes[i], hg_hostbuf_size(hb));
        if (rc != 0)
            return rc;
    }
    return 0;
}

int scene_snapshot_note_run(scene_snapshot *s, const scene_case *c, const hg_runner *r)
{
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (s->bytes[i] == NULL)
            continue;
        size_t n = 0;
        int rc = hg_runner_copied_back(r, i, s->changed[i], s->cap_changed[i], &n);
        if (rc == HG_ERANGE) {
            hg_range *grown = realloc(s->changed[i], n * sizeof *grown);
            if (grown == NULL)
                return HG_ENOMEM;
            s->changed[i] = grown;
            s->cap_changed[i] = n;
            rc = hg_runner_copied_back(r, i, s->changed[i], s->cap_changed[i], &n);
        }
        if (rc != 0)
            return rc;
        s->nchanged[i] = n;
    }
    s->noted = true;
    return 0;
}

int scene_snapshot_restore_changed(scene_snapshot *s, scene_case *c)
{
    if (!s->noted)
        return scene_snapshot_restore(s, c);
    for (uint32_t i = 0; i < c->nargs; i++) {
        for (size_t k = 0; s->bytes[i] != NULL && k < s->nchanged[i]; k++) {
            const hg_range *r = &s->changed[i][k];
            int rc = hg_hostbuf_write(c->args[i].tensor.host, r->lo,
                                      (const char *)s->bytes[i] + r->lo, r->hi - r->lo);
            if (rc != 0)
                return rc;
        }
        s->nchanged[i] = 0;
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
    hg_runner *runner;
    scene_progress *progress; /* NULL unless a terminal watches */
    scene_snapshot initial;
    scene_mode_args mode; /* the args each round runs with */
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
        int rc = scene_snapshot_restore_changed(&l->initial, c);
        if (rc != 0) {
            fprintf(o->err, "hostgraph: round %u: cannot restore outputs: %s\n", i + 1,
                    hg_strerror(rc));
            return SCENE_EXIT_RUNTIME;
        }
        scene_progress_round(l->progress, i + 1);
        rc = hg_runner_run(l->runner, &c->callable, l->mode.args, c->nargs, &sr->stats);
        scene_progress_round(l->progress, 0);
        if (rc == 0 && scene_snapshot_note_run(&l->initial, c, l->runner) != 0) {
            fprintf(o->err, "hostgraph: round %u: out of host memory\n", i + 1);
            return SCENE_EXIT_RUNTIME;
        }
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

/* Prepares the mode's args on a new runner (pin uploads here, timed as
 * setup), runs the rounds, and fills rep (its rounds point into `rounds`,
 * which the caller owns).  Returns 0, SCENE_EXIT_GOLDEN or
 * SCENE_EXIT_RUNTIME (after one line on o->err). */
int scene_run_rounds(const scene_run_opts *o, hg_device *dev, scene_case *c, hg_trace *trace,
                     scene_round *rounds, scene_report *rep)
{
    round_loop l = {.rounds = rounds};
    hg_err err;
    err_clear(&err);
    int rc = SCENE_EXIT_RUNTIME;
    if (scene_snapshot_take(&l.initial, c) != 0) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        return rc;
    }
    int hrc = hg_runner_open(dev, &l.runner);
    if (hrc != 0) {
        fprintf(o->err, "hostgraph: cannot open a runner: %s\n", hg_strerror(hrc));
    } else if ((hrc = scene_mode_prepare(&l.mode, c, o->residency, dev, &err)) != 0) {
        fprintf(o->err, "hostgraph: %s\n", *err.msg ? err.msg : hg_strerror(hrc));
    } else {
        hg_runner_set_trace(l.runner, trace);
        hg_runner_set_verify(l.runner, o->verify);
        if (!o->quiet && o->residency == SCENE_RESIDENCY_PIN)
            fprintf(o->out, "setup: %.3f ms, %llu bytes host -> device (pinned IN args)\n",
                    (double)l.mode.setup_ns / 1e6, (unsigned long long)l.mode.setup_h2d_bytes);
        l.progress = scene_progress_start(o, l.runner);
        rc = run_rounds(o, c, &l);
        scene_progress_stop(l.progress);
        if (rc == 0)
            rc = l.golden_failed ? SCENE_EXIT_GOLDEN : SCENE_EXIT_OK;
    }
    /* Free the pinned buffers after the rounds, as the reference did. */
    scene_mode_release(&l.mode, dev);
    hg_runner_close(l.runner);
    scene_snapshot_free(&l.initial);
    *rep = (scene_report){.scene = o->scene,
                          .params = o->params,
                          .device = hg_device_spec(dev),
                          .residency = o->residency,
                          .verify = o->verify,
                          .rounds = rounds,
                          .nrounds = l.done,
                          .setup_ms = (double)l.mode.setup_ns / 1e6,
                          .setup_h2d_bytes = l.mode.setup_h2d_bytes};
    scene_report_summarize(rep);
    return rc;
}

int scene_run_case(const scene_run_opts *o, hg_device *dev, scene_case *c)
{
    const uint64_t start_ns = o->start_ns != 0 ? o->start_ns : clock_now_ns();
    hg_trace *trace = NULL;
    int rc = check_output_paths(o);
    if (rc != 0)
        return rc;
    scene_round *rounds = calloc(o->rounds > 0 ? o->rounds : 1, sizeof *rounds);
    if (rounds == NULL || (o->trace_path != NULL && hg_trace_create(&trace) != 0)) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        free(rounds);
        return SCENE_EXIT_RUNTIME;
    }
    scene_report rep;
    rc = scene_run_rounds(o, dev, c, trace, rounds, &rep);
    /* A failed round still leaves its trace: the spans up to the failure are
     * what a user debugging it wants.  The JSON report has no form for a
     * round that did not finish, so it is written only after all rounds. */
    if (trace != NULL && hg_trace_write_json(trace, o->trace_path) != 0) {
        fprintf(o->err, "hostgraph: cannot write trace '%s'\n", o->trace_path);
        rc = SCENE_EXIT_RUNTIME;
    }
    if (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_GOLDEN) {
        rep.overall_ms = (double)(clock_now_ns() - start_ns) / 1e6;
        scene_report_print_summary(o->out, &rep);
        if (o->json_path != NULL && scene_report_write_json(&rep, o->json_path) != 0) {
            fprintf(o->err, "hostgraph: cannot write JSON report '%s'\n", o->json_path);
            rc = SCENE_EXIT_RUNTIME;
        }
    }
    if (trace != NULL)
        hg_trace_destroy(trace);
    free(rounds);
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
        /* Params that do not fit together (a context past the rope table, a
         * layer count the host cannot hold) are bad command-line values. */
        return rc == HG_EINVAL || rc == HG_ERANGE ? SCENE_EXIT_USAGE : SCENE_EXIT_RUNTIME;
    }
    rc = scene_run_case(o, dev, c);
    scene_case_destroy(c);
    hg_device_close(dev);
    return rc;
}
