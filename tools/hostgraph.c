/*
 * hostgraph.c: the `hostgraph` command.  Argument parsing only: scenes, the
 * scene runner and the reports live in src/scene.
 *
 * Exit codes (issue 2's contract): 0 every round's golden passed or was
 * skipped, 1 a golden check failed, 2 a usage error (a --json or --trace path
 * that cannot be written is one, found before any round runs; so is a
 * --device spec that is malformed or names a device this machine lacks, on
 * every backend: scene_device_open_exit), 3 a runtime error, 130 stopped by
 * SIGINT or SIGTERM.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "device/device.h"
#include "scene/scene.h"
#ifdef HG_HAVE_MPI
#include <mpi.h>

#include "hostgraph_tp.h"
#endif

static const char usage_text[] =
    "usage: hostgraph list [SCENE]\n"
    "       hostgraph devices\n"
    "       hostgraph run SCENE [--rounds N] [--repeat N] [--warmup N]\n"
    "                 [--residency off|pin|in|all] [--verify] [--replay] [--skip-golden]\n"
    "                 [--param KEY=VALUE]... [--device SPEC] [--json FILE] [--trace FILE]\n"
    "                 [--quiet] [-v] [--tp N]\n"
    "       hostgraph compare SCENE [--rounds N] [--repeat N] [--warmup N] [--verify]\n"
    "                 [--replay] [--skip-golden] [--param KEY=VALUE]... [--device SPEC] [--json "
    "FILE]\n"
    "                 [--svg FILE] [-v]\n"
    "       hostgraph --help\n"
    "       hostgraph --version\n";

static const char list_help_text[] =
    "usage: hostgraph list [SCENE]\n"
    "\n"
    "Without SCENE, prints one line per scene: its name, what it computes, and its params\n"
    "with their defaults, as KEY=VALUE.  A param whose 0 means \"the preset's value\"\n"
    "shows as KEY=preset.  With SCENE, prints that scene and, per param, its default, its\n"
    "range (or its names) and what it sets.\n";

static const char run_help_text[] =
    "Runs SCENE for N rounds on a device and prints a row per round and a summary.\n"
    "\n"
    "  --rounds N          rounds to run (default 1; compare: default 5, at least 2)\n"
    "  --repeat N          run the rounds N times, each on a new runner (compare: on a\n"
    "                      fresh device per mode, interleaved; default 1, compare 3);\n"
    "                      the summary and the JSON give the median later-rounds average\n"
    "                      with its min-max spread\n"
    "  --warmup N          unreported rounds before them (default 0, compare 1)\n"
    "  --residency MODE    device copies across rounds (default off):\n"
    "                        off  every round stages every arg\n"
    "                        pin  the reference design: non-empty IN args the scene does not\n"
    "                             read on the host are copied once, before the rounds, to\n"
    "                             user device buffers (reported as setup)\n"
    "                        in   IN args stay on the device while unchanged\n"
    "                        all  IN and INOUT args stay coherent on the device\n"
    "  --verify            hash resident args' host bytes: a write that bypassed the API\n"
    "                      fails the round (HG_ESTALE) instead of using stale data\n"
    "  --replay            a later round replays the graph of the round before when nothing\n"
    "                      its orchestration read changed (checked; with --verify it also\n"
    "                      orchestrates and compares); the table gains a replayed column\n"
    "  --skip-golden       do not compare outputs with the golden reference\n"
    "  --param KEY=VALUE   set a scene param: an integer, or a name where the param has\n"
    "                      names (preset=real); repeatable\n"
    "  --device SPEC       where the rounds run (default sim; hostgraph devices lists them):\n"
    "                        sim, sim:cores=N or sim:cube=C,vector=V, plus mem=, link_gbps=\n"
    "                        opencl, opencl:platform=P,device=D, plus mem=, queues=N\n"
    "                      and on either fail_alloc=K, fail_copy=K (fault injection: the\n"
    "                      K-th allocation or copy fails); a malformed spec or a device\n"
    "                      this machine lacks is a usage error\n"
    "  --json FILE         write the per-round report as JSON\n"
    "  --trace FILE        write a Chrome trace-event JSON (opens in Perfetto)\n"
    "                      (both paths are checked before the first round)\n"
    "  --quiet             print only the summary line\n"
    "  -v, --verbose       show what the device's compiler says: each OpenCL program\n"
    "                      build's log, warnings included (HG_OPENCL_BUILD_LOG=1); without\n"
    "                      it programs build with warnings off and print nothing\n"
    "  --tp N              tensor-parallel over N MPI ranks, under mpirun -np N (needs\n"
    "                      MPI built in; qwen3_decode splits, N in 1, 2, 4, 8): each rank\n"
    "                      opens --device ({rank} in it: the rank's index on its host),\n"
    "                      holds 1/N of every layer and its KV cache;\n"
    "                      rank 0 prints the table and writes --json, with every rank's\n"
    "                      rounds under \"ranks\"; 1 (the default) runs without MPI\n"
    "\n"
    "Table columns: round, then wall, bind, orchestrate, execute, copy-back and release\n"
    "times (ms), bytes each way, replayed (with --replay: yes when the round ran the\n"
    "recorded graph), golden.  The summary: round 1's wall time, the mean of\n"
    "rounds 2..N (n/a with one round, null in JSON), and overall: the whole command from\n"
    "its start to the report, that is making the case (case, case_ms in JSON), opening\n"
    "the device, pin's setup (setup_ms), warm-up, every round with its restore and its\n"
    "golden check (golden, golden_ms), and the repeats.  A long round, making the case\n"
    "and checking golden show a progress line on a terminal.\n"
    "\n"
    "compare runs SCENE --repeat times per mode (off, pin, in, all, off, pin, ...), each\n"
    "run on a fresh device, and prints a row per mode: the median later-rounds average,\n"
    "its min-max spread, the change against off (negative means faster) and a verdict:\n"
    "faster or slower only when the spreads lie apart by more than the wider one, else\n"
    "within noise.  --json\n"
    "writes every mode's first report with the spread and verdict, --svg the wall time\n"
    "per round per mode.\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM stops after the current round (a second one stops the\n"
    "run in flight, a third exits at once), each acknowledged on stderr: the summary and\n"
    "the reports cover the rounds done, marked \"interrupted\" (a stop while the case\n"
    "is being made waits for it, then runs no round: first round n/a, first_ms null).\n"
    "\n"
    "Exit codes: 0 golden passed or skipped, 1 golden failed, 2 usage error (including a\n"
    "--json or --trace path that cannot be written, reported before any round runs),\n"
    "3 runtime error (the JSON report is still written, with \"error\"), 130 interrupted.\n";

/* Where a usage error points: the help of the command being parsed. */
static const char *help_hint = "hostgraph --help";

