/*
 * replay_test.c: checked graph replay (hg_runner_set_replay), clause by
 * clause of the contract in include/hostgraph.h: what is recorded, when a
 * run replays and when it must orchestrate (callable, every arg field, host
 * reads' generations, device regions that move), verify mode's byte check
 * and graph comparison (an orchestration that reads a global), failures
 * (which keep, which drop the recording), bytes and results equal to
 * orchestrated runs, and the recording's memory, the names it holds
 * included.  Everything is counted (orchestrations, kernel calls, bytes),
 * never timed.  Under ThreadSanitizer the tests that repeat a check run
 * fewer repeats, every check kept (UNDER_TSAN below; main prints it).
 */
#include <malloc.h>
#include <stdatomic.h>
#include <string.h>

#include "hostgraph.h"
#include "run/run.h"
#include "scene/scene.h"
#include "stage/residency.h"
#include "test_device.h"
#include "testlib.h"

/* Under ThreadSanitizer every memory access is checked, and this file's
 * scene test (every scene, every mode, three runs of each) took 289 s of
 * ctest's 300 on a loaded host.  There the tests that repeat one check
 * run fewer repeats (TSAN_FEWER), and main says so: the scene test runs 3
 * rounds, not 4 (round 1 records, rounds 2 and 3 replay: a replay after a
 * replay still checked), and vector_add at n = 2^18 in 16 tasks, not 2^20
 * in 16 (the same graph; its size is for throughput, not behaviour); the
 * scratch-name test runs 200 rounds, not 2000.  Every check still runs,
 * on every scene, mode and backend. */
#ifdef UNDER_TSAN
#define TSAN_FEWER   10
#define SCENE_ROUNDS 3
#else
#define TSAN_FEWER   1
#define SCENE_ROUNDS 4
#endif

#define N      4096 /* elements of in and out */
#define CHUNKS 8    /* tasks: one per chunk */

static atomic_int kernel_calls;
static int g_bias;               /* a global the "global" orchestration reads */
static hg_runner *cancel_target; /* k_scale cancels it once when armed */
static atomic_bool cancel_armed;

static size_t numel(const hg_kview *v)
{
    size_t n = 1;
    for (uint32_t d = 0; d < v->ndims; d++)
        n *= v->shape[d];
    return n;
}

/* out = in * scale + bias (scalars 0, 1); fails on in[0] == 13. */
static int k_scale(const hg_kernel_ctx *ctx)
{
    atomic_fetch_add(&kernel_calls, 1);
    if (atomic_exchange(&cancel_armed, false))
        hg_runner_cancel(cancel_target);
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    if (in[0] == 13.0f)
        return 13;
    const float s = (float)(int64_t)ctx->scalars[0], b = (float)(int64_t)ctx->scalars[1];
    const size_t n =
        numel(&ctx->args[0]) < numel(&ctx->args[1]) ? numel(&ctx->args[0]) : numel(&ctx->args[1]);
    for (size_t i = 0; i < n; i++) /* dense but for the arg-change test's views */
        out[i] = in[i] * s + b;
    return 0;
}

