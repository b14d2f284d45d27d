/*
 * replay_reuse_test.c: what a replayed run reuses from its recording besides
 * the graph: the copy-back plan (stage_backplan), lent instead of noting and
 * planning every written view again.  Each test fails when the reuse is
 * wrong: per-task work of a replayed run is counted (never timed), and the
 * bytes, copies and copied-back ranges of replayed rounds are compared with
 * an orchestrating runner's through host writes between rounds, written
 * ranges the host scribbled over, gaps no task writes, resident uploads
 * that come before copy-back's ranges, and the decide hook.
 */
#include <string.h>

#include "hostgraph.h"
#include "run/run.h"
#include "testlib.h"

#define TILE 16 /* f32 elements a task writes */

/* out = in * 2 + 1 over the task's tile. */
static int k_tile(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[1].shape[0]; i++)
        out[i] = in[i] * 2.0f + 1.0f;
    return 0;
}

static const hg_kernel K_TILE = {"tile", k_tile, HG_CORE_VECTOR, NULL, NULL};

typedef struct shape_ctx {
    uint32_t tiles; /* tasks per written arg */
    uint32_t every; /* a task for every `every`-th tile (1: all; 2: gaps between) */
    uint32_t outs;  /* written args: 1 or 2 (out, out2) */
} shape_ctx;

