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
    void *first;      /* round 1's first checked output */
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
    scene_run_opts o = {.scene = scene_find(name), .rounds = rounds, .device_spec = spec,
                        .quiet = true, .on_round = log_round, .on_round_user = log};
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

TEST(vector_add_passes_every_round_with_exact_bytes)
{
    static const char *const kv[] = {"n=10007", "tile=1000"}; /* a short last tile */
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        round_log log;
        ASSERT_EQ(run_scene("vector_add", kv, 2, specs[s], 4, &log), SCENE_EXIT_OK);
        free(log.first);
        ASSERT_EQ(log.rounds, 4);
        ASSERT(log.identical);
        for (int r = 0; r < 4; r++) {
            ASSERT_UEQ(log.h2d[r], 2 * 10007 * 4);
            ASSERT_UEQ(log.d2h[r], 10007 * 4);
        }
    }
}

TEST(bgemm_passes_every_round_with_exact_bytes)
{
    static const char *const kv[] = {"tiles=3", "tile=8", "ktiles=2"};
    const uint64_t m = 24, n = 24, k = 16;
    const uint64_t a = m * k * 4, b = k * n * 4, c = m * n * 4, config = 4 * 8;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        round_log log;
        ASSERT_EQ(run_scene("bgemm", kv, 3, specs[s], 3, &log), SCENE_EXIT_OK);
        free(log.first);
        ASSERT_EQ(log.rounds, 3);
        ASSERT(log.identical);
        for (int r = 0; r < 3; r++) {
            ASSERT_UEQ(log.h2d[r], a + b + c + config);
            ASSERT_UEQ(log.d2h[r], c);
        }
    }
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

TEST(unknown_and_malformed_params_are_rejected)
{
    const scene *s = scene_find("vector_add");
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    hg_err err;
    ASSERT_EQ(scene_param_set(s, params, "bogus=1", &err), HG_ENOTFOUND);
    ASSERT_STR_CONTAINS(err.msg, "bogus");
    ASSERT_EQ(scene_param_set(s, params, "n=12x", &err), HG_EINVAL);
    ASSERT_EQ(scene_param_set(s, params, "n=", &err), HG_EINVAL);
    ASSERT_EQ(scene_param_set(s, params, "=5", &err), HG_EINVAL);
    ASSERT_EQ(scene_param_set(s, params, "n", &err), HG_EINVAL);
    ASSERT_EQ(scene_param_set(s, params, "n=99999999999999999999999", &err), HG_EINVAL);
    ASSERT_EQ(scene_param_set(s, params, "n=4096", &err), 0);
    ASSERT_EQ(params[0], 4096);
    ASSERT(scene_find("no_such_scene") == NULL);
    ASSERT(scene_find("bgemm") != NULL);
}

TEST(out_of_range_params_are_rejected)
{
    const scene *s = scene_find("bgemm");
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    hg_err err;
    ASSERT_EQ(scene_param_set(s, params, "tile=0", &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "tile");
    ASSERT_EQ(scene_param_set(s, params, "tiles=-3", &err), HG_ERANGE);
    ASSERT_EQ(scene_param_set(s, params, "tiles=100000", &err), HG_ERANGE);
    params[1] = 0; /* past the parser: make() still refuses it */
    scene_case *c = (scene_case *)1;
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT(c == NULL);
}

TEST(runtime_errors_exit_3)
{
    static const char *const bad_specs[] = {"sim:bogus_key=1", "sim:fail_alloc=1",
                                            "sim:fail_copy=2"};
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
