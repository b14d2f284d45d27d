/*
 * bgemm.c: C += A x B over a grid of tiles (f32).
 *
 * A is M x K, B is K x N, C is M x N, cut into tile x tile tiles (grid
 * gm x gk, gk x gn, gm x gn).  For each output tile (i, j) and each k a GEMM
 * task (cube core) multiplies A(i,k) by B(k,j) into its own tile of run-owned
 * scratch, and an ADD task (vector core) adds that product into C(i,j), which
 * is INOUT.  Separate product tiles let every GEMM run at once; the ADDs into
 * one C tile chain through C's region.
 *
 * The orchestration lays the tasks out from the small `config` IN tensor
 * (i64: tile, grid_m, grid_n, grid_k), read on the host through its host
 * view, as a model's orchestration reads its shapes.  Inputs are multiples of
 * 1/8 with small magnitudes, so f32 sums are exact and the golden (double)
 * matches bit for bit whatever the summation order.
 */
#include "kernels/gemm_cl.h"
#include "kernels/kernels.h"
#include "scene/scene.h"
#include "tensor/checked.h"

enum { P_GRID, P_TILE, P_GRID_K };

static const scene_param bgemm_params[] = {
    [P_GRID] = {"grid", 4, 1, 16, "tiles per side of C (grid_m = grid_n)", "tiles", NULL},
    [P_TILE] = {"tile", 32, 1, 512, "tile edge in elements", NULL, NULL},
    [P_GRID_K] = {"grid_k", 0, 0, 16, "tiles along K (0: same as grid)", NULL, NULL},
};

enum { CFG_TILE, CFG_GM, CFG_GN, CFG_GK, CFG_LEN };

/* The host kernels are kernels/gemm.c's (P = A x B, C += P per tile, with
 * their AVX2 paths); the OpenCL ones are below. */

/* The same two kernels for OpenCL devices (hostgraph.h's calling
 * convention), one program: the host kernels' checks, then gemm_cl.h's
 * cores (register-blocked GEMM, row-wise ADD), which the StarPU peer runs
 * too. */
static const char bgemm_cl[] = KERN_CL_GEMM
    "__kernel void gemm(HG_STATUS_ARGS, HG_TENSOR(float, a), HG_TENSOR(float, b),\n"
    "                   HG_TENSOR(float, p))\n"
    "{\n"
    "    ulong m = a_v.shape[0], k = a_v.shape[1], n = b_v.shape[1];\n"
    "    if (a_v.ndims != 2 || b_v.ndims != 2 || p_v.ndims != 2 || b_v.shape[0] != k ||\n"
    "        p_v.shape[0] != m || p_v.shape[1] != n || a_v.strides[1] != 1 ||\n"
    "        b_v.strides[1] != 1 || p_v.strides[1] != 1) {\n"
    "        HG_FAIL(1);\n"
    "        return;\n"
    "    }\n"
    "    kc_gemm(HG_PTR(a), a_v.strides[0], HG_PTR(b), b_v.strides[0], HG_PTR(p),\n"
    "            p_v.strides[0], m, n, k);\n"
    "}\n"
    "__kernel void add(HG_STATUS_ARGS, HG_TENSOR(float, p), HG_TENSOR(float, c))\n"
    "{\n"
    "    if (p_v.ndims != 2 || c_v.ndims != 2 || p_v.shape[0] != c_v.shape[0] ||\n"
    "        p_v.shape[1] != c_v.shape[1] || p_v.strides[1] != 1 || c_v.strides[1] != 1) {\n"
    "        HG_FAIL(1);\n"
    "        return;\n"
    "    }\n"
    "    kc_add(HG_PTR(p), p_v.strides[0], HG_PTR(c), c_v.strides[0], c_v.shape[0],\n"
    "           c_v.shape[1]);\n"
    "}\n";

static const hg_kernel gemm = {"gemm", kern_gemm_tile, HG_CORE_CUBE, bgemm_cl, "gemm"};
static const hg_kernel add = {"add", kern_add_tile, HG_CORE_VECTOR, bgemm_cl, "add"};

