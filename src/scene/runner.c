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
 * opened or any round runs by opening its temporary file, one line naming the
 * flag, the path and the OS error; nothing is left behind), 3
 * a runtime error (one line on o->err; the remaining rounds are not run; the
 * trace and the JSON report are still written, the JSON with the rounds that
 * completed and "error"; a file that fails to write only after the rounds is
 * a runtime error too).
 *
 * With o->tp (one rank of `run --tp N`) the case is this rank's share and
 * every runner is attached to the ranks; the points where the ranks must
 * agree (each setup step, each round's end, the report) are tp.c's.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/trace.h"
#include "scene/report.h"
#include "scene/scene.h"

int scene_outputs_open(scene_outputs *so, FILE *err, const char *json, const char *trace,
                       const char *svg)
{
    const char *paths[3] = {json, trace, svg};
    static const char *const flags[3] = {"--json", "--trace", "--svg"};
    outfile *files[3] = {&so->json, &so->trace, &so->svg};
    char why[512];
    memset(so, 0, sizeof *so);
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < i; k++) {
            if (paths[i] != NULL && paths[k] != NULL && strcmp(paths[i], paths[k]) == 0) {
                fprintf(err, "hostgraph: %s and %s both name '%s'\n", flags[k], flags[i], paths[i]);
                scene_outputs_abort(so);
                return SCENE_EXIT_USAGE;
            }
        }
        if (paths[i] != NULL && outfile_open(files[i], paths[i], why, sizeof why) != 0) {
            fprintf(err, "hostgraph: %s '%s': %s\n", flags[i], paths[i], why);
            scene_outputs_abort(so);
            return SCENE_EXIT_USAGE;
        }
    }
    return 0;
}

int scene_output_commit(outfile *of, FILE *err, const char *flag, const char *path)
{
    char why[512];
    if (of->f == NULL)
        return 0;
    if (outfile_commit(of, why, sizeof why) == 0)
        return 0;
    fprintf(err, "hostgraph: cannot write %s '%s': %s\n", flag, path, why);
    return SCENE_EXIT_RUNTIME;
}

void scene_outputs_abort(scene_outputs *so)
{
    outfile_abort(&so->json);
    outfile_abort(&so->trace);
    outfile_abort(&so->svg);
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
        sr->golden = sr->own_golden = "skipped";
        return true;
    }
    bool pass = scene_case_check(c, &res);
    sr->golden = sr->own_golden = pass ? "pass" : "fail";
    char rank[32] = "";
    if (scene_tp_on(o->tp))
        snprintf(rank, sizeof rank, "rank %u: ", o->tp->rank);
    if (!pass) {
        char line[HG_ERR_MSG_MAX];
        scene_check_describe(&res, line, sizeof line);
        fprintf(o->err, "hostgraph: %sround %u: %s\n", rank, round, line);
    }
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
    bool interrupted;   /* o->cancel stopped the rounds */
    bool stop;          /* --tp: the ranks agreed to stop after the last round */
    bool mute;          /* --tp, rank > 0: an error every rank has is printed by rank 0 */
    const char *device; /* the device's normalized spec, for messages */
    hg_err fail;        /* the runtime error that stopped the rounds (the JSON's "error") */
    uint64_t golden_ns; /* the golden checks, together */
} round_loop;

/* Appends to msg, when the --device spec injects faults of the kind that
 * failed (fail_alloc= an allocation, fail_copy= or fail_complete= a copy),
 * that the fault was injected: "out of device memory" alone sends a user
 * looking for memory that was never short.  The normalized spec drops these
 * keys, so this reads the spec as given. */
static void note_injected(char *msg, size_t len, int code, const char *spec)
{
    static const struct {
        const char *key;
        int code;
    } faults[] = {
        {"fail_alloc=", HG_EDEVMEM}, {"fail_copy=", HG_ECOPY}, {"fail_complete=", HG_ECOPY}};
    for (size_t i = 0; spec != NULL && i < sizeof faults / sizeof faults[0]; i++) {
        const char *at = strstr(spec, faults[i].key);
        if (code != faults[i].code || at == NULL || (at != spec && strchr(":,", at[-1]) == NULL))
            continue;
        size_t used = strlen(msg);
        snprintf(msg + used, len - used, " (an injected fault: %.*s in --device '%s')",
                 (int)strcspn(at, ","), at, spec);
        return;
    }
}

