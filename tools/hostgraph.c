/*
 * hostgraph.c: the `hostgraph` command.  Argument parsing only: scenes, the
 * scene runner and the reports live in src/scene.
 *
 * Exit codes (issue 2's contract): 0 every round's golden passed or was
 * skipped, 1 a golden check failed, 2 a usage error (a --json or --trace path
 * that cannot be written is one, found before any round runs), 3 a runtime
 * error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "device/device.h"
#include "scene/scene.h"

static const char usage_text[] =
    "usage: hostgraph list\n"
    "       hostgraph devices\n"
    "       hostgraph run SCENE [--rounds N] [--residency off|pin|in|all] [--verify]\n"
    "                 [--skip-golden] [--param KEY=VALUE]... [--device SPEC] [--json FILE]\n"
    "                 [--trace FILE] [--quiet]\n"
    "       hostgraph compare SCENE [--rounds N] [--verify] [--skip-golden] [--param "
    "KEY=VALUE]...\n"
    "                 [--device SPEC] [--json FILE] [--svg FILE]\n"
    "       hostgraph --help | --version\n";

static const char run_help_text[] =
    "Runs SCENE for N rounds on a device and prints a row per round and a summary.\n"
    "\n"
    "  --rounds N          rounds to run (default 1, at least 1)\n"
    "  --residency MODE    device copies across rounds (default off):\n"
    "                        off  every round stages every arg\n"
    "                        pin  the reference design: non-empty IN args the scene does not\n"
    "                             read on the host are copied once, before the rounds, to\n"
    "                             user device buffers (reported as setup)\n"
    "                        in   IN args stay on the device while unchanged\n"
    "                        all  IN and INOUT args stay coherent on the device\n"
    "  --verify            hash resident args' host bytes: a write that bypassed the API\n"
    "                      fails the round (HG_ESTALE) instead of using stale data\n"
    "  --skip-golden       do not compare outputs with the golden reference\n"
    "  --param KEY=VALUE   set a scene param: an integer, or a name where the param has\n"
    "                      names (preset=real); repeatable\n"
    "  --device SPEC       sim, sim:cores=N, sim:cube=C,vector=V, plus mem=, link_gbps=,\n"
    "                      fail_alloc=K, fail_copy=K (default sim)\n"
    "  --json FILE         write the per-round report as JSON\n"
    "  --trace FILE        write a Chrome trace-event JSON (opens in Perfetto)\n"
    "                      (both paths are checked before the first round)\n"
    "  --quiet             print only the summary line\n"
    "\n"
    "Table columns: round, then wall, bind, orchestrate, execute, copy-back and release\n"
    "times (ms), bytes each way, golden.  The summary's later-rounds mean is n/a with one\n"
    "round (null in JSON).\n"
    "\n"
    "compare runs SCENE once per mode (off, pin, in, all), each on a fresh device, and\n"
    "prints a row per mode against off; --json writes every mode's report, --svg the wall\n"
    "time per round per mode.\n"
    "\n"
    "Exit codes: 0 golden passed or skipped, 1 golden failed, 2 usage error (including a\n"
    "--json or --trace path that cannot be written, reported before any round runs),\n"
    "3 runtime error.\n";

static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, "hostgraph: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n%s", usage_text);
    return SCENE_EXIT_USAGE;
}

static void print_params(FILE *f, const scene *s, bool verbose)
{
    for (uint32_t i = 0; i < s->nparams; i++) {
        const scene_param *p = &s->params[i];
        const char *def = scene_param_value_name(p, p->def);
        if (!verbose) {
            if (def != NULL)
                fprintf(f, "%s%s=%s", i > 0 ? " " : "", p->name, def);
            else
                fprintf(f, "%s%s=%lld", i > 0 ? " " : "", p->name, (long long)p->def);
            continue;
        }
        if (p->values != NULL) {
            /* A named param takes its names only: list them, not a range. */
            fprintf(f, "    %-8s default %s, one of", p->name, def != NULL ? def : "?");
            for (const scene_param_value *v = p->values; v->name != NULL; v++)
                fprintf(f, "%s %s", v == p->values ? "" : ",", v->name);
            fprintf(f, ": %s\n", p->help);
        } else {
            fprintf(f, "    %-8s default %lld, range [%lld, %lld]: %s%s%s\n", p->name,
                    (long long)p->def, (long long)p->min, (long long)p->max, p->help,
                    p->alias ? "; also spelled " : "", p->alias ? p->alias : "");
        }
    }
}

static int cmd_list(void)
{
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        const scene *s = scene_at(i);
        printf("%-12s %s  [", s->name, s->description);
        print_params(stdout, s, false);
        printf("]\n");
    }
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
} run_args;

static bool parse_rounds(const char *text, uint32_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 1 || v > 100000)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* Applies one flag that takes a value; returns SCENE_EXIT_OK or a usage error. */
static int apply_value_flag(run_args *ra, const char *flag, const char *value)
{
    scene_run_opts *o = &ra->opts;
    if (strcmp(flag, "--rounds") == 0) {
        if (!parse_rounds(value, &o->rounds))
            return usage_error("--rounds wants an integer from 1 to 100000, not '%s'", value);
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
    static const char *const names[] = {"--rounds", "--residency", "--param", "--device",
                                        "--json",   "--trace",     "--svg"};
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
    if (strncmp(arg, "--", 2) != 0) {
        if (ra->scene_name != NULL)
            return usage_error("unexpected argument '%s'", arg);
        ra->scene_name = arg;
    } else if (strcmp(arg, "--skip-golden") == 0) {
        ra->opts.skip_golden = true;
    } else if (strcmp(arg, "--quiet") == 0) {
        ra->opts.quiet = true;
    } else if (strcmp(arg, "--verify") == 0) {
        ra->opts.verify = true;
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

static int cmd_run(int argc, char **argv, uint64_t start_ns, bool compare)
{
    run_args ra = {.opts = {.rounds = 1, .start_ns = start_ns, .out = stdout, .err = stderr},
                   .compare = compare};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cmd_run_help();
        int rc = parse_run_arg(&ra, argc, argv, &i);
        if (rc != SCENE_EXIT_OK)
            return rc;
    }
    if (ra.scene_name == NULL)
        return usage_error("%s: which scene? (hostgraph list shows them)", argv[1]);
    ra.opts.scene = scene_find(ra.scene_name);
    if (ra.opts.scene == NULL)
        return usage_error("unknown scene '%s' (hostgraph list shows them)", ra.scene_name);
    scene_params_default(ra.opts.scene, ra.opts.params);
    for (uint32_t i = 0; i < ra.nparams; i++) {
        hg_err err;
        err_clear(&err);
        if (scene_param_set(ra.opts.scene, ra.opts.params, ra.params[i], &err) != 0)
            return usage_error("%s", err.msg);
    }
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
        if (argc > 2)
            return usage_error("list takes no arguments (got '%s')", argv[2]);
        return cmd_list();
    }
    if (strcmp(cmd, "devices") == 0) {
        if (argc > 2)
            return usage_error("devices takes no arguments (got '%s')", argv[2]);
        device_list(stdout);
        return 0;
    }
    if (strcmp(cmd, "run") == 0 || strcmp(cmd, "compare") == 0)
        return cmd_run(argc, argv, start_ns, strcmp(cmd, "compare") == 0);
    return usage_error("unknown command '%s'", cmd);
}
