/*
 * residency_test.c: resident args across runs, through the public API, and
 * one test per lesson of the reference design's review (DESIGN.md):
 * generation sampled at bind, publish only after success, address reuse with
 * new content, metadata after close, zero-byte args, host view of a resident
 * IN, overflow; plus the budget, verify mode and pooled scratch.  The random
 * model-based test is model_test.c.  Every test runs once per backend
 * (test_device.h) unless its name says sim_only.
 */
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "run/run.h"
#include "test_device.h"
#include "testlib.h"

/* ------------------------------------------------------------ the graph */

/* acc[i] += in[i] over f32 vectors; args: in (IN), acc (INOUT). */
static int k_acc(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *acc = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        acc[i] += in[i];
    return 0;
}
static const hg_kernel K_ACC = {
    "acc", k_acc, HG_CORE_VECTOR,
    "__kernel void acc(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, acc))\n"
    "{ size_t i = get_global_id(0); HG_PTR(acc)[i] += HG_PTR(in)[i]; }",
    "acc"};

static int k_fail(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 1;
}
static const hg_kernel K_FAIL = {
    "fail", k_fail, HG_CORE_VECTOR,
    "__kernel void fail(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, acc))"
    " { HG_FAIL(1); }",
    "fail"};

/* One task over args 0 (IN) and 1 (INOUT); reads arg 0's host view first
 * when `user` asks, as bgemm reads its config. */
static const float *host_seen;
static int orch_acc(hg_orch *o, void *user)
{
    const hg_arg *in, *acc;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &acc);
    const void *hv = NULL;
    int rc = hg_orch_host_view(o, 0, &hv);
    if (rc != 0)
        return rc;
    host_seen = hv;
    hg_task_arg ta[2] = {{0, HG_IN, in->tensor}, {1, HG_INOUT, acc->tensor}};
    hg_task_desc d = {user ? user : &K_ACC, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}
static const hg_callable ACC = {"acc", orch_acc, NULL};
static const hg_callable FAILING = {"acc", orch_acc, (void *)&K_FAIL};

enum { N = 1024, BYTES = N * sizeof(float) };

typedef struct rig {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *in, *acc;
    hg_arg args[2];
} rig;

/* keys: a sim spec's keys (test_device_on drops the sim-only ones). */
static int rig_open(rig *g, const char *backend, const char *keys, hg_residency in_res,
                    hg_residency acc_res)
{
    memset(g, 0, sizeof *g);
    g->dev = test_device_on(backend, keys);
    if (g->dev == NULL || hg_runner_open(g->dev, &g->r) || hg_hostbuf_create(BYTES, &g->in) ||
        hg_hostbuf_create(BYTES, &g->acc))
        return -1;
    float *in = hg_hostbuf_data(g->in);
    for (int i = 0; i < N; i++)
        in[i] = (float)i;
    hg_hostbuf_mark_written(g->in, 0, BYTES);
    size_t n = N;
    g->args[0] = (hg_arg){"in", HG_IN, {0}, 0, in_res};
    g->args[1] = (hg_arg){"acc", HG_INOUT, {0}, 0, acc_res};
    if (hg_tensor_host(&g->args[0].tensor, g->in, HG_F32, 1, &n) ||
        hg_tensor_host(&g->args[1].tensor, g->acc, HG_F32, 1, &n))
        return -1;
    return 0;
}

static void rig_close(rig *g)
{
    hg_runner_close(g->r);
    hg_hostbuf_destroy(g->in);
    hg_hostbuf_destroy(g->acc);
    hg_device_close(g->dev);
}

/* acc must hold rounds * in[i] + base for every i. */
static int acc_is(const rig *g, float rounds, float base)
{
    const float *acc = hg_hostbuf_data(g->acc);
    const float *in = hg_hostbuf_data(g->in);
    for (int i = 0; i < N; i++)
        if (acc[i] != base + rounds * in[i])
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- tests */

TEST_EACH_BACKEND(resident_in_is_uploaded_once_and_keeps_its_host_view)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.h2d_bytes, 2 * BYTES);
    ASSERT_UEQ(s.resident_hits, 0);
    ASSERT_UEQ(s.device_allocs, 2); /* the resident copy and the retained buffer */
    for (int round = 2; round <= 5; round++) {
        ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
        ASSERT_UEQ(s.h2d_bytes, BYTES); /* only acc */
        ASSERT_UEQ(s.resident_hits, 1);
        ASSERT_UEQ(s.resident_bytes_skipped, BYTES);
        ASSERT_UEQ(s.stale_uploads, 0);
        ASSERT_UEQ(s.device_allocs, 0);
        ASSERT(host_seen == hg_hostbuf_data(g.in)); /* the host view of a resident IN */
        ASSERT(acc_is(&g, (float)round, 0.0f));
    }
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1);
    ASSERT_UEQ(hg_runner_resident_bytes(g.r), BYTES);
    rig_close(&g);
}