/* Records a runtime error for the report and prints it as one line.
 * Returns SCENE_EXIT_RUNTIME. */
static int loop_fail(const scene_run_opts *o, round_loop *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int loop_fail(const scene_run_opts *o, round_loop *l, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->fail.msg, sizeof l->fail.msg, fmt, ap);
    va_end(ap);
    l->fail.code = code;
    const char *mem = l->device != NULL ? strstr(l->device, "mem=") : NULL;
    if (code == HG_EDEVMEM && mem != NULL) {
        /* The user's own mem= is the likely cause: say so. */
        size_t used = strlen(l->fail.msg);
        snprintf(l->fail.msg + used, sizeof l->fail.msg - used, " (device '%s': %.*s bytes)",
                 l->device, (int)strcspn(mem, ","), mem);
    }
    note_injected(l->fail.msg, sizeof l->fail.msg, code, o->device_spec);
    if (!l->mute)
        fprintf(o->err, "hostgraph: %s\n", l->fail.msg);
    return SCENE_EXIT_RUNTIME;
}

/* Runs the rounds; returns 0 or SCENE_EXIT_RUNTIME after printing why. */
static int run_rounds(const scene_run_opts *o, scene_case *c, round_loop *l)
{
    if (!o->quiet)
        scene_report_print_header_replay(o->out, o->replay);
    for (uint32_t i = 0; i < o->rounds; i++) {
        scene_round *sr = &l->rounds[i];
        /* --tp: only the ranks' agreement at a round's end stops them, so
         * every rank runs the same rounds. */
        if (scene_tp_on(o->tp) ? l->stop : scene_cancel_requested(o->cancel)) {
            l->interrupted = true;
            return 0;
        }
        int rc = scene_snapshot_restore_changed(&l->initial, c);
        if (rc != 0)
            return loop_fail(o, l, rc, "round %u: cannot restore outputs: %s", i + 1,
                             hg_strerror(rc));
        scene_progress_round(l->progress, i + 1);
        rc = hg_runner_run(l->runner, &c->callable, l->mode.args, c->nargs, &sr->stats);
        if (rc != 0 || o->skip_golden)
            scene_progress_round(l->progress, 0);
        if (rc == 0 && scene_snapshot_note_run(&l->initial, c, l->runner) != 0)
            return loop_fail(o, l, HG_ENOMEM, "round %u: out of host memory", i + 1);
        /* The second request: this round is dropped (--tp: on every rank,
         * whichever rank the request reached; the ranks agreed on the code). */
        if (rc == HG_ECANCELED && (scene_tp_on(o->tp) || scene_cancel_requested(o->cancel))) {
            l->interrupted = true;
            return 0;
        }
        if (rc != 0) {
            /* --tp: every rank failed this round with the same message. */
            l->mute = scene_tp_on(o->tp) && o->tp->rank != 0;
            const char *msg = hg_runner_errmsg(l->runner);
            return loop_fail(o, l, rc, "round %u: %s", i + 1, *msg ? msg : hg_strerror(rc));
        }
        const uint64_t check_start = clock_now_ns();
        scene_progress_phase(l->progress, o->skip_golden ? NULL : "checking golden");
        bool pass = check_round(o, c, i + 1, sr);
        l->golden_ns += clock_now_ns() - check_start;
        scene_progress_phase(l->progress, NULL);
        scene_progress_round(l->progress, 0);
        l->done = i + 1;
        if (o->on_round != NULL)
            o->on_round(o->on_round_user, i + 1, c, &sr->stats);
        /* --tp: a stop requested up to here stops every rank after this round. */
        if (scene_tp_round_end(o, pass, &pass, &l->stop) != 0)
            return loop_fail(o, l, HG_EIO, "round %u: the ranks could not agree", i + 1);
        if (!pass)
            l->golden_failed = true;
        if (!pass && !o->skip_golden)
            sr->golden = "fail"; /* --tp: some rank's golden failed */
        if (!o->quiet)
            scene_report_print_row_replay(o->out, i + 1, sr, o->replay);
    }
    return 0;
}

