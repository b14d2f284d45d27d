/*
 * opencl_test.c: what the OpenCL backend adds to a run: kernels per backend
 * (a missing slot refused at submit naming the kernel and the device), the
 * calling convention (tensor views with offsets and strides, scalars, the
 * status word that fails the run naming the task), programs built once per
 * source text (copied at the first build: the text may die after submit),
 * build errors with the compiler's log, and runtime-internal transfers left
 * out of a run's stats.  Skipped with "skipped: no OpenCL platform" where
 * there is none.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/trace.h"
#include "device/device.h"
#include "one_arg.h"
#include "test_device.h"
#include "testlib.h"

#define N 1000

/* x[i] += k over a 1-D int view (host slot for the sim). */
static int inc_host(const hg_kernel_ctx *ctx)
{
    const hg_kview *x = &ctx->args[0];
    int *p = x->data;
    for (size_t i = 0; i < x->shape[0]; i++)
        p[i * x->strides[0]] += (int)ctx->scalars[0];
    return 0;
}

static const char inc_cl[] = "__kernel void inc(HG_STATUS_ARGS, HG_TENSOR(int, x), ulong k)\n"
                             "{\n"
                             "    size_t i = get_global_id(0);\n"
                             "    HG_PTR(x)[i * x_v.strides[0]] += (int)k;\n"
                             "}\n"
                             "__kernel void bad(HG_STATUS_ARGS, HG_TENSOR(int, x), ulong k)\n"
                             "{\n"
                             "    if (get_global_id(0) == 3)\n"
                             "        HG_FAIL(42);\n"
                             "}\n";

typedef struct plan {
    hg_kernel kernel[3]; /* submitted in turn, one task each over a strided half of x */
    uint32_t ntasks;
} plan;

static int orchestrate(hg_orch *o, void *user)
{
    const plan *p = user;
    const hg_arg *x;
    int rc = hg_orch_arg(o, 0, &x);
    for (uint32_t t = 0; t < p->ntasks && rc == 0; t++) {
        /* Every other element from 1: an element offset and a stride. */
        hg_task_arg ta = {.arg = 0, .access = HG_INOUT, .view = x->tensor};
        ta.view.offset = 1;
        ta.view.shape[0] = N / 2;
        ta.view.strides[0] = 2;
        uint64_t k = t + 1;
        hg_task_desc d = {
            .kernel = &p->kernel[t], .args = &ta, .nargs = 1, .scalars = &k, .nscalars = 1};
        rc = hg_task_submit(o, &d, NULL);
    }
    return rc;
}

typedef test_one_arg fixture;

static bool fixture_open(fixture *f, const char *backend)
{
    return test_one_arg_open(f, backend, NULL, N);
}

static void fixture_close(fixture *f)
{
    test_one_arg_close(f);
}

static int run(fixture *f, plan *p, hg_run_stats *s)
{
    hg_callable c = {"opencl_test", orchestrate, p};
    return hg_runner_run(f->r, &c, &f->arg, 1, s);
}

/* Skips (printing why) unless an OpenCL device opens. */
#define NEED_OPENCL()                                                                              \
    do {                                                                                           \
        if (test_backend_skipped("opencl"))                                                        \
            return;                                                                                \
    } while (0)

TEST(opencl_tasks_run_in_order_with_views_and_scalars)
{
    NEED_OPENCL();
    hg_run_stats st[2];
    for (int b = 0; b < 2; b++) { /* sim, then opencl: the same bytes and stats */
        fixture f;
        ASSERT(fixture_open(&f, b == 0 ? "sim" : "opencl"));
        plan p = {.ntasks = 3};
        for (int t = 0; t < 3; t++)
            p.kernel[t] = (hg_kernel){"inc", inc_host, HG_CORE_VECTOR, inc_cl, "inc"};
        for (int round = 0; round < 3; round++)
            ASSERT_OK(run(&f, &p, &st[b]));
        const int *x = hg_hostbuf_data(f.hb);
        for (int i = 0; i < N; i++)
            ASSERT_EQ(x[i], i % 2 ? 3 * 6 : 0); /* (1+2+3) per round on odd elements */
        if (b == 1)
            ASSERT_UEQ(device_debug_program_builds(f.dev), 1);
        fixture_close(&f);
    }
    /* Status words and launch data are not the run's copies. */
    ASSERT_UEQ(st[1].h2d_bytes, st[0].h2d_bytes);
    ASSERT_UEQ(st[1].d2h_bytes, st[0].d2h_bytes);
    ASSERT_UEQ(st[1].h2d_copies, st[0].h2d_copies);
    ASSERT_UEQ(st[1].d2h_copies, st[0].d2h_copies);
    ASSERT_UEQ(st[1].device_allocs, 0);
}

