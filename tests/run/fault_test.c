/*
 * fault_test.c: SQLite's habit applied to staging.  A bgemm run is repeated
 * with the k-th device allocation, then the k-th copy, made to fail, for every
 * k the run has, on a fresh runner (first run: retained growth) and on a warm
 * one (later run).  Each failing run must return the fault's error with a
 * message, leave no device memory but what the runner holds (retained
 * buffer, pooled scratch), change no host byte of C (copy-back is all or
 * nothing, so not even a fault inside copy-back may), and the next run must
 * pass golden.
 */
#include <string.h>

#include "scene/scene.h"
#include "testlib.h"

typedef struct counts {
    uint64_t allocs, copies;
} counts;

static hg_device_counters counters(hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c;
}

static scene_case *make_bgemm(void)
{
    const scene *s = scene_find("bgemm");
    if (s == NULL)
        return NULL;
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    scene_case *c = NULL;
    hg_err e;
    return scene_case_make(s, params, &c, &e) == 0 ? c : NULL;
}

/* The 'C' arg: the INOUT the run accumulates into. */
static const hg_arg *arg_c(const scene_case *c)
{
    for (uint32_t i = 0; i < c->nargs; i++)
        if (c->args[i].dir == HG_INOUT)
            return &c->args[i];
    return NULL;
}

static int run_once(hg_runner *r, scene_case *c, hg_run_stats *s)
{
    return hg_runner_run(r, &c->callable, c->args, c->nargs, s);
}

/* One faulted run and its recovery; returns 0 when all held, else a line. */
static const char *fault_once(hg_fault kind, uint64_t k, bool warm)
{
    hg_device *dev;
    hg_runner *r;
    scene_case *c = make_bgemm();
    if (c == NULL || hg_device_open("sim:cube=1,vector=2", &dev, NULL, 0) != 0)
        return "setup";
    if (hg_runner_open(dev, &r) != 0)
        return "runner";
    const char *bad = NULL;
    const hg_arg *ac = arg_c(c);
    size_t bytes = hg_hostbuf_size(ac->tensor.host);
    void *before = malloc(bytes), *initial = malloc(bytes);
    memcpy(initial, hg_hostbuf_data(ac->tensor.host), bytes);
    if (warm && run_once(r, c, NULL) != 0)
        bad = "warm-up run failed";
    memcpy(before, hg_hostbuf_data(ac->tensor.host), bytes);
    hg_device_inject_fault(dev, kind, k);
    int rc = bad ? 0 : run_once(r, c, NULL);
    int want = kind == HG_FAULT_ALLOC ? HG_EDEVMEM : HG_ECOPY;
    if (!bad && rc != want)
        bad = "faulted run did not return the fault's error";
    else if (!bad && hg_runner_errmsg(r)[0] == '\0')
        bad = "no error message";
    else if (!bad && counters(dev).live_bytes != hg_runner_device_bytes(r))
        bad = "device memory leaked past what the runner holds";
    else if (!bad && memcmp(before, hg_hostbuf_data(ac->tensor.host), bytes))
        bad = "C changed although the run failed";
    scene_check_result res;
    hg_hostbuf_write(ac->tensor.host, 0, initial, bytes); /* as a scene round does */
    if (!bad && run_once(r, c, NULL) != 0)
        bad = "the next run failed";
    if (!bad && !scene_case_check(c, &res))
        bad = "the next run is not golden-correct";
    hg_runner_close(r);
    if (!bad && counters(dev).live_bytes != 0)
        bad = "device memory left after close";
    free(before);
    free(initial);
    hg_device_close(dev);
    scene_case_destroy(c);
    return bad;
}

static counts measure(bool warm)
{
    counts n = {0, 0};
    hg_device *dev;
    hg_runner *r;
    scene_case *c = make_bgemm();
    if (c == NULL || hg_device_open("sim:cube=1,vector=2", &dev, NULL, 0) != 0)
        return n;
    hg_runner_open(dev, &r);
    hg_run_stats s;
    if (warm)
        run_once(r, c, NULL);
    if (run_once(r, c, &s) == 0) {
        n.allocs = s.device_allocs;
        n.copies = s.h2d_copies + s.d2h_copies;
    }
    hg_runner_close(r);
    hg_device_close(dev);
    scene_case_destroy(c);
    return n;
}

static void sweep(bool warm)
{
    counts n = measure(warm);
    /* A warm run reuses the retained buffer and the pooled scratch: it
     * allocates nothing, so only its copies can fail. */
    ASSERT_UEQ(n.allocs, warm ? 0 : 2);
    ASSERT_UGE(n.copies, 2);
    for (uint64_t k = 1; k <= n.allocs; k++) {
        const char *bad = fault_once(HG_FAULT_ALLOC, k, warm);
        if (bad)
            TEST_FAIL_("alloc fault %llu (warm %d): %s", (unsigned long long)k, warm, bad);
    }
    for (uint64_t k = 1; k <= n.copies; k++) {
        const char *bad = fault_once(HG_FAULT_COPY, k, warm);
        if (bad)
            TEST_FAIL_("copy fault %llu (warm %d): %s", (unsigned long long)k, warm, bad);
    }
}

TEST(every_allocation_and_copy_of_a_first_bgemm_run_can_fail_cleanly)
{
    sweep(false);
}

TEST(every_allocation_and_copy_of_a_later_bgemm_run_can_fail_cleanly)
{
    sweep(true);
}

int main(void)
{
    return RUN_TESTS();
}
