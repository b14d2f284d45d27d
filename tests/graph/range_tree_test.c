/*
 * range_tree_test.c: the tensor map's B+-trees against a plain array of
 * entries, under random inserts, cuts and queries, large enough for trees
 * of four levels: every query reports exactly the overlapping entries in
 * order of lo, every cut changes exactly what the array's cut does, and
 * pins keep naming the entry they were given across inserts.  Also: the
 * height stays within its bound, 1 + log_7 of the entries inserted.
 */
#include <math.h>

#include "graph/range_tree.h"
#include "testlib.h"

#define MAXE 20000

typedef struct model {
    graph_tree_entry e[4 * MAXE];
    uint32_t n;
} model;

static int by_lo(const void *a, const void *b)
{
    const graph_tree_entry *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

typedef struct seen {
    graph_tree_entry e[4 * MAXE];
    uint32_t n;
} seen;

static int collect(void *ctx, const graph_tree_entry *e)
{
    seen *s = ctx;
    s->e[s->n++] = *e;
    return 0;
}

static void cut_report(void *ctx, const graph_tree_entry *e, bool spans)
{
    seen *s = ctx;
    if (spans)
        s->e[s->n++] = *e;
}

/* The array's answer to a query: overlapping entries, sorted by lo, then
 * by task (the order among equal lo is insertion order in the tree, and
 * tasks here are insertion numbers). */
static int by_lo_task(const void *a, const void *b)
{
    const graph_tree_entry *x = a, *y = b;
    int c = by_lo(a, b);
    return c != 0 ? c : (x->task < y->task ? -1 : x->task > y->task);
}

static bool same_sets(seen *got, model *m, hg_devaddr lo, hg_devaddr hi)
{
    static graph_tree_entry want[4 * MAXE];
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n; i++)
        if (m->e[i].lo < hi && m->e[i].hi > lo)
            want[n++] = m->e[i];
    if (n != got->n)
        return false;
    /* lo order must hold as reported; ties compared as sets */
    for (uint32_t i = 1; i < n; i++)
        if (got->e[i - 1].lo > got->e[i].lo)
            return false;
    qsort(want, n, sizeof want[0], by_lo_task);
    qsort(got->e, n, sizeof got->e[0], by_lo_task);
    return memcmp(want, got->e, n * sizeof want[0]) == 0;
}

/* The array's cut of [lo, hi); pieces past hi are inserted again. */
static void model_cut(model *m, hg_devaddr lo, hg_devaddr hi)
{
    uint32_t w = 0, n = m->n;
    for (uint32_t i = 0; i < n; i++) {
        graph_tree_entry e = m->e[i];
        if (e.lo < hi && e.hi > lo) {
            if (e.lo < lo) {
                if (e.hi > hi)
                    m->e[m->n++] = (graph_tree_entry){hi, e.hi, e.task, e.more};
                e.hi = lo;
            } else if (e.hi > hi) {
                e.lo = hi;
            } else {
                continue;
            }
        }
        m->e[w++] = e;
    }
    memmove(m->e + w, m->e + n, (m->n - n) * sizeof m->e[0]);
    m->n = w + (m->n - n);
}

TEST(trees_match_an_array_under_random_inserts_and_cuts)
{
    static model m;
    static seen s;
    test_rng rng = test_seed(77);
    graph_tree_pool p = {.free = GRAPH_TREE_NONE};
    graph_tree t;
    for (int round = 0; round < 6; round++) {
        graph_tree_pool_reset(&p);
        graph_tree_init(&t);
        m.n = 0;
        const hg_devaddr space = round % 2 ? 4096 : 1u << 20; /* dense or sparse */
        uint32_t inserted = 0, ops = round < 2 ? 2000 : MAXE;
        for (uint32_t op = 0; op < ops; op++) {
            hg_devaddr lo = test_rand(&rng) % space, len = 1 + test_rand(&rng) % 64;
            uint32_t what = (uint32_t)(test_rand(&rng) % 16);
            if (what < 11 && m.n < MAXE) { /* insert, sometimes in order, pinned */
                if (what < 3)
                    lo = space + op; /* ascending: the rightmost split */
                graph_tree_entry e = {lo, lo + len, inserted++, (uint32_t)op};
                ASSERT_OK(graph_tree_reserve(&p, &t));
                graph_tree_pin(&t, op % GRAPH_TREE_PINS, graph_tree_insert(&p, &t, &e));
                m.e[m.n++] = e;
            } else if (what < 13) { /* cut */
                s.n = 0;
                bool placed;
                graph_tree_cut(&p, &t, lo, lo + len * 4, NULL, &placed, cut_report, &s);
                model_cut(&m, lo, lo + len * 4);
                for (uint32_t i = 0; i < s.n; i++) { /* the caller's pieces */
                    graph_tree_entry piece = s.e[i];
                    piece.lo = lo + len * 4;
                    ASSERT_OK(graph_tree_reserve(&p, &t));
                    graph_tree_insert(&p, &t, &piece);
                }
            } else { /* query */
                s.n = 0;
                ASSERT_OK(graph_tree_visit(&p, &t, lo, lo + len, collect, &s));
                if (!same_sets(&s, &m, lo, lo + len))
                    TEST_FAIL_("round %d op %u: query [%llu, %llu) reported %u entries", round, op,
                               (unsigned long long)lo, (unsigned long long)(lo + len), s.n);
            }
            for (uint32_t k = 0; k < GRAPH_TREE_PINS; k++) { /* a pin names its entry */
                graph_tree_entry e;
                if (graph_tree_pinned(&p, &t, k, &e) && e.more % GRAPH_TREE_PINS != k)
                    TEST_FAIL_("round %d op %u: pin %u moved to another entry", round, op, k);
            }
            ASSERT_EQ(t.count, m.n);
        }
        s.n = 0; /* everything, in order */
        ASSERT_OK(graph_tree_visit(&p, &t, 0, UINT64_MAX, collect, &s));
        ASSERT(same_sets(&s, &m, 0, UINT64_MAX));
        double bound = 1 + log((double)inserted) / log(7.0);
        printf("  round %d: %u entries, %u inserted, height %u (bound %.1f), %u nodes live\n",
               round, m.n, inserted, t.height, bound, graph_tree_pool_live(&p));
        ASSERT(t.height <= bound);
    }
    graph_tree_pool_free(&p);
}

int main(void)
{
    return RUN_TESTS();
}