/* The source is copied at the first build and the cache is keyed by its
 * content: a new buffer with the same text builds nothing, and the old one
 * may die as soon as submit returns. */
TEST(opencl_programs_build_once_per_source_text)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    for (int round = 0; round < 3; round++) {
        char *text = strdup(inc_cl);
        plan p = {.ntasks = 1};
        p.kernel[0] = (hg_kernel){"inc", NULL, HG_CORE_VECTOR, text, "inc"};
        ASSERT_OK(run(&f, &p, NULL));
        memset(text, 'x', strlen(text)); /* dead text: nothing may read it again */
        free(text);
        ASSERT_UEQ(device_debug_program_builds(f.dev), 1);
    }
    const int *x = hg_hostbuf_data(f.hb);
    ASSERT_EQ(x[1], 3);
    fixture_close(&f);
}

TEST(opencl_kernel_status_fails_the_run_naming_the_task)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    plan p = {.ntasks = 3};
    p.kernel[0] = (hg_kernel){"inc", NULL, HG_CORE_VECTOR, inc_cl, "inc"};
    p.kernel[1] = (hg_kernel){"bad", NULL, HG_CORE_VECTOR, inc_cl, "bad"};
    p.kernel[2] = p.kernel[0];
    ASSERT_EQ(run(&f, &p, NULL), HG_EKERNEL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "task 1 (kernel 'bad') failed with code 42");
    const int *x = hg_hostbuf_data(f.hb);
    for (int i = 0; i < N; i++)
        ASSERT_EQ(x[i], 0); /* a failed run copies nothing back */
    p.kernel[1] = p.kernel[0];
    ASSERT_OK(run(&f, &p, NULL)); /* the status words were cleared */
    ASSERT_EQ(x[1], 6);
    fixture_close(&f);
}

TEST(a_kernel_without_the_devices_slot_is_refused_at_submit)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    plan p = {.ntasks = 1};
    p.kernel[0] = (hg_kernel){"host_only", inc_host, HG_CORE_VECTOR, NULL, NULL};
    ASSERT_EQ(run(&f, &p, NULL), HG_EUNSUPPORTED);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "kernel 'host_only' has no OpenCL slot");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "opencl:platform=0,device=0");
    fixture_close(&f);
    ASSERT(fixture_open(&f, "sim"));
    p.kernel[0] = (hg_kernel){"cl_only", NULL, HG_CORE_VECTOR, inc_cl, "inc"};
    ASSERT_EQ(run(&f, &p, NULL), HG_EUNSUPPORTED);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "kernel 'cl_only' has no host function");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "sim:cores=4");
    fixture_close(&f);
}