static int k_nop(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

/* k_scale's OpenCL slot: out = in * scale + bias, element by element of
 * out (in walked row-major through its view, 1-D or 2-D). */
static const char scale_cl[] =
    "__kernel void scale(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out), ulong s,\n"
    "                    ulong b)\n"
    "{\n"
    "    size_t i = get_global_id(0), r = i, off = 0;\n"
    "    if (HG_PTR(in)[0] == 13.0f)\n"
    "        HG_FAIL(13);\n"
    "    for (int d = (int)in_v.ndims - 1; d >= 0; d--) {\n"
    "        off += (r % in_v.shape[d]) * in_v.strides[d];\n"
    "        r /= in_v.shape[d];\n"
    "    }\n"
    "    HG_PTR(out)[i * out_v.strides[0]] = HG_PTR(in)[off] * (float)(long)s + (float)(long)b;\n"
    "}\n";

static const hg_kernel K_SCALE = {"scale", k_scale, HG_CORE_VECTOR, scale_cl, "scale"};
static const hg_kernel K_NOP = {"nop", k_nop, HG_CORE_VECTOR, NULL, NULL};

typedef struct orch_ctx {
    int orchestrations;
    bool read_cfg;            /* scale from the host view of arg 2 ("cfg") */
    bool read_global;         /* bias from g_bias */
    bool scratch;             /* go through scratch: tmp = in * scale; out = tmp */
    bool fail;                /* hg_orch_fail */
    bool two_d;               /* in's chunks as 2-D views (a layout the graph keeps apart) */
    const char *scratch_name; /* the scratch's name (NULL: "tmp") */
    const hg_kernel *kernel;  /* the first task's of each chunk (NULL: K_SCALE) */
} orch_ctx;

static int submit(hg_orch *o, const hg_kernel *k, uint32_t a, const hg_tensor *va, uint32_t b,
                  hg_dir bdir, const hg_tensor *vb, const uint64_t *sc)
{
    hg_task_arg ta[2] = {{a, HG_IN, *va}, {b, bdir, *vb}};
    hg_task_desc d = {k, ta, 2, sc, 2, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

/* One task per chunk: out[c] = in[c] * scale + bias (through scratch when
 * asked). */
static int orch_scale(hg_orch *o, void *user)
{
    orch_ctx *c = user;
    c->orchestrations++;
    if (c->fail)
        return hg_orch_fail(o, HG_EINVAL, "asked to fail");
    int64_t scale = 2, bias = c->read_global ? g_bias : 0;
    if (c->read_cfg) {
        const void *p;
        int rc = hg_orch_host_view(o, 2, &p);
        if (rc != 0)
            return rc;
        scale = *(const int32_t *)p;
    }
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    uint32_t mid = 0;
    hg_tensor tmp = in->tensor;
    if (c->scratch) {
        size_t shape[1] = {N};
        const char *name = c->scratch_name ? c->scratch_name : "tmp";
        if (hg_orch_scratch(o, name, HG_F32, 1, shape, &mid, &tmp) != 0)
            return HG_EINVAL;
    }
    const uint64_t sc[2] = {(uint64_t)scale, (uint64_t)bias}, one[2] = {1, 0};
    for (uint32_t k = 0; k < CHUNKS; k++) {
        hg_tensor vi, vo, vt;
        const size_t ci = in->tensor.shape[0] / CHUNKS, co = out->tensor.shape[0] / CHUNKS;
        hg_tensor_slice(&in->tensor, 0, k * ci, ci, &vi);
        hg_tensor_slice(&out->tensor, 0, k * co, co, &vo);
        if (c->two_d) { /* the same bytes as 2 rows */
            vi.ndims = 2;
            vi.shape[0] = 2;
            vi.shape[1] = ci / 2;
            vi.strides[0] = ci / 2;
            vi.strides[1] = 1;
        }
        const hg_kernel *kern = c->kernel ? c->kernel : &K_SCALE;
        int rc;
        if (c->scratch) {
            hg_tensor_slice(&tmp, 0, k * (N / CHUNKS), N / CHUNKS, &vt);
            rc = submit(o, kern, 0, &vi, mid, HG_OUT, &vt, sc);
            if (rc == 0)
                rc = submit(o, &K_SCALE, mid, &vt, 1, out->dir, &vo, one);
        } else {
            rc = submit(o, kern, 0, &vi, 1, out->dir, &vo, sc);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------- fixture */

typedef struct fx {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *in, *out, *cfg;
    hg_arg args[3];
    orch_ctx ctx;
    hg_callable c;
    hg_run_stats s;
} fx;

static void fx_open(fx *f, const char *spec, hg_residency res)
{
    memset(f, 0, sizeof *f);
    hg_device_open(spec, &f->dev, NULL, 0);
    hg_runner_open(f->dev, &f->r);
    hg_runner_set_replay(f->r, true);
    hg_hostbuf_create(N * sizeof(float), &f->in);
    hg_hostbuf_create(N * sizeof(float), &f->out);
    hg_hostbuf_create(sizeof(int32_t), &f->cfg);
    float *p = hg_hostbuf_data(f->in);
    for (size_t i = 0; i < N; i++)
        p[i] = (float)(i % 97);
    const int32_t three = 3;
    hg_hostbuf_write(f->cfg, 0, &three, sizeof three);
    size_t n = N, one = 1;
    f->args[0] = (hg_arg){"in", HG_IN, {0}, 0, res};
    f->args[1] = (hg_arg){"out", HG_OUT, {0}, 0, HG_STAGED};
    f->args[2] = (hg_arg){"cfg", HG_IN, {0}, 0, res};
    hg_tensor_host(&f->args[0].tensor, f->in, HG_F32, 1, &n);
    hg_tensor_host(&f->args[1].tensor, f->out, HG_F32, 1, &n);
    hg_tensor_host(&f->args[2].tensor, f->cfg, HG_I32, 1, &one);
    f->ctx.read_cfg = true;
    f->c = (hg_callable){"scale", orch_scale, &f->ctx};
}

static void fx_close(fx *f)
{
    hg_runner_close(f->r);
    hg_hostbuf_destroy(f->in);
    hg_hostbuf_destroy(f->out);
    hg_hostbuf_destroy(f->cfg);
    hg_device_close(f->dev);
}

static int fx_run(fx *f)
{
    return hg_runner_run(f->r, &f->c, f->args, 3, &f->s);
}

/* out == in * scale + bias, element by element. */
static bool out_is(const fx *f, float scale, float bias)
{
    const float *in = hg_hostbuf_data(f->in), *out = hg_hostbuf_data(f->out);
    for (size_t i = 0; i < N; i++)
        if (out[i] != in[i] * scale + bias)
            return false;
    return true;
}

static void set_in0(fx *f, float v)
{
    hg_hostbuf_write(f->in, 0, &v, sizeof v);
}

/* --------------------------------------------------------------- tests */

TEST(replay_is_off_by_default)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    /* A runner as hg_runner_open makes it: hg_runner_set_replay never
     * called. */
    hg_runner_close(f.r);
    ASSERT_OK(hg_runner_open(f.dev, &f.r));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 0);
    }
    ASSERT_EQ(f.ctx.orchestrations, 3);
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
    fx_close(&f);
}

/* The second run of the same call replays: no orchestration, the same
 * graph, the same results (also after an IN the orchestration did not read
 * changed); its orch_ns is the checks alone. */
TEST(same_call_replays)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 0);
    const hg_run_stats first = f.s;
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 1);
    ASSERT_EQ(f.s.tasks, first.tasks);
    ASSERT_EQ(f.s.edges, first.edges);
    ASSERT(out_is(&f, 3, 0));
    set_in0(&f, 5.0f); /* not read on the host: still replays, computes on it */
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 1);
    ASSERT(out_is(&f, 3, 0));
    ASSERT_UGT(hg_runner_replay_bytes(f.r), 0);
    fx_close(&f);
}

