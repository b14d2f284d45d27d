/*
 * command_test.c: hg_scene_command, the `hostgraph` command in the caller's
 * process (issue 26), as the Python package calls it for a user's scene:
 * its exit codes (0, 1 from a registered scene whose golden cannot pass, 2,
 * 3), --tp refused with a usage error that says why, two calls in a row
 * with nothing of the first left in the second (where a usage error points,
 * the scene), two threads at once each with its own cancel, a cancel from
 * another thread stopping a run with 130, and plugins: --scene-lib and
 * HG_SCENE_PATH load one (its scenes listed with their file, and run), and a
 * file that cannot be loaded (missing, without hg_scene_plugin) is exit 2
 * naming it.
 *
 * Run with no argument, it runs the tests (ctest).  Run as
 * `command_test --command ARGS...`, it is the command: ARGS go to
 * hg_scene_command and its code is the exit status, so
 * tests/cli/scene_command_test.sh compares its output with the real one's.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hostgraph_scenes.h"
#include "testlib.h"

/* hg_scene_command over a NULL-terminated argument list. */
#define ARGV(...) ((const char *const[]){"hostgraph", __VA_ARGS__, NULL})

static int command(const char *const *argv, hg_scene_cancel *cancel)
{
    int argc = 0;
    while (argv[argc] != NULL)
        argc++;
    return hg_scene_command(argc, argv, cancel);
}

/* What a call printed: its stdout and stderr, each whole. */
typedef struct captured {
    char out[16384], err[16384];
} captured;

static void read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, len - 1, f) : 0;
    buf[n] = '\0';
    if (f != NULL)
        fclose(f);
}

/* A scratch directory for the reports, made once. */
static const char *scratch(void)
{
    static char dir[64];
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "%s", "/tmp/hg_command_test.XXXXXX");
        if (mkdtemp(dir) == NULL)
            abort();
    }
    return dir;
}

static void scratch_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", scratch(), name);
}

/* Runs argv with file descriptors 1 and 2 on files (single-threaded tests
 * only: the descriptors are the process's), then reads them into cap. */
static int command_captured(const char *const *argv, captured *cap)
{
    char out_path[128], err_path[128];
    scratch_path(out_path, sizeof out_path, "out");
    scratch_path(err_path, sizeof err_path, "err");
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved_out < 0 || saved_err < 0 || out < 0 || err < 0)
        abort();
    dup2(out, 1);
    dup2(err, 2);
    int rc = command(argv, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(out);
    close(err);
    close(saved_out);
    close(saved_err);
    read_file(out_path, cap->out, sizeof cap->out);
    read_file(err_path, cap->err, sizeof cap->err);
    return rc;
}

/* A JSON report's text (the tests look for a few fields, as strings). */
static void read_report(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    read_file(path, buf, len);
}

/* How often `needle` occurs in `hay`. */
static uint32_t count_of(const char *hay, const char *needle)
{
    uint32_t n = 0;
    for (const char *at = strstr(hay, needle); at != NULL; at = strstr(at + 1, needle))
        n++;
    return n;
}

/* The report at path is scene's, holds `field`, and has `rounds` rounds,
 * each passing golden. */
static void expect_report(const char *path, const char *scene, uint32_t rounds, const char *field)
{
    static char report[262144];
    char name[128];
    read_report(path, report, sizeof report);
    snprintf(name, sizeof name, "\"scene\": \"%s\"", scene);
    ASSERT_STR_CONTAINS(report, name);
    ASSERT_STR_CONTAINS(report, field);
    ASSERT_UEQ(count_of(report, "{\"round\": "), rounds);
    ASSERT_UEQ(count_of(report, "\"golden\": \"pass\""), rounds);
}

TEST(exit_0_when_golden_passes)
{
    char json[128];
    scratch_path(json, sizeof json, "ok.json");
    ASSERT_EQ(command(ARGV("run", "vector_add", "--param", "n=100", "--rounds", "2", "--quiet",
                           "--json", json),
                      NULL),
              HG_SCENE_OK);
    expect_report(json, "vector_add", 2, "\"residency\": \"off\"");
}