/* --tp: once every rank has its runner and mode args, attaches each runner
 * to the ranks (a collective), and agrees again.  Returns 0 when every rank
 * is ready; otherwise every rank returns non-zero, l->fail saying why. */
static int tp_attach(const scene_run_opts *o, round_loop *l, int setup_rc, bool *attached)
{
    *attached = false;
    if (!scene_tp_on(o->tp))
        return setup_rc;
    if (scene_tp_agree(o, setup_rc != 0 ? SCENE_EXIT_RUNTIME : SCENE_EXIT_OK) != 0) {
        if (setup_rc == 0)
            err_set(&l->fail, HG_EIO, "another rank could not set up its runner");
        return SCENE_EXIT_RUNTIME;
    }
    hg_err err;
    err_clear(&err);
    int rc = o->tp->attach(o->tp->user, l->runner, &err);
    if (rc != 0)
        loop_fail(o, l, rc, "rank %u: cannot attach the runner to the ranks: %s", o->tp->rank,
                  *err.msg ? err.msg : hg_strerror(rc));
    *attached = rc == 0;
    /* A rank whose attach failed is past help (MPI failed); the others stay
     * attached rather than wait in a detach it will not make. */
    if (scene_tp_agree(o, rc != 0 ? SCENE_EXIT_RUNTIME : SCENE_EXIT_OK) != 0) {
        if (rc == 0)
            err_set(&l->fail, HG_EIO, "another rank could not attach its runner");
        *attached = false;
        return SCENE_EXIT_RUNTIME;
    }
    return 0;
}

/* Prepares the mode's args on a new runner (pin uploads here, timed as
 * setup), runs the rounds, and fills rep (its rounds point into `rounds`,
 * which the caller owns).  Returns 0, SCENE_EXIT_GOLDEN,
 * SCENE_EXIT_INTERRUPTED (o->cancel stopped it: rep has the rounds done) or
 * SCENE_EXIT_RUNTIME (after one line on o->err). */
int scene_run_rounds(const scene_run_opts *o, hg_device *dev, scene_case *c, hg_trace *trace,
                     scene_round *rounds, scene_report *rep)
{
    round_loop l = {.rounds = rounds, .device = hg_device_spec(dev)};
    hg_err err;
    err_clear(&err);
    err_clear(&l.fail);
    int rc = SCENE_EXIT_RUNTIME;
    memset(rep, 0, sizeof *rep);
    if (scene_snapshot_take(&l.initial, c) != 0) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        return rc;
    }
    bool attached = false;
    int hrc = hg_runner_open(dev, &l.runner);
    if (hrc != 0)
        loop_fail(o, &l, hrc, "cannot open a runner: %s", hg_strerror(hrc));
    else if ((hrc = scene_mode_prepare(&l.mode, c, o->residency, dev, &err)) != 0)
        loop_fail(o, &l, hrc, "%s", *err.msg ? err.msg : hg_strerror(hrc));
    if (tp_attach(o, &l, hrc, &attached) == 0) {
        hg_runner_set_trace(l.runner, trace);
        hg_runner_set_verify(l.runner, o->verify);
        hg_runner_set_replay(l.runner, o->replay);
        if (!o->quiet && o->residency == SCENE_RESIDENCY_PIN)
            fprintf(o->out, "setup: %.3f ms, %llu bytes host -> device (pinned IN args)\n",
                    (double)l.mode.setup_ns / 1e6, (unsigned long long)l.mode.setup_h2d_bytes);
        l.progress = scene_progress_start(o, l.runner);
        scene_cancel_attach(o->cancel, l.runner);
        rc = run_rounds(o, c, &l);
        scene_cancel_attach(o->cancel, NULL);
        scene_progress_stop(l.progress);
        if (rc == 0)
            rc = l.interrupted     ? SCENE_EXIT_INTERRUPTED
                 : l.golden_failed ? SCENE_EXIT_GOLDEN
                                   : SCENE_EXIT_OK;
    }
    if (attached)
        o->tp->detach(o->tp->user);
    /* Free the pinned buffers after the rounds, as the reference did. */
    scene_mode_release(&l.mode, dev);
    hg_runner_close(l.runner);
    scene_snapshot_free(&l.initial);
    *rep = (scene_report){.scene = o->scene,
                          .params = c->params, /* resolved: what ran */
                          .device = hg_device_spec(dev),
                          .residency = o->residency,
                          .verify = o->verify,
                          .replay = o->replay,
                          .rounds = rounds,
                          .nrounds = l.done,
                          .setup_ms = (double)l.mode.setup_ns / 1e6,
                          .setup_h2d_bytes = l.mode.setup_h2d_bytes,
                          .golden_ms = (double)l.golden_ns / 1e6,
                          .interrupted = l.interrupted,
                          .error = l.fail};
    scene_report_summarize(rep);
    rep->repeat = 1;
    rep->later = scene_spread_of(&rep->later_avg_ms, 1);
    return rc;
}

