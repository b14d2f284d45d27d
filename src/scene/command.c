/*
 * command.c: the `hostgraph` command (list, devices, run, compare, help,
 * --help, --version) as a call of the scene library: hg_scene_command runs
 * it in the caller's process, and tools/hostgraph.c's main() runs the same
 * parser (scene_command_main), adding only the signal thread and --tp's MPI.
 * One parser, so the command and the in-process call cannot drift apart.
 *
 * Exit codes (issue 2's contract): 0 every round's golden passed or was
 * skipped, 1 a golden check failed, 2 a usage error (a --json or --trace path
 * that cannot be written is one, found before any round runs; so is a
 * --device spec that is malformed or names a device this machine lacks, on
 * every backend: scene_device_open_exit), 3 a runtime error, 130 stopped by
 * the cancel (the command's SIGINT or SIGTERM).
 *
 * Reentrant: a call's state (what it parsed, where a usage error points)
 * lives in a command_call on its own stack; nothing static is written.  What
 * is the process's by nature: a plugin that --scene-lib or HG_SCENE_PATH
 * loads stays loaded and registered (hg_scene_load: loading it again
 * registers nothing), and -v turns on the build logs of every later OpenCL
 * program build (device_build_log_on; the environment is never written).  A table on a pipe is
 * line-buffered by the command's main(), not here: a library must not change
 * its caller's stdout.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "device/device.h"
#include "scene/command.h"

/* One call: who is speaking and where a usage error points. */
typedef struct command_call {
    const char *prog;       /* argv[0]: the name in messages */
    const char *subcommand; /* "run", "compare", "list"; NULL: the command's own help */
    const scene_command_host *host;
} command_call;

/* A usage error is its one line and where to look, not the whole usage. */
__attribute__((format(printf, 2, 3))) static int usage_error(const command_call *cc,
                                                             const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cc->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cc->subcommand != NULL)
        fprintf(stderr, "\nsee '%s %s --help'\n", cc->prog, cc->subcommand);
    else
        fprintf(stderr, "\nsee '%s --help'\n", cc->prog);
    return SCENE_EXIT_USAGE;
}

/* "unknown scene 'x'" with the nearest name, as a usage error. */
static int unknown_scene(const command_call *cc, const char *name)
{
    const scene *near = scene_suggest(name);
    if (near != NULL)
        return usage_error(cc, "unknown scene '%s'; did you mean '%s'?", name, near->name);
    return usage_error(cc, "unknown scene '%s' (hostgraph list shows them)", name);
}

/* ------------------------------------------------------------ plugins */

static int add_scene_lib(const command_call *cc, scene_libs *libs, const char *path)
{
    if (libs->n == SCENE_COMMAND_MAX_LIBS)
        return usage_error(cc, "too many --scene-lib flags (at '%s'; %d at most)", path,
                           SCENE_COMMAND_MAX_LIBS);
    if (*path == '\0')
        return usage_error(cc, "%s", "--scene-lib wants a file, not ''");
    libs->paths[libs->n++] = path;
    return SCENE_EXIT_OK;
}

/* HG_SCENE_PATH's plugins, then libs': a failure is a usage error. */
static int load_scene_libs(const command_call *cc, const scene_libs *libs)
{
    char msg[1200];
    if (scene_libs_load(libs, msg, sizeof msg) != 0)
        return usage_error(cc, "%s", msg);
    return SCENE_EXIT_OK;
}

/* ------------------------------------------------------------------ list */

static void print_params(FILE *f, const scene *s, bool verbose)
{
    int w = 12; /* the names' column: as wide as the longest */
    for (uint32_t i = 0; i < s->nparams; i++) {
        int len = (int)strlen(s->params[i].name);
        w = len > w ? len : w;
    }
    for (uint32_t i = 0; i < s->nparams; i++) {
        const scene_param *p = &s->params[i];
        const char *help = p->help != NULL ? p->help : ""; /* a user's may give none */
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
            fprintf(f, "    %-*s default %s, one of", w, p->name, def != NULL ? def : "?");
            for (const scene_param_value *v = p->values; v->name != NULL; v++)
                fprintf(f, "%s %s", v == p->values ? "" : ",", v->name);
            fprintf(f, ": %s\n", help);
        } else {
            fprintf(f, "    %-*s default %lld%s, range [%lld, %lld]: %s%s%s\n", w, p->name,
                    (long long)p->def, def != NULL ? " (the preset's)" : "", (long long)p->min,
                    (long long)p->max, help, p->alias ? "; also spelled " : "",
                    p->alias ? p->alias : "");
        }
    }
}