TEST(a_build_error_reports_the_compiler_log)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    plan p = {.ntasks = 1};
    p.kernel[0] = (hg_kernel){"broken", NULL, HG_CORE_VECTOR,
                              "__kernel void inc(HG_STATUS_ARGS) { undeclared_thing = 1; }", "inc"};
    ASSERT_EQ(run(&f, &p, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "does not build");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "undeclared_thing");
    /* Thirty errors: the message has the log's first lines, not all of it. */
    char many[2048] = "__kernel void inc(HG_STATUS_ARGS) {\n";
    for (int i = 0; i < 30; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "  undeclared_%02d = 1;\n", i);
    strcat(many, "}\n");
    p.kernel[0] = (hg_kernel){"many", NULL, HG_CORE_VECTOR, many, "inc"};
    ASSERT_EQ(run(&f, &p, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "undeclared_00");
    ASSERT(strstr(hg_runner_errmsg(f.r), "undeclared_29") == NULL);
    printf("     %s\n", hg_runner_errmsg(f.r));
    ASSERT_UEQ(device_debug_program_builds(f.dev), 0); /* a failed build is not kept */
    p.kernel[0] = (hg_kernel){"no_entry", NULL, HG_CORE_VECTOR, inc_cl, "nonesuch"};
    ASSERT_EQ(run(&f, &p, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "'nonesuch'");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "CL_INVALID_KERNEL_NAME");
    fixture_close(&f);
}

/* Runs p with fd 2 into a file; its bytes (up to len - 1) into out. */
static int run_capturing_stderr(fixture *f, plan *p, char *out, size_t len)
{
    char path[] = "/tmp/hg_opencl_stderr_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    if (fd < 0 || saved < 0)
        return HG_EIO;
    fflush(stderr);
    dup2(fd, 2);
    int rc = run(f, p, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, len - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

/* The compiler's chatter stays out of stderr: a program with warnings,
 * built cold (its text is new to PoCL's cache: it names this process and
 * the time), prints nothing (a clang-based driver that prints "N warnings
 * generated." has none to count: -w); with HG_OPENCL_BUILD_LOG=1 (the
 * command's -v) its warnings are shown, after a line naming the entry. */
TEST(opencl_build_chatter_stays_off_stderr_unless_asked)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    char text[512], err[8192];
    for (int logged = 0; logged < 2; logged++) {
        snprintf(text, sizeof text,
                 "__kernel void warns(HG_STATUS_ARGS, HG_TENSOR(int, x), ulong k)\n"
                 "{ int lossy = 1.5f; /* cold %ld %lld %d */ HG_PTR(x)[get_global_id(0) * "
                 "x_v.strides[0]] += lossy; }\n",
                 (long)getpid(), (long long)time(NULL), logged);
        plan p = {.ntasks = 1};
        p.kernel[0] = (hg_kernel){"warns", NULL, HG_CORE_VECTOR, text, "warns"};
        if (logged)
            setenv("HG_OPENCL_BUILD_LOG", "1", 1);
        ASSERT_OK(run_capturing_stderr(&f, &p, err, sizeof err));
        unsetenv("HG_OPENCL_BUILD_LOG");
        if (!logged) {
            ASSERT_STR_EQ(err, "");
        } else {
            ASSERT_STR_CONTAINS(err,
                                "hostgraph: OpenCL build of the program of kernel entry 'warns'");
            ASSERT_STR_CONTAINS(err, "warning");
        }
    }
    fixture_close(&f);
}

/* A run that builds a program books the build as build_ns, not as
 * orchestration, with a "build program" span in the trace; a run that
 * builds nothing has build_ns 0 (the sim never builds). */
TEST(program_builds_are_booked_apart_from_orchestration)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    hg_trace *trace = NULL;
    ASSERT_OK(hg_trace_create(&trace));
    hg_runner_set_trace(f.r, trace);
    char text[512];
    snprintf(text, sizeof text, "%s/* new to this device %ld */\n", inc_cl, (long)getpid());
    plan p = {.ntasks = 2};
    p.kernel[0] = p.kernel[1] = (hg_kernel){"inc", NULL, HG_CORE_VECTOR, text, "inc"};
    hg_run_stats s[2];
    for (int i = 0; i < 2; i++)
        ASSERT_OK(run(&f, &p, &s[i]));
    ASSERT_UEQ(device_debug_program_builds(f.dev), 1);
    ASSERT(s[0].build_ns > 0);
    ASSERT(s[0].build_ns + s[0].orch_ns <= s[0].wall_ns);
    ASSERT_UEQ(s[1].build_ns, 0);
    hg_runner_set_trace(f.r, NULL);
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    trace_write(trace, mem);
    fclose(mem);
    ASSERT_STR_CONTAINS(json, "\"build program\"");
    free(json);
    hg_trace_destroy(trace);
    fixture_close(&f);
    ASSERT(fixture_open(&f, "sim"));
    p.kernel[0] = p.kernel[1] = (hg_kernel){"inc", inc_host, HG_CORE_VECTOR, text, "inc"};
    ASSERT_OK(run(&f, &p, &s[0]));
    ASSERT_UEQ(s[0].build_ns, 0);
    fixture_close(&f);
}

