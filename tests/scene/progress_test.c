/*
 * progress_test.c: the progress line of a long round.  A round that runs
 * longer than a second shows "round k of N: <stage>" on stderr when stderr
 * is a terminal (a pseudo-terminal here), and nothing when it is a file or
 * the run is quiet.  The round's length comes from a kernel that sleeps, a
 * lower bound, so the test does not depend on the machine's speed.
 */
#define _XOPEN_SOURCE 700 /* posix_openpt and friends */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scene/scene.h"
#include "testlib.h"

static int k_sleep(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    struct timespec t = {1, 400 * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
    return 0;
}
static const hg_kernel K_SLEEP = {"sleep", k_sleep, HG_CORE_VECTOR, NULL, NULL};

static int orch_sleep(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta[1] = {{0, HG_IN, a->tensor}};
    hg_task_desc d = {&K_SLEEP, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

static int make_sleep(scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    hg_err *err = scene_case_err(c);
    (void)params;
    size_t n = 16;
    uint32_t arg;
    int rc = scene_case_add_tensor(c, "x", HG_IN, HG_U8, 1, &n, &arg, err);
    c->callable = (hg_callable){"sleep", orch_sleep, NULL};
    return rc;
}

static int orch_nothing(hg_orch *o, void *user)
{
    (void)o;
    (void)user;
    return 0;
}

static const scene sleepy = {
    .name = "sleepy", .description = "one task that sleeps 1.4 s", .make = make_sleep};

static void sleep_long(void)
{
    struct timespec t = {1, 400 * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* A check that takes 1.4 s, as a real scene's golden comparison can. */
static bool check_slowly(const scene_case *c, scene_check_result *res)
{
    (void)c;
    sleep_long();
    *res = (scene_check_result){.pass = true, .output = "x", .first_bad = SIZE_MAX};
    return true;
}

/* A case that takes 1.4 s to make and 1.4 s to check; its round is quick. */
static int make_slowly(scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    hg_err *err = scene_case_err(c);
    (void)params;
    sleep_long();
    size_t n = 16;
    uint32_t arg;
    int rc = scene_case_add_tensor(c, "x", HG_IN, HG_U8, 1, &n, &arg, err);
    c->callable = (hg_callable){"nothing", orch_nothing, NULL};
    c->check = check_slowly;
    return rc;
}

static const scene slow_case = {
    .name = "slow_case", .description = "slow to make and to check", .make = make_slowly};

static const scene *scene_under_test = &sleepy;

/* Runs sleepy for one round with stderr on `err`; returns the exit code. */
static int run_sleepy(FILE *err, bool quiet)
{
    scene_run_opts o = {.scene = scene_under_test,
                        .rounds = 1,
                        .skip_golden = scene_under_test == &sleepy,
                        .quiet = quiet,
                        .device_spec = "sim:cores=1"};
    o.out = fopen("/dev/null", "w");
    o.err = err;
    int rc = scene_run(&o);
    fclose(o.out);
    fflush(err);
    return rc;
}

/* Runs sleepy with stderr on a pseudo-terminal; what the terminal got goes
 * to seen.  Returns the exit code, or -1 if no terminal could be made. */
static int run_on_terminal(bool quiet, char *seen, size_t len)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
        return -1;
    FILE *tty = fopen(ptsname(master), "w");
    if (tty == NULL || !isatty(fileno(tty)))
        return -1;
    int rc = run_sleepy(tty, quiet);
    fclose(tty);
    size_t got = 0;
    ssize_t n;
    fcntl(master, F_SETFL, O_NONBLOCK);
    while (got < len - 1 && (n = read(master, seen + got, len - 1 - got)) > 0)
        got += (size_t)n;
    seen[got] = '\0';
    close(master);
    return rc;
}

TEST(a_long_round_shows_progress_on_a_terminal)
{
    char seen[4096];
    ASSERT_EQ(run_on_terminal(false, seen, sizeof seen), SCENE_EXIT_OK);
    ASSERT_STR_CONTAINS(seen, "round 1 of 1: execute");
    ASSERT_STR_CONTAINS(seen, "\033[K"); /* the line is erased before the row */
}

TEST(no_progress_when_quiet_or_in_a_file)
{
    char seen[4096];
    ASSERT_EQ(run_on_terminal(true, seen, sizeof seen), SCENE_EXIT_OK);
    ASSERT(strstr(seen, "round 1 of") == NULL);
    FILE *f = tmpfile();
    ASSERT(f != NULL);
    ASSERT_EQ(run_sleepy(f, false), SCENE_EXIT_OK);
    ASSERT_EQ(ftell(f), 0); /* not a terminal: nothing on stderr */
    fclose(f);
}

TEST(making_the_case_and_checking_golden_show_progress)
{
    char seen[4096];
    scene_under_test = &slow_case;
    int rc = run_on_terminal(false, seen, sizeof seen);
    scene_under_test = &sleepy;
    ASSERT_EQ(rc, SCENE_EXIT_OK);
    ASSERT_STR_CONTAINS(seen, "making the case");
    ASSERT_STR_CONTAINS(seen, "round 1 of 1: checking golden");
}

int main(void)
{
    return RUN_TESTS();
}
