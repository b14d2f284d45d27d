/*
 * staging_test.c: what a run's staging promises, through the public API:
 * copy-back is all or nothing (a fault at any D2H copy changes no host byte
 * and no generation), strided views come back in as few copies as the cost
 * model says without touching their gaps, OUT bytes no task wrote never carry
 * another arg's data, zero-byte device views are args like any other, every
 * slice reaches a kernel HG_DEVICE_ALIGN-aligned, a growing arg makes
 * O(log n) allocations, and the first orchestration failure keeps its
 * message.  Every test runs once per backend (test_device.h); each kernel
 * has a host slot and an OpenCL slot computing the same bytes.
 */
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

/* ---------------------------------------------------------------- kernels */

/* Every arg after the first is written: element i of a view (any dims, f32)
 * becomes in[0] + 100 * arg + i, where in is args[0] (a dense f32 vector);
 * INOUT args add instead.  Scalars[k] != 0 marks arg k+1 as INOUT. */
static void write_view(const hg_kview *v, float base, int add)
{
    float *p = v->data;
    size_t n0 = v->ndims > 1 ? v->shape[0] : 1, n1 = v->ndims > 1 ? v->shape[1] : v->shape[0];
    size_t s0 = v->ndims > 1 ? v->strides[0] : 0, s1 = v->ndims > 1 ? v->strides[1] : v->strides[0];
    for (size_t r = 0; r < n0; r++)
        for (size_t c = 0; c < n1; c++) {
            float *e = &p[r * s0 + c * s1];
            float val = base + (float)(r * n1 + c);
            *e = add ? *e + val : val;
        }
}

static int k_write_all(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    for (uint32_t a = 1; a < ctx->nargs; a++)
        write_view(&ctx->args[a], in[0] + 100.0f * (float)a, (int)ctx->scalars[a - 1]);
    return 0;
}

/* The same on OpenCL: work item i writes element i (row-major) of every
 * written view that has one (the first written arg is the largest here). */
static const char WRITE_ALL_CL[] =
    "void write_view(__global float *p, hg_view v, size_t i, float base, ulong add)\n"
    "{\n"
    "    ulong n0 = v.ndims > 1 ? v.shape[0] : 1, n1 = v.ndims > 1 ? v.shape[1] : v.shape[0];\n"
    "    ulong s0 = v.ndims > 1 ? v.strides[0] : 0;\n"
    "    ulong s1 = v.ndims > 1 ? v.strides[1] : v.strides[0];\n"
    "    if (i >= n0 * n1)\n"
    "        return;\n"
    "    __global float *e = p + (i / n1) * s0 + (i % n1) * s1;\n"
    "    float val = base + (float)i;\n"
    "    *e = add ? *e + val : val;\n"
    "}\n"
    "#define W(k) write_view(HG_PTR(a##k), a##k##_v, i, HG_PTR(in)[0] + 100.0f * k, s##k)\n"
    "__kernel void write_all2(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, a1),\n"
    "                         ulong s1)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    W(1);\n"
    "}\n"
    "__kernel void write_all6(HG_STATUS_ARGS, HG_TENSOR(float, in), HG_TENSOR(float, a1),\n"
    "                         HG_TENSOR(float, a2), HG_TENSOR(float, a3), HG_TENSOR(float, a4),\n"
    "                         HG_TENSOR(float, a5), ulong s1, ulong s2, ulong s3, ulong s4,\n"
    "                         ulong s5)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    W(1); W(2); W(3); W(4); W(5);\n"
    "}\n";

/* An OpenCL kernel has a fixed arity: one record per arg count used. */
static const hg_kernel K_WRITE_ALL2 = {"write_all", k_write_all, HG_CORE_VECTOR, WRITE_ALL_CL,
                                       "write_all2"};
static const hg_kernel K_WRITE_ALL6 = {"write_all", k_write_all, HG_CORE_VECTOR, WRITE_ALL_CL,
                                       "write_all6"};

