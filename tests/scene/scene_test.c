/*
 * scene_test.c: the scenes and the scene runner, as a user of `hostgraph run`
 * relies on them: both scenes pass golden round after round on one core and
 * on split cube/vector cores, every round gives the same bytes and moves the
 * exact bytes its args imply, the golden checker names the right output and
 * index, params are validated, bgemm lays its tasks out from its config and
 * names what is wrong with a bad one, unwritable report paths fail before any
 * round, and the reports show release time and no made-up later-round mean.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scene/report.h"
#include "scene/scene.h"
#include "testlib.h"

static const char *const specs[] = {"sim:cores=1", "sim:cube=1,vector=2"};

/* What on_round saw: per-round bytes and whether every round's outputs
 * equal round 1's. */
typedef struct round_log {
    uint32_t rounds;
    uint64_t h2d[8], d2h[8], h2d_copies[8];
    void *first; /* round 1's first checked output */
    size_t first_len;
    bool identical;
} round_log;

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    round_log *log = user;
    const hg_hostbuf *hb = c->args[c->checks[0].arg].tensor.host;
    if (round <= 8) {
        log->h2d[round - 1] = s->h2d_bytes;
        log->d2h[round - 1] = s->d2h_bytes;
        log->h2d_copies[round - 1] = s->h2d_copies;
    }
    log->rounds = round;
    if (round == 1) {
        log->first_len = hg_hostbuf_size(hb);
        log->first = malloc(log->first_len + 1);
        memcpy(log->first, hg_hostbuf_data(hb), log->first_len);
        log->identical = true;
    } else if (memcmp(log->first, hg_hostbuf_data(hb), log->first_len) != 0) {
        log->identical = false;
    }
}

/* Runs `name` with params "k=v"... on `spec` for `rounds`; returns the exit
 * code and fills log. */
static int run_scene(const char *name, const char *const *kv, uint32_t nkv, const char *spec,
                     uint32_t rounds, round_log *log)
{
    scene_run_opts o = {.scene = scene_find(name),
                        .rounds = rounds,
                        .device_spec = spec,
                        .quiet = true,
                        .on_round = log_round,
                        .on_round_user = log};
    memset(log, 0, sizeof *log);
    o.out = fopen("/dev/null", "w");
    o.err = stderr;
    scene_params_default(o.scene, o.params);
    for (uint32_t i = 0; i < nkv; i++) {
        if (scene_param_set(o.scene, o.params, kv[i], NULL) != 0)
            return -1;
    }
    int rc = scene_run(&o);
    fclose(o.out);
    return rc;
}

/* Runs the scene on every spec and expects golden to pass each round with
 * identical outputs and exactly h2d / d2h bytes moved per round.  An ASSERT
 * here marks the calling test failed. */
static void expect_exact_rounds(const char *name, const char *const *kv, uint32_t nkv,
                                uint32_t rounds, uint64_t h2d, uint64_t d2h)
{
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        round_log log;
        int rc = run_scene(name, kv, nkv, specs[s], rounds, &log);
        free(log.first);
        ASSERT_EQ(rc, SCENE_EXIT_OK);
        ASSERT_EQ(log.rounds, rounds);
        ASSERT(log.identical);
        for (uint32_t r = 0; r < rounds && r < 8; r++) {
            ASSERT_UEQ(log.h2d[r], h2d);
            ASSERT_UEQ(log.d2h[r], d2h);
        }
    }
}

TEST(vector_add_passes_every_round_with_exact_bytes)
{
    static const char *const kv[] = {"n=10007", "tile=1000"}; /* a short last tile */
    /* a and b go in, c comes back; c is pure OUT so it is never uploaded */
    expect_exact_rounds("vector_add", kv, 2, 4, 2 * 10007 * 4, 10007 * 4);
}

TEST(bgemm_passes_every_round_with_exact_bytes)
{
    static const char *const kv[] = {"grid=3", "tile=8", "grid_k=2"};
    const uint64_t m = 24, n = 24, k = 16;
    const uint64_t a = m * k * 4, b = k * n * 4, c = m * n * 4, config = 4 * 8;
    /* A, B, C (INOUT) and config go in; only C comes back */
    expect_exact_rounds("bgemm", kv, 3, 3, a + b + c + config, c);
}

