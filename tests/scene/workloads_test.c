/*
 * workloads_test.c: the real-workload scenes at their tiny presets, as a
 * user of `hostgraph run` relies on them: paged_attention and qwen3_decode
 * pass golden round after round on untyped and typed cores with identical
 * outputs and exactly the bytes their args imply; the graph has the shape
 * the orchestration promises; the compact cache check catches a changed byte
 * anywhere and names its index; bad inputs and bad params are refused with
 * the param or arg named (tests/kernels/paths_test.c tests the kernels'
 * paths).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../scenes/kernels/kernels.h"
#include "../../scenes/qwen3/qwen3.h"
#include "scene/scene.h"
#include "testlib.h"

static const char *const specs[] = {"sim:cores=1", "sim:cube=1,vector=2", "sim"};

/* What on_round saw. */
typedef struct round_log {
    uint32_t rounds, tasks;
    uint64_t h2d, d2h;
    bool bytes_same, outputs_same;
    void *first; /* round 1's checked output */
    size_t first_len;
} round_log;

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    round_log *log = user;
    const hg_hostbuf *hb = c->args[c->checks[0].arg].tensor.host;
    log->rounds = round;
    if (round == 1) {
        log->h2d = s->h2d_bytes;
        log->d2h = s->d2h_bytes;
        log->tasks = s->tasks;
        log->bytes_same = log->outputs_same = true;
        log->first_len = hg_hostbuf_size(hb);
        log->first = malloc(log->first_len + 1);
        memcpy(log->first, hg_hostbuf_data(hb), log->first_len);
        return;
    }
    log->bytes_same = log->bytes_same && s->h2d_bytes == log->h2d && s->d2h_bytes == log->d2h;
    log->outputs_same =
        log->outputs_same && memcmp(log->first, hg_hostbuf_data(hb), log->first_len) == 0;
}

/* Makes the case for `name` with params "k=v"...; NULL on failure. */
static scene_case *make_case(const char *name, const char *const *kv, uint32_t nkv, int64_t *params)
{
    const scene *s = scene_find(name);
    scene_case *c = NULL;
    hg_err err;
    err_clear(&err);
    scene_params_default(s, params);
    for (uint32_t i = 0; i < nkv; i++) {
        if (scene_param_set(s, params, kv[i], &err) != 0) {
            printf("     %s\n", err.msg);
            return NULL;
        }
    }
    if (scene_case_make(s, params, &c, &err) != 0)
        printf("     %s\n", err.msg);
    return c;
}

/* Bytes that go in (IN, INOUT) and come back each round: copy-back moves
 * only what tasks wrote, so OUT args whole (every element is written) and,
 * of qwen3_decode's INOUT caches, exactly the K and V row each sequence
 * writes per layer: the kv_write tasks' OUT views must be those rows. */
static void arg_bytes(const scene_case *c, uint64_t *in, uint64_t *out)
{
    *in = *out = 0;
    for (uint32_t i = 0; i < c->nargs; i++) {
        const hg_arg *a = &c->args[i];
        if (a->dir == HG_SCALAR)
            continue;
        uint64_t bytes = hg_hostbuf_size(a->tensor.host);
        *in += a->dir != HG_OUT ? bytes : 0;
        *out += a->dir == HG_OUT ? bytes : 0;
    }
    if (c->scene == scene_find("qwen3_decode")) {
        const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
        uint64_t row = kc->shape[3] * kc->shape[4] * 2, batch = c->args[QA_SLOTS].tensor.shape[0];
        *out += 2 * kc->shape[0] * batch * row;
    }
}

/* Runs an already made case for `rounds` on `spec`; returns the exit code
 * and what stderr said. */
static int run_case(scene_case *c, const char *spec, uint32_t rounds, round_log *log, char *errtext,
                    size_t errlen)
{
    scene_run_opts o = {.scene = c->scene,
                        .rounds = rounds,
                        .quiet = true,
                        .on_round = log_round,
                        .on_round_user = log};
    hg_device *dev = NULL;
    memset(log, 0, sizeof *log);
    memcpy(o.params, c->params, sizeof o.params);
    if (hg_device_open(spec, &dev, NULL, 0) != 0)
        return -1;
    o.out = fopen("/dev/null", "w");
    o.err = tmpfile();
    int rc = scene_run_case(&o, dev, c);
    rewind(o.err);
    size_t n = fread(errtext, 1, errlen - 1, o.err);
    errtext[n] = '\0';
    fclose(o.out);
    fclose(o.err);
    hg_device_close(dev);
    return rc;
}

