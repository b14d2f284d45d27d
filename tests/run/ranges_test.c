/*
 * ranges_test.c: moving only the bytes that changed, counted exactly.
 *
 * A KV-cache-like INOUT (ROWS rows) of which each run's tasks write K known
 * rows: a later round moves exactly those rows each way, plus what the host
 * wrote, in one batched call each way; an OUT's bytes no task wrote stay
 * untouched on the host; hg_runner_copied_back names the rows; a fault in
 * any ranged copy publishes nothing and the next run is right; a host write
 * log that overflowed falls back to the whole extent.  Every test runs once
 * per backend (test_device.h).
 */
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

/* Rows far enough apart (a gap of 14 rows or more) that one copy per row
 * is cheaper than covering the gaps (STAGE_COPY_COST_BYTES, 64 KiB). */
enum { ROWS = 64, ROW = 8192, K = 3 };
static const uint32_t rows_written[K] = {5, 20, 41};

/* Writes row r of the cache: each byte += x[0] + r. */
static int k_row(const hg_kernel_ctx *ctx)
{
    const unsigned char *x = ctx->args[0].data;
    unsigned char *row = ctx->args[1].data;
    for (size_t j = 0; j < ctx->args[1].shape[1]; j++)
        row[j] = (unsigned char)(row[j] + x[0] + ctx->scalars[0]);
    return 0;
}
static const hg_kernel K_ROW = {
    "row", k_row, HG_CORE_VECTOR,
    "__kernel void row(HG_STATUS_ARGS, HG_TENSOR(uchar, x), HG_TENSOR(uchar, row), ulong r)\n"
    "{\n"
    "    __global uchar *p = HG_PTR(row) + get_global_id(0) * row_v.strides[1];\n"
    "    *p = (uchar)(*p + HG_PTR(x)[0] + r);\n"
    "}\n",
    "row"};