TEST(bgemm_default_params_pass)
{
    round_log log;
    ASSERT_EQ(run_scene("bgemm", NULL, 0, "sim:cube=1,vector=2", 2, &log), SCENE_EXIT_OK);
    free(log.first);
    ASSERT(log.identical);
}

TEST(vector_add_zero_elements_passes)
{
    static const char *const kv[] = {"n=0"};
    round_log log;
    ASSERT_EQ(run_scene("vector_add", kv, 1, "sim:cores=1", 2, &log), SCENE_EXIT_OK);
    free(log.first);
    ASSERT_UEQ(log.h2d[1], 0);
    ASSERT_UEQ(log.d2h[1], 0);
}

/* A vector_add case whose output c already holds the golden values. */
static scene_case *solved_vector_add(size_t n)
{
    const scene *s = scene_find("vector_add");
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    params[0] = (int64_t)n;
    scene_case *c = NULL;
    if (scene_case_make(s, params, &c, NULL) != 0)
        return NULL;
    const scene_check *k = &c->checks[0];
    float *out = scene_case_data(c, k->arg);
    for (size_t i = 0; i < k->numel; i++)
        out[i] = (float)k->golden[i];
    return c;
}

TEST(golden_checker_names_output_and_first_index)
{
    scene_case *c = solved_vector_add(1000);
    ASSERT(c != NULL);
    scene_check_result res;
    ASSERT(scene_case_check(c, &res));
    ASSERT_UEQ(res.first_bad, SIZE_MAX);
    float *out = scene_case_data(c, c->checks[0].arg);
    out[700] += 2.0f;
    out[123] += 0.5f;
    bool pass = scene_case_check(c, &res);
    scene_case_destroy(c);
    ASSERT(!pass);
    ASSERT_STR_EQ(res.output, "c");
    ASSERT_UEQ(res.first_bad, 123);
    ASSERT(fabs(res.max_abs_err - 2.0) < 1e-6);
    ASSERT(res.max_rel_err > 0.0);
}

TEST(golden_checker_rejects_nan)
{
    scene_case *c = solved_vector_add(64);
    ASSERT(c != NULL);
    float *out = scene_case_data(c, c->checks[0].arg);
    out[5] = NAN;
    scene_check_result res;
    bool pass = scene_case_check(c, &res);
    scene_case_destroy(c);
    ASSERT(!pass);
    ASSERT_UEQ(res.first_bad, 5);
}

TEST(runner_exits_1_and_explains_a_golden_failure)
{
    const scene *s = scene_find("bgemm");
    scene_run_opts o = {.scene = s, .rounds = 2, .quiet = true};
    scene_params_default(s, o.params);
    scene_case *c = NULL;
    hg_device *dev = NULL;
    ASSERT_OK(scene_case_make(s, o.params, &c, NULL));
    c->checks[0].golden[37] += 1.0; /* the reference is wrong, so every round fails */
    ASSERT_OK(hg_device_open("sim:cores=2", &dev, NULL, 0));
    o.out = tmpfile();
    o.err = tmpfile();
    int rc = scene_run_case(&o, dev, c);
    char text[1024] = "";
    rewind(o.err);
    size_t len = fread(text, 1, sizeof text - 1, o.err);
    text[len] = '\0';
    fclose(o.out);
    fclose(o.err);
    scene_case_destroy(c);
    hg_device_close(dev);
    ASSERT_EQ(rc, SCENE_EXIT_GOLDEN);
    ASSERT_STR_CONTAINS(text, "output 'C'");
    ASSERT_STR_CONTAINS(text, "first mismatch at index 37");
}

/* Reads what was written to a tmpfile into text (NUL-terminated) and closes it. */
static void slurp_and_close(FILE *f, char *text, size_t len)
{
    rewind(f);
    size_t n = fread(text, 1, len - 1, f);
    text[n] = '\0';
    fclose(f);
}

/* What a bgemm run with a config written over the case's own reported. */
typedef struct config_run {
    int rc;
    uint32_t rounds, tasks; /* rounds finished and the last one's task count */
    char err[1024];         /* what the runner printed on o->err */
} config_run;

static void note_tasks(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    config_run *cr = user;
    cr->rounds = round;
    cr->tasks = s->tasks;
}

/* Makes a bgemm case with grid=2, tile=8, grid_k=3 (A 16 x 24, B 24 x 16),
 * writes `config` (tile, grid_m, grid_n, grid_k) over the one make() wrote
 * (NULL keeps it) and runs it for one round on one core. */