TEST_EACH_BACKEND(host_write_through_the_api_makes_the_next_run_upload)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    float two = 2.0f;
    ASSERT_OK(hg_hostbuf_write(g.in, 5 * sizeof(float), &two, sizeof two)); /* in[5] = 2 */
    memset(hg_hostbuf_data(g.acc), 0, BYTES);
    ASSERT_OK(hg_hostbuf_mark_written(g.acc, 0, BYTES));
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.stale_uploads, 1);
    ASSERT_UEQ(s.resident_hits, 0);
    /* only the 4 bytes the host wrote of 'in', and the staged acc */
    ASSERT_UEQ(s.h2d_bytes, BYTES + sizeof two);
    ASSERT_UEQ(s.h2d_bytes_skipped, BYTES - sizeof two);
    ASSERT_UEQ(s.h2d_copies, 2);
    ASSERT_UEQ(s.h2d_batches, 1);
    ASSERT(((const float *)hg_hostbuf_data(g.acc))[5] == 2.0f);
    ASSERT(acc_is(&g, 1.0f, 0.0f));
    rig_close(&g);
}

/* INOUT stays coherent: copied back, it is current at its new generation, so
 * the next run uploads nothing for it, and the accumulation is right. */
TEST_EACH_BACKEND(resident_inout_is_current_after_copy_back)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    uint64_t gen = hg_hostbuf_generation(g.acc);
    for (int round = 2; round <= 6; round++) {
        ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
        ASSERT_UEQ(s.h2d_bytes, 0);
        ASSERT_UEQ(s.d2h_bytes, BYTES);
        ASSERT_UEQ(s.resident_hits, 2);
        ASSERT(acc_is(&g, (float)round, 0.0f));
        ASSERT_UGT(hg_hostbuf_generation(g.acc), gen); /* copy-back moved it on */
        gen = hg_hostbuf_generation(g.acc);
    }
    rig_close(&g);
}

/* The reference sampled the generation when args were built, so an INOUT
 * restored in place between rounds looked unchanged.  Sampled at bind, a
 * restore through the API is seen: every round starts from the restore. */
TEST_EACH_BACKEND(generation_is_sampled_at_bind_so_a_restore_is_uploaded)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    static float initial[N];
    for (int i = 0; i < N; i++)
        initial[i] = 100.0f;
    for (int round = 1; round <= 4; round++) {
        ASSERT_OK(hg_hostbuf_write(g.acc, 0, initial, BYTES)); /* a scene's restore */
        hg_run_stats s;
        ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
        ASSERT(acc_is(&g, 1.0f, 100.0f)); /* a stale acc would show 2x, 3x... */
        if (round > 1) {
            ASSERT_UEQ(s.stale_uploads, 1);
            ASSERT_UEQ(s.h2d_bytes, BYTES);
        }
    }
    rig_close(&g);
}

/* The header's cost of verify mode, counted: a run reads each resident
 * arg's extent once at bind (compared with its shadow, or copied into it
 * where uploaded), and an INOUT's copied-back bytes once more at publish. */
TEST_EACH_BACKEND(verify_reads_each_extent_once_per_run_plus_what_came_back)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    hg_runner_set_verify(g.r, true);
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));             /* new copies: uploaded */
    ASSERT_UEQ(g.r->plan.rstats.verified_bytes, 2 * BYTES + BYTES); /* both at bind, acc back */
    for (int round = 2; round <= 4; round++) {
        ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* both hits */
        ASSERT_UEQ(s.resident_hits, 2);
        ASSERT_UEQ(g.r->plan.rstats.verified_bytes, 2 * BYTES + BYTES);
    }
    ASSERT(acc_is(&g, 4.0f, 0.0f));
    rig_close(&g);
}

/* A kernel that also writes the resident IN's host buffer through the API
 * while the run is in flight (the contract says not to; a runtime must still
 * not take the device copy, uploaded before the write, for the new bytes).
 * Only a sim kernel runs host code during a run, so the test is sim-only. */
