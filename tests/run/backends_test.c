/*
 * backends_test.c: a run gives the same host results on every backend
 * (test_device.h's list; opencl skipped with "skipped: no OpenCL platform"
 * where there is none), in every residency mode (vector_add and bgemm here;
 * tests/scene/backends_scene_test.c runs every scene), and every allocation and
 * copy of a run can fail cleanly on each (fault_test's sweep, on a
 * vector_add case: ragged tiles, an OUT arg copied back).
 */
#include <string.h>

#include "hostgraph_scenes.h"
#include "test_device.h"
#include "testlib.h"

static const char *const case_params[] = {"n=5000", "tile=768"};

static hg_scene_case *open_case(void)
{
    hg_scene_case *c = NULL;
    char msg[256];
    if (hg_scene_case_open("vector_add", case_params, 2, &c, msg, sizeof msg) != 0)
        fprintf(stderr, "  case: %s\n", msg);
    return c;
}

/* The case's OUT arg c. */
static const hg_arg *out_arg(const hg_scene_case *c)
{
    return &hg_scene_case_args(c)[2];
}

static int run_case(hg_runner *r, hg_scene_case *c, hg_residency res)
{
    hg_arg args[8];
    uint32_t n = hg_scene_case_num_args(c);
    memcpy(args, hg_scene_case_args(c), n * sizeof *args);
    for (uint32_t i = 0; i < n; i++)
        args[i].residency = res;
    return hg_runner_run(r, hg_scene_case_callable(c), args, n, NULL);
}

TEST(scenes_pass_golden_on_every_backend_and_mode)
{
    static const char *const modes[] = {"off", "pin", "in", "all"};
    static const char *const bgemm_params[] = {"grid=2", "tile=24", "grid_k=3"};
    static const struct {
        const char *scene;
        const char *const *params;
        uint32_t nparams;
    } scenes[] = {{"vector_add", case_params, 2}, {"bgemm", bgemm_params, 3}};
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        if (test_backend_skipped(test_backends[b]))
            continue;
        for (size_t i = 0; i < 2 * 4; i++) {
            size_t m = i % 4, sc = i / 4;
            hg_scene_opts o = {.scene = scenes[sc].scene,
                               .params = scenes[sc].params,
                               .nparams = scenes[sc].nparams,
                               .rounds = 3,
                               .residency = modes[m],
                               .verify = true,
                               .device = test_backends[b]};
            char msg[512] = "";
            int rc = hg_scene_run(&o, msg, sizeof msg);
            if (rc != HG_SCENE_OK)
                TEST_FAIL_("%s on %s --residency %s: exit %d: %s", scenes[sc].scene,
                           test_backends[b], modes[m], rc, msg);
        }
    }
}

/* Round after round, staged and resident, the host bytes of c are the same
 * on every backend (vector_add's sums are exact, so equal means identical). */
TEST(host_results_are_identical_across_backends)
{
    float *ref = NULL;
    size_t bytes = 0;
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        bool skipped;
        hg_device *dev = test_backend_open(test_backends[b], NULL, &skipped);
        if (skipped)
            continue;
        ASSERT(dev != NULL);
        hg_scene_case *c = open_case();
        hg_runner *r;
        ASSERT(c != NULL);
        ASSERT_OK(hg_runner_open(dev, &r));
        const hg_arg *out = out_arg(c);
        for (int round = 0; round < 3; round++) {
            ASSERT_OK(run_case(r, c, round == 0 ? HG_STAGED : HG_RESIDENT));
            ASSERT(hg_scene_case_check(c, NULL, 0));
        }
        bytes = hg_hostbuf_size(out->tensor.host);
        if (ref == NULL) {
            ref = malloc(bytes);
            memcpy(ref, hg_hostbuf_data(out->tensor.host), bytes);
        } else {
            ASSERT(memcmp(ref, hg_hostbuf_data(out->tensor.host), bytes) == 0);
        }
        hg_runner_close(r);
        hg_device_counters dc;
        hg_device_counters_get(dev, &dc);
        ASSERT_UEQ(dc.live_bytes, 0);
        hg_scene_case_close(c);
        hg_device_close(dev);
    }
    free(ref);
}