/* A usage error is its one line and where to look, not the whole usage. */
static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, "hostgraph: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nsee '%s'\n", help_hint);
    return SCENE_EXIT_USAGE;
}

static void print_params(FILE *f, const scene *s, bool verbose)
{
    for (uint32_t i = 0; i < s->nparams; i++) {
        const scene_param *p = &s->params[i];
        const char *def = scene_param_value_name(p, p->def);
        if (def == NULL && p->def == 0 && scene_param_zero_is_preset(p))
            def = "preset";
        if (!verbose) {
            if (def != NULL)
                fprintf(f, "%s%s=%s", i > 0 ? " " : "", p->name, def);
            else
                fprintf(f, "%s%s=%lld", i > 0 ? " " : "", p->name, (long long)p->def);
            continue;
        }
        if (p->values != NULL) {
            /* A named param takes its names only: list them, not a range. */
            fprintf(f, "    %-12s default %s, one of", p->name, def != NULL ? def : "?");
            for (const scene_param_value *v = p->values; v->name != NULL; v++)
                fprintf(f, "%s %s", v == p->values ? "" : ",", v->name);
            fprintf(f, ": %s\n", p->help);
        } else {
            fprintf(f, "    %-12s default %lld%s, range [%lld, %lld]: %s%s%s\n", p->name,
                    (long long)p->def, def != NULL ? " (the preset's)" : "", (long long)p->min,
                    (long long)p->max, p->help, p->alias ? "; also spelled " : "",
                    p->alias ? p->alias : "");
        }
    }
}

