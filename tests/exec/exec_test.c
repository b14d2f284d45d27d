/*
 * exec_test.c: the scheduler (src/exec) on random and hand-built DAGs.
 *
 * Kernels stamp a global sequence number (one atomic counter) when they start
 * and when they end, per task; a task's id travels as scalar 0.  An edge
 * i -> j is honoured when end(i) < start(j).  Random-DAG kernels also read
 * and write the bytes of their args through the translated pointers, so a
 * missing edge shows up as a wrong final buffer and as a ThreadSanitizer race.
 * The globals below are test bookkeeping, reset before every exec_run.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/trace.h"
#include "exec/exec.h"
#include "graph/graph.h"
#include "testlib.h"

#define MAX_TASKS 4096
#define NO_FAIL   UINT64_MAX
#define FAIL_ALL  (UINT64_MAX - 1)

static atomic_uint g_seq;
static atomic_uint g_start[MAX_TASKS], g_end[MAX_TASKS], g_runs[MAX_TASKS];
static atomic_uint g_core[MAX_TASKS];
static atomic_uint g_bad_core;  /* a kernel ran on a core of the wrong type */
static atomic_uint g_bad_ctx;   /* a kernel saw a wrong ctx field */
static atomic_uint g_null_seen; /* zero-byte args seen with data == NULL */
static atomic_ullong g_fail_task = NO_FAIL;
static hg_device *g_dev;

/* Plain reads of the records, so a failed ASSERT prints readable text. */
static unsigned runs_of(uint32_t t)
{
    return atomic_load(&g_runs[t]);
}

static unsigned count_of(atomic_uint *counter)
{
    return atomic_load(counter);
}

static void records_reset(void)
{
    atomic_store(&g_seq, 1);
    for (uint32_t i = 0; i < MAX_TASKS; i++) {
        atomic_store(&g_start[i], 0);
        atomic_store(&g_end[i], 0);
        atomic_store(&g_runs[i], 0);
        atomic_store(&g_core[i], UINT32_MAX);
    }
    atomic_store(&g_bad_core, 0);
    atomic_store(&g_bad_ctx, 0);
    atomic_store(&g_null_seen, 0);
    atomic_store(&g_fail_task, NO_FAIL);
}

static void stamp_start(const hg_kernel_ctx *ctx, uint64_t id)
{
    atomic_store(&g_start[id], atomic_fetch_add(&g_seq, 1));
    atomic_fetch_add(&g_runs[id], 1);
    atomic_store(&g_core[id], ctx->core);
    hg_core_type ct = hg_device_core_type(g_dev, ctx->core);
    if (ct != HG_CORE_ANY && ct != ctx->core_type)
        atomic_fetch_add(&g_bad_core, 1);
}

/* Scalars: [0] task id, [1] bit i set when arg i is written.  Reads every
 * byte of each arg, then fills written args with the low byte of the id. */
static int touch_kernel(const hg_kernel_ctx *ctx)
{
    if (ctx->nscalars != 2) {
        atomic_fetch_add(&g_bad_ctx, 1);
        return 0;
    }
    uint64_t id = ctx->scalars[0], writes = ctx->scalars[1];
    stamp_start(ctx, id);
    if (id % 7 == 0)
        sched_yield();
    unsigned sum = 0;
    for (uint32_t i = 0; i < ctx->nargs; i++) {
        unsigned char *p = ctx->args[i].data;
        for (size_t b = 0; b < ctx->args[i].shape[0]; b++)
            sum += p[b];
        if (writes & (1u << i))
            memset(p, (int)(id & 0xff), ctx->args[i].shape[0]);
    }
    (void)sum;
    atomic_store(&g_end[id], atomic_fetch_add(&g_seq, 1));
    return 0;
}

/* Scalar 0 is the task id; fails with code 7 when the id is g_fail_task or
 * g_fail_task is FAIL_ALL. */
