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
 *   - a buffer destroyed and created anew, or destroyed and its memory
 *     wrapped again (ids are never reused: no copy of the old id may serve);
 *   - writes that bypass the API, in verify mode (the subject's runners
 *     must then fail HG_ESTALE or compute on the new bytes), declared later;
 *   - budget changes (evictions), verify mode on and off;
 *   - a fault armed before the subject's run: if the run fails, no host
 *     byte or generation of the subject may have changed, and the oracle
 *     does not run.
 * The subject has two runners on two devices; a run takes either.  After
 * every run, every host byte of the two worlds must be identical.
 * The scenarios of defects 1 (declared writes beside an undeclared one) and
 * 7 (a runner's resident copies bounded by its live buffers' extents), both
 * fixed, run by default; HG_FUZZ_KNOWN_BUGS (tests/known_bugs.h) can turn
 * them off.
 *
 *     HG_MODEL_OPS=N   operations (default 100000; the soak label runs more)
 *     HG_MODEL_OPENCL_OPS=N  on OpenCL (default 500: a run there costs a
 *                      launch and a wait on a real queue, ~50x the sim's;
 *                      the soak label runs 20000)
 *     HG_TEST_SEED=S   replays a failing sequence
 * The sequence runs once per backend (test_device.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostgraph.h"
#include "known_bugs.h"
#include "test_device.h"
#include "model_kernel.h"
#include "testlib.h"

enum { NBUF = 6, MAX_BYTES = 2048, MAX_RUN_ARGS = 4, NRUNNER = 2, MAX_KEYS = 256 };

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
    hg_task_desc d = {model_kernel(n), ta, n, dirs, n, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

typedef struct world {
    hg_runner *r[NRUNNER]; /* runner i on device i */
    hg_hostbuf *buf[NBUF];
} world;

/* A resident copy a runner may hold: host buffer id and byte extent. */
typedef struct copy_key {
    uint64_t id;
    size_t lo, hi;
} copy_key;

typedef struct model {
    hg_device *dev[NRUNNER];
    world subject, oracle; /* the oracle's runners are unused: it runs on the host */
    hg_devaddr view;       /* a user device buffer of device 0 both worlds read */
    unsigned char view_bytes[256];
    unsigned char *wrapped[NBUF]; /* the subject's odd buffers wrap this memory */
    bool verify;                  /* both subject runners verify */
    bool pending[NBUF];           /* the subject's buffer has an undeclared write */
    bool virgin[NBUF];            /* ... and no declared write since registered */
    copy_key keys[NRUNNER][MAX_KEYS];
    uint32_t nkeys[NRUNNER];
    bool bug1, bug7;
    bool queue; /* an OpenCL device: see first_write_nonempty */
    test_rng rng;
    uint64_t runs, failed_runs, hits, evictions, staged, stale, rewraps;
} model;

static uint32_t pick(model *m, uint32_t n)
{
    return test_rand(&m->rng) % n;
}

static uint32_t buf_index(const model *m, const hg_hostbuf *hb)
{
    uint32_t i = 0;
    while (i < NBUF && m->subject.buf[i] != hb)
        i++;
    return i;
}

/* The runners forget nothing on their own: the keys of a destroyed buffer
 * stop counting as copies they may hold. */
static void forget_keys(model *m, uint64_t id)
{
    for (int r = 0; r < NRUNNER; r++) {
        uint32_t k = 0;
        for (uint32_t j = 0; j < m->nkeys[r]; j++)
            if (m->keys[r][j].id != id)
                m->keys[r][k++] = m->keys[r][j];
        m->nkeys[r] = k;
    }
}

static void add_key(model *m, int r, uint64_t id, size_t lo, size_t hi)
{
    for (uint32_t j = 0; j < m->nkeys[r]; j++)
        if (m->keys[r][j].id == id && m->keys[r][j].lo == lo && m->keys[r][j].hi == hi)
            return;
    if (m->nkeys[r] < MAX_KEYS)
        m->keys[r][m->nkeys[r]++] = (copy_key){id, lo, hi};
}

/* The subject's odd buffers wrap harness memory, the even ones own theirs. */
static int new_buffer(model *m, uint32_t i)
{
    size_t bytes = 64 + pick(m, MAX_BYTES - 64);
    int rc = i % 2 ? hg_hostbuf_wrap(m->wrapped[i], bytes, &m->subject.buf[i])
                   : hg_hostbuf_create(bytes, &m->subject.buf[i]);
    if (rc != 0 || hg_hostbuf_create(bytes, &m->oracle.buf[i]))
        return -1;
    unsigned char *p = hg_hostbuf_data(m->subject.buf[i]);
    for (size_t j = 0; j < bytes; j++)
        p[j] = (unsigned char)test_rand(&m->rng);
    memcpy(hg_hostbuf_data(m->oracle.buf[i]), p, bytes);
    m->pending[i] = false;
    m->virgin[i] = true;
    hg_hostbuf_mark_written(m->subject.buf[i], 0, bytes);
    return hg_hostbuf_mark_written(m->oracle.buf[i], 0, bytes);
}

static void destroy_subject(model *m, uint32_t i)
{
    forget_keys(m, hg_hostbuf_id(m->subject.buf[i]));
    hg_hostbuf_destroy(m->subject.buf[i]);
    m->subject.buf[i] = NULL;
}

/* The subject's buffer i destroyed and its bytes registered again, as
 * wrapped memory: a new id over the same bytes (the same memory when it was
 * wrapped already).  Never two live registrations of one memory. */
static int rewrap(model *m, uint32_t i)
{
    size_t bytes = hg_hostbuf_size(m->subject.buf[i]);
    memmove(m->wrapped[i], hg_hostbuf_data(m->subject.buf[i]), bytes);
    destroy_subject(m, i);
    m->pending[i] = false;
    m->virgin[i] = true;
    m->rewraps++;
    return hg_hostbuf_wrap(m->wrapped[i], bytes, &m->subject.buf[i]);
}

/* Declares the subject's undeclared write to buffer i, as a user told
 * HG_ESTALE would. */
static void declare(model *m, uint32_t i)
{
    if (!m->pending[i])
        return;
    hg_hostbuf_mark_written(m->subject.buf[i], 0, hg_hostbuf_size(m->subject.buf[i]));
    m->pending[i] = false;
    m->virgin[i] = false;
}

/* A declared write to buffer i is about to happen.  Known defect 1: one
 * beside an undeclared write is approved stale; unless it is generated, the
 * undeclared one is declared first. */
static void declared_write(model *m, uint32_t i)
{
    if (!m->bug1)
        declare(m, i);
    m->virgin[i] = false;
}

static void set_verify(model *m, bool on);

/* Bytes of the subject's buffer changed behind the API (the oracle's
 * through it); only in verify mode, which must catch it. */
static void undeclared_write(model *m)
{
    uint32_t i = pick(m, NBUF);
    for (uint32_t k = 0; k < NBUF && !m->virgin[i] && !m->bug1; k++)
        i = (i + 1) % NBUF;
    if (!m->virgin[i] && !m->bug1)
        return; /* defect 1: a copy current at an older generation uploads only the log */
    if (!m->verify)
        set_verify(m, true);
    size_t size = hg_hostbuf_size(m->subject.buf[i]);
    size_t lo = pick(m, (uint32_t)size), len = 1 + pick(m, (uint32_t)(size - lo));
    unsigned char *p = hg_hostbuf_data(m->subject.buf[i]);
    for (size_t j = lo; j < lo + len; j++)
        p[j] = (unsigned char)(p[j] ^ (1 + pick(m, 255)));
    hg_hostbuf_write(m->oracle.buf[i], lo, p + lo, len);
    m->pending[i] = true;
}

/* More small writes to one buffer than its log remembers. */
static void write_burst(model *m)
{
    uint32_t i = pick(m, NBUF);
    size_t size = hg_hostbuf_size(m->subject.buf[i]);
    declared_write(m, i);
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
    declared_write(m, i);
    hg_hostbuf_write(m->subject.buf[i], lo, src, len);
    hg_hostbuf_write(m->oracle.buf[i], lo, src, len);
}

/* Known defect (reported by h-cts; staging_test's
 * a_task_whose_first_written_arg_is_empty_still_writes_the_others): on
 * OpenCL a task whose first written arg is empty is not launched at all
 * (hostgraph.h's work size rule), so its other written args keep poison
 * while the sim writes them.  Until it is fixed, an OpenCL run puts a
 * non-empty written arg first (a swap of two args: the sim's sequence is
 * unchanged). */
static void first_write_nonempty(hg_arg *sub, hg_arg *ora, task_cut *tc, uint32_t n)
{
    uint32_t first = n;
    for (uint32_t k = 0; k < n && first == n; k++)
        first = sub[k].dir != HG_IN ? k : n;
    for (uint32_t k = first + 1; first < n && tc->cut[first].lo == tc->cut[first].hi && k < n;
         k++) {
        if (sub[k].dir == HG_IN || tc->cut[k].lo == tc->cut[k].hi)
            continue;
        hg_arg s = sub[k], o = ora[k];
        hg_range c = tc->cut[k];
        sub[k] = sub[first], ora[k] = ora[first], tc->cut[k] = tc->cut[first];
        sub[first] = s, ora[first] = o, tc->cut[first] = c;
        const char *name = sub[k].name;
        sub[k].name = ora[k].name = sub[first].name;
        sub[first].name = ora[first].name = name;
    }
}

/* Random args over distinct buffers (so written args never alias), and the
 * sub-range of each that the task touches. */
static uint32_t make_args(model *m, hg_arg *sub, hg_arg *ora, task_cut *tc, bool views)
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
        if (k == 0 && dir == HG_IN && views && pick(m, 8) == 0) { /* a user device view */
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
    if (m->queue)
        first_write_nonempty(sub, ora, tc, n);
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

/* Verify mode for both subject runners; undeclared writes are declared
 * before it goes off (without it they are the user's broken contract). */
static void set_verify(model *m, bool on)
{
    if (!on)
        for (uint32_t i = 0; i < NBUF; i++)
            declare(m, i);
    m->verify = on;
    for (int r = 0; r < NRUNNER; r++)
        hg_runner_set_verify(m->subject.r[r], on);
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

/* Before a run: declared writes ahead, and whether a resident arg reads
 * bytes written behind the API (then HG_ESTALE is the right answer). */
static bool before_run(model *m, int r, const hg_arg *sub, uint32_t n)
{
    bool stale = false;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = buf_index(m, sub[k].tensor.host);
        if (i == NBUF)
            continue;
        if (sub[k].dir != HG_IN)
            declared_write(m, i);
        if (sub[k].residency == HG_RESIDENT && sub[k].dir != HG_OUT) {
            size_t lo, hi;
            hg_tensor_extent(&sub[k].tensor, &lo, &hi);
            stale |= m->pending[i] && lo < hi;
            if (lo < hi)
                add_key(m, r, hg_hostbuf_id(sub[k].tensor.host), lo, hi);
        }
    }
    return stale;
}

/* One run of the given args on subject runner r and in the oracle; a line
 * describing a broken promise, or NULL. */
static const char *run_given(model *m, int r, const hg_arg *sub, const hg_arg *ora, uint32_t n,
                             task_cut *tc, bool faulted, snapshot *before)
{
    hg_callable model_call = {"model", orch_model, tc};
    bool may_stale = before_run(m, r, sub, n);
    snap(&m->subject, before);
    hg_run_stats s;
    int rc = hg_runner_run(m->subject.r[r], &model_call, sub, n, &s);
    hg_device_inject_fault(m->dev[r], HG_FAULT_ALLOC, 0);
    hg_device_inject_fault(m->dev[r], HG_FAULT_COPY, 0);
    m->runs++;
    if (m->bug7 && hg_runner_resident_copies(m->subject.r[r]) > m->nkeys[r])
        return "a runner holds more resident copies than its live buffers' extents";
    if (rc == HG_ESTALE && may_stale) {
        m->stale++;
        bool unchanged = snap_equal(&m->subject, before);
        for (uint32_t i = 0; i < NBUF; i++)
            declare(m, i);
        return unchanged ? NULL : "HG_ESTALE changed the host";
    }
    if (rc != 0) {
        if (!faulted || (rc != HG_EDEVMEM && rc != HG_ECOPY))
            return hg_runner_errmsg(m->subject.r[r]);
        m->failed_runs++;
        return snap_equal(&m->subject, before) ? NULL : "a failed run changed the host";
    }
    m->hits += s.resident_hits;
    m->evictions += s.evictions;
    m->staged += s.resident_staged;
    oracle_run(m, ora, n, tc);
    return worlds_equal(m) ? NULL : "the subject's bytes differ from the oracle's";
}

/* One random run in both worlds. */
static const char *run_both(model *m, snapshot *before)
{
    hg_arg sub[MAX_RUN_ARGS], ora[MAX_RUN_ARGS];
    task_cut tc;
    int r = pick(m, 16) == 0;                         /* mostly runner 0, so copies get reused */
    uint32_t n = make_args(m, sub, ora, &tc, r == 0); /* the view is device 0's */
    bool faulted = pick(m, 10) == 0;
    if (faulted)
        hg_device_inject_fault(m->dev[r], pick(m, 2) ? HG_FAULT_ALLOC : HG_FAULT_COPY,
                               1 + pick(m, 6));
    return run_given(m, r, sub, ora, n, &tc, faulted, before);
}

/* Verify mode's promise, played out: a run publishes a resident copy of
 * buffer i with its hash, bytes under it change behind the API, and the
 * same run again must fail HG_ESTALE, changing nothing (the user then
 * declares the write).  With known defect 1 generated, a declared write to
 * the same buffer comes with the undeclared one: HG_ESTALE or the new bytes
 * are both right, the old bytes never. */
static const char *stale_probe(model *m, snapshot *before)
{
    uint32_t i = pick(m, NBUF);
    size_t size = hg_hostbuf_size(m->subject.buf[i]);
    hg_arg sub = {"a0", HG_IN, {0}, 0, HG_RESIDENT}, ora = {"a0", HG_IN, {0}, 0, HG_STAGED};
    hg_tensor_host(&sub.tensor, m->subject.buf[i], HG_U8, 1, &size);
    hg_tensor_host(&ora.tensor, m->oracle.buf[i], HG_U8, 1, &size);
    task_cut tc = {{{0, size}}};
    set_verify(m, true);
    uint64_t stale = m->stale;
    const char *bad = run_given(m, 0, &sub, &ora, 1, &tc, false, before);
    if (bad == NULL && m->stale > stale) /* an earlier write behind the API, declared now */
        bad = run_given(m, 0, &sub, &ora, 1, &tc, false, before);
    if (bad != NULL)
        return bad;
    size_t lo = pick(m, (uint32_t)size), len = 1 + pick(m, (uint32_t)(size - lo));
    unsigned char *p = hg_hostbuf_data(m->subject.buf[i]);
    for (size_t j = lo; j < lo + len; j++)
        p[j] = (unsigned char)(p[j] ^ (1 + pick(m, 255)));
    hg_hostbuf_write(m->oracle.buf[i], lo, p + lo, len);
    m->pending[i] = true;
    bool declared_too = m->bug1 && pick(m, 2);
    if (declared_too) {
        unsigned char v = (unsigned char)pick(m, 256);
        size_t at = pick(m, (uint32_t)size);
        hg_hostbuf_write(m->subject.buf[i], at, &v, 1);
        hg_hostbuf_write(m->oracle.buf[i], at, &v, 1);
    }
    stale = m->stale;
    if ((bad = run_given(m, 0, &sub, &ora, 1, &tc, false, before)) != NULL)
        return bad;
    return m->stale > stale || declared_too ? NULL : "verify mode missed a write behind the API";
}

static int model_open(model *m, const char *backend, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->rng = test_seed(seed);
    m->bug1 = known_bug(1);
    m->bug7 = known_bug(7);
    m->queue = !test_backend_is_sim(backend);
    m->dev[0] = test_device_on(backend, "cores=2,mem=64K");
    m->dev[1] = test_device_on(backend, "cores=1,mem=64K");
    for (int r = 0; r < NRUNNER; r++)
        if (m->dev[r] == NULL || hg_runner_open(m->dev[r], &m->subject.r[r]))
            return -1;
    if (hg_devbuf_malloc(m->dev[0], sizeof m->view_bytes, &m->view))
        return -1;
    for (size_t j = 0; j < sizeof m->view_bytes; j++)
        m->view_bytes[j] = (unsigned char)j;
    if (hg_devbuf_copy_to(m->dev[0], m->view, m->view_bytes, sizeof m->view_bytes))
        return -1;
    for (uint32_t i = 0; i < NBUF; i++)
        if ((m->wrapped[i] = malloc(MAX_BYTES)) == NULL || new_buffer(m, i) != 0)
            return -1;
    return 0;
}

static void model_close(model *m)
{
    for (int r = 0; r < NRUNNER; r++)
        hg_runner_close(m->subject.r[r]);
    for (int i = 0; i < NBUF; i++) {
        hg_hostbuf_destroy(m->subject.buf[i]);
        hg_hostbuf_destroy(m->oracle.buf[i]);
        free(m->wrapped[i]);
    }
    hg_devbuf_free(m->dev[0], m->view);
    for (int r = 0; r < NRUNNER; r++)
        hg_device_close(m->dev[r]);
}

TEST_EACH_BACKEND(residency_matches_an_oracle_that_stages_everything)
{
    bool sim = test_backend_is_sim(backend);
    const char *env = getenv(sim ? "HG_MODEL_OPS" : "HG_MODEL_OPENCL_OPS");
    const uint64_t ops = env && *env ? strtoull(env, NULL, 10) : sim ? 100000 : 500;
    static model m;
    static snapshot before;
    ASSERT_OK(model_open(&m, backend, 20261130));
    for (uint64_t op = 0; op < ops; op++) {
        uint32_t what = pick(&m, 100);
        const char *bad = NULL;
        if (what < 44) {
            host_write(&m);
        } else if (what < 45) {
            if (pick(&m, 2))
                undeclared_write(&m);
            else
                bad = stale_probe(&m, &before);
        } else if (what < 95) {
            bad = run_both(&m, &before);
        } else if (what < 96) {
            uint32_t i = pick(&m, NBUF);
            destroy_subject(&m, i);
            hg_hostbuf_destroy(m.oracle.buf[i]);
            ASSERT_OK(new_buffer(&m, i));
        } else if (what < 97) {
            ASSERT_OK(rewrap(&m, pick(&m, NBUF)));
        } else if (what < 98) {
            ASSERT_OK(hg_runner_set_budget(m.subject.r[pick(&m, NRUNNER)], pick(&m, 4) * 4096u));
        } else if (what < 99) {
            pick(&m, 2) ? write_burst(&m) : set_verify(&m, pick(&m, 2));
        } else {
            undeclared_write(&m);
        }
        if (bad != NULL)
            TEST_FAIL_("op %llu (seed %llu): %s", (unsigned long long)op,
                       (unsigned long long)m.rng.seed, bad);
    }
    printf("     %llu ops: %llu runs (%llu failed by injected faults, %llu HG_ESTALE), %llu "
           "resident hits, %llu evictions, %llu staged for lack of room, %llu re-wrapped\n",
           (unsigned long long)ops, (unsigned long long)m.runs, (unsigned long long)m.failed_runs,
           (unsigned long long)m.stale, (unsigned long long)m.hits, (unsigned long long)m.evictions,
           (unsigned long long)m.staged, (unsigned long long)m.rewraps);
    ASSERT_UGT(m.hits, m.runs / 10); /* residency was really exercised */
    ASSERT_UGT(m.evictions, 0);
    ASSERT_UGT(m.failed_runs, 0);
    ASSERT_UGT(m.stale, 0); /* undeclared writes were caught */
    ASSERT_UGT(m.rewraps, 0);
    model_close(&m);
}

int main(void)
{
    return RUN_TESTS();
}