static int cmd_list(void)
{
    int width = 0;
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        int len = (int)strlen(scene_at(i)->name);
        width = len > width ? len : width;
    }
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        const scene *s = scene_at(i);
        printf("%-*s  %s  [", width, s->name, s->description);
        print_params(stdout, s, false);
        printf("]\n");
    }
    return 0;
}

/* `list SCENE`: the scene's line, then a line per param with its help. */
static int cmd_list_scene(const char *name)
{
    const scene *s = scene_find(name);
    if (s == NULL) {
        const scene *near = scene_suggest(name);
        char msg[512];
        snprintf(msg, sizeof msg, "unknown scene '%s'%s%s%s", name,
                 near != NULL ? "; did you mean '" : " (hostgraph list shows them)",
                 near != NULL ? near->name : "", near != NULL ? "'?" : "");
        return usage_error("%s", msg);
    }
    printf("%s: %s\nparams (--param KEY=VALUE):\n", s->name, s->description);
    print_params(stdout, s, true);
    return 0;
}

static int cmd_run_help(void)
{
    printf("%s\n%s\nScenes and their params:\n", usage_text, run_help_text);
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        printf("  %s: %s\n", scene_at(i)->name, scene_at(i)->description);
        print_params(stdout, scene_at(i), true);
    }
    return 0;
}

/* What `run` or `compare` was given, before the scene is known. */
typedef struct run_args {
    scene_run_opts opts;
    bool compare;
    const char *svg_path; /* compare only */
    const char *scene_name;
    const char *params[64];
    uint32_t nparams;
    uint32_t tp; /* --tp: ranks (1: no MPI at all) */
} run_args;

/* An integer in [lo, hi] into *out; false if text is not one. */
static bool parse_count(const char *text, long long lo, long long hi, uint32_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* --tp N.  N = 1 changes nothing (MPI is never initialised); N > 1 needs
 * libhostgraph_mpi (HG_HAVE_MPI, when CMake found MPI) and a scene that
 * splits, checked once the scene is known (tp_check). */
static int apply_tp(run_args *ra, const char *value)
{
    if (ra->compare)
        return usage_error("%s: only with run", "--tp");
    if (!parse_count(value, 1, 256, &ra->tp))
        return usage_error("--tp wants an integer from 1 to 256, not '%s'", value);
#ifndef HG_HAVE_MPI
    if (ra->tp > 1)
        return usage_error("--tp %s: MPI was not built in (reconfigure with Open MPI installed: "
                           "Debian openmpi-bin libopenmpi-dev); only --tp 1 runs",
                           value);
#endif
    return SCENE_EXIT_OK;
}

/* Whether a scene can split its work across --tp ranks: the scene says
 * (qwen3_decode does; docs/ARCHITECTURE.md, "The Qwen3 tensor-parallel
 * split"). */
static bool scene_splits(const scene *sc)
{
    return sc->splits;
}

/* Room for the MPI library's name (MPI_MAX_LIBRARY_VERSION_STRING is 256
 * in Open MPI; the name before its first comma is far shorter). */
#define HG_MPI_NAME_MAX 256

/* The MPI library the command was built with, up to its first comma
 * ("Open MPI v4.1.4"), or "none".  MPI_Get_library_version may be called
 * before MPI_Init (MPI 3.0), so this initialises nothing. */
static void mpi_library(char *out, size_t len)
{
#ifdef HG_HAVE_MPI
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(version, &n) == MPI_SUCCESS) {
        version[strcspn(version, ",\n")] = '\0';
        snprintf(out, len, "%s", version);
        return;
    }
#endif
    snprintf(out, len, "none");
}

/* After the scene is known: --tp N > 1 with a scene that cannot split is a
 * usage error, found before MPI would be initialised. */
