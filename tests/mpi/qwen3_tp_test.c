/*
 * qwen3_tp_test.c: the tensor-parallel decode step (scenes/qwen3/split.c,
 * src/scene/tp.c, tools/hostgraph_tp.c) on 2 and 4 ranks, each with its own
 * sim device, through the scene runner as `run --tp N` drives it:
 *   - in every residency mode, every round's `out` equals the whole step's
 *     (run on the same rank without MPI) within the scene's bf16 tolerance,
 *     is bit for bit the same on every rank, and passes golden;
 *   - a later round of `all` moves exactly this rank's floor each way and
 *     hands MPI 2 x layers x batch x hidden x 4 bytes (two f32 allreduces a
 *     layer);
 *   - an injected allreduce fault on one rank fails the round on every rank,
 *     naming that rank, and the next round passes;
 *   - a golden failure on one rank fails that round's golden on every rank;
 *   - a stop request on one rank stops every rank after the same round.
 * Every rank makes every collective call whatever it saw; assertions come
 * after (an early return on one rank would leave the others waiting).
 */
#include <math.h>

#include "../../scenes/qwen3/qwen3.h"
#include "hostgraph_tp.h"
#include "mpi_fixture.h"
#include "scene/report.h"

enum { ROUNDS = 3 };

static tp_job job;

/* What the rounds left: out's bytes and the stats of each round. */
typedef struct round_log {
    uint16_t *out[ROUNDS];
    size_t numel;
    hg_run_stats s[ROUNDS];
    uint32_t rounds;
    scene_cancel *stop_after; /* requested after round stop_round, if set */
    uint32_t stop_round;
    bool spoil; /* after round 1, overwrite the k_cache host bytes (not through the API) */
} round_log;

/* Overwrites, not through the API, layer 0's first cache block that no
 * sequence uses: no kernel reads it, so only this rank's check sees it. */
static void spoil_free_block(const scene_case *c)
{
    const hg_tensor *kc = &c->args[QA_K_CACHE].tensor, *bt = &c->args[QA_TABLE].tensor;
    const int32_t *table = hg_hostbuf_data(bt->host);
    size_t nb = kc->shape[1], row = kc->shape[2] * kc->shape[3] * kc->shape[4] * 2;
    for (size_t b = 0; b < nb; b++) {
        bool used = false;
        for (size_t i = 0; i < bt->shape[0] * bt->shape[1]; i++)
            used = used || table[i] == (int32_t)b;
        if (!used) {
            memset((char *)hg_hostbuf_data(kc->host) + b * row, 0x7f, row);
            return;
        }
    }
}

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    round_log *log = user;
    if (round < 1 || round > ROUNDS)
        return;
    const hg_tensor *t = &c->args[QA_OUT].tensor;
    log->numel = hg_hostbuf_size(t->host) / 2;
    free(log->out[round - 1]);
    log->out[round - 1] = malloc(log->numel * 2);
    if (log->out[round - 1] != NULL)
        memcpy(log->out[round - 1], hg_hostbuf_data(t->host), log->numel * 2);
    log->s[round - 1] = *s;
    log->rounds = round;
    if (log->stop_after != NULL && round == log->stop_round)
        scene_cancel_request(log->stop_after);
    if (log->spoil && round == 1)
        spoil_free_block(c);
}

static void log_free(round_log *log)
{
    for (int i = 0; i < ROUNDS; i++)
        free(log->out[i]);
}

/* Runs qwen3_decode (params as KEY=VALUE, NULL-ended) for ROUNDS rounds on
 * a fresh device: split over the ranks when tp is set.  The exit code. */
static int run_scene(const char *const *kv, scene_residency mode, const scene_tp *tp,
                     round_log *log, scene_cancel *cancel)
{
    const scene *sc = scene_find("qwen3_decode");
    FILE *null = fopen("/dev/null", "w");
    scene_run_opts o = {.scene = sc,
                        .rounds = ROUNDS,
                        .residency = mode,
                        .device_spec = "sim:cores=2",
                        .quiet = true,
                        .out = null,
                        .err = stderr,
                        .on_round = log_round,
                        .on_round_user = log,
                        .cancel = cancel,
                        .tp = tp};
    scene_params_default(sc, o.params);
    hg_err err;
    for (int i = 0; kv != NULL && kv[i] != NULL; i++)
        scene_param_set(sc, o.params, kv[i], &err);
    int rc = scene_run(&o);
    fclose(null);
    return rc;
}

/* The scene's tolerance at `layers` layers (qwen3_decode.c). */
static double tolerance(size_t layers)
{
    double t = 0.006 * (double)layers;
    return t > 0.03 ? t : 0.03;
}

