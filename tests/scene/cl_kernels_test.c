/*
 * cl_kernels_test.c: the projection's OpenCL entries against its host
 * function, on shapes the scenes' defaults never make: x tiles whose width
 * is not a multiple of 8 (the entries' scalar tail), a column stride of 2
 * (no vector path at all), rows and columns that leave a partial 4 x 4
 * tile, x f32 and bf16 (kern_proj_for's two entries).  Each case runs as a
 * one-task graph on every backend of test_backends[] (opencl prints
 * "skipped: no OpenCL platform" where there is none) and must agree with
 * kern_call on the host to f32 rounding (the sums run in another order).
 * Seeded: HG_TEST_SEED (testlib), printed.
 */
#include <math.h>
#include <string.h>

#include "../../scenes/kernels/kernels.h"
#include "test_device.h"
#include "testlib.h"

/* x is [ntiles][rows][tcols * stride] (a column stride of `stride`), w is
 * [n][k], y is [rows][n]. */
typedef struct proj_shape {
    size_t ntiles, rows, tcols, stride, n;
    hg_dtype xdt;
} proj_shape;

static hg_tensor view3(hg_hostbuf *hb, hg_dtype dt, const size_t *shape, const size_t *strides)
{
    hg_tensor t = {.dtype = dt, .ndims = 3, .host = hb};
    for (int i = 0; i < 3; i++) {
        t.shape[i] = shape[i];
        t.strides[i] = strides[i];
    }
    return t;
}

static int proj_orch(hg_orch *o, void *user)
{
    (void)user;
    hg_task_arg a[3];
    for (uint32_t i = 0; i < 3; i++) {
        const hg_arg *arg;
        int rc = hg_orch_arg(o, i, &arg);
        if (rc != 0)
            return rc;
        a[i] = (hg_task_arg){i, i < 2 ? HG_IN : HG_OUT, arg->tensor};
    }
    hg_task_desc d = {.kernel = kern_proj_for(a[0].view.dtype), .args = a, .nargs = 3};
    return hg_task_submit(o, &d, NULL);
}

/* Fills n elements of dtype dt with values in (-1, 1) from the test's
 * stream (bf16: rounded). */
static void fill(test_rng *rng, void *data, hg_dtype dt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)(test_rand64(rng) % 2001) / 1000.0f - 1.0f;
        if (dt == HG_F32)
            ((float *)data)[i] = v;
        else
            ((uint16_t *)data)[i] = kern_f32_to_bf16(v);
    }
}

/* Runs one shape on a backend: every |got - want| / (1 + |want|) <= 1e-5. */
static void check_shape(test_rng *rng, const char *backend, const proj_shape *s)
{
    bool skipped;
    hg_device *dev = test_backend_open(backend, NULL, &skipped);
    if (skipped)
        return;
    ASSERT(dev != NULL);
    size_t xes = s->xdt == HG_F32 ? 4 : 2, k = s->ntiles * s->tcols;
    size_t row = s->tcols * s->stride, xn = s->ntiles * s->rows * row;
    hg_hostbuf *xb, *wb, *yb;
    ASSERT_OK(hg_hostbuf_create(xn * xes, &xb));
    ASSERT_OK(hg_hostbuf_create(s->n * k * 2, &wb));
    ASSERT_OK(hg_hostbuf_create(s->rows * s->n * 4, &yb));
    fill(rng, hg_hostbuf_data(xb), s->xdt, xn);
    fill(rng, hg_hostbuf_data(wb), HG_BF16, s->n * k);
    size_t xs[3] = {s->ntiles, s->rows, s->tcols}, xst[3] = {s->rows * row, row, s->stride};
    size_t ws[3] = {1, s->n, k}, wst[3] = {s->n * k, k, 1};
    size_t ys[3] = {1, s->rows, s->n}, yst[3] = {s->rows * s->n, s->n, 1};
    hg_arg args[3] = {{"x", HG_IN, view3(xb, s->xdt, xs, xst), 0, HG_STAGED},
                      {"w", HG_IN, view3(wb, HG_BF16, ws, wst), 0, HG_STAGED},
                      {"y", HG_OUT, view3(yb, HG_F32, ys, yst), 0, HG_STAGED}};
    hg_runner *r;
    ASSERT_OK(hg_runner_open(dev, &r));
    hg_callable c = {"proj_shape", proj_orch, NULL};
    int rc = hg_runner_run(r, &c, args, 3, NULL);
    if (rc != 0)
        TEST_FAIL_("%s: %s", backend, hg_runner_errmsg(r));
    /* the host function on the same views */
    float want[64 * 64];
    hg_kview kv[3] = {{hg_hostbuf_data(xb), s->xdt, 3, {0}, {0}},
                      {hg_hostbuf_data(wb), HG_BF16, 3, {0}, {0}},
                      {want, HG_F32, 3, {0}, {0}}};
    memcpy(kv[0].shape, xs, sizeof xs);
    memcpy(kv[0].strides, xst, sizeof xst);
    memcpy(kv[1].shape, ws, sizeof ws);
    memcpy(kv[1].strides, wst, sizeof wst);
    memcpy(kv[2].shape, ys, sizeof ys);
    memcpy(kv[2].strides, yst, sizeof yst);
    ASSERT(s->rows * s->n <= 64 * 64);
    ASSERT_EQ(kern_call(&kern_proj_kernel, kv, 3, NULL, 0), 0);
    const float *got = hg_hostbuf_data(yb);
    double worst = 0;
    for (size_t i = 0; rc == 0 && i < s->rows * s->n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs(want[i]));
        worst = e > worst ? e : worst;
    }
    if (worst > 1e-5)
        TEST_FAIL_("%s, x %s [%zu, %zu, %zu] stride %zu, n %zu: off by %g", backend,
                   s->xdt == HG_F32 ? "f32" : "bf16", s->ntiles, s->rows, s->tcols, s->stride, s->n,
                   worst);
    hg_runner_close(r);
    hg_hostbuf_destroy(xb);
    hg_hostbuf_destroy(wb);
    hg_hostbuf_destroy(yb);
    hg_device_close(dev);
}

TEST(proj_entries_agree_with_the_host_on_awkward_shapes)
{
    static const proj_shape shapes[] = {
        {3, 5, 7, 1, 6, HG_F32},   /* tails: 7-wide tiles, rows 4 + 1, columns 4 + 2 */
        {2, 9, 16, 1, 11, HG_F32}, /* whole float8 steps, rows 4 + 4 + 1 */
        {3, 5, 7, 1, 6, HG_BF16},  /* the bf16 entry */
        {2, 6, 12, 2, 5, HG_F32},  /* column stride 2: the scalar path throughout */
        {1, 1, 40, 1, 3, HG_BF16}, /* one row, fewer than 4 columns */
    };
    test_rng rng = test_seed(15);
    for (size_t b = 0; b < TEST_NBACKENDS; b++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            check_shape(&rng, test_backends[b], &shapes[i]);
    }
}

int main(void)
{
    return RUN_TESTS();
}
