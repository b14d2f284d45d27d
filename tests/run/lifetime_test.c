/*
 * lifetime_test.c: what the runtime keeps of what the user hands it.  A
 * kernel record and its name need live only until hg_task_submit returns; a
 * trace keeps its own copy of every name it writes, one per distinct name.
 *
 * The records and names here live in heap blocks that the test overwrites
 * with another (valid) kernel and another name right after submit (and frees
 * after the run): a runtime that kept the pointer runs the wrong kernel or
 * writes the wrong name, deterministically, without any sanitizer.  One
 * record lives on a helper's stack frame that has returned before execution
 * (ASan's stack-use-after-return catches a runtime that kept it), and one
 * name is freed after the run, before the trace is written.  The runs go
 * once per backend (test_device.h): a record's OpenCL slot (source text and
 * entry point) lives in the same dying block, overwritten with another
 * valid kernel, so on OpenCL too a kept pointer is a wrong answer.  The
 * kernel-call counts and per-task trace spans are the sim's to check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/trace.h"
#include "graph/graph.h"
#include "hostgraph.h"
#include "test_device.h"
#include "test_orch.h"
#include "testlib.h"

enum { N = 256 };

static int right_runs, wrong_runs;

/* out[i] = in[i] + 1; args: in, out. */
static int k_plus_one(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = in[i] + 1.0f;
    __atomic_fetch_add(&right_runs, 1, __ATOMIC_RELAXED);
    return 0;
}

/* What a dead record's bytes say once they are reused. */
static int k_wrong(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    __atomic_fetch_add(&wrong_runs, 1, __ATOMIC_RELAXED);
    return 0;
}

/* The two kernels on OpenCL, of the same length so one overwrites the
 * other in place. */
static const char PLUS_ONE_CL[] =
    "__kernel void plus_one(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out))\n"
    "{ size_t i = get_global_id(0); HG_PTR(out)[i] = HG_PTR(in)[i] + 1.0f; }\n";
static const char WRONG_CL[] =
    "__kernel void wrong_on(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, out))\n"
    "{ size_t i = get_global_id(0); HG_PTR(out)[i] = HG_PTR(in)[i] - 1.0f; }\n";
_Static_assert(sizeof PLUS_ONE_CL == sizeof WRONG_CL, "one overwrites the other");

/* A kernel record, its name and its OpenCL slot in one heap block, as a
 * helper that builds its record on the fly would hold them. */
typedef struct heap_kernel {
    hg_kernel record;
    char name[32];
    char source[sizeof PLUS_ONE_CL];
    char entry[16];
} heap_kernel;

/* Overwritten records, freed after the run (so that reading one is a wrong
 * answer, not a crash, without a sanitizer). */
enum { MAX_DEAD = 1000 };
static heap_kernel *dead[MAX_DEAD];
static uint32_t ndead;

static void free_dead(void)
{
    while (ndead > 0)
        free(dead[--ndead]);
}

/* Builds a record in a heap block, submits a task with it, then overwrites
 * the block with another kernel and name: what the runtime needs must have
 * been copied by the time submit returned. */