/* The largest |a - b| beyond t + t |b| over n bf16 values; 0 when within. */
static double worst_excess(const uint16_t *a, const uint16_t *b, size_t n, double t)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = hg_bf16_to_f32(a[i]), y = hg_bf16_to_f32(b[i]);
        double excess = fabs(x - y) - (t + t * fabs(y));
        if (isnan(excess) || excess > worst)
            worst = isnan(excess) ? INFINITY : excess;
    }
    return worst;
}

/* 1 on every rank when out of every round is the same bytes as rank 0's. */
static int same_on_every_rank(const round_log *log)
{
    int same = 1;
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = log->numel;
        uint16_t *root = malloc(n * 2 + 2);
        if (root != NULL && log->out[r] != NULL)
            memcpy(root, log->out[r], n * 2);
        MPI_Bcast(root, (int)n * 2, MPI_BYTE, 0, MPI_COMM_WORLD);
        same = same && root != NULL && log->out[r] != NULL && memcmp(root, log->out[r], n * 2) == 0;
        free(root);
    }
    int all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* Mode m's check: both runs and the cross-rank comparison (collectives)
 * first, then the assertions, which return from here only: every rank
 * goes on to the next mode. */
static void check_mode(scene_residency m)
{
    const size_t layers = 2, batch = 16, hidden = 64; /* the tiny preset */
    round_log whole = {0}, split = {0};
    int whole_rc = run_scene(NULL, m, NULL, &whole, NULL);
    int split_rc = run_scene(NULL, m, &job.tp, &split, NULL);
    int same = same_on_every_rank(&split);
    double excess[ROUNDS] = {0};
    for (int r = 0; r < ROUNDS; r++)
        excess[r] = whole.out[r] == NULL || split.out[r] == NULL
                        ? INFINITY
                        : worst_excess(split.out[r], whole.out[r], split.numel, tolerance(layers));
    log_free(&whole);
    log_free(&split);
    ASSERT_EQ(whole_rc, SCENE_EXIT_OK);
    ASSERT_EQ(split_rc, SCENE_EXIT_OK);
    ASSERT_EQ(split.rounds, ROUNDS);
    ASSERT_EQ(split.numel, batch * hidden);
    ASSERT_EQ(same, 1);
    for (int r = 0; r < ROUNDS; r++) {
        if (excess[r] > 0)
            TEST_FAIL_("mode %s round %d: out off the whole step's by %g past tolerance",
                       scene_residency_name(m), r + 1, excess[r]);
        /* two allreduces a layer of batch x hidden f32 */
        ASSERT_EQ(split.s[r].net_bytes, 2 * layers * batch * hidden * 4);
        ASSERT_EQ(whole.s[r].net_bytes, 0);
    }
}

/* tp=2 and tp=4 (the job's size) against tp=1 on the tiny preset (2 layers,
 * batch 16: one row tile), in every residency mode. */
TEST(split_step_equals_the_whole_step_in_every_mode)
{
    for (int m = 0; m < SCENE_RESIDENCY_COUNT; m++)
        check_mode((scene_residency)m);
}

/* One layer, one sequence: a later round of `all` uploads the K and V rows
 * the scene restores and copies back those rows and `out`, nothing else
 * (the exact floor: a single row per cache lies alone, as in
 * tests/scene/backends_scene_test.c).  A rank holds 8/tp KV heads of 16:
 * a row is 8/tp x 16 x 2 bytes (tp=2: 128, tp=4: 64); up = 2 rows, down =
 * 2 rows + out's 64 bf16 = 128 bytes; MPI gets 2 x 1 layer x 1 x 64 x 4 =
 * 512 bytes. */
TEST(later_rounds_move_each_ranks_floor)
{
    const char *kv[] = {"layers=1", "batch=1", NULL};
    const uint64_t row = 8 / job.tp.size * 16 * 2, up = 2 * row, down = up + 64 * 2;
    round_log log = {0};
    int rc = run_scene(kv, SCENE_RESIDENCY_ALL, &job.tp, &log, NULL);
    ASSERT_EQ(rc, SCENE_EXIT_OK);
    ASSERT_EQ(log.rounds, ROUNDS);
    for (int r = 1; r < ROUNDS; r++) {
        ASSERT_EQ(log.s[r].h2d_bytes, up);
        ASSERT_EQ(log.s[r].d2h_bytes, down);
        ASSERT_EQ(log.s[r].device_allocs, 0);
        ASSERT_EQ(log.s[r].net_bytes, 2 * 1 * 1 * 64 * 4);
    }
    log_free(&log);
}