/* Runs the rounds and writes the summary and the files opened in outs
 * (which it closes). */
static int run_case_into(const scene_run_opts *o, hg_device *dev, scene_case *c,
                         scene_outputs *outs, double case_ms)
{
    const uint64_t start_ns = o->start_ns != 0 ? o->start_ns : clock_now_ns();
    hg_trace *trace = NULL;
    scene_round *rounds = calloc(o->rounds > 0 ? o->rounds : 1, sizeof *rounds);
    if (rounds == NULL || (outs->trace.f != NULL && hg_trace_create(&trace) != 0)) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        free(rounds);
        scene_outputs_abort(outs);
        return SCENE_EXIT_RUNTIME;
    }
    scene_report rep;
    int rc = scene_run_repeats(o, dev, c, trace, rounds, &rep);
    rep.case_ms = case_ms;
    if (scene_tp_gather(o, &rep) != 0)
        rc = SCENE_EXIT_RUNTIME;
    /* A failed round still leaves its trace: the spans up to the failure are
     * what a user debugging it wants. */
    if (trace != NULL) {
        trace_write(trace, outs->trace.f);
        if (scene_output_commit(&outs->trace, o->err, "--trace", o->trace_path) != 0)
            rc = SCENE_EXIT_RUNTIME;
    }
    rep.overall_ms = (double)(clock_now_ns() - start_ns) / 1e6;
    if (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_GOLDEN || rc == SCENE_EXIT_INTERRUPTED)
        scene_report_print_summary(o->out, &rep);
    /* A failed run still writes its report: the rounds that completed and
     * the error, so CI has something machine-readable. */
    if (rep.scene != NULL) {
        if (outs->json.f != NULL) {
            scene_report_write_object(outs->json.f, &rep, 0);
            fputc('\n', outs->json.f);
            if (scene_output_commit(&outs->json, o->err, "--json", o->json_path) != 0)
                rc = SCENE_EXIT_RUNTIME;
        }
    }
    scene_outputs_abort(outs); /* what was not written: no file appears */
    scene_tp_free_ranks(&rep);
    if (trace != NULL)
        hg_trace_destroy(trace);
    free(rounds);
    return rc;
}

int scene_run_case(const scene_run_opts *o, hg_device *dev, scene_case *c)
{
    scene_outputs outs;
    int rc = scene_outputs_open(&outs, o->err, o->json_path, o->trace_path, NULL);
    return rc != 0 ? rc : run_case_into(o, dev, c, &outs, 0.0);
}

/* A test hook (tests/cli/interrupt_test.sh): with HG_TEST_HOLD_CASE=1 in
 * the environment, the command stays in its case-making phase, after one
 * line on o->err, until a stop request comes (at most a minute), as a case
 * that takes long to make would: a test then interrupts it there without
 * guessing how long a real case takes. */
