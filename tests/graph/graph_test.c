/*
 * graph_test.c: dependency inference against brute-force references on
 * random task lists (every conflicting pair ordered, every edge forward and
 * between conflicting tasks, and the edges exactly those of the rule applied
 * byte by byte), plus the fixed cases: read-after-read, the
 * writer-after-readers shape, explicit deps and dedupe, errors, limits,
 * successor lists, reuse after graph_reset and a 30k-task tile graph.
 */
#include <time.h>

#include "graph/graph.h"
#include "tensor/tensor.h"
#include "testlib.h"

static int kernel_fn(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel kern = {"k", kernel_fn, HG_CORE_VECTOR, NULL, NULL};

static graph_targ targ(hg_devaddr lo, hg_devaddr hi, hg_dir access)
{
    return graph_targ_bytes(lo, hi, access != HG_OUT, access != HG_IN);
}

static int add(graph *g, const graph_targ *args, uint32_t nargs, hg_task_id *id)
{
    return graph_add_task(g, &kern, args, nargs, NULL, 0, NULL, 0, id, NULL);
}

/* Predecessors of task t, from the submission-order edge list. */
static uint32_t preds_of(const graph *g, uint32_t t, uint32_t *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->nedges; i++)
        if (g->edge_to[i] == t && n < max)
            out[n++] = g->edge_from[i];
    return n;
}

static int has_edge(const graph *g, uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < g->nedges; i++)
        if (g->edge_from[i] == from && g->edge_to[i] == to)
            return 1;
    return 0;
}

/* ------------------------------------------------- random vs brute force */

#define MAX_T    400
#define MAX_ARGS 4
#define NBUF     3

typedef struct rtask {
    graph_targ args[MAX_ARGS];
    uint32_t nargs;
} rtask;

typedef struct rparams {
    uint32_t ntasks;
    size_t buf_bytes, max_len;
    size_t grid; /* when set: views start on it and span 1-3 of it, most reads are of
                  * one range (fans of readers, split by writes) */
} rparams;

static void random_tasks(rtask *ts, const rparams *p, test_rng *rng)
{
    static const hg_dir access[3] = {HG_IN, HG_OUT, HG_INOUT};
    for (uint32_t t = 0; t < p->ntasks; t++) {
        ts[t].nargs = test_rand(rng) % (MAX_ARGS + 1);
        for (uint32_t i = 0; i < ts[t].nargs; i++) {
            hg_devaddr base = 0x100000ull * (1 + test_rand(rng) % NBUF);
            size_t lo = test_rand(rng) % p->buf_bytes, len = test_rand(rng) % (p->max_len + 1);
            if (p->grid != 0) {
                lo -= lo % p->grid;
                len = p->grid * (1 + test_rand(rng) % 3);
            }
            if (lo + len > p->buf_bytes)
                len = p->buf_bytes - lo;
            if (test_rand(rng) % 16 == 0)
                len = 0; /* an empty view: never a dependency */
            hg_dir dir = access[test_rand(rng) % 3];
            if (p->grid != 0 && dir == HG_IN && test_rand(rng) % 4 != 0) {
                base = 0x100000ull; /* the fan: many reads of one range */
                lo = 0;
                len = 3 * p->grid;
            }
            ts[t].args[i] = targ(base + lo, base + lo + len, dir);
        }
    }
}

static int conflict(const rtask *a, const rtask *b)
{
    for (uint32_t i = 0; i < a->nargs; i++)
        for (uint32_t j = 0; j < b->nargs; j++) {
            const graph_targ *x = &a->args[i], *y = &b->args[j];
            if ((x->write || y->write) && region_overlap(x->lo, x->hi, y->lo, y->hi))
                return 1;
        }
    return 0;
}

#define WORDS ((MAX_T + 63) / 64)

/* Checks a finalized graph of ts against the reference; returns a message
 * or NULL. */