TEST(exit_2_for_usage_errors_with_their_line_and_hint)
{
    captured cap;
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--fast"), &cap), HG_SCENE_USAGE);
    ASSERT_STR_EQ(cap.err, "hostgraph: unknown flag '--fast'\nsee 'hostgraph run --help'\n");
    ASSERT_EQ(command_captured(ARGV("run", "bgem"), &cap), HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "did you mean 'bgemm'");
    ASSERT_EQ(command_captured(ARGV("compare", "vector_add", "--rounds", "1"), &cap),
              HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "see 'hostgraph compare --help'");
    ASSERT_EQ(command_captured(ARGV("frobnicate"), &cap), HG_SCENE_USAGE);
    ASSERT_EQ(command_captured(ARGV(NULL), &cap), HG_SCENE_USAGE);
    ASSERT_STR_EQ(cap.err, "hostgraph: no command given\nsee 'hostgraph --help'\n");
}

TEST(exit_3_for_a_runtime_error)
{
    captured cap;
    ASSERT_EQ(command_captured(
                  ARGV("run", "vector_add", "--param", "n=100", "--device", "sim:mem=10"), &cap),
              HG_SCENE_RUNTIME);
    ASSERT_STR_CONTAINS(cap.err, "mem=10");
}

/* --tp N > 1 needs MPI ranks, one a process: the in-process call refuses it
 * before any round, saying so; --tp 1 is no split and runs. */
TEST(tp_is_refused_with_2_and_why)
{
    captured cap;
    char json[128];
    scratch_path(json, sizeof json, "tp.json");
    unlink(json);
    ASSERT_EQ(command_captured(ARGV("run", "qwen3_decode", "--tp", "2", "--json", json), &cap),
              HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "hostgraph: --tp 2: needs the hostgraph command itself");
    ASSERT_STR_CONTAINS(cap.err, "see 'hostgraph run --help'");
    ASSERT(access(json, F_OK) != 0); /* no round ran */
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--param", "n=100", "--tp", "1"), &cap),
              HG_SCENE_OK);
}

/* Nothing of one call is left in the next: where a usage error points (the
 * command's help_hint was a static), the scene, the flags. */
TEST(two_calls_in_a_row)
{
    captured cap;
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--fast"), &cap), HG_SCENE_USAGE);
    ASSERT_EQ(command_captured(ARGV("frobnicate"), &cap), HG_SCENE_USAGE);
    ASSERT_STR_EQ(cap.err, "hostgraph: unknown command 'frobnicate'\nsee 'hostgraph --help'\n");
    ASSERT_EQ(command_captured(ARGV("list", "bgem"), &cap), HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "see 'hostgraph list --help'");

    char a[128], b[128];
    scratch_path(a, sizeof a, "first.json");
    scratch_path(b, sizeof b, "second.json");
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--param", "n=100", "--rounds", "3",
                                    "--residency", "all", "--json", a),
                               &cap),
              HG_SCENE_OK);
    ASSERT_EQ(command_captured(ARGV("run", "bgemm", "--rounds", "2", "--json", b), &cap),
              HG_SCENE_OK);
    expect_report(a, "vector_add", 3, "\"residency\": \"all\"");
    expect_report(b, "bgemm", 2, "\"residency\": \"off\""); /* not the first call's */
}

/* One call on a thread of its own, with its own cancel. */
typedef struct call {
    const char *const *argv;
    hg_scene_cancel *cancel;
    int rc;
} call;

static void *call_thread(void *arg)
{
    call *c = arg;
    c->rc = command(c->argv, c->cancel);
    return NULL;
}

