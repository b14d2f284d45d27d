/*
 * kernels.c: the decode step's vector kernels (orch.c lists their args).
 * Each copies a row out of its views into dense floats (kern_mat), works in
 * f32 and writes the row back, rounding to bf16 where the view is bf16.
 *
 * RMSNorm is Qwen3's: y = x / sqrt(mean(x^2) + eps) * w.  RoPE is the
 * rotate-half (neox) form: for i < D/2, with c = cos[pos], s = sin[pos],
 *   y[i] = x[i] c[i] - x[i + D/2] s[i],  y[i + D/2] = x[i + D/2] c[i + D/2] + x[i] s[i + D/2].
 */
#include <math.h>
#include <stdlib.h>

#include "../kernels/kernels.h"
#include "qwen3.h"

static void rmsnorm_row(const float *x, const float *w, size_t n, float eps, float *y)
{
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * inv * w[i];
}

/* A dense f32 vector view of n elements. */
static const float *f32_vec(const hg_kview *v, size_t n)
{
    if (v->dtype != HG_F32 || v->ndims != 1 || v->shape[0] != n || (n > 1 && v->strides[0] != 1))
        return NULL;
    return v->data;
}

static int rmsnorm_task(const hg_kernel_ctx *ctx)
{
    kern_mat x, y;
    if (ctx->nargs != 3 || ctx->nscalars != 1 || !kern_mat_of(&ctx->args[0], &x) ||
        !kern_mat_of(&ctx->args[2], &y))
        return 1;
    size_t n = kern_mat_cols(&x);
    const float *w = f32_vec(&ctx->args[1], n);
    float eps = (float)hg_scalar_as_f64(ctx->scalars[0]);
    if (w == NULL || kern_mat_cols(&y) != n || y.rows != x.rows)
        return 1;
    float *row = malloc(2 * n * sizeof(float) + 1);
    if (row == NULL)
        return 1;
    for (size_t r = 0; r < x.rows; r++) {
        kern_mat_get_row(&x, r, row);
        rmsnorm_row(row, w, n, eps, row + n);
        kern_mat_put_row(&y, r, row + n);
    }
    free(row);
    return 0;
}

static int add_rmsnorm_task(const hg_kernel_ctx *ctx)
{
    kern_mat x, o, h1, y;
    if (ctx->nargs != 5 || ctx->nscalars != 1 || !kern_mat_of(&ctx->args[0], &x) ||
        !kern_mat_of(&ctx->args[1], &o) || !kern_mat_of(&ctx->args[3], &h1) ||
        !kern_mat_of(&ctx->args[4], &y))
        return 1;
    size_t n = kern_mat_cols(&x);
    const float *w = f32_vec(&ctx->args[2], n);
    float eps = (float)hg_scalar_as_f64(ctx->scalars[0]);
    if (w == NULL || kern_mat_cols(&o) != n || kern_mat_cols(&h1) != n || kern_mat_cols(&y) != n ||
        o.rows != x.rows || h1.rows != x.rows || y.rows != x.rows)
        return 1;
    float *row = malloc(3 * n * sizeof(float) + 1);
    if (row == NULL)
        return 1;
    for (size_t r = 0; r < x.rows; r++) {
        kern_mat_get_row(&x, r, row);
        kern_mat_get_row(&o, r, row + n);
        for (size_t i = 0; i < n; i++)
            row[i] += row[n + i];
        kern_mat_put_row(&h1, r, row);
        rmsnorm_row(row, w, n, eps, row + 2 * n);
        kern_mat_put_row(&y, r, row + 2 * n);
    }
    free(row);
    return 0;
}

/* One head in place: RMSNorm over d, then RoPE with rows c and s. */
static void norm_rope_head(float *x, const float *w, size_t d, float eps, const float *c,
                           const float *s, float *tmp)
{
    rmsnorm_row(x, w, d, eps, tmp);
    size_t half = d / 2;
    for (size_t i = 0; i < half; i++) {
        x[i] = tmp[i] * c[i] - tmp[i + half] * s[i];
        x[i + half] = tmp[i + half] * c[i + half] + tmp[i] * s[i + half];
    }
}