static int flaky_kernel(const hg_kernel_ctx *ctx)
{
    uint64_t id = ctx->scalars[0];
    stamp_start(ctx, id);
    atomic_store(&g_end[id], atomic_fetch_add(&g_seq, 1));
    uint64_t fail = atomic_load(&g_fail_task);
    return id == fail || fail == FAIL_ALL ? 7 : 0;
}

static const hg_kernel k_touch_cube = {"touch_cube", touch_kernel, HG_CORE_CUBE, NULL, NULL};
static const hg_kernel k_touch_vec = {"touch_vec", touch_kernel, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel k_flaky = {"flaky", flaky_kernel, HG_CORE_VECTOR, NULL, NULL};
static const hg_kernel k_flaky_cube = {"flaky_cube", flaky_kernel, HG_CORE_CUBE, NULL, NULL};

static hg_device *open_dev(const char *spec)
{
    hg_device *dev = NULL;
    char msg[256] = "";
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "  cannot open %s: %s\n", spec, msg);
        return NULL;
    }
    g_dev = dev;
    return dev;
}

/* A dense 1-D u8 arg over device bytes [base+off, base+off+len). */
static graph_targ byte_arg(hg_devaddr base, size_t off, size_t len, bool rd, bool wr)
{
    return graph_targ_bytes(base + off, base + off + len, rd, wr);
}

/* Adds a task with scalar 0 = its expected id and no args. */
static int add_plain(graph *g, const hg_kernel *k, const hg_task_id *deps, uint32_t ndeps)
{
    uint64_t id = g->ntasks;
    hg_task_id out;
    hg_err e;
    return graph_add_task(g, k, NULL, 0, &id, 1, deps, ndeps, &out, &e);
}

/* ------------------------------------------------------------ random DAGs */

#define RBUF      1024
#define MAX_RARGS 3

typedef struct rtask {
    uint32_t nargs;
    size_t off[MAX_RARGS], len[MAX_RARGS];
    bool rd[MAX_RARGS], wr[MAX_RARGS];
    uint32_t ndeps;
    hg_task_id deps[2];
} rtask;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void rtask_make(rtask *rt, uint32_t id, uint64_t *rng)
{
    memset(rt, 0, sizeof *rt);
    rt->nargs = 1 + (uint32_t)(rng_next(rng) % MAX_RARGS);
    for (uint32_t i = 0; i < rt->nargs; i++) {
        rt->off[i] = rng_next(rng) % (RBUF - 1);
        size_t len = 1 + rng_next(rng) % 64;
        rt->len[i] = rt->off[i] + len > RBUF ? RBUF - rt->off[i] : len;
        uint64_t mode = rng_next(rng) % 3; /* IN, OUT, INOUT */
        rt->rd[i] = mode != 1;
        rt->wr[i] = mode != 0;
    }
    if (id > 0 && rng_next(rng) % 4 == 0)
        rt->deps[rt->ndeps++] = (hg_task_id)(rng_next(rng) % id);
}

static int rtask_add(graph *g, const rtask *rt, hg_devaddr base, uint32_t id, bool cube)
{
    graph_targ args[MAX_RARGS];
    uint64_t writes = 0;
    for (uint32_t i = 0; i < rt->nargs; i++) {
        args[i] = byte_arg(base, rt->off[i], rt->len[i], rt->rd[i], rt->wr[i]);
        if (rt->wr[i])
            writes |= 1u << i;
    }
    uint64_t scalars[2] = {id, writes};
    hg_task_id out;
    hg_err e;
    return graph_add_task(g, cube ? &k_touch_cube : &k_touch_vec, args, rt->nargs, scalars, 2,
                          rt->deps, rt->ndeps, &out, &e);
}

static bool rtask_conflict(const rtask *a, const rtask *b)
{
    for (uint32_t i = 0; i < a->nargs; i++)
        for (uint32_t j = 0; j < b->nargs; j++) {
            bool overlap = a->off[i] < b->off[j] + b->len[j] && b->off[j] < a->off[i] + a->len[i];
            if (overlap && (a->wr[i] || b->wr[j]))
                return true;
        }
    return false;
}