/* Where a scene was defined (a plugin's file, a Python file and class),
 * after `lead`; nothing for a built-in one. */
static void print_origin(const scene *s, const char *lead)
{
    if (s->file == NULL)
        return;
    printf("%s%s%s%s", lead, s->file, s->cls != NULL ? "::" : "", s->cls != NULL ? s->cls : "");
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
        printf("]");
        print_origin(s, "  from ");
        printf("\n");
    }
    return SCENE_EXIT_OK;
}

/* `list SCENE`: the scene's line, then a line per param with its help. */
static int cmd_list_scene(const command_call *cc, const char *name)
{
    const scene *s = scene_find(name);
    if (s == NULL)
        return unknown_scene(cc, name);
    printf("%s: %s\n", s->name, s->description);
    print_origin(s, "defined in ");
    printf("%sparams (--param KEY=VALUE):\n", s->file != NULL ? "\n" : "");
    print_params(stdout, s, true);
    return SCENE_EXIT_OK;
}

static bool is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* `list [SCENE] [--scene-lib PATH]...` */
static int command_list(const command_call *cc, int argc, const char *const *argv)
{
    scene_libs libs = {.n = 0};
    const char *name = NULL;
    bool flags_done = false; /* after "--", every argument is the scene */
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        int rc = SCENE_EXIT_OK;
        if (!flags_done && is_help(arg)) {
            fputs(scene_command_list_help, stdout);
            return SCENE_EXIT_OK;
        } else if (!flags_done && strcmp(arg, "--") == 0) {
            flags_done = true;
        } else if (!flags_done && strcmp(arg, "--scene-lib") == 0) {
            if (i + 1 >= argc)
                return usage_error(cc, "%s needs a value", arg);
            rc = add_scene_lib(cc, &libs, argv[++i]);
        } else if (!flags_done && strncmp(arg, "--scene-lib=", 12) == 0) {
            rc = add_scene_lib(cc, &libs, arg + 12);
        } else if (!flags_done && arg[0] == '-' && arg[1] != '\0') {
            rc = usage_error(cc, "unknown flag '%s'", arg);
        } else if (name != NULL) {
            rc = usage_error(cc, "list takes one scene at most (got '%s')", arg);
        } else {
            name = arg;
        }
        if (rc != SCENE_EXIT_OK)
            return rc;
    }
    int rc = load_scene_libs(cc, &libs);
    if (rc != SCENE_EXIT_OK)
        return rc;
    return name != NULL ? cmd_list_scene(cc, name) : cmd_list();
}

/* ------------------------------------------------------------ run, compare */

static int cmd_run_help(void)
{
    printf("%s\n%s\nScenes and their params:\n", scene_command_usage, scene_command_run_help);
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        const scene *s = scene_at(i);
        printf("  %s: %s", s->name, s->description);
        print_origin(s, "  from ");
        printf("\n");
        print_params(stdout, s, true);
    }
    return SCENE_EXIT_OK;
}