static int head_norm_rope_task(const hg_kernel_ctx *ctx)
{
    kern_mat in, out;
    const hg_kview *lv = &ctx->args[2], *cv = &ctx->args[3], *sv = &ctx->args[4];
    if (ctx->nargs != 6 || ctx->nscalars != 1 || !kern_mat_of(&ctx->args[0], &in) ||
        !kern_mat_of(&ctx->args[5], &out) || cv->ndims != 2 || sv->ndims != 2 ||
        lv->dtype != HG_I32 || lv->ndims != 1)
        return 1;
    size_t d = cv->shape[1], width = kern_mat_cols(&in), rope_len = cv->shape[0];
    const float *w = f32_vec(&ctx->args[1], d);
    float eps = (float)hg_scalar_as_f64(ctx->scalars[0]);
    if (w == NULL || d == 0 || d % 2 != 0 || width % d != 0 || kern_mat_cols(&out) != width ||
        out.rows != in.rows || lv->shape[0] != in.rows || cv->dtype != HG_F32 ||
        sv->dtype != HG_F32 || sv->shape[0] != rope_len || sv->shape[1] != d ||
        cv->strides[1] != 1 || sv->strides[1] != 1)
        return 1;
    float *row = malloc((width + d) * sizeof(float));
    if (row == NULL)
        return 1;
    int rc = 0;
    for (size_t r = 0; r < in.rows && rc == 0; r++) {
        int32_t len = ((const int32_t *)lv->data)[r * lv->strides[0]];
        if (len < 1 || (size_t)len > rope_len) {
            rc = 1; /* the orchestration checked: a bad position here is a bug */
            break;
        }
        size_t pos = (size_t)len - 1;
        const float *c = (const float *)cv->data + pos * cv->strides[0];
        const float *s = (const float *)sv->data + pos * sv->strides[0];
        kern_mat_get_row(&in, r, row);
        for (size_t h = 0; h < width / d; h++)
            norm_rope_head(row + h * d, w, d, eps, c, s, row + width);
        kern_mat_put_row(&out, r, row);
    }
    free(row);
    return rc;
}

static int kv_write_task(const hg_kernel_ctx *ctx)
{
    kern_mat k, v, kc, vc;
    if (ctx->nargs != 4 || !kern_mat_of(&ctx->args[0], &k) || !kern_mat_of(&ctx->args[1], &v) ||
        !kern_mat_of(&ctx->args[2], &kc) || !kern_mat_of(&ctx->args[3], &vc))
        return 1;
    size_t n = kern_mat_cols(&k);
    if (k.rows != 1 || v.rows != 1 || kc.rows != 1 || vc.rows != 1 || kern_mat_cols(&v) != n ||
        kern_mat_cols(&kc) != n || kern_mat_cols(&vc) != n || kc.dtype != HG_BF16 ||
        vc.dtype != HG_BF16)
        return 1;
    float *row = malloc(n * sizeof(float) + 1);
    if (row == NULL)
        return 1;
    kern_mat_get_row(&k, 0, row);
    kern_mat_put_row(&kc, 0, row);
    kern_mat_get_row(&v, 0, row);
    kern_mat_put_row(&vc, 0, row);
    free(row);
    return 0;
}

/* SiLU(g) x u, n (<= SILU_BLOCK) floats into a: g sigmoid(g) u, the
 * sigmoid from e = e^-|g|, 1 / (1 + e) for g >= 0 and e / (1 + e) below.
 * Called with n = SILU_BLOCK, a constant, GCC vectorizes both loops at -O2
 * (the clamp apart from the exp: kernels.h); with a call to expf a lane at
 * a time SiLU took ~1% of the decode step (preset=real). */