TEST(two_threads_at_once)
{
    char a[128], b[128];
    scratch_path(a, sizeof a, "thread_a.json");
    scratch_path(b, sizeof b, "thread_b.json");
    call calls[2] = {
        {.argv = ARGV("run", "vector_add", "--param", "n=1000", "--rounds", "40", "--residency",
                      "in", "--quiet", "--json", a)},
        {.argv = ARGV("run", "bgemm", "--rounds", "12", "--replay", "--quiet", "--json", b)}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(hg_scene_cancel_create(&calls[i].cancel));
        ASSERT_OK(pthread_create(&threads[i], NULL, call_thread, &calls[i]));
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        hg_scene_cancel_destroy(calls[i].cancel);
        ASSERT_EQ(calls[i].rc, HG_SCENE_OK);
    }
    expect_report(a, "vector_add", 40, "\"residency\": \"in\"");
    expect_report(b, "bgemm", 12, "\"replay\": true");
}

/* Waits (a minute at most) until the file holds `text`. */
static bool wait_for_text(const char *path, const char *text)
{
    static char buf[16384];
    for (int i = 0; i < 6000; i++) {
        read_file(path, buf, sizeof buf);
        if (strstr(buf, text) != NULL)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    return false;
}

/* The runner's HG_TEST_HOLD_CASE hook keeps the run making its case until a
 * stop request comes: the request is sent once the run is there (the line
 * it prints), never after a guessed delay. */
TEST(cancel_from_another_thread_stops_a_run_with_130)
{
    char json[128], err_path[128], report[65536];
    scratch_path(json, sizeof json, "cancel.json");
    scratch_path(err_path, sizeof err_path, "cancel.err");
    call c = {.argv =
                  ARGV("run", "vector_add", "--param", "n=100", "--rounds", "5", "--json", json)};
    ASSERT_OK(hg_scene_cancel_create(&c.cancel));
    fflush(stderr);
    int saved_err = dup(2);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(saved_err >= 0 && err >= 0);
    dup2(err, 2);
    setenv("HG_TEST_HOLD_CASE", "1", 1);
    pthread_t thread;
    int started = pthread_create(&thread, NULL, call_thread, &c);
    bool held = started == 0 && wait_for_text(err_path, "HG_TEST_HOLD_CASE: making the case");
    hg_scene_cancel_request(c.cancel);
    if (started == 0)
        pthread_join(thread, NULL);
    unsetenv("HG_TEST_HOLD_CASE");
    fflush(stderr);
    dup2(saved_err, 2);
    close(err);
    close(saved_err);
    hg_scene_cancel_destroy(c.cancel);
    ASSERT_OK(started);
    ASSERT(held);
    ASSERT_EQ(c.rc, HG_SCENE_INTERRUPTED);
    read_report(json, report, sizeof report);
    ASSERT_STR_CONTAINS(report, "\"interrupted\": true");
}

/* ------------------------------------------------ plugins and registration */

/* A scene whose golden cannot pass: its orchestration submits nothing, so
 * its output stays 0 where the golden says 1 (exit 1 has no honest trigger
 * among the built-in scenes). */
static int submit_nothing(hg_orch *o, void *user)
{
    (void)o;
    (void)user;
    return 0;
}

static const hg_callable nothing = {.name = "submit_nothing", .orchestrate = submit_nothing};

static int wrong_make(hg_scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    size_t shape[1] = {(size_t)params[0]};
    uint32_t y = 0;
    double *golden = NULL;
    int rc = hg_scene_case_add_tensor(c, "y", HG_OUT, HG_F32, 1, shape, &y);
    if (rc == 0)
        rc = hg_scene_case_add_check(c, y, 0.0, 0.0, &golden);
    for (size_t i = 0; rc == 0 && i < shape[0]; i++)
        golden[i] = 1.0;
    return rc != 0 ? rc : hg_scene_case_set_callable(c, &nothing);
}

static const hg_scene_param_def wrong_params[] = {
    {.name = "n", .def = 16, .min = 1, .max = 1024, .help = "elements"}};

TEST(exit_1_when_golden_fails)
{
    hg_scene_def def = HG_SCENE_DEF_INIT;
    def.name = "command_test_wrong";
    def.description = "an output its orchestration never writes";
    def.params = wrong_params;
    def.nparams = 1;
    def.make = wrong_make;
    char msg[256] = "";
    int reg = hg_scene_register(&def, msg, sizeof msg);
    if (reg != 0)
        TEST_FAIL_("hg_scene_register: %s", msg);
    captured cap;
    int rc = command_captured(ARGV("run", "command_test_wrong", "--rounds", "2"), &cap);
    hg_scene_unregister("command_test_wrong", NULL, 0);
    ASSERT_EQ(rc, HG_SCENE_GOLDEN);
    ASSERT_STR_CONTAINS(cap.err, "'y'");
}

/* A plugin that cannot be loaded is a usage error naming its file, from
 * --scene-lib and from HG_SCENE_PATH alike, for run, compare and list. */
TEST(scene_lib_missing_file_is_2_naming_it)
{
    captured cap;
    const char *missing = "/nonexistent/libscene_missing.so";
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--scene-lib", missing), &cap),
              HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, missing);
    ASSERT_STR_CONTAINS(cap.err, "see 'hostgraph run --help'");
    ASSERT_EQ(command_captured(ARGV("list", "--scene-lib", missing), &cap), HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, missing);
    ASSERT_EQ(
        command_captured(ARGV("compare", "vector_add", "--scene-lib=/nonexistent/x.so"), &cap),
        HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "/nonexistent/x.so");
}