static int tp_check(const run_args *ra)
{
    if (ra->tp <= 1 || scene_splits(ra->opts.scene))
        return SCENE_EXIT_OK;
    char msg[512], lib[HG_MPI_NAME_MAX];
    mpi_library(lib, sizeof lib);
    snprintf(msg, sizeof msg,
             "--tp %u: scene '%s' cannot split across ranks (qwen3_decode can; MPI built "
             "in: %s); run it with --tp 1",
             ra->tp, ra->opts.scene->name, lib);
    return usage_error("%s", msg);
}

/* Applies one flag that takes a value; returns SCENE_EXIT_OK or a usage error. */
static int apply_value_flag(run_args *ra, const char *flag, const char *value)
{
    scene_run_opts *o = &ra->opts;
    if (strcmp(flag, "--rounds") == 0) {
        if (!parse_count(value, ra->compare ? 2 : 1, 100000, &o->rounds))
            return usage_error(ra->compare ? "--rounds wants an integer from 2 to 100000 (at "
                                             "least 2: compare compares the later rounds), not '%s'"
                                           : "--rounds wants an integer from 1 to 100000, not '%s'",
                               value);
    } else if (strcmp(flag, "--repeat") == 0) {
        if (!parse_count(value, 1, SCENE_MAX_REPEAT, &o->repeat))
            return usage_error("--repeat wants an integer from 1 to 100, not '%s'", value);
    } else if (strcmp(flag, "--warmup") == 0) {
        if (!parse_count(value, 0, 100000, &o->warmup))
            return usage_error("--warmup wants an integer from 0 to 100000, not '%s'", value);
    } else if (strcmp(flag, "--residency") == 0) {
        if (scene_residency_parse(value, &o->residency) != 0)
            return usage_error("--residency '%s': want off, pin, in or all", value);
        if (ra->compare)
            return usage_error("%s: compare runs every mode", "--residency");
    } else if (strcmp(flag, "--param") == 0) {
        if (ra->nparams == sizeof ra->params / sizeof ra->params[0])
            return usage_error("too many --param flags (at '%s')", value);
        ra->params[ra->nparams++] = value;
    } else if (strcmp(flag, "--device") == 0) {
        o->device_spec = value;
    } else if (strcmp(flag, "--json") == 0) {
        o->json_path = value;
    } else if (strcmp(flag, "--trace") == 0) {
        if (ra->compare)
            return usage_error("%s: not with compare (use run --trace per mode)", "--trace");
        o->trace_path = value;
    } else if (strcmp(flag, "--tp") == 0) {
        return apply_tp(ra, value);
    } else if (strcmp(flag, "--svg") == 0) {
        if (!ra->compare)
            return usage_error("%s: only with compare", "--svg");
        ra->svg_path = value;
    } else {
        return usage_error("unknown flag '%s'", flag);
    }
    return SCENE_EXIT_OK;
}

static bool is_value_flag(const char *flag)
{
    static const char *const names[] = {"--rounds", "--residency", "--param",  "--device", "--json",
                                        "--trace",  "--svg",       "--repeat", "--warmup", "--tp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(flag, names[i]) == 0)
            return true;
    }
    return false;
}

/* Parses one argument at argv[*i] (advancing past a flag's value). */
static int parse_run_arg(run_args *ra, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    char flag[32];
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 && strcmp(arg, "-v") != 0) {
        if (ra->scene_name != NULL)
            return usage_error("unexpected argument '%s'", arg);
        ra->scene_name = arg;
    } else if (strcmp(arg, "--skip-golden") == 0) {
        ra->opts.skip_golden = true;
    } else if (strcmp(arg, "--quiet") == 0) {
        ra->opts.quiet = true;
    } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
        /* Read by the OpenCL backend at each program build (opencl_prog.c);
         * set while the command has one thread. */
        setenv("HG_OPENCL_BUILD_LOG", "1", 1);
    } else if (strcmp(arg, "--verify") == 0) {
        ra->opts.verify = true;
    } else if (strcmp(arg, "--replay") == 0) {
        ra->opts.replay = true;
    } else if (eq != NULL && (size_t)(eq - arg) < sizeof flag) {
        /* --flag=value */
        memcpy(flag, arg, (size_t)(eq - arg));
        flag[eq - arg] = '\0';
        return apply_value_flag(ra, flag, eq + 1);
    } else if (is_value_flag(arg)) {
        if (*i + 1 >= argc)
            return usage_error("%s needs a value", arg);
        *i += 1;
        return apply_value_flag(ra, arg, argv[*i]);
    } else {
        return usage_error("unknown flag '%s'", arg);
    }
    return SCENE_EXIT_OK;
}