/* A task whose args do not match its entry point's parameters fails the
 * run naming the task and the kernel, in the API's words. */
TEST(opencl_arg_mismatch_names_the_task)
{
    NEED_OPENCL();
    fixture f;
    ASSERT(fixture_open(&f, "opencl"));
    plan p = {.ntasks = 1};
    p.kernel[0] =
        (hg_kernel){"no_params", NULL, HG_CORE_VECTOR, "__kernel void k(HG_STATUS_ARGS) {}", "k"};
    ASSERT_EQ(run(&f, &p, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "task 0 (kernel 'no_params')");
    ASSERT_STR_CONTAINS(hg_runner_errmsg(f.r), "CL_INVALID_ARG_INDEX");
    p.kernel[0] = (hg_kernel){"inc", NULL, HG_CORE_VECTOR, inc_cl, "inc"};
    ASSERT_OK(run(&f, &p, NULL)); /* the device is still usable */
    fixture_close(&f);
}

/* Two runners in two threads share one OpenCL device: their runs take
 * turns (a cl_kernel's args belong to the object), their copies and
 * allocations interleave, and each gets its own exact result. */
typedef struct sharer {
    hg_device *dev;
    int rc, value;
} sharer;

static void *share_main(void *arg)
{
    sharer *sh = arg;
    fixture f = {.dev = sh->dev};
    size_t shape = N;
    sh->rc = hg_runner_open(sh->dev, &f.r);
    if (sh->rc == 0)
        sh->rc = hg_hostbuf_create(N * sizeof(int), &f.hb);
    f.arg = (hg_arg){.name = "x", .dir = HG_INOUT};
    if (sh->rc == 0)
        sh->rc = hg_tensor_host(&f.arg.tensor, f.hb, HG_I32, 1, &shape);
    plan p = {.ntasks = 2};
    p.kernel[0] = p.kernel[1] = (hg_kernel){"inc", NULL, HG_CORE_VECTOR, inc_cl, "inc"};
    for (int i = 0; i < 20 && sh->rc == 0; i++)
        sh->rc = run(&f, &p, NULL);
    sh->value = sh->rc == 0 ? ((const int *)hg_hostbuf_data(f.hb))[1] : -1;
    hg_runner_close(f.r);
    hg_hostbuf_destroy(f.hb);
    return NULL;
}

TEST(opencl_runners_in_two_threads_share_a_device)
{
    NEED_OPENCL();
    bool skipped;
    hg_device *dev = test_backend_open("opencl", NULL, &skipped);
    ASSERT(dev != NULL);
    sharer sh[2] = {{.dev = dev}, {.dev = dev}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ASSERT_OK(pthread_create(&th[i], NULL, share_main, &sh[i]));
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(sh[i].rc);
        ASSERT_EQ(sh[i].value, 20 * 3); /* (1 + 2) per run */
    }
    ASSERT_UEQ(device_debug_program_builds(dev), 1);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.live_bytes, 0);
    hg_device_close(dev);
}

/* The convention's corners, as hostgraph.h promises them: bf16 arrives as
 * ushort and the preamble's helpers round as hg_f32_to_bf16 does; a task
 * that writes nothing runs as one work item; a task whose first written
 * arg is empty is not launched; an empty view arrives as a NULL buffer. */