/* One task per written row; its view is exactly that row. */
static int orch_rows(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *x, *cache;
    hg_orch_arg(o, 0, &x);
    hg_orch_arg(o, 1, &cache);
    for (int k = 0; k < K; k++) {
        hg_task_arg ta[2] = {{0, HG_IN, x->tensor}, {1, cache->dir, {0}}};
        int rc = hg_tensor_slice(&cache->tensor, 0, rows_written[k], 1, &ta[1].view);
        uint64_t r = rows_written[k];
        hg_task_desc d = {&K_ROW, ta, 2, &r, 1, NULL, 0};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}
static const hg_callable ROWS_CALL = {"rows", orch_rows, NULL};

typedef struct rig {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *x, *cache;
    hg_arg args[2];
    unsigned char initial[ROWS * ROW];
} rig;

static int rig_open(rig *g, const char *backend, hg_dir dir, hg_residency res)
{
    memset(g, 0, sizeof *g);
    g->dev = test_device_on(backend, "cores=2");
    if (g->dev == NULL || hg_runner_open(g->dev, &g->r) || hg_hostbuf_create(16, &g->x) ||
        hg_hostbuf_create(ROWS * ROW, &g->cache))
        return -1;
    for (size_t i = 0; i < sizeof g->initial; i++)
        g->initial[i] = (unsigned char)(i * 7);
    hg_hostbuf_write(g->cache, 0, g->initial, sizeof g->initial);
    unsigned char one = 1;
    hg_hostbuf_write(g->x, 0, &one, 1);
    size_t xs = 16, cs[2] = {ROWS, ROW};
    g->args[0] = (hg_arg){"x", HG_IN, {0}, 0, HG_RESIDENT};
    g->args[1] = (hg_arg){"cache", dir, {0}, 0, res};
    if (hg_tensor_host(&g->args[0].tensor, g->x, HG_U8, 1, &xs) ||
        hg_tensor_host(&g->args[1].tensor, g->cache, HG_U8, 2, cs))
        return -1;
    return 0;
}

static void rig_close(rig *g)
{
    hg_runner_close(g->r);
    hg_hostbuf_destroy(g->x);
    hg_hostbuf_destroy(g->cache);
    hg_device_close(g->dev);
}

static bool is_written_row(size_t row)
{
    for (int k = 0; k < K; k++)
        if (rows_written[k] == row)
            return true;
    return false;
}

/* The cache after one run from the initial bytes (INOUT) or from `before`
 * (OUT: rows no task wrote keep the host's bytes). */
static int cache_is(const rig *g, const unsigned char *before, bool inout)
{
    const unsigned char *p = hg_hostbuf_data(g->cache);
    for (size_t i = 0; i < ROWS * ROW; i++) {
        size_t row = i / ROW;
        unsigned char want = before[i];
        if (is_written_row(row))
            want = (unsigned char)((inout ? g->initial[i] : 0xA5) + 1 + row);
        if (p[i] != want)
            return 0;
    }
    return 1;
}

/* Restores the rows the last run copied back, as the scene runner does. */
static int restore_copied_back(rig *g, size_t *nranges)
{
    hg_range r[ROWS];
    int rc = hg_runner_copied_back(g->r, 1, r, ROWS, nranges);
    for (size_t k = 0; rc == 0 && k < *nranges; k++)
        rc = hg_hostbuf_write(g->cache, r[k].lo, g->initial + r[k].lo, r[k].hi - r[k].lo);
    return rc;
}

TEST_EACH_BACKEND(a_later_round_moves_exactly_the_written_rows_each_way)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, HG_INOUT, HG_RESIDENT));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, 16 + ROWS * ROW); /* round 1: everything once */
    ASSERT_UEQ(s.d2h_bytes, K * ROW);         /* only the rows the tasks wrote */
    ASSERT_UEQ(s.d2h_copies, K);
    ASSERT_UEQ(s.d2h_batches, 1);
    ASSERT_UEQ(s.d2h_bytes_skipped, (ROWS - K) * ROW);
    ASSERT(cache_is(&g, g.initial, true));
    for (int round = 2; round <= 5; round++) {
        size_t n = 0;
        ASSERT_OK(restore_copied_back(&g, &n));
        ASSERT_UEQ(n, K);
        ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
        /* up: the K rows the restore wrote; down: the K rows the tasks wrote */
        ASSERT_UEQ(s.h2d_bytes, K * ROW);
        ASSERT_UEQ(s.h2d_copies, K);
        ASSERT_UEQ(s.h2d_batches, 1);
        ASSERT_UEQ(s.h2d_bytes_skipped, 16 + (ROWS - K) * ROW);
        ASSERT_UEQ(s.d2h_bytes, K * ROW);
        ASSERT_UEQ(s.d2h_copies, K);
        ASSERT_UEQ(s.d2h_batches, 1);
        ASSERT_UEQ(s.resident_hits, 1); /* x */
        ASSERT_UEQ(s.stale_uploads, 1); /* the cache, by its written ranges */
        ASSERT(cache_is(&g, g.initial, true));
    }
    rig_close(&g);
}

/* An OUT arg: the rows no task wrote keep the host's bytes (not poison,
 * not stale device bytes), and only the written rows cross. */
TEST_EACH_BACKEND(out_bytes_no_task_wrote_stay_untouched)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, HG_OUT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    ASSERT_UEQ(s.d2h_bytes, K * ROW);
    ASSERT(cache_is(&g, g.initial, false));
    size_t lo, hi; /* one write step of K ranges: first start to last end */
    hg_hostbuf_last_write(g.cache, &lo, &hi);
    ASSERT_UEQ(lo, rows_written[0] * ROW);
    ASSERT_UEQ(hi, (rows_written[K - 1] + 1) * ROW);
    size_t n = 0;
    hg_range r[ROWS];
    ASSERT_OK(hg_runner_copied_back(g.r, 1, r, ROWS, &n));
    ASSERT_UEQ(n, K);
    for (int k = 0; k < K; k++) {
        ASSERT_UEQ(r[k].lo, rows_written[k] * ROW);
        ASSERT_UEQ(r[k].hi, (rows_written[k] + 1) * ROW);
    }
    ASSERT_EQ(hg_runner_copied_back(g.r, 1, r, 1, &n), HG_ERANGE);
    ASSERT_UEQ(n, K);
    ASSERT_OK(hg_runner_copied_back(g.r, 0, r, ROWS, &n)); /* an IN: nothing */
    ASSERT_UEQ(n, 0);
    ASSERT_EQ(hg_runner_copied_back(g.r, 2, r, ROWS, &n), HG_EINVAL);
    rig_close(&g);
}

