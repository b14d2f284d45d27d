/*
 * model_test.c: residency and ranged staging against an oracle.
 *
 * A seeded random sequence of operations drives two worlds side by side:
 * the subject (a runner on the sim device whose args are randomly resident,
 * under a random small budget, with injected allocation and copy faults) and
 * the oracle (the same task run directly on host memory: no device, no
 * staging, no residency, nothing to go stale).  Each world has its own host
 * buffers with identical contents.  Operations:
 *   - host writes through the API, whole or ranged, to both worlds, and now
 *     and then a burst of small writes that overflows a buffer's write log;
 *   - runs of one task over 1-4 args: random extents of random buffers,
 *     random directions and residency, sometimes a user device view; the
 *     task writes a random sub-range of each OUT/INOUT arg, so only that may
 *     come back and an OUT's other bytes must stay as the host had them;
 *   - a buffer destroyed and created anew (ids are never reused);
 *   - budget changes (evictions), verify mode on and off;
 *   - a fault armed before the subject's run: if the run fails, no host
 *     byte or generation of the subject may have changed, and the oracle
 *     does not run.
 * After every run, every host byte of the two worlds must be identical.
 *
 *     HG_MODEL_OPS=N   operations (default 100000; the soak label runs more)
 *     HG_TEST_SEED=S   replays a failing sequence
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

enum { NBUF = 6, MAX_BYTES = 2048, MAX_RUN_ARGS = 4 };

/* Every written arg's byte j becomes s + 31 j + 17 a (+ its old value for
 * INOUT), s the byte sum of every read arg: any stale input shows. */
static int k_model(const hg_kernel_ctx *ctx)
{
    uint32_t sum = 0;
    for (uint32_t a = 0; a < ctx->nargs; a++) {
        if (ctx->scalars[a] == HG_OUT)
            continue;
        const unsigned char *p = ctx->args[a].data;
        for (size_t j = 0; j < ctx->args[a].shape[0]; j++)
            sum += p[j];
    }
    for (uint32_t a = 0; a < ctx->nargs; a++) {
        if (ctx->scalars[a] == HG_IN)
            continue;
        unsigned char *p = ctx->args[a].data;
        for (size_t j = 0; j < ctx->args[a].shape[0]; j++) {
            unsigned char v = (unsigned char)(sum + 31u * j + 17u * a);
            p[j] = ctx->scalars[a] == HG_INOUT ? (unsigned char)(p[j] + v) : v;
        }
    }
    return 0;
}
static const hg_kernel K_MODEL = {"model", k_model, HG_CORE_VECTOR, NULL, NULL};

/* The sub-range [cut[i].lo, cut[i].hi) of arg i (element offsets within its
 * view) that the task touches: all of it for IN args. */
typedef struct task_cut {
    hg_range cut[MAX_RUN_ARGS];
} task_cut;