static int submit_from_dying_record(hg_orch *o, const char *name, uint32_t tasks)
{
    hg_task_arg ta[2];
    test_pair_args(o, ta);
    for (uint32_t t = 0; t < tasks; t++) {
        heap_kernel *hk = ndead < MAX_DEAD ? malloc(sizeof *hk) : NULL;
        if (hk == NULL)
            return hg_orch_fail(o, HG_ENOMEM, "test: out of memory");
        dead[ndead++] = hk;
        snprintf(hk->name, sizeof hk->name, "%s", name);
        memcpy(hk->source, PLUS_ONE_CL, sizeof PLUS_ONE_CL);
        snprintf(hk->entry, sizeof hk->entry, "plus_one");
        hk->record = (hg_kernel){hk->name, k_plus_one, HG_CORE_VECTOR, hk->source, hk->entry};
        hg_task_desc d = {&hk->record, ta, 2, NULL, 0, NULL, 0};
        int rc = hg_task_submit(o, &d, NULL);
        memcpy(hk->source, WRONG_CL, sizeof WRONG_CL);
        snprintf(hk->entry, sizeof hk->entry, "wrong_on");
        hk->record = (hg_kernel){"garbage", k_wrong, HG_CORE_VECTOR, hk->source, hk->entry};
        memset(hk->name, 'X', sizeof hk->name - 1);
        hk->name[sizeof hk->name - 1] = '\0';
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int orch_dying_record(hg_orch *o, void *user)
{
    return submit_from_dying_record(o, user, 1);
}

static int orch_many_tasks(hg_orch *o, void *user)
{
    return submit_from_dying_record(o, user, MAX_DEAD);
}

/* Submits with a record on this frame, which is gone when it returns. */
static __attribute__((noinline)) int submit_from_stack_record(hg_orch *o)
{
    hg_task_arg ta[2];
    test_pair_args(o, ta);
    char name[32], source[sizeof PLUS_ONE_CL], entry[16];
    snprintf(name, sizeof name, "stack_kernel");
    memcpy(source, PLUS_ONE_CL, sizeof source);
    snprintf(entry, sizeof entry, "plus_one");
    hg_kernel record = {name, k_plus_one, HG_CORE_VECTOR, source, entry};
    hg_task_desc d = {&record, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

/* Reuses the stack where submit_from_stack_record's frame was. */
static __attribute__((noinline)) void scribble_stack(void)
{
    volatile unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = 0xEE;
}

static int orch_stack_record(hg_orch *o, void *user)
{
    (void)user;
    int rc = submit_from_stack_record(o);
    scribble_stack();
    return rc;
}

/* Submits `user`, a kernel record that outlives the run (its name may not). */
static int orch_record(hg_orch *o, void *user)
{
    return test_submit_pair(o, user);
}

typedef struct fixture {
    hg_device *dev;
    hg_runner *runner;
    hg_hostbuf *in, *out;
    hg_arg args[2];
    hg_trace *trace;
} fixture;

static int fixture_open(fixture *f, const char *backend)
{
    memset(f, 0, sizeof *f);
    size_t shape[1] = {N};
    f->dev = test_device_on(backend, "cores=2");
    if (f->dev == NULL || hg_runner_open(f->dev, &f->runner) ||
        hg_hostbuf_create(N * sizeof(float), &f->in) ||
        hg_hostbuf_create(N * sizeof(float), &f->out) || hg_trace_create(&f->trace))
        return -1;
    float *in = hg_hostbuf_data(f->in);
    for (int i = 0; i < N; i++)
        in[i] = (float)i;
    f->args[0] = (hg_arg){"in", HG_IN, {0}, 0, HG_STAGED};
    f->args[1] = (hg_arg){"out", HG_OUT, {0}, 0, HG_STAGED};
    hg_tensor_host(&f->args[0].tensor, f->in, HG_F32, 1, shape);
    hg_tensor_host(&f->args[1].tensor, f->out, HG_F32, 1, shape);
    hg_runner_set_trace(f->runner, f->trace);
    right_runs = wrong_runs = 0;
    return 0;
}

static void fixture_close(fixture *f)
{
    free_dead();
    hg_runner_close(f->runner);
    hg_trace_destroy(f->trace);
    hg_hostbuf_destroy(f->in);
    hg_hostbuf_destroy(f->out);
    hg_device_close(f->dev);
}

/* Whether the run computed out = in + 1. */
static bool out_is_in_plus_one(const fixture *f)
{
    const float *out = hg_hostbuf_data(f->out);
    for (int i = 0; i < N; i++)
        if (out[i] != (float)i + 1.0f)
            return false;
    return true;
}

/* The whole of a small file as a string (NULL if it cannot be read). */
static char *read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return buf;
}

TEST_EACH_BACKEND(kernel_record_may_die_when_submit_returns)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend));
    hg_callable c = {"dying", orch_dying_record, "plus_one"};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    if (test_backend_is_sim(backend)) {
        ASSERT_EQ(wrong_runs, 0);
        ASSERT_EQ(right_runs, 1);
    }
    ASSERT(out_is_in_plus_one(&f));
    fixture_close(&f);
}

TEST_EACH_BACKEND(kernel_record_on_a_returned_stack_frame)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend));
    hg_callable c = {"stack", orch_stack_record, NULL};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    ASSERT_EQ(right_runs, test_backend_is_sim(backend) ? 1 : 0);
    ASSERT(out_is_in_plus_one(&f));
    fixture_close(&f);
}