/* Every spec: golden passes each round, outputs identical, exact bytes. */
static void expect_passes(const char *name, const char *const *kv, uint32_t nkv, uint32_t rounds)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case(name, kv, nkv, params);
    ASSERT(c != NULL);
    uint64_t in, out;
    arg_bytes(c, &in, &out);
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        round_log log;
        char err[1024];
        int rc = run_case(c, specs[s], rounds, &log, err, sizeof err);
        free(log.first);
        if (rc != SCENE_EXIT_OK)
            printf("     %s on %s: %s", name, specs[s], err);
        ASSERT_EQ(rc, SCENE_EXIT_OK);
        ASSERT_UEQ(log.rounds, rounds);
        ASSERT(log.bytes_same && log.outputs_same);
        ASSERT_UEQ(log.h2d, in);
        ASSERT_UEQ(log.d2h, out);
    }
    scene_case_destroy(c);
}

TEST(paged_attention_tiny_passes_every_round)
{
    expect_passes("paged_attention", NULL, 0, 3);
}

TEST(paged_attention_other_shapes_pass)
{
    /* GQA 2:1, chunks of 3 blocks of 4 tokens, a last block partly full */
    static const char *const kv[] = {"batch=7",      "heads=6",    "kv_heads=3",    "head_dim=24",
                                     "block_size=4", "context=29", "chunk_blocks=3"};
    expect_passes("paged_attention", kv, 7, 2);
    static const char *const one[] = {"batch=1", "context=1", "kv_heads=4"}; /* MHA, 1 token */
    expect_passes("paged_attention", one, 3, 2);
}

TEST(qwen3_tiny_passes_every_round)
{
    expect_passes("qwen3_decode", NULL, 0, 3);
}

TEST(qwen3_two_row_tiles_three_layers_pass)
{
    /* 20 sequences: a full tile row of 16 and one of 4 */
    static const char *const kv[] = {"batch=20", "layers=3", "context=30", "chunk_blocks=1"};
    expect_passes("qwen3_decode", kv, 4, 2);
}

/* Tasks qwen3_decode's orchestration promises (orch.c), from the case. */
static uint64_t qwen3_expected_tasks(const scene_case *c)
{
    const hg_tensor *wq = &c->args[QA_WQ].tensor, *wk = &c->args[QA_WK].tensor;
    const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
    size_t layers = wq->shape[0], h = wq->shape[2], d = c->args[QA_Q_NORM].tensor.shape[1];
    size_t hd = wq->shape[1], kvd = wk->shape[1], in = c->args[QA_W_GATE].tensor.shape[1];
    size_t batch = c->args[QA_HIDDEN].tensor.shape[0], block = kc->shape[2];
    size_t tb = (size_t)c->args[QA_TILE_BYTES].scalar, chunk = (size_t)c->args[QA_CHUNK].scalar;
    size_t nq = hd / qwen3_tile_width(hd, h, d, tb), nkv = kvd / qwen3_tile_width(kvd, h, d, tb);
    size_t no = h / qwen3_tile_width(h, hd, 1, tb), ng = in / qwen3_tile_width(in, h, 1, tb);
    size_t nd = h / qwen3_tile_width(h, in, 1, tb);
    const int32_t *lens = scene_case_data(c, QA_SEQ_LENS);
    uint64_t per_layer = 0;
    for (size_t r0 = 0; r0 < batch; r0 += QWEN3_TILE_ROWS) {
        size_t rows = batch - r0 < QWEN3_TILE_ROWS ? batch - r0 : QWEN3_TILE_ROWS;
        /* rmsnorm, add_rmsnorm and residual: a task per half of the rows */
        uint64_t halves = rows >= 2 ? 2 : 1;
        /* the last QWEN3_TAIL_TILES tiles of v, o, up and down: one task
         * more each, where the rows over 2, up to a multiple of 4, are fewer
         * than the rows */
        bool split = ((rows + 1) / 2 + 3) / 4 * 4 < rows;
        size_t t = QWEN3_TAIL_TILES;
        uint64_t tails =
            split ? (nkv < t ? nkv : t) + (no < t ? no : t) + (ng < t ? ng : t) + (nd < t ? nd : t)
                  : 0;
        /* rmsnorm, q k v, two norm-ropes, add_rmsnorm, o, gate, up, silu, down, residual */
        per_layer += 3 * halves + nq + 2 * nkv + nq + nkv + no + 3 * ng + nd + tails;
    }
    for (size_t b = 0; b < batch; b++) {
        size_t blocks = ((size_t)lens[b] + block - 1) / block;
        per_layer += 1 + 3 * ((blocks + chunk - 1) / chunk) + 1; /* kv_write, chunks, merge */
    }
    return layers * per_layer;
}