static bool is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

/* SIGINT and SIGTERM are blocked in every thread (the device's core threads
 * inherit the mask) and taken here, by sigwait, on a thread of their own:
 * no handler runs in the middle of a table line or of a runner's close.  The
 * first asks the rounds to stop after the current one; the second cancels
 * the run in flight (between rounds, making the case or checking golden, the
 * command stops at its next check); a third exits at once, without reports. */
typedef struct signal_watch {
    sigset_t set;
    scene_cancel *cancel;
    atomic_bool mute; /* --tp, rank > 0: rank 0 says it */
} signal_watch;

/* Says at once, on stderr, what the key just did: a stop that waits for a
 * round (or for the case being made) must not look like an ignored key.
 * On a terminal the line first clears a progress line it would run into. */
static void acknowledge(const signal_watch *w, int sig, uint32_t n)
{
    const char *key = sig == SIGINT ? "Ctrl-C" : "SIGTERM";
    if (atomic_load(&w->mute) || n >= 3)
        return;
    fprintf(stderr, "%shostgraph: ", isatty(STDERR_FILENO) ? "\r\033[K" : "");
    if (n == 1)
        fprintf(stderr,
                "interrupted (%s): stopping before the next round; %s again stops the round in "
                "flight\n",
                key, key);
    else
        fprintf(stderr,
                "interrupted again (%s): stopping the round in flight; once more exits at once, "
                "without reports\n",
                key);
}

static void *watch_signals(void *arg)
{
    signal_watch *w = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&w->set, &sig) != 0)
            continue;
        uint32_t n = scene_cancel_request(w->cancel);
        if (n >= 3)
            _exit(SCENE_EXIT_INTERRUPTED);
        acknowledge(w, sig, n);
    }
    return NULL;
}

/* Starts the signal thread; false (signals keep their default action) if it
 * cannot. */
static bool catch_signals(signal_watch *w, scene_cancel *cancel)
{
    pthread_t thread;
    w->cancel = cancel;
    sigemptyset(&w->set);
    sigaddset(&w->set, SIGINT);
    sigaddset(&w->set, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &w->set, NULL) != 0)
        return false;
    if (pthread_create(&thread, NULL, watch_signals, w) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &w->set, NULL);
        return false;
    }
    pthread_detach(thread);
    return true;
}

/* --tp N > 1: MPI is initialised here and only here (after the signal
 * thread started, so MPI's threads inherit the blocked signals).  Rank 0
 * prints and writes the reports; the other ranks print only their own
 * errors. */
static int run_tp(run_args *ra, signal_watch *watch)
{
#ifdef HG_HAVE_MPI
    static tp_job job; /* the ranks' callbacks point into it during the run */
    int rc = tp_job_begin(&job, ra->tp, stderr);
    if (rc != SCENE_EXIT_OK)
        return rc;
    FILE *devnull = NULL;
    ra->opts.tp = &job.tp;
    if (job.tp.rank != 0) {
        atomic_store(&watch->mute, true);
        devnull = fopen("/dev/null", "w");
        ra->opts.out = devnull != NULL ? devnull : ra->opts.out;
        ra->opts.quiet = true;
        ra->opts.json_path = ra->opts.trace_path = NULL;
    }
    rc = scene_run(&ra->opts);
    tp_job_end(&job);
    if (devnull != NULL)
        fclose(devnull);
    return rc;
#else
    (void)ra;
    (void)watch;
    return SCENE_EXIT_USAGE; /* apply_tp refused it */
#endif
}