/* What `run` or `compare` was given, before the scene is known. */
typedef struct run_args {
    const command_call *cc;
    scene_run_opts opts;
    bool compare;
    const char *svg_path; /* compare only */
    const char *scene_name;
    const char *params[64];
    uint32_t nparams;
    uint32_t tp;     /* --tp: ranks (1: no MPI at all) */
    scene_libs libs; /* --scene-lib */
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
 * the host's tp hooks (the command with MPI built in) and a scene that
 * splits, checked once the scene is known (tp_check). */
static int apply_tp(run_args *ra, const char *value)
{
    const command_call *cc = ra->cc;
    if (ra->compare)
        return usage_error(cc, "%s: only with run", "--tp");
    if (!parse_count(value, 1, 256, &ra->tp))
        return usage_error(cc, "--tp wants an integer from 1 to 256, not '%s'", value);
    if (ra->tp > 1 && cc->host->tp == NULL)
        return usage_error(cc, "--tp %s: %s", value,
                           cc->host->tp_refusal != NULL ? cc->host->tp_refusal
                                                        : "not available here; only --tp 1 runs");
    return SCENE_EXIT_OK;
}

/* Room for the MPI library's name (MPI_MAX_LIBRARY_VERSION_STRING is 256
 * in Open MPI; the name before its first comma is far shorter). */
#define SCENE_MPI_NAME_MAX 256

/* After the scene is known: --tp N > 1 with a scene that cannot split is a
 * usage error, found before MPI would be initialised.  Whether a scene
 * splits is the scene's to say (qwen3_decode does; docs/ARCHITECTURE.md,
 * "The Qwen3 tensor-parallel split"). */
static int tp_check(const run_args *ra)
{
    const scene_command_tp *tp = ra->cc->host->tp;
    if (ra->tp <= 1 || ra->opts.scene->splits)
        return SCENE_EXIT_OK;
    char lib[SCENE_MPI_NAME_MAX] = "none";
    if (tp != NULL && tp->library != NULL)
        tp->library(lib, sizeof lib);
    return usage_error(ra->cc,
                       "--tp %u: scene '%s' cannot split across ranks (qwen3_decode can; MPI "
                       "built in: %s); run it with --tp 1",
                       ra->tp, ra->opts.scene->name, lib);
}

/* --rounds N: compare compares the later rounds, so it wants two. */
static int apply_rounds(run_args *ra, const char *value)
{
    if (parse_count(value, ra->compare ? 2 : 1, 100000, &ra->opts.rounds))
        return SCENE_EXIT_OK;
    if (ra->compare)
        return usage_error(ra->cc,
                           "--rounds wants an integer from 2 to 100000 (at least 2: compare "
                           "compares the later rounds), not '%s'",
                           value);
    return usage_error(ra->cc, "--rounds wants an integer from 1 to 100000, not '%s'", value);
}

/* The flags that only one of run and compare takes. */
static int apply_mode_flag(run_args *ra, const char *flag, const char *value)
{
    scene_run_opts *o = &ra->opts;
    if (strcmp(flag, "--residency") == 0) {
        if (scene_residency_parse(value, &o->residency) != 0)
            return usage_error(ra->cc, "--residency '%s': want off, pin, in or all", value);
        if (ra->compare)
            return usage_error(ra->cc, "%s: compare runs every mode", "--residency");
    } else if (strcmp(flag, "--trace") == 0) {
        if (ra->compare)
            return usage_error(ra->cc, "%s: not with compare (use run --trace per mode)",
                               "--trace");
        o->trace_path = value;
    } else if (strcmp(flag, "--svg") == 0) {
        if (!ra->compare)
            return usage_error(ra->cc, "%s: only with compare", "--svg");
        ra->svg_path = value;
    } else {
        return apply_tp(ra, value);
    }
    return SCENE_EXIT_OK;
}

/* Applies one flag that takes a value; returns SCENE_EXIT_OK or a usage error. */
static int apply_value_flag(run_args *ra, const char *flag, const char *value)
{
    scene_run_opts *o = &ra->opts;
    if (strcmp(flag, "--rounds") == 0) {
        return apply_rounds(ra, value);
    } else if (strcmp(flag, "--repeat") == 0) {
        if (!parse_count(value, 1, SCENE_MAX_REPEAT, &o->repeat))
            return usage_error(ra->cc, "--repeat wants an integer from 1 to 100, not '%s'", value);
    } else if (strcmp(flag, "--warmup") == 0) {
        if (!parse_count(value, 0, 100000, &o->warmup))
            return usage_error(ra->cc, "--warmup wants an integer from 0 to 100000, not '%s'",
                               value);
    } else if (strcmp(flag, "--param") == 0) {
        if (ra->nparams == sizeof ra->params / sizeof ra->params[0])
            return usage_error(ra->cc, "too many --param flags (at '%s')", value);
        ra->params[ra->nparams++] = value;
    } else if (strcmp(flag, "--device") == 0) {
        o->device_spec = value;
    } else if (strcmp(flag, "--json") == 0) {
        o->json_path = value;
    } else if (strcmp(flag, "--scene-lib") == 0) {
        return add_scene_lib(ra->cc, &ra->libs, value);
    } else if (strcmp(flag, "--residency") == 0 || strcmp(flag, "--trace") == 0 ||
               strcmp(flag, "--svg") == 0 || strcmp(flag, "--tp") == 0) {
        return apply_mode_flag(ra, flag, value);
    } else {
        return usage_error(ra->cc, "unknown flag '%s'", flag);
    }
    return SCENE_EXIT_OK;
}

static bool is_value_flag(const char *flag)
{
    static const char *const names[] = {"--rounds", "--residency", "--param",    "--device",
                                        "--json",   "--trace",     "--svg",      "--repeat",
                                        "--warmup", "--tp",        "--scene-lib"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(flag, names[i]) == 0)
            return true;
    }
    return false;
}