static const char *check_graph(const graph *g, const rtask *ts, uint32_t n)
{
    static uint64_t reach[MAX_T][WORDS]; /* reach[j]: tasks j is ordered after */
    static uint32_t npreds[MAX_T];
    memset(reach, 0, sizeof reach);
    memset(npreds, 0, sizeof npreds);
    if (g->ntasks != n)
        return "task count";
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        const graph_task *t = &g->tasks[i];
        const uint32_t *succ = graph_task_succ(g, t);
        for (uint32_t k = 0; k < t->nsucc; k++) {
            uint32_t j = succ[k];
            if (j <= i || j >= n)
                return "an edge does not go forward";
            if (k > 0 && succ[k - 1] >= j)
                return "successors not sorted or duplicated";
            if (!conflict(&ts[i], &ts[j]))
                return "an edge between tasks that do not conflict";
            npreds[j]++;
            /* i < j and preds of i come first, so reach[i] is complete. */
            for (int w = 0; w < WORDS; w++)
                reach[j][w] |= reach[i][w];
            reach[j][i / 64] |= 1ull << (i % 64);
        }
        total += t->nsucc;
    }
    if (total != g->nedges)
        return "successor lists do not hold every edge";
    for (uint32_t j = 0; j < n; j++) {
        if (g->tasks[j].npreds != npreds[j])
            return "npreds differs from the incoming edges";
        for (uint32_t i = 0; i < j; i++)
            if (conflict(&ts[i], &ts[j]) && !(reach[j][i / 64] >> (i % 64) & 1))
                return "a conflicting pair is not ordered";
    }
    return NULL;
}

/* The rule byte by byte: a reader depends on the byte's last writer; a
 * writer on its readers since, or on that writer when there are none. */
typedef struct ref_byte {
    uint32_t writer; /* task + 1; 0: none */
    uint64_t readers[WORDS];
} ref_byte;

#define BUF_MAX 12288 /* the largest rparams.buf_bytes */

static ref_byte *ref_at(hg_devaddr addr)
{
    static ref_byte bytes[NBUF][BUF_MAX];
    return &bytes[addr / 0x100000 - 1][addr % 0x100000];
}

static void ref_deps(const graph_targ *a, uint64_t *want)
{
    for (hg_devaddr b = a->lo; b < a->hi; b++) {
        const ref_byte *r = ref_at(b);
        uint64_t any = 0;
        for (int w = 0; w < WORDS && a->write; w++) {
            want[w] |= r->readers[w];
            any |= r->readers[w];
        }
        if (!any && r->writer)
            want[(r->writer - 1) / 64] |= 1ull << ((r->writer - 1) % 64);
    }
}

static void ref_update(const rtask *t, uint32_t id)
{
    for (int pass = 0; pass < 2; pass++) /* reads first: its own writes win */
        for (uint32_t i = 0; i < t->nargs; i++) {
            const graph_targ *a = &t->args[i];
            for (hg_devaddr b = a->lo; b < a->hi && a->write == (pass == 1); b++) {
                ref_byte *r = ref_at(b);
                if (a->write) {
                    memset(r, 0, sizeof *r);
                    r->writer = id + 1;
                } else {
                    r->readers[id / 64] |= 1ull << (id % 64);
                }
            }
        }
}

/* Checks that the predecessors of every task are exactly the rule's. */
static const char *check_rule(const graph *g, const rtask *ts, uint32_t n)
{
    static uint64_t preds[MAX_T][WORDS];
    memset(preds, 0, sizeof preds);
    for (uint32_t i = 0; i < g->nedges; i++)
        preds[g->edge_to[i]][g->edge_from[i] / 64] |= 1ull << (g->edge_from[i] % 64);
    for (hg_devaddr b = 0x100000; b < 0x100000 * (NBUF + 1); b += 0x100000)
        memset(ref_at(b), 0, BUF_MAX * sizeof(ref_byte));
    for (uint32_t t = 0; t < n; t++) {
        uint64_t want[WORDS] = {0};
        for (uint32_t i = 0; i < ts[t].nargs; i++)
            ref_deps(&ts[t].args[i], want);
        if (memcmp(want, preds[t], sizeof want) != 0)
            return "the edges into a task are not exactly the rule's";
        ref_update(&ts[t], t);
    }
    return NULL;
}