static config_run run_bgemm_with_config(const int64_t *config)
{
    static const char *const kv[] = {"grid=2", "tile=8", "grid_k=3"};
    config_run cr = {.rc = -1};
    const scene *s = scene_find("bgemm");
    scene_run_opts o = {
        .scene = s, .rounds = 1, .quiet = true, .on_round = note_tasks, .on_round_user = &cr};
    scene_params_default(s, o.params);
    for (size_t i = 0; i < 3; i++)
        if (scene_param_set(s, o.params, kv[i], NULL) != 0)
            return cr;
    scene_case *c = NULL;
    hg_device *dev = NULL;
    if (scene_case_make(s, o.params, &c, NULL) != 0 ||
        hg_device_open("sim:cores=1", &dev, NULL, 0) != 0) {
        scene_case_destroy(c);
        return cr;
    }
    if (config != NULL)
        hg_hostbuf_write(c->args[3].tensor.host, 0, config, 4 * sizeof config[0]);
    o.out = tmpfile();
    o.err = tmpfile();
    cr.rc = scene_run_case(&o, dev, c);
    fclose(o.out);
    slurp_and_close(o.err, cr.err, sizeof cr.err);
    scene_case_destroy(c);
    hg_device_close(dev);
    return cr;
}

TEST(bgemm_orchestration_lays_out_tasks_from_config)
{
    /* make()'s config: tile 8, grid 2 x 2 x 3, a GEMM and an ADD per (i, j, k) */
    config_run cr = run_bgemm_with_config(NULL);
    ASSERT_EQ(cr.rc, SCENE_EXIT_OK);
    ASSERT_UEQ(cr.tasks, 2 * 2 * 2 * 3);
    /* The same matrices cut finer: tile 4, grid 4 x 4 x 6.  Golden still
     * passes (sums of multiples of 1/8 are exact in any order). */
    const int64_t finer[4] = {4, 4, 4, 6};
    cr = run_bgemm_with_config(finer);
    ASSERT_EQ(cr.rc, SCENE_EXIT_OK);
    ASSERT_UEQ(cr.rounds, 1);
    ASSERT_UEQ(cr.tasks, 2 * 4 * 4 * 6);
    ASSERT_STR_EQ(cr.err, "");
}

TEST(bgemm_names_what_is_wrong_with_a_bad_config)
{
    static const struct {
        int64_t config[4];
        const char *says;
    } bad[] = {
        {{16, 2, 2, 3}, "tile 16, grid 2 x 2 x 3 does not match the shapes of A, B and C"},
        {{8, 2, 2, 2}, "tile 8, grid 2 x 2 x 2 does not match"}, /* K is 24, not 16 */
        {{INT64_MAX, INT64_MAX, 4, 4}, "products fit in size_t"},
        {{8, 0, 2, 3}, "not 4 positive i64"},
        {{8, 2, -2, 3}, "not 4 positive i64"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        config_run cr = run_bgemm_with_config(bad[i].config);
        ASSERT_EQ(cr.rc, SCENE_EXIT_RUNTIME);
        ASSERT_UEQ(cr.rounds, 0);
        ASSERT_STR_CONTAINS(cr.err, "round 1: arg 'config': ");
        ASSERT_STR_CONTAINS(cr.err, bad[i].says);
    }
}

/* A fresh empty directory for files a test writes; the test removes it. */
static void make_tmpdir(char *dir, size_t len)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, len, "%s/hg_scene_XXXXXX", base != NULL && *base != '\0' ? base : "/tmp");
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
}

/* Runs vector_add (n=64) for 2 rounds writing JSON to json and the trace to
 * trace (either may be NULL); returns the exit code, the rounds run and the
 * error text. */
static int run_with_outputs(const char *json, const char *trace, config_run *cr)
{
    const scene *s = scene_find("vector_add");
    scene_run_opts o = {.scene = s,
                        .rounds = 2,
                        .quiet = true,
                        .json_path = json,
                        .trace_path = trace,
                        .on_round = note_tasks,
                        .on_round_user = cr};
    memset(cr, 0, sizeof *cr);
    scene_params_default(s, o.params);
    if (scene_param_set(s, o.params, "n=64", NULL) != 0)
        return -1;
    o.out = tmpfile();
    o.err = tmpfile();
    int rc = scene_run(&o);
    fclose(o.out);
    slurp_and_close(o.err, cr->err, sizeof cr->err);
    return rc;
}

