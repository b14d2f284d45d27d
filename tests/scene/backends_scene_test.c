/*
 * backends_scene_test.c: every scene, in every residency mode (`all` also
 * with verify), on every backend of test_backends[] (test_device.h; opencl
 * prints "skipped: no OpenCL platform" where there is none): golden passes
 * every round; later rounds of `all` move exactly the bytes floor (up: the
 * bytes the host changed; down: the bytes the graph wrote that the host
 * reads) and allocate nothing on the device; and no round after the first
 * builds a program (an OpenCL device builds each program once).
 *
 * One device per backend serves every run, as one `hostgraph` process's
 * device would, so PoCL compiles each program once here too; each run gets
 * a fresh case (an INOUT arg's first contents are what golden assumes).
 * Small params keep it quick, under ASan and TSan too (there, PoCL's first
 * build of each program is most of the time; the runs after it are cheap).
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "../../scenes/kernels/kernels.h"
#include "scene/scene.h"
#include "test_device.h"
#include "testlib.h"

enum { ROUNDS = 3 };

typedef struct scene_case_spec {
    const char *scene;
    const char *params[4];
    uint64_t up, down; /* a later round's floor each way, in bytes */
} scene_case_spec;

/* The floors by hand: vector_add and paged_attention only read their IN
 * args (unchanged) and write an OUT: c (5000 f32), out (5 x 4 x D f32).
 * bgemm's C (48 x 48 or 96 x 96 f32) is INOUT, restored every round.  qwen3_decode
 * at 1 layer and 1 sequence writes one K and one V row (the tiny preset's
 * 8 KV heads x head_dim 16 = 128 bf16 each) into its caches, which the
 * scene restores, and out (hidden 64 bf16); more sequences'
 * rows lie closer than the upload cost rule's gap (stage.h), so they go up
 * as one range with the gaps in it, and the floor is no longer exact. */
static const scene_case_spec cases[] = {
    {"vector_add", {"n=5000", "tile=768"}, 0, 5000 * 4},
    {"bgemm", {"grid=2", "tile=24", "grid_k=3"}, 48 * 48 * 4, 48 * 48 * 4},
    /* tiles of whole 16 x 16 blocks: the OpenCL GEMM's full-block path at
     * 9 block positions (24 has one, and cut blocks) */
    {"bgemm", {"grid=2", "tile=48", "grid_k=1"}, 96 * 96 * 4, 96 * 96 * 4},
    {"paged_attention", {NULL}, 0, 5 * 4 * 16 * 4},
    /* D not a multiple of 8 (QK's scalar path), 5-token blocks, 3 per chunk */
    {"paged_attention", {"head_dim=12", "block_size=5", "chunk_blocks=3"}, 0, 5 * 4 * 12 * 4},
    {"qwen3_decode", {"layers=1", "batch=1"}, 2 * 128 * 2, 2 * 128 * 2 + 64 * 2},
};

typedef struct round_log {
    const hg_device *dev;
    hg_run_stats s[ROUNDS];
    uint64_t allocs[ROUNDS], builds[ROUNDS]; /* device-wide, after each round */
    uint32_t rounds;
} round_log;

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    (void)c;
    round_log *log = user;
    if (round < 1 || round > ROUNDS)
        return;
    hg_device_counters dc;
    hg_device_counters_get(log->dev, &dc);
    log->s[round - 1] = *s;
    log->allocs[round - 1] = dc.allocs;
    log->builds[round - 1] = device_debug_program_builds(log->dev);
    log->rounds = round;
}

/* Runs one case in one mode on dev; the scene's exit code. */
static int run_case(hg_device *dev, const char *spec, const scene_case_spec *cs,
                    scene_residency mode, bool verify, round_log *log)
{
    const scene *sc = scene_find(cs->scene);
    scene_run_opts o = {.scene = sc,
                        .rounds = ROUNDS,
                        .residency = mode,
                        .verify = verify,
                        .device_spec = spec,
                        .quiet = true,
                        .on_round = log_round,
                        .on_round_user = log};
    hg_err err = {0};
    scene_case *c = NULL;
    memset(log, 0, sizeof *log);
    log->dev = dev;
    scene_params_default(sc, o.params);
    for (int i = 0; i < 4 && cs->params[i] != NULL; i++) {
        if (scene_param_set(sc, o.params, cs->params[i], &err) != 0)
            return SCENE_EXIT_USAGE;
    }
    if (scene_case_make(sc, o.params, &c, &err) != 0)
        return SCENE_EXIT_RUNTIME;
    o.out = fopen("/dev/null", "w");
    o.err = stderr;
    int rc = o.out == NULL ? SCENE_EXIT_RUNTIME : scene_run_case(&o, dev, c);
    if (o.out != NULL)
        fclose(o.out);
    scene_case_destroy(c);
    return rc;
}