static const char *build_and_check(graph *g, const rtask *ts, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++) {
        hg_task_id id;
        if (add(g, ts[t].args, ts[t].nargs, &id) != 0 || id != t)
            return "graph_add_task failed";
    }
    if (graph_finalize(g, NULL) != 0)
        return "graph_finalize failed";
    const char *why = check_graph(g, ts, n);
    return why != NULL ? why : check_rule(g, ts, n);
}

TEST(random_graphs_match_brute_force)
{
    static const rparams shapes[] = {
        {MAX_T, 64, 16, 0},     /* dense overlap: many conflicts */
        {MAX_T, 1024, 64, 0},   /* sparse: mostly independent */
        {MAX_T, 256, 256, 0},   /* long views spanning several records */
        {50, 16, 4, 0},         /* few tasks over a tiny buffer */
        {MAX_T, 4096, 8, 0},    /* many small records */
        {MAX_T, 128, 0, 16},    /* few distinct views: fans of readers, split by writes */
        {150, 12288, 12288, 0}, /* views over up to 12 granules: a wide write moves the
                                 * granule records to the read tree */
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    static rtask ts[MAX_T];
    graph g;
    graph_init(&g); /* one graph reused across all rounds, as the runner does */
    test_rng rng = test_seed(60);
    for (int round = 0; round < 12 * NSHAPES; round++) {
        const rparams *p = &shapes[round % NSHAPES];
        random_tasks(ts, p, &rng);
        graph_reset(&g);
        const char *why = build_and_check(&g, ts, p->ntasks);
        if (why != NULL)
            TEST_FAIL_("round %d: %s", round, why);
    }
    graph_free(&g);
}

TEST(reset_rebuilds_the_same_graph)
{
    static rtask ts[MAX_T];
    static uint32_t from[1 << 16], to[1 << 16];
    rparams p = {MAX_T, 128, 32, 0};
    test_rng rng = test_seed(128);
    random_tasks(ts, &p, &rng);
    graph g;
    graph_init(&g);
    ASSERT(build_and_check(&g, ts, MAX_T) == NULL);
    uint32_t nedges = g.nedges;
    ASSERT(nedges > 0 && nedges <= (1u << 16));
    memcpy(from, g.edge_from, nedges * sizeof from[0]);
    memcpy(to, g.edge_to, nedges * sizeof to[0]);
    graph_reset(&g);
    ASSERT_EQ(g.ntasks, 0);
    ASSERT_EQ(g.nedges, 0);
    ASSERT(build_and_check(&g, ts, MAX_T) == NULL);
    ASSERT_EQ(g.nedges, nedges);
    ASSERT(memcmp(from, g.edge_from, nedges * sizeof from[0]) == 0);
    ASSERT(memcmp(to, g.edge_to, nedges * sizeof to[0]) == 0);
    graph_free(&g);
}

/* -------------------------------------------------------- fixed shapes */

TEST(readers_do_not_order_each_other)
{
    graph g;
    graph_init(&g);
    graph_targ w = targ(0x1000, 0x1100, HG_OUT), r = targ(0x1000, 0x1100, HG_IN);
    hg_task_id id;
    ASSERT_OK(add(&g, &w, 1, &id));
    for (int i = 0; i < 5; i++)
        ASSERT_OK(add(&g, &r, 1, &id));
    ASSERT_EQ(g.nedges, 5); /* each reader after the writer, none between readers */
    for (uint32_t t = 1; t <= 5; t++)
        ASSERT(has_edge(&g, 0, t));
    graph_free(&g);
}

TEST(writer_follows_readers_since_last_write)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    graph_targ x_out = targ(0x1000, 0x1040, HG_OUT), x_in = targ(0x1000, 0x1040, HG_IN);
    ASSERT_OK(add(&g, &x_out, 1, &id)); /* 0 */
    ASSERT_OK(add(&g, &x_in, 1, &id));  /* 1 */
    ASSERT_OK(add(&g, &x_in, 1, &id));  /* 2 */
    ASSERT_OK(add(&g, &x_out, 1, &id)); /* 3: after both readers (they follow 0) */
    uint32_t p[8];
    ASSERT_EQ(preds_of(&g, 3, p, 8), 2);
    ASSERT(has_edge(&g, 1, 3) && has_edge(&g, 2, 3));
    ASSERT_OK(add(&g, &x_in, 1, &id)); /* 4: only the last writer */
    ASSERT_EQ(preds_of(&g, 4, p, 8), 1);
    ASSERT(has_edge(&g, 3, 4));
    graph_targ half = targ(0x1020, 0x1060, HG_INOUT);
    ASSERT_OK(add(&g, &half, 1, &id)); /* 5: reader 4 of the overlap */
    ASSERT_EQ(preds_of(&g, 5, p, 8), 1);
    ASSERT(has_edge(&g, 4, 5));
    graph_targ tail = targ(0x1050, 0x1058, HG_IN);
    ASSERT_OK(add(&g, &tail, 1, &id)); /* 6: 5 wrote those bytes */
    ASSERT_EQ(preds_of(&g, 6, p, 8), 1);
    ASSERT(has_edge(&g, 5, 6));
    graph_targ head = targ(0x1000, 0x1008, HG_OUT);
    ASSERT_OK(add(&g, &head, 1, &id)); /* 7: reader 4 still covers [0x1000, 0x1020) */
    ASSERT_EQ(preds_of(&g, 7, p, 8), 1);
    ASSERT(has_edge(&g, 4, 7));
    graph_free(&g);
}

