/*
 * golden.c: the decode step computed plainly, for the golden check.
 *
 * Double loops over the case's inputs; no kernel code, no tiles, no tasks.
 * It rounds to bf16 where the step defines bf16 values (qwen3.h): each
 * projection's input, the K and V rows written to the caches, and each
 * layer's output.  Everything else is double, so the only differences from
 * the kernels are their f32 sums (and rare bf16 rounding flips those cause).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3.h"

static double widen(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double round_bf16(double v)
{
    return hg_bf16_to_f32(hg_f32_to_bf16((float)v));
}

/* y[b][j] = sum_i x[b][i] w[j][i] for b < batch, j < n; w bf16 [n][k].
 * wrow: k doubles of scratch (each weight row is widened once). */
static void linear(const uint16_t *w, size_t n, size_t k, const double *x, size_t batch, double *y,
                   double *wrow)
{
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < k; i++)
            wrow[i] = widen(w[j * k + i]);
        for (size_t b = 0; b < batch; b++) {
            const double *xb = x + b * k;
            double s[4] = {0.0, 0.0, 0.0, 0.0};
            size_t i = 0;
            for (; i + 4 <= k; i += 4) {
                for (int l = 0; l < 4; l++)
                    s[l] += wrow[i + (size_t)l] * xb[i + (size_t)l];
            }
            for (; i < k; i++)
                s[0] += wrow[i] * xb[i];
            y[b * n + j] = (s[0] + s[1]) + (s[2] + s[3]);
        }
    }
}

/* out = x / sqrt(mean(x^2) + eps) * w, rounded to bf16 if `round`. */
static void rmsnorm(const double *x, const float *w, size_t n, double eps, bool round, double *out)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = round ? round_bf16(x[i] * inv * w[i]) : x[i] * inv * w[i];
}

/* Every head of v (heads x d) in place: RMSNorm with w, then rotate-half
 * RoPE with the table rows c and s. */
static void head_norm_rope(double *v, size_t heads, size_t d, const float *w, const float *c,
                           const float *s, double eps, double *tmp)
{
    for (size_t h = 0; h < heads; h++) {
        double *x = v + h * d;
        rmsnorm(x, w, d, eps, false, tmp);
        for (size_t i = 0; i < d / 2; i++) {
            x[i] = tmp[i] * c[i] - tmp[i + d / 2] * s[i];
            x[i + d / 2] = tmp[i + d / 2] * c[i + d / 2] + tmp[i] * s[i + d / 2];
        }
    }
}

/* What one layer's golden works on: [batch][...] doubles. */
typedef struct layer_bufs {
    double *x, *xn, *q, *k, *v, *attn, *o, *h1, *g, *u, *dn, *wrow, *tmp, *scores;
} layer_bufs;

/* Token t's K (or V) row of kv head g as doubles: the cache's, or for the
 * step's own token (t == len - 1) the golden's new row rounded to bf16. */
static void kv_row(const qwen3_dims *d, const scene_case *c, const uint16_t *cache,
                   const double *fresh, size_t l, size_t b, size_t t, size_t g, double *out)
{
    size_t len = (size_t)((const int32_t *)scene_case_data(c, QA_SEQ_LENS))[b];
    const int32_t *table = scene_case_data(c, QA_TABLE);
    if (t + 1 == len) {
        for (size_t i = 0; i < d->head_dim; i++)
            out[i] = round_bf16(fresh[g * d->head_dim + i]);
        return;
    }
    size_t blk = (size_t)table[b * d->max_blocks + t / d->block];
    const uint16_t *row =
        cache + ((l * d->num_blocks + blk) * d->block + t % d->block) * d->kv_heads * d->head_dim +
        g * d->head_dim;
    for (size_t i = 0; i < d->head_dim; i++)
        out[i] = widen(row[i]);
}

/* Sequence b's attention in layer l over its cached tokens and this step's
 * K and V rows; writes u->attn row b, rounded to bf16 (the o projection's
 * input).  u->scores holds group x len scores. */