/* -v: every OpenCL program build of the process from now on prints its log
 * (device_build_log_on: a flag, where setenv would race with another
 * thread's getenv). */
static void verbose_builds(void)
{
    device_build_log_on();
}

/* Parses one argument at argv[*i] (advancing past a flag's value). */
static int parse_run_arg(run_args *ra, int argc, const char *const *argv, int *i)
{
    const char *arg = argv[*i];
    char flag[32];
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 && strcmp(arg, "-v") != 0) {
        if (ra->scene_name != NULL)
            return usage_error(ra->cc, "unexpected argument '%s'", arg);
        ra->scene_name = arg;
    } else if (strcmp(arg, "--skip-golden") == 0) {
        ra->opts.skip_golden = true;
    } else if (strcmp(arg, "--quiet") == 0) {
        ra->opts.quiet = true;
    } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
        verbose_builds();
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
            return usage_error(ra->cc, "%s needs a value", arg);
        *i += 1;
        return apply_value_flag(ra, arg, argv[*i]);
    } else {
        return usage_error(ra->cc, "unknown flag '%s'", arg);
    }
    return SCENE_EXIT_OK;
}

/* --help, wherever it stands: the help, which lists the scenes, a plugin's
 * too (every --scene-lib given, before --help or after it; the other flags
 * are not looked at).  Returns -1 once printed, or a load's usage error. */
static int run_help(run_args *ra, int argc, const char *const *argv, int next)
{
    for (int i = next; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int rc = SCENE_EXIT_OK;
        if (strcmp(argv[i], "--scene-lib") == 0 && i + 1 < argc)
            rc = add_scene_lib(ra->cc, &ra->libs, argv[++i]);
        else if (strncmp(argv[i], "--scene-lib=", 12) == 0)
            rc = add_scene_lib(ra->cc, &ra->libs, argv[i] + 12);
        if (rc != SCENE_EXIT_OK)
            return rc;
    }
    int rc = load_scene_libs(ra->cc, &ra->libs);
    if (rc != SCENE_EXIT_OK)
        return rc;
    cmd_run_help();
    return -1;
}

/* Every argument after the subcommand; 0, a usage error, or -1 for --help
 * (printed). */
static int parse_run_args(run_args *ra, int argc, const char *const *argv)
{
    bool flags_done = false; /* after "--", every argument is the scene */
    for (int i = 2; i < argc; i++) {
        int rc = SCENE_EXIT_OK;
        if (!flags_done && is_help(argv[i]))
            return run_help(ra, argc, argv, i + 1);
        if (!flags_done && strcmp(argv[i], "--") == 0)
            flags_done = true;
        else if (flags_done && ra->scene_name != NULL)
            rc = usage_error(ra->cc, "unexpected argument '%s'", argv[i]);
        else if (flags_done)
            ra->scene_name = argv[i];
        else
            rc = parse_run_arg(ra, argc, argv, &i);
        if (rc != SCENE_EXIT_OK)
            return rc;
    }
    return SCENE_EXIT_OK;
}