TEST(scene_lib_without_the_symbol_is_2_naming_it)
{
    captured cap;
    const char *lib = HG_PLUGIN_DIR "/libplugin_no_symbol.so";
    ASSERT_EQ(command_captured(ARGV("run", "vector_add", "--scene-lib", lib), &cap),
              HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, lib);
    ASSERT_STR_CONTAINS(cap.err, "hg_scene_plugin");
}

TEST(scene_path_is_loaded_and_its_errors_name_the_file)
{
    captured cap;
    const char *lib = HG_PLUGIN_DIR "/libplugin_no_symbol.so";
    setenv("HG_SCENE_PATH", lib, 1);
    int rc = command_captured(ARGV("list"), &cap);
    unsetenv("HG_SCENE_PATH");
    ASSERT_EQ(rc, HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(cap.err, "HG_SCENE_PATH");
    ASSERT_STR_CONTAINS(cap.err, lib);
}

/* A plugin's scenes are listed beside the built-in ones with their file,
 * and run; HG_SCENE_PATH's empty entries are skipped. */
TEST(scene_lib_and_scene_path_load_a_plugin)
{
    captured cap;
    const char *lib = HG_SCENE_EXAMPLE_DIR "/libscene_saxpy.so";
    ASSERT_EQ(command_captured(ARGV("list", "--scene-lib", lib), &cap), HG_SCENE_OK);
    ASSERT_STR_CONTAINS(cap.out, "\nsaxpy ");
    ASSERT_STR_CONTAINS(cap.out, "from " HG_SCENE_EXAMPLE_DIR "/libscene_saxpy.so\n");
    ASSERT(strncmp(cap.out, "vector_add ", 11) == 0); /* the built-in ones first */
    ASSERT_EQ(command_captured(ARGV("run", "saxpy", "--scene-lib", lib, "--rounds", "2", "--param",
                                    "n=1000", "--param", "tile=100"),
                               &cap),
              HG_SCENE_OK);
    setenv("HG_SCENE_PATH", ":" HG_SCENE_EXAMPLE_DIR "/libscene_saxpy.so:", 1);
    int rc = command_captured(ARGV("run", "saxpy", "--param", "n=1000", "--quiet"), &cap);
    unsetenv("HG_SCENE_PATH");
    ASSERT_EQ(rc, HG_SCENE_OK);
}

/* Removes the scratch directory and the files the tests wrote there. */
static void scratch_remove(void)
{
    DIR *d = opendir(scratch());
    struct dirent *e;
    char path[512];
    while (d != NULL && (e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "%s/%s", scratch(), e->d_name);
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(scratch());
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--command") == 0) {
        static char name[] = "hostgraph";
        argv[1] = name;
        return hg_scene_command(argc - 1, (const char *const *)argv + 1, NULL);
    }
    int rc = RUN_TESTS();
    scratch_remove();
    return rc;
}