/* Same callable: orchestrate function, user pointer and name, each. */
TEST(other_callable_orchestrates)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    orch_ctx other = f.ctx;
    ASSERT_OK(fx_run(&f));
    hg_callable variants[3] = {
        {"scale", orch_scale, &other}, {"scale2", orch_scale, &f.ctx}, {NULL, orch_scale, &f.ctx}};
    for (int v = 0; v < 3; v++) {
        ASSERT_OK(fx_run(&f)); /* the base call replays */
        ASSERT_EQ(f.s.replayed, 1);
        const int before = f.ctx.orchestrations + other.orchestrations;
        ASSERT_OK(hg_runner_run(f.r, &variants[v], f.args, 3, &f.s));
        ASSERT_EQ(f.s.replayed, 0);
        ASSERT_EQ(f.ctx.orchestrations + other.orchestrations, before + 1);
        ASSERT_OK(hg_runner_run(f.r, &variants[v], f.args, 3, &f.s)); /* now its own */
        ASSERT_EQ(f.s.replayed, 1);
        ASSERT_OK(fx_run(&f)); /* back: the base call records again */
        ASSERT_EQ(f.s.replayed, 0);
    }
    fx_close(&f);
}

/* Same args: each field of each kind of arg, changed alone, orchestrates. */
TEST(any_arg_change_orchestrates)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    hg_hostbuf *other;
    hg_hostbuf_create(2 * N * sizeof(float), &other);
    enum { NAME, DIR, DTYPE, SHAPE, STRIDE, OFFSET, BUFFER, RESIDENCY, NVAR };
    const hg_arg orig[3] = {f.args[0], f.args[1], f.args[2]};
    for (int v = 0; v < NVAR; v++) {
        hg_arg *a = &f.args[1]; /* "out" */
        if (v == STRIDE) {      /* from a 2-D view to its transpose's layout */
            a->tensor.ndims = 2, a->tensor.shape[0] = N / 2, a->tensor.shape[1] = 2;
            a->tensor.strides[0] = 2, a->tensor.strides[1] = 1;
        }
        if (v == OFFSET) /* from offset 0 to 8, the shape the same */
            a->tensor.shape[0] = N - 8;
        ASSERT_OK(fx_run(&f));
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        switch (v) {
        case NAME:
            a->name = "out2";
            break;
        case DIR:
            a->dir = HG_INOUT;
            break;
        case DTYPE:
            a->tensor.dtype = HG_I32;
            break;
        case SHAPE:
            a->tensor.shape[0] = N / 2;
            break;
        case STRIDE:
            a->tensor.strides[0] = 1, a->tensor.strides[1] = N / 2;
            break;
        case OFFSET:
            a->tensor.offset = 8;
            break;
        case BUFFER:
            a->tensor.host = other;
            break;
        case RESIDENCY:
            f.args[0].residency = HG_RESIDENT;
            break;
        }
        const int before = f.ctx.orchestrations;
        int rc = fx_run(&f); /* some changes make the orchestration's views wrong */
        ASSERT_EQ(f.ctx.orchestrations, before + 1);
        ASSERT_EQ(f.s.replayed, 0);
        (void)rc;
        memcpy(f.args, orig, sizeof orig);
    }
    hg_hostbuf_destroy(other);
    fx_close(&f);
}

static int orch_scalar(hg_orch *o, void *user)
{
    orch_ctx *c = user;
    c->orchestrations++;
    const hg_arg *in, *out, *s;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    hg_orch_arg(o, 3, &s);
    const uint64_t sc[2] = {s->scalar, 0};
    return submit(o, &K_SCALE, 0, &in->tensor, 1, HG_OUT, &out->tensor, sc);
}

/* A scalar arg's value is part of the args. */
TEST(scalar_value_change_orchestrates)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    hg_arg args[4] = {f.args[0], f.args[1], f.args[2], {"k", HG_SCALAR, {0}, 4, HG_STAGED}};
    hg_callable c = {"scalar", orch_scalar, &f.ctx};
    ASSERT_OK(hg_runner_run(f.r, &c, args, 4, &f.s));
    ASSERT_OK(hg_runner_run(f.r, &c, args, 4, &f.s));
    ASSERT_EQ(f.s.replayed, 1);
    args[3].scalar = 5;
    ASSERT_OK(hg_runner_run(f.r, &c, args, 4, &f.s));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT(out_is(&f, 5, 0));
    ASSERT_EQ(f.ctx.orchestrations, 2);
    fx_close(&f);
}

/* A host view read at generation g: a write through the API (any range)
 * orchestrates again, with the new value; an unread buffer's does not. */
TEST(host_read_generation_decides)
{
    for (int res = 0; res < 2; res++) {
        fx f;
        fx_open(&f, "sim:cores=2", (hg_residency)res);
        ASSERT_OK(fx_run(&f));
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        const int32_t seven = 7;
        ASSERT_OK(hg_hostbuf_write(f.cfg, 0, &seven, sizeof seven));
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 0);
        ASSERT_EQ(f.ctx.orchestrations, 2);
        ASSERT(out_is(&f, 7, 0));
        ASSERT_OK(hg_hostbuf_mark_written(f.cfg, 0, 0)); /* an empty write still moves it */
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 0);
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        ASSERT(out_is(&f, 7, 0));
        fx_close(&f);
    }
}

/* Verify mode checks the read bytes: a write that bypassed the API at the
 * same generation is HG_ESTALE naming the arg; nothing runs.  Without
 * verify the generation is all that is checked (the contract's caveat). */
TEST(verify_checks_read_bytes)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    hg_runner_set_verify(f.r, true);
    ASSERT_OK(fx_run(&f));
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 2);     /* verify orchestrates too */
    *(int32_t *)hg_hostbuf_data(f.cfg) = 9; /* behind the API */
    const int calls = atomic_load(&kernel_calls);
    const uint64_t gen = hg_hostbuf_generation(f.out);
    ASSERT_EQ(fx_run(&f), HG_ESTALE);
    ASSERT(strstr(hg_runner_errmsg(f.r), "'cfg'") != NULL);
    ASSERT_EQ(atomic_load(&kernel_calls), calls);
    ASSERT_UEQ(hg_hostbuf_generation(f.out), gen);
    ASSERT(out_is(&f, 3, 0));
    ASSERT_OK(hg_hostbuf_mark_written(f.cfg, 0, 4));
    ASSERT_OK(fx_run(&f));
    ASSERT(out_is(&f, 9, 0));
    hg_runner_set_verify(f.r, false);
    *(int32_t *)hg_hostbuf_data(f.cfg) = 11; /* behind the API, verify off */
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT(out_is(&f, 9, 0)); /* the stale graph: why writes go through the API */
    fx_close(&f);
}