static hg_hostbuf *sneak_into;
static int k_acc_and_write_host(const hg_kernel_ctx *ctx)
{
    float seven = 7.0f;
    if (sneak_into != NULL && hg_hostbuf_write(sneak_into, 0, &seven, sizeof seven) != 0)
        return 1;
    return k_acc(ctx);
}
static const hg_kernel K_SNEAK = {"acc_and_write_host", k_acc_and_write_host, HG_CORE_VECTOR, NULL,
                                  NULL};
static const hg_callable SNEAKY = {"acc", orch_acc, (void *)&K_SNEAK};

/* An IN's copy is published at the generation sampled at bind (the bytes
 * it holds), not the one at publish, so a write during the run makes the
 * next run upload: in verify mode and out of it. */
TEST(sim_only_in_copy_is_published_at_the_bind_generation)
{
    const char *backend = "sim";
    for (int verify = 0; verify < 2; verify++) {
        rig g;
        ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
        hg_runner_set_verify(g.r, verify != 0);
        hg_run_stats s;
        sneak_into = g.in;
        ASSERT_OK(hg_runner_run(g.r, &SNEAKY, g.args, 2, &s)); /* acc[0] += 0; in[0] = 7 */
        sneak_into = NULL;
        ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* acc[0] += 7, if uploaded */
        ASSERT_UEQ(s.resident_hits, 0);
        ASSERT_UEQ(s.stale_uploads, 1);
        ASSERT(((const float *)hg_hostbuf_data(g.acc))[0] == 7.0f);
        ASSERT(((const float *)hg_hostbuf_data(g.acc))[1] == 2.0f);
        rig_close(&g);
    }
}

/* Publish only after success: a failed copy-back or a failed kernel leaves
 * nothing that looks current, so the next run uploads and is right. */
TEST_EACH_BACKEND(failed_runs_publish_nothing)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* both current now */
    /* A hit writes acc on the device, then copy-back fails. */
    ASSERT_OK(hg_device_inject_fault(g.dev, HG_FAULT_COPY, 1));
    ASSERT_EQ(hg_runner_run(g.r, &ACC, g.args, 2, &s), HG_ECOPY);
    ASSERT(acc_is(&g, 1.0f, 0.0f)); /* the host kept round 1's result */
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.stale_uploads, 1); /* acc's device copy had moved on: uploaded */
    ASSERT_UEQ(s.resident_hits, 1); /* in was untouched */
    ASSERT(acc_is(&g, 2.0f, 0.0f));
    /* A failing kernel after the device copy of acc was current. */
    ASSERT_EQ(hg_runner_run(g.r, &FAILING, g.args, 2, &s), HG_EKERNEL);
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.stale_uploads, 1);
    ASSERT(acc_is(&g, 3.0f, 0.0f));
    /* A fault on the upload of a new copy: nothing published either. */
    hg_hostbuf *other;
    ASSERT_OK(hg_hostbuf_create(BYTES, &other));
    memcpy(hg_hostbuf_data(other), hg_hostbuf_data(g.in), BYTES);
    ASSERT_OK(hg_hostbuf_mark_written(other, 0, BYTES));
    size_t n = N;
    ASSERT_OK(hg_tensor_host(&g.args[0].tensor, other, HG_F32, 1, &n));
    ASSERT_OK(hg_device_inject_fault(g.dev, HG_FAULT_COPY, 1));
    ASSERT_EQ(hg_runner_run(g.r, &ACC, g.args, 2, &s), HG_ECOPY);
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.stale_uploads, 2); /* the new copy and acc, both not current */
    ASSERT(acc_is(&g, 4.0f, 0.0f));
    rig_close(&g);
    hg_hostbuf_destroy(other);
}

/* Address + size is never freshness: a new host buffer (at the very address
 * a destroyed one had, with other content) never matches the old record,
 * because ids are never reused. */