TEST(qwen3_graph_has_a_task_per_kernel_per_tile)
{
    static const char *const kv[] = {"batch=20", "layers=2"};
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", kv, 2, params);
    ASSERT(c != NULL);
    round_log log;
    char err[1024];
    int rc = run_case(c, "sim:cores=2", 1, &log, err, sizeof err);
    free(log.first);
    uint64_t want = qwen3_expected_tasks(c);
    scene_case_destroy(c);
    ASSERT_EQ(rc, SCENE_EXIT_OK);
    ASSERT_UEQ(log.tasks, want);
    ASSERT_UGT(want, 2 * 100); /* tens of tasks per layer per tile row, and attention */
}

/* Runs one round of c's callable on a fresh device, outside the scene
 * runner, so the case's buffers hold that round's outputs. */
static int run_once(scene_case *c)
{
    hg_device *dev = NULL;
    hg_runner *run = NULL;
    int rc = hg_device_open("sim:cores=2", &dev, NULL, 0);
    if (rc == 0)
        rc = hg_runner_open(dev, &run);
    if (rc == 0)
        rc = hg_runner_run(run, &c->callable, c->args, c->nargs, NULL);
    hg_runner_close(run);
    hg_device_close(dev);
    return rc;
}

/* True if element i of a cache lies in a row the step writes. */
static bool written(const scene_case *c, size_t i)
{
    const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
    size_t row = kc->shape[3] * kc->shape[4], per_layer = kc->shape[1] * kc->shape[2] * row;
    const int32_t *slots = scene_case_data(c, QA_SLOTS);
    for (size_t b = 0; b < c->args[QA_SLOTS].tensor.shape[0]; b++) {
        if ((i % per_layer) / row == (size_t)slots[b])
            return true;
    }
    return false;
}

/* Changes element i of arg `arg` (bf16) by `delta`, checks, puts it back. */
static scene_check_result check_changed(scene_case *c, uint32_t arg, size_t i, float delta)
{
    uint16_t *data = scene_case_data(c, arg), saved = data[i];
    data[i] =
        delta == 0.0f ? (uint16_t)(saved ^ 1u) : hg_f32_to_bf16(hg_bf16_to_f32(saved) + delta);
    scene_check_result res;
    scene_case_check(c, &res);
    data[i] = saved;
    return res;
}

TEST(qwen3_check_finds_any_changed_cache_element)
{
    test_rng r = test_seed(77);
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", NULL, 0, params);
    ASSERT(c != NULL);
    ASSERT_OK(run_once(c));
    scene_check_result res;
    ASSERT(scene_case_check(c, &res));
    size_t numel = hg_hostbuf_size(c->args[QA_K_CACHE].tensor.host) / 2;
    for (int trial = 0; trial < 20; trial++) {
        uint32_t arg = trial % 2 ? QA_V_CACHE : QA_K_CACHE;
        size_t i = test_rand64(&r) % numel;
        bool in_row = written(c, i);
        /* an unwritten element off by its lowest bit; a written one by 0.5 */
        res = check_changed(c, arg, i, in_row ? 0.5f : 0.0f);
        ASSERT(!res.pass);
        ASSERT_STR_EQ(res.output, c->args[arg].name);
        ASSERT_UEQ(res.first_bad, i);
    }
    uint16_t *out = scene_case_data(c, QA_OUT);
    out[17] = hg_f32_to_bf16(hg_bf16_to_f32(out[17]) + 0.5f);
    bool pass = scene_case_check(c, &res);
    scene_case_destroy(c);
    ASSERT(!pass);
    ASSERT_STR_EQ(res.output, "out");
    ASSERT_UEQ(res.first_bad, 17);
}

/* Runs qwen3_decode at its defaults with one IN element of `arg` (i32)
 * replaced; wants exit 3 and `says` in the error. */