/* Submits one task over every arg: arg 0 read, the others as declared. */
static int orch_all(hg_orch *o, void *user)
{
    (void)user;
    uint32_t n = hg_orch_num_args(o);
    hg_task_arg ta[HG_MAX_TASK_ARGS];
    uint64_t inout[HG_MAX_TASK_SCALARS] = {0};
    for (uint32_t i = 0; i < n; i++) {
        const hg_arg *a;
        hg_orch_arg(o, i, &a);
        ta[i] = (hg_task_arg){i, i == 0 ? HG_IN : a->dir, a->tensor};
        if (i > 0)
            inout[i - 1] = a->dir == HG_INOUT;
    }
    if (n != 2 && n != 6)
        return hg_orch_fail(o, HG_EINVAL, "orch_all takes 2 or 6 args, not %u", n);
    hg_task_desc d = {n == 2 ? &K_WRITE_ALL2 : &K_WRITE_ALL6, ta, n, inout, n - 1, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

static const hg_callable ALL = {"all", orch_all, NULL};

/* ------------------------------------------------------------- fixtures */

enum { ROWS = 8, COLS = 64 };

/* in (dense), out_dense (OUT), io_dense (INOUT), out_cols (OUT, every other
 * column), io_cols (INOUT, every other column), out_rows (OUT, every other
 * row: long runs). */
typedef struct six {
    hg_hostbuf *buf[6];
    hg_arg args[6];
} six;

static int six_make(six *s)
{
    static const char *const names[6] = {"in",       "out_dense", "io_dense",
                                         "out_cols", "io_cols",   "out_rows"};
    static const hg_dir dirs[6] = {HG_IN, HG_OUT, HG_INOUT, HG_OUT, HG_INOUT, HG_OUT};
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 6; i++) {
        size_t shape[2] = {ROWS, COLS};
        if (hg_hostbuf_create(ROWS * COLS * sizeof(float), &s->buf[i]) != 0)
            return -1;
        float *p = hg_hostbuf_data(s->buf[i]);
        for (int k = 0; k < ROWS * COLS; k++)
            p[k] = (float)(1000 * i + k % 7);
        s->args[i] = (hg_arg){names[i], dirs[i], {0}, 0, HG_STAGED};
        if (hg_tensor_host(&s->args[i].tensor, s->buf[i], HG_F32, 2, shape) != 0)
            return -1;
    }
    s->args[0].tensor.ndims = 1;
    s->args[0].tensor.shape[0] = ROWS * COLS;
    s->args[0].tensor.strides[0] = 1;
    for (int i = 3; i <= 4; i++) { /* every other column */
        s->args[i].tensor.shape[1] = COLS / 2;
        s->args[i].tensor.strides[1] = 2;
    }
    s->args[5].tensor.shape[0] = ROWS / 2; /* every other row */
    s->args[5].tensor.strides[0] = 2 * COLS;
    return 0;
}

static void six_free(six *s)
{
    for (int i = 0; i < 6; i++)
        hg_hostbuf_destroy(s->buf[i]);
}

typedef struct host_image {
    unsigned char bytes[6][ROWS * COLS * sizeof(float)];
    uint64_t gen[6];
} host_image;

static void image_take(const six *s, host_image *im)
{
    for (int i = 0; i < 6; i++) {
        memcpy(im->bytes[i], hg_hostbuf_data(s->buf[i]), sizeof im->bytes[i]);
        im->gen[i] = hg_hostbuf_generation(s->buf[i]);
    }
}

static int image_equal(const host_image *a, const host_image *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* ------------------------------------------------------------------ tests */

/* A fault at every D2H copy of a run with dense, strided, OUT and INOUT args
 * in turn: the run fails, and not one host byte or generation changed.  The
 * run after it is correct. */
TEST_EACH_BACKEND(failed_copy_back_changes_no_host_byte_and_no_generation)
{
    hg_device *dev = test_device_on(backend, "cores=2");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    six s;
    ASSERT_OK(six_make(&s));
    host_image *before = malloc(sizeof *before), *good = malloc(sizeof *good),
               *after = malloc(sizeof *after);
    ASSERT(before && good && after);

    /* The good result, and how many D2H copies a run makes. */
    six ref;
    ASSERT_OK(six_make(&ref));
    hg_run_stats st;
    ASSERT_OK(hg_runner_run(r, &ALL, ref.args, 6, &st));
    image_take(&ref, good);
    const uint64_t copies = st.d2h_copies;
    ASSERT_UGE(copies, 5);

    image_take(&s, before);
    for (uint64_t k = 1; k <= copies; k++) {
        hg_device_counters c;
        hg_device_counters_get(dev, &c);
        /* Arm the k-th copy after this run's uploads (H2D count is fixed). */
        ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, st.h2d_copies + k));
        ASSERT_EQ(hg_runner_run(r, &ALL, s.args, 6, NULL), HG_ECOPY);
        ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "copy back");
        image_take(&s, after);
        if (!image_equal(before, after))
            TEST_FAIL_("fault at D2H copy %llu of %llu changed the host", (unsigned long long)k,
                       (unsigned long long)copies);
    }
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_COPY, 0));
    ASSERT_OK(hg_runner_run(r, &ALL, s.args, 6, NULL));
    image_take(&s, after);
    for (int i = 0; i < 6; i++)
        ASSERT(memcmp(after->bytes[i], good->bytes[i], sizeof good->bytes[i]) == 0);
    ASSERT_UEQ(after->gen[0], before->gen[0]); /* IN is never written back */
    for (int i = 1; i < 6; i++)
        ASSERT_UGT(after->gen[i], before->gen[i]);
    free(before);
    free(good);
    free(after);
    six_free(&s);
    six_free(&ref);
    hg_runner_close(r);
    hg_device_close(dev);
}