static const char corners_cl[] =
    "__kernel void to_bf16(HG_STATUS_ARGS, HG_TENSOR(ushort, h), HG_TENSOR(float, f))\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    HG_PTR(h)[i] = hg_f32_to_bf16(HG_PTR(f)[i]);\n"
    "}\n"
    "__kernel void check(HG_STATUS_ARGS, HG_TENSOR(ushort, h), HG_TENSOR(float, e))\n"
    "{\n"
    "    if (get_global_size(0) != 1) { HG_FAIL(9); return; }\n"
    "    if (e != 0) { HG_FAIL(5); return; }\n"
    "    for (ulong i = 0; i < h_v.shape[0]; i++) {\n"
    "        float back = hg_bf16_to_f32(HG_PTR(h)[i]);\n"
    "        if (hg_f32_to_bf16(back) != HG_PTR(h)[i] && back == back) { HG_FAIL(8); return; }\n"
    "    }\n"
    "}\n"
    "__kernel void never(HG_STATUS_ARGS, HG_TENSOR(float, e))\n"
    "{\n"
    "    HG_FAIL(6);\n"
    "}\n";

#define NC 8

static int corners_orch(hg_orch *o, void *user)
{
    static const hg_kernel to_bf16 = {"to_bf16", NULL, HG_CORE_VECTOR, corners_cl, "to_bf16"};
    static const hg_kernel check = {"check", NULL, HG_CORE_VECTOR, corners_cl, "check"};
    static const hg_kernel never = {"never", NULL, HG_CORE_VECTOR, corners_cl, "never"};
    const hg_arg *f, *h;
    int rc = hg_orch_arg(o, 0, &f);
    if (rc == 0)
        rc = hg_orch_arg(o, 1, &h);
    if (rc != 0)
        return rc;
    hg_task_arg empty = {.arg = 0, .access = HG_OUT, .view = f->tensor};
    empty.view.shape[0] = 0;
    hg_task_arg conv[2] = {{1, HG_OUT, h->tensor}, {0, HG_IN, f->tensor}};
    hg_task_arg chk[2] = {{1, HG_IN, h->tensor}, empty};
    chk[1].access = HG_IN;
    hg_task_desc d[3] = {{.kernel = &to_bf16, .args = conv, .nargs = 2},
                         {.kernel = &check, .args = chk, .nargs = 2},
                         {.kernel = &never, .args = &empty, .nargs = 1}};
    for (int t = 0; t < 3 && rc == 0; t++)
        rc = hg_task_submit(o, &d[t], NULL);
    return rc;
}

TEST(opencl_convention_corners_bf16_single_item_empty_views)
{
    NEED_OPENCL();
    bool skipped;
    hg_device *dev = test_backend_open("opencl", NULL, &skipped);
    hg_runner *r;
    hg_hostbuf *fb, *hb;
    ASSERT(dev != NULL);
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_hostbuf_create(NC * sizeof(float), &fb));
    ASSERT_OK(hg_hostbuf_create(NC * sizeof(uint16_t), &hb));
    /* Ties to even both ways, a NaN, a value that rounds up, infinity. */
    const float in[NC] = {1.0f,      1.00390625f, 1.01171875f, 0.0f / 0.0f,
                          -3.14159f, 1e30f,       1.0f / 0.0f, -0.0f};
    ASSERT_OK(hg_hostbuf_write(fb, 0, in, sizeof in));
    size_t n = NC;
    hg_arg args[2] = {{.name = "f", .dir = HG_INOUT}, {.name = "h", .dir = HG_OUT}};
    ASSERT_OK(hg_tensor_host(&args[0].tensor, fb, HG_F32, 1, &n));
    ASSERT_OK(hg_tensor_host(&args[1].tensor, hb, HG_BF16, 1, &n));
    hg_callable c = {"corners", corners_orch, NULL};
    int rc = hg_runner_run(r, &c, args, 2, NULL);
    if (rc != 0)
        TEST_FAIL_("run: %s", hg_runner_errmsg(r));
    const uint16_t *h = hg_hostbuf_data(hb);
    for (int i = 0; i < NC; i++)
        ASSERT_UEQ(h[i], hg_f32_to_bf16(in[i]));
    hg_runner_close(r);
    hg_hostbuf_destroy(fb);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* Allocations past the max alloc (max_alloc=64K here) are cl_mem pieces:
 * the retained buffer places each staged arg in one piece where it fits
 * (y would straddle the third boundary right after x), a resident copy's
 * views at piece multiples each lie in one, and a task whose view crosses
 * a boundary is refused naming the task and the arg. */