/* 0 if every graph edge, every explicit dep and every conflicting pair ran
 * in order and every task ran once; else the failing task id + 1. */
static uint32_t check_order(const graph *g, const rtask *rts)
{
    for (uint32_t i = 0; i < g->ntasks; i++) {
        if (atomic_load(&g_runs[i]) != 1)
            return i + 1;
        const uint32_t *succ = graph_task_succ(g, &g->tasks[i]);
        for (uint32_t k = 0; k < g->tasks[i].nsucc; k++)
            if (atomic_load(&g_end[i]) >= atomic_load(&g_start[succ[k]]))
                return i + 1;
        for (uint32_t k = 0; k < rts[i].ndeps; k++)
            if (atomic_load(&g_end[rts[i].deps[k]]) >= atomic_load(&g_start[i]))
                return i + 1;
        for (uint32_t j = i + 1; j < g->ntasks; j++)
            if (rtask_conflict(&rts[i], &rts[j]) &&
                atomic_load(&g_end[i]) >= atomic_load(&g_start[j]))
                return i + 1;
    }
    return 0;
}

/* The buffer a serial run in submission order leaves. */
static void replay(const rtask *rts, uint32_t n, unsigned char *buf)
{
    memset(buf, 0, RBUF);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t i = 0; i < rts[t].nargs; i++)
            if (rts[t].wr[i])
                memset(buf + rts[t].off[i], (int)(t & 0xff), rts[t].len[i]);
}

/* Builds and runs a random DAG of n tasks on spec; returns a failure line. */
static const char *random_dag_case(const char *spec, uint32_t n, uint64_t seed)
{
    static rtask rts[MAX_TASKS];
    static unsigned char want[RBUF], got[RBUF];
    const char *why = NULL;
    hg_device *dev = open_dev(spec);
    if (dev == NULL)
        return "device open";
    hg_devaddr base;
    graph g;
    graph_init(&g);
    static hg_err e; /* its message may be the failure line returned */
    records_reset();
    memset(got, 0, RBUF);
    if (hg_devbuf_malloc(dev, RBUF, &base) != 0 || hg_devbuf_copy_to(dev, base, got, RBUF) != 0) {
        why = "devbuf";
        goto out;
    }
    uint64_t rng = seed;
    for (uint32_t t = 0; t < n && why == NULL; t++) {
        rtask_make(&rts[t], t, &rng);
        if (rtask_add(&g, &rts[t], base, t, rng_next(&rng) % 2 == 0) != 0)
            why = "graph_add_task";
    }
    if (why == NULL && graph_finalize(&g, &e) != 0)
        why = "graph_finalize";
    if (why == NULL && exec_run(dev, &g, NULL, 0, &e) != 0)
        why = e.msg;
    if (why == NULL && check_order(&g, rts) != 0)
        why = "a task ran twice, never, or before a task it depends on";
    if (why == NULL && atomic_load(&g_bad_core) != 0)
        why = "a task ran on a core of the wrong type";
    replay(rts, n, want);
    if (why == NULL && hg_devbuf_copy_from(dev, got, base, RBUF) != 0)
        why = "copy_from";
    if (why == NULL && memcmp(want, got, RBUF) != 0)
        why = "final buffer differs from a serial replay";
out:
    graph_free(&g);
    hg_device_close(dev);
    return why;
}

TEST(random_dags_typed_cores)
{
    test_rng rng = test_seed(7919);
    for (int i = 0; i < 6; i++) {
        uint64_t seed = test_rand64(&rng);
        const char *why = random_dag_case("sim:cube=1,vector=2", 300, seed);
        if (why != NULL)
            TEST_FAIL_("seed %llu: %s", (unsigned long long)seed, why);
    }
}