/* The grid the config describes, in elements and tiles. */
typedef struct bgemm_grid {
    size_t tile, gm, gn, gk;
    size_t rows_m, cols_n, depth_k; /* gm * tile, gn * tile, gk * tile */
    size_t product_rows;            /* gm * gn * gk * tile */
} bgemm_grid;

/* Reads the config (i64[CFG_LEN]) into g, with checked products: the config
 * is data, so a bad one must fail the run, never wrap around. */
static bool config_read(const hg_tensor *cfg_tensor, const int64_t *cfg, bgemm_grid *g)
{
    if (cfg_tensor->dtype != HG_I64 || cfg_tensor->ndims != 1 || cfg_tensor->shape[0] != CFG_LEN)
        return false;
    for (int i = 0; i < CFG_LEN; i++) {
        if (cfg[i] < 1)
            return false;
    }
    g->tile = (size_t)cfg[CFG_TILE];
    g->gm = (size_t)cfg[CFG_GM];
    g->gn = (size_t)cfg[CFG_GN];
    g->gk = (size_t)cfg[CFG_GK];
    size_t mn;
    return ck_mul(g->gm, g->tile, &g->rows_m) && ck_mul(g->gn, g->tile, &g->cols_n) &&
           ck_mul(g->gk, g->tile, &g->depth_k) && ck_mul(g->gm, g->gn, &mn) &&
           ck_mul(mn, g->depth_k, &g->product_rows);
}