TEST(unwritable_output_paths_fail_before_the_first_round)
{
    char dir[256], missing[512], through_file[512], file[512], ok[512];
    make_tmpdir(dir, sizeof dir);
    ASSERT(dir[0] != '\0');
    snprintf(missing, sizeof missing, "%s/no/such/dir/out.json", dir);
    snprintf(file, sizeof file, "%s/file", dir);
    snprintf(through_file, sizeof through_file, "%s/file/out.json", dir);
    snprintf(ok, sizeof ok, "%s/ok.json", dir);
    FILE *f = fopen(file, "w");
    ASSERT(f != NULL);
    fclose(f);
    const char *bad[] = {missing, dir, through_file, ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int as_trace = 0; as_trace < 2; as_trace++) {
            config_run cr;
            int rc =
                as_trace ? run_with_outputs(ok, bad[i], &cr) : run_with_outputs(bad[i], ok, &cr);
            ASSERT_EQ(rc, SCENE_EXIT_USAGE);
            ASSERT_UEQ(cr.rounds, 0); /* refused before any round ran */
            ASSERT_STR_CONTAINS(cr.err, as_trace ? "--trace '" : "--json '");
            char quoted[600];
            snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
            ASSERT_STR_CONTAINS(cr.err, quoted);
            ASSERT(strchr(cr.err, '\n') == cr.err + strlen(cr.err) - 1); /* one line */
            ASSERT(access(ok, F_OK) != 0); /* the good path was not created either */
        }
    }
    config_run cr;
    ASSERT_EQ(run_with_outputs(ok, ok, &cr), SCENE_EXIT_USAGE); /* one file for both */
    ASSERT_EQ(run_with_outputs(ok, NULL, &cr), SCENE_EXIT_OK);
    ASSERT_UEQ(cr.rounds, 2);
    ASSERT(access(ok, F_OK) == 0);
    ASSERT_EQ(run_with_outputs(NULL, ok, &cr), SCENE_EXIT_OK); /* an existing file is fine */
    remove(ok);
    remove(file);
    rmdir(dir);
}

/* A report of `n` made-up rounds whose stage times are round-number ms. */
static scene_report fake_report(scene_round *rounds, uint32_t n, const int64_t *params)
{
    for (uint32_t i = 0; i < n; i++) {
        memset(&rounds[i], 0, sizeof rounds[i]);
        rounds[i].stats.wall_ns = 10000000ull * (i + 1);
        rounds[i].stats.copyback_ns = 1000000;
        rounds[i].stats.release_ns = 2500000; /* 2.5 ms */
        rounds[i].golden = "pass";
    }
    scene_report r = {.scene = scene_find("vector_add"),
                      .params = params,
                      .device = "sim",
                      .rounds = rounds,
                      .nrounds = n,
                      .overall_ms = 100.0};
    scene_report_summarize(&r);
    return r;
}

TEST(table_and_json_show_release_time)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_round rounds[2];
    scene_params_default(scene_find("vector_add"), params);
    scene_report r = fake_report(rounds, 2, params);
    char text[4096], dir[256], path[512];
    FILE *f = tmpfile();
    scene_report_print_header(f);
    scene_report_print_row(f, 1, &rounds[0]);
    slurp_and_close(f, text, sizeof text);
    ASSERT_STR_CONTAINS(text, "back_ms    rel_ms     h2d_bytes");
    ASSERT_STR_CONTAINS(text, "1.000      2.500      0 ");
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    ASSERT_OK(scene_report_write_json(&r, path));
    f = fopen(path, "r");
    ASSERT(f != NULL);
    slurp_and_close(f, text, sizeof text);
    remove(path);
    rmdir(dir);
    ASSERT_STR_CONTAINS(text, "\"copyback_ms\": 1, \"release_ms\": 2.5, ");
    ASSERT_STR_CONTAINS(text, "\"later_avg_ms\": 20,");
}