TEST(random_dags_any_cores)
{
    test_rng rng = test_seed(104729);
    for (int i = 0; i < 6; i++) {
        uint64_t seed = test_rand64(&rng);
        const char *why = random_dag_case("sim:cores=3", 300, seed);
        if (why != NULL)
            TEST_FAIL_("seed %llu: %s", (unsigned long long)seed, why);
    }
}

TEST(random_dags_one_core_and_many_cores)
{
    test_rng rng = test_seed(12345);
    const char *why = random_dag_case("sim:cores=1", 200, test_rand64(&rng));
    if (why != NULL)
        TEST_FAIL_("cores=1: %s", why);
    why = random_dag_case("sim:cube=3,vector=5", 400, test_rand64(&rng));
    if (why != NULL)
        TEST_FAIL_("cube=3,vector=5: %s", why);
}

/* ---------------------------------------------------------------- fixture */

/* The device and graph of the running test.  fx_open also closes what a
 * test that failed an ASSERT (and so returned early) left open. */
static struct {
    hg_device *dev;
    graph g;
    hg_err e;
} fx;

static void fx_close(void)
{
    if (fx.dev == NULL)
        return;
    graph_free(&fx.g);
    hg_device_close(fx.dev);
    fx.dev = NULL;
}

static bool fx_open(const char *spec)
{
    fx_close();
    fx.dev = open_dev(spec);
    graph_init(&fx.g);
    err_clear(&fx.e);
    records_reset();
    return fx.dev != NULL;
}

TEST(typed_tasks_run_on_their_cores)
{
    ASSERT(fx_open("sim:cube=1,vector=2"));
    for (uint32_t t = 0; t < 60; t++)
        ASSERT_OK(add_plain(&fx.g, t % 3 == 0 ? &k_flaky_cube : &k_flaky, NULL, 0));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e));
    for (uint32_t t = 0; t < 60; t++) {
        ASSERT_UEQ(runs_of(t), 1);
        hg_core_type ct = hg_device_core_type(fx.dev, atomic_load(&g_core[t]));
        ASSERT_EQ(ct, t % 3 == 0 ? HG_CORE_CUBE : HG_CORE_VECTOR);
    }
    fx_close();
}

TEST(long_chain_and_wide_fan)
{
    ASSERT(fx_open("sim:cores=2"));
    /* a chain of 1000, then 1 -> 64 -> 1 fans, 20 times */
    for (uint32_t t = 0; t < 1000; t++) {
        hg_task_id prev = t - 1;
        ASSERT_OK(add_plain(&fx.g, &k_flaky, &prev, t > 0 ? 1 : 0));
    }
    hg_task_id sink = 999;
    for (uint32_t r = 0; r < 20; r++) {
        hg_task_id mids[64];
        for (uint32_t m = 0; m < 64; m++) {
            mids[m] = fx.g.ntasks;
            ASSERT_OK(add_plain(&fx.g, m % 2 ? &k_flaky : &k_flaky_cube, &sink, 1));
        }
        sink = fx.g.ntasks;
        ASSERT_OK(add_plain(&fx.g, &k_flaky, mids, 64));
    }
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e));
    for (uint32_t i = 0; i < fx.g.ntasks; i++) {
        ASSERT_UEQ(runs_of(i), 1);
        const uint32_t *succ = graph_task_succ(&fx.g, &fx.g.tasks[i]);
        for (uint32_t k = 0; k < fx.g.tasks[i].nsucc; k++) {
            unsigned end_i = atomic_load(&g_end[i]), start_j = atomic_load(&g_start[succ[k]]);
            ASSERT_LT(end_i, start_j);
        }
    }
    fx_close();
}

/* -------------------------------------------------------------- failures */