#define NX (40000) /* 160000 bytes: three pieces */
#define NY (10000)

typedef struct pieces_plan {
    struct {
        uint32_t arg;
        size_t offset, len;
    } view[4];
    uint32_t nviews;
} pieces_plan;

static int pieces_orch(hg_orch *o, void *user)
{
    static const hg_kernel inc = {"inc", NULL, HG_CORE_VECTOR, inc_cl, "inc"};
    const pieces_plan *p = user;
    int rc = 0;
    for (uint32_t i = 0; i < p->nviews && rc == 0; i++) {
        const hg_arg *a;
        rc = hg_orch_arg(o, p->view[i].arg, &a);
        hg_task_arg ta = {.arg = p->view[i].arg, .access = HG_INOUT, .view = a->tensor};
        ta.view.offset = p->view[i].offset;
        ta.view.shape[0] = p->view[i].len;
        uint64_t k = i + 1;
        hg_task_desc d = {.kernel = &inc, .args = &ta, .nargs = 1, .scalars = &k, .nscalars = 1};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
    }
    return rc;
}

TEST(opencl_kernels_run_across_allocation_pieces)
{
    NEED_OPENCL();
    bool skipped;
    hg_device *dev = test_backend_open("opencl", "mem=64M,max_alloc=64K", &skipped);
    hg_runner *r;
    hg_hostbuf *hb[2];
    ASSERT(dev != NULL);
    ASSERT_UEQ(device_alloc_piece(dev), 64 * 1024);
    ASSERT_OK(hg_runner_open(dev, &r));
    ASSERT_OK(hg_hostbuf_create(NX * sizeof(int), &hb[0]));
    ASSERT_OK(hg_hostbuf_create(NY * sizeof(int), &hb[1]));
    size_t n[2] = {NX, NY};
    hg_arg args[2] = {{.name = "x", .dir = HG_INOUT}, {.name = "y", .dir = HG_INOUT}};
    for (int i = 0; i < 2; i++)
        ASSERT_OK(hg_tensor_host(&args[i].tensor, hb[i], HG_I32, 1, &n[i]));
    /* x in piece-sized chunks (16384 ints), y whole */
    pieces_plan p = {{{0, 0, 16384}, {0, 16384, 16384}, {0, 32768, NX - 32768}, {1, 0, NY}}, 4};
    hg_callable c = {"pieces", pieces_orch, &p};
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 2; i++)
            args[i].residency = round < 2 ? HG_STAGED : HG_RESIDENT;
        int rc = hg_runner_run(r, &c, args, 2, NULL);
        if (rc != 0)
            TEST_FAIL_("round %d: %s", round, hg_runner_errmsg(r));
    }
    const int *x = hg_hostbuf_data(hb[0]), *y = hg_hostbuf_data(hb[1]);
    for (int i = 0; i < NX; i++)
        ASSERT_EQ(x[i], 4 * (1 + i / 16384));
    for (int i = 0; i < NY; i++)
        ASSERT_EQ(y[i], 4 * 4);
    p = (pieces_plan){{{1, 0, NY}, {0, 16000, 1000}}, 2}; /* bytes 64000..68000 of x */
    for (int res = 0; res < 2; res++) {
        args[0].residency = args[1].residency = res ? HG_RESIDENT : HG_STAGED;
        ASSERT_EQ(hg_runner_run(r, &c, args, 2, NULL), HG_EUNSUPPORTED);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "task 1 (kernel 'inc'): arg 0:");
        ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "cross the boundary between two of its cl_mem");
    }
    ASSERT_EQ(y[0], 16); /* a refused run copies nothing back */
    hg_runner_close(r);
    hg_hostbuf_destroy(hb[0]);
    hg_hostbuf_destroy(hb[1]);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
