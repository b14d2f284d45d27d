/*
 * scene_test.c: the scenes and the scene runner, as a user of `hostgraph run`
 * relies on them: both scenes pass golden round after round on one core and
 * on split cube/vector cores, every round gives the same bytes and moves the
 * exact bytes its args imply, the golden checker names the right output and
 * index, and params are validated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Runs a bgemm case whose config says `config` on one core; returns the
 * scene runner's exit code. */
static int run_bgemm_with_config(const int64_t config[4])
{
    const scene *s = scene_find("bgemm");
    scene_run_opts o = {.scene = s, .rounds = 1, .quiet = true};
    scene_params_default(s, o.params);
    scene_case *c = NULL;
    hg_device *dev = NULL;
    if (scene_case_make(s, o.params, &c, NULL) != 0 ||
        hg_device_open("sim:cores=1", &dev, NULL, 0) != 0)
        return -1;
    hg_hostbuf_write(c->args[3].tensor.host, 0, config, 4 * sizeof config[0]);
    o.out = fopen("/dev/null", "w");
    o.err = o.out;
    int rc = scene_run_case(&o, dev, c);
    fclose(o.out);
    scene_case_destroy(c);
    hg_device_close(dev);
    return rc;
}

TEST(bgemm_orchestration_lays_out_tasks_from_config)
{
    /* defaults: tile 32, a 4 x 4 x 4 grid */
    const int64_t good[4] = {32, 4, 4, 4};
    const int64_t wrong_tile[4] = {16, 4, 4, 4};
    const int64_t overflowing[4] = {INT64_MAX, INT64_MAX, 4, 4};
    const int64_t zero[4] = {32, 0, 4, 4};
    ASSERT_EQ(run_bgemm_with_config(good), SCENE_EXIT_OK);
    ASSERT_EQ(run_bgemm_with_config(wrong_tile), SCENE_EXIT_RUNTIME);
    ASSERT_EQ(run_bgemm_with_config(overflowing), SCENE_EXIT_RUNTIME);
    ASSERT_EQ(run_bgemm_with_config(zero), SCENE_EXIT_RUNTIME);
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

int main(void)
{
    return RUN_TESTS();
}