static void attention(const qwen3_dims *d, const scene_case *c, size_t l, size_t b, layer_bufs *u)
{
    const uint16_t *kc = scene_case_data(c, QA_K_CACHE), *vc = scene_case_data(c, QA_V_CACHE);
    size_t len = (size_t)((const int32_t *)scene_case_data(c, QA_SEQ_LENS))[b];
    size_t hd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim, dh = d->head_dim;
    size_t group = d->heads / d->kv_heads;
    double scale = 1.0 / sqrt((double)dh), *row = u->tmp;
    for (size_t g = 0; g < d->kv_heads; g++) {
        const double *q = u->q + b * hd + g * group * dh;
        for (size_t t = 0; t < len; t++) {
            kv_row(d, c, kc, u->k + b * kvd, l, b, t, g, row);
            for (size_t h = 0; h < group; h++) {
                double s = 0.0;
                for (size_t i = 0; i < dh; i++)
                    s += q[h * dh + i] * row[i];
                u->scores[h * len + t] = s * scale;
            }
        }
        for (size_t h = 0; h < group; h++) {
            double m = -INFINITY, sum = 0.0;
            for (size_t t = 0; t < len; t++)
                m = fmax(m, u->scores[h * len + t]);
            for (size_t t = 0; t < len; t++) {
                u->scores[h * len + t] = exp(u->scores[h * len + t] - m);
                sum += u->scores[h * len + t];
            }
            for (size_t t = 0; t < len; t++)
                u->scores[h * len + t] /= sum;
        }
        double *out = u->attn + b * hd + g * group * dh;
        for (size_t i = 0; i < group * dh; i++)
            out[i] = 0.0;
        for (size_t t = 0; t < len; t++) {
            kv_row(d, c, vc, u->v + b * kvd, l, b, t, g, row);
            for (size_t h = 0; h < group; h++) {
                for (size_t i = 0; i < dh; i++)
                    out[h * dh + i] += u->scores[h * len + t] * row[i];
            }
        }
        for (size_t i = 0; i < group * dh; i++)
            out[i] = round_bf16(out[i]);
    }
}

static const float *f32_at(const scene_case *c, uint32_t arg, size_t offset)
{
    return (const float *)scene_case_data(c, arg) + offset;
}

static const uint16_t *bf16_at(const scene_case *c, uint32_t arg, size_t offset)
{
    return (const uint16_t *)scene_case_data(c, arg) + offset;
}

/* Layer l up to the attention: u->q, u->k, u->v as the attention sees them,
 * and the K and V rows the step writes (before rounding) into rows. */
static void layer_qkv(const qwen3_dims *d, const scene_case *c, size_t l, layer_bufs *u,
                      qwen3_golden_rows *rows)
{
    size_t bt = d->batch, h = d->hidden, dh = d->head_dim;
    size_t hd = d->heads * dh, kvd = d->kv_heads * dh;
    for (size_t b = 0; b < bt; b++)
        rmsnorm(u->x + b * h, f32_at(c, QA_W_IN, l * h), h, d->eps, true, u->xn + b * h);
    linear(bf16_at(c, QA_WQ, l * hd * h), hd, h, u->xn, bt, u->q, u->wrow);
    linear(bf16_at(c, QA_WK, l * kvd * h), kvd, h, u->xn, bt, u->k, u->wrow);
    linear(bf16_at(c, QA_WV, l * kvd * h), kvd, h, u->xn, bt, u->v, u->wrow);
    for (size_t b = 0; b < bt; b++) {
        size_t pos = (size_t)((const int32_t *)scene_case_data(c, QA_SEQ_LENS))[b] - 1;
        const float *cs = f32_at(c, QA_COS, pos * dh), *sn = f32_at(c, QA_SIN, pos * dh);
        head_norm_rope(u->q + b * hd, d->heads, dh, f32_at(c, QA_Q_NORM, l * dh), cs, sn, d->eps,
                       u->tmp);
        head_norm_rope(u->k + b * kvd, d->kv_heads, dh, f32_at(c, QA_K_NORM, l * dh), cs, sn,
                       d->eps, u->tmp);
        memcpy(rows->k + (l * bt + b) * kvd, u->k + b * kvd, kvd * sizeof(double));
        memcpy(rows->v + (l * bt + b) * kvd, u->v + b * kvd, kvd * sizeof(double));
    }
}