/* Every strided view's gaps stay as the host had them, and each strided arg
 * comes back in the fewest copies: narrow columns as one copy of the extent,
 * long rows one copy each. */
TEST_EACH_BACKEND(strided_copy_back_keeps_gaps_and_picks_fewer_copies)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    six s;
    ASSERT_OK(six_make(&s));
    hg_run_stats st;
    ASSERT_OK(hg_runner_run(r, &ALL, s.args, 6, &st));
    const float in0 = 0.0f; /* in[0] = 1000 * 0 + 0 */
    for (int i = 3; i <= 5; i++) {
        const float *p = hg_hostbuf_data(s.buf[i]);
        for (int row = 0; row < ROWS; row++)
            for (int col = 0; col < COLS; col++) {
                int k = row * COLS + col;
                int covered = i == 5 ? row % 2 == 0 : col % 2 == 0;
                float orig = (float)(1000 * i + k % 7);
                float idx =
                    i == 5 ? (float)((row / 2) * COLS + col) : (float)(row * (COLS / 2) + col / 2);
                float want = !covered ? orig
                             : i == 4 ? orig + in0 + 100.0f * (float)i + idx
                                      : in0 + 100.0f * (float)i + idx;
                if (p[k] != want)
                    TEST_FAIL_("arg %d element %d: %g, want %g", i, k, p[k], want);
            }
    }
    /* out_dense 1 + io_dense 1 + out_cols 1 + io_cols 1 + out_rows: 4 rows of
     * 256 bytes with gaps cost 4 copies (4 KiB + 4 x 64 KiB) versus the
     * extent's 1792 bytes + 64 KiB: one copy */
    ASSERT_UEQ(st.d2h_copies, 5);
    hg_runner_close(r);
    six_free(&s);
    hg_device_close(dev);
}

