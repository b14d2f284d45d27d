/*
 * vector_add.c: the smallest end-to-end scene, c = a + b over f32 vectors.
 *
 * One vector-core task per tile of `tile` elements (the last tile may be
 * shorter).  The tile size travels to the orchestration as the SCALAR arg
 * "tile", so the callable needs no private state.  Inputs are small multiples
 * of 1/8, so the f32 sums are exact and the golden is exact too.
 */
#include "scene/scene.h"

enum { P_N, P_TILE };

static const scene_param vector_add_params[] = {
    [P_N] = {"n", 1 << 20, 0, 1 << 27, "elements in a, b and c", NULL, NULL},
    [P_TILE] = {"tile", 1 << 16, 1, 1 << 27, "elements per task", NULL, NULL},
};

/* c[i] = a[i] + b[i] over one 1-D tile; args: a (IN), b (IN), c (OUT). */
static int vadd_kernel(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 3)
        return 1;
    const hg_kview *a = &ctx->args[0], *b = &ctx->args[1], *c = &ctx->args[2];
    if (a->ndims != 1 || b->shape[0] != a->shape[0] || c->shape[0] != a->shape[0])
        return 1;
    const float *pa = a->data, *pb = b->data;
    float *pc = c->data;
    for (size_t i = 0; i < a->shape[0]; i++)
        pc[i * c->strides[0]] = pa[i * a->strides[0]] + pb[i * b->strides[0]];
    return 0;
}

/* The same kernel for OpenCL devices (hostgraph.h's calling convention):
 * one work item per element of c. */
static const char vadd_cl[] =
    "__kernel void vector_add(HG_STATUS_ARGS, HG_TENSOR(float, a), HG_TENSOR(float, b),\n"
    "                         HG_TENSOR(float, c))\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (a_v.ndims != 1 || b_v.shape[0] != a_v.shape[0] || c_v.shape[0] != a_v.shape[0]) {\n"
    "        HG_FAIL(1);\n"
    "        return;\n"
    "    }\n"
    "    HG_PTR(c)[i * c_v.strides[0]] = HG_PTR(a)[i * a_v.strides[0]] +\n"
    "                                    HG_PTR(b)[i * b_v.strides[0]];\n"
    "}\n";

static const hg_kernel vadd = {"vector_add", vadd_kernel, HG_CORE_VECTOR, vadd_cl, "vector_add"};

static int vector_add_orchestrate(hg_orch *o, void *user)
{
    static const char *const names[] = {"a", "b", "c", "tile"};
    uint32_t idx[4];
    const hg_arg *args[4];
    int rc = scene_orch_lookup(o, names, 4, idx, args);
    if (rc != 0)
        return rc;
    size_t n = args[0]->tensor.shape[0];
    size_t tile = (size_t)args[3]->scalar;
    if (tile == 0)
        return hg_orch_fail(o, HG_EINVAL, "arg 'tile': 0, want a positive tile length");
    for (size_t start = 0; start < n; start += tile) {
        size_t len = n - start < tile ? n - start : tile;
        hg_task_arg targs[3];
        for (uint32_t i = 0; i < 3; i++) {
            targs[i].arg = idx[i];
            targs[i].access = i < 2 ? HG_IN : HG_OUT;
            rc = hg_tensor_slice(&args[i]->tensor, 0, start, len, &targs[i].view);
            if (rc != 0)
                return rc;
        }
        hg_task_desc desc = {.kernel = &vadd, .args = targs, .nargs = 3};
        rc = hg_task_submit(o, &desc, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int vector_add_make(scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    hg_err *err = scene_case_err(c);
    size_t n = (size_t)params[P_N];
    uint32_t a, b, out;
    int rc;
    if ((rc = scene_case_add_tensor(c, "a", HG_IN, HG_F32, 1, &n, &a, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "b", HG_IN, HG_F32, 1, &n, &b, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "c", HG_OUT, HG_F32, 1, &n, &out, err)) != 0 ||
        (rc = scene_case_add_scalar(c, "tile", (uint64_t)params[P_TILE], err)) != 0)
        return rc;
    /* c starts as garbage-like values: a task that skips its tile shows. */
    if ((rc = scene_fill(c, a, 1, 40, 0.125)) != 0 || (rc = scene_fill(c, b, 2, 40, 0.125)) != 0 ||
        (rc = scene_fill(c, out, 3, 1000, 1.0)) != 0)
        return err_set(err, rc, "vector_add: cannot fill inputs");
    double *golden;
    if ((rc = scene_case_add_check(c, out, 1e-6, 1e-6, &golden, err)) != 0)
        return rc;
    const float *pa = scene_case_data(c, a), *pb = scene_case_data(c, b);
    for (size_t i = 0; i < n; i++)
        golden[i] = (double)pa[i] + (double)pb[i];
    c->callable = (hg_callable){"vector_add", vector_add_orchestrate, NULL};
    return 0;
}

const scene scene_vector_add = {
    .size = sizeof(hg_scene_def),
    .version = HG_SCENE_DEF_VERSION,
    .name = "vector_add",
    .description = "c = a + b over f32 vectors, one vector-core task per tile",
    .params = vector_add_params,
    .nparams = sizeof vector_add_params / sizeof vector_add_params[0],
    .make = vector_add_make,
};