TEST_EACH_BACKEND(trace_keeps_a_kernel_name_freed_after_the_run)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend));
    char *name = strdup("heap_named_kernel");
    ASSERT(name != NULL);
    hg_kernel record = {name, k_plus_one, HG_CORE_VECTOR, PLUS_ONE_CL, "plus_one"};
    hg_callable c = {"named", orch_record, &record};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    ASSERT(out_is_in_plus_one(&f));
    memset(name, 'Y', strlen(name));
    free(name);
    char path[] = "/tmp/hg_lifetime_trace_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT_OK(hg_trace_write_json(f.trace, path));
    const char *json = read_file(path);
    remove(path);
    ASSERT(json != NULL);
    if (test_backend_is_sim(backend)) /* OpenCL has no per-task spans yet (ARCHITECTURE) */
        ASSERT_STR_CONTAINS(json, "\"name\":\"heap_named_kernel\"");
    ASSERT(strstr(json, "YYYY") == NULL);
    fixture_close(&f);
}

TEST_EACH_BACKEND(one_kernel_name_is_stored_once_however_many_tasks)
{
    fixture f;
    ASSERT_OK(fixture_open(&f, backend));
    hg_callable c = {"many", orch_many_tasks, "one_name"};
    ASSERT_OK(hg_runner_run(f.runner, &c, f.args, 2, NULL));
    free_dead();
    hg_callable c2 = {"many", orch_many_tasks, "another_name"};
    ASSERT_OK(hg_runner_run(f.runner, &c2, f.args, 2, NULL));
    ASSERT(out_is_in_plus_one(&f));
    if (test_backend_is_sim(backend)) { /* OpenCL has no per-task spans yet */
        ASSERT_EQ(wrong_runs, 0);
        ASSERT_EQ(right_runs, 2000);
        ASSERT_UEQ(hg_trace_num_task_spans(f.trace), 2000);
        ASSERT_UEQ(trace_num_names(f.trace), 2); /* 2000 spans, 2 distinct names */
    }
    fixture_close(&f);
}

TEST(graph_interns_each_distinct_name_once)
{
    graph g;
    graph_init(&g);
    char name[16];
    for (uint32_t t = 0; t < 100000; t++) {
        /* a fresh copy of one of three names each time */
        snprintf(name, sizeof name, "k%u", t % 3);
        hg_kernel k = {name, k_wrong, HG_CORE_VECTOR, NULL, NULL};
        hg_task_id id;
        ASSERT_OK(graph_add_task(&g, &k, NULL, 0, NULL, 0, NULL, 0, &id, NULL));
    }
    ASSERT_UEQ(intern_count(&g.names), 3);
    ASSERT_STR_EQ(graph_task_kernel(&g, &g.tasks[99999])->name, "k0");
    ASSERT(graph_task_kernel(&g, &g.tasks[0])->name ==
           graph_task_kernel(&g, &g.tasks[99999])->name); /* one copy */
    graph_reset(&g);
    hg_kernel unnamed = {NULL, k_wrong, HG_CORE_VECTOR, NULL, NULL};
    hg_task_id id;
    ASSERT_OK(graph_add_task(&g, &unnamed, NULL, 0, NULL, 0, NULL, 0, &id, NULL));
    ASSERT_STR_EQ(graph_task_kernel(&g, &g.tasks[0])->name, "(unnamed)");
    ASSERT_UEQ(intern_count(&g.names), 3); /* kept across reset */
    graph_free(&g);
}

TEST(trace_interns_each_distinct_name_once)
{
    hg_trace *t;
    ASSERT_OK(hg_trace_create(&t));
    char name[16];
    for (uint32_t i = 0; i < 100000; i++) {
        snprintf(name, sizeof name, "kernel_%u", i % 5);
        ASSERT_OK(trace_task_span(t, i % 4, name, 1, i, 10, 20));
    }
    ASSERT_UEQ(hg_trace_num_task_spans(t), 100000);
    ASSERT_UEQ(trace_num_names(t), 5);
    hg_trace_destroy(t);
}

/* A pointer passed again with other bytes behind it is another name (the
 * table remembers recent pointers, but never trusts them alone). */
TEST(intern_reads_the_bytes_not_the_pointer)
{
    intern_table t;
    intern_init(&t);
    char buf[16] = "alpha";
    const char *alpha = intern_get(&t, buf);
    ASSERT(alpha != NULL && alpha != buf);
    ASSERT(intern_get(&t, buf) == alpha);
    snprintf(buf, sizeof buf, "beta");
    const char *beta = intern_get(&t, buf);
    ASSERT(beta != NULL);
    ASSERT_STR_EQ(beta, "beta");
    ASSERT_STR_EQ(alpha, "alpha");
    ASSERT_UEQ(intern_count(&t), 2);
    ASSERT(intern_get(&t, "alpha") == alpha);
    ASSERT(intern_get(&t, NULL) == NULL);
    intern_free(&t);
}

int main(void)
{
    return RUN_TESTS();
}