static void expect_bad_input(uint32_t arg, size_t i, int32_t value, const char *says)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", NULL, 0, params);
    ASSERT(c != NULL);
    ASSERT_OK(hg_hostbuf_write(c->args[arg].tensor.host, i * 4, &value, 4));
    round_log log;
    char err[1024];
    int rc = run_case(c, "sim:cores=1", 1, &log, err, sizeof err);
    free(log.first);
    scene_case_destroy(c);
    ASSERT_EQ(rc, SCENE_EXIT_RUNTIME);
    ASSERT_STR_CONTAINS(err, says);
}

TEST(qwen3_orchestration_names_bad_host_inputs)
{
    expect_bad_input(QA_SEQ_LENS, 3, 0, "arg 'seq_lens': sequence 3 has 0 tokens");
    expect_bad_input(QA_SEQ_LENS, 2, 1000, "arg 'seq_lens': sequence 2 has 1000 tokens");
    expect_bad_input(QA_SLOTS, 5, -2, "arg 'slot_mapping': sequence 5 has slot -2");
    expect_bad_input(QA_TABLE, 0, 1 << 30, "arg 'block_table': sequence 0 block 0");
}

TEST(named_params_and_cross_param_limits)
{
    const scene *s = scene_find("qwen3_decode");
    int64_t params[SCENE_MAX_PARAMS];
    hg_err err;
    scene_params_default(s, params);
    ASSERT_STR_EQ(scene_param_value_name(&s->params[0], params[0]), "tiny");
    ASSERT_OK(scene_param_set(s, params, "preset=real", &err));
    ASSERT_STR_EQ(scene_param_value_name(&s->params[0], params[0]), "real");
    ASSERT_EQ(scene_param_set(s, params, "preset=huge", &err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err.msg, "'huge' is not one of tiny, real");
    ASSERT_EQ(scene_param_set(s, params, "preset=1", &err), HG_EINVAL); /* names only */
    ASSERT_EQ(scene_param_set(s, params, "batch=0", &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'batch': 0 is outside [1, 256]");
    ASSERT(scene_param_value_name(&scene_find("bgemm")->params[0], 4) == NULL);

    scene_case *c = (scene_case *)1;
    static const char *const rope[] = {"context=70"}; /* tiny's rope tables have 64 rows */
    ASSERT((c = make_case("qwen3_decode", rope, 1, params)) == NULL);
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'context': 70 needs rope tables of 71 rows");
    static const char *const huge[] = {"preset=real", "layers=40", "batch=256", "context=40000",
                                       "rope_len=40960"};
    ASSERT((c = make_case("qwen3_decode", huge, 5, params)) == NULL);
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'layers': 40 layers at batch 256");
    ASSERT_STR_CONTAINS(err.msg, "GiB");
    static const char *const gqa[] = {"heads=4", "kv_heads=3"};
    ASSERT((c = make_case("paged_attention", gqa, 2, params)) == NULL);
    ASSERT_EQ(scene_case_make(scene_find("paged_attention"), params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'kv_heads': 3 does not divide heads 4");
}

/* HG_KERNELS=portable (ctest runs this file once more with it set) forces
 * the portable paths from the first kernel call on, as any path the CPU has
 * is forced; unset, dispatch picks the best path the CPU has. */
TEST(hg_kernels_env_picks_the_path)
{
    const char *env = getenv("HG_KERNELS");
    kern_force_auto();
    kern_isa want = kern_isa_missing(KERN_AVX512BF16) == NULL ? KERN_AVX512BF16
                    : kern_isa_missing(KERN_AVX2) == NULL     ? KERN_AVX2
                                                              : KERN_PORTABLE;
    for (int p = 0; env != NULL && p < KERN_ISA_COUNT; p++) {
        if (strcmp(env, kern_isa_name((kern_isa)p)) == 0 && kern_isa_missing((kern_isa)p) == NULL)
            want = (kern_isa)p;
    }
    ASSERT_STR_EQ(kern_path(), kern_isa_name(want));
    ASSERT_EQ(kern_use_avx512bf16(), want == KERN_AVX512BF16);
}

TEST(scenes_pass_on_the_portable_kernels_too)
{
    kern_force_portable(true);
    ASSERT_STR_EQ(kern_path(), "portable");
    static const char *const kv[] = {"batch=5"};
    expect_passes("qwen3_decode", kv, 1, 2);
    expect_passes("paged_attention", NULL, 0, 2);
    kern_force_portable(false);
}

int main(void)
{
    return RUN_TESTS();
}