/* What later rounds of `all` must show. */
static void check_all_mode(const char *backend, const scene_case_spec *cs, const round_log *log)
{
    for (uint32_t r = 1; r < ROUNDS; r++) {
        const hg_run_stats *s = &log->s[r];
        if (s->h2d_bytes != cs->up || s->d2h_bytes != cs->down || s->device_allocs != 0 ||
            log->allocs[r] != log->allocs[0] || log->builds[r] != log->builds[0])
            TEST_FAIL_("%s on %s, all, round %u: up %llu (floor %llu), down %llu (floor %llu), "
                       "%llu run allocations, %llu device allocations and %llu program builds "
                       "since round 1 (want 0 each)",
                       cs->scene, backend, r + 1, (unsigned long long)s->h2d_bytes,
                       (unsigned long long)cs->up, (unsigned long long)s->d2h_bytes,
                       (unsigned long long)cs->down, (unsigned long long)s->device_allocs,
                       (unsigned long long)(log->allocs[r] - log->allocs[0]),
                       (unsigned long long)(log->builds[r] - log->builds[0]));
    }
}

static void run_backend(const char *backend)
{
    bool skipped;
    hg_device *dev = test_backend_open(backend, NULL, &skipped);
    if (skipped)
        return;
    ASSERT(dev != NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* every mode, then `all` again with verify */
        for (int m = 0; m <= SCENE_RESIDENCY_COUNT; m++) {
            scene_residency mode =
                m < SCENE_RESIDENCY_COUNT ? (scene_residency)m : SCENE_RESIDENCY_ALL;
            round_log log;
            int rc = run_case(dev, backend, &cases[i], mode, m == SCENE_RESIDENCY_COUNT, &log);
            if (rc != SCENE_EXIT_OK || log.rounds != ROUNDS) {
                TEST_FAIL_("%s on %s, %s%s: exit %d after %u rounds", cases[i].scene, backend,
                           scene_residency_name(mode),
                           m == SCENE_RESIDENCY_COUNT ? " --verify" : "", rc, log.rounds);
                continue;
            }
            if (mode == SCENE_RESIDENCY_ALL)
                check_all_mode(backend, &cases[i], &log);
        }
    }
    hg_device_close(dev);
}

TEST(every_scene_passes_golden_in_every_mode_on_the_sim)
{
    run_backend("sim");
}

TEST(every_scene_passes_golden_in_every_mode_on_opencl)
{
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        if (strcmp(test_backends[b], "sim") != 0)
            run_backend(test_backends[b]);
    }
}

/* qwen3_decode with a full row tile of 16 sequences and one of 4: its
 * row-wise kernels and each phase's last projection tiles go as tasks on
 * half the rows (orch.c), views that slice rows out of tiled scratch, so
 * every backend's kernels must read and write at those offsets.  Golden on
 * every backend, in `off` and in `all` (its floor is not exact: above). */
TEST(qwen3_half_row_tasks_pass_golden_on_every_backend)
{
    static const scene_case_spec cs = {"qwen3_decode", {"layers=2", "batch=20"}, 0, 0};
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        bool skipped;
        hg_device *dev = test_backend_open(test_backends[b], NULL, &skipped);
        if (skipped)
            continue;
        ASSERT(dev != NULL);
        scene_residency modes[2] = {SCENE_RESIDENCY_OFF, SCENE_RESIDENCY_ALL};
        for (int m = 0; m < 2; m++) {
            round_log log;
            int rc = run_case(dev, test_backends[b], &cs, modes[m], false, &log);
            if (rc != SCENE_EXIT_OK || log.rounds != ROUNDS)
                TEST_FAIL_("qwen3_decode batch=20 on %s, %s: exit %d after %u rounds",
                           test_backends[b], scene_residency_name(modes[m]), rc, log.rounds);
        }
        printf("     %s: off and all pass golden\n", test_backends[b]);
        hg_device_close(dev);
    }
}

/* A shared kernel's picker gives a record with no OpenCL slot where no
 * OpenCL kernel fits (a dtype it has no entry for, more blocks than a chunk
 * takes), so an OpenCL runner refuses the task at submit, naming the kernel
 * and the device, instead of running a kernel on bytes of another type. */
TEST(a_kernel_the_pickers_cannot_fit_has_no_opencl_slot)
{
    ASSERT(kern_proj_for(HG_F32)->cl_source != NULL);
    ASSERT(kern_proj_for(HG_BF16)->cl_source != NULL);
    ASSERT(kern_proj_for(HG_I32)->cl_source == NULL);
    ASSERT(kern_attn_qk_for(HG_BF16, 1)->cl_source != NULL);
    ASSERT(kern_attn_qk_for(HG_F32, KERN_ATTN_MAX_BLOCKS)->cl_source != NULL);
    ASSERT(kern_attn_qk_for(HG_F16, 1)->cl_source == NULL);
    ASSERT(kern_attn_qk_for(HG_F32, KERN_ATTN_MAX_BLOCKS + 1)->cl_source == NULL);
    ASSERT(kern_attn_pv_for(0)->cl_source == NULL);
    ASSERT_STR_EQ(kern_attn_pv_for(3)->cl_entry, "attn_pv_3");
    ASSERT_STR_EQ(kern_attn_qk_for(HG_BF16, 2)->cl_entry, "attn_qk_bf16_2");
    ASSERT_STR_EQ(kern_attn_qk_for(HG_BF16, 2)->name, "attn_qk");
}

int main(void)
{
    return RUN_TESTS();
}