/* Layer l from the output projection on: u->x becomes the layer's output. */
static void layer_mlp(const qwen3_dims *d, const scene_case *c, size_t l, layer_bufs *u)
{
    size_t bt = d->batch, h = d->hidden, hd = d->heads * d->head_dim, in = d->inter;
    linear(bf16_at(c, QA_WO, l * h * hd), h, hd, u->attn, bt, u->o, u->wrow);
    for (size_t i = 0; i < bt * h; i++)
        u->h1[i] = u->x[i] + u->o[i];
    for (size_t b = 0; b < bt; b++)
        rmsnorm(u->h1 + b * h, f32_at(c, QA_W_POST, l * h), h, d->eps, true, u->xn + b * h);
    linear(bf16_at(c, QA_W_GATE, l * in * h), in, h, u->xn, bt, u->g, u->wrow);
    linear(bf16_at(c, QA_W_UP, l * in * h), in, h, u->xn, bt, u->u, u->wrow);
    for (size_t i = 0; i < bt * in; i++)
        u->g[i] = round_bf16(u->g[i] / (1.0 + exp(-u->g[i])) * u->u[i]);
    linear(bf16_at(c, QA_W_DOWN, l * h * in), h, in, u->g, bt, u->dn, u->wrow);
    for (size_t i = 0; i < bt * h; i++)
        u->x[i] = round_bf16(u->h1[i] + u->dn[i]);
}

static void bufs_free(layer_bufs *u)
{
    double **all[] = {&u->x,  &u->xn, &u->q, &u->k,  &u->v,    &u->attn, &u->o,
                      &u->h1, &u->g,  &u->u, &u->dn, &u->wrow, &u->tmp,  &u->scores};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

static bool bufs_get(const qwen3_dims *d, layer_bufs *u)
{
    size_t bt = d->batch, h = d->hidden, hd = d->heads * d->head_dim;
    size_t kvd = d->kv_heads * d->head_dim, wide = h > hd ? h : hd;
    wide = wide > d->inter ? wide : d->inter;
    struct {
        double **p;
        size_t n;
    } all[] = {{&u->x, bt * h},        {&u->xn, bt * h},
               {&u->q, bt * hd},       {&u->k, bt * kvd},
               {&u->v, bt * kvd},      {&u->attn, bt * hd},
               {&u->o, bt * h},        {&u->h1, bt * h},
               {&u->g, bt * d->inter}, {&u->u, bt * d->inter},
               {&u->dn, bt * h},       {&u->wrow, wide},
               {&u->tmp, d->head_dim}, {&u->scores, d->heads / d->kv_heads * (d->context + 1)}};
    bool ok = true;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        *all[i].p = malloc(all[i].n * sizeof(double) + sizeof(double));
        ok = ok && *all[i].p != NULL;
    }
    return ok;
}

int qwen3_golden(const qwen3_dims *d, const scene_case *c, double *out_golden,
                 qwen3_golden_rows *rows)
{
    layer_bufs u = {0};
    size_t n = d->batch * d->hidden, kv = d->layers * d->batch * d->kv_heads * d->head_dim;
    rows->k = malloc(kv * sizeof(double) + 1);
    rows->v = malloc(kv * sizeof(double) + 1);
    if (!bufs_get(d, &u) || rows->k == NULL || rows->v == NULL) {
        bufs_free(&u);
        return HG_ENOMEM; /* rows are freed with the case's state */
    }
    const uint16_t *hidden = scene_case_data(c, QA_HIDDEN);
    for (size_t i = 0; i < n; i++)
        u.x[i] = widen(hidden[i]);
    for (size_t l = 0; l < d->layers; l++) {
        layer_qkv(d, c, l, &u, rows);
        for (size_t b = 0; b < d->batch; b++)
            attention(d, c, l, b, &u);
        layer_mlp(d, c, l, &u);
    }
    memcpy(out_golden, u.x, n * sizeof(double));
    bufs_free(&u);
    return 0;
}