/* 1M elements at stride 2 (INOUT): one copy of the extent, not 524,288. */
TEST_EACH_BACKEND(strided_inout_of_a_million_elements_is_one_copy)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *in, *io;
    ASSERT_OK(hg_hostbuf_create(4, &in));
    ASSERT_OK(hg_hostbuf_create((2u << 20) * sizeof(float), &io));
    size_t one = 1, n = 1u << 20;
    hg_arg args[2] = {{"in", HG_IN, {0}, 0, HG_STAGED}, {"io", HG_INOUT, {0}, 0, HG_STAGED}};
    ASSERT_OK(hg_tensor_host(&args[0].tensor, in, HG_F32, 1, &one));
    ASSERT_OK(hg_tensor_host(&args[1].tensor, io, HG_F32, 1, &n));
    args[1].tensor.strides[0] = 2;
    hg_run_stats st;
    ASSERT_OK(hg_runner_run(r, &ALL, args, 2, &st));
    ASSERT_UEQ(st.d2h_copies, 1);
    const float *p = hg_hostbuf_data(io);
    ASSERT(p[0] == 100.0f && p[1] == 0.0f && p[2] == 101.0f &&
           p[2 * n - 2] == 100.0f + (float)(n - 1));
    hg_runner_close(r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(io);
    hg_device_close(dev);
}

/* Writes nothing: an OUT arg nobody writes. */
static int k_nothing(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}
static const hg_kernel K_NOTHING = {"nothing", k_nothing, HG_CORE_VECTOR,
                                    "__kernel void nothing(HG_STATUS_ARGS, HG_TENSOR(uchar, x)) {}",
                                    "nothing"};