/* Task t reads tile t of in and writes tile t of each written arg. */
static int orch_tiles(hg_orch *o, void *user)
{
    const shape_ctx *c = user;
    const hg_arg *in;
    hg_orch_arg(o, 0, &in);
    for (uint32_t w = 0; w < c->outs; w++) {
        const hg_arg *out;
        hg_orch_arg(o, 1 + w, &out);
        for (uint32_t t = 0; t < c->tiles; t += c->every) {
            hg_task_arg ta[2] = {{0, HG_IN, {0}}, {1 + w, out->dir, {0}}};
            hg_tensor_slice(&in->tensor, 0, (size_t)t * TILE, TILE, &ta[0].view);
            hg_tensor_slice(&out->tensor, 0, (size_t)t * TILE, TILE, &ta[1].view);
            hg_task_desc d = {&K_TILE, ta, 2, NULL, 0, NULL, 0};
            int rc = hg_task_submit(o, &d, NULL);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

typedef struct fx {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *in, *out[2];
    hg_arg args[3];
    shape_ctx ctx;
    hg_callable c;
    hg_run_stats s;
} fx;

static void fx_open(fx *f, hg_device *dev, bool replay, shape_ctx ctx, hg_residency res,
                    hg_hostbuf *in, hg_hostbuf *const out[2])
{
    memset(f, 0, sizeof *f);
    f->dev = dev;
    hg_runner_open(dev, &f->r);
    hg_runner_set_replay(f->r, replay);
    f->ctx = ctx;
    f->in = in;
    size_t n = (size_t)ctx.tiles * TILE;
    f->args[0] = (hg_arg){"in", HG_IN, {0}, 0, res};
    hg_tensor_host(&f->args[0].tensor, in, HG_F32, 1, &n);
    static const char *const names[2] = {"out", "out2"};
    for (uint32_t w = 0; w < ctx.outs; w++) {
        f->out[w] = out[w];
        f->args[1 + w] = (hg_arg){names[w], w ? HG_OUT : HG_INOUT, {0}, 0, res};
        hg_tensor_host(&f->args[1 + w].tensor, out[w], HG_F32, 1, &n);
    }
    f->c = (hg_callable){"tiles", orch_tiles, &f->ctx};
}

static int fx_run(fx *f)
{
    return hg_runner_run(f->r, &f->c, f->args, 1 + f->ctx.outs, &f->s);
}

/* The host buffers of a case: in (filled), out and out2 (zero). */
typedef struct bufs {
    hg_hostbuf *in, *out[2];
} bufs;

static void bufs_open(bufs *b, uint32_t tiles)
{
    const size_t bytes = (size_t)tiles * TILE * sizeof(float);
    hg_hostbuf_create(bytes, &b->in);
    hg_hostbuf_create(bytes, &b->out[0]);
    hg_hostbuf_create(bytes, &b->out[1]);
    float *p = hg_hostbuf_data(b->in);
    for (size_t i = 0; i < (size_t)tiles * TILE; i++)
        p[i] = (float)(i % 113);
}

static void bufs_close(bufs *b)
{
    hg_hostbuf_destroy(b->in);
    hg_hostbuf_destroy(b->out[0]);
    hg_hostbuf_destroy(b->out[1]);
}

/* A replayed run of N tasks notes and plans no written view: copy-back's
 * per-task work is 0 whatever N (the orchestrated run's is at least N), N
 * adjacent tiles commit as one item, and that one range is fetched straight
 * into the host buffer (a runner without a decide hook). */
TEST(replayed_copy_back_does_no_per_task_work)
{
    hg_device *dev;
    ASSERT_OK(hg_device_open("sim:cores=2", &dev, NULL, 0));
    static const uint32_t sizes[] = {64, 4096};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const uint32_t n = sizes[k];
        bufs b;
        bufs_open(&b, n);
        fx f;
        fx_open(&f, dev, true, (shape_ctx){n, 1, 1}, HG_STAGED, b.in, b.out);
        const uint64_t w0 = f.r->plan.note_work;
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 0);
        const uint64_t w1 = f.r->plan.note_work;
        ASSERT_UGE(w1 - w0, n);
        ASSERT(f.r->replay.back.valid);
        ASSERT_UEQ(f.r->replay.back.ncommits, 1); /* n adjacent tiles: one memcpy */
        memset(hg_hostbuf_data(b.out[0]), 0, (size_t)n * TILE * sizeof(float));
        ASSERT_OK(hg_hostbuf_mark_written(b.out[0], 0, (size_t)n * TILE * sizeof(float)));
        const uint64_t direct = f.r->plan.direct_fetches;
        for (int round = 0; round < 3; round++) {
            ASSERT_OK(fx_run(&f));
            ASSERT_EQ(f.s.replayed, 1);
        }
        ASSERT_UEQ(f.r->plan.note_work, w1); /* no note taken, none planned */
        /* Its one range lands straight in the host buffer: no commit memcpy. */
        ASSERT_UEQ(f.r->plan.direct_fetches, direct + 3);
        const float *in = hg_hostbuf_data(b.in), *out = hg_hostbuf_data(b.out[0]);
        for (size_t i = 0; i < (size_t)n * TILE; i++)
            ASSERT(out[i] == in[i] * 2.0f + 1.0f);
        hg_runner_close(f.r);
        bufs_close(&b);
    }
    hg_device_close(dev);
}

/* The copied-back ranges of arg w after the last run. */
static size_t copied(const fx *f, uint32_t w, hg_range *r, size_t max)
{
    size_t n = 0;
    return hg_runner_copied_back(f->r, 1 + w, r, max, &n) == 0 ? n : SIZE_MAX;
}

/* A decide hook that lets every run through but the `fail_at`-th. */
typedef struct decide_ctx {
    int calls, fail_at;
} decide_ctx;

static int decide_hook(void *user, int rc, char *msg, size_t msglen)
{
    decide_ctx *d = user;
    (void)msg;
    (void)msglen;
    return ++d->calls == d->fail_at ? HG_EINVAL : rc;
}

/* Two runners over the same shape, one replaying (a) and one orchestrating
 * (b), each on its own buffers, through rounds where the host writes part
 * of in (a resident IN: a ranged upload whose ranges come before
 * copy-back's in the plan) and scribbles over written and unwritten tiles
 * of the outputs.  Every round: the same copies, bytes, copied-back ranges
 * and host bytes, and a's rounds after the first replay.  With `decide`,
 * both go through the two-step copy-back of a decide hook that fails
 * round 4: nothing written, and the next round replays again. */
static void compare_rounds(shape_ctx shape, hg_residency res, bool decide)
{
    hg_device *dev;
    ASSERT_OK(hg_device_open("sim:cores=2", &dev, NULL, 0));
    bufs ba, bb;
    bufs_open(&ba, shape.tiles);
    bufs_open(&bb, shape.tiles);
    fx a, b;
    fx_open(&a, dev, true, shape, res, ba.in, ba.out);
    fx_open(&b, dev, false, shape, res, bb.in, bb.out);
    const size_t bytes = (size_t)shape.tiles * TILE * sizeof(float);
    decide_ctx da = {0, 5}, db = {0, 5};
    if (decide) {
        ASSERT_OK(hg_runner_set_decide(a.r, decide_hook, &da));
        ASSERT_OK(hg_runner_set_decide(b.r, decide_hook, &db));
    }
    for (int round = 0; round < 8; round++) {
        const float v[TILE] = {(float)round, (float)(round * 3)};
        const size_t at = (size_t)(round * 5 % shape.tiles) * TILE * sizeof(float);
        for (int x = 0; x < 2; x++) {
            bufs *bf = x ? &bb : &ba;
            if (round % 2) /* a host write of in: it must upload */
                ASSERT_OK(hg_hostbuf_write(bf->in, at, v, sizeof v));
            for (uint32_t w = 0; round % 3 == 2 && w < shape.outs; w++) /* scribbles */
                ASSERT_OK(hg_hostbuf_write(bf->out[w], at, v, sizeof v));
        }
        const uint64_t gen = hg_hostbuf_generation(ba.out[0]);
        const int rca = fx_run(&a), rcb = fx_run(&b);
        ASSERT_EQ(rca, decide && round == 4 ? HG_EINVAL : 0);
        ASSERT_EQ(rcb, rca);
        ASSERT_EQ(a.s.replayed, round > 0);
        if (rca != 0)
            ASSERT_UEQ(hg_hostbuf_generation(ba.out[0]), gen); /* nothing written */
        ASSERT_UEQ(a.s.h2d_bytes, b.s.h2d_bytes);
        ASSERT_UEQ(a.s.h2d_copies, b.s.h2d_copies);
        ASSERT_UEQ(a.s.d2h_bytes, b.s.d2h_bytes);
        ASSERT_UEQ(a.s.d2h_copies, b.s.d2h_copies);
        ASSERT_UEQ(a.s.d2h_bytes_skipped, b.s.d2h_bytes_skipped);
        if (round % 2) /* the host write of in uploads */
            ASSERT_UGE(a.s.h2d_bytes, sizeof v);
        for (uint32_t w = 0; w < shape.outs; w++) {
            hg_range ra[64], rb[64];
            const size_t na = copied(&a, w, ra, 64), nb = copied(&b, w, rb, 64);
            ASSERT_UEQ(na, nb);
            ASSERT(na <= 64 && memcmp(ra, rb, na * sizeof *ra) == 0);
            ASSERT(memcmp(hg_hostbuf_data(ba.out[w]), hg_hostbuf_data(bb.out[w]), bytes) == 0);
            ASSERT_UEQ(hg_hostbuf_generation(ba.out[w]), hg_hostbuf_generation(bb.out[w]));
        }
    }
    hg_runner_close(a.r);
    hg_runner_close(b.r);
    bufs_close(&ba);
    bufs_close(&bb);
    hg_device_close(dev);
}

/* One written arg, every tile: the lone range lands straight in the host. */
TEST(replayed_rounds_equal_orchestrated_one_output)
{
    compare_rounds((shape_ctx){32, 1, 1}, HG_STAGED, false);
    compare_rounds((shape_ctx){32, 1, 1}, HG_RESIDENT, false);
}

/* Two written args, every other tile: several ranges through host staging,
 * gaps the host keeps. */
TEST(replayed_rounds_equal_orchestrated_gaps_and_two_outputs)
{
    compare_rounds((shape_ctx){32, 2, 2}, HG_STAGED, false);
    compare_rounds((shape_ctx){32, 2, 2}, HG_RESIDENT, false);
}

/* The same through a decide hook's two steps (one of them failing). */
TEST(replayed_rounds_equal_orchestrated_with_decide_hook)
{
    compare_rounds((shape_ctx){32, 1, 1}, HG_RESIDENT, true);
    compare_rounds((shape_ctx){32, 2, 2}, HG_STAGED, true);
}

int main(void)
{
    return RUN_TESTS();
}