TEST(one_task_reading_and_writing_has_no_self_edge)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    graph_targ args[3] = {targ(0x1000, 0x1100, HG_IN), targ(0x1080, 0x1180, HG_OUT),
                          targ(0x1000, 0x1100, HG_IN)};
    ASSERT_OK(add(&g, args, 3, &id));
    ASSERT_EQ(g.nedges, 0);
    graph_targ r = targ(0x1000, 0x1200, HG_IN);
    ASSERT_OK(add(&g, &r, 1, &id)); /* reads what task 0 wrote */
    ASSERT_EQ(g.nedges, 1);
    graph_targ w = targ(0x1000, 0x1010, HG_OUT);
    ASSERT_OK(add(&g, &w, 1, &id)); /* bytes task 0 and 1 read */
    ASSERT(has_edge(&g, 1, 2));
    ASSERT_OK(graph_finalize(&g, NULL));
    graph_free(&g);
}

TEST(explicit_deps_and_dedupe)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    graph_targ a = targ(0x1000, 0x1100, HG_OUT), b = targ(0x2000, 0x2100, HG_OUT);
    ASSERT_OK(add(&g, &a, 1, &id));
    ASSERT_OK(add(&g, &b, 1, &id));
    hg_task_id deps[3] = {0, 0, 1};
    uint64_t scal[2] = {7, 9};
    ASSERT_OK(graph_add_task(&g, &kern, NULL, 0, scal, 2, deps, 3, &id, NULL));
    ASSERT_EQ(id, 2);
    ASSERT_EQ(g.tasks[2].npreds, 2);
    ASSERT_EQ(g.nedges, 2);
    ASSERT_UEQ(graph_task_scalars(&g, &g.tasks[2])[1], 9);
    /* Three reads of what task 0 wrote plus an explicit dep on it: one edge. */
    graph_targ reads[3] = {targ(0x1000, 0x1010, HG_IN), targ(0x1010, 0x1020, HG_IN),
                           targ(0x1080, 0x1100, HG_INOUT)};
    hg_task_id dep0 = 0;
    ASSERT_OK(graph_add_task(&g, &kern, reads, 3, NULL, 0, &dep0, 1, &id, NULL));
    ASSERT_EQ(g.tasks[3].npreds, 1);
    ASSERT_EQ(g.nedges, 3);
    ASSERT(has_edge(&g, 0, 3));
    graph_free(&g);
}