/* An orchestration that reads a global: verify finds the difference and
 * names the task and the field, running neither graph; without verify the
 * caller declares it (hg_runner_invalidate_replay). */
TEST(verify_catches_undeclared_global)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    f.ctx.read_global = true;
    g_bias = 1;
    hg_runner_set_verify(f.r, true);
    ASSERT_OK(fx_run(&f));
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT(out_is(&f, 3, 1));
    g_bias = 2;
    const int calls = atomic_load(&kernel_calls);
    const uint64_t gen = hg_hostbuf_generation(f.out);
    ASSERT_EQ(fx_run(&f), HG_ESTALE);
    ASSERT(strstr(hg_runner_errmsg(f.r), "task 0 ('scale')") != NULL);
    ASSERT(strstr(hg_runner_errmsg(f.r), "scalar 1") != NULL);
    ASSERT_EQ(atomic_load(&kernel_calls), calls);
    ASSERT_UEQ(hg_hostbuf_generation(f.out), gen);
    ASSERT(out_is(&f, 3, 1));
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0); /* dropped */
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT(out_is(&f, 3, 2));
    /* Verify off: the caller declares. */
    hg_runner_set_verify(f.r, false);
    g_bias = 4;
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT(out_is(&f, 3, 2)); /* stale, undeclared */
    hg_runner_invalidate_replay(f.r);
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT(out_is(&f, 3, 4));
    fx_close(&f);
}

/* What orch_variant changes in task 3 (or in the graph), behind the
 * runner's back: a global. */
enum variant {
    V_NONE,
    V_KERNEL,
    V_RANGE,
    V_NDIMS,
    V_DTYPE,
    V_ACCESS,
    V_SCALAR,
    V_DEP,
    V_MORE,
    V_FEWER,
    V_READ,
    V_SCRATCH,
    V_COUNT
};
static enum variant g_variant;