/* 0 ok; 1 fails (after 0); 2 after 1; 3 alone; 4 after 2; 5 after 3 and 1. */
static void build_failure_graph(graph *g)
{
    hg_task_id d0 = 0, d1 = 1, d2 = 2, d35[2] = {3, 1};
    add_plain(g, &k_flaky, NULL, 0);
    add_plain(g, &k_flaky, &d0, 1);
    add_plain(g, &k_flaky_cube, &d1, 1);
    add_plain(g, &k_flaky, NULL, 0);
    add_plain(g, &k_flaky, &d2, 1);
    add_plain(g, &k_flaky, d35, 2);
}

TEST(kernel_failure_names_task_and_stops_dependents)
{
    ASSERT(fx_open("sim:cores=2"));
    build_failure_graph(&fx.g);
    ASSERT_UEQ(fx.g.ntasks, 6);
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    atomic_store(&g_fail_task, 1);
    err_clear(&fx.e);
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_EKERNEL);
    ASSERT_EQ(fx.e.code, HG_EKERNEL);
    ASSERT_STR_CONTAINS(fx.e.msg, "task 1 (kernel 'flaky') failed with code 7");
    ASSERT_UEQ(runs_of(0), 1);
    ASSERT_UEQ(runs_of(1), 1);
    ASSERT_UEQ(runs_of(2), 0);
    ASSERT_UEQ(runs_of(4), 0);
    ASSERT_UEQ(runs_of(5), 0);
    ASSERT_ULE(runs_of(3), 1);

    /* the same graph and device run cleanly next time */
    records_reset();
    err_clear(&fx.e);
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 1, &fx.e));
    for (uint32_t t = 0; t < 6; t++)
        ASSERT_UEQ(runs_of(t), 1);

    /* and so does a new graph on the same device */
    graph_reset(&fx.g);
    for (uint32_t t = 0; t < 10; t++)
        ASSERT_OK(add_plain(&fx.g, &k_flaky, NULL, 0));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 2, &fx.e));
    for (uint32_t t = 0; t < 10; t++)
        ASSERT_UEQ(runs_of(t), 1);
    fx_close();
}

TEST(kernel_failure_stops_dispatch)
{
    /* one core: whatever order it picks, nothing may start after task 50
     * failed, and tasks that ran before it ran once */
    ASSERT(fx_open("sim:cores=1"));
    for (uint32_t t = 0; t < 100; t++)
        ASSERT_OK(add_plain(&fx.g, &k_flaky, NULL, 0));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    atomic_store(&g_fail_task, 50);
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_EKERNEL);
    ASSERT_STR_CONTAINS(fx.e.msg, "task 50 (kernel 'flaky')");
    ASSERT_UEQ(runs_of(50), 1);
    unsigned failed_end = count_of(&g_end[50]), ran = 0;
    for (uint32_t t = 0; t < 100; t++) {
        ASSERT_ULE(runs_of(t), 1);
        if (t != 50 && runs_of(t) == 1)
            ASSERT_LT(count_of(&g_start[t]), failed_end);
        ran += runs_of(t);
    }
    ASSERT_LT(ran, 100);
    fx_close();
}

TEST(concurrent_failures_report_one)
{
    ASSERT(fx_open("sim:cores=3"));
    for (uint32_t t = 0; t < 200; t++)
        ASSERT_OK(add_plain(&fx.g, &k_flaky, NULL, 0));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    atomic_store(&g_fail_task, FAIL_ALL);
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_EKERNEL);
    ASSERT_STR_CONTAINS(fx.e.msg, "(kernel 'flaky') failed with code 7");
    unsigned ran = 0;
    for (uint32_t t = 0; t < 200; t++)
        ran += atomic_load(&g_runs[t]);
    ASSERT_GE(ran, 1);
    ASSERT_LE(ran, 3); /* one per core at most: dispatch stops at the first */
    fx_close();
}