TEST_EACH_BACKEND(a_new_buffer_at_a_reused_address_never_matches_an_old_copy)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
    static float data[N];
    hg_hostbuf *wrapped;
    for (int i = 0; i < N; i++)
        data[i] = 1.0f;
    ASSERT_OK(hg_hostbuf_wrap(data, BYTES, &wrapped));
    uint64_t old_id = hg_hostbuf_id(wrapped);
    size_t n = N;
    ASSERT_OK(hg_tensor_host(&g.args[0].tensor, wrapped, HG_F32, 1, &n));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    hg_hostbuf_destroy(wrapped);
    for (int i = 0; i < N; i++)
        data[i] = 3.0f; /* same memory, new content, new buffer */
    ASSERT_OK(hg_hostbuf_wrap(data, BYTES, &wrapped));
    ASSERT(hg_hostbuf_id(wrapped) != old_id);
    ASSERT_UEQ(hg_hostbuf_generation(wrapped), 1); /* the same generation as before */
    ASSERT_OK(hg_tensor_host(&g.args[0].tensor, wrapped, HG_F32, 1, &n));
    memset(hg_hostbuf_data(g.acc), 0, BYTES);
    ASSERT_OK(hg_hostbuf_mark_written(g.acc, 0, BYTES));
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 0);
    ASSERT(((const float *)hg_hostbuf_data(g.acc))[7] == 3.0f);
    hg_hostbuf_destroy(wrapped);
    rig_close(&g);
}

/* Metadata after close: closing a runner frees every copy; a new runner on
 * the same device (which reuses the device addresses) knows nothing. */
TEST_EACH_BACKEND(close_frees_every_copy_and_forgets_every_record)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    hg_runner_close(g.r);
    hg_device_counters c;
    hg_device_counters_get(g.dev, &c);
    ASSERT_UEQ(c.live_bytes, 0);
    ASSERT_OK(hg_runner_open(g.dev, &g.r));
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 0);
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 0);
    ASSERT_UEQ(s.h2d_bytes, 2 * BYTES);
    ASSERT(acc_is(&g, 2.0f, 0.0f));
    rig_close(&g);
}

/* Budgets: copies that do not fit are staged for the run (not an error);
 * copies of other runs are evicted least recently used first. */
TEST_EACH_BACKEND(budget_stages_what_does_not_fit_and_evicts_lru)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_RESIDENT));
    ASSERT_OK(hg_runner_set_budget(g.r, BYTES)); /* room for one of the two */
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.resident_staged, 1);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1);
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 1);
    ASSERT_UEQ(s.resident_staged, 1);
    ASSERT(acc_is(&g, 2.0f, 0.0f));
    /* Another buffer as IN: in's copy (not used by this run) is evicted. */
    hg_hostbuf *other;
    ASSERT_OK(hg_hostbuf_create(BYTES, &other));
    hg_arg args2[2] = {g.args[0], g.args[1]};
    size_t n = N;
    ASSERT_OK(hg_tensor_host(&args2[0].tensor, other, HG_F32, 1, &n));
    ASSERT_OK(hg_runner_run(g.r, &ACC, args2, 2, &s));
    ASSERT_UEQ(s.evictions, 1);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1);
    ASSERT_UEQ(hg_runner_resident_bytes(g.r), BYTES);
    ASSERT(acc_is(&g, 2.0f, 0.0f)); /* other is all zeros */
    /* Shrinking the budget evicts now. */
    ASSERT_OK(hg_runner_set_budget(g.r, 1));
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 0);
    ASSERT_OK(hg_runner_set_budget(g.r, 0)); /* back to the device's capacity */
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 2);
    ASSERT(acc_is(&g, 3.0f, 0.0f));
    hg_hostbuf_destroy(other);
    rig_close(&g);
}

/* Budgets are per runner: a second runner on the same device, evicting
 * under its own tiny budget, never touches the first runner's copies. */
TEST_EACH_BACKEND(a_runner_evicts_only_its_own_copies)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    hg_runner *other;
    ASSERT_OK(hg_runner_open(g.dev, &other));
    hg_hostbuf *in2, *acc2;
    ASSERT_OK(hg_hostbuf_create(BYTES, &in2));
    ASSERT_OK(hg_hostbuf_create(BYTES, &acc2));
    hg_arg args2[2] = {g.args[0], g.args[1]};
    size_t n = N;
    ASSERT_OK(hg_tensor_host(&args2[0].tensor, in2, HG_F32, 1, &n));
    ASSERT_OK(hg_tensor_host(&args2[1].tensor, acc2, HG_F32, 1, &n));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(hg_runner_run(other, &ACC, args2, 2, &s));
        ASSERT_OK(hg_runner_set_budget(other, 1)); /* evicts its own copy */
        ASSERT_OK(hg_runner_set_budget(other, 0));
    }
    ASSERT_UEQ(hg_runner_resident_copies(other), 0);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1); /* untouched */
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.resident_hits, 1);
    ASSERT(acc_is(&g, 2.0f, 0.0f));
    hg_runner_close(other);
    hg_hostbuf_destroy(in2);
    hg_hostbuf_destroy(acc2);
    rig_close(&g);
}

