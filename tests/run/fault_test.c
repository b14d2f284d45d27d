/*
 * fault_test.c: SQLite's habit applied to staging.  A bgemm run is repeated
 * with the k-th device allocation, then the k-th copy, made to fail, for every
 * k the run has, on a fresh runner (first run: retained growth) and on a warm
 * one (later run); then with the k-th copy, fill or new memory's poisoning
 * accepted and completing with an error (fail_complete: what a GPU driver
 * does when it backs memory on first use), with the inputs staged and with
 * them resident.  Each failing run must return the fault's error with a
 * message, leave no device memory but what the runner holds (retained
 * buffer, pooled scratch, resident copies), change no host byte of C
 * (copy-back is all or nothing, so not even a fault inside copy-back may),
 * and the next run must pass golden: an upload that failed at completion
 * left stale bytes on the device, so a resident copy published on it would
 * fail golden.  Every sweep runs once per backend (test_device.h): a fault
 * on OpenCL behaves exactly as on the sim.
 */
#include <string.h>

#include "device/device.h"
#include "scene/scene.h"
#include "test_device.h"
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

/* Where a sweep runs: backend, scene (its default case), first run or a
 * later one, inputs staged or resident. */
typedef struct setup {
    const char *backend, *scene;
    bool warm, resident;
} setup;

static scene_case *make_case(const char *name)
{
    const scene *s = scene_find(name);
    if (s == NULL)
        return NULL;
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    scene_case *c = NULL;
    hg_err e;
    return scene_case_make(s, params, &c, &e) == 0 ? c : NULL;
}

/* The 'C' arg: the INOUT bgemm accumulates into (vector_add's OUT). */
static const hg_arg *arg_c(const scene_case *c)
{
    for (uint32_t i = 0; i < c->nargs; i++)
        if (c->args[i].dir == HG_INOUT || c->args[i].dir == HG_OUT)
            return &c->args[i];
    return NULL;
}

static int run_once(hg_runner *r, scene_case *c, hg_run_stats *s)
{
    return hg_runner_run(r, &c->callable, c->args, c->nargs, s);
}

/* fault_once's answer when the fault did not fire: the run has fewer
 * operations of its kind than k. */
static const char not_fired[] = "the fault did not fire";

/* The inputs (A, B, config) resident, so a successful run publishes them. */
static void make_resident(scene_case *c)
{
    for (uint32_t i = 0; i < c->nargs; i++)
        if (c->args[i].dir == HG_IN)
            c->args[i].residency = HG_RESIDENT;
}

/* What the faulted run must have done (0 if it did): fail with the fault's
 * error and a message, holding no device memory but the runner's and
 * leaving C as it was; or, for a completion fault on a new allocation,
 * recover as a failed allocation is recovered (a resident arg staged, or a
 * copy evicted) and be golden-correct. */
static const char *faulted_outcome(hg_device *dev, hg_runner *r, scene_case *c, hg_fault kind,
                                   int rc, const hg_run_stats *s, const void *before)
{
    const hg_arg *ac = arg_c(c);
    scene_check_result res;
    int want = kind == HG_FAULT_ALLOC ? HG_EDEVMEM : HG_ECOPY;
    if (kind == HG_FAULT_COMPLETE && rc == HG_EDEVMEM)
        want = rc; /* a new allocation's poisoning failed */
    if (device_debug_fault_left(dev, kind) != 0)
        return not_fired;
    if (rc == 0 && kind == HG_FAULT_COMPLETE && s->resident_staged + s->evictions > 0)
        return scene_case_check(c, &res) ? NULL : "a recovered run is not golden-correct";
    if (rc != want)
        return "faulted run did not return the fault's error";
    if (hg_runner_errmsg(r)[0] == '\0')
        return "no error message";
    if (counters(dev).live_bytes != hg_runner_device_bytes(r))
        return "device memory leaked past what the runner holds";
    if (memcmp(before, hg_hostbuf_data(ac->tensor.host), hg_hostbuf_size(ac->tensor.host)))
        return "C changed although the run failed";
    return NULL;
}

