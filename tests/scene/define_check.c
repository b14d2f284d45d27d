/*
 * define_check.c (the define_test binary): a scene of the user's own, as
 * include/hostgraph_scenes.h promises it: a registered definition runs in
 * every residency mode, with verify and replay, as a built-in does; its
 * golden check fails naming the worst element; bad definitions, duplicate
 * names and builder calls outside make() are refused with what is wrong;
 * unregistering waits for no open case; plugins load (the example
 * examples/scenes/saxpy.c), load once, and are refused naming the file
 * when missing, symbol-less, of another version, or with a bad table.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostgraph.h"
#include "hostgraph_scenes.h"
#include "test_device.h"
#include "testlib.h"

/* ------------------------------------------------------ a scene: y = 2x */

static int twice_kernel(const hg_kernel_ctx *ctx)
{
    const hg_kview *x = &ctx->args[0], *y = &ctx->args[1];
    const float *px = x->data;
    float *py = y->data;
    for (size_t i = 0; i < x->shape[0]; i++)
        py[i * y->strides[0]] = 2.0f * px[i * x->strides[0]];
    return 0;
}

static const hg_kernel twice_k = {"twice", twice_kernel, HG_CORE_VECTOR, NULL, NULL};

/* Tasks of 1000 elements over x (IN) and y (OUT). */
static int twice_orchestrate(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *x, *y;
    int ix = hg_orch_find_arg(o, "x"), iy = hg_orch_find_arg(o, "y");
    if (ix < 0 || iy < 0)
        return HG_ENOTFOUND;
    hg_orch_arg(o, (uint32_t)ix, &x);
    hg_orch_arg(o, (uint32_t)iy, &y);
    size_t n = x->tensor.shape[0];
    for (size_t at = 0; at < n; at += 1000) {
        size_t len = n - at < 1000 ? n - at : 1000;
        hg_task_arg a[2] = {{.arg = (uint32_t)ix, .access = HG_IN},
                            {.arg = (uint32_t)iy, .access = HG_OUT}};
        int rc = hg_tensor_slice(&x->tensor, 0, at, len, &a[0].view);
        if (rc == 0)
            rc = hg_tensor_slice(&y->tensor, 0, at, len, &a[1].view);
        hg_task_desc d = {.kernel = &twice_k, .args = a, .nargs = 2};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const hg_callable twice_callable = {"twice", twice_orchestrate, NULL};

static const hg_scene_param_def twice_params[] = {
    {"n", 10000, 1, 1 << 20, "elements", "elements", NULL},
};

/* user: non-NULL makes the golden wrong at element 5 (a wrong kernel, as
 * the check sees it). */
static int twice_make(hg_scene_case *c, const int64_t *params, void *user)
{
    size_t n = (size_t)params[0];
    uint32_t x, y;
    double *golden;
    int rc;
    if ((rc = hg_scene_case_add_tensor(c, "x", HG_IN, HG_F32, 1, &n, &x)) != 0 ||
        (rc = hg_scene_case_add_tensor(c, "y", HG_OUT, HG_F32, 1, &n, &y)) != 0 ||
        (rc = hg_scene_case_fill(c, x, 7, 100, 0.25)) != 0 ||
        (rc = hg_scene_case_add_check(c, y, 0.0, 1e-6, &golden)) != 0)
        return rc;
    const float *px = hg_scene_case_data(c, x);
    for (size_t i = 0; i < n; i++)
        golden[i] = 2.0 * px[i];
    if (user != NULL && n > 5)
        golden[5] += 3.0;
    return hg_scene_case_set_callable(c, &twice_callable);
}

static hg_scene_def twice_def(const char *name)
{
    hg_scene_def d = HG_SCENE_DEF_INIT;
    d.name = name;
    d.description = "y = 2x";
    d.params = twice_params;
    d.nparams = 1;
    d.make = twice_make;
    return d;
}

/* The h2d_bytes of each round of a JSON report, in order; their number. */
static int report_h2d(const char *path, uint64_t *h2d, int max)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    const char *rounds = strstr(text, "\"rounds\"");
    int n = 0;
    for (const char *p = rounds; p != NULL && n < max; n++) {
        p = strstr(p + 1, "\"h2d_bytes\": ");
        if (p == NULL)
            break;
        h2d[n] = strtoull(p + 13, NULL, 10);
    }
    return n;
}

TEST(registered_scene_runs_every_mode_like_a_builtin)
{
    hg_scene_def d = twice_def("twice");
    char err[512];
    ASSERT_OK(hg_scene_register(&d, err, sizeof err));
    static const char *const modes[] = {"off", "pin", "in", "all"};
    char json[64];
    snprintf(json, sizeof json, "/tmp/hg_define_%d.json", (int)getpid());
    for (int m = 0; m < 4; m++) {
        for (int flags = 0; flags < 2; flags++) {
            hg_scene_opts o = {.scene = "twice",
                               .rounds = 3,
                               .residency = modes[m],
                               .verify = flags == 1,
                               .replay = flags == 1,
                               .json_path = json};
            int rc = hg_scene_run(&o, err, sizeof err);
            if (rc != HG_SCENE_OK)
                TEST_FAIL_("mode %s flags %d: exit %d: %s", modes[m], flags, rc, err);
            uint64_t h2d[3];
            ASSERT_EQ(report_h2d(json, h2d, 3), 3);
            /* off sends x every round; in and all only the first time (y
             * is OUT: it never goes up); pin before the rounds. */
            ASSERT_UEQ(h2d[0], m == 1 ? 0 : 40000);
            ASSERT_UEQ(h2d[1], m == 0 ? 40000 : 0);
        }
    }
    unlink(json);
    ASSERT_OK(hg_scene_unregister("twice", err, sizeof err));
}

TEST(a_wrong_golden_fails_naming_the_worst_element)
{
    hg_scene_def d = twice_def("twice_wrong");
    d.user = &d; /* golden[5] off by 3 */
    char err[1024];
    ASSERT_OK(hg_scene_register(&d, err, sizeof err));
    hg_scene_opts o = {.scene = "twice_wrong", .rounds = 2};
    ASSERT_EQ(hg_scene_run(&o, err, sizeof err), HG_SCENE_GOLDEN);
    ASSERT_STR_CONTAINS(err, "output 'y'");
    ASSERT_STR_CONTAINS(err, "worst at index 5");
    hg_scene_case *c = NULL;
    ASSERT_OK(hg_scene_case_open("twice_wrong", NULL, 0, &c, err, sizeof err));
    ASSERT(!hg_scene_case_check(c, err, sizeof err)); /* y is all zeros: 0 != 2x */
    ASSERT_STR_CONTAINS(err, "worst at index");
    hg_scene_case_close(c);
    ASSERT_OK(hg_scene_unregister("twice_wrong", err, sizeof err));
}

typedef struct bad_case {
    const char *what;
    hg_scene_def def;
    const char *says;
} bad_case;

static const hg_scene_param_def p_dup[] = {{"n", 1, 0, 2, "", NULL, NULL},
                                           {"n", 1, 0, 2, "", NULL, NULL}};
static const hg_scene_param_def p_alias_dup[] = {{"n", 1, 0, 2, "", NULL, NULL},
                                                 {"m", 1, 0, 2, "", "n", NULL}};
static const hg_scene_param_def p_order[] = {{"n", 1, 3, 2, "", NULL, NULL}};
static const hg_scene_param_def p_def[] = {{"n", 9, 0, 2, "", NULL, NULL}};
static const hg_scene_param_def p_name[] = {{"N x", 1, 0, 2, "", NULL, NULL}};
static const hg_scene_value v_nodef[] = {{"a", 0}, {"b", 1}, {NULL, 0}};
static const hg_scene_param_def p_named[] = {{"mode", 2, 0, 2, "", NULL, v_nodef}};
static const hg_scene_value v_dup[] = {{"a", 0}, {"a", 1}, {NULL, 0}};
static const hg_scene_param_def p_named_dup[] = {{"mode", 0, 0, 2, "", NULL, v_dup}};

TEST(bad_definitions_are_refused_naming_what_is_wrong)
{
    hg_scene_def ok = twice_def("fine_scene");
    bad_case cases[] = {
        {"version", ok, "version 7"},
        {"size", ok, "bytes"},
        {"name", ok, "scene name"},
        {"no name", ok, "scene name"},
        {"no make", ok, "make is NULL"},
        {"dup", ok, "taken twice"},
        {"alias", ok, "taken twice"},
        {"min>max", ok, "min 3 > max 2"},
        {"default", ok, "default 9"},
        {"param name", ok, "'N x'"},
        {"named def", ok, "not one of"},
        {"named dup", ok, "collide"},
        {"too many", ok, "at most 16"},
        {"params NULL", ok, "params is NULL"},
        {"builtin", ok, "already registered"},
    };
    cases[0].def.version = 7;
    cases[1].def.size = 8;
    cases[2].def.name = "has space";
    cases[3].def.name = NULL;
    cases[4].def.make = NULL;
    cases[5].def.params = p_dup, cases[5].def.nparams = 2;
    cases[6].def.params = p_alias_dup, cases[6].def.nparams = 2;
    cases[7].def.params = p_order;
    cases[8].def.params = p_def;
    cases[9].def.params = p_name;
    cases[10].def.params = p_named;
    cases[11].def.params = p_named_dup;
    cases[12].def.nparams = 17;
    cases[13].def.params = NULL;
    cases[14].def.name = "bgemm";
    uint32_t before = hg_scene_count();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        int rc = hg_scene_register(&cases[i].def, err, sizeof err);
        if (rc != HG_EINVAL || strstr(err, cases[i].says) == NULL)
            TEST_FAIL_("%s: rc %d, message '%s', want HG_EINVAL and '%s'", cases[i].what, rc, err,
                       cases[i].says);
    }
    char err[512];
    ASSERT_EQ(hg_scene_register(NULL, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "NULL");
    ASSERT_UEQ(hg_scene_count(), before);
    /* A name registered once is refused the second time. */
    ASSERT_OK(hg_scene_register(&ok, err, sizeof err));
    ASSERT_EQ(hg_scene_register(&ok, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "already registered");
    ASSERT_UEQ(hg_scene_count(), before + 1);
    ASSERT_OK(hg_scene_unregister("fine_scene", err, sizeof err));
}

TEST(unregister_refuses_while_a_case_is_open)
{
    hg_scene_def d = twice_def("held");
    char err[512];
    ASSERT_OK(hg_scene_register(&d, err, sizeof err));
    hg_scene_case *c = NULL;
    const char *n = "n=100";
    ASSERT_OK(hg_scene_case_open("held", &n, 1, &c, err, sizeof err));
    ASSERT_EQ(hg_scene_unregister("held", err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, "in use");
    hg_scene_case_close(c);
    ASSERT_OK(hg_scene_unregister("held", err, sizeof err));
    ASSERT_EQ(hg_scene_case_open("held", NULL, 0, &c, err, sizeof err), HG_ENOTFOUND);
    ASSERT(c == NULL);
    ASSERT_EQ(hg_scene_unregister("held", err, sizeof err), HG_ENOTFOUND);
    ASSERT_EQ(hg_scene_unregister("bgemm", err, sizeof err), HG_ENOTFOUND);
    ASSERT_EQ(hg_scene_unregister(NULL, err, sizeof err), HG_EINVAL);
    ASSERT_OK(hg_scene_register(&d, err, sizeof err)); /* the name is free again */
    ASSERT_OK(hg_scene_unregister("held", err, sizeof err));
}

TEST(the_builder_refuses_outside_make)
{
    hg_scene_def d = twice_def("built");
    char err[512];
    ASSERT_OK(hg_scene_register(&d, err, sizeof err));
    hg_scene_case *c = NULL;
    ASSERT_OK(hg_scene_case_open("built", NULL, 0, &c, err, sizeof err));
    size_t n = 4;
    uint32_t arg = 99;
    ASSERT_EQ(hg_scene_case_add_tensor(c, "z", HG_IN, HG_F32, 1, &n, &arg), HG_EINVAL);
    ASSERT_EQ(hg_scene_case_add_scalar(c, "s", 1, &arg), HG_EINVAL);
    double *g = NULL;
    ASSERT_EQ(hg_scene_case_add_check(c, 1, 0, 0, &g), HG_EINVAL);
    ASSERT_EQ(hg_scene_case_set_callable(c, &twice_callable), HG_EINVAL);
    ASSERT_UEQ(arg, 99);
    ASSERT_UEQ(hg_scene_case_num_args(c), 2);
    ASSERT(hg_scene_case_data(c, 2) == NULL);
    ASSERT(hg_scene_case_data(c, 0) != NULL);
    hg_scene_case_close(c);
    ASSERT_OK(hg_scene_unregister("built", err, sizeof err));
}

/* Adds a tensor, then fails: the case is destroyed, the message kept. */
static int failing_make(hg_scene_case *c, const int64_t *params, void *user)
{
    (void)params;
    (void)user;
    size_t n = 64;
    uint32_t x;
    int rc = hg_scene_case_add_tensor(c, "x", HG_IN, HG_F32, 1, &n, &x);
    if (rc == 0)
        rc = hg_scene_case_add_tensor(c, "x", HG_IN, HG_F32, 1, &n, &x);
    if (rc != HG_EINVAL)
        return hg_scene_case_fail(c, HG_EKERNEL, "a second 'x' was accepted");
    return hg_scene_case_fail(c, HG_ERANGE, "n=%zu is too large for this test", n);
}

TEST(a_failing_make_says_why_and_leaves_nothing)
{
    hg_scene_def d = HG_SCENE_DEF_INIT;
    d.name = "fails";
    d.make = failing_make;
    char err[512];
    ASSERT_OK(hg_scene_register(&d, err, sizeof err));
    hg_scene_case *c = NULL;
    ASSERT_EQ(hg_scene_case_open("fails", NULL, 0, &c, err, sizeof err), HG_ERANGE);
    ASSERT(c == NULL);
    ASSERT_STR_CONTAINS(err, "n=64 is too large");
    /* HG_ERANGE from make(): params that do not fit, a usage error. */
    hg_scene_opts o = {.scene = "fails"};
    ASSERT_EQ(hg_scene_run(&o, err, sizeof err), HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(err, "scene 'fails': n=64 is too large");
    ASSERT_OK(hg_scene_unregister("fails", err, sizeof err));
}

static bool listed(const char *name)
{
    for (uint32_t i = 0; i < hg_scene_count(); i++) {
        if (strcmp(hg_scene_name(i), name) == 0)
            return true;
    }
    return false;
}

TEST(plugins_load_once_and_bad_ones_are_refused_naming_the_file)
{
    char err[1024], path[512];
    uint32_t count = 99;
    snprintf(path, sizeof path, "%s/libscene_saxpy.so", HG_SCENE_EXAMPLE_DIR);
    ASSERT_OK(hg_scene_load(path, &count, err, sizeof err));
    ASSERT_UEQ(count, 1);
    ASSERT(listed("saxpy"));
    char json[64], want[600];
    snprintf(json, sizeof json, "/tmp/hg_saxpy_%d.json", (int)getpid());
    hg_scene_opts o = {.scene = "saxpy", .rounds = 3, .residency = "all", .json_path = json};
    int rc = hg_scene_run(&o, err, sizeof err);
    if (rc != HG_SCENE_OK)
        TEST_FAIL_("saxpy: exit %d: %s", rc, err);
    uint64_t h2d[3];
    ASSERT_EQ(report_h2d(json, h2d, 3), 3);
    /* The floor: x (1 MiB) stays on the device; y, restored on the host
     * before every round, goes up again. */
    ASSERT_UEQ(h2d[0], 2u << 20);
    ASSERT_UEQ(h2d[1], 1u << 20);
    ASSERT_UEQ(h2d[2], 1u << 20);
    FILE *f = fopen(json, "r");
    ASSERT(f != NULL);
    static char text[1 << 16];
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    unlink(json);
    snprintf(want, sizeof want, "\"scene_file\": \"%s\"", path);
    ASSERT_STR_CONTAINS(text, want);
    ASSERT_STR_CONTAINS(text, "\"scene_class\": null");
    uint32_t i = 0;
    while (strcmp(hg_scene_name(i), "saxpy") != 0)
        i++;
    ASSERT_STR_EQ(hg_scene_file(i), path);
    ASSERT(hg_scene_file(0) == NULL); /* a built-in scene */
    o.json_path = NULL;
    const char *alpha = "alpha=half";
    o.params = &alpha;
    o.nparams = 1;
    ASSERT_EQ(hg_scene_run(&o, err, sizeof err), HG_SCENE_OK);
    uint32_t n_before = hg_scene_count();
    ASSERT_OK(hg_scene_load(path, &count, err, sizeof err)); /* again: nothing new */
    ASSERT_UEQ(count, 0);
    ASSERT_UEQ(hg_scene_count(), n_before);

    ASSERT_EQ(hg_scene_load("/nonexistent/libscene_x.so", &count, err, sizeof err), HG_EIO);
    ASSERT_STR_CONTAINS(err, "/nonexistent/libscene_x.so");
    snprintf(path, sizeof path, "%s/libplugin_no_symbol.so", HG_PLUGIN_DIR);
    ASSERT_EQ(hg_scene_load(path, &count, err, sizeof err), HG_ENOTFOUND);
    ASSERT_STR_CONTAINS(err, path);
    ASSERT_STR_CONTAINS(err, HG_SCENE_PLUGIN_SYMBOL);
    /* A bare file name is the file in the working directory, as a shell
     * user means it, not a search of the library path. */
    char cwd[512];
    ASSERT(getcwd(cwd, sizeof cwd) != NULL);
    ASSERT_OK(chdir(HG_PLUGIN_DIR));
    rc = hg_scene_load("libplugin_no_symbol.so", &count, err, sizeof err);
    ASSERT_OK(chdir(cwd));
    ASSERT_EQ(rc, HG_ENOTFOUND);
    ASSERT_STR_CONTAINS(err, "libplugin_no_symbol.so");
    snprintf(path, sizeof path, "%s/libplugin_bad_version.so", HG_PLUGIN_DIR);
    ASSERT_EQ(hg_scene_load(path, &count, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, path);
    ASSERT_STR_CONTAINS(err, "version 99");
    ASSERT_STR_CONTAINS(err, "reads version 1");
    ASSERT(!listed("from_the_future"));
    snprintf(path, sizeof path, "%s/libplugin_bad_params.so", HG_PLUGIN_DIR);
    ASSERT_EQ(hg_scene_load(path, &count, err, sizeof err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err, path);
    ASSERT_STR_CONTAINS(err, "upside_down");
    ASSERT_STR_CONTAINS(err, "min 8 > max 2");
    ASSERT(!listed("fine")); /* all or none */
    ASSERT_UEQ(count, 0);
    ASSERT_EQ(hg_scene_load(NULL, &count, err, sizeof err), HG_EINVAL);
}

/* The example plugin on every backend (its OpenCL slot on PoCL): golden
 * passes each round, and the rounds move exactly its floor up. */
TEST(the_plugin_runs_on_each_backend)
{
    char err[1024], path[512], json[64];
    snprintf(path, sizeof path, "%s/libscene_saxpy.so", HG_SCENE_EXAMPLE_DIR);
    ASSERT_OK(hg_scene_load(path, NULL, err, sizeof err)); /* loaded already, or now */
    snprintf(json, sizeof json, "/tmp/hg_saxpy_b_%d.json", (int)getpid());
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        if (!test_backend_available(b))
            continue;
        hg_scene_opts o = {.scene = "saxpy",
                           .rounds = 3,
                           .residency = "all",
                           .device = test_backends[b],
                           .json_path = json};
        int rc = hg_scene_run(&o, err, sizeof err);
        if (rc != HG_SCENE_OK)
            TEST_FAIL_("saxpy on %s: exit %d: %s", test_backends[b], rc, err);
        uint64_t h2d[3];
        ASSERT_EQ(report_h2d(json, h2d, 3), 3);
        ASSERT_UEQ(h2d[0], 2u << 20);
        ASSERT_UEQ(h2d[1], 1u << 20);
        ASSERT_UEQ(h2d[2], 1u << 20);
    }
    unlink(json);
}

/* Threads register and unregister scenes of their own at once. */
typedef struct reg_thread {
    int id;
    char names[16][32];
    hg_scene_def defs[16];
    int failures;
} reg_thread;

static void *register_many(void *arg)
{
    reg_thread *t = arg;
    char err[256];
    for (int i = 0; i < 16; i++) {
        snprintf(t->names[i], sizeof t->names[i], "t%d_scene%d", t->id, i);
        t->defs[i] = twice_def(t->names[i]);
        t->failures += hg_scene_register(&t->defs[i], err, sizeof err) != 0;
    }
    for (int i = 0; i < 16; i += 2)
        t->failures += hg_scene_unregister(t->names[i], err, sizeof err) != 0;
    return NULL;
}

TEST(threads_register_at_once)
{
    uint32_t before = hg_scene_count();
    static reg_thread threads[4];
    pthread_t tid[4];
    for (int i = 0; i < 4; i++) {
        threads[i] = (reg_thread){.id = i};
        ASSERT_OK(pthread_create(&tid[i], NULL, register_many, &threads[i]));
    }
    for (int i = 0; i < 4; i++)
        ASSERT_OK(pthread_join(tid[i], NULL));
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(threads[i].failures, 0);
    ASSERT_UEQ(hg_scene_count(), before + 4 * 8);
    char err[256];
    for (int i = 0; i < 4; i++) {
        for (int k = 1; k < 16; k += 2)
            ASSERT_OK(hg_scene_unregister(threads[i].names[k], err, sizeof err));
    }
    ASSERT_UEQ(hg_scene_count(), before);
}

int main(void)
{
    return RUN_TESTS();
}