/* The cache's records do not grow with the buffers it has seen: 300 runs,
 * each over a new live host buffer (ids never repeat), under a budget of
 * two copies, leave at most two live copies and as many slots (evicted
 * slots are reused), and an index sized for them.  (Destroyed buffers'
 * copies go at once: orphan_test.c.) */
TEST_EACH_BACKEND(cache_records_stay_bounded_by_the_budget)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=1", HG_RESIDENT, HG_STAGED));
    ASSERT_OK(hg_runner_set_budget(g.r, 2 * BYTES));
    hg_run_stats s;
    uint64_t evictions = 0;
    static hg_hostbuf *ins[300];
    for (int i = 0; i < 300; i++) {
        ASSERT_OK(hg_hostbuf_create(BYTES, &ins[i]));
        hg_arg args[2] = {g.args[0], g.args[1]};
        size_t n = N;
        ASSERT_OK(hg_tensor_host(&args[0].tensor, ins[i], HG_F32, 1, &n));
        ASSERT_OK(hg_runner_run(g.r, &ACC, args, 2, &s));
        evictions += s.evictions;
    }
    ASSERT_UEQ(evictions, 298);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 2);
    ASSERT_ULE(g.r->cache.nslots, 2);
    ASSERT_ULE(g.r->cache.index_cap, 16);
    for (int i = 0; i < 300; i++)
        hg_hostbuf_destroy(ins[i]);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 0);
    rig_close(&g);
}

/* A full device: growing the retained buffer evicts resident copies the run
 * does not use before it fails; what cannot fit even then is HG_EDEVMEM. */
TEST_EACH_BACKEND(full_device_evicts_unused_copies_before_failing)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=1,mem=10K", HG_RESIDENT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* copy 4K + retained 4K */
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 1);
    hg_hostbuf *other;
    ASSERT_OK(hg_hostbuf_create(BYTES, &other));
    hg_arg staged[2] = {g.args[0], g.args[1]};
    size_t n = N;
    ASSERT_OK(hg_tensor_host(&staged[0].tensor, other, HG_F32, 1, &n));
    staged[0].residency = HG_STAGED;
    /* 8K of slices: the retained buffer grows to 8K, which fits only once
     * in's copy (unused by this run) is evicted. */
    ASSERT_OK(hg_runner_run(g.r, &ACC, staged, 2, &s));
    ASSERT_UEQ(s.evictions, 1);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 0);
    ASSERT(acc_is(&g, 1.0f, 0.0f)); /* other is zeros: acc unchanged */
    /* 16K of slices can never fit in 10K. */
    hg_hostbuf *big_in, *big_acc;
    ASSERT_OK(hg_hostbuf_create(2 * BYTES, &big_in));
    ASSERT_OK(hg_hostbuf_create(2 * BYTES, &big_acc));
    n = 2 * N;
    ASSERT_OK(hg_tensor_host(&staged[0].tensor, big_in, HG_F32, 1, &n));
    ASSERT_OK(hg_tensor_host(&staged[1].tensor, big_acc, HG_F32, 1, &n));
    ASSERT_EQ(hg_runner_run(g.r, &ACC, staged, 2, &s), HG_EDEVMEM);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), "retained buffer");
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* still usable */
    ASSERT(acc_is(&g, 2.0f, 0.0f));
    hg_hostbuf_destroy(other);
    hg_hostbuf_destroy(big_in);
    hg_hostbuf_destroy(big_acc);
    rig_close(&g);
}

/* Verify mode catches a write that bypassed the API; off, no hashing. */
TEST_EACH_BACKEND(verify_mode_catches_a_write_that_bypassed_the_api)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=2", HG_RESIDENT, HG_STAGED));
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(g.r->plan.rstats.verified_bytes, 0); /* off: no checking at all */
    hg_runner_set_verify(g.r, true);
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* unhashed copy: uploaded */
    ASSERT_UEQ(s.stale_uploads, 1);
    ASSERT_UEQ(g.r->plan.rstats.verified_bytes, BYTES); /* shadowed once, at bind */
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s)); /* hashed and unchanged: a hit */
    ASSERT_UEQ(s.resident_hits, 1);
    ASSERT_UEQ(g.r->plan.rstats.verified_bytes, BYTES); /* an IN: checked at bind, not again */
    ((float *)hg_hostbuf_data(g.in))[3] = 42.0f;        /* behind the API's back */
    ASSERT_EQ(hg_runner_run(g.r, &ACC, g.args, 2, &s), HG_ESTALE);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), "arg 'in'");
    char id[32];
    snprintf(id, sizeof id, "host buffer %llu", (unsigned long long)hg_hostbuf_id(g.in));
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), id);
    /* Declaring the write makes it an ordinary stale upload. */
    ASSERT_OK(hg_hostbuf_mark_written(g.in, 3 * sizeof(float), sizeof(float)));
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.stale_uploads, 1);
    rig_close(&g);
}