/* One faulted run and its recovery; returns 0 when all held, else a line. */
static const char *fault_once(const setup *at, hg_fault kind, uint64_t k)
{
    hg_device *dev;
    hg_runner *r;
    scene_case *c = make_case(at->scene);
    if (c == NULL || (dev = test_device_on(at->backend, "cube=1,vector=2")) == NULL)
        return "setup";
    if (at->resident)
        make_resident(c);
    if (hg_runner_open(dev, &r) != 0)
        return "runner";
    const char *bad = NULL;
    const hg_arg *ac = arg_c(c);
    size_t bytes = hg_hostbuf_size(ac->tensor.host);
    void *before = malloc(bytes), *initial = malloc(bytes);
    memcpy(initial, hg_hostbuf_data(ac->tensor.host), bytes);
    if (at->warm && run_once(r, c, NULL) != 0)
        bad = "warm-up run failed";
    memcpy(before, hg_hostbuf_data(ac->tensor.host), bytes);
    hg_device_inject_fault(dev, kind, k);
    hg_run_stats s;
    if (!bad)
        bad = faulted_outcome(dev, r, c, kind, run_once(r, c, &s), &s, before);
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

static counts measure(const setup *at)
{
    counts n = {0, 0};
    hg_device *dev;
    hg_runner *r;
    scene_case *c = make_case(at->scene);
    if (c == NULL || (dev = test_device_on(at->backend, "cube=1,vector=2")) == NULL)
        return n;
    if (at->resident)
        make_resident(c);
    hg_runner_open(dev, &r);
    hg_run_stats s;
    if (at->warm)
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

static void sweep(const char *backend, bool warm)
{
    const setup at = {backend, "bgemm", warm, false};
    counts n = measure(&at);
    /* A warm run reuses the retained buffer and the pooled scratch: it
     * allocates nothing, so only its copies can fail. */
    ASSERT_UEQ(n.allocs, warm ? 0 : 2);
    ASSERT_UGE(n.copies, 2);
    for (uint64_t k = 1; k <= n.allocs; k++) {
        const char *bad = fault_once(&at, HG_FAULT_ALLOC, k);
        if (bad)
            TEST_FAIL_("alloc fault %llu (warm %d): %s", (unsigned long long)k, warm, bad);
    }
    for (uint64_t k = 1; k <= n.copies; k++) {
        const char *bad = fault_once(&at, HG_FAULT_COPY, k);
        if (bad)
            TEST_FAIL_("copy fault %llu (warm %d): %s", (unsigned long long)k, warm, bad);
    }
}

TEST_EACH_BACKEND(every_allocation_and_copy_of_a_first_bgemm_run_can_fail_cleanly)
{
    sweep(backend, false);
}

TEST_EACH_BACKEND(every_allocation_and_copy_of_a_later_bgemm_run_can_fail_cleanly)
{
    sweep(backend, true);
}

/* The operations a completion fault counts (copied ranges, fills, new
 * memory's poisoning) have no counter: k runs until the fault no longer
 * fires within the run, at least once per allocation and copy. */
#define MAX_COMPLETIONS 256u

/* fail_complete at every k of a run, until it no longer fires. */
static void sweep_complete(const setup *at)
{
    counts n = measure(at);
    uint64_t k = 1;
    for (; k <= MAX_COMPLETIONS; k++) {
        const char *bad = fault_once(at, HG_FAULT_COMPLETE, k);
        if (bad == not_fired)
            break;
        if (bad)
            TEST_FAIL_("%s, completion fault %llu (warm %d, resident %d): %s", at->scene,
                       (unsigned long long)k, at->warm, at->resident, bad);
    }
    printf("     %s, warm %d, resident %d: %llu operations\n", at->scene, at->warm, at->resident,
           (unsigned long long)(k - 1));
    ASSERT_UGE(k - 1, n.allocs + n.copies);
    ASSERT_ULE(k, MAX_COMPLETIONS); /* it stopped firing */
}

/* bgemm (INOUT C) and vector_add (OUT c: a fill poisons its slice). */
TEST_EACH_BACKEND(every_copy_fill_and_poisoning_that_fails_at_completion_fails_the_run_cleanly)
{
    static const char *const scenes[2] = {"bgemm", "vector_add"};
    for (int sc = 0; sc < 2; sc++) {
        for (int warm = 0; warm < 2; warm++) {
            for (int resident = 0; resident < 2; resident++) {
                const setup at = {backend, scenes[sc], warm, resident};
                sweep_complete(&at);
            }
        }
    }
}

/* The spec keys fail_alloc=K and fail_copy=K fail the same step of a first
 * bgemm run on every backend, with the same code and message as on the
 * sim, and the device then works (the fault fires once). */
typedef struct keyed_outcome {
    int rc, next_rc;
    char msg[160];
} keyed_outcome;

static void keyed_run(const char *backend, const char *key, uint64_t k, keyed_outcome *out)
{
    char keys[64];
    snprintf(keys, sizeof keys, "cube=1,vector=2,%s=%llu", key, (unsigned long long)k);
    memset(out, 0, sizeof *out);
    out->rc = out->next_rc = 1;
    hg_device *dev = test_device_on(backend, keys);
    scene_case *c = make_case("bgemm");
    hg_runner *r;
    if (dev != NULL && c != NULL && hg_runner_open(dev, &r) == 0) {
        out->rc = run_once(r, c, NULL);
        snprintf(out->msg, sizeof out->msg, "%s", hg_runner_errmsg(r));
        out->next_rc = run_once(r, c, NULL);
        hg_runner_close(r);
    }
    scene_case_destroy(c);
    hg_device_close(dev);
}

TEST(fault_keys_fail_the_same_step_on_every_backend_as_on_the_sim)
{
    static const char *const keys[3] = {"fail_alloc", "fail_copy", "fail_complete"};
    const setup sim_first = {"sim", "bgemm", false, false};
    counts n = measure(&sim_first);
    ASSERT_UGT(n.copies, 0);
    for (int kind = 0; kind < 3; kind++) {
        uint64_t steps = kind == 0 ? n.allocs : kind == 1 ? n.copies : n.allocs + n.copies;
        for (uint64_t k = 1; k <= steps; k++) {
            keyed_outcome sim;
            keyed_run("sim", keys[kind], k, &sim);
            if (kind == 2 && sim.rc == HG_EDEVMEM)
                ASSERT_STR_CONTAINS(sim.msg, "out of device memory");
            else
                ASSERT_EQ(sim.rc, kind == 0 ? HG_EDEVMEM : HG_ECOPY);
            ASSERT_OK(sim.next_rc);
            for (size_t b = 1; b < TEST_NBACKENDS; b++) {
                if (!test_backend_available(b))
                    continue;
                keyed_outcome other;
                keyed_run(test_backends[b], keys[kind], k, &other);
                if (other.rc != sim.rc || other.next_rc != 0 || strcmp(other.msg, sim.msg) != 0)
                    TEST_FAIL_("%s=%llu on %s: rc %d then %d, \"%s\"; on sim: rc %d, \"%s\"",
                               keys[kind], (unsigned long long)k, test_backends[b], other.rc,
                               other.next_rc, other.msg, sim.rc, sim.msg);
            }
        }
    }
}

int main(void)
{
    return RUN_TESTS();
}