TEST(one_round_has_no_later_rounds_mean)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_round rounds[1];
    scene_params_default(scene_find("vector_add"), params);
    scene_report r = fake_report(rounds, 1, params);
    char text[4096], dir[256], path[512];
    FILE *f = tmpfile();
    scene_report_print_summary(f, &r);
    slurp_and_close(f, text, sizeof text);
    ASSERT_STR_EQ(text, "first round 10.000 ms    later rounds avg n/a    overall 100.000 ms (case "
                        "0.000 ms, golden 0.000 ms)\n");
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    ASSERT_OK(scene_report_write_json(&r, path));
    f = fopen(path, "r");
    ASSERT(f != NULL);
    slurp_and_close(f, text, sizeof text);
    remove(path);
    rmdir(dir);
    ASSERT_STR_CONTAINS(text, "\"first_ms\": 10,");
    ASSERT_STR_CONTAINS(text, "\"later_avg_ms\": null,");
}

TEST(unknown_malformed_and_out_of_range_params_are_rejected)
{
    static const struct {
        const char *scene, *kv;
        int want;
    } cases[] = {
        {"vector_add", "bogus=1", HG_ENOTFOUND},
        {"vector_add", "n=12x", HG_EINVAL},
        {"vector_add", "n=", HG_EINVAL},
        {"vector_add", "=5", HG_EINVAL},
        {"vector_add", "n", HG_EINVAL},
        {"vector_add", "n=99999999999999999999999", HG_EINVAL},
        {"vector_add", "n=-1", HG_ERANGE},
        {"bgemm", "tile=0", HG_ERANGE},
        {"bgemm", "grid=100000", HG_ERANGE},
        {"bgemm", "grid_k=-3", HG_ERANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const scene *s = scene_find(cases[i].scene);
        int64_t params[SCENE_MAX_PARAMS], before[SCENE_MAX_PARAMS];
        scene_params_default(s, params);
        memcpy(before, params, sizeof params);
        hg_err err;
        err_clear(&err);
        ASSERT_EQ(scene_param_set(s, params, cases[i].kv, &err), cases[i].want);
        ASSERT(err.msg[0] != '\0');
        ASSERT(memcmp(before, params, s->nparams * sizeof params[0]) == 0);
    }
}

TEST(valid_params_apply_and_make_rechecks_ranges)
{
    const scene *s = scene_find("bgemm");
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    ASSERT_OK(scene_param_set(s, params, "grid=7", NULL));
    ASSERT_EQ(params[0], 7);
    ASSERT_OK(scene_param_set(s, params, "tiles=5", NULL)); /* the spelling */
    ASSERT_EQ(params[0], 5);
    ASSERT(scene_find("no_such_scene") == NULL);
    params[1] = 0; /* past the parser: make() still refuses it */
    scene_case *c = (scene_case *)1;
    hg_err err;
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "tile");
    ASSERT(c == NULL);
}

TEST(a_device_spec_the_sim_cannot_parse_is_a_usage_error)
{
    round_log log;
    int rc = run_scene("bgemm", NULL, 0, "sim:bogus_key=1", 2, &log);
    free(log.first);
    ASSERT_EQ(rc, SCENE_EXIT_USAGE);
}

TEST(runtime_errors_exit_3)
{
    static const char *const bad_specs[] = {"sim:fail_alloc=1", "sim:fail_copy=2"};
    for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++) {
        round_log log;
        int rc = run_scene("bgemm", NULL, 0, bad_specs[i], 2, &log);
        free(log.first);
        ASSERT_EQ(rc, SCENE_EXIT_RUNTIME);
    }
}

/* Asks to stop, `times` times, after round `at`. */
typedef struct stop_at {
    scene_cancel *cancel;
    uint32_t at, times, last_round;
} stop_at;

static void request_stop(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    stop_at *st = user;
    st->last_round = round;
    for (uint32_t i = 0; round == st->at && i < st->times; i++)
        scene_cancel_request(st->cancel);
}

/* A stop request ends the rounds after the one in flight (one or two
 * requests: the second cancels a run in flight, or the next one), exit 130,
 * and the report has the rounds done. */