static int orch_read_only(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta[1] = {{0, a->dir == HG_OUT ? HG_OUT : HG_IN, a->tensor}};
    hg_task_desc d = {&K_NOTHING, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

/* Run 1 stages a secret IN; run 2's OUT takes the same retained slice and no
 * task writes it.  None of the secret reaches the OUT's host buffer: the
 * unwritten bytes come back as the poison pattern. */
TEST_EACH_BACKEND(unwritten_out_bytes_never_carry_another_args_data)
{
    enum { BYTES = 4096 };
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *secret, *out;
    ASSERT_OK(hg_hostbuf_create(BYTES, &secret));
    ASSERT_OK(hg_hostbuf_create(BYTES, &out));
    memset(hg_hostbuf_data(secret), 0x11, BYTES);
    ASSERT_OK(hg_hostbuf_mark_written(secret, 0, BYTES));
    size_t n = BYTES;
    hg_arg a = {"secret", HG_IN, {0}, 0, HG_STAGED}, b = {"out", HG_OUT, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_host(&a.tensor, secret, HG_U8, 1, &n));
    ASSERT_OK(hg_tensor_host(&b.tensor, out, HG_U8, 1, &n));
    hg_callable c = {"read_only", orch_read_only, NULL};
    ASSERT_OK(hg_runner_run(r, &c, &a, 1, NULL));
    hg_run_stats st;
    ASSERT_OK(hg_runner_run(r, &c, &b, 1, &st));
    ASSERT_UEQ(st.h2d_bytes, 0); /* poisoning is on the device, not a copy */
    const unsigned char *p = hg_hostbuf_data(out);
    for (size_t i = 0; i < BYTES; i++)
        if (p[i] == 0x11)
            TEST_FAIL_("byte %zu of 'out' holds the secret", i);
    hg_runner_close(r);
    hg_hostbuf_destroy(secret);
    hg_hostbuf_destroy(out);
    hg_device_close(dev);
}

/* A zero-byte device view made by hg_tensor_device (address 0) is an arg:
 * null pointer for the kernel (on OpenCL a NULL buffer, which the kernel
 * checks: it runs for an IN, and nothing launches for a written arg), no
 * allocation. */
static int saw_null = -1;
static int k_null(const hg_kernel_ctx *ctx)
{
    saw_null = ctx->args[0].data == NULL;
    return 0;
}
static const hg_kernel K_NULL = {
    "null", k_null, HG_CORE_VECTOR,
    "__kernel void null(HG_STATUS_ARGS, HG_TENSOR(float, x)) { if (x != 0) HG_FAIL(7); }", "null"};

static int orch_one(hg_orch *o, void *user)
{
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta[1] = {{0, a->dir, a->tensor}};
    hg_task_desc d = {user, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(zero_byte_device_view_is_an_arg_with_no_address)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    size_t shape[2] = {0, 16};
    for (int dir = HG_IN; dir <= HG_INOUT; dir++) {
        hg_arg a = {"empty", (hg_dir)dir, {0}, 0, HG_STAGED};
        ASSERT_OK(hg_tensor_device(&a.tensor, 0, HG_F32, 2, shape));
        hg_callable c = {"one", orch_one, (void *)&K_NULL};
        hg_run_stats st;
        saw_null = -1;
        ASSERT_OK(hg_runner_run(r, &c, &a, 1, &st));
        if (test_backend_is_sim(backend))
            ASSERT_EQ(saw_null, 1);
        ASSERT_UEQ(st.device_allocs + st.h2d_copies + st.d2h_copies, 0);
    }
    /* A non-empty view (made by hand: hg_tensor_device refuses it) still
     * needs a buffer. */
    hg_arg bad = {"nowhere", HG_IN, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_device(&bad.tensor, 0, HG_F32, 2, shape));
    bad.tensor.shape[0] = 4;
    hg_callable c = {"one", orch_one, (void *)&K_NULL};
    ASSERT_EQ(hg_runner_run(r, &c, &bad, 1, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "arg 'nowhere'");
    hg_runner_close(r);
    hg_device_close(dev);
}

/* Every slice of the retained buffer reaches the kernel aligned: on the
 * sim its pointer, on OpenCL its offset in its buffer (scalar 0 is
 * HG_DEVICE_ALIGN; the kernel fails the run when one is not a multiple). */
static uintptr_t seen_ptr[8];
static int k_pointers(const hg_kernel_ctx *ctx)
{
    for (uint32_t i = 0; i < ctx->nargs && i < 8; i++)
        seen_ptr[i] = (uintptr_t)ctx->args[i].data;
    return 0;
}
static const char POINTERS_CL[] =
    "#define ALIGNED(x) (x != 0 && x##_v.offset % align == 0)\n"
    "__kernel void pointers(HG_STATUS_ARGS, HG_TENSOR(uchar, a), HG_TENSOR(uchar, b),\n"
    "                       HG_TENSOR(uchar, c), HG_TENSOR(uchar, d), HG_TENSOR(uchar, e),\n"
    "                       ulong align)\n"
    "{\n"
    "    if (!(ALIGNED(a) && ALIGNED(b) && ALIGNED(c) && ALIGNED(d) && ALIGNED(e)))\n"
    "        HG_FAIL(1);\n"
    "}\n";
static const hg_kernel K_POINTERS = {"pointers", k_pointers, HG_CORE_VECTOR, POINTERS_CL,
                                     "pointers"};

static int orch_pointers(hg_orch *o, void *user)
{
    (void)user;
    hg_task_arg ta[8];
    uint32_t n = hg_orch_num_args(o);
    for (uint32_t i = 0; i < n; i++) {
        const hg_arg *a;
        hg_orch_arg(o, i, &a);
        ta[i] = (hg_task_arg){i, a->dir, a->tensor};
    }
    uint64_t align = HG_DEVICE_ALIGN;
    hg_task_desc d = {&K_POINTERS, ta, n, &align, 1, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

TEST_EACH_BACKEND(every_slice_reaches_the_kernel_device_aligned)
{
    static const size_t sizes[5] = {1, 17, 1000, 1025, 4099};
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *hb[5];
    hg_arg args[5];
    static const char *const names[5] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(hg_hostbuf_create(sizes[i], &hb[i]));
        args[i] = (hg_arg){names[i], i % 2 ? HG_OUT : HG_IN, {0}, 0, HG_STAGED};
        ASSERT_OK(hg_tensor_host(&args[i].tensor, hb[i], HG_U8, 1, &sizes[i]));
    }
    hg_callable c = {"pointers", orch_pointers, NULL};
    memset(seen_ptr, 0, sizeof seen_ptr);
    ASSERT_OK(hg_runner_run(r, &c, args, 5, NULL));
    for (int i = 0; i < 5 && test_backend_is_sim(backend); i++) {
        ASSERT(seen_ptr[i] != 0);
        ASSERT_UEQ(seen_ptr[i] % HG_DEVICE_ALIGN, 0);
    }
    hg_runner_close(r);
    for (int i = 0; i < 5; i++)
        hg_hostbuf_destroy(hb[i]);
    hg_device_close(dev);
}

/* An arg that grows by 4 KiB a run, as a KV cache does during decode: the
 * runs together make O(log n) device allocations, not one a run. */
TEST_EACH_BACKEND(growing_arg_makes_logarithmically_many_allocations)
{
    enum { RUNS = 400, STEP = 4096 };
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create((size_t)RUNS * STEP, &hb));
    hg_callable c = {"read_only", orch_read_only, NULL};
    uint64_t allocs = 0;
    for (size_t run = 1; run <= RUNS; run++) {
        size_t n = run * STEP;
        hg_arg a = {"kv", HG_IN, {0}, 0, HG_STAGED};
        ASSERT_OK(hg_tensor_host(&a.tensor, hb, HG_U8, 1, &n));
        hg_run_stats st;
        ASSERT_OK(hg_runner_run(r, &c, &a, 1, &st));
        allocs += st.device_allocs;
    }
    printf("     %d runs, %llu allocations\n", RUNS, (unsigned long long)allocs);
    ASSERT_ULE(allocs, 12); /* log2(400) + 3 */
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* The first failure's code and message stay together, even when later
 * calls of the orchestration fail with other messages. */
static int orch_fail_then_bad_submit(hg_orch *o, void *user)
{
    (void)user;
    hg_orch_fail(o, HG_ERANGE, "config: tile %d does not divide %d", 48, 100);
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta[1] = {{7, HG_IN, a->tensor}}; /* no arg 7: fails again */
    hg_task_desc d = {&K_NOTHING, ta, 1, NULL, 0, NULL, 0};
    hg_task_submit(o, &d, NULL);
    const void *p;
    hg_orch_host_view(o, 9, &p); /* and again */
    return 0;
}

TEST_EACH_BACKEND(first_orchestration_failure_keeps_code_and_message)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(16, &hb));
    size_t n = 16;
    hg_arg a = {"x", HG_IN, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_host(&a.tensor, hb, HG_U8, 1, &n));
    hg_callable c = {"failing", orch_fail_then_bad_submit, NULL};
    ASSERT_EQ(hg_runner_run(r, &c, &a, 1, NULL), HG_ERANGE);
    ASSERT_STR_EQ(hg_runner_errmsg(r), "config: tile 48 does not divide 100");
    hg_runner_close(r);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* A kernel without a name fails with a message, never a NULL through %s. */
static int k_fail(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 3;
}
static const hg_kernel K_UNNAMED = {
    NULL, k_fail, HG_CORE_VECTOR,
    "__kernel void fail(HG_STATUS_ARGS, HG_TENSOR(uchar, x)) { HG_FAIL(3); }", "fail"};

TEST_EACH_BACKEND(unnamed_kernel_failure_is_reported)
{
    hg_device *dev = test_device_on(backend, "cores=1");
    ASSERT(dev != NULL);
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(16, &hb));
    size_t n = 16;
    hg_arg a = {"x", HG_IN, {0}, 0, HG_STAGED};
    ASSERT_OK(hg_tensor_host(&a.tensor, hb, HG_U8, 1, &n));
    hg_callable c = {"one", orch_one, (void *)&K_UNNAMED};
    hg_trace *t;
    ASSERT_OK(hg_trace_create(&t));
    hg_runner_set_trace(r, t);
    ASSERT_EQ(hg_runner_run(r, &c, &a, 1, NULL), HG_EKERNEL);
    ASSERT_STR_CONTAINS(hg_runner_errmsg(r), "(unnamed)");
    ASSERT_OK(hg_trace_write_json(t, "/dev/null"));
    hg_runner_close(r);
    hg_trace_destroy(t);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

int main(void)
{
    return RUN_TESTS();
}
