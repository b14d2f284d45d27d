/*
 * tensor_map_test.c: the tensor map's size and work grow linearly with the
 * tasks (and the edges, where the rule makes more edges than tasks), for
 * every access pattern.  Each pattern is built at N and 4N tasks; its live
 * records and read records may grow about 4x the tasks + edges, and the
 * records it visits too, times a log factor at most.  Counts
 * only, never timing: the counters are exact and the treap's priorities come
 * from a fixed seed, so only random_writes varies (with HG_TEST_SEED).
 *
 * Also: submitting tasks with no args does no reservation work per task
 * (the per-task marks grow geometrically, never on a submit that needs no room).
 */
#include <math.h>

#include "graph/graph.h"
#include "graph/tensor_map.h"
#include "testlib.h"

static int kernel_fn(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel kern = {"k", kernel_fn, HG_CORE_VECTOR, NULL, NULL};

#define BUF   0x10000000ull /* the buffer every pattern works in */
#define PIECE 64            /* bytes of one fragment */

typedef enum shape {
    FRAG_READS,        /* N reads of disjoint pieces, in a scattered order */
    WHOLE_AFTER_FRAGS, /* N/2 piece reads, then N/2 reads of the whole buffer */
    RANDOM_WRITES,     /* N 1 KiB writes at random offsets in 64 MiB */
    RAW_CHAIN,         /* task i reads the piece task i-1 wrote */
    FAN_IN,            /* N-1 piece reads, then one write of the whole buffer */
    WRITES_THEN_READS, /* N/2 piece writes, then N/8 whole reads: N^2/16 edges by the rule */
    READS_THEN_WRITES, /* N/8 whole reads, then N/2 piece writes: N^2/16 edges too */
    SHAPES
} shape;

static const char *const shape_name[SHAPES] = {
    "frag_reads", "whole_after_frags", "random_writes",    "raw_chain",
    "fan_in",     "writes_then_reads", "reads_then_writes"};

static hg_devaddr piece(uint32_t i)
{
    return BUF + (hg_devaddr)i * PIECE;
}

/* The args of task t of n in shape s; returns how many. */
static uint32_t shape_args(shape s, uint32_t t, uint32_t n, test_rng *rng, graph_targ *args)
{
    uint32_t half = n / 2, scattered = (uint32_t)((uint64_t)t * 7919 % n);
    switch (s) {
    case FRAG_READS:
        args[0] = graph_targ_bytes(piece(scattered), piece(scattered) + PIECE, true, false);
        return 1;
    case WHOLE_AFTER_FRAGS:
        if (t < half)
            args[0] = graph_targ_bytes(piece(t), piece(t) + PIECE, true, false);
        else
            args[0] = graph_targ_bytes(piece(0), piece(half), true, false);
        return 1;
    case RANDOM_WRITES: {
        hg_devaddr lo = BUF + test_rand(rng) % ((64u << 20) - 1024);
        args[0] = graph_targ_bytes(lo, lo + 1024, false, true);
        return 1;
    }
    case RAW_CHAIN:
        args[0] = graph_targ_bytes(piece(t), piece(t) + PIECE, false, true);
        args[1] = graph_targ_bytes(piece(t) - PIECE, piece(t), true, false);
        return t > 0 ? 2 : 1;
    case FAN_IN:
        if (t + 1 < n)
            args[0] = graph_targ_bytes(piece(t), piece(t) + PIECE, true, false);
        else
            args[0] = graph_targ_bytes(piece(0), piece(n), false, true);
        return 1;
    case WRITES_THEN_READS:
        if (t < half)
            args[0] = graph_targ_bytes(piece(t), piece(t) + PIECE, false, true);
        else
            args[0] = graph_targ_bytes(piece(0), piece(half), true, false);
        return 1;
    default: { /* the writes in a scattered order: each splits the read records */
        uint32_t w = (uint32_t)((uint64_t)(t - n / 8) * 7919 % half);
        if (t < n / 8)
            args[0] = graph_targ_bytes(piece(0), piece(half), true, false);
        else
            args[0] = graph_targ_bytes(piece(w), piece(w) + PIECE, false, true);
        return 1;
    }
    }
}

static uint32_t shape_tasks(shape s, uint32_t n)
{
    return s >= WRITES_THEN_READS ? n / 2 + n / 8 : n;
}

typedef struct shape_cost {
    graph_map_counts c;             /* at the end */
    uint32_t records, reader_nodes; /* the most at any time */
    uint32_t tasks, edges;
} shape_cost;

static int build_shape(graph *g, shape s, uint32_t n, test_rng *rng, shape_cost *out)
{
    graph_targ args[2];
    hg_task_id id;
    graph_reset(g);
    out->records = out->reader_nodes = 0;
    for (uint32_t t = 0; t < shape_tasks(s, n); t++) {
        uint32_t nargs = shape_args(s, t, n, rng, args);
        int rc = graph_add_task(g, &kern, args, nargs, NULL, 0, NULL, 0, &id, NULL);
        if (rc != 0)
            return rc;
        graph_map_stats(g, &out->c);
        out->records = out->c.records > out->records ? out->c.records : out->records;
        out->reader_nodes =
            out->c.reader_nodes > out->reader_nodes ? out->c.reader_nodes : out->reader_nodes;
    }
    out->tasks = g->ntasks;
    out->edges = g->nedges;
    return 0;
}

/* A count measured at N (ca) and at 4N (cb) grew at most about linearly in
 * the tasks + edges (the rule may make N^2 edges; the map must not add more). */
static bool linear(const shape_cost *a, uint64_t ca, const shape_cost *b, uint64_t cb)
{
    double ua = a->tasks + a->edges, ub = b->tasks + b->edges;
    return (double)cb / ub <= 1.125 * (double)ca / ua + 16 / ub;
}

TEST(map_grows_linearly_for_every_access_pattern)
{
    enum { N = 1000 };
    static const uint32_t edges_at_n[SHAPES] = {
        0, 0, UINT32_MAX, N - 1, N - 1, (N / 2) * (N / 8), (N / 2) * (N / 8)};
    test_rng rng = test_seed(1000); /* only random_writes draws from it */
    graph g;
    graph_init(&g);
    for (int s = 0; s < SHAPES; s++) {
        shape_cost small, big;
        ASSERT_OK(build_shape(&g, (shape)s, N, &rng, &small));
        ASSERT_OK(build_shape(&g, (shape)s, 4 * N, &rng, &big));
        printf("  %-18s N=%u: most records %u -> %u, most read records %u -> %u, edges %u -> %u, "
               "steps/(tasks+edges) %.1f -> %.1f\n",
               shape_name[s], N, small.records, big.records, small.reader_nodes, big.reader_nodes,
               small.edges, big.edges, (double)small.c.steps / (small.tasks + small.edges),
               (double)big.c.steps / (big.tasks + big.edges));
        if (edges_at_n[s] != UINT32_MAX)
            ASSERT_EQ(small.edges, edges_at_n[s]);
        if (!linear(&small, small.records, &big, big.records))
            TEST_FAIL_("%s: records %u at N, %u at 4N", shape_name[s], small.records, big.records);
        if (!linear(&small, small.reader_nodes, &big, big.reader_nodes))
            TEST_FAIL_("%s: read records %u at N, %u at 4N", shape_name[s], small.reader_nodes,
                       big.reader_nodes);
        /* Work per task or edge may grow by the treap's log factor, not by N. */
        if ((double)big.c.steps / (big.tasks + big.edges) >
            1.5 * (double)small.c.steps / (small.tasks + small.edges) + 1)
            TEST_FAIL_("%s: %llu steps at N, %llu at 4N", shape_name[s],
                       (unsigned long long)small.c.steps, (unsigned long long)big.c.steps);
    }
    graph_free(&g);
}

/* The read records of N whole reads after N piece reads are one per task,
 * and a write over the whole buffer then empties the map but for itself. */
TEST(whole_write_clears_fragmented_reads)
{
    enum { N = 4000 };
    graph g;
    graph_init(&g);
    shape_cost cost;
    ASSERT_OK(build_shape(&g, WHOLE_AFTER_FRAGS, N, NULL, &cost));
    ASSERT_EQ(cost.c.records, 0);
    ASSERT_ULE(cost.c.reader_nodes, N);
    graph_targ w = graph_targ_bytes(piece(0), piece(N), false, true);
    hg_task_id id;
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_EQ(g.tasks[id].npreds, N); /* every reader, piece or whole */
    graph_map_counts c;
    graph_map_stats(&g, &c);
    ASSERT_EQ(c.records, 1);
    ASSERT_EQ(c.reader_nodes, 0);
    graph_free(&g);
}

/* Arg-less submits: the per-task marks grow by doubling, and a submit that
 * needs no room does no reservation work (it used to zero a 0-byte tail on
 * every submit, 10x slower per task past ~600k tasks). */
TEST(arg_less_submits_reserve_geometrically)
{
    enum { N = 1 << 20 };
    graph g;
    graph_init(&g);
    hg_task_id id;
    for (uint32_t t = 0; t < N; t++)
        ASSERT_OK(graph_add_task(&g, &kern, NULL, 0, NULL, 0, NULL, 0, &id, NULL));
    graph_map_counts c;
    graph_map_stats(&g, &c);
    ASSERT_EQ(g.nedges, 0);
    ASSERT_ULE(c.mark_extends, 20); /* 16 doublings from 16 slots to 1M */
    graph_reset(&g);                /* the capacity stays: no growth at all now */
    for (uint32_t t = 0; t < N; t++)
        ASSERT_OK(graph_add_task(&g, &kern, NULL, 0, NULL, 0, NULL, 0, &id, NULL));
    graph_map_stats(&g, &c);
    ASSERT_EQ(c.mark_extends, 0);
    graph_free(&g);
}

/* A fan of readers on one range (one write, then N reads of it, one or
 * two per task): the map holds one read record for the fan, whatever N, so
 * each read costs the same at 10^3 and 10^5 readers (it used to insert a
 * record per read into a treap of N: work per task grew with log N).  A
 * write over the range then depends on every reader and clears them. */
static void build_fan(graph *g, uint32_t n, uint32_t args_per_task, graph_map_counts *c)
{
    graph_targ a[2];
    hg_task_id id;
    graph_reset(g);
    a[0] = graph_targ_bytes(piece(0), piece(1), true, true);
    ASSERT_OK(graph_add_task(g, &kern, a, 1, NULL, 0, NULL, 0, &id, NULL));
    a[0] = a[1] = graph_targ_bytes(piece(0), piece(1), true, false);
    for (uint32_t t = 1; t < n; t++)
        ASSERT_OK(graph_add_task(g, &kern, a, args_per_task, NULL, 0, NULL, 0, &id, NULL));
    graph_map_stats(g, c);
}

TEST(a_fan_of_readers_is_one_read_record)
{
    enum { N = 1000, BIG = 100 * N };
    graph g;
    graph_init(&g);
    for (uint32_t per = 1; per <= 2; per++) {
        graph_map_counts small, big;
        build_fan(&g, N, per, &small);
        build_fan(&g, BIG, per, &big);
        printf("  %u arg(s) a reader: read records %u -> %u, steps/task %.2f -> %.2f\n", per,
               small.reader_nodes, big.reader_nodes, (double)small.steps / N,
               (double)big.steps / BIG);
        ASSERT_EQ(big.reader_nodes, 1);
        ASSERT_EQ(g.nedges, BIG - 1);
        ASSERT((double)big.steps / BIG <= (double)small.steps / N + 0.01);
        graph_targ w = graph_targ_bytes(piece(0), piece(1), false, true);
        hg_task_id id;
        ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
        ASSERT_EQ(g.tasks[id].npreds, BIG - 1);
        graph_map_stats(&g, &big);
        ASSERT_EQ(big.reader_nodes, 0);
    }
    graph_free(&g);
}

/* Scattered 64-byte reads with a 1 KiB write over 16 pieces every 32nd
 * task (bench/run_overhead's `frag`): the map holds ~0.7 N read records.
 * The nodes visited per task + edge stay within 2 log_16 N, the depth of
 * a tree of 16-way nodes twice over: 2.97 and 5.5 at 10^3 and 10^5 tasks
 * (bounds 4.98 and 8.30).  The treap this replaced visited ~log_2 records:
 * 9.7 and 21.8, each a cache miss once the records outgrow the caches. */
static void build_frag(graph *g, uint32_t n, graph_map_counts *c)
{
    enum { W = 32, WB = 16 };
    graph_reset(g);
    hg_task_id id;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t at = (uint32_t)((uint64_t)t * 7919 % n), len = 1;
        bool write = t % W == W - 1;
        if (write) {
            at = (uint32_t)((uint64_t)t * 4099 % (n / WB)) * WB;
            len = WB;
        }
        graph_targ a = graph_targ_bytes(piece(at), piece(at + len), true, write);
        ASSERT_OK(graph_add_task(g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    }
    graph_map_stats(g, c);
}

TEST(frag_work_grows_with_the_tree_height_only)
{
    enum { N = 1000, BIG = 100 * N };
    graph g;
    graph_init(&g);
    graph_map_counts small, big;
    build_frag(&g, N, &small);
    const double per_small = (double)small.steps / (N + g.nedges);
    build_frag(&g, BIG, &big);
    const double per_big = (double)big.steps / (BIG + g.nedges);
    const double bound_small = 2 * log2(N) / 4, bound_big = 2 * log2(BIG) / 4;
    printf("  frag: read records %u -> %u, steps/(tasks+edges) %.2f -> %.2f, "
           "bounds 2 log_16 N %.2f -> %.2f\n",
           small.reader_nodes, big.reader_nodes, per_small, per_big, bound_small, bound_big);
    ASSERT(big.reader_nodes > BIG / 2); /* the map really is large */
    ASSERT(per_small <= bound_small);
    ASSERT(per_big <= bound_big);
    graph_free(&g);
}

/* frag's reads lie inside a granule each (64 bytes at 64-byte offsets), so
 * their records go on their granules' lists (granules.c), not into the
 * read tree: the tree holds only the write records, and no record is moved
 * to it later (each 1 KiB write covers whole granules, so it overlaps every
 * record it meets).  Failed before: every read record was a tree entry. */
TEST(frag_reads_take_no_tree_node)
{
    enum { BIG = 100000 };
    graph g;
    graph_init(&g);
    graph_map_counts c;
    graph_map_more more;
    build_frag(&g, BIG, &c);
    graph_map_more_stats(&g, &more);
    printf("  frag: %u read records live, %llu made in granules, %llu moved, %llu pending, "
           "%u tree nodes for %u write records\n",
           c.reader_nodes, (unsigned long long)more.granule_reads,
           (unsigned long long)more.granule_moved, (unsigned long long)more.deferred, c.nodes,
           c.records);
    ASSERT(c.reader_nodes > BIG / 2);
    ASSERT(more.granule_reads >= c.reader_nodes);
    ASSERT_UEQ(more.granule_moved, 0);
    ASSERT_UEQ(more.deferred, 0);
    /* Write records only: at most BIG / 32 of them, 8 or more a leaf. */
    ASSERT_ULE(c.nodes, 2 * (BIG / 32) / 8 + 16);
    /* The granule memory is linear: an entry per record made, at most 4
     * slots per granule held (half full, doubling), and a rebuild after
     * graph_reset grows nothing. */
    const uint32_t granules = BIG * PIECE / 1024;
    printf("  granules: %u held in %u slots, %u entries\n", more.granule_held, more.granule_slots,
           more.granule_entries);
    ASSERT_UEQ(more.granule_held, granules);
    ASSERT_ULE(more.granule_slots, 4 * granules);
    ASSERT_ULE(more.granule_entries, more.granule_reads);
    const uint32_t slots = more.granule_slots;
    build_frag(&g, BIG, &c);
    graph_map_more_stats(&g, &more);
    ASSERT_UEQ(more.granule_slots, slots);
    ASSERT_ULE(more.granule_entries, more.granule_reads);
    graph_free(&g);
}

/* Reads across a granule's end go into the read tree, in batches whose
 * paths are asked for at once (graph_tree_prefetch): at 10^6 records each
 * insert's leaf is a miss to memory, and a batch waits for its ~31 misses
 * about once instead of one after another.  Counted on frag's order with
 * 2 KiB pieces (each spans two granules): every new read record was
 * pending, and a batch holds at least 16 of them (a write every 32nd task
 * flushes the batch).  Failed before the batches: 1 per batch. */
TEST(wide_reads_are_inserted_in_batches)
{
    enum { BIG = 100000, W = 32, WB = 16, WIDE = 2048 };
    graph g;
    graph_init(&g);
    hg_task_id id;
    for (uint32_t t = 0; t < BIG; t++) {
        uint32_t at = (uint32_t)((uint64_t)t * 7919 % BIG), len = 1;
        bool write = t % W == W - 1;
        if (write) {
            at = (uint32_t)((uint64_t)t * 4099 % (BIG / WB)) * WB;
            len = WB;
        }
        graph_targ a = graph_targ_bytes(BUF + (hg_devaddr)at * WIDE,
                                        BUF + (hg_devaddr)(at + len) * WIDE, true, write);
        ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    }
    graph_map_counts c;
    graph_map_more more;
    graph_map_stats(&g, &c);
    graph_map_more_stats(&g, &more);
    printf("  wide frag: %llu read records pending first, in %llu batches, %llu nodes "
           "prefetched, %llu in granules\n",
           (unsigned long long)more.deferred, (unsigned long long)more.batches,
           (unsigned long long)more.prefetched, (unsigned long long)more.granule_reads);
    ASSERT(c.reader_nodes > BIG / 2);
    ASSERT_UEQ(more.granule_reads, 0);
    ASSERT(more.deferred >= c.reader_nodes);
    ASSERT(more.deferred >= 16 * more.batches);
    ASSERT(more.prefetched <= more.deferred * (c.height > 1 ? c.height - 1 : 1));
    graph_free(&g);
}

/* A write's cut walks its granules' lists; a record there that it does not
 * overlap moves to the read tree, so it is never walked past again: 64
 * reads at the start of a granule, then 1000 writes at its end, walk the
 * 64 once (steps stay flat per write after the first), and a later write
 * over the reads still depends on each of them, from the tree.  Failed
 * without the move: every write walked all 64. */
TEST(a_record_a_cut_passes_over_moves_to_the_tree_once)
{
    enum { READS = 64, WRITES = 1000 };
    const hg_devaddr G = BUF + 5 * 1024;
    graph g;
    graph_init(&g);
    hg_task_id id;
    for (uint32_t i = 0; i < READS; i++) {
        graph_targ a = graph_targ_bytes(G + 8 * i, G + 8 * i + 8, true, false);
        ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    }
    graph_map_counts c0, c1, c2;
    graph_map_more more;
    graph_map_stats(&g, &c0);
    graph_targ w = graph_targ_bytes(G + 768, G + 832, false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 0);
    graph_map_stats(&g, &c1);
    graph_map_more_stats(&g, &more);
    ASSERT_UEQ(more.granule_moved, READS);
    ASSERT_UEQ(c1.reader_nodes, READS);
    ASSERT_UGE(c1.steps - c0.steps, READS); /* the first write walked them */
    for (uint32_t i = 1; i < WRITES; i++)
        ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    graph_map_stats(&g, &c2);
    graph_map_more_stats(&g, &more);
    printf("  first write: %llu steps; each later one: %.1f\n",
           (unsigned long long)(c1.steps - c0.steps), (double)(c2.steps - c1.steps) / (WRITES - 1));
    ASSERT_UEQ(more.granule_moved, READS);
    ASSERT((double)(c2.steps - c1.steps) / (WRITES - 1) < 16);
    w = graph_targ_bytes(G, G + 512, false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, READS);
    graph_map_stats(&g, &c2);
    ASSERT_UEQ(c2.reader_nodes, 0);
    graph_free(&g);
}

/* A write over more than GRAPH_GRAN_SPAN granules moves every granule
 * record to the read tree first, once: a write over 1 GiB then costs what
 * the records cost, not a probe for each of its 2^20 granules.  Apart from
 * it, none is its dependency, and a later write over them depends on each,
 * from the tree.  A task that reads a piece and
 * writes a wide range over it leaves no read record of its own. */
TEST(a_wide_write_moves_the_granule_records_once)
{
    enum { READS = 500 };
    graph g;
    graph_init(&g);
    hg_task_id id;
    for (uint32_t i = 0; i < READS; i++) {
        const uint32_t at = (uint32_t)((uint64_t)i * 7919 % READS);
        graph_targ a = graph_targ_bytes(piece(at), piece(at) + PIECE, true, false);
        ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    }
    graph_map_more more;
    graph_map_counts c;
    const hg_devaddr far = BUF + (1u << 24);
    graph_map_stats(&g, &c);
    const uint64_t steps = c.steps;
    graph_targ w = graph_targ_bytes(far, far + (1ull << 30), false, true); /* 2^20 granules */
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 0);
    graph_map_more_stats(&g, &more);
    graph_map_stats(&g, &c);
    printf("  a write over 1 GiB: %llu steps with %u granule records\n",
           (unsigned long long)(c.steps - steps), READS);
    ASSERT_UEQ(more.granule_moved, READS);
    ASSERT_UEQ(c.reader_nodes, READS);
    ASSERT_ULE(c.steps - steps, 16 * READS); /* the records, not the granules */
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    graph_map_more_stats(&g, &more);
    ASSERT_UEQ(more.granule_moved, READS); /* nothing left to move */
    w = graph_targ_bytes(piece(0), piece(READS), false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &w, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, READS);
    graph_map_stats(&g, &c);
    ASSERT_UEQ(c.reader_nodes, 0);
    /* Its own read, then its wide write over it. */
    graph_targ rw[2] = {graph_targ_bytes(far + 64, far + 128, true, false),
                        graph_targ_bytes(far, far + 64 * 1024, false, true)};
    hg_task_id both;
    ASSERT_OK(graph_add_task(&g, &kern, rw, 2, NULL, 0, NULL, 0, &both, NULL));
    graph_map_stats(&g, &c);
    ASSERT_UEQ(c.reader_nodes, 0);
    graph_targ r = graph_targ_bytes(far + 64, far + 128, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &r, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 1);
    ASSERT_UEQ(g.edge_from[g.nedges - 1], both);
    graph_free(&g);
}

/* A task's dependencies are told apart by a scan of its list while it is
 * short, so frag's writes (~16 readers each) touch no per-task mark: a mark
 * is indexed by the dependency's id, a miss per edge in a large graph.  A
 * long list (fan_in's last write: N - 1 readers) does use marks.  Failed
 * before: every dependency was a mark. */
TEST(short_dependency_lists_touch_no_marks)
{
    enum { N = 4000 };
    graph g;
    graph_init(&g);
    graph_map_counts c;
    graph_map_more more;
    build_frag(&g, N, &c);
    graph_map_more_stats(&g, &more);
    ASSERT(g.nedges > N / 4);
    ASSERT_EQ(more.dep_marks, 0);
    shape_cost cost;
    ASSERT_OK(build_shape(&g, FAN_IN, N, NULL, &cost));
    graph_map_more_stats(&g, &more);
    printf("  fan_in: %u edges, %llu told apart by marks\n", cost.edges,
           (unsigned long long)more.dep_marks);
    ASSERT_EQ(cost.edges, N - 1);
    ASSERT(more.dep_marks >= N - 1 - 64);
    graph_free(&g);
}

/* Scattered 64-byte reads at `at` on, enough that the map outgrows the
 * caches and the written-granule filter starts. */
static void grow_map(graph *g, hg_devaddr at)
{
    hg_task_id id;
    for (uint32_t i = 0; i < 40000; i++) {
        const hg_devaddr lo = at + 128 * (hg_devaddr)((i * 7919u) % 40000);
        graph_targ a = graph_targ_bytes(lo, lo + 64, true, false);
        ASSERT_OK(graph_add_task(g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    }
}

static uint64_t unwritten_reads(const graph *g)
{
    graph_map_more more;
    graph_map_more_stats(g, &more);
    return more.unwritten_reads;
}

/* A read whose 1 KiB granules no write covered skips the write tree's
 * search (on frag at 10^6 tasks a chain of misses, ~85 ns a read), once
 * the map outgrows the caches (a small map's searches are cheap).  The
 * granules are bits of an address modulo 1 GiB, so the filter may say
 * "written" wrongly (aliasing: a search) but never "unwritten" wrongly.
 * Counted on frag (most reads skip), then every way it could hide a
 * writer: a write from before the filter started, aliased addresses, a
 * read spanning many granules, a write too wide to mark (the filter goes
 * off), and graph_reset (marks go, the filter waits for a large map
 * again).  Every edge is checked, so a wrong skip fails. */
TEST(reads_of_unwritten_granules_skip_the_write_tree)
{
    graph g;
    graph_init(&g);
    graph_map_counts c;
    build_frag(&g, 100000, &c);
    const uint64_t reads = 100000 - 100000 / 32, skipped = unwritten_reads(&g);
    printf("  frag: %llu of %llu reads skipped the write tree\n", (unsigned long long)skipped,
           (unsigned long long)reads);
    ASSERT(skipped > reads / 3 && skipped <= reads);

    const hg_devaddr A = 0x40000000ull, GIB = 1ull << 30, C = 64 * GIB;
    hg_task_id w0, w, id;
    graph_reset(&g);
    graph_targ a = graph_targ_bytes(A + 8192, A + 8256, false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &w0, NULL));
    a = graph_targ_bytes(A + 4096, A + 4160, true, false); /* a small map: searched */
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(unwritten_reads(&g), 0);
    grow_map(&g, C);
    uint64_t base = unwritten_reads(&g);
    ASSERT_UGT(base, 10000); /* it started */
    /* The write from before it started was marked when it did. */
    a = graph_targ_bytes(A + 8200, A + 8208, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 1);
    ASSERT_UEQ(g.edge_from[g.nedges - 1], w0);
    a = graph_targ_bytes(A, A + 64, false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &w, NULL));
    const uint32_t edges = g.nedges;
    /* The same granule 1 GiB on: searched, no writer there. */
    a = graph_targ_bytes(A + GIB, A + GIB + 64, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(unwritten_reads(&g), base);
    ASSERT_UEQ(g.nedges, edges);
    /* Another granule: skipped; the written one: its writer. */
    a = graph_targ_bytes(A + 4096, A + 4160, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(unwritten_reads(&g), base + 1);
    a = graph_targ_bytes(A + 32, A + 48, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 1);
    ASSERT_UEQ(g.edge_from[g.nedges - 1], w);
    /* A read over 1 MiB that ends on the written bytes: its writer. */
    a = graph_targ_bytes(A - (1u << 20), A + 1, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 1);
    /* A write of 1 MiB elsewhere turns the filter off: reads search, and
     * find it. */
    const hg_devaddr B = 8 * GIB;
    a = graph_targ_bytes(B, B + (1u << 20), false, true);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &w, NULL));
    a = graph_targ_bytes(B + 500000, B + 500064, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(g.tasks[id].npreds, 1);
    ASSERT_UEQ(g.edge_from[g.nedges - 1], w);
    a = graph_targ_bytes(A + 4096, A + 4160, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(unwritten_reads(&g), base + 1);
    /* graph_reset forgets the marks: a large map again, and the old
     * writes' granules skip. */
    graph_reset(&g);
    grow_map(&g, C);
    base = unwritten_reads(&g);
    ASSERT_UGT(base, 10000);
    a = graph_targ_bytes(A, A + 64, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    a = graph_targ_bytes(B, B + 64, true, false);
    ASSERT_OK(graph_add_task(&g, &kern, &a, 1, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_UEQ(unwritten_reads(&g), base + 2);
    ASSERT_UEQ(g.nedges, 0);
    graph_free(&g);
}

int main(void)
{
    return RUN_TESTS();
}