TEST(bad_tasks_are_rejected_and_leave_the_graph)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    hg_err e;
    graph_targ a = targ(0x1000, 0x1100, HG_OUT);
    ASSERT_OK(add(&g, &a, 1, &id));
    ASSERT_OK(add(&g, &a, 1, &id));
    hg_task_id self = 2, later = 100;
    ASSERT_EQ(graph_add_task(&g, &kern, &a, 1, NULL, 0, &self, 1, &id, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "dep 2");
    ASSERT_EQ(graph_add_task(&g, &kern, &a, 1, NULL, 0, &later, 1, &id, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "dep 100");
    ASSERT_EQ(graph_add_task(&g, NULL, &a, 1, NULL, 0, NULL, 0, &id, &e), HG_EINVAL);
    graph_targ rev = a;
    rev.lo = rev.hi + 1;
    ASSERT_EQ(add(&g, &rev, 1, &id), HG_EINVAL);
    graph_targ none = a;
    none.read = none.write = false;
    ASSERT_EQ(add(&g, &none, 1, &id), HG_EINVAL);
    graph_targ odd = a;
    odd.dtype = (hg_dtype)300; /* would not survive the record's byte */
    ASSERT_EQ(graph_add_task(&g, &kern, &odd, 1, NULL, 0, NULL, 0, &id, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "dtype 300");
    ASSERT_EQ(graph_add_task(&g, &kern, NULL, 1, NULL, 0, NULL, 0, &id, &e), HG_EINVAL);
    ASSERT_EQ(graph_add_task(&g, &kern, &a, 1, NULL, 1, NULL, 0, &id, &e), HG_EINVAL);
    /* Nothing of the failed submits stayed: the next task is 2, after 1. */
    ASSERT_EQ(g.ntasks, 2);
    ASSERT_EQ(g.nedges, 1);
    ASSERT_OK(add(&g, &a, 1, &id));
    ASSERT_EQ(id, 2);
    ASSERT_EQ(g.nedges, 2);
    ASSERT(has_edge(&g, 1, 2));
    graph_free(&g);
}

TEST(task_limits)
{
    graph g;
    graph_init(&g);
    hg_task_id id, deps[HG_MAX_TASK_DEPS + 1];
    hg_err e;
    graph_targ args[HG_MAX_TASK_ARGS + 1];
    uint64_t scal[HG_MAX_TASK_SCALARS + 1] = {0};
    for (int i = 0; i <= HG_MAX_TASK_ARGS; i++)
        args[i] = targ(0x1000 + 16 * (hg_devaddr)i, 0x1010 + 16 * (hg_devaddr)i, HG_INOUT);
    ASSERT_OK(add(&g, args, 1, &id));
    for (int i = 0; i <= HG_MAX_TASK_DEPS; i++)
        deps[i] = 0;
    ASSERT_EQ(add(&g, args, HG_MAX_TASK_ARGS + 1, &id), HG_ELIMIT);
    ASSERT_OK(add(&g, args, HG_MAX_TASK_ARGS, &id));
    ASSERT_EQ(graph_add_task(&g, &kern, NULL, 0, scal, HG_MAX_TASK_SCALARS + 1, NULL, 0, &id, &e),
              HG_ELIMIT);
    ASSERT_STR_CONTAINS(e.msg, "scalars");
    ASSERT_OK(graph_add_task(&g, &kern, NULL, 0, scal, HG_MAX_TASK_SCALARS, NULL, 0, &id, &e));
    ASSERT_EQ(graph_add_task(&g, &kern, NULL, 0, NULL, 0, deps, HG_MAX_TASK_DEPS + 1, &id, &e),
              HG_ELIMIT);
    ASSERT_OK(graph_add_task(&g, &kern, NULL, 0, NULL, 0, deps, HG_MAX_TASK_DEPS, &id, &e));
    ASSERT_EQ(g.tasks[id].npreds, 1);
    ASSERT_EQ(g.ntasks, 4);
    graph_free(&g);
}

TEST(finalize_groups_successors)
{
    graph g;
    graph_init(&g);
    ASSERT_OK(graph_finalize(&g, NULL)); /* an empty graph is fine */
    hg_task_id id;
    graph_targ w = targ(0x1000, 0x1100, HG_OUT), r1 = targ(0x1000, 0x1080, HG_IN),
               r2 = targ(0x1080, 0x1100, HG_IN), all = targ(0x1000, 0x1100, HG_INOUT);
    ASSERT_OK(add(&g, &w, 1, &id));        /* 0 */
    ASSERT_OK(add(&g, &r1, 1, &id));       /* 1 */
    ASSERT_OK(add(&g, &r2, 1, &id));       /* 2 */
    ASSERT_OK(add(&g, &all, 1, &id));      /* 3 */
    for (int pass = 0; pass < 2; pass++) { /* finalizing twice gives the same lists */
        ASSERT_OK(graph_finalize(&g, NULL));
        ASSERT_EQ(g.tasks[0].nsucc, 2);
        ASSERT_EQ(graph_task_succ(&g, &g.tasks[0])[0], 1);
        ASSERT_EQ(graph_task_succ(&g, &g.tasks[0])[1], 2);
        ASSERT_EQ(g.tasks[1].nsucc, 1);
        ASSERT_EQ(graph_task_succ(&g, &g.tasks[1])[0], 3);
        ASSERT_EQ(g.tasks[2].nsucc, 1);
        ASSERT_EQ(g.tasks[3].nsucc, 0);
        ASSERT_EQ(g.tasks[3].npreds, 2);
    }
    ASSERT_UEQ(graph_task_args(&g, &g.tasks[2])[0].lo, 0x1080);
    graph_free(&g);
}

TEST(empty_args_and_top_of_address_space)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    graph_targ empty = targ(0, 0, HG_INOUT), top = targ(UINT64_MAX - 16, UINT64_MAX, HG_OUT);
    ASSERT_OK(add(&g, &empty, 1, &id));
    ASSERT_OK(add(&g, &empty, 1, &id));
    ASSERT_EQ(g.nedges, 0); /* zero-byte views never conflict */
    ASSERT_OK(add(&g, &top, 1, &id));
    graph_targ last = targ(UINT64_MAX - 1, UINT64_MAX, HG_IN);
    ASSERT_OK(add(&g, &last, 1, &id));
    ASSERT(has_edge(&g, 2, 3));
    ASSERT_EQ(g.nedges, 1);
    graph_free(&g);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 30k tiles submitted in shuffled order, then overwritten ten times: edges
 * are exactly the tile chains and the map does not grow with the passes.
 * The time is printed, never asserted (timings are benchmarks). */
TEST(tile_graph_scales)
{
    enum { NT = 30000, PASSES = 10, TILE = 256 };
    static uint32_t order[NT];
    for (uint32_t i = 0; i < NT; i++)
        order[i] = i;
    test_rng rng = test_seed(30000);
    for (uint32_t i = NT - 1; i > 0; i--) {
        uint32_t j = test_rand(&rng) % (i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    graph g;
    graph_init(&g);
    double t0 = now_ms();
    hg_task_id id;
    uint32_t nodes_after_first = 0;
    graph_map_counts c;
    for (int pass = 0; pass < PASSES; pass++) {
        for (uint32_t i = 0; i < NT; i++) {
            hg_devaddr lo = 0x100000 + (hg_devaddr)order[i] * TILE;
            graph_targ a = targ(lo, lo + TILE, pass % 2 ? HG_INOUT : HG_OUT);
            ASSERT_OK(add(&g, &a, 1, &id));
        }
        graph_map_stats(&g, &c);
        if (pass == 0)
            nodes_after_first = c.nodes;
    }
    ASSERT_OK(graph_finalize(&g, NULL));
    double ms = now_ms() - t0;
    ASSERT_EQ(g.ntasks, NT * PASSES);
    ASSERT_EQ(g.nedges, NT * (PASSES - 1)); /* each tile: a chain of its tasks */
    ASSERT_EQ(g.tasks[0].nsucc, 1);
    ASSERT_EQ(graph_task_succ(&g, &g.tasks[0])[0], NT);
    ASSERT_ULE(c.nodes, nodes_after_first + 8);
    printf("  tile graph: %u tasks, %u edges in %.1f ms\n", g.ntasks, g.nedges, ms);
    graph_free(&g);
}

/* Many readers of one weight, then one writer: one edge per reader, and a
 * fragmented map collapses back to one record. */
TEST(wide_fan_in_and_collapse)
{
    graph g;
    graph_init(&g);
    hg_task_id id;
    graph_targ w = targ(0x1000, 0x1000 + 4096, HG_OUT);
    ASSERT_OK(add(&g, &w, 1, &id));
    for (hg_devaddr i = 0; i < 1000; i++) {
        graph_targ r = targ(0x1000 + (i * 7) % 4000, 0x1000 + (i * 7) % 4000 + 64, HG_IN);
        ASSERT_OK(add(&g, &r, 1, &id));
    }
    ASSERT_EQ(g.nedges, 1000);
    ASSERT_OK(add(&g, &w, 1, &id));
    /* Every reader, and task 0 for the last 32 bytes, which nobody read. */
    ASSERT_EQ(g.tasks[id].npreds, 1001);
    ASSERT_OK(add(&g, &w, 1, &id));
    ASSERT_EQ(g.tasks[id].npreds, 1);
    graph_free(&g);
}

/* A random task arg: dense 1-D (the common case) or any other layout. */
static graph_targ random_layout(test_rng *rng)
{
    static const hg_dtype dtypes[] = {HG_U8, HG_BF16, HG_F32};
    graph_targ a;
    memset(&a, 0, sizeof a);
    a.dtype = dtypes[test_rand(rng) % 3];
    const size_t size = hg_dtype_size(a.dtype);
    a.ndims = 1 + test_rand(rng) % 3;
    size_t span = 1;
    for (uint32_t d = a.ndims; d-- > 0;) {
        a.shape[d] = test_rand(rng) % 4; /* 0 makes an empty view */
        a.strides[d] = test_rand(rng) % 2 ? span : span + test_rand(rng) % 3;
        span = a.strides[d] * (a.shape[d] ? a.shape[d] : 1);
    }
    size_t last = 0, n = 1;
    for (uint32_t d = 0; d < a.ndims; d++) {
        n *= a.shape[d];
        last += a.shape[d] ? (a.shape[d] - 1) * a.strides[d] : 0;
    }
    if (n > 0) {
        a.lo = a.addr = 0x10000 + 64 * (hg_devaddr)(test_rand(rng) % 64);
        a.hi = a.lo + (last + 1) * size;
    }
    a.read = test_rand(rng) % 2;
    a.write = !a.read || test_rand(rng) % 2;
    return a;
}

TEST(task_args_come_back_as_submitted_and_dense_ones_take_no_shape)
{
    test_rng rng = test_seed(77);
    graph g;
    graph_init(&g);
    uint32_t want_shapes = 0;
    graph_targ sent[1000];
    for (uint32_t t = 0; t < 1000; t++) {
        sent[t] = random_layout(&rng);
        if (t % 4 == 0) /* a dense 1-D view of many elements */
            sent[t] = graph_targ_bytes(0x20000 + 64 * t, 0x20000 + 64 * t + 64, true, true);
        if (t % 4 == 1) { /* the same bytes as 16 f32 */
            sent[t] = graph_targ_bytes(0x40000 + 64 * t, 0x40000 + 64 * t + 64, true, false);
            sent[t].dtype = HG_F32;
            sent[t].shape[0] = 16;
        }
        const graph_targ *a = &sent[t];
        const bool dense = a->ndims == 1 && a->strides[0] == 1 &&
                           a->shape[0] * hg_dtype_size(a->dtype) == a->hi - a->lo;
        want_shapes += !dense;
        hg_task_id id;
        ASSERT_OK(add(&g, a, 1, &id));
    }
    /* One 24-byte record a task arg; a layout only for the args that are not
     * dense 1-D (about 3 in 8 of these). */
    ASSERT_UEQ(sizeof(graph_arg), 24);
    ASSERT_UEQ(g.nargs, 1000);
    ASSERT_UEQ(g.nshapes, want_shapes);
    ASSERT(want_shapes > 100 && want_shapes < 600);
    for (uint32_t t = 0; t < 1000; t++) {
        const graph_targ back = graph_arg_expand(&g, &graph_task_args(&g, &g.tasks[t])[0]);
        const graph_targ *a = &sent[t];
        ASSERT_UEQ(back.addr, a->addr);
        ASSERT_UEQ(back.lo, a->lo);
        ASSERT_UEQ(back.hi, a->hi);
        ASSERT_EQ(back.dtype, a->dtype);
        ASSERT_UEQ(back.ndims, a->ndims);
        ASSERT(memcmp(back.shape, a->shape, sizeof back.shape) == 0);
        ASSERT(memcmp(back.strides, a->strides, sizeof back.strides) == 0);
        ASSERT(back.read == a->read && back.write == a->write);
    }
    graph_reset(&g);
    ASSERT_UEQ(g.nshapes, 0);
    graph_free(&g);
}

static int other_fn(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

TEST(tasks_share_one_entry_per_distinct_kernel)
{
    graph g;
    graph_init(&g);
    char name_a[] = "a", name_b[] = "b";
    const hg_kernel ks[] = {
        {name_a, kernel_fn, HG_CORE_VECTOR, NULL, NULL},
        {name_b, kernel_fn, HG_CORE_VECTOR, NULL, NULL}, /* another name */
        {name_a, kernel_fn, HG_CORE_CUBE, NULL, NULL},   /* another core type */
        {name_a, other_fn, HG_CORE_VECTOR, NULL, NULL},  /* another function */
        {NULL, kernel_fn, HG_CORE_VECTOR, NULL, NULL},
    };
    static const int handle[2];
    hg_task_id id;
    for (uint32_t t = 0; t < 10000; t++) {
        const uint32_t k = t % 7;
        if (k < 5) {
            ASSERT_OK(graph_add_task(&g, &ks[k], NULL, 0, NULL, 0, NULL, 0, &id, NULL));
        } else { /* the first kernel on a queue device, and as a host step */
            ASSERT_OK(graph_add_device_task(&g, &ks[0], k == 5 ? &handle[0] : NULL, k == 6, NULL, 0,
                                            NULL, 0, NULL, 0, &id, NULL));
        }
    }
    /* A task record is 32 bytes, whatever its kernel; 7 kernels for 10^4
     * tasks. */
    ASSERT_UEQ(sizeof(graph_task), 32);
    ASSERT_UEQ(g.nkernels, 7);
    name_a[0] = 'x'; /* the graph keeps its own copy of every name */
    for (uint32_t t = 0; t < 10000; t++) {
        const graph_kernel *k = graph_task_kernel(&g, &g.tasks[t]);
        const hg_kernel *want = &ks[t % 7 < 5 ? t % 7 : 0];
        ASSERT(k->fn == want->fn && k->core == want->core);
        ASSERT_STR_EQ(k->name, t % 7 == 1 ? "b" : t % 7 == 4 ? "(unnamed)" : "a");
        ASSERT(k->dev_kernel == (t % 7 == 5 ? (const void *)&handle[0] : NULL));
        ASSERT(k->host_step == (t % 7 == 6));
    }
    /* Kept across graph_reset: the same kernels again add no entry. */
    graph_reset(&g);
    name_a[0] = 'a';
    ASSERT_OK(graph_add_task(&g, &ks[2], NULL, 0, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.nkernels, 7);
    ASSERT_UEQ(graph_task_kernel(&g, &g.tasks[0])->core, HG_CORE_CUBE);
    graph_free(&g);
}

int main(void)
{
    return RUN_TESTS();
}