/* CHUNKS tasks, in[c] -> out[c], each detail as g_variant says. */
static int orch_variant(hg_orch *o, void *user)
{
    orch_ctx *c = user;
    c->orchestrations++;
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    if (g_variant == V_READ) {
        const void *p;
        if (hg_orch_host_view(o, 2, &p) != 0)
            return HG_EINVAL;
    }
    if (g_variant == V_SCRATCH) {
        size_t shape[1] = {N};
        uint32_t arg;
        if (hg_orch_scratch(o, "tmp", HG_F32, 1, shape, &arg, NULL) != 0)
            return HG_EINVAL;
    }
    const size_t ch = N / CHUNKS;
    const uint32_t ntasks = CHUNKS + (g_variant == V_MORE) - (g_variant == V_FEWER);
    for (uint32_t k = 0; k < ntasks; k++) {
        const bool here = k == 3;
        hg_task_arg ta[2] = {{0, HG_IN, {0}}, {1, HG_OUT, {0}}};
        hg_tensor_slice(&in->tensor, 0, (k % CHUNKS) * ch, ch, &ta[0].view);
        hg_tensor_slice(&out->tensor, 0, (k % CHUNKS) * ch, ch, &ta[1].view);
        uint64_t sc[2] = {here && g_variant == V_SCALAR ? 3 : 2, 0};
        const hg_task_id first = 0;
        hg_task_desc d = {&K_SCALE, ta, 2, sc, 2, NULL, 0};
        if (here && g_variant == V_KERNEL)
            d.kernel = &K_NOP;
        if (here && g_variant == V_RANGE)
            hg_tensor_slice(&in->tensor, 0, k * ch + 1, ch - 1, &ta[0].view);
        if (here && g_variant == V_NDIMS) { /* the same bytes as 2 rows */
            ta[0].view.ndims = 2;
            ta[0].view.shape[0] = 2;
            ta[0].view.shape[1] = ch / 2;
            ta[0].view.strides[0] = ch / 2;
            ta[0].view.strides[1] = 1;
        }
        if (here && g_variant == V_DTYPE)
            ta[0].view.dtype = HG_I32;
        if (here && g_variant == V_ACCESS)
            ta[1].access = HG_INOUT;
        if (here && g_variant == V_DEP) {
            d.deps = &first;
            d.ndeps = 1;
        }
        int rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Verify compares every part of the graph: whatever detail an undeclared
 * global changed, the run fails with HG_ESTALE naming the task (or the
 * scratch or host read) and the field, runs no kernel, changes no host
 * byte and drops the recording. */
TEST(verify_names_each_field_that_differs)
{
    static const char *const want[V_COUNT][2] = {
        [V_KERNEL] = {"task 3 ('nop')", "kernel is 'scale' in the recording"},
        [V_RANGE] = {"task 3 ('scale')", "arg 0: device range differs"},
        [V_NDIMS] = {"task 3 ('scale')", "arg 0: ndims differs"},
        [V_DTYPE] = {"task 3 ('scale')", "arg 0: dtype differs"},
        [V_ACCESS] = {"task 3 ('scale')", "arg 1: access differs"},
        [V_SCALAR] = {"task 3 ('scale')", "scalar 0 is 3, 2 in the recording"},
        [V_DEP] = {"task 3 ('scale')", "dependencies differ"},
        [V_MORE] = {"submitted 9 tasks, the recording 8",
                    "task 8 ('scale') is not in the recording"},
        [V_FEWER] = {"submitted 7 tasks, the recording 8", "task 7 ('scale') was not submitted"},
        [V_READ] = {"read 1 host views, the recording 0", "hg_runner_invalidate_replay"},
        [V_SCRATCH] = {"took 1 scratch, the recording 0", "hg_runner_invalidate_replay"},
    };
    for (int v = V_KERNEL; v < V_COUNT; v++) {
        fx f;
        fx_open(&f, "sim:cores=2", HG_STAGED);
        f.c.orchestrate = orch_variant;
        hg_runner_set_verify(f.r, true);
        g_variant = V_NONE;
        ASSERT_OK(fx_run(&f));
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        ASSERT(out_is(&f, 2, 0));
        g_variant = (enum variant)v;
        const int calls = atomic_load(&kernel_calls);
        const uint64_t gen = hg_hostbuf_generation(f.out);
        ASSERT_EQ(fx_run(&f), HG_ESTALE);
        const char *msg = hg_runner_errmsg(f.r);
        if (strstr(msg, want[v][0]) == NULL || strstr(msg, want[v][1]) == NULL)
            printf("  variant %d: %s\n", v, msg);
        ASSERT(strstr(msg, want[v][0]) != NULL);
        ASSERT(strstr(msg, want[v][1]) != NULL);
        ASSERT_EQ(atomic_load(&kernel_calls), calls);
        ASSERT_UEQ(hg_hostbuf_generation(f.out), gen);
        ASSERT(out_is(&f, 2, 0));
        ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
        fx_close(&f);
    }
    g_variant = V_NONE;
}

/* A failed run keeps no recording of its own, whatever stage failed. */
TEST(failed_run_records_nothing)
{
    for (int stage = 0; stage < 3; stage++) {
        fx f;
        fx_open(&f, "sim:cores=2", HG_STAGED);
        if (stage == 0)
            f.ctx.fail = true; /* orchestration */
        if (stage == 1)
            set_in0(&f, 13.0f); /* execution: a kernel fails */
        if (stage == 2)
            hg_device_inject_fault(f.dev, HG_FAULT_COPY, 3); /* copy-back (2 uploads first) */
        ASSERT_NE(fx_run(&f), 0);
        ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
        f.ctx.fail = false;
        set_in0(&f, 1.0f);
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 0);
        ASSERT_EQ(f.ctx.orchestrations, 2);
        fx_close(&f);
    }
}

/* A replayed run that fails: the recording stays usable unless the failure
 * was in the graph itself (execution). */
TEST(replayed_failure_keeps_or_drops)
{
    fx f;
    fx_open(&f, "sim:cores=1", HG_STAGED);
    ASSERT_OK(fx_run(&f));
    /* Copy-back fails (uploads: in, cfg; then the fetch): kept. */
    hg_device_inject_fault(f.dev, HG_FAULT_COPY, 3);
    ASSERT_EQ(fx_run(&f), HG_ECOPY);
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 1);
    /* Bind fails (an upload): kept. */
    set_in0(&f, 2.0f);
    hg_device_inject_fault(f.dev, HG_FAULT_COPY, 1);
    ASSERT_EQ(fx_run(&f), HG_ECOPY);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    /* Canceled during execution: kept. */
    cancel_target = f.r;
    atomic_store(&cancel_armed, true);
    ASSERT_EQ(fx_run(&f), HG_ECANCELED);
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 1);
    /* A kernel fails: dropped; the next run orchestrates. */
    set_in0(&f, 13.0f);
    ASSERT_EQ(fx_run(&f), HG_EKERNEL);
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
    set_in0(&f, 1.0f);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT_EQ(f.ctx.orchestrations, 2);
    fx_close(&f);
}

/* A run whose orchestration fails after binding a bigger staged arg: the
 * retained buffer grows (moves) and pooled scratch it did not use is
 * freed, while the recording stays. */
static void grow_and_fail(fx *f)
{
    hg_hostbuf *big;
    hg_hostbuf_create(64 * N * sizeof(float), &big);
    size_t n = 64 * N;
    hg_arg a[3] = {{"big", HG_IN, {0}, 0, HG_STAGED}, f->args[1], f->args[2]};
    hg_tensor_host(&a[0].tensor, big, HG_F32, 1, &n);
    orch_ctx failing = {.fail = true};
    hg_callable c = {"failing", orch_scale, &failing};
    hg_runner_run(f->r, &c, a, 3, NULL);
    hg_hostbuf_destroy(big);
}

/* Regions that moved re-resolve exactly: the retained buffer that grew,
 * a resident copy uploaded elsewhere, scratch from another pool block;
 * with 1-D and with 2-D task args, on each backend. */
TEST_EACH_BACKEND(moved_regions_replay)
{
    const char *spec = test_backend_is_sim(backend) ? "sim:cores=2" : backend;
    for (int what = 0; what < 6; what++) {
        fx f;
        fx_open(&f, spec, what % 3 == 1 ? HG_RESIDENT : HG_STAGED);
        f.ctx.scratch = what % 3 == 2;
        f.ctx.two_d = what >= 3; /* task args whose layout moves with them too */
        ASSERT_OK(fx_run(&f));
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        const uint32_t arg = what % 3 == 2 ? 3 : 0; /* the arg that moves */
        const hg_devaddr was = f.r->replay.regions[arg];
        hg_devaddr hole[8]; /* blocks growth in place, then fills the holes left */
        for (int k = 0; k < 4; k++)
            ASSERT_OK(hg_devbuf_malloc(f.dev, N * sizeof(float), &hole[k]));
        if (what % 3 == 1) {
            ASSERT_OK(hg_runner_set_budget(f.r, 1)); /* evicts the copies */
            ASSERT_OK(hg_runner_set_budget(f.r, 0));
        } else {
            grow_and_fail(&f);
        }
        for (int k = 4; k < 8; k++)
            ASSERT_OK(hg_devbuf_malloc(f.dev, N * sizeof(float), &hole[k]));
        set_in0(&f, 6.0f);
        ASSERT_OK(fx_run(&f));
        ASSERT_EQ(f.s.replayed, 1);
        ASSERT_EQ(f.ctx.orchestrations, 1);
        ASSERT(f.r->replay.regions[arg] != was);
        ASSERT(out_is(&f, 3, 0));
        for (int k = 0; k < 8; k++)
            hg_devbuf_free(f.dev, hole[k]);
        fx_close(&f);
    }
}