static void hold_case_for_test(const scene_run_opts *o)
{
    const char *hold = getenv("HG_TEST_HOLD_CASE");
    if (hold == NULL || strcmp(hold, "1") != 0 || o->cancel == NULL)
        return;
    fprintf(o->err, "hostgraph: HG_TEST_HOLD_CASE: making the case until a stop request\n");
    for (int i = 0; i < 6000 && !scene_cancel_requested(o->cancel); i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
}

/* Opens the device and makes the case (--tp: this rank's share): 0, or
 * the exit code after one line on o->err. */
static int open_and_make(const scene_run_opts *o, hg_device **dev, scene_case **c, double *case_ms)
{
    char spec[SCENE_SPEC_MAX];
    if (scene_device_spec_for_rank(o, spec, sizeof spec) != 0) {
        fprintf(o->err, "hostgraph: --device '%s' is longer than %d bytes with {rank} filled in\n",
                o->device_spec, SCENE_SPEC_MAX - 1);
        return SCENE_EXIT_USAGE;
    }
    char msg[512] = "";
    if (scene_device_spec_check(spec, msg, sizeof msg) != 0) {
        fprintf(o->err, "hostgraph: %s\n", msg);
        return SCENE_EXIT_USAGE;
    }
    int rc = hg_device_open(spec, dev, msg, sizeof msg);
    if (rc != 0) {
        if (*msg != '\0')
            fprintf(o->err, "hostgraph: %s\n", msg);
        else
            fprintf(o->err, "hostgraph: cannot open device '%s'\n", spec);
        return scene_device_open_exit(rc);
    }
    hg_err err;
    err_clear(&err);
    scene_progress *progress = scene_progress_start(o, NULL);
    scene_progress_phase(progress, "making the case");
    const uint64_t case_start = clock_now_ns();
    rc = scene_case_make_tp(o->scene, o->params, o->tp, c, &err);
    if (rc == 0)
        hold_case_for_test(o);
    *case_ms = (double)(clock_now_ns() - case_start) / 1e6;
    scene_progress_stop(progress);
    if (rc == 0)
        return 0;
    fprintf(o->err, "hostgraph: scene '%s': %s\n", o->scene->name,
            *err.msg ? err.msg : hg_strerror(rc));
    /* Params that do not fit together (a context past the rope table, a
     * layer count the host cannot hold) are bad command-line values. */
    return rc == HG_EINVAL || rc == HG_ERANGE ? SCENE_EXIT_USAGE : SCENE_EXIT_RUNTIME;
}

int scene_device_spec_check(const char *spec, char *msg, size_t len)
{
    /* The sim's cube= or vector= alone means 0 cores of the other type (the
     * library's contract, hostgraph.h): a scene's kernels of that type then
     * fail at round 1.  The command asks for both. */
    bool cube = false, vector = false;
    const char *colon = spec != NULL && strncmp(spec, "sim:", 4) == 0 ? spec + 3 : NULL;
    for (const char *k = colon; k != NULL; k = strchr(k + 1, ',')) {
        cube = cube || strncmp(k + 1, "cube=", 5) == 0;
        vector = vector || strncmp(k + 1, "vector=", 7) == 0;
    }
    if (cube == vector)
        return 0;
    const char *key = strstr(spec, cube ? "cube=" : "vector=");
    snprintf(msg, len,
             "--device '%s': %.*s without %s= would give the sim no %s core, and the scene's "
             "%s kernels would fail at round 1: give both (sim:cube=C,vector=V; 0 for none)",
             spec, (int)strcspn(key, ","), key, cube ? "vector" : "cube", cube ? "vector" : "cube",
             cube ? "vector" : "cube");
    return SCENE_EXIT_USAGE;
}

int scene_device_open_exit(int rc)
{
    return rc == HG_EINVAL || rc == HG_ENOTFOUND ? SCENE_EXIT_USAGE : SCENE_EXIT_RUNTIME;
}

int scene_run(const scene_run_opts *o)
{
    hg_device *dev = NULL;
    scene_case *c = NULL;
    double case_ms = 0.0;
    scene_outputs outs; /* opened before the case is made: that can take a while */
    /* --tp: each step agreed, so a rank that fails one stops every rank. */
    int rc =
        scene_tp_agree(o, scene_outputs_open(&outs, o->err, o->json_path, o->trace_path, NULL));
    if (rc != 0) {
        scene_outputs_abort(&outs); /* another rank's failure: this rank's files */
        return rc;
    }
    rc = scene_tp_agree(o, open_and_make(o, &dev, &c, &case_ms));
    if (rc == 0)
        rc = run_case_into(o, dev, c, &outs, case_ms);
    else
        scene_outputs_abort(&outs);
    scene_case_destroy(c);
    hg_device_close(dev);
    return rc;
}