/* A fault in each ranged copy of a later round: the run fails, the host and
 * its generation are as they were, nothing is published, and the next run
 * (which uploads whole what it can no longer trust) is right. */
TEST_EACH_BACKEND(a_fault_in_any_ranged_copy_publishes_nothing)
{
    for (uint64_t k = 1; k <= 2 * K; k++) {
        rig g;
        ASSERT_OK(rig_open(&g, backend, HG_INOUT, HG_RESIDENT));
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
        size_t n;
        ASSERT_OK(restore_copied_back(&g, &n));
        static unsigned char before[ROWS * ROW];
        memcpy(before, hg_hostbuf_data(g.cache), sizeof before);
        uint64_t gen = hg_hostbuf_generation(g.cache);
        /* copies 1..K are the ranged uploads, K+1..2K the ranged copy-back */
        ASSERT_OK(hg_device_inject_fault(g.dev, HG_FAULT_COPY, k));
        ASSERT_EQ(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s), HG_ECOPY);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), "arg 'cache'"); /* the batch names its arg */
        ASSERT(memcmp(before, hg_hostbuf_data(g.cache), sizeof before) == 0);
        ASSERT_UEQ(hg_hostbuf_generation(g.cache), gen);
        ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
        ASSERT_UEQ(s.h2d_bytes, ROWS * ROW); /* not current any more: whole */
        ASSERT(cache_is(&g, g.initial, true));
        rig_close(&g);
    }
}

/* More writes than the log remembers: the next upload is the whole extent. */
TEST_EACH_BACKEND(an_overflowed_write_log_uploads_the_whole_extent)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, HG_INOUT, HG_RESIDENT));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    ASSERT_OK(hg_hostbuf_write(g.cache, 0, g.initial, sizeof g.initial));
    for (int w = 0; w < HG_HOSTBUF_LOG; w++) /* one byte at a time, more than the log */
        ASSERT_OK(hg_hostbuf_write(g.cache, (size_t)w, g.initial + w, 1));
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, ROWS * ROW);
    ASSERT_UEQ(s.h2d_copies, 1);
    ASSERT(cache_is(&g, g.initial, true));
    /* A few writes that the log holds: exactly those bytes. */
    ASSERT_OK(hg_hostbuf_write(g.cache, 0, g.initial, sizeof g.initial));
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    ASSERT_OK(hg_hostbuf_write(g.cache, 100, g.initial + 100, 10));
    ASSERT_OK(hg_hostbuf_write(g.cache, 105, g.initial + 105, 10)); /* overlaps: merged */
    ASSERT_OK(hg_hostbuf_write(g.cache, 5 * ROW, g.initial + 5 * ROW, ROW));
    ASSERT_OK(hg_runner_run(g.r, &ROWS_CALL, g.args, 2, &s));
    /* [100, 115) and row 5, 40 KiB apart: one copy covering both is
     * cheaper than two (the cost rule); rows 20 and 41 came back last run
     * and were not restored: the device has them already (copy-back is no
     * host write to the copy it came from) */
    ASSERT_UEQ(s.h2d_bytes, 6 * ROW - 100);
    ASSERT_UEQ(s.h2d_copies, 1);
    rig_close(&g);
}

int main(void)
{
    return RUN_TESTS();
}