/* A replayed run that cannot take its scratch (a device allocation fails)
 * fails outside the graph: the recording stays and the next run replays. */
TEST(scratch_failure_keeps_recording)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    f.ctx.scratch = true;
    ASSERT_OK(fx_run(&f));
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    grow_and_fail(&f); /* frees the pooled scratch (that run took none) */
    hg_device_inject_fault(f.dev, HG_FAULT_ALLOC, 1);
    ASSERT_EQ(fx_run(&f), HG_EDEVMEM);
    ASSERT(strstr(hg_runner_errmsg(f.r), "scratch 'tmp'") != NULL);
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1);
    ASSERT_EQ(f.ctx.orchestrations, 1);
    ASSERT(out_is(&f, 3, 0));
    fx_close(&f);
}

/* Args whose regions overlapped in the recording but moved apart do not
 * replay (their dependencies came from that overlap). */
TEST(broken_overlap_orchestrates)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    ASSERT_OK(fx_run(&f));
    replay_state *rs = &f.r->replay;
    rs->regions[1] = rs->regions[0]; /* as if "in" and "out" had shared bytes */
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT_EQ(f.ctx.orchestrations, 2);
    ASSERT(out_is(&f, 3, 0));
    fx_close(&f);
}

/* Args whose regions overlap now but did not when recorded do not replay
 * either: two resident INs of the same bytes share one copy. */
TEST(new_overlap_orchestrates)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_RESIDENT);
    hg_arg args[4] = {f.args[0], f.args[1], f.args[2], f.args[0]};
    args[3].name = "in_again";
    ASSERT_OK(hg_runner_run(f.r, &f.c, args, 4, &f.s));
    replay_state *rs = &f.r->replay;
    ASSERT(rs->regions[3] == rs->regions[0]); /* one copy */
    rs->regions[3] += 1u << 20;               /* as if apart when recorded */
    ASSERT_OK(hg_runner_run(f.r, &f.c, args, 4, &f.s));
    ASSERT_EQ(f.s.replayed, 0);
    ASSERT_EQ(f.ctx.orchestrations, 2);
    ASSERT_OK(hg_runner_run(f.r, &f.c, args, 4, &f.s));
    ASSERT_EQ(f.s.replayed, 1);
    fx_close(&f);
}

