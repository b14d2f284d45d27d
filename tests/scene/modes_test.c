/*
 * modes_test.c: the scene runner's residency modes as `hostgraph run
 * --residency` and `hostgraph compare` users rely on them: every scene passes
 * its golden every round in every mode; bgemm's later rounds move exactly the
 * bytes each mode implies and allocate nothing on the device; pin reports its
 * one-time upload as setup; pinning an arg the orchestration reads on the
 * host fails with the named no-host-view error; verify mode passes on honest
 * scenes; compare writes one report per mode.
 */
#include <stdlib.h>
#include <string.h>

#include "scene/report.h"
#include "scene/scene.h"
#include "testlib.h"

enum { ROUNDS = 4 };

typedef struct mode_log {
    hg_run_stats s[ROUNDS];
    uint32_t rounds;
} mode_log;

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    (void)c;
    mode_log *log = user;
    if (round <= ROUNDS)
        log->s[round - 1] = *s;
    log->rounds = round;
}

static int run_mode(const scene *sc, scene_residency mode, bool verify, mode_log *log)
{
    scene_run_opts o = {.scene = sc,
                        .rounds = ROUNDS,
                        .residency = mode,
                        .verify = verify,
                        .device_spec = "sim:cube=1,vector=2",
                        .quiet = true,
                        .on_round = log_round,
                        .on_round_user = log};
    memset(log, 0, sizeof *log);
    scene_params_default(sc, o.params);
    o.out = fopen("/dev/null", "w");
    o.err = stderr;
    int rc = scene_run(&o);
    fclose(o.out);
    return rc;
}

TEST(every_scene_passes_golden_every_round_in_every_mode)
{
    for (uint32_t i = 0; scene_at(i) != NULL; i++) {
        for (int m = 0; m < SCENE_RESIDENCY_COUNT; m++) {
            mode_log log;
            int rc = run_mode(scene_at(i), (scene_residency)m, m == SCENE_RESIDENCY_ALL, &log);
            if (rc != SCENE_EXIT_OK || log.rounds != ROUNDS)
                TEST_FAIL_("scene %s, mode %s: exit %d after %u rounds", scene_at(i)->name,
                           scene_residency_name((scene_residency)m), rc, log.rounds);
        }
    }
}

/* bgemm's defaults: A, B, C 64 KiB each (f32 128 x 128), config 32 bytes. */
enum { MAT = 128 * 128 * 4, CONFIG = 32 };

TEST(bgemm_later_rounds_move_what_each_mode_implies)
{
    const scene *bg = scene_find("bgemm");
    ASSERT(bg != NULL);
    mode_log log[SCENE_RESIDENCY_COUNT];
    for (int m = 0; m < SCENE_RESIDENCY_COUNT; m++)
        ASSERT_EQ(run_mode(bg, (scene_residency)m, false, &log[m]), SCENE_EXIT_OK);
    /* round 1 of in/all uploads everything once, like off */
    ASSERT_UEQ(log[SCENE_RESIDENCY_IN].s[0].h2d_bytes, 3 * MAT + CONFIG);
    for (int r = 1; r < ROUNDS; r++) {
        const hg_run_stats *off = &log[SCENE_RESIDENCY_OFF].s[r];
        const hg_run_stats *pin = &log[SCENE_RESIDENCY_PIN].s[r];
        const hg_run_stats *in = &log[SCENE_RESIDENCY_IN].s[r];
        const hg_run_stats *all = &log[SCENE_RESIDENCY_ALL].s[r];
        ASSERT_UEQ(off->h2d_bytes, 3 * MAT + CONFIG);
        ASSERT_UEQ(pin->h2d_bytes, MAT + CONFIG); /* A and B pinned; config is read on host */
        ASSERT_UEQ(in->h2d_bytes, MAT);           /* A, B, config resident; C staged */
        ASSERT_UEQ(in->resident_hits, 3);
        ASSERT_UEQ(in->resident_bytes_skipped, 2 * MAT + CONFIG);
        /* all: C is resident too, but the scene restores it through the API
         * every round, so it is a stale upload: the reference missed this */
        ASSERT_UEQ(all->h2d_bytes, MAT);
        ASSERT_UEQ(all->stale_uploads, 1);
        ASSERT_UEQ(all->resident_hits, 3);
        for (int m = 0; m < SCENE_RESIDENCY_COUNT; m++) {
            ASSERT_UEQ(log[m].s[r].d2h_bytes, MAT);
            ASSERT_UEQ(log[m].s[r].device_allocs, 0); /* retained, copies, scratch all reused */
        }
    }
}

