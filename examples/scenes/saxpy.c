/*
 * saxpy.c: a scene of your own, in C, as a plugin the command loads.
 *
 *     y = alpha * x + y    over f32 vectors, one task per tile
 *
 * y is INOUT: every round starts from the same y (the scene runner restores
 * it), so the golden, computed here from the inputs, holds every round.
 * Build it against the installed library and run it:
 *
 *     cc -shared -fPIC -O2 saxpy.c -o libscene_saxpy.so $(pkg-config --cflags --libs
 * hostgraph_scenes) hostgraph list --scene-lib ./libscene_saxpy.so hostgraph run saxpy --scene-lib
 * ./libscene_saxpy.so --rounds 5 --residency all
 *
 * The default build makes it as <build>/examples/scenes/libscene_saxpy.so.
 * Only the public headers are used: this file is what a user writes.
 */
#include <string.h>

#include "hostgraph.h"
#include "hostgraph_scenes.h"

enum { P_N, P_TILE, P_ALPHA, P_COUNT };

static const hg_scene_value alpha_names[] = {{"half", 1}, {"one", 2}, {"two", 4}, {NULL, 0}};

static const hg_scene_param_def saxpy_params[P_COUNT] = {
    [P_N] = {"n", 1 << 18, 1, 1 << 26, "elements in x and y", NULL, NULL},
    [P_TILE] = {"tile", 1 << 14, 1, 1 << 26, "elements per task", NULL, NULL},
    [P_ALPHA] = {"alpha", 4, 1, 4, "the scale of x", NULL, alpha_names},
};

/* y[i] += alpha * x[i] over one 1-D tile; args: x (IN), y (INOUT); scalar
 * 0: alpha as f64 bits. */
static int saxpy_kernel(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2 || ctx->nscalars != 1)
        return 1;
    const hg_kview *x = &ctx->args[0], *y = &ctx->args[1];
    if (x->ndims != 1 || y->shape[0] != x->shape[0])
        return 1;
    double alpha;
    memcpy(&alpha, &ctx->scalars[0], sizeof alpha);
    const float *px = x->data;
    float *py = y->data;
    for (size_t i = 0; i < x->shape[0]; i++)
        py[i * y->strides[0]] += (float)alpha * px[i * x->strides[0]];
    return 0;
}

static const char saxpy_cl[] =
    "__kernel void saxpy(HG_STATUS_ARGS, HG_TENSOR(float, x), HG_TENSOR(float, y), ulong a)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    HG_PTR(y)[i * y_v.strides[0]] += (float)as_double(a) * HG_PTR(x)[i * x_v.strides[0]];\n"
    "}\n";

static const hg_kernel saxpy_k = {"saxpy", saxpy_kernel, HG_CORE_VECTOR, saxpy_cl, "saxpy"};

/* Finds its args by name, so it runs over any args of these names. */
static int saxpy_orchestrate(hg_orch *o, void *user)
{
    (void)user;
    int ix = hg_orch_find_arg(o, "x"), iy = hg_orch_find_arg(o, "y");
    int ia = hg_orch_find_arg(o, "alpha"), it = hg_orch_find_arg(o, "tile");
    if (ix < 0 || iy < 0 || ia < 0 || it < 0)
        return hg_orch_fail(o, HG_ENOTFOUND, "saxpy needs args x, y, alpha and tile");
    const hg_arg *x, *y, *alpha, *tile;
    hg_orch_arg(o, (uint32_t)ix, &x);
    hg_orch_arg(o, (uint32_t)iy, &y);
    hg_orch_arg(o, (uint32_t)ia, &alpha);
    hg_orch_arg(o, (uint32_t)it, &tile);
    size_t n = x->tensor.shape[0], t = (size_t)tile->scalar;
    for (size_t start = 0; start < n; start += t) {
        size_t len = n - start < t ? n - start : t;
        hg_task_arg args[2] = {{.arg = (uint32_t)ix, .access = HG_IN},
                               {.arg = (uint32_t)iy, .access = HG_INOUT}};
        int rc = hg_tensor_slice(&x->tensor, 0, start, len, &args[0].view);
        if (rc == 0)
            rc = hg_tensor_slice(&y->tensor, 0, start, len, &args[1].view);
        hg_task_desc desc = {
            .kernel = &saxpy_k, .args = args, .nargs = 2, .scalars = &alpha->scalar, .nscalars = 1};
        if (rc == 0)
            rc = hg_task_submit(o, &desc, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const hg_callable saxpy_callable = {"saxpy", saxpy_orchestrate, NULL};

static int saxpy_make(hg_scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    size_t n = (size_t)params[P_N];
    double alpha = (double)params[P_ALPHA] / 2.0; /* half, one, two */
    uint32_t x, y;
    double *golden;
    int rc;
    if ((rc = hg_scene_case_add_tensor(c, "x", HG_IN, HG_F32, 1, &n, &x)) != 0 ||
        (rc = hg_scene_case_add_tensor(c, "y", HG_INOUT, HG_F32, 1, &n, &y)) != 0 ||
        (rc = hg_scene_case_add_scalar(c, "alpha", hg_scalar_f64(alpha), NULL)) != 0 ||
        (rc = hg_scene_case_add_scalar(c, "tile", (uint64_t)params[P_TILE], NULL)) != 0)
        return rc;
    /* Multiples of 1/8 in a small range: the f32 results are exact. */
    if ((rc = hg_scene_case_fill(c, x, 21, 64, 0.125)) != 0 ||
        (rc = hg_scene_case_fill(c, y, 22, 64, 0.125)) != 0 ||
        (rc = hg_scene_case_add_check(c, y, 0.0, 0.0, &golden)) != 0)
        return rc;
    const float *px = hg_scene_case_data(c, x), *py = hg_scene_case_data(c, y);
    for (size_t i = 0; i < n; i++)
        golden[i] = alpha * px[i] + py[i];
    return hg_scene_case_set_callable(c, &saxpy_callable);
}

static const hg_scene_def saxpy_def = {
    .size = sizeof(hg_scene_def),
    .version = HG_SCENE_DEF_VERSION,
    .name = "saxpy",
    .description = "y = alpha * x + y over f32 vectors (y INOUT), one task per tile",
    .params = saxpy_params,
    .nparams = P_COUNT,
    .make = saxpy_make,
};

/* What the command looks for: this plugin's scenes, NULL-terminated. */
const hg_scene_def *const *hg_scene_plugin(void)
{
    static const hg_scene_def *const defs[] = {&saxpy_def, NULL};
    return defs;
}