/* T tasks, each one element of in -> one element of out. */
static int orch_many(hg_orch *o, void *user)
{
    uint32_t t = *(const uint32_t *)user;
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    const uint64_t sc[2] = {2, 0};
    for (uint32_t k = 0; k < t; k++) {
        hg_tensor vi, vo;
        hg_tensor_slice(&in->tensor, 0, k % N, 1, &vi);
        hg_tensor_slice(&out->tensor, 0, k % N, 1, &vo);
        int rc = submit(o, &K_NOP, 0, &vi, 1, HG_OUT, &vo, sc);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint64_t recording_bytes(fx *f, uint32_t *tasks)
{
    hg_callable c = {"many", orch_many, tasks};
    if (hg_runner_run(f->r, &c, f->args, 3, NULL) != 0)
        return 0;
    return hg_runner_replay_bytes(f->r);
}

/* The recording's memory: O(tasks + task args), linear in the tasks, not
 * growing with the recordings that replace it, freed on invalidate and
 * when replay goes off (and at close: the sanitizer builds). */
TEST(recording_memory_is_linear)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    uint32_t small = 512, large = 4096;
    const uint64_t b1 = recording_bytes(&f, &small);
    hg_runner_invalidate_replay(f.r);
    const uint64_t b8 = recording_bytes(&f, &large);
    printf("  recording: %llu bytes for %u tasks, %llu for %u\n", (unsigned long long)b1, small,
           (unsigned long long)b8, large);
    ASSERT_UGT(b1, 0);
    /* Two task args each: at most 512 bytes per task and task arg, plus
     * a constant (args, names, first capacities). */
    ASSERT_ULE(b8, 512ull * (large + 2ull * large) + 65536);
    ASSERT_ULE(b8, b1 * 8 + b1 / 4);
    /* And no less: 8x the tasks hold at least 6x the bytes, and at least a
     * task record and its two task args a task (not a count that stays
     * put or undercounts). */
    ASSERT_UGE(b8, 6 * b1);
    ASSERT_UGE(b8, (uint64_t)large * (sizeof(graph_task) + 2 * sizeof(graph_arg)));
    for (int k = 0; k < 6; k++) /* replaced again and again: no growth */
        ASSERT_ULE(recording_bytes(&f, k % 2 ? &small : &large), 2 * b8);
    hg_runner_invalidate_replay(f.r);
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
    ASSERT_UGT(recording_bytes(&f, &small), 0);
    hg_runner_set_replay(f.r, false);
    ASSERT_UEQ(hg_runner_replay_bytes(f.r), 0);
    fx_close(&f);
}

/* Heap bytes in use (glibc's count; a sanitizer's allocator keeps its own,
 * so there this reads ~0 and the internal count below is the check). */
static uint64_t heap_in_use(void)
{
    const struct mallinfo2 m = mallinfo2();
    return (uint64_t)m.uordblks + (uint64_t)m.hblkhd;
}

/* A run that records anew (the read config moved) with scratch `name`. */
static int run_named(fx *f, const char *name, int32_t scale)
{
    f->ctx.scratch_name = name;
    hg_hostbuf_write(f->cfg, 0, &scale, sizeof scale);
    return fx_run(f);
}

/* The names a recording holds are its own: counted in
 * hg_runner_replay_bytes, and gone with it, so a scratch named anew every
 * round (each round recording anew, invalidating, turning replay off and
 * on) holds no more memory after many rounds than after a few.  Counted
 * (heap bytes in use, the replay state's own bytes), never RSS. */
TEST(scratch_names_belong_to_the_recording)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    f.ctx.scratch = true;
    char name[256];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    ASSERT_OK(run_named(&f, "t", 3));
    const uint64_t short_bytes = hg_runner_replay_bytes(f.r);
    ASSERT_OK(run_named(&f, name, 3));
    const uint64_t long_bytes = hg_runner_replay_bytes(f.r);
    printf("  recording: %llu bytes with a 1-byte scratch name, %llu with a 255-byte one\n",
           (unsigned long long)short_bytes, (unsigned long long)long_bytes);
    ASSERT_UGE(long_bytes, short_bytes + 254); /* the name is the recording's */
    ASSERT_OK(fx_run(&f));
    ASSERT_EQ(f.s.replayed, 1); /* with the recorded scratch, by that name */
    ASSERT(out_is(&f, 3, 0));
    /* A kernel's name too (the recording's graph holds it). */
    hg_kernel named = K_SCALE;
    named.name = name;
    f.ctx.kernel = &named;
    ASSERT_OK(run_named(&f, "t", 3));
    printf("  and %llu with a 255-byte kernel name\n",
           (unsigned long long)hg_runner_replay_bytes(f.r));
    ASSERT_UGE(hg_runner_replay_bytes(f.r), short_bytes + 254);
    ASSERT(out_is(&f, 3, 0));
    f.ctx.kernel = NULL;
    const uint32_t rounds = 2000 / TSAN_FEWER;
    uint64_t heap0 = 0, held0 = 0;
    for (uint32_t round = 0; round < rounds; round++) {
        snprintf(name, sizeof name,
                 "scratch of round %06u, named anew so no two rounds share it: %0160u", round,
                 round);
        ASSERT_OK(run_named(&f, name, (int32_t)(round % 5) + 1));
        ASSERT_EQ(f.s.replayed, 0);
        if (round % 7 == 3)
            hg_runner_invalidate_replay(f.r);
        if (round % 11 == 5) {
            hg_runner_set_replay(f.r, false);
            hg_runner_set_replay(f.r, true);
        }
        if (round == 20) { /* every capacity has grown by now */
            heap0 = heap_in_use();
            held0 = replay_state_bytes(&f.r->replay);
        }
    }
    ASSERT(out_is(&f, (float)((rounds - 1) % 5 + 1), 0));
    const uint64_t heap = heap_in_use(), held = replay_state_bytes(&f.r->replay);
    printf("  after %u rounds: heap in use %lld bytes from round 21, replay state %llu -> %llu\n",
           rounds, (long long)(heap - heap0), (unsigned long long)held0, (unsigned long long)held);
    /* ~200 name bytes a round: a name kept per round would be >= 100 KB. */
    ASSERT(heap <= heap0 + 16384);
    ASSERT_ULE(held, held0);
    fx_close(&f);
}

/* Bytes and results of replayed rounds equal orchestrated ones': two
 * runners, one replaying, through the same rounds (inputs and the read
 * config changing now and then), in each residency mode, with and
 * without scratch. */
TEST(replayed_rounds_equal_orchestrated)
{
    for (int mode = 0; mode < 4; mode++) {
        fx a, b;
        fx_open(&a, "sim:cores=2", mode & 1 ? HG_RESIDENT : HG_STAGED);
        fx_open(&b, "sim:cores=2", mode & 1 ? HG_RESIDENT : HG_STAGED);
        hg_runner_set_replay(b.r, false);
        a.ctx.scratch = b.ctx.scratch = mode & 2;
        int replayed = 0;
        for (int round = 0; round < 12; round++) {
            const float v = (float)round;
            if (round % 2) {
                set_in0(&a, v);
                set_in0(&b, v);
            }
            if (round % 5 == 4) {
                const int32_t sc = round;
                hg_hostbuf_write(a.cfg, 0, &sc, sizeof sc);
                hg_hostbuf_write(b.cfg, 0, &sc, sizeof sc);
            }
            ASSERT_OK(fx_run(&a));
            ASSERT_OK(fx_run(&b));
            replayed += (int)a.s.replayed;
            ASSERT_UEQ(a.s.h2d_bytes, b.s.h2d_bytes);
            ASSERT_UEQ(a.s.d2h_bytes, b.s.d2h_bytes);
            ASSERT_UEQ(a.s.h2d_copies, b.s.h2d_copies);
            ASSERT_UEQ(a.s.d2h_copies, b.s.d2h_copies);
            ASSERT_UEQ(a.s.resident_hits, b.s.resident_hits);
            ASSERT_EQ(a.s.tasks, b.s.tasks);
            ASSERT_EQ(a.s.edges, b.s.edges);
            ASSERT_UEQ(hg_hostbuf_generation(a.out), hg_hostbuf_generation(b.out));
            ASSERT(memcmp(hg_hostbuf_data(a.out), hg_hostbuf_data(b.out), N * sizeof(float)) == 0);
        }
        ASSERT_EQ(replayed, 12 - 1 - 2); /* the first round and two config changes orchestrate */
        fx_close(&a);
        fx_close(&b);
    }
}