TEST(graph_that_cannot_progress_does_not_hang)
{
    ASSERT(fx_open("sim:cores=2"));
    hg_task_id d0 = 0;
    ASSERT_OK(add_plain(&fx.g, &k_flaky, NULL, 0));
    ASSERT_OK(add_plain(&fx.g, &k_flaky, &d0, 1));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    fx.g.tasks[1].npreds++; /* a predecessor that never finishes */
    records_reset();
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_EINVAL);
    ASSERT_STR_CONTAINS(fx.e.msg, "cannot progress");
    ASSERT_UEQ(runs_of(0), 1);
    ASSERT_UEQ(runs_of(1), 0);
    fx_close();
}

TEST(task_without_a_core_type_is_unsupported)
{
    ASSERT(fx_open("sim:cube=2,vector=0"));
    ASSERT_OK(add_plain(&fx.g, &k_flaky_cube, NULL, 0));
    ASSERT_OK(add_plain(&fx.g, &k_flaky, NULL, 0));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_EUNSUPPORTED);
    ASSERT_STR_CONTAINS(fx.e.msg, "task 1 (kernel 'flaky') needs a vector core");
    ASSERT_UEQ(runs_of(0), 0);
    fx_close();
}

TEST(empty_graph)
{
    ASSERT(fx_open("sim:cores=2"));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    err_clear(&fx.e);
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e));
    ASSERT_EQ(fx.e.code, 0);
    fx_close();
}

/* ------------------------------------------------------------------- data */

/* out[i*s0 + j*s1] = 2 * in[i*s0 + j*s1] + scalar 0, over 2-D f32 views. */
static int scale_kernel(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2 || ctx->nscalars != 1 || ctx->core_type != HG_CORE_VECTOR) {
        atomic_fetch_add(&g_bad_ctx, 1);
        return 1;
    }
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    const hg_kview *v = &ctx->args[1];
    for (size_t i = 0; i < v->shape[0]; i++)
        for (size_t j = 0; j < v->shape[1]; j++) {
            size_t at = i * v->strides[0] + j * v->strides[1];
            out[at] = 2.0f * in[at] + (float)ctx->scalars[0];
        }
    return 0;
}

static const hg_kernel k_scale = {"scale", scale_kernel, HG_CORE_VECTOR, NULL, NULL};

/* A 2x3 f32 view at element `first` with strides {10, 2}. */
static graph_targ strided_arg(hg_devaddr base, size_t first, bool wr)
{
    graph_targ a;
    memset(&a, 0, sizeof a);
    a.addr = base + first * 4;
    a.lo = a.addr;
    a.hi = a.addr + (10 + 2 * 2 + 1) * 4;
    a.dtype = HG_F32;
    a.ndims = 2;
    a.shape[0] = 2;
    a.shape[1] = 3;
    a.strides[0] = 10;
    a.strides[1] = 2;
    a.read = !wr;
    a.write = wr;
    return a;
}

static bool in_view(size_t el, size_t first)
{
    if (el < first)
        return false;
    size_t rel = el - first;
    return (rel / 10) < 2 && (rel % 10) % 2 == 0 && (rel % 10) / 2 < 3;
}

TEST(kernels_see_translated_strided_data)
{
    ASSERT(fx_open("sim:cube=1,vector=2"));
    float in[64], out[64];
    for (int i = 0; i < 64; i++) {
        in[i] = (float)i;
        out[i] = -1.0f;
    }
    hg_devaddr din, dout;
    ASSERT_OK(hg_devbuf_malloc(fx.dev, sizeof in, &din));
    ASSERT_OK(hg_devbuf_malloc(fx.dev, sizeof out, &dout));
    ASSERT_OK(hg_devbuf_copy_to(fx.dev, din, in, sizeof in));
    ASSERT_OK(hg_devbuf_copy_to(fx.dev, dout, out, sizeof out));
    hg_task_id id;
    size_t firsts[2] = {3, 30};
    for (int t = 0; t < 2; t++) {
        graph_targ args[2] = {strided_arg(din, firsts[t], false),
                              strided_arg(dout, firsts[t], true)};
        uint64_t add = (uint64_t)(100 * (t + 1));
        ASSERT_OK(graph_add_task(&fx.g, &k_scale, args, 2, &add, 1, NULL, 0, &id, &fx.e));
    }
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e));
    ASSERT_UEQ(count_of(&g_bad_ctx), 0);
    ASSERT_OK(hg_devbuf_copy_from(fx.dev, out, dout, sizeof out));
    for (size_t el = 0; el < 64; el++) {
        float want = -1.0f;
        if (in_view(el, 3))
            want = 2.0f * (float)el + 100.0f;
        else if (in_view(el, 30))
            want = 2.0f * (float)el + 200.0f;
        if (out[el] != want)
            TEST_FAIL_("element %zu: %g, want %g", el, (double)out[el], (double)want);
    }
    fx_close();
}