#define SILU_BLOCK 16
__attribute__((always_inline)) static inline void
silu_block(const float *restrict g, const float *restrict u, size_t n, float *restrict a)
{
    float x[SILU_BLOCK];
    for (size_t i = 0; i < n; i++)
        x[i] = kern_exp_floor(-fabsf(g[i]));
    for (size_t i = 0; i < n; i++) {
        float e = kern_exp_clamped(x[i]);
        float s = (g[i] >= 0.0f ? 1.0f : e) / (1.0f + e);
        a[i] = g[i] * s * u[i];
    }
}

static void silu_mul_row(const float *g, const float *u, size_t n, float *a)
{
    size_t full = n / SILU_BLOCK * SILU_BLOCK;
    for (size_t i = 0; i < full; i += SILU_BLOCK)
        silu_block(g + i, u + i, SILU_BLOCK, a + i);
    silu_block(g + full, u + full, n - full, a + full);
}

static int silu_mul_task(const hg_kernel_ctx *ctx)
{
    kern_mat g, u, a;
    if (ctx->nargs != 3 || !kern_mat_of(&ctx->args[0], &g) || !kern_mat_of(&ctx->args[1], &u) ||
        !kern_mat_of(&ctx->args[2], &a))
        return 1;
    size_t n = kern_mat_cols(&g);
    if (kern_mat_cols(&u) != n || kern_mat_cols(&a) != n || u.rows != g.rows || a.rows != g.rows)
        return 1;
    float *row = malloc(3 * n * sizeof(float) + 1);
    if (row == NULL)
        return 1;
    for (size_t r = 0; r < g.rows; r++) {
        kern_mat_get_row(&g, r, row);
        kern_mat_get_row(&u, r, row + n);
        silu_mul_row(row, row + n, n, row + 2 * n);
        kern_mat_put_row(&a, r, row + 2 * n);
    }
    free(row);
    return 0;
}

static int residual_task(const hg_kernel_ctx *ctx)
{
    kern_mat h1, d, out;
    if (ctx->nargs != 3 || !kern_mat_of(&ctx->args[0], &h1) || !kern_mat_of(&ctx->args[1], &d) ||
        !kern_mat_of(&ctx->args[2], &out))
        return 1;
    size_t n = kern_mat_cols(&h1);
    if (kern_mat_cols(&d) != n || kern_mat_cols(&out) != n || d.rows != h1.rows ||
        out.rows != h1.rows)
        return 1;
    float *row = malloc(2 * n * sizeof(float) + 1);
    if (row == NULL)
        return 1;
    for (size_t r = 0; r < h1.rows; r++) {
        kern_mat_get_row(&h1, r, row);
        kern_mat_get_row(&d, r, row + n);
        for (size_t i = 0; i < n; i++)
            row[i] += row[n + i];
        kern_mat_put_row(&out, r, row);
    }
    free(row);
    return 0;
}

/* Each with its OpenCL slot (kernels_cl.c), the entry named as the kernel. */
#define QWEN3_KERNEL(name, fn)                                                                     \
    {                                                                                              \
#name, fn, HG_CORE_VECTOR, qwen3_cl_source, #name                                          \
    }
const hg_kernel qwen3_rmsnorm = QWEN3_KERNEL(rmsnorm, rmsnorm_task);
const hg_kernel qwen3_add_rmsnorm = QWEN3_KERNEL(add_rmsnorm, add_rmsnorm_task);
const hg_kernel qwen3_head_norm_rope = QWEN3_KERNEL(head_norm_rope, head_norm_rope_task);
const hg_kernel qwen3_kv_write = QWEN3_KERNEL(kv_write, kv_write_task);
const hg_kernel qwen3_silu_mul = QWEN3_KERNEL(silu_mul, silu_mul_task);
const hg_kernel qwen3_residual = QWEN3_KERNEL(residual, residual_task);