static int cmd_run(int argc, char **argv, uint64_t start_ns, bool compare)
{
    static signal_watch watch; /* the signal thread's: it outlives this call */
    static scene_cancel cancel;
    run_args ra = {.opts = {.rounds = compare ? SCENE_COMPARE_ROUNDS : 1,
                            .repeat = compare ? SCENE_COMPARE_REPEAT : 1,
                            .warmup = compare ? 1 : 0,
                            .start_ns = start_ns,
                            .out = stdout,
                            .err = stderr},
                   .compare = compare,
                   .tp = 1};
    bool flags_done = false; /* after "--", every argument is the scene */
    for (int i = 2; i < argc; i++) {
        int rc = SCENE_EXIT_OK;
        if (!flags_done && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0))
            return cmd_run_help();
        if (!flags_done && strcmp(argv[i], "--") == 0)
            flags_done = true;
        else if (flags_done && ra.scene_name != NULL)
            rc = usage_error("unexpected argument '%s'", argv[i]);
        else if (flags_done)
            ra.scene_name = argv[i];
        else
            rc = parse_run_arg(&ra, argc, argv, &i);
        if (rc != SCENE_EXIT_OK)
            return rc;
    }
    if (ra.scene_name == NULL)
        return usage_error("%s: which scene? (hostgraph list shows them)", argv[1]);
    ra.opts.scene = scene_find(ra.scene_name);
    if (ra.opts.scene == NULL) {
        const scene *near = scene_suggest(ra.scene_name);
        char msg[512];
        if (near != NULL)
            snprintf(msg, sizeof msg, "unknown scene '%s'; did you mean '%s'?", ra.scene_name,
                     near->name);
        else
            snprintf(msg, sizeof msg, "unknown scene '%s' (hostgraph list shows them)",
                     ra.scene_name);
        return usage_error("%s", msg);
    }
    scene_params_default(ra.opts.scene, ra.opts.params);
    for (uint32_t i = 0; i < ra.nparams; i++) {
        hg_err err;
        err_clear(&err);
        if (scene_param_set(ra.opts.scene, ra.opts.params, ra.params[i], &err) != 0)
            return usage_error("%s", err.msg);
    }
    int tprc = tp_check(&ra);
    if (tprc != SCENE_EXIT_OK)
        return tprc;
    /* A report on standard output moves the table to standard error. */
    if (is_stdout(ra.opts.json_path) || is_stdout(ra.opts.trace_path) || is_stdout(ra.svg_path))
        ra.opts.out = stderr;
    scene_cancel_init(&cancel);
    if (catch_signals(&watch, &cancel))
        ra.opts.cancel = &cancel;
    /* A table into a pipe or a file goes out a line at a time: an
     * interrupted or killed command never leaves half a row. */
    if (!isatty(fileno(stdout)))
        setvbuf(stdout, NULL, _IOLBF, 0);
    if (ra.tp > 1)
        return run_tp(&ra, &watch);
    return compare ? scene_compare(&ra.opts, ra.svg_path) : scene_run(&ra.opts);
}

int main(int argc, char **argv)
{
    uint64_t start_ns = clock_now_ns();
    if (argc < 2)
        return usage_error("%s", "no command given");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        printf("hostgraph %s: build task graphs on the host, run them on a device, round after "
               "round.\n\n%s\n%s",
               HG_VERSION, usage_text, run_help_text);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("hostgraph %s\n", HG_VERSION);
        return 0;
    }
    if (strcmp(cmd, "list") == 0) {
        help_hint = "hostgraph list --help";
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            fputs(list_help_text, stdout);
            return 0;
        }
        if (argc > 3)
            return usage_error("list takes one scene at most (got '%s')", argv[3]);
        return argc == 3 ? cmd_list_scene(argv[2]) : cmd_list();
    }
    if (strcmp(cmd, "devices") == 0) {
        if (argc > 2)
            return usage_error("devices takes no arguments (got '%s')", argv[2]);
        device_list(stdout);
        return 0;
    }
    if (strcmp(cmd, "run") == 0 || strcmp(cmd, "compare") == 0) {
        help_hint = strcmp(cmd, "run") == 0 ? "hostgraph run --help" : "hostgraph compare --help";
        return cmd_run(argc, argv, start_ns, strcmp(cmd, "compare") == 0);
    }
    return usage_error("unknown command '%s'", cmd);
}