/* The scene and its params, once the flags are parsed. */
static int resolve_scene(run_args *ra, const char *subcommand)
{
    if (ra->scene_name == NULL)
        return usage_error(ra->cc, "%s: which scene? (hostgraph list shows them)", subcommand);
    int rc = load_scene_libs(ra->cc, &ra->libs);
    if (rc != SCENE_EXIT_OK)
        return rc;
    ra->opts.scene = scene_find(ra->scene_name);
    if (ra->opts.scene == NULL)
        return unknown_scene(ra->cc, ra->scene_name);
    scene_params_default(ra->opts.scene, ra->opts.params);
    for (uint32_t i = 0; i < ra->nparams; i++) {
        hg_err err;
        err_clear(&err);
        if (scene_param_set(ra->opts.scene, ra->opts.params, ra->params[i], &err) != 0)
            return usage_error(ra->cc, "%s", err.msg);
    }
    return tp_check(ra);
}

static bool is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

static scene_cancel *cancel_of(hg_scene_cancel *c)
{
    return scene_cancel_of(c);
}

static int command_run(const command_call *cc, int argc, const char *const *argv, bool compare)
{
    run_args ra = {.cc = cc,
                   .opts = {.rounds = compare ? SCENE_COMPARE_ROUNDS : 1,
                            .repeat = compare ? SCENE_COMPARE_REPEAT : 1,
                            .warmup = compare ? 1 : 0,
                            .start_ns = cc->host->start_ns,
                            .out = stdout,
                            .err = stderr},
                   .compare = compare,
                   .tp = 1};
    int rc = parse_run_args(&ra, argc, argv);
    if (rc != SCENE_EXIT_OK)
        return rc < 0 ? SCENE_EXIT_OK : rc;
    rc = resolve_scene(&ra, argv[1]);
    if (rc != SCENE_EXIT_OK)
        return rc;
    /* A report on standard output moves the table to standard error. */
    if (is_stdout(ra.opts.json_path) || is_stdout(ra.opts.trace_path) || is_stdout(ra.svg_path))
        ra.opts.out = stderr;
    if (cc->host->cancel != NULL)
        ra.opts.cancel = cancel_of(cc->host->cancel);
    if (ra.tp > 1)
        return cc->host->tp->run(cc->host->tp->user, &ra.opts, ra.tp);
    return compare ? scene_compare(&ra.opts, ra.svg_path) : scene_run(&ra.opts);
}

/* ------------------------------------------------------------ dispatch */

static int command_dispatch(command_call *cc, int argc, const char *const *argv)
{
    if (argc < 2 || argv[1] == NULL)
        return usage_error(cc, "%s", "no command given");
    const char *cmd = argv[1];
    if (is_help(cmd) || strcmp(cmd, "help") == 0) {
        printf("hostgraph %s: build task graphs on the host, run them on a device, round after "
               "round.\n\n%s\n%s",
               HG_VERSION, scene_command_usage, scene_command_run_help);
        return SCENE_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("hostgraph %s\n", HG_VERSION);
        return SCENE_EXIT_OK;
    }
    if (strcmp(cmd, "list") == 0) {
        cc->subcommand = "list";
        return command_list(cc, argc, argv);
    }
    if (strcmp(cmd, "devices") == 0) {
        if (argc > 2)
            return usage_error(cc, "devices takes no arguments (got '%s')", argv[2]);
        device_list(stdout);
        return SCENE_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0 || strcmp(cmd, "compare") == 0) {
        cc->subcommand = cmd;
        return command_run(cc, argc, argv, strcmp(cmd, "compare") == 0);
    }
    return usage_error(cc, "unknown command '%s'", cmd);
}

int scene_command_main(int argc, const char *const *argv, const scene_command_host *host)
{
    scene_command_host now = *host;
    if (now.start_ns == 0)
        now.start_ns = clock_now_ns();
    command_call cc = {.prog = argc > 0 && argv != NULL && argv[0] != NULL && argv[0][0] != '\0'
                                   ? argv[0]
                                   : "hostgraph",
                       .host = &now};
    int rc = command_dispatch(&cc, argv != NULL ? argc : 0, argv);
    /* The call's output is complete when it returns (a caller may print
     * next, through another buffer: Python's). */
    fflush(stdout);
    return rc;
}

int hg_scene_command(int argc, const char *const *argv, hg_scene_cancel *cancel)
{
    scene_command_host host = {
        .cancel = cancel,
        .tp_refusal = "needs the hostgraph command itself (one MPI rank a process, under mpirun); "
                      "hg_scene_command runs in this process, where only --tp 1 runs"};
    return scene_command_main(argc, argv, &host);
}