/* Arg 0 is zero-byte, arg 1 is 8 bytes: counts a NULL arg 0 next to a live
 * arg 1 it can write. */
static int zero_kernel(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs == 2 && ctx->args[0].data == NULL && ctx->args[1].data != NULL) {
        memset(ctx->args[1].data, 0x5a, 8);
        atomic_fetch_add(&g_null_seen, 1);
    }
    return 0;
}

static const hg_kernel k_zero = {"zero", zero_kernel, HG_CORE_CUBE, NULL, NULL};

TEST(zero_byte_arg_gets_null)
{
    ASSERT(fx_open("sim:cores=2"));
    hg_devaddr d;
    ASSERT_OK(hg_devbuf_malloc(fx.dev, 8, &d));
    graph_targ args[2];
    memset(&args[0], 0, sizeof args[0]);
    args[0].dtype = HG_F32;
    args[0].ndims = 1;
    args[0].read = true;
    args[1] = byte_arg(d, 0, 8, false, true);
    hg_task_id id;
    ASSERT_OK(graph_add_task(&fx.g, &k_zero, args, 2, NULL, 0, NULL, 0, &id, &fx.e));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e));
    ASSERT_UEQ(count_of(&g_null_seen), 1);
    unsigned char back[8];
    ASSERT_OK(hg_devbuf_copy_from(fx.dev, back, d, 8));
    for (int i = 0; i < 8; i++)
        ASSERT_EQ(back[i], 0x5a);
    fx_close();
}

TEST(freed_arg_memory_fails_with_erange)
{
    ASSERT(fx_open("sim:cores=2"));
    hg_devaddr d;
    ASSERT_OK(hg_devbuf_malloc(fx.dev, 64, &d));
    graph_targ arg = byte_arg(d, 0, 64, true, true);
    uint64_t scalars[2] = {0, 1};
    hg_task_id id;
    ASSERT_OK(graph_add_task(&fx.g, &k_touch_vec, &arg, 1, scalars, 2, NULL, 0, &id, &fx.e));
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    ASSERT_OK(hg_devbuf_free(fx.dev, d));
    records_reset();
    ASSERT_EQ(exec_run(fx.dev, &fx.g, NULL, 0, &fx.e), HG_ERANGE);
    ASSERT_STR_CONTAINS(fx.e.msg, "task 0 (kernel 'touch_vec')");
    ASSERT_UEQ(runs_of(0), 0);
    fx_close();
}

TEST(trace_gets_a_span_per_task)
{
    ASSERT(fx_open("sim:cube=1,vector=2"));
    hg_trace *tr = NULL;
    ASSERT_OK(hg_trace_create(&tr));
    build_failure_graph(&fx.g);
    ASSERT_OK(graph_finalize(&fx.g, &fx.e));
    records_reset();
    ASSERT_OK(exec_run(fx.dev, &fx.g, tr, 3, &fx.e));
    ASSERT_UEQ(hg_trace_num_task_spans(tr), 6);
    ASSERT_OK(exec_run(fx.dev, &fx.g, NULL, 4, &fx.e));
    ASSERT_UEQ(hg_trace_num_task_spans(tr), 6);
    hg_trace_destroy(tr);
    fx_close();
}

int main(void)
{
    return RUN_TESTS();
}