/* One faulted run and its recovery on backend; NULL when all held.  Args
 * are staged: a resident copy that cannot be allocated is staged instead,
 * which is not an error (hg_runner_set_budget), so it would hide the fault. */
static const char *fault_once(const char *backend, hg_fault kind, uint64_t k, bool warm)
{
    bool skipped;
    hg_device *dev = test_backend_open(backend, NULL, &skipped);
    hg_scene_case *c = open_case();
    hg_runner *r;
    if (dev == NULL || c == NULL || hg_runner_open(dev, &r) != 0)
        return "setup";
    const char *bad = NULL;
    const hg_arg *out = out_arg(c);
    size_t bytes = hg_hostbuf_size(out->tensor.host);
    void *before = malloc(bytes);
    if (warm && run_case(r, c, HG_STAGED) != 0)
        bad = "warm-up run failed";
    memcpy(before, hg_hostbuf_data(out->tensor.host), bytes);
    hg_device_inject_fault(dev, kind, k);
    int rc = bad ? 0 : run_case(r, c, HG_STAGED);
    hg_device_counters dc;
    hg_device_counters_get(dev, &dc);
    if (!bad && rc != (kind == HG_FAULT_ALLOC ? HG_EDEVMEM : HG_ECOPY))
        bad = "the faulted run did not return the fault's error";
    else if (!bad && hg_runner_errmsg(r)[0] == '\0')
        bad = "no error message";
    else if (!bad && dc.live_bytes != hg_runner_device_bytes(r))
        bad = "device memory leaked past what the runner holds";
    else if (!bad && memcmp(before, hg_hostbuf_data(out->tensor.host), bytes) != 0)
        bad = "c changed although the run failed";
    if (!bad && run_case(r, c, HG_STAGED) != 0)
        bad = "the next run failed";
    if (!bad && !hg_scene_case_check(c, NULL, 0))
        bad = "the next run is not golden-correct";
    hg_runner_close(r);
    free(before);
    hg_scene_case_close(c);
    hg_device_close(dev);
    return bad;
}

/* The allocations and copies one run makes (after a warm-up when warm). */
static void measure(const char *backend, bool warm, uint64_t *allocs, uint64_t *copies)
{
    bool skipped;
    hg_device *dev = test_backend_open(backend, NULL, &skipped);
    hg_scene_case *c = open_case();
    hg_runner *r;
    *allocs = *copies = 0;
    if (dev == NULL || c == NULL || hg_runner_open(dev, &r) != 0)
        return;
    hg_device_counters c0, c1;
    if (warm)
        run_case(r, c, HG_STAGED);
    hg_device_counters_get(dev, &c0);
    if (run_case(r, c, HG_STAGED) == 0) {
        hg_device_counters_get(dev, &c1);
        *allocs = c1.allocs - c0.allocs;
        *copies = c1.h2d_copies + c1.d2h_copies - c0.h2d_copies - c0.d2h_copies;
    }
    hg_runner_close(r);
    hg_scene_case_close(c);
    hg_device_close(dev);
}

TEST(every_allocation_and_copy_can_fail_cleanly_on_every_backend)
{
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        if (test_backend_skipped(test_backends[b]))
            continue;
        for (int warm = 0; warm < 2; warm++) {
            uint64_t allocs, copies;
            measure(test_backends[b], warm, &allocs, &copies);
            printf("     %s %s run: %llu allocations, %llu copies\n", test_backends[b],
                   warm ? "later" : "first", (unsigned long long)allocs,
                   (unsigned long long)copies);
            ASSERT_UGE(copies, 1);
            if (warm)
                ASSERT_UEQ(allocs, 0);
            else
                ASSERT_UGE(allocs, 1);
            for (uint64_t k = 1; k <= allocs + copies; k++) {
                hg_fault kind = k <= allocs ? HG_FAULT_ALLOC : HG_FAULT_COPY;
                uint64_t kk = k <= allocs ? k : k - allocs;
                const char *bad = fault_once(test_backends[b], kind, kk, warm);
                if (bad)
                    TEST_FAIL_("%s: %s fault %llu (warm %d): %s", test_backends[b],
                               kind == HG_FAULT_ALLOC ? "alloc" : "copy", (unsigned long long)kk,
                               warm, bad);
            }
        }
    }
}

int main(void)
{
    return RUN_TESTS();
}