static bool is_matrix(const hg_tensor *t, size_t rows, size_t cols)
{
    return t->ndims == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

/* The config must describe exactly the A, B and C the run was given. */
static bool config_fits(const bgemm_grid *g, const hg_arg *const *args)
{
    return is_matrix(&args[0]->tensor, g->rows_m, g->depth_k) &&
           is_matrix(&args[1]->tensor, g->depth_k, g->cols_n) &&
           is_matrix(&args[2]->tensor, g->rows_m, g->cols_n);
}

typedef struct bgemm_layout {
    uint32_t idx[3]; /* arg indices of A, B, C */
    const hg_arg *args[3];
    uint32_t products;      /* scratch arg index */
    hg_tensor product_view; /* (gm*gn*gk*tile) x tile */
    size_t tile;
} bgemm_layout;

/* Submits the GEMM of A(i,k) x B(k,j) into product tile p, then its ADD into
 * C(i,j). */
static int submit_pair(hg_orch *o, const bgemm_layout *l, size_t i, size_t j, size_t k, size_t p)
{
    size_t t = l->tile;
    hg_task_arg ga[3] = {
        {l->idx[0], HG_IN, {0}}, {l->idx[1], HG_IN, {0}}, {l->products, HG_OUT, {0}}};
    hg_task_arg aa[2] = {{l->products, HG_IN, {0}}, {l->idx[2], HG_INOUT, {0}}};
    int rc;
    if ((rc = scene_tile_2d(&l->args[0]->tensor, i * t, k * t, t, t, &ga[0].view)) != 0 ||
        (rc = scene_tile_2d(&l->args[1]->tensor, k * t, j * t, t, t, &ga[1].view)) != 0 ||
        (rc = scene_tile_2d(&l->product_view, p * t, 0, t, t, &ga[2].view)) != 0 ||
        (rc = scene_tile_2d(&l->args[2]->tensor, i * t, j * t, t, t, &aa[1].view)) != 0)
        return rc;
    aa[0].view = ga[2].view;
    hg_task_desc gd = {.kernel = &gemm, .args = ga, .nargs = 3};
    hg_task_desc ad = {.kernel = &add, .args = aa, .nargs = 2};
    if ((rc = hg_task_submit(o, &gd, NULL)) != 0)
        return rc;
    return hg_task_submit(o, &ad, NULL);
}

static int bgemm_orchestrate(hg_orch *o, void *user)
{
    static const char *const names[] = {"A", "B", "C", "config"};
    bgemm_layout l;
    uint32_t idx[4];
    const hg_arg *args[4];
    const void *host;
    int rc = scene_orch_lookup(o, names, 4, idx, args);
    if (rc != 0 || (rc = hg_orch_host_view(o, idx[3], &host)) != 0)
        return rc;
    bgemm_grid g;
    if (!config_read(&args[3]->tensor, host, &g))
        return hg_orch_fail(o, HG_EINVAL,
                            "arg 'config': not 4 positive i64 (tile, grid_m, "
                            "grid_n, grid_k) whose products fit in size_t");
    if (!config_fits(&g, args))
        return hg_orch_fail(o, HG_EINVAL,
                            "arg 'config': tile %zu, grid %zu x %zu x %zu does not match the "
                            "shapes of A, B and C",
                            g.tile, g.gm, g.gn, g.gk);
    size_t shape[2] = {g.product_rows, g.tile};
    for (int a = 0; a < 3; a++) {
        l.idx[a] = idx[a];
        l.args[a] = args[a];
    }
    l.tile = g.tile;
    rc = hg_orch_scratch(o, "products", HG_F32, 2, shape, &l.products, &l.product_view);
    for (size_t i = 0; rc == 0 && i < g.gm; i++) {
        for (size_t j = 0; rc == 0 && j < g.gn; j++) {
            for (size_t k = 0; rc == 0 && k < g.gk; k++)
                rc = submit_pair(o, &l, i, j, k, (i * g.gn + j) * g.gk + k);
        }
    }
    return rc;
}

/* golden = C0 + A x B, in double.  Row by row in i-k-j order so B streams
 * through the cache; each golden row accumulates in double from C0. */
static void bgemm_golden(const float *a, const float *b, const float *c0, size_t m, size_t n,
                         size_t k, double *golden)
{
    for (size_t r = 0; r < m; r++) {
        double *grow = golden + r * n;
        for (size_t col = 0; col < n; col++)
            grow[col] = c0[r * n + col];
        for (size_t kk = 0; kk < k; kk++) {
            double av = a[r * k + kk];
            const float *brow = b + kk * n;
            for (size_t col = 0; col < n; col++)
                grow[col] += av * (double)brow[col];
        }
    }
}

static int bgemm_make(scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    hg_err *err = scene_case_err(c);
    size_t t = (size_t)params[P_TILE], g = (size_t)params[P_GRID];
    size_t gk = params[P_GRID_K] > 0 ? (size_t)params[P_GRID_K] : g;
    size_t m = g * t, n = g * t, k = gk * t;
    size_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n}, scfg[1] = {CFG_LEN};
    uint32_t a, b, cc, cfg;
    int rc;
    if ((rc = scene_case_add_tensor(c, "A", HG_IN, HG_F32, 2, sa, &a, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "B", HG_IN, HG_F32, 2, sb, &b, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "C", HG_INOUT, HG_F32, 2, sc, &cc, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "config", HG_IN, HG_I64, 1, scfg, &cfg, err)) != 0)
        return rc;
    /* C starts non-zero so a lost INOUT upload (C treated as OUT) shows. */
    if ((rc = scene_fill(c, a, 11, 4, 0.125)) != 0 || (rc = scene_fill(c, b, 12, 4, 0.125)) != 0 ||
        (rc = scene_fill(c, cc, 13, 8, 0.25)) != 0)
        return err_set(err, rc, "bgemm: cannot fill inputs");
    int64_t config[CFG_LEN] = {(int64_t)t, (int64_t)g, (int64_t)g, (int64_t)gk};
    if ((rc = hg_hostbuf_write(c->args[cfg].tensor.host, 0, config, sizeof config)) != 0)
        return err_set(err, rc, "bgemm: cannot write config");
    double *golden;
    if ((rc = scene_case_add_check(c, cc, 1e-5, 1e-5, &golden, err)) != 0)
        return rc;
    bgemm_golden(scene_case_data(c, a), scene_case_data(c, b), scene_case_data(c, cc), m, n, k,
                 golden);
    c->callable = (hg_callable){"bgemm", bgemm_orchestrate, NULL};
    return 0;
}

static const char *const bgemm_host_reads[] = {"config", NULL};

const scene scene_bgemm = {
    .size = sizeof(hg_scene_def),
    .version = HG_SCENE_DEF_VERSION,
    .name = "bgemm",
    .description =
        "C += A x B over a grid of f32 tiles: GEMM tasks (cube) feeding ADD tasks (vector)",
    .params = bgemm_params,
    .nparams = sizeof bgemm_params / sizeof bgemm_params[0],
    .make = bgemm_make,
    .host_reads = bgemm_host_reads,
};