/* A stop request that reaches only the last rank, after round 2, stops
 * every rank after round 2: the same rounds everywhere, none waiting. */
TEST(a_stop_on_one_rank_stops_every_rank_after_the_same_round)
{
    scene_cancel cancel;
    scene_cancel_init(&cancel);
    round_log log = {0};
    if (job.tp.rank == job.tp.size - 1) {
        log.stop_after = &cancel;
        log.stop_round = 2;
    }
    int rc = run_scene(NULL, SCENE_RESIDENCY_ALL, &job.tp, &log, &cancel);
    scene_cancel_destroy(&cancel);
    log_free(&log);
    ASSERT_EQ(rc, SCENE_EXIT_INTERRUPTED);
    ASSERT_EQ(log.rounds, 2);
}

/* Golden fails on the last rank alone (a free block of its cache share
 * spoilt after round 1: the scene restores only the rows a round wrote, and
 * no kernel reads the block, so the other ranks' outputs stay right): the
 * round fails on every rank, and so does every rank's exit code. */
TEST(a_golden_failure_on_one_rank_fails_the_round_on_every_rank)
{
    round_log log = {0};
    log.spoil = job.tp.rank == job.tp.size - 1;
    int rc = run_scene(NULL, SCENE_RESIDENCY_OFF, &job.tp, &log, NULL);
    log_free(&log);
    ASSERT_EQ(log.rounds, ROUNDS);
    ASSERT_EQ(rc, SCENE_EXIT_GOLDEN);
}

/* One rank's share, on its own runner attached as the scene runner does. */
typedef struct share {
    hg_device *dev;
    hg_runner *r;
    scene_case *c;
    scene_snapshot initial;
} share;

static int share_open(share *s)
{
    memset(s, 0, sizeof *s);
    const scene *sc = scene_find("qwen3_decode");
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(sc, params);
    hg_err err;
    err_clear(&err);
    char msg[256];
    int rc = hg_device_open("sim:cores=2", &s->dev, msg, sizeof msg);
    if (rc == 0)
        rc = hg_runner_open(s->dev, &s->r);
    if (rc == 0)
        rc = scene_case_make_tp(sc, params, &job.tp, &s->c, &err);
    if (rc == 0)
        rc = scene_snapshot_take(&s->initial, s->c);
    if (rc == 0)
        rc = job.tp.attach(job.tp.user, s->r, &err);
    return rc;
}

static void share_close(share *s)
{
    job.tp.detach(job.tp.user);
    scene_snapshot_free(&s->initial);
    scene_case_destroy(s->c);
    hg_runner_close(s->r);
    hg_device_close(s->dev);
}

/* A round from the case as made: 0, or the run's code; *pass: golden. */
static int share_round(share *s, bool *pass)
{
    scene_check_result res;
    int rc = scene_snapshot_restore(&s->initial, s->c);
    if (rc == 0)
        rc = hg_runner_run(s->r, &s->c->callable, s->c->args, s->c->nargs, NULL);
    *pass = rc == 0 && scene_case_check(s->c, &res);
    return rc;
}

TEST(a_fault_on_one_rank_fails_every_rank_naming_it_and_the_next_round_works)
{
    share s;
    int rc = share_open(&s);
    int ok = rc == 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        share_close(&s);
        ASSERT(0 && "setup failed on some rank");
    }
    bool pass1 = false, pass2 = true, pass3 = false;
    int rc1 = share_round(&s, &pass1);
    const uint32_t bad = job.tp.size - 1;
    if (job.tp.rank == bad)
        hg_mpi_inject_fault(job.mpi, 2); /* layer 0's second allreduce (down) */
    int rc2 = share_round(&s, &pass2);
    char msg[512], want[64];
    snprintf(msg, sizeof msg, "%s", hg_runner_errmsg(s.r));
    snprintf(want, sizeof want, "rank %u of %u failed", bad, job.tp.size);
    int rc3 = share_round(&s, &pass3);
    share_close(&s);
    ASSERT_EQ(rc1, 0);
    ASSERT(pass1);
    ASSERT(rc2 != 0);
    ASSERT(!pass2);
    if (strstr(msg, want) == NULL)
        TEST_FAIL_("rank %u: the failed round says '%s', want '%s'", job.tp.rank, msg, want);
    ASSERT_EQ(rc3, 0);
    ASSERT(pass3);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE || tp_job_init(&job, MPI_COMM_WORLD) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    job.timeout_s = 60.0; /* a hang aborts the job instead of stalling ctest */
    int failed = RUN_TESTS(), any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