TEST(a_stop_request_ends_the_rounds_and_reports_the_rounds_done)
{
    for (uint32_t times = 1; times <= 2; times++) {
        const scene *s = scene_find("vector_add");
        scene_cancel cancel;
        scene_cancel_init(&cancel);
        stop_at st = {.cancel = &cancel, .at = 2, .times = times};
        scene_run_opts o = {.scene = s,
                            .rounds = 50,
                            .quiet = true,
                            .cancel = &cancel,
                            .on_round = request_stop,
                            .on_round_user = &st};
        scene_params_default(s, o.params);
        ASSERT_OK(scene_param_set(s, o.params, "n=256", NULL));
        char dir[256], path[512];
        make_tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/r.json", dir);
        o.json_path = path;
        o.out = tmpfile();
        o.err = tmpfile();
        ASSERT_EQ(scene_run(&o), SCENE_EXIT_INTERRUPTED);
        fclose(o.out);
        fclose(o.err);
        ASSERT_UEQ(st.last_round, 2);
        char text[8192];
        FILE *f = fopen(path, "r");
        ASSERT(f != NULL);
        slurp_and_close(f, text, sizeof text);
        ASSERT_STR_CONTAINS(text, "\"interrupted\": true");
        ASSERT_STR_CONTAINS(text, "\"round\": 2,");
        ASSERT(strstr(text, "\"round\": 3,") == NULL);
        remove(path);
        rmdir(dir);
        scene_cancel_destroy(&cancel);
    }
}

/* The start column of each space-separated field of line, up to max. */
static int field_starts(const char *line, int *starts, int max)
{
    int n = 0;
    for (int i = 0; line[i] != '\0' && line[i] != '\n' && n < max; i++)
        if (line[i] != ' ' && (i == 0 || line[i - 1] == ' '))
            starts[n++] = i;
    return n;
}

/* A round of 12 s and 10 GB still sits under the header's columns. */
TEST(table_columns_fit_large_values)
{
    scene_round sr;
    memset(&sr, 0, sizeof sr);
    sr.stats.wall_ns = sr.stats.exec_ns = 12345678901ull;
    sr.stats.h2d_bytes = 10000000000ull;
    sr.golden = "pass";
    FILE *f = tmpfile();
    ASSERT(f != NULL);
    scene_report_print_header(f);
    scene_report_print_row(f, 1, &sr);
    char text[1024];
    slurp_and_close(f, text, sizeof text);
    int head[16], row[16];
    int nh = field_starts(text, head, 16);
    int nr = field_starts(strchr(text, '\n') + 1, row, 16);
    ASSERT_EQ(nh, nr);
    for (int i = 0; i < nh; i++)
        ASSERT_EQ(head[i], row[i]);
}

/* A change counts only when the spreads are apart by more than the wider
 * of them; merely disjoint spreads (10% of the time for identical modes
 * measured 3 times a side) are within noise. */
TEST(verdict_is_within_noise_when_spreads_overlap)
{
    const double off_v[3] = {10, 12, 11}, overlap[3] = {9, 10.5, 8}, below[3] = {6, 7.9, 7},
                 above[3] = {14.5, 15, 16}, empty[1] = {NAN}, just_below[3] = {8, 9.9, 9},
                 just_above[3] = {12.5, 13, 14};
    scene_spread off = scene_spread_of(off_v, 3);
    ASSERT(off.median == 11 && off.min == 10 && off.max == 12 && off.n == 3);
    scene_spread s = scene_spread_of(overlap, 3);
    ASSERT_STR_CONTAINS(scene_verdict(&s, &off), "within noise");
    s = scene_spread_of(below, 3);
    ASSERT_STR_CONTAINS(scene_verdict(&s, &off), "faster");
    s = scene_spread_of(above, 3);
    ASSERT_STR_CONTAINS(scene_verdict(&s, &off), "slower");
    ASSERT_STR_CONTAINS(scene_verdict(&off, &off), "within noise");
    s = scene_spread_of(just_below, 3); /* disjoint, but closer than a spread */
    ASSERT_STR_CONTAINS(scene_verdict(&s, &off), "within noise");
    s = scene_spread_of(just_above, 3);
    ASSERT_STR_CONTAINS(scene_verdict(&s, &off), "within noise");
    s = scene_spread_of(empty, 1);
    ASSERT_UEQ(s.n, 0);
    ASSERT(scene_verdict(&s, &off) == NULL);
    /* Fewer than 3 samples a side give no verdict, however far apart. */
    s = scene_spread_of(above, 2);
    ASSERT(scene_verdict(&s, &off) == NULL);
    scene_spread one = scene_spread_of(below, 1);
    ASSERT(scene_verdict(&one, &one) == NULL);
    ASSERT(scene_verdict(&off, &one) == NULL);
    const double even[4] = {4, 1, 3, 2};
    ASSERT(scene_spread_of(even, 4).median == 2.5);
}

int main(void)
{
    return RUN_TESTS();
}