/* h2d_ns and d2h_ns: the copies' time, inside bind and copy-back. */
TEST(copy_times_inside_stages)
{
    fx f;
    fx_open(&f, "sim:cores=2", HG_STAGED);
    ASSERT_OK(fx_run(&f));
    ASSERT_UGT(f.s.h2d_bytes, 0);
    ASSERT_UGT(f.s.h2d_ns, 0);
    ASSERT_UGT(f.s.d2h_ns, 0);
    ASSERT_ULE(f.s.h2d_ns, f.s.bind_ns);
    ASSERT_ULE(f.s.d2h_ns, f.s.copyback_ns);
    fx_close(&f);
}

/* ------------------------------------------------------------- scenes */

typedef struct scene_log {
    hg_run_stats s[SCENE_ROUNDS];
    uint64_t out_hash[SCENE_ROUNDS]; /* every OUT/INOUT arg's host bytes */
    uint32_t rounds;
} scene_log;

static void log_scene_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    scene_log *log = user;
    if (round > SCENE_ROUNDS)
        return;
    uint64_t h = 0;
    for (uint32_t i = 0; i < c->nargs; i++) {
        const hg_arg *a = &c->args[i];
        if ((a->dir == HG_OUT || a->dir == HG_INOUT) && a->tensor.host != NULL)
            h = h * 31 +
                residency_hash(hg_hostbuf_data(a->tensor.host), hg_hostbuf_size(a->tensor.host));
    }
    log->s[round - 1] = *s;
    log->out_hash[round - 1] = h;
    log->rounds = round;
}

static int run_scene(const char *spec, const scene *sc, scene_residency mode, bool replay,
                     bool verify, scene_log *log)
{
    scene_run_opts o = {.scene = sc,
                        .rounds = SCENE_ROUNDS,
                        .residency = mode,
                        .replay = replay,
                        .verify = verify,
                        .device_spec = spec,
                        .quiet = true,
                        .on_round = log_scene_round,
                        .on_round_user = log};
    memset(log, 0, sizeof *log);
    scene_params_default(sc, o.params);
#ifdef UNDER_TSAN
    if (strcmp(sc->name, "vector_add") == 0) { /* see UNDER_TSAN */
        hg_err e;
        if (scene_param_set(sc, o.params, "n=262144", &e) != 0 ||
            scene_param_set(sc, o.params, "tile=16384", &e) != 0)
            return -1;
    }
#endif
    o.out = fopen("/dev/null", "w");
    o.err = stderr;
    int rc = scene_run(&o);
    fclose(o.out);
    return rc;
}

/* Every scene in every residency mode: with replay on, golden passes every
 * round, rounds 2.. replay, and each round moves the same bytes and leaves
 * the same outputs as with replay off (also with verify).  On each backend:
 * every mode on the sim; on OpenCL (the enqueued executor replaying the
 * recorded graph's wait lists) `off` and `all`, the staged and the resident
 * extremes, which keeps its program builds within the suite's time. */
TEST_EACH_BACKEND(every_scene_replays_in_every_mode_with_equal_results)
{
    const bool sim = test_backend_is_sim(backend);
    const char *spec = sim ? "sim:cube=1,vector=2" : backend;
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        const scene *sc = scene_at(i);
        for (int m = 0; m < SCENE_RESIDENCY_COUNT; m++) {
            if (!sim && m != SCENE_RESIDENCY_OFF && m != SCENE_RESIDENCY_ALL)
                continue;
            scene_log off, on, ver;
            ASSERT_EQ(run_scene(spec, sc, (scene_residency)m, false, false, &off), SCENE_EXIT_OK);
            ASSERT_EQ(run_scene(spec, sc, (scene_residency)m, true, false, &on), SCENE_EXIT_OK);
            ASSERT_EQ(run_scene(spec, sc, (scene_residency)m, true, true, &ver), SCENE_EXIT_OK);
            ASSERT_EQ(on.rounds, SCENE_ROUNDS);
            for (int r = 0; r < SCENE_ROUNDS; r++) {
                if (on.s[r].replayed != (r > 0) || ver.s[r].replayed != (r > 0))
                    TEST_FAIL_("scene %s, mode %s, round %d: replayed %u (verify: %u)", sc->name,
                               scene_residency_name((scene_residency)m), r + 1, on.s[r].replayed,
                               ver.s[r].replayed);
                ASSERT_UEQ(on.s[r].h2d_bytes, off.s[r].h2d_bytes);
                ASSERT_UEQ(on.s[r].d2h_bytes, off.s[r].d2h_bytes);
                ASSERT_UEQ(on.s[r].h2d_copies, off.s[r].h2d_copies);
                ASSERT_UEQ(on.s[r].d2h_copies, off.s[r].d2h_copies);
                ASSERT_UEQ(on.s[r].resident_hits, off.s[r].resident_hits);
                ASSERT_UEQ(on.s[r].device_allocs, off.s[r].device_allocs);
                ASSERT_EQ(on.s[r].tasks, off.s[r].tasks);
                ASSERT_EQ(on.s[r].edges, off.s[r].edges);
                ASSERT_UEQ(on.out_hash[r], off.out_hash[r]);
                ASSERT_UEQ(ver.out_hash[r], off.out_hash[r]);
            }
        }
    }
}

int main(void)
{
#ifdef UNDER_TSAN
    printf("ThreadSanitizer build: fewer repeats (scene rounds %d, not 4; vector_add n = 2^18, "
           "not 2^20; scratch-name rounds %d, not 2000), every check kept\n",
           SCENE_ROUNDS, 2000 / TSAN_FEWER);
#endif
    return RUN_TESTS();
}