/* pin's setup: A and B copied once, before the rounds, reported apart. */
TEST(pin_reports_its_one_time_upload_as_setup)
{
    const scene *bg = scene_find("bgemm");
    scene_case *c = NULL;
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(bg, params);
    ASSERT_OK(scene_case_make(bg, params, &c, NULL));
    hg_device *dev;
    ASSERT_OK(hg_device_open("sim:cores=2", &dev, NULL, 0));
    scene_run_opts o = {.scene = bg, .rounds = 2, .residency = SCENE_RESIDENCY_PIN, .quiet = true};
    memcpy(o.params, params, sizeof params);
    o.out = fopen("/dev/null", "w");
    o.err = stderr;
    scene_round rounds[2];
    scene_report rep;
    ASSERT_EQ(scene_run_rounds(&o, dev, c, NULL, rounds, &rep), SCENE_EXIT_OK);
    fclose(o.out);
    ASSERT_UEQ(rep.setup_h2d_bytes, 2 * MAT);
    ASSERT(rep.setup_ms > 0);
    hg_device_counters dc;
    hg_device_counters_get(dev, &dc);
    ASSERT_UEQ(dc.live_bytes, 0); /* the pinned buffers were freed after the rounds */
    hg_device_close(dev);
    scene_case_destroy(c);
}

/* The reference's users had to know not to pin an arg the orchestration
 * reads on the host.  Pinned anyway, it is a named error, never a crash or
 * a read of device memory. */
TEST(pinning_an_arg_read_on_the_host_is_a_named_error)
{
    const scene *bg = scene_find("bgemm");
    ASSERT(scene_reads_on_host(bg, "config"));
    ASSERT(!scene_reads_on_host(bg, "A"));
    scene_case *c = NULL;
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(bg, params);
    ASSERT_OK(scene_case_make(bg, params, &c, NULL));
    hg_device *dev;
    ASSERT_OK(hg_device_open("sim:cores=2", &dev, NULL, 0));
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_arg args[SCENE_MAX_ARGS];
    memcpy(args, c->args, c->nargs * sizeof *args);
    uint32_t cfg = 0;
    while (strcmp(args[cfg].name, "config") != 0)
        cfg++;
    size_t bytes = hg_hostbuf_size(args[cfg].tensor.host);
    hg_devaddr addr;
    ASSERT_OK(hg_devbuf_malloc(dev, bytes, &addr));
    ASSERT_OK(hg_devbuf_copy_to(dev, addr, hg_hostbuf_data(args[cfg].tensor.host), bytes));
    args[cfg].tensor.host = NULL;
    args[cfg].tensor.device = addr;
    ASSERT_EQ(hg_runner_run(r, &c->callable, args, c->nargs, NULL), HG_ENOHOSTVIEW);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "host view of 'config'");
    hg_runner_close(r);
    hg_devbuf_free(dev, addr);
    hg_device_close(dev);
    scene_case_destroy(c);
}

TEST(residency_names_parse_and_print)
{
    static const char *const names[] = {"off", "pin", "in", "all"};
    for (int i = 0; i < 4; i++) {
        scene_residency m;
        ASSERT_OK(scene_residency_parse(names[i], &m));
        ASSERT_EQ(m, i);
        ASSERT_STR_EQ(scene_residency_name(m), names[i]);
    }
    scene_residency m;
    ASSERT_EQ(scene_residency_parse("everything", &m), HG_EINVAL);
    ASSERT_EQ(scene_residency_parse(NULL, &m), HG_EINVAL);
}

int main(void)
{
    return RUN_TESTS();
}