/* Zero-byte resident args: no copy, no allocation. */
TEST_EACH_BACKEND(zero_byte_resident_arg_has_no_copy)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=1", HG_RESIDENT, HG_RESIDENT));
    g.args[0].tensor.shape[0] = 0;
    g.args[1].tensor.shape[0] = 0;
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(g.r, &ACC, g.args, 2, &s));
    ASSERT_UEQ(s.device_allocs, 0);
    ASSERT_UEQ(hg_runner_resident_copies(g.r), 0);
    rig_close(&g);
}

/* Scratch is pooled: a later run of the same graph allocates nothing.  The
 * debug switch poisons reused scratch, so a kernel that reads scratch it
 * never wrote sees 0xA5 bytes, not the last run's values.  The kernel
 * reports the scratch's first byte in its OUT arg `seen`. */
static int k_scratch(const hg_kernel_ctx *ctx)
{
    unsigned char *p = ctx->args[0].data, *seen = ctx->args[1].data;
    seen[0] = p[0];
    memset(p, 0x11, ctx->args[0].shape[0]);
    return 0;
}
static const hg_kernel K_SCRATCH = {
    "scratch", k_scratch, HG_CORE_VECTOR,
    "__kernel void scratch(HG_STATUS_ARGS, HG_TENSOR(uchar, t), HG_TENSOR(uchar, seen))\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (i == 0)\n"
    "        HG_PTR(seen)[0] = HG_PTR(t)[0];\n"
    "    HG_PTR(t)[i] = 0x11;\n"
    "}\n",
    "scratch"};

static int orch_scratch(hg_orch *o, void *user)
{
    (void)user;
    uint32_t idx;
    hg_tensor v;
    size_t n = 4096;
    const hg_arg *seen;
    hg_orch_arg(o, 0, &seen);
    int rc = hg_orch_scratch(o, "tmp", HG_U8, 1, &n, &idx, &v);
    if (rc != 0)
        return rc;
    hg_task_arg ta[2] = {{idx, HG_INOUT, v}, {0, HG_OUT, seen->tensor}};
    hg_task_desc d = {&K_SCRATCH, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(scratch_is_pooled_and_can_be_poisoned_on_reuse)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(1, &hb));
    size_t one = 1;
    hg_arg seen = {"seen", HG_OUT, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_host(&seen.tensor, hb, HG_U8, 1, &one));
    const unsigned char *first = hg_hostbuf_data(hb);
    hg_callable c = {"scratch", orch_scratch, NULL};
    hg_run_stats s;
    ASSERT_OK(hg_runner_run(r, &c, &seen, 1, &s));
    ASSERT_UEQ(s.device_allocs, 2); /* the scratch and the retained buffer */
    ASSERT_EQ(*first, 0xA5);        /* new: poisoned by the device */
    ASSERT_OK(hg_runner_run(r, &c, &seen, 1, &s));
    ASSERT_UEQ(s.device_allocs, 0); /* reused */
    ASSERT_EQ(*first, 0x11);        /* last run's bytes, by default */
    hg_runner_set_poison_scratch(r, true);
    ASSERT_OK(hg_runner_run(r, &c, &seen, 1, &s));
    ASSERT_UEQ(s.device_allocs, 0);
    ASSERT_EQ(*first, 0xA5);
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_counters dc;
    hg_device_counters_get(dev, &dc);
    ASSERT_UEQ(dc.live_bytes, 0);
    hg_device_close(dev);
}

/* A bad residency value is a named error. */
TEST_EACH_BACKEND(bad_residency_value_is_named)
{
    rig g;
    ASSERT_OK(rig_open(&g, backend, "cores=1", HG_STAGED, HG_STAGED));
    g.args[0].residency = (hg_residency)7;
    ASSERT_EQ(hg_runner_run(g.r, &ACC, g.args, 2, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(g.r), "arg 'in': residency 7");
    rig_close(&g);
}

int main(void)
{
    return RUN_TESTS();
}