static int orch_model(hg_orch *o, void *user)
{
    const task_cut *tc = user;
    uint32_t n = hg_orch_num_args(o);
    hg_task_arg ta[MAX_RUN_ARGS];
    uint64_t dirs[MAX_RUN_ARGS];
    for (uint32_t i = 0; i < n; i++) {
        const hg_arg *a;
        hg_orch_arg(o, i, &a);
        ta[i] = (hg_task_arg){i, a->dir, {0}};
        int rc = hg_tensor_slice(&a->tensor, 0, tc->cut[i].lo, tc->cut[i].hi - tc->cut[i].lo,
                                 &ta[i].view);
        if (rc != 0)
            return rc;
        dirs[i] = a->dir;
    }
    hg_task_desc d = {&K_MODEL, ta, n, dirs, n, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

typedef struct world {
    hg_runner *r;
    hg_hostbuf *buf[NBUF];
} world;

typedef struct model {
    hg_device *dev;
    world subject, oracle; /* the oracle's runner is unused: it runs on the host */
    hg_devaddr view;       /* a user device buffer both worlds read */
    unsigned char view_bytes[256];
    test_rng rng;
    uint64_t runs, failed_runs, hits, evictions, staged;
} model;

static uint32_t pick(model *m, uint32_t n)
{
    return test_rand(&m->rng) % n;
}

static int new_buffer(model *m, uint32_t i)
{
    size_t bytes = 64 + pick(m, MAX_BYTES - 64);
    if (hg_hostbuf_create(bytes, &m->subject.buf[i]) || hg_hostbuf_create(bytes, &m->oracle.buf[i]))
        return -1;
    unsigned char *p = hg_hostbuf_data(m->subject.buf[i]);
    for (size_t j = 0; j < bytes; j++)
        p[j] = (unsigned char)test_rand(&m->rng);
    memcpy(hg_hostbuf_data(m->oracle.buf[i]), p, bytes);
    hg_hostbuf_mark_written(m->subject.buf[i], 0, bytes);
    return hg_hostbuf_mark_written(m->oracle.buf[i], 0, bytes);
}

/* More small writes to one buffer than its log remembers. */
static void write_burst(model *m)
{
    uint32_t i = pick(m, NBUF);
    size_t size = hg_hostbuf_size(m->subject.buf[i]);
    for (int w = 0; w < HG_HOSTBUF_LOG + 10; w++) {
        size_t at = pick(m, (uint32_t)size);
        unsigned char v = (unsigned char)test_rand(&m->rng);
        hg_hostbuf_write(m->subject.buf[i], at, &v, 1);
        hg_hostbuf_write(m->oracle.buf[i], at, &v, 1);
    }
}

static void host_write(model *m)
{
    uint32_t i = pick(m, NBUF);
    size_t size = hg_hostbuf_size(m->subject.buf[i]);
    size_t lo = pick(m, 2) ? 0 : pick(m, (uint32_t)size);
    size_t len = lo == 0 && pick(m, 2) ? size : pick(m, (uint32_t)(size - lo) + 1);
    unsigned char src[MAX_BYTES];
    for (size_t j = 0; j < len; j++)
        src[j] = (unsigned char)test_rand(&m->rng);
    hg_hostbuf_write(m->subject.buf[i], lo, src, len);
    hg_hostbuf_write(m->oracle.buf[i], lo, src, len);
}

/* Random args over distinct buffers (so written args never alias), and the
 * sub-range of each that the task touches. */
static uint32_t make_args(model *m, hg_arg *sub, hg_arg *ora, task_cut *tc)
{
    static const char *const names[MAX_RUN_ARGS] = {"a0", "a1", "a2", "a3"};
    uint32_t n = 1 + pick(m, MAX_RUN_ARGS), used = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i;
        do
            i = pick(m, NBUF);
        while (used & (1u << i));
        used |= 1u << i;
        hg_dir dir = (hg_dir)(HG_IN + pick(m, 3));
        size_t size = hg_hostbuf_size(m->subject.buf[i]);
        /* Mostly the same few extents, so copies get reused. */
        size_t lo = pick(m, 4) ? 0 : pick(m, (uint32_t)size / 2);
        size_t len = pick(m, 4) ? size - lo : pick(m, (uint32_t)(size - lo) + 1);
        hg_residency res = pick(m, 4) ? HG_RESIDENT : HG_STAGED;
        sub[k] = (hg_arg){names[k], dir, {0}, 0, res};
        ora[k] = (hg_arg){names[k], dir, {0}, 0, HG_STAGED};
        hg_tensor_host(&sub[k].tensor, m->subject.buf[i], HG_U8, 1, &len);
        hg_tensor_host(&ora[k].tensor, m->oracle.buf[i], HG_U8, 1, &len);
        sub[k].tensor.offset = ora[k].tensor.offset = lo;
        if (k == 0 && dir == HG_IN && pick(m, 8) == 0) { /* a user device view */
            size_t vlen = 1 + pick(m, sizeof m->view_bytes);
            hg_tensor_device(&sub[k].tensor, m->view, HG_U8, 1, &vlen);
            ora[k].tensor = sub[k].tensor; /* the oracle reads view_bytes instead */
            len = vlen;
        }
        size_t a = 0, b = len;
        if (dir != HG_IN && len > 0 && pick(m, 2)) { /* write a piece only */
            a = pick(m, (uint32_t)len);
            b = a + pick(m, (uint32_t)(len - a) + 1);
        }
        tc->cut[k] = (hg_range){a, b};
    }
    return n;
}

/* The oracle: the same kernel on host memory, over the same sub-ranges. */
static void oracle_run(model *m, const hg_arg *ora, uint32_t n, const task_cut *tc)
{
    hg_kview views[MAX_RUN_ARGS];
    uint64_t dirs[MAX_RUN_ARGS];
    for (uint32_t k = 0; k < n; k++) {
        const hg_tensor *t = &ora[k].tensor;
        unsigned char *base =
            t->host ? (unsigned char *)hg_hostbuf_data(t->host) + t->offset : m->view_bytes;
        views[k] = (hg_kview){.data = base + tc->cut[k].lo, .dtype = HG_U8, .ndims = 1};
        views[k].shape[0] = tc->cut[k].hi - tc->cut[k].lo;
        views[k].strides[0] = 1;
        dirs[k] = ora[k].dir;
    }
    hg_kernel_ctx ctx = {.args = views, .nargs = n, .scalars = dirs, .nscalars = n};
    k_model(&ctx);
}

typedef struct snapshot {
    unsigned char bytes[NBUF][MAX_BYTES];
    uint64_t gen[NBUF];
} snapshot;

static void snap(const world *w, snapshot *s)
{
    for (int i = 0; i < NBUF; i++) {
        memcpy(s->bytes[i], hg_hostbuf_data(w->buf[i]), hg_hostbuf_size(w->buf[i]));
        s->gen[i] = hg_hostbuf_generation(w->buf[i]);
    }
}

static int snap_equal(const world *w, const snapshot *s)
{
    for (int i = 0; i < NBUF; i++)
        if (memcmp(s->bytes[i], hg_hostbuf_data(w->buf[i]), hg_hostbuf_size(w->buf[i])) != 0 ||
            s->gen[i] != hg_hostbuf_generation(w->buf[i]))
            return 0;
    return 1;
}

static int worlds_equal(const model *m)
{
    for (int i = 0; i < NBUF; i++)
        if (memcmp(hg_hostbuf_data(m->subject.buf[i]), hg_hostbuf_data(m->oracle.buf[i]),
                   hg_hostbuf_size(m->subject.buf[i])) != 0)
            return 0;
    return 1;
}

/* One run in both worlds; a line describing a broken promise, or NULL. */
static const char *run_both(model *m, snapshot *before)
{
    hg_arg sub[MAX_RUN_ARGS], ora[MAX_RUN_ARGS];
    task_cut tc;
    uint32_t n = make_args(m, sub, ora, &tc);
    hg_callable model_call = {"model", orch_model, &tc};
    bool faulted = pick(m, 10) == 0;
    if (faulted)
        hg_device_inject_fault(m->dev, pick(m, 2) ? HG_FAULT_ALLOC : HG_FAULT_COPY, 1 + pick(m, 6));
    snap(&m->subject, before);
    hg_run_stats s;
    int rc = hg_runner_run(m->subject.r, &model_call, sub, n, &s);
    hg_device_inject_fault(m->dev, HG_FAULT_ALLOC, 0);
    hg_device_inject_fault(m->dev, HG_FAULT_COPY, 0);
    m->runs++;
    if (rc != 0) {
        if (!faulted || (rc != HG_EDEVMEM && rc != HG_ECOPY))
            return hg_runner_errmsg(m->subject.r);
        m->failed_runs++;
        return snap_equal(&m->subject, before) ? NULL : "a failed run changed the host";
    }
    m->hits += s.resident_hits;
    m->evictions += s.evictions;
    m->staged += s.resident_staged;
    oracle_run(m, ora, n, &tc);
    return worlds_equal(m) ? NULL : "the subject's bytes differ from the oracle's";
}

static int model_open(model *m, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->rng = test_seed(seed);
    m->dev = test_device_open("sim:cores=2,mem=64K");
    if (m->dev == NULL || hg_runner_open(m->dev, &m->subject.r) ||
        hg_runner_open(m->dev, &m->oracle.r) ||
        hg_devbuf_malloc(m->dev, sizeof m->view_bytes, &m->view))
        return -1;
    for (size_t j = 0; j < sizeof m->view_bytes; j++)
        m->view_bytes[j] = (unsigned char)j;
    if (hg_devbuf_copy_to(m->dev, m->view, m->view_bytes, sizeof m->view_bytes))
        return -1;
    for (uint32_t i = 0; i < NBUF; i++)
        if (new_buffer(m, i) != 0)
            return -1;
    return 0;
}

static void model_close(model *m)
{
    hg_runner_close(m->subject.r);
    hg_runner_close(m->oracle.r);
    for (int i = 0; i < NBUF; i++) {
        hg_hostbuf_destroy(m->subject.buf[i]);
        hg_hostbuf_destroy(m->oracle.buf[i]);
    }
    hg_devbuf_free(m->dev, m->view);
    hg_device_close(m->dev);
}

TEST(residency_matches_an_oracle_that_stages_everything)
{
    const char *env = getenv("HG_MODEL_OPS");
    const uint64_t ops = env && *env ? strtoull(env, NULL, 10) : 100000;
    static model m;
    static snapshot before;
    ASSERT_OK(model_open(&m, 20261130));
    for (uint64_t op = 0; op < ops; op++) {
        uint32_t what = pick(&m, 100);
        const char *bad = NULL;
        if (what < 45) {
            host_write(&m);
        } else if (what < 95) {
            bad = run_both(&m, &before);
        } else if (what < 97) {
            uint32_t i = pick(&m, NBUF);
            hg_hostbuf_destroy(m.subject.buf[i]);
            hg_hostbuf_destroy(m.oracle.buf[i]);
            ASSERT_OK(new_buffer(&m, i));
        } else if (what < 98) {
            ASSERT_OK(hg_runner_set_budget(m.subject.r, pick(&m, 4) * 4096u));
        } else if (what < 99) {
            write_burst(&m);
        } else {
            hg_runner_set_verify(m.subject.r, pick(&m, 2));
        }
        if (bad != NULL)
            TEST_FAIL_("op %llu (seed %llu): %s", (unsigned long long)op,
                       (unsigned long long)m.rng.seed, bad);
    }
    printf("     %llu ops: %llu runs (%llu failed by injected faults), %llu resident hits, "
           "%llu evictions, %llu staged for lack of room\n",
           (unsigned long long)ops, (unsigned long long)m.runs, (unsigned long long)m.failed_runs,
           (unsigned long long)m.hits, (unsigned long long)m.evictions,
           (unsigned long long)m.staged);
    ASSERT_UGT(m.hits, m.runs / 10); /* residency was really exercised */
    ASSERT_UGT(m.evictions, 0);
    ASSERT_UGT(m.failed_runs, 0);
    model_close(&m);
}

int main(void)
{
    return RUN_TESTS();
}
